"""The English-Danish glossary: phrases before words, stems, only words the drive uses, and the
packaged file checked before it is read."""

from __future__ import annotations

import hashlib

import pytest

from retrieval.errors import ConfigError
from retrieval.search import Glossary, packaged_glossary
from retrieval.search.glossary import read_glossary

PAIRS = [
    ("invoice", "regning"),
    ("invoice", "faktura"),
    ("value added tax", "moms"),
    ("tax", "skat"),
    ("deadline", "frist"),
    ("the", "den"),
    ("keep", "beholde"),
]


def test_a_phrase_is_glossed_before_its_words_and_words_by_their_stems() -> None:
    g = Glossary.from_pairs(PAIRS)
    got = g.glosses("When is the value added tax on our invoices due? Deadline?", "en", "da", lambda w: True)
    assert got == ["moms", "regning", "frist"]  # "tax" is part of the phrase; "the" is a function word


def test_only_translations_the_drive_uses_are_searched_and_each_word_gets_the_first() -> None:
    drive = {"faktura", "skat", "frist"}
    assert Glossary.from_pairs(PAIRS).glosses("invoices and taxes", "en", "da", drive.__contains__) == [
        "faktura",
        "skat",
    ]
    two = Glossary.from_pairs(PAIRS, per_word=2)
    assert two.glosses("invoice", "en", "da", lambda w: True) == ["regning", "faktura"]


def test_the_glossary_reads_both_ways_and_knows_no_other_language() -> None:
    g = Glossary.from_pairs(PAIRS)
    assert g.glosses("Hvornår er fristen for fakturaen?", "da", "en", lambda w: True) == ["deadline", "invoice"]
    assert g.glosses("invoice", "en", "de", lambda w: True) == []


def test_the_packaged_glossary_knows_a_team_s_words() -> None:
    g = packaged_glossary()
    assert "moms" in g.glosses("Where do I report VAT?", "en", "da", lambda w: True)
    assert "deadline" in g.glosses("Hvad er fristen?", "da", "en", lambda w: True)


def test_a_damaged_glossary_is_a_clear_error() -> None:
    raw = b"invoice\tregning\n"
    assert read_glossary(raw, hashlib.sha256(raw).hexdigest()).glosses("invoice", "en", "da", lambda w: True)
    with pytest.raises(ConfigError, match="damaged"):
        read_glossary(raw + b"x", hashlib.sha256(raw).hexdigest())
