"""The evaluation suite behind ``footnote eval``: strategies, paired tests, refusal sweep.

Retrieval is measured without the language model (no generation call is needed
to know whether the passage that answers a question was found), so the whole
suite is cheap enough to run at every deploy. The seed's six chunking strategies
are rebuilt in memory from the same documents; BM25-only, hybrid (RRF) and the
default pipeline run on the product's own index.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.answer import Rewrite, Searched, widen
from retrieval.errors import ConfigError
from retrieval.evaluation.cross_validation import auc, signal_aucs
from retrieval.evaluation.metrics import (
    Rank,
    absent,
    destroyed,
    hits_at,
    mrr,
    needle_rank,
    paired,
    passage,
    recall_at,
    sign_test,
    styles_of,
    wilson,
)
from retrieval.index import Snapshot, StoredIndex
from retrieval.ingest import ChunkerConfig, chunk_document, extractor_for, walk
from retrieval.models import Embedder
from retrieval.search import (
    GateConfig,
    SearchConfig,
    Searcher,
    SearchResult,
    decide,
    facts_of,
    gate_signal,
    round_thresholds,
)
from retrieval.types import Document

KS = (1, 4, 8, 20)
CONTEXT_K = 4
# The seed's six strategies: three independent ingredients (boundaries, header, overlap).
CHUNKING: dict[str, tuple[str, dict[str, Any]]] = {
    "A": ("blind 512", {"boundaries": False, "header": False}),
    "B": ("A + 64 overlap", {"boundaries": False, "header": False, "overlap": 64}),
    "C": ("boundaries", {"header": False}),
    "D": ("C + 64 overlap", {"header": False, "overlap": 64}),
    "E": ("C + header", {}),
    "F": ("E + 64 overlap", {"overlap": 64}),
}
# (a, b, k): the comparisons the seed draws conclusions from.
COMPARISONS: tuple[tuple[str, str, int], ...] = (
    ("E", "A", 20),
    ("E", "C", 20),
    ("B", "A", 20),
    ("F", "E", 20),
    ("hybrid", "E", 4),
    ("default", "hybrid", 1),
)


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    needle: str = ""
    style: str = ""
    glosses: str = ""  # searched beside the question (``Searcher.search``): set from ``searched_as``

    @classmethod
    def from_json(cls, row: dict[str, Any], *, needs_needle: bool) -> Question:
        if "question" not in row or (needs_needle and not row.get("needle")):
            want = '"question" and "needle"' if needs_needle else '"question"'
            raise ConfigError(f"question line {row.get('id', '?')!r} needs {want}")
        return cls(str(row.get("id", "")), row["question"], row.get("needle", ""), row.get("style", ""))


@dataclass
class StrategyRun:
    name: str
    label: str
    ranks: list[Rank]
    destroyed: int
    context_chars: float
    styles: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)

    def per_question(self) -> list[dict[str, Any]]:
        """Each question's rank (None: not in the top 20), for paired tests against a later run."""
        return [{"id": i, "style": s, "rank": r} for i, s, r in zip(self.ids, self.styles, self.ranks, strict=True)]

    def summary(self) -> dict[str, Any]:
        n = len(self.ranks)
        out: dict[str, Any] = {
            "label": self.label,
            "n": n,
            "recall_at": {str(k): recall_at(self.ranks, k) for k in KS},
            "mrr": mrr(self.ranks),
            "destroyed": self.destroyed,
            "context_chars": self.context_chars,
            "wilson": {str(k): list(wilson(hits_at(self.ranks, k), n)) for k in KS},
        }
        if any(self.styles):
            out["by_style"] = {}
            for style in sorted(set(self.styles)):
                sub = [r for r, s in zip(self.ranks, self.styles, strict=True) if s == style]
                out["by_style"][style] = {
                    "n": len(sub),
                    "recall_at": {str(k): recall_at(sub, k) for k in KS},
                    "mrr": mrr(sub),
                }
        return out


@dataclass(frozen=True)
class SweepRow:
    threshold: float
    bluffs: int
    refused: int
    is_default: bool


