"""The small error hierarchy. Expected outcomes (a refusal, a failed document) are
values, not exceptions; these are for things that stop an operation outright, and
the CLI and the bot translate them into a message for a person."""

from __future__ import annotations

import errno


class FootnoteError(Exception):
    """Base class: the message is written for the person who will read it."""


class ConfigError(FootnoteError):
    """A setting is missing or points at something unusable."""


class StoreError(FootnoteError):
    """The index cannot be opened, written or trusted (e.g. mixed embedding models)."""


class StoreUnreachable(StoreError):
    """The Chroma server did not answer: a passing state, over when it is back."""


class ModelError(FootnoteError):
    """The language model cannot be loaded or did not answer."""


class ExtractionError(FootnoteError):
    """A document cannot be read; the indexer turns this into a ``failed`` state."""


class SyncBusy(StoreError):
    """Another process or replica holds the sync lease; the caller may try later."""


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc``, or an error it came from, says the disk (or quota) is full: an
    ``OSError`` with ENOSPC or EDQUOT, or SQLite's (and Chroma's) "database or disk is full"."""
    seen: BaseException | None = exc
    for _ in range(8):  # a chain of causes, not a cycle
        if seen is None:
            return False
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if "disk is full" in str(seen) or "No space left on device" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def no_space(exc: BaseException) -> StoreError:
    """The one-line error for a write that found the disk full."""
    return StoreError(
        f"no space left on the disk that holds Footnote's data ({exc}): nothing more was written; "
        "free some space and run it again (a document left half-written is rebuilt by the next sync)"
    )
