"""Cross-validation of the gate: no constant chosen on one corpus alone.

The labelled questions are split by document; on one half the labels choose the gate
signal's weights, on the other the gate is self-calibrated on that half's own corpus
(its probes, no labels) and scored on questions the choice never saw; then the other
way round. The probes are a sample, so each seed calibrates again.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from retrieval.search import Searcher
from retrieval.search.calibration import CalibrationConfig, Facts, choose, facts_for, probe, signals_of
from retrieval.types import Document

WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)  # sentence and coverage weights the cross-validation chooses from


@dataclass(frozen=True)
class Half:
    """One half of a labelled set: an index of its documents only, its questions, and OOD questions."""

    name: str
    searcher: Searcher
    questions: list[str]
    ood: list[str]


@dataclass(frozen=True)
class FoldResult:
    chose_on: str
    reported_on: str
    weight: float  # coverage weight chosen on the other half
    sentence_weight: float  # sentence weight chosen on the other half
    threshold: float  # self-calibrated on the reported half's corpus, at those weights
    bluffs: int
    n_ood: int
    refused: int
    n_in: int
    est_bluff: float
    est_refused: float
    default_weight: dict[str, float]  # the same at the shipped weights: threshold, bluffs, refused
    fixed: dict[str, float]  # the shipped fixed threshold (no calibration)
    seed: int = 0  # the probe seed of the reporting half's calibration

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def halves_by_document(paths: Sequence[str]) -> tuple[list[str], list[str]]:
    """Two halves of the documents, alternating in path order: re-runnable, no seed to pick."""
    ordered = sorted(paths)
    return ordered[0::2], ordered[1::2]


def document_of(needle: str, docs: Sequence[Document]) -> str | None:
    """The document a question's needle was copied from."""
    want = " ".join(needle.split())
    return next((d.path for d in docs if want in " ".join(d.text.split())), None)


def auc(inside: Sequence[float], ood: Sequence[float]) -> float:
    """P(an OOD question's signal > an in-domain one's), ties counting half."""
    if not inside or not ood:
        return float("nan")
    a, b = np.asarray(inside)[None, :], np.asarray(ood)[:, None]
    return float(((b > a).sum() + 0.5 * (b == a).sum()) / (a.size * b.size))


def choose_gate_weights(
    inside: Sequence[Facts | None], ood: Sequence[Facts | None], shipped: tuple[float, float]
) -> tuple[float, float]:
    """(coverage, sentence) weights with the best AUC on labelled questions (ties: nearest the shipped ones)."""

    def score(w: tuple[float, float]) -> tuple[float, float]:
        a = auc(signals_of(inside, *w), signals_of(ood, *w))
        return a, -abs(w[0] - shipped[0]) - abs(w[1] - shipped[1])

    return max(((c, s) for c in WEIGHTS for s in WEIGHTS), key=score)


def signal_aucs(
    inside: Sequence[Facts | None], ood: Sequence[Facts | None], coverage_weight: float, sentence_weight: float
) -> dict[str, float]:
    """AUC of the gate signal's parts, of the nearest-sentence term added (at 0.5 when the
    gate leaves it out), and of the gate as configured, on labelled questions (1 = separates perfectly)."""
    w, ws = coverage_weight, sentence_weight
    ref = ws or 0.5
    sentence = f"chunk + {w:g} × coverage + {ref:g} × nearest sentence" + ("" if ws else " (not in the gate)")
    return {
        "nearest chunk": auc(signals_of(inside, 0, 0), signals_of(ood, 0, 0)),
        f"chunk + {w:g} × coverage": auc(signals_of(inside, w, 0), signals_of(ood, w, 0)),
        sentence: auc(signals_of(inside, w, ref), signals_of(ood, w, ref)),
        "the gate as configured": auc(signals_of(inside, w, ws), signals_of(ood, w, ws)),
    }


def cross_validate(
    halves: Sequence[Half],
    cfg: CalibrationConfig,
    generic: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
) -> list[FoldResult]:
    """Choose on one half, report on the other, both ways; once per probe seed.

    On the choosing half the labels pick the two weights; on the reporting half
    the gate is self-calibrated on that half's own corpus (its probes, no labels) and
    scored on its own questions and OOD questions the choice never saw. The probes are
    a sample, so each seed in ``seeds`` (default: ``cfg.seed``) calibrates again.
    """
    facts = {h.name: (facts_for(h.searcher, h.questions), facts_for(h.searcher, h.ood)) for h in halves}
    out = []
    for seed in seeds or (cfg.seed,):
        out += _folds(halves, replace(cfg, seed=seed), facts, generic)
    return out


