"""Search: rank an index's passages for a question, and decide whether any answers it.

Dense candidates (an exact cosine scan) plus BM25, fused, then reranked; the gate's
signal says whether to answer, to point at the closest passages, or to refuse, and self-calibrates its threshold on
the team's own corpus. The :class:`Engine` keeps one docs folder's index in sync and
its searcher current. To change the gate: ``gate.py`` (the signal and the decision) and
``calibration.py`` (how its threshold is chosen).
"""

from __future__ import annotations

from retrieval.search.calibration import (
    Calibration,
    CalibrationCache,
    CalibrationConfig,
    Calibrator,
    Facts,
    SweepPoint,
    facts_of,
    format_calibration,
    round_thresholds,
)
from retrieval.search.engine import Engine, EngineConfig, FolderMismatch, LastSync, adopt_folder, check_folder
from retrieval.search.gate import (
    DEFAULT_POINT_THRESHOLD,
    DEFAULT_THRESHOLD,
    GateConfig,
    GateDecision,
    Thresholds,
    Verdict,
    as_read,
    coverage_weight,
    decide,
    gate_signal,
    signal,
)
from retrieval.search.glossary import Glossary, packaged_glossary
from retrieval.search.judge import FOOTNOTE, Judge, JudgeConfig, JudgedReranker, PairScorer, load_reranker
from retrieval.search.languages import Languages, main_of
from retrieval.search.rerank import Candidate, CrossEncoderReranker, Reranker, SentenceReranker
from retrieval.search.searcher import FUSIONS, SearchConfig, Searcher, SearchResult, reciprocal_rank

__all__ = [
    "DEFAULT_POINT_THRESHOLD",
    "DEFAULT_THRESHOLD",
    "FOOTNOTE",
    "FUSIONS",
    "Calibration",
    "CalibrationCache",
    "CalibrationConfig",
    "Calibrator",
    "Candidate",
    "CrossEncoderReranker",
    "Engine",
    "EngineConfig",
    "Facts",
    "FolderMismatch",
    "GateConfig",
    "GateDecision",
    "Glossary",
    "Judge",
    "JudgeConfig",
    "JudgedReranker",
    "Languages",
    "LastSync",
    "PairScorer",
    "Reranker",
    "SearchConfig",
    "SearchResult",
    "Searcher",
    "SentenceReranker",
    "SweepPoint",
    "Thresholds",
    "Verdict",
    "adopt_folder",
    "as_read",
    "check_folder",
    "coverage_weight",
    "decide",
    "facts_of",
    "format_calibration",
    "gate_signal",
    "load_reranker",
    "main_of",
    "packaged_glossary",
    "reciprocal_rank",
    "round_thresholds",
    "signal",
]
