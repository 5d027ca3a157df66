"""How the gate's assert quantile and coverage weight are chosen: ``python -m bench.outcomes CORPUS…``.

The calibrated gate answers a question no looser than the ``assert_quantile`` of the drive's
own in-domain probes (``retrieval.search.calibration``): the median (0.5) means a question
must sit at least as close to the drive as half of the drive's own half-masked sentences
do. This sweeps that quantile over a grid. Each CORPUS folder holds ``docs/``,
``questions.jsonl`` (needs asked directly, "course", and as chatty messages, "ticket",
each with its verbatim ``needle``), ``ood.jsonl`` and ``ood-ticket.jsonl`` (direct and
chatty questions the documents do not answer). Each corpus is indexed as the product
indexes it (``FOOTNOTE_EMBED_MODEL``, ``auto``), probed once as the calibrator probes it,
and each question searched once; then for every coverage weight (the gate signal's ``w × (1 −
idf coverage)``) and every quantile the calibration is chosen again from the same probes and
every question gets the gate's verdict, per style:

- answerable questions **answered** with the needle in the source sentences the model reads
  (those it may cite: ``retrieval.answer.evidence.sentences_read`` of the passages it is
  given), answered without it, and not answered (pointed at or refused);
- unanswerable questions answered.

Counting the needle in the passages instead overstated what the answers cite: on danish-dev
the needle was in the passages of 21 chatty messages and in the two sentences the model
reads of 5, and a run of the answers cited it for 3 (docs/measurements.md, "The coverage
weight per model"). The chosen pair, per language of the drives (``Languages.main``), is
among those that answer at most ``--max-answered`` unanswerable questions of each style on
every corpus of that language, the one with the most answers holding the needle **less**
those without it (a wrong answer costs what a cited one gains; the stricter quantile, then
the heavier weight, on a tie): the quantile is ``retrieval.search.calibration.ASSERT_QUANTILE``
for the language, the weight ``retrieval.search.gate.COVERAGE_WEIGHT`` for the embedding
model those drives use (its cosine distances have their own scale: multilingual-e5's lie in
a tenth of MiniLM's range). With them, the point threshold's quantile of
the generic off-topic probes is swept as well: per style, answerable questions pointed at
with the needle in a pointer's passage, refused ones (dead ends), and unanswerable ones
refused; the chosen is the strictest that refuses at most ``--max-dead-ends`` answerable
questions of each style on each corpus (``POINT_QUANTILE``). These are the development
corpora (dev and guides in English, danish-dev in Danish); the corpora scored independently
check the choice. No language model is called. Figures only, no pass/fail; run from a
checkout with the project's venv.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import click

from bench.drive import indexed, rows
from bot.builder import Builder
from retrieval.answer.evidence import SourceSentence, sentences_read
from retrieval.answer.pointers import POINTERS
from retrieval.evaluation import normalise
from retrieval.index import Snapshot
from retrieval.models import cpu_info
from retrieval.search import GateConfig, facts_of, signal
from retrieval.search.calibration import CalibrationConfig, Facts, Probed, choose, probe
from retrieval.search.languages import Languages
from retrieval.search.searcher import SearchResult

GRID = [round(0.30 + 0.05 * i, 2) for i in range(13)]  # 0.30 … 0.90
POINT_GRID = [round(0.05 * i, 2) for i in range(1, 7)]  # 0.05 … 0.30
WEIGHTS = (0.0, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75)  # the coverage term's weight
STYLES = ("course", "ticket")


@dataclass(frozen=True)
class Asked:
    style: str
    answerable: bool
    facts: Facts | None  # what its own search measured (None: no hits), for the gate signal at any weight
    found: bool  # the needle is in one of the source sentences the model reads (and may cite)
    pointable: bool  # ... in one of the passages a pointer would show


@dataclass(frozen=True)
class Corpus:
    name: str
    language: str
    probed: Probed
    builder: Builder
    asked: list[Asked]
    model: str  # the embedding model the drive is indexed with

    def score(self, a: Asked, weight: float) -> float:
        """``a``'s gate signal with the coverage term at ``weight``."""
        cfg = GateConfig(coverage_weight=weight, sentence_weight=self.builder.settings.gate_sentence_weight)
        return float("inf") if a.facts is None else signal(*a.facts, cfg)


@dataclass
class Tally:
    found: int = 0  # answerable, answered with the needle in the sentences the model reads
    missed: int = 0  # answerable, answered without it
    held: int = 0  # answerable, pointed at or refused
    bluffs: int = 0  # unanswerable, answered
    n_ood: int = 0

    def __str__(self) -> str:
        return f"{self.found}/{self.missed}/{self.held} {self.bluffs}/{self.n_ood}"

    @property
    def net(self) -> int:
        """Answers holding the needle less those without it."""
        return self.found - self.missed


def _rows(path: Path) -> list[dict[str, str]]:
    return rows(path) if path.exists() else []  # a corpus without chatty unanswerable questions


