"""Benchmark: index throughput (chunks/s) and peak RSS on a docs folder.

Prints figures; never passes or fails. Usage:
    python scripts/bench_index.py [DOCS_DIR]    (default ../shared/eval/dev/docs)
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from retrieval.chunk import ChunkerConfig  # noqa: E402
from retrieval.embed import load_embedder  # noqa: E402
from retrieval.engine import Engine, EngineConfig  # noqa: E402
from retrieval.rerank import SentenceReranker  # noqa: E402
from retrieval.search import SearchConfig  # noqa: E402


def main() -> None:
    docs = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared" / "eval" / "dev" / "docs"
    t = time.perf_counter()
    emb = load_embedder()
    emb.embed(["warm up"])
    load_s = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as tmp:
        eng = Engine(EngineConfig(Path(tmp), docs, ChunkerConfig(), SearchConfig()), emb, SentenceReranker())
        t = time.perf_counter()
        report = eng.sync()
        full = time.perf_counter() - t
        t = time.perf_counter()
        again = eng.sync()
        nochange = time.perf_counter() - t
        t = time.perf_counter()
        eng.searcher()
        snap_s = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    n = report.chunks_embedded
    print(f"docs folder          {docs}")
    print(f"model load           {load_s:.1f} s")
    print(f"full index           {len(report.indexed)} docs, {n} chunks in {full:.1f} s = {n / full:.0f} chunks/s")
    print(f"no-change sync       {nochange:.2f} s ({again.unchanged} unchanged)")
    print(f"snapshot + BM25 load {snap_s * 1000:.0f} ms")
    print(f"peak RSS             {rss:.0f} MB")


if __name__ == "__main__":
    main()
