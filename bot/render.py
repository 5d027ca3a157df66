"""Rendering an :class:`Answer` for people: terminal text, JSON and Slack Block Kit.

Pure functions: no I/O, no Slack client. Everything shown to Slack is escaped so
that nothing a model or a document wrote can become a mention, a ping or a link.
"""

from __future__ import annotations

import time
from typing import Any

from bot.health import Health
from retrieval.answer import BROADCAST, EXCERPT_CHARS, Answer, Citation

REFUSAL_HEADLINE = "I couldn't find this in the docs."
POINTER_HEADLINE = "I'm not sure the docs answer this."
POINTER_INTRO = "The closest passages (not an answer):"
LEARNED_NOTE = "A teammate confirmed this passage for a message like this one."
CONFIRM_BUTTON = "This answers it"
NONE_BUTTON = "None of these"
SECTION_LIMIT = 3000  # Slack's limit for a section block's text
MAX_BLOCKS = 50
QUOTE_CHARS = 280


def _label(c: Citation) -> str:
    name = f"{c.doc} — {c.section}" if c.section else c.doc
    return name if c.label in (c.section, c.doc) else f"{name} ({c.label})"


def citation_json(c: Citation) -> dict[str, Any]:
    """A citation or a pointer as ``--json`` prints it (``quote`` is exactly the text shown)."""
    return {
        "n": c.n,
        "path": c.path,
        "doc": c.doc,
        "section": c.section,
        "from": c.start,
        "to": c.end,
        "quote": c.quote,
        "passage": list(c.passage) if c.passage else None,
        **({"best": list(c.best)} if c.best else {}),
        "url": c.url,
        "locator": c.locator,
        "label": c.label,
        **c.where,
        "distance": round(c.distance, 4),
    }


def answer_json(a: Answer) -> dict[str, Any]:
    return {
        "question": a.question,
        "outcome": a.kind,
        "outcome_detail": a.outcome.value,
        "refused": a.refused,
        "reason": a.reason,
        "answer": a.text,
        "citations": [citation_json(c) for c in a.citations],
        "pointers": [citation_json(c) for c in a.pointers],
        "learned": a.learned,
        "consulted": [{"n": c.n, "path": c.path, "url": c.url} for c in a.consulted],
        "nearest": a.nearest,
        "gate": round(a.gate, 4),
        "check": a.check.as_json(),
        "timings": {k: round(v, 1) for k, v in a.timings.items()},
    }


def shorten(text: str, limit: int = QUOTE_CHARS) -> str:
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit].rsplit(" ", 1)[0]
    return cut + "…"


def answer_text(a: Answer) -> str:
    """What the Slack message shows, as plain terminal text."""
    if a.refused:
        lines = [f"{REFUSAL_HEADLINE} ({a.reason})"]
        if a.nearest:
            lines.append("Closest documents (not an answer): " + ", ".join(a.nearest))
        return "\n".join(lines)
    if a.pointers:
        lines = [f"{POINTER_HEADLINE} {POINTER_INTRO}"]
        for c in a.pointers:
            lines.append(f"[{c.n}] {_label(c)}  {c.url}")
            lines.append(f"    “{shorten(c.quote, EXCERPT_CHARS)}”")
        return "\n".join(lines)
    lines = [a.text, ""]
    if a.learned:
        lines[1:1] = [LEARNED_NOTE]
    title = "Sources" if a.citations else "Sources consulted (the answer cites none)"
    lines.append(title + ":")
    for c in a.citations or a.consulted:
        lines.append(f"[{c.n}] {_label(c)}  {c.url}")
        lines.append(f"    “{shorten(c.quote)}”")
    return "\n".join(lines)


_ESC = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def escape(text: str) -> str:
    """Slack mrkdwn escaping: after this, no text can form <!here>, <@U…> or <http…> links."""
    out = "".join(_ESC.get(ch, ch) for ch in text)
    return BROADCAST.sub(lambda m: "@\u2060" + m.group(1), out)


def _link(url: str, label: str) -> str:
    """A link a reader can open: only to a web address (the viewer on FOOTNOTE_PUBLIC_URL, or
    the drive's FOOTNOTE_DOCS_URL). Anything else (a ``file://`` path on the server) opens
    nowhere, so the source is named without one."""
    if not url.lower().startswith(("https://", "http://")):
        return f"*{escape(label)}*"
    # Our own URL, built by the server; the label is escaped and may not contain "|".
    safe_url = url.replace(">", "%3E").replace("|", "%7C").replace(" ", "%20")
    return f"<{safe_url}|{escape(label).replace('|', '¦')}>"


