"""The models: the embedder (sentence-transformers / ONNX Runtime), the language model
(llama.cpp, in process or a server), and what is measured once per machine to run them
fast (the embedding runtime, the form of the weights, whether drafting pays).

Each heavy library is imported in one module: ``embed`` (sentence-transformers,
PyTorch, ONNX Runtime), ``llm`` (llama_cpp). The weights are timed on a probe the
caller supplies (:class:`ProbeCheck`): nothing here knows Footnote's prompts.
"""

from __future__ import annotations

from pathlib import Path

from retrieval.models.cpu import CpuInfo, cpu_info, installed_version
from retrieval.models.e5 import E5Embedder
from retrieval.models.embed import (
    Embedder,
    OnnxCrossEncoder,
    RuntimeChoice,
    RuntimeChoiceReport,
    SentenceTransformerEmbedder,
    describe_cached_choice,
    describe_cached_e5,
    load_cross_encoder,
    load_e5,
    load_embedder,
    load_onnx_cross_encoder,
    model_folder,
)
from retrieval.models.files import MODELS, PackagedModel, default_gguf, packaged_gguf, seed_models
from retrieval.models.language import SUPPORTED, Detected, LanguageDetector
from retrieval.models.llm import (
    Constraint,
    Cursor,
    Grammar,
    LanguageModel,
    LlamaCppModel,
    Message,
    OnToken,
    OpenAICompatibleModel,
)
from retrieval.models.loader import load_model, needs_measuring, openai_compatible_app
from retrieval.models.lookup import LookupChoice, LookupReport, describe_cached_lookup
from retrieval.models.weights import Clock, ProbeCheck, WeightsChoice, WeightsReport, describe_cached_weights


def measurements(models_dir: Path, *, lean: bool = False) -> dict[str, str]:
    """What was measured on this machine (reads the caches, never measures): for `footnote status`."""
    return {
        "embedding_runtime": describe_cached_choice(models_dir),
        "multilingual_runtime": describe_cached_e5(models_dir, lean=lean),
        "llm_weights": describe_cached_weights(models_dir),
        "llm_prompt_lookup": describe_cached_lookup(models_dir),
    }


def limit_blas_threads() -> None:
    """numpy's BLAS on one thread, unless ``OPENBLAS_NUM_THREADS`` says otherwise.

    OpenBLAS threads spin on every core for a while after each vector product, and the
    embedding model's ONNX Runtime threads then wait for those cores: measured on 2 cores
    (AMD EPYC), a query's embedding inside search took 12.1 ms p50, 6.2 ms with one BLAS
    thread. Footnote's products are one query against the index (memory-bound), where a
    second BLAS thread gains nothing. Called once at start by the builder, not at import.
    """
    import os

    if os.environ.get("OPENBLAS_NUM_THREADS"):
        return
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


__all__ = [
    "MODELS",
    "SUPPORTED",
    "Clock",
    "Constraint",
    "CpuInfo",
    "Cursor",
    "Detected",
    "E5Embedder",
    "Embedder",
    "Grammar",
    "LanguageDetector",
    "LanguageModel",
    "LlamaCppModel",
    "LookupChoice",
    "LookupReport",
    "Message",
    "OnToken",
    "OnnxCrossEncoder",
    "OpenAICompatibleModel",
    "PackagedModel",
    "ProbeCheck",
    "RuntimeChoice",
    "RuntimeChoiceReport",
    "SentenceTransformerEmbedder",
    "WeightsChoice",
    "WeightsReport",
    "cpu_info",
    "default_gguf",
    "installed_version",
    "limit_blas_threads",
    "load_cross_encoder",
    "load_e5",
    "load_embedder",
    "load_model",
    "load_onnx_cross_encoder",
    "measurements",
    "model_folder",
    "needs_measuring",
    "openai_compatible_app",
    "packaged_gguf",
    "seed_models",
]
