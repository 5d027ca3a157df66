"""Language models (the only module that imports llama_cpp).

In-process llama.cpp by default (greedy, the GGUF's own chat template, threads =
cores); or any OpenAI-compatible chat server such as llama.cpp's. One llama.cpp
context serves one completion at a time, so access is serialised with a lock.
In-process, the next tokens can be drafted from the prompt (prompt-lookup decoding,
:class:`_PromptLookup`) where that is measured to answer sooner, never for a reply the
caller says is new words, and each kind of prompt
starts from its own saved instructions (:class:`_PromptStarts`), whatever ran in between.

Both accept a constraint on what the model can write (Footnote's answer format:
every sentence starts with a valid source number): GBNF text, or a :class:`Constraint`
that also offers a byte automaton. In-process, a constraint is applied as
constrained greedy decoding: the highest-scoring token whose bytes the automaton
accepts, found by checking candidates best first, which picks exactly the token
llama.cpp's grammar sampler would, without running a grammar over all 151k
vocabulary entries at every step (measured: ~50 ms per token on 2 cores). llama.cpp's
servers take the GBNF text; a server that rejects it, and accepts the request without
it, says so through ``supports_grammar``, so the answer is marked as unconstrained
instead of pretending. A server's answer is streamed like an in-process one, and cut
the same way when it loops. Every call has one deadline: a slow or dead model gives a
clear :class:`ModelError` within it, with the server's own reason where it gives one,
and a 4xx answer is never retried.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import http.client
import json
import logging
import os
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from retrieval.errors import ModelError
from retrieval.measured import Report

log = logging.getLogger(__name__)

Message = dict[str, str]
OnToken = Callable[[str], None]


class LanguageModel(Protocol):
    name: str
    supports_grammar: bool

    def complete(
        self,
        messages: list[Message],
        max_tokens: int,
        on_token: OnToken | None = None,
        grammar: Grammar | None = None,
        deadline_s: float | None = None,
        drafts: bool = True,
    ) -> str:
        """The reply to ``messages``. ``drafts=False`` says the reply is new words, not
        copied from the prompt (a translation): a model that drafts from its prompt does not."""
        ...


class Cursor(Protocol):
    """A position in a constrained format."""

    @property
    def can_end(self) -> bool: ...

    def feed(self, piece: bytes) -> Cursor | None: ...


class Constraint(Protocol):
    """A format the model must write in: as GBNF text and as a byte automaton."""

    def gbnf(self) -> str: ...

    def start(self) -> Cursor: ...


Grammar = str | Constraint
# "default": llama.cpp's own choice, which puts weights in "extra" buffers where its CPU
# backend has kernels for them (AMX tiles on Intel Xeons since Sapphire Rapids; rows of some
# quantisations repacked for AVX2). "plain": without those, the generic kernels.
# On a virtualised 2-core Xeon with AMX (2026-12-07) every form of the 0.5B's weights ended
# the process with SIGSEGV at its first prompt under "default" and answered under "plain".
Kernels = Literal["default", "plain"]
_PARAMS_LOCK = threading.Lock()


@contextlib.contextmanager
def _model_params(kernels: Kernels) -> Iterator[None]:
    """llama-cpp-python 0.3.36's ``Llama`` takes no argument for llama.cpp's
    ``use_extra_bufts``: for "plain" the defaults it reads while loading say so."""
    import llama_cpp.llama as high_level

    low = high_level.llama_cpp  # the ctypes module whose defaults ``Llama.__init__`` reads
    with _PARAMS_LOCK:  # a load of either kind waits while another one's defaults are swapped
        defaults = low.llama_model_default_params

        def plain() -> Any:
            params = defaults()
            params.use_extra_bufts = False
            return params

        if kernels == "plain":
            low.llama_model_default_params = plain
        try:
            yield
        finally:
            low.llama_model_default_params = defaults


def gbnf_of(grammar: Grammar) -> str:
    return grammar if isinstance(grammar, str) else grammar.gbnf()


@functools.lru_cache(maxsize=32)
def _compiled(grammar: str) -> Any:
    from llama_cpp import LlamaGrammar

    try:
        return LlamaGrammar.from_string(grammar, verbose=False)
    except Exception as exc:  # a bug in our grammar, not the asker's problem: say which
        raise ModelError(f"internal error: the answer grammar does not parse ({exc})") from exc


class LlamaCppModel:
    """A GGUF run in-process by llama-cpp-python."""

    supports_grammar = True

    def __init__(
        self,
        gguf: Path,
        n_ctx: int = 4096,
        threads: int | None = None,
        n_batch: int = 512,
        flash_attn: bool = False,
        deadline_s: float = 30.0,
        kernels: Kernels = "default",
    ) -> None:
        check_gguf(gguf)
        from llama_cpp import Llama

        try:
            with _model_params(kernels):
                self._llm = Llama(
                    model_path=str(gguf),
                    n_ctx=n_ctx,
                    n_threads=threads or os.cpu_count() or 1,
                    n_batch=n_batch,
                    n_ubatch=n_batch,
                    flash_attn=flash_attn,
                    verbose=False,
                )
        except Exception as exc:
            raise ModelError(f"llama.cpp could not load {gguf.name}: {exc}") from exc
        self.name = gguf.name
        self.kernels = kernels
        self.deadline_s = deadline_s
        self._lock = threading.Lock()
        self._pieces: _TokenPieces | None = None
        self._draft: _PromptLookup | None = None
        self._drafting = False  # whether replies that copy their prompt are drafted from it
        self.starts = _PromptStarts(self._llm)
        self.weights: Report | None = None  # how load_model chose this form of the weights
        self.lookup: Report | None = None  # how load_model decided prompt lookup

    @property
    def prompt_lookup(self) -> bool:
        """Whether tokens are drafted from the prompt (see :class:`_PromptLookup`)."""
        return self._drafting

    @prompt_lookup.setter
    def prompt_lookup(self, on: bool) -> None:
        with self._lock:
            if on and self._draft is None:
                self._draft = _PromptLookup(self._llm)
                # With drafts llama-cpp-python copies every evaluated token's logits (151,936
                # floats each) into ``Llama.scores``, indexed by position: its array holds
                # n_batch rows when built without logits_all, so a prompt longer than that
                # would overrun it. Its readers are logprobs and saved states (Footnote uses
                # neither) and the chat template's stop-at-end-token criterion, which is
                # handed a row and ignores it; so the copies go nowhere. Pinned to
                # llama-cpp-python 0.3.36 and tested on a prompt longer than the batch.
                self._llm.scores = _DISCARDED  # type: ignore[assignment]  # typed as the array it replaces
            self._drafting = on

    def complete(
        self,
        messages: list[Message],
        max_tokens: int,
        on_token: OnToken | None = None,
        grammar: Grammar | None = None,
        deadline_s: float | None = None,
        drafts: bool = True,
    ) -> str:
        limit = deadline_s or self.deadline_s
        end = time.monotonic() + limit
        if not self._lock.acquire(timeout=limit):
            raise ModelError(f"the language model is busy and did not start within {limit:.0f} s; try again")
        try:
            # A draft of new words is mostly wrong, and checking it costs a batch each step:
            # on a 2-core AMD EPYC (AVX-512 bf16) translations took twice as long drafted
            # (docs/measurements.md, "Translations are not drafted").
            # A LlamaDraftModel by its call signature: subclassing it would load llama.cpp on import.
            self._llm.draft_model = self._draft if drafts and self._drafting else None  # type: ignore[assignment]  # typed as its own draft class only
            # The prompt's logits are read once, for its last token; a draft asks for every
            # drafted token's (see _PromptLookup).
            self._llm._logits_all = False
            from llama_cpp import LogitsProcessorList

            greedy = None if grammar is None or isinstance(grammar, str) else self._greedy(grammar)
            kind = self.starts.before(messages)
            stream = self._llm.create_chat_completion(
                messages=messages,  # type: ignore[arg-type]  # plain role/content dicts: what its TypedDicts describe
                temperature=0.0,
                top_k=1,
                max_tokens=max_tokens,
                stream=True,
                grammar=_compiled(grammar) if isinstance(grammar, str) else None,
                logits_processor=LogitsProcessorList([greedy]) if greedy else None,
            )
            written = _Written(on_token)
            try:
                for event in stream:
                    delta = event["choices"][0]["delta"] if isinstance(event, dict) else {}
                    piece = str(delta.get("content") or "") if isinstance(delta, dict) else ""
                    if not written.add(piece):
                        break
                    if time.monotonic() > end:
                        raise ModelError(f"the language model did not finish within {limit:.0f} s")
            finally:
                close = getattr(stream, "close", None)  # a generator stopped early ends its own work
                if callable(close):
                    close()
            self.starts.after(kind)
            return written.text
        except ModelError:
            raise
        except Exception as exc:
            raise ModelError(f"the language model failed while answering: {exc}") from exc
        finally:
            self._lock.release()

    def _greedy(self, constraint: Constraint) -> ConstrainedGreedy:
        if self._pieces is None:
            self._pieces = _TokenPieces(self._llm)
        return ConstrainedGreedy(constraint.start(), self._pieces)


class _PromptLookup:
    """Drafts the next tokens from the prompt: prompt-lookup decoding.

    An answer copies its source sentences' words, so what comes next is often already in
    the prompt. llama-cpp-python's ``LlamaPromptLookupDecoding`` finds the last two tokens
    (else the last one) earlier in the context and proposes what followed them there, and
    the model checks the whole draft in one batch instead of one token per step. Every
    token is still the model's own greedy (and constrained) choice; only a near tie that
    the batch's arithmetic rounds the other way could differ, which is why
    :mod:`retrieval.models.lookup` keeps drafting only where the probe answers are identical.

    llama-cpp-python turns on logits for every token when a draft model is set, the
    prompt's too: 151,936 of them per prompt token, a third of the 0.5B's work for nothing.
    So ``complete`` turns that off for the prompt, and the first draft turns it on.
    """

    def __init__(self, llm: Any, tokens: int = 10) -> None:
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        self._llm = llm
        self._lookup = LlamaPromptLookupDecoding(max_ngram_size=2, num_pred_tokens=tokens)
        self.drafts = 0  # tokens proposed so far (for tests and curiosity)

    def __call__(self, input_ids: np.ndarray, /, **kwargs: Any) -> np.ndarray:
        self._llm._logits_all = True  # from here on every evaluated token is a draft to check
        draft = self._lookup(input_ids, **kwargs)
        self.drafts += len(draft)
        return draft


class _PromptStarts:
    """The start of each kind of prompt, kept so that no call pays again for instructions
    that another kind of call pushed out of llama.cpp's context.

    llama.cpp reuses the longest start a prompt shares with the tokens in its context, and the
    context holds only the last call's. A question's translation, its answer and each answer
    sentence translated back alternate, so each call evaluated its fixed instructions (and a
    translation its three examples, about 130 tokens) again. A prompt's kind is its
    messages but the last (the instructions and examples); after the first call of a kind,
    the context's first ``keep`` tokens are saved (their KV cache, a few MB for the 0.5B) under its kind,
    and loaded before the next call of that kind when another kind ran in between.
    llama.cpp then evaluates only where the new prompt departs from the saved one, exactly as
    when the same kind runs twice in a row. At most ``kinds`` are kept, the oldest dropped.
    """

    def __init__(self, llm: Any, keep: int = 320, kinds: int = 4) -> None:
        self._llm = llm
        self.keep = keep
        self.kinds = kinds
        self._saved: dict[str, tuple[np.ndarray, bytes]] = {}  # kind -> (its tokens, the context's state)
        self._last: str | None = None  # the kind whose tokens the context holds now
        self.loaded = 0  # starts loaded so far (for tests and curiosity)

    @staticmethod
    def kind(messages: list[Message]) -> str:
        return json.dumps(messages[:-1], sort_keys=True)

    def before(self, messages: list[Message]) -> str:
        """Load the saved start of this kind of prompt when the context holds another kind's; its kind."""
        kind = self.kind(messages)
        saved = self._saved.get(kind)
        if kind != self._last and saved is not None:
            self._safely(lambda: self._load(*saved))
        self._last = kind
        return kind

    def after(self, kind: str) -> None:
        """Save the start of the call just made (its first ``keep`` tokens) under ``kind``,
        unless that kind's start is saved already: the instructions it holds are the same, and
        a run of one kind (every answer on an English drive) need not copy them each time."""
        if kind in self._saved:
            self._saved[kind] = self._saved.pop(kind)  # the most recently used: dropped last
            return
        self._safely(lambda: self._save(kind))

    def _safely(self, step: Callable[[], None]) -> None:
        """A saved start only saves time: when saving or loading one fails, the answer stands,
        every start is dropped and the next prompt is evaluated whole."""
        try:
            step()
        except Exception as exc:
            log.warning("llama.cpp could not save or load a prompt's start (%s); evaluating prompts whole", exc)
            self._saved.clear()
            self._last = None
            self._llm.reset()

    def _save(self, kind: str) -> None:
        import llama_cpp

        llm = self._llm
        if llm.n_tokens > self.keep:  # the rest is this call's own question and answer: not kept
            llm._ctx.kv_cache_seq_rm(-1, self.keep, -1)
            llm.n_tokens = self.keep
        ctx = llm._ctx.ctx
        buf = (ctypes.c_uint8 * int(llama_cpp.llama_state_get_size(ctx)))()
        n = int(llama_cpp.llama_state_get_data(ctx, buf, len(buf)))
        self._saved[kind] = (llm.input_ids[: llm.n_tokens].copy(), bytes(buf)[:n])
        while len(self._saved) > self.kinds:
            self._saved.pop(next(iter(self._saved)))

    def _load(self, tokens: np.ndarray, state: bytes) -> None:
        import llama_cpp

        llm = self._llm
        buf = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        if int(llama_cpp.llama_state_set_data(llm._ctx.ctx, buf, len(state))) != len(state):
            llm.reset()  # a state that does not load: the prompt is evaluated whole, as before
            return
        llm.input_ids[: len(tokens)] = tokens
        llm.n_tokens = len(tokens)
        llm._requires_eval = True  # its logits are not live: llama-cpp-python evaluates at least one token again
        self.loaded += 1


