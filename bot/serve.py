"""``footnote serve``: sync once, then run the Slack app in HTTP or Socket Mode."""

from __future__ import annotations

import logging

from bot.http_server import make_server
from bot.runtime import Runtime
from bot.slack_app import SlackBot

log = logging.getLogger("footnote")


def build_bot(rt: Runtime) -> SlackBot:
    s = rt.settings
    assert s.slack_bot_token is not None
    secret = s.slack_signing_secret.get_secret_value() if s.slack_signing_secret else ""
    return SlackBot(rt.answers, s.slack_bot_token.get_secret_value(), secret, s.data_dir, api_url=s.slack_api_url)


def health(rt: Runtime) -> dict[str, object]:
    totals = rt.engine.manifest.totals()
    return {"ok": totals["indexed"] > 0, **totals}


def run(rt: Runtime, *, socket: bool, host: str, port: int) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    report = rt.engine.sync()
    log.info(
        "index ready: %d indexed now, %d unchanged, %d failed",
        len(report.indexed),
        report.unchanged,
        len(report.failed),
    )
    rt.engine.searcher()
    bot = build_bot(rt)
    if socket:
        from slack_bolt.adapter.socket_mode import SocketModeHandler

        assert rt.settings.slack_app_token is not None
        SocketModeHandler(bot.app, rt.settings.slack_app_token.get_secret_value()).start()
        return
    server = make_server(bot.app, host, port, lambda: health(rt))
    log.info("listening on http://%s:%d/slack/events", host, port)
    try:
        server.serve_forever()
    finally:
        server.server_close()
