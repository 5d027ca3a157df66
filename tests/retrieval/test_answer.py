"""The answer service: gate, prompt, server-side citations; fakes for logic, real models for behaviour."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.answer import AnswerService, build_prompt
from retrieval.engine import Engine
from retrieval.errors import ModelError
from retrieval.gate import GateConfig
from retrieval.llm import LanguageModel, LlamaCppModel, Message, OnToken
from tests.conftest import DEV, DEV_DOCS, read_jsonl


class ScriptedModel:
    """Returns a fixed reply and records every prompt it was given."""

    name = "scripted"

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.calls: list[list[Message]] = []

    def complete(self, messages: list[Message], max_tokens: int, on_token: OnToken | None = None) -> str:
        self.calls.append(messages)
        return self.reply


def _service(engine: Engine, model: LanguageModel) -> AnswerService:
    return AnswerService(engine.searcher, lambda: model, GateConfig(), docs_dir=DEV_DOCS)


def _doc_text(path: str) -> str:
    return (DEV_DOCS / path).read_text(encoding="utf-8").replace("\r\n", "\n")


ANSWERABLE = "Does the question-answering pipeline generate its answers or extract them from the provided context?"


def test_citations_quote_exact_content_and_bad_output_is_cleaned(dev_engine: Engine) -> None:
    model = ScriptedModel("It extracts [1] [2]; see https://bad.example <!channel> <@U1> and [9].")
    a = _service(dev_engine, model).answer(ANSWERABLE)
    assert not a.refused
    assert [c.n for c in a.citations] == [1, 2]
    assert a.dropped_citations == 1
    for bad in ("http", "<!channel>", "<@U1>", "[9]"):
        assert bad not in a.text
    for c in a.citations:
        assert _doc_text(c.path)[c.start : c.end] == c.quote
        assert c.locator == f"#char={c.start},{c.end}" and c.url.endswith(c.locator)
        assert not c.quote.startswith("[")  # the quote is content, never the embedded header
    # The model saw numbered sources and no links.
    prompt = model.calls[0][-1]["content"]
    assert "[1] " in prompt and "file://" not in prompt and "#char=" not in prompt


def test_out_of_domain_question_is_refused_without_calling_the_model(dev_engine: Engine) -> None:
    model = ScriptedModel("should never be called")
    a = _service(dev_engine, model).answer("How do I renew my Spanish passport?")
    assert a.refused and "nothing relevant" in a.reason
    assert a.nearest  # the closest documents are named, not as an answer
    assert model.calls == []


def test_quoted_phrase_must_appear_in_every_source(dev_engine: Engine) -> None:
    model = ScriptedModel("ok [1]")
    a = _service(dev_engine, model).answer('What does the error "XQ-7781-ZZ" mean when loading a tokenizer?')
    assert a.refused
    assert model.calls == []


def test_model_saying_not_found_is_a_refusal_with_sources_consulted(dev_engine: Engine) -> None:
    a = _service(dev_engine, ScriptedModel("The sources do not contain the answer.")).answer(ANSWERABLE)
    assert a.refused and a.consulted and not a.citations


def test_uncited_answer_shows_sources_as_consulted(dev_engine: Engine) -> None:
    a = _service(dev_engine, ScriptedModel("It extracts the answer.")).answer(ANSWERABLE)
    assert not a.refused and a.citations == [] and len(a.consulted) == 4


def test_prompt_carries_thread_context() -> None:
    msgs = build_prompt("And for SEV2?", [], context=["How fast must a SEV1 be acknowledged?"])
    assert "Earlier question in this conversation: How fast must a SEV1" in msgs[-1]["content"]


def test_missing_or_corrupt_gguf_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="not found"):
        LlamaCppModel(tmp_path / "nope.gguf")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"this is not a model" * 100)
    with pytest.raises(ModelError, match="not a GGUF"):
        LlamaCppModel(bad)
    truncated = tmp_path / "trunc.gguf"
    truncated.write_bytes(b"GGUF" + b"\x00" * 1000)
    with pytest.raises(ModelError, match="could not load"):
        LlamaCppModel(truncated)


@pytest.mark.slow
def test_real_model_answers_with_only_real_source_numbers(dev_engine: Engine, real_model: LanguageModel) -> None:
    svc = _service(dev_engine, real_model)
    questions = [q["question"] for q in read_jsonl(DEV / "questions.jsonl")[:8:2]]
    answered = 0
    for q in questions:
        a = svc.answer(q)
        if a.refused:
            continue
        answered += 1
        assert a.text
        n_sources = len(a.citations or a.consulted)
        assert 1 <= n_sources <= 4
        for c in a.citations:
            assert 1 <= c.n <= 4
            assert _doc_text(c.path)[c.start : c.end] == c.quote
        assert "http" not in a.text
    assert answered >= 2
