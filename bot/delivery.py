"""Delivering an answer in Slack: the placeholder, the answer growing while the model
writes it, the final message, and the error or apology when there is no answer.

The final message always carries blocks (answer, refusal or error); the placeholder and
the streaming updates carry text only, so a reader (or a test) can tell them apart.
Streaming uses Slack's own ``chat.startStream``/``appendStream``/``stopStream`` (through
slack_sdk's ``ChatStream``) when the workspace offers it, and falls back to throttled
``chat.update`` of the placeholder when the method or scope is missing. In assistant
threads ``assistant.threads.setStatus`` shows that Footnote is working.

Everything a model writes is neutralised and escaped before Slack sees it, even for a
second: no partial text becomes a ping or a link.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.web.chat_stream import ChatStream

from bot.i18n import N_, say, say_n
from bot.question import Job, Question
from bot.render import escape, fallback_text, slack_blocks
from bot.threads import BotIdentity
from retrieval.answer import Answer, neutralise

log = logging.getLogger("footnote.slack")

WORKING = N_(":hourglass_flowing_sand: Looking through the docs…")
QUEUED = N_(":hourglass_flowing_sand: Looking through the docs… (queued behind {n} question)")
QUEUED_MANY = N_(":hourglass_flowing_sand: Looking through the docs… (queued behind {n} questions)")
STATUS = N_("is looking through the docs…")
RESTARTING = N_(":hourglass_flowing_sand: Footnote is restarting; this question is answered as soon as it is back.")
TOO_OLD = N_(
    ":warning: Sorry: Footnote was restarted before it could answer this, and the question is now too old to "
    "answer here. Please ask again (mention @Footnote, or `/ask` your question)."
)
WENT_WRONG = N_(":warning: Something went wrong: {why}")
NOT_STARTED = N_(
    ":warning: Footnote could not start, so it cannot answer yet: {why}. Your question is kept: it is answered "
    "here once Footnote runs again."
)
# Errors that mean the workspace, token or app does not offer a method: stop trying it.
UNAVAILABLE = frozenset(
    {
        "unknown_method",
        "not_allowed",
        "not_allowed_token_type",
        "missing_scope",
        "method_deprecated",
        "feature_not_enabled",
        "access_denied",
        "no_permission",
    }
)


def queue_note(ahead: int, lang: str | None = None) -> str:
    return say(lang, WORKING) if ahead == 0 else say_n(lang, QUEUED, QUEUED_MANY, ahead)


def error_text(exc: BaseException, lang: str | None = None) -> str:
    return say(lang, WENT_WRONG, why=escape(str(exc))[:500])


def text_blocks(text: str) -> list[dict[str, Any]]:
    """A final message that is only text (an error, an apology) still carries a block."""
    return [{"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}}]


def slack_error(exc: SlackApiError) -> str:
    """Slack's error code for a failed call ("not_in_channel"), or "" without one."""
    return str(exc.response.get("error") or "") if exc.response is not None else ""


class Delivery:
    def __init__(
        self, client: WebClient, me: BotIdentity, stream_interval_s: float = 1.5, native_stream: bool = True
    ) -> None:
        self.client = client
        self.me = me
        self.stream_interval_s = stream_interval_s
        # Learned once per process: a workspace without the streaming or assistant
        # methods answers every call with the same error.
        self.native_stream = native_stream
        self.assistant_status = True
        self._lock = threading.Lock()

    def no_native_stream(self, why: str) -> None:
        """This workspace or token has no chat streaming: update messages from now on."""
        with self._lock:
            if self.native_stream:
                log.info("Slack streaming is not available (%s); updating messages instead", why)
            self.native_stream = False

    # -- before the answer ----------------------------------------------------------

    def notice(self, channel: str, thread_ts: str, text: str) -> None:
        self.client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=text)

    def react(self, channel: str, ts: str, name: str) -> None:
        """A reaction on a message (a thank-you's 👍); a failed one is only logged."""
        try:
            self.client.reactions_add(channel=channel, timestamp=ts, name=name)
        except Exception:
            log.warning("could not react to %s in %s", ts, channel, exc_info=True)

    def placeholder(self, q: Question, text: str) -> str:
        """Post the message the answer will replace; its ts."""
        posted = self.client.chat_postMessage(channel=q.channel, thread_ts=q.thread_ts, text=text)
        return str(posted["ts"])

    def working(self, job: Job, on: bool = True) -> None:
        """The assistant thread's own "is working" status (assistant threads are DM threads)."""
        q = job.question
        if not (self.assistant_status and q.is_dm and q.thread_ts != q.ts):
            return
        try:
            self.client.assistant_threads_setStatus(
                channel_id=q.channel, thread_ts=q.thread_ts, status=say(q.language, STATUS) if on else ""
            )
        except SlackApiError as exc:
            if slack_error(exc) in UNAVAILABLE:
                self.assistant_status = False
            log.info("assistant status unavailable (%s)", slack_error(exc))
        except Exception:
            log.warning("assistant status failed", exc_info=True)

    def stream(self, job: Job, moved: Callable[[str], None]) -> Stream:
        return Stream(self, job, moved)

    # -- the answer ---------------------------------------------------------------------

    def final(self, job: Job, result: Answer, feedback_id: str) -> bool:
        blocks = slack_blocks(result, collection=result.collection, feedback_id=feedback_id)
        return self._replace(job, fallback_text(result), blocks)

    def error(self, job: Job, exc: BaseException) -> bool:
        text = error_text(exc, job.question.language)
        return self._replace(job, text, text_blocks(text))

    def apology(self, job: Job) -> bool:
        text = say(job.question.language, TOO_OLD)
        return self._replace(job, text, text_blocks(text))

    def not_started(self, job: Job, why: str) -> bool:
        """The warm-up failed: the question waits in the journal, and its placeholder says why.
        Text alone, as a placeholder is: a message with blocks is a final one, which the next
        start would take as the answer already given."""
        return self._replace(job, say(job.question.language, NOT_STARTED, why=why), None)

    def _replace(self, job: Job, text: str, blocks: list[dict[str, Any]] | None) -> bool:
        """Update the placeholder in place; if there is none or that fails, post a new reply.
        True when the person can see it."""
        q = job.question
        shown: dict[str, Any] = {"text": text} if blocks is None else {"text": text, "blocks": blocks}
        if job.placeholder_ts is not None:
            try:
                self.client.chat_update(channel=q.channel, ts=job.placeholder_ts, **shown)
                return True
            except Exception:
                log.exception("chat.update failed; posting a new reply")
        try:
            self.client.chat_postMessage(channel=q.channel, thread_ts=q.thread_ts, **shown)
            return True
        except Exception:
            log.exception("posting the reply failed")
            return False