def _section(text: str) -> dict[str, Any]:
    if len(text) > SECTION_LIMIT:
        text = text[: SECTION_LIMIT - 1] + "…"
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def slack_blocks(a: Answer, collection: str | None = None, feedback_id: str | None = None) -> list[dict[str, Any]]:
    """Block Kit for an answer or a refusal, within Slack's limits."""
    blocks: list[dict[str, Any]] = []
    if a.refused:
        blocks.append(_section(f":mag: *{REFUSAL_HEADLINE}* _This is not an answer._\n{escape(a.reason)}"))
        if a.nearest:
            blocks.append(_context("Closest documents: " + ", ".join(escape(n) for n in a.nearest)))
    elif a.pointers:
        blocks += pointer_blocks(a, feedback_id)
    else:
        blocks.append(_section(escape(a.text)))
        shown = a.citations or a.consulted
        title = "*Sources*" if a.citations else "*Sources consulted* (the answer cites none)"
        blocks.append(_section(title))
        for c in shown:
            blocks.append(_section(f"[{c.n}] {_link(c.url, _label(c))}\n> {escape(shorten(c.quote))}"))
    if a.learned and a.answered:
        blocks.append(_context(f":white_check_mark: {LEARNED_NOTE}"))
    if collection:
        blocks.append(_context(f"Searched: {escape(collection)}"))
    if feedback_id and a.answered:
        blocks.append(
            {
                "type": "actions",
                "block_id": "feedback",
                "elements": [
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": "👍"},
                        "action_id": "feedback_up",
                        "value": feedback_id,
                    },
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": "👎"},
                        "action_id": "feedback_down",
                        "value": feedback_id,
                    },
                ],
            }
        )
    return blocks[:MAX_BLOCKS]


def _button(text: str, action_id: str, value: str) -> dict[str, Any]:
    return {"type": "button", "text": {"type": "plain_text", "text": text}, "action_id": action_id, "value": value}


def pointer_blocks(a: Answer, feedback_id: str | None) -> list[dict[str, Any]]:
    """The closest passages, each with its quote, its link and (with ``feedback_id``) a
    "This answers it" button; then one "None of these" for the message. A button carries only
    the id of what was shown and the pointer's number: what they mean is kept server-side."""
    blocks = [_section(f":mag: *{POINTER_HEADLINE}* {POINTER_INTRO}")]
    for c in a.pointers:
        block = _section(f"[{c.n}] {_link(c.url, _label(c))}\n> {_excerpt(c)}")
        if feedback_id:
            block["accessory"] = _button(CONFIRM_BUTTON, "pointer_confirm", f"{feedback_id}#{c.n}")
        blocks.append(block)
    if feedback_id:
        blocks.append(
            {"type": "actions", "block_id": "pointers", "elements": [_button(NONE_BUTTON, "pointer_none", feedback_id)]}
        )
    return blocks


def _excerpt(c: Citation) -> str:
    """A pointer's excerpt on one line, its best sentence in bold (Slack mrkdwn), escaped."""
    if c.best is None or not c.start <= c.best[0] < c.best[1] <= c.end:
        return escape(shorten(c.quote, EXCERPT_CHARS))
    a, b = c.best[0] - c.start, c.best[1] - c.start
    parts = [" ".join(x.split()) for x in (c.quote[:a], c.quote[a:b], c.quote[b:])]
    bold = f"*{escape(parts[1])}*" if parts[1] else ""
    return " ".join(x for x in (escape(parts[0]), bold, escape(parts[2])) if x)


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text[:SECTION_LIMIT]}]}


def fallback_text(a: Answer) -> str:
    """Notification text (shown where blocks are not): escaped, short."""
    if a.refused:
        return escape(REFUSAL_HEADLINE)
    return escape(POINTER_HEADLINE if a.pointers else shorten(a.text, 300))


def status_text(h: Health) -> str:
    """Index health as mrkdwn, for `/ask status` and the App Home tab (``h`` holds only the
    documents the asker's channel may search)."""
    names = [escape(f.strip("/") + "/") if f.strip("/") else "all documents" for f in h.scope or ()]
    where = "" if h.scope is None else " in " + ", ".join(names)
    lines = [
        f"*Index health{where}* {'✅' if h.ok else '⚠️'}",
        f"{h.indexed} indexed · {len(h.failed)} failed · {len(h.stale)} stale · {h.chunks} chunks",
    ]
    if h.last_sync_at is not None:
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(h.last_sync_at))
        lines.append(f"Last sync: {when}, took {h.last_sync_seconds or 0:.1f}s")
    if h.last_sync_error and h.scope is not None:  # its reason may name what lies outside the scope
        lines.append("Last sync failed (`footnote status` and the server's log say why)")
    elif h.last_sync_error:
        lines.append(f"Last sync failed: {escape(h.last_sync_error)[:300]}")
    if h.next_sync is not None:
        lines.append(f"Next sync: {h.next_sync.strftime('%Y-%m-%d %H:%M %Z').strip()}")
    if h.calibration is not None:
        lines.append(f"Gate: {h.calibration.summary()}")
    for title, items in (("Failed", h.failed), ("Stale (rebuilt by the next sync)", h.stale)):
        if items:
            lines.append(f"*{title}:*")
            shown = list(items.items())[:15]
            lines += [f"• `{escape(p)}`: {escape(r)}" for p, r in shown]
            if len(items) > len(shown):
                lines.append(f"…and {len(items) - len(shown)} more (`footnote status` lists all)")
    return "\n".join(lines)


def status_blocks(h: Health) -> list[dict[str, Any]]:
    text = status_text(h)
    return [_section(text[i : i + SECTION_LIMIT]) for i in range(0, len(text), SECTION_LIMIT)][:MAX_BLOCKS]
