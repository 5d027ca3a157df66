"""``footnote serve``: listen at once, then warm up behind the listener (load the models,
sync, schedule re-syncs, answer what the journal still owes) until SIGTERM.

The port (HTTP mode) or the Socket Mode connection is open within seconds of start, on
any machine state: nothing slow runs before it. Questions that arrive while the server
warms up are journaled, acked and told what is happening, and answered once it is ready
(:mod:`bot.warmup`). A restart on an existing index answers from it as soon as the
models are loaded, while the sync catches up behind it; a new index is read whole
first, so the first answers come from the whole drive, not from whichever part of it
happened to be read. A language model not yet measured on this machine answers as
shipped, and its faster forms are timed afterwards, at low priority, and switched to.

Every mode serves ``GET /healthz`` (the phase; 503 only when broken), ``GET /readyz``
(200 once questions are answered now), ``GET /metrics`` (Prometheus) and
``GET /view/<path>`` (citation viewer) over HTTP: on the ``--http`` port, which also takes
Slack's events, or on ``FOOTNOTE_HTTP_PORT`` in Socket Mode. SIGTERM stops taking new
work, gives the answer being written ``FOOTNOTE_SHUTDOWN_GRACE_S`` to finish, and exits;
what is left is answered at the next start.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from slack_bolt import App
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.health import Health
from bot.http_server import HttpServer, Limits, SlackEvents, View, bind, make_server
from bot.metrics import Metrics
from bot.scheduler import SyncSchedule, run_logged
from bot.slack_app import SlackBot
from bot.warmup import Phase, Warmup
from retrieval.errors import ConfigError, FootnoteError, StoreUnreachable, SyncBusy
from retrieval.index import INDEXED
from retrieval.ingest import Progress
from retrieval.models import LanguageModel
from retrieval.search import Engine

log = logging.getLogger("footnote")


@dataclass
class Service:
    """Everything `footnote serve` runs, handed in by the builder."""

    engine_of: Callable[[], Engine]  # built by the warm-up (it loads the embedder), not before listening
    bot: SlackBot
    metrics: Metrics
    schedule: SyncSchedule
    health: Callable[[], Health]
    model_reachable: Callable[[], bool]
    after_sync: Callable[[], None]  # retire learned pairs, recalibrate the gate (in the background)
    view: View
    warmup: Warmup
    prepare: Callable[[], None]  # builds the engine and the answer service (loads the embedder)
    signing_secret: str | None = None  # HTTP mode: Slack signs its requests with it
    prime: Callable[[], int] = lambda: 0  # asks each kind of prompt once (AnswerService.prime)

    @property
    def engine(self) -> Engine:
        return self.engine_of()

    def health_json(self) -> dict[str, object]:
        """``/healthz`` and ``/readyz``: the phase, the index's counts, whether the model answers.
        ``ok``: answering now; ``broken``: something a person must fix (503 on /healthz)."""
        state = self.warmup.state()
        h = {**self._index_json(state.answering), **state.as_json()}
        h["model_reachable"] = self.model_reachable()
        h["ok"] = state.phase is Phase.READY and bool(h["ok"]) and bool(h["model_reachable"])
        h["broken"] = state.phase in (Phase.MODEL_UNAVAILABLE, Phase.FAILED) or (state.answering and not h["ok"])
        return h

    def _index_json(self, answering: bool) -> dict[str, object]:
        """The index's counts; while a Chroma server does not answer, none, and ``ok`` as
        long as questions are ``answering`` from the index in memory (the engine's snapshot):
        restarting or unreadying this replica would not bring the server back. Nor would it
        mount a drive: a failed sync is ``last_sync_failed``, and the index answers as it is."""
        try:
            h = self.health()
        except StoreUnreachable as exc:
            log.warning("health without the index's counts: %s", exc)
            return {"ok": answering, "index_reachable": False}
        return {**h.as_json(), "ok": h.indexed > 0, "index_reachable": True}

    def has_index(self) -> bool:
        """Documents to answer from, built by the current models (a half-migrated index is not)."""
        return any(r.state == INDEXED for r in self.engine.records().values())

    def sync(self, on_progress: Progress | None = None) -> None:
        t0 = time.perf_counter()
        try:
            report = self.engine.sync(on_progress=on_progress)
        except SyncBusy as exc:  # another replica (or `footnote index`) is on it; its result is picked up
            log.info("sync skipped: %s", exc)
            return
        except Exception as exc:
            self.metrics.synced(None, time.perf_counter() - t0)
            self.warmup.synced(str(exc))
            raise
        self.metrics.synced(report, report.seconds)
        self.warmup.synced(None)
        self.after_sync()  # queries keep the previous thresholds until the calibration is done
        log.info(
            "sync: %d indexed, %d unchanged, %d renamed, %d removed, %d failed in %.1fs",
            len(report.indexed),
            report.unchanged,
            len(report.renamed),
            len(report.removed),
            len(report.failed),
            report.seconds,
        )

    def http_server(
        self, where: socket.socket | tuple[str, int], events: bool = True, limits: Limits | None = None
    ) -> HttpServer:
        """The HTTP server (not started): /healthz, /metrics, /view, and Slack's events when ``events``."""
        slack = None
        if events:
            if not self.signing_secret:
                raise ConfigError("HTTP mode needs SLACK_SIGNING_SECRET to check Slack's signatures")
            slack = SlackEvents(self.bot.app, self.signing_secret)
        return make_server(where, self.health_json, self.view, self.metrics.render, slack, limits or Limits())


class SocketConnection(Protocol):
    def connect(self) -> None: ...
    def close(self) -> None: ...


def run_http(server: HttpServer, stop: threading.Event, started: Callable[[HttpServer], None] | None = None) -> None:
    """Slack's events, /healthz, /readyz, /metrics and /view on one port, until ``stop``."""
    server.start()
    log.info("listening on %s:%d (/slack/events, /healthz, /readyz, /metrics, /view/)", server.host, server.port)
    try:
        if started is not None:
            started(server)
        _wait(stop)
    finally:
        server.stop()  # Slack's next delivery goes elsewhere (or is retried) instead of being acked here


def run_socket(
    svc: Service,
    server: HttpServer,
    app_token: str,
    stop: threading.Event,
    connection: Callable[[App, str], SocketConnection] | None = None,
    started: Callable[[HttpServer], None] | None = None,
) -> None:
    """Slack's events over Socket Mode; /healthz, /metrics and /view over HTTP on ``server``."""
    server.start()
    log.info("Socket Mode; /healthz, /metrics and /view/ on %s:%d", server.host, server.port)
    if connection is None:
        from slack_bolt.adapter.socket_mode import SocketModeHandler

        connection = SocketModeHandler
    conn = connection(svc.bot.app, app_token)
    try:
        _ask_slack(conn.connect, "SLACK_APP_TOKEN")
        if started is not None:
            started(server)
        _wait(stop)
    finally:
        conn.close()
        server.stop()


def _ask_slack(call: Callable[[], object], token: str) -> None:
    """Run ``call``; Slack refusing ``token`` (or not answering) is a one-line ConfigError."""
    try:
        call()
    except SlackApiError as exc:
        error = exc.response.get("error") if exc.response is not None else None
        raise ConfigError(
            f"Slack refused {token} ({error or exc}): copy it again from the app's settings page"
        ) from None
    except (SlackClientError, OSError) as exc:
        raise ConfigError(f"Slack could not be reached to check {token}: {exc}") from None


def check_tokens(client: WebClient, app_token: str | None = None) -> None:
    """Ask Slack whether it takes the bot token (and the app token, in Socket Mode), before
    anything is loaded: a wrong one is one line at start, not a traceback minutes later."""
    _ask_slack(client.auth_test, "SLACK_BOT_TOKEN")
    if app_token is not None:
        _ask_slack(lambda: client.apps_connections_open(app_token=app_token), "SLACK_APP_TOKEN")


def preflight(opts: ServeOptions, client: WebClient) -> socket.socket:
    """What can stop `footnote serve` at start, checked before anything loads: the port
    (bound here, listened on once the index is ready), then the Slack tokens."""
    listener = bind(opts.host, opts.port)
    try:
        check_tokens(client, opts.app_token)
    except BaseException:
        listener.close()
        raise
    return listener


def until_signalled() -> None:
    """Block until SIGTERM or SIGINT (`footnote model-server`'s life)."""
    stop = threading.Event()
    _stop_on_signals(stop)
    _wait(stop)


def _wait(stop: threading.Event) -> None:
    while not stop.wait(1.0):  # a bounded wait, so the signal handler gets its turn
        pass


def _stop_on_signals(stop: threading.Event) -> None:
    def handler(signum: int, frame: Any) -> None:
        log.info("%s: stopping (no new questions; the one being answered may finish)", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


@dataclass(frozen=True)
class ModelLoad:
    what: str  # "language model", "query-rewrite model"
    load: Callable[[], LanguageModel]  # as fast as possible: measured here before, else as shipped
    measure: Callable[[], LanguageModel | None] | None = None  # time its forms, switch; None: nothing to time


def load_models(loads: Sequence[ModelLoad]) -> dict[str, str]:
    """Load the in-process models (as measured here before, else as shipped: nothing is timed
    here). A model that cannot load is logged and returned (what -> why); every answer then
    says so visibly, and refusals and search still work."""
    failed: dict[str, str] = {}
    for m in loads:
        t = time.perf_counter()
        try:
            model = m.load()
        except FootnoteError as exc:
            log.error("the %s could not be loaded: %s", m.what, exc)
            failed[m.what] = str(exc)
            continue
        log.info("%s %s loaded in %.1fs", m.what, model.name, time.perf_counter() - t)
    return failed


def measure_models(loads: Sequence[ModelLoad]) -> None:
    """Time the forms of models loaded as shipped and switch to the winners."""
    for m in loads:
        if m.measure is None:
            continue
        try:
            better = m.measure()
        except FootnoteError as exc:  # the shipped form keeps answering
            log.warning("timing the %s's forms failed (%s); it keeps running as shipped", m.what, exc)
            continue
        if better is not None:
            log.info("%s switched to its measured form: %s", m.what, getattr(better, "weights", None))


def warm_up(svc: Service, loads: Sequence[ModelLoad], opts: ServeOptions, stop: threading.Event) -> None:
    """Everything slow, behind the listener: the embedder and engine, the models, the first
    sync (or, with an index, answering from it at once and syncing behind it), the schedule,
    the journal's unfinished questions, then the models' forms. A failure stops the server
    (its error is the warm-up's, raised by :func:`run`)."""
    w = svc.warmup
    try:
        svc.bot.intake.recover(opts.journal_max_age_s)  # queued now, answered once ready
        w.loading("the search index and embedding model")
        svc.prepare()
        w.loading("the language model")
        failed = load_models(loads)
        model_error = failed.get("language model")
        if svc.has_index():
            svc.engine.searcher()
            w.ready(model_error)
            _prime(svc, model_error)
            # A drive not there at a restart (not mounted yet) must not take answers away: the
            # index answers as it is, status shows the sync's error, and the schedule tries again.
            run_logged(svc.sync, "sync at start")
        else:
            w.syncing()
            svc.sync(on_progress=w.syncing)
            svc.engine.searcher()
            w.ready(model_error)
            _prime(svc, model_error)
        if stop.is_set():  # stopped meanwhile: nothing more to start
            return
        svc.schedule.start(svc.sync)
        log.info("next sync: %s", svc.schedule.next_run() or "none scheduled (FOOTNOTE_SYNC_MINUTES=0)")
    except Exception as exc:  # the server stops; run() raises it as the one-line error it is
        log.error("warm-up failed: %s", exc)
        w.failed(exc)
        stop.set()
        return
    threading.Thread(target=_measure_at_low_priority, args=(loads,), name="footnote-measure", daemon=True).start()


def _prime(svc: Service, model_error: object) -> None:
    """The first question after a start finds its prompts' starts saved; priming never stops a start."""
    if model_error is not None:
        return
    try:
        log.info("primed %d kinds of prompt", svc.prime())
    except Exception as exc:  # only time is at stake: the first question meets the same model and says what is wrong
        log.warning("could not prime the model's prompts: %s", exc)


def _measure_at_low_priority(loads: Sequence[ModelLoad]) -> None:
    """:func:`measure_models` at nice 10: answers keep the cores first (the timings' child
    processes inherit this thread's priority)."""
    if sys.platform == "linux":  # per thread on Linux; elsewhere it would slow the whole process
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    measure_models(loads)


@dataclass(frozen=True)
class ServeOptions:
    host: str
    port: int  # Slack's events (HTTP mode), /healthz, /metrics and /view
    app_token: str | None = None  # Socket Mode when set
    journal_max_age_s: float = 3600.0
    shutdown_grace_s: float = 8.0


def run(
    service: Callable[[], Service], loads: Sequence[ModelLoad], opts: ServeOptions, listener: socket.socket
) -> None:
    """Serve on ``listener`` (from :func:`preflight`) at once, warm up behind it (:func:`warm_up`),
    until SIGTERM (or SIGINT). A warm-up that failed is raised once the server has stopped."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # one line per scheduled run is noise
    logging.getLogger("uvicorn.error").setLevel(logging.WARNING)  # its start and stop lines repeat ours
    stop = threading.Event()
    _stop_on_signals(stop)
    try:
        svc = service()
        server = svc.http_server(listener, events=opts.app_token is None)
    except BaseException:
        listener.close()
        raise
    warming = threading.Thread(target=warm_up, args=(svc, loads, opts, stop), name="footnote-warmup", daemon=True)

    def started(_: HttpServer) -> None:
        warming.start()

    try:
        if opts.app_token is not None:
            run_socket(svc, server, opts.app_token, stop, started=started)
        else:
            run_http(server, stop, started=started)
    finally:
        svc.schedule.shutdown()
        finished = svc.bot.intake.close(opts.shutdown_grace_s)
        svc.warmup.close()
        log.info("stopped%s", "" if finished else "; the unfinished answer is in the journal for the next start")
    if svc.warmup.error is not None:
        raise svc.warmup.error
