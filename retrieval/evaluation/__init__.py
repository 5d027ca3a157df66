"""Evaluation, a product feature (``footnote eval``): what the retriever finds, what the gate
refuses, and what a reader gets.

Recall@k and MRR with Wilson intervals, answers destroyed by chunking, paired exact sign
tests between strategies (``suite``, ``metrics``); the refusal sweep; the gate's
cross-validation by document halves (``cross_validation``); answer-level figures
(``answers``); the report for the terminal and plots (``report``); and a vector cache so
an unchanged corpus is evaluated again without embedding (``vectors``).
"""

from __future__ import annotations

from retrieval.evaluation.answers import (
    AnswerRow,
    by_style,
    compare,
    compare_all,
    replay,
    rows_from_json,
    rows_json,
    run_answers,
    summarise,
)
from retrieval.evaluation.cross_validation import (
    FoldResult,
    Half,
    cross_validate,
    document_of,
    format_cv,
    halves_by_document,
)
from retrieval.evaluation.metrics import DIRECT, normalise, paired, sign_test, wilson
from retrieval.evaluation.report import format_answers, format_eval, format_paired, write_plots
from retrieval.evaluation.suite import EvalReport, Question, load_documents, paired_ranks, run_eval
from retrieval.evaluation.vectors import CachingEmbedder

__all__ = [
    "DIRECT",
    "AnswerRow",
    "CachingEmbedder",
    "EvalReport",
    "FoldResult",
    "Half",
    "Question",
    "by_style",
    "compare",
    "compare_all",
    "cross_validate",
    "document_of",
    "format_answers",
    "format_cv",
    "format_eval",
    "format_paired",
    "halves_by_document",
    "load_documents",
    "normalise",
    "paired",
    "paired_ranks",
    "replay",
    "rows_from_json",
    "rows_json",
    "run_answers",
    "run_eval",
    "sign_test",
    "summarise",
    "wilson",
    "write_plots",
]