class _Discarded:
    """Accepts llama-cpp-python's ``scores[a:b, :].reshape(-1)[::] = logits`` and keeps nothing."""

    def __getitem__(self, _key: Any) -> _Discarded:
        return self

    def reshape(self, *_shape: Any) -> _Discarded:
        return self

    def __setitem__(self, _key: Any, _value: Any) -> None:
        pass


_DISCARDED = _Discarded()


class _TokenPieces:
    """Each token's bytes and whether it ends generation, looked up once per token id."""

    def __init__(self, llm: Any) -> None:
        import llama_cpp

        self._llm = llm
        self._vocab = llama_cpp.llama_model_get_vocab(llm.model)
        self._is_eog = llama_cpp.llama_vocab_is_eog
        self._cache: dict[int, tuple[bytes, bool]] = {}

    def __getitem__(self, token: int) -> tuple[bytes, bool]:
        got = self._cache.get(token)
        if got is None:
            eog = bool(self._is_eog(self._vocab, token))
            got = self._cache[token] = (b"" if eog else self._llm.detokenize([token]), eog)
        return got


class ConstrainedGreedy:
    """A logits processor: every score but the best token the constraint admits set to -inf.

    Candidates are tried best first, a shortlist before the whole vocabulary, so the
    result is exactly greedy decoding under the constraint. A token that would end
    generation is admitted only where the format may end; a token with no bytes never.
    """

    SHORTLIST = 64

    def __init__(self, cursor: Cursor, pieces: Any) -> None:
        self.cursor = cursor
        self._pieces = pieces

    def __call__(self, _input_ids: Any, scores: np.ndarray) -> np.ndarray:
        k = min(self.SHORTLIST, len(scores) - 1)
        top = np.argpartition(-scores, k)[:k]
        token = self._first_admitted(top[np.argsort(-scores[top])])
        if token is None:
            token = self._first_admitted(np.argsort(-scores))
        out = np.full_like(scores, -np.inf)
        if token is not None:  # none at all cannot happen with an end token in the vocabulary
            out[token] = 0.0
        return out

    def _first_admitted(self, order: np.ndarray) -> int | None:
        for t in order.tolist():
            piece, eog = self._pieces[t]
            if eog:
                if self.cursor.can_end:
                    return int(t)
                continue
            nxt = self.cursor.feed(piece) if piece else None
            if nxt is not None:
                self.cursor = nxt
                return int(t)
        return None