def _folds(
    halves: Sequence[Half],
    cfg: CalibrationConfig,
    facts: dict[str, tuple[list[Facts | None], list[Facts | None]]],
    generic: Sequence[str] | None,
) -> list[FoldResult]:
    probed = {h.name: probe(h.searcher, cfg, generic, sentences=True) for h in halves}  # weights are tried
    out = []
    for a, b in ((halves[0], halves[1]), (halves[1], halves[0])):
        shipped = (cfg.coverage_weight, cfg.sentence_weight)
        w = choose_gate_weights(*facts[a.name], shipped=shipped)
        q_in, q_ood = facts[b.name]

        def score(
            weights: tuple[float, float],
            threshold: float,
            q_in: list[Facts | None] = q_in,
            q_ood: list[Facts | None] = q_ood,
        ) -> tuple[int, int]:
            bluffs = sum(s <= threshold for s in signals_of(q_ood, *weights))
            return bluffs, sum(s > threshold for s in signals_of(q_in, *weights))

        cal = choose(probed[b.name], replace(cfg, coverage_weight=w[0], sentence_weight=w[1]))
        base = choose(probed[b.name], cfg)
        bluffs, refused = score(w, cal.threshold)
        base_bluffs, base_refused = score(shipped, base.threshold)
        fixed_bluffs, fixed_refused = score(shipped, cfg.fallback)
        out.append(
            FoldResult(
                a.name,
                b.name,
                w[0],
                w[1],
                cal.threshold,
                bluffs,
                len(q_ood),
                refused,
                len(q_in),
                cal.est_bluff,
                cal.est_refused,
                {
                    "weight": cfg.coverage_weight,
                    "sentence_weight": cfg.sentence_weight,
                    "threshold": base.threshold,
                    "bluffs": base_bluffs,
                    "refused": base_refused,
                    "est_refused": base.est_refused,
                },
                {"threshold": cfg.fallback, "bluffs": fixed_bluffs, "refused": fixed_refused},
                cfg.seed,
            )
        )
    return out


def format_cv(folds: Sequence[FoldResult]) -> str:
    """Per reported half: bluffs and answerable refused, and the same scaled to the dev set's 30 / 64."""

    def cell(bluffs: float, n_ood: int, refused: float, n_in: int, digits: int = 0) -> str:
        return (
            f"bluffs {bluffs:.{digits}f}/{n_ood} (= {30 * bluffs / max(1, n_ood):.1f}/30), "
            f"refused {refused:.{digits}f}/{n_in} (= {64 * refused / max(1, n_in):.1f}/64)"
        )

    seeds = sorted({f.seed for f in folds})
    lines = ["Cross-validation by document (choose on one half, report on the other):"]
    for f in folds:
        d, x = f.default_weight, f.fixed
        seed = f" (probe seed {f.seed})" if len(seeds) > 1 else ""
        lines += [
            f"  chose on {f.chose_on}, reported on {f.reported_on}{seed}:",
            f"    chosen weights: coverage {f.weight:g}, sentence {f.sentence_weight:g}; "
            f"self-calibrated threshold {f.threshold:.3f}: "
            + cell(f.bluffs, f.n_ood, f.refused, f.n_in)
            + f"; estimated from probes: bluffs {f.est_bluff:.1%}, refused {f.est_refused:.1%}",
            f"    shipped weights: coverage {d['weight']:g}, sentence {d['sentence_weight']:g}; "
            f"self-calibrated threshold {d['threshold']:.3f}: " + cell(d["bluffs"], f.n_ood, d["refused"], f.n_in),
            f"    fixed threshold {x['threshold']:.2f} (no calibration): "
            + cell(x["bluffs"], f.n_ood, x["refused"], f.n_in),
        ]
    if len(seeds) > 1:
        lines.append(
            f"  Mean over {len(seeds)} probe seeds, shipped weights (the threshold's spread is the probes' noise):"
        )
        for half in dict.fromkeys(f.reported_on for f in folds):
            mine = [f for f in folds if f.reported_on == half]
            t = [f.default_weight["threshold"] for f in mine]
            bluffs = statistics.fmean(f.default_weight["bluffs"] for f in mine)
            refused = statistics.fmean(f.default_weight["refused"] for f in mine)
            lines.append(
                f"    {half}: threshold {statistics.fmean(t):.3f} ± {statistics.pstdev(t):.3f}, "
                + cell(bluffs, mine[0].n_ood, refused, mine[0].n_in, digits=1)
            )
    return "\n".join(lines)
