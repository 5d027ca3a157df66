"""BM25: the sparse scorer ranks exactly like rank-bm25's BM25Okapi; tokens, scores and the
vocabulary coverage the gate uses."""

from __future__ import annotations

import random

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from retrieval.index.bm25 import Bm25Index, tokenize
from retrieval.ingest.formats.pdf import PdfExtractor
from tests.retrieval.fixtures import pdf_bytes

WORDS = [
    "cache",
    "page",
    "sev1",
    "incident",
    "token",
    "model",
    "claim",
    "receipt",
    "leave",
    "travel",
    "the",
    "a",
    "of",
    "gradient",
    "lora",
]


def _corpus(n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    # Skewed word frequencies, so some words are in more than half the chunks (negative idf, floored).
    return [" ".join(rnd.choices(WORDS, weights=range(len(WORDS), 0, -1), k=rnd.randint(1, 40))) for _ in range(n)]


def test_scores_equal_rank_bm25_okapi() -> None:
    for seed in range(5):
        texts = _corpus(300, seed)
        ours = Bm25Index(texts)
        ref = BM25Okapi([tokenize(t) or ["\u2205"] for t in texts], k1=1.2, b=0.75)
        for query in ("cache page", "sev1 sev1 incident", "the a of", "lora gradient travel unknownword", "nothing"):
            toks = [t for t in tokenize(query) if t in ours.idf]
            want = ref.get_scores(toks) if toks else np.zeros(len(texts))
            got = ours.scores(query)
            assert got.shape == (len(texts),)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
            assert list(np.argsort(-got, kind="stable")[:20]) == list(
                np.argsort(-want.astype(np.float32), kind="stable")[:20]
            )


def test_empty_index_and_unknown_words() -> None:
    assert Bm25Index([]).scores("anything").shape == (0,)
    idx = Bm25Index(["alpha beta", "gamma"])
    assert not idx.scores("delta").any()
    assert idx.coverage("alpha delta") < 1.0 and idx.coverage("alpha") == 1.0


TEXTS = [
    "The on-call engineer acknowledges a SEV1 page within five minutes.",
    "Expenses are filed in the Tally app within thirty days.",
    "Parental leave is twenty-four weeks.",
]


def test_tokenize_lowercases_and_splits_on_non_alphanumerics() -> None:
    assert tokenize("SEV1 on-call, Tally's app!") == ["sev1", "on", "call", "tally", "s", "app"]


def test_a_word_a_pdf_hyphenated_at_a_line_end_is_found_whole() -> None:
    # Justified PDF text breaks "reimbursement" as "reimburse-" + a new line + "ment"; read
    # as two words, a question's "reimbursement" met nothing in the page.
    page = PdfExtractor().extract("p.pdf", pdf_bytes(["Claims for travel reimburse-\nment are filed in Tally."])).text
    assert "reimburse-\nment" in page
    idx = Bm25Index([page, "Parental leave is twenty-four weeks.", "Reimbursement of travel is paid monthly."])
    assert idx.scores("reimbursement")[0] > 0 and idx.coverage("reimbursement tally") == 1.0
    # Its parts stay words too: the hyphen may be the word's own ("well-\nknown").
    assert tokenize("a well-\n  known step, the 2019-\n2020 report") == [
        "a",
        "well",
        "known",
        "wellknown",
        "step",
        "the",
        "2019",
        "2020",
        "report",
    ]


def test_characters_unseen_inside_a_word_do_not_split_it() -> None:
    # A soft hyphen (Word's optional hyphen, also at a line end), a zero-width space or
    # joiner, a direction mark, a byte-order mark: invisible to a reader, so not a break.
    text = "\ufeffunder\u00adst\u00f8tter moms\u00ad\nangivelse re\u200bport \u200eaf \u200b\u200bdet"
    assert tokenize(text) == ["understøtter", "momsangivelse", "report", "af", "det"]


def test_scores_rank_the_matching_chunk_first_and_are_zero_without_known_words() -> None:
    idx = Bm25Index(TEXTS)
    scores = idx.scores("how do I file expenses in tally")
    assert scores.shape == (3,) and int(scores.argmax()) == 1 and scores[1] > 0
    assert idx.scores("kubernetes upgrade").tolist() == [0.0, 0.0, 0.0]


def test_coverage_counts_unseen_content_words_at_full_idf_and_ignores_stopwords() -> None:
    idx = Bm25Index(TEXTS)
    assert idx.coverage("expenses tally") == pytest.approx(1.0)
    assert idx.coverage("what is the") == 1.0  # only stopwords: no evidence either way
    partial = idx.coverage("expenses kubernetes")
    assert 0.0 < partial < 0.5  # the unseen word weighs the most
    assert idx.coverage("kubernetes helm") == 0.0
