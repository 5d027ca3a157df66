"""``footnote serve``: sync once, schedule re-syncs, answer what the journal still owes,
then run the Slack app (HTTP or Socket Mode) until SIGTERM.

Every mode serves ``GET /healthz`` (index loaded, model reachable), ``GET /metrics``
(Prometheus) and ``GET /view/<path>`` (citation viewer) over HTTP: on the ``--http``
port, which also takes Slack's events, or on ``FOOTNOTE_HTTP_PORT`` in Socket Mode.
SIGTERM stops taking new work, gives the answer being written ``FOOTNOTE_SHUTDOWN_GRACE_S``
to finish, and exits; what is left is answered at the next start.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any, Protocol

from slack_bolt import App

from bot.health import Health
from bot.http_server import View, make_server, serve_in_thread
from bot.metrics import Metrics
from bot.scheduler import SyncSchedule
from bot.slack_app import SlackBot
from retrieval.errors import FootnoteError, SyncBusy
from retrieval.models import LanguageModel
from retrieval.search import Engine

log = logging.getLogger("footnote")


@dataclass
class Service:
    """Everything `footnote serve` runs, handed in by the builder."""

    engine: Engine
    bot: SlackBot
    metrics: Metrics
    schedule: SyncSchedule
    health: Callable[[], Health]
    model_reachable: Callable[[], bool]
    calibrate: Callable[[], None]  # after a sync that changed the index (in the background)
    view: View

    def health_json(self) -> dict[str, object]:
        h = self.health().as_json()
        h["model_reachable"] = self.model_reachable()
        h["ok"] = bool(h["ok"]) and bool(h["model_reachable"])
        return h

    def sync(self) -> None:
        t0 = time.perf_counter()
        try:
            report = self.engine.sync()
        except SyncBusy as exc:  # another replica (or `footnote index`) is on it; its result is picked up
            log.info("sync skipped: %s", exc)
            return
        except Exception:
            self.metrics.synced(None, time.perf_counter() - t0)
            raise
        self.metrics.synced(report, report.seconds)
        self.calibrate()  # queries keep the previous threshold until it is done
        log.info(
            "sync: %d indexed, %d unchanged, %d renamed, %d removed, %d failed in %.1fs",
            len(report.indexed),
            report.unchanged,
            len(report.renamed),
            len(report.removed),
            len(report.failed),
            report.seconds,
        )

    def http_server(self, host: str, port: int) -> ThreadingHTTPServer:
        return make_server(self.bot.app, host, port, self.health_json, self.view, self.metrics.render)


class SocketConnection(Protocol):
    def connect(self) -> None: ...
    def close(self) -> None: ...


def run_http(svc: Service, host: str, port: int, stop: threading.Event) -> None:
    """Slack's events, /healthz, /metrics and /view on one port, until ``stop``."""
    server = svc.http_server(host, port)
    serve_in_thread(server)
    log.info("listening on http://%s:%d (/slack/events, /healthz, /metrics, /view/)", host, server.server_address[1])
    try:
        _wait(stop)
    finally:
        server.shutdown()  # Slack's next delivery goes elsewhere (or is retried) instead of being acked here
        server.server_close()


def run_socket(
    svc: Service,
    app_token: str,
    host: str,
    port: int,
    stop: threading.Event,
    connection: Callable[[App, str], SocketConnection] | None = None,
    started: Callable[[ThreadingHTTPServer], None] | None = None,
) -> None:
    """Slack's events over Socket Mode; /healthz, /metrics and /view over HTTP on ``port``."""
    server = svc.http_server(host, port)
    serve_in_thread(server)
    log.info("Socket Mode; /healthz, /metrics and /view/ on http://%s:%d", host, server.server_address[1])
    if connection is None:
        from slack_bolt.adapter.socket_mode import SocketModeHandler

        connection = SocketModeHandler
    conn = connection(svc.bot.app, app_token)
    try:
        conn.connect()
        if started is not None:
            started(server)
        _wait(stop)
    finally:
        conn.close()
        server.shutdown()
        server.server_close()


def _wait(stop: threading.Event) -> None:
    while not stop.wait(1.0):  # a bounded wait, so the signal handler gets its turn
        pass


def _stop_on_signals(stop: threading.Event) -> None:
    def handler(signum: int, frame: Any) -> None:
        log.info("%s: stopping (no new questions; the one being answered may finish)", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


ModelLoad = tuple[str, Callable[[], LanguageModel]]  # (what it is, load it)


def load_models(loads: Sequence[ModelLoad]) -> None:
    """Load the in-process models before anything else runs: on a new machine that includes
    timing their weights' forms (~40 s, once), which must neither compete with the first sync
    for the cores nor keep the first question waiting. A model that cannot load is logged;
    every answer then says so visibly, and refusals and search still work."""
    for what, load in loads:
        t = time.perf_counter()
        try:
            model = load()
        except FootnoteError as exc:
            log.error("the %s could not be loaded: %s", what, exc)
            continue
        log.info("%s %s loaded in %.1fs", what, model.name, time.perf_counter() - t)


@dataclass(frozen=True)
class ServeOptions:
    host: str
    port: int  # Slack's events (HTTP mode), /healthz, /metrics and /view
    app_token: str | None = None  # Socket Mode when set
    journal_max_age_s: float = 3600.0
    shutdown_grace_s: float = 8.0


def run(service: Callable[[], Service], loads: Sequence[ModelLoad], opts: ServeOptions) -> None:
    """Build the service, load the models, sync, then serve until SIGTERM (or SIGINT)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # one line per scheduled run is noise
    stop = threading.Event()
    _stop_on_signals(stop)
    svc = service()
    load_models(loads)
    svc.sync()
    svc.engine.searcher()
    svc.schedule.start(svc.sync)
    log.info("next sync: %s", svc.schedule.next_run() or "none scheduled (FOOTNOTE_SYNC_MINUTES=0)")
    svc.bot.intake.recover(opts.journal_max_age_s)
    try:
        if opts.app_token is not None:
            run_socket(svc, opts.app_token, opts.host, opts.port, stop)
        else:
            run_http(svc, opts.host, opts.port, stop)
    finally:
        svc.schedule.shutdown()
        finished = svc.bot.intake.close(opts.shutdown_grace_s)
        log.info("stopped%s", "" if finished else "; the unfinished answer is in the journal for the next start")
