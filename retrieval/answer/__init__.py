"""Answers: from a question to a reply whose every sentence is backed by what it cites.

The service searches, asks the gate, shows the model numbered source sentences
(``evidence``) in a fixed prompt and grammar (``prompt``), checks every sentence of the
reply against the sentence it cites (``support``) and attaches document, section, quote
and a signed link with a locator (``citations``, ``links``). The model writes only the
numbers. When not sure, the service points at the closest passages instead (``pointers``). ``probe`` is the answer format's probe that times a model's weights.
"""

from __future__ import annotations

from retrieval.answer.citations import BROADCAST, Citation, Linker, find_passage, locator_for, neutralise
from retrieval.answer.links import LinkSigner, SignLink, VerifyLink, load_secret, text_digest
from retrieval.answer.pointers import EXCERPT_CHARS, POINTER_CHARS, point_at
from retrieval.answer.probe import ANSWER_PROBE
from retrieval.answer.rewrite import Rewrite, Rewriter, widen
from retrieval.answer.service import DOCS_SAY, Answer, AnswerCheck, AnswerService, Outcome, Quoted, Searched
from retrieval.answer.support import content_words
from retrieval.answer.translate import Translate, Translator

__all__ = [
    "ANSWER_PROBE",
    "BROADCAST",
    "DOCS_SAY",
    "EXCERPT_CHARS",
    "POINTER_CHARS",
    "Answer",
    "AnswerCheck",
    "AnswerService",
    "Citation",
    "LinkSigner",
    "Linker",
    "Outcome",
    "Quoted",
    "Rewrite",
    "Rewriter",
    "Searched",
    "SignLink",
    "Translate",
    "Translator",
    "VerifyLink",
    "content_words",
    "find_passage",
    "load_secret",
    "locator_for",
    "neutralise",
    "point_at",
    "text_digest",
    "widen",
]
