"""In-memory stand-ins for the index's collaborators, for tests about logic, not engines.

``MemoryStore``, ``MemoryManifest`` and ``MemoryLease`` keep the protocols of
``retrieval.index.store.VectorStore``, ``retrieval.index.manifest.Manifest`` and
``retrieval.index.lease.Lease``; ``HashEmbedder`` gives every text a fixed pseudo-random
unit vector (bookkeeping, not relevance); ``CountingEmbedder`` wraps any embedder
and counts the texts it was asked to embed. ``memory_engine`` wires them into a
real :class:`~retrieval.search.engine.Engine`. ``ScriptedModel`` stands in for a language
model; ``CrashingLoad`` for a llama.cpp whose kernels fault on some forms; ``ToyVocabulary`` for a model's token table under constrained decoding;
``FakeModelServer`` for an OpenAI-compatible model server; ``UnreachableRecords`` for
shared records whose Chroma server is down. The
Slack fakes live with the Slack tests.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.errors import ModelError, StoreUnreachable
from retrieval.index.manifest import DocRecord, totals
from retrieval.index.store import StoredIndex
from retrieval.ingest.chunk import ChunkerConfig
from retrieval.ingest.sandbox import ExtractionRunner
from retrieval.models.embed import Embedder
from retrieval.models.llm import Grammar, Message, OnToken
from retrieval.search.engine import Engine, EngineConfig
from retrieval.search.rerank import Reranker, SentenceReranker
from retrieval.search.searcher import SearchConfig
from retrieval.types import Chunk


class HashEmbedder:
    """A deterministic embedder: the same text always gets the same unit vector."""

    name = "hash-embedder"
    dimension = 16
    window = 256

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(self.dimension)
            out[i] = v / np.linalg.norm(v)
        return out

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)

    def count_tokens(self, text: str) -> int:
        return len(text.split()) + 2


class CountingEmbedder:
    """Any embedder, counting how many texts it was asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self.window = inner.window
        self.calls = 0
        self.with_bar: list[int] = []  # the sizes of the calls that asked for a progress bar

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        self.calls += len(texts)
        if progress:
            self.with_bar.append(len(texts))
        return self.inner.embed(list(texts))

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += len(texts)
        return self.inner.embed_queries(list(texts))

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)


class RenamedEmbedder(CountingEmbedder):
    """Any embedder under another model name: as if the team switched models."""

    def __init__(self, inner: Embedder, name: str = "another-model") -> None:
        super().__init__(inner)
        self.name = name


class GatedEmbedder(CountingEmbedder):
    """Blocks inside ``embed`` (once ``block`` is set, on a batch holding ``trigger``) until
    released, so a test can act in the middle of a sync."""

    def __init__(self, inner: Embedder, trigger: str) -> None:
        super().__init__(inner)
        self.trigger = trigger
        self.entered = threading.Event()
        self.release = threading.Event()
        self.block = False

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        if self.block and any(self.trigger in t for t in texts):
            self.entered.set()
            assert self.release.wait(30)
        return super().embed(texts)


@dataclass
class _Row:
    chunk: Chunk
    vector: np.ndarray


