"""The answer format: its byte automaton, the constrained greedy decoder built on it,
and (with the real model) agreement between the automaton and the GBNF grammar."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.answer.prompt import INSTRUCTIONS, AnswerFormat
from retrieval.models.llm import ConstrainedGreedy, LanguageModel
from testkit.fakes import ToyVocabulary

FMT = AnswerFormat(4)


def _accepts(text: str, fmt: AnswerFormat = FMT) -> bool:
    cur = fmt.start().feed(text.encode())
    return cur is not None and cur.can_end


@pytest.mark.parametrize(
    "text",
    [
        "[0]",
        "[2] It takes 5 minutes.",
        "[1] Version 2.5 is out.\n[4] Über alles!",
        "[1] One.\n[2] Two.\n[3] Three?",
        "[3] .5 of them.",
        "[1] Data (dvs. data, der er ældre) fjernes.",  # an abbreviation goes on in lower case
        "[1] Feltet Registreringsnr. på siden Virksomhedsoplysninger.",  # å: two bytes
        "[2] Caches, e.g. the CDN, expire.\n[1] Fra 1. juli.",
        "[1] Se pkt. 5 i aftalen.",
    ],
)
def test_the_format_accepts_what_the_grammar_allows(text: str) -> None:
    assert _accepts(text)


@pytest.mark.parametrize(
    "text",
    [
        "[5] Not a source number.",  # only 1..4 exist
        "[9] Nope.",
        "[01] Leading zero.",
        "[0] Something.",  # [0] stands alone
        "It is 5 minutes.",  # no number
        "[1] Two sentences. On one line.",
        "[1] Vælg i rapporten. hvis du vil.",  # after a word that abbreviates nothing ". " ends it
        "[1] Se nr. Øh, to sætninger.",  # a capital after an abbreviation starts one, in Danish too
        "[1] Is it nr? and one line.",  # only a "." abbreviates
        "[1] Se nr.  to mellemrum.",
        "[1] That is, i.e. g. no.",  # "e. g" is no "e.g": the space counts
        "[1] No stop at the end",
        "[1] One.\n[2] Two.\n[3] Three.\n[4] Four.",  # three lines at most
        "[1] One.\n[0]",  # [0] only as the whole answer
        "[1]No space.",
        "[1] A [2] inside.",
        "[1] .",  # a stop needs a character before it
    ],
)
def test_the_format_rejects_what_the_grammar_forbids(text: str) -> None:
    assert not _accepts(text)


def test_numbers_above_nine_are_read_digit_by_digit() -> None:
    fmt = AnswerFormat(12)
    assert _accepts("[12] Twelve.", fmt) and _accepts("[1] One.", fmt) and not _accepts("[13] No.", fmt)
    assert fmt.start().feed(b"[1") is not None  # a prefix of 1, 10, 11, 12


def _decode(pieces: list[bytes], score_rows: list[list[float]]) -> list[int]:
    greedy = ConstrainedGreedy(FMT.start(), ToyVocabulary(pieces))
    chosen = []
    for row in score_rows:
        out = greedy(None, np.array(row, dtype=np.float32))
        assert np.isfinite(out).sum() == 1  # exactly one token left for greedy to take
        chosen.append(int(np.argmax(out)))
    return chosen


def test_constrained_greedy_takes_the_best_token_the_format_admits() -> None:
    vocab = [b"[", b"9", b"2", b"]", b" Yes", b".", b"<eos>", b"Hello", b"] Yes"]
    rows = [
        [0, 0, 0, 0, 0, 0, 0, 9, 0],  # "Hello" scores best but a line starts with "["
        [0, 9, 5, 0, 0, 0, 0, 0, 0],  # "9" is not a source number: "2"
        [0, 0, 0, 1, 0, 0, 0, 0, 3],  # "] Yes" spans two states at once
        [0, 0, 0, 0, 0, 1, 9, 0, 0],  # the end comes too early: "."
        [0, 0, 0, 0, 0, 0, 1, 0, 0],  # now it may end
    ]
    assert [vocab[t] for t in _decode(vocab, rows)] == [b"[", b"2", b"] Yes", b".", b"<eos>"]


def test_constrained_greedy_looks_beyond_its_shortlist() -> None:
    vocab = [b"x%d" % i for i in range(200)] + [b"["]
    scores = [float(200 - i) for i in range(200)] + [-5.0]  # "[" is the worst-scored token
    assert _decode(vocab, [scores]) == [200]


SOURCES = (
    "SOURCES\nSource: Runbook > Paging\n"
    "[1] For a SEV1 incident the on-call engineer must acknowledge the page within 5 minutes.\n"
    "[2] Expense claims must be submitted within 30 days of the purchase.\n\nQUESTION\n"
)


DANISH_SOURCES = (
    "SOURCES\n"
    "[1] Data, der ikke er lovpligtige (dvs. data, der er ældre end fem år), fjernes automatisk.\n"
    "[2] Indtast CVR-nummeret i feltet Registreringsnr. på siden Virksomhedsoplysninger.\n\nQUESTION\n"
)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sources", "question"),
    [
        (SOURCES, "How fast must a SEV1 page be acknowledged?"),
        (SOURCES, "What is the capital of Peru?"),
        (DANISH_SOURCES, "Hvilke data fjernes automatisk?"),
        (DANISH_SOURCES, "Hvor indtaster man CVR-nummeret?"),
    ],
)
def test_the_automaton_decodes_exactly_like_the_gbnf_grammar(
    real_model: LanguageModel, sources: str, question: str
) -> None:
    fmt = AnswerFormat(2)
    msgs = [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": sources + question}]
    real_model.complete(msgs, 48, grammar=fmt.gbnf())  # the two runs compared start from one cache state
    by_grammar = real_model.complete(msgs, 48, grammar=fmt.gbnf())
    by_automaton = real_model.complete(msgs, 48, grammar=fmt)
    assert by_automaton == by_grammar and _accepts(by_automaton, fmt)
