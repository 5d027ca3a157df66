"""`footnote serve` wired as it runs: one HTTP server for Slack, /healthz, /metrics and /view."""

from __future__ import annotations

import json
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.fake_slack import FakeSlack, signed_post
from bot.http_server import serve_in_thread
from bot.runtime import Runtime
from bot.serve import Service
from config.settings import load_settings
from tests.conftest import EXAMPLES

SECRET = "serve-secret"


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[Service, str, FakeSlack]]:
    docs = tmp_path / "docs"
    shutil.copytree(EXAMPLES, docs)
    slack = FakeSlack()
    settings = load_settings(
        data_dir=tmp_path / "data", docs_dir=docs, slack_bot_token="xoxb-x", slack_signing_secret=SECRET,
        slack_api_url=slack.url, sync_minutes=0,
    )  # fmt: skip
    svc = Service(Runtime(settings))
    svc.sync()
    server = svc.http_server("127.0.0.1", 0)
    serve_in_thread(server)
    yield svc, f"http://127.0.0.1:{server.server_address[1]}", slack
    server.shutdown()
    server.server_close()
    slack.close()


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""


def test_health_metrics_and_viewer_on_the_serving_port(service: tuple[Service, str, FakeSlack]) -> None:
    svc, base, slack = service
    status, body = _get(f"{base}/healthz")
    health = json.loads(body)
    assert status == 200 and health["ok"] and health["indexed"] == 3 and health["model_reachable"]

    event = {
        "type": "event_callback", "event_id": "Ev1", "team_id": "T1", "api_app_id": "A1",
        "event": {"type": "app_mention", "user": "U1", "text": "<@UBOT> What is the capital of Mongolia?",
                  "ts": "10.1", "channel": "C1"},
    }  # fmt: skip
    assert signed_post(f"{base}/slack/events", json.dumps(event), "application/json", SECRET)[0] == 200
    assert svc.bot.drain(30)
    deadline = time.time() + 10
    while not slack.of("chat.update") and time.time() < deadline:
        time.sleep(0.02)
    assert "couldn" in json.dumps(slack.of("chat.update")[0]["blocks"])  # a refusal, no model involved

    status, metrics = _get(f"{base}/metrics")
    assert status == 200
    assert 'footnote_documents{state="indexed"} 3.0' in metrics
    assert 'footnote_questions_total{surface="slack"} 1.0' in metrics
    assert "footnote_refusals_total 1.0" in metrics and "footnote_sync_seconds_count 1.0" in metrics
    assert "footnote_answer_seconds_bucket" in metrics

    status, page = _get(f"{base}/view/on-call.md?{svc.rt.links.sign('on-call.md', 0, 20)}")
    assert status == 200 and '<mark id="hit">' in page
    assert _get(f"{base}/view/on-call.md?from=0&to=20")[0] == 403  # unsigned
    assert _get(f"{base}/view/..%2F..%2Fetc%2Fpasswd")[0] == 403


def test_health_is_not_ok_when_the_model_server_is_down(tmp_path: Path) -> None:
    slack = FakeSlack()
    settings = load_settings(
        data_dir=tmp_path / "d", docs_dir=EXAMPLES, slack_bot_token="x", slack_signing_secret=SECRET,
        llm_url="http://127.0.0.1:9", sync_minutes=0, slack_api_url=slack.url,
    )  # fmt: skip
    try:
        svc = Service(Runtime(settings))
        svc.sync()
        health = svc.health_json()
    finally:
        slack.close()
    assert health["indexed"] == 3 and health["model_reachable"] is False and health["ok"] is False
