"""Markup reduced to the words a reader sees."""

from __future__ import annotations

import pytest

from retrieval.ingest.markup import plain


@pytest.mark.parametrize(
    ("marked", "seen"),
    [
        (
            'You may [book your travel]({% page "/travel/#book" %}) now.<br> <br> Then',
            "You may book your travel now. Then",
        ),
        ('Report in the {% slack_channel "incident-response" %} channel.', "Report in the incident-response channel."),
        ("See ![the diagram](img/a.png) and [the docs](https://x.org/a_(b)).", "See the diagram and the docs."),
        ("A **bold** claim, a [reference][1] and {{ site.title }}.", "A bold claim, a reference and ."),
        (
            "See [`Trainer`](https://hf.co/docs) and the `<s>` token, not <b>this</b>.",
            "See `Trainer` and the `<s>` token, not this.",
        ),
        ("2 * 3 * 4 = 24, and\n   wrapped", "2 * 3 * 4 = 24, and wrapped"),
        (
            'If lost, follow [these]({% page "/equipment/#lost" %}) or {% page "/equipment/" %}.',
            "If lost, follow these or .",
        ),
        ("- Log total hours in HR Links.", "Log total hours in HR Links."),
        ("2. Select **Travel - New\n   Booking**", "Select Travel - New Booking"),
        ("> **Note**: call first.", "Note: call first."),
        ("Mail <support@x.org> or see <https://x.org/a>.", "Mail support@x.org or see https://x.org/a."),
        ("x<y then y>z, List<String>, __init__", "x<y then y>z, List<String>, __init__"),
        ("2019. It grew", "2019. It grew"),
    ],
)
def test_markup_is_reduced_to_its_words(marked: str, seen: str) -> None:
    assert plain(marked) == seen


@pytest.mark.parametrize("opener", ["[", "![a](", "{%", "<!--", "**", "<a ", "[a]("])
def test_unclosed_markup_is_left_as_it_is(opener: str) -> None:
    text = opener * 20_000  # each pattern is bounded: one pass, not a scan from every opener
    assert plain(text) == " ".join(text.split())


def test_text_that_looks_like_a_held_code_span_is_left_alone() -> None:
    assert plain("odd \x007\x00 bytes") == "odd \x007\x00 bytes"
