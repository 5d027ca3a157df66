"""Caption transcripts (WebVTT, SRT) of meeting recordings: each cue is a paragraph
marked with its times, so a chunk cites ``#t=start,end`` (W3C Media Fragments)."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import PurePath

from retrieval.errors import ExtractionError
from retrieval.ingest.formats.builder import TextBuilder
from retrieval.ingest.text import decode_text
from retrieval.types import Document

_TIME = r"(?:(\d+):)?(\d{1,2}):(\d{2})[.,](\d{1,3})"
_CUE = re.compile(rf"^\s*{_TIME}\s*-->\s*{_TIME}")
_TAGS = re.compile(r"<(v|c|i|b|u|lang|ruby|rt)[^>]*>|</[^>]+>|<\d[^>]*>")
_SPEAKER = re.compile(r"<v(?:\.[^ >]*)?\s+([^>]+)>")
_OVERRIDES = re.compile(r"\{\\[^{}]*\}")  # SRT's ASS-style codes: {\an8} places a cue, {\i1} italics


def _seconds(h: str | None, m: str, s: str, frac: str) -> float:
    return int(h or 0) * 3600 + int(m) * 60 + int(s) + int(frac.ljust(3, "0")) / 1000


def parse_cues(text: str) -> list[tuple[float, float, str]]:
    cues: list[tuple[float, float, str]] = []
    for block in re.split(r"\n\s*\n", text.replace("\r\n", "\n").replace("\r", "\n")):
        lines = block.strip("\n").split("\n")
        for i, line in enumerate(lines):
            m = _CUE.match(line)
            if m:
                start, end = _seconds(*m.group(1, 2, 3, 4)), _seconds(*m.group(5, 6, 7, 8))
                body = " ".join(lines[i + 1 :])
                body = _SPEAKER.sub(lambda s: f"{s.group(1).strip()}: ", body)
                words = " ".join(html.unescape(_OVERRIDES.sub("", _TAGS.sub("", body))).split())
                if words:
                    cues.append((start, end, words))
                break
    return cues


@dataclass(frozen=True)
class TranscriptExtractor:
    name: str = "transcript"
    version: str = "3"  # 3: "&amp;" reads "&", SRT's {\an8} codes go (2: cues per chunk)
    suffixes: tuple[str, ...] = (".vtt", ".srt")
    isolated: bool = True

    def extract(self, rel_path: str, data: bytes) -> Document:
        cues = parse_cues(decode_text(data))
        if not cues:
            raise ExtractionError("no captions: the file has no timed cues")
        b = TextBuilder()
        b.section("Transcript", [c[2] for c in cues], {}, [[round(c[0], 3), round(c[1], 3)] for c in cues])
        return b.document(rel_path, PurePath(rel_path).stem, self.name, self.version, locator="t")
