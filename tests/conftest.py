"""Shared fixtures: each real model is loaded once per test run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from retrieval.chunk import ChunkerConfig
from retrieval.embed import SentenceTransformerEmbedder, load_embedder
from retrieval.engine import Engine, EngineConfig
from retrieval.rerank import SentenceReranker
from retrieval.search import SearchConfig

ROOT = Path(__file__).resolve().parent.parent
# The development set lives beside the repository; FOOTNOTE_DEV_SET points elsewhere.
DEV = next(
    (p for p in (Path(os.environ.get("FOOTNOTE_DEV_SET", "")), ROOT.parent / "shared" / "eval" / "dev",
                 Path("/work/shared/eval/dev")) if str(p) not in ("", ".") and (p / "docs").is_dir()),
    ROOT.parent / "shared" / "eval" / "dev",
)  # fmt: skip
DEV_DOCS = DEV / "docs"
EXAMPLES = ROOT / "examples" / "docs"


def read_jsonl(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="session")
def embedder() -> SentenceTransformerEmbedder:
    return load_embedder()


@pytest.fixture(scope="session")
def dev_engine(embedder: SentenceTransformerEmbedder, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    """The dev corpus indexed once, with the real embedder into a real on-disk Chroma."""
    if not DEV_DOCS.is_dir():
        pytest.skip(f"dev set not found at {DEV_DOCS}")
    data = tmp_path_factory.mktemp("dev-index")
    eng = Engine(EngineConfig(data, DEV_DOCS, ChunkerConfig(), SearchConfig()), embedder, SentenceReranker(1.5))
    eng.sync()
    return eng


@pytest.fixture(scope="session")
def examples_engine(embedder: SentenceTransformerEmbedder, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    """The example handbook shipped in the repository, indexed once: for behaviour tests that
    need a real index but not the dev set's questions."""
    eng = make_engine(embedder, tmp_path_factory.mktemp("examples-index"), EXAMPLES)
    eng.sync()
    return eng


def make_engine(embedder: SentenceTransformerEmbedder, data: Path, docs: Path, **kw: object) -> Engine:
    return Engine(EngineConfig(data, docs, ChunkerConfig(), SearchConfig(), **kw), embedder, SentenceReranker(1.5))  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def real_model(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The packaged default GGUF, assembled once and loaded once per test run."""
    from retrieval.llm import load_model

    # A generous deadline: the suite may share the CPU; production keeps FOOTNOTE_ANSWER_DEADLINE_S.
    return load_model(None, None, tmp_path_factory.mktemp("models"), n_ctx=4096, deadline_s=300)
