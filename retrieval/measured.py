"""Measure once per machine, keep the result as keyed JSON: one helper for every such cache.

Footnote measures what it cannot know in advance: which embedding runtime is fastest
here, which form of the language model's weights, whether drafting pays, the gate's
threshold on this corpus. Each is measured once and kept in a JSON file together with
the key it holds for (the CPU, library versions, settings, the corpus). A result kept
for another key is measured again. A file is replaced whole or not at all: a crash
leaves the previous result, never half a file; a read-only disk only costs measuring
again next time.

Every such result is described in one shape, :class:`Report`, for ``footnote status``
and the benchmarks.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol


class Report(Protocol):
    """How a measure-once choice was made."""

    @property
    def how(self) -> str:
        """ "measured", "cached measurement", "forced by FOOTNOTE_…", …"""
        ...

    def describe(self) -> str:
        """One line for a person: the choice, how it was made, what was timed."""
        ...


class KeyedJson:
    """One cache file: ``{"key": …, **payload}``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> tuple[str, dict[str, Any]] | None:
        """The key and payload kept; None when there is none or it is unreadable."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or not isinstance(data.get("key"), str):
            return None
        return data.pop("key"), data

    def load(self, key: str | None = None) -> dict[str, Any] | None:
        """The payload kept for ``key`` (for any key when None); None when there is none,
        it is unreadable, or it was kept for another key."""
        got = self.read()
        return got[1] if got is not None and (key is None or got[0] == key) else None

    def save(self, key: str, payload: Mapping[str, Any]) -> bool:
        """Keep ``payload`` for ``key``, atomically; False when the disk would not take it."""
        tmp = self.path.with_name(
            f".{self.path.name}.{uuid.uuid4().hex[:12]}.part"
        )  # not the pid: containers share pids
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps({"key": key, **payload}), encoding="utf-8")
            os.replace(tmp, self.path)
            return True
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            return False

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
