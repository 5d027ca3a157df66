"""Turn Markdown/HTML/reStructuredText pages into plain-text sections and sentences.

A page becomes a list of :class:`Section` (heading, heading path, text blocks); a block is
one paragraph or one list item, already stripped of Markdown link targets, HTML, front
matter, Liquid/Jinja/Hugo tags and reST roles. Code blocks and tables are dropped.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

__all__ = ["Section", "inline_markdown", "parse_markdown", "parse_rst", "split_sentences", "words"]


@dataclass
class Section:
    """One heading's text: ``blocks`` are paragraphs or list items in plain text."""

    heading: str
    path: list[str]
    level: int
    blocks: list[str] = field(default_factory=list)


_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    """Lowercased alphanumeric words (the overlap check's and BM25's tokens)."""
    return _WORD.findall(text.lower())


# ---------------------------------------------------------------- inline cleanup

_LIQUID = re.compile(r"\{%-?.*?-?%\}|\{\{<.*?>\}\}|\{\{%.*?%\}\}|\{#.*?#\}", re.S)
_LIQUID_VAR = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}", re.S)
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
_TAG = re.compile(r"</?[a-zA-Z][a-zA-Z0-9-]*(?:\s[^<>]*)?/?>")
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)|!\[([^\]]*)\]\[[^\]]*\]")
_LINK = re.compile(r"\[([^\]]+)\]\((?:[^()]|\([^)]*\))*\)")
_REF_LINK = re.compile(r"\[([^\]]+)\]\[[^\]]*\]")
_AUTOLINK = re.compile(r"<(https?://[^>]+)>")
_ATTR = re.compile(r"\{:\s*[^}]*\}|\{#[\w-]+\}")
_EMPH = re.compile(r"(\*\*|__)(.+?)\1|(?<![\w*])\*(?!\s)([^*]+?)\*(?!\w)|(?<![\w_])_(?!\s)([^_]+?)_(?!\w)")
_CODE = re.compile(r"`+([^`]*)`+")
_SPACES = re.compile(r"\s+")


def _liquid_var(m: re.Match[str]) -> str:
    # "{{ site.name }}" carries no words a reader sees; a quoted literal does.
    inner = m.group(1)
    q = re.match(r"""^["'](.*)["']$""", inner)
    return q.group(1) if q else ""


def inline_markdown(text: str) -> str:
    """Plain text of one Markdown/HTML block: link texts kept, targets and markup dropped."""
    text = _HTML_COMMENT.sub(" ", text)
    text = _LIQUID.sub(" ", text)
    text = _LIQUID_VAR.sub(_liquid_var, text)
    text = _IMAGE.sub(" ", text)
    text = _LINK.sub(r"\1", text)
    text = _REF_LINK.sub(r"\1", text)
    text = _AUTOLINK.sub(r"\1", text)
    text = _TAG.sub(" ", text)
    text = _ATTR.sub(" ", text)
    text = _CODE.sub(r"\1", text)
    for _ in range(2):
        text = _EMPH.sub(lambda m: m.group(2) or m.group(3) or m.group(4) or "", text)
    text = html.unescape(text)
    text = text.replace("\\", "")
    return _SPACES.sub(" ", text).strip()


_RST_ROLE = re.compile(r":[a-zA-Z:_-]+:`([^`<]*?)(?:\s*<[^>]*>)?`")
_RST_LINK = re.compile(r"`([^`<]+?)\s*<[^>]*>`__?")
_RST_REF = re.compile(r"`([^`]+)`__?")
_RST_FOOTREF = re.compile(r"\s*\[(?:\d+|#[\w-]*|\*|[A-Za-z][\w-]*)\]_")
_RST_LITERAL = re.compile(r"``(.+?)``")
_RST_EMPH = re.compile(r"\*\*(.+?)\*\*|(?<![\w*])\*(?!\s)(.+?)\*(?!\w)")
_RST_SUBST = re.compile(r"\|([^|\s][^|]*)\|")


def _role(m: re.Match[str]) -> str:
    body = m.group(1).strip().lstrip("~!")
    role = m.group(0).split("`", 1)[0]
    if role in (":pep:", ":PEP:"):
        return f"PEP {body}"
    return body


