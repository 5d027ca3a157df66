"""Whether prompt-lookup drafting answers sooner on this CPU, measured once per model file.

Drafting (see ``retrieval.models.llm._PromptLookup``) never changes what the model writes, only
how many tokens llama.cpp checks per step. Whether that saves time depends on the CPU:
checking a draft of ten tokens costs more than one step, and it pays only where a batch
is cheap per token and the drafts are often right. So the probe prompts of
:mod:`retrieval.models.weights` are answered without and with drafting, and drafting is kept
when its answers are the same and come at least ``MARGIN`` sooner (three probe answers
are a small sample: a win inside their noise should not decide for good). The result is
cached beside the weights file that serves (per file version, CPU, llama.cpp version and
settings) and goes with that file; ``FOOTNOTE_LLM_PROMPT_LOOKUP=on|off`` forces it. A
probe that fails is a result too: drafting stays off and is measured again next time.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal, Protocol, cast

from retrieval.errors import ModelError
from retrieval.measured import KeyedJson
from retrieval.models.isolated import Crashed
from retrieval.models.llm import LanguageModel
from retrieval.models.weights import Clock, Load, ProbeCheck, locked

log = logging.getLogger("footnote.llm")

LookupChoice = Literal["auto", "on", "off"]
CACHE_SUFFIX = ".lookup.json"
MARGIN = 1.05  # drafting is kept when the plain answers take at least 5 % longer


class Drafting(LanguageModel, Protocol):
    """A model that can draft tokens from its prompt (the in-process llama.cpp one)."""

    prompt_lookup: bool


@dataclass(frozen=True)
class LookupReport:
    """Whether the model drafts, and why (printed by status and bench)."""

    on: bool
    how: str  # "measured", "cached measurement", "forced by FOOTNOTE_LLM_PROMPT_LOOKUP"
    plain_s: float | None = None  # probe answer p50 without drafting
    drafted_s: float | None = None  # ... with drafting
    same_answers: bool = True

    def describe(self) -> str:
        state = "on" if self.on else "off"
        if self.plain_s is None or self.drafted_s is None:
            return f"{state} ({self.how})"
        differ = "" if self.same_answers else ", answers differ: not taken"
        return f"{state} ({self.how}: answer {self.drafted_s:.2f} s drafted vs {self.plain_s:.2f} s{differ})"


def cache_path(weights_file: Path) -> Path:
    return weights_file.with_name(weights_file.stem + CACHE_SUFFIX)


def choose_lookup(
    model: Drafting,
    weights_file: Path,
    choice: LookupChoice,
    key: str,
    check: ProbeCheck,
    clock: Clock = time.perf_counter,
    measure: Callable[[], LookupReport] | None = None,
) -> LookupReport:
    """Apply the setting, the cached measurement, or measure now; leaves the model set to it.

    ``measure`` times drafting elsewhere (the loader runs :func:`lookup_trial` in a child
    process); by default ``model`` itself is timed."""
    if choice != "auto":
        report = LookupReport(choice == "on", "forced by FOOTNOTE_LLM_PROMPT_LOOKUP")
    else:
        cache = KeyedJson(cache_path(weights_file))
        with locked(weights_file):  # two processes starting at once would time each other's load
            report = _cached(cache, key) or _measured(model, clock, check, measure)
            if report.how == "measured" or report.how.startswith("crashed"):
                cache.save(key, asdict(report))
    model.prompt_lookup = report.on
    log.info("prompt lookup: %s", report.describe())
    return report


def cached_lookup(weights_file: Path, key: str) -> LookupReport | None:
    """What an earlier measurement found for this file and key; None when there is none (reads only)."""
    return _cached(KeyedJson(cache_path(weights_file)), key)


def _cached(cache: KeyedJson, key: str) -> LookupReport | None:
    data = cache.load(key)
    with contextlib.suppress(TypeError):
        return LookupReport(**{**data, "how": "cached measurement"}) if data is not None else None
    return None


def lookup_trial(load: Load, weights_file: Path, check: ProbeCheck) -> LookupReport:
    """Load the weights and time drafting on the probes (run by the loader in a child)."""
    model = load(weights_file)
    if not hasattr(model, "prompt_lookup"):
        raise ModelError(f"{type(model).__name__} does not draft")
    return _measure(cast(Drafting, model), time.perf_counter, check)


def _measured(
    model: Drafting, clock: Clock, check: ProbeCheck, measure: Callable[[], LookupReport] | None
) -> LookupReport:
    if measure is None:
        return _measure(model, clock, check)
    try:
        return measure()
    except Crashed as exc:
        # The weights were timed drafting, so drafting is the mode seen to answer here.
        on = model.prompt_lookup
        log.warning("prompt lookup not measured: its trial crashed (%s); drafting %s", exc, "on" if on else "off")
        return LookupReport(on, f"crashed while measuring ({exc}): as the weights were timed")
    except ModelError as exc:
        return _not_measured(exc)


def _not_measured(exc: ModelError) -> LookupReport:
    log.warning("prompt lookup not measured (%s): off for now", exc)
    return LookupReport(False, f"not measured: {exc}")


def _measure(model: Drafting, clock: Clock, check: ProbeCheck) -> LookupReport:
    try:
        model.prompt_lookup = False
        _first, plain_s, plain = check.run(model, clock)
        model.prompt_lookup = True
        _first, drafted_s, drafted = check.run(model, clock)
    except ModelError as exc:  # a timed-out probe must not stop the model from serving
        return _not_measured(exc)
    # Drafted tokens are checked in a batch, whose arithmetic may round differently from
    # one token at a time: a near tie can flip. Exact equality errs towards plain decoding.
    same = drafted == plain
    on = same and drafted_s * MARGIN < plain_s
    return LookupReport(on, "measured", round(plain_s, 3), round(drafted_s, 3), same)


def describe_cached_lookup(models_dir: Path) -> str:
    """What the last measurements decided here, for `footnote status` (reads, never measures)."""
    lines = []
    for cache in sorted(models_dir.glob(f"*{CACHE_SUFFIX}")):
        data = KeyedJson(cache).load()
        with contextlib.suppress(TypeError):
            if data is not None:
                lines.append(f"{cache.name.removesuffix(CACHE_SUFFIX)}: {LookupReport(**data).describe()}")
    return "; ".join(lines) or "not measured yet on this machine; the first answer measures"
