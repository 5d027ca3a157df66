"""Scale-out on real engines: two Footnote processes share one Chroma server;
answers come from an OpenAI-compatible llama.cpp server, and survive it going away."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from retrieval.answer.service import AnswerService, Outcome
from retrieval.errors import ModelError, StoreUnreachable, SyncBusy
from retrieval.index.manifest import INDEXED
from retrieval.learn import LearnedPairs
from retrieval.models.embed import SentenceTransformerEmbedder
from retrieval.models.llm import OpenAICompatibleModel
from retrieval.search.engine import FolderMismatch
from testkit.servers import Server, chroma_server, free_port, llama_server
from tests.conftest import ANSWERING, EXAMPLES, ROOT, make_engine

QUESTION = "How fast must a SEV1 page be acknowledged?"


@pytest.fixture(scope="module")
def chroma_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    server = chroma_server(tmp_path_factory.mktemp("chroma-server") / "db", port).start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    d = tmp_path / "docs"
    shutil.copytree(EXAMPLES, d)
    return d


REPLICA = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[4])
    from tests.conftest import make_engine
    from retrieval.models.embed import load_embedder
    eng = make_engine(load_embedder(), Path(sys.argv[1]), Path(sys.argv[2]), chroma_url=sys.argv[3])
    hits = eng.searcher().search(sys.argv[5], k=5).hits
    print(json.dumps([[h.chunk.id, round(h.score, 5)] for h in hits]))
    """
)


def test_two_processes_share_one_chroma_server(
    embedder: SentenceTransformerEmbedder, chroma_url: str, docs: Path, tmp_path: Path
) -> None:
    a = make_engine(embedder, tmp_path / "a", docs, chroma_url=chroma_url)
    report = a.sync()
    assert sorted(report.indexed) == ["expenses.md", "on-call.md", "time-off.txt"]
    assert not (tmp_path / "a" / "manifest.sqlite3").exists()  # records live in the server
    mine = [[h.chunk.id, round(h.score, 5)] for h in a.searcher().search(QUESTION, k=5).hits]
    # A second process, with its own empty data dir, sees the same index and ranks the same.
    out = subprocess.run(
        [sys.executable, "-c", REPLICA, str(tmp_path / "b"), str(docs), chroma_url, str(ROOT), QUESTION],
        capture_output=True, text=True, check=True, timeout=180,
    )  # fmt: skip
    import json

    assert json.loads(out.stdout.strip().splitlines()[-1]) == mine
    b = make_engine(embedder, tmp_path / "b", docs, chroma_url=chroma_url)
    assert {p: r.state for p, r in b.manifest.all().items()} == dict.fromkeys(report.indexed, INDEXED)


def test_one_replica_syncs_at_a_time_and_the_others_pick_up_its_changes(
    embedder: SentenceTransformerEmbedder, chroma_url: str, docs: Path, tmp_path: Path
) -> None:
    a = make_engine(embedder, tmp_path / "a", docs, chroma_url=chroma_url, refresh_s=0.0)
    b = make_engine(embedder, tmp_path / "b", docs, chroma_url=chroma_url, refresh_s=0.0)
    a.manifest.set_docs_folder(str(tmp_path / "elsewhere"))  # the shared index was built from another folder
    for replica in (a, b):  # the folder is recorded in the server: every replica refuses
        with pytest.raises(FolderMismatch):
            replica.sync()
    a.adopt_folder()  # what `footnote index --reindex-from` does
    a.sync()
    assert b.searcher().search("parking garage bicycles", k=1).hits[0].chunk.path != "parking.md"
    assert a.lease.acquire()
    try:
        with pytest.raises(SyncBusy):
            b.sync()
    finally:
        a.lease.release()
    (docs / "parking.md").write_text("# Parking\n\nThe garage under building B has twelve spaces for bicycles.\n")
    a.sync()
    # b did not sync, but its next search sees what a wrote.
    assert b.searcher().search("parking garage bicycles", k=1).hits[0].chunk.path == "parking.md"