def inline_rst(text: str) -> str:
    """Plain text of one reST block: roles, references, literals and emphasis unwrapped."""
    text = _RST_ROLE.sub(_role, text)
    text = _RST_LINK.sub(r"\1", text)
    text = _RST_FOOTREF.sub("", text)
    text = _RST_LITERAL.sub(r"\1", text)
    text = _RST_REF.sub(r"\1", text)
    text = _RST_EMPH.sub(lambda m: m.group(1) or m.group(2) or "", text)
    text = _RST_SUBST.sub(r"\1", text)
    text = text.replace("\\", "")
    return _SPACES.sub(" ", text).strip()


# ---------------------------------------------------------------- Markdown

_FRONT = re.compile(r"\A(?:---|\+\+\+)\s*\n(.*?)\n(?:---|\+\+\+)\s*(?:\n|\Z)", re.S)
_FRONT_TITLE = re.compile(r"""^title\s*[:=]\s*["']?(.*?)["']?\s*$""", re.M)
_ATX = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_HTML_H = re.compile(r"^\s*<h([1-6])[^>]*>(.*?)</h\1>\s*$", re.I)
_LIST = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")
_FENCE = re.compile(r"^\s*(```|~~~)")
_TABLE = re.compile(r"^\s*\|.*\|\s*$|^\s*\|?\s*:?-{3,}:?\s*\|")
_REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*\S+")
_BOLD_Q = re.compile(r"^\s*(?:[-*]\s+)?(\*\*|__)((?:Q\s*[:.]\s*)?[^*_]{8,}\?)\s*\1\s*$")
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_BLOCK_TAGS = re.compile(
    r"^\s*</?(?:div|section|table|tr|td|th|ul|ol|li|p|br|hr|nav|aside|header|footer|figure|figcaption|button|svg|path|form|input|label|script|style|span|img|iframe|details|summary|article|main)\b",
    re.I,
)


