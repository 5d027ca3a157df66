"""The packaged model keeps each kind of prompt's start: a translation after an answer starts
from its saved instructions and examples, evaluates only its own words, and writes exactly
what a fresh context writes; and a reply that falls into a loop is cut short."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from retrieval.answer.prompt import INSTRUCTIONS, AnswerFormat
from retrieval.answer.translate import translation_messages
from retrieval.models.llm import LanguageModel, looping

ANSWER = [
    {"role": "system", "content": INSTRUCTIONS},
    {"role": "user", "content": "SOURCES\n[1] The office closes at 17:00 on Fridays.\n\nQUESTION\nWhen does it close?"},
]
TRANSLATE = translation_messages("Hvornår lukker kontoret om fredagen?", "en")


@pytest.fixture
def evaluated(real_model: LanguageModel) -> Iterator[list[int]]:
    """How many tokens each of llama.cpp's evaluations took, while the test runs."""
    llm: Any = real_model._llm  # type: ignore[attr-defined]
    counts: list[int] = []
    plain = llm.eval

    def counting(tokens: Any) -> None:
        counts.append(len(tokens))
        plain(tokens)

    llm.eval = counting
    try:
        yield counts
    finally:
        del llm.eval  # the class's own method again


@pytest.mark.slow
def test_a_translation_after_an_answer_starts_from_its_saved_start(
    real_model: LanguageModel, evaluated: list[int]
) -> None:
    starts: Any = real_model.starts  # type: ignore[attr-defined]
    starts._saved.clear()
    real_model._llm.reset()  # type: ignore[attr-defined]
    fresh = real_model.complete(TRANSLATE, 24)
    whole = evaluated[0]  # the whole prompt, from an empty context
    real_model.complete(ANSWER, 24)
    loaded, evaluated[:] = starts.loaded, []
    again = real_model.complete(TRANSLATE, 24)
    assert starts.loaded == loaded + 1
    assert again == fresh and fresh.strip()
    assert evaluated[0] < whole / 4  # the system message and three examples were not evaluated again


@pytest.mark.slow
def test_without_a_saved_start_another_kind_of_prompt_is_evaluated_whole(
    real_model: LanguageModel, evaluated: list[int]
) -> None:
    starts: Any = real_model.starts  # type: ignore[attr-defined]
    real_model.complete(ANSWER, 24)
    starts._saved.clear()  # nothing kept: the context holds only the answer's start
    loaded, evaluated[:] = starts.loaded, []
    real_model.complete(TRANSLATE, 24)
    assert starts.loaded == loaded and evaluated[0] > 100


@pytest.mark.slow
def test_a_start_that_cannot_be_saved_loses_no_answer(
    real_model: LanguageModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    import llama_cpp

    def broken(_ctx: Any) -> int:
        raise RuntimeError("out of memory")

    starts: Any = real_model.starts  # type: ignore[attr-defined]
    real_model.complete(TRANSLATE, 24)
    starts._saved.clear()  # so that the answer's start is saved after it
    monkeypatch.setattr(llama_cpp, "llama_state_get_size", broken)
    reply = real_model.complete(ANSWER, 24, grammar=AnswerFormat(1))
    assert reply.startswith("[1]") and starts._saved == {}  # the answer stands; nothing half-saved is kept
    monkeypatch.undo()
    assert real_model.complete(TRANSLATE, 24).strip()  # the next prompt is evaluated whole


def test_a_reply_that_falls_into_a_loop_is_cut_short(
    real_model: LanguageModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 0.5B once wrote "1000…" for 156 tokens; the reply stops where the loop is plain."""
    llm: Any = real_model._llm  # type: ignore[attr-defined]
    produced: list[str] = []

    def looping_stream(**_: Any) -> Iterator[dict[str, Any]]:
        for piece in ["It was trained on 1", *["0"] * 200]:
            produced.append(piece)
            yield {"choices": [{"delta": {"content": piece}}]}

    monkeypatch.setattr(llm, "create_chat_completion", looping_stream)
    try:
        reply = real_model.complete(ANSWER, 256)
    finally:  # the starts saved from a context the fake stream never wrote: gone
        starts: Any = real_model.starts  # type: ignore[attr-defined]
        starts._saved.clear()
        starts._last = None
        llm.reset()
    assert reply.startswith("It was trained on 10") and len(produced) < 40 and reply == "".join(produced)


def test_only_a_plain_loop_counts_as_one() -> None:
    assert looping("x" * 40) and looping("see 2.5 " + "ab" * 20) and looping("4242" * 9)
    assert not looping("short 0000") and not looping("|---" * 12) and not looping("." * 40)
    assert not looping("The page must be acknowledged within five minutes, then posted.")
