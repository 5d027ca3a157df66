"""A fake Slack Web API on 127.0.0.1 (port 0) that records every call.

Used by the tests and by ``footnote bench --slack`` to drive the real Bolt app without
a workspace. It can answer 429 (with ``Retry-After``) to exercise rate-limit retries.
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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs


class FakeSlack:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._ts = itertools.count(1)
        self._throttle: dict[str, int] = {}  # method -> how many calls still get a 429
        self.throttled: list[str] = []
        self.seen_at: list[tuple[str, float]] = []  # (method, time.monotonic()) of every call
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

            def do_POST(self) -> None:
                method = self.path.rsplit("/", 1)[-1]
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                with outer._lock:
                    outer.seen_at.append((method, time.monotonic()))
                    limited = outer._throttle.get(method, 0) > 0
                    if limited:
                        outer._throttle[method] -= 1
                        outer.throttled.append(method)
                if limited:
                    data = json.dumps({"ok": False, "error": "ratelimited"}).encode()
                    self.send_response(429)
                    self.send_header("Retry-After", "1")
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                if "json" in (self.headers.get("Content-Type") or ""):
                    params: dict[str, Any] = json.loads(raw or "{}")
                else:
                    params = {k: v[0] for k, v in parse_qs(raw).items()}
                    if isinstance(params.get("blocks"), str):
                        params["blocks"] = json.loads(params["blocks"])
                with outer._lock:
                    ts = f"1700000000.{next(outer._ts):06d}"
                    params["_ts"] = ts  # the ts this fake answered with, for assertions
                    outer.calls.append((method, params))
                body = {
                    "ok": True,
                    "ts": ts,
                    "channel": params.get("channel", "C1"),
                    "user_id": "UBOT",
                    "bot_id": "BBOT",
                    "team_id": "T1",
                }
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def rate_limit(self, method: str, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` get 429 Too Many Requests, Retry-After: 1."""
        with self._lock:
            self._throttle[method] = times

    def of(self, method: str) -> list[dict[str, Any]]:
        with self._lock:
            return [p for m, p in self.calls if m == method]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


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
