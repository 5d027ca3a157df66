"""Answer-level metrics: hand-made answers in, the figures a person would count out."""

from __future__ import annotations

from retrieval.answer.citations import Citation
from retrieval.answer.service import Answer, AnswerCheck, Outcome
from retrieval.evaluation.answers import by_style, compare, needle_share, rows_from_json, rows_json, score, summarise
from retrieval.evaluation.report import format_answers

NEEDLE = "For a SEV1, the on-call engineer must acknowledge the page within 5 minutes."


def _cite(quote: str) -> Citation:
    return Citation(1, "on-call.md", "On-call", "Severity", 0, len(quote), quote, "u", "#char=0,1", "Severity", 0.2)


def _answer(text: str, quotes: list[str], refused: bool = False, **check: object) -> Answer:
    outcome = Outcome.REFUSED_MODEL if refused else Outcome.ANSWERED
    cites = [_cite(q) for q in quotes]
    return Answer("q", refused, "answered", text, cites, check=AnswerCheck(**check), outcome=outcome)  # type: ignore[arg-type]


def test_needle_share_counts_content_words() -> None:
    # needle: sev1 call engineer must acknowledge page within minute(s); the answer has 4 of the 8
    assert needle_share(NEEDLE, "Acknowledge the page within 5 minutes [1].") == 4 / 8
    assert needle_share(NEEDLE, NEEDLE) == 1.0
    assert needle_share(NEEDLE, "") == 0.0


def test_an_evidence_hit_needs_the_whole_needle_in_a_cited_span() -> None:
    whole = score("q1", "course", "q", NEEDLE, _answer("x [1].", [" ".join(NEEDLE.split()) + " And more."]), 1.0, False)
    half = score("q1", "course", "q", NEEDLE, _answer("x [1].", [NEEDLE[:40]]), 1.0, False)
    refused = score("q1", "course", "q", NEEDLE, _answer("", [NEEDLE], refused=True), 1.0, False)
    assert whole.evidence_hit and whole.cited
    assert not half.evidence_hit
    assert not refused.evidence_hit and not refused.cited and refused.needle_share == 0.0


def test_summary_counts_answers_bluffs_and_check_actions() -> None:
    rows = [
        score("a", "", "q", NEEDLE, _answer("It is 5 minutes [1].", [NEEDLE], removed=1), 2.0, False),
        score("b", "", "q", NEEDLE, _answer("", [], refused=True), 0.1, False),
        score("o", "", "q", "", _answer("Bluff [1].", ["x"], reattributed=1), 3.0, True),
    ]
    s = summarise(rows)
    assert s["answered"]["k"] == 1 and s["answered"]["n"] == 2
    assert s["evidence_hit"]["k"] == 1 and s["cited_of_answered"]["share"] == 1.0
    assert s["ood_answered"]["k"] == 1 and s["removed"] == 1 and s["reattributed"] == 1
    lo, hi = s["evidence_hit"]["wilson"]
    assert 0.0 < lo < 0.5 < hi < 1.0


def test_paired_comparison_and_json_round_trip() -> None:
    hit = score("a", "", "q", NEEDLE, _answer("x [1].", [NEEDLE]), 1.0, False)
    miss = score("a", "", "q", NEEDLE, _answer("x [1].", ["other"]), 1.0, False)
    assert compare([hit], [miss], "evidence_hit") == {
        "metric": "evidence_hit",
        "pairs": 1,
        "wins": 1,
        "losses": 0,
        "p": 1.0,
    }
    assert rows_from_json(rows_json([hit, miss])) == [hit, miss]


def test_rows_by_style_put_unstyled_rows_with_the_direct_style() -> None:
    rows = [
        score("a", "course", "q", NEEDLE, _answer("It is 5 minutes [1].", [NEEDLE]), 1.0, False),
        score("a", "ticket", "hey q", NEEDLE, _answer("", [], refused=True), 1.0, False),
        score("o", "", "q", "", _answer("Bluff [1].", ["x"]), 1.0, True),  # ood.jsonl has no style
        score("o", "ticket", "hey q", "", _answer("", [], refused=True), 1.0, True),
    ]
    styles = by_style(rows)
    assert {k: [r.id for r in v] for k, v in styles.items()} == {"course": ["a", "o"], "ticket": ["a", "o"]}
    assert summarise(styles["course"])["ood_answered"]["k"] == 1
    assert summarise(styles["ticket"])["answered"]["k"] == 0
    assert by_style([score("a", "", "q", NEEDLE, _answer("x [1].", [NEEDLE]), 1.0, False)]) == {}


def test_a_question_that_got_an_error_is_counted_refused_and_the_report_warns() -> None:
    failed = Answer("q", True, "error: too slow", "", [], outcome=Outcome.ERROR)
    rows = [
        score("a", "", "q", NEEDLE, _answer("It is 5 minutes [1].", [NEEDLE]), 1.0, False),
        score("b", "", "q", NEEDLE, failed, 30.0, False),
    ]
    assert [r.failed for r in rows] == [False, True] and rows[1].kind == "refused"
    s = summarise(rows)
    assert s["failed"] == 1 and s["answered"]["k"] == 1
    assert rows_from_json(rows_json(rows)) == rows
    answers = {"model": "m", "summary": s, "replayed": 3, "replay_failed": 2, "replay_file": "first.jsonl"}
    text = format_answers(answers)
    assert "3 passages confirmed before scoring (2 questions got no answer, so nothing to confirm)" in text
    assert "warning: 1 scored and 2 replayed questions got an error" in text
    clean = format_answers({"model": "m", "summary": summarise(rows[:1]), "replayed": 3, "replay_file": "f"})
    assert "warning" not in clean and "3 passages confirmed before scoring\n" in clean + "\n"
