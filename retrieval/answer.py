"""The answer service: search, gate, prompt the model, attach citations.

Every outcome is a value: an :class:`Answer` is either an answer with citations
or a refusal with a reason (and the nearest documents, so a person knows where
Footnote looked). The model is never called when the gate refuses.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from retrieval.citations import Citation, clean_answer, make_citations, says_not_found
from retrieval.gate import GateConfig, decide
from retrieval.links import SignLink
from retrieval.llm import LanguageModel, Message, OnToken
from retrieval.search import Searcher
from retrieval.types import Hit

# The seed's prompt. Measured against variants on the default 0.5B model: a system
# role or an inline example made it refuse answerable questions or copy the example.
INSTRUCTIONS = (
    "Answer using ONLY the numbered sources below. Cite every claim as [n].\n"
    "If the sources do not contain the answer, say so and stop."
)


@dataclass(frozen=True)
class Answer:
    question: str
    refused: bool
    reason: str
    text: str
    citations: list[Citation]  # sources the answer cites, numbered as in the text
    consulted: list[Citation] = field(default_factory=list)  # shown when the model cited nothing
    nearest: list[str] = field(default_factory=list)  # closest documents, for refusals
    gate: float = 0.0
    collection: str | None = None  # the folders searched, when the asker's channel is scoped
    dropped_citations: int = 0
    timings: dict[str, float] = field(default_factory=dict)


def build_prompt(question: str, hits: Sequence[Hit], context: Sequence[str] = ()) -> list[Message]:
    """Numbered sources ``[n] Document — Section`` and their own content; no links."""
    blocks = []
    for i, h in enumerate(hits, start=1):
        c = h.chunk
        name = f"{c.doc_title} — {c.section}" if c.section else c.doc_title
        blocks.append(f"[{i}] {name}\n{c.content}")
    earlier = "".join(f"Earlier question in this conversation: {q}\n" for q in context)
    user = f"{INSTRUCTIONS}\n\nSOURCES\n" + "\n\n".join(blocks) + f"\n\n{earlier}QUESTION\n{question}"
    return [{"role": "user", "content": user}]


def strip_echoed_labels(text: str, hits: Sequence[Hit]) -> str:
    """Small models sometimes repeat a source's heading line; it is not part of an answer."""
    for h in hits:
        c = h.chunk
        for label in (f"{c.doc_title} — {c.section}", c.doc_title):
            text = text.replace(label, "")
    return text


def _nearest_docs(hits: Sequence[Hit], n: int = 3) -> list[str]:
    out: list[str] = []
    for h in hits:
        if h.chunk.doc_title not in out:
            out.append(h.chunk.doc_title)
        if len(out) == n:
            break
    return out


class AnswerService:
    """One call per question: ``answer(question, context)`` → :class:`Answer`."""

    def __init__(
        self,
        searcher: Callable[[], Searcher],
        model: Callable[[], LanguageModel],
        gate: GateConfig,
        max_sources: int = 4,
        max_tokens: int = 256,
        docs_url: str | None = None,
        docs_dir: Path | None = None,
        viewer_url: str | None = None,
        sign_link: SignLink | None = None,
    ) -> None:
        self._searcher = searcher
        self._model = model
        self.gate = gate
        self.max_sources = max_sources
        self.max_tokens = max_tokens
        self.docs_url = docs_url
        self.docs_dir = docs_dir
        self.viewer_url = viewer_url
        self.sign_link = sign_link  # signs viewer links, so /view serves only what was cited

    def answer(
        self,
        question: str,
        context: Sequence[str] = (),
        on_token: OnToken | None = None,
        folders: Sequence[str] | None = None,
    ) -> Answer:
        """Answer from the whole index, or only from documents under ``folders``."""
        t0 = time.perf_counter()
        result = self._searcher().search(question, k=20, context=context, folders=folders)
        collection = (
            ", ".join(f.strip("/") + "/" if f.strip("/") else "all documents" for f in folders) if folders else None
        )
        timings = dict(result.timings)
        t = time.perf_counter()
        decision = decide(result, self.gate, self.max_sources)
        timings["gate"] = (time.perf_counter() - t) * 1000
        nearest = _nearest_docs(result.hits)
        if not decision.answerable:
            reason = decision.reason
            if collection and not result.hits:
                reason = f"no documents in {collection}"
            timings["total"] = (time.perf_counter() - t0) * 1000
            return Answer(
                question,
                True,
                reason,
                "",
                [],
                nearest=nearest,
                gate=decision.signal,
                timings=timings,
                collection=collection,
            )

        sources = decision.sources
        t = time.perf_counter()
        messages = build_prompt(question, sources, context)
        timings["prompt"] = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        first: list[float] = []

        def on_piece(piece: str) -> None:
            if not first:  # time to first token = prompt processing
                first.append(time.perf_counter())
            if on_token is not None:
                on_token(piece)

        raw = self._model().complete(messages, self.max_tokens, on_piece)
        done = time.perf_counter()
        timings["llm_prompt"] = ((first[0] if first else done) - t) * 1000
        timings["generation"] = (done - t) * 1000
        cleaned = clean_answer(strip_echoed_labels(raw, sources), len(sources))
        all_cites = make_citations(sources, self.docs_url, self.docs_dir, self.viewer_url, self.sign_link)
        timings["total"] = (time.perf_counter() - t0) * 1000
        if not cleaned.cited and (says_not_found(cleaned.text) or not cleaned.text):
            return Answer(
                question, True, "the model found no answer in the sources", "", [], consulted=all_cites,
                nearest=nearest, gate=decision.signal, dropped_citations=cleaned.dropped, timings=timings,
                collection=collection,
            )  # fmt: skip
        cited = [all_cites[n - 1] for n in sorted(cleaned.cited)]
        text = cleaned.text
        if cited and not re.sub(r"\[\d+\]", "", text).strip(" .\n"):
            text = "See " + ", ".join(f"[{c.n}]" for c in cited) + "."
        consulted = [] if cited else all_cites
        return Answer(
            question, False, "answered", text, cited, consulted=consulted, nearest=nearest,
            gate=decision.signal, dropped_citations=cleaned.dropped, timings=timings, collection=collection,
        )  # fmt: skip
