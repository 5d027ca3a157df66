"""Fit and cross-validate the weights that rank source sentences for the answer step.

``python -m bench.sentence_ranker --docs DIR --questions FILE [--data-dir DIR]``

For every answerable question that passes the gate, the gate's source sentences are
the candidates and the one holding the verbatim needle is the target. A listwise
logistic model (softmax over one question's candidates) is fitted on
:func:`retrieval.answer.evidence.sentence_features`. The documents are split into two halves
(alternating by name); weights fitted on one half rank the other, both ways, and the
report compares how often the answering sentence comes first (and among the first
four) with the weights in use. The full-set weights are printed in cosine units, the
form of ``RELEVANCE_WEIGHTS``. Tooling, not product: not installed with the wheel.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.drive import rows
from bot.builder import Builder
from config.settings import load_settings
from retrieval.answer.evidence import FEATURES, RELEVANCE_WEIGHTS, number_sentences, question_weights, sentence_features
from retrieval.evaluation import normalise
from retrieval.search import decide


@dataclass(frozen=True)
class Group:
    """One question's candidate sentences: features, which hold the needle, its document."""

    doc: str
    x: np.ndarray
    y: np.ndarray


def collect(runtime: Builder, questions: Sequence[dict[str, str]]) -> list[Group]:
    searcher = runtime.engine.searcher()
    snap = searcher.snapshot
    groups = []
    for q in questions:
        result = searcher.search(q["question"])
        decision = decide(result, runtime.gate_config(), runtime.settings.max_sources)
        if not decision.answerable:
            continue
        sents = number_sentences(decision.sources, snap.sentence_rows_of)
        idf = question_weights(q["question"], snap.bm25.idf)
        needle = normalise(q["needle"])
        x = np.array([sentence_features(s, result.query_vector, idf) for s in sents], dtype=np.float64)
        y = np.array([needle in normalise(s.text) for s in sents], dtype=np.float64)
        if y.any():
            groups.append(Group(q.get("doc", ""), x, y))
    return groups


def fit(groups: Sequence[Group], l2: float = 0.01, steps: int = 3000, rate: float = 0.1) -> np.ndarray:
    """Gradient descent on the listwise softmax loss (the needle sentence is the target)."""
    w = np.zeros(groups[0].x.shape[1])
    for _ in range(steps):
        grad = l2 * w
        for g in groups:
            z = g.x @ w
            p = np.exp(z - z.max())
            p /= p.sum()
            grad += g.x.T @ (p - g.y / g.y.sum()) / len(groups)
        w -= rate * grad
    return w


def ranked_first(groups: Sequence[Group], w: np.ndarray, k: int) -> int:
    return sum(bool(g.y[np.argsort(-(g.x @ w), kind="stable")[:k]].any()) for g in groups)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=Path, required=True, help="the documents (indexed into --data-dir first)")
    ap.add_argument("--questions", type=Path, required=True, help="JSONL with question, needle and doc")
    ap.add_argument("--data-dir", type=Path, default=Path(".footnote-bench"), help="index to use or build")
    args = ap.parse_args(argv)
    runtime = Builder(load_settings(data_dir=args.data_dir, docs_dir=args.docs))
    runtime.engine.sync()
    questions = rows(args.questions)
    groups = collect(runtime, questions)
    docs = sorted({g.doc for g in groups})
    halves = [set(docs[0::2]), set(docs[1::2])]
    current = np.array(RELEVANCE_WEIGHTS)
    print(f"{len(groups)} questions whose answering sentence is among the gate's source sentences")
    cv = {"fitted": [0, 0], "current": [0, 0]}
    for train, test in ((0, 1), (1, 0)):
        held = [g for g in groups if g.doc in halves[test]]
        w = fit([g for g in groups if g.doc in halves[train]])
        for name, weights in (("fitted", w), ("current", current)):
            cv[name][0] += ranked_first(held, weights, 1)
            cv[name][1] += ranked_first(held, weights, 4)
    for name, (first, four) in cv.items():
        print(f"  {name:8s} on held-out halves: first {first}/{len(groups)}, among the first four {four}/{len(groups)}")
    w = fit(groups)
    scaled = w / w[0] if w[0] > 0 else w
    print("weights on the whole set, in cosine units:")
    for name, value in zip(FEATURES, scaled, strict=True):
        print(f"  {name:16s} {value:+.2f}")


if __name__ == "__main__":
    main()