class OpenAICompatibleModel:
    """A chat-completions server (llama.cpp's ``llama-server`` or ``llama_cpp.server``)."""

    def __init__(
        self, url: str, timeout_s: float = 30.0, retries: int = 2, model: str = "default", deadline_s: float = 30.0
    ) -> None:
        self.url = url.rstrip("/")
        self.name = f"{model}@{self.url}"
        # Accepted forms: the server root, its /v1, or the full chat-completions URL.
        self._base = self.url.removesuffix("/chat/completions").removesuffix("/v1")
        self._model = model
        self.timeout_s = timeout_s
        self.retries = retries
        self.deadline_s = deadline_s
        self.supports_grammar = True  # until the server says otherwise

    @property
    def endpoint(self) -> str:
        return self.url if self.url.endswith("/chat/completions") else f"{self._base}/v1/chat/completions"

    def complete(
        self,
        messages: list[Message],
        max_tokens: int,
        on_token: OnToken | None = None,
        grammar: Grammar | None = None,
        deadline_s: float | None = None,
        drafts: bool = True,  # a server drafts as it was started to
    ) -> str:
        body: dict[str, Any] = {
            "model": self._model,
            "messages": messages,
            "temperature": 0.0,
            "top_k": 1,
            "max_tokens": max_tokens,
            # Streamed, as in-process: the person sees the answer grow, and a loop or the
            # deadline ends it where it stands instead of after max_tokens.
            "stream": True,
        }
        if grammar and self.supports_grammar:
            body["grammar"] = gbnf_of(grammar)
        end = time.monotonic() + (deadline_s or self.deadline_s)
        try:
            return self._ask(body, end, on_token)
        except _Unfinished:
            # llama_cpp.server reports a failure inside a stream (a prompt longer than its
            # context) by ending the stream; asked once more unstreamed, it says why.
            return self._ask({**body, "stream": False}, end, on_token)

    def _ask(self, body: dict[str, Any], end: float, on_token: OnToken | None) -> str:
        try:
            return self._read(self._open(body, end), end, on_token)
        except _Rejected as exc:
            if "grammar" not in body:
                raise ModelError(f"the model server at {self.url} refused the request: {exc}") from exc
        # Asked again without the grammar: only if the server then accepts is the grammar
        # what it refused. A request it refuses either way (a prompt longer than its
        # context) must not turn the grammar off for every later answer.
        body = {key: value for key, value in body.items() if key != "grammar"}
        try:
            response = self._open(body, end)
        except _Rejected as exc:
            raise ModelError(f"the model server at {self.url} refused the request: {exc}") from exc
        self.supports_grammar = False
        return self._read(response, end, on_token)

    def _open(self, body: dict[str, Any], end: float) -> Any:
        """POST with retries on connection errors and 5xx while the deadline allows; 4xx raise
        at once. Returns the open response."""
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            left = end - time.monotonic()
            if left <= 0:
                break
            req = urllib.request.Request(
                self.endpoint, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
            )
            try:
                return urllib.request.urlopen(req, timeout=min(self.timeout_s, left))
            except urllib.error.HTTPError as exc:
                if 400 <= exc.code < 500:
                    raise _Rejected(f"HTTP {exc.code}: {_error_text(exc)}") from exc
                last = exc
            except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as exc:
                last = exc
            pause = min(2.0, 0.25 * 2**attempt, max(0.0, end - time.monotonic()))
            if attempt < self.retries and pause > 0:
                time.sleep(pause)  # backoff between tries, bounded by the deadline
        raise ModelError(
            f"the model is not reachable: the server at {self.url} did not answer in time ({last}); "
            "answers resume when it is back"
        )

    def _read(self, response: Any, end: float, on_token: OnToken | None) -> str:
        """The answer's text: read as a stream of server-sent events, or whole from a server
        that answers a streamed request with one JSON body."""
        try:
            with response:
                if "text/event-stream" not in str(response.headers.get("Content-Type", "")):
                    text = _content(json.loads(response.read()), "message")
                    if text is None:
                        raise ModelError(f"the model server at {self.url} sent an answer Footnote cannot read")
                    if on_token and text:
                        on_token(text)
                    return text
                return self._events(response, end, on_token)
        except (ModelError, _Unfinished):
            raise
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise ModelError(f"the model server at {self.url} stopped while answering ({exc})") from exc

    def _events(self, response: Any, end: float, on_token: OnToken | None) -> str:
        written = _Written(on_token)
        for raw in response:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue  # blank separators, comments, event names
            data = line[5:].strip()
            if data == "[DONE]":
                break
            event = json.loads(data)
            if isinstance(event, dict) and event.get("error"):
                raise ModelError(f"the model server at {self.url} failed while answering: {_message(event)}")
            # None: an event without text (a usage report). A loop ends the reading, and
            # closing the response stops the server's work on it too.
            if not written.add(_content(event, "delta") or ""):
                break
            if time.monotonic() > end:
                raise ModelError(f"the model server at {self.url} did not finish within the answer's deadline")
        else:
            if not written.text:
                raise _Unfinished
            raise ModelError(f"the model server at {self.url} stopped in the middle of its answer")
        return written.text

    def reachable(self, timeout_s: float = 2.0) -> bool:
        """Whether the server answers its model list (for health checks)."""
        try:
            with urllib.request.urlopen(f"{self._base}/v1/models", timeout=timeout_s) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False


