"""The Slack app (Bolt for Python). Thin: parse the event, call the answer service,
render, post. Slack's contract is kept here: ack at once, show work within a second,
never drop a question, never answer a retried delivery twice.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slack_bolt import App, BoltResponse
from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from bot.health import Health
from bot.metrics import Metrics
from bot.render import escape, fallback_text, slack_blocks, status_blocks, status_text
from bot.scoping import ChannelScopes
from retrieval.answer import Answer, AnswerService
from retrieval.citations import neutralise

log = logging.getLogger("footnote.slack")

WORKING = ":hourglass_flowing_sand: Looking through the docs…"
NOT_HERE = "Footnote is not enabled in this channel. Ask in another channel or in a direct message."
_MENTION = re.compile(r"<@[A-Z0-9]+>")


@dataclass(frozen=True)
class Question:
    channel: str
    thread_ts: str
    text: str
    user: str
    context: tuple[str, ...] = ()
    is_dm: bool = False
    folders: tuple[str, ...] | None = None


class _Seen:
    """A bounded set of delivery ids (event_id, or command trigger) already handled."""

    def __init__(self, size: int = 5000) -> None:
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def first_time(self, key: str) -> bool:
        with self._lock:
            if key in self._ids:
                return False
            self._ids[key] = None
            if len(self._ids) > self._size:
                self._ids.popitem(last=False)
            return True


class _Stream:
    """Shows the answer growing in the placeholder while the model writes it.

    Updates are throttled (Slack rate-limits chat.update), and the partial text is
    neutralised and escaped like the final one: nothing a model writes becomes a
    ping or a link, even for a second.
    """

    def __init__(self, bot: SlackBot, q: Question, ts: str) -> None:
        self.bot, self.q, self.ts = bot, q, ts
        self.parts: list[str] = []
        self.last = time.monotonic()

    def on_token(self, piece: str) -> None:
        self.parts.append(piece)
        now = time.monotonic()
        if now - self.last < self.bot.stream_interval_s:
            return
        self.last = now
        partial = escape(neutralise("".join(self.parts))).strip()
        if partial:
            try:
                self.bot.client.chat_update(channel=self.q.channel, ts=self.ts, text=f"{partial} …")
            except Exception:  # a failed partial update is cosmetic; the final one is what counts
                log.warning("partial update failed", exc_info=True)


class SlackBot:
    """Owns the Bolt app, the answer queue and the threads the bot has answered."""

    def __init__(
        self,
        answers: AnswerService,
        bot_token: str,
        signing_secret: str,
        data_dir: Path,
        api_url: str | None = None,
        status: Callable[[], Health] | None = None,
        metrics: Metrics | None = None,
        first_delivery: Callable[[str], bool] | None = None,
        scopes: ChannelScopes | None = None,
        stream_interval_s: float = 1.5,
    ) -> None:
        self.stream_interval_s = stream_interval_s
        self.scopes = scopes or ChannelScopes({})
        self.answers = answers
        self.status = status
        self.metrics = metrics
        self.data_dir = data_dir
        client = WebClient(token=bot_token, base_url=api_url or WebClient.BASE_URL)
        client.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=3))
        self.app = App(signing_secret=signing_secret, client=client)
        self.client = client
        # One model context answers one question at a time; the rest wait their turn.
        self._queue = ThreadPoolExecutor(max_workers=1, thread_name_prefix="footnote-answer")
        self._pending = 0
        self._pending_lock = threading.Lock()
        # Replicas behind one endpoint pass a claim shared through the store, so a retry
        # that lands on another replica is still recognised.
        local = _Seen().first_time
        shared = first_delivery
        self._first_delivery: Callable[[str], bool] = lambda key: local(key) and (shared is None or shared(key))
        self._threads: dict[tuple[str, str], list[str]] = {}
        self._threads_lock = threading.Lock()
        self._feedback_lock = threading.Lock()
        self._answered: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._register()

    # -- wiring -------------------------------------------------------------------

    def _register(self) -> None:
        app = self.app
        app.middleware(self._drop_retries)
        app.event("app_mention")(self._on_mention)
        app.event("message")(self._on_message)
        app.command("/ask")(self._on_command)
        app.event("app_home_opened")(self._on_home)
        app.action("feedback_up")(self._on_feedback)
        app.action("feedback_down")(self._on_feedback)

    def _drop_retries(self, req: Any, resp: BoltResponse, next: Callable[[], BoltResponse]) -> BoltResponse:  # noqa: A002
        """A retried delivery (HTTP retry header, or an event id seen before) is acked and ignored."""
        retry = req.headers.get("x-slack-retry-num")
        event_id = (req.body or {}).get("event_id")
        if event_id and not self._first_delivery(str(event_id)):
            return BoltResponse(status=200, body="")
        if retry and not event_id:
            return BoltResponse(status=200, body="")
        return next()

    # -- surfaces -----------------------------------------------------------------

    def _on_mention(self, event: dict[str, Any], ack: Callable[[], None]) -> None:
        ack()
        thread = event.get("thread_ts") or event["ts"]
        self._enqueue(
            Question(event["channel"], thread, _MENTION.sub("", event.get("text", "")).strip(), event.get("user", ""))
        )

    def _on_message(self, event: dict[str, Any], ack: Callable[[], None]) -> None:
        ack()
        if event.get("bot_id") or event.get("subtype"):
            return  # our own messages, other bots, edits and joins
        text = event.get("text", "")
        channel = event["channel"]
        is_dm = event.get("channel_type") == "im"
        thread = event.get("thread_ts")
        # In a channel, only a follow-up in a thread we answered; an @mention is app_mention's.
        if not is_dm and (not thread or _MENTION.search(text) or not self._known_thread(channel, thread)):
            return
        self._enqueue(
            Question(channel, thread or event["ts"], _MENTION.sub("", text).strip(), event.get("user", ""), is_dm=is_dm)
        )

    def _on_command(self, ack: Callable[..., None], command: dict[str, Any]) -> None:
        text = (command.get("text") or "").strip()
        if not text:
            ack("Ask a question after the command, e.g. `/ask How do I claim travel expenses?`")
            return
        if text.lower() == "status" and self.status is not None:
            # Only the asker sees it (a slash command's direct response is ephemeral).
            health = self.status()
            ack(text=status_text(health), blocks=status_blocks(health))
            return
        is_dm = command.get("channel_name") == "directmessage"
        if self.scopes.for_channel(command["channel_id"], is_dm).excluded:
            ack(NOT_HERE)
            return
        ack()
        user = command.get("user_id", "")
        posted = self.client.chat_postMessage(channel=command["channel_id"], text=f"<@{user}> asked: {escape(text)}")
        self._enqueue(Question(command["channel_id"], str(posted["ts"]), text, user, is_dm=is_dm))

    def _on_home(self, event: dict[str, Any], ack: Callable[[], None]) -> None:
        ack()
        if event.get("tab", "home") != "home" or self.status is None:
            return
        blocks = status_blocks(self.status())
        self.client.views_publish(user_id=event["user"], view={"type": "home", "blocks": blocks})

    def _on_feedback(self, ack: Callable[..., None], body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        fid = str(action.get("value") or "")
        with self._feedback_lock:
            answered = self._answered.get(fid, {})
        record = {
            "at": time.time(),
            "vote": "up" if action.get("action_id") == "feedback_up" else "down",
            "user": body.get("user", {}).get("id"),
            "id": fid,
            **answered,
        }
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with self._feedback_lock, (self.data_dir / "feedback.jsonl").open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        channel = body.get("channel", {}).get("id")
        if channel and record["user"]:
            self.client.chat_postEphemeral(
                channel=channel, user=record["user"], text="Thanks: your feedback was recorded."
            )

    # -- answering ----------------------------------------------------------------

    def _known_thread(self, channel: str, thread: str) -> bool:
        with self._threads_lock:
            return (channel, thread) in self._threads

    def _enqueue(self, q: Question) -> None:
        """Show work at once (or the queue position), then answer in turn."""
        scope = self.scopes.for_channel(q.channel, q.is_dm)
        if scope.excluded:
            self.client.chat_postMessage(channel=q.channel, thread_ts=q.thread_ts, text=NOT_HERE)
            return
        if not q.text:
            self.client.chat_postMessage(
                channel=q.channel, thread_ts=q.thread_ts, text="Ask me a question about the docs."
            )
            return
        with self._threads_lock:
            earlier = tuple(self._threads.setdefault((q.channel, q.thread_ts), []))
            self._threads[(q.channel, q.thread_ts)].append(q.text)
        with self._pending_lock:
            ahead = self._pending
            self._pending += 1
        note = WORKING if ahead == 0 else f"{WORKING} (queued behind {ahead} question{'s' if ahead > 1 else ''})"
        placeholder = self.client.chat_postMessage(channel=q.channel, thread_ts=q.thread_ts, text=note)
        job = Question(q.channel, q.thread_ts, q.text, q.user, earlier, q.is_dm, scope.folders)
        self._queue.submit(self._answer, job, str(placeholder["ts"]))

    def _answer(self, q: Question, placeholder_ts: str) -> None:
        t0 = time.perf_counter()
        result: Answer | None = None
        try:
            stream = _Stream(self, q, placeholder_ts)
            result = self.answers.answer(q.text, context=q.context, folders=q.folders, on_token=stream.on_token)
            self._show(q, placeholder_ts, result, self._remember(q, result))
        except Exception as exc:  # never silent: the cause is logged, the person sees an error
            log.exception("answering %r failed", q.text)
            self._safe_update(q, placeholder_ts, f":warning: Something went wrong: {escape(str(exc))[:500]}", None)
        finally:
            if self.metrics is not None:
                self.metrics.answered("slack", result, time.perf_counter() - t0)
            with self._pending_lock:
                self._pending -= 1

    def _remember(self, q: Question, result: Answer) -> str:
        """Keep what a feedback click must store; the button carries only this id."""
        fid = f"{q.channel}:{q.thread_ts}:{time.time_ns()}"
        with self._feedback_lock:
            self._answered[fid] = {
                "question": q.text,
                "answer": result.text,
                "sources": [{"n": c.n, "path": c.path, "url": c.url} for c in result.citations or result.consulted],
                "asked_by": q.user,
            }
            while len(self._answered) > 5000:
                self._answered.popitem(last=False)
        return fid

    def _show(self, q: Question, ts: str, result: Answer, feedback: str) -> None:
        blocks = slack_blocks(result, collection=result.collection, feedback_id=feedback)
        self._safe_update(q, ts, fallback_text(result), blocks)

    def _safe_update(self, q: Question, ts: str, text: str, blocks: list[dict[str, Any]] | None) -> None:
        """Update the placeholder in place; if that fails, post a new reply instead."""
        try:
            self.client.chat_update(channel=q.channel, ts=ts, text=text, blocks=blocks or [])
        except Exception:
            log.exception("chat.update failed; posting a new reply")
            self.client.chat_postMessage(channel=q.channel, thread_ts=q.thread_ts, text=text, blocks=blocks or [])

    def drain(self, timeout: float = 60.0) -> bool:
        """Wait until every queued question is answered (tests, graceful shutdown)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self._pending_lock:
                if self._pending == 0:
                    return True
            time.sleep(0.02)
        return False
