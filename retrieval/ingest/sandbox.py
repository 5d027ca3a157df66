"""Extraction of parsed formats (PDF, office files, HTML) in a worker process.

A parser that hangs on a malformed file, or a file built to exhaust memory, must
cost one ``failed`` document and nothing else: the worker runs each file under a
time limit and an address-space limit, and is replaced when it has to be killed.
Plain text is decoded in-process; it cannot hang.
"""

from __future__ import annotations

import atexit
import multiprocessing
import multiprocessing.pool
import resource
import threading

from retrieval.errors import ExtractionError
from retrieval.ingest.extract import Extractor
from retrieval.types import Document


def _limit_memory(max_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (max_bytes, max_bytes))


def _extract(ex: Extractor, rel_path: str, data: bytes) -> Document:
    try:
        return ex.extract(rel_path, data)
    except MemoryError:
        raise ExtractionError("the file needs more memory to extract than the limit allows") from None


class ExtractionRunner:
    """Runs ``ex.extract`` with a time limit, in a separate process when the extractor asks for it."""

    def __init__(self, timeout_s: float = 60.0, memory_mb: int = 3072) -> None:
        self.timeout_s = timeout_s
        self.memory_bytes = memory_mb * 1024 * 1024
        self._pool: multiprocessing.pool.Pool | None = None
        self._lock = threading.Lock()

    def extract(self, ex: Extractor, rel_path: str, data: bytes) -> Document:
        if not getattr(ex, "isolated", True):
            return ex.extract(rel_path, data)
        with self._lock:  # one worker: files are extracted one at a time
            pending = self._worker().apply_async(_extract, (ex, rel_path, data))
            try:
                return pending.get(self.timeout_s)
            except multiprocessing.TimeoutError:
                self._kill()
                raise ExtractionError(f"extraction took longer than {self.timeout_s:.0f}s; gave up") from None

    def _worker(self) -> multiprocessing.pool.Pool:
        if self._pool is None:
            # forkserver: the worker does not inherit the parent's threads, models or sockets.
            ctx = multiprocessing.get_context("forkserver")
            self._pool = ctx.Pool(1, initializer=_limit_memory, initargs=(self.memory_bytes,), maxtasksperchild=500)
            atexit.register(self._kill)  # before interpreter teardown, when the pool can still stop cleanly
        return self._pool

    def _kill(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool.join()
                self._pool = None
