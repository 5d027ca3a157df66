"""Language models (the only module that imports llama_cpp).

In-process llama.cpp by default (greedy, the GGUF's own chat template, threads =
cores); or any OpenAI-compatible chat server such as llama.cpp's. One llama.cpp
context serves one completion at a time, so access is serialised with a lock.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from retrieval.errors import ModelError

Message = dict[str, str]
OnToken = Callable[[str], None]


class LanguageModel(Protocol):
    name: str

    def complete(self, messages: list[Message], max_tokens: int, on_token: OnToken | None = None) -> str: ...


class LlamaCppModel:
    """A GGUF run in-process by llama-cpp-python."""

    def __init__(self, gguf: Path, n_ctx: int = 4096, threads: int | None = None) -> None:
        if not gguf.is_file():
            raise ModelError(f"model file not found: {gguf}")
        with gguf.open("rb") as f:
            if f.read(4) != b"GGUF":
                raise ModelError(f"{gguf} is not a GGUF model file (bad magic bytes)")
        from llama_cpp import Llama

        try:
            self._llm = Llama(
                model_path=str(gguf),
                n_ctx=n_ctx,
                n_threads=threads or os.cpu_count() or 1,
                n_batch=512,
                verbose=False,
            )
        except Exception as exc:
            raise ModelError(f"llama.cpp could not load {gguf.name}: {exc}") from exc
        self.name = gguf.name
        self._lock = threading.Lock()

    def complete(self, messages: list[Message], max_tokens: int, on_token: OnToken | None = None) -> str:
        with self._lock:
            try:
                stream = self._llm.create_chat_completion(
                    messages=messages,  # type: ignore[arg-type]
                    temperature=0.0,
                    top_k=1,
                    max_tokens=max_tokens,
                    stream=True,
                )
                parts: list[str] = []
                for event in stream:
                    piece = event["choices"][0]["delta"].get("content") or ""  # type: ignore[index]
                    if piece:
                        parts.append(piece)
                        if on_token:
                            on_token(piece)
                return "".join(parts)
            except Exception as exc:
                raise ModelError(f"the language model failed while answering: {exc}") from exc


class OpenAICompatibleModel:
    """A chat-completions server (llama.cpp's ``llama-server`` or ``llama_cpp.server``)."""

    def __init__(self, url: str, timeout_s: float = 120.0, retries: int = 2, model: str = "default") -> None:
        self.url = url.rstrip("/")
        self.name = f"{model}@{self.url}"
        # Accepted forms: the server root, its /v1, or the full chat-completions URL.
        self._base = self.url.removesuffix("/chat/completions").removesuffix("/v1")
        self._model = model
        self.timeout_s = timeout_s
        self.retries = retries

    def complete(self, messages: list[Message], max_tokens: int, on_token: OnToken | None = None) -> str:
        body = json.dumps(
            {"model": self._model, "messages": messages, "temperature": 0.0, "top_k": 1, "max_tokens": max_tokens}
        ).encode()
        endpoint = self.url if self.url.endswith("/chat/completions") else f"{self._base}/v1/chat/completions"
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            req = urllib.request.Request(endpoint, data=body, headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    data: Any = json.loads(resp.read())
                text = str(data["choices"][0]["message"]["content"] or "")
                if on_token:
                    on_token(text)
                return text
            except (urllib.error.URLError, TimeoutError, ConnectionError, KeyError, ValueError) as exc:
                last = exc
                time.sleep(min(4.0, 0.5 * 2**attempt))
        raise ModelError(
            f"the model server at {self.url} is not reachable or did not answer ({last}); "
            "answers resume when it is back"
        )

    def reachable(self, timeout_s: float = 2.0) -> bool:
        """Whether the server answers its model list (for health checks)."""
        try:
            with urllib.request.urlopen(f"{self._base}/v1/models", timeout=timeout_s) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False


def load_model(gguf: Path | None, url: str | None, models_dir: Path, **kw: Any) -> LanguageModel:
    """The configured model: a server URL wins, then a GGUF path, then the packaged default."""
    if url:
        return OpenAICompatibleModel(url, timeout_s=float(kw.get("timeout_s", 120.0)))
    if gguf is None:
        from retrieval.model_files import default_gguf

        gguf = default_gguf(models_dir)
    return LlamaCppModel(gguf, n_ctx=int(kw.get("n_ctx", 4096)), threads=kw.get("threads"))
