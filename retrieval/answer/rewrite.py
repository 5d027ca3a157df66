"""Query rewriting: the question asked again in the documents' own vocabulary.

People type "a BERT-style model" or "vLLM's paging memory trick" where the documents
say "encoder" and "PagedAttention"; neither BM25 nor MiniLM bridges that. A language
model that knows the field might: it rephrases the question "the way a textbook would",
and the passages found for the question *with* its rewrite are fused (reciprocal rank)
with those found for the question alone, so a rewrite adds passages beside the question's
own instead of replacing them (a passage both searches find rises above either's). Off
by default: it costs one model call per answered question (~1 s with the 1.5B on 2
cores), and on dev neither packaged model is a measured gain (the 1.5B mostly
paraphrases; see the README). In a thread, the model reads the thread's earlier
questions too, so a follow-up ("and how fast must I acknowledge it?") is rewritten about
its subject.

The gate never sees the rewrite: it judges the question as asked, with the threshold
calibrated for exactly that, and a refused question is never rewritten. A rewrite that
fails (a slow model, an error, nothing new) is a value, ``None``: the answer goes on
with the question alone.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from retrieval.errors import FootnoteError
from retrieval.models import LanguageModel
from retrieval.search import Searcher, SearchResult, reciprocal_rank
from retrieval.types import Hit

log = logging.getLogger(__name__)

Rewrite = Callable[[str, Sequence[str]], str | None]  # (question, the thread's earlier questions) -> rewrite

PROMPT = (
    "Rewrite this chat question the way a technical textbook would phrase it, using the precise technical "
    "names for anything described informally. Reply with the rewritten question only.\n\n{thread}Question: {question}"
)
THREAD = "Earlier questions in this conversation (for what the question refers to):\n{earlier}\n\n"
RRF_K = 60  # the usual constant; on dev k from 1 to 60 gave the same recall@4 in both halves


class Rewriter:
    """Asks a language model for the question in the documents' words; ``None`` when it cannot."""

    def __init__(self, model: Callable[[], LanguageModel], max_tokens: int = 48, deadline_s: float = 10.0) -> None:
        self._model = model
        self.max_tokens = max_tokens
        self.deadline_s = deadline_s

    def __call__(self, question: str, context: Sequence[str] = ()) -> str | None:
        """The rewrite of ``question``; ``context`` holds the thread's earlier questions, oldest first."""
        earlier = "\n".join(f"- {' '.join(c.split())}" for c in context if c.strip())
        thread = THREAD.format(earlier=earlier) if earlier else ""
        prompt = PROMPT.format(thread=thread, question=" ".join(question.split()))
        try:
            text = self._model().complete(
                [{"role": "user", "content": prompt}], self.max_tokens, deadline_s=self.deadline_s, drafts=False
            )
        except FootnoteError as exc:  # the rewrite is a bonus: the question alone still gets an answer
            log.warning("query rewrite skipped: %s", exc)
            return None
        return cleaned(text, question)


# The model sometimes announces its rewrite ('In a technical textbook, this question could be
# rephrased as: "…"'): the announcement's words are not the question's, so only what follows counts.
_PREAMBLE = re.compile(r"^[^:]{0,160}\b(?:rephrase|rewrit|phrased|textbook)[^:]*:\s*(\S.*)$", re.IGNORECASE)


def cleaned(text: str, question: str) -> str | None:
    """The rewrite's first line without a label, an announcement or quotes; None if it adds nothing."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if m := _PREAMBLE.match(line):
        line = m.group(1)
    for label in ("Rewritten question:", "Question:"):
        if line.lower().startswith(label.lower()):
            line = line[len(label) :].strip()
    line = line.strip('"“”` ')  # not "'": a rewrite may end in a plural possessive
    if not line or " ".join(line.lower().split()) == " ".join(question.lower().split()):
        return None
    return line


def fuse_hits(first: Sequence[Hit], second: Sequence[Hit], k: int, rrf_k: int = RRF_K) -> list[Hit]:
    """Reciprocal-rank fusion of two rankings of the same index; a passage keeps its first ``Hit``."""
    score = reciprocal_rank(([h.chunk.id for h in first], [h.chunk.id for h in second]), rrf_k)
    hit: dict[str, Hit] = {}
    for h in (*first, *second):
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

    Everything the gate reads (distances, coverage) stays the question's own. The rewrite
    goes after the question: the embedder keeps the first 256 word pieces, and the thread's
    context is sized so that the question itself is never what is cut."""
    second = searcher.search(f"{result.query} {rewritten}", k=k, context=context, folders=folders)
    return replace(result, hits=fuse_hits(result.hits, second.hits, k))
