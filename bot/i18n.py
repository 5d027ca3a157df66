"""Every string Footnote shows people, in English and Danish: one gettext catalogue, through Babel.

The English text is the message id, marked with :func:`N_` where it is defined (so
``pybabel extract`` finds it); :func:`say` looks it up in the asker's language and fills in
its ``{placeholders}``. The Danish catalogue is ``bot/locale/da/LC_MESSAGES/footnote.po``,
compiled to the ``.mo`` beside it (``python -m bot.i18n`` compiles it again; a test checks
the two agree and that every marked message is translated). A language without a
catalogue reads English.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from babel.support import NullTranslations, Translations

from retrieval.models import SUPPORTED

DOMAIN = "footnote"
LOCALES = Path(__file__).resolve().parent / "locale"
ENGLISH = "en"


def N_(message: str) -> str:
    """Marks a message for the catalogue where it is defined; translated when shown (:func:`say`)."""
    return message


@cache
def _translations(language: str) -> NullTranslations:
    if language == ENGLISH:
        return NullTranslations()
    return Translations.load(str(LOCALES), [language], DOMAIN)


def say(language: str | None, message: str, **values: object) -> str:
    """``message`` in ``language`` (English when None or without a catalogue), its placeholders filled."""
    text = _translations(language or ENGLISH).gettext(message)
    return text.format(**values) if values else text


def say_n(language: str | None, one: str, many: str, n: int, **values: object) -> str:
    """The singular or plural form for ``n`` (``{n}`` is filled too); both are messages of their own,
    as English and Danish both have one form for 1 and another for every other number."""
    return say(language, one if n == 1 else many, n=n, **values)


def accepted(header: str | None) -> str | None:
    """The language Footnote speaks that a browser's ``Accept-Language`` prefers ("da-DK,da;q=0.9,
    en;q=0.8" → "da"); None when it names neither."""
    ranked: list[tuple[float, int, str]] = []
    for i, part in enumerate((header or "").split(",")):
        tag, _, params = part.strip().partition(";")
        q = 1.0
        if params.strip().startswith("q="):
            try:
                q = float(params.strip()[2:])
            except ValueError:
                q = 0.0
        base = tag.strip().lower().split("-")[0]
        if base in SUPPORTED and q > 0:
            ranked.append((-q, i, base))
    return min(ranked)[2] if ranked else None


def compile_catalogues() -> list[Path]:
    """Compile every ``.po`` under ``LOCALES`` to its ``.mo`` (what ships); the paths written."""
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    written = []
    for po in sorted(LOCALES.glob(f"*/LC_MESSAGES/{DOMAIN}.po")):
        with po.open("rb") as f:
            catalog = read_po(f)
        mo = po.with_suffix(".mo")
        with mo.open("wb") as f:
            write_mo(f, catalog)
        written.append(mo)
    return written


if __name__ == "__main__":
    for path in compile_catalogues():
        print(f"Wrote {path}")
