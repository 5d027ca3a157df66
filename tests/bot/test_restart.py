"""A real ``footnote serve --http`` process killed while it answers: the question survives.

The process talks to a fake Slack Web API and to a fake OpenAI-compatible model server,
both in this test, so the test decides when the model answers: it holds the answer,
kills the process (kill -9, then SIGTERM), starts it again, and lets the model answer.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testkit.servers import free_port, wait_http
from testkit.slack import FakeSlack, HeldModel, post_mention
from tests.conftest import EXAMPLES, ROOT

SECRET = "restart-secret"
QUESTION = "How fast must a SEV1 page be acknowledged?"
GRACE_S = 1.0


class Serve:
    """``footnote serve --http PORT`` as its own process, from this worktree."""

    def __init__(self, env: dict[str, str], port: int, log: Path) -> None:
        self.env, self.port, self.log = env, port, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Serve:
        out = self.log.open("ab")
        args = [sys.executable, "-m", "bot.cli", "serve", "--http", str(self.port), "--host", "127.0.0.1"]
        self.proc = subprocess.Popen(args, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        wait_http(f"http://127.0.0.1:{self.port}/healthz", self.proc, timeout=180)
        return self

    def event(self, slack: FakeSlack, event_id: str, ts: str) -> int:
        return post_mention(f"http://127.0.0.1:{self.port}", slack, event_id, ts, QUESTION, SECRET)

    def kill(self, sig: int) -> float:
        """Send ``sig``; seconds until the process is gone."""
        assert self.proc is not None
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        self.proc.wait(60)
        return time.monotonic() - t0


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[FakeSlack, HeldModel, Any]]:
    docs = tmp_path / "docs"
    shutil.copytree(EXAMPLES, docs)
    slack, model = FakeSlack(), HeldModel()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "FOOTNOTE_DATA_DIR": str(tmp_path / "data"),
        "FOOTNOTE_DOCS_DIR": str(docs),
        "FOOTNOTE_SYNC_MINUTES": "0",
        "FOOTNOTE_LLM_URL": model.url,
        "FOOTNOTE_SLACK_API_URL": slack.url,
        "FOOTNOTE_SHUTDOWN_GRACE_S": str(GRACE_S),
        # The question must reach the model (on this three-file drive the calibration would point at it).
        "FOOTNOTE_GATE_THRESHOLD": "0.70",
        "FOOTNOTE_GATE_POINT_THRESHOLD": "1.0",
        "SLACK_BOT_TOKEN": "xoxb-restart",
        "SLACK_SIGNING_SECRET": SECRET,
    }
    env.pop("SLACK_APP_TOKEN", None)
    started: list[Serve] = []

    def serve() -> Serve:
        s = Serve(env, free_port(), tmp_path / "serve.log").start()
        started.append(s)
        return s

    yield slack, model, serve
    for s in started:
        if s.proc is not None and s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait(10)
    model.close()
    slack.close()


def _placeholders(slack: FakeSlack, thread: str) -> list[dict[str, Any]]:
    return [p for p in slack.of("chat.postMessage") if p.get("thread_ts") == thread and not p.get("blocks")]


def _finals_in(slack: FakeSlack, ts: str) -> list[dict[str, Any]]:
    return [f for f in slack.finals() if f.get("ts") == ts]


@pytest.mark.slow
def test_a_question_survives_kill_9_and_sigterm_and_is_answered_once(world: Any) -> None:
    slack, model, serve = world

    first = serve()
    assert first.event(slack, "EvKILL", "900.1") == 200
    assert model.wait_requests(1)  # the model is writing the answer...
    first.kill(signal.SIGKILL)  # ...when the process dies
    (stuck,) = _placeholders(slack, "900.1")
    assert slack.finals() == []  # the placeholder still says "Looking through the docs…"

    model.released.set()
    second = serve()  # the journal gives the stuck placeholder its answer
    assert slack.wait_for(lambda s: bool(_finals_in(s, stuck["_ts"])), 120)
    assert "[1]" in json.dumps(_finals_in(slack, stuck["_ts"])[0]["blocks"])

    model.released.clear()
    n = model.requests
    assert second.event(slack, "EvTERM", "901.1") == 200
    assert model.wait_requests(n + 1)
    took = second.kill(signal.SIGTERM)  # stops taking work, waits GRACE_S for the answer, exits
    assert second.proc is not None and second.proc.returncode == 0
    assert took < GRACE_S + 15  # bounded (the +15 is interpreter teardown on a loaded machine)
    (waiting,) = _placeholders(slack, "901.1")
    assert _finals_in(slack, waiting["_ts"]) == []

    model.released.set()
    third = serve()
    assert slack.wait_for(lambda s: bool(_finals_in(s, waiting["_ts"])), 120)
    third.kill(signal.SIGTERM)
    # Each question got one placeholder and one final answer in it: nothing answered twice.
    assert len(_placeholders(slack, "900.1")) == 1 and len(_placeholders(slack, "901.1")) == 1
    assert len(_finals_in(slack, stuck["_ts"])) == 1 and len(_finals_in(slack, waiting["_ts"])) == 1
    assert len(slack.finals()) == 2


def _journaled_placeholder(data_dir: Path, ts: str) -> bool:
    from bot.journal import Journal

    j = Journal(data_dir)
    try:
        return any(job.placeholder_ts == ts for job in j.unfinished())
    finally:
        j.close()


def _phase(s: Serve) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{s.port}/healthz", timeout=10) as resp:
        return str(json.loads(resp.read())["phase"])


@pytest.mark.slow
def test_a_question_asked_during_warm_up_survives_kill_9_and_is_answered_after_the_next_start(
    world: Any, tmp_path: Path
) -> None:
    slack, model, serve = world
    data_dir = tmp_path / "data"  # the world's FOOTNOTE_DATA_DIR
    first = serve()  # returns once the port answers: on a new data dir, long before the models are loaded
    assert _phase(first) != "ready"
    assert first.event(slack, "EvWARM", "910.1") == 200  # acked while warming up
    assert slack.wait_for(lambda s: bool(_placeholders(s, "910.1")), 120)
    (waiting,) = _placeholders(slack, "910.1")
    assert "Starting up" in waiting["text"] or "Reading the drive" in waiting["text"]  # it says why it waits
    # Killed once the journal knows its placeholder (killed before that, the answer is a new reply).
    assert slack.wait_for(lambda _: _journaled_placeholder(data_dir, waiting["_ts"]), 120)
    first.kill(signal.SIGKILL)  # mid warm-up (the held model cannot have answered it anyway)
    assert slack.finals() == []

    model.released.set()
    second = serve()  # the journal has it: answered into the same placeholder, once
    assert slack.wait_for(lambda s: bool(_finals_in(s, waiting["_ts"])), 180)
    second.kill(signal.SIGTERM)
    assert "[1]" in json.dumps(_finals_in(slack, waiting["_ts"])[0]["blocks"])
    assert len(_placeholders(slack, "910.1")) == 1 and len(slack.finals()) == 1
