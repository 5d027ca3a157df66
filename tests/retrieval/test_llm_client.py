"""The model-server client's URLs, retries, streams and errors, against a tiny local HTTP server (no model)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from retrieval.errors import ModelError
from retrieval.models.llm import LOOP_CHARS, OpenAICompatibleModel
from testkit.fakes import FakeModelServer


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
    assert server.paths == ["/v1/chat/completions"] and streamed == ["It", " is", " 5", " minutes", " [1]."]
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


def test_a_server_that_does_not_stream_is_read_whole(server: FakeModelServer) -> None:
    server.streams = False
    streamed: list[str] = []
    assert OpenAICompatibleModel(server.url).complete(MESSAGES, 16, streamed.append) == "It is 5 minutes [1]."
    assert server.bodies[0]["stream"] is True and streamed == ["It is 5 minutes [1]."]


def test_a_request_refused_with_and_without_grammar_keeps_the_grammar_and_says_why(server: FakeModelServer) -> None:
    server.refuse = "This model's maximum context length is 2048 tokens."
    model = OpenAICompatibleModel(server.url, retries=3)
    with pytest.raises(ModelError, match=r"refused the request: HTTP 400: This model's maximum context length is 2048"):
        model.complete(MESSAGES, 16, grammar='root ::= "x"')
    assert ["grammar" in b for b in server.bodies] == [True, False]
    assert model.supports_grammar  # the prompt was too long, not the grammar unknown


def test_a_stream_that_ends_before_its_first_word_is_asked_again_unstreamed_for_the_reason(
    server: FakeModelServer,
) -> None:
    server.refuse, server.stream_ends = "maximum context length is 2048 tokens", 0  # llama_cpp.server's way
    model = OpenAICompatibleModel(server.url, retries=0)
    with pytest.raises(ModelError, match="maximum context length is 2048 tokens"):
        model.complete(MESSAGES, 16, grammar='root ::= "x"')
    assert [b["stream"] for b in server.bodies] == [True, False, False] and model.supports_grammar


def test_a_stream_cut_after_the_first_words_is_a_model_error(server: FakeModelServer) -> None:
    server.stream_ends = 2
    streamed: list[str] = []
    with pytest.raises(ModelError, match="stopped in the middle of its answer"):
        OpenAICompatibleModel(server.url).complete(MESSAGES, 16, streamed.append)
    assert streamed == ["It", " is"] and len(server.bodies) == 1  # the words shown are not asked for twice


def test_an_error_event_in_a_stream_is_a_model_error_with_its_message(server: FakeModelServer) -> None:
    server.stream_error = "llama_decode failed"
    with pytest.raises(ModelError, match="failed while answering: llama_decode failed"):
        OpenAICompatibleModel(server.url).complete(MESSAGES, 16)


def test_a_stream_that_loops_is_cut_where_it_stands(server: FakeModelServer) -> None:
    server.answer = "The answer is" + " 0" * 300
    text = OpenAICompatibleModel(server.url).complete(MESSAGES, 400)
    assert text.startswith("The answer is 0 0") and len(text) < len("The answer is") + 2 * LOOP_CHARS
