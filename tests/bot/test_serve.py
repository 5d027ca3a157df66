"""`footnote serve` wired as it runs: one HTTP server for Slack, /healthz, /metrics and /view."""

from __future__ import annotations

import json
import shutil
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

import pytest

from bot.builder import Builder
from bot.http_server import HttpServer
from bot.serve import Service, run_socket
from config.settings import load_settings
from retrieval.models import Embedder
from testkit.servers import chroma_server, free_port
from testkit.slack import FakeSlack, post_mention, signed_post
from tests.conftest import EXAMPLES

SECRET = "serve-secret"


@pytest.fixture
def service(tmp_path: Path, embedder: Embedder) -> Iterator[tuple[Builder, Service, str, FakeSlack]]:
    docs = tmp_path / "docs"
    shutil.copytree(EXAMPLES, docs)
    (docs / "hr").mkdir()
    (docs / "hr" / "layoffs-plan-2026.md").write_bytes(b"")  # fails (empty): /healthz must not name it
    slack = FakeSlack()
    settings = load_settings(
        data_dir=tmp_path / "data", docs_dir=docs, slack_bot_token="xoxb-x", slack_signing_secret=SECRET,
        slack_api_url=slack.url, sync_minutes=0, public_url="https://footnote.example",
    )  # fmt: skip
    b = Builder(settings, embedder)  # the session's embedder: no per-test runtime measurement
    svc = b.service()
    svc.sync()
    svc.warmup.ready()  # what serve's warm-up does once synced
    with svc.http_server(("127.0.0.1", 0)) as server:
        yield b, svc, server.url, slack
    slack.close()


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""


def test_health_metrics_and_viewer_on_the_serving_port(service: tuple[Builder, Service, str, FakeSlack]) -> None:
    b, svc, base, slack = service
    status, body = _get(f"{base}/healthz")
    health = json.loads(body)
    assert status == 200 and health["ok"] and health["indexed"] == 3 and health["model_reachable"]
    assert health["failed"] == 1 and "layoffs" not in body and "empty" not in body  # counts only

    event = {
        "type": "event_callback", "event_id": "Ev1", "team_id": "T1", "api_app_id": "A1",
        "event": {"type": "app_mention", "user": "U1", "text": "<@UBOT> What is the capital of Mongolia?",
                  "ts": "10.1", "channel": "C1"},
    }  # fmt: skip
    assert signed_post(f"{base}/slack/events", json.dumps(event), "application/json", SECRET)[0] == 200
    assert slack.wait_for(lambda s: bool(s.finals()), 30) and svc.bot.drain(30)
    assert "couldn" in json.dumps(slack.finals()[0]["blocks"])  # a refusal, no model involved

    status, metrics = _get(f"{base}/metrics")
    assert status == 200
    assert 'footnote_documents{state="indexed"} 3.0' in metrics
    assert 'footnote_questions_total{surface="slack"} 1.0' in metrics
    assert "footnote_refusals_total 1.0" in metrics and "footnote_sync_seconds_count 1.0" in metrics
    assert "footnote_answer_seconds_bucket" in metrics
    assert not any(
        name in metrics for name in ("layoffs", "on-call", ".md", ".txt", str(b.settings.docs_dir.resolve()))
    )  # no paths

    status, page = _get(f"{base}/view/on-call.md?{b.links.sign('on-call.md', 0, 20)}")
    assert status == 200 and '<mark id="hit">' in page
    assert _get(f"{base}/view/on-call.md?from=0&to=20")[0] == 403  # unsigned
    assert _get(f"{base}/view/..%2F..%2Fetc%2Fpasswd")[0] == 403


def test_ask_sync_reads_a_new_document_now_and_says_when_it_is_done(
    service: tuple[Builder, Service, str, FakeSlack],
) -> None:
    """As serve wires it (no schedule: FOOTNOTE_SYNC_MINUTES=0): `/ask sync` waits for the
    warm-up to start the schedule, then reads a document added since, and says so privately."""
    b, svc, base, slack = service

    def ask_sync() -> str:
        form = {"command": "/ask", "text": "sync", "user_id": "U1", "channel_id": "C1", "team_id": "T1",
                "trigger_id": "t", "response_url": slack.response_url}  # fmt: skip
        status, body = signed_post(f"{base}/slack/events", urlencode(form), "application/x-www-form-urlencoded", SECRET)
        assert status == 200
        return body

    assert "still starting up" in ask_sync()
    (b.settings.docs_dir / "parking.md").write_text("# Parking\n\nVisitors park in bay C, level -1.\n")
    svc.schedule.start(svc.sync)  # what serve's warm-up does last
    try:
        assert "Reading new and changed documents now" in ask_sync()
        assert slack.wait_for(lambda s: bool(s.of("response")), 60)
    finally:
        svc.schedule.shutdown()
    assert slack.of("response")[0]["text"].startswith("Done: new and changed documents can be found now")
    parking = b.engine.manifest.get("parking.md")
    assert parking is not None and parking.state == "indexed"
    assert slack.of("chat.postMessage") == []


