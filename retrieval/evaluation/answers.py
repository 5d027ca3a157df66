"""Answer-level evaluation (``footnote eval --answers``): what a reader gets, not only
what the retriever found.

Per question, its outcome: answered, pointed at the closest passages, or refused; for an
answerable question, whether the needle was *cited* (in an answer's cited span) or
*quoted* (in a pointer), or neither; a refused answerable question is a dead end. With
``replay`` (``--replay FIRST.jsonl``), FIRST's questions are asked and confirmed wherever
their needle was shown (the click a satisfied teammate makes) before the questions are
scored: what a team gets once it has taught Footnote its words. Also: whether the answer cites; whether a cited
evidence span contains the needle (the verbatim sentence that answers it: it cannot
exceed retrieval's R@4, so both are reported); the share of the needle's content
words in the answer text; what the support check removed or re-attributed; and the
time. Out-of-domain questions that get an answer are bluffs. Shares carry 95 %
Wilson intervals, and two runs on the same questions are compared with the paired
exact sign test, like retrieval strategies.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from retrieval.answer import Answer, AnswerService, Citation, Outcome, content_words
from retrieval.errors import FootnoteError
from retrieval.evaluation.metrics import normalise, sign_test, styles_of, wilson

Progress = Callable[[str], None]


@dataclass(frozen=True)
class AnswerRow:
    id: str
    style: str
    question: str
    ood: bool
    refused: bool
    reason: str
    cited: bool  # at least one citation in the answer text
    evidence_hit: bool  # a cited evidence span contains the whole needle
    needle_share: float  # share of the needle's content words found in the answer text
    removed: int
    reattributed: int
    shown_as_evidence: bool
    seconds: float
    text: str
    outcome: str = ""  # answered, pointed or refused ("" in an older run's rows: refused or answered)
    quoted: bool = False  # pointed, and a pointer's quote contains the whole needle
    learned: bool = False  # answered from a confirmed pair
    asked_in: str = ""  # the question's language, as the service told it
    answered_in: str = ""  # an answer's language, by the detector ("" when not answered or too short)
    sentence_hit: bool = False  # a cited sentence alone (without the excerpt around it) contains the needle
    failed: bool = False  # no answer at all: the model or the service failed (counted as refused)

    @property
    def kind(self) -> str:
        return self.outcome or ("refused" if self.refused else "answered")

    @property
    def answered(self) -> bool:
        return self.kind == "answered"

    @property
    def pointed(self) -> bool:
        return self.kind == "pointed"

    @property
    def shown(self) -> bool:
        """The needle was put in front of the reader: cited in an answer, or quoted by a pointer."""
        return self.evidence_hit or self.quoted

    @property
    def dead_end(self) -> bool:
        """Answerable, yet refused."""
        return not self.ood and self.kind == "refused"

    @property
    def reached(self) -> bool:
        """Not a dead end: answered or pointed at passages (for paired tests, where more is better)."""
        return self.kind != "refused"


def needle_share(needle: str, text: str) -> float:
    want = content_words(needle)
    return len(want & content_words(text)) / len(want) if want else 0.0


_CITE = re.compile(r"\[\d+\]")


def holds(needle: str, quotes: Sequence[Citation]) -> Citation | None:
    """The first of ``quotes`` whose words contain the whole needle (whitespace folded)."""
    want = normalise(needle)
    return next((c for c in quotes if want and want in normalise(c.quote)), None)


def in_sentence(needle: str, quotes: Sequence[Citation]) -> bool:
    """A citation's own sentence (its ``best``, inside the excerpt quoted) contains the needle."""
    want = normalise(needle)
    for c in quotes:
        a, b = c.best if c.best else (c.start, c.end)
        if want and want in normalise(c.quote[a - c.start : b - c.start]):
            return True
    return False


