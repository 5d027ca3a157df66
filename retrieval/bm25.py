"""BM25 over the chunks (rank-bm25), plus the vocabulary facts the gate uses.

It is rebuilt from the store's chunks when an index snapshot loads: on the dev
corpus (866 chunks) that takes about 30 ms, cheaper than persisting and
invalidating a pickle, and it cannot disagree with the store's ids.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from rank_bm25 import BM25Okapi

_TOKEN = re.compile(r"[a-z0-9]+")

# Function words carry no evidence of topic; they are left out of idf coverage.
STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "done",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "get",
        "gets",
        "got",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "let",
        "me",
        "more",
        "most",
        "my",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "use",
        "used",
        "using",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "instead",
        "also",
        "i'm",
        "can't",
        "don't",
        "one",
        "way",
        "want",
        "need",
        "thing",
        "things",
        "like",
        "make",
        "makes",
        "really",
        "still",
        "get",
        "much",
        "many",
    ]
)


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class Bm25Index:
    """Okapi BM25 (k1 = 1.2, b = 0.75) over chunk texts, positions matching the chunk list."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.size = len(texts)
        corpus = [tokenize(t) or ["\u2205"] for t in texts]
        self._bm25 = BM25Okapi(corpus, k1=1.2, b=0.75) if corpus else None
        df: dict[str, int] = {}
        for toks in corpus:
            for w in set(toks):
                df[w] = df.get(w, 0) + 1
        n = max(1, len(corpus))
        # Lucene-style idf (always positive), used for the gate's vocabulary coverage.
        self.idf = {w: float(np.log(1 + (n - c + 0.5) / (c + 0.5))) for w, c in df.items()}
        self.max_idf = float(np.log(1 + (n + 0.5) / 0.5))

    def scores(self, query: str) -> np.ndarray:
        if self._bm25 is None:
            return np.zeros(0, dtype=np.float32)
        toks = [t for t in tokenize(query) if t in self.idf]
        if not toks:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._bm25.get_scores(toks), dtype=np.float32)

    def coverage(self, query: str) -> float:
        """Share of the query's content-word idf mass whose words the corpus contains.

        An unseen word counts at the maximum idf: it is exactly the kind of word that
        says the question is about something the documents never mention.
        """
        words = [w for w in tokenize(query) if w not in STOPWORDS and len(w) > 1]
        if not words:
            return 1.0
        seen = sum(self.idf[w] for w in words if w in self.idf)
        total = sum(self.idf.get(w, self.max_idf) for w in words)
        return seen / total if total else 1.0
