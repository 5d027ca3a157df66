"""The support check on its own: words, numbers, negation; no model, no index."""

from __future__ import annotations

import unicodedata

import numpy as np

from retrieval.answer.evidence import SourceSentence, most_relevant, sources_block
from retrieval.answer.prompt import Claim, parse_claims, visible_partial
from retrieval.answer.support import SupportConfig, check, polarity_agrees
from retrieval.types import Chunk, Hit

EXTRACTS = "Note that this pipeline works by extracting information from the provided context; it does not generate the answer."
CACHE = "If you rerun the command, the cached model will be used and there is no need to download the model again."


def _sentence(n: int, text: str, vec: list[float] | None = None) -> SourceSentence:
    chunk = Chunk(f"c{n}", "doc.md", "Transformers", "Question answering", 0, text, text, 0, len(text))
    v = np.asarray(vec, dtype=np.float32) if vec is not None else None
    return SourceSentence(n, n, Hit(chunk, 1.0, 0.1), 0, len(text), text, v)


def test_a_claim_contradicting_its_evidence_by_negation_is_not_supported() -> None:
    assert not polarity_agrees("The question-answering pipeline generates its answers.", EXTRACTS)
    assert polarity_agrees("It extracts information from the context; it does not generate the answer.", EXTRACTS)
    assert polarity_agrees("The model is not downloaded again.", CACHE)


def test_check_keeps_reattributes_and_removes() -> None:
    sents = [_sentence(1, EXTRACTS), _sentence(2, CACHE)]
    claims = [
        Claim("The pipeline extracts information from the provided context.", 2),  # mis-numbered
        Claim("The pipeline generates the answer.", 1),  # contradicts every source
        Claim("No.", 1),  # too short to check
    ]
    out = check(claims, [None, None, None], sents, SupportConfig())
    assert [(c.text, c.evidence.n, c.reattributed) for c in out.claims] == [(claims[0].text, 1, True)]
    assert out.removed == ["The pipeline generates the answer."] and out.too_short == 1 and out.reattributed == 1


ALERTS = "An established alerting system with SMS, email, and (ideally) Slack integrations,"
ANNUAL = "Årsrapporten indsendes senest fem måneder efter regnskabsårets afslutning."
MOMS = "Momsangivelsen for første kvartal sendes til Skattestyrelsen på fristdagen."
SMS = "**SMS**, which is only available through certain services - PagerDuty provides SMS, but New Relic doesn't;"


def test_a_claim_copying_two_sentences_cites_each_of_them() -> None:
    """One line of the answer format carries one number: the model glues two sentences it copies
    and cites the first. Each copied sentence is then a claim of its own, citing itself."""
    sents = [_sentence(1, ALERTS), _sentence(2, SMS), _sentence(3, CACHE)]
    glued = Claim(
        f"{ALERTS} and SMS, which is only available through certain services - PagerDuty provides SMS,"
        " but New Relic doesn't; instead it has Slack.",
        1,
    )
    out = check([glued], [None], sents, SupportConfig())
    assert [(c.evidence.n, c.text) for c in out.claims] == [
        (1, ALERTS.rstrip(",")),  # its own trailing comma would stand before the citation
        (2, "SMS, which is only available through certain services - PagerDuty provides SMS, but New Relic doesn't"),
    ]
    assert not out.removed and not out.reattributed


def test_a_source_in_decomposed_letters_reads_to_the_model_as_it_writes_them() -> None:
    """A Mac writes "å" as "a" + a combining ring (NFD). The model reads the composed letter,
    writes it, and a line gluing two such sentences is still split into one claim each."""
    nfd = [unicodedata.normalize("NFD", t) for t in (ANNUAL, MOMS)]
    sents = [_sentence(1, nfd[0]), _sentence(2, nfd[1]), _sentence(3, CACHE)]
    assert sources_block(sents).splitlines()[:2] == [f"[1] {ANNUAL}", f"[2] {MOMS}"]
    out = check([Claim(f"{ANNUAL} {MOMS}", 1)], [None], sents, SupportConfig())
    assert [c.evidence.n for c in out.claims] == [1, 2] and not out.removed


def test_a_claim_copying_one_sentence_stays_as_written() -> None:
    sents = [_sentence(1, ALERTS), _sentence(2, SMS)]
    claim = Claim(f"{ALERTS}, which the team keeps.", 1)
    assert [(c.evidence.n, c.text) for c in check([claim], [None], sents, SupportConfig()).claims] == [(1, claim.text)]


def test_parse_reads_the_constrained_format_and_free_text() -> None:
    assert parse_claims("[2] It extracts.\n[1] Not generated.") == [
        Claim("It extracts.", 2),
        Claim("Not generated.", 1),
    ]
    assert parse_claims("[0]") == [Claim("", 0)]
    assert parse_claims("It extracts [2]. It is cached [1].") == [Claim("It extracts.", 2), Claim("It is cached.", 1)]
    # A grouped citation in free text takes its first number; numbers beyond the sources
    # are never shown: the support check attributes every claim to a real source sentence.
    assert parse_claims("Both say so [1, 2; 9].") == [Claim("Both say so.", 1)]


def test_partial_text_never_shows_sentence_numbers() -> None:
    assert visible_partial("[3] It ext") == "It ext"
    assert visible_partial("[3] It extracts.\n[1") == "It extracts."


def test_the_model_reads_the_sentences_nearest_the_question_in_source_order() -> None:
    sents = [
        _sentence(i, f"sentence number {i} here", [float(i == 3 or i == 1), float(i == 2), 0.0]) for i in (1, 2, 3)
    ]
    kept = most_relevant(sents, np.asarray([1.0, 0.0, 0.0], dtype=np.float32), keep=2)
    assert [(s.n, s.text) for s in kept] == [(1, "sentence number 1 here"), (2, "sentence number 3 here")]
