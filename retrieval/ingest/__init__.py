"""Ingest: a docs folder's files into the index.

Extract each file into canonical text (one module per format under ``formats/``, the
parsed ones in a sandboxed worker), chunk it with the contextual header in front of the
embedded text only, embed, store and record it (``sync``). To add a format: write an
extractor in ``formats/`` and list it in ``extract._registry``.
"""

from __future__ import annotations

from retrieval.ingest.chunk import (
    ABBREVIATIONS,
    LINE_LOCATORS,
    ChunkerConfig,
    TokenCounter,
    chunk_document,
    chunk_sentence_spans,
    header_for,
    is_evidence,
    is_heading,
    is_question,
    sentence_spans,
    sentences,
)
from retrieval.ingest.extract import Extractor, extractor_for
from retrieval.ingest.markup import plain
from retrieval.ingest.planted import Flagged, flagged, is_planted, without_planted
from retrieval.ingest.sandbox import ExtractionRunner
from retrieval.ingest.sync import PIPELINE_VERSION, Indexer, Progress, SourceFile, SyncReport, no_folder, walk

__all__ = [
    "ABBREVIATIONS",
    "LINE_LOCATORS",
    "PIPELINE_VERSION",
    "ChunkerConfig",
    "ExtractionRunner",
    "Extractor",
    "Flagged",
    "Indexer",
    "Progress",
    "SourceFile",
    "SyncReport",
    "TokenCounter",
    "chunk_document",
    "chunk_sentence_spans",
    "extractor_for",
    "flagged",
    "header_for",
    "is_evidence",
    "is_heading",
    "is_planted",
    "is_question",
    "no_folder",
    "plain",
    "sentence_spans",
    "sentences",
    "walk",
    "without_planted",
]
