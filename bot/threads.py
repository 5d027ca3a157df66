"""Threads as Slack keeps them: whether a thread is ours, and what was asked before.

Nothing here is remembered by the process: a follow-up is recognised (and given its
earlier questions as context) after a restart and on any replica, because both are
read from ``conversations.replies``. Reads are bounded: the last ``max_messages`` of
a thread, and a character budget for the retrieval query in which the new question
always comes first and is never cut (earlier questions are dropped, oldest first).
"""

from __future__ import annotations

import html
import logging
import re
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from slack_sdk import WebClient

log = logging.getLogger("footnote.slack")

MENTION = re.compile(r"<@[A-Z0-9]+(?:\|[^<>]*)?>")
# Slack's markup in a message's text: <@U1>, <#C1|name>, <!here>, <!subteam^S1|@team>,
# <https://…|label>. A literal "<" or ">" the person typed arrives as an entity instead.
MARKUP = re.compile(r"<([^<>]*)>")
ENTITIES = (("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&"))  # the only three Slack encodes; "&amp;" last
# An emoji as Slack writes it into a message's text (":sweat_smile:", ":+1::skin-tone-2:"):
# no document holds it as a word, and the core leaves out emoji it gets as pictographs
# (Searcher.message_vector) for the same reason. "10:30:45" is no emoji.
SHORTCODE = re.compile(r"(?<!\w):[a-z0-9_+'-]+:(?::skin-tone-[2-6]:)?(?!\w)")


def spoken(text: str) -> str:
    """A Slack message's question as its writer typed it: without mentions and emoji
    shortcodes, links and channels read as their labels, and "&", "<" and ">" as themselves."""
    text = MARKUP.sub(_plain, SHORTCODE.sub("", text))
    for entity, char in ENTITIES:
        text = text.replace(entity, char)
    return text.strip()


def _plain(markup: re.Match[str]) -> str:
    """What a person sees of one piece of markup (a mention of someone is no part of a question)."""
    target, _, label = markup.group(1).partition("|")
    if target.startswith("@"):
        return ""
    if target.startswith("#"):
        return f"#{label}" if label else ""
    if target.startswith("!"):  # <!here>, <!channel>: nothing; a user group or a date: its label
        return label
    return label or target.removeprefix("mailto:")


# A person's message: plain, with a file attached, or a thread reply also sent to the channel.
# Every other subtype (an edit, a deletion, a join, a bot's post) is no question.
ASKED_SUBTYPES = frozenset({None, "file_share", "thread_broadcast"})
# What says something in a thread: a person's message or a bot's; the rest are channel events.
SAID = ASKED_SUBTYPES | {"bot_message"}
BOT_CHARS = 300  # the most of another bot's post a question's context takes
_ASKED = re.compile(r"^<@[A-Z0-9]+> asked: (.*)$", re.DOTALL)  # the post a slash command makes
_PAGE = 200  # Slack's page size for conversations.replies
_MAX_PAGES = 10  # a thread longer than this is read from its start only


@dataclass(frozen=True)
class Identity:
    user_id: str
    bot_id: str
    team_id: str


class BotIdentity:
    """Who the bot is, from ``auth.test`` (asked once, when first needed)."""

    def __init__(self, client: WebClient) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._me: Identity | None = None

    def get(self) -> Identity:
        with self._lock:
            if self._me is None:
                r = self._client.auth_test()
                self._me = Identity(
                    str(r.get("user_id") or ""), str(r.get("bot_id") or ""), str(r.get("team_id") or "")
                )
            return self._me

    def wrote(self, message: dict[str, Any]) -> bool:
        me = self.get()
        return bool(
            (me.bot_id and message.get("bot_id") == me.bot_id) or (me.user_id and message.get("user") == me.user_id)
        )


class SlackThreads:
    def __init__(self, client: WebClient, me: BotIdentity, max_messages: int = 20, budget_chars: int = 800) -> None:
        self._client = client
        self._me = me
        self.max_messages = max_messages
        self.budget_chars = budget_chars

    def is_ours(self, channel: str, thread_ts: str) -> bool:
        """Whether the bot replied in this thread (so a follow-up without a mention is for it)."""
        return any(self._me.wrote(m) for m in self._messages(channel, thread_ts, None))

    def context(self, channel: str, thread_ts: str, before_ts: str, question: str) -> tuple[str, ...]:
        """Earlier questions in the thread (before ``before_ts``), oldest first, that fit
        the budget beside ``question``."""
        if before_ts == thread_ts:
            return ()  # the question opened the thread
        asked = [q for m in self._read(channel, thread_ts, before_ts) if (q := self._question_in(m))]
        return fit(question, asked, self.budget_chars)

    def message(self, channel: str, thread_ts: str, ts: str) -> dict[str, Any] | None:
        """One message of the thread as Slack has it now (None if it is gone)."""
        return next((m for m in self._messages(channel, thread_ts, None) if m.get("ts") == ts), None)

    def _question_in(self, m: dict[str, Any]) -> str:
        """What a message of the thread adds to a question's context: a person's words, or
        what another bot posted (the alert a question under it asks about); never our answers."""
        text = str(m.get("text") or "")
        if self._me.wrote(m):
            got = _ASKED.match(text)
            return html.unescape(got.group(1)).strip() if got else ""  # our answers are not questions
        if m.get("subtype") not in SAID:
            return ""  # a join, an edit's trace, a topic change
        if not m.get("bot_id"):
            return spoken(text)
        if not text.strip():  # a bot that posts its words as attachments only
            text = " ".join(str(a.get("fallback") or a.get("text") or "") for a in m.get("attachments") or [])
        # Its start says what it is about; a whole log would take the budget from the questions before it.
        said = spoken(text)
        return said if len(said) <= BOT_CHARS else said[:BOT_CHARS].rsplit(" ", 1)[0] + " …"

    def _read(self, channel: str, thread_ts: str, before_ts: str | None) -> list[dict[str, Any]]:
        """The last ``max_messages`` of the thread (before ``before_ts``), oldest first."""
        return list(deque(self._messages(channel, thread_ts, before_ts), maxlen=self.max_messages))

    def _messages(self, channel: str, thread_ts: str, before_ts: str | None) -> Iterator[dict[str, Any]]:
        """The thread's messages (before ``before_ts``), oldest first, page by page (bounded)."""
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            r = self._client.conversations_replies(
                channel=channel, ts=thread_ts, limit=_PAGE, cursor=cursor, latest=before_ts, inclusive=False
            )
            for m in r.get("messages") or []:
                if before_ts is None or _before(m.get("ts"), before_ts):
                    yield m
            cursor = (r.get("response_metadata") or {}).get("next_cursor") or None
            if not r.get("has_more") or not cursor:
                return


def fit(question: str, earlier: list[str], budget: int) -> tuple[str, ...]:
    """The most recent earlier questions whose total, with the new question, stays within
    ``budget`` characters; the question itself is never cut, and goes last in the query
    (the search joins context, then question), so nothing before it pushes it out of the
    embedder's window."""
    room = budget - len(question) - 1
    kept: list[str] = []
    for q in reversed(earlier):
        if q == question:
            continue
        if len(q) + 1 > room:
            break  # older questions matter less than the ones just before
        kept.append(q)
        room -= len(q) + 1
    return tuple(reversed(kept))


def _before(ts: object, limit: str) -> bool:
    try:
        return Decimal(str(ts)) < Decimal(limit)
    except InvalidOperation:
        return True
