"""Feedback on answers: what a 👍/👎 click refers to, and the ``feedback.jsonl`` it lands in.

The button carries only an id; what the answer was (question, answer, sources, asker)
is kept here for the most recent answers, and written beside the vote.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

from bot.question import Question
from retrieval.answer import Answer

FILE = "feedback.jsonl"


class FeedbackStore:
    def __init__(self, data_dir: Path, keep: int = 5000) -> None:
        self.path = data_dir / FILE
        self._keep = keep
        self._lock = threading.Lock()
        self._answered: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def remember(self, q: Question, result: Answer) -> str:
        """Keep what a click on this answer must store; the id the buttons carry."""
        fid = f"{q.channel}:{q.thread_ts}:{time.time_ns()}"
        with self._lock:
            self._answered[fid] = {
                "question": q.text,
                "answer": result.text,
                "sources": [{"n": c.n, "path": c.path, "url": c.url} for c in result.citations or result.consulted],
                "asked_by": q.user,
            }
            while len(self._answered) > self._keep:
                self._answered.popitem(last=False)
        return fid

    def record(self, fid: str, vote: str, user: str | None) -> dict[str, Any]:
        """Append one vote (with the answer it is about, when still known)."""
        with self._lock:
            answered = self._answered.get(fid, {})
            rec = {"at": time.time(), "vote": vote, "user": user, "id": fid, **answered}
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(rec) + "\n")
        return rec
