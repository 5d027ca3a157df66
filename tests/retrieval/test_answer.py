"""The answer service: gate, numbered sentences, grammar, support check, evidence citations.

A scripted model for the logic (what the check keeps, removes, re-attributes), the real
model for behaviour (it cites, under the grammar, sentences whose ranges slice exactly).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from retrieval.answer import Citation, Linker
from retrieval.answer.prompt import QUESTION_CHARS, answer_grammar, build_prompt
from retrieval.answer.service import DOCS_SAY, Answer, AnswerService, Outcome
from retrieval.errors import ModelError
from retrieval.models.llm import LanguageModel, LlamaCppModel
from retrieval.search.engine import Engine
from retrieval.search.gate import GateConfig
from testkit.fakes import FailingModel, ScriptedModel
from tests.conftest import ANSWERING, EXAMPLES


def _service(engine: Engine, model: LanguageModel, **kw: int) -> AnswerService:
    return AnswerService(engine.searcher, lambda: model, ANSWERING, links=Linker(docs_dir=EXAMPLES), **kw)  # type: ignore[arg-type]


def _doc(path: str) -> str:
    return (EXAMPLES / path).read_text(encoding="utf-8").replace("\r\n", "\n")


def _sentence(c: Citation) -> str:
    """The sentence a citation cites, inside the excerpt it quotes."""
    assert c.best is not None
    return c.quote[c.best[0] - c.start : c.best[1] - c.start]


def _number_of(prompt: str, fragment: str) -> int:
    """The number the prompt gave the source sentence containing ``fragment``."""
    m = re.search(r"^\[(\d+)\] [^\n]*" + re.escape(fragment), prompt, re.MULTILINE)
    assert m, f"{fragment!r} is not a numbered sentence of the prompt"
    return int(m.group(1))


SEV1 = "How fast must a SEV1 page be acknowledged?"
ACK = "acknowledge the page within 5 minutes"


def test_a_model_that_fails_leaves_the_passages_it_would_have_read_marked_as_its_failure(
    examples_engine: Engine,
) -> None:
    model = FailingModel()
    a = _service(examples_engine, model).answer(SEV1)
    assert model.calls == 1 and a.outcome is Outcome.MODEL_FAILED and a.kind == "pointed" and not a.refused
    assert any(ACK in p.quote for p in a.pointers) and not a.citations and not a.text  # plainly not an answer
    assert a.reason.startswith("the language model did not answer: ") and a.outcome.failed


def test_a_supported_sentence_is_kept_with_its_sentence_as_evidence(examples_engine: Engine) -> None:
    model = ScriptedModel(
        lambda p: f"[{_number_of(p, ACK)}] The on-call engineer must acknowledge the page within 5 minutes."
    )
    a = _service(examples_engine, model).answer(SEV1)
    assert not a.refused and a.text.endswith("[1].")
    (c,) = a.citations
    assert ACK in _sentence(c) and _sentence(c).startswith("For a SEV1")  # the cited sentence, in bold
    assert _doc(c.path)[c.start : c.end] == c.quote  # the excerpt's range slices the document exactly
    assert c.locator == f"#char={c.start},{c.end}" and c.url.endswith(c.locator)
    assert c.passage is not None and c.passage[0] <= c.start < c.end <= c.passage[1]
    assert a.check.kept == 1 and a.check.removed == 0 and a.check.constrained
    # The model saw numbered sentences and no links, and wrote under the grammar.
    prompt = model.calls[0][-1]["content"]
    assert "[1] " in prompt and "file://" not in prompt and "#char=" not in prompt
    assert model.grammars[0] is not None


def test_an_unsupported_sentence_is_removed(examples_engine: Engine) -> None:
    model = ScriptedModel(
        lambda p: (
            f"[{_number_of(p, ACK)}] The on-call engineer must acknowledge the page within 5 minutes.\n"
            f"[{_number_of(p, ACK)}] Pagers are issued by the facilities team in Aarhus."
        )
    )
    a = _service(examples_engine, model).answer(SEV1)
    assert "Aarhus" not in a.text and "5 minutes" in a.text
    assert a.check.removed == 1 and a.check.removed_claims == ("Pagers are issued by the facilities team in Aarhus.",)


def test_a_misnumbered_sentence_is_reattributed_to_the_sentence_that_supports_it(examples_engine: Engine) -> None:
    wrong = lambda p: _number_of(p, "A SEV1 is a full outage")  # noqa: E731
    model = ScriptedModel(lambda p: f"[{wrong(p)}] The on-call engineer must acknowledge the page within 5 minutes.")
    a = _service(examples_engine, model).answer(SEV1)
    (c,) = a.citations
    assert ACK in c.quote
    assert a.check.reattributed == 1 and a.check.kept == 1


def test_a_number_missing_from_the_evidence_is_not_supported(examples_engine: Engine) -> None:
    model = ScriptedModel(
        lambda p: f"[{_number_of(p, ACK)}] The on-call engineer must acknowledge the page within 15 minutes."
    )
    a = _service(examples_engine, model).answer(SEV1)
    assert "15 minutes" not in a.text
    assert a.check.removed == 1 and a.check.shown_as_evidence
    assert a.text.startswith(DOCS_SAY)


def test_a_bare_no_is_shown_as_the_evidence_itself(examples_engine: Engine) -> None:
    model = ScriptedModel(lambda p: f"[{_number_of(p, ACK)}] No.")
    a = _service(examples_engine, model).answer(SEV1)
    assert not a.refused and a.check.shown_as_evidence and a.check.too_short == 1
    (c,) = a.citations
    assert a.text == f"{DOCS_SAY} «{_sentence(c)}» [1]"
    assert ACK in c.quote and _doc(c.path)[c.start : c.end] == c.quote


def test_a_bare_number_is_shown_with_the_sentence_that_holds_it(examples_engine: Engine) -> None:
    """A bare "25", cited to the first sentence (about parental leave, no 25), is a pointer: the
    reader sees the sentence that says 25, not the one ranked first."""
    model = ScriptedModel(lambda p: "[1] 25.")
    a = _service(examples_engine, model, max_sentences=4).answer("How many days of leave do I get?")
    assert a.check.shown_as_evidence and a.check.too_short == 1
    (c,) = a.citations
    assert "25 days of paid holiday" in c.quote and a.text == f"{DOCS_SAY} «{' '.join(_sentence(c).split())}» [1]"


def test_the_model_finding_nothing_points_at_the_passages_it_read(examples_engine: Engine) -> None:
    a = _service(examples_engine, ScriptedModel("[0]")).answer(SEV1)
    assert a.outcome is Outcome.POINTED and a.reason == "the model found no answer in the closest passages"
    assert a.pointers and not a.citations and not a.refused


def test_an_amount_asked_for_and_not_stated_points_instead_of_answering(examples_engine: Engine) -> None:
    """The cited sentence is on the topic and backs the claim, but "how quickly" asks for a time
    it does not state: the passages are pointed at, and the same claim answers "what is" questions."""
    levels = "a SEV2 is a degraded service with a workaround"
    model = ScriptedModel(lambda p: f"[{_number_of(p, levels)}] A SEV2 is a degraded service with a workaround.")
    a = _service(examples_engine, model).answer("How quickly must a SEV2 be handled?")
    assert a.outcome is Outcome.POINTED and not a.citations and a.pointers
    assert a.reason == "the closest passages state no amount, and the question asks for one"
    assert _service(examples_engine, model).answer("What is a SEV2 in severity levels?").outcome is Outcome.ANSWERED
    timed = ScriptedModel(
        lambda p: f"[{_number_of(p, ACK)}] The on-call engineer must acknowledge the page within 5 minutes."
    )
    assert _service(examples_engine, timed).answer(SEV1).outcome is Outcome.ANSWERED


def test_links_and_mentions_never_get_through(examples_engine: Engine) -> None:
    model = ScriptedModel(
        lambda p: f"[{_number_of(p, ACK)}] Acknowledge the page within 5 minutes <!channel> https://bad.example <@U1>."
    )
    a = _service(examples_engine, model).answer(SEV1)
    for bad in ("http", "<!channel>", "<@U1>", "bad.example"):
        assert bad not in a.text


def test_out_of_domain_question_is_refused_without_calling_the_model(examples_engine: Engine) -> None:
    model = ScriptedModel("[1] should never be called.")
    a = _service(examples_engine, model).answer("How do I renew my Spanish passport?")
    assert a.refused and "nothing relevant" in a.reason
    assert a.nearest  # the closest documents are named, not as an answer
    assert model.calls == []


def test_quoted_phrase_absent_from_every_source_is_refused_without_the_model(examples_engine: Engine) -> None:
    model = ScriptedModel("[1] ok.")
    # A lenient gate, so that the quoted-phrase rule is what decides.
    svc = AnswerService(
        examples_engine.searcher, lambda: model, GateConfig(threshold=2.0), links=Linker(docs_dir=EXAMPLES)
    )
    known = svc.answer('What does error code "LW-5012" mean?')
    assert not known.refused and len(model.calls) == 1  # the phrase is in a source: answered
    a = svc.answer('What does error code "LW-9999" mean?')
    assert a.refused and "verbatim" in a.reason  # refused because of the phrase, not the gate
    assert len(model.calls) == 1


@pytest.mark.parametrize(
    ("question", "reply", "outcome"),
    [
        (SEV1, "[{ack}] The on-call engineer must acknowledge the page within 5 minutes.", Outcome.ANSWERED),
        (SEV1, "[{ack}] No.", Outcome.ANSWERED),  # too short to check: the evidence is shown, nothing was removed
        (SEV1, "[{ack}] Pagers are issued by the facilities team in Aarhus.", Outcome.CLAIMS_REMOVED),
        (SEV1, "[0]", Outcome.POINTED),
        ("How do I renew my Spanish passport?", "[1] never asked", Outcome.REFUSED_GATE),
    ],
)
def test_every_outcome_is_a_value_that_agrees_with_refused(
    examples_engine: Engine, question: str, reply: str, outcome: Outcome
) -> None:
    model = ScriptedModel(lambda p: reply.format(ack=_number_of(p, ACK)))
    a = _service(examples_engine, model).answer(question)
    assert a.outcome is outcome and a.refused is outcome.refused
    assert a.vector is not None and a.vector.shape == (examples_engine.embedder.dimension,)


def test_a_channel_scope_without_documents_is_a_gate_refusal(examples_engine: Engine) -> None:
    a = _service(examples_engine, ScriptedModel("[1] never asked")).answer(SEV1, folders=["nowhere"])
    assert a.outcome is Outcome.REFUSED_GATE and a.reason == "no documents in nowhere/"


def test_an_answer_cannot_say_refused_and_answered_at_once() -> None:
    with pytest.raises(ValueError, match="cannot have the outcome"):
        Answer("q", True, "nothing relevant", "", [])
    with pytest.raises(ValueError, match="cannot have the outcome"):
        Answer("q", False, "answered", "Yes [1].", [], outcome=Outcome.REFUSED_MODEL)


def test_prompt_carries_thread_context_and_fixed_instructions_first() -> None:
    msgs = build_prompt("And for SEV2?", [], context=["How fast must a SEV1 be acknowledged?"])
    assert msgs[0]["role"] == "system" and "[0]" in msgs[0]["content"]
    assert "Earlier question in this conversation: How fast must a SEV1" in msgs[-1]["content"]


def test_prompt_asks_the_question_before_the_sources_and_again_after() -> None:
    @dataclass(frozen=True)
    class Line:
        n: int
        text: str

    user = build_prompt("How fast?", [Line(1, "Within 5 minutes."), Line(2, "Thirty days.")])[-1]["content"]
    assert user == "QUESTION\nHow fast?\n\nSOURCES\n[1] Within 5 minutes.\n[2] Thirty days.\n\nQUESTION\nHow fast?"


def test_a_pasted_log_leaves_the_prompt_its_question_and_room_in_the_models_window() -> None:
    log = "".join(f"10:{i % 60:02d} worker-{i} OOMKilled, retrying\n" for i in range(2000))
    user = build_prompt(f"How fast must a SEV1 be acknowledged? Our log:\n{log}Thanks!", [])[-1]["content"]
    assert len(user) < 2 * QUESTION_CHARS + 100 and "[…]" in user
    assert user.count("How fast must a SEV1 be acknowledged? Our log:") == 2 and user.count("Thanks!") == 2


@pytest.mark.slow
def test_a_message_longer_than_the_models_window_is_still_answered(
    examples_engine: Engine, real_model: LanguageModel
) -> None:
    """A person who pastes a document into the question: before, its prompt exceeded the
    model's 4,096-token window and the answer was an error."""
    pasted = _doc("on-call.md") * 12  # about 14,000 characters: 7,000 tokens once shown twice
    a = _service(examples_engine, real_model).answer(f"{SEV1} For context, our handbook: {pasted}")
    assert a.outcome is Outcome.ANSWERED and a.citations  # (which sentence: the pasted text pulls the search)


