"""The gate: the only part of the pipeline that can say no, or "not sure".

Two thresholds on one signal give three verdicts: at or below the strict *assert*
threshold the question is answered; up to the looser *point* threshold Footnote is not
sure, and points at the closest passages instead of answering (no model call); beyond
it nothing is close, and the question is refused. Pointing is what makes a strict
assert threshold cheap: a question it does not pass still gets the passages.

Signal (lower = more relevant): the nearest chunk's cosine distance plus
``coverage_weight x (1 - idf coverage)``, where idf coverage is the share of the
question's content-word idf mass that the corpus vocabulary contains, plus
``sentence_weight x`` the nearest single sentence's cosine distance (0 by default).

Distance alone cannot tell "prompt caching" from "KV cache"; a question full of
words the documents never use is evidence they do not answer it: on the dev set
the two separate answerable from out-of-domain questions with AUC 0.969 (distance
alone 0.944). The sentence term raises that AUC (0.978, and on both document
halves), but at the thresholds the self-calibration picks it traded bluffs for
refusals (over five probe seeds: 4.0 vs 2.0 of 30 bluffs on dev, 4.2 vs 3.2
cross-validated), and Footnote would rather refuse, so it is off unless a team's
own ``footnote eval`` says otherwise. ``footnote eval`` prints each part's AUC.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from retrieval.search.searcher import SearchResult
from retrieval.types import Hit

_QUOTED = re.compile(r"[\"“”]([^\"“”]{2,200})[\"“”]")


# Used until a calibration exists (and with FOOTNOTE_GATE_THRESHOLD set, for pointing):
# on dev and guides the calibration chose assert 0.47-0.53 and point 0.88-0.92.
DEFAULT_THRESHOLD = 0.50
DEFAULT_POINT_THRESHOLD = 0.90

Thresholds = tuple[float, float]  # (assert, point)

# The coverage term's weight, per embedding model: its cosine distances have their own scale
# (on their development drives the assert threshold sits near 0.49 for MiniLM and 0.10 for
# multilingual-e5), so a weight that suits one swamps the other's distance. Chosen with the
# assert quantile by ``python -m bench.outcomes`` on the drives each model serves there: the
# pair with the most answers holding the needle in the sentences the model reads, less those
# without it, with at most 3 of 30 unanswerable questions of each style answered on each
# drive. MiniLM (dev, guides): 0.5, as before; multilingual-e5 (danish-dev): 0.1, where 0.5
# let the words a message adds outweigh its distance: 22 direct questions answered with
# the needle, against 19 (docs/measurements.md, "The coverage weight per model").
COVERAGE_WEIGHT = {"minilm": 0.5, "multilingual-e5": 0.1}


def coverage_weight(model: str) -> float:
    """The measured coverage weight for embedding model ``model`` (MiniLM's for one not measured)."""
    return COVERAGE_WEIGHT.get(model, COVERAGE_WEIGHT["minilm"])


class Verdict(StrEnum):
    ANSWER = "answer"  # close enough to assert: the model answers from the sources
    POINT = "point"  # close, not sure: the closest passages are shown, not an answer
    REFUSE = "refuse"  # nothing is close


@dataclass(frozen=True)
class GateConfig:
    """``threshold`` (assert) and ``point`` are the fixed cuts; with ``calibrated`` they are
    only the fallback.

    ``calibrated`` returns the thresholds self-calibrated on the current corpus
    (``retrieval.search.calibration``): ``(assert, point)``, or the assert threshold alone
    (pointing then keeps ``point``), or None while there is none yet: reading it never waits.
    A point threshold below the assert threshold is the assert threshold (no pointing band).
    """

    threshold: float = DEFAULT_THRESHOLD
    coverage_weight: float = 0.5
    sentence_weight: float = 0.0
    calibrated: Callable[[], Thresholds | float | None] | None = field(default=None, compare=False, repr=False)
    point: float = DEFAULT_POINT_THRESHOLD

    def current(self) -> GateConfig:
        """A plain config with the thresholds in force right now."""
        got = self.calibrated() if self.calibrated is not None else None
        if got is None:
            t, p = self.threshold, self.point
        elif isinstance(got, tuple):
            t, p = got
        else:
            t, p = got, self.point
        return GateConfig(t, self.coverage_weight, self.sentence_weight, point=max(p, t))


@dataclass(frozen=True)
class GateDecision:
    verdict: Verdict
    signal: float
    reason: str
    sources: list[Hit]  # what to answer from (ANSWER) or point at (POINT); [] when refused

    @property
    def answerable(self) -> bool:
        return self.verdict is Verdict.ANSWER


def gate_signal(result: SearchResult, cfg: GateConfig) -> float:
    return signal(result.best_distance, sentence_distance(result), result.coverage, cfg)


def sentence_distance(result: SearchResult) -> float:
    """The nearest sentence's distance; an index without sentence vectors counts its chunks as sentences."""
    s = result.best_sentence_distance
    return result.best_distance if s is None else s


def signal(distance: float, sentence: float, coverage: float, cfg: GateConfig) -> float:
    """The gate's formula, from its three measurements (calibration recomputes it for other weights)."""
    return distance + cfg.sentence_weight * sentence + cfg.coverage_weight * (1.0 - coverage)


def as_read(text: str) -> str:
    """Text as a reader sees it: one Unicode form (a Mac's "a" + combining ring is "å"), and a
    line break or a run of spaces is one space. Case is kept: a quoted phrase is verbatim."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def quoted_phrases(question: str) -> list[str]:
    """Phrases the asker put in double quotes: an error code, an id, a product name."""
    return [m.group(1).strip() for m in _QUOTED.finditer(question) if m.group(1).strip()]


def decide(result: SearchResult, cfg: GateConfig, max_sources: int) -> GateDecision:
    """Answer when the signal clears the assert threshold, point when it clears the point
    threshold, else refuse; either way only from passages holding every quoted phrase."""
    cfg = cfg.current()
    score = gate_signal(result, cfg)
    if not result.hits:
        return GateDecision(Verdict.REFUSE, score, "the index is empty", [])
    point = max(cfg.point, cfg.threshold)
    if score > point:
        return GateDecision(Verdict.REFUSE, score, f"nothing relevant enough (gate {score:.3f} > {point:.3f})", [])
    phrases = quoted_phrases(result.query)
    wanted = [as_read(p) for p in phrases]
    hits = [h for h in result.hits if all(p in as_read(h.chunk.content) for p in wanted)]
    if not hits:
        shown = ", ".join(f'"{p}"' for p in phrases)
        return GateDecision(Verdict.REFUSE, score, f"no passage contains {shown} verbatim", [])
    if score > cfg.threshold:
        reason = f"not sure (gate {score:.3f} > {cfg.threshold:.3f}): the closest passages, not an answer"
        return GateDecision(Verdict.POINT, score, reason, hits[:max_sources])
    return GateDecision(Verdict.ANSWER, score, "ok", hits[:max_sources])
