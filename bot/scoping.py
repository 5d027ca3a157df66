"""Which documents a Slack channel may search: channel -> folders of the drive.

Set ``FOOTNOTE_CHANNEL_FOLDERS`` to comma-separated ``CHANNEL=folder|folder`` entries;
``*`` is the default for channels not listed and ``dm`` is for direct messages, e.g.

    C0ENG123=engineering,C0HR456=hr|policies,*=public,dm=public|engineering

With no entry for a channel and no ``*``, a channel searches everything.
``FOOTNOTE_EXCLUDED_CHANNELS`` lists channels where Footnote does not answer at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Folders = tuple[str, ...] | None  # the folders a channel may search; None = every document


def in_folders(path: str, folders: Sequence[str] | None) -> bool:
    """Whether ``path`` lies under one of ``folders`` (None, or an empty folder: anywhere),
    the rule by which a scoped channel's search is restricted."""
    if folders is None:
        return True
    return any(not f.strip("/") or path.startswith(f.strip("/") + "/") for f in folders)


@dataclass(frozen=True)
class Scope:
    folders: tuple[str, ...] | None  # None: the whole index
    excluded: bool = False

    def covers(self, path: str) -> bool:
        return not self.excluded and in_folders(path, self.folders)


@dataclass(frozen=True)
class ChannelScopes:
    mapping: dict[str, tuple[str, ...]]
    excluded: frozenset[str] = frozenset()

    def for_channel(self, channel: str, is_dm: bool = False) -> Scope:
        if channel in self.excluded:
            return Scope(None, excluded=True)
        key = "dm" if is_dm and "dm" in self.mapping else channel
        folders = self.mapping.get(key, self.mapping.get("*"))
        return Scope(folders)

    def reader(self, channels: Iterable[str]) -> list[Folders]:
        """What a person in ``channels`` may search: each channel's folders, and a direct
        message's (anyone can write to Footnote directly). Excluded channels give nothing."""
        scopes = [self.for_channel(c) for c in channels]
        return [s.folders for s in scopes if not s.excluded] + [self.for_channel("", is_dm=True).folders]


def may_see(allowed: Sequence[Folders], asked_in: Folders) -> bool:
    """Whether a reader who may search ``allowed`` may see a question asked about ``asked_in``:
    every folder it was asked about lies within one the reader may search."""
    if any(a is None for a in allowed):
        return True
    if asked_in is None:
        return False
    granted = {g.strip("/") for a in allowed if a is not None for g in a}
    if "" in granted:
        return True
    return all(any(f.strip("/") == g or f.strip("/").startswith(g + "/") for g in granted) for f in asked_in)
