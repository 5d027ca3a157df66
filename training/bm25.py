"""A small Okapi BM25 over sentences (numpy + scipy.sparse), for round trips and hard negatives."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from scipy import sparse

STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "then",
        "else",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "i",
        "you",
        "he",
        "she",
        "we",
        "they",
        "me",
        "my",
        "your",
        "our",
        "their",
        "them",
        "us",
        "do",
        "does",
        "did",
        "doing",
        "have",
        "has",
        "had",
        "having",
        "can",
        "could",
        "will",
        "would",
        "shall",
        "should",
        "may",
        "might",
        "must",
        "not",
        "no",
        "nor",
        "so",
        "than",
        "too",
        "very",
        "just",
        "also",
        "about",
        "into",
        "over",
        "under",
        "again",
        "further",
        "once",
        "all",
        "any",
        "both",
        "each",
        "few",
        "more",
        "most",
        "other",
        "some",
        "such",
        "only",
        "own",
        "same",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "up",
        "down",
        "out",
        "off",
        "s",
        "t",
        "don",
        "now",
        "get",
        "got",
        "use",
        "used",
        "using",
        "i'm",
        "hey",
        "hi",
        "pls",
        "please",
    ]
)
_TOKEN = re.compile(r"[a-z0-9]+")


def stem(w: str) -> str:
    """A light suffix strip, so 'backups' meets 'backup' and 'deleted' meets 'delete'."""
    for suf, keep in (
        ("ies", "y"),
        ("sses", "ss"),
        ("ches", "ch"),
        ("shes", "sh"),
        ("xes", "x"),
        ("ing", ""),
        ("ed", ""),
    ):
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            return w[: len(w) - len(suf)] + keep
    if w.endswith("s") and not w.endswith(("ss", "us", "is")) and len(w) >= 4:
        w = w[:-1]
    if w.endswith("e") and len(w) >= 5:
        w = w[:-1]  # 'integrate' meets 'integrating', 'delete' meets 'deleted'
    return w


def terms(text: str) -> list[str]:
    """Content terms of a text: lowercased, stop words dropped, lightly stemmed."""
    return [stem(w) for w in _TOKEN.findall(text.lower()) if w not in STOP]


class BM25:
    """BM25 scores of a query against every sentence given at construction."""

    def __init__(self, texts: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        vocab: dict[str, int] = {}
        rows: list[int] = []
        cols: list[int] = []
        vals: list[float] = []
        lens = np.zeros(len(texts))
        for i, t in enumerate(texts):
            counts: dict[int, int] = {}
            ts = terms(t)
            lens[i] = len(ts)
            for w in ts:
                j = vocab.setdefault(w, len(vocab))
                counts[j] = counts.get(j, 0) + 1
            for j, c in counts.items():
                rows.append(i)
                cols.append(j)
                vals.append(c)
        self.vocab = vocab
        tf = sparse.csr_matrix((vals, (rows, cols)), shape=(len(texts), len(vocab)), dtype=np.float64)
        df = np.bincount(cols, minlength=len(vocab))
        n = len(texts)
        self.idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
        avg = lens.mean() if n else 1.0
        norm = k1 * (1 - b + b * lens / max(avg, 1e-9))
        tf = tf.tocoo()
        w = tf.data * (k1 + 1) / (tf.data + norm[tf.row]) * self.idf[tf.col]
        self.matrix = sparse.csc_matrix((w, (tf.row, tf.col)), shape=tf.shape)

    def scores(self, query: str) -> np.ndarray:
        """Score of every sentence for the query (0 where no term matches)."""
        idx = sorted({self.vocab[w] for w in terms(query) if w in self.vocab})
        if not idx:
            return np.zeros(self.matrix.shape[0])
        return np.asarray(self.matrix[:, idx].sum(axis=1)).ravel()
