"""The one place Footnote is wired: every part built from one :class:`Settings`, each once.

Below this module every collaborator is an argument. This module decides which real
ones they are (Chroma on disk or a Chroma server, SQLite or shared records, a file lease
or a shared one), loads each model once per process, and builds what ``footnote serve``
runs: the answer service, the scheduler, the Slack app and its intake. The CLI, the
benchmarks and the tests build through it, so each runs what production runs.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from slack_bolt import App
from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from bot.claims import CLAIMS, FirstDelivery, SharedClaims
from bot.delivery import Delivery
from bot.feedback import FeedbackStore
from bot.gaps import GapRecord
from bot.health import Health, index_health
from bot.intake import Answers, Intake
from bot.journal import Journal
from bot.metrics import Metrics
from bot.scheduler import SyncSchedule, make_trigger
from bot.scoping import ChannelScopes
from bot.serve import ModelLoad, ServeOptions, Service
from bot.slack_app import SlackBot, StatusOf, SyncOf
from bot.threads import BotIdentity, SlackThreads
from bot.viewer import render_view
from bot.warmup import FOLDER, Warmup
from config.settings import Settings
from retrieval.answer import ANSWER_PROBE, AnswerService, Linker, LinkSigner, Rewriter, Translator, load_secret
from retrieval.errors import ConfigError, FootnoteError, ModelError
from retrieval.index import Storage, open_storage
from retrieval.ingest import ChunkerConfig, ExtractionRunner, SourceFile, extractor_for
from retrieval.learn import LearnedPairs, MatchConfig
from retrieval.models import (
    Embedder,
    LanguageModel,
    OpenAICompatibleModel,
    PackagedModel,
    limit_blas_threads,
    load_e5,
    load_embedder,
    load_model,
    model_folder,
    needs_measuring,
)
from retrieval.search import (
    DEFAULT_POINT_THRESHOLD,
    DEFAULT_THRESHOLD,
    Calibration,
    CalibrationCache,
    CalibrationConfig,
    Calibrator,
    Engine,
    EngineConfig,
    GateConfig,
    Languages,
    Reranker,
    SearchConfig,
    coverage_weight,
    load_reranker,
    main_of,
    packaged_glossary,
)

log = logging.getLogger("footnote")

LEARNED = "learned"  # the records the confirmed pairs are kept in


@dataclass(frozen=True)
class SlackOptions:
    """How answers are delivered and how much of a thread is read (from settings)."""

    stream_interval_s: float = 1.5
    native_stream: bool = True
    thread_messages: int = 20
    thread_context_chars: int = 800


def build_engine(
    cfg: EngineConfig,
    embedder: Embedder,
    reranker: Reranker | None,
    storage: Storage,
    extract_timeout_s: float = 60.0,
    runner: ExtractionRunner | None = None,
    languages: Languages | None = None,
) -> Engine:
    """An engine on ``storage``: the product's wiring, also for tests on a real index."""
    return Engine(
        cfg,
        embedder,
        reranker,
        store=storage.store,
        manifest=storage.manifest,
        lease=storage.lease,
        runner=runner or ExtractionRunner(extract_timeout_s),
        languages=languages,
    )


def build_slack_bot(
    answers: Answers,
    bot_token: str,
    signing_secret: str,
    data_dir: Path,
    *,
    api_url: str | None = None,
    status: StatusOf | None = None,
    metrics: Metrics | None = None,
    first_delivery: Callable[[str], bool] | None = None,
    scopes: ChannelScopes | None = None,
    options: SlackOptions = SlackOptions(),
    gaps: GapRecord | None = None,
    warmup: Warmup | None = None,
    language_of: Callable[[str], str | None] = lambda _text: None,
    home_language: str | None = None,
    sync_now: SyncOf | None = None,
) -> SlackBot:
    """The Bolt app and everything its handlers hand work to: the Web API client, the
    thread reader, the journal, the delivery, the intake and the first-delivery claims.
    ``answers`` may be built on first use (serve's warm-up builds it behind the listener)."""
    client = WebClient(token=bot_token, base_url=api_url or WebClient.BASE_URL)
    client.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=3))
    me = BotIdentity(client)
    threads = SlackThreads(client, me, options.thread_messages, options.thread_context_chars)
    feedback = FeedbackStore(data_dir)
    journal = Journal(data_dir)
    scopes = scopes or ChannelScopes({})
    delivery = Delivery(client, me, options.stream_interval_s, options.native_stream)
    intake = Intake(
        answers,
        delivery,
        journal,
        threads,
        feedback,
        scopes,
        metrics,
        gaps=gaps,
        warmup=warmup,
        language_of=language_of,
    )
    app = App(signing_secret=signing_secret, client=client)
    first = FirstDelivery(first_delivery)
    return SlackBot(
        app,
        client,
        intake,
        journal,
        threads,
        feedback,
        scopes,
        first,
        status=status,
        gaps=gaps,
        home_language=home_language,
        sync_now=sync_now,
    )


