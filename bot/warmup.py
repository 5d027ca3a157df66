"""Where `footnote serve` is while it warms up behind its listener: the phase that
``/healthz``, ``/readyz``, `footnote status` and a question's placeholder show.

The server listens first; then, in the background, it loads the models, syncs (the first
sync of a new index, with counts) and becomes ready. A question that arrives meanwhile is
journaled, acked and told what is happening, and answered once the phase is ready.

Phases, in order: ``starting`` (nothing loaded yet), ``loading`` (the models), ``syncing``
(the first read of the drive, with documents done and to do), ``ready``; or ``model
unavailable`` (ready, but the answer model could not be loaded: a question it would
answer gets the passages it would have read, saying so; refusals and search still work)
or ``failed`` (the warm-up stopped the server: a wrong folder).

Each phase change is also written to ``<data dir>/serving/<host>-<pid>.json``, which
`footnote status` reads: the same phase, from another process.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from pathlib import Path

from bot.i18n import N_, say

log = logging.getLogger("footnote")

FOLDER = "serving"  # in the data dir: one file per serving process


READING = N_("Reading the drive for the first time… I'll answer here once it's read.")
READING_COUNTED = N_(
    "Reading the drive for the first time: {done} of {total} documents… I'll answer here once it's read."
)
LOADING = N_("Starting up: loading {what}… I'll answer here in a moment.")
STARTING = N_("Starting up… I'll answer here in a moment.")


class Phase(StrEnum):
    STARTING = "starting"
    LOADING = "loading"
    SYNCING = "syncing"
    READY = "ready"
    MODEL_UNAVAILABLE = "model unavailable"
    FAILED = "failed"


ANSWERING = (Phase.READY, Phase.MODEL_UNAVAILABLE)  # questions are answered (the latter with passages only)


@dataclass(frozen=True)
class State:
    phase: Phase
    done: int = 0  # syncing: documents (re)indexed so far
    total: int = 0  # syncing: documents to (re)index
    detail: str = ""  # loading: what; failed, model unavailable: why
    since: float = 0.0  # when this phase began (epoch seconds)
    pid: int = 0
    host: str = ""
    sync_error: str = ""  # why this process's last sync failed ("": it did not)

    @property
    def answering(self) -> bool:
        return self.phase in ANSWERING

    def describe(self) -> str:
        """One line for people (`footnote status`, logs)."""
        if self.phase is Phase.SYNCING:
            return f"syncing: {self.done:,} of {self.total:,} documents read" if self.total else "syncing"
        line = f"{self.phase}: {self.detail}" if self.detail else str(self.phase)
        return f"{line}; its last sync failed: {self.sync_error}" if self.sync_error else line

    def note(self, lang: str | None = None) -> str:
        """What a question's placeholder says while it waits for the warm-up (in the asker's language)."""
        if self.phase is Phase.SYNCING:
            if self.total:
                return say(lang, READING_COUNTED, done=f"{self.done:,}", total=f"{self.total:,}")
            return say(lang, READING)
        if self.phase is Phase.LOADING and self.detail:
            return say(lang, LOADING, what=self.detail)
        return say(lang, STARTING)

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {"phase": str(self.phase), "since": self.since}
        if self.phase is Phase.SYNCING:
            out["sync"] = {"done": self.done, "total": self.total}
        if self.detail:
            out["detail"] = self.detail
        return out


class Warmup:
    """The serving process's phase, safe from any thread. ``record``: the folder the phase is
    written to for `footnote status` (None: not written)."""

    def __init__(self, record: Path | None = None, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._answering = threading.Event()
        self._state = State(Phase.STARTING, since=clock(), pid=os.getpid(), host=socket.gethostname())
        self.error: BaseException | None = None  # what stopped the warm-up (phase failed)
        self._written = 0.0  # when the syncing counts were last written
        self._file = record / f"{self._state.host}-{self._state.pid}.json" if record is not None else None
        self._write(self._state)

    def state(self) -> State:
        with self._lock:
            return self._state

    def loading(self, what: str) -> None:
        self._set(Phase.LOADING, detail=what)

    def syncing(self, done: int = 0, total: int = 0) -> None:
        """The first sync's progress (the sync's ``on_progress``)."""
        now = self.clock()
        with self._lock:
            began = self._state.phase is not Phase.SYNCING
            if began:
                self._state = replace(self._state, phase=Phase.SYNCING, detail="", since=now)
            self._state = replace(self._state, done=done, total=total)
            state = self._state
            # At most a write a second: a write per document would cost a big drive's sync.
            due = began or done == total or now - self._written >= 1.0
            if due:
                self._written = now
        if began:
            log.info("phase: %s", state.describe())
        if due:
            self._write(state)

    def ready(self, model_error: str | None = None) -> None:
        """Questions are answered from here on (with the model's error, when it could not load)."""
        if model_error is None:
            self._set(Phase.READY)
        else:
            self._set(Phase.MODEL_UNAVAILABLE, detail=model_error)
        self._answering.set()

    def synced(self, error: str | None) -> None:
        """A sync ended (``error``: why it failed): `footnote status` shows a failure beside the
        phase, since a server that answers from its index goes on after one."""
        with self._lock:
            self._state = replace(self._state, sync_error=error or "")
            state = self._state
        self._write(state)

    def failed(self, error: BaseException) -> None:
        self.error = error
        self._set(Phase.FAILED, detail=str(error))

    def wait_answering(self, timeout: float) -> bool:
        """True once questions are answered; False after ``timeout`` seconds before that."""
        return self._answering.wait(timeout)

    def close(self) -> None:
        """The process stops: its phase file goes (status then shows no server)."""
        if self._file is not None:
            self._file.unlink(missing_ok=True)

    def _set(self, phase: Phase, detail: str = "") -> None:
        with self._lock:
            self._state = replace(self._state, phase=phase, detail=detail, done=0, total=0, since=self.clock())
            state = self._state
        log.info("phase: %s", state.describe())
        self._write(state)

    def _write(self, state: State) -> None:
        if self._file is None:
            return
        part = self._file.with_name(self._file.name + ".part")
        try:
            self._file.parent.mkdir(parents=True, exist_ok=True)
            part.write_text(json.dumps({**asdict(state), "phase": str(state.phase)}), encoding="utf-8")
            part.replace(self._file)
        except OSError as exc:  # a full or read-only disk costs `footnote status` its line, nothing more
            log.debug("could not record the phase: %s", exc)


def serving_states(data_dir: Path) -> list[tuple[State, bool | None]]:
    """The phase each serving process recorded in ``data_dir``, with whether it is still running
    (None: another host's process, which cannot be checked from here)."""
    here = socket.gethostname()
    out = []
    for path in sorted((data_dir / FOLDER).glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            state = State(**{**data, "phase": Phase(data["phase"])})
        except (OSError, ValueError, TypeError, KeyError):
            continue
        out.append((state, _alive(state.pid) if state.host == here else None))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True
