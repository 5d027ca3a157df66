"""The answer service: search, gate, prompt the model, check every sentence, cite.

Every outcome is a value, one of three kinds: an :class:`Answer` is an answer whose every
sentence is backed by the source sentence it cites; or, when Footnote is not sure, the
closest passages (pointers: each one's best sentence quoted, with its link), plainly not
an answer; or a refusal with a reason (and the nearest documents, so a person knows where
Footnote looked). The model is called only to answer: never to point, never when the
gate refuses. A message that reads like one a teammate confirmed a passage for (in the
same channel scope) is answered from that passage, and says so. What the model writes is never shown as cited
until the support check has passed it: a sentence its source does not back is
re-attributed to the source sentence that does, or removed; an answer with nothing
left (or one too short to check, a bare "No.") is shown as the evidence itself. A question
asked in another language than the drive's may be answered with the sentence most relevant
to it, translated (no answer written in between), checked and cited the same way.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Protocol

import numpy as np

from retrieval.answer.asked import unanswered
from retrieval.answer.citations import Citation, Linker, cite_evidence, neutralise, says_not_found
from retrieval.answer.evidence import SourceSentence, VectorsOf, number_sentences, question_weights, sentences_read
from retrieval.answer.pointers import in_context, point_at
from retrieval.answer.prompt import AnswerFormat, Claim, build_prompt, parse_claims, says_nothing_found, visible_partial
from retrieval.answer.rewrite import Rewrite, widen
from retrieval.answer.support import (
    Checked,
    CheckedClaim,
    Support,
    SupportConfig,
    best_for_question,
    check,
)
from retrieval.answer.translate import Translate, passes_for
from retrieval.errors import FootnoteError, ModelError
from retrieval.learn import LearnedPairs, Match, Pair, holder
from retrieval.models import SUPPORTED, LanguageModel, OnToken
from retrieval.search import GateConfig, GateDecision, Glossary, Languages, Searcher, SearchResult, Verdict, decide
from retrieval.types import Hit

DOCS_SAY = "The docs say:"
log = logging.getLogger(__name__)

_PRIMER = "Hi."  # what a prompt is primed with: any short text; only the prompt's start is kept
_WORDS = re.compile(r"[^\W_]")  # a letter or digit in any script


@dataclass(frozen=True)
class AnswerCheck:
    """What the support check did to the model's sentences (shown in ``--json``)."""

    claims: int = 0  # sentences the model wrote
    kept: int = 0  # shown, each with the evidence it cites
    reattributed: int = 0  # shown with another source sentence than the one the model cited
    removed: int = 0  # no source sentence supports them: not shown
    too_short: int = 0  # too few words to check ("No.", "2015"): not shown on their own
    shown_as_evidence: bool = False  # nothing checkable was left: the reply quotes the evidence
    untranslated: int = 0  # checked sentences whose translation into the asker's language failed: not shown
    constrained: bool = False  # the model wrote under the answer grammar
    removed_claims: tuple[str, ...] = ()

    def as_json(self) -> dict[str, object]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


class Outcome(StrEnum):
    """How a question ended, as a value: /metrics counts each kind, the gaps record keeps it."""

    ANSWERED = "answered"  # every sentence shown is backed by the evidence it cites
    POINTED = "pointed"  # not sure: the closest passages were shown, plainly not an answer
    REFUSED_GATE = "refused_gate"  # nothing relevant enough (or nothing in scope): the model was not asked
    REFUSED_MODEL = "refused_model"  # (an older Footnote's) the model wrote [0]; now such a question is pointed
    CLAIMS_REMOVED = "claims_removed"  # the check removed every sentence the model wrote; the evidence is quoted
    ERROR = "error"  # no answer: the model or the service failed
    MODEL_FAILED = "model_failed"  # the model failed to write; the closest passages were shown instead

    @property
    def failed(self) -> bool:
        """Something broke on the way (counted as an error, never as a gap in the docs)."""
        return self in (Outcome.ERROR, Outcome.MODEL_FAILED)

    @property
    def refused(self) -> bool:
        """Neither an answer nor the passages were shown (what ``Answer.refused`` says)."""
        return self in (Outcome.REFUSED_GATE, Outcome.REFUSED_MODEL, Outcome.ERROR)

    @property
    def kind(self) -> str:
        """The three outcomes people see: ``answered``, ``pointed`` or ``refused``."""
        if self in (Outcome.POINTED, Outcome.MODEL_FAILED):
            return "pointed"
        return "refused" if self.refused else "answered"


