"""Which form of the GGUF's weights the language model runs on: measured, cached, forced.

Timed fakes (a fake clock the fake models move) for the choice; the packaged model for
the conversion itself (the session's real model was chosen by the same code).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from retrieval.answer.probe import ANSWER_PROBE, alike
from retrieval.errors import ModelError
from retrieval.models.cpu import CpuInfo
from retrieval.models.llm import LanguageModel
from retrieval.models.weights import (
    WeightsReport,
    WeightsTrial,
    cache_path,
    cached_weights,
    choose_weights,
    converted_path,
    describe_cached_weights,
    pick,
    widenable,
    widened_forms,
)
from testkit.fakes import CrashingLoad, FakeClock, TimedModel, write_conversion

Q5_0 = 8  # general.file_type of a mostly-Q5_0 file, like the packaged 0.5B


class Forms:
    """Fake GGUF forms: what each answers and how long it takes; records loads and conversions."""

    def __init__(self, tmp: Path, timing: dict[str, tuple[float, float]], replies: dict[str, str] | None = None):
        self.src = tmp / "model.gguf"
        if not self.src.exists():  # another Forms on the same folder is the same file (a restart)
            self.src.write_bytes(b"GGUF shipped")
        self.clock = FakeClock()
        self.timing = timing
        self.replies = replies or {}
        self.loaded: list[str] = []
        self.converted: list[str] = []

    def form_of(self, path: Path) -> str:
        return "as-shipped" if path == self.src else path.name.split(".")[-2].split("-")[0]

    def load(self, path: Path) -> LanguageModel:
        form = self.form_of(path)
        self.loaded.append(form)
        first, rest = self.timing[form]
        return TimedModel(self.replies.get(form, "[1] Within 5 minutes."), self.clock, first, rest)

    def convert(self, src: Path, dst: Path, weights: str) -> None:
        if weights not in self.timing:
            raise ModelError(f"cannot write {dst}: no space left on device")
        self.converted.append(weights)
        dst.write_bytes(b"GGUF " + weights.encode())

    def choose(self, choice: str = "auto", file_type: int | None = Q5_0, forms=("q8_0", "f16")):  # type: ignore[no-untyped-def]
        return choose_weights(
            self.src, choice, file_type=lambda: file_type, load=self.load, convert=self.convert,  # type: ignore[arg-type]
            version="0.3.36", check=ANSWER_PROBE, clock=self.clock, forms=forms,
        )  # fmt: skip


AVX2_LIKE = {"as-shipped": (1.4, 0.9), "q8_0": (1.1, 0.8), "f16": (0.8, 1.2)}


def test_auto_measures_every_form_and_takes_the_earliest_first_token_within_the_answer_slack(tmp_path: Path) -> None:
    forms = Forms(tmp_path, AVX2_LIKE)
    report = forms.choose()
    assert report.how == "measured" and forms.loaded == ["as-shipped", "q8_0", "f16"]
    # answers: 2.3, 1.9, 2.0 s; f16 is within 10 % of the fastest and reads the prompt soonest
    assert report.chosen == "f16" and report.path == converted_path(forms.src, "f16") and report.path.is_file()
    assert not converted_path(forms.src, "q8_0").exists()  # the losing conversion is deleted
    by = {t.weights: t for t in report.trials}
    assert by["q8_0"].first_token_s == pytest.approx(1.1) and by["q8_0"].answer_s == pytest.approx(1.9)
    assert "f16 first token 0.80 s, answer 2.00 s" in report.describe()


def test_a_form_much_slower_to_finish_loses_even_with_the_earliest_first_token(tmp_path: Path) -> None:
    forms = Forms(tmp_path, {"as-shipped": (1.4, 0.9), "q8_0": (1.1, 0.8), "f16": (0.8, 1.6)})  # f16: 2.4 s
    assert forms.choose().chosen == "q8_0"


def test_a_form_that_answers_differently_is_not_taken(tmp_path: Path) -> None:
    forms = Forms(tmp_path, AVX2_LIKE, replies={"f16": "[2] Something else."})
    report = forms.choose()
    assert report.chosen == "q8_0"
    assert "f16 first token 0.80 s, answer 2.00 s (answers differ: not taken)" in report.describe()


def test_the_measurement_is_cached_per_file_and_cpu_and_reused_without_loading(tmp_path: Path) -> None:
    first = Forms(tmp_path, AVX2_LIKE)
    first.choose()
    again = Forms(tmp_path, AVX2_LIKE)
    report = again.choose()
    assert report.how == "cached measurement" and report.chosen == "f16" and again.loaded == []
    assert again.converted == []  # the chosen conversion was kept
    assert "f16" in describe_cached_weights(tmp_path)
    cache = json.loads(cache_path(again.src).read_text())
    cache["key"] = cache["key"].replace("0.3.36", "0.4.0")  # another llama.cpp measures again
    cache_path(again.src).write_text(json.dumps(cache))
    assert Forms(tmp_path, AVX2_LIKE).choose().how == "measured"


def test_serve_reads_an_earlier_measurement_without_timing_and_finds_none_on_a_new_machine(tmp_path: Path) -> None:
    forms = Forms(tmp_path, AVX2_LIKE)
    kw = {"version": "0.3.36", "tuning": "", "forms": ("q8_0", "f16")}
    assert cached_weights(forms.src, forms.convert, **kw) is None  # type: ignore[arg-type]  # nothing measured yet
    assert forms.loaded == [] and forms.converted == []  # and nothing was timed to find out
    forms.choose()
    report = cached_weights(forms.src, forms.convert, **kw)  # type: ignore[arg-type]
    assert report is not None and report.chosen == "f16" and report.how == "cached measurement"


def test_a_replaced_model_file_gets_new_conversions_and_the_stale_ones_go(tmp_path: Path) -> None:
    first = Forms(tmp_path, AVX2_LIKE)
    old = first.choose().path
    first.src.write_bytes(b"GGUF a new fine-tune of the same size")
    os.utime(first.src, ns=(1, 1))  # same name, another version of the file
    again = Forms(tmp_path, AVX2_LIKE)
    report = again.choose()
    assert report.how == "measured" and report.path != old and not old.exists()
    assert again.converted == ["q8_0", "f16"]  # converted from the new file, not reused


def test_a_cached_choice_whose_conversion_fails_runs_the_shipped_file(tmp_path: Path) -> None:
    Forms(tmp_path, AVX2_LIKE).choose()
    converted_path(Forms(tmp_path, AVX2_LIKE).src, "f16").unlink()
    broken = Forms(tmp_path, {"as-shipped": (1.4, 0.9)})  # the disk is full now: f16 cannot be written
    report = broken.choose()
    assert report.chosen == "as-shipped" and report.path == broken.src and broken.loaded == []


def test_the_setting_forces_a_form_without_measuring(tmp_path: Path) -> None:
    forms = Forms(tmp_path, AVX2_LIKE)
    report = forms.choose("q8_0")
    assert report.chosen == "q8_0" and report.how == "forced by FOOTNOTE_LLM_WEIGHTS"
    assert forms.loaded == [] and forms.converted == ["q8_0"] and report.path.is_file()
    assert forms.choose("as-shipped").path == forms.src


def test_a_file_already_8_bit_or_wider_is_used_as_it_is(tmp_path: Path) -> None:
    for file_type in (0, 1, 7, 32, None):
        assert not widenable(file_type)
    forms = Forms(tmp_path, AVX2_LIKE)
    report = forms.choose(file_type=7)
    assert report.chosen == "as-shipped" and report.path == forms.src and report.how == "already 8-bit or wider"
    assert forms.loaded == ["as-shipped"] and forms.converted == []  # timed once: it may crash here too
    assert forms.choose("f16", file_type=1).path == forms.src  # forcing cannot narrow a wide file


def test_a_failed_conversion_leaves_that_form_out_and_is_tried_again_next_time(tmp_path: Path) -> None:
    forms = Forms(tmp_path, {"as-shipped": (1.4, 0.9), "q8_0": (1.1, 0.8)})  # f16 cannot be written
    report = forms.choose()
    assert report.chosen == "q8_0" and [t.weights for t in report.trials] == ["as-shipped", "q8_0"]
    assert not cache_path(forms.src).exists()  # not cached: the next start measures again


def test_answers_alike_cite_the_same_sentences_with_the_same_words() -> None:
    whole = "[1] For a SEV1, the on-call engineer must acknowledge the page within 5 minutes."
    assert alike("[1] Acknowledge within 5 minutes.", whole)  # a near tie of greedy decoding
    assert not alike("[2] Acknowledge within 5 minutes.", whole)  # another sentence cited
    assert not alike("[1] Zebra quantum marmalade oscillates.", whole)  # a broken conversion
    assert not alike("[1] Acknowledge within 50 minutes.", whole)  # another number
    assert alike("[0]", "[0]") and not alike("[0]", whole)


def test_the_fastest_form_that_fits_the_memory_left_is_taken() -> None:
    # As measured on a 2-core AMD EPYC with AVX-512 BF16 (first token, answer, MB added).
    trials = [
        WeightsTrial("as-shipped", 0.45, 0.80, True, memory_mb=560),
        WeightsTrial("q8_0", 0.41, 0.76, True, memory_mb=600),
        WeightsTrial("f16", 0.33, 0.62, True, memory_mb=1000),
        WeightsTrial("bf16", 0.25, 0.51, True, memory_mb=1060),
    ]
    assert pick(trials) == "bf16" and pick(trials, allowance_mb=2000) == "bf16"
    assert pick(trials, allowance_mb=900) == "q8_0"
    assert pick(trials, allowance_mb=100) == "as-shipped"  # nothing fits: the smallest, with a warning
    # Serving measures beside the shipped form it already runs, which the pick replaces: its 560 MB count.
    assert pick(trials, allowance_mb=450, replacing="as-shipped") == "f16"
    assert "1060 MB" in WeightsReport("bf16", Path("m.gguf"), "measured", tuple(trials)).describe()


def test_pick_needs_the_shipped_answers() -> None:
    trials = [WeightsTrial("as-shipped", 1.4, 2.3, True), WeightsTrial("f16", 0.5, 1.0, False)]
    assert pick(trials) == "as-shipped"


def test_the_packaged_model_runs_on_a_measured_form_that_answers_like_the_shipped_file(
    real_model: LanguageModel,
) -> None:
    report = real_model.weights  # type: ignore[attr-defined]
    assert report.how in ("measured", "cached measurement")
    assert report.path.is_file() and report.path.read_bytes()[:4] == b"GGUF"
    # Every widened form was converted, loaded, timed and answered the probes like the shipped file.
    assert [t.weights for t in report.trials] == ["as-shipped", *widened_forms()]
    # A form may crash llama.cpp on this CPU (its trial ran in a child): never the one chosen.
    answered = [t for t in report.trials if not t.crashed]
    assert report.chosen in {t.weights for t in answered}
    assert all(t.same_answers and 0 < t.first_token_s < t.answer_s for t in answered)


def test_bf16_is_timed_only_where_the_cpu_computes_it_natively(tmp_path: Path) -> None:
    avx2 = CpuInfo("AMD EPYC", "AVX2", frozenset({"avx2", "fma"}), 2)
    zen5 = CpuInfo("AMD EPYC", "AVX512", frozenset({"avx2", "avx512f", "avx512_bf16"}), 2)
    assert widened_forms(avx2) == ("q8_0", "f16") and widened_forms(zen5) == ("q8_0", "f16", "bf16")
    assert widened_forms(zen5, backend_bf16=False) == ("q8_0", "f16")  # a llama.cpp built without it emulates bf16
    # As measured on the AVX-512 BF16 EPYC: BF16 reads the prompt soonest and answers soonest.
    forms = Forms(tmp_path, {"as-shipped": (0.6, 0.6), "q8_0": (0.7, 0.6), "f16": (0.45, 0.5), "bf16": (0.33, 0.45)})
    report = forms.choose(forms=("q8_0", "f16", "bf16"))
    assert report.chosen == "bf16" and forms.loaded == ["as-shipped", "q8_0", "f16", "bf16"]
    assert not converted_path(forms.src, "f16").exists()  # the losers' conversions are deleted


def test_a_measurement_that_never_timed_a_form_is_not_reused_when_that_form_is_tried(tmp_path: Path) -> None:
    timing = {"as-shipped": (0.6, 0.6), "q8_0": (0.7, 0.6), "f16": (0.45, 0.5), "bf16": (0.33, 0.45)}
    assert Forms(tmp_path, timing).choose().chosen == "f16"  # measured without bf16 (an older version, another build)
    again = Forms(tmp_path, timing)
    report = again.choose(forms=("q8_0", "f16", "bf16"))
    assert report.how == "measured" and report.chosen == "bf16" and "bf16" in again.loaded


def crash_trials(
    tmp: Path, crash: set[str], plain: set[str] | None = None, choice: str = "auto", file_type: int = Q5_0
):  # type: ignore[no-untyped-def]
    """``crash``: the forms that fault in llama.cpp's default kernels; ``plain``: those that
    fault in its plain ones too (None: no plain loader is offered)."""
    src = tmp / "model.gguf"
    src.write_bytes(b"GGUF shipped") if not src.exists() else None
    without = None if plain is None else CrashingLoad(frozenset(plain), kernels="plain")
    return choose_weights(
        src, choice, file_type=lambda: file_type, load=CrashingLoad(frozenset(crash)), convert=write_conversion,  # type: ignore[arg-type]
        version="0.3.36", check=ANSWER_PROBE, forms=("q8_0", "f16"), isolate_s=120, plain=without,
    )  # fmt: skip


def test_a_form_that_crashes_the_process_is_recorded_and_never_taken(tmp_path: Path) -> None:
    # As on a 2-core Sapphire Rapids: the shipped Q5_0 and Q8_0 segfault in llama.cpp, F16 answers.
    report = crash_trials(tmp_path, {"as-shipped", "q8_0"})
    assert report.how == "measured" and report.chosen == "f16" and report.path.is_file()
    by = {t.weights: t for t in report.trials}
    assert "SIGSEGV" in by["as-shipped"].crashed and "SIGSEGV" in by["q8_0"].crashed
    assert by["f16"].same_answers and not by["f16"].crashed  # compared with the first form that answered
    assert "q8_0 crashed here (the process crashed (SIGSEGV)): not taken" in report.describe()
    again = crash_trials(tmp_path, {"as-shipped", "q8_0"})  # the crash is a result: cached, not retried
    assert again.how == "cached measurement" and again.chosen == "f16"
    assert "crashed here" in describe_cached_weights(tmp_path)


def test_weights_that_crash_in_every_form_are_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="crashed on this CPU in every form"):
        crash_trials(tmp_path, {"as-shipped", "q8_0", "f16"})


EVERY_FORM = {"as-shipped", "q8_0", "f16"}


def test_a_form_that_crashes_in_llama_cpps_extra_kernels_is_timed_again_with_the_plain_ones(tmp_path: Path) -> None:
    # As on a virtualised 2-core Xeon with AMX (2026-12-07): every form faulted in llama.cpp's
    # AMX kernels, and each answered without them.
    report = crash_trials(tmp_path, EVERY_FORM, plain=set())
    assert report.how == "measured" and report.kernels == "plain" and report.path.is_file()
    assert all(t.kernels == "plain" and not t.crashed and t.same_answers for t in report.trials)
    assert "without llama.cpp's extra kernels (they crashed here)" in report.describe()
    again = crash_trials(tmp_path, EVERY_FORM, plain=set())  # a restart: the kernels come with the cached choice
    assert again.how == "cached measurement" and again.kernels == "plain"
    forced = crash_trials(tmp_path, EVERY_FORM, plain=set(), choice="q8_0")  # forced: as measured here
    assert forced.chosen == "q8_0" and forced.kernels == "plain"


def test_a_form_that_crashes_in_the_plain_kernels_too_is_not_taken(tmp_path: Path) -> None:
    report = crash_trials(tmp_path, EVERY_FORM, plain={"as-shipped", "q8_0"})
    assert report.chosen == "f16" and report.kernels == "plain"
    assert "q8_0 crashed here (the process crashed (SIGSEGV), also without llama.cpp's extra kernels)" in (
        report.describe()
    )
    (tmp_path / "other").mkdir()
    with pytest.raises(ModelError, match="crashed on this CPU in every form"):
        crash_trials(tmp_path / "other", EVERY_FORM, plain=EVERY_FORM)


def test_forms_that_answer_in_the_default_kernels_keep_them(tmp_path: Path) -> None:
    report = crash_trials(tmp_path, {"as-shipped"}, plain=set())
    by = {t.weights: t.kernels for t in report.trials}
    assert by == {"as-shipped": "plain", "q8_0": "default", "f16": "default"}
    assert report.kernels == by[report.chosen]


def loaded_kernels(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The kernels of each in-process load from now on (each gives a fake model)."""
    from retrieval.models import loader

    kernels: list[str] = []
    monkeypatch.setattr(loader.LlamaLoad, "__call__", lambda self, path: kernels.append(self.kernels) or TimedModel(
        "[1] Within 5 minutes.", FakeClock(), 0.1, 0.1))  # fmt: skip
    return kernels


