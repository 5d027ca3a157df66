"""A fake Slack Web API on 127.0.0.1 (port 0) that records every call.

Used by the tests and by ``footnote bench --slack`` to drive the real Bolt app without
a workspace. It keeps the messages it was asked to post (and those a test says a person
wrote), so ``conversations.replies`` answers from them; ``auth.test`` names the bot
(``UBOT``/``BBOT``); ``users.conversations`` lists the channels a test put a person in, and
``conversations.info`` says the bot is in every channel but those in :attr:`FakeSlack.outside`.
It can answer 429 (with ``Retry-After``) to exercise rate-limit retries, or an error
such as ``unknown_method`` to exercise fallbacks. A slash command's ``response_url`` can
point here too (:attr:`FakeSlack.response_url`): those posts are the calls named "response".

:class:`HeldModel` is the model side of the same tests: an OpenAI-compatible chat server
whose answer waits until the test releases it, so a test can kill the bot mid-answer.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

BOT_USER, BOT_ID, TEAM = "UBOT", "BBOT", "T1"


class FakeSlack:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._changed = threading.Condition()  # notified after every call
        self._ts = itertools.count(1)
        self._throttle: dict[str, int] = {}  # method -> how many calls still get a 429
        self._errors: dict[str, tuple[str, int | None]] = {}  # method -> (error, calls left; None = always)
        self.throttled: list[str] = []
        self.seen_at: list[tuple[str, float]] = []  # (method, time.monotonic()) of every call
        self.messages: dict[str, list[dict[str, Any]]] = {}  # channel -> messages, as Slack keeps them
        self.memberships: dict[str, list[str]] = {}  # user -> channels they are in (users.conversations)
        self.outside: set[str] = set()  # channels the bot is not in (conversations.info)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                params = {k: v[0] for k, v in parse_qs(url.query).items()}
                self._handle(url.path.rsplit("/", 1)[-1], params)

            def do_POST(self) -> None:
                url = urlsplit(self.path)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                if "json" in (self.headers.get("Content-Type") or ""):
                    params: dict[str, Any] = json.loads(raw or "{}")
                else:
                    params = {k: v[0] for k, v in parse_qs(raw).items()}
                    for key in ("blocks", "chunks"):
                        if isinstance(params.get(key), str):
                            params[key] = json.loads(params[key])
                params.update({k: v[0] for k, v in parse_qs(url.query).items()})
                self._handle(url.path.rsplit("/", 1)[-1], params)

            def _handle(self, method: str, params: dict[str, Any]) -> None:
                params["_peer"] = self.client_address[0]  # which process called (a container's address)
                status, body, headers = outer._answer(method, params)
                data = json.dumps(body).encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.port = int(self.server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}/api/"
        # Where a slash command's ``response_url`` points: its posts are recorded as "response".
        self.response_url = f"http://127.0.0.1:{self.port}/commands/response"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    # -- what a test sets up ------------------------------------------------------------

    def rate_limit(self, method: str, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` get 429 Too Many Requests, Retry-After: 1."""
        with self._lock:
            self._throttle[method] = times

    def fail(self, method: str, error: str, times: int | None = None) -> None:
        """Calls of ``method`` answer ``{"ok": false, "error": error}`` (the next ``times``, or all)."""
        with self._lock:
            self._errors[method] = (error, times)

    def user_message(self, channel: str, ts: str, text: str, user: str = "U1", thread_ts: str | None = None) -> None:
        """A message a person wrote (the test also sends its event to the bot)."""
        msg = {"type": "message", "user": user, "text": text, "ts": ts}
        if thread_ts:
            msg["thread_ts"] = thread_ts
        with self._lock:
            self.messages.setdefault(channel, []).append(msg)

    def member(self, user: str, *channels: str) -> None:
        """``user`` is in ``channels`` (what ``users.conversations`` lists for them)."""
        with self._lock:
            self.memberships.setdefault(user, []).extend(channels)

    # -- what a test reads ----------------------------------------------------------------

    def of(self, method: str) -> list[dict[str, Any]]:
        with self._lock:
            return [p for m, p in self.calls if m == method]

    def wait_for(self, check: Callable[[FakeSlack], bool], timeout: float = 60.0) -> bool:
        """Wait until ``check(self)`` holds (re-checked after every call); False on timeout."""
        end = time.monotonic() + timeout
        while not check(self):
            left = end - time.monotonic()
            if left <= 0:
                return False
            with self._changed:
                self._changed.wait(min(left, 0.25))  # the bound covers a call between check and wait
        return True

    def finals(self) -> list[dict[str, Any]]:
        """Final replies: a message carrying blocks (an answer, a refusal or an error).
        Streaming updates carry text only; so do the placeholders."""
        with self._lock:
            return [
                p
                for m, p in self.calls
                if m in ("chat.update", "chat.postMessage", "chat.stopStream") and p.get("blocks")
            ]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- the Web API ------------------------------------------------------------------------

    def _answer(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        try:
            with self._lock:
                return self._answer_locked(method, params)
        finally:
            with self._changed:
                self._changed.notify_all()

    def _answer_locked(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        self.seen_at.append((method, time.monotonic()))
        if self._throttle.get(method, 0) > 0:
            self._throttle[method] -= 1
            self.throttled.append(method)
            return 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "1"}
        if method in self._errors:
            error, left = self._errors[method]
            if left is not None:
                if left <= 1:
                    del self._errors[method]
                else:
                    self._errors[method] = (error, left - 1)
            self.calls.append((f"{method}!", params))  # a refused call, kept apart from the real ones
            return 200, {"ok": False, "error": error}, {}
        ts = f"1700000000.{next(self._ts):06d}"
        params["_ts"] = ts  # the ts this fake answered with, for assertions
        self.calls.append((method, params))
        body: dict[str, Any] = {"ok": True, "ts": ts, "channel": params.get("channel", "C1")}
        channel = str(params.get("channel") or params.get("channel_id") or "")
        msgs = self.messages.setdefault(channel, [])
        if method in ("chat.postMessage", "chat.startStream"):
            text = params.get("text") or _chunk_text(params)
            msg = {"type": "message", "user": BOT_USER, "bot_id": BOT_ID, "text": text, "ts": ts}
            if params.get("thread_ts"):
                msg["thread_ts"] = params["thread_ts"]
            if params.get("blocks"):
                msg["blocks"] = params["blocks"]
            msgs.append(msg)
        elif method in ("chat.update", "chat.appendStream", "chat.stopStream", "chat.delete"):
            found = next((m for m in msgs if m["ts"] == params.get("ts")), None)
            if found is None:
                return 200, {"ok": False, "error": "message_not_found"}, {}
            body["ts"] = found["ts"]
            if method == "chat.delete":
                msgs.remove(found)
            elif method == "chat.update":
                found["text"] = params.get("text", "")
                found["blocks"] = params.get("blocks") or []
            else:
                found["text"] = found.get("text", "") + _chunk_text(params)
                if params.get("blocks"):
                    found["blocks"] = params["blocks"]
        elif method == "conversations.replies":
            body = self._replies(msgs, params)
        elif method == "users.conversations":
            body = self._paged(
                "channels", [{"id": c} for c in self.memberships.get(str(params.get("user")), [])], params
            )
        elif method == "conversations.info":
            body = {"ok": True, "channel": {"id": channel, "is_member": channel not in self.outside}}
        elif method == "auth.test":
            body = {"ok": True, "user_id": BOT_USER, "bot_id": BOT_ID, "team_id": TEAM, "user": "footnote"}
        else:
            body.update({"user_id": BOT_USER, "bot_id": BOT_ID, "team_id": TEAM})
        return 200, body, {}

    @staticmethod
    def _paged(key: str, items: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
        """``items`` paged by ``limit`` and ``cursor`` (an offset here)."""
        start, limit = int(params.get("cursor") or 0), int(params.get("limit") or 100)
        more = start + limit < len(items)
        return {
            key: items[start : start + limit],
            "ok": True,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }

    @staticmethod
    def _replies(msgs: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
        """The thread, oldest first, paged by ``limit`` and ``cursor`` (an offset here)."""
        root = str(params.get("ts"))
        thread = [dict(m) for m in msgs if m["ts"] == root or m.get("thread_ts") == root]
        if not any(m["ts"] == root for m in thread):
            return {"ok": False, "error": "thread_not_found"}
        thread.sort(key=lambda m: Decimal(m["ts"]))
        if params.get("latest"):
            latest, inclusive = Decimal(str(params["latest"])), str(params.get("inclusive")) in ("1", "true", "True")
            thread = [m for m in thread if Decimal(m["ts"]) < latest or (inclusive and Decimal(m["ts"]) == latest)]
        start = int(params.get("cursor") or 0)
        limit = int(params.get("limit") or 1000)
        page = thread[start : start + limit]
        more = start + limit < len(thread)
        return {
            "ok": True,
            "messages": page,
            "has_more": more,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }


def _chunk_text(params: dict[str, Any]) -> str:
    """The markdown a streaming call carries (``markdown_text`` or markdown chunks)."""
    text = str(params.get("markdown_text") or "")
    for c in params.get("chunks") or []:
        if isinstance(c, dict) and c.get("type") == "markdown_text":
            text += str(c.get("text", ""))
    return text


def post_mention(base_url: str, slack: FakeSlack, event_id: str, ts: str, question: str, secret: str) -> int:
    """A person's ``@Footnote QUESTION`` in channel C1, as Slack keeps it (``slack``) and sends
    it, signed, to ``base_url``/slack/events; the HTTP status."""
    slack.user_message("C1", ts, f"<@UBOT> {question}")
    body = {
        "type": "event_callback", "event_id": event_id, "team_id": TEAM, "api_app_id": "A1",
        "event": {"type": "app_mention", "user": "U1", "text": f"<@UBOT> {question}", "ts": ts, "channel": "C1"},
    }  # fmt: skip
    return signed_post(f"{base_url}/slack/events", json.dumps(body), "application/json", secret)[0]


def signed_post(
    url: str, body: str, ctype: str, secret: str, headers: dict[str, str] | None = None, age: int = 0
) -> tuple[int, str]:
    """POST ``body`` signed the way Slack signs requests (v0 HMAC-SHA256 over ts and body)."""
    ts = str(int(time.time()) - age)
    sig = "v0=" + hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    h = {"Content-Type": ctype, "X-Slack-Request-Timestamp": ts, "X-Slack-Signature": sig, **(headers or {})}
    req = urllib.request.Request(url, data=body.encode(), headers=h, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""


class HeldModel:
    """An OpenAI-compatible chat server whose answers wait until the test releases them."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.requests = 0
        self.peers: list[str] = []  # who asked, in order (a container's address)
        self.released = threading.Event()
        self.changed = threading.Condition()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:
                self._send({"data": [{"id": "held"}]})

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with outer.changed:
                    outer.requests += 1
                    outer.peers.append(self.client_address[0])
                    outer.changed.notify_all()
                outer.released.wait(120)
                self._send({"choices": [{"message": {"content": "Within 5 minutes [1]."}}]})

            def _send(self, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the process that asked was killed meanwhile
                    pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_requests(self, n: int, timeout: float = 180.0) -> bool:
        # as long as a start may take: on a loaded 2-core machine the first question waited
        # over 60 s for the served process's models (a make test beside a 2-thread LLM job)
        with self.changed:
            return self.changed.wait_for(lambda: self.requests >= n, timeout)

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()
