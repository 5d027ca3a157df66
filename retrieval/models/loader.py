"""Loading the configured language model: a server, a GGUF file, or a packaged model.

An in-process GGUF runs on the form of its weights chosen for this CPU (see
:mod:`retrieval.models.weights`), drafting or not as measured (see
:mod:`retrieval.models.lookup`). Both are timed on the caller's probe
(:class:`~retrieval.models.weights.ProbeCheck`): this module knows no prompts.
"""

from __future__ import annotations

import functools
import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from retrieval.models.cpu import installed_version, rss_mb
from retrieval.models.files import PackagedModel, packaged_gguf
from retrieval.models.isolated import Crashed, in_child
from retrieval.models.llm import (
    Kernels,
    LanguageModel,
    LlamaCppModel,
    OpenAICompatibleModel,
    check_gguf,
    convert_gguf,
    gguf_file_type,
    llama_has_bf16,
    openai_server_app,
)
from retrieval.models.lookup import LookupChoice, LookupReport, cached_lookup, choose_lookup, lookup_trial
from retrieval.models.weights import (
    Load,
    ProbeCheck,
    WeightsChoice,
    WeightsReport,
    cached_weights,
    choice_key,
    choose_weights,
    measured_kernels,
    widened_forms,
)

log = logging.getLogger("footnote.llm")

NOT_MEASURED = "as shipped until measured"  # WeightsReport.how of a model loaded with measure=False


def load_model(
    gguf: Path | None,
    url: str | None,
    models_dir: Path,
    *,
    check: ProbeCheck,
    packaged: PackagedModel = "qwen-0.5b",
    n_ctx: int = 4096,
    threads: int | None = None,
    n_batch: int = 512,
    flash_attn: bool = False,
    weights: WeightsChoice = "auto",
    prompt_lookup: LookupChoice = "auto",
    timeout_s: float | None = None,
    deadline_s: float = 30.0,
    memory_mb: float | None = None,
    measure: bool = True,
    replacing: str | None = None,
) -> LanguageModel:
    """The configured model: a server URL wins, then a GGUF path, then a packaged model.

    ``check`` times the forms of an in-process model's weights and whether drafting pays
    (unless ``weights`` and ``prompt_lookup`` force them), each in a child process: a form
    that crashes llama.cpp on this CPU is never loaded here. ``memory_mb`` bounds this
    process: the form taken fits in what it leaves beside what is loaded already.

    ``measure=False`` never times anything: what was measured here before, else the weights
    as shipped without drafting (:func:`needs_measuring` then says so) on llama.cpp's plain
    kernels, once a child process has seen them write a token, so a server can answer at
    once and time the forms behind it; the model measured then replaces the form
    ``replacing`` loaded now, whose memory it may take."""
    if url:
        return OpenAICompatibleModel(url, timeout_s=timeout_s or deadline_s, deadline_s=deadline_s)
    if gguf is None:
        gguf = packaged_gguf(models_dir, packaged)

    load = LlamaLoad(n_ctx, threads, n_batch, flash_attn, deadline_s, drafts=prompt_lookup != "off")
    check_gguf(gguf)  # before its weights are timed or converted
    # A trial converts (~20 s), loads and answers the probes, each answer within the deadline.
    trial_s = 120 + 8 * deadline_s
    version = installed_version("llama_cpp_python")
    tuning = (
        f"threads={threads or os.cpu_count()} batch={n_batch} fa={flash_attn} "
        f"drafts={'off' if prompt_lookup == 'off' else 'on'}"
    )
    forms = widened_forms(backend_bf16=llama_has_bf16())
    allowance_mb = None if memory_mb is None else memory_mb - rss_mb()
    if not measure and weights == "auto":
        cached = cached_weights(
            gguf, convert_gguf, version=version, tuning=tuning, forms=forms, allowance_mb=allowance_mb
        )
        if cached is None:  # not yet seen to answer on this CPU: a crash in this process would end it
            first_answer(replace(load, kernels="plain"), gguf, timeout_s=trial_s)
        report = cached or WeightsReport("as-shipped", gguf, NOT_MEASURED, kernels="plain")
    else:
        report = choose_weights(
            gguf,
            weights,
            file_type=lambda: gguf_file_type(gguf),
            load=load,
            convert=convert_gguf,
            version=version,
            check=check,
            tuning=tuning,
            forms=forms,
            isolate_s=trial_s,
            allowance_mb=allowance_mb,
            replacing=replacing,
            plain=replace(load, kernels="plain"),
        )
    if (
        weights != "auto"
        and measured_kernels(gguf, version=version, tuning=tuning, forms=forms, weights=report.chosen) is None
    ):
        # Forced, and never seen to answer here: a token written in a child first.
        report = replace(report, kernels=answering_kernels(load, report.path, trial_s))
    load = replace(load, kernels=report.kernels)  # as measured: "plain" where the extra kernels crashed
    model = load(report.path)
    model.weights = report
    key = choice_key(report.path, version, tuning)
    if not measure and prompt_lookup == "auto":
        model.lookup = cached_lookup(report.path, key) or LookupReport(False, NOT_MEASURED)
        model.prompt_lookup = model.lookup.on
        return model
    in_own_process = functools.partial(in_child, lookup_trial, load, report.path, check, timeout_s=trial_s)
    model.lookup = choose_lookup(model, report.path, prompt_lookup, key, check, measure=in_own_process)
    return model