def test_a_model_not_yet_measured_here_loads_with_the_plain_kernels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `footnote serve` answers before it has timed the forms: in its own process, so with the
    # kernels that ran on every CPU seen (the default ones crashed serving on the AMX Xeon).
    from retrieval.models import loader

    kernels = loaded_kernels(monkeypatch)
    checked: list[str] = []
    monkeypatch.setattr(loader, "first_answer", lambda load, gguf, timeout_s: checked.append(load.kernels))
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF shipped")
    model = loader.load_model(gguf, None, tmp_path, check=ANSWER_PROBE, measure=False)
    assert checked == ["plain"]  # seen to write a token in a child process first
    assert kernels == ["plain"] and model.weights.kernels == "plain"  # type: ignore[attr-defined]
    assert loader.needs_measuring(model)


def test_a_model_that_crashes_before_it_is_measured_is_an_error_not_a_crash(tmp_path: Path) -> None:
    # An image built where llama.cpp was compiled for a newer CPU, or kernels that fault:
    # the child ends, and the server that would have loaded the model says so instead.
    from retrieval.models.isolated import Crashed
    from retrieval.models.loader import first_answer

    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF shipped")
    with pytest.raises(Crashed, match="SIGSEGV"):
        first_answer(CrashingLoad(frozenset({"as-shipped"})), gguf, timeout_s=120)
    first_answer(CrashingLoad(frozenset()), gguf, timeout_s=120)  # one that answers passes


