"""BM25 over the chunks (rank-bm25's BM25Okapi scores, from a sparse matrix), plus the vocabulary facts the gate uses.

It is rebuilt from the store's chunks when an index snapshot loads: on the dev
corpus (866 chunks) that takes about 30 ms, cheaper than persisting and
invalidating a pickle, and it cannot disagree with the store's ids.

Words are runs of letters and digits in any script (æ, ø and å are letters), read as a reader
sees them (:func:`tokenize`: one Unicode form, no unseen characters, a word a line end
hyphenated also whole). A Danish chunk, and a Danish question, also yield each word's
Snowball stem (PyStemmer) and the two parts of a compound both of whose parts the drive's
Danish text uses ("momsangivelse" also counts as "moms" and "angivelse"): Danish inflects
and compounds where English writes separate words. Measured on danish-dev (`footnote eval`,
MiniLM): chatty R@4 0.500 → 0.594, direct 0.938 → 0.938, R@4 over both 0.719 → 0.766.
English text is unchanged.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
from scipy import sparse

# Letters and digits, in any script (æ, ø and å are letters).
_WORD = re.compile(r"[^\W_]+")
# What sits inside a word unseen: a soft hyphen (with the line break it may end), zero-width
# spaces and joiners, direction marks, a byte-order mark. Left in, they split the word.
_UNSEEN_CHARS = "\u00ad\ufeff" + "".join(map(chr, [*range(0x200B, 0x2010), *range(0x2060, 0x2065)]))
_UNSEEN = re.compile(f"\u00ad(?:[ \t]*\r?\n[ \t]*)?|[{_UNSEEN_CHARS}]")
# A hyphen at a line end: between two letters, a word a PDF's justified text broke ("docu-\nment").
_LINE_END_HYPHEN = re.compile(r"-[ \t]*\r?\n[ \t]*")

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


# Danish function words: left out of a Danish question's idf coverage, as STOPWORDS of an English one.
DANISH_STOPWORDS = frozenset(
    [
        "af",
        "alle",
        "andet",
        "andre",
        "at",
        "blev",
        "blive",
        "bliver",
        "da",
        "de",
        "dem",
        "den",
        "denne",
        "der",
        "deres",
        "det",
        "dette",
        "dig",
        "din",
        "dine",
        "disse",
        "du",
        "efter",
        "eller",
        "en",
        "end",
        "er",
        "et",
        "for",
        "fra",
        "ham",
        "han",
        "hans",
        "har",
        "have",
        "havde",
        "hende",
        "hendes",
        "her",
        "hos",
        "hun",
        "hvad",
        "hvem",
        "hver",
        "hvilke",
        "hvilken",
        "hvis",
        "hvor",
        "hvordan",
        "hvorfor",
        "hvornår",
        "i",
        "ikke",
        "ind",
        "jeg",
        "jer",
        "jo",
        "kan",
        "kun",
        "kunne",
        "lidt",
        "man",
        "mange",
        "med",
        "meget",
        "men",
        "mens",
        "mere",
        "mig",
        "min",
        "mine",
        "mit",
        "mod",
        "må",
        "måske",
        "ned",
        "nej",
        "noget",
        "nogen",
        "nogle",
        "nu",
        "når",
        "og",
        "også",
        "om",
        "op",
        "os",
        "over",
        "på",
        "sig",
        "sin",
        "sine",
        "sit",
        "skal",
        "skulle",
        "som",
        "så",
        "sådan",
        "thi",
        "til",
        "ud",
        "under",
        "var",
        "vi",
        "vil",
        "ville",
        "vores",
        "være",
        "været",
        "ja",
        "hej",
        "tak",
        "lige",
        "bare",
        "godt",
        "nok",
        "helt",
    ]
)


def _plain(text: str) -> str:
    """``text`` lowercased, in NFKC, without its unseen characters. ASCII text has neither
    other forms nor unseen characters; checked first, each costs a scan of the text."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
        if any(c in text for c in _UNSEEN_CHARS):
            text = _UNSEEN.sub("", text)
    return text.lower()


