"""The composition root: builds the core from settings, the one place settings become plain arguments.

Everything below takes its collaborators as arguments; this module decides which
real ones they are (Chroma on disk or a Chroma server, SQLite or the shared
manifest, a file lease or a shared one) and loads each model once per process.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from config.settings import Settings
from retrieval.answer import AnswerService
from retrieval.calibrate import Calibration, CalibrationCache, CalibrationConfig, Calibrator
from retrieval.chunk import ChunkerConfig
from retrieval.embed import Embedder, load_embedder
from retrieval.engine import Engine, EngineConfig
from retrieval.errors import ModelError
from retrieval.gate import DEFAULT_THRESHOLD, GateConfig
from retrieval.lease import ChromaLease, FileLease, Lease
from retrieval.links import LinkSigner, load_secret
from retrieval.llm import LanguageModel, OpenAICompatibleModel, load_model
from retrieval.manifest import Manifest, SqliteManifest
from retrieval.rerank import Reranker, load_reranker
from retrieval.rewrite import Rewriter
from retrieval.sandbox import ExtractionRunner
from retrieval.search import SearchConfig
from retrieval.store import ChromaStore


@dataclass(frozen=True)
class Storage:
    """Where one index lives: its vectors, its document records and its sync lease."""

    store: ChromaStore
    manifest: Manifest
    lease: Lease


def open_storage(data_dir: Path, chroma_url: str | None = None) -> Storage:
    """On-disk Chroma + SQLite + a file lease, or, with a server URL, all three shared by every replica."""
    store = ChromaStore(data_dir / "chroma", url=chroma_url)
    if store.shared:
        from retrieval.chroma_manifest import ChromaManifest

        owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        return Storage(store, ChromaManifest(store), ChromaLease(store, owner))
    return Storage(store, SqliteManifest(data_dir / "manifest.sqlite3"), FileLease(data_dir))


def build_engine(
    cfg: EngineConfig,
    embedder: Embedder,
    reranker: Reranker | None,
    storage: Storage,
    extract_timeout_s: float = 60.0,
) -> Engine:
    return Engine(
        cfg,
        embedder,
        reranker,
        store=storage.store,
        manifest=storage.manifest,
        lease=storage.lease,
        runner=ExtractionRunner(extract_timeout_s),
    )


class Runtime:
    """Lazily loads each model once per process. ``embedder`` replaces the configured one
    (the eval passes one that remembers its vectors)."""

    def __init__(self, settings: Settings, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self._rewrite_failure: ModelError | None = None  # a separate rewrite model that would not load
        if embedder is not None:
            self.__dict__["embedder"] = embedder  # what the cached property would have loaded

    @cached_property
    def embedder(self) -> Embedder:
        s = self.settings
        return load_embedder(runtime=s.embed_runtime, cache_dir=s.data_dir / "models")

    def chunker(self) -> ChunkerConfig:
        s = self.settings
        return ChunkerConfig(target=s.chunk_size, overlap=s.chunk_overlap, window=256)

    def search_config(self) -> SearchConfig:
        s = self.settings
        return SearchConfig(fusion=s.fusion, weight_bm25=s.weight_bm25, candidates=s.candidates)

    def gate_config(self) -> GateConfig:
        """The explicit FOOTNOTE_GATE_THRESHOLD, else the calibrated one (DEFAULT_THRESHOLD until there is one)."""
        s = self.settings
        if s.gate_threshold is not None:
            return GateConfig(s.gate_threshold, s.gate_coverage_weight, s.gate_sentence_weight)
        return GateConfig(
            DEFAULT_THRESHOLD, s.gate_coverage_weight, s.gate_sentence_weight, calibrated=self.calibrator.threshold
        )

    def calibration_config(self) -> CalibrationConfig:
        s = self.settings
        return CalibrationConfig(
            target_bluff=s.gate_target_bluff,
            refusal_budget=s.gate_refusal_budget,
            max_refusal=s.gate_max_refusal,
            coverage_weight=s.gate_coverage_weight,
            sentence_weight=s.gate_sentence_weight,
            in_domain=s.gate_probes,
        )

    @cached_property
    def calibrator(self) -> Calibrator:
        cache = CalibrationCache(Path(self.settings.data_dir) / "calibration.json")
        return Calibrator(self.engine.searcher, self.engine.lease.generation, cache, self.calibration_config())

    def calibration(self) -> Calibration | None:
        """The last finished calibration, or None when an explicit threshold turns it off."""
        return None if self.settings.gate_threshold is not None else self.calibrator.latest()

    def calibrate_in_background(self) -> None:
        """After a sync: recalibrate the gate in a thread (no-op with an explicit threshold)."""
        if self.settings.gate_threshold is None:
            self.calibrator.start()

    def engine_config(self) -> EngineConfig:
        s = self.settings
        return EngineConfig(
            docs_dir=s.docs_dir,
            chunker=self.chunker(),
            search=self.search_config(),
            max_file_bytes=int(s.max_file_mb * 1_000_000),
            ignore=s.ignore_globs(),
            ocr=s.ocr,
        )

    @cached_property
    def engine(self) -> Engine:
        s = self.settings
        reranker = load_reranker(s.reranker, s.weight_sentence, s.weight_section)
        storage = open_storage(s.data_dir, s.chroma_url)
        return build_engine(self.engine_config(), self.embedder, reranker, storage, s.extract_timeout_s)

    def _load_model(
        self, gguf: Path | None, url: str | None, packaged: str, n_ctx: int, prompt_lookup: str | None = None
    ) -> LanguageModel:
        s = self.settings
        return load_model(
            gguf,
            url,
            s.data_dir / "models",
            n_ctx=n_ctx,
            threads=s.llm_threads,
            timeout_s=s.llm_timeout_s,
            packaged=packaged,
            n_batch=s.llm_batch,
            flash_attn=s.llm_flash_attn,
            weights=s.llm_weights,
            prompt_lookup=prompt_lookup or s.llm_prompt_lookup,
            deadline_s=s.answer_deadline_s,
        )

    @cached_property
    def model(self) -> LanguageModel:
        s = self.settings
        return self._load_model(s.llm_gguf, s.llm_url, s.llm, s.llm_context)

    def rewrite_is_answer_model(self) -> bool:
        """Whether the rewriter is the answer model itself (nothing more to load)."""
        s = self.settings
        return s.rewrite == "answer-model" or (s.rewrite == s.llm and not s.llm_gguf and not s.llm_url)

    @cached_property
    def rewrite_model(self) -> LanguageModel:
        """The model that rewrites questions (FOOTNOTE_REWRITE): the answer model, or a packaged one
        beside it (a question, its thread's earlier questions and the rewrite in 2,048 tokens; a
        longer prompt is a ModelError, so that question is searched as asked). Beside it, it never
        drafts: a rewrite is mostly new words, and drafting them from the prompt cost time (the
        1.5B on a 2-core AMD EPYC with AVX-512: 1.60 s p50 drafted, 0.95 s not); its weights take
        the form FOOTNOTE_LLM_WEIGHTS says (auto: measured without drafts)."""
        if self.rewrite_is_answer_model():
            return self.model
        return self._load_model(None, None, self.settings.rewrite, 2048, prompt_lookup="off")

    def _rewrite_model_once(self) -> LanguageModel:
        """The rewrite model; a separate one that failed to load is not tried again on every
        question (assembling and hashing the 1.5B takes seconds) but until the next start."""
        if self._rewrite_failure is not None:
            raise self._rewrite_failure
        try:
            return self.rewrite_model
        except ModelError as exc:
            if not self.rewrite_is_answer_model():
                self._rewrite_failure = exc
            raise

    def rewriter(self) -> Rewriter | None:
        s = self.settings
        if s.rewrite == "off":
            return None
        # A rewrite adds at most a third of the answer deadline (and never more than 10 s) before the answer.
        return Rewriter(self._rewrite_model_once, deadline_s=min(10.0, s.answer_deadline_s / 3))

    def model_reachable(self) -> bool:
        """For /healthz: a model server answers its model list; an in-process model is loadable."""
        s = self.settings
        if s.llm_url:
            return OpenAICompatibleModel(s.llm_url).reachable()
        return s.llm_gguf is None or s.llm_gguf.is_file()

    @cached_property
    def links(self) -> LinkSigner:
        """Signs the viewer links citations carry, and checks them in /view."""
        s = self.settings
        secret = load_secret(s.data_dir, s.link_secret.get_secret_value() if s.link_secret else None)
        return LinkSigner(secret, s.link_ttl_days * 86400)

    @cached_property
    def answers(self) -> AnswerService:
        """The one answer service every surface (CLI, Slack) calls."""
        s = self.settings
        return AnswerService(
            self.engine.searcher,
            lambda: self.model,
            self.gate_config(),
            max_sources=s.max_sources,
            max_tokens=s.llm_max_tokens,
            max_sentences=s.max_sentences,
            docs_url=s.docs_url,
            docs_dir=s.docs_dir,
            viewer_url=s.public_url,
            sign_link=self.links.sign if s.public_url else None,  # only viewer links are signed
            rewriter=self.rewriter(),
        )
