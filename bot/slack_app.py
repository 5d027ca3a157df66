"""The Slack app (Bolt for Python): wiring and handlers. Thin: parse the event, hand the
question to the intake (which journals, queues, answers and delivers it), or a click to
the answer service (which keeps what a teammate confirmed). Slack's contract is kept
here: ack at once, never answer a retried delivery twice.

A click is trusted only as far as it checks out: it needs a user, a message Footnote
still knows (:mod:`bot.feedback`), a pointer that message showed, and the same channel
scope the message was asked in; anything else is logged and changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from slack_bolt import App, BoltResponse
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.claims import FirstDelivery
from bot.delivery import slack_error
from bot.feedback import FeedbackStore, Passage, Shown
from bot.gaps import DAY_S, GapRecord, find_gaps, gaps_blocks, scope_key, visible
from bot.health import Health
from bot.i18n import N_, say
from bot.intake import NOT_HERE, Answers, Intake, Submitted
from bot.journal import Journal
from bot.question import Question
from bot.render import escape, status_blocks, status_text
from bot.scheduler import Done, SyncNow
from bot.scoping import ChannelScopes, Folders
from bot.threads import ASKED_SUBTYPES, MENTION, SlackThreads, spoken
from retrieval.errors import StoreUnreachable

log = logging.getLogger("footnote.slack")

ASK_HOW = N_(
    "Ask a question after the command, e.g. `/ask How do I claim travel expenses?` "
    "(`/ask status`: the index's health; `/ask sync`: read new and changed documents now)"
)
SYNC_SAID = {
    SyncNow.STARTED: N_("Reading new and changed documents now. I'll tell you when they can be found."),
    SyncNow.RUNNING: N_("The documents are being read already. I'll tell you when it is done."),
    SyncNow.NOT_READY: N_("I'm still starting up, and I read the documents as soon as I'm ready."),
}
SYNCED = N_("Done: new and changed documents can be found now. `/ask status` lists any that failed.")
SYNC_FAILED = N_(":warning: The documents could not be read just now. `/ask status` says why.")
SYNC_WORDS = {
    "sync": None,
    "sync now": None,
    "synk": "da",
    "synkroniser": "da",
}  # -> their language (None: the home one)
ASKED = N_("<@{user}> asked: {question}")
NOT_A_MEMBER = N_(
    "I can't post in this conversation, so I can't answer here. Invite me with `/invite @Footnote`, "
    "or ask me in a direct message."
)
NOT_POSTED = N_(":warning: Slack did not let me post your question here ({code}). Please try again.")
# What Slack says when the bot may not post where a slash command was typed: a public channel
# it was never invited to, or a private channel or someone else's direct message.
NO_ENTRY = frozenset({"not_in_channel", "channel_not_found"})
THANKS = N_("Thanks: your feedback was recorded.")
THANKS_CONFIRMED = N_("Thanks: messages like this one will be answered from that passage here.")
THANKS_NONE = N_("Thanks: noted as a question the docs don't answer yet.")
NOT_KEPT = N_(":warning: I couldn't record that right now. Please try again in a minute.")
NO_STATUS = N_(
    ":warning: The document index can't be read right now, so there is no status to show. "
    "Questions are still answered from the copy I have in memory."
)
ASKED_BEFORE = N_("Footnote was asked this message before: its reply is in the message's thread.")
SHORTCUT = "ask_footnote"  # the message shortcut "Ask Footnote" (its callback_id in the app manifest)
HOME_GAP_DAYS = 30  # the App Home's "What the docs don't answer" covers the last 30 days
HOME_GAPS = 5
# The index's health, counting only the documents under the folders given (None: all).
StatusOf = Callable[[Sequence[str] | None], Health]
SyncOf = Callable[[str, Done], SyncNow]  # a sync now, asked for by a user (serve's schedule runs it)


class SlackBot:
    """The Bolt app's handlers, over the pieces that do the work (built by ``bot.builder``)."""

    def __init__(
        self,
        app: App,
        client: WebClient,
        intake: Intake,
        journal: Journal,
        threads: SlackThreads,
        feedback: FeedbackStore,
        scopes: ChannelScopes,
        first: FirstDelivery,
        status: StatusOf | None = None,
        gaps: GapRecord | None = None,
        home_language: str | None = None,
        sync_now: SyncOf | None = None,
    ) -> None:
        self.app = app
        self.client = client
        self.intake = intake
        self.answers: Answers = intake.answers  # the one answer service: it also keeps confirmations
        self.journal = journal
        self.threads = threads
        self.feedback = feedback
        self.scopes = scopes
        self.status = status
        self.gaps = gaps  # None: FOOTNOTE_GAPS=off
        self.home_language = home_language  # App Home and `/ask status` (a pinned language; else English)
        self.sync_now = sync_now  # None: `/ask sync` is a question like any other
        self._first = first
        self._register()

    def drain(self, timeout: float = 60.0) -> bool:
        return self.intake.drain(timeout)

    # -- wiring -------------------------------------------------------------------

    def handlers(self) -> dict[str, dict[str, Callable[..., None]]]:
        """Every Slack surface handled here, by kind: what the app manifest must subscribe to."""
        return {
            "event": {"app_mention": self._on_mention, "message": self._on_message, "app_home_opened": self._on_home},
            "command": {"/ask": self._on_command},
            "shortcut": {SHORTCUT: self._on_shortcut},
            "action": {
                "feedback_up": self._on_feedback,
                "feedback_down": self._on_feedback,
                "pointer_confirm": self._on_confirm,
                "pointer_none": self._on_none,
            },
        }

    def _register(self) -> None:
        app = self.app
        app.middleware(self._drop_retries)
        kinds = {"event": app.event, "command": app.command, "action": app.action, "shortcut": app.shortcut}
        for kind, named in self.handlers().items():
            for name, handler in named.items():
                kinds[kind](name)(handler)

    def _drop_retries(self, req: Any, resp: BoltResponse, next: Callable[[], BoltResponse]) -> BoltResponse:  # noqa: A002
        """A retried delivery (HTTP retry header, or an event id seen before) is acked and ignored."""
        retry = req.headers.get("x-slack-retry-num")
        event_id = (req.body or {}).get("event_id")
        if event_id and not self._first.first(str(event_id)):
            return BoltResponse(status=200, body="")
        if retry and not event_id:
            return BoltResponse(status=200, body="")
        return next()

    # -- surfaces -----------------------------------------------------------------

    def _on_mention(self, event: dict[str, Any], ack: Callable[[], None]) -> None:
        ack()
        thread = event.get("thread_ts") or event["ts"]
        text = spoken(event.get("text", ""))
        self.intake.submit(Question(event["channel"], thread, event["ts"], text, event.get("user", "")))

    def _on_message(self, event: dict[str, Any], ack: Callable[[], None]) -> None:
        ack()
        if event.get("bot_id") or event.get("subtype") not in ASKED_SUBTYPES:
            return  # our own messages, other bots, edits, deletions and joins
        text = event.get("text", "")
        channel = event["channel"]
        is_dm = event.get("channel_type") == "im"
        thread = event.get("thread_ts")
        # In a channel, only a follow-up in a thread the bot replied in (Slack says which);
        # an @mention is app_mention's.
        if not is_dm and (not thread or MENTION.search(text) or not self.threads.is_ours(channel, thread)):
            return
        question = spoken(text)
        self.intake.submit(
            Question(channel, thread or event["ts"], event["ts"], question, event.get("user", ""), is_dm)
        )

    def _on_command(self, ack: Callable[..., None], command: dict[str, Any], respond: Callable[..., Any]) -> None:
        text = spoken(command.get("text") or "")
        lang = self.intake.language_of(text) if text else self.home_language
        if not text:
            ack(say(lang, ASK_HOW))
            return
        is_dm = command.get("channel_name") == "directmessage"
        scope = self.scopes.for_channel(command["channel_id"], is_dm)
        if scope.excluded:
            ack(say(lang, NOT_HERE))
            return
        if text.lower() in ("status", "status?") and self.status is not None:
            # Only the asker sees it (a slash command's direct response is ephemeral), and only
            # the documents this channel may search: no names from past its scope.
            health = self._status(scope.folders)
            home = self.home_language
            if health is None:
                ack(say(home, NO_STATUS))
            else:
                ack(text=status_text(health, home), blocks=status_blocks(health, home))
            return
        word = text.lower().rstrip(".!")
        if word in SYNC_WORDS and self.sync_now is not None:
            # Only the asker sees it. A sync reads the whole drive whatever the channel's scope,
            # and the reply names no document.
            lang = SYNC_WORDS[word] or self.home_language
            started = self.sync_now(command.get("user_id", ""), lambda ok: self._synced(respond, lang, ok))
            ack(say(lang, SYNC_SAID[started]))
            return
        ack()
        user = command.get("user_id", "")
        asked = say(lang, ASKED, user=user, question=escape(text))
        try:
            posted = self.client.chat_postMessage(channel=command["channel_id"], text=asked)
        except SlackApiError as exc:
            self._cannot_post(respond, lang, exc)
            return
        ts = str(posted["ts"])
        self.intake.submit(Question(command["channel_id"], ts, ts, text, user, is_dm=is_dm))

    def _on_shortcut(self, ack: Callable[[], None], shortcut: dict[str, Any], respond: Callable[..., Any]) -> None:
        """Ask Footnote, on a message: a question someone posted without asking Footnote is
        asked now, by whoever chose the shortcut, and answered in that message's thread."""
        ack()
        message = shortcut.get("message") or {}
        where = shortcut.get("channel") or {}
        channel = str(where.get("id", ""))
        user = str((shortcut.get("user") or {}).get("id", ""))
        ts = str(message.get("ts", ""))
        text = spoken(str(message.get("text") or ""))
        if not channel or not ts:
            log.warning("a message shortcut without its message or channel: ignored")
            return
        lang = (self.intake.language_of(text) if text else None) or self.home_language
        if not self._member_of(channel):  # it could not post the answer: say so, privately
            self._tell(respond, say(lang, NOT_A_MEMBER), f"Footnote is not in {channel}")
            return
        thread = str(message.get("thread_ts") or ts)
        asked = Question(channel, thread, ts, text, user, is_dm=where.get("name") == "directmessage")
        if self.intake.submit(asked) is Submitted.ASKED_BEFORE:
            self._tell(respond, say(lang, ASKED_BEFORE), "the message was asked before")

    def _member_of(self, channel: str) -> bool:
        """Whether Footnote may post in ``channel``: a member of it, or a direct message with it."""
        try:
            info = self.client.conversations_info(channel=channel)
        except SlackApiError as exc:
            if slack_error(exc) in NO_ENTRY:
                return False
            log.warning(
                "could not tell whether Footnote is in %s (%s): asking anyway", channel, slack_error(exc) or exc
            )
            return True
        found = info.get("channel") or {}
        return bool(found.get("is_member") or found.get("is_im"))

    @staticmethod
    def _synced(respond: Callable[..., Any], lang: str | None, ok: bool) -> None:
        """Tell the asker of `/ask sync` that it is done (privately, as its first reply was)."""
        respond(text=say(lang, SYNCED if ok else SYNC_FAILED), response_type="ephemeral", replace_original=False)

    @staticmethod
    def _cannot_post(respond: Callable[..., Any], lang: str | None, exc: SlackApiError) -> None:
        """The question could not be posted where it was asked: tell the asker privately (the
        command's response URL needs no membership), rather than let the command vanish."""
        code = slack_error(exc)
        log.warning("could not post an /ask question (%s)", code or exc)
        text = say(lang, NOT_A_MEMBER) if code in NO_ENTRY else say(lang, NOT_POSTED, code=code or "?")
        SlackBot._tell(respond, text, "the question was not posted")

    @staticmethod
    def _tell(respond: Callable[..., Any], text: str, what: str) -> None:
        """Say ``text`` to the person who used a command or shortcut, privately (its response
        URL needs no membership); a failure to say it is logged, never raised."""
        try:
            respond(text=text, response_type="ephemeral")
        except Exception:
            log.exception("could not tell the asker that %s", what)

    def _on_home(self, event: dict[str, Any], ack: Callable[[], None]) -> None:
        ack()
        if event.get("tab", "home") != "home":
            return
        # The Home tab is the user's direct conversation with the app: the direct-message scope.
        scope = self.scopes.for_channel(str(event.get("channel", "")), is_dm=True)
        home = self.home_language
        if scope.excluded:
            blocks: list[dict[str, Any]] = [
                {"type": "section", "text": {"type": "mrkdwn", "text": say(home, NOT_HERE)}}
            ]
        else:
            blocks = self._status_blocks(scope.folders) if self.status is not None else []
            if self.gaps is not None:
                blocks += self._gap_blocks(event["user"])
        if blocks:
            self.client.views_publish(user_id=event["user"], view={"type": "home", "blocks": blocks[:100]})

    def _status(self, folders: Folders) -> Health | None:
        """The index's health under ``folders``; None while the store does not answer."""
        assert self.status is not None
        try:
            return self.status(folders)
        except StoreUnreachable as exc:
            log.warning("no status to show: %s", exc)
            return None

    def _status_blocks(self, folders: Folders) -> list[dict[str, Any]]:
        health = self._status(folders)
        home = self.home_language
        if health is None:
            return [{"type": "section", "text": {"type": "mrkdwn", "text": say(home, NO_STATUS)}}]
        return status_blocks(health, home)

    def _gap_blocks(self, user: str) -> list[dict[str, Any]]:
        """The groups of refused and 👎 questions this person may see: questions asked about
        folders their channels may search, grouped among themselves only."""
        assert self.gaps is not None
        rows = self.gaps.asked(HOME_GAP_DAYS * DAY_S, gaps_only=True)
        mine = visible(rows, self._reader(user)) if rows else []
        return gaps_blocks(find_gaps(mine), HOME_GAP_DAYS, HOME_GAPS, self.home_language)

    def _reader(self, user: str) -> list[Folders]:
        """What ``user`` may search: the folders of the channels they are in (as Slack lists
        them; without the permission to list, only what a direct message may search)."""
        channels: list[str] = []
        cursor = None
        try:
            while True:
                page = self.client.users_conversations(
                    user=user,
                    types="public_channel,private_channel,mpim",
                    exclude_archived=True,
                    limit=200,
                    cursor=cursor,
                )
                channels += [str(c["id"]) for c in page.get("channels") or []]
                cursor = (page.get("response_metadata") or {}).get("next_cursor")
                if not cursor:
                    break
        except Exception:
            log.warning("could not list %s's channels; showing what a direct message may see", user, exc_info=True)
            channels = []
        return self.scopes.reader(channels)

    def _on_feedback(self, ack: Callable[..., None], body: dict[str, Any], action: dict[str, Any]) -> None:
        """👍 keeps each cited passage as answering the message; 👎 drops the pair the answer came from."""
        ack()
        vote = "up" if action.get("action_id") == "feedback_up" else "down"
        click = self._click(body, str(action.get("value") or ""))
        if click is None:
            return
        user, channel, shown = click
        self._vote(shown.id, vote, user)
        if vote == "up":
            kept = [self._confirm(shown, passage, user, "answer") for passage in shown.cited]
        else:
            kept = [self._forget(shown.learned)] if shown.learned else []
        self._thank(channel, user, NOT_KEPT if None in kept else THANKS, shown)

    def _on_confirm(self, ack: Callable[..., None], body: dict[str, Any], action: dict[str, Any]) -> None:
        """ "This answers it" under a pointer: keep that passage as answering the message."""
        ack()
        fid, _, n = str(action.get("value") or "").rpartition("#")
        click = self._click(body, fid)
        if click is None:
            return
        user, channel, shown = click
        k = int(n) if n.isdigit() else 0
        if not 1 <= k <= len(shown.pointers):
            log.warning("ignoring a click on pointer %r of %s: the message showed %d", n, fid, len(shown.pointers))
            return
        kept = self._confirm(shown, shown.pointers[k - 1], user, "pointer")
        if kept:
            self._vote(fid, "up", user)
            self._thank(channel, user, THANKS_CONFIRMED, shown)
        elif kept is None:  # the click is not lost in silence: the person may click again
            self._thank(channel, user, NOT_KEPT, shown)

    def _on_none(self, ack: Callable[..., None], body: dict[str, Any], action: dict[str, Any]) -> None:
        """ "None of these": the docs did not answer it (a gap, with its 👎)."""
        ack()
        click = self._click(body, str(action.get("value") or ""))
        if click is None:
            return
        user, channel, shown = click
        self._vote(shown.id, "down", user)
        self._thank(channel, user, THANKS_NONE, shown)

    # -- clicks ---------------------------------------------------------------------------

    def _click(self, body: dict[str, Any], fid: str) -> tuple[str, str, Shown] | None:
        """(user, channel, what was shown) when the click checks out; else it is logged and None."""
        user = str((body.get("user") or {}).get("id") or "")
        channel = str((body.get("channel") or {}).get("id") or "")
        if not user:
            log.warning("ignoring a click without a user (on %r)", fid)
            return None
        shown = self.feedback.shown(fid) if fid else None
        if shown is None:
            log.warning("ignoring %s's click on %r: no such message, or it is too old", user, fid)
            return None
        here = self.scopes.for_channel(channel, is_dm=channel.startswith("D"))
        if here.excluded or scope_key(here.folders) != scope_key(shown.scope):
            log.warning(
                "ignoring %s's click on %s from %s: another channel scope than it was asked in", user, fid, channel
            )
            return None
        return user, channel, shown

    def _confirm(self, shown: Shown, passage: Passage, user: str, via: str) -> bool | None:
        """True: kept; False: ignored (its passage is gone); None: it could not be recorded now."""
        try:
            pair = self.answers.confirm(shown.question, passage, shown.scope, user, via)
        except StoreUnreachable as exc:
            log.error("could not keep a confirmation: %s", exc)
            return None
        except Exception:
            log.exception("could not keep a confirmation")
            return None
        if pair is None:
            log.warning("ignoring %s's confirmation of %s: the passage is no longer in the index", user, passage.path)
            return False
        return True

    def _forget(self, pid: str) -> bool | None:
        """Remove the learned pair a 👎'd answer came from: whether there was one; None when
        that could not be done now."""
        try:
            forgot = self.answers.forget(pid)
        except Exception as exc:
            log.error("could not remove learned pair %s: %s", pid, exc)
            return None
        if forgot:
            log.info("👎 on an answer from learned pair %s: the pair is removed", pid)
        return forgot

    def _vote(self, fid: str, vote: str, user: str) -> None:
        self.feedback.record(fid, vote, user)
        if self.gaps is not None:
            try:
                self.gaps.vote(fid, vote)
            except Exception:
                log.exception("could not record the vote in the gaps record")

    def _thank(self, channel: str, user: str, message: str, shown: Shown) -> None:
        """An ephemeral thank-you, in the language the question was asked in."""
        if channel:
            lang = self.intake.language_of(shown.question)
            self.client.chat_postEphemeral(channel=channel, user=user, text=say(lang, message))