def test_a_slack_event_is_claimed_by_exactly_one_replica(
    embedder: SentenceTransformerEmbedder, chroma_url: str, docs: Path, tmp_path: Path
) -> None:
    from bot.claims import CLAIMS, SharedClaims

    store = make_engine(embedder, tmp_path / "a", docs, chroma_url=chroma_url).store
    records = store.records(CLAIMS)
    one, two = SharedClaims(records, "replica-1"), SharedClaims(records, "replica-2")
    assert one.claim("Ev123") is True
    assert two.claim("Ev123") is False  # Slack's retry landed on the other replica: ignored
    assert two.claim("Ev124") is True and one.claim("Ev124") is False


def test_while_the_chroma_server_is_down_questions_are_answered_from_memory_and_a_sync_says_why(
    embedder: SentenceTransformerEmbedder, docs: Path, tmp_path: Path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = chroma_server(tmp_path / "db", port).start()
    try:
        engine = make_engine(embedder, tmp_path / "a", docs, chroma_url=url, refresh_s=0.0)  # checks every search
        engine.sync()
        pairs = LearnedPairs(engine.store.records("learned"))
        pair = pairs.confirm(QUESTION, np.ones(4), None, "on-call.md", 0, 40, "quote", "U1", "pointer")
        before = [h.chunk.id for h in engine.searcher().search(QUESTION, k=3).hits]
        server.stop()
        assert [h.chunk.id for h in engine.searcher().search(QUESTION, k=3).hits] == before
        assert [p.id for p in pairs.all()] == [pair.id]  # as last read
        with pytest.raises(StoreUnreachable, match=f"^the index at {url} is not reachable"):
            engine.sync()
        server.start()
        assert engine.sync().unchanged == len(engine.manifest.all())  # back: nothing was lost
        assert [p.id for p in pairs.all()] == [pair.id]
    finally:
        server.stop()


@pytest.fixture(scope="module")
def model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    from retrieval.models.files import default_gguf

    tmp = tmp_path_factory.mktemp("llm-server")
    port = free_port()
    server = llama_server(default_gguf(tmp / "models"), port, tmp / "llm.log").start()
    yield server, f"http://127.0.0.1:{port}"
    server.stop()


@pytest.mark.slow
def test_answers_through_a_model_server_survive_it_going_away(
    examples_engine,
    model_server: tuple[Server, str],  # type: ignore[no-untyped-def]
) -> None:
    server, url = model_server
    model = OpenAICompatibleModel(url, timeout_s=60, retries=1)
    svc = AnswerService(examples_engine.searcher, lambda: model, ANSWERING)
    q = "What allowance do on-call engineers get per week?"
    assert model.reachable() and OpenAICompatibleModel(f"{url}/v1").reachable()  # root or /v1 both work
    pieces: list[str] = []
    first = svc.answer(q, on_token=pieces.append)
    assert not first.refused and first.text and (first.citations or first.consulted)
    assert len(pieces) > 3  # streamed as it is written, as in-process
    server.stop()
    assert not model.reachable()
    down = svc.answer(q)  # the passages it would have read, plainly not an answer
    assert down.outcome is Outcome.MODEL_FAILED and down.pointers and "not reachable" in down.reason
    server.start()
    again = svc.answer(q)
    assert again.text == first.text  # greedy: the same answer once the server is back


@pytest.mark.slow
def test_a_prompt_beyond_the_servers_context_says_so_and_keeps_the_grammar(
    model_server: tuple[Server, str],
) -> None:
    model = OpenAICompatibleModel(model_server[1], timeout_s=60, retries=1)
    too_long = [{"role": "user", "content": "word " * 6000}]  # the server runs with 4,096 tokens
    with pytest.raises(ModelError, match="maximum context length is 4096 tokens"):
        model.complete(too_long, 16, grammar='root ::= "x"')
    assert model.supports_grammar
    assert model.complete([{"role": "user", "content": "Say hi"}], 8, grammar='root ::= "Hi" [a-z ]*').startswith("Hi")
