"""Clicks on what Footnote showed: 👍/👎 on an answer, "This answers it" and "None of these"
under a pointer, and the ``feedback.jsonl`` the votes land in.

A button carries only an id (and a pointer's number); what was shown under that id (the
question, its scope, the cited or pointed passages with their exact ranges, the learned
pair an answer came from) is kept in records that outlive the process and that every
replica reads (:meth:`retrieval.index.Storage.kept_records`), so a click is understood
whichever replica takes it, also after a restart. Shown records older than
``KEEP_DAYS`` are deleted: a click on an older message is stale and changes nothing.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.question import Question
from bot.scoping import Folders
from retrieval.answer import Answer, Citation
from retrieval.index import RECORDS, SharedRecords, SqliteRecords

FILE = "feedback.jsonl"
SHOWN = "shown"  # the records of what each set of buttons refers to
KEEP_DAYS = 30.0


@dataclass(frozen=True)
class Passage:
    """A passage as a click refers to it: its document and exact range, and its words."""

    path: str
    start: int
    end: int
    quote: str

    @classmethod
    def of(cls, c: Citation) -> Passage:
        return cls(c.path, c.start, c.end, c.quote)


@dataclass(frozen=True)
class Shown:
    """What one message showed, as its buttons' id refers to it."""

    id: str
    question: str
    scope: Folders  # the asker's channel's folders (None: every document)
    channel: str
    kind: str  # answered, pointed or refused
    cited: tuple[Passage, ...]
    pointers: tuple[Passage, ...]
    learned: str | None  # the pair the answer came from
    asked_by: str
    at: float

    def fields(self) -> dict[str, str | float]:
        return {
            "question": self.question,
            "scope": json.dumps(self.scope),
            "channel": self.channel,
            "kind": self.kind,
            "cited": json.dumps([p.__dict__ for p in self.cited]),
            "pointers": json.dumps([p.__dict__ for p in self.pointers]),
            "learned": self.learned or "",
            "asked_by": self.asked_by,
            "at": self.at,
        }

    @classmethod
    def from_fields(cls, fid: str, f: dict[str, Any]) -> Shown:
        scope = json.loads(str(f["scope"]))
        return cls(
            fid,
            str(f["question"]),
            tuple(scope) if scope is not None else None,
            str(f["channel"]),
            str(f["kind"]),
            tuple(Passage(**p) for p in json.loads(str(f["cited"]))),
            tuple(Passage(**p) for p in json.loads(str(f["pointers"]))),
            str(f["learned"]) or None,
            str(f.get("asked_by", "")),
            float(f["at"]),
        )


class FeedbackStore:
    def __init__(self, data_dir: Path, records: SharedRecords | None = None, clock: Any = time.time) -> None:
        self.path = data_dir / FILE
        self.records = records if records is not None else SqliteRecords(data_dir / RECORDS, SHOWN)
        self.clock = clock
        self._lock = threading.Lock()
        self._expired_at = 0.0

    def remember(self, q: Question, result: Answer) -> str:
        """Keep what a click on this answer or pointer must know; the id its buttons carry."""
        fid = f"{q.channel}:{q.thread_ts}:{time.time_ns()}"
        shown = Shown(
            fid,
            q.text,
            q.folders,
            q.channel,
            result.kind,
            tuple(Passage.of(c) for c in result.citations),
            tuple(Passage.of(c) for c in result.pointers),
            result.learned if result.answered else None,
            q.user,
            self.clock(),
        )
        self.records.put(fid, shown.fields())
        self._expire()
        return fid

    def shown(self, fid: str) -> Shown | None:
        """What was shown under ``fid``; None when unknown or too old (a stale message)."""
        got = self.records.get(fid)
        if got is None:
            return None
        try:
            s = Shown.from_fields(fid, got)
        except (KeyError, ValueError, TypeError):
            return None
        return s if self.clock() - s.at <= KEEP_DAYS * 86_400 else None

    def _expire(self) -> None:
        now = self.clock()
        if now - self._expired_at > 3600:
            self._expired_at = now
            self.records.delete_older_than("at", now - KEEP_DAYS * 86_400)

    def record(self, fid: str, vote: str, user: str | None) -> dict[str, Any]:
        """Append one vote (with what it is about, when still known)."""
        s = self.shown(fid)
        about: dict[str, Any] = {}
        if s is not None:
            about = {
                "question": s.question,
                "kind": s.kind,
                "sources": [p.__dict__ for p in s.cited or s.pointers],
                "asked_by": s.asked_by,
            }
        rec = {"at": time.time(), "vote": vote, "user": user, "id": fid, **about}
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(rec) + "\n")
        return rec