def score(
    qid: str, style: str, question: str, needle: str, a: Answer, seconds: float, ood: bool, answered_in: str = ""
) -> AnswerRow:
    hit = bool(needle) and holds(needle, a.citations) is not None
    return AnswerRow(
        qid,
        style,
        question,
        ood,
        a.refused,
        a.reason,
        bool(a.citations) and not a.refused,
        hit and not a.refused,
        needle_share(needle, a.text) if needle and not a.refused else 0.0,
        a.check.removed,
        a.check.reattributed,
        a.check.shown_as_evidence,
        seconds,
        a.text,
        a.kind,
        a.kind == "pointed" and bool(needle) and holds(needle, a.pointers) is not None,
        a.learned is not None and a.answered,
        a.language or "",
        answered_in,
        bool(needle) and not a.refused and in_sentence(needle, a.citations),
        a.outcome is Outcome.ERROR,
    )


def _ask(service: AnswerService, question: str) -> Answer:
    """The service's answer, or an error answer: a model that timed out on one question is a
    result (counted, and said), not a crash."""
    try:
        a = service.answer(question)
    except FootnoteError as exc:
        return Answer(question, True, f"error: {exc}", "", [], outcome=Outcome.ERROR)
    if a.outcome is Outcome.MODEL_FAILED:  # the passages a person would see instead are no score of the model's
        return Answer(question, True, f"error: {a.reason}", "", [], outcome=Outcome.ERROR)
    return a


def run_answers(
    service: AnswerService,
    questions: Sequence[Any],
    ood: Sequence[Any],
    progress: Progress = lambda _m: None,
    language_of: Callable[[str], str | None] = lambda _t: None,
) -> list[AnswerRow]:
    """Ask every question through the real answer service (the model is called); ``language_of``
    tells each answer's language (its words, not the quotes)."""
    rows = []
    every = [(q, False) for q in questions] + [(q, True) for q in ood]
    for i, (q, is_ood) in enumerate(every, start=1):
        t = time.perf_counter()
        a = _ask(service, q.question)
        said = language_of(_CITE.sub("", a.text)) if a.answered and not a.check.shown_as_evidence else None
        rows.append(score(q.id, q.style, q.question, q.needle, a, time.perf_counter() - t, is_ood, said or ""))
        if i % 10 == 0 or i == len(every):
            progress(f"answers {i}/{len(every)}")
    return rows


@dataclass(frozen=True)
class Replayed:
    """What a replay did: passages confirmed, and questions that got no answer at all (a
    model that timed out on a busy CPU, or crashed): their passages could not be confirmed,
    so every figure after the replay is lower than the drive can do."""

    confirmed: int
    failed: int


def replay(service: AnswerService, first: Sequence[Any], progress: Progress = lambda _m: None) -> Replayed:
    """Ask each of ``first`` and confirm the passage that showed its needle (a cited span, or a
    pointer's quote), as a satisfied teammate would click."""
    confirmed = failed = 0
    for i, q in enumerate(first, start=1):
        a = _ask(service, q.question)
        if a.outcome is Outcome.ERROR:
            failed += 1
        else:
            shown = holds(q.needle, a.citations if a.answered else a.pointers) if q.needle else None
            if shown is not None and service.confirm(q.question, shown, None, "replay", "replay") is not None:
                confirmed += 1
        if i % 10 == 0 or i == len(first):
            progress(f"replay {i}/{len(first)}, {confirmed} confirmed" + (f", {failed} failed" if failed else ""))
    return Replayed(confirmed, failed)


def _share(k: int, n: int) -> dict[str, Any]:
    lo, hi = wilson(k, n)
    return {"k": k, "n": n, "share": k / n if n else 0.0, "wilson": [round(lo, 4), round(hi, 4)]}


def _pct(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))] if s else 0.0