def test_plain_kernels_reach_llama_cpps_load_parameters() -> None:
    import llama_cpp.llama as high_level

    from retrieval.models.llm import _model_params

    with _model_params("plain"):  # what ``Llama.__init__`` reads while it loads
        assert high_level.llama_cpp.llama_model_default_params().use_extra_bufts is False
    assert high_level.llama_cpp.llama_model_default_params().use_extra_bufts is True
    with _model_params("default"):
        assert high_level.llama_cpp.llama_model_default_params().use_extra_bufts is True


def test_the_packaged_model_answers_alike_with_the_plain_kernels(real_model: LanguageModel) -> None:
    from retrieval.models.files import DEFAULT_GGUF_NAME
    from retrieval.models.isolated import in_child
    from retrieval.models.llm import convert_gguf
    from retrieval.models.loader import LlamaLoad
    from retrieval.models.weights import trial

    shipped = real_model.weights.path.parent / DEFAULT_GGUF_NAME  # type: ignore[attr-defined]
    plain = LlamaLoad(4096, None, 512, False, 300.0, drafts=False, kernels="plain")
    _, _, answers, _ = in_child(trial, shipped, "as-shipped", plain, convert_gguf, ANSWER_PROBE, timeout_s=600)
    _, _, served = ANSWER_PROBE.run(real_model, FakeClock())
    assert len(answers) == len(served) > 0
    assert all(ANSWER_PROBE.agree(a, b) for a, b in zip(answers, served, strict=True))


