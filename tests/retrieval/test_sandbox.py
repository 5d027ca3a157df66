"""Extraction in a worker process: a hanging or memory-hungry parser costs one file, not the sync."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from retrieval.errors import ExtractionError
from retrieval.ingest.formats.html import HtmlExtractor
from retrieval.ingest.formats.markdown import MarkdownExtractor
from retrieval.ingest.sandbox import ExtractionRunner
from retrieval.types import Document


@dataclass(frozen=True)
class Hangs:
    name: str = "hangs"
    version: str = "1"
    suffixes: tuple[str, ...] = (".hang",)
    isolated: bool = True

    def extract(self, rel_path: str, data: bytes) -> Document:
        time.sleep(60)
        raise AssertionError("unreachable")


@dataclass(frozen=True)
class Hungry:
    name: str = "hungry"
    version: str = "1"
    suffixes: tuple[str, ...] = (".eat",)
    isolated: bool = True

    def extract(self, rel_path: str, data: bytes) -> Document:
        blob = bytearray(8 * 1024**3)  # 8 GB: far over the worker's limit
        raise AssertionError(len(blob))


@pytest.fixture
def runner():  # type: ignore[no-untyped-def]
    r = ExtractionRunner(timeout_s=3, memory_mb=1024)
    yield r
    r.close()


def test_a_hanging_parser_is_stopped_and_the_next_file_still_extracts(runner: ExtractionRunner) -> None:
    t = time.monotonic()
    with pytest.raises(ExtractionError, match="took longer than 3s"):
        runner.extract(Hangs(), "x.hang", b"")
    assert time.monotonic() - t < 20
    doc = runner.extract(HtmlExtractor(), "p.html", b"<main><h2>A</h2><p>Still works.</p></main>")
    assert doc.text == "Still works." and doc.sections[0].title == "A"


def test_a_memory_bomb_fails_with_a_reason(runner: ExtractionRunner) -> None:
    with pytest.raises(ExtractionError, match="more memory"):
        runner.extract(Hungry(), "x.eat", b"")


def test_plain_text_is_extracted_in_process(runner: ExtractionRunner) -> None:
    doc = runner.extract(MarkdownExtractor(), "a.md", b"# A\n\nText.")
    assert doc.title == "A" and runner._pool is None  # no worker was started for it
