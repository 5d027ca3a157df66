"""``python -m bench [OPTIONS]`` from the repository root (``make bench``; ``footnote bench`` in a checkout)."""

from __future__ import annotations

from pathlib import Path

import click

from bench import bench
from bench.drive import rows
from config.settings import load_settings


def _questions(path: Path) -> list[str]:
    return [str(r["question"]) for r in rows(path)]


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--docs",
    "docs_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Documents to index [default FOOTNOTE_DOCS_DIR].",
)
@click.option(
    "--questions",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help='JSON lines with a "question" field (default: section titles).',
)
@click.option(
    "--answers", default=10, show_default=True, help="Questions to answer with the model (0 = skip the model)."
)
@click.option(
    "--synthetic", default=100_000, show_default=True, help="Chunks in the synthetic growth index (0 = skip)."
)
@click.option("--generated", default=0, show_default=True, help="Also time a sync of this many generated documents.")
@click.option("--slack", default=10, show_default=True, help="Questions sent through the Bolt app (0 = skip).")
@click.option(
    "--fresh",
    is_flag=True,
    help="Measure as a first start does (runtimes, weights, drafting): the live data dir's measurements are not lent.",
)
def main(
    docs_dir: Path | None,
    questions: Path | None,
    answers: int,
    synthetic: int,
    generated: int,
    slack: int,
    fresh: bool,
) -> None:
    """Print throughput, per-stage latency (p50/p95), answer time and peak memory, with the CPU.

    Memory is the peak RSS summed over this process and its children (the weights are
    measured in child processes): once while the model loads, once while it answers.

    Indexes DOCS into a temporary directory (the live index is not touched), times
    every query stage and the model, then the same retrieval on a synthetic index
    to show how cost grows. Figures only; it never passes or fails.
    """
    settings = load_settings()
    qs = _questions(questions) if questions else []
    docs = (docs_dir or settings.docs_dir).resolve()
    bench(settings, docs, qs, answers, synthetic, click.echo, generated, slack, fresh)


if __name__ == "__main__":
    main(prog_name="python -m bench")
