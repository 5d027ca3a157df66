"""The answer service: search, gate, prompt the model, check every sentence, cite.

Every outcome is a value: an :class:`Answer` is either an answer whose every
sentence is backed by the source sentence it cites, or a refusal with a reason
(and the nearest documents, so a person knows where Footnote looked). The model is
never called when the gate refuses. What the model writes is never shown as cited
until the support check has passed it: a sentence its source does not back is
re-attributed to the source sentence that does, or removed; an answer with nothing
left (or one too short to check, a bare "No.") is shown as the evidence itself.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

import numpy as np

from retrieval.answer.citations import Citation, Linker, cite_evidence, make_citations, neutralise, says_not_found
from retrieval.answer.evidence import SourceSentence, most_relevant, number_sentences, question_weights
from retrieval.answer.prompt import AnswerFormat, Claim, build_prompt, parse_claims, says_nothing_found, visible_partial
from retrieval.answer.rewrite import Rewrite, widen
from retrieval.answer.support import Checked, CheckedClaim, Support, SupportConfig, best_for_question, check
from retrieval.models import LanguageModel, OnToken
from retrieval.search import GateConfig, GateDecision, Searcher, SearchResult, decide
from retrieval.types import Hit

DOCS_SAY = "The docs say:"


@dataclass(frozen=True)
class AnswerCheck:
    """What the support check did to the model's sentences (shown in ``--json``)."""

    claims: int = 0  # sentences the model wrote
    kept: int = 0  # shown, each with the evidence it cites
    reattributed: int = 0  # shown with another source sentence than the one the model cited
    removed: int = 0  # no source sentence supports them: not shown
    too_short: int = 0  # too few words to check ("No.", "2015"): not shown on their own
    shown_as_evidence: bool = False  # nothing checkable was left: the reply quotes the evidence
    constrained: bool = False  # the model wrote under the answer grammar
    removed_claims: tuple[str, ...] = ()

    def as_json(self) -> dict[str, object]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


class Outcome(StrEnum):
    """How a question ended, as a value: /metrics counts each kind, the gaps record keeps it."""

    ANSWERED = "answered"  # every sentence shown is backed by the evidence it cites
    REFUSED_GATE = "refused_gate"  # nothing relevant enough (or nothing in scope): the model was not asked
    REFUSED_MODEL = "refused_model"  # the model wrote [0]: the sources it read do not answer
    CLAIMS_REMOVED = "claims_removed"  # the check removed every sentence the model wrote; the evidence is quoted
    ERROR = "error"  # no answer: the model or the service failed

    @property
    def refused(self) -> bool:
        """No answer was shown (what ``Answer.refused`` says)."""
        return self in (Outcome.REFUSED_GATE, Outcome.REFUSED_MODEL, Outcome.ERROR)


@dataclass(frozen=True)
class Answer:
    question: str
    refused: bool
    reason: str  # for people; ``outcome`` is the kind, as a value
    text: str
    citations: list[Citation]  # the evidence the answer cites, numbered as in the text
    consulted: list[Citation] = field(default_factory=list)  # passages read when the model found no answer
    nearest: list[str] = field(default_factory=list)  # closest documents, for refusals
    gate: float = 0.0
    collection: str | None = None  # the folders searched, when the asker's channel is scoped
    check: AnswerCheck = field(default_factory=AnswerCheck)
    timings: dict[str, float] = field(default_factory=dict)
    outcome: Outcome = Outcome.ANSWERED
    # The question's vector as the search embedded it (with its thread's context), for grouping by meaning.
    vector: np.ndarray | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.refused != self.outcome.refused:
            raise ValueError(f"an answer with refused={self.refused} cannot have the outcome {self.outcome}")


def _nearest_docs(hits: Sequence[Hit], n: int = 3) -> list[str]:
    out: list[str] = []
    for h in hits:
        if h.chunk.doc_title not in out:
            out.append(h.chunk.doc_title)
        if len(out) == n:
            break
    return out


class _PartialText:
    """Forwards the answer as it grows, without the model's sentence numbers."""

    def __init__(self, on_token: OnToken | None) -> None:
        self.on_token = on_token
        self.raw = ""
        self.shown = ""
        self.first_at: float | None = None

    def __call__(self, piece: str) -> None:
        if self.first_at is None:  # time to first token = prompt processing
            self.first_at = time.perf_counter()
        self.raw += piece
        visible = visible_partial(self.raw)
        if self.on_token is not None and visible.startswith(self.shown) and len(visible) > len(self.shown):
            self.on_token(visible[len(self.shown) :])
            self.shown = visible


