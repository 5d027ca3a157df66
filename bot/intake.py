"""Question intake: from a parsed question to its answer, in turn, without losing it.

A question is checked against its channel's scope, journaled, given a placeholder
(with its place in the queue), and answered by the one worker (one model context
answers one question at a time). Whatever the answer service raises becomes a visible
error in the placeholder and the next question is answered. While the server warms up
(see :mod:`bot.warmup`) the placeholder says what it is doing, and the worker waits for it
to be ready before it answers. Every outcome, an error
included, goes to the gaps record (when there is one) before the answer is shown, so a
click on its buttons finds it. The pending counter goes back down on every path, a
failed placeholder post included (the answer is then a new reply). On shutdown the
worker stops taking jobs; what it did not finish stays in the journal, and
:meth:`Intake.recover` answers it at the next start.
"""

from __future__ import annotations

import logging
import queue
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from enum import Enum
from typing import Protocol

from bot.delivery import RESTARTING, Delivery, queue_note
from bot.feedback import FeedbackStore
from bot.gaps import GapRecord
from bot.i18n import N_, say
from bot.journal import HEARTBEAT_S, Journal
from bot.metrics import Metrics
from bot.question import Job, Question
from bot.scoping import ChannelScopes
from bot.threads import SlackThreads
from bot.warmup import Phase, Warmup
from retrieval.answer import Answer, Outcome, Quoted
from retrieval.learn import Pair
from retrieval.models import OnToken

log = logging.getLogger("footnote.slack")


class Submitted(Enum):
    """What became of a message handed to the intake."""

    QUEUED = "queued"  # journaled: it is answered in turn
    TOLD = "told"  # nothing to answer (excluded here, no words, a thank-you): said so in its place
    ASKED_BEFORE = "asked before"  # the journal knows it: answered, or owed (a retry, a second click)


NOT_HERE = N_("Footnote is not enabled in this channel. Ask in another channel or in a direct message.")
EMPTY = N_("Ask me a question about the docs.")
_WORDS = re.compile(r"[^\W_]")  # a letter or digit: emoji or punctuation alone is no question
# A thank-you or an "ok" under an answer, in English or Danish: every word of the message is one
# of these (and it asks nothing), so it gets a 👍 reaction instead of "I couldn't find this".
# fmt: off
_ACK_WORDS = frozenset({
    "ok", "okay", "thanks", "thank", "thx", "ty", "tyvm", "cheers", "great", "perfect", "cool",
    "nice", "awesome", "got", "noted", "good", "understood", "super", "tak", "fint", "perfekt",
    "fedt", "forstået", "godt",
})
_THANKS_WORDS = _ACK_WORDS | {  # the words that may stand beside them
    "k", "kk", "alright", "you", "so", "much", "very", "a", "lot", "lots", "excellent",
    "brilliant", "lovely", "helpful", "it", "that", "that's", "thats", "is", "was", "makes",
    "sense", "sounds", "to", "know", "helps", "appreciated", "works", "all", "clear", "mange",
    "tusind", "skal", "du", "have", "det", "var", "den", "er", "klar", "modtaget", "hjælpen",
}
# fmt: on
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")
THANKS_REACTION = "+1"


class Answers(Protocol):
    """What the Slack layer calls: the answer service (or one built on first use)."""

    def answer(
        self,
        question: str,
        context: Sequence[str] = (),
        on_token: OnToken | None = None,
        folders: Sequence[str] | None = None,
    ) -> Answer: ...

    def confirm(self, message: str, passage: Quoted, folders: Sequence[str] | None, user: str, via: str) -> Pair | None:
        """Keep that ``passage`` answers ``message`` in the scope of ``folders`` (None: not kept)."""
        ...

    def forget(self, pair_id: str) -> bool: ...


def thanks(text: str) -> bool:
    """Whether ``text`` only thanks or acknowledges ("thanks!", "ok, thank you", "mange tak 👍")."""
    if "?" in text:
        return False
    words = [w.lower() for w in _WORD.findall(text)]
    return 0 < len(words) <= 8 and set(words) <= _THANKS_WORDS and not _ACK_WORDS.isdisjoint(words)


