"""Rendering is pure: escaping, limits, refusal marking."""

from __future__ import annotations

import json
from dataclasses import replace

from bot.render import MAX_BLOCKS, SECTION_LIMIT, escape, slack_blocks
from retrieval.answer.citations import Citation
from retrieval.answer.service import Answer, Outcome


def _cite(
    n: int, doc: str = "Hand<book> & co", quote: str = "Ping <!channel> and <@U1> at <https://x.example|here>"
) -> Citation:
    url = f"https://footnote.example/view/a.md?sig=s#char=0,{n}"
    return Citation(n, "a.md", doc, "Sec", 0, 10, quote, url, "#char=0,10", "Sec", 0.3)


def test_escape_neutralises_mentions_links_and_broadcasts() -> None:
    out = escape("<!here> <@U123> <http://evil|x> @channel & more")
    assert "<" not in out and ">" not in out
    assert "@channel" not in out and "&amp;" in out


def test_document_text_cannot_ping_or_link() -> None:
    a = Answer("q", False, "answered", "See [1] <!channel>", [_cite(1)])
    blob = json.dumps(slack_blocks(a))
    for bad in ("<!channel>", "<@U1>", "<https://x.example"):
        assert bad not in blob
    assert "#char=0,1|" in blob  # our own link survives, with its locator


def test_a_file_path_is_never_a_link_in_slack() -> None:
    """Without FOOTNOTE_PUBLIC_URL (or a drive URL) a citation's link is a path on the server,
    which no reader can open: Slack gets the document and section, and the quote, unlinked."""
    local = replace(_cite(1), url="file:///srv/docs/a.md#char=0,1")
    a = Answer("q", False, "answered", "See [1].", [local])
    blob = json.dumps(slack_blocks(a), ensure_ascii=False)
    assert "file://" not in blob and "/srv/docs" not in blob and "<http" not in blob
    assert "[1] *Hand&lt;book&gt; &amp; co — Sec*" in blob and "Ping" in blob  # named and quoted


def test_limits_are_respected() -> None:
    long = "word " * 2000
    a = Answer("q", False, "answered", long, [_cite(i, quote=long) for i in range(1, 80)])
    blocks = slack_blocks(a, feedback_id="f1")
    assert len(blocks) <= MAX_BLOCKS
    assert all(len(b["text"]["text"]) <= SECTION_LIMIT for b in blocks if b["type"] == "section")


def test_refusal_is_clearly_not_an_answer() -> None:
    a = Answer("q", True, "nothing relevant enough", "", [], nearest=["On-call Handbook"], outcome=Outcome.REFUSED_GATE)
    blob = json.dumps(slack_blocks(a, feedback_id="f1"))
    assert "couldn't find this in the docs" in blob and "not an answer" in blob and "On-call Handbook" in blob
    assert "feedback_up" not in blob


def test_a_refusal_that_never_searched_says_why_not_that_nothing_was_found() -> None:
    """Emoji only, or a language without support: Footnote did not look in the docs, so it
    does not say it could not find anything there; it says what it needs, in every form."""
    from bot.render import answer_text, fallback_text

    unsupported = "the question is in de, which Footnote does not support (English, Danish)"
    german = Answer("Wo?", True, unsupported, "", [], outcome=Outcome.REFUSED_GATE)
    empty = Answer("🙂", True, "there is no question to answer", "", [], outcome=Outcome.REFUSED_GATE, language="da")
    for a, said in (
        (german, "I answer questions in English and Danish. Jeg svarer på spørgsmål på dansk og engelsk."),
        (empty, "Stil mig et spørgsmål om dokumenterne."),
    ):
        blocks = slack_blocks(a, feedback_id="f1")
        assert [b["text"]["text"] for b in blocks] == [said]
        assert answer_text(a) == said and fallback_text(a) == said
    searched = Answer("q", True, "nothing relevant enough", "", [], outcome=Outcome.REFUSED_GATE)
    assert answer_text(searched).startswith("I couldn't find this in the docs.")


def test_status_text_lists_counts_reasons_and_sync_times() -> None:
    from datetime import UTC, datetime

    from bot.health import Health
    from bot.render import status_blocks, status_text

    h = Health(
        indexed=12,
        failed={"scan.pdf": "no text layer; OCR not enabled", "<!channel>.md": "binary"},
        stale={"a.md": "rebuild needed: pipeline p1 → p2"},
        chunks=340,
        last_sync_at=0.0,
        last_sync_seconds=1.25,
        next_sync=datetime(2026, 12, 1, 9, 15, tzinfo=UTC),
    )
    text = status_text(h)
    assert "12 indexed · 2 failed · 1 stale · 340 chunks" in text
    assert "Last sync: 1970-01-01 00:00 UTC, took 1.2s" in text and "Next sync: 2026-12-01 09:15 UTC" in text
    assert "no text layer" in text and "&lt;!channel&gt;" in text and "<!channel>" not in text
    assert status_blocks(h)[0]["type"] == "section"


def test_page_sheet_and_time_locators_reach_the_sources_block_and_json() -> None:
    from bot.render import answer_json

    cites = [
        Citation(1, "t.pdf", "Travel", "p. 2", 70, 140, "Hotels up to 1,400 DKK.", "https://drive.example/d/t.pdf#page=2",
                 "#page=2", "p. 2", 0.2, {"page": 2}),
        Citation(2, "c.xlsx", "Contacts", "Escalation", 0, 60, "Severity: SEV1; Who: Birgitte",
                 "https://drive.example/d/c.xlsx#sheet=Escalation&range=A3:C3", "#sheet=Escalation&range=A3:C3",
                 "Escalation!A3:C3", 0.3, {"sheet": "Escalation", "range": "A3:C3"}),
        Citation(3, "call.vtt", "call", "Transcript", 0, 50, "Retention is eighteen months.",
                 "https://drive.example/d/call.mp4#t=132.4,138.25", "#t=132.4,138.25", "2:12–2:18", 0.3, {"start": 132.4, "end": 138.25}),
    ]  # fmt: skip
    a = Answer("q", False, "answered", "Yes [1][2][3].", cites)
    text = json.dumps(slack_blocks(a), ensure_ascii=False)
    assert "<https://drive.example/d/t.pdf#page=2|Travel — p. 2>" in text  # the label is the section: not repeated
    assert "Contacts — Escalation (Escalation!A3:C3)" in text and "call — Transcript (2:12–2:18)" in text
    js = answer_json(a)["citations"]
    assert js[0]["page"] == 2 and js[1]["sheet"] == "Escalation" and js[1]["range"] == "A3:C3"
    assert js[2]["start"] == 132.4 and js[2]["end"] == 138.25 and js[2]["locator"] == "#t=132.4,138.25"
