"""Retrieval metrics and the statistics used to compare strategies honestly.

A retrieval is correct when a returned passage contains the whole needle
(whitespace-normalised): half a sentence in the prompt is not an answer. With a few
dozen questions a recall carries an interval of about ±0.12, so every figure gets a
95 % Wilson interval, and two strategies run on the same questions are compared by a
paired exact sign test on the questions where they disagree.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from retrieval.search import as_read
from retrieval.types import Chunk, Hit

Rank = int | None


# A question file without styles is one style; in a file with styles, a line without one
# is a direct question (the OOD files of ../shared/eval: ood.jsonl has none, its chatty
# twins in ood-ticket.jsonl say "ticket").
DIRECT = "course"


def styles_of(styles: Sequence[str]) -> list[str]:
    """Each item's style for the per-style figures ([] when no item has one)."""
    return [s or DIRECT for s in styles] if any(styles) else []


def normalise(text: str) -> str:
    """Whitespace, case and Unicode form folded (æ, ø, å and every other letter kept): how a
    needle is matched. A drive written on a Mac may spell "å" as "a" plus a combining ring (NFD),
    and a needle typed elsewhere spells it as one letter: the same text to a reader."""
    return as_read(text).casefold()


def passage(chunk: Chunk) -> str:
    """The words a strategy hands the model for a chunk: its content plus any overlap tail.

    The header is left out; it is not document text. ``text`` ends with tail + content.
    """
    tail = chunk.start - int(chunk.meta.get("overlap_start", chunk.start))
    return chunk.text[len(chunk.text) - len(chunk.content) - tail :] if tail > 0 else chunk.content


def needle_rank(hits: Sequence[Hit], needle: str) -> Rank:
    """1-based rank of the first hit whose passage contains the whole needle, or None."""
    want = normalise(needle)
    return next((i + 1 for i, h in enumerate(hits) if want in normalise(passage(h.chunk))), None)


def absent(texts: Iterable[str], needles: Sequence[str]) -> list[str]:
    """Needles that no document's text holds: no chunking or ranking can find them (a question
    written against another version of the documents, or text the extraction reads otherwise)."""
    folded = [normalise(t) for t in texts]
    return [n for n in needles if not any(normalise(n) in t for t in folded)]


def destroyed(chunks: Iterable[Chunk], needles: Sequence[str]) -> list[str]:
    """Needles that no chunk contains in one piece: no ranking can ever retrieve them."""
    texts = [normalise(passage(c)) for c in chunks]
    return [n for n in needles if not any(normalise(n) in t for t in texts)]


def recall_at(ranks: Sequence[Rank], k: int) -> float:
    return hits_at(ranks, k) / len(ranks) if ranks else 0.0


def hits_at(ranks: Sequence[Rank], k: int) -> int:
    return sum(r is not None and r <= k for r in ranks)


def mrr(ranks: Iterable[Rank], cutoff: int = 20) -> float:
    ranks = list(ranks)
    return sum(1.0 / r for r in ranks if r is not None and r <= cutoff) / len(ranks) if ranks else 0.0


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval for a proportion (95 % by default)."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test on the discordant pairs (ties left out)."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired(a: Sequence[Rank], b: Sequence[Rank], k: int) -> tuple[int, int]:
    """Questions ``a`` finds within ``k`` and ``b`` does not (wins), and the reverse (losses)."""
    hit_a = [r is not None and r <= k for r in a]
    hit_b = [r is not None and r <= k for r in b]
    wins = sum(x and not y for x, y in zip(hit_a, hit_b, strict=True))
    losses = sum(y and not x for x, y in zip(hit_a, hit_b, strict=True))
    return wins, losses