def parse_markdown(text: str) -> tuple[str, list[Section]]:
    """(title, sections) of a Markdown (or Markdown-with-HTML) page."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    title = ""
    m = _FRONT.match(text)
    if m:
        t = _FRONT_TITLE.search(m.group(1))
        if t:
            title = inline_markdown(t.group(1))
        text = text[m.end() :]
    text = _HTML_COMMENT.sub("\n", text)
    text = re.sub(r"<(script|style)\b.*?</\1>", "\n", text, flags=re.S | re.I)
    text = re.sub(r"\{%-?\s*(raw|highlight|comment|capture)\b.*?%\}.*?\{%-?\s*end\1\s*-?%\}", "\n", text, flags=re.S)

    sections: list[Section] = [Section("", [], 0)]
    stack: list[tuple[int, str]] = []
    para: list[str] = []
    in_fence = False
    bold_level: int | None = None

    def flush() -> None:
        if para:
            block = inline_markdown(" ".join(para))
            if block:
                sections[-1].blocks.append(block)
            para.clear()

    def heading(level: int, raw: str) -> None:
        flush()
        h = inline_markdown(raw)
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, h))
        sections.append(Section(h, [s for _, s in stack], level))

    lines = text.split("\n")
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            flush()
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        if line.startswith("    ") and not para and line.strip() and not _LIST.match(line):
            continue  # indented code block
        m = _ATX.match(line) or _HTML_H.match(line)
        if m:
            level = len(m.group(1)) if m.group(1).startswith("#") else int(m.group(1))
            heading(level, m.group(2))
            bold_level = None
            continue
        b = _BOLD_Q.match(line)
        if b:  # a bold line that is a question is an FAQ heading
            if bold_level is None:
                bold_level = min((stack[-1][0] if stack else 1) + 1, 7)
            heading(bold_level, b.group(2))
            continue
        s = _SETEXT.match(line)
        if s and len(para) == 1 and i > 0 and lines[i - 1].strip():
            raw = para.pop()
            heading(1 if s.group(1)[0] == "=" else 2, raw)
            continue
        if not line.strip() or _TABLE.match(line) or _REFDEF.match(line):
            flush()
            continue
        if _BLOCK_TAGS.match(line):
            flush()
            rest = inline_markdown(line)
            if rest:
                para.append(rest)
            continue
        if _LIST.match(line):
            flush()
            para.append(_LIST.sub("", line, count=1))
            continue
        para.append(re.sub(r"^\s*>\s?", "", line).strip())
    flush()
    if not title:
        for sec in sections:
            if sec.level == 1:
                title = sec.heading
                break
    return title, [s for s in sections if s.blocks or s.heading]


# ---------------------------------------------------------------- reStructuredText

_RST_UNDER = re.compile(r"^([=\-~^\"'`#*+<>_:.])\1{2,}\s*$")
_RST_DIRECTIVE = re.compile(r"^\s*\.\.\s+")
_RST_FIELD_HEADER = re.compile(r"^[A-Z][A-Za-z-]*:\s")


def parse_rst(text: str) -> tuple[str, list[Section], dict[str, str]]:
    """(title, sections, header fields) of a reST document such as a PEP."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    header: dict[str, str] = {}
    i = 0
    if lines and _RST_FIELD_HEADER.match(lines[0]):
        key = ""
        while i < len(lines) and lines[i].strip():
            line = lines[i]
            if line[0].isspace() and key:
                header[key] += " " + line.strip()
            else:
                key, _, val = line.partition(":")
                header[key] = val.strip()
            i += 1
    title = header.get("Title", "")
    levels: list[str] = []
    sections: list[Section] = [Section("", [], 0)]
    stack: list[tuple[int, str]] = []
    para: list[str] = []
    skip_indent: int | None = None  # dropping a literal/directive block indented deeper than this

    def flush() -> None:
        if para:
            block = inline_rst(" ".join(para))
            if block:
                sections[-1].blocks.append(block)
            para.clear()

    lines = lines[i:]
    n = len(lines)
    j = 0
    while j < n:
        line = lines[j]
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if skip_indent is not None:
            if not stripped or indent > skip_indent:
                j += 1
                continue
            skip_indent = None
        # heading: text line followed by an underline at least as long
        if (
            stripped
            and j + 1 < n
            and _RST_UNDER.match(lines[j + 1])
            and len(lines[j + 1].rstrip()) >= len(line.rstrip())
            and indent == 0
        ):
            flush()
            mark = lines[j + 1].strip()[0]
            if mark not in levels:
                levels.append(mark)
            level = levels.index(mark) + 1
            h = inline_rst(stripped)
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, h))
            sections.append(Section(h, [s for _, s in stack], level))
            j += 2
            continue
        if _RST_UNDER.match(line) and j + 2 < n and lines[j + 1].strip() and _RST_UNDER.match(lines[j + 2]):
            # overlined title
            flush()
            h = inline_rst(lines[j + 1].strip())
            if not title:
                title = h
            j += 3
            continue
        if not stripped:
            flush()
            j += 1
            continue
        if _RST_DIRECTIVE.match(line):
            flush()
            skip_indent = indent
            j += 1
            continue
        if stripped.startswith(("+-", "|", "==")) or re.match(r"^=+(\s+=+)+\s*$", stripped):
            flush()
            j += 1
            continue
        if _LIST.match(line):
            flush()
            para.append(_LIST.sub("", line, count=1))
        else:
            para.append(stripped)
        if stripped.endswith("::"):
            para[-1] = para[-1][:-2].rstrip() + (":" if not stripped.endswith(" ::") else "")
            flush()
            skip_indent = indent
        j += 1
    flush()
    return title, [s for s in sections if s.blocks or s.heading], header


# ---------------------------------------------------------------- sentences

_ABBREV = {
    "e.g",
    "i.e",
    "etc",
    "vs",
    "mr",
    "mrs",
    "ms",
    "dr",
    "u.s",
    "no",
    "fig",
    "approx",
    "inc",
    "st",
    "jr",
    "sr",
    "al",
    "cf",
    "p",
    "pp",
    "sec",
    "u.s.c",
    "c.f.r",
    "seq",
    "ex",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
}
_SPLIT = re.compile(r"(?<=[.!?])[\"”')\]]*\s+(?=[\"“(\[]?[A-Z0-9])")


def split_sentences(block: str) -> list[str]:
    """Sentences of one plain-text block (abbreviations such as e.g. and U.S. do not end one)."""
    out: list[str] = []
    start = 0
    for m in _SPLIT.finditer(block):
        piece = block[start : m.start()].rstrip()
        last = piece.rsplit(None, 1)[-1] if piece.split() else ""
        stem = last.rstrip(".!?\"”')]").lower()
        if last.endswith(".") and (stem in _ABBREV or (len(stem) == 1 and stem.isalpha())):
            continue
        out.append(block[start : m.end()].strip())
        start = m.end()
    tail = block[start:].strip()
    if tail:
        out.append(tail)
    return out
