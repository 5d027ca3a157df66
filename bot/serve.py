"""``footnote serve``: sync once, schedule re-syncs, then run the Slack app (HTTP or Socket Mode).

In HTTP mode the same server also answers ``GET /healthz`` (index loaded, model
reachable), ``GET /metrics`` (Prometheus) and ``GET /view/<path>`` (citation viewer).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer

from bot.health import index_health
from bot.http_server import make_server
from bot.metrics import Metrics
from bot.runtime import Runtime
from bot.scheduler import SyncSchedule
from bot.scoping import ChannelScopes
from bot.slack_app import SlackBot
from bot.viewer import render_view
from retrieval.errors import SyncBusy
from retrieval.store import ChromaClaims

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
        return make_server(
            self.bot.app,
            host,
            port,
            self.health_json,
            lambda path, query: render_view(docs, path, query, runner.extract, ocr),
            self.metrics.render,
        )


def run(rt: Runtime, *, socket: bool, host: str, port: int) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # one line per scheduled run is noise
    svc = Service(rt)
    svc.sync()
    rt.engine.searcher()
    svc.schedule.start()
    log.info("next sync: %s", svc.schedule.next_run() or "none scheduled (FOOTNOTE_SYNC_MINUTES=0)")
    try:
        if socket:
            from slack_bolt.adapter.socket_mode import SocketModeHandler

            assert rt.settings.slack_app_token is not None
            SocketModeHandler(svc.bot.app, rt.settings.slack_app_token.get_secret_value()).start()
            return
        server = svc.http_server(host, port)
        log.info("listening on http://%s:%d (/slack/events, /healthz, /metrics, /view/)", host, port)
        try:
            server.serve_forever()
        finally:
            server.server_close()
    finally:
        svc.schedule.shutdown()
