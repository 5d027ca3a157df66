"""Pointers: when Footnote is not sure, the closest passages, each one's best sentence quoted
exactly, with no model call. Real embedder, real Chroma, the example handbook."""

from __future__ import annotations

from retrieval.answer import EXCERPT_CHARS, POINTER_CHARS, Linker
from retrieval.answer.service import AnswerService, Outcome
from retrieval.search.engine import Engine
from retrieval.search.gate import GateConfig
from testkit.fakes import NeverCalledModel, ScriptedModel
from tests.conftest import EXAMPLES

UNSURE = "got paged for a sev1, how long until I have to ack it?"  # gate signal 0.95
ACK = "acknowledge the page within 5 minutes"
STRICT = GateConfig(0.5, point=1.2)  # 0.95 lies between: not sure


def _doc(path: str) -> str:
    return (EXAMPLES / path).read_text(encoding="utf-8").replace("\r\n", "\n")


def _service(engine: Engine, model: object, gate: GateConfig = STRICT) -> AnswerService:
    return AnswerService(engine.searcher, lambda: model, gate, links=Linker(docs_dir=EXAMPLES))  # type: ignore[arg-type,return-value]


def test_a_question_in_the_uncertain_band_is_pointed_at_its_passage_without_the_model(examples_engine: Engine) -> None:
    a = _service(examples_engine, NeverCalledModel()).answer(UNSURE)
    assert a.outcome is Outcome.POINTED and a.kind == "pointed" and not a.refused and not a.answered
    assert a.citations == [] and a.text == "" and "not an answer" in a.reason
    assert 1 <= len(a.pointers) <= 3 and [p.n for p in a.pointers] == list(range(1, len(a.pointers) + 1))
    assert ACK in a.pointers[0].quote and a.pointers[0].doc == "On-call Handbook"
    for p in a.pointers:
        assert _doc(p.path)[p.start : p.end] == p.quote  # quoted exactly, at its own range
        assert p.locator == f"#char={p.start},{p.end}" and p.url.endswith(p.locator)
        assert p.end - p.start <= POINTER_CHARS or p.best == (p.start, p.end)
    assert len({(p.path, p.start) for p in a.pointers}) == len(a.pointers)  # no passage twice
    # A pointer quotes its passage whole when it fits (its text, without the blank lines around it).
    for p in a.pointers:
        assert p.passage is not None
        whole = _doc(p.path)[p.passage[0] : p.passage[1]]
        if len(whole.strip()) <= POINTER_CHARS:
            assert p.quote == whole.strip(), (p.quote, whole)


def test_nothing_close_is_refused_without_pointers(examples_engine: Engine) -> None:
    a = _service(examples_engine, NeverCalledModel()).answer("How do I renew my Spanish passport?")
    assert a.outcome is Outcome.REFUSED_GATE and a.refused and a.pointers == [] and a.nearest


def test_when_the_model_finds_no_answer_the_passages_are_pointed_at(examples_engine: Engine) -> None:
    model = ScriptedModel("[0]")
    a = _service(examples_engine, model, GateConfig(0.7, point=1.2)).answer(
        "How fast must a SEV1 page be acknowledged?"
    )
    assert len(model.calls) == 1 and a.outcome is Outcome.POINTED and a.pointers
    assert "the model found no answer" in a.reason and any(ACK in p.quote for p in a.pointers)


def test_a_confident_question_is_still_answered(examples_engine: Engine) -> None:
    model = ScriptedModel("[1] A SEV1 page must be acknowledged within 5 minutes.")
    a = _service(examples_engine, model, GateConfig(0.7, point=1.2)).answer(
        "How fast must a SEV1 page be acknowledged?"
    )
    assert a.outcome in (Outcome.ANSWERED, Outcome.CLAIMS_REMOVED) and a.answered and a.pointers == []


def test_an_answers_citation_quotes_its_sentence_with_the_sentences_around_it(examples_engine: Engine) -> None:
    model = ScriptedModel("[1] A SEV1 page must be acknowledged within 5 minutes.")
    a = _service(examples_engine, model, GateConfig(0.7, point=1.2)).answer(
        "How fast must a SEV1 page be acknowledged?"
    )
    assert a.answered and a.citations
    for c in a.citations:
        doc = _doc(c.path)
        assert doc[c.start : c.end] == c.quote and c.locator == f"#char={c.start},{c.end}"
        assert c.best is not None and c.start <= c.best[0] < c.best[1] <= c.end
        assert c.end - c.start <= EXCERPT_CHARS or c.best == (c.start, c.end)
    cited = a.citations[0]
    sentence = _doc(cited.path)[cited.best[0] : cited.best[1]]  # type: ignore[index]
    assert ACK in cited.quote and len(cited.quote) > len(sentence)  # the neighbours joined
