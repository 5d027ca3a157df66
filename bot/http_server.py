"""HTTP mode: a small threaded server that hands Slack's requests to the Bolt app.

``POST /slack/events`` goes to Bolt unchanged (Bolt checks the signature and
answers 401 on a bad or stale one); ``GET /healthz`` says whether the index is loaded;
``GET /view/<path>`` is the citation viewer; ``GET /metrics`` is for Prometheus.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from slack_bolt import App, BoltRequest

MAX_BODY = 1_000_000
METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # Prometheus text exposition  # Slack payloads are small; anything bigger is not from Slack


View = Callable[[str, dict[str, str]], tuple[int, str]]


def make_server(
    app: App,
    host: str,
    port: int,
    health: Callable[[], dict[str, object]],
    view: View | None = None,
    metrics: Callable[[], bytes] | None = None,
) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        server_version = "Footnote"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
            pass

        def do_POST(self) -> None:
            url = urlsplit(self.path)
            if url.path != "/slack/events":
                self._send(404, "text/plain", b"not found")
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._send(413, "text/plain", b"request too large")
                return
            body = self.rfile.read(length).decode("utf-8", "replace")
            headers: dict[str, str | Sequence[str]] = {k.lower(): [v] for k, v in self.headers.items()}
            resp = app.dispatch(BoltRequest(body=body, query=url.query, headers=headers))
            data = (resp.body or "").encode()
            ctype = (resp.headers.get("content-type") or ["text/plain"])[0]
            self._send(resp.status, ctype, data)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if view is not None and url.path.startswith("/view/"):
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                status, page = view(url.path.removeprefix("/view/"), query)
                self._send(status, "text/html; charset=utf-8", page.encode())
                return
            if metrics is not None and url.path == "/metrics":
                self._send(200, METRICS_TYPE, metrics())
                return
            if url.path == "/healthz":
                info = health()
                self._send(200 if info.get("ok") else 503, "application/json", json.dumps(info).encode())
                return
            self._send(404, "text/plain", b"not found")

        def _send(self, status: int, ctype: str, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return ThreadingHTTPServer((host, port), Handler)


def serve_in_thread(server: ThreadingHTTPServer) -> threading.Thread:
    t = threading.Thread(target=server.serve_forever, name="footnote-http", daemon=True)
    t.start()
    return t
