"""What the docs don't answer: every question's outcome, kept a while, and the refused and
👎 ones grouped by meaning, so a team knows what to write next.

The record is SQLite in the data dir (``gaps.sqlite3``, beside the Slack journal). Each
row is one question: its text, the scope it was asked in (the channel's folders; none =
every document), where it came from (``slack`` or ``cli``), its :class:`Outcome`, the
nearest documents and the gate value, the question's vector as the search made it (so
grouping never embeds again), and the 👍/👎 clicks on its answer. Rows older than
``FOOTNOTE_GAPS_DAYS`` are deleted; ``purge`` deletes them all. Deleted text is
overwritten in the file (``secure_delete``), and a purge rewrites the file, so nothing of
a deleted question stays on disk.

A *gap* is a group of questions that were pointed at passages (not sure) or refused, had
every claim removed by the support check, or got a 👎 ("None of these" under a pointer is one). Question texts never leave their scope:
a reader sees a row only when the folders it was asked about are within what the
reader's channels may search (:func:`bot.scoping.may_see`), and groups are made from the
rows that reader may see, so a group's label, count and documents come from those alone.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bot.grouping import THRESHOLD, group_by_meaning
from bot.i18n import N_, say, say_n
from bot.render import escape, shorten
from bot.scoping import Folders, may_see
from retrieval.answer import Answer, Outcome

log = logging.getLogger("footnote.gaps")

FILE = "gaps.sqlite3"
DAY_S = 86_400.0
GAP_OUTCOMES = (Outcome.POINTED, Outcome.REFUSED_GATE, Outcome.REFUSED_MODEL, Outcome.CLAIMS_REMOVED)
EXPIRE_EVERY_S = 3600.0  # while recording, old rows are deleted at most once an hour

_SCHEMA = """
CREATE TABLE IF NOT EXISTS asked (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    surface TEXT NOT NULL,
    scope TEXT,
    question TEXT NOT NULL,
    outcome TEXT NOT NULL,
    nearest TEXT NOT NULL,
    gate REAL,
    vector BLOB,
    feedback_id TEXT,
    up INTEGER NOT NULL DEFAULT 0,
    down INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS asked_at ON asked (at);
CREATE INDEX IF NOT EXISTS asked_feedback ON asked (feedback_id) WHERE feedback_id IS NOT NULL;
"""


def scope_key(folders: Sequence[str] | None) -> Folders:
    """A channel's folders as recorded: sorted, without slashes; None when they are every document."""
    if folders is None:
        return None
    names = sorted({f.strip("/") for f in folders})
    return None if "" in names else tuple(names)


def collection(scope: Folders) -> str:
    return ", ".join(f"{f}/" for f in scope) if scope is not None else "all documents"


@dataclass(frozen=True)
class Asked:
    """One recorded question."""

    id: int
    at: float
    surface: str
    scope: Folders
    question: str
    outcome: Outcome
    nearest: tuple[str, ...]
    gate: float | None
    vector: np.ndarray | None
    up: int = 0
    down: int = 0


class GapRecord:
    """The record of questions and their outcomes (one per data dir; thread-safe)."""

    def __init__(self, data_dir: Path, keep_days: float = 90.0, clock: Callable[[], float] = time.time) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.path = data_dir / FILE
        self.keep_s = keep_days * DAY_S
        self.clock = clock
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            # A deleted question's text is overwritten, not left behind in free pages.
            self._db.execute("PRAGMA secure_delete=ON")
            self._db.executescript(_SCHEMA)
        self._expired_at = 0.0
        self.expire()

    # -- writing ---------------------------------------------------------------------------

    def record(
        self,
        question: str,
        outcome: Outcome,
        folders: Sequence[str] | None,
        *,
        surface: str,
        answer: Answer | None = None,
        feedback_id: str | None = None,
    ) -> None:
        """Keep one question's outcome (an error has no ``answer``)."""
        now = self.clock()
        vector = None
        if answer is not None and answer.vector is not None:
            vector = np.asarray(answer.vector, dtype=np.float32).tobytes()
        scope = scope_key(folders)
        row = (
            now,
            surface,
            json.dumps(scope) if scope is not None else None,
            question,
            outcome.value,
            json.dumps(answer.nearest if answer is not None else []),
            answer.gate if answer is not None else None,
            vector,
            feedback_id,
        )
        with self._lock:
            self._db.execute(
                "INSERT INTO asked (at, surface, scope, question, outcome, nearest, gate, vector, feedback_id)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
        self._expire_if_due()

    def vote(self, feedback_id: str, vote: str) -> bool:
        """A 👍 (``up``) or 👎 (``down``) on the answer with this feedback id; False if unknown."""
        column = {"up": "up", "down": "down"}[vote]
        with self._lock:
            cur = self._db.execute(f"UPDATE asked SET {column} = {column} + 1 WHERE feedback_id = ?", (feedback_id,))
        return cur.rowcount > 0

    def _expire_if_due(self) -> None:
        if self.clock() - self._expired_at > EXPIRE_EVERY_S:
            self.expire()

    def expire(self) -> int:
        """Delete what is older than the retention; how many rows went."""
        now = self.clock()
        with self._lock:
            cur = self._db.execute("DELETE FROM asked WHERE at < ?", (now - self.keep_s,))
        self._expired_at = now
        return cur.rowcount

    def purge(self) -> int:
        """Delete every row and rewrite the file, so no question text is left on disk."""
        with self._lock:
            cur = self._db.execute("DELETE FROM asked")
            self._db.execute("VACUUM")
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return cur.rowcount

    # -- reading ---------------------------------------------------------------------------

    def count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM asked").fetchone()[0])

    def outcomes(self, since_s: float | None = None) -> dict[str, int]:
        """Questions by outcome in the window (every kind, 0 included)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT outcome, COUNT(*) FROM asked WHERE at >= ? GROUP BY outcome", (self._start(since_s),)
            ).fetchall()
        found = {str(o): int(n) for o, n in rows}
        return {k.value: found.get(k.value, 0) for k in Outcome}

    def asked(self, since_s: float | None = None, gaps_only: bool = False) -> list[Asked]:
        """Rows of the last ``since_s`` seconds (all that is kept when None), oldest first;
        with ``gaps_only``, only the refused, the emptied by the check and the 👎."""
        self._expire_if_due()
        kinds = ",".join(f"'{o.value}'" for o in GAP_OUTCOMES)
        # A pointed question a teammate confirmed a passage for ("This answers it") was answered after all.
        pointed = Outcome.POINTED.value
        where = (
            f" AND ((outcome IN ({kinds}) AND NOT (outcome = '{pointed}' AND up > 0)) OR down > 0)" if gaps_only else ""
        )
        with self._lock:
            rows = self._db.execute(
                "SELECT id, at, surface, scope, question, outcome, nearest, gate, vector, up, down"
                f" FROM asked WHERE at >= ?{where} ORDER BY id",
                (self._start(since_s),),
            ).fetchall()
        return [
            Asked(
                int(id_),
                float(at),
                str(surface),
                tuple(json.loads(scope)) if scope is not None else None,
                str(question),
                Outcome(outcome),
                tuple(json.loads(nearest)),
                gate,
                np.frombuffer(vector, dtype=np.float32) if vector is not None else None,
                int(up),
                int(down),
            )
            for id_, at, surface, scope, question, outcome, nearest, gate, vector, up, down in rows
        ]

    def _start(self, since_s: float | None) -> float:
        """The oldest moment read: never older than the retention, even before ``expire`` ran."""
        now = self.clock()
        return now - min(self.keep_s, since_s if since_s is not None else self.keep_s)

    def close(self) -> None:
        with self._lock:
            self._db.close()


# -- groups -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gap:
    """Questions asked in other words about one thing the documents do not answer."""

    label: str  # the most central question
    count: int
    questions: tuple[str, ...]  # every distinct text, the most central first
    nearest: tuple[str, ...]  # where the answer would likely belong: the documents nearest its questions
    outcomes: dict[str, int]  # how each ended, and how many got a 👎
    scopes: tuple[str, ...]  # the collections it was asked in
    last_at: float
    surfaces: dict[str, int]  # where it was asked: slack, cli

    def as_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "count": self.count,
            "questions": list(self.questions),
            "nearest": list(self.nearest),
            "outcomes": self.outcomes,
            "scopes": list(self.scopes),
            "surfaces": self.surfaces,
            "last_asked": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.last_at)),
        }


def visible(rows: Iterable[Asked], allowed: Sequence[Folders]) -> list[Asked]:
    """The rows a reader whose channels may search ``allowed`` may see."""
    return [r for r in rows if may_see(allowed, r.scope)]


def find_gaps(rows: Sequence[Asked], threshold: float = THRESHOLD) -> list[Gap]:
    """The refused and 👎 questions of ``rows`` grouped by meaning, the most asked first."""
    rows = [r for r in rows if r.outcome in GAP_OUTCOMES or r.down > 0]
    with_vector = [r for r in rows if r.vector is not None]
    dims = Counter(len(r.vector) for r in with_vector if r.vector is not None)
    dim = dims.most_common(1)[0][0] if dims else 0
    # A row without a comparable vector (another embedding size) stands alone.
    grouped = [r for r in with_vector if r.vector is not None and len(r.vector) == dim]
    alone = [r for r in rows if r.vector is None or len(r.vector) != dim]
    gaps = []
    if grouped:
        x = np.stack([r.vector for r in grouped if r.vector is not None])
        gaps = [_gap([grouped[i] for i in members]) for members in group_by_meaning(x, threshold)]
    gaps += [_gap([r]) for r in alone]
    gaps.sort(key=lambda g: (-g.count, -g.last_at))
    return gaps


def _gap(members: list[Asked]) -> Gap:
    """``members`` most central first."""
    texts = list(dict.fromkeys(" ".join(m.question.split()) for m in members))
    outcomes = Counter(m.outcome.value for m in members if m.outcome in GAP_OUTCOMES)
    outcomes["down"] = sum(1 for m in members if m.down > 0)
    docs: dict[str, float] = {}
    for m in members:
        for rank, doc in enumerate(m.nearest):
            docs[doc] = docs.get(doc, 0.0) + 1.0 / (rank + 1)  # nearer documents of more questions first
    nearest = sorted(docs, key=lambda d: -docs[d])[:3]
    scopes = Counter(collection(m.scope) for m in members)
    return Gap(
        label=texts[0],
        count=len(members),
        questions=tuple(texts),
        nearest=tuple(nearest),
        outcomes={k: v for k, v in outcomes.items() if v},
        scopes=tuple(s for s, _ in scopes.most_common()),
        last_at=max(m.at for m in members),
        surfaces=dict(Counter(m.surface for m in members).most_common()),
    )


# -- showing them ----------------------------------------------------------------------------

OUTCOME_WORDS = {  # every outcome: any of them is a gap once someone gives it 👎
    Outcome.ANSWERED.value: N_("answered"),
    Outcome.POINTED.value: N_("pointed at passages (not sure)"),
    Outcome.REFUSED_GATE.value: N_("refused (nothing relevant)"),
    Outcome.REFUSED_MODEL.value: N_("refused by the model"),
    Outcome.CLAIMS_REMOVED.value: N_("every claim removed"),
    Outcome.MODEL_FAILED.value: N_("the model failed (passages shown)"),
    Outcome.ERROR.value: N_("error"),
    "down": "👎",
}


def _how(gap: Gap, lang: str | None = None) -> str:
    return " · ".join(f"{say(lang, OUTCOME_WORDS.get(k, k))} {v}" for k, v in gap.outcomes.items())


def gaps_text(gaps: Sequence[Gap], since: str, asked: int, shown_questions: int = 3) -> str:
    """``footnote gaps`` for a terminal."""
    total = sum(g.count for g in gaps)
    lines = [f"What the docs don't answer ({since}: {asked} questions, {total} refused or 👎, {len(gaps)} groups)"]
    for g in gaps:
        lines.append("")
        lines.append(f"{g.count:4}×  {g.label}")
        where = ", ".join(f"{k} {v}" for k, v in g.surfaces.items())
        lines.append(f"       {_how(g)} · asked in: {', '.join(g.scopes)} ({where})")
        if g.nearest:
            lines.append(f"       nearest documents: {', '.join(g.nearest)}")
        for other in g.questions[1:shown_questions]:
            lines.append(f"       also: {other}")
        if len(g.questions) > shown_questions:
            lines.append(f"       …and {len(g.questions) - shown_questions} more wordings (--json lists all)")
    return "\n".join(lines)


HOME_TITLE = N_("What the docs don't answer")
HOME_NOTHING = N_("Nothing you can see was refused, pointed at passages or got a 👎 in the last {days} days.")
HOME_NEAREST = N_("Nearest documents: {names}")
HOME_FOOT = N_("Unanswered or 👎 questions of the last {days} days, grouped by meaning.")
HOME_FOOT_MORE = N_(
    "Unanswered or 👎 questions of the last {days} days, grouped by meaning; {n} more group (`footnote gaps`)."
)
HOME_FOOT_MORE_N = N_(
    "Unanswered or 👎 questions of the last {days} days, grouped by meaning; {n} more groups (`footnote gaps`)."
)


def gaps_blocks(gaps: Sequence[Gap], days: int, top: int = 5, lang: str | None = None) -> list[dict[str, Any]]:
    """The App Home section: the ``top`` groups the viewer may see."""
    head = {"type": "header", "text": {"type": "plain_text", "text": say(lang, HOME_TITLE)}}
    if not gaps:
        note = say(lang, HOME_NOTHING, days=days)
        return [head, {"type": "context", "elements": [{"type": "mrkdwn", "text": note}]}]
    blocks: list[dict[str, Any]] = [head]
    for g in gaps[:top]:
        lines = [f"*{g.count}×* {escape(shorten(g.label, 200))}", escape(_how(g, lang))]
        if g.nearest:
            lines.append(say(lang, HOME_NEAREST, names=", ".join(escape(d) for d in g.nearest)))
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)[:3000]}})
    more = len(gaps) - top
    foot = (
        say_n(lang, HOME_FOOT_MORE, HOME_FOOT_MORE_N, more, days=days) if more > 0 else say(lang, HOME_FOOT, days=days)
    )
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": foot}]})
    return blocks