@dataclass(frozen=True)
class Answer:
    question: str
    refused: bool
    reason: str  # for people; ``outcome`` is the kind, as a value
    text: str
    citations: list[Citation]  # the evidence the answer cites, numbered as in the text
    consulted: list[Citation] = field(default_factory=list)  # (an older Footnote's) passages the model read
    pointers: list[Citation] = field(default_factory=list)  # the closest passages, when pointed
    nearest: list[str] = field(default_factory=list)  # closest documents, for refusals
    gate: float = 0.0
    collection: str | None = None  # the folders searched, when the asker's channel is scoped
    check: AnswerCheck = field(default_factory=AnswerCheck)
    timings: dict[str, float] = field(default_factory=dict)
    outcome: Outcome = Outcome.ANSWERED
    # The question's vector as the search embedded it (with its thread's context), for grouping by meaning.
    vector: np.ndarray | None = field(default=None, compare=False, repr=False)
    learned: str | None = None  # the confirmed pair the answer came from (its id), if it did
    language: str | None = None  # the asker's (what Footnote says is in it; quotes stay in their document's)

    @property
    def kind(self) -> str:
        """``answered``, ``pointed`` or ``refused``."""
        return self.outcome.kind

    @property
    def answered(self) -> bool:
        return self.outcome.kind == "answered"

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


class Quoted(Protocol):
    """A passage as a confirmation names it (a citation, a pointer, or a click's record of one)."""

    @property
    def path(self) -> str: ...

    @property
    def start(self) -> int: ...

    @property
    def end(self) -> int: ...

    @property
    def quote(self) -> str: ...


@dataclass(frozen=True)
class Searched:
    """What search reads for a question: ``text``, the question in the drive's language (or as
    asked); ``glosses``, the glossary's words beside it; ``failed``: a translation was wanted
    and failed, so ``text`` is the question as asked."""

    text: str
    glosses: str = ""
    failed: bool = False


def _other_drive_language(searcher: Searcher, asked_in: str | None) -> str | None:
    """The language of a one-language drive when a question is asked in another (else None):
    what the question is translated into and glossed in. One stray document in another
    language (a licence, an author list) leaves a drive one language's (``Languages.dominant``)."""
    into = Languages.dominant(searcher.snapshot)
    if asked_in is None or into is None or asked_in == into:
        return None
    return into


