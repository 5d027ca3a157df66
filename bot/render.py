"""Rendering an :class:`Answer` for people: terminal text, JSON and Slack Block Kit.

Pure functions: no I/O, no Slack client. Everything shown to Slack is escaped so
that nothing a model or a document wrote can become a mention, a ping or a link. What
Footnote itself says is in the asker's language (:mod:`bot.i18n`); the quoted evidence
stays in its document's.
"""

from __future__ import annotations

import time
from typing import Any

from bot.health import Health
from bot.i18n import N_, say
from retrieval.answer import BROADCAST, DOCS_SAY, EXCERPT_CHARS, POINTER_CHARS, Answer, Citation, Outcome

REFUSAL_HEADLINE = N_("I couldn't find this in the docs.")
NOT_AN_ANSWER = N_("This is not an answer.")
CLOSEST_DOCUMENTS = N_("Closest documents: {names}")
POINTER_HEADLINE = N_("I'm not sure the docs answer this.")
MODEL_FAILED_HEADLINE = N_("I couldn't write an answer just now: the language model did not answer.")
POINTER_INTRO = N_("The closest passages (not an answer):")
LEARNED_NOTE = N_("A teammate confirmed this passage for a message like this one.")
CONFIRM_BUTTON = N_("This answers it")
NONE_BUTTON = N_("None of these")
SOURCES = N_("Sources")
SOURCES_CONSULTED = N_("Sources consulted (the answer cites none)")
SEARCHED = N_("Searched: {where}")
ALL_DOCUMENTS = N_("all documents")
# Why a question was refused, for people (``Answer.reason`` is the technical one: --json, logs).
NOTHING_CLOSE = N_("Nothing in the documents is close enough to this question.")
NOT_SUPPORTED = N_("I answer questions in English and Danish.")
NO_QUESTION = N_("Ask me a question about the docs.")
NO_STATEMENT = N_("The matching passages hold nothing to quote.")
NO_DOCUMENTS = N_("There are no documents in {where}.")
_DOCS_SAY = N_("The docs say:")
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


def unsearched(a: Answer) -> str | None:
    """What a refusal that never searched says instead of "I couldn't find this in the docs"
    (Footnote did not look): a message with no words, or in a language without support
    (then in both languages it speaks). None for a refusal after a search."""
    if a.reason.startswith("the question is in "):
        return f"{say('en', NOT_SUPPORTED)} {say('da', NOT_SUPPORTED)}"
    if a.reason.startswith("there is no question"):
        return say(a.language, NO_QUESTION)
    return None


def refusal_reason(a: Answer) -> str:
    """Why it was refused, in the asker's language: the technical reason in English, a
    sentence from the catalogue in another language."""
    lang = a.language
    if lang in (None, "en"):
        return a.reason
    if a.reason.startswith("no documents in ") and a.collection:
        return say(lang, NO_DOCUMENTS, where=a.collection)
    if a.reason.startswith("the matching passages hold"):
        return say(lang, NO_STATEMENT)
    return say(lang, NOTHING_CLOSE)


def answer_words(a: Answer) -> str:
    """The answer's text, its "The docs say:" in the asker's language."""
    if a.language not in (None, "en") and a.text.startswith(DOCS_SAY):
        return say(a.language, _DOCS_SAY) + a.text[len(DOCS_SAY) :]
    return a.text


def answer_text(a: Answer) -> str:
    """What the Slack message shows, as plain terminal text."""
    lang = a.language
    if a.refused and (said := unsearched(a)) is not None:
        return said
    if a.refused:
        lines = [f"{say(lang, REFUSAL_HEADLINE)} ({refusal_reason(a)})"]
        if a.nearest:
            lines.append(say(lang, CLOSEST_DOCUMENTS, names=", ".join(a.nearest)))
        return "\n".join(lines)
    if a.pointers:
        lines = [f"{say(lang, _pointer_headline(a))} {say(lang, POINTER_INTRO)}"]
        for c in a.pointers:
            lines.append(f"[{c.n}] {_label(c)}  {c.url}")
            lines.append(f"    “{shorten(c.quote, POINTER_CHARS)}”")
        return "\n".join(lines)
    lines = [answer_words(a), ""]
    if a.learned:
        lines[1:1] = [say(lang, LEARNED_NOTE)]
    title = say(lang, SOURCES) if a.citations else say(lang, SOURCES_CONSULTED)
    lines.append(title + ":")
    for c in a.citations or a.consulted:
        lines.append(f"[{c.n}] {_label(c)}  {c.url}")
        lines.append(f"    “{shorten(c.quote, EXCERPT_CHARS)}”")
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
    lang = a.language
    blocks: list[dict[str, Any]] = []
    if a.refused and (said := unsearched(a)) is not None:
        blocks.append(_section(escape(said)))
    elif a.refused:
        headline = f":mag: *{say(lang, REFUSAL_HEADLINE)}* _{say(lang, NOT_AN_ANSWER)}_"
        blocks.append(_section(f"{headline}\n{escape(refusal_reason(a))}"))
        if a.nearest:
            blocks.append(_context(say(lang, CLOSEST_DOCUMENTS, names=", ".join(escape(n) for n in a.nearest))))
    elif a.pointers:
        blocks += pointer_blocks(a, feedback_id)
    else:
        blocks.append(_section(escape(answer_words(a))))
        shown = a.citations or a.consulted
        blocks.append(_section(f"*{say(lang, SOURCES)}*" if a.citations else f"*{say(lang, SOURCES_CONSULTED)}*"))
        for c in shown:
            blocks.append(_section(f"[{c.n}] {_link(c.url, _label(c))}\n> {_excerpt(c)}"))
    if a.learned and a.answered:
        blocks.append(_context(f":white_check_mark: {say(lang, LEARNED_NOTE)}"))
    if collection:
        blocks.append(_context(say(lang, SEARCHED, where=escape(collection))))
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