@dataclass
class EvalReport:
    strategies: dict[str, StrategyRun]  # "default" first
    sign_tests: list[dict[str, Any]]
    sweep: list[SweepRow]
    signals: dict[str, list[float]]
    n_ood: int
    gate: GateConfig
    aucs: dict[str, float] = field(default_factory=dict)  # the gate signal's parts, in-domain vs OOD
    by_style: dict[str, dict[str, Any]] = field(default_factory=dict)  # the gate per question style
    untranslated: int = 0  # questions whose translation failed (searched as asked: their figures are lower)
    absent: list[str] = field(default_factory=list)  # ids of questions whose needle no document holds

    def as_json(self) -> dict[str, Any]:
        return {
            "default": {
                **self.strategies["default"].summary(),
                "per_question": self.strategies["default"].per_question(),
            },
            "strategies": {k: v.summary() for k, v in self.strategies.items() if k != "default"},
            "sign_tests": self.sign_tests,
            "refusal_sweep": [
                {
                    "threshold": r.threshold,
                    "bluffs": r.bluffs,
                    "of": self.n_ood,
                    "refused": r.refused,
                    "default": r.is_default,
                }
                for r in self.sweep
            ],
            "gate": {
                "threshold": self.gate.threshold,
                "coverage_weight": self.gate.coverage_weight,
                "sentence_weight": self.gate.sentence_weight,
            },
            "gate_signal": self.signals,
            "gate_auc": self.aucs,
            "gate_by_style": self.by_style,
            "untranslated": self.untranslated,
            "absent_needles": self.absent,
        }


def load_documents(docs_dir: Path, max_bytes: int, ignore: Sequence[str] = (), ocr: bool = False) -> list[Document]:
    """Every document the indexer would index (failures are the indexer's business)."""
    docs = []
    for src in walk(docs_dir, ignore):
        ex = extractor_for(src.rel, ocr)
        if src.skip or ex is None or src.path.stat().st_size > max_bytes:  # src.skip: a FIFO would never end
            continue
        try:
            docs.append(ex.extract(src.rel, src.path.read_bytes()))
        except Exception:
            continue
    return docs


class VectorCache:
    """Embeds each distinct text once across every strategy of one eval run.

    Seeded with the product index's own chunk vectors, so the strategy that matches the
    product's chunker (E) embeds nothing, and the others only the texts they cut differently.
    """

    def __init__(self, embedder: Embedder, seed: Snapshot | None = None) -> None:
        self.embedder = embedder
        self._vecs: dict[str, np.ndarray] = {}
        if seed is not None and len(seed.vectors) == len(seed.chunks):
            self._vecs = {c.text: seed.vectors[i] for i, c in enumerate(seed.chunks)}
        self.embedded = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._vecs))
        if missing:
            self._vecs.update(zip(missing, self.embedder.embed(missing), strict=True))
            self.embedded += len(missing)
        if not texts:
            return np.zeros((0, self.embedder.dimension), np.float32)
        return np.stack([self._vecs[t] for t in texts]).astype(np.float32)


def memory_snapshot(
    docs: Sequence[Document], chunker: ChunkerConfig, embedder: Embedder, cache: VectorCache | None = None
) -> Snapshot:
    """A dense-only index of ``docs`` in memory, for comparing chunking strategies."""
    chunks = [c for d in docs for c in chunk_document(d, chunker, embedder.count_tokens)]
    vectors = (cache or VectorCache(embedder)).embed([c.text for c in chunks])
    empty = np.zeros((0, vectors.shape[1] if vectors.ndim == 2 else embedder.dimension), np.float32)
    return Snapshot.build(StoredIndex(chunks, vectors, empty, np.zeros(0, np.int64)), embedder.name)


def run_strategy(
    name: str,
    label: str,
    searcher: Searcher,
    questions: Sequence[Question],
    k: int = 20,
    nowhere: Collection[str] = (),
) -> tuple[StrategyRun, list[SearchResult]]:
    """``nowhere``: needles no document holds, not counted as lost to chunking."""
    results = [searcher.search(q.question, k=k, glosses=q.glosses) for q in questions]
    lost = destroyed(searcher.snapshot.chunks, [q.needle for q in questions if q.needle not in nowhere])
    return scored(name, label, results, questions, len(lost)), results