@dataclass
class _Turn:
    """One question on its way through the service: what search found, the refusal every
    outcome starts from, and the timings so far."""

    searcher: Searcher
    result: SearchResult
    base: Answer
    context: Sequence[str]
    on_token: OnToken | None
    timings: dict[str, float]
    t0: float
    asked: str  # the question as searched and answered: in the drive's language
    back: str | None = None  # the asker's language to translate the answer into, when it is another

    def done(self) -> dict[str, float]:
        self.timings["total"] = (time.perf_counter() - self.t0) * 1000
        return self.timings


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
        learned: LearnedPairs | None = None,
        translator: Translate | None = None,
        glossary: Callable[[], Glossary] | None = None,
        translated_from_sentence: bool = False,
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
        self.learned = learned  # the team's confirmed pairs, or None (nothing is learned)
        self.translator = translator  # a question in another language than the drive's, into it (or None)
        self.glossary = glossary  # ... and its words, looked up in the drive's language (or None: not looked up)
        self.translated_from_sentence = translated_from_sentence  # ... and answered with its sentence (see _written)

    def answer(
        self,
        question: str,
        context: Sequence[str] = (),
        on_token: OnToken | None = None,
        folders: Sequence[str] | None = None,
    ) -> Answer:
        """Answer from the whole index, or only from documents under ``folders``."""
        t0 = time.perf_counter()
        if not _WORDS.search(question):  # empty, emoji, punctuation: nothing to search for
            return Answer(question, True, "there is no question to answer", "", [], outcome=Outcome.REFUSED_GATE)
        searcher = self._searcher()
        asked_in = searcher.languages.detect(question)
        if not Languages.supported(asked_in):
            reason = f"the question is in {asked_in}, which Footnote does not support (English, Danish)"
            timings = {"total": (time.perf_counter() - t0) * 1000}
            return Answer(question, True, reason, "", [], timings=timings, outcome=Outcome.REFUSED_GATE)
        searched, into, took = self._in_drive_language(searcher, question, asked_in)
        glosses = self._glosses(searcher, question, asked_in)
        result = searcher.search(searched, k=20, context=context, folders=folders, glosses=glosses)
        language = asked_in or result.language or Languages.main(searcher.snapshot)
        collection = (
            ", ".join(f.strip("/") + "/" if f.strip("/") else "all documents" for f in folders) if folders else None
        )
        timings = dict(result.timings)
        if took is not None:
            timings["translate"] = took
        t = time.perf_counter()
        decision = decide(result, self.gate, self.max_sources)
        timings["gate"] = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        match = self._learned(searcher, question, context, result, folders, decision.verdict is Verdict.ANSWER)
        timings["learned"] = (time.perf_counter() - t) * 1000
        # Every outcome starts as a refusal that names where Footnote looked.
        base = Answer(
            question,
            True,
            decision.reason,
            "",
            [],
            nearest=_nearest_docs(result.hits),
            gate=decision.signal,
            collection=collection,
            outcome=Outcome.REFUSED_GATE,
            vector=result.query_vector,
            language=language,
        )
        turn = _Turn(searcher, result, base, context, on_token, timings, t0, searched, language if into else None)
        if match is not None:
            return self._from_pair(turn, match)
        if decision.verdict is Verdict.REFUSE:
            reason = decision.reason
            if collection and not result.hits:
                reason = f"no documents in {collection}"
            return replace(base, reason=reason, timings=turn.done())
        if decision.verdict is Verdict.POINT:
            return self._pointed(turn, decision.sources, decision.reason)
        if self.rewriter is not None:
            turn.result, decision = self._rewritten(self.rewriter, turn, decision, folders)
        query = turn.result.query_vector
        sentences = sentences_read(decision.sources, searcher.snapshot, query, question, self.max_sentences)
        return self._written(turn, decision.sources, sentences)

    def _written(self, turn: _Turn, sources: list[Hit], sentences: list[SourceSentence]) -> Answer:
        """The model writes from ``sentences``; every sentence it writes is checked and cited.
        When it finds no answer in them, the passages are pointed at instead. A question asked in
        another language than the drive's is answered, when :attr:`translated_from_sentence`, with
        the sentence most relevant to it, translated: the model would mostly copy that sentence
        and then translate its copy, decoding the answer twice (docs/measurements.md, "A
        translated answer from its sentence")."""
        if not sentences:
            # Every sentence that matched is an instruction planted for an assistant.
            return replace(turn.base, reason="the matching passages hold no statement to cite", timings=turn.done())
        if turn.back is not None and self.translated_from_sentence:
            first = sentences[0]
            return self._checked(turn, sources, sentences, [Claim(" ".join(neutralise(first.text).split()), first.n)])
        question, timings = turn.asked, turn.timings  # in the drive's language: the model answers in it
        grammar = AnswerFormat(len(sentences))
        messages = build_prompt(question, sentences, turn.context, turn.base.language if not turn.back else None)
        stream = _PartialText(turn.on_token)
        t = time.perf_counter()
        try:
            model = self._model()
            raw = model.complete(messages, self.max_tokens, stream, grammar=grammar, deadline_s=self.deadline_s)
        except ModelError as exc:
            # The search found what to read: a model that is down, busy past the deadline or
            # crashed still leaves the person the passages, plainly not an answer.
            log.warning("the model did not answer %r; pointing at the passages: %s", turn.base.question, exc)
            pointed = self._pointed(turn, sources, f"the language model did not answer: {exc}")
            if not pointed.pointers:  # nothing to show instead: the error is what there is to say
                raise
            return replace(pointed, outcome=Outcome.MODEL_FAILED)
        done = time.perf_counter()
        timings["llm_prompt"] = ((stream.first_at or done) - t) * 1000
        timings["generation"] = (done - t) * 1000
        constrained = bool(getattr(model, "supports_grammar", False))
        claims = parse_claims(neutralise(raw))
        if says_nothing_found(claims) or (not constrained and all(c.cite == 0 for c in claims) and says_not_found(raw)):
            pointed = self._pointed(turn, sources, "the model found no answer in the closest passages")
            return replace(pointed, check=AnswerCheck(len(claims), constrained=constrained))
        return self._checked(turn, sources, sentences, claims, constrained)

    def _checked(
        self,
        turn: _Turn,
        sources: list[Hit],
        sentences: list[SourceSentence],
        claims: list[Claim],
        constrained: bool = True,
    ) -> Answer:
        """The answer of ``claims``: each checked against the sentences it cites, translated
        back into the asker's language when it was asked in another, and cited."""
        question = turn.asked
        question_idf = question_weights(question, turn.searcher.snapshot.bm25.idf)
        t = time.perf_counter()
        # The question's vector is the one search already made (with the thread's context).
        qvec = turn.result.query_vector
        claim_vecs, sentences = self._vectors(turn.searcher, [c.text for c in claims], sentences)
        checked = check(claims, claim_vecs, sentences, self.support, question)
        why = self._cannot_answer(turn, checked)
        if why is not None:
            pointed = self._pointed(turn, sources, why)
            return replace(pointed, check=AnswerCheck(len(claims), constrained=constrained))
        checked = self._translated_back(checked, turn)
        vectors_of = turn.searcher.snapshot.sentence_rows_of
        text, cited, shown_as_evidence = self._compose(checked, question_idf, qvec, sentences, claims[0], vectors_of)
        turn.timings["check"] = (time.perf_counter() - t) * 1000
        summary = AnswerCheck(
            claims=len(claims),
            kept=len(checked.claims) if not shown_as_evidence else 0,
            reattributed=checked.reattributed if not shown_as_evidence else 0,
            removed=len(checked.removed),
            too_short=checked.too_short,
            untranslated=checked.untranslated,
            shown_as_evidence=shown_as_evidence,
            constrained=constrained,
            removed_claims=tuple(checked.removed),
        )
        # Nothing the model wrote survived the check (a bare "No." is not removed: it is too short to check).
        outcome = Outcome.CLAIMS_REMOVED if shown_as_evidence and checked.removed else Outcome.ANSWERED
        return replace(
            turn.base,
            refused=False,
            reason="answered",
            text=text,
            citations=cited,
            check=summary,
            timings=turn.done(),
            outcome=outcome,
        )

    @staticmethod
    def _cannot_answer(turn: _Turn, checked: Checked) -> str | None:
        """Why the sentences the answer cites cannot answer what the question asks for (an
        amount, one of two alternatives), or None."""
        if not checked.claims:
            return None
        languages = turn.searcher.snapshot.languages
        cited = [(c.evidence.text, languages.get(c.evidence.hit.chunk.path)) for c in checked.claims]
        original = turn.base.question if turn.asked != turn.base.question else ""
        return unanswered(turn.asked, cited, original)

    def _pointed(self, turn: _Turn, sources: Sequence[Hit], reason: str) -> Answer:
        """Not sure: the closest passages, each one's best sentence quoted (no model call)."""
        snap = turn.searcher.snapshot
        idf = question_weights(turn.asked, snap.bm25.idf)
        pointers = point_at(sources, turn.result.query_vector, idf, snap.sentence_rows_of, self.links)
        if not pointers:  # every passage holds only text planted for an assistant
            return replace(turn.base, reason="the matching passages hold no statement to show", timings=turn.done())
        done = turn.done()
        return replace(
            turn.base, refused=False, reason=reason, pointers=pointers, timings=done, outcome=Outcome.POINTED
        )

    def prime(self) -> int:
        """Ask each kind of prompt this drive's questions begin with once, so that the first
        question after a start finds its instructions (and a translation's examples) already
        evaluated and saved (``retrieval.models.llm``): the answer's, and on a one-language
        drive the translation into its language and back. Returns the calls made; a model that
        fails here fails the same way on the first question, which says so."""
        snap = self._searcher().snapshot
        answers: set[str | None] = set(snap.languages.values())
        calls = 0
        into = Languages.dominant(snap)
        if self.translator is not None and into is not None:
            answers.add(None)  # a translated question is answered without a language line
            for target in (into, *(lang for lang in SUPPORTED if lang != into)):
                self.translator(_PRIMER, target)
                calls += 1
        prompts = {m[0]["content"]: m for m in (build_prompt(_PRIMER, [], language=lang) for lang in answers)}
        for _, messages in sorted(prompts.items()):  # one per system message: English has no language line
            try:
                self._model().complete(messages, 1, deadline_s=self.deadline_s)
            except FootnoteError as exc:
                log.warning("could not prime the answer's prompt: %s", exc)
                return calls
            calls += 1
        return calls

    def searched_as(self, question: str) -> Searched:
        """What is searched for ``question``, as :meth:`answer` searches it."""
        searcher = self._searcher()
        asked_in = searcher.languages.detect(question)
        text, into, took = self._in_drive_language(searcher, question, asked_in)
        return Searched(text, self._glosses(searcher, question, asked_in), into is None and took is not None)

    def _in_drive_language(
        self, searcher: Searcher, question: str, asked_in: str | None
    ) -> tuple[str, str | None, float | None]:
        """(the text to search, the language it was translated into or None, the ms it took):
        a question in another language than a one-language drive's, translated into the drive's."""
        into = _other_drive_language(searcher, asked_in)
        if self.translator is None or into is None:
            return question, None, None
        t = time.perf_counter()
        translated = self.translator(question, into)
        took = (time.perf_counter() - t) * 1000
        return (translated, into, took) if translated else (question, None, took)

    def _glosses(self, searcher: Searcher, question: str, asked_in: str | None) -> str:
        """The glossary's translations of ``question``'s words that the drive uses, when
        ``question`` is in another language than a one-language drive's (else ""). Search reads
        them beside the question in the drive's language; the model is asked the question alone."""
        into = _other_drive_language(searcher, asked_in)
        if self.glossary is None or asked_in is None or into is None:
            return ""
        glossary = self.glossary()  # loaded at the first question in another language
        return " ".join(glossary.glosses(question, asked_in, into, lambda w: searcher.snapshot.bm25.knows(w, into)))

    def _translated_back(self, checked: Checked, turn: _Turn) -> Checked:
        """The checked sentences in the asker's language (their evidence stays verbatim). Only
        the checked sentence is checked, so its translation must pass for one: in the asker's
        language, with the same numbers, of a like length; else the sentence is not shown (the
        0.5B, asked for Danish, sometimes writes English, German or a note about its task
        instead). With none left, the answer is the evidence itself, quoted verbatim under the
        asker's own "The docs say:", never a sentence in another language than the asker's."""
        if turn.back is None or self.translator is None or not checked.claims:
            return checked
        t = time.perf_counter()
        claims = []
        for c in checked.claims:
            out = self._faithful(c.text, turn)
            if out is not None:
                claims.append(replace(c, text=out))
        turn.timings["translate_back"] = (time.perf_counter() - t) * 1000
        return replace(checked, claims=claims, untranslated=len(checked.claims) - len(claims))

    def _faithful(self, claim: str, turn: _Turn) -> str | None:
        assert self.translator is not None and turn.back is not None
        out = self.translator(claim, turn.back)
        return out if passes_for(claim, out, turn.back, turn.searcher.languages.detect) else None

    def _learned(
        self,
        searcher: Searcher,
        question: str,
        context: Sequence[str],
        result: SearchResult,
        folders: Sequence[str] | None,
        sure: bool,
    ) -> Match | None:
        """The confirmed pair this message reads like, in its scope (the message alone, not its
        thread); ``sure``: the gate would answer it from its own search."""
        if self.learned is None or not result.hits:
            return None
        vector = result.query_vector if not context else searcher.message_vector(question)
        if vector is None:
            return None
        return self.learned.match(vector, folders, searcher.snapshot, [h.chunk for h in result.hits], sure)

    def _from_pair(self, turn: _Turn, match: Match) -> Answer:
        """A confident answer from the passage a teammate confirmed for a message like this one:
        the model reads that passage, as one numbered source, and cites it or finds no answer
        (then the passages are pointed at, the confirmed one first)."""
        snap = turn.searcher.snapshot
        chunk = snap.chunks[match.chunk]
        q = turn.result.query_vector
        distance = float(1.0 - snap.vectors[match.chunk] @ q) if q is not None else 0.0
        confirmed = Hit(chunk, 1.0, distance, {"learned": match.cosine})
        others = [h for h in turn.result.hits if h.chunk.content != chunk.content]  # a copy's passage is the same
        sources = [confirmed, *others[: self.max_sources - 1]]
        p = match.pair
        # The passage as confirmed is one source: what the teammate saw is what is cited.
        sentences = [SourceSentence(1, 1, confirmed, p.start, p.end, p.quote)]
        turn.base = replace(
            turn.base, learned=p.id, reason="a teammate confirmed this passage for a message like this one"
        )
        return self._written(turn, sources, sentences)

    # -- learning from confirmations --------------------------------------------------------

    def confirm(self, message: str, passage: Quoted, folders: Sequence[str] | None, user: str, via: str) -> Pair | None:
        """Keep that ``passage`` answers ``message`` (in the scope of ``folders``); None, and
        nothing kept, when the learned pairs are off or its words are no longer where it says."""
        if self.learned is None or not message.strip():
            return None
        searcher = self._searcher()
        snap = searcher.snapshot
        where = holder(snap, passage.path, passage.start, passage.end)
        if where is None:
            return None
        c = snap.chunks[where]
        if c.content[passage.start - c.start : passage.end - c.start] != passage.quote:
            return None
        vector = searcher.message_vector(message)
        return self.learned.confirm(
            message, vector, folders, passage.path, passage.start, passage.end, passage.quote, user, via
        )

    def forget(self, pair_id: str) -> bool:
        """Remove a learned pair (a 👎 on an answer that came from it, or an operator's choice)."""
        return self.learned.forget(pair_id) if self.learned is not None else False

    def candidates(self, question: str, folders: Sequence[str] | None = None, k: int = 20) -> list[Citation]:
        """Every passage ``question`` could be confirmed with: each sentence of its top ``k``
        passages alone and with its neighbours (as an answer cites it), and the excerpts its
        pointers would quote (what ``footnote confirm`` resolves
        a citation's or a pointer's url or locator against)."""
        searcher = self._searcher()
        snap = searcher.snapshot
        result = searcher.search(question, k=k, folders=folders)
        idf = question_weights(question, snap.bm25.idf)
        out = point_at(result.hits, result.query_vector, idf, snap.sentence_rows_of, self.links, n=k)
        for hit in result.hits:
            sentences = number_sentences([hit], snap.sentence_rows_of)  # once per passage, for each sentence
            for s in sentences:
                out.append(cite_evidence(len(out) + 1, s, self.links))
                q = result.query_vector
                out.append(in_context(len(out) + 1, s, q, idf, snap.sentence_rows_of, self.links, sentences))
        return out

    def _rewritten(
        self, rewriter: Rewrite, turn: _Turn, decision: GateDecision, folders: Sequence[str] | None
    ) -> tuple[SearchResult, GateDecision]:
        """After the gate let the question through: its sources, widened by a rewrite of it."""
        result, timings = turn.result, turn.timings
        t = time.perf_counter()
        rewritten = rewriter(result.query, turn.context)
        timings["rewrite"] = (time.perf_counter() - t) * 1000
        if not rewritten:
            return result, decision
        t = time.perf_counter()
        wider = widen(turn.searcher, result, rewritten, 20, turn.context, folders)
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
        return list(searcher.embedder.embed_queries(claims)), sentences

    def _compose(
        self,
        checked: Checked,
        question_idf: dict[str, float],
        qvec: np.ndarray | None,
        sentences: list[SourceSentence],
        first: Claim,
        vectors_of: VectorsOf | None,
    ) -> tuple[str, list[Citation], bool]:
        """The reply text with citation numbers in order of first use, and those citations
        (each evidence sentence quoted with its neighbours)."""
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
                n = numbers[c.evidence.n]
                cited.append(in_context(n, c.evidence, qvec, question_idf, vectors_of, self.links))
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