def summarise(rows: Sequence[AnswerRow]) -> dict[str, Any]:
    inside = [r for r in rows if not r.ood]
    outside = [r for r in rows if r.ood]
    answered = [r for r in inside if r.answered]
    model_times = [r.seconds for r in rows if r.answered or r.reason.startswith("the model found no answer")]
    pointed = [r for r in rows if r.pointed]
    told = [r for r in rows if r.answered_in]  # answers whose language the detector could tell
    return {
        "outcomes": {
            "cited": _share(sum(r.evidence_hit for r in inside), len(inside)),
            "cited_sentence": _share(sum(r.sentence_hit for r in inside), len(inside)),
            "answered_not_cited": _share(sum(r.answered and not r.evidence_hit for r in inside), len(inside)),
            "quoted": _share(sum(r.quoted for r in inside), len(inside)),
            "pointed_not_quoted": _share(sum(r.pointed and not r.quoted for r in inside), len(inside)),
            "dead_ends": _share(sum(r.dead_end for r in inside), len(inside)),
            "shown": _share(sum(r.shown for r in inside), len(inside)),
            "learned": sum(r.learned for r in rows),
            "ood_answered": _share(sum(r.answered for r in outside), len(outside)),
            "ood_pointed": _share(sum(r.pointed for r in outside), len(outside)),
            "ood_refused": _share(sum(r.kind == "refused" for r in outside), len(outside)),
            "pointer_seconds_p50": _pct([r.seconds for r in pointed], 0.5),
            "in_the_askers_language": _share(sum(r.answered_in == r.asked_in for r in told), len(told)),
        },
        "questions": len(inside),
        "answered": _share(len(answered), len(inside)),
        "refused": _share(len(inside) - len(answered), len(inside)),
        "cited_of_answered": _share(sum(r.cited for r in answered), len(answered)),
        "evidence_hit": _share(sum(r.evidence_hit for r in inside), len(inside)),
        "needle_share_mean": sum(r.needle_share for r in inside) / len(inside) if inside else 0.0,
        "removed": sum(r.removed for r in rows),
        "reattributed": sum(r.reattributed for r in rows),
        "shown_as_evidence": sum(r.shown_as_evidence for r in rows if r.answered),
        "ood": len(outside),
        "ood_answered": _share(sum(r.answered for r in outside), len(outside)),
        "failed": sum(r.failed for r in rows),
        "seconds_p50": _pct(model_times, 0.5),
        "seconds_p95": _pct(model_times, 0.95),
    }


def by_style(rows: Sequence[AnswerRow]) -> dict[str, list[AnswerRow]]:
    """Rows per question style (:func:`styles_of`); {} when no row has one."""
    styles = styles_of([r.style for r in rows])
    out: dict[str, list[AnswerRow]] = {}
    for style, r in zip(styles, rows, strict=True) if styles else ():
        out.setdefault(style, []).append(r)
    return dict(sorted(out.items()))


# The paired metrics: on answerable questions more is better; on unanswerable ones, fewer answered.
PAIRED = ("shown", "evidence_hit", "answered", "reached")


def compare(a: Sequence[AnswerRow], b: Sequence[AnswerRow], metric: str, ood: bool = False) -> dict[str, Any]:
    """Paired sign test of two runs on the same questions for a yes/no metric (e.g. evidence_hit,
    shown), over the answerable questions, or with ``ood`` the unanswerable ones ("+" = more of it)."""
    by_id = {(r.id, r.question): r for r in b}
    pairs = [
        (getattr(r, metric), getattr(by_id[(r.id, r.question)], metric))
        for r in a
        if r.ood == ood and (r.id, r.question) in by_id
    ]
    wins = sum(x and not y for x, y in pairs)
    losses = sum(y and not x for x, y in pairs)
    name = f"unanswerable {metric}" if ood else metric
    return {"metric": name, "pairs": len(pairs), "wins": wins, "losses": losses, "p": sign_test(wins, losses)}


def compare_all(a: Sequence[AnswerRow], b: Sequence[AnswerRow]) -> list[dict[str, Any]]:
    """Every paired metric on the answerable questions, and answered on the unanswerable ones."""
    return [*(compare(a, b, m) for m in PAIRED), compare(a, b, "answered", ood=True)]


def rows_json(rows: Sequence[AnswerRow]) -> list[dict[str, Any]]:
    return [asdict(r) for r in rows]


def rows_from_json(data: Sequence[dict[str, Any]]) -> list[AnswerRow]:
    fields = set(AnswerRow.__dataclass_fields__)
    return [AnswerRow(**{k: v for k, v in d.items() if k in fields}) for d in data]