def test_health_is_not_ok_when_the_model_server_is_down(tmp_path: Path, embedder: Embedder) -> None:
    slack = FakeSlack()
    settings = load_settings(
        data_dir=tmp_path / "d", docs_dir=EXAMPLES, slack_bot_token="x", slack_signing_secret=SECRET,
        llm_url="http://127.0.0.1:9", sync_minutes=0, slack_api_url=slack.url,
    )  # fmt: skip
    try:
        svc = Builder(settings, embedder).service()
        svc.sync()
        health = svc.health_json()
    finally:
        slack.close()
    assert health["indexed"] == 3 and health["model_reachable"] is False and health["ok"] is False


class FakeSocketMode:
    """Stands in for slack_bolt's SocketModeHandler (no Slack to connect to here)."""

    def __init__(self, app: Any, token: str) -> None:
        self.token = token
        self.connected = self.closed = False
        made.append(self)

    def connect(self) -> None:
        self.connected = True

    def close(self) -> None:
        self.closed = True


made: list[FakeSocketMode] = []


def test_socket_mode_also_serves_health_metrics_and_the_viewer(tmp_path: Path, embedder: Embedder) -> None:
    slack = FakeSlack()
    settings = load_settings(
        data_dir=tmp_path / "data", docs_dir=EXAMPLES, slack_bot_token="xoxb-x", slack_app_token="xapp-x",
        slack_api_url=slack.url, sync_minutes=0,
    )  # fmt: skip
    b = Builder(settings, embedder)
    svc = b.service()
    svc.sync()
    svc.warmup.ready()
    stop, ready = threading.Event(), threading.Event()
    servers: list[HttpServer] = []

    def started(server: HttpServer) -> None:
        servers.append(server)
        ready.set()

    args = (svc, svc.http_server(("127.0.0.1", 0), events=False), "xapp-x", stop)
    kw = {"connection": FakeSocketMode, "started": started}
    t = threading.Thread(target=run_socket, args=args, kwargs=kw, daemon=True)
    t.start()
    try:
        assert ready.wait(30)
        base = servers[0].url
        status, body = _get(f"{base}/healthz")
        assert status == 200 and json.loads(body)["indexed"] == 3
        assert _get(f"{base}/metrics")[0] == 200
        status, page = _get(f"{base}/view/on-call.md?{b.links.sign('on-call.md', 0, 20)}")
        assert status == 200 and '<mark id="hit">' in page
        assert _get(f"{base}/view/on-call.md?from=0&to=20")[0] == 403  # unsigned
        assert signed_post(f"{base}/slack/events", "{}", "application/json", "")[0] == 404  # events come by socket
        assert made[-1].connected and made[-1].token == "xapp-x"
    finally:
        stop.set()
        t.join(10)
        slack.close()
    assert not t.is_alive() and made[-1].closed
    with pytest.raises(OSError):  # the HTTP side stopped with it
        urllib.request.urlopen(f"{base}/healthz", timeout=2)


def test_serve_loads_the_model_before_syncing_and_a_broken_one_is_a_logged_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from bot.serve import load_models
    from testkit.fakes import ScriptedModel

    base = {"data_dir": tmp_path, "docs_dir": EXAMPLES}
    rt = Builder(load_settings(**base))
    rt.__dict__["model"] = ScriptedModel("[1] ok.")  # what the cached property would have loaded
    with caplog.at_level("INFO", logger="footnote"):
        load_models(rt.models_to_load())
    assert "language model scripted loaded" in caplog.text
    broken = Builder(load_settings(**base, llm_gguf=tmp_path / "missing.gguf"))
    with caplog.at_level("INFO", logger="footnote"):
        load_models(broken.models_to_load())  # does not raise: serve still starts, and answers say what is wrong
    assert "could not be loaded: model file not found" in caplog.text
    served = Builder(load_settings(**base, llm_url="http://127.0.0.1:9"))
    load_models(served.models_to_load())
    assert "model" not in served.__dict__  # a model server is not loaded in-process