def test_a_file_already_8_bit_that_crashes_in_the_extra_kernels_runs_on_the_plain_ones(tmp_path: Path) -> None:
    # A Q8_0 GGUF of one's own (FOOTNOTE_LLM_GGUF) on the AMX Xeon: nothing to widen, and it
    # would have crashed the serving process had it been loaded as it is.
    report = crash_trials(tmp_path, {"as-shipped"}, plain=set(), file_type=7)
    assert report.chosen == "as-shipped" and report.how == "already 8-bit or wider" and report.kernels == "plain"
    assert crash_trials(tmp_path, {"as-shipped"}, plain=set(), file_type=7).kernels == "plain"  # cached


def test_a_forced_form_never_timed_here_writes_a_token_in_a_child_before_it_is_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # FOOTNOTE_LLM_WEIGHTS on the AMX Xeon, before any measurement: loaded as it was, it
    # would have crashed the process that asked.
    from retrieval.models import loader
    from retrieval.models.isolated import Crashed

    kernels = loaded_kernels(monkeypatch)

    def crashes_in_the_default_kernels(load: loader.LlamaLoad, gguf: Path, timeout_s: float) -> None:
        if load.kernels == "default":
            raise Crashed("the process crashed (SIGSEGV)")

    monkeypatch.setattr(loader, "first_answer", crashes_in_the_default_kernels)
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF shipped")
    model = loader.load_model(gguf, None, tmp_path, check=ANSWER_PROBE, weights="as-shipped", prompt_lookup="off")
    assert kernels == ["plain"] and model.weights.kernels == "plain"  # type: ignore[attr-defined]
