"""Glosses: a question's words in the drive's language, from a packaged English-Danish glossary.

A question in another language than the drive's is translated by the packaged 0.5B before
it is searched, and its translation loses a drive's own terms: asked in English, a Danish
accounting drive gets "Microsoft retainer for fem år" where its documents say "opbevarer",
and "regning" or English words where they say "moms" and "faktura". So the words of the
question as asked are also looked up in a glossary (``data/glossary_en_da.tsv``, built by
``training/build_glossary.py`` from Wiktionary's English-Danish word list, CC BY-SA 3.0),
and the first translation of each that the drive's own text uses is searched beside the
model's translation. Phrases of up to three words are looked up before single words
("chart of accounts" before "chart"); words are matched by their Snowball stems, so
"invoices" finds "invoice", and function words are skipped.

Measured on danish-dev's documents asked in English (``bench/data/crosslang/danish-dev-en``,
``footnote eval``, R@4 direct / chatty): translated 0.562 / 0.438, translated and glossed
0.750 / 0.594, no unanswerable question let through; dev's documents asked in Danish
(``dev-da``): R@1 0.594 → 0.719 direct, R@4 unchanged. The number of translations per word (1),
and searching the glosses with the translation rather than through BM25 alone, were chosen
on dev-da; see docs/measurements.md, "Words looked up".
A drive in the asker's language is never glossed.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

from retrieval.errors import ConfigError
from retrieval.index import DANISH_STOPWORDS, STOPWORDS, snowball, tokenize

FILE = "data/glossary_en_da.tsv"
SHA256 = "9b60fce9f087fae8b6dee01f8429dee53eb96db13c57865d9d740a1a6c9c4dbf"  # printed by training/build_glossary.py
LONGEST = 3  # words in the longest phrase looked up
_STOP = {"en": STOPWORDS, "da": DANISH_STOPWORDS}

Stems = tuple[str, ...]


@dataclass(frozen=True)
class Glossary:
    """Translations keyed by (from, into) language and the stems of the words translated."""

    entries: Mapping[tuple[str, str], Mapping[Stems, tuple[str, ...]]]
    per_word: int = 1  # translations searched for each word or phrase (the first the drive uses)

    @classmethod
    def from_pairs(cls, pairs: Sequence[tuple[str, str]], per_word: int = 1) -> Glossary:
        """Both directions of (English, Danish) ``pairs``, in their order (a word's first
        translation first)."""
        stem = {lang: snowball(lang) for lang in ("en", "da")}
        table: dict[tuple[str, str], dict[Stems, list[str]]] = {
            way: defaultdict(list) for way in (("en", "da"), ("da", "en"))
        }
        for en, da in pairs:
            for (src, dst), (word, gloss) in ((("en", "da"), (en, da)), (("da", "en"), (da, en))):
                key = tuple(stem[src](w) for w in tokenize(word))
                if key and len(key) <= LONGEST and gloss not in table[src, dst][key]:
                    table[src, dst][key].append(gloss)
        entries = {way: {k: tuple(v) for k, v in t.items()} for way, t in table.items()}
        return cls(entries, per_word)

    def glosses(self, text: str, source: str, target: str, known: Callable[[str], bool]) -> list[str]:
        """The translations into ``target`` of ``text``'s words and phrases (``text`` in
        ``source``) whose every word ``known`` says the drive uses; longer phrases first, each
        word glossed once."""
        table = self.entries.get((source, target))
        if not table:
            return []
        words = tokenize(text)
        stem = snowball(source)
        stems = [stem(w) for w in words]
        used: set[int] = set()
        out: list[str] = []
        for n in range(LONGEST, 0, -1):
            for i in range(len(words) - n + 1):
                span = range(i, i + n)
                if used.intersection(span) or (n == 1 and (words[i] in _STOP[source] or len(words[i]) < 3)):
                    continue
                found = [g for g in table.get(tuple(stems[i : i + n]), ()) if all(known(w) for w in tokenize(g))]
                if found:
                    used.update(span)
                    out += [g for g in found[: self.per_word] if g not in out]
        return out


@cache
def packaged_glossary() -> Glossary:
    """The shipped glossary, checked against its recorded SHA-256."""
    return read_glossary(resources.files("retrieval.search").joinpath(FILE).read_bytes())


def read_glossary(raw: bytes, sha256: str = SHA256) -> Glossary:
    """A glossary file's (English, Danish) lines, tab-separated; ``#`` starts a comment line."""
    if hashlib.sha256(raw).hexdigest() != sha256:
        raise ConfigError(f"retrieval/search/{FILE} is damaged (its SHA-256 differs): reinstall Footnote")
    lines = raw.decode("utf-8").splitlines()
    pairs = [(en, da) for en, _, da in (line.partition("\t") for line in lines if line and not line.startswith("#"))]
    return Glossary.from_pairs(pairs)
