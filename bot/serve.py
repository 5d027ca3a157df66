"""``footnote serve``: sync once, schedule re-syncs, then run the Slack app (HTTP or Socket Mode)."""

from __future__ import annotations

import logging

from bot.health import Health, index_health
from bot.http_server import make_server
from bot.runtime import Runtime
from bot.scheduler import SyncSchedule
from bot.slack_app import SlackBot
from bot.viewer import render_view

log = logging.getLogger("footnote")


def build_bot(rt: Runtime, schedule: SyncSchedule | None = None) -> SlackBot:
    s = rt.settings
    assert s.slack_bot_token is not None
    secret = s.slack_signing_secret.get_secret_value() if s.slack_signing_secret else ""
    return SlackBot(
        rt.answers,
        s.slack_bot_token.get_secret_value(),
        secret,
        s.data_dir,
        api_url=s.slack_api_url,
        status=lambda: health(rt, schedule),
    )


def health(rt: Runtime, schedule: SyncSchedule | None = None) -> Health:
    return index_health(rt.engine, schedule.next_run() if schedule else None)


def _sync(rt: Runtime) -> None:
    report = rt.engine.sync()
    log.info(
        "sync: %d indexed, %d unchanged, %d renamed, %d removed, %d failed in %.1fs",
        len(report.indexed),
        report.unchanged,
        len(report.renamed),
        len(report.removed),
        len(report.failed),
        report.seconds,
    )


def run(rt: Runtime, *, socket: bool, host: str, port: int) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    s = rt.settings
    _sync(rt)
    rt.engine.searcher()
    schedule = SyncSchedule(lambda: _sync(rt), s.sync_minutes, s.sync_cron)
    schedule.start()
    log.info("next sync: %s", schedule.next_run() or "none scheduled (FOOTNOTE_SYNC_MINUTES=0)")
    bot = build_bot(rt, schedule)
    try:
        if socket:
            from slack_bolt.adapter.socket_mode import SocketModeHandler

            assert s.slack_app_token is not None
            SocketModeHandler(bot.app, s.slack_app_token.get_secret_value()).start()
            return
        docs, runner = s.docs_dir, rt.engine.indexer.runner
        server = make_server(
            bot.app,
            host,
            port,
            lambda: health(rt, schedule).as_json(),
            lambda path, query: render_view(docs, path, query, runner.extract),
        )
        log.info("listening on http://%s:%d/slack/events", host, port)
        try:
            server.serve_forever()
        finally:
            server.server_close()
    finally:
        schedule.shutdown()
