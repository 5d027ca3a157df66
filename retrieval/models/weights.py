"""Which form of an in-process GGUF's weights answers fastest on this CPU, measured.

A GGUF is quantised for size: the default 0.5B is mostly Q5_0 (its 896-wide rows do
not fit the K-quants' 256 blocks). llama.cpp reads a prompt through that type's
matrix kernels, and on a CPU without fast ones the same weights widened to 8 bits
(Q8_0) or 16 bits (F16) read the prompt sooner: on a 2-core AMD EPYC (AVX2, no
AVX-512) the first token of a dev prompt came after 1.41 s as shipped, 1.10 s as Q8_0
and 0.81 s as F16, whole answers in 2.30, 1.93 and 1.99 s, and 59 of 61 dev answers
were the same word for word (the answer figures were identical). Where the CPU has
native bf16 instructions BF16 is tried too (on a 2-core AMD EPYC with AVX-512 BF16 its
probe answers came in 0.72-0.87 s against F16's 0.93-0.95 s); elsewhere bf16 would be
emulated, so it is not tried. Widening keeps every value the file holds (up to
F16/BF16/Q8_0 rounding), so it is a runtime, not another model.

Which form wins depends on the CPU, so each is timed here on fixed probe prompts (the
answer format, numbered source sentences, the instructions cached as in serving) and the
one with the earliest first token wins unless its whole answer is more than
``ANSWER_SLACK`` slower than the fastest. A form whose probe answers disagree with the
shipped weights' (other sentences cited, other numbers or words) is not taken. The
choice is cached beside the file, per file version, CPU, llama.cpp version and llama.cpp
settings, the losing conversions deleted (one process measures at a time: a file lock);
``FOOTNOTE_LLM_WEIGHTS`` forces one. Files already 8-bit or wider are used as they are
(timed once all the same, for the crash check below).

A form can crash llama.cpp outright on some CPUs (see :mod:`retrieval.models.isolated`),
so the loader times each form in a child process: a crash is recorded as that form's
result, and the serving process only loads a form that was seen to answer. A form that
crashes is timed again without llama.cpp's extra kernels (AMX tiles, repacked rows: the
"plain" kernels), and is loaded that way if it wins; a model not yet measured (``footnote
serve`` answers before it has timed the forms) runs on the plain kernels until it is.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from retrieval.errors import ModelError
from retrieval.measured import KeyedJson
from retrieval.models.cpu import CpuInfo, cpu_info, rss_mb
from retrieval.models.isolated import Crashed, in_child
from retrieval.models.llm import Kernels, LanguageModel

log = logging.getLogger("footnote.llm")

Weights = Literal["as-shipped", "q8_0", "f16", "bf16"]
WeightsChoice = Literal["auto", "as-shipped", "q8_0", "f16", "bf16"]
WIDENED: tuple[Weights, ...] = ("q8_0", "f16", "bf16")  # every form a conversion can have
ANSWER_SLACK = 1.10  # the earliest first token wins unless its answer is >10 % slower than the fastest
PLAIN_NOTE = "without llama.cpp's extra kernels (they crashed here)"
CACHE_SUFFIX = ".weights.json"  # beside the GGUF: <stem>.weights.json

Load = Callable[[Path], LanguageModel]
Convert = Callable[[Path, Path, str], None]
Clock = Callable[[], float]


@dataclass(frozen=True)
class ProbeCheck:
    """How a form of the weights (or drafting) is timed and judged, supplied by whoever owns
    the answer format (``retrieval.answer.ANSWER_PROBE``): the model code knows no prompts.

    ``run(model, clock)`` answers fixed probe prompts and gives the median first-token and
    answer seconds and the answers; ``agree(a, b)`` says whether two answers to one probe
    say the same."""

    run: Callable[[LanguageModel, Clock], tuple[float, float, list[str]]]
    agree: Callable[[str, str], bool]


@dataclass(frozen=True)
class WeightsTrial:
    weights: str
    first_token_s: float
    answer_s: float
    same_answers: bool  # its probe answers agree with the shipped weights' (``ProbeCheck.agree``)
    crashed: str = ""  # how its trial ended the process (a signal), if it did: never taken
    memory_mb: float = 0.0  # what the loaded model added to its process's resident memory
    kernels: Kernels = "default"  # "plain": timed without llama.cpp's extra kernels, which crashed it here

    def describe(self) -> str:
        if self.crashed:
            also = ", also without llama.cpp's extra kernels" if self.kernels == "plain" else ""
            return f"{self.weights} crashed here ({self.crashed}{also}): not taken"
        timed = f"{self.weights} first token {self.first_token_s:.2f} s, answer {self.answer_s:.2f} s"
        timed += ", plain kernels" if self.kernels == "plain" else ""
        timed += f", {self.memory_mb:.0f} MB" if self.memory_mb else ""
        return timed + ("" if self.same_answers else " (answers differ: not taken)")


@dataclass(frozen=True)
class WeightsReport:
    """What the language model runs on, and why (printed by status and bench)."""

    chosen: str
    path: Path
    how: str  # "forced by FOOTNOTE_LLM_WEIGHTS", "measured", "cached measurement", "already 8-bit or wider"
    trials: tuple[WeightsTrial, ...] = ()
    kernels: Kernels = "default"  # how it is loaded: "plain" where llama.cpp's extra kernels crashed

    def describe(self) -> str:
        tried = ", ".join(t.describe() for t in self.trials)
        chosen = f"{self.chosen}, {PLAIN_NOTE}" if self.kernels == "plain" else self.chosen
        return f"{chosen} ({self.how}{': ' + tried if tried else ''})"


def kernels_of(trials: Sequence[WeightsTrial], weights: str) -> Kernels | None:
    """The kernels ``weights`` answered with in ``trials``; None when it did not answer there."""
    return next((t.kernels for t in trials if t.weights == weights and not t.crashed), None)


def widened_forms(cpu: CpuInfo | None = None, *, backend_bf16: bool = True) -> tuple[Weights, ...]:
    """The widened forms worth timing here: BF16 only where the CPU computes it natively and
    llama.cpp was built to (``backend_bf16``; a generic build would emulate it)."""
    cpu = cpu or cpu_info()
    return ("q8_0", "f16", "bf16") if cpu.native_bf16 and backend_bf16 else ("q8_0", "f16")


def widenable(file_type: int | None) -> bool:
    """Whether the GGUF's ``general.file_type`` is narrower than 8 bits (F32 0, F16 1,
    Q8_0 7 and BF16 32 are not; an unknown type is left alone)."""
    return file_type is not None and file_type not in (0, 1, 7, 32)


def _version_of(src: Path) -> str:
    """Which version of the file this is: a model replaced under the same name gets new conversions."""
    st = src.stat()
    return hashlib.sha1(f"{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:8]


def converted_path(src: Path, weights: str) -> Path:
    return src if weights == "as-shipped" else src.with_name(f"{src.stem}.{weights}-{_version_of(src)}.gguf")


def cache_path(src: Path) -> Path:
    return src.with_name(src.stem + CACHE_SUFFIX)


def pick(trials: Sequence[WeightsTrial], allowance_mb: float | None = None, replacing: str | None = None) -> str:
    """The earliest first token among the forms that answer like the shipped weights, fit
    in ``allowance_mb`` (the smallest when none does), and whose whole answer is within
    ``ANSWER_SLACK`` of the fastest of those. ``replacing``: the form loaded in this process
    now, which the pick replaces: its memory is part of the allowance."""
    ok = [t for t in trials if t.same_answers and not t.crashed]
    if allowance_mb is not None:
        allowance_mb += next((t.memory_mb for t in trials if t.weights == replacing), 0.0)
        fits = [t for t in ok if t.memory_mb <= allowance_mb]
        if not fits:
            smallest = min(ok, key=lambda t: t.memory_mb)
            log.warning(
                "no form of the weights fits the memory left (%.0f MB of FOOTNOTE_MEMORY_MB): %s takes %.0f MB",
                allowance_mb,
                smallest.weights,
                smallest.memory_mb,
            )
            fits = [smallest]
        ok = fits
    fastest = min(t.answer_s for t in ok)
    return min((t for t in ok if t.answer_s <= fastest * ANSWER_SLACK), key=lambda t: t.first_token_s).weights


def choice_key(src: Path, version: str, tuning: str) -> str:
    """What a measurement of this file holds for: its version, the CPU, llama.cpp and its settings."""
    return f"{src.name}|{_version_of(src)}|{cpu_info().key()}|llama.cpp {version}|{tuning}"


def choose_weights(
    src: Path,
    choice: WeightsChoice,
    *,
    file_type: Callable[[], int | None],
    load: Load,
    convert: Convert,
    version: str,
    check: ProbeCheck,
    tuning: str = "",
    clock: Clock = time.perf_counter,
    forms: Sequence[Weights] | None = None,
    isolate_s: float | None = None,
    allowance_mb: float | None = None,
    replacing: str | None = None,
    plain: Load | None = None,
) -> WeightsReport:
    """The setting when it forces a form; else the cached measurement; else measure.

    ``tuning`` names the llama.cpp settings (threads, batch, flash attention) the timings
    depend on; ``forms`` are the widened forms to time (:func:`widened_forms` here). With
    ``isolate_s`` each form is converted and timed in a child process of its own, given at
    most that many seconds (``load``, ``convert`` and ``check`` must then pickle): a form
    that crashes it is recorded and never taken. ``allowance_mb``: the memory the model may
    add to this process (see :func:`pick`), beside the form ``replacing`` it replaces.
    ``plain`` loads without llama.cpp's extra kernels: a form that crashes under ``load`` is
    timed again with it. Never fails for want of a conversion."""
    forms = tuple(forms) if forms is not None else widened_forms()
    with locked(src):  # two processes starting at once: one measures, the other reads its result
        if choice != "auto":
            kernels = measured_kernels(src, version=version, tuning=tuning, forms=forms, weights=choice)
            return _forced(src, choice, file_type, convert, kernels or "default")
        kept = cached_weights(
            src, convert, version=version, tuning=tuning, forms=forms, allowance_mb=allowance_mb, replacing=replacing
        )
        if kept is not None:
            return kept
        cache, key = KeyedJson(cache_path(src)), _cache_key(src, version, tuning, forms)
        if not widenable(file_type()):
            # Nothing to widen, yet it may crash llama.cpp here as a narrow file may: timed alone.
            trials = measure(src, load, convert, clock, (), check, isolate_s=isolate_s, plain=plain)
            chosen, how = "as-shipped", "already 8-bit or wider"
        else:
            names = ", ".join(f.upper() for f in forms)
            log.info("timing %s as shipped and as %s on this CPU (once, ~40 s)", src.name, names)
            trials = measure(src, load, convert, clock, forms, check, isolate_s=isolate_s, plain=plain)
            chosen, how = pick(trials, allowance_mb, replacing), "measured"
        _drop_conversions(src, keep=converted_path(src, chosen))
        if how != "measured" or len(trials) == 1 + len(forms):  # a form that failed is tried again next time
            cache.save(key, {"chosen": chosen, "trials": [asdict(t) for t in trials]})
        kernels = kernels_of(trials, chosen) or "default"
        report = WeightsReport(chosen, converted_path(src, chosen), how, tuple(trials), kernels)
        log.info("language model weights: %s", report.describe())
        return report


def _cache_key(src: Path, version: str, tuning: str, forms: Sequence[Weights]) -> str:
    # The forms are part of the key: a measurement that never timed one is not the answer;
    # "mem": one that never measured memory neither.
    return f"{choice_key(src, version, tuning)}|forms={','.join(forms)}|mem"


def cached_weights(
    src: Path,
    convert: Convert,
    *,
    version: str,
    tuning: str,
    forms: Sequence[Weights],
    allowance_mb: float | None = None,
    replacing: str | None = None,
) -> WeightsReport | None:
    """The form an earlier measurement chose for this file, CPU, llama.cpp and settings; None
    when there is none (reads, never measures)."""
    data = KeyedJson(cache_path(src)).load(_cache_key(src, version, tuning, forms))
    with contextlib.suppress(KeyError, TypeError, ValueError):
        if data is not None and data["chosen"] in ("as-shipped", *forms):
            kept = tuple(WeightsTrial(**t) for t in data["trials"])
            # Chosen again from the trials: the memory left may differ from the last start's.
            chosen = pick(kept, allowance_mb, replacing) if kept else data["chosen"]
            kernels = kernels_of(kept, chosen) or "default"
            return _available(src, chosen, convert, "cached measurement", kept, kernels)
    return None


def measured_kernels(src: Path, *, version: str, tuning: str, forms: Sequence[Weights], weights: str) -> Kernels | None:
    """The kernels an earlier measurement here saw ``weights`` answer with; None when no
    measurement here saw it answer (reads, never measures)."""
    data = KeyedJson(cache_path(src)).load(_cache_key(src, version, tuning, forms))
    with contextlib.suppress(KeyError, TypeError, ValueError):
        if data is not None:
            return kernels_of([WeightsTrial(**t) for t in data["trials"]], weights)
    return None


def _forced(
    src: Path, choice: str, file_type: Callable[[], int | None], convert: Convert, kernels: Kernels = "default"
) -> WeightsReport:
    if choice != "as-shipped" and not widenable(file_type()):
        log.warning(
            "FOOTNOTE_LLM_WEIGHTS=%s on a GGUF already 8-bit or wider (or of unknown type): used as it is", choice
        )
        return WeightsReport("as-shipped", src, "as shipped: nothing to widen", kernels=kernels)
    if choice == "bf16" and not cpu_info().native_bf16:
        log.warning("FOOTNOTE_LLM_WEIGHTS=bf16 on a CPU without native bf16: expect it to be slow")
    return _available(src, choice, convert, "forced by FOOTNOTE_LLM_WEIGHTS", kernels=kernels)


def _available(
    src: Path,
    weights: str,
    convert: Convert,
    how: str,
    trials: tuple[WeightsTrial, ...] = (),
    kernels: Kernels = "default",
) -> WeightsReport:
    """The form, converted again if its file went missing; the shipped file if that fails."""
    try:
        return WeightsReport(weights, _ensure(src, weights, convert), how, trials, kernels)
    except ModelError as exc:
        log.warning("language model weights %s not usable (%s): running the file as shipped", weights, exc)
        shipped = (kernels_of(trials, "as-shipped") or "default") if trials else kernels
        return WeightsReport("as-shipped", src, f"{weights} not usable: as shipped", trials, shipped)


def _drop_conversions(src: Path, keep: Path) -> None:
    """Conversions that lost, or of an older version of the file: 0.7-1.3 GB each for nothing."""
    for w in WIDENED:
        for old in src.parent.glob(f"{glob.escape(src.stem)}.{w}-*.gguf"):
            if old != keep:
                old.unlink(missing_ok=True)
                old.with_name(old.stem + ".lookup.json").unlink(missing_ok=True)  # its drafting measurement


@contextlib.contextmanager
def locked(src: Path) -> Iterator[None]:
    """One process measures a model file at a time (the others wait, then read its result)."""
    try:
        f = src.with_name(src.stem + ".weights.lock").open("a")
    except OSError:  # a read-only models folder: nothing is written there either
        yield
        return
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def measure(
    src: Path,
    load: Load,
    convert: Convert,
    clock: Clock,
    forms: Sequence[Weights],
    check: ProbeCheck,
    *,
    isolate_s: float | None = None,
    plain: Load | None = None,
) -> list[WeightsTrial]:
    """Time the shipped weights and each widened form on the probes (one model loaded at a
    time); answers are compared with the first form that answered (the shipped one, unless
    it crashed). A form that crashes is timed again loaded by ``plain``, if given."""
    trials: list[WeightsTrial] = []
    reference: list[str] | None = None
    for w in ("as-shipped", *forms):
        kernels: Kernels = "default"
        try:
            try:
                first, total, answers, memory = _timed(src, w, load, convert, check, clock, isolate_s)
            except Crashed as exc:
                if plain is None:
                    raise
                log.warning("language model weights %s crashed here (%s): timing it again with plain kernels", w, exc)
                kernels = "plain"
                first, total, answers, memory = _timed(src, w, plain, convert, check, clock, isolate_s)
        except Crashed as exc:
            log.warning("language model weights %s crashed here (%s): not taken", w, exc)
            trials.append(WeightsTrial(w, 0.0, 0.0, False, crashed=str(exc), kernels=kernels))
            continue
        except ModelError as exc:  # a failed conversion (disk full) is a result: that form is not taken
            log.warning("language model weights %s not usable here: %s", w, exc)
            if w == "as-shipped":
                raise
            continue
        reference = reference if reference is not None else answers
        same = all(check.agree(a, r) for a, r in zip(answers, reference, strict=True))
        trials.append(WeightsTrial(w, round(first, 3), round(total, 3), same, memory_mb=round(memory), kernels=kernels))
    if reference is None:
        crashes = "; ".join(t.describe() for t in trials)
        raise ModelError(f"the language model crashed on this CPU in every form of its weights tried ({crashes})")
    return trials


def _timed(
    src: Path, weights: str, load: Load, convert: Convert, check: ProbeCheck, clock: Clock, isolate_s: float | None
) -> tuple[float, float, list[str], float]:
    if isolate_s is None:
        return trial(src, weights, load, convert, check, clock)
    return in_child(trial, src, weights, load, convert, check, timeout_s=isolate_s)


def trial(
    src: Path, weights: str, load: Load, convert: Convert, check: ProbeCheck, clock: Clock = time.perf_counter
) -> tuple[float, float, list[str], float]:
    """Convert ``src`` to one form if need be, load it and answer the probes: the median
    first-token and answer seconds, the answers, and the MB the model added to the process
    once it had answered (its mapped weights, cache and buffers). The model is freed on
    return, before the next form is loaded."""
    path = _ensure(src, weights, convert)
    before = rss_mb()
    first, total, answers = check.run(load(path), clock)
    return first, total, answers, max(0.0, rss_mb() - before)


def _ensure(src: Path, weights: str, convert: Convert) -> Path:
    target = converted_path(src, weights)
    if not target.is_file():
        log.info("converting %s to %s (once)", src.name, weights)
        convert(src, target, weights)
    return target


def describe_cached_weights(models_dir: Path) -> str:
    """The forms the last measurements chose here, for `footnote status` (reads, never measures)."""
    lines = []
    for cache in sorted(models_dir.glob(f"*{CACHE_SUFFIX}")):
        data = KeyedJson(cache).load()
        try:
            kept = tuple(WeightsTrial(**t) for t in data["trials"]) if data is not None else None
        except (KeyError, TypeError):
            kept = None
        if data is None or kept is None:
            continue
        how = "measured" if len(kept) > 1 else "already 8-bit or wider"
        lines.append(
            f"{cache.name.removesuffix(CACHE_SUFFIX)}: {WeightsReport(data['chosen'], cache, how, kept).describe()}"
        )
    return "; ".join(lines) or "not measured yet on this machine; the first answer measures"
