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
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from retrieval.answer.evidence import SourceSentence, relevance, source_heading
from retrieval.answer.prompt import Claim
from retrieval.index import DANISH_STOPWORDS, STOPWORDS, tokenize
from retrieval.ingest import plain

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


@dataclass(frozen=True)
class SupportConfig:
    """Thresholds measured on the dev set (see ``footnote eval --answers``)."""

    overlap: float = 0.6  # share of the claim's content words present in the evidence
    cosine: float = 0.75  # or: embedding similarity of claim and evidence
    min_words: int = 2  # a claim adding fewer content words than this to the question is too short to check
    reattribute_margin: float = 0.15  # another sentence must support the claim this much better to take it


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
    untranslated: int = 0  # checked claims not shown: their translation into the asker's language failed


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


_FUNCTION_WORDS = STOPWORDS | DANISH_STOPWORDS  # a Danish answer is checked against a Danish source alike


def content_words(text: str) -> set[str]:
    return {_stem(w) for w in tokenize(text) if w not in _FUNCTION_WORDS and len(w) > 1 and not w.isdigit()}


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


def support(
    claim: str, claim_vec: np.ndarray | None, ev: SourceSentence, asked: frozenset[str] | set[str] = frozenset()
) -> Support:
    """How far the evidence sentence (with its passage heading) backs the claim.

    Only what the claim adds to the question's words (``asked``) counts: words it merely
    repeats from the question ("the pipeline generates its answers", asked "does the
    pipeline generate its answers?") are no evidence that the source says so.
    """
    words = content_words(claim) - asked or content_words(claim)
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
    question: str = "",
) -> Checked:
    """Keep each claim with the source sentence that supports it best (the cited one
    unless another clearly supports it better: re-attributed), or remove it when none
    does. A claim that adds fewer than ``min_words`` content words to the question is
    too short to check. Duplicate claims (same evidence, same text) go."""
    asked = content_words(question)
    kept: list[CheckedClaim] = []
    removed: list[str] = []
    moved = short = 0
    for claim, vec in _split_copies(claims, claim_vecs, sentences):
        if len(content_words(claim.text) - asked) < cfg.min_words:
            short += 1
            continue
        best = _best_support(claim.text, vec, sentences, cfg, asked, prefer=claim.cite)
        if best is None:
            removed.append(claim.text)
            continue
        moved += best[0].n != claim.cite
        kept.append(CheckedClaim(claim.text, best[0], best[1], reattributed=best[0].n != claim.cite))
    unique: list[CheckedClaim] = []
    for c in kept:
        if not any(u.text == c.text and u.evidence.n == c.evidence.n for u in unique):
            unique.append(c)
    return Checked(unique, removed, moved, short)


def _flat(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).lower().split()).rstrip(".!?;:, ")


def _split_copies(
    claims: Sequence[Claim], claim_vecs: Sequence[np.ndarray | None], sentences: Sequence[SourceSentence]
) -> list[tuple[Claim, np.ndarray | None]]:
    """Each claim with its vector; a claim that copies two or more source sentences whole
    ("A, and B [1]") becomes one claim per sentence it copies, each citing its own. Under the
    answer format one line carries one number, so the small model glues two sentences it
    copies into one line and cites the first: the second is then shown under a number that
    does not say it (on guides: "… Slack integrations, and SMS, which is only available
    through certain services - PagerDuty provides SMS [1]", the SMS sentence being [2])."""
    read = {s.n: _flat(plain(s.text)) for s in sentences if len(content_words(s.text)) >= 2}  # as the model read it
    by_n = {s.n: s for s in sentences}
    out: list[tuple[Claim, np.ndarray | None]] = []
    for claim, vec in zip(claims, claim_vecs, strict=True):
        flat = _flat(claim.text)
        found = {n: flat.find(t) for n, t in read.items() if t in flat}
        # A sentence found only inside another copied one is part of that one.
        whole = [n for n in found if not any(m != n and read[n] in read[m] for m in found)]
        if len(whole) < 2:
            out.append((claim, vec))
            continue
        for n in sorted(whole, key=found.__getitem__):
            # A list item's or a clause's own trailing comma would stand before the citation.
            text = " ".join(plain(by_n[n].text).split()).rstrip(" ,;:")
            out.append((Claim(text, n), by_n[n].vector))
    return out


def _best_support(
    claim: str,
    vec: np.ndarray | None,
    sentences: Sequence[SourceSentence],
    cfg: SupportConfig,
    asked: frozenset[str] | set[str],
    prefer: int,
) -> tuple[SourceSentence, Support] | None:
    """The supporting sentence with the most support; the cited one (``prefer``) on near ties."""
    ok = [(s, sup) for s in sentences if (sup := support(claim, vec, s, asked)).supports(cfg)]
    if not ok:
        return None
    best = max(ok, key=lambda x: x[1].overlap + x[1].cosine)
    cited = next((x for x in ok if x[0].n == prefer), None)
    margin = (best[1].overlap + best[1].cosine) - (cited[1].overlap + cited[1].cosine) if cited else 1.0
    return cited if cited is not None and margin < cfg.reattribute_margin else best


def best_for_question(
    question_vec: np.ndarray | None,
    question_idf: dict[str, float],
    sentences: Sequence[SourceSentence],
    prefer: int = 0,
    answer: str = "",
) -> SourceSentence | None:
    """The sentence to show as "the docs say" when no claim can stand on its own: the most
    relevant one (the model's own pick on a near tie) among those holding every number of
    the model's ``answer``. A bare "384" is a pointer: the reader must see the sentence
    that says 384, not the one ranked first."""
    if not sentences:
        return None
    wanted = numbers(answer)
    holding = [s for s in sentences if wanted and wanted <= numbers(s.text)]  # in the words quoted
    pool = holding or list(sentences)
    score = {s.n: relevance(s, question_vec, question_idf) for s in pool}
    best = max(pool, key=lambda s: score[s.n])
    chosen = next((s for s in pool if s.n == prefer), None)
    if chosen is not None and score[chosen.n] >= score[best.n] - 0.03:
        return chosen
    return best
