"""The question journal: every question from Slack, durable until its answer is posted.

A question is written down (SQLite in the data dir) before it is queued, with the
channel, thread and placeholder the answer belongs in, and marked done once its final
message is posted. A process that is killed or restarted finds what it still owes in
:meth:`Journal.owed` and answers it into the same placeholder.

Replicas may share one journal (one data volume, as ``compose.yaml`` mounts it). Each row
belongs to the replica that took the question (its ``owner``, the host name: a container's
stays the same across its restarts), and each replica beats in the ``owners`` table while it
runs. A replica owes its own unfinished rows, rows from before owners were kept, and those of
a replica whose heartbeat stopped more than ``DEAD_AFTER_S`` ago, which it adopts in one
transaction, so no two replicas answer one question; it never touches a live replica's rows.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import threading
import time
from pathlib import Path

from bot.question import Job, Question

FILE = "slack_journal.sqlite3"
KEEP_DONE_S = 7 * 86_400.0  # finished questions are kept a week, for looking back
HEARTBEAT_S = 10.0  # how often a running replica says it is alive
DEAD_AFTER_S = 60.0  # a replica silent this long is gone: its questions are adopted

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
CREATE INDEX IF NOT EXISTS questions_message ON questions (channel, ts);
CREATE TABLE IF NOT EXISTS owners (owner TEXT PRIMARY KEY, alive_at REAL NOT NULL);
"""
_COLUMNS = "id, channel, thread_ts, ts, text, user, is_dm, folders, placeholder_ts, created_at"


class Journal:
    def __init__(self, data_dir: Path, owner: str | None = None) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.path = data_dir / FILE
        self.owner = owner or socket.gethostname()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL survives a killed process
            self._db.executescript(_SCHEMA)
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(questions)")}
            if "owner" not in columns:  # a journal from before owners were kept
                self._db.execute("ALTER TABLE questions ADD COLUMN owner TEXT")
            self._db.execute("DELETE FROM questions WHERE done_at < ?", (time.time() - KEEP_DONE_S,))

    def record(self, q: Question, now: float | None = None) -> Job | None:
        """The question's job; None when its message is journaled already (kept a week): Slack
        retried its delivery, perhaps to a process that started since, or to another replica."""
        folders = json.dumps(list(q.folders)) if q.folders is not None else None
        at = time.time() if now is None else now
        with self._lock:  # one statement: replicas sharing the file cannot both insert it
            cur = self._db.execute(
                "INSERT INTO questions (channel, thread_ts, ts, text, user, is_dm, folders, created_at, owner)"
                " SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?"
                " WHERE NOT EXISTS (SELECT 1 FROM questions WHERE channel = ? AND ts = ?)",
                (q.channel, q.thread_ts, q.ts, q.text, q.user, int(q.is_dm), folders, at, self.owner, q.channel, q.ts),
            )
        if cur.rowcount == 0:
            return None
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
        """Every unfinished question, whoever owns it."""
        with self._lock:
            rows = self._db.execute(f"SELECT {_COLUMNS} FROM questions WHERE done_at IS NULL ORDER BY id").fetchall()
        return [_job(row) for row in rows]

    def beat(self, now: float | None = None) -> None:
        """This replica is alive."""
        at = time.time() if now is None else now
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO owners (owner, alive_at) VALUES (?, ?)", (self.owner, at))

    def owed(self, now: float | None = None, others_only: bool = False) -> list[tuple[Job, bool]]:
        """The unfinished questions this replica must answer, each with whether it was just
        adopted from a replica that is gone (or from a journal that kept no owner); with
        ``others_only``, only those adopted."""
        at = time.time() if now is None else now
        dead = "SELECT owner FROM owners WHERE alive_at >= ?"
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")  # adopting is one write: two replicas never both adopt a row
            try:
                rows = self._db.execute(
                    f"SELECT {_COLUMNS}, owner FROM questions WHERE done_at IS NULL"
                    f" AND (owner IS NULL OR owner = ? OR owner NOT IN ({dead})) ORDER BY id",
                    (self.owner, at - DEAD_AFTER_S),
                ).fetchall()
                adopted = [row[0] for row in rows if row[-1] != self.owner]
                self._db.executemany("UPDATE questions SET owner = ? WHERE id = ?", [(self.owner, i) for i in adopted])
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        out = [(_job(row[:-1]), row[-1] != self.owner) for row in rows]
        return [x for x in out if x[1]] if others_only else out

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _job(row: tuple[object, ...]) -> Job:
    id_, channel, thread, ts, text, user, is_dm, folders, placeholder, created = row
    scope = tuple(json.loads(str(folders))) if folders is not None else None
    q = Question(str(channel), str(thread), str(ts), str(text), str(user), bool(is_dm), scope)
    return Job(int(str(id_)), q, str(placeholder) if placeholder is not None else None, float(str(created)))
