"""Footnote's HTTP side: Bolt's Starlette adapter on uvicorn.

``POST /slack/events`` (HTTP mode only) goes to the Bolt app once its signature is
checked; ``GET /healthz`` says how the server is (the phase, counts only; 503 when broken)
and ``GET /readyz`` whether it answers now;
``GET /view/<path>`` is the citation viewer; ``GET /metrics`` is for Prometheus.

What a slow or hostile client can cost is bounded (:class:`Limits`):

- a request's line and headers must arrive within ``header_s`` of the connection (or,
  on a kept-alive connection, of the request's first byte): uvicorn has no such limit
  of its own, so :class:`_HeaderDeadline` adds it to uvicorn's h11 protocol;
- its body within ``body_s`` more, and at most ``max_body`` bytes (413);
- an idle kept-alive connection is closed after ``keep_alive_s``;
- a request h11 cannot parse (``Content-Length: abc`` or ``-1``) gets uvicorn's 400;
- an unsigned or badly signed Slack request gets 401 before its body is parsed, and a
  signed one that is not a Slack payload gets 400.

Each refusal is one log line, never a traceback, and closes the connection. Waiting for
a body costs no thread; what blocks (Bolt's dispatch, which waits for the handler's ack
and may call Slack's Web API, the viewer's extraction, the health and metrics reads)
runs in Starlette's threadpool, never on the event loop.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import h11
import uvicorn
from slack_bolt import App
from slack_bolt.adapter.starlette.handler import to_bolt_request, to_starlette_response
from slack_sdk.signature import SignatureVerifier
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from uvicorn.protocols.http.h11_impl import H11Protocol

from bot.i18n import accepted
from retrieval.errors import ConfigError

log = logging.getLogger("footnote.http")

METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # Prometheus text exposition
BACKLOG = 2048

View = Callable[[str, dict[str, str], str | None], tuple[int, str]]  # (path, query, language) -> (status, page)


@dataclass(frozen=True)
class Limits:
    header_s: float = 10.0  # the request line and headers
    body_s: float = 10.0  # the body, once the headers are in
    keep_alive_s: int = 5  # an idle kept-alive connection
    max_body: int = 1_000_000  # Slack's payloads are small; anything bigger is not from Slack
    shutdown_s: int = 5  # requests still running when the server stops


@dataclass(frozen=True)
class SlackEvents:
    """Where ``POST /slack/events`` goes: the Bolt app, and the secret its requests are signed with."""

    app: App
    signing_secret: str


class _HeaderDeadline(H11Protocol):
    """uvicorn's h11 protocol with a deadline for a request's line and headers.

    While the connection waits for a request (h11's client state IDLE), a timer runs
    from the connection's start, or from the first byte of a next request on a kept-alive
    connection (uvicorn's own keep-alive timer covers the silence before it, and is
    cancelled by that byte); when it fires the connection is closed. Bytes trickled in
    one at a time do not extend it.
    """

    header_s = 10.0
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # as uvicorn's
        super().connection_made(transport)
        self._watch()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._unwatch()
        super().connection_lost(exc)

    def _watch(self) -> None:
        if self.conn.their_state is not h11.IDLE or self.transport.is_closing():
            self._unwatch()  # the headers are in (or the connection is going)
        elif self._deadline is None:
            self._deadline = self.loop.call_later(self.header_s, self._expire)

    def _unwatch(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            log.debug("closed a connection that sent no complete request within %.0fs", self.header_s)
            self.transport.close()


def _protocol(header_s: float) -> type[H11Protocol]:
    return type("HeaderDeadline", (_HeaderDeadline,), {"header_s": header_s})


def _client(request: Request) -> str:
    return request.client.host if request.client else "?"


def _refuse(request: Request, status: int, why: str) -> Response:
    """One log line, a short plain answer, and the connection closed."""
    log.warning("%s %s from %s: %d, %s", request.method, request.url.path, _client(request), status, why)
    return Response(why + "\n", status, media_type="text/plain", headers={"connection": "close"})


async def _read_body(request: Request, limits: Limits) -> bytes | Response:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limits.max_body:
        return _refuse(request, 413, f"request body over {limits.max_body} bytes")
    body = bytearray()
    try:
        async with asyncio.timeout(limits.body_s):
            async for part in request.stream():
                body += part
                if len(body) > limits.max_body:
                    return _refuse(request, 413, f"request body over {limits.max_body} bytes")
    except TimeoutError:
        return _refuse(request, 408, f"request body not received within {limits.body_s:.0f}s")
    except ClientDisconnect:
        return _refuse(request, 400, "client went away before sending the whole body")
    return bytes(body)


def _signature_problem(verifier: SignatureVerifier, body: str, request: Request) -> str | None:
    """Why this request is not signed by Slack, or None when it is (fresh and matching)."""
    ts = request.headers.get("x-slack-request-timestamp")
    sig = request.headers.get("x-slack-signature")
    if not ts or not sig:
        return "not signed"
    try:
        valid = verifier.is_valid(body=body, timestamp=ts, signature=sig)
    except ValueError:
        return "X-Slack-Request-Timestamp is not a number"
    return None if valid else "bad or stale signature"


def _slack_endpoint(events: SlackEvents, limits: Limits) -> Callable[[Request], Any]:
    verifier = SignatureVerifier(events.signing_secret)

    async def slack_events(request: Request) -> Response:
        raw = await _read_body(request, limits)
        if isinstance(raw, Response):
            return raw
        try:
            body = raw.decode("utf-8")
        except UnicodeDecodeError:
            return _refuse(request, 400, "body is not UTF-8")
        problem = _signature_problem(verifier, body, request)
        if problem is not None:
            return _refuse(request, 401, problem)
        try:
            bolt_request = to_bolt_request(request, raw)
        except Exception as exc:  # signed, yet Bolt cannot read it (bad JSON, `null`, a list): not Slack's
            return _refuse(request, 400, f"not a Slack payload ({type(exc).__name__})")
        if not isinstance(bolt_request.body, dict):
            return _refuse(request, 400, "not a Slack payload (not an object)")
        # Bolt's dispatch waits for the handler's ack and may call Slack: off the event loop.
        resp = await run_in_threadpool(events.app.dispatch, bolt_request)
        return to_starlette_response(resp)

    return slack_events


def make_app(
    health: Callable[[], dict[str, object]],
    view: View | None = None,
    metrics: Callable[[], bytes] | None = None,
    slack: SlackEvents | None = None,
    limits: Limits = Limits(),
) -> Starlette:
    """The ASGI app: the routes above, those given."""

    async def healthz(request: Request) -> Response:
        """Liveness: 200 while starting, syncing or ready; 503 only when broken."""
        info = await run_in_threadpool(health)
        broken = info.get("broken", not info.get("ok"))
        return Response(json.dumps(info), 503 if broken else 200, media_type="application/json")

    async def readyz(request: Request) -> Response:
        """Readiness: 200 once questions are answered now."""
        info = await run_in_threadpool(health)
        return Response(json.dumps(info), 200 if info.get("ok") else 503, media_type="application/json")

    routes = [Route("/healthz", healthz, methods=["GET"]), Route("/readyz", readyz, methods=["GET"])]
    if metrics is not None:
        render = metrics

        async def metrics_page(request: Request) -> Response:
            return Response(await run_in_threadpool(render), media_type=METRICS_TYPE)

        routes.append(Route("/metrics", metrics_page, methods=["GET"]))
    if view is not None:
        show = view

        async def view_page(request: Request) -> Response:
            # The path as sent (still percent-encoded): the viewer decodes it once, and checks its signature.
            raw = bytes(request.scope.get("raw_path") or b"").decode("latin-1").removeprefix("/view/")
            query = {k: v[0] for k, v in parse_qs(request.scope["query_string"].decode("latin-1")).items()}
            lang = accepted(request.headers.get("accept-language"))  # the reader's browser's language
            status, page = await run_in_threadpool(show, raw, query, lang)
            return Response(page, status, media_type="text/html; charset=utf-8")

        routes.append(Route("/view/{path:path}", view_page, methods=["GET"]))
    if slack is not None:
        routes.append(Route("/slack/events", _slack_endpoint(slack, limits), methods=["POST"]))
    return Starlette(routes=routes)


def bind(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (not yet listening), or a one-line :class:`ConfigError`."""
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[
            0
        ]
    except socket.gaierror as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as exc:
        sock.close()
        raise _port_error(host, port, exc) from None
    return sock


def _port_error(host: str, port: int, exc: OSError) -> ConfigError:
    if exc.errno == errno.EADDRINUSE:
        return ConfigError(
            f"port {port} is in use on {host}: stop what listens there, or serve on another port "
            "(--http PORT, or FOOTNOTE_HTTP_PORT in Socket Mode)"
        )
    return ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}")


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()


