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
Asked with a system message and three examples (:func:`translation_messages`) instead of
one instruction, the 0.5B reached 0.906 and 0.594 there, and on danish-dev's documents asked
in English (``bench/data/crosslang/danish-dev-en``) 0.562 and 0.438 instead of 0.500 and 0.219.
A translation that fails (a slow model, an error, an empty reply) is a value, ``None``:
the question is searched as asked.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from retrieval.answer.support import numbers
from retrieval.errors import FootnoteError
from retrieval.models import LanguageModel, Message

log = logging.getLogger(__name__)

Translate = Callable[[str, str], str | None]  # (text, target language) -> the text in it, or None

# Who the model is (a system message), then three examples of the task as earlier turns of
# the conversation (a question, a chatty message, a statement: what is translated), each in
# the other language and its translation. The instructions and examples never change, and
# the in-process model keeps their evaluated start (``retrieval.models.llm``), though an
# answer's prompt comes between a question's translation and the answer's: without it the
# examples cost about 0.45 s a translation (docs/measurements.md, "A translation asked with
# examples", "Each kind of prompt keeps its start"). Asked in one user message with "Keep names, product
# names and technical terms as they are", the 0.5B answered the question instead of
# translating it ("… er: /path/to/xml/file.xml"), or repeated "Denne besked kan oversættes
# til:", and left a Danish drive's terms in English: the examples stop both. The examples
# are our own, on no corpus's topic.
SYSTEM = {
    "en": "You translate messages from Danish into English. Reply with the English translation of the message only: "
    "never answer it, never explain it. Keep names and product names as they are.",
    "da": "You translate messages from English into Danish. Reply with the Danish translation of the message only: "
    "never answer it, never explain it. Keep names and product names as they are.",
}
_EXAMPLES = (
    ("How many vacation days do new employees get in their first year?",
     "Hvor mange feriedage får nye medarbejdere i deres første år?"),
    ("hey, where do I hand in my badge when I leave? reception says they don't take them",
     "hej, hvor afleverer jeg mit adgangskort, når jeg stopper? receptionen siger, de ikke tager imod dem"),
    ("The meeting rooms on the third floor can be booked for at most two hours.",
     "Mødelokalerne på tredje sal kan højst bookes i to timer."),
)  # fmt: skip
EXAMPLES = {"da": _EXAMPLES, "en": tuple((da, en) for en, da in _EXAMPLES)}


def translation_messages(text: str, target: str) -> list[Message]:
    """The conversation that asks for ``text`` in ``target`` (a language in :data:`SYSTEM`)."""
    out: list[Message] = [{"role": "system", "content": SYSTEM[target]}]
    for source, translated in EXAMPLES[target]:
        out += [{"role": "user", "content": source}, {"role": "assistant", "content": translated}]
    return [*out, {"role": "user", "content": " ".join(text.split())}]


def translation_budget(text: str, max_tokens: int = 128) -> int:
    """The tokens a translation of ``text`` may take. A translation is about as long as its text
    (about 3.5 characters a token); a model that goes on past that is writing something else,
    and every token is time."""
    return min(max_tokens, 16 + int(len(text) / 2.5))


def passes_for(source: str, translation: str | None, target: str, detect: Callable[[str], str | None]) -> bool:
    """Whether ``translation`` passes for ``source`` in ``target``: in that language (or too
    short to tell), with the same numbers, of a like length. Only the source was checked
    against its evidence, so its translation must pass for it; the 0.5B, asked for Danish,
    sometimes writes English (often the source copied), German or a note about its task."""
    if not translation or not 0.5 <= len(translation) / max(1, len(source)) <= 2.0:
        return False
    return detect(translation) in (target, None) and numbers(source) <= numbers(translation)


class Translator:
    """Asks a language model for ``text`` in a target language; ``None`` when it cannot."""

    def __init__(self, model: Callable[[], LanguageModel], max_tokens: int = 128, deadline_s: float = 10.0) -> None:
        self._model = model
        self.max_tokens = max_tokens
        self.deadline_s = deadline_s

    def __call__(self, text: str, target: str) -> str | None:
        if target not in SYSTEM or not text.strip():
            return None
        try:
            out = self._model().complete(
                translation_messages(text, target),
                translation_budget(text, self.max_tokens),
                deadline_s=self.deadline_s,
                drafts=False,
            )
        except FootnoteError as exc:  # the question is searched as asked
            log.warning("could not translate a question into %s: %s", target, exc)
            return None
        cleaned = " ".join(out.strip().strip('"“”').split())
        for label in ("Translation:", "Oversættelse:", "Message:", "Besked:"):
            if cleaned.startswith(label):
                cleaned = cleaned[len(label) :].strip()
        return cleaned or None