def tokenize(text: str) -> list[str]:
    """The words of ``text``, lowercased. NFKC first: a drive written on a Mac spells "år" as
    "a" + a combining ring + "r" (NFD), which would split into the words "a" and "r" and never
    meet a question's "år". A word hyphenated at a line end yields its two parts and itself
    ("docu", "ment", "document"): the hyphen may be the line's or the word's ("well-known")."""
    plain = _plain(text)
    out: list[str] = []
    start, last = 0, ""
    for m in _LINE_END_HYPHEN.finditer(plain):  # found by its literal "-": a fast scan
        head, tail = m.start(), m.end()
        word = _WORD.match(plain, tail)
        if start > head or word is None or not (head and plain[head - 1].isalpha() and plain[tail].isalpha()):
            continue
        left = _WORD.findall(plain, start, head)
        last = left[-1] if left else last
        out += (*left, word.group(), last + word.group())
        start, last = word.end(), word.group()
    out += _WORD.findall(plain, start)
    return out


DANISH = "da"


def snowball(language: str) -> Callable[[str], str]:
    """Snowball's stemmer for ``language`` ("en", "da"), one word at a time (PyStemmer lives here)."""
    import Stemmer

    stemmer = Stemmer.Stemmer({"en": "english", "da": "danish"}[language])
    return lambda word: str(stemmer.stemWord(word))


class DanishTerms:
    """A Danish word's extra terms: its stem, and the parts of a compound the drive knows."""

    def __init__(self, known: set[str]) -> None:
        self.stem = snowball(DANISH)
        self.known = known  # words the drive's Danish text uses at least twice
        self._known_stems = {self.stem(w) for w in known}
        self._cache: dict[str, tuple[str, ...]] = {}

    def parts(self, word: str) -> tuple[str, ...]:
        """The most even split into two known words (a linking -s- or -e- may join them)."""
        best: tuple[int, str, str] | None = None
        for i in range(3, len(word) - 2):
            head, tail = word[:i], word[i:]
            heads = [head] + ([head[:-1]] if head.endswith(("s", "e")) and len(head) > 4 else [])
            if tail not in self.known and self.stem(tail) not in self._known_stems:
                continue
            for h in heads:
                if h in self.known:
                    cand = (min(len(h), len(tail)), h, tail)
                    best = cand if best is None or cand > best else best
        return (best[1], best[2]) if best else ()

    def extra(self, word: str) -> tuple[str, ...]:
        got = self._cache.get(word)
        if got is None:
            stem = self.stem(word)
            got = ((stem,) if stem != word else ()) + (self.parts(word) if len(word) >= 7 else ())
            self._cache[word] = got
        return got

    def terms(self, words: Sequence[str]) -> list[str]:
        return [t for w in words for t in (w, *self.extra(w))]


