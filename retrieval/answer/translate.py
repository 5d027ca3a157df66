"""Translation: a question asked in another language than the drive's is searched in the drive's.

Search, the gate and the support check all work within one language (BM25's words,
MiniLM, the coverage term, the calibration's probes), and a small model answers best
from sources in the language it is asked in. So a Danish question to an English drive
is translated into English by a packaged model first; the drive answers it as it would
an English one, the answer's checked sentences are translated back into Danish, and the
quoted evidence stays verbatim in English. Measured on dev's documents with its 64
questions translated into Danish by hand (``bench/data/crosslang/dev-da``): R@4 of the
direct questions 0.625 untranslated, 0.906 translated by the packaged 0.5B and 0.969 by
the 1.5B (English as asked: 0.969); of the chatty ones 0.219, 0.438 and 0.625 (0.750).
A translation that fails (a slow model, an error, an empty reply) is a value, ``None``:
the question is searched as asked.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from retrieval.errors import FootnoteError
from retrieval.models import LanguageModel

log = logging.getLogger(__name__)

Translate = Callable[[str, str], str | None]  # (text, target language) -> the text in it, or None

PROMPTS = {
    "en": "Translate this message into English. Keep names, product names and technical terms as they are. "
    "Reply with the translation only.\n\nMessage: {text}",
    "da": "Oversæt denne besked til dansk. Behold navne, produktnavne og fagudtryk som de er. "
    "Svar kun med oversættelsen.\n\nBesked: {text}",
}


class Translator:
    """Asks a language model for ``text`` in a target language; ``None`` when it cannot."""

    def __init__(self, model: Callable[[], LanguageModel], max_tokens: int = 128, deadline_s: float = 10.0) -> None:
        self._model = model
        self.max_tokens = max_tokens
        self.deadline_s = deadline_s

    def __call__(self, text: str, target: str) -> str | None:
        prompt = PROMPTS.get(target)
        if prompt is None or not text.strip():
            return None
        # A translation is about as long as its text (about 3.5 characters a token); a model
        # that goes on past that is writing something else, and every token is time.
        budget = min(self.max_tokens, 16 + int(len(text) / 2.5))
        try:
            out = self._model().complete(
                [{"role": "user", "content": prompt.format(text=" ".join(text.split()))}],
                budget,
                deadline_s=self.deadline_s,
            )
        except FootnoteError as exc:  # the question is searched as asked
            log.warning("could not translate a question into %s: %s", target, exc)
            return None
        cleaned = " ".join(out.strip().strip('"“”').split())
        for label in ("Translation:", "Oversættelse:", "Message:", "Besked:"):
            if cleaned.startswith(label):
                cleaned = cleaned[len(label) :].strip()
        return cleaned or None
