"""Each document's language and each question's, as search needs them.

A document's language is detected from its indexed text when a snapshot is built, once
per content (a document's chunk ids are digests of its text); a question's when it is
searched (about 0.3 ms). ``pinned`` (``FOOTNOTE_LANGUAGES``) overrides detection: one language pins
every document and question to it; several restrict detection to them.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from retrieval.index import Snapshot, StoredIndex
from retrieval.ingest import SourceFile, extractor_for, walk
from retrieval.models import SUPPORTED, LanguageDetector

ENGLISH = "en"
# A drive is one language's when that language holds at least this share of its passages: a
# Danish drive with an English licence or author list is still Danish, and an English question
# to it is translated into Danish. A drive whose other language holds more is mixed: the
# question is searched as asked (docs/measurements.md, "A stray document in another language").
MAIN_SHARE = 0.9
_TEXT = frozenset({".md", ".markdown", ".txt", ".text", ".rst", ".html", ".htm"})
SCAN_CHARS = 20_000  # read of each file; also what the text files must hold before no parsed file is read
PARSED_FILES = 5  # parsed files (PDF, Word, slides, sheets) read when the text files say too little
ReadParsed = Callable[[SourceFile], str | None]  # a parsed file's text; None when it cannot be read


def main_of(weights: Mapping[str, int], share: float = MAIN_SHARE) -> str | None:
    """The language holding at least ``share`` of ``weights`` (passages or characters per
    language); None when none does, or empty."""
    total = sum(weights.values())
    if not total:
        return None
    lang, n = max(weights.items(), key=lambda kv: kv[1])
    return lang if n >= share * total else None


class Languages:
    def __init__(self, detector: LanguageDetector | None = None, pinned: Sequence[str] = ()) -> None:
        self.detector = detector or LanguageDetector()
        self.pinned = tuple(pinned)
        self._lock = threading.Lock()
        self._documents: dict[str, str | None] = {}  # digest of a document's chunk ids -> its language, or None

    def detect(self, text: str) -> str | None:
        """A text's language (a pinned one wins); None when too short to tell."""
        return self._pick(text)

    def _pick(self, text: str) -> str | None:
        if len(self.pinned) == 1:
            return self.pinned[0]
        got = self.detector.detect(text).language
        if got is not None and self.pinned and got not in self.pinned:
            return self.pinned[0]
        return got

    def of(self, stored: StoredIndex, keep: Collection[str]) -> dict[str, str]:
        """The language of every document in ``keep``. One with too little text to tell, or
        none written in words (a dump, a table of codes), takes the language most of the
        others' passages are in (English when none can be told), as :meth:`main` counts: it
        must not make a drive look mixed."""
        texts: dict[str, list[str]] = {}
        ids: dict[str, list[str]] = {}
        for c in stored.chunks:
            if c.path in keep:
                texts.setdefault(c.path, []).append(c.content)
                ids.setdefault(c.path, []).append(c.id)
        told: dict[str, str | None] = {}
        for path, parts in texts.items():
            key = hashlib.sha1("\n".join(sorted(ids[path])).encode()).hexdigest()
            with self._lock:
                known, lang = key in self._documents, self._documents.get(key)
            if not known:
                lang = self._pick(" ".join(parts)[:20_000])
                with self._lock:
                    self._documents[key] = lang
            told[path] = lang
        counts: Counter[str] = Counter()
        for path, lang in told.items():
            if lang is not None:
                counts[lang] += len(texts[path])
        usual = counts.most_common(1)[0][0] if counts else ENGLISH
        return {path: lang or usual for path, lang in told.items()}

    def question(self, text: str, snapshot: Snapshot) -> str | None:
        """The question's language (about 0.3 ms); None when too short to tell."""
        return self._pick(text)

    def scan(
        self, folder: Path, ignore: Sequence[str] = (), limit: int = 50, read: ReadParsed | None = None
    ) -> dict[str, int]:
        """The languages of a folder's files and the characters read in each, before anything
        is indexed: which embedding model a new index needs. The first ``SCAN_CHARS``
        characters of up to ``limit`` Markdown, text and HTML files; when those hold less, of up
        to ``PARSED_FILES`` parsed files too, through ``read`` (a drive of Danish PDFs has no
        text file, and read as English it would be embedded by the English model)."""
        if len(self.pinned) == 1:
            return {self.pinned[0]: 1}
        found: Counter[str] = Counter()
        texts = (f for f in walk(folder, ignore) if f.skip is None and f.path.suffix.lower() in _TEXT)
        for src in itertools.islice(texts, limit):
            try:
                with src.path.open("r", encoding="utf-8", errors="replace") as fh:
                    self._count(fh.read(SCAN_CHARS), found)
            except OSError:
                continue
        if read is not None and sum(found.values()) < SCAN_CHARS:
            parsed = (f for f in walk(folder, ignore) if f.skip is None and f.path.suffix.lower() not in _TEXT)
            readable = (f for f in parsed if extractor_for(f.path) is not None)
            for src in itertools.islice(readable, PARSED_FILES):
                self._count((read(src) or "")[:SCAN_CHARS], found)
        return dict(found)

    def _count(self, text: str, found: Counter[str]) -> None:
        lang = self._pick(text)
        if lang is not None:
            found[lang] += len(text)

    @staticmethod
    def main(snapshot: Snapshot) -> str:
        """The drive's language: the one most of its passages are in (English when empty).
        :meth:`dominant` asks more of it: a share of the passages large enough to translate into."""
        counts = Counter(snapshot.passages_in)
        return counts.most_common(1)[0][0] if counts else ENGLISH

    @staticmethod
    def dominant(snapshot: Snapshot, share: float = MAIN_SHARE) -> str | None:
        """The language holding at least ``share`` of the drive's passages; None when the
        drive is mixed or empty."""
        return main_of(snapshot.passages_in, share)

    @staticmethod
    def supported(language: str | None) -> bool:
        return language is None or language in SUPPORTED
