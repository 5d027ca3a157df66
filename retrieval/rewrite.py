"""Query rewriting: the question asked again in the documents' own vocabulary.

People type "a BERT-style model" or "vLLM's paging memory trick" where the documents
say "encoder" and "PagedAttention"; neither BM25 nor MiniLM bridges that. A language
model that knows the field can: it rephrases the question "the way a textbook would",
and the passages found for the question *with* its rewrite are fused (reciprocal rank)
with those found for the question alone, so a rewrite adds passages without taking the
question's own out of reach (its first ten are always among the fused twenty). Off by default: it costs one model call per answered
question (~1 s with the 1.5B on 2 cores), and only a model that knows the field helps
(on dev the 0.5B found no more ticket-style questions in the first four, the 1.5B 1 to 3 of 32;
see the README).

The gate never sees the rewrite: it judges the question as asked, with the threshold
calibrated for exactly that, and a refused question is never rewritten. A rewrite that
fails (a slow model, an error, nothing new) is a value, ``None``: the answer goes on
with the question alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

from retrieval.errors import ModelError
from retrieval.llm import LanguageModel
from retrieval.search import Searcher, SearchResult
from retrieval.types import Hit

log = logging.getLogger(__name__)

PROMPT = (
    "Rewrite this chat question the way a technical textbook would phrase it, using the precise technical "
    "names for anything described informally. Reply with the rewritten question only.\n\nQuestion: {question}"
)
RRF_K = 60  # the usual constant; on dev k from 1 to 60 gave the same recall@4 in both halves


class Rewriter:
    """Asks a language model for the question in the documents' words; ``None`` when it cannot."""

    def __init__(self, model: Callable[[], LanguageModel], max_tokens: int = 48, deadline_s: float = 10.0) -> None:
        self._model = model
        self.max_tokens = max_tokens
        self.deadline_s = deadline_s

    def __call__(self, question: str) -> str | None:
        messages = [{"role": "user", "content": PROMPT.format(question=" ".join(question.split()))}]
        try:
            text = self._model().complete(messages, self.max_tokens, deadline_s=self.deadline_s)
        except ModelError as exc:  # the rewrite is a bonus: the question alone still gets an answer
            log.warning("query rewrite skipped: %s", exc)
            return None
        return cleaned(text, question)


def cleaned(text: str, question: str) -> str | None:
    """The rewrite's first line without a "Question:" label or quotes; None if it adds nothing."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    for label in ("Rewritten question:", "Question:"):
        if line.lower().startswith(label.lower()):
            line = line[len(label) :].strip()
    line = line.strip("\"'“”` ")
    if not line or " ".join(line.lower().split()) == " ".join(question.lower().split()):
        return None
    return line


def fuse_hits(first: Sequence[Hit], second: Sequence[Hit], k: int, rrf_k: int = RRF_K) -> list[Hit]:
    """Reciprocal-rank fusion of two rankings of the same index; a passage keeps its first ``Hit``."""
    score: dict[str, float] = {}
    hit: dict[str, Hit] = {}
    for ranking in (first, second):
        for rank, h in enumerate(ranking):
            score[h.chunk.id] = score.get(h.chunk.id, 0.0) + 1.0 / (rrf_k + rank + 1)
            hit.setdefault(h.chunk.id, h)
    # Ties (a passage at rank r in one list, another at rank r in the other) keep the question's own order.
    order = sorted(score, key=lambda cid: -score[cid])
    return [replace(hit[cid], score=score[cid]) for cid in order[:k]]


def widen(
    searcher: Searcher,
    result: SearchResult,
    rewritten: str,
    k: int = 20,
    context: Sequence[str] = (),
    folders: Sequence[str] | None = None,
) -> SearchResult:
    """``result`` (the question's own search) with the passages found for question + rewrite fused in.

    Everything the gate reads (distances, coverage) stays the question's own."""
    second = searcher.search(result.query, k=k, context=(*context, rewritten), folders=folders)
    return replace(result, hits=fuse_hits(result.hits, second.hits, k))