def test_the_grammar_only_admits_source_numbers() -> None:
    g = answer_grammar(4)
    (num,) = [line for line in g.splitlines() if line.startswith("num ::=")]
    assert sorted(re.findall(r'"(\d+)"', num), key=int) == ["1", "2", "3", "4"]
    assert g.startswith('root ::= "[0]" | line')


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
def test_real_model_cites_sentences_whose_ranges_slice_exactly(
    examples_engine: Engine, real_model: LanguageModel
) -> None:
    svc = _service(examples_engine, real_model)
    raws: list[str] = []
    for q in (SEV1, "Within how many days must an expense claim be submitted?"):
        a = svc.answer(q, on_token=raws.append)
        assert not a.refused, a.reason
        assert a.citations and a.check.constrained
        assert re.search(r"\[1\]", a.text)
        for c in a.citations:
            assert _doc(c.path)[c.start : c.end] == c.quote
            assert c.url.endswith(f"#char={c.start},{c.end}")
    assert any("5 minutes" in c.quote for c in svc.answer(SEV1).citations)
    # What streamed to the reader never carried the model's sentence numbers.
    assert raws and not any(re.search(r"\[\d+\]", r) for r in raws)


def test_a_missing_model_package_names_the_extra_that_installs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval.models import files as model_files

    missing = model_files.Packaged(
        "m.gguf", "0" * 64, 10, "no_such_module_{i}", "no-such-part{i}", 2, extra="large-model"
    )
    monkeypatch.setitem(model_files.MODELS, "qwen-1.5b", missing)
    with pytest.raises(
        ModelError, match=r"no-such-part1 is not installed; run `pip install 'footnote\[large-model\]'`"
    ):
        model_files.packaged_gguf(tmp_path, "qwen-1.5b")
    assert not list(tmp_path.iterdir())  # no half-written model file is left behind
