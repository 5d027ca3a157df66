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
import socket
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
from bot.scheduler import SyncSchedule
from bot.slack_app import SlackBot
from retrieval.errors import ConfigError, FootnoteError, SyncBusy
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
    signing_secret: str | None = None  # HTTP mode: Slack signs its requests with it

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


def run_http(server: HttpServer, stop: threading.Event) -> None:
    """Slack's events, /healthz, /metrics and /view on one port, until ``stop``."""
    server.start()
    log.info("listening on %s:%d (/slack/events, /healthz, /metrics, /view/)", server.host, server.port)
    try:
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


def run(
    service: Callable[[], Service], loads: Sequence[ModelLoad], opts: ServeOptions, listener: socket.socket
) -> None:
    """Build the service, load the models, sync, then serve on ``listener`` (from :func:`preflight`)
    until SIGTERM (or SIGINT)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # one line per scheduled run is noise
    logging.getLogger("uvicorn.error").setLevel(logging.WARNING)  # its start and stop lines repeat ours
    stop = threading.Event()
    _stop_on_signals(stop)
    try:
        svc = service()
        load_models(loads)
        svc.sync()
        svc.engine.searcher()
        server = svc.http_server(listener, events=opts.app_token is None)
    except BaseException:
        listener.close()
        raise
    svc.schedule.start(svc.sync)
    log.info("next sync: %s", svc.schedule.next_run() or "none scheduled (FOOTNOTE_SYNC_MINUTES=0)")
    svc.bot.intake.recover(opts.journal_max_age_s)
    try:
        if opts.app_token is not None:
            run_socket(svc, server, opts.app_token, stop)
        else:
            run_http(server, stop)
    finally:
        svc.schedule.shutdown()
        finished = svc.bot.intake.close(opts.shutdown_grace_s)
        log.info("stopped%s", "" if finished else "; the unfinished answer is in the journal for the next start")
