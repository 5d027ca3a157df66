"""`footnote serve` listens before it warms up (issue 33): a question that arrives meanwhile
is acked, told what is happening and answered once the server is ready; /healthz tells
starting from broken, /readyz says when it answers; `footnote status` shows the phase.

The warm-up is run by the test, after the question, so the order is by construction, not
by timing: the real Bolt app, a real index, a scripted model, a fake Slack Web API.
"""

from __future__ import annotations

import json
import shutil
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bot.builder import Builder
from bot.cli import main
from bot.serve import ModelLoad, ServeOptions, Service, measure_models, warm_up
from bot.warmup import Phase, Warmup, serving_states
from config.settings import load_settings
from retrieval.models import Embedder
from testkit.fakes import ScriptedModel
from testkit.slack import FakeSlack, signed_post
from tests.conftest import EXAMPLES

SECRET = "warmup-secret"
QUESTION = "How fast must a SEV1 page be acknowledged?"
OPTS = ServeOptions("127.0.0.1", 0)


def _builder(tmp_path: Path, embedder: Embedder, slack: FakeSlack, docs: Path | None = None) -> Builder:
    settings = load_settings(
        data_dir=tmp_path / "data", docs_dir=docs or EXAMPLES, slack_bot_token="xoxb-x", slack_signing_secret=SECRET,
        slack_api_url=slack.url, sync_minutes=0, public_url="https://footnote.example",
    )  # fmt: skip
    b = Builder(settings, embedder, measure_at_load=False)
    b.__dict__["model"] = ScriptedModel("Within 5 minutes [1].")  # what the cached property would load
    return b


def _get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def _mention(base: str, slack: FakeSlack, ts: str) -> int:
    slack.user_message("C1", ts, f"<@UBOT> {QUESTION}")
    body = {
        "type": "event_callback", "event_id": f"Ev{ts}", "team_id": "T1", "api_app_id": "A1",
        "event": {"type": "app_mention", "user": "U1", "text": f"<@UBOT> {QUESTION}", "ts": ts, "channel": "C1"},
    }  # fmt: skip
    return signed_post(f"{base}/slack/events", json.dumps(body), "application/json", SECRET)[0]


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    s = FakeSlack()
    yield s
    s.close()


def _placeholders(slack: FakeSlack, thread: str) -> list[dict[str, Any]]:
    return [m for m in slack.of("chat.postMessage") if m.get("thread_ts") == thread and not m.get("blocks")]


def _placeholder(slack: FakeSlack, thread: str) -> dict[str, Any]:
    assert slack.wait_for(lambda s: bool(_placeholders(s, thread)), 30)  # posted just after the ack
    (p,) = _placeholders(slack, thread)
    return p


def test_a_question_during_warm_up_is_acked_told_and_answered_once_ready(
    tmp_path: Path, embedder: Embedder, slack: FakeSlack
) -> None:
    b = _builder(tmp_path, embedder, slack)
    svc = b.service()
    assert "engine" not in b.__dict__  # nothing slow before listening
    stop = threading.Event()
    with svc.http_server(("127.0.0.1", 0)) as server:
        status, health = _get(f"{server.url}/healthz")
        assert status == 200 and health["phase"] == "starting" and not health["ok"]  # starting is not broken
        assert _get(f"{server.url}/readyz")[0] == 503
        assert _mention(server.url, slack, "700.1") == 200  # acked while nothing is loaded
        assert "Starting up" in _placeholder(slack, "700.1")["text"]  # shown at once, says why it waits
        assert slack.finals() == []

        warm_up(svc, b.models_to_load(), OPTS, stop)  # the background thread's work, here
        assert svc.bot.drain(60)
        status, health = _get(f"{server.url}/readyz")
        assert status == 200 and health["phase"] == "ready" and health["indexed"] == 3
        assert _get(f"{server.url}/healthz")[0] == 200
    (final,) = slack.finals()
    assert final["ts"] == _placeholder(slack, "700.1")["_ts"]  # answered in its placeholder
    assert "[1]" in json.dumps(final["blocks"]) and not stop.is_set()


