"""Citation hygiene: the model writes [n]; nothing else it writes can become a link or a ping."""

from __future__ import annotations

from retrieval.answer.citations import neutralise, says_not_found


def test_model_written_links_and_slack_sequences_never_pass() -> None:
    raw = (
        "See https://evil.example/x and www.evil.example <!channel> <!here> <@U123ABC> <#C999> "
        "<https://phish.example|click here> [docs](http://x.example) @channel @everyone [1]"
    )
    out = neutralise(raw)
    for bad in ("http", "www.", "<!", "<@", "<#", "evil", "phish.example", "@channel", "@everyone"):
        assert bad not in out, bad
    assert "click here" in out and "docs" in out and "[1]" in out


def test_neutralise_keeps_plain_text() -> None:
    assert neutralise("The limit is 45 EUR per day.") == "The limit is 45 EUR per day."


def test_refusal_phrases_are_recognised() -> None:
    assert says_not_found("The sources do not contain the answer.")
    assert says_not_found("I don't know.")
    assert not says_not_found("Claims are paid with the next salary run [1].")