class _Rejected(Exception):
    """The server answered 4xx: asking again will not help."""


class _Unfinished(Exception):
    """A stream that ended before its first word without saying why."""


def _error_text(exc: urllib.error.HTTPError) -> str:
    """What the server said: its JSON error's message where it sent one."""
    try:
        raw = exc.read().decode("utf-8", "replace")
    except OSError:
        return str(exc.reason)
    try:
        return _message(json.loads(raw))[:300]
    except ValueError:
        return raw[:300]


def _message(body: Any) -> str:
    """The message of an OpenAI-style error body ({"error": {"message": …}}, or "error": "…")."""
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        error = error.get("message") or error.get("detail") or error
    return str(error)


def _content(body: Any, key: str) -> str | None:
    """A chat completion's text: ``choices[0][key]["content"]`` (key "message", or "delta" in a
    stream); None when the body has no such shape."""
    try:
        return str(body["choices"][0][key].get("content") or "")
    except (KeyError, IndexError, TypeError, AttributeError):
        return None


class _Written:
    """The text a model writes, piece by piece, in-process or from a server's stream: each
    piece handed on as it comes, and the writing ended where it falls into a loop."""

    def __init__(self, on_token: OnToken | None) -> None:
        self._on_token = on_token
        self._parts: list[str] = []
        self._tail = ""

    def add(self, piece: str) -> bool:
        """Keep ``piece`` (empty: nothing); False once the text loops (stop reading)."""
        if not piece:
            return True
        self._parts.append(piece)
        if self._on_token:
            self._on_token(piece)
        self._tail = (self._tail + piece)[-LOOP_CHARS:]
        return not looping(self._tail)

    @property
    def text(self) -> str:
        return "".join(self._parts)


