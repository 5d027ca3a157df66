"""What a question asks for, and whether the sentences an answer cites can give it.

Two kinds of question name the kind of their answer (the classic answer-type check of
question answering, kept to what is unambiguous):

- an **amount**: "How much can I spend in my sandbox account?", "What rate limit should our
  API enforce?", "Hvor mange dage …?". Its answer is a number, a count, a share or a span of
  time; a cited sentence states one when it holds a number or a number or time word;
- **one of two alternatives**: "Should the contract be firm-fixed-price or
  time-and-materials?". Its answer names one of them.

When the cited sentences give neither, they are on the question's topic without answering
it, and the small model copies them anyway: :func:`unanswered` says why, and the answer
service points at the closest passages instead (no claim shown as an answer). On guides,
the unanswerable questions answered in spite of the gate and the support check were of
these kinds ("What rate limit should our public API enforce per API key?" answered with a
sentence about unauthenticated access); ``docs/measurements.md`` has the figures.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from retrieval.index import DANISH_STOPWORDS, STOPWORDS

# The interrogatives that ask for an amount, in each language Footnote reads.
_ASKS = re.compile(
    r"\bhow (?:much|many|long|often|frequently|far|fast|quickly|soon|early|big|large|high|old)\b"
    r"|\bwhat (?:rate|percentage|percent|share|amount|number|size|limit|price|fee)\b"
    r"|\bhvor (?:meget|mange|længe|tit|ofte|stor|store|stort|lang|langt|gammel)\b"
    r"|\bhvilk(?:et|en) (?:beløb|sats|procent|grænse|pris)\b",
    re.IGNORECASE,
)

# Words that state an amount, besides a number (a digit no letter comes right before: "SEV1"
# and "GPT3" name things). English "one" counts unless it picks one of several ("one of your
# goals"); the Danish articles "en" and "et" never do (only "én", "ét"). Words another
# language spells the same are kept to their own language: Danish "to" (two), "fire" (four)
# and "time" (hour) are English words too.
_NUMBER = r"(?<![^\W\d_])\d"
_STATES = {
    "en": re.compile(
        _NUMBER + r"|\bone\b(?!\s+of\b)|\b(?:once|twice|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
        r"|fifteen|twenty|thirty|forty|fifty|hundred|thousand|million|billion|half|dozen|double"
        r"|daily|weekly|monthly|yearly|annual|annually|hourly|quarterly"
        r"|seconds?|minutes?|hours?|days?|weeks?|months?|years?|percent)\b",
        re.IGNORECASE,
    ),
    "da": re.compile(
        _NUMBER + r"|\b(?:én|ét|to|tre|fire|fem|seks|syv|otte|ni|ti|elleve|tolv|femten|tyve|tredive|fyrre|halvtreds"
        r"|hundrede|tusind|million|millioner|milliard|halv|halvt|halvdelen|dobbelt"
        r"|dagligt?|ugentligt?|månedligt?|årligt?|kvartalsvis|sekund(?:er)?|minut(?:ter)?|timer?|dage?"
        r"|uger?|måned(?:er)?|år|procent)\b",
        re.IGNORECASE,
    ),
}

# "A or B?" at the end of a question: the word before "or" and the first content word after.
_CHOICE = re.compile(r"([\w-]+)\s+(?:or|eller)\s+((?:[\w-]+\s+){0,3}?[\w-]+)\s*\?\s*$", re.IGNORECASE)
# An "or" that opens the question rather than offering a second answer: "… or not?"
_OPEN = frozenset({"not", "ikke", "no", "nej", "else", "andet", "other", "otherwise", "something", "anything", "both"})
_STOP = STOPWORDS | DANISH_STOPWORDS


def asks_for_amount(*questions: str) -> bool:
    """Whether any of ``questions`` (a question and its translation) asks how much, how many,
    how long or how often."""
    return any(_ASKS.search(q) for q in questions)


def states_amount(texts: Iterable[tuple[str, str | None]]) -> bool:
    """Whether any of ``texts`` ((sentence, its document's language or None)) states an
    amount; a sentence of a language without a list is read with every list."""
    for text, language in texts:
        patterns = [_STATES[language]] if language in _STATES else _STATES.values()
        if any(p.search(text) for p in patterns):
            return True
    return False


def alternatives(question: str) -> tuple[str, str] | None:
    """The two answers ``question`` offers ("… firm-fixed-price or time-and-materials?"), or
    None when it offers none (or only "… or not?")."""
    m = _CHOICE.search(question.strip())
    if m is None:
        return None
    first = m.group(1).lower()
    second = next((w for w in m.group(2).lower().split() if w not in _STOP), None)
    if second is None or first in _STOP or second in _OPEN or first in _OPEN:
        return None
    return first, second


def names_either(choice: tuple[str, str], texts: Iterable[str]) -> bool:
    """Whether any of ``texts`` names either alternative (hyphens and case aside)."""
    words = [" ".join(w.replace("-", " ").split()) for w in choice]
    for text in texts:
        flat = " " + " ".join(re.sub(r"[\W_]+", " ", text.lower()).split()) + " "
        if any(f" {w} " in flat for w in words):
            return True
    return False


def unanswered(asked: str, cited: Sequence[tuple[str, str | None]], original: str = "") -> str | None:
    """Why the ``cited`` sentences ((sentence, its document's language)) cannot answer what
    ``asked`` (the question in the documents' language) asks for; None when they may.
    ``original`` is the question as the asker wrote it, when it was translated: its
    interrogative counts too, its alternatives do not (they are in another language)."""
    if asks_for_amount(asked, original) and not states_amount(cited):
        return "the closest passages state no amount, and the question asks for one"
    choice = alternatives(asked)
    if choice is not None and not names_either(choice, (text for text, _ in cited)):
        return f"the closest passages name neither {choice[0]} nor {choice[1]}, and the question asks which"
    return None