def small_drives(folder: Path, docs: int, seeds: int, root: Path) -> list[Path]:
    """``seeds`` drives of ``docs`` documents each, drawn (seeded) from those ``folder``'s
    needles are in, written under ``root``: a small team's drive. A need whose document was
    left out is a question the drive cannot answer, so it joins the unanswerable ones of its
    style (``x`` before its id)."""
    asked = _rows(folder / "questions.jsonl")
    holding = sorted({q["doc"] for q in asked})
    out = []
    for seed in range(seeds):
        kept = set(random.Random(seed).sample(holding, min(docs, len(holding))))
        drive = root / f"{folder.name}-{docs}docs-{seed}"
        (drive / "docs").mkdir(parents=True)
        for name in sorted(kept):
            shutil.copy2(folder / "docs" / name, drive / "docs" / name)
        gone = [q for q in asked if q["doc"] not in kept]
        _write(drive / "questions.jsonl", [q for q in asked if q["doc"] in kept])
        _write(drive / "ood.jsonl", _rows(folder / "ood.jsonl") + _unanswerable(gone, "course"))
        _write(drive / "ood-ticket.jsonl", _rows(folder / "ood-ticket.jsonl") + _unanswerable(gone, "ticket"))
        out.append(drive)
    return out


def _unanswerable(gone: list[dict[str, str]], style: str) -> list[dict[str, str]]:
    return [{"id": f"x{q['id']}", "question": q["question"]} for q in gone if q.get("style", "course") == style]