class AnswerService:
    """One call per question: ``answer(question, context)`` → :class:`Answer`."""

    def __init__(
        self,
        searcher: Callable[[], Searcher],
        model: Callable[[], LanguageModel],
        gate: GateConfig,
        *,
        links: Linker | None = None,
        max_sources: int = 4,
        max_tokens: int = 160,
        max_sentences: int = 2,
        support: SupportConfig | None = None,
        deadline_s: float | None = None,  # None: the model's own deadline
        rewriter: Rewrite | None = None,
    ) -> None:
        self._searcher = searcher
        self._model = model
        self.gate = gate
        self.links = links or Linker()  # where citations point (viewer links signed: /view serves only what was cited)
        self.max_sources = max_sources
        self.max_tokens = max_tokens
        self.max_sentences = max_sentences  # source sentences shown to the model
        self.support = support or SupportConfig()
        self.deadline_s = deadline_s
        self.rewriter = rewriter  # the question in the documents' words (retrieval.answer.rewrite), or None

    def answer(
        self,
        question: str,
        context: Sequence[str] = (),
        on_token: OnToken | None = None,
        folders: Sequence[str] | None = None,
    ) -> Answer:
        """Answer from the whole index, or only from documents under ``folders``."""
        t0 = time.perf_counter()
        searcher = self._searcher()
        result = searcher.search(question, k=20, context=context, folders=folders)
        collection = (
            ", ".join(f.strip("/") + "/" if f.strip("/") else "all documents" for f in folders) if folders else None
        )
        timings = dict(result.timings)
        t = time.perf_counter()
        decision = decide(result, self.gate, self.max_sources)
        timings["gate"] = (time.perf_counter() - t) * 1000
        nearest = _nearest_docs(result.hits)
        # Every outcome starts as a refusal that names where Footnote looked.
        base = Answer(
            question,
            True,
            decision.reason,
            "",
            [],
            nearest=nearest,
            gate=decision.signal,
            collection=collection,
            outcome=Outcome.REFUSED_GATE,
            vector=result.query_vector,
        )
        if not decision.answerable:
            reason = decision.reason
            if collection and not result.hits:
                reason = f"no documents in {collection}"
            timings["total"] = (time.perf_counter() - t0) * 1000
            return replace(base, reason=reason, timings=timings)

        if self.rewriter is not None:
            result, decision = self._rewritten(self.rewriter, searcher, result, decision, context, folders, timings)
        sources = decision.sources
        snap = searcher.snapshot
        sentences = number_sentences(sources, snap.sentence_rows_of)
        question_idf = question_weights(question, snap.bm25.idf)
        sentences = most_relevant(sentences, result.query_vector, self.max_sentences, question_idf)
        if not sentences:
            # Every sentence that matched is an instruction planted for an assistant.
            timings["total"] = (time.perf_counter() - t0) * 1000
            return replace(base, reason="the matching passages hold no statement to cite", timings=timings)
        model = self._model()
        grammar = AnswerFormat(len(sentences))
        messages = build_prompt(question, sentences, context)
        stream = _PartialText(on_token)
        t = time.perf_counter()
        raw = model.complete(messages, self.max_tokens, stream, grammar=grammar, deadline_s=self.deadline_s)
        done = time.perf_counter()
        timings["llm_prompt"] = ((stream.first_at or done) - t) * 1000
        timings["generation"] = (done - t) * 1000
        constrained = bool(getattr(model, "supports_grammar", False))
        claims = parse_claims(neutralise(raw))
        if says_nothing_found(claims) or (not constrained and all(c.cite == 0 for c in claims) and says_not_found(raw)):
            timings["total"] = (time.perf_counter() - t0) * 1000
            consulted = make_citations(list(sources), self.links)
            check_ = AnswerCheck(len(claims), constrained=constrained)
            reason = "the model found no answer in the sources"
            return replace(
                base,
                reason=reason,
                consulted=consulted,
                check=check_,
                timings=timings,
                outcome=Outcome.REFUSED_MODEL,
            )

        t = time.perf_counter()
        # The question's vector is the one search already made (with the thread's context).
        qvec = result.query_vector
        claim_vecs, sentences = self._vectors(searcher, [c.text for c in claims], sentences)
        checked = check(claims, claim_vecs, sentences, self.support, question)
        text, cited, shown_as_evidence = self._compose(checked, question_idf, qvec, sentences, claims[0])
        timings["check"] = (time.perf_counter() - t) * 1000
        timings["total"] = (time.perf_counter() - t0) * 1000
        summary = AnswerCheck(
            claims=len(claims),
            kept=len(checked.claims) if not shown_as_evidence else 0,
            reattributed=checked.reattributed if not shown_as_evidence else 0,
            removed=len(checked.removed),
            too_short=checked.too_short,
            shown_as_evidence=shown_as_evidence,
            constrained=constrained,
            removed_claims=tuple(checked.removed),
        )
        # Nothing the model wrote survived the check (a bare "No." is not removed: it is too short to check).
        outcome = Outcome.CLAIMS_REMOVED if shown_as_evidence and checked.removed else Outcome.ANSWERED
        return replace(
            base,
            refused=False,
            reason="answered",
            text=text,
            citations=cited,
            check=summary,
            timings=timings,
            outcome=outcome,
        )

    def _rewritten(
        self,
        rewriter: Rewrite,
        searcher: Searcher,
        result: SearchResult,
        decision: GateDecision,
        context: Sequence[str],
        folders: Sequence[str] | None,
        timings: dict[str, float],
    ) -> tuple[SearchResult, GateDecision]:
        """After the gate let the question through: its sources, widened by a rewrite of it."""
        t = time.perf_counter()
        rewritten = rewriter(result.query, context)
        timings["rewrite"] = (time.perf_counter() - t) * 1000
        if not rewritten:
            return result, decision
        t = time.perf_counter()
        wider = widen(searcher, result, rewritten, 20, context, folders)
        timings["search_rewrite"] = (time.perf_counter() - t) * 1000
        again = decide(wider, self.gate, self.max_sources)  # the same signal: only the passages differ
        return (wider, again) if again.answerable else (result, decision)

    def _vectors(
        self, searcher: Searcher, claims: list[str], sentences: list[SourceSentence]
    ) -> tuple[list[np.ndarray | None], list[SourceSentence]]:
        """The claims' vectors (one small call: the embedder's question runtime), and vectors
        for any sentence the index holds none for (an index built by another sentence rule)."""
        missing = [s for s in sentences if s.vector is None]
        if missing:
            fill = dict(zip((s.n for s in missing), searcher.embedder.embed([s.text for s in missing]), strict=True))
            sentences = [replace(s, vector=fill[s.n]) if s.n in fill else s for s in sentences]
        return list(searcher.embedder.embed(claims)), sentences

    def _compose(
        self,
        checked: Checked,
        question_idf: dict[str, float],
        qvec: np.ndarray | None,
        sentences: list[SourceSentence],
        first: Claim,
    ) -> tuple[str, list[Citation], bool]:
        """The reply text with citation numbers in order of first use, and those citations."""
        claims = checked.claims
        shown_as_evidence = not claims
        if shown_as_evidence:
            ev = best_for_question(qvec, question_idf, sentences, prefer=first.cite, answer=first.text)
            assert ev is not None  # the gate let sources through, so there are sentences
            claims = [CheckedClaim(f"{DOCS_SAY} «{' '.join(ev.text.split())}»", ev, _NO_SUPPORT)]
        numbers: dict[int, int] = {}
        cited: list[Citation] = []
        parts = []
        for c in claims:
            if c.evidence.n not in numbers:
                numbers[c.evidence.n] = len(numbers) + 1
                cited.append(cite_evidence(numbers[c.evidence.n], c.evidence, self.links))
            parts.append(_with_citation(c.text, numbers[c.evidence.n]))
        return " ".join(parts), cited, shown_as_evidence


_NO_SUPPORT = Support(1.0, 1.0, True)  # the evidence quoted as itself backs itself
_END = re.compile(r"([.!?…:;]*)$")


def _with_citation(text: str, n: int) -> str:
    """``It extracts the answer [1].``: the number goes before the sentence's final stop."""
    text = text.strip()
    m = _END.search(text)
    stop = m.group(1) if m else ""
    body = text[: len(text) - len(stop)].rstrip() if stop else text
    if body.endswith("»"):
        return f"{body} [{n}]"
    return f"{body} [{n}]{stop if stop in ('.', '!', '?') else '.'}"
