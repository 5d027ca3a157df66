"""How the gate's assert quantile is chosen: ``python -m bench.outcomes CORPUS…``.

The calibrated gate answers a question no looser than the ``assert_quantile`` of the drive's
own in-domain probes (``retrieval.search.calibration``): the median (0.5) means a question
must sit at least as close to the drive as half of the drive's own half-masked sentences
do. This sweeps that quantile over a grid. Each CORPUS folder holds ``docs/``,
``questions.jsonl`` (needs asked directly, "course", and as chatty messages, "ticket",
each with its verbatim ``needle``), ``ood.jsonl`` and ``ood-ticket.jsonl`` (direct and
chatty questions the documents do not answer). Each corpus is indexed as the product
indexes it (``FOOTNOTE_EMBED_MODEL``, ``auto``), probed once as the calibrator probes it,
and each question searched once; then for every quantile the calibration is chosen again
from the same probes and every question gets the gate's verdict, per style:

- answerable questions **answered** with the needle in the passages the model is shown,
  answered without it, and not answered (pointed at or refused);
- unanswerable questions answered.

The chosen quantile, per language of the drives (``Languages.main``), is among those that
answer at most ``--max-answered`` unanswerable questions of each style on every corpus
of that language, the one answering the most with the needle (the stricter on a tie):
``retrieval.search.calibration.ASSERT_QUANTILE``. With it, the point threshold's quantile of
the generic off-topic probes is swept as well: per style, answerable questions pointed at
with the needle in a pointer's passage, refused ones (dead ends), and unanswerable ones
refused; the chosen is the strictest that refuses at most ``--max-dead-ends`` answerable
questions of each style on each corpus (``POINT_QUANTILE``). These are the development
corpora (dev and guides in English, danish-dev in Danish); the corpora scored independently
check the choice. No language model is called. Figures only, no pass/fail; run from a
checkout with the project's venv.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import click

from bench.drive import indexed, rows
from bot.builder import Builder
from retrieval.answer.pointers import POINTERS
from retrieval.evaluation import normalise
from retrieval.models import cpu_info
from retrieval.search import gate_signal
from retrieval.search.calibration import Probed, choose, probe
from retrieval.search.languages import Languages

GRID = [round(0.30 + 0.05 * i, 2) for i in range(13)]  # 0.30 … 0.90
POINT_GRID = [round(0.05 * i, 2) for i in range(1, 7)]  # 0.05 … 0.30
STYLES = ("course", "ticket")


@dataclass(frozen=True)
class Asked:
    style: str
    answerable: bool
    score: float  # the gate signal of its own search
    found: bool  # the needle is in one of the passages an answer is written from
    pointable: bool  # ... in one of the passages a pointer would show


@dataclass(frozen=True)
class Corpus:
    name: str
    language: str
    probed: Probed
    builder: Builder
    asked: list[Asked]


@dataclass
class Tally:
    found: int = 0  # answerable, answered with the needle in its passages
    missed: int = 0  # answerable, answered without it
    held: int = 0  # answerable, pointed at or refused
    bluffs: int = 0  # unanswerable, answered
    n_ood: int = 0

    def __str__(self) -> str:
        return f"{self.found}/{self.missed}/{self.held} {self.bluffs}/{self.n_ood}"


def _rows(path: Path) -> list[dict[str, str]]:
    return rows(path) if path.exists() else []  # a corpus without chatty unanswerable questions


def _corpus(folder: Path) -> Corpus:
    b = indexed(folder, calibrate=False)  # probed below, once, for every quantile
    searcher = b.engine.searcher()
    probed = probe(searcher, b.calibration_config())
    gate = b.gate_config()
    asked = []
    questions = [(q, q.get("style", "course"), True) for q in _rows(folder / "questions.jsonl")]
    questions += [(q, "course", False) for q in _rows(folder / "ood.jsonl")]
    questions += [(q, "ticket", False) for q in _rows(folder / "ood-ticket.jsonl")]
    for q, style, answerable in questions:
        r = searcher.search(q["question"], k=20)
        want = normalise(q["needle"]) if answerable else None
        at = next((i for i, h in enumerate(r.hits) if want and want in normalise(h.chunk.content)), len(r.hits))
        asked.append(Asked(style, answerable, gate_signal(r, gate), at < b.settings.max_sources, at < POINTERS))
    return Corpus(folder.name, Languages.main(searcher.snapshot), probed, b, asked)


def _tally(c: Corpus, quantile: float) -> dict[str, Tally]:
    cal = choose(c.probed, replace(c.builder.calibration_config(), assert_quantile=quantile))
    out = {style: Tally() for style in STYLES}
    for a in c.asked:
        t, answered = out[a.style], a.score <= cal.threshold
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


def _ends(c: Corpus, point_quantile: float) -> dict[str, Ends]:
    """With the assert quantile measured for the drive's language, where the point threshold
    at ``point_quantile`` of the generic off-topic probes leaves each question."""
    cal = choose(c.probed, replace(c.builder.calibration_config(), point_quantile=point_quantile))
    assert_at, point = cal.thresholds
    out = {style: Ends() for style in STYLES}
    for a in c.asked:
        t = out[a.style]
        if not a.answerable:
            t.n_ood += 1
            t.refused += a.score > point
        elif a.score > point:
            t.dead += 1
        elif a.score > assert_at:
            t.shown += a.pointable
    return out


def _points(language: str, mine: list[Corpus], max_dead: int) -> None:
    click.echo(
        f"\n{language}, the point threshold (cells: per style, answerable pointed at with the needle in a "
        "pointer's passage / refused, unanswerable refused)"
    )
    click.echo("quantile  " + "  ".join(f"{r.name + ' ' + st:>22}" for r in mine for st in STYLES))
    ok = []
    for q in POINT_GRID:
        ends = [_ends(r, q) for r in mine]
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
def main(corpora: tuple[Path, ...], max_dead_ends: int, max_answered: int) -> None:
    runs = [_corpus(c) for c in corpora]
    click.echo(f"{cpu_info().describe()}")
    click.echo(
        "cells: per style, answerable answered with the needle / without it / not answered, unanswerable answered"
    )
    for language in dict.fromkeys(r.language for r in runs):
        mine = [r for r in runs if r.language == language]
        click.echo(f"\n{language}: " + ", ".join(r.name for r in mine))
        click.echo("quantile  " + "  ".join(f"{r.name + ' ' + st:>22}" for r in mine for st in STYLES))
        table = []
        for q in GRID:
            tallies = [_tally(r, q) for r in mine]
            table.append((q, tallies))
            click.echo(f"{q:8.2f}  " + "  ".join(f"{t[st]!s:>22}" for t in tallies for st in STYLES))
        ok = [row for row in table if all(t[st].bluffs <= max_answered for t in row[1] for st in STYLES)]
        if not ok:
            click.echo(f"no quantile answers at most {max_answered} unanswerable questions of each style")
            continue
        best = max(ok, key=lambda row: (sum(t[st].found for t in row[1] for st in STYLES), -row[0]))
        loosest = max(row[0] for row in ok)
        click.echo(
            f"chosen for {language}: {best[0]:.2f} (the most answered with the needle, the stricter on a tie; "
            f"the loosest within {max_answered} unanswerable answered per style: {loosest:.2f})"
        )
        _points(language, mine, max_dead_ends)


if __name__ == "__main__":
    main()