class Stream:
    """The answer growing while the model writes it (``on_token``), throttled."""

    def __init__(self, delivery: Delivery, job: Job, moved: Callable[[str], None]) -> None:
        self.d, self.job, self.moved = delivery, job, moved
        self.parts: list[str] = []
        self.last = time.monotonic()
        self.native: ChatStream | None = None
        self.sent = ""  # what the native stream shows so far (it can only grow)
        self.use_native = delivery.native_stream
        self.broken = False

    def on_token(self, piece: str) -> None:
        self.parts.append(piece)
        now = time.monotonic()
        if now - self.last < self.d.stream_interval_s:
            return
        self.last = now
        shown = escape(neutralise("".join(self.parts))).strip()
        if not shown or self.broken:
            return
        if self.use_native and self._append(shown):
            return
        self._update(shown)

    def finish(self) -> None:
        """Close a native stream; the final message then replaces its content."""
        native, self.native = self.native, None
        if native is not None:
            try:
                native.stop()
            except Exception:  # the final chat.update still replaces the text
                log.warning("chat.stopStream failed", exc_info=True)

    def _update(self, shown: str) -> None:
        ts = self.job.placeholder_ts
        if ts is None:
            return
        try:
            self.d.client.chat_update(channel=self.job.question.channel, ts=ts, text=f"{shown} …")
        except Exception:  # a failed partial update is cosmetic; the final one is what counts
            log.warning("partial update failed", exc_info=True)

    def _append(self, shown: str) -> bool:
        """Append the new whole words to the native stream; False to fall back to updates."""
        # Only whole words: the last one may still grow into a link that is then removed.
        cut = max(shown.rfind(" "), shown.rfind("\n"))
        stable = shown[:cut].rstrip() if cut > 0 else ""
        if not stable.startswith(self.sent):
            return True  # an earlier part was neutralised away; the final message shows it right
        delta = stable[len(self.sent) :]
        if not delta:
            return True
        try:
            if self.native is None:
                self._start(delta)
            else:
                self.native.append(markdown_text=delta)
        except SlackApiError as exc:
            return self._give_up(exc)
        except Exception:
            log.warning("streaming failed; updating the placeholder instead", exc_info=True)
            self.use_native = False
            return self.native is not None
        self.sent = stable
        return True

    def _start(self, text: str) -> None:
        q = self.job.question
        me = self.d.me.get()
        stream = self.d.client.chat_stream(
            channel=q.channel,
            thread_ts=q.thread_ts,
            recipient_team_id=me.team_id or None,
            recipient_user_id=q.user or None,
            buffer_size=1,
        )
        stream.append(markdown_text=text)  # chat.startStream: a new message in the thread
        self.native = stream
        old = self.job.placeholder_ts
        self.moved(str(stream.ts))  # the answer now belongs in the streamed message
        if old is not None:
            try:
                self.d.client.chat_delete(channel=q.channel, ts=old)
            except Exception:
                log.warning("could not delete the placeholder", exc_info=True)

    def _give_up(self, exc: SlackApiError) -> bool:
        code = slack_error(exc)
        if code in UNAVAILABLE:
            self.d.no_native_stream(code)
        else:
            log.warning("streaming failed (%s); updating the placeholder instead", code)
        self.use_native = False
        if self.native is not None:
            self.broken = True  # the stream message is the answer's home now; the final update fixes it
            return True
        return False