def _write(path: Path, records: list[dict[str, str]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def _corpus(folder: Path) -> Corpus:
    b = indexed(folder, calibrate=False)  # probed below, once, for every quantile
    searcher = b.engine.searcher()
    probed = probe(searcher, b.calibration_config())
    asked = []
    questions = [(q, q.get("style", "course"), True) for q in _rows(folder / "questions.jsonl")]
    questions += [(q, "course", False) for q in _rows(folder / "ood.jsonl")]
    questions += [(q, "ticket", False) for q in _rows(folder / "ood-ticket.jsonl")]
    for q, style, answerable in questions:
        r = searcher.search(q["question"], k=20)
        want = normalise(q["needle"]) if answerable else ""
        at = next((i for i, h in enumerate(r.hits) if want and want in normalise(h.chunk.content)), len(r.hits))
        read = bool(want) and any(_holds(want, s.text) for s in _read(b, searcher.snapshot, r))
        asked.append(Asked(style, answerable, facts_of(r), read, at < POINTERS))
    model = b.embedding_in_use or b.embedding_model()
    return Corpus(folder.name, Languages.main(searcher.snapshot), probed, b, asked, model)


def _read(b: Builder, snap: Snapshot, r: SearchResult) -> list[SourceSentence]:
    """The source sentences the model would read for ``r``, as the answer service picks them."""
    return sentences_read(r.hits[: b.settings.max_sources], snap, r.query_vector, r.query, b.settings.max_sentences)


def _holds(needle: str, sentence: str) -> bool:
    """The sentence holds the (normalised) needle, or is most of a needle two sentences long."""
    text = normalise(sentence)
    return bool(text) and (needle in text or (text in needle and len(text) > len(needle) / 2))


def _calibration_config(
    c: Corpus, weight: float, assert_quantile: float | None = None, point_quantile: float | None = None
) -> CalibrationConfig:
    cfg = replace(c.builder.calibration_config(), coverage_weight=weight)
    if assert_quantile is not None:
        cfg = replace(cfg, assert_quantile=assert_quantile)
    return cfg if point_quantile is None else replace(cfg, point_quantile=point_quantile)


def _tally(c: Corpus, quantile: float, weight: float) -> dict[str, Tally]:
    cal = choose(c.probed, _calibration_config(c, weight, assert_quantile=quantile))
    out = {style: Tally() for style in STYLES}
    for a in c.asked:
        t, answered = out[a.style], c.score(a, weight) <= cal.threshold
        if not a.answerable:
            t.n_ood += 1
            t.bluffs += answered
        elif answered:
            t.found += a.found
            t.missed += not a.found
        else:
            t.held += 1
    return out


@dataclass
class Ends:
    shown: int = 0  # answerable, pointed at with the needle in a pointer's passage
    dead: int = 0  # answerable, refused
    refused: int = 0  # unanswerable, refused
    n_ood: int = 0

    def __str__(self) -> str:
        return f"{self.shown}/{self.dead} {self.refused}/{self.n_ood}"


def _ends(c: Corpus, point_quantile: float, weight: float, assert_quantile: float) -> dict[str, Ends]:
    """With the chosen weight and assert quantile, where the point threshold at ``point_quantile``
    of the generic off-topic probes leaves each question."""
    cfg = _calibration_config(c, weight, assert_quantile=assert_quantile, point_quantile=point_quantile)
    assert_at, point = choose(c.probed, cfg).thresholds
    out = {style: Ends() for style in STYLES}
    for a in c.asked:
        t, score = out[a.style], c.score(a, weight)
        if not a.answerable:
            t.n_ood += 1
            t.refused += score > point
        elif score > point:
            t.dead += 1
        elif score > assert_at:
            t.shown += a.pointable
    return out


def _points(language: str, mine: list[Corpus], max_dead: int, weight: float, assert_quantile: float) -> None:
    click.echo(
        f"\n{language}, the point threshold (cells: per style, answerable pointed at with the needle in a "
        "pointer's passage / refused, unanswerable refused)"
    )
    click.echo("quantile  " + "  ".join(f"{r.name + ' ' + st:>22}" for r in mine for st in STYLES))
    ok = []
    for q in POINT_GRID:
        ends = [_ends(r, q, weight, assert_quantile) for r in mine]
        click.echo(f"{q:8.2f}  " + "  ".join(f"{e[st]!s:>22}" for e in ends for st in STYLES))
        if all(e[st].dead <= max_dead for e in ends for st in STYLES):
            ok.append(q)
    if ok:
        click.echo(f"chosen for {language}: {min(ok):.2f} (the strictest with at most {max_dead} dead ends per style)")
    else:
        click.echo(f"no point quantile keeps the dead ends at or below {max_dead} per style")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("corpora", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--max-dead-ends",
    default=1,
    show_default=True,
    help="Most answerable questions of each style the point threshold may refuse, per corpus.",
)
@click.option(
    "--max-answered",
    default=3,
    show_default=True,
    help="Most unanswerable questions of each style the gate may answer, per corpus.",
)
@click.option(
    "--docs",
    "small",
    type=click.IntRange(min=1),
    default=None,
    help="Measure small drives instead: each corpus cut to this many of the documents its needles are in "
    "(the needs of the others become unanswerable questions).",
)
@click.option("--seeds", default=3, show_default=True, help="With --docs: how many small drives per corpus.")
def main(corpora: tuple[Path, ...], max_dead_ends: int, max_answered: int, small: int | None, seeds: int) -> None:
    if small is not None:
        root = Path(tempfile.mkdtemp(prefix="footnote-small-drives-"))
        corpora = tuple(d for c in corpora for d in small_drives(c, small, seeds, root))
    runs = [_corpus(c) for c in corpora]
    click.echo(f"{cpu_info().describe()}")
    click.echo(
        "cells: per style, answerable answered with the needle in the sentences the model reads / without it / "
        "not answered, unanswerable answered"
    )
    for language in dict.fromkeys(r.language for r in runs):
        mine = [r for r in runs if r.language == language]
        models = sorted({r.model for r in mine})
        click.echo(f"\n{language}: " + ", ".join(r.name for r in mine) + f" (embedding model: {', '.join(models)})")
        chosen = _choose(mine, max_answered)
        if chosen is None:
            click.echo(f"no weight and quantile answer at most {max_answered} unanswerable questions of each style")
            continue
        weight, quantile = chosen
        _show(mine, weight)
        click.echo(
            f"chosen for {language}: coverage weight {weight:g}, assert quantile {quantile:.2f} (the most answers "
            f"with the needle less those without, at most {max_answered} unanswerable answered per style; the "
            "stricter quantile, then the heavier weight, on a tie)"
        )
        _points(language, mine, max_dead_ends, weight, quantile)


Row = tuple[float, float, list[dict[str, Tally]]]  # weight, quantile, each corpus's tallies


def _net(row: Row) -> int:
    return sum(t[st].net for t in row[2] for st in STYLES)


def _choose(mine: list[Corpus], max_answered: int) -> tuple[float, float] | None:
    """The (weight, quantile) with the most answers holding the needle less those without it,
    within the limit; one line per weight."""
    best: Row | None = None
    for w in WEIGHTS:
        rows = [(w, q, [_tally(r, q, w) for r in mine]) for q in GRID]
        ok = [row for row in rows if all(t[st].bluffs <= max_answered for t in row[2] for st in STYLES)]
        top = max(ok, key=lambda row: (_net(row), -row[1]), default=None)
        if top is None:
            click.echo(f"weight {w:<5g}  no quantile within the limit")
            continue
        cells = "  ".join(f"{t[st]!s:>14}" for t in top[2] for st in STYLES)
        click.echo(f"weight {w:<5g}  best quantile {top[1]:.2f}: {_net(top):3d} net  {cells}")
        if best is None or (_net(top), -top[1], w) > (_net(best), -best[1], best[0]):
            best = top
    return None if best is None else (best[0], best[1])


def _show(mine: list[Corpus], weight: float) -> None:
    click.echo(f"coverage weight {weight:g}, every quantile:")
    click.echo("quantile  " + "  ".join(f"{r.name + ' ' + st:>22}" for r in mine for st in STYLES))
    for q in GRID:
        tallies = [_tally(r, q, weight) for r in mine]
        click.echo(f"{q:8.2f}  " + "  ".join(f"{t[st]!s:>22}" for t in tallies for st in STYLES))


if __name__ == "__main__":
    main()
