"""Shared fixtures: each real model is loaded once per test run; real engines on real Chroma.

Logic tests use ``tests/fakes.py`` instead. The dev set is required in CI (``CI``
set): a missing one fails the tests that need it instead of skipping them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bot.builder import build_engine
from retrieval.answer import ANSWER_PROBE
from retrieval.index import open_storage
from retrieval.ingest.chunk import ChunkerConfig
from retrieval.models.embed import Embedder, SentenceTransformerEmbedder, load_embedder
from retrieval.search.engine import Engine, EngineConfig
from retrieval.search.gate import GateConfig
from retrieval.search.rerank import SentenceReranker
from retrieval.search.searcher import SearchConfig

ROOT = Path(__file__).resolve().parent.parent
# The development set lives beside the repository; FOOTNOTE_DEV_SET (when set, the only place looked at) points elsewhere.
DEV = (
    Path(os.environ["FOOTNOTE_DEV_SET"])
    if os.environ.get("FOOTNOTE_DEV_SET")
    else next(
        (p for p in (ROOT.parent / "shared" / "eval" / "dev", Path("/work/shared/eval/dev")) if (p / "docs").is_dir()),
        ROOT.parent / "shared" / "eval" / "dev",
    )
)
DEV_DOCS = DEV / "docs"
EXAMPLES = ROOT / "examples" / "docs"
# A gate that answers the example handbook's direct questions (as a looser calibration would),
# points at passages up to 1.0 and refuses a Spanish passport: for tests of what an answer does.
ANSWERING = GateConfig(0.70, point=1.0)


def require_dev_set() -> None:
    """Skip locally without the dev set (saying where it was looked for); in CI, fail."""
    if DEV_DOCS.is_dir():
        return
    msg = f"dev set not found at {DEV} (set FOOTNOTE_DEV_SET to its folder)"
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(f"{msg}: CI must run the dev-set tests", pytrace=False)
    pytest.skip(msg)


def read_jsonl(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="session")
def embedder() -> SentenceTransformerEmbedder:
    return load_embedder()


@pytest.fixture(scope="session")
def dev_engine(embedder: SentenceTransformerEmbedder, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    """The dev corpus indexed once, with the real embedder into a real on-disk Chroma."""
    require_dev_set()
    eng = make_engine(embedder, tmp_path_factory.mktemp("dev-index"), DEV_DOCS)
    eng.sync()
    return eng


@pytest.fixture(scope="session")
def examples_engine(embedder: SentenceTransformerEmbedder, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    """The example handbook shipped in the repository, indexed once: for behaviour tests that
    need a real index but not the dev set's questions."""
    eng = make_engine(embedder, tmp_path_factory.mktemp("examples-index"), EXAMPLES)
    eng.sync()
    return eng


def make_engine(
    embedder: Embedder,
    data: Path,
    docs: Path,
    *,
    chroma_url: str | None = None,
    chunker: ChunkerConfig | None = None,
    extract_timeout_s: float = 60.0,
    **kw: object,
) -> Engine:
    """A real engine wired as the product wires it (``bot.builder``): Chroma on disk, or a Chroma server."""
    cfg = EngineConfig(docs, chunker or ChunkerConfig(), SearchConfig(), **kw)  # type: ignore[arg-type]
    return build_engine(
        cfg, embedder, SentenceReranker(1.5), open_storage(data, chroma_url, f"test:{data.name}"), extract_timeout_s
    )


@pytest.fixture(scope="session")
def real_model(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The packaged default GGUF, assembled once and loaded once per test run."""
    from retrieval.models import load_model

    # A generous deadline: the suite may share the CPU; production keeps FOOTNOTE_ANSWER_DEADLINE_S.
    return load_model(None, None, tmp_path_factory.mktemp("models"), check=ANSWER_PROBE, n_ctx=4096, deadline_s=300)
