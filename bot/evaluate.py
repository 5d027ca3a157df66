"""``footnote eval`` end to end: index a corpus privately, run the suite, and optionally the
answers and the gate's cross-validation. Built through the builder, so it measures what
serving runs; the live index is never touched.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.builder import Builder
from bot.gate_status import calibration, gate_text
from config.settings import Settings
from retrieval.errors import ConfigError
from retrieval.evaluation import (
    CachingEmbedder,
    EvalReport,
    FoldResult,
    Half,
    Question,
    by_style,
    compare_all,
    cross_validate,
    document_of,
    halves_by_document,
    load_documents,
    paired_ranks,
    replay,
    rows_from_json,
    rows_json,
    run_answers,
    run_eval,
    summarise,
)
from retrieval.models import Embedder, seed_models

Progress = Callable[[str], None]


@dataclass
class Evaluation:
    report: EvalReport
    gate_text: str
    calibration: dict[str, Any] | None
    answers: dict[str, Any] | None = None
    folds: list[FoldResult] = field(default_factory=list)
    paired: list[dict[str, Any]] = field(default_factory=list)  # ranks against an earlier run
    languages: dict[str, dict[str, int]] = field(default_factory=dict)  # of the questions, of the documents

    def as_json(self) -> dict[str, Any]:
        out = self.report.as_json()
        out["calibration"] = self.calibration
        out["languages"] = self.languages
        if self.folds:
            out["cross_validation"] = [f.as_json() for f in self.folds]
        if self.answers is not None:
            out["answers"] = self.answers
        if self.paired:
            out["paired_with_earlier_run"] = self.paired
        return out


def reranker_label(settings: Settings) -> str:
    return "sentence + section" if settings.reranker_kind == "sentence" else str(settings.reranker)


def evaluate(
    settings: Settings,
    docs_dir: Path,
    qs: Sequence[Question],
    oods: Sequence[Question],
    *,
    with_answers: bool = False,
    replay_first: Sequence[Question] = (),
    replay_file: str = "",
    compare_to: Path | None = None,
    cv_seeds: int = 0,
    progress: Progress = lambda _m: None,
    indexing: bool = False,
) -> Evaluation:
    """Everything ``footnote eval`` measures on DOCS (``cv_seeds`` 0: no cross-validation)."""
    # Read first: a bad file should not cost the whole run.
    earlier: dict[str, Any] = json.loads(compare_to.read_text(encoding="utf-8")) if compare_to else {}
    with tempfile.TemporaryDirectory(prefix="footnote-eval-") as tmp:
        # A private index, whatever DOCS is: evaluating never syncs (or marks) the live one.
        # Its models are the live ones (the runtime choices made here, not measured again).
        seed_models(settings.data_dir / "models", Path(tmp) / "models")
        live_data = settings.data_dir
        settings = settings.model_copy(update={"docs_dir": docs_dir, "data_dir": Path(tmp), "chroma_url": None})
        # Every text embedded once and remembered (in the live data dir, beside the index, never in
        # it) for the next eval: an unchanged corpus is evaluated again without embedding anything.
        vectors = CachingEmbedder(Builder(settings).embedder, live_data / "eval-cache")
        b = Builder(settings, vectors)
        progress(f"indexing {docs_dir}")
        b.engine.sync(progress=indexing)
        cal = calibration(b, compute=True)
        report = run_eval(
            b.engine.searcher(),
            load_documents(docs_dir, int(settings.max_file_mb * 1_000_000), settings.ignore, settings.ocr),
            qs,
            oods,
            b.embedder,
            target=settings.chunk_size,
            gate=b.gate_config().current(),
            max_sources=settings.max_sources,
            default_label=f"default: {settings.fusion} fusion + {reranker_label(settings)} rerank",
            progress=progress,
            rewriter=b.rewriter(),
            searched_as=b.answers.searched_as,  # a question in another language: as the answer service searches it
        )
        answers = None
        if with_answers or replay_first:
            answers = _answers(b, qs, oods, compare_to, earlier, progress, replay_first, replay_file)
        text = gate_text(b, compute=False)  # while the index exists
        asked = Counter(b.languages.detect(q.question) or "too short to tell" for q in qs)
        languages = {"questions": dict(asked), "documents": b.storage.manifest.languages()}
        folds = _cross_validation(settings, docs_dir, qs, oods, Path(tmp), vectors, cv_seeds, progress)
        vectors.save()
    ranks = earlier.get("default", {}).get("per_question", [])  # [] from a run that predates them
    paired = paired_ranks(report.strategies["default"].per_question(), ranks) if ranks else []
    return Evaluation(report, text, cal.as_json() if cal else None, answers, folds, paired, languages)


def _cross_validation(
    settings: Settings,
    docs_dir: Path,
    qs: Sequence[Question],
    oods: Sequence[Question],
    tmp: Path,
    embedder: Embedder,
    seeds: int,
    progress: Progress,
) -> list[FoldResult]:
    """Index each half of DOCS on its own and cross-validate the gate between them."""
    if seeds <= 0:
        return []
    docs = load_documents(docs_dir, int(settings.max_file_mb * 1_000_000), settings.ignore, settings.ocr)
    owner = {q.question: document_of(q.needle, docs) for q in qs}
    halves, b = [], None
    for i, paths in enumerate(halves_by_document([d.path for d in docs])):
        folder = tmp / f"half-{i + 1}"
        for p in paths:
            (folder / "docs" / p).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(docs_dir / p, folder / "docs" / p)
        b = Builder(settings.model_copy(update={"docs_dir": folder / "docs", "data_dir": folder / "data"}), embedder)
        progress(f"cross-validation: indexing half {i + 1} ({len(paths)} documents)")
        b.engine.sync()
        mine = [q.question for q in qs if owner[q.question] in paths]
        name = f"half {i + 1} ({len(paths)} docs, {len(mine)} questions)"
        halves.append(Half(name, b.engine.searcher(), mine, [o.question for o in oods[i::2]]))
    progress("cross-validation: probing and scoring both halves")
    if b is None:
        return []
    cfg = b.calibration_config()
    return cross_validate(halves, cfg, seeds=[cfg.seed + i for i in range(seeds)])


def _answers(
    b: Builder,
    qs: Sequence[Question],
    oods: Sequence[Question],
    compare_to: Path | None,
    earlier: dict[str, Any],
    progress: Progress,
    replay_first: Sequence[Question] = (),
    replay_file: str = "",
) -> dict[str, Any]:
    """Every question through the real answer service (after replaying ``replay_first``: asked,
    and confirmed where their needle was shown); optionally paired against an earlier run."""
    before = None
    if compare_to is not None:  # checked before the answers: a file without them should not cost them
        old = earlier.get("answers", {}).get("rows")
        if not old:
            raise ConfigError(f"{compare_to} has no answers: run the earlier eval with --answers --json")
        before = rows_from_json(old)
    replayed = replay(b.answers, replay_first, progress) if replay_first else None
    rows = run_answers(b.answers, qs, oods, progress=progress, language_of=b.languages.detect)
    result: dict[str, Any] = {"model": b.model.name, "summary": summarise(rows), "rows": rows_json(rows)}
    if replayed is not None:
        result["replayed"], result["replay_failed"] = replayed.confirmed, replayed.failed
        result["replay_file"] = replay_file
    styles = by_style(rows)
    if styles:
        result["by_style"] = {style: summarise(sub) for style, sub in styles.items()}
    if before is not None:
        result["paired"] = compare_all(rows, before)
        for style, sub in styles.items():
            result.setdefault("paired_by_style", {})[style] = compare_all(sub, before)
    return result