def test_a_new_index_is_read_whole_first_and_a_restart_answers_before_its_sync(
    tmp_path: Path, embedder: Embedder, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    phases: list[tuple[Phase, int, int]] = []

    def watched(svc: Service) -> None:
        real = svc.sync

        def sync(on_progress: Any = None) -> None:
            phases.append((svc.warmup.state().phase, 0, 0))
            real(on_progress)
            st = svc.warmup.state()
            phases.append((st.phase, st.done, st.total))

        def prime() -> int:
            phases.append((svc.warmup.state().phase, -1, -1))  # -1: the prompts primed here
            return 0

        monkeypatch.setattr(svc, "sync", sync)
        monkeypatch.setattr(svc, "prime", prime)

    first = _builder(tmp_path, embedder, slack).service()
    watched(first)
    warm_up(first, [], OPTS, threading.Event())
    # New index: syncing while it syncs, with counts (3 of 3 documents read), ready after, then primed.
    assert phases == [(Phase.SYNCING, 0, 0), (Phase.SYNCING, 3, 3), (Phase.READY, -1, -1)]
    assert first.warmup.state().phase is Phase.READY

    phases.clear()
    again = _builder(tmp_path, embedder, slack).service()  # a restart on the same data dir
    watched(again)
    warm_up(again, [], OPTS, threading.Event())
    assert phases[0] == (Phase.READY, -1, -1)  # primed before its sync, answering from the index already there
    assert phases[1][0] is Phase.READY


def test_a_warm_up_that_fails_stops_the_server_healthz_says_broken_and_a_waiting_question_says_why(
    tmp_path: Path, embedder: Embedder, slack: FakeSlack
) -> None:
    svc = _builder(tmp_path, embedder, slack, docs=tmp_path / "not-there").service()
    stop = threading.Event()
    with svc.http_server(("127.0.0.1", 0)) as server:
        assert _mention(server.url, slack, "702.1") == 200
        assert "Starting up" in _placeholder(slack, "702.1")["text"]
        warm_up(svc, [], OPTS, stop)
        assert svc.bot.drain(30)
    assert stop.is_set() and svc.warmup.state().phase is Phase.FAILED
    assert "docs folder not found" in str(svc.warmup.error)  # run() raises it: a one-line error
    health = svc.health_json()
    assert health["broken"] and health["phase"] == "failed" and not health["ok"]
    (told,) = slack.of("chat.update")  # not "Starting up…" for good
    assert told["ts"] == _placeholder(slack, "702.1")["_ts"] and "blocks" not in told  # not taken for an answer
    assert told["text"].startswith(":warning: Footnote could not start") and "docs folder not found" in told["text"]
    shutil.copytree(EXAMPLES, tmp_path / "not-there")  # fixed: the next start answers it, in that message
    again = _builder(tmp_path, embedder, slack, docs=tmp_path / "not-there").service()
    warm_up(again, [], OPTS, threading.Event())
    assert again.bot.drain(60)
    (final,) = slack.finals()
    assert final["ts"] == told["ts"] and "[1]" in json.dumps(final["blocks"])


def test_a_restart_whose_drive_is_not_there_answers_from_its_index_and_says_why_it_did_not_sync(
    tmp_path: Path, embedder: Embedder, slack: FakeSlack
) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(EXAMPLES, docs)
    warm_up(_builder(tmp_path, embedder, slack, docs).service(), [], OPTS, threading.Event())
    shutil.rmtree(docs)  # the shared drive is not mounted yet at the restart
    svc = _builder(tmp_path, embedder, slack, docs).service()
    stop = threading.Event()
    with svc.http_server(("127.0.0.1", 0)) as server:
        warm_up(svc, [], OPTS, stop)
        assert not stop.is_set() and svc.warmup.state().phase is Phase.READY
        for probe in ("healthz", "readyz"):  # neither a restart nor unreadying would mount the drive
            status, health = _get(f"{server.url}/{probe}")
            assert status == 200 and health["ok"] and health["last_sync_failed"] and health["indexed"] == 3
        assert _mention(server.url, slack, "701.1") == 200
        _placeholder(slack, "701.1")  # taken (the ack comes first): only now is there work to drain
        assert svc.bot.drain(60)
    (final,) = slack.finals()
    assert "[1]" in json.dumps(final["blocks"])  # answered from the index it has
    out = CliRunner().invoke(main, ["status"], env={"FOOTNOTE_DATA_DIR": str(tmp_path / "data")})
    assert "ready; its last sync failed: docs folder not found" in out.output  # the operator's view says why


def test_a_model_that_cannot_load_is_a_visible_phase_not_a_silent_wait(
    tmp_path: Path, embedder: Embedder, slack: FakeSlack
) -> None:
    from retrieval.errors import ModelError

    def broken() -> Any:
        raise ModelError("model file not found: /nowhere.gguf")

    svc = _builder(tmp_path, embedder, slack).service()
    warm_up(svc, [ModelLoad("language model", broken)], OPTS, threading.Event())
    state = svc.warmup.state()
    assert state.phase is Phase.MODEL_UNAVAILABLE and state.answering and "not found" in state.detail
    assert svc.health_json()["broken"]  # /healthz 503: a person must fix it; questions get passages only


def test_models_loaded_as_shipped_are_timed_afterwards_and_switched(
    tmp_path: Path, embedder: Embedder, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval.models import loader

    b = _builder(tmp_path, embedder, slack)
    shipped, measured = ScriptedModel("shipped [1]."), ScriptedModel("measured [1].")
    b.__dict__["model"] = shipped
    monkeypatch.setattr(loader, "needs_measuring", lambda m: m is shipped)
    monkeypatch.setattr("bot.builder.needs_measuring", loader.needs_measuring)
    monkeypatch.setattr(b, "_answer_model", lambda measure, replacing=None: measured if measure else shipped)
    measure_models(b.models_to_load())
    assert b.model is measured  # the next question uses the measured form
    assert b.measure_model("model") is None  # nothing left to time


def test_status_shows_each_servers_phase(tmp_path: Path) -> None:
    data = tmp_path / "data"
    w = Warmup(data / "serving")
    w.syncing(40, 120)
    ((state, alive),) = serving_states(data)
    assert alive and state.phase is Phase.SYNCING and (state.done, state.total) == (40, 120)
    assert "Reading the drive for the first time: 40 of 120 documents" in state.note()
    out = CliRunner().invoke(main, ["status"], env={"FOOTNOTE_DATA_DIR": str(data)})
    assert out.exit_code == 0 and "syncing: 40 of 120 documents read" in out.output
    w.close()
    assert serving_states(data) == []
    gone = {"phase": "syncing", "done": 1, "total": 9, "pid": 999_999, "host": state.host}
    (data / "serving" / "gone.json").write_text(json.dumps(gone))  # killed: its file stayed
    ((state, alive),) = serving_states(data)
    assert alive is False  # not shown as running
    out = CliRunner().invoke(main, ["status"], env={"FOOTNOTE_DATA_DIR": str(data)})
    assert "pid 999999: not running" in out.output