def _pointer_headline(a: Answer) -> str:
    """Why passages are shown rather than an answer: search was unsure, or the model failed."""
    return MODEL_FAILED_HEADLINE if a.outcome is Outcome.MODEL_FAILED else POINTER_HEADLINE


def pointer_blocks(a: Answer, feedback_id: str | None) -> list[dict[str, Any]]:
    """The closest passages, each with its quote, its link and (with ``feedback_id``) a
    "This answers it" button; then one "None of these" for the message. A button carries only
    the id of what was shown and the pointer's number: what they mean is kept server-side."""
    lang = a.language
    blocks = [_section(f":mag: *{say(lang, _pointer_headline(a))}* {say(lang, POINTER_INTRO)}")]
    for c in a.pointers:
        block = _section(f"[{c.n}] {_link(c.url, _label(c))}\n> {_excerpt(c, POINTER_CHARS)}")
        if feedback_id:
            block["accessory"] = _button(say(lang, CONFIRM_BUTTON), "pointer_confirm", f"{feedback_id}#{c.n}")
        blocks.append(block)
    if feedback_id:
        none = _button(say(lang, NONE_BUTTON), "pointer_none", feedback_id)
        blocks.append({"type": "actions", "block_id": "pointers", "elements": [none]})
    return blocks


def _excerpt(c: Citation, limit: int = EXCERPT_CHARS) -> str:
    """An excerpt on one line, the sentence it is about (a pointer's best, a citation's
    evidence) in bold (Slack mrkdwn), escaped; one without a best sentence within ``limit``."""
    if c.best is None or not c.start <= c.best[0] < c.best[1] <= c.end:
        return escape(shorten(c.quote, limit))
    a, b = c.best[0] - c.start, c.best[1] - c.start
    parts = [" ".join(x.split()) for x in (c.quote[:a], c.quote[a:b], c.quote[b:])]
    bold = f"*{escape(parts[1])}*" if parts[1] else ""
    return " ".join(x for x in (escape(parts[0]), bold, escape(parts[2])) if x)


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text[:SECTION_LIMIT]}]}


def fallback_text(a: Answer) -> str:
    """Notification text (shown where blocks are not): escaped, short."""
    if a.refused:
        return escape(unsearched(a) or say(a.language, REFUSAL_HEADLINE))
    return escape(say(a.language, _pointer_headline(a)) if a.pointers else shorten(answer_words(a), 300))


HEALTH = N_("Index health")
HEALTH_IN = N_("Index health in {where}")
COUNTS = N_("{indexed} indexed · {failed} failed · {stale} stale · {chunks} chunks")
LAST_SYNC = N_("Last sync: {when}, took {seconds}s")
SYNC_FAILED_SCOPED = N_("Last sync failed (`footnote status` and the server's log say why)")
SYNC_FAILED = N_("Last sync failed: {why}")
NEXT_SYNC = N_("Next sync: {when}")
GATE = N_("Gate: answers at ≤ {answer}, points at the closest passages up to {point}")
FAILED = N_("Failed")
STALE = N_("Stale (rebuilt by the next sync)")
AND_MORE = N_("…and {n} more (`footnote status` lists all)")


def status_text(h: Health, lang: str | None = None) -> str:
    """Index health as mrkdwn, for `/ask status` and the App Home tab (``h`` holds only the
    documents the asker's channel may search)."""
    names = [escape(f.strip("/") + "/") if f.strip("/") else say(lang, ALL_DOCUMENTS) for f in h.scope or ()]
    title = say(lang, HEALTH) if h.scope is None else say(lang, HEALTH_IN, where=", ".join(names))
    lines = [
        f"*{title}* {'✅' if h.ok else '⚠️'}",
        say(lang, COUNTS, indexed=h.indexed, failed=len(h.failed), stale=len(h.stale), chunks=h.chunks),
    ]
    if h.last_sync_at is not None:
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(h.last_sync_at))
        lines.append(say(lang, LAST_SYNC, when=when, seconds=f"{h.last_sync_seconds or 0:.1f}"))
    if h.last_sync_error and h.scope is not None:  # its reason may name what lies outside the scope
        lines.append(say(lang, SYNC_FAILED_SCOPED))
    elif h.last_sync_error:
        lines.append(say(lang, SYNC_FAILED, why=escape(h.last_sync_error)[:300]))
    if h.next_sync is not None:
        lines.append(say(lang, NEXT_SYNC, when=h.next_sync.strftime("%Y-%m-%d %H:%M %Z").strip()))
    if h.calibration is not None:
        answer, point = h.calibration.thresholds
        english = lang in (None, "en")  # in English, the calibration's whole summary
        gate = say(lang, GATE, answer=f"{answer:.3f}", point=f"{point:.3f}")
        lines.append(f"Gate: {h.calibration.summary()}" if english else gate)
    for title, items in ((say(lang, FAILED), h.failed), (say(lang, STALE), h.stale)):
        if items:
            lines.append(f"*{title}:*")
            shown = list(items.items())[:15]
            lines += [f"• `{escape(p)}`: {escape(r)}" for p, r in shown]
            if len(items) > len(shown):
                lines.append(say(lang, AND_MORE, n=len(items) - len(shown)))
    return "\n".join(lines)


def status_blocks(h: Health, lang: str | None = None) -> list[dict[str, Any]]:
    text = status_text(h, lang)
    return [_section(text[i : i + SECTION_LIMIT]) for i in range(0, len(text), SECTION_LIMIT)][:MAX_BLOCKS]
