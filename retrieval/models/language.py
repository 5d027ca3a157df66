"""Which language a text is in, offline: py3langid (langid.py's model, packaged, numpy only).

Footnote supports English and Danish. A text is classified among the languages the model
knows; Norwegian and Swedish, which it confuses with Danish in short messages (4 of 64
hand-translated Danish questions on dev read as Norwegian), count as Danish. A text in
another language the model is sure of (German, French, …) is reported as that language,
so the caller can say it is not supported; a text too short to tell (a few characters,
emoji, a code) is ``None`` and the caller falls back to the drive's language. So is a text
that is not written in words: base64, hashes or a dump of identifiers, whose letters langid
would still place in some language (a 40 MB base64 file read as Danish, and moved a whole
English drive to the multilingual model).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from functools import cached_property
from typing import Any

SUPPORTED = ("en", "da")
_AS_DANISH = frozenset({"no", "nn", "sv"})
# Languages whose verdict, when langid is sure of it, means "not supported" rather than a guess.
_KNOWN = ("en", "da", "no", "nn", "sv", "de", "nl", "fr", "es", "it", "pt", "pl", "fi", "is")
_LETTERS = re.compile(r"[^\W\d_]", re.UNICODE)
MIN_LETTERS = 12  # fewer letters than this: nothing reliable to tell
# The least share of a text's letters standing in words (a run of letters between spaces and
# punctuation) for it to be language. Prose is far above it: the lowest of the development
# corpora's documents is 0.48 (a page of navigation labels); base64 is 0.
MIN_WORDED = 0.2
_EDGES = ".,;:!?()[]{}<>\"'“”‘’«»*_`#|/-"


@dataclass(frozen=True)
class Detected:
    language: str | None  # an ISO 639-1 code; None: too short to tell
    confidence: float

    @property
    def supported(self) -> bool:
        return self.language is None or self.language in SUPPORTED


class LanguageDetector:
    """Thread-safe; the model (4.5 MB) loads on first use, in under a second."""

    def __init__(self, sure: float = 0.9) -> None:
        self.sure = sure  # how sure langid must be of an unsupported language to say so
        self._lock = threading.Lock()

    @cached_property
    def _model(self) -> Any:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier

        ident = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        ident.set_languages(list(_KNOWN))
        return ident

    def detect(self, text: str) -> Detected:
        """The language of ``text`` (the first 20,000 characters are read)."""
        sample = text[:20_000]
        letters = len(_LETTERS.findall(sample))
        if letters < MIN_LETTERS or worded(sample) < MIN_WORDED * letters:
            return Detected(None, 0.0)
        with self._lock:
            ranked = self._model.rank(sample)
        scores = dict(ranked)
        best, p = ranked[0]
        if best in _AS_DANISH:
            best = "da"
        if best not in SUPPORTED and p < self.sure:
            # Not sure of an unsupported language: the likelier of the supported ones.
            best = (
                "da"
                if scores.get("da", 0.0) + sum(scores.get(x, 0.0) for x in _AS_DANISH) > scores.get("en", 0.0)
                else "en"
            )
        return Detected(best, float(p))


def worded(text: str) -> int:
    """The letters of ``text`` that stand in words: whitespace-separated tokens that are
    letters only once their edge punctuation is off (an apostrophe or hyphen inside counts)."""
    n = 0
    for token in text.split():
        word = token.strip(_EDGES)
        if word and word.replace("'", "").replace("’", "").replace("-", "").isalpha():
            n += len(word)
    return n
