"""Source sentences: how they are ranked for the model and laid out in its prompt."""

from __future__ import annotations

import numpy as np

from retrieval.answer.evidence import SourceSentence, most_relevant, question_weights, sources_block
from retrieval.types import Chunk, Hit

Q = np.asarray([1.0, 0.0], dtype=np.float32)


def _sentence(n: int, text: str, source: int = 1, section: str = "Question answering") -> SourceSentence:
    chunk = Chunk(f"c{source}", "doc.md", "Transformers", section, 0, text, text, 0, len(text))
    # The same cosine to the query for every sentence: only the other features decide.
    return SourceSentence(n, source, Hit(chunk, 1.0, 0.1), 0, len(text), text, np.asarray([0.6, 0.8], np.float32))


def test_an_answering_sentence_outranks_an_introduction_and_a_code_line_of_equal_cosine() -> None:
    sents = [
        _sentence(1, "There are three main steps involved when you pass some text to a pipeline:"),
        _sentence(2, 'question_answerer = pipeline("question-answering")'),
        _sentence(3, "The pipeline extracts the answer from the context it is given; it does not generate it."),
    ]
    ranked = most_relevant(sents, Q, keep=3, question_idf={"pipeline": 1.0, "answer": 2.0})
    assert ranked[0].text.startswith("The pipeline extracts") and [s.n for s in ranked] == [1, 2, 3]


def test_a_later_passage_needs_more_than_a_tie_to_come_first() -> None:
    first = _sentence(1, "Leave requests are approved by the team lead within two days.", source=1)
    later = _sentence(2, "Leave requests are approved by the team lead within two days.", source=3)
    assert most_relevant([later, first], Q, keep=1)[0].source == 1


def test_the_prompt_lists_numbered_sentences_without_headings() -> None:
    sents = [
        _sentence(1, "One  sentence.", source=1),
        _sentence(2, "A second\nfrom elsewhere.", source=3, section="Training"),
    ]
    assert sources_block(sents) == "[1] One sentence.\n[2] A second from elsewhere."


def test_a_heading_line_is_never_offered_as_evidence() -> None:
    sents = [
        _sentence(1, "# Chat completion"),
        _sentence(2, "### Basic Text Generation"),
        _sentence(3, "Chat models keep the conversation as a list of messages."),
        _sentence(4, "#hashtag-style words inside a sentence are not headings."),
    ]
    texts = [s.text for s in most_relevant(sents, Q, keep=4, question_idf={"chat": 1.0})]
    assert texts == [sents[2].text, sents[3].text]
    # Sources that hold nothing but headings still give the model something to read.
    assert len(most_relevant(sents[:2], Q, keep=2)) == 2


def test_a_question_the_source_asks_is_never_offered_as_evidence() -> None:
    sents = [
        _sentence(1, "1. How does the value of $\\gamma$ affect the number of iterations?"),
        _sentence(2, 'Ask yourself: "is the learning rate too high?"'),
        _sentence(3, "A smaller discount factor makes value iteration converge in fewer iterations."),
    ]
    assert [s.text for s in most_relevant(sents, Q, keep=3, question_idf={"iterations": 1.0})] == [sents[2].text]
    assert len(most_relevant(sents[:2], Q, keep=2)) == 2  # only questions: still something to read


def test_a_question_word_never_makes_a_sentence_relevant_in_either_language() -> None:
    """Documentation rarely writes "hvad": its idf is high, and a navigation sentence quoting
    "Fortæl mig, hvad du vil foretage dig" outranked the definition that answers."""
    idf = {"hvad": 2.4, "what": 0.3, "bilag": 1.7, "voucher": 1.5}
    assert question_weights("Hvad er et bilag?", idf) == {"bilag": 1.7}
    assert question_weights("What is a voucher?", idf) == {"voucher": 1.5}
    sents = [
        _sentence(1, "Vælg ikonet, angiv Fortæl mig, hvad du vil foretage dig, og vælg derefter linket."),
        _sentence(2, "Et bilag er et dokument, der understøtter en finansiel transaktion."),
    ]
    # The same cosine for both: the words decide (the definition holds "bilag", the other only "hvad").
    ranked = most_relevant(sents, Q, keep=2, question_idf=question_weights("Hvad er et bilag?", idf))
    assert ranked[0].text.startswith("Et bilag er")
