"""Markup reduced to the words a reader sees: for labels and for what the model reads.

A Markdown link shows its text, an image its alt text; a template tag (Liquid, Jinja,
Hugo shortcodes) shows its first quoted argument (``{% slack_channel "tock" %}``: tock)
or nothing, an HTML tag nothing; bold markers go, and so does a list item's,
quote's or heading's marker at the start. Code spans are kept as written,
backticks included ("this is a name"). Quotes and citation ranges never pass through
here: they are the source's own characters.
"""

from __future__ import annotations

import re

# Every pattern is bounded (no "[" inside a link's text, tags and comments of limited
# length), so a line of a million "[" costs one linear pass, not a scan from each.
_IMAGE = re.compile(r"!\[([^\[\]\n]*)\]\([^()\n]*\)")
_LINK = re.compile(r"\[([^\[\]\n]+)\]\((?:[^()\n]|\([^()\n]*\))*\)")  # a URL may hold one level of ( )
_REF_LINK = re.compile(r"\[([^\[\]\n]+)\]\[[^\[\]\n]*\]")
_TEMPLATE = re.compile(r"\{%([^%{}]{0,500})%\}|\{\{<?([^{}]{0,500}?)>?\}\}")
_QUOTED_ARG = re.compile(r"\"([^\"]*)\"|'([^']*)'")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^<>\s]+|[^<>\s@]+@[^<>\s@]+\.[a-zA-Z]{2,})>")  # <https://…>, <a@b.org>
# Only HTML's own tags are markup ("List<String>" or "x<y then y>z" is not). An inline
# tag sits inside a word's run ("<b>this</b>."); any other (<br>, <p>) parts words.
_INLINE_TAGS = "a|abbr|b|code|em|i|kbd|mark|small|span|strong|sub|sup|u"
_BLOCK_TAGS = (
    "blockquote|br|center|cite|dd|del|details|div|dl|dt|figcaption|figure|font|h[1-6]|hr|iframe|img|ins|li|"
    "ol|p|picture|pre|q|s|section|source|summary|table|tbody|td|th|thead|tr|ul|video"
)
_INLINE_TAG = re.compile(rf"</?(?:{_INLINE_TAGS})\b[^<>\n]{{0,500}}/?>", re.I)
_HTML = re.compile(rf"</?(?:{_BLOCK_TAGS})\b[^<>\n]{{0,500}}/?>|<!--[^<>]{{0,2000}}?-->", re.I)
_CODE = re.compile(r"`[^`\n]*`")  # a code span ("`<s>`") is a name, never markup
_HELD = re.compile(r"\x00(\d+)\x00")
# "- ", "2. ", "> ", "## " (a list number has at most 3 digits: "2019. It grew" is a year)
_BLOCK_MARKER = re.compile(r"\A\s*(?:>\s*)*(?:[-*+]\s+|\d{1,3}[.)]\s+|#{1,6}\s+)?")
_EMPHASIS = re.compile(r"\*\*(?=\S)([^*\n]{1,500}?)(?<=\S)\*\*")  # not __: __init__ is a name


def plain(text: str, block_marker: bool = True) -> str:
    """``text`` without its markup, whitespace collapsed; code spans kept as written.

    ``block_marker=False`` keeps what starts the text (a heading's own "2. Setup")."""
    spans: list[str] = []

    def hold(m: re.Match[str]) -> str:  # set aside, so nothing inside is taken for markup
        spans.append(m.group())
        return f"\x00{len(spans) - 1}\x00"

    flat = " ".join(text.split())  # a soft wrap inside **bold** or a link is a space
    held = _CODE.sub(hold, flat)
    out = _unmarked(_BLOCK_MARKER.sub("", held, count=1) if block_marker else held)

    def restore(m: re.Match[str]) -> str:
        i = int(m.group(1))
        return spans[i] if i < len(spans) else m.group()

    return " ".join(_HELD.sub(restore, out).split())


def _unmarked(text: str) -> str:
    out = _IMAGE.sub(r"\1", text)
    out = _LINK.sub(r"\1", out)  # before the tags: a tag in a link's URL goes with the URL
    out = _REF_LINK.sub(r"\1", out)
    out = _TEMPLATE.sub(_tag_argument, out)
    out = _AUTOLINK.sub(r"\1", out)
    out = _HTML.sub(" ", _INLINE_TAG.sub("", out))
    return _EMPHASIS.sub(r"\1", out)


def _tag_argument(m: re.Match[str]) -> str:
    """A tag's first quoted argument when it is a word ("tock"), not a path or a file."""
    arg = _QUOTED_ARG.search(m.group(1) or m.group(2) or "")
    word = (arg.group(1) or arg.group(2) or "") if arg else ""
    return f" {word} " if word and not re.search(r"[/.]", word) else " "
