"""The HTTP side on the real server (uvicorn, 127.0.0.1 port 0) with the real Bolt app and
signed requests: malformed and unsigned requests, slow clients, keep-alive, and handlers
that block kept off the event loop."""

from __future__ import annotations

import json
import logging
import selectors
import socket
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from slack_bolt import App
from slack_sdk import WebClient

from bot.http_server import HttpServer, Limits, SlackEvents, make_server
from testkit.slack import FakeSlack, signed_post

SECRET = "door-secret"


@dataclass
class Door:
    server: HttpServer
    slack: FakeSlack
    mentions: list[str] = field(default_factory=list)
    health_calls: int = 0
    gate: threading.Event = field(default_factory=threading.Event)  # what a blocking handler waits for
    entered: threading.Event = field(default_factory=threading.Event)
    mentioned: threading.Event = field(default_factory=threading.Event)  # set once a mention is handled

    @property
    def events_url(self) -> str:
        return f"{self.server.url}/slack/events"

    def raw(self, data: bytes, timeout: float = 20.0, shut: bool = False) -> bytes:
        """Send ``data`` as is and read until the server closes (or ``timeout``)."""
        with socket.create_connection(("127.0.0.1", self.server.port), timeout=timeout) as s:
            s.sendall(data)
            if shut:
                s.shutdown(socket.SHUT_WR)
            out = b""
            while chunk := s.recv(65536):
                out += chunk
            return out


@pytest.fixture
def door_factory() -> Iterator[Callable[..., Door]]:
    made: list[Door] = []

    def make(limits: Limits | None = None) -> Door:
        slack = FakeSlack()
        app = App(signing_secret=SECRET, client=WebClient(token="xoxb-door", base_url=slack.url))

        def health() -> dict[str, object]:
            door.health_calls += 1
            return {"ok": True}

        server = make_server(("127.0.0.1", 0), health, slack=SlackEvents(app, SECRET), limits=limits or Limits())
        door = Door(server, slack)

        @app.event("app_mention")
        def on_mention(event: dict[str, Any], ack: Callable[[], None]) -> None:
            ack()
            door.mentions.append(event["text"])
            door.mentioned.set()

        @app.command("/ask")
        def on_command(ack: Callable[..., None], command: dict[str, Any]) -> None:
            door.entered.set()
            door.gate.wait(20)  # Bolt's dispatch waits for this ack (up to 3 s)
            ack(f"asked: {command['text']}")

        server.start()
        made.append(door)
        return door

    yield make
    for d in made:
        d.gate.set()
        d.server.stop()
        d.slack.close()


def _mention(text: str, event_id: str) -> str:
    return json.dumps({
        "type": "event_callback", "event_id": event_id, "team_id": "T1", "api_app_id": "A1",
        "event": {"type": "app_mention", "user": "U1", "text": text, "ts": "1.1", "channel": "C1"},
    })  # fmt: skip


def _status(response: bytes) -> int:
    assert response.startswith(b"HTTP/1.1 "), response[:80]
    return int(response.split(b" ", 2)[1])


POST = b"POST /slack/events HTTP/1.1\r\nHost: footnote\r\n"
JSON = b"Content-Type: application/json\r\n"
MALFORMED = {
    "unsigned {bad": (POST + JSON + b"Content-Length: 4\r\n\r\n{bad", 401),
    "unsigned null": (POST + JSON + b"Content-Length: 4\r\n\r\nnull", 401),
    "Content-Length: abc": (POST + b"Content-Length: abc\r\n\r\n{}", 400),
    "Content-Length: -1": (POST + b"Content-Length: -1\r\n\r\n{}", 400),
    "X-Slack-Request-Timestamp: abc": (
        POST + JSON + b"X-Slack-Request-Timestamp: abc\r\nX-Slack-Signature: v0=00\r\nContent-Length: 2\r\n\r\n{}",
        401,
    ),
    # Its first bytes: refused by its declared length, before the rest is sent.
    "a 50 MB body": (POST + JSON + b"Content-Length: 50000000\r\n\r\n" + b"x" * 4096, 413),
    # No declared length: refused once more than 1 MB has been read (here the last byte sent).
    "1 MB chunked": (POST + JSON + b"Transfer-Encoding: chunked\r\n\r\nF4241\r\n" + b"x" * 1_000_001, 413),
    "a body shorter than declared": (POST + JSON + b"Content-Length: 100\r\n\r\n{}", 408),
}


def _lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.INFO and r.name.startswith(("footnote", "uvicorn"))]


