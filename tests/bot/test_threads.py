"""The retrieval context a follow-up gets: bounded, the new question never cut."""

from __future__ import annotations

from bot.threads import fit


def test_the_question_is_kept_whole_and_the_most_recent_earlier_questions_fill_the_budget() -> None:
    question = "and what if it is not resolved within 30 minutes?"
    earlier = ["a" * 40, "b" * 40, "c" * 40]
    assert fit(question, earlier, budget=len(question) + 1 + 82) == ("b" * 40, "c" * 40)
    assert fit(question, earlier, budget=len(question) + 1 + 81) == ("c" * 40,)
    assert fit(question, earlier, budget=1000) == tuple(earlier)


def test_a_question_longer_than_the_budget_gets_no_context_and_is_not_cut() -> None:
    question = "x" * 900
    assert fit(question, ["earlier"], budget=800) == ()


def test_an_older_question_does_not_jump_over_a_newer_one_that_does_not_fit() -> None:
    # Context is the recent conversation: a short old question alone would mislead.
    assert fit("q?", ["old short", "n" * 500], budget=100) == ()


def test_the_question_itself_is_not_repeated_as_context() -> None:
    assert fit("How fast?", ["How fast?", "Who is paged?"], budget=800) == ("Who is paged?",)
