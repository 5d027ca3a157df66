"""Measure the judge (a cross-encoder) where it could pay: ranking, evidence and the gate.

``python -m bench.judge --docs DIR --questions FILE --ood FILE [--reranker DIR] [--json OUT]``

On the corpus's own index (built through the builder in a temporary data dir, with the
live models), every question is searched twice: by the default pipeline, and with the
judge reordering the default's first passages. For each it records the needle's rank,
the default gate's signal and the judge's best probability, and which source sentence
each would show the model first. Printed: R@1/R@4 (all, ticket-style) and MRR with paired
sign tests, both gate signals' AUC, bluffs and refusals at the default gate and at
judge thresholds, and first-sentence evidence hits, for the whole corpus and for each
half of its documents (alternating by name). Tooling: not installed with the wheel.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.drive import rows
from bot.builder import Builder
from bot.gate_status import calibration
from config.settings import load_settings
from retrieval.answer.evidence import sentences_read
from retrieval.evaluation import halves_by_document, normalise
from retrieval.evaluation.cross_validation import auc
from retrieval.evaluation.metrics import mrr, needle_rank, paired, recall_at, sign_test
from retrieval.ingest import plain
from retrieval.models import cpu_info, seed_models
from retrieval.models.embed import SHIPPED_RERANKER, load_onnx_cross_encoder
from retrieval.search import Searcher, SentenceReranker, decide, gate_signal
from retrieval.search.judge import Judge, JudgedReranker


def collect(b: Builder, judge: Judge, questions: Sequence[dict[str, Any]], answerable: bool) -> list[dict[str, Any]]:
    default = b.engine.searcher()
    snap = default.snapshot
    judged = Searcher(snap, default.embedder, default.cfg, JudgedReranker(judge, SentenceReranker()))
    gate = b.gate_config().current()
    out = []
    for q in questions:
        r0 = default.search(q["question"])
        r1 = judged.search(q["question"])
        d0 = decide(r0, gate, b.settings.max_sources)
        rec: dict[str, Any] = {
            "id": q["id"],
            "style": q.get("style", q.get("kind", "")),
            "doc": q.get("doc", ""),
            "answerable": answerable,
            "gate": gate_signal(r0, gate),
            "gate_passes": d0.answerable,
            "judge": max((h.signals.get("judge", -1.0) for h in r1.hits), default=-1.0),
        }
        if answerable:
            needle = q["needle"]
            rec["rank_default"] = needle_rank(r0.hits, needle)
            rec["rank_judged"] = needle_rank(r1.hits, needle)
            rec["evidence_default"] = _first_evidence(r0, b, needle, None)
            rec["evidence_judged"] = _first_evidence(r1, b, needle, judge)
        out.append(rec)
    return out


def _first_evidence(result: Any, b: Builder, needle: str, judge: Judge | None) -> bool:
    """Whether the first sentence shown to the model (of the first max_sources passages) holds the needle."""
    snap = b.engine.searcher().snapshot
    sources = result.hits[: b.settings.max_sources]
    if judge is None:
        top = sentences_read(sources, snap, result.query_vector, result.query, 1)
    else:
        ranked = sentences_read(sources, snap, result.query_vector, result.query)  # the default order breaks ties
        probs = judge.probabilities(result.query, [plain(s.text) for s in ranked])
        top = [ranked[int(np.argmax(probs))]] if ranked else []
    return bool(top) and normalise(needle) in normalise(top[0].text)


def _paired(a: Sequence[int | None], b: Sequence[int | None], k: int) -> str:
    wins, losses = paired(a, b, k)
    return f"+{wins}/-{losses} (p={sign_test(wins, losses):.3f})"


def summary(records: Sequence[dict[str, Any]], thresholds: Sequence[float]) -> list[str]:
    ins = [r for r in records if r["answerable"]]
    ood = [r for r in records if not r["answerable"]]
    lines = []
    for label, rs in (("all", ins), ("ticket", [r for r in ins if r["style"] == "ticket"])):
        d, j = [r["rank_default"] for r in rs], [r["rank_judged"] for r in rs]
        lines.append(
            f"  {label:<6} n={len(rs):<3} R@1 {recall_at(d, 1):.3f} -> {recall_at(j, 1):.3f} {_paired(j, d, 1)}   "
            f"R@4 {recall_at(d, 4):.3f} -> {recall_at(j, 4):.3f} {_paired(j, d, 4)}   MRR {mrr(d):.3f} -> {mrr(j):.3f}"
        )
    ev0 = sum(r["evidence_default"] for r in ins)
    ev1 = sum(r["evidence_judged"] for r in ins)
    w = sum(r["evidence_judged"] and not r["evidence_default"] for r in ins)
    lo = sum(r["evidence_default"] and not r["evidence_judged"] for r in ins)
    lines.append(f"  first sentence holds the needle: {ev0}/{len(ins)} -> {ev1}/{len(ins)} (+{w}/-{lo})")
    if ood:
        a0 = auc([r["gate"] for r in ins], [r["gate"] for r in ood])
        a1 = auc([-r["judge"] for r in ins], [-r["judge"] for r in ood])
        lines.append(f"  gate AUC: default signal {a0:.3f}, judge {a1:.3f}")
        bl, rf = sum(r["gate_passes"] for r in ood), sum(not r["gate_passes"] for r in ins)
        lines.append(f"  default gate: bluffs {bl}/{len(ood)}, answerable refused {rf}/{len(ins)}")
        for t in thresholds:
            bl = sum(r["judge"] >= t for r in ood)
            rf = sum(r["judge"] < t for r in ins)
            both_bl = sum(r["judge"] >= t and r["gate_passes"] for r in ood)
            both_rf = sum(r["judge"] < t or not r["gate_passes"] for r in ins)
            lines.append(
                f"  judge >= {t:.2f}: bluffs {bl}/{len(ood)}, refused {rf}/{len(ins)};"
                f"  with the default gate too: bluffs {both_bl}, refused {both_rf}"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=Path, required=True)
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument("--ood", type=Path, required=True)
    ap.add_argument("--reranker", type=Path, default=SHIPPED_RERANKER)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--thresholds", type=float, nargs="*", default=[0.1, 0.2, 0.3, 0.5])
    args = ap.parse_args(argv)

    live = load_settings()
    print(f"CPU: {cpu_info().describe()}")
    judge = Judge(load_onnx_cross_encoder(args.reranker))
    with tempfile.TemporaryDirectory(prefix="footnote-judge-") as tmp:
        seed_models(live.data_dir / "models", Path(tmp) / "models")
        settings = live.model_copy(update={"docs_dir": args.docs.resolve(), "data_dir": Path(tmp), "chroma_url": None})
        b = Builder(settings)
        b.engine.sync(progress=False)
        calibration(b, compute=True)  # the gate's threshold self-calibrated on this corpus, as served
        records = collect(b, judge, rows(args.questions), True) + collect(b, judge, rows(args.ood), False)
    if args.json:
        args.json.write_text(json.dumps(records, indent=1), encoding="utf-8")
    docs = sorted({r["doc"] for r in records if r["doc"]})
    first, second = halves_by_document(docs)
    print(f"{args.docs}: {len(records)} questions, judge {judge.name}")
    for label, keep in (("whole corpus", None), ("half 1", set(first)), ("half 2", set(second))):
        rs = [r for r in records if keep is None or r["doc"] in keep or not r["answerable"]]
        print(label + (" (OOD questions in both halves)" if keep else ""))
        print("\n".join(summary(rs, args.thresholds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