def answering_kernels(load: LlamaLoad, gguf: Path, timeout_s: float) -> Kernels:
    """The kernels ``gguf`` writes a token with in a child process: llama.cpp's default ones,
    else the plain ones; :class:`Crashed` when it crashes on both."""
    try:
        first_answer(replace(load, kernels="default"), gguf, timeout_s)
        return "default"
    except Crashed as exc:
        log.warning("%s: trying it without llama.cpp's extra kernels", exc)
    first_answer(replace(load, kernels="plain"), gguf, timeout_s)
    return "plain"


def openai_compatible_app(gguf: Path, n_ctx: int = 4096, threads: int | None = None) -> Any:
    """llama.cpp's OpenAI-compatible server (llama-cpp-python's) on ``gguf`` as an ASGI app,
    on the kernels it was seen to answer with here first (``FOOTNOTE_LLM_URL`` points at it)."""
    load = LlamaLoad(n_ctx, threads, 512, False, 60.0, drafts=False)
    kernels = answering_kernels(load, gguf, timeout_s=600)
    log.info("the model server's %s runs on llama.cpp's %s kernels", gguf.name, kernels)
    return openai_server_app(gguf, n_ctx, threads, kernels)


def first_answer(load: Load, gguf: Path, timeout_s: float) -> None:
    """Load ``gguf`` and write one token in a child process; :class:`~retrieval.models.isolated.Crashed`
    (a :class:`~retrieval.errors.ModelError`) when that ends the child, as an instruction this
    CPU lacks (a llama.cpp built on another machine) or a faulting kernel would."""
    try:
        in_child(_one_token, load, gguf, timeout_s=timeout_s)
    except Crashed as exc:
        raise Crashed(f"{gguf.name} crashes llama.cpp on this CPU ({exc})") from None


def _one_token(load: Load, gguf: Path) -> str:
    return load(gguf).complete([{"role": "user", "content": "Hi"}], 1)


def needs_measuring(model: LanguageModel) -> bool:
    """Whether ``model`` was loaded with ``measure=False`` on something not yet measured here."""
    weights: WeightsReport | None = getattr(model, "weights", None)
    lookup: LookupReport | None = getattr(model, "lookup", None)
    return any(r is not None and r.how == NOT_MEASURED for r in (weights, lookup))


@dataclass(frozen=True)
class LlamaLoad:
    """How an in-process GGUF is loaded: a value, so a child process can load it the same way."""

    n_ctx: int
    threads: int | None
    n_batch: int
    flash_attn: bool
    deadline_s: float
    drafts: bool
    kernels: Kernels = "default"

    def __call__(self, path: Path) -> LlamaCppModel:
        model = LlamaCppModel(
            path,
            n_ctx=self.n_ctx,
            threads=self.threads,
            n_batch=self.n_batch,
            flash_attn=self.flash_attn,
            deadline_s=self.deadline_s,
            kernels=self.kernels,
        )
        # Each form of the weights is timed as it will serve: drafts are checked in batches,
        # so a form with fast batch kernels gains and one without loses (probe answers on a
        # 2-core AMD EPYC: F16 1.86 s, Q8_0 2.26 s, as shipped 2.74 s with drafting;
        # 2.35, 2.12 and 2.14 s without).
        model.prompt_lookup = self.drafts
        return model
