"""Which documents a Slack channel may search: channel -> folders of the drive.

Set ``FOOTNOTE_CHANNEL_FOLDERS`` to comma-separated ``CHANNEL=folder|folder`` entries;
``*`` is the default for channels not listed and ``dm`` is for direct messages, e.g.

    C0ENG123=engineering,C0HR456=hr|policies,*=public,dm=public|engineering

With no entry for a channel and no ``*``, a channel searches everything.
``FOOTNOTE_EXCLUDED_CHANNELS`` lists channels where Footnote does not answer at all.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scope:
    folders: tuple[str, ...] | None  # None: the whole index
    excluded: bool = False


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
