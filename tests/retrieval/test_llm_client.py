"""The model-server client's URL handling and retries, against a tiny local HTTP server (no model)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from retrieval.errors import ModelError
from retrieval.models.llm import OpenAICompatibleModel


class FakeModelServer:
    """Answers /v1/chat/completions and /v1/models; ``fail_next`` requests get a 500 first,
    and requests with a grammar get a 400 while ``reject_grammar`` is set."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.bodies: list[dict[str, object]] = []
        self.fail_next = 0
        self.reject_grammar = False
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                outer.paths.append(self.path)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.bodies.append(body)
                if outer.reject_grammar and "grammar" in body:
                    self._send(400, {"error": "unknown field: grammar"})
                elif outer.fail_next > 0:
                    outer.fail_next -= 1
                    self._send(500, {"error": "busy"})
                elif self.path == "/v1/chat/completions":
                    self._send(200, {"choices": [{"message": {"content": "It is 5 minutes [1]."}}]})
                else:
                    self._send(404, {"error": "no such route"})

            def do_GET(self) -> None:
                outer.paths.append(self.path)
                self._send(200 if self.path == "/v1/models" else 404, {"data": []})

            def _send(self, code: int, body: dict[str, object]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    s = FakeModelServer()
    yield s
    s.close()


MESSAGES = [{"role": "user", "content": "How fast?"}]


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/", "/v1/chat/completions"])
def test_root_v1_or_full_url_all_reach_chat_completions(server: FakeModelServer, suffix: str) -> None:
    model = OpenAICompatibleModel(server.url + suffix, retries=0)
    streamed: list[str] = []
    assert model.complete(MESSAGES, 32, streamed.append) == "It is 5 minutes [1]."
    assert server.paths == ["/v1/chat/completions"] and streamed == ["It is 5 minutes [1]."]
    body = server.bodies[0]
    assert body["messages"] == MESSAGES and body["max_tokens"] == 32 and body["temperature"] == 0.0
    assert model.reachable() and server.paths[-1] == "/v1/models"


def test_a_failed_request_is_retried(server: FakeModelServer) -> None:
    server.fail_next = 1
    assert OpenAICompatibleModel(server.url, retries=1).complete(MESSAGES, 16) == "It is 5 minutes [1]."
    assert server.paths == ["/v1/chat/completions"] * 2


def test_a_server_that_keeps_failing_is_a_model_error_naming_it(server: FakeModelServer) -> None:
    server.fail_next = 5
    with pytest.raises(ModelError, match="not reachable"):
        OpenAICompatibleModel(server.url, retries=0).complete(MESSAGES, 16)
    assert len(server.paths) == 1  # retries=0: one attempt


def test_a_rejected_request_is_not_retried_and_a_grammar_is_dropped_once(server: FakeModelServer) -> None:
    server.reject_grammar = True
    model = OpenAICompatibleModel(server.url, retries=3)
    assert model.complete(MESSAGES, 16, grammar='root ::= "x"') == "It is 5 minutes [1]."
    assert ["grammar" in b for b in server.bodies] == [True, False] and not model.supports_grammar
    model.complete(MESSAGES, 16, grammar='root ::= "x"')
    assert "grammar" not in server.bodies[-1]  # remembered: not asked again


def test_a_4xx_is_a_model_error_at_once(server: FakeModelServer) -> None:
    with pytest.raises(ModelError, match="refused the request"):
        OpenAICompatibleModel(server.url + "/v1/other", retries=3).complete(MESSAGES, 16)  # the fake's 404
    assert len(server.paths) == 1


def test_an_unreachable_server_is_reported_unreachable(server: FakeModelServer) -> None:
    url = server.url
    server.close()
    assert not OpenAICompatibleModel(url).reachable(timeout_s=0.5)