class Intake:
    def __init__(
        self,
        answers: Answers,
        delivery: Delivery,
        journal: Journal,
        threads: SlackThreads,
        feedback: FeedbackStore,
        scopes: ChannelScopes,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
        gaps: GapRecord | None = None,
        warmup: Warmup | None = None,
        language_of: Callable[[str], str | None] = lambda _text: None,
    ) -> None:
        self.answers = answers
        self.delivery = delivery
        self.journal = journal
        self.threads = threads
        self.feedback = feedback
        self.scopes = scopes
        self.metrics = metrics
        self.clock = clock
        self.gaps = gaps  # None: FOOTNOTE_GAPS=off, nothing is recorded
        self.warmup = warmup  # None: answering from the start
        self.language_of = language_of  # the asker's language, for what Footnote says before the answer
        self._jobs: queue.Queue[Job | None] = queue.Queue()
        # recover() answers what earlier processes left: questions journaled since this one began
        # (the server listens before it recovers) are queued by submit() already.
        self._started = clock()
        self._pending = 0
        self._changed = threading.Condition()
        self._closing = threading.Event()
        self._watch: threading.Thread | None = None  # heartbeats and adoption, once recover() ran
        # A daemon thread, so a model that never returns cannot hold the process at exit.
        self._worker = threading.Thread(target=self._work, name="footnote-answer", daemon=True)
        self._worker.start()

    @property
    def pending(self) -> int:
        with self._changed:
            return self._pending

    # -- in --------------------------------------------------------------------------

    def submit(self, q: Question) -> Submitted:
        """Show work at once (or the queue position), then answer in turn; what became of it."""
        scope = self.scopes.for_channel(q.channel, q.is_dm)
        q = replace(q, language=self._language(q.text))
        if scope.excluded:
            self.delivery.notice(q.channel, q.thread_ts, say(q.language, NOT_HERE))
            return Submitted.TOLD
        if not _WORDS.search(q.text):  # nothing asked (or emoji only): nothing journaled
            self.delivery.notice(q.channel, q.thread_ts, say(q.language, EMPTY))
            return Submitted.TOLD
        if thanks(q.text):  # nothing asked: a reaction says it was seen, and it is no gap in the docs
            self.delivery.react(q.channel, q.ts, THANKS_REACTION)
            return Submitted.TOLD
        q = replace(q, folders=scope.folders)
        job = self._record(q)
        if job is None:  # answered, or owed by the journal's recovery: never twice
            log.info("%s in %s is journaled already (a retried delivery): not asked again", q.ts, q.channel)
            return Submitted.ASKED_BEFORE
        if self._closing.is_set():
            self._place(job, say(q.language, RESTARTING))  # journaled: the next start answers it
            return Submitted.QUEUED
        with self._changed:
            ahead = self._pending
            self._pending += 1
        try:
            self._place(job, self._note_for(ahead, q.language))
        finally:
            self._jobs.put(job)  # even without a placeholder: the answer becomes a new reply
        return Submitted.QUEUED

    def recover(self, max_age_s: float) -> tuple[int, int]:
        """Answer what a previous process left unanswered (or a replica that is gone: see
        :mod:`bot.journal`); apologise for what is too old. From then on, say every
        ``HEARTBEAT_S`` that this replica is alive, and adopt a gone replica's questions.
        Returns (queued, apologised)."""
        self._beat()
        queued, apologised = self._take(self.journal.owed(self.clock()), max_age_s)
        if queued or apologised:
            log.info("journal: %d unfinished question(s) queued again, %d too old (apologised)", queued, apologised)
        if self._watch is None:
            self._watch = threading.Thread(
                target=self._keep_watch, args=(max_age_s,), name="footnote-journal", daemon=True
            )
            self._watch.start()
        return queued, apologised

    def _take(self, owed: list[tuple[Job, bool]], max_age_s: float) -> tuple[int, int]:
        queued = apologised = 0
        now = self.clock()
        for job, adopted in owed:
            if not adopted and job.created_at >= self._started:
                continue  # this process took it: submit() queued it already
            job.question = replace(job.question, language=self._language(job.question.text))
            if self._already_answered(job):
                self._done(job)
            elif now - job.created_at > max_age_s:
                self.delivery.apology(job)
                self._done(job)
                apologised += 1
            else:
                with self._changed:
                    self._pending += 1
                self._jobs.put(job)
                queued += 1
        return queued, apologised

    def _keep_watch(self, max_age_s: float) -> None:
        while not self._closing.wait(HEARTBEAT_S):
            self._beat()
            try:
                queued, _ = self._take(self.journal.owed(self.clock(), others_only=True), max_age_s)
            except Exception:  # a busy or broken journal: the next beat tries again
                log.warning("could not read the journal for questions of a replica that is gone", exc_info=True)
                continue
            if queued:
                log.info("journal: adopted %d question(s) of a replica that is gone", queued)

    def _beat(self) -> None:
        try:
            self.journal.beat(self.clock())
        except Exception:  # an unwritable journal must not stop the answers
            log.warning("could not write this replica's heartbeat to the journal", exc_info=True)

    def _language(self, text: str) -> str | None:
        try:
            return self.language_of(text)
        except Exception:  # telling the language is a courtesy: never at the cost of the question
            log.warning("could not tell the question's language", exc_info=True)
            return None

    def _note_for(self, ahead: int, lang: str | None = None) -> str:
        """The placeholder: what the warm-up is doing, else the place in the queue."""
        if self.warmup is not None and not (state := self.warmup.state()).answering:
            return state.note(lang)
        return queue_note(ahead, lang)

    def _record(self, q: Question) -> Job | None:
        try:
            return self.journal.record(q, self.clock())
        except Exception:  # an unwritable journal must not cost the answer
            log.exception("could not journal a question; answering it anyway")
            return Job(0, q, None, self.clock())

    def _place(self, job: Job, text: str) -> None:
        try:
            ts = self.delivery.placeholder(job.question, text)
        except Exception:
            log.exception("posting the placeholder failed; the answer will be a new reply")
            return
        self._moved(job, ts)

    def _already_answered(self, job: Job) -> bool:
        """A final message (it carries blocks) is already in the placeholder: the process
        stopped between posting it and marking it done."""
        q = job.question
        if job.placeholder_ts is None:
            return False
        try:
            msg = self.threads.message(q.channel, q.thread_ts, job.placeholder_ts)
        except Exception:
            log.warning("could not read the placeholder back; answering again", exc_info=True)
            return False
        return bool(msg and msg.get("blocks"))

    # -- the worker -------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                if self._ready():  # when closing, it stays in the journal
                    self._answer(job)
                elif (why := self._failed_start()) is not None:
                    self.delivery.not_started(job, why)  # never "Starting up…" for good
            except Exception:
                log.exception("answering failed outside the answer service")
            finally:
                with self._changed:
                    self._pending -= 1
                    self._changed.notify_all()

    def _ready(self) -> bool:
        """Wait for the warm-up; False when closing or when it failed first (the question stays
        in the journal)."""
        while self.warmup is not None and not self.warmup.wait_answering(0.5):
            if self._closing.is_set() or self._failed_start() is not None:
                return False
        return not self._closing.is_set()

    def _failed_start(self) -> str | None:
        """Why the warm-up failed, if it did (the server then stops)."""
        if self.warmup is None or (state := self.warmup.state()).phase is not Phase.FAILED:
            return None
        return state.detail or "see the server's log"

    def _answer(self, job: Job) -> None:
        q = job.question
        t0 = time.perf_counter()
        result: Answer | None = None
        self.delivery.working(job)
        stream = self.delivery.stream(job, lambda ts: self._moved(job, ts))
        noted = False
        try:
            context = self._context(q)
            result = self.answers.answer(q.text, context=context, folders=q.folders, on_token=stream.on_token)
            stream.finish()
            feedback_id = self.feedback.remember(q, result)
            noted = self._note(q, result.outcome, result, feedback_id)
            shown = self.delivery.final(job, result, feedback_id)
        except Exception as exc:  # never silent: the cause is logged, the person sees it
            log.exception("answering %r failed", q.text)
            result = None
            stream.finish()
            if not noted:
                self._note(q, Outcome.ERROR)
            shown = self.delivery.error(job, exc)
        finally:
            self.delivery.working(job, on=False)
            if self.metrics is not None:
                self.metrics.answered("slack", result, time.perf_counter() - t0)
        if shown:
            self._done(job)

    def _note(
        self, q: Question, outcome: Outcome, result: Answer | None = None, feedback_id: str | None = None
    ) -> bool:
        """Keep the outcome in the gaps record; a failing record never costs the answer."""
        if self.gaps is None:
            return False
        try:
            self.gaps.record(q.text, outcome, q.folders, surface="slack", answer=result, feedback_id=feedback_id)
        except Exception:
            log.exception("could not record the question's outcome")
        return True

    def _context(self, q: Question) -> tuple[str, ...]:
        try:
            return self.threads.context(q.channel, q.thread_ts, q.ts, q.text)
        except Exception:  # a follow-up without context still gets an answer
            log.warning("could not read the thread for context", exc_info=True)
            return ()

    def _moved(self, job: Job, ts: str) -> None:
        """The answer's message changed (a native stream replaced the placeholder)."""
        job.placeholder_ts = ts
        if job.id:
            try:
                self.journal.placed(job, ts)
            except Exception:
                log.exception("could not journal the new message")

    def _done(self, job: Job) -> None:
        if not job.id:
            return
        try:
            self.journal.done(job)
        except Exception:
            log.exception("could not mark question %d done", job.id)

    # -- waiting and stopping -------------------------------------------------------------

    def drain(self, timeout: float = 60.0) -> bool:
        """Wait until every queued question is answered (tests, shutdown)."""
        end = time.monotonic() + timeout
        with self._changed:
            while self._pending:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
            return True

    def close(self, grace_s: float) -> bool:
        """Stop taking work; wait up to ``grace_s`` for the answer being written. What is
        left stays in the journal. True if nothing was left running."""
        self._closing.set()
        self._jobs.put(None)
        return self.drain(grace_s)
