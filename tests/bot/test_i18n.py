"""What Footnote says, in English and Danish: one catalogue, complete, and compiled as shipped."""

from __future__ import annotations

import io
from pathlib import Path

from babel.messages.extract import extract_from_dir
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

from bot.i18n import DOMAIN, LOCALES, say, say_n
from bot.render import CONFIRM_BUTTON, NONE_BUTTON, REFUSAL_HEADLINE

BOT = Path(__file__).resolve().parents[2] / "bot"


def _danish() -> Path:
    return LOCALES / "da" / "LC_MESSAGES" / f"{DOMAIN}.po"


def test_every_marked_message_has_a_danish_translation() -> None:
    marked = {m[2] for m in extract_from_dir(str(BOT), keywords={"N_": None}) if isinstance(m[2], str)}
    with _danish().open("rb") as f:
        catalog = read_po(f)
    translated = {m.id for m in catalog if m.id and m.string}
    assert marked and marked <= translated, sorted(marked - translated)
    for m in catalog:  # every {placeholder} of the English is in the Danish, and nothing else
        if m.id and "{" in str(m.id):
            assert sorted(_fields(str(m.id))) == sorted(_fields(str(m.string))), m.id


def test_the_shipped_mo_is_the_po_compiled() -> None:
    with _danish().open("rb") as f:
        catalog = read_po(f)
    buf = io.BytesIO()
    write_mo(buf, catalog)
    assert _danish().with_suffix(".mo").read_bytes() == buf.getvalue(), "run `python -m bot.i18n`"


def test_english_is_the_message_itself_and_danish_comes_from_the_catalogue() -> None:
    assert say("en", REFUSAL_HEADLINE) == say(None, REFUSAL_HEADLINE) == REFUSAL_HEADLINE
    assert say("da", REFUSAL_HEADLINE) == "Jeg kunne ikke finde det i dokumenterne."
    assert say("da", CONFIRM_BUTTON) != CONFIRM_BUTTON and say("da", NONE_BUTTON) == "Ingen af dem"
    assert say("fr", REFUSAL_HEADLINE) == REFUSAL_HEADLINE  # no catalogue: English
    one, many = "{n} more group", "{n} more groups"
    assert say_n("en", one, many, 1) == "1 more group" and say_n("en", one, many, 2) == "2 more groups"


def _fields(text: str) -> list[str]:
    import string

    return [f for _, f, _, _ in string.Formatter().parse(text) if f]