def test_serve_loads_a_rewrite_model_beside_the_answer_model_and_logs_one_that_cannot_load(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses

    from bot.serve import load_models
    from retrieval.models import files as model_files
    from testkit.fakes import ScriptedModel

    base = {"data_dir": tmp_path, "docs_dir": EXAMPLES, "rewrite": "qwen-1.5b"}
    rt = Builder(load_settings(**base))
    rt.__dict__["model"] = ScriptedModel("[1] ok.")
    rt.__dict__["rewrite_model"] = ScriptedModel("rewritten")
    with caplog.at_level("INFO", logger="footnote"):
        load_models(rt.models_to_load())
    assert "query-rewrite model scripted loaded" in caplog.text
    # The large-model packages absent: a logged error naming the extra, and serve goes on.
    absent = dataclasses.replace(model_files.MODELS["qwen-1.5b"], module="footnote_absent_part{i}")
    monkeypatch.setitem(model_files.MODELS, "qwen-1.5b", absent)
    missing = Builder(load_settings(**base))
    missing.__dict__["model"] = ScriptedModel("[1] ok.")
    with caplog.at_level("INFO", logger="footnote"):
        load_models(missing.models_to_load())
    assert "query-rewrite model could not be loaded" in caplog.text and "large-model" in caplog.text
    assert missing.rewriter() is not None and missing.rewriter()("What is a SEV1?") is None  # searched as asked


def test_serve_without_a_public_url_warns_at_start_in_one_line(
    tmp_path: Path, embedder: Embedder, caplog: pytest.LogCaptureFixture
) -> None:
    slack = FakeSlack()
    base = {"data_dir": tmp_path / "data", "docs_dir": EXAMPLES, "slack_bot_token": "xoxb-x",
            "slack_signing_secret": SECRET, "slack_api_url": slack.url, "sync_minutes": 0}  # fmt: skip
    try:
        with caplog.at_level("WARNING", logger="footnote"):
            Builder(load_settings(**base), embedder).service()
        (warning,) = [r.getMessage() for r in caplog.records if "FOOTNOTE_PUBLIC_URL" in r.getMessage()]
        assert "without a link" in warning and "\n" not in warning
        for url in ({"public_url": "https://footnote.example"}, {"docs_url": "https://drive.example/docs"}):
            caplog.clear()
            with caplog.at_level("WARNING", logger="footnote"):
                Builder(load_settings(**base, **url), embedder).service()
            assert "FOOTNOTE_PUBLIC_URL" not in caplog.text
    finally:
        slack.close()


def test_links_point_into_the_folder_the_index_was_built_from(tmp_path: Path, embedder: Embedder) -> None:
    """`footnote index DIR` with FOOTNOTE_DOCS_DIR unset, then `footnote ask`: links lead into DIR."""
    from testkit.fakes import ScriptedModel

    docs = tmp_path / "drive"
    shutil.copytree(EXAMPLES, docs)
    Builder(load_settings(data_dir=tmp_path / "data", docs_dir=docs), embedder).engine.sync()  # `index DIR`
    b = Builder(load_settings(data_dir=tmp_path / "data", gate_threshold=5.0), embedder)  # the default folder
    assert b.settings.docs_dir.resolve() != docs.resolve()
    b.__dict__["model"] = ScriptedModel("[1] Within 5 minutes.")
    a = b.answers.answer("How fast must a SEV1 page be acknowledged?")
    assert a.citations and all(c.url.startswith(docs.resolve().as_uri() + "/") for c in a.citations)
    viewer = Builder(load_settings(data_dir=tmp_path / "data", public_url="https://f.example"), embedder)
    path = a.citations[0].path
    status, page = viewer.view(path, dict(parse_qsl(viewer.links.sign(path, 0, 20))))
    assert status == 200 and '<mark id="hit">' in page  # the viewer reads DIR too


def test_while_the_chroma_server_is_down_health_and_metrics_say_so_and_questions_are_answered(
    tmp_path: Path, embedder: Embedder
) -> None:
    port = free_port()
    chroma = chroma_server(tmp_path / "db", port).start()
    slack = FakeSlack()
    settings = load_settings(
        data_dir=tmp_path / "data", docs_dir=EXAMPLES, slack_bot_token="xoxb-x", slack_signing_secret=SECRET,
        slack_api_url=slack.url, sync_minutes=0, chroma_url=f"http://127.0.0.1:{port}",
    )  # fmt: skip
    try:
        svc = Builder(settings, embedder).service()
        svc.prepare()  # as serve's warm-up: the engine and the answer service
        svc.sync()
        svc.warmup.ready()
        with svc.http_server(("127.0.0.1", 0)) as server:
            base = server.url
            assert json.loads(_get(f"{base}/healthz")[1])["index_reachable"] is True
            chroma.stop()
            status, body = _get(f"{base}/healthz")
            health = json.loads(body)
            assert status == 200 and health["ok"] and health["index_reachable"] is False  # a restart would not help
            assert "127.0.0.1" not in body  # no internal addresses on an unauthenticated page
            assert _get(f"{base}/readyz")[0] == 200  # still answering: keep sending Slack's events here
            status, metrics = _get(f"{base}/metrics")
            assert status == 200 and "footnote_index_reachable 0.0" in metrics
            assert "footnote_documents{" not in metrics  # no counts rather than stale ones
            assert post_mention(base, slack, "Ev1", "10.1", "What is the capital of Mongolia?", SECRET) == 200
            assert slack.wait_for(lambda s: bool(s.finals()), 30) and svc.bot.drain(30)
            assert "couldn" in json.dumps(slack.finals()[0]["blocks"])  # answered from the index in memory
    finally:
        chroma.stop()
        slack.close()