LOOP_CHARS = 32  # see looping
_MARKUP = set("-|:=*_#. ")  # a table's rule or an underline repeats by design


def looping(tail: str) -> bool:
    """Whether text ending in ``tail`` has fallen into a loop: its last ``LOOP_CHARS``
    characters are one piece of at most four characters over and over. A small model
    sometimes writes one token until its budget runs out: on dev asked in Danish, the 0.5B
    answered one question with "1000…" for 156 tokens and 19.6 s, a reply no check could
    keep. Markup that repeats by design (a table's rule, dots) is not a loop."""
    if len(tail) < LOOP_CHARS:
        return False
    tail = tail[-LOOP_CHARS:]
    for n in range(1, 5):
        unit = tail[-n:]
        if not set(unit) <= _MARKUP and (unit * (LOOP_CHARS // n + 1)).endswith(tail):
            return True
    return False


def openai_server_app(gguf: Path, n_ctx: int, threads: int | None, kernels: Kernels) -> Any:
    """llama-cpp-python's OpenAI-compatible server (``python -m llama_cpp.server``) as an
    ASGI app, its model loaded on ``kernels``: its command line has no switch for
    llama.cpp's extra kernels, so its app is made here, as its ``__main__`` makes it."""
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    check_gguf(gguf)
    n_threads = threads or os.cpu_count() or 1
    model = ModelSettings(model=str(gguf), n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads, verbose=False)
    with _model_params(kernels):  # the model loads while the app is made
        return create_app(server_settings=ServerSettings(), model_settings=[model])


def llama_has_bf16() -> bool:
    """Whether this llama.cpp was built with native bf16 kernels (AVX512_BF16; compiled on
    the installing machine, so it has them where that CPU has)."""
    import llama_cpp

    try:
        info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
    except Exception:  # an older binding without it: assume the generic build
        return False
    return "AVX512_BF16 = 1" in info


def gguf_file_type(gguf: Path) -> int | None:
    """The GGUF's ``general.file_type`` (how its weights are quantised), read with the
    vocabulary only, not the weights."""
    from llama_cpp import Llama

    try:
        with _quiet_stderr():  # llama.cpp warns about the context of a vocabulary-only load
            return int(Llama(model_path=str(gguf), vocab_only=True, verbose=False).metadata["general.file_type"])
    except Exception:  # an old or odd file: leave its weights as they are
        return None


def convert_gguf(src: Path, dst: Path, weights: str) -> None:
    """Write ``src``'s weights widened to ``q8_0``, ``f16`` or ``bf16`` (atomically: a crash
    leaves no half file). For F16 and BF16 the token embeddings and the output matrix stay
    Q8_0: the output matrix is read at every generated token, and at 151k x 896 it is a
    third of the model (measured: F16 with a Q8_0 output answered sooner than F16 throughout)."""
    import ctypes

    import llama_cpp

    kinds = {
        "q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0,
        "f16": llama_cpp.LLAMA_FTYPE_MOSTLY_F16,
        "bf16": llama_cpp.LLAMA_FTYPE_MOSTLY_BF16,
    }
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = kinds[weights]
    params.allow_requantize = True  # the source is already quantised: its values are widened, not re-rounded
    params.nthread = os.cpu_count() or 1
    if weights in ("f16", "bf16"):
        params.output_tensor_type = llama_cpp.GGML_TYPE_Q8_0
        params.token_embedding_type = llama_cpp.GGML_TYPE_Q8_0
    tmp = dst.with_name(f"{dst.name}.part-{uuid.uuid4().hex[:12]}")  # not the pid: containers share pids
    try:
        with _quiet_stderr():
            rc = llama_cpp.llama_model_quantize(str(src).encode(), str(tmp).encode(), ctypes.byref(params))
        if rc != 0 or not tmp.is_file():
            raise ModelError(f"llama.cpp could not convert {src.name} to {weights} (code {rc})")
        os.replace(tmp, dst)
    except OSError as exc:
        raise ModelError(f"cannot write {dst}: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """llama.cpp prints a line per tensor to file descriptor 2 while converting."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def check_gguf(gguf: Path) -> None:
    """A clear error for a missing file or one that is not a GGUF, before llama.cpp reads it."""
    if not gguf.is_file():
        raise ModelError(f"model file not found: {gguf}")
    with gguf.open("rb") as f:
        if f.read(4) != b"GGUF":
            raise ModelError(f"{gguf} is not a GGUF model file (bad magic bytes)")