def test_malformed_and_unsigned_requests_get_a_4xx_and_one_log_line(
    door_factory: Callable[..., Door], caplog: pytest.LogCaptureFixture
) -> None:
    door = door_factory(Limits(body_s=2))
    caplog.set_level(logging.DEBUG)
    for name, (request, expected) in MALFORMED.items():
        caplog.clear()
        response = door.raw(request)
        assert _status(response) == expected, name
        assert b"connection: close" in response.lower(), name  # and the connection is not kept
        (line,) = _lines(caplog)  # one line each, at most a warning, never a traceback
        assert line.levelno == logging.WARNING and line.exc_info is None, name
        assert "Traceback" not in caplog.text, name
    # Signed by Slack's secret, yet not a Slack payload: 400, still one line and no traceback.
    for body in ("{bad", "null", "[1]"):
        caplog.clear()
        assert signed_post(door.events_url, body, "application/json", SECRET)[0] == 400, body
        assert len(_lines(caplog)) == 1 and "Traceback" not in caplog.text
    assert door.mentions == []
    # The door still works: a signed mention is acked and handled.
    assert signed_post(door.events_url, _mention("hello", "Ev1"), "application/json", SECRET)[0] == 200
    # Bolt answers an event before its listener runs on a worker thread: wait for the listener.
    assert door.mentioned.wait(20) and door.mentions == ["hello"]


def test_fifty_half_sent_connections_are_closed_within_15s_while_healthz_answers(
    door_factory: Callable[..., Door],
) -> None:
    door = door_factory()  # the production limits
    threads_before = threading.active_count()
    partial = [
        b"GET /healthz HTTP/1.1\r\nHost: foot",  # headers cut off
        POST + JSON + b'Content-Length: 400\r\n\r\n{"type": ',  # a body shorter than declared
        b"",  # connected, then silent
    ]
    sel = selectors.DefaultSelector()
    t0 = time.monotonic()
    for i in range(50):
        s = socket.create_connection(("127.0.0.1", door.server.port))
        s.sendall(partial[i % 3])
        sel.register(s, selectors.EVENT_READ)
    closed: list[float] = []
    health: list[float] = []
    while len(closed) < 50 and time.monotonic() - t0 < 30:
        for key, _ in sel.select(timeout=0.5):
            s = key.fileobj
            assert isinstance(s, socket.socket)
            try:
                while s.recv(65536):  # a 408 for a half-sent body, then the close
                    pass
            except ConnectionResetError:
                pass
            sel.unregister(s)
            s.close()
            closed.append(time.monotonic() - t0)
        h0 = time.monotonic()
        with urllib.request.urlopen(f"{door.server.url}/healthz", timeout=5) as resp:
            assert resp.status == 200
        health.append(time.monotonic() - h0)
        if len(closed) < 50:
            assert threading.active_count() < threads_before + 10  # no thread held per connection
    sel.close()
    print(f"50 half-sent connections: last closed after {max(closed):.2f}s; /healthz answered {len(health)} "
          f"times meanwhile, slowest in {max(health):.3f}s")  # fmt: skip
    assert len(closed) == 50 and max(closed) <= 15.0
    assert len(health) >= 10 and max(health) < 2.0


def test_idle_and_half_sent_kept_alive_connections_are_closed(door_factory: Callable[..., Door]) -> None:
    door = door_factory(Limits(header_s=1.0, keep_alive_s=1))
    request = b"GET /healthz HTTP/1.1\r\nHost: footnote\r\n\r\n"
    for follow_up in (b"", b"GET /healthz HTTP/1.1\r\nHo"):  # silence, then a next request cut off
        with socket.create_connection(("127.0.0.1", door.server.port), timeout=10) as s:
            t0 = time.monotonic()
            s.sendall(request + request)  # two requests on one connection: keep-alive works
            got = b""
            while got.count(b"HTTP/1.1 200") < 2:
                got += s.recv(65536)
            s.sendall(follow_up)
            while s.recv(65536):
                pass
            assert time.monotonic() - t0 < 8  # closed by the server, well before the client's 10 s
    assert door.health_calls == 4


def test_a_handler_that_blocks_does_not_block_the_server(door_factory: Callable[..., Door]) -> None:
    """Bolt's dispatch waits for a command handler's ack: it runs in a thread, so /healthz still answers."""
    door = door_factory()
    form = urllib.parse.urlencode({"command": "/ask", "text": "status", "user_id": "U1", "channel_id": "C1",
                                   "team_id": "T1", "trigger_id": "t", "response_url": "http://127.0.0.1:9/r"})  # fmt: skip
    result: list[tuple[int, str]] = []
    poster = threading.Thread(
        target=lambda: result.append(signed_post(door.events_url, form, "application/x-www-form-urlencoded", SECRET))
    )
    poster.start()
    try:
        assert door.entered.wait(10)  # the handler runs and has not acked: dispatch is waiting
        with urllib.request.urlopen(f"{door.server.url}/healthz", timeout=2) as resp:
            assert resp.status == 200 and result == []
    finally:
        door.gate.set()
        poster.join(10)
    assert result == [(200, "asked: status")]


def test_a_stopped_server_refuses_connections(door_factory: Callable[..., Door]) -> None:
    door = door_factory()
    url = f"{door.server.url}/healthz"
    with urllib.request.urlopen(url, timeout=5) as resp:
        assert resp.status == 200
    door.server.stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=2)
