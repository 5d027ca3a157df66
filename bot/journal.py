"""The question journal: every question from Slack, durable until its answer is posted.

A question is written down (SQLite in the data dir) before it is queued, with the
channel, thread and placeholder the answer belongs in, and marked done once its final
message is posted. A process that is killed or restarted finds what it still owes in
:meth:`Journal.unfinished` and answers it into the same placeholder.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

from bot.question import Job, Question

FILE = "slack_journal.sqlite3"
KEEP_DONE_S = 7 * 86_400.0  # finished questions are kept a week, for looking back

_SCHEMA = """
CREATE TABLE IF NOT EXISTS questions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL,
    thread_ts TEXT NOT NULL,
    ts TEXT NOT NULL,
    text TEXT NOT NULL,
    user TEXT NOT NULL,
    is_dm INTEGER NOT NULL,
    folders TEXT,
    placeholder_ts TEXT,
    created_at REAL NOT NULL,
    done_at REAL
);
CREATE INDEX IF NOT EXISTS questions_open ON questions (done_at);
"""


class Journal:
    def __init__(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.path = data_dir / FILE
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL survives a killed process
            self._db.executescript(_SCHEMA)
            self._db.execute("DELETE FROM questions WHERE done_at < ?", (time.time() - KEEP_DONE_S,))

    def record(self, q: Question, now: float | None = None) -> Job:
        folders = json.dumps(list(q.folders)) if q.folders is not None else None
        at = time.time() if now is None else now
        with self._lock:
            cur = self._db.execute(
                "INSERT INTO questions (channel, thread_ts, ts, text, user, is_dm, folders, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (q.channel, q.thread_ts, q.ts, q.text, q.user, int(q.is_dm), folders, at),
            )
        return Job(int(cur.lastrowid or 0), q, None, at)

    def placed(self, job: Job, ts: str) -> None:
        """The answer now belongs in message ``ts`` (the placeholder, or a stream that replaced it)."""
        job.placeholder_ts = ts
        with self._lock:
            self._db.execute("UPDATE questions SET placeholder_ts = ? WHERE id = ?", (ts, job.id))

    def done(self, job: Job) -> None:
        with self._lock:
            self._db.execute("UPDATE questions SET done_at = ? WHERE id = ?", (time.time(), job.id))

    def unfinished(self) -> list[Job]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id, channel, thread_ts, ts, text, user, is_dm, folders, placeholder_ts, created_at"
                " FROM questions WHERE done_at IS NULL ORDER BY id"
            ).fetchall()
        jobs = []
        for id_, channel, thread, ts, text, user, is_dm, folders, placeholder, created in rows:
            scope = tuple(json.loads(folders)) if folders is not None else None
            q = Question(channel, thread, ts, text, user, bool(is_dm), scope)
            jobs.append(Job(int(id_), q, placeholder, float(created)))
        return jobs

    def close(self) -> None:
        with self._lock:
            self._db.close()