def scored(
    name: str, label: str, results: Sequence[SearchResult], questions: Sequence[Question], lost: int
) -> StrategyRun:
    """A strategy's results, ranked against each question's needle."""
    ranks = [needle_rank(r.hits, q.needle) for r, q in zip(results, questions, strict=True)]
    cost = statistics.fmean(sum(len(passage(h.chunk)) for h in r.hits[:CONTEXT_K]) for r in results) if results else 0.0
    return StrategyRun(name, label, ranks, lost, cost, [q.style for q in questions], [q.id for q in questions])


def rewrite_run(
    searcher: Searcher,
    results: Sequence[SearchResult],
    questions: Sequence[Question],
    rewriter: Rewrite,
    destroyed: int,
) -> StrategyRun:
    """The default's own results widened by each question's rewrite. Every question is
    rewritten, also those the gate would refuse (answers never rewrite those), so that
    recall is measured on the same questions as the default's."""
    widened, rewritten = [], 0
    for r in results:
        text = rewriter(r.query, ())
        rewritten += text is not None
        widened.append(widen(searcher, r, text) if text else r)
    # A rewrite model that failed for every question would otherwise look like "no gain".
    label = f"default + the question rewritten by a model, fused (RRF); rewritten {rewritten}/{len(results)}"
    return scored("rewrite", label, widened, questions, destroyed)


def refusal_sweep(
    in_domain: Sequence[SearchResult], ood: Sequence[SearchResult], gate: GateConfig, max_sources: int
) -> list[SweepRow]:
    """Bluffs (OOD questions let through) and answerable questions refused, per threshold."""
    rows = []
    inside, outside = ([gate_signal(r, gate) for r in rs] for rs in (in_domain, ood))
    for t in sorted({*round_thresholds(inside, outside, 32), gate.threshold}):
        cfg = GateConfig(t, gate.coverage_weight, gate.sentence_weight)
        bluffs = sum(decide(r, cfg, max_sources).answerable for r in ood)
        refused = sum(not decide(r, cfg, max_sources).answerable for r in in_domain)
        rows.append(SweepRow(t, bluffs, refused, t == gate.threshold))
    return rows


def run_eval(
    default: Searcher,
    docs: Sequence[Document],
    questions: Sequence[Question],
    ood: Sequence[Question],
    embedder: Embedder,
    *,
    target: int,
    gate: GateConfig,
    max_sources: int,
    default_label: str = "default",
    progress: Callable[[str], None] = lambda _msg: None,
    rewriter: Rewrite | None = None,
    searched_as: Callable[[str], Searched] | None = None,
) -> EvalReport:
    """Every strategy on the same questions, the paired tests, and the refusal sweep.

    ``searched_as`` is what the answer service searches for a question (a question in
    another language than the drive's: translated into it, with the glossary's words), and
    whether its translation failed (then it is searched as asked): every strategy searches that."""
    if not questions:
        raise ConfigError("no questions to evaluate")
    untranslated = 0
    if searched_as is not None:
        progress("translating questions in another language than the drive's")
        searched = [searched_as(q.question) for q in (*questions, *ood)]
        untranslated = sum(s.failed for s in searched)
        n = len(questions)
        questions = [
            replace(q, question=s.text, glosses=s.glosses) for q, s in zip(questions, searched[:n], strict=True)
        ]
        ood = [replace(q, question=s.text, glosses=s.glosses) for q, s in zip(ood, searched[n:], strict=True)]
    # Without the documents (a caller that compares the default pipeline alone), absence is not judged.
    nowhere = frozenset(absent([d.text for d in docs], [q.needle for q in questions])) if docs else frozenset()
    runs: dict[str, StrategyRun] = {}
    progress("default pipeline")
    runs["default"], default_results = run_strategy("default", default_label, default, questions, nowhere=nowhere)
    base = default.snapshot
    for name, fusion, label in (("bm25", "bm25", "BM25 only"), ("hybrid", "rrf", "hybrid (dense + BM25, RRF k=60)")):
        s = Searcher(base, embedder, SearchConfig(fusion=fusion), None)
        runs[name] = run_strategy(name, label, s, questions, nowhere=nowhere)[0]
    cache = VectorCache(embedder, base)
    for name, (label, kw) in CHUNKING.items():
        progress(f"strategy {name}: {label}")
        snap = memory_snapshot(docs, ChunkerConfig(target=target, **kw), embedder, cache)
        dense = Searcher(snap, embedder, SearchConfig(fusion="dense"))
        runs[name] = run_strategy(name, label, dense, questions, nowhere=nowhere)[0]
    comparisons = list(COMPARISONS)
    if rewriter is not None:
        progress("the default with each question rewritten (FOOTNOTE_REWRITE)")
        runs["rewrite"] = rewrite_run(default, default_results, questions, rewriter, runs["default"].destroyed)
        comparisons += [("rewrite", "default", 1), ("rewrite", "default", 4)]
    tests = []
    for a, b, k in comparisons:
        wins, losses = paired(runs[a].ranks, runs[b].ranks, k)
        tests.append({"a": a, "b": b, "k": k, "wins": wins, "losses": losses, "p": sign_test(wins, losses)})
    progress("refusal sweep")
    ood_results = [default.search(q.question, k=20, glosses=q.glosses) for q in ood]
    facts = [facts_of(r) for r in default_results], [facts_of(r) for r in ood_results]
    aucs = signal_aucs(*facts, gate.coverage_weight, gate.sentence_weight) if ood else {}
    styles = style_gate(questions, ood, default_results, ood_results, gate, max_sources)
    return EvalReport(
        runs,
        tests,
        refusal_sweep(default_results, ood_results, gate, max_sources) if ood else [],
        {
            "in_domain": [round(gate_signal(r, gate), 4) for r in default_results],
            "ood": [round(gate_signal(r, gate), 4) for r in ood_results],
        },
        len(ood),
        gate,
        aucs,
        styles,
        untranslated,
        [q.id or q.question for q in questions if q.needle in nowhere],
    )