class HttpServer:
    """uvicorn serving an ASGI app on a bound socket, in a thread of its own, until :meth:`stop`."""

    def __init__(self, app: Starlette, where: socket.socket | tuple[str, int], limits: Limits = Limits()) -> None:
        self.sock = where if isinstance(where, socket.socket) else bind(*where)
        addr: Sequence[Any] = self.sock.getsockname()
        self.host, self.port = str(addr[0]), int(addr[1])
        config = uvicorn.Config(
            app,
            http=_protocol(limits.header_s),
            loop="asyncio",
            ws="none",
            lifespan="off",
            log_config=None,  # Footnote's logging stays as `serve` set it
            access_log=False,
            server_header=False,
            timeout_keep_alive=limits.keep_alive_s,
            timeout_graceful_shutdown=limits.shutdown_s,
            backlog=BACKLOG,
        )
        self._server = _Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout: float = 30.0) -> HttpServer:
        try:
            self.sock.listen(BACKLOG)
        except OSError as exc:  # another process bound the port too, and listened first
            self.sock.close()
            raise _port_error(self.host, self.port, exc) from None
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self.sock]}, name="footnote-http", daemon=True
        )
        self._thread.start()
        if not self._server.ready.wait(timeout):
            raise RuntimeError(f"the HTTP server did not start within {timeout:.0f}s")
        return self

    def stop(self, timeout: float = 15.0) -> None:
        """Stop taking connections, let running requests finish (``shutdown_s``), and close."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        self.sock.close()

    def __enter__(self) -> HttpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def make_server(
    where: socket.socket | tuple[str, int],
    health: Callable[[], dict[str, object]],
    view: View | None = None,
    metrics: Callable[[], bytes] | None = None,
    slack: SlackEvents | None = None,
    limits: Limits = Limits(),
) -> HttpServer:
    """An :class:`HttpServer` (not started) for the routes given."""
    return HttpServer(make_app(health, view, metrics, slack, limits), where, limits)
