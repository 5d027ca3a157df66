"""The support check: every sentence of an answer against the evidence it cites.

Nothing the model writes is shown as cited until this check passes. A claim is
supported by a source sentence when every number in it appears there and enough of
it is there: the share of its content words found in the sentence (or the heading of
the passage it sits in), or the embedding similarity of the two. A claim its cited
sentence does not support is re-attributed to the source sentence that does, or
removed. A claim too short to check ("No.", "2015") is never shown on its own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from retrieval.bm25 import STOPWORDS, tokenize
from retrieval.evidence import SourceSentence, source_heading
from retrieval.prompt import Claim

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


@dataclass(frozen=True)
class SupportConfig:
    """Thresholds measured on the dev set (see ``footnote eval --answers``)."""

    overlap: float = 0.6  # share of the claim's content words present in the evidence
    cosine: float = 0.75  # or: embedding similarity of claim and evidence
    min_words: int = 2  # fewer content words than this: too short to check


@dataclass(frozen=True)
class Support:
    overlap: float
    cosine: float
    numbers_ok: bool
    polarity_ok: bool = True  # no word negated in one and affirmed in the other

    def supports(self, cfg: SupportConfig) -> bool:
        return self.numbers_ok and self.polarity_ok and (self.overlap >= cfg.overlap or self.cosine >= cfg.cosine)


@dataclass(frozen=True)
class CheckedClaim:
    text: str
    evidence: SourceSentence
    support: Support
    reattributed: bool = False


@dataclass(frozen=True)
class Checked:
    """What survives the check, and what it did."""

    claims: list[CheckedClaim]
    removed: list[str] = field(default_factory=list)  # claims no source sentence supports
    reattributed: int = 0
    too_short: int = 0  # claims with too few content words to check


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> set[str]:
    return {_stem(w) for w in tokenize(text) if w not in STOPWORDS and len(w) > 1 and not w.isdigit()}


# "not", "no", "never", and the "t" that tokenising "doesn't" leaves behind.
_NEGATIONS = frozenset({"not", "no", "never", "cannot", "t", "none", "nor", "without", "neither"})


def negated_words(text: str, reach: int = 3) -> set[str]:
    """Content words within ``reach`` words after a negation: "does not *generate* the answer"."""
    out: set[str] = set()
    toks = tokenize(text)
    for i, tok in enumerate(toks):
        if tok in _NEGATIONS:
            out |= {_stem(w) for w in toks[i + 1 : i + 1 + reach] if w not in STOPWORDS and w not in _NEGATIONS}
    return out


def polarity_agrees(claim: str, evidence: str) -> bool:
    """False when a word the two share is negated in one and not in the other: a claim
    that "the pipeline generates its answers" is not backed by "it does not generate the answer"."""
    shared = content_words(claim) & content_words(evidence)
    return not (shared & (negated_words(claim) ^ negated_words(evidence)))


def numbers(text: str) -> set[str]:
    return {n.rstrip(".,") for n in _NUMBER.findall(text)}


def support(claim: str, claim_vec: np.ndarray | None, ev: SourceSentence) -> Support:
    """How far the evidence sentence (with its passage heading) backs the claim."""
    words = content_words(claim)
    have = content_words(ev.text) | content_words(source_heading(ev.hit))
    overlap = len(words & have) / len(words) if words else 0.0
    cos = float(claim_vec @ ev.vector) if claim_vec is not None and ev.vector is not None else 0.0
    nums_ok = numbers(claim) <= numbers(ev.text) | numbers(source_heading(ev.hit))
    return Support(overlap, cos, nums_ok, polarity_agrees(claim, ev.text))


def check(
    claims: Sequence[Claim],
    claim_vecs: Sequence[np.ndarray | None],
    sentences: Sequence[SourceSentence],
    cfg: SupportConfig,
) -> Checked:
    """Keep each claim its cited sentence supports; else re-attribute it to the best
    supporting sentence, or remove it. Duplicate claims (same evidence, same text) go."""
    by_n = {s.n: s for s in sentences}
    kept: list[CheckedClaim] = []
    removed: list[str] = []
    moved = short = 0
    for claim, vec in zip(claims, claim_vecs, strict=True):
        if len(content_words(claim.text)) < cfg.min_words:
            short += 1
            continue
        cited = by_n.get(claim.cite)
        if cited is not None and (s := support(claim.text, vec, cited)).supports(cfg):
            kept.append(CheckedClaim(claim.text, cited, s))
            continue
        best = _best_support(claim.text, vec, sentences, cfg)
        if best is None:
            removed.append(claim.text)
            continue
        kept.append(CheckedClaim(claim.text, best[0], best[1], reattributed=True))
        moved += 1
    unique: list[CheckedClaim] = []
    for c in kept:
        if not any(u.text == c.text and u.evidence.n == c.evidence.n for u in unique):
            unique.append(c)
    return Checked(unique, removed, moved, short)


def _best_support(
    claim: str, vec: np.ndarray | None, sentences: Sequence[SourceSentence], cfg: SupportConfig
) -> tuple[SourceSentence, Support] | None:
    scored = [(s, support(claim, vec, s)) for s in sentences]
    ok = [(s, sup) for s, sup in scored if sup.supports(cfg)]
    if not ok:
        return None
    return max(ok, key=lambda x: x[1].overlap + x[1].cosine)


def best_for_question(
    question_vec: np.ndarray | None, question: str, sentences: Sequence[SourceSentence], prefer: int = 0
) -> SourceSentence | None:
    """The sentence to show as "the docs say" when no claim can stand on its own.

    The model's own pick (``prefer``) when it shares the question's words or meaning
    at least as well as the best other sentence does; else the best sentence.
    """
    if not sentences:
        return None
    q_words = content_words(question)

    def score(s: SourceSentence) -> float:
        words = content_words(s.text)
        overlap = len(q_words & words) / len(q_words) if q_words else 0.0
        cos = float(question_vec @ s.vector) if question_vec is not None and s.vector is not None else 0.0
        return cos + 0.5 * overlap

    best = max(sentences, key=score)
    chosen = next((s for s in sentences if s.n == prefer), None)
    if chosen is not None and score(chosen) >= score(best) - 0.1:
        return chosen
    return best