def paired_ranks(now: Sequence[dict[str, Any]], before: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Paired sign tests of this run's ranks against an earlier run's (``per_question`` of
    ``footnote eval --json``, matched by id and style), at R@1 and R@4: all questions, then per style."""
    old = {(q["id"], q["style"]): q["rank"] for q in before}
    pairs = [(q["style"], q["rank"], old[(q["id"], q["style"])]) for q in now if (q["id"], q["style"]) in old]
    styles = sorted({style for style, _, _ in pairs} - {""})
    out = []
    for style in ["all", *styles]:
        mine = [(a, b) for s, a, b in pairs if style in ("all", s)]
        for k in (1, 4):
            wins, losses = paired([a for a, _ in mine], [b for _, b in mine], k)
            out.append(
                {"style": style, "k": k, "n": len(mine), "wins": wins, "losses": losses, "p": sign_test(wins, losses)}
            )
    return out


def style_gate(
    questions: Sequence[Question],
    ood: Sequence[Question],
    inside: Sequence[SearchResult],
    outside: Sequence[SearchResult],
    gate: GateConfig,
    max_sources: int,
) -> dict[str, dict[str, Any]]:
    """Per question style: the gate's AUC against unanswerable questions *of the same style*
    (so the length or tone of a message separates nothing), answerable refused and
    unanswerable let through at the configured threshold. Empty when no question has a style."""
    styles = styles_of([q.style for q in [*questions, *ood]])
    if not styles:
        return {}
    mine_styles, ood_styles = styles[: len(questions)], styles[len(questions) :]
    out: dict[str, dict[str, Any]] = {}
    for style in sorted(set(mine_styles)):
        mine = [r for s, r in zip(mine_styles, inside, strict=True) if s == style]
        theirs = [r for s, r in zip(ood_styles, outside, strict=True) if s == style]
        out[style] = {
            "n": len(mine),
            "n_ood": len(theirs),
            "auc": auc([gate_signal(r, gate) for r in mine], [gate_signal(r, gate) for r in theirs]),
            "refused": sum(not decide(r, gate, max_sources).answerable for r in mine),
            "bluffs": sum(decide(r, gate, max_sources).answerable for r in theirs),
        }
    return out
