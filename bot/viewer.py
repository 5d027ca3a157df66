"""The citation viewer: ``GET /view/<document path>?from=&to=&exp=&sig=`` shows a document's
canonical text with the cited range highlighted and scrolled into view.

Citation links point here when no drive URL is configured (``FOOTNOTE_PUBLIC_URL``).
A link opens only if it is signed (:mod:`retrieval.answer.links`): unsigned, edited or expired
links get 403, so the viewer shows only what an answer cited, to the channel it was
cited in. When the document has changed since and the range no longer holds the words
cited, nothing is marked: the page says so, above the document as it is now. Only files
inside the docs folder are served: ``..``, absolute paths and symlinks that leave the
folder are refused.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

from bot.i18n import N_, say
from retrieval.answer import VerifyLink, text_digest
from retrieval.errors import ExtractionError
from retrieval.ingest import Extractor, extractor_for
from retrieval.types import Document

Extract = Callable[[Extractor, str, bytes], Document]

_PAGE = """<!doctype html>
<html lang="{lang}"><head><meta charset="utf-8"><title>{title} · Footnote</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body {{ font: 16px/1.55 system-ui, sans-serif; margin: 0; background: #fafafa; color: #1d1d1f; }}
header {{ position: sticky; top: 0; background: #fff; border-bottom: 1px solid #ddd; padding: .6rem 1.2rem; }}
header small {{ color: #666; }}
main {{ max-width: 52rem; margin: 1rem auto; padding: 0 1.2rem; }}
pre {{ white-space: pre-wrap; word-wrap: break-word; font: inherit; }}
.moved {{ background: #fff3cd; border: 1px solid #e0c36a; padding: .6rem .9rem; border-radius: 4px; }}
mark {{ background: #ffe066; padding: .1em 0; border-radius: 2px; box-shadow: 0 0 0 3px #ffe066; }}
</style></head>
<body><header><strong>{title}</strong> <small>{path}{where}</small></header>
<main>{moved}<pre id="text">{body}</pre></main>
<script>const hit = document.getElementById("hit"); if (hit) hit.scrollIntoView({{block: "center"}});</script>
</body></html>"""


_REFUSED = {
    "unsigned": N_("This link carries no signature. Footnote's viewer only opens the links in its answers."),
    "tampered": N_("This link was changed after Footnote made it, so it cannot be opened."),
    "expired": N_("This link has expired. Ask Footnote again in Slack for a fresh one."),
}
CANNOT_OPEN = N_("This link cannot be opened.")
LINK_NOT_VALID = N_("Link not valid")
NOT_FOUND = N_("No such document in the docs folder.")
UNSUPPORTED = N_("Footnote cannot show this file type.")
UNREADABLE = N_("This document cannot be read: {why}")
WHERE = N_("characters {a}–{b}")
MOVED = N_(
    "This document has changed since Footnote cited it: characters {a}–{b} no longer hold the words cited. "
    "The document as it is now is below; ask Footnote again for a fresh link."
)


def _message(status: int, title: str, text: str, lang: str | None) -> tuple[int, str]:
    page = f'<!doctype html><html lang="{lang or "en"}"><title>{html.escape(title)} · Footnote</title>'
    return status, f"{page}<p>{html.escape(text)}</p></html>"


def safe_path(docs_dir: Path, raw: str) -> Path | None:
    """The file ``raw`` names inside ``docs_dir``, or None when it would leave the folder."""
    rel = unquote(raw)
    parts = PurePosixPath(rel).parts
    if not rel or rel.startswith(("/", "\\")) or ".." in parts or "\\" in rel or "\x00" in rel:
        return None
    root = docs_dir.resolve()
    try:
        target = (root / rel).resolve()  # follows symlinks: one pointing out of the folder is caught here
    except (OSError, RuntimeError):  # a loop of links (RuntimeError before Python 3.13)
        return None
    if not target.is_relative_to(root) or not target.is_file():
        return None
    return target


def _span(query: dict[str, str], size: int) -> tuple[int, int] | None:
    try:
        start, end = int(query["from"]), int(query["to"])
    except (KeyError, ValueError):
        return None
    return (start, end) if 0 <= start < end <= size else None


def render_view(
    docs_dir: Path,
    raw_path: str,
    query: dict[str, str],
    extract: Extract,
    ocr: bool = False,
    *,
    verify: VerifyLink,
    lang: str | None = None,
) -> tuple[int, str]:
    """(HTTP status, HTML page) in ``lang`` (English when None). The signature is checked
    before the path is even looked up, so an unsigned request learns nothing, not even
    whether a file exists."""
    ok, reason = verify(unquote(raw_path), query)
    if not ok:
        return _message(403, say(lang, LINK_NOT_VALID), say(lang, _REFUSED.get(reason, CANNOT_OPEN)), lang)
    target = safe_path(docs_dir, raw_path)
    if target is None:
        return _message(404, "404", say(lang, NOT_FOUND), lang)
    rel = target.relative_to(docs_dir.resolve()).as_posix()
    ex = extractor_for(rel, ocr)
    if ex is None:
        return _message(415, "415", say(lang, UNSUPPORTED), lang)
    try:
        doc = extract(ex, rel, target.read_bytes())
    except (ExtractionError, OSError) as exc:
        return _message(422, "422", say(lang, UNREADABLE, why=exc), lang)
    span = _span(query, len(doc.text))
    moved = ""
    if "h" in query and (span is None or text_digest(doc.text[span[0] : span[1]]) != query["h"]):
        said = say(lang, MOVED, a=query.get("from", ""), b=query.get("to", ""))
        moved = f'<p class="moved">{html.escape(said)}</p>'
        span = None
    if span:
        a, b = span
        body = (
            html.escape(doc.text[:a])
            + '<mark id="hit">'
            + html.escape(doc.text[a:b])
            + "</mark>"
            + html.escape(doc.text[b:])
        )
    else:
        body = html.escape(doc.text)
    where = f" · {html.escape(say(lang, WHERE, a=span[0], b=span[1]))}" if span else ""
    page = _PAGE.format(
        lang=lang or "en", title=html.escape(doc.title), path=html.escape(rel), where=where, moved=moved, body=body
    )
    return 200, page
