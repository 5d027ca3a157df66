"""Whether the language model drafts tokens from its prompt: measured, cached, forced;
and, with the packaged model, that drafting writes exactly what plain decoding writes."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from retrieval.answer.probe import ANSWER_PROBE
from retrieval.answer.prompt import INSTRUCTIONS, AnswerFormat
from retrieval.answer.rewrite import Rewriter
from retrieval.answer.translate import Translator
from retrieval.errors import ModelError
from retrieval.models.isolated import in_child
from retrieval.models.llm import LanguageModel
from retrieval.models.lookup import cache_path, choose_lookup, describe_cached_lookup, lookup_trial
from testkit.fakes import CrashingLoad, DraftingModel, FakeClock, ScriptedModel

KEY = "model.gguf|v1|cpu|llama.cpp 0.3|threads=2"


def _model(drafted: float, drafted_reply: str | None = None) -> DraftingModel:
    return DraftingModel("[1] Within 5 minutes.", FakeClock(), 0.5, 1.0, drafted, drafted_reply)


def test_auto_keeps_drafting_when_it_answers_sooner_with_the_same_answers(tmp_path: Path) -> None:
    weights = tmp_path / "model.gguf"
    m = _model(drafted=0.4)
    report = choose_lookup(m, weights, "auto", KEY, ANSWER_PROBE, clock=m.clock)
    assert report.on and report.how == "measured" and m.prompt_lookup
    assert report.plain_s == pytest.approx(1.5) and report.drafted_s == pytest.approx(0.9)
    assert cache_path(weights).is_file()


def test_drafting_that_is_slower_or_answers_otherwise_is_not_kept(tmp_path: Path) -> None:
    slower = _model(drafted=1.3)
    assert not choose_lookup(slower, tmp_path / "a.gguf", "auto", KEY, ANSWER_PROBE, clock=slower.clock).on
    assert not slower.prompt_lookup
    other = _model(drafted=0.2, drafted_reply="[2] Within 30 days.")
    report = choose_lookup(other, tmp_path / "b.gguf", "auto", KEY, ANSWER_PROBE, clock=other.clock)
    assert not report.on and not report.same_answers and "answers differ" in report.describe()


def test_the_measurement_is_cached_per_key_and_reused_without_asking_the_model(tmp_path: Path) -> None:
    weights = tmp_path / "model.gguf"
    first = _model(drafted=0.4)
    choose_lookup(first, weights, "auto", KEY, ANSWER_PROBE, clock=first.clock)
    again = _model(drafted=5.0)  # would lose if measured: the cache decides
    report = choose_lookup(again, weights, "auto", KEY, ANSWER_PROBE, clock=again.clock)
    assert report.on and report.how == "cached measurement" and again.calls == [] and again.prompt_lookup
    other_cpu = _model(drafted=5.0)
    assert not choose_lookup(other_cpu, weights, "auto", KEY + "|other cpu", ANSWER_PROBE, clock=other_cpu.clock).on
    assert other_cpu.calls  # measured again
    assert describe_cached_lookup(tmp_path).startswith("model: off (measured")


def test_a_probe_that_fails_leaves_drafting_off_and_is_measured_again_next_time(tmp_path: Path) -> None:
    class Failing(DraftingModel):
        def complete(self, *args: object, **kwargs: object) -> str:
            if self.prompt_lookup:
                raise ModelError("the language model did not finish within 30 s")
            return super().complete(*args, **kwargs)  # type: ignore[arg-type]

    weights = tmp_path / "model.gguf"
    m = Failing("[1] Within 5 minutes.", FakeClock(), 0.5, 1.0, 0.4)
    report = choose_lookup(m, weights, "auto", KEY, ANSWER_PROBE, clock=m.clock)
    assert not report.on and not m.prompt_lookup and "not measured" in report.how
    assert not cache_path(weights).exists()


def test_a_win_inside_the_probes_noise_does_not_turn_drafting_on(tmp_path: Path) -> None:
    m = _model(drafted=0.97)  # answers 1.47 s against 1.5 s: 2 %
    assert not choose_lookup(m, tmp_path / "model.gguf", "auto", KEY, ANSWER_PROBE, clock=m.clock).on


def test_the_setting_forces_drafting_without_measuring(tmp_path: Path) -> None:
    for choice, on in (("on", True), ("off", False)):
        m = _model(drafted=5.0)
        report = choose_lookup(m, tmp_path / "model.gguf", choice, KEY, ANSWER_PROBE, clock=m.clock)  # type: ignore[arg-type]
        assert report.on is on and m.prompt_lookup is on and m.calls == []
        assert "forced" in report.how
    assert describe_cached_lookup(tmp_path / "nothing").startswith("not measured yet")


# Long enough that the prompt is more tokens than llama.cpp's batch (n_batch 512): with
# drafting on, llama-cpp-python writes logits by position, which once overran its array.
_FILLER = "\n".join(
    f"[{i}] Expense claims for trip {i} must be submitted within {i + 10} days of the purchase, with receipts."
    for i in range(1, 25)
)


@pytest.mark.slow
def test_drafting_writes_exactly_what_plain_greedy_decoding_writes(real_model: LanguageModel) -> None:
    fmt = AnswerFormat(25)
    sources = (
        f"SOURCES\n{_FILLER}\n[25] For a SEV1 incident the on-call engineer must acknowledge the page within 5 minutes."
    )
    was = real_model.prompt_lookup  # type: ignore[attr-defined]
    real_model.prompt_lookup = True  # type: ignore[attr-defined]  # creates the draft if load_model did not
    drafted_before = real_model._draft.drafts  # type: ignore[attr-defined]
    try:
        for question in ("How fast must a SEV1 page be acknowledged?", "How long do I have to claim trip 7?"):
            msgs = [
                {"role": "system", "content": INSTRUCTIONS},
                {"role": "user", "content": f"{sources}\n\nQUESTION\n{question}"},
            ]
            outputs = {}
            for on in (False, True):
                real_model.prompt_lookup = on  # type: ignore[attr-defined]
                outputs[on] = real_model.complete(msgs, 64, grammar=fmt)
            assert outputs[True] == outputs[False] and outputs[True].startswith("[")
        assert real_model._draft.drafts > drafted_before  # type: ignore[attr-defined]  # drafting really ran here
    finally:
        real_model.prompt_lookup = was  # type: ignore[attr-defined]


@pytest.mark.slow
def test_the_packaged_model_drafts_as_measured_on_this_machine(real_model: LanguageModel) -> None:
    report = real_model.lookup  # type: ignore[attr-defined]
    assert report.how == "measured" and report.same_answers  # the run's own fresh models folder
    assert report.plain_s > 0 and report.drafted_s > 0
    assert real_model.prompt_lookup is report.on  # type: ignore[attr-defined]


def test_drafting_is_timed_in_a_child_and_a_crash_there_keeps_the_mode_the_weights_were_timed_in(
    tmp_path: Path,
) -> None:
    weights = tmp_path / "model.gguf"
    weights.write_bytes(b"GGUF shipped")
    m = _model(drafted=0.4)
    m.prompt_lookup = True  # as the loader timed the weights
    crash = functools.partial(in_child, lookup_trial, CrashingLoad(frozenset({"as-shipped"})), weights, ANSWER_PROBE)
    report = choose_lookup(m, weights, "auto", KEY, ANSWER_PROBE, measure=functools.partial(crash, timeout_s=120))
    assert report.on and m.prompt_lookup and report.how.startswith("crashed while measuring")
    assert "SIGSEGV" in report.how and cache_path(weights).is_file()  # a crash is not retried at every start
    fine = functools.partial(in_child, lookup_trial, CrashingLoad(frozenset()), weights, ANSWER_PROBE, timeout_s=120)
    report = choose_lookup(_model(0.4), tmp_path / "other.gguf", "auto", KEY, ANSWER_PROBE, measure=fine)
    assert report.how == "measured" and report.same_answers  # the child's model answered both ways alike


@pytest.mark.slow
def test_a_translation_is_never_drafted_while_answers_are(real_model: LanguageModel) -> None:
    """A translation is new words: drafts from its prompt are mostly wrong, and checking each
    costs a batch (twice the time on a 2-core AMD EPYC). Answers still draft."""
    was = real_model.prompt_lookup  # type: ignore[attr-defined]
    real_model.prompt_lookup = True  # type: ignore[attr-defined]
    draft = real_model._draft  # type: ignore[attr-defined]
    try:
        before = draft.drafts
        translated = Translator(lambda: real_model, deadline_s=300)(
            "Hvor hurtigt skal en SEV1-alarm kvitteres, og hvem skal kvittere for den?", "en"
        )
        assert translated and draft.drafts == before  # not one token proposed
        msgs = [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": f"SOURCES\n{_FILLER}\n\nQUESTION\nHow long do I have to claim trip 7?"},
        ]
        real_model.complete(msgs, 48, grammar=AnswerFormat(24))
        assert draft.drafts > before  # the answer did draft: the switch is per call, not off
    finally:
        real_model.prompt_lookup = was  # type: ignore[attr-defined]


def test_translations_and_rewrites_ask_for_no_drafts() -> None:
    model = ScriptedModel("How fast must a page be acknowledged?")
    Translator(lambda: model)("Hvor hurtigt skal en alarm kvitteres?", "en")
    Rewriter(lambda: model)("hey how fast do i ack a page")
    assert model.drafts_asked == [False, False]