class _OnFirstUse:
    """An answer service built when the first question needs it (serve listens before that)."""

    def __init__(self, build: Callable[[], AnswerService]) -> None:
        self._build = build

    def __getattr__(self, name: str) -> Any:
        return getattr(self._build(), name)


class Builder:
    """Builds each part from the settings when first asked, once per process.

    ``embedder`` replaces the configured one (the eval passes one that remembers its vectors).
    ``measure_at_load=False`` (serve) loads a language model not yet measured on this machine
    as shipped, at once; :meth:`measure_models` then times its forms and switches.
    """

    def __init__(self, settings: Settings, embedder: Embedder | None = None, *, measure_at_load: bool = True) -> None:
        limit_blas_threads()
        self.settings = settings
        self.measure_at_load = measure_at_load
        self._rewrite_failure: ModelError | None = None  # a separate rewrite model that would not load
        self.embedding_in_use: str | None = None  # which embedding model this process loaded (once it has)
        if embedder is not None:
            self.__dict__["embedder"] = embedder  # what the cached property would have loaded

    # -- the core ------------------------------------------------------------------------

    @cached_property
    def embedder(self) -> Embedder:
        s = self.settings
        choice = self.embedding_in_use = self.embedding_model()
        if choice == "multilingual-e5":
            return load_e5(s.data_dir / "models", s.embed_runtime, lean=s.memory_mb > 0)
        return load_embedder(
            model_folder(choice), runtime=s.embed_runtime, cache_dir=s.data_dir / "models", lean=s.memory_mb > 0
        )

    def embedding_model(self, languages: Mapping[str, int] | None = None) -> str:
        """FOOTNOTE_EMBED_MODEL, or for ``auto``: MiniLM while the drive is English (at least
        ``MAIN_SHARE`` of it: a stray file in another language does not count), the multilingual
        model once another language holds more (``languages``, else :meth:`drive_languages`,
        else as a scan of the folder's text files finds them). Measured on danish-dev: R@4 of
        direct questions 0.938 → 1.000, of chatty ones 0.594 → 0.625; on dev with one Danish
        licence note, MiniLM kept chatty R@4 at 0.750 where the multilingual model had 0.469
        (docs/measurements.md, "A stray document in another language")."""
        s = self.settings
        if s.embed_model != "auto":
            return s.embed_model
        if languages is None:
            languages = self.drive_languages() or self.languages.scan(s.docs_dir, s.ignore, read=self.parsed_text)
        return "minilm" if not languages or main_of(languages) == "en" else "multilingual-e5"

    def parsed_text(self, src: SourceFile) -> str | None:
        """A parsed file's text as the sync will read it (in its sandbox, within its size
        limit; OCR aside: a language is told from a file's text layer), or None."""
        ex = extractor_for(src.path)
        try:
            if ex is None or src.path.stat().st_size > self.settings.max_file_mb * 1_000_000:
                return None
            return self.extraction.extract(ex, src.rel, src.path.read_bytes()).text
        except (FootnoteError, OSError):
            return None

    def drive_languages(self) -> dict[str, int]:
        """The passages in each language as the last sync found them (its documents, for an
        index a version before this one made; {} before a sync)."""
        manifest = self.storage.manifest
        return manifest.passages_by_language() or manifest.languages()

    def chunker(self) -> ChunkerConfig:
        s = self.settings
        return ChunkerConfig(target=s.chunk_size, overlap=s.chunk_overlap, window=256)

    def search_config(self) -> SearchConfig:
        s = self.settings
        return SearchConfig(fusion=s.fusion, weight_bm25=s.weight_bm25, candidates=s.candidates)

    def gate_config(self) -> GateConfig:
        """The explicit FOOTNOTE_GATE_THRESHOLD / _POINT_THRESHOLD, else the calibrated ones (the
        defaults until there are any). An explicit assert threshold turns calibration off."""
        s = self.settings
        point = s.gate_point_threshold if s.gate_point_threshold is not None else DEFAULT_POINT_THRESHOLD
        if s.gate_threshold is not None:
            return GateConfig(s.gate_threshold, self.coverage_weight(), s.gate_sentence_weight, point=point)
        # With only the point threshold set, the calibration gives the assert threshold alone.
        calibrated = self.calibrator.thresholds if s.gate_point_threshold is None else self.calibrator.threshold
        return GateConfig(
            DEFAULT_THRESHOLD, self.coverage_weight(), s.gate_sentence_weight, calibrated=calibrated, point=point
        )

    def coverage_weight(self) -> float:
        """FOOTNOTE_GATE_COVERAGE_WEIGHT, else the weight measured for the embedding model in use."""
        s = self.settings
        if s.gate_coverage_weight is not None:
            return s.gate_coverage_weight
        return coverage_weight(self.embedding_in_use or self.embedding_model())

    def calibration_config(self) -> CalibrationConfig:
        s = self.settings
        return CalibrationConfig(
            target_bluff=s.gate_target_bluff,
            assert_quantile=s.gate_assert_quantile,
            point_quantile=s.gate_point_quantile,
            coverage_weight=self.coverage_weight(),
            sentence_weight=s.gate_sentence_weight,
            in_domain=s.gate_probes,
        )

    @cached_property
    def calibrator(self) -> Calibrator:
        cache = CalibrationCache(Path(self.settings.data_dir) / "calibration.json")
        return Calibrator(self.engine.searcher, self.engine.lease.generation, cache, self.calibration_config())

    def calibration(self) -> Calibration | None:
        """The last finished calibration, or None when an explicit threshold turns it off (or,
        while serve warms up, before the engine is built: a status read never loads a model)."""
        if self.settings.gate_threshold is not None or "engine" not in self.__dict__:
            return None
        return self.calibrator.latest()

    @cached_property
    def learned(self) -> LearnedPairs:
        """The team's confirmed (message, passage) pairs: every replica's (with a Chroma
        server), else a file in the data dir."""
        s = self.settings
        model = self.embedding_in_use or self.embedding_model()  # its cosines have their own scale
        cfg = MatchConfig.measured(model, s.learn_match, s.learn_match_top, s.learn_match_within)
        return LearnedPairs(self.storage.kept_records(LEARNED), cfg, model)

    def after_sync(self) -> None:
        """What follows a sync: pairs whose passage is gone retire (at once), the gate is
        recalibrated (in the background). A drive that now holds another language than its
        embedding model reads is said so in the log: the next start rebuilds it."""
        wanted = self.embedding_model(self.drive_languages())
        if self.embedding_in_use is not None and wanted != self.embedding_in_use:
            log.warning(
                "the drive's languages now call for the %s embedding model (in use: %s); the next start "
                "rebuilds the index with it",
                wanted,
                self.embedding_in_use,
            )
        try:
            self.learned.refresh(self.embedder.embed_queries)
            self.learned.retire(self.engine.searcher().snapshot)
        except Exception:  # a failing record store must not stop the calibration
            log.exception("could not check the learned pairs against the new index")
        self.calibrate_in_background()

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
            ignore=s.ignore,
            ocr=s.ocr,
        )

    @cached_property
    def storage(self) -> Storage:
        owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        return open_storage(self.settings.data_dir, self.settings.chroma_url, owner)

    @cached_property
    def engine(self) -> Engine:
        s = self.settings
        reranker = load_reranker(s.reranker, s.weight_sentence, s.weight_section)
        return build_engine(
            self.engine_config(),
            self.embedder,
            reranker,
            self.storage,
            runner=self.extraction,
            languages=self.languages,
        )

    @cached_property
    def languages(self) -> Languages:
        """Each document's and question's language (FOOTNOTE_LANGUAGES pins them); needs no model."""
        return Languages(pinned=self.settings.languages)

    @cached_property
    def extraction(self) -> ExtractionRunner:
        """Runs the extractors (in a sandbox): the sync's and the viewer's, which needs no model."""
        return ExtractionRunner(self.settings.extract_timeout_s)

    def _load_model(
        self,
        gguf: Path | None,
        url: str | None,
        packaged: PackagedModel,
        n_ctx: int,
        prompt_lookup: str | None = None,
        measure: bool = True,
        replacing: str | None = None,
    ) -> LanguageModel:
        s = self.settings
        return load_model(
            gguf,
            url,
            s.data_dir / "models",
            check=ANSWER_PROBE,
            n_ctx=n_ctx,
            threads=s.llm_threads,
            timeout_s=s.llm_timeout_s,
            packaged=packaged,
            n_batch=s.llm_batch,
            flash_attn=s.llm_flash_attn,
            weights=s.llm_weights,
            prompt_lookup="off" if prompt_lookup == "off" else s.llm_prompt_lookup,
            deadline_s=s.answer_deadline_s,
            memory_mb=s.memory_mb or None,
            measure=measure,
            replacing=replacing,
        )

    def _answer_model(self, measure: bool, replacing: str | None = None) -> LanguageModel:
        s = self.settings
        return self._load_model(s.llm_gguf, s.llm_url, s.llm, s.llm_context, measure=measure, replacing=replacing)

    def _separate_rewrite_model(self, measure: bool, replacing: str | None = None) -> LanguageModel:
        rewrite = self.settings.rewrite
        return self._load_model(None, None, rewrite, 2048, prompt_lookup="off", measure=measure, replacing=replacing)  # type: ignore[arg-type]

    @cached_property
    def model(self) -> LanguageModel:
        return self._answer_model(self.measure_at_load)

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
        if self.rewrite_is_answer_model() or self.settings.rewrite != "qwen-1.5b":
            return self.model
        return self._separate_rewrite_model(self.measure_at_load)

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

    @cached_property
    def translate_model(self) -> LanguageModel:
        """The model that translates questions and answers (FOOTNOTE_TRANSLATE): the answer model, or
        the packaged 1.5B beside it (never drafting: a translation is new words)."""
        s = self.settings
        if s.translate != "qwen-1.5b" or (s.llm == "qwen-1.5b" and not s.llm_gguf and not s.llm_url):
            return self.model
        return self._load_model(None, None, "qwen-1.5b", 2048, prompt_lookup="off", measure=self.measure_at_load)

    def translator(self) -> Translator | None:
        s = self.settings
        if s.translate == "off":
            return None
        # A translation each way may take a third of the answer deadline (never more than 10 s).
        return Translator(lambda: self.translate_model, deadline_s=min(10.0, s.answer_deadline_s / 3))

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

    def docs_folder(self) -> Path:
        """The folder the index belongs to (recorded by its first sync), else FOOTNOTE_DOCS_DIR:
        citations and the viewer point into it, whatever FOOTNOTE_DOCS_DIR says today."""
        recorded = self.storage.manifest.docs_folder()
        return Path(recorded) if recorded else self.settings.docs_dir

    @cached_property
    def answers(self) -> AnswerService:
        """The one answer service every surface (CLI, Slack) calls. Its links open the viewer on
        FOOTNOTE_PUBLIC_URL (signed), or the drive (FOOTNOTE_DOCS_URL); without either they are
        file paths, which the CLI prints and Slack never shows."""
        s = self.settings
        sign = self.links.sign if s.public_url else None
        return AnswerService(
            self.engine.searcher,
            lambda: self.model,
            self.gate_config(),
            links=Linker(s.docs_url, self.docs_folder(), s.public_url, sign),
            max_sources=s.max_sources,
            max_tokens=s.llm_max_tokens,
            max_sentences=s.max_sentences,
            rewriter=self.rewriter(),
            learned=self.learned,
            translator=self.translator(),
            glossary=packaged_glossary if s.glossary else None,
            translated_from_sentence=s.translated_answer == "sentence",
        )

    @cached_property
    def gap_record(self) -> GapRecord:
        """The record of questions and their outcomes (read by `footnote gaps`, even when recording is off)."""
        return GapRecord(self.settings.data_dir, self.settings.gaps_days)

    def gaps(self) -> GapRecord | None:
        """Where questions are recorded; None with FOOTNOTE_GAPS=off (then no file is made)."""
        return self.gap_record if self.settings.gaps else None

    # -- serving ---------------------------------------------------------------------------

    @cached_property
    def metrics(self) -> Metrics:
        return Metrics(self.storage.manifest.totals)

    @cached_property
    def schedule(self) -> SyncSchedule:
        return SyncSchedule(make_trigger(self.settings.sync_minutes, self.settings.sync_cron))

    def health(self, folders: Sequence[str] | None = None) -> Health:
        """The index's health (of the documents under ``folders``, for a scoped Slack channel)."""
        last_sync = self.engine.last_sync if "engine" in self.__dict__ else None  # no model loads for a status read
        return index_health(self.storage.manifest, last_sync, self.schedule.next_run(), self.calibration(), folders)

    def _claims(self) -> Callable[[str], bool] | None:
        """With a shared index, retries are recognised across replicas."""
        if not self.storage.store.shared:
            return None
        return SharedClaims(self.storage.records(CLAIMS), f"{socket.gethostname()}:{os.getpid()}").claim

    @cached_property
    def slack_bot(self) -> SlackBot:
        s = self.settings
        if s.slack_bot_token is None:
            raise ConfigError("SLACK_BOT_TOKEN is not set: create the app from config/slack_manifest.yaml first")
        return build_slack_bot(
            _OnFirstUse(lambda: self.answers),  # serve listens before the engine and models are loaded
            s.slack_bot_token.get_secret_value(),
            s.slack_signing_secret.get_secret_value() if s.slack_signing_secret else "",
            s.data_dir,
            api_url=s.slack_api_url,
            status=self.health,
            metrics=self.metrics,
            first_delivery=self._claims(),
            scopes=ChannelScopes(s.channel_folders, s.excluded_channels),
            options=SlackOptions(
                stream_interval_s=s.slack_stream_interval_s,
                native_stream=s.slack_native_stream,
                thread_messages=s.thread_messages,
                thread_context_chars=s.thread_context_chars,
            ),
            gaps=self.gaps(),
            warmup=self.warmup,
            language_of=self.languages.detect,
            home_language=s.languages[0] if len(s.languages) == 1 else None,
            sync_now=self.schedule.run_now,
        )

    @cached_property
    def warmup(self) -> Warmup:
        """Where `footnote serve` is in its warm-up (recorded for `footnote status`)."""
        return Warmup(self.settings.data_dir / FOLDER)

    def slack_client(self) -> WebClient:
        """A Web API client on the bot token, for the checks `footnote serve` makes at start."""
        s = self.settings
        if s.slack_bot_token is None:
            raise ConfigError("SLACK_BOT_TOKEN is not set: create the app from config/slack_manifest.yaml first")
        return WebClient(token=s.slack_bot_token.get_secret_value(), base_url=s.slack_api_url or WebClient.BASE_URL)

    def models_to_load(self) -> list[ModelLoad]:
        """The in-process models `footnote serve` loads before its first sync: the answer model,
        and a query-rewrite model beside it (FOOTNOTE_REWRITE), without which questions are
        searched as asked. Each with how to measure it later (see :meth:`measure_model`)."""
        s = self.settings
        loads: list[ModelLoad] = []
        if not s.llm_url:
            loads.append(ModelLoad("language model", lambda: self.model, lambda: self.measure_model("model")))
        if s.rewrite != "off" and not self.rewrite_is_answer_model():
            loads.append(
                ModelLoad(
                    "query-rewrite model", lambda: self.rewrite_model, lambda: self.measure_model("rewrite_model")
                )
            )
        return loads

    def measure_model(self, name: str) -> LanguageModel | None:
        """Time the forms of a model loaded as shipped (``measure_at_load=False``) and switch
        to the winner: the next question uses it (one being answered finishes on the old
        one). None when there was nothing to measure."""
        current = self.__dict__.get(name)
        if current is None or not needs_measuring(current):
            return None
        loaded = getattr(getattr(current, "weights", None), "chosen", None)  # its memory is the new one's to take
        build = self._answer_model if name == "model" else self._separate_rewrite_model
        better = build(True, loaded)
        self.__dict__[name] = better  # what the cached property returns from now on
        return better

    def serve_options(self, host: str, port: int | None, socket_mode: bool) -> ServeOptions:
        s = self.settings
        token = s.slack_app_token.get_secret_value() if socket_mode and s.slack_app_token else None
        return ServeOptions(
            host, port or s.http_port, token, journal_max_age_s=s.journal_max_age_s, shutdown_grace_s=s.shutdown_grace_s
        )

    def view(self, path: str, query: dict[str, str], lang: str | None = None) -> tuple[int, str]:
        """The citation viewer's page (``GET /view/<path>``) for a document of the index's folder."""
        extract = self.extraction.extract
        folder = self.docs_folder()
        return render_view(folder, path, query, extract, self.settings.ocr, verify=self.links.verify, lang=lang)

    def _prepare_to_answer(self) -> None:
        self.answers  # noqa: B018  # builds the engine (the embedder, the reranker) and the answer service

    def service(self) -> Service:
        """Everything `footnote serve` runs."""
        s = self.settings
        if not s.public_url and not s.docs_url:
            log.warning(
                "FOOTNOTE_PUBLIC_URL is not set: citations in Slack name the document and section, without a link; "
                "set it to the address Slack users reach this server at (e.g. https://footnote.example.com) "
                "to link each one to its place in the viewer"
            )

        return Service(
            engine_of=lambda: self.engine,
            bot=self.slack_bot,
            metrics=self.metrics,
            schedule=self.schedule,
            health=self.health,
            model_reachable=self.model_reachable,
            after_sync=self.after_sync,
            view=self.view,
            warmup=self.warmup,
            prepare=self._prepare_to_answer,
            signing_secret=s.slack_signing_secret.get_secret_value() if s.slack_signing_secret else None,
            prime=lambda: self.answers.prime(),
        )
