"""The small error hierarchy. Expected outcomes (a refusal, a failed document) are
values, not exceptions; these are for things that stop an operation outright, and
the CLI and the bot translate them into a message for a person."""

from __future__ import annotations


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
