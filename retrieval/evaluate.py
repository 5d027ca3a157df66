"""Retrieval metrics over questions with verbatim answer needles.

A retrieval is correct when a returned chunk's content contains the whole needle
(whitespace-normalised): half a sentence in the prompt is not an answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from retrieval.types import Hit


def normalise(text: str) -> str:
    return " ".join(text.split())


def needle_rank(hits: Sequence[Hit], needle: str) -> int | None:
    """1-based rank of the first hit containing the whole needle, or None."""
    want = normalise(needle)
    return next((i + 1 for i, h in enumerate(hits) if want in normalise(h.chunk.content)), None)


def recall_at(ranks: Sequence[int | None], k: int) -> float:
    return sum(r is not None and r <= k for r in ranks) / len(ranks) if ranks else 0.0


def mrr(ranks: Iterable[int | None], cutoff: int = 20) -> float:
    ranks = list(ranks)
    return sum(1.0 / r for r in ranks if r is not None and r <= cutoff) / len(ranks) if ranks else 0.0