class MemoryStore:
    """The vector store as dictionaries; like Chroma, ``add`` never overwrites an id."""

    shared = False

    def __init__(self) -> None:
        self.chunks: dict[str, _Row] = {}
        self.sentences: dict[str, tuple[str, str, str, np.ndarray]] = {}  # id -> (chunk id, path, text, vector)

    def add(
        self,
        chunks: Sequence[Chunk],
        vectors: np.ndarray,
        sentences: Sequence[Sequence[str]],
        sentence_vectors: Sequence[np.ndarray],
    ) -> None:
        for c, v, texts, sv in zip(chunks, vectors, sentences, sentence_vectors, strict=True):
            self.chunks.setdefault(c.id, _Row(c, np.asarray(v, np.float32)))
            for i, (text, s) in enumerate(zip(texts, sv, strict=True)):
                self.sentences.setdefault(f"{c.id}:s{i}", (c.id, c.path, text, np.asarray(s, np.float32)))

    def vectors_for(self, paths: Sequence[str]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        want = set(paths)
        chunks = {r.chunk.text: r.vector for r in self.chunks.values() if r.chunk.path in want}
        sents = {text: v for _, path, text, v in self.sentences.values() if path in want}
        return chunks, sents

    def delete_paths(self, paths: Sequence[str]) -> None:
        gone = set(paths)
        self.chunks = {i: r for i, r in self.chunks.items() if r.chunk.path not in gone}
        self.sentences = {i: s for i, s in self.sentences.items() if s[1] not in gone}

    def chunk_ids(self, path: str | None = None) -> set[str]:
        return {i for i, r in self.chunks.items() if path is None or r.chunk.path == path}

    def count_by_path(self, paths: Sequence[str] | None = None) -> dict[str, int]:
        counts = Counter(r.chunk.path for r in self.chunks.values())
        return dict(counts) if paths is None else {p: counts[p] for p in paths if counts[p]}

    def load(self) -> StoredIndex:
        rows = sorted(self.chunks.values(), key=lambda r: (r.chunk.path, r.chunk.ordinal))
        pos = {r.chunk.id: k for k, r in enumerate(rows)}
        # Grouped by chunk in chunk order, each chunk's in sentence order: what ChromaStore.load returns.
        keyed = [(pos[s[0]], int(key.rsplit(":s", 1)[1]), s) for key, s in self.sentences.items() if s[0] in pos]
        sents = [s for _, _, s in sorted(keyed, key=lambda t: (t[0], t[1]))]
        dim = rows[0].vector.shape[0] if rows else 0
        return StoredIndex(
            [r.chunk for r in rows],
            np.stack([r.vector for r in rows]) if rows else np.zeros((0, 0), np.float32),
            np.stack([s[3] for s in sents]) if sents else np.zeros((0, dim), np.float32),
            np.asarray([pos[s[0]] for s in sents], dtype=np.int64),
        )


class MemoryManifest:
    """Document records in a dict; ``writes`` counts every call that changes something."""

    def __init__(self) -> None:
        self.records: dict[str, DocRecord] = {}
        self.folder: str | None = None
        self.writes = 0
        self._languages: dict[str, int] = {}
        self._passages: dict[str, int] = {}

    def all(self) -> dict[str, DocRecord]:
        return dict(sorted(self.records.items()))

    def get(self, path: str) -> DocRecord | None:
        return self.records.get(path)

    def put(self, rec: DocRecord) -> None:
        self.put_many([rec])

    def put_many(self, recs: list[DocRecord]) -> None:
        self.writes += bool(recs)
        self.records.update((r.path, r) for r in recs)

    def delete(self, path: str) -> None:
        self.writes += 1
        self.records.pop(path, None)

    def totals(self) -> dict[str, int]:
        return totals(self.records.values())

    def docs_folder(self) -> str | None:
        return self.folder

    def languages(self) -> dict[str, int]:
        return dict(self._languages)

    def set_languages(self, counts: Mapping[str, int]) -> None:
        self._languages = dict(counts)

    def passages_by_language(self) -> dict[str, int]:
        return dict(self._passages)

    def set_passages_by_language(self, counts: Mapping[str, int]) -> None:
        self._passages = dict(counts)

    def set_docs_folder(self, folder: str) -> None:
        self.writes += 1
        self.folder = folder


@dataclass
class MemoryLease:
    """A lease that one holder at a time gets; share one instance between engines to model two processes."""

    held: bool = False
    gen: int = 0
    acquired: list[bool] = field(default_factory=list)  # every attempt's outcome

    def acquire(self) -> bool:
        ok = not self.held
        self.held = self.held or ok
        self.acquired.append(ok)
        return ok

    def release(self) -> None:
        self.held = False

    def generation(self) -> int:
        return self.gen

    def bump(self) -> int:
        self.gen += 1
        return self.gen


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def memory_engine(
    docs: Path,
    embedder: Embedder | None = None,
    *,
    store: MemoryStore | None = None,
    manifest: MemoryManifest | None = None,
    lease: MemoryLease | None = None,
    clock: Callable[[], float] | None = None,
    reranker: Reranker | None = None,
    **cfg: Any,
) -> Engine:
    """A real Engine on in-memory collaborators (pass the same store/manifest/lease to model a second process)."""
    return Engine(
        EngineConfig(docs, ChunkerConfig(), SearchConfig(), **cfg),
        embedder or HashEmbedder(),
        reranker or SentenceReranker(1.5),
        store=store if store is not None else MemoryStore(),
        manifest=manifest if manifest is not None else MemoryManifest(),
        lease=lease if lease is not None else MemoryLease(),
        runner=ExtractionRunner(),
        clock=clock if clock is not None else time.monotonic,
    )


class ScriptedModel:
    """Returns a fixed reply (written by a function of the prompt if given) and records prompts."""

    name = "scripted"
    supports_grammar = True

    def __init__(self, reply: str | object) -> None:
        self.reply = reply
        self.calls: list[list[Message]] = []
        self.grammars: list[Grammar | None] = []
        self.drafts_asked: list[bool] = []  # each call's ``drafts``

    def complete(
        self,
        messages: list[Message],
        max_tokens: int,
        on_token: OnToken | None = None,
        grammar: Grammar | None = None,
        deadline_s: float | None = None,
        drafts: bool = True,
    ) -> str:
        self.calls.append(messages)
        self.drafts_asked.append(drafts)
        self.grammars.append(grammar)
        reply = self.reply(messages[-1]["content"]) if callable(self.reply) else str(self.reply)
        if on_token:
            on_token(reply)
        return reply


class NeverCalledModel:
    """A language model that must not be called (pointing and refusing never call one)."""

    name = "never-called"
    supports_grammar = True

    def complete(self, messages: list[Message], max_tokens: int, *args: object, **kwargs: object) -> str:
        raise AssertionError("the language model was called")


class FailingModel:
    """A language model that never finishes in time: every call fails as a real one's deadline does."""

    name = "failing"
    supports_grammar = True

    def __init__(self) -> None:
        self.calls = 0

    def complete(self, messages: list[Message], max_tokens: int, *args: object, **kwargs: object) -> str:
        self.calls += 1
        raise ModelError("the language model did not finish within 30 s")


class TimedModel(ScriptedModel):
    """A scripted model that moves a fake clock as if it read the prompt for ``first``
    seconds and wrote the rest of the reply in ``rest``."""

    def __init__(self, reply: str | object, clock: FakeClock, first: float, rest: float) -> None:
        super().__init__(reply)
        self.clock, self.first, self.rest = clock, first, rest

    def complete(
        self,
        messages: list[Message],
        max_tokens: int,
        on_token: OnToken | None = None,
        grammar: Grammar | None = None,
        deadline_s: float | None = None,
        drafts: bool = True,
    ) -> str:
        self.clock.advance(self.first)
        reply = super().complete(messages, max_tokens, on_token, grammar, deadline_s, drafts)
        self.clock.advance(self.rest)
        return reply


class DraftingModel(TimedModel):
    """A timed model whose writing takes ``drafted`` seconds (and says ``drafted_reply``,
    if given) while ``prompt_lookup`` is on."""

    def __init__(
        self, reply: str, clock: FakeClock, first: float, rest: float, drafted: float, drafted_reply: str | None = None
    ) -> None:
        super().__init__(reply, clock, first, rest)
        self.plain_rest, self.drafted, self.drafted_reply, self.plain_reply = rest, drafted, drafted_reply, reply
        self._on = False
        self.switches: list[bool] = []

    @property
    def prompt_lookup(self) -> bool:
        return self._on

    @prompt_lookup.setter
    def prompt_lookup(self, on: bool) -> None:
        self._on = on
        self.switches.append(on)
        self.rest = self.drafted if on else self.plain_rest
        self.reply = (self.drafted_reply or self.plain_reply) if on else self.plain_reply


class ToyVocabulary:
    """A model's token table in miniature: token id -> (bytes, ends generation); b"<eos>" ends."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces

    def __getitem__(self, token: int) -> tuple[bytes, bool]:
        return self.pieces[token], self.pieces[token] == b"<eos>"


@dataclass(frozen=True)
class CrashingLoad:
    """A model loader that, like llama.cpp on a CPU whose kernels fault, ends the process
    with SIGSEGV for the forms named in ``crash`` (a form is read from the file name, as the
    weights code writes it). A value, so a child process can use it; otherwise it gives a
    :class:`DraftingModel` answering ``reply``."""

    crash: frozenset[str]
    reply: str = "[1] Within 5 minutes."
    kernels: str = "default"  # what the loader is told: the test decides what crashes with which

    def __call__(self, path: Path) -> DraftingModel:
        form = path.name.split(".")[-2].split("-")[0] if path.name.count(".") > 1 else "as-shipped"
        if form in self.crash:
            import os
            import signal

            os.kill(os.getpid(), signal.SIGSEGV)
        return DraftingModel(self.reply, FakeClock(), 0.0, 0.0, 0.0)


def write_conversion(src: Path, dst: Path, weights: str) -> None:
    """A stand-in for ``convert_gguf`` that writes a marker file (picklable: module-level)."""
    dst.write_bytes(b"GGUF " + weights.encode())


class UnreachableRecords:
    """Shared records whose Chroma server does not answer: every call raises
    :class:`~retrieval.errors.StoreUnreachable`, as the store does then."""

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            raise StoreUnreachable(f"the index at http://chroma.invalid:8000 is not reachable ({name})")

        return call


class FakeModelServer:
    """An OpenAI-compatible chat server on 127.0.0.1 (port 0), for the client's logic: its
    URLs, retries, streams and errors. It answers ``answer``, streamed word by word when
    asked to stream (unless ``streams`` is off). ``fail_next`` requests get a 500 first;
    a request with a grammar gets a 400 while ``reject_grammar`` is set; ``refuse`` is a
    400 message for every request; ``stream_ends`` cuts a stream after that many words,
    without its end marker; ``stream_error`` sends an error event after the first word."""

    def __init__(self, answer: str = "It is 5 minutes [1].") -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.answer = answer
        self.paths: list[str] = []
        self.bodies: list[dict[str, Any]] = []
        self.fail_next = 0
        self.reject_grammar = False
        self.refuse: str | None = None
        self.streams = True
        self.stream_ends: int | None = None
        self.stream_error: str | None = None
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                outer.paths.append(self.path)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.bodies.append(body)
                if outer.reject_grammar and "grammar" in body:
                    self._send(400, {"error": {"message": "unknown field: grammar"}})
                elif outer.fail_next > 0:
                    outer.fail_next -= 1
                    self._send(500, {"error": "busy"})
                elif self.path != "/v1/chat/completions":
                    self._send(404, {"error": "no such route"})
                elif outer.refuse is not None and not (body.get("stream") and outer.stream_ends is not None):
                    self._send(400, {"error": {"message": outer.refuse, "code": "context_length_exceeded"}})
                elif body.get("stream") and outer.streams:
                    self._stream()
                else:
                    self._send(200, {"choices": [{"message": {"content": outer.answer}}]})

            def do_GET(self) -> None:
                outer.paths.append(self.path)
                self._send(200 if self.path == "/v1/models" else 404, {"data": []})

            def _stream(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                self.send_header("Connection", "close")
                self.end_headers()
                words = outer.answer.split(" ")
                self._event({"choices": [{"delta": {"role": "assistant"}}]})
                for i, word in enumerate(words):
                    if outer.stream_ends is not None and i >= outer.stream_ends:
                        return  # the connection closes without the end marker
                    self._event({"choices": [{"delta": {"content": word if i == 0 else " " + word}}]})
                    if outer.stream_error is not None:
                        self._event({"error": {"message": outer.stream_error}})
                        return
                self._event({"choices": [{"delta": {}, "finish_reason": "stop"}]})
                self.wfile.write(b"data: [DONE]\n\n")

            def _event(self, event: dict[str, Any]) -> None:
                self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
                self.wfile.flush()

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class MalformedPdfPage:
    """A pypdf page whose text operators carry a size pypdf cannot scale (a NaN in the matrix,
    a size that is no number), as malformed but readable PDFs do."""

    def extract_text(self, visitor_text: Callable[..., None]) -> str:
        visitor_text("Badges are collected ", [1, 0, 0, 1, 0, 0], [1, 0, 0, float("nan"), 0, 0], None, 12)
        visitor_text("at the front desk.", [1, 0, 0, 1, 0, 0], [1, 0], None, "x")
        return "Badges are collected at the front desk."
