"""Benchmark: retrieval quality and latency, the gate, and answer time on a question set.

Prints figures; never passes or fails. Usage:
    python scripts/bench_answer.py [EVAL_DIR]   (default ../shared/eval/dev: docs/, questions.jsonl, ood.jsonl)
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from retrieval.answer import AnswerService  # noqa: E402
from retrieval.chunk import ChunkerConfig  # noqa: E402
from retrieval.embed import load_embedder  # noqa: E402
from retrieval.engine import Engine, EngineConfig  # noqa: E402
from retrieval.evaluate import mrr, needle_rank, recall_at  # noqa: E402
from retrieval.gate import GateConfig, gate_signal  # noqa: E402
from retrieval.llm import load_model  # noqa: E402
from retrieval.rerank import SentenceReranker  # noqa: E402
from retrieval.search import SearchConfig, Searcher  # noqa: E402


def main() -> None:
    ev = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared" / "eval" / "dev"
    qs = [json.loads(x) for x in (ev / "questions.jsonl").read_text().splitlines() if x.strip()]
    ood_path = ev / "ood.jsonl"
    ood = [json.loads(x) for x in ood_path.read_text().splitlines() if x.strip()] if ood_path.exists() else []
    emb = load_embedder()
    with tempfile.TemporaryDirectory() as tmp:
        eng = Engine(EngineConfig(Path(tmp), ev / "docs", ChunkerConfig(), SearchConfig()), emb, SentenceReranker())
        eng.sync()
        base = eng.searcher()
        variants = {
            "dense": Searcher(base.snapshot, emb, SearchConfig(fusion="dense"), None, eng.store),
            "bm25": Searcher(base.snapshot, emb, SearchConfig(fusion="bm25"), None, eng.store),
            "hybrid-rrf": Searcher(base.snapshot, emb, SearchConfig(fusion="rrf"), None, eng.store),
            "default": base,
        }
        for name, s in variants.items():
            ranks, stages = [], {}
            for q in qs:
                res = s.search(q["question"], k=20)
                for k, v in res.timings.items():
                    stages.setdefault(k, []).append(v)
                ranks.append(needle_rank(res.hits, q["needle"]))
            rec = {k: recall_at(ranks, k) for k in (1, 4, 20)}
            lat = " ".join(f"{k} {statistics.median(v):.1f}" for k, v in stages.items())
            print(
                f"{name:11} R@1 {rec[1]:.3f} R@4 {rec[4]:.3f} R@20 {rec[20]:.3f} MRR@20 {mrr(ranks):.3f} | p50 ms: {lat}"
            )
        gate = GateConfig()
        bluffs = sum(gate_signal(base.search(q["question"]), gate) <= gate.threshold for q in ood)
        refused = sum(gate_signal(base.search(q["question"]), gate) > gate.threshold for q in qs)
        print(f"gate {gate.threshold}: bluffs {bluffs}/{len(ood)}, answerable refused {refused}/{len(qs)}")
        model = load_model(None, None, Path(tmp) / "models")
        svc = AnswerService(eng.searcher, lambda: model, gate)
        totals, gens = [], []
        for q in qs[:20:2]:
            t = time.perf_counter()
            a = svc.answer(q["question"])
            totals.append((time.perf_counter() - t) * 1000)
            if "generation" in a.timings:
                gens.append(a.timings["generation"])
        print(
            f"answer end-to-end p50 {statistics.median(totals):.0f} ms, generation p50 {statistics.median(gens) if gens else 0:.0f} ms over {len(totals)} questions"
        )
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
