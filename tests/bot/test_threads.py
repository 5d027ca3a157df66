"""The retrieval context a follow-up gets: bounded, the new question never cut."""

from __future__ import annotations

from slack_sdk import WebClient

from bot.threads import BotIdentity, SlackThreads, fit, spoken
from testkit.slack import FakeSlack


def test_the_question_is_kept_whole_and_the_most_recent_earlier_questions_fill_the_budget() -> None:
    question = "and what if it is not resolved within 30 minutes?"
    earlier = ["a" * 40, "b" * 40, "c" * 40]
    assert fit(question, earlier, budget=len(question) + 1 + 82) == ("b" * 40, "c" * 40)
    assert fit(question, earlier, budget=len(question) + 1 + 81) == ("c" * 40,)
    assert fit(question, earlier, budget=1000) == tuple(earlier)


def test_a_question_longer_than_the_budget_gets_no_context_and_is_not_cut() -> None:
    question = "x" * 900
    assert fit(question, ["earlier"], budget=800) == ()


def test_an_older_question_does_not_jump_over_a_newer_one_that_does_not_fit() -> None:
    # Context is the recent conversation: a short old question alone would mislead.
    assert fit("q?", ["old short", "n" * 500], budget=100) == ()


def test_the_question_itself_is_not_repeated_as_context() -> None:
    assert fit("How fast?", ["How fast?", "Who is paged?"], budget=800) == ("Who is paged?",)


def test_what_another_bot_posted_is_context_for_a_question_in_its_thread() -> None:
    """An alert, a CI bot's report: "@Footnote what do I do about this?" in its thread asks
    about what the bot posted, often in its attachments only. Footnote's own answers and
    joins are still no context."""
    slack = FakeSlack()
    try:
        client = WebClient(token="xoxb-x", base_url=slack.url)
        threads = SlackThreads(client, BotIdentity(client))
        root = "1600000000.000001"
        slack.messages["C1"] = [
            {"type": "message", "subtype": "bot_message", "bot_id": "BALERT", "text": "", "ts": root,
             "attachments": [{"fallback": "[FIRING] Error code LW-5012 on billing-worker", "color": "danger"}]},
            {"type": "message", "bot_id": "BCI", "text": "Deploy <https://ci.example/1|#812> failed &amp; rolled back",
             "ts": "1600000000.000002", "thread_ts": root},
            {"type": "message", "subtype": "channel_join", "user": "U3", "text": "<@U3> has joined",
             "ts": "1600000000.000003", "thread_ts": root},
        ]  # fmt: skip
        client.chat_postMessage(channel="C1", thread_ts=root, text="an answer of ours")
        slack.user_message("C1", "1800000000.000001", "<@UBOT> what do I do about this?", thread_ts=root)
        assert threads.context("C1", root, "1800000000.000001", "what do I do about this?") == (
            "[FIRING] Error code LW-5012 on billing-worker",
            "Deploy #812 failed & rolled back",
        )
        # A bot's whole log takes only its start, and the question before it keeps its place.
        slack.user_message("C1", "1800000000.000002", "Is billing down?", thread_ts=root)
        log = {"type": "message", "bot_id": "BCI", "text": "step failed " * 500, "ts": "1800000000.000003",
               "thread_ts": root}  # fmt: skip
        slack.messages["C1"].append(log)
        context = threads.context("C1", root, "1800000000.000004", "and now?")
        assert context[-2] == "Is billing down?" and context[-1].endswith(" …") and len(context[-1]) <= 302
    finally:
        slack.close()


def test_a_long_thread_is_read_page_by_page_from_slack() -> None:
    slack = FakeSlack()
    try:
        client = WebClient(token="xoxb-x", base_url=slack.url)
        me = BotIdentity(client)
        root = "1600000000.000000"  # before the fake's own ts (1700000000.x): the reply comes early
        slack.user_message("C1", root, "<@UBOT> first question")
        client.chat_postMessage(channel="C1", thread_ts=root, text="the answer")
        for i in range(1, 450):  # more than two pages of people talking after it
            slack.user_message("C1", f"1800000000.{i:06d}", f"message {i}", thread_ts=root)
        threads = SlackThreads(client, me, max_messages=3, budget_chars=800)
        assert threads.is_ours("C1", root)
        last = threads.context("C1", root, "1800000000.000449", "now?")
        assert last == ("message 446", "message 447", "message 448")
        slack.user_message("C2", "5.1", "people only")
        slack.user_message("C2", "5.2", "still people", thread_ts="5.1")
        assert not threads.is_ours("C2", "5.1")
        pages = [p for p in slack.of("conversations.replies") if p["channel"] == "C1"]
        assert len(pages) == 1 + 3  # ours: the first page shows the reply; context: all three pages
    finally:
        slack.close()


def test_a_slack_message_loses_its_mentions_and_emoji_shortcodes_but_not_its_times() -> None:
    assert spoken("<@U123> got paged :scream::skin-tone-2: what now? :+1: at 10:30:45") == (
        "got paged  what now?  at 10:30:45"
    )
    assert spoken(":shrug:") == ""


def test_a_slack_message_is_read_as_its_writer_typed_it() -> None:
    """Slack sends "&", "<" and ">" as entities and links, channels and groups as markup;
    the question searched (and echoed, and kept as a gap) is the text the person saw."""
    assert (
        spoken("<@U1> what is the R&amp;D budget for Q&amp;A &lt;2026&gt;?") == "what is the R&D budget for Q&A <2026>?"
    )
    assert spoken("is <https://wiki.example/x|the onboarding page> still right?") == (
        "is the onboarding page still right?"
    )
    assert spoken("see <https://wiki.example/x?a=1&amp;b=2> and <mailto:hr@example.com|hr@example.com>") == (
        "see https://wiki.example/x?a=1&b=2 and hr@example.com"
    )
    assert spoken("<!here> who owns <#C123|deploys>? ask <!subteam^S1|@oncall> or <@U2|ann>") == (
        "who owns #deploys? ask @oncall or"
    )
    assert spoken("&amp;lt; stays as typed") == "&lt; stays as typed"
