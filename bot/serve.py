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
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from typing import Any, Protocol

from slack_bolt import App

from bot.claims import ChromaClaims
from bot.health import index_health
from bot.http_server import make_server, serve_in_thread
from bot.metrics import Metrics
from bot.runtime import Runtime
from bot.scheduler import SyncSchedule
from bot.scoping import ChannelScopes
from bot.slack_app import SlackBot, SlackOptions
from bot.viewer import render_view
from retrieval.errors import FootnoteError, SyncBusy
from retrieval.llm import LanguageModel

log = logging.getLogger("footnote")


class Service:
    """Everything `footnote serve` runs, wired once from the runtime."""

    def __init__(self, rt: Runtime) -> None:
        s = rt.settings
        assert s.slack_bot_token is not None
        self.rt = rt
        self.metrics = Metrics(rt.engine.manifest.totals)
        self.schedule = SyncSchedule(self.sync, s.sync_minutes, s.sync_cron)
        secret = s.slack_signing_secret.get_secret_value() if s.slack_signing_secret else ""
        options = SlackOptions(
            stream_interval_s=s.slack_stream_interval_s,
            native_stream=s.slack_native_stream,
            thread_messages=s.thread_messages,
            thread_context_chars=s.thread_context_chars,
        )
        self.bot = SlackBot(
            rt.answers,
            s.slack_bot_token.get_secret_value(),
            secret,
            s.data_dir,
            api_url=s.slack_api_url,
            status=self.health,
            metrics=self.metrics,
            first_delivery=self._claims(),
            scopes=ChannelScopes.parse(s.channel_folders, s.excluded_channels),
            options=options,
        )

    def _claims(self) -> Callable[[str], bool] | None:
        """With a shared Chroma server, retries are recognised across replicas."""
        store = self.rt.engine.store
        if not store.shared:
            return None
        return ChromaClaims(store, f"{socket.gethostname()}:{os.getpid()}").claim

    def health(self):  # type: ignore[no-untyped-def]
        return index_health(self.rt.engine, self.schedule.next_run(), self.rt.calibration())

    def health_json(self) -> dict[str, object]:
        h = self.health().as_json()
        h["model_reachable"] = self.rt.model_reachable()
        h["ok"] = bool(h["ok"]) and bool(h["model_reachable"])
        return h

    def sync(self) -> None:
        t0 = time.perf_counter()
        try:
            report = self.rt.engine.sync()
        except SyncBusy as exc:  # another replica (or `footnote index`) is on it; its result is picked up
            log.info("sync skipped: %s", exc)
            return
        except Exception:
            self.metrics.synced(None, time.perf_counter() - t0)
            raise
        self.metrics.synced(report, report.seconds)
        self.rt.calibrate_in_background()  # queries keep the previous threshold until it is done
        log.info(
            "sync: %d indexed, %d unchanged, %d renamed, %d removed, %d failed in %.1fs",
            len(report.indexed), report.unchanged, len(report.renamed), len(report.removed), len(report.failed),
            report.seconds,
        )  # fmt: skip

    def http_server(self, host: str, port: int) -> ThreadingHTTPServer:
        docs, runner, ocr = self.rt.settings.docs_dir, self.rt.engine.indexer.runner, self.rt.settings.ocr
        verify = self.rt.links.verify
        return make_server(
            self.bot.app,
            host,
            port,
            self.health_json,
            lambda path, query: render_view(docs, path, query, runner.extract, ocr, verify=verify),
            self.metrics.render,
        )


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


def _load_model(rt: Runtime) -> None:
    """Load the in-process model before anything else runs: on a new machine that includes
    timing its weights' forms (~40 s, once), which must neither compete with the first sync
    for the cores nor keep the first question waiting. A model that cannot load is logged;
    every answer then says so visibly, and refusals and search still work. The same for a
    query-rewrite model beside it (FOOTNOTE_REWRITE), without which questions are searched
    as asked."""
    if not rt.settings.llm_url:
        _timed_load("language model", lambda: rt.model)
    if rt.settings.rewrite != "off" and not rt.rewrite_is_answer_model():
        _timed_load("query-rewrite model", lambda: rt.rewrite_model)


def _timed_load(what: str, load: Callable[[], LanguageModel]) -> None:
    t = time.perf_counter()
    try:
        model = load()
    except FootnoteError as exc:
        log.error("the %s could not be loaded: %s", what, exc)
        return
    log.info("%s %s loaded in %.1fs", what, model.name, time.perf_counter() - t)


def run(rt: Runtime, *, socket: bool, host: str, port: int) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # one line per scheduled run is noise
    s = rt.settings
    stop = threading.Event()
    _stop_on_signals(stop)
    svc = Service(rt)
    _load_model(rt)
    svc.sync()
    rt.engine.searcher()
    svc.schedule.start()
    log.info("next sync: %s", svc.schedule.next_run() or "none scheduled (FOOTNOTE_SYNC_MINUTES=0)")
    svc.bot.intake.recover(s.journal_max_age_s)
    try:
        if socket:
            assert s.slack_app_token is not None
            run_socket(svc, s.slack_app_token.get_secret_value(), host, s.http_port, stop)
        else:
            run_http(svc, host, port, stop)
    finally:
        svc.schedule.shutdown()
        finished = svc.bot.intake.close(s.shutdown_grace_s)
        log.info("stopped%s", "" if finished else "; the unfinished answer is in the journal for the next start")