class Bm25Index:
    """Okapi BM25 (k1 = 1.2, b = 0.75) over chunk texts, positions matching the chunk list.

    Scores are exactly rank-bm25's ``BM25Okapi`` (its idf with the epsilon floor for
    words in more than half the chunks), computed from a sparse chunk x term matrix of
    precomputed term weights: a query costs one column slice, not a loop over every
    chunk per query word (100,000 chunks: 57 ms with rank-bm25's loop).
    """

    def __init__(
        self,
        texts: Sequence[str],
        k1: float = 1.2,
        b: float = 0.75,
        epsilon: float = 0.25,
        languages: Sequence[str] | None = None,
    ) -> None:
        self.size = len(texts)
        words = [tokenize(t) for t in texts]
        danish = [i for i, lang in enumerate(languages or ()) if lang == DANISH]
        self.danish: DanishTerms | None = None
        if danish:
            seen = Counter(w for i in danish for w in words[i] if len(w) >= 3 and not w.isdigit())
            self.danish = DanishTerms({w for w, n in seen.items() if n >= 2})
            for i in danish:
                words[i] = self.danish.terms(words[i])
        corpus = [toks or ["\u2205"] for toks in words]
        vocab: dict[str, int] = {}
        rows: list[int] = []
        cols: list[int] = []
        tfs: list[int] = []
        lengths = np.zeros(len(corpus), dtype=np.float64)
        for i, toks in enumerate(corpus):
            lengths[i] = len(toks)
            for w, tf in Counter(toks).items():
                rows.append(i)
                cols.append(vocab.setdefault(w, len(vocab)))
                tfs.append(tf)
        self._vocab = vocab
        n = max(1, len(corpus))
        df = np.bincount(np.asarray(cols, dtype=np.int64), minlength=len(vocab)).astype(np.float64)
        self._weights = self._weigh(rows, cols, tfs, lengths, df, n, k1, b, epsilon)
        # Lucene-style idf (always positive), used for the gate's vocabulary coverage.
        self.idf = {w: float(np.log(1 + (n - df[j] + 0.5) / (df[j] + 0.5))) for w, j in vocab.items()}
        self.max_idf = float(np.log(1 + (n + 0.5) / 0.5))

    def _weigh(
        self,
        rows: list[int],
        cols: list[int],
        tfs: list[int],
        lengths: np.ndarray,
        df: np.ndarray,
        n: int,
        k1: float,
        b: float,
        epsilon: float,
    ) -> sparse.csc_matrix:
        """W[chunk, term] = idf(term) * tf (k1 + 1) / (tf + k1 (1 - b + b |d| / avgdl)), as BM25Okapi."""
        if not rows:
            return sparse.csc_matrix((self.size, 0), dtype=np.float64)
        idf = np.log(n - df + 0.5) - np.log(df + 0.5)
        idf[idf < 0] = epsilon * idf.mean()  # rank-bm25's floor: eps x the average idf
        r, c = np.asarray(rows), np.asarray(cols)
        tf = np.asarray(tfs, dtype=np.float64)
        norm = k1 * (1 - b + b * lengths[r] / lengths.mean())
        w = idf[c] * tf * (k1 + 1) / (tf + norm)
        return sparse.csc_matrix((w, (r, c)), shape=(self.size, len(df)))

    def _terms(self, query: str, language: str | None) -> list[str]:
        words = tokenize(query)
        return self.danish.terms(words) if self.danish is not None and language == DANISH else words

    def scores(self, query: str, language: str | None = None) -> np.ndarray:
        """BM25 of every chunk for ``query``; a Danish question (``language``) is analysed as Danish."""
        if self.size == 0:
            return np.zeros(0, dtype=np.float32)
        counts = Counter(self._vocab[t] for t in self._terms(query, language) if t in self._vocab)
        if not counts:
            return np.zeros(self.size, dtype=np.float32)
        cols = np.fromiter(counts.keys(), np.int64, len(counts))
        reps = np.fromiter(counts.values(), np.float64, len(counts))
        return np.asarray(self._weights[:, cols] @ reps, dtype=np.float32).ravel()

    def coverage(self, query: str, language: str | None = None) -> float:
        """Share of the query's content-word idf mass whose words the corpus contains.

        An unseen word counts at the maximum idf: it is exactly the kind of word that
        says the question is about something the documents never mention. A Danish word
        is seen when its stem is, or both parts of it as a compound are.
        """
        stop = STOPWORDS | DANISH_STOPWORDS if language == DANISH else STOPWORDS
        words = [w for w in tokenize(query) if w not in stop and len(w) > 1]
        if not words:
            return 1.0
        idf = [self._idf_of(w, language) for w in words]
        seen = sum(v for v in idf if v is not None)
        total = sum(self.max_idf if v is None else v for v in idf)
        return seen / total if total else 1.0

    def knows(self, word: str, language: str | None = None) -> bool:
        """Whether the corpus uses ``word`` (a Danish word: its stem, or both parts of it as a compound)."""
        return self._idf_of(word, language) is not None

    def _idf_of(self, word: str, language: str | None) -> float | None:
        got = self.idf.get(word)
        if got is not None or self.danish is None or language != DANISH:
            return got
        extra = [self.idf.get(t) for t in self.danish.extra(word)]
        known = [v for v in extra if v is not None]
        return min(known) if known else None
