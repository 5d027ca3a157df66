"""Whether a translation should be drafted from its prompt: ``python -m bench.drafts --questions Q.jsonl``.

Loads the answer model as the product does (weights and prompt lookup as measured or set),
then translates each question (``--into en``) or needle (``--into da``) twice, once with
drafts and once without, alternating which goes first so neither is favoured by a warm
cache. Prints, with the CPU, p50 and mean seconds of each, the paired sign test of the
per-text differences, and how many translations came out word for word the same. This is
the procedure behind ``drafts=False`` in :mod:`retrieval.answer.translate`. Figures only,
never a pass/fail; never run two benchmarks at once on a 2-core box.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from bench.drive import rows
from bot.builder import Builder
from config.settings import load_settings
from retrieval.answer.translate import translation_budget, translation_messages
from retrieval.evaluation import sign_test
from retrieval.models import LanguageModel, cpu_info, seed_models

FC = TypeVar("FC", bound=Callable[..., object])


def _texts(path: Path, field: str, limit: int) -> list[str]:
    return [r[field] for r in rows(path)][:limit]


def _timed(model: LanguageModel, text: str, target: str, drafts: bool) -> tuple[float, str]:
    budget = translation_budget(text)  # as the Translator asks
    t = time.perf_counter()
    out = model.complete(translation_messages(text, target), budget, deadline_s=30.0, drafts=drafts)
    return time.perf_counter() - t, " ".join(out.split())


QUESTIONS = click.option("--questions", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)


def into_option(default: str) -> Callable[[FC], FC]:
    """``--into``: which texts of the questions file are translated, into which language."""
    return click.option(
        "--into",
        "target",
        type=click.Choice(["en", "da"]),
        default=default,
        show_default=True,
        help="en: translate the questions; da: translate the needles (a document's own words, as an answer's sentence is).",
    )


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@QUESTIONS
@into_option("en")
@click.option("--limit", default=24, show_default=True, help="Texts to translate (each twice).")
def main(questions: Path, target: str, limit: int) -> None:  # fmt: skip
    texts = _texts(questions, "question" if target == "en" else "needle", limit)
    live = load_settings()
    click.echo(f"CPU  {cpu_info().describe()}")
    with tempfile.TemporaryDirectory(prefix="footnote-bench-drafts-") as tmp:
        seed_models(live.data_dir / "models", Path(tmp) / "models")
        model = Builder(live.model_copy(update={"data_dir": Path(tmp)})).model
        for report in (getattr(model, "weights", None), getattr(model, "lookup", None)):
            if report is not None:
                click.echo(f"model  {getattr(model, 'name', '?')}: {report.describe()}")
        if hasattr(model, "prompt_lookup"):  # the comparison needs a model that can draft
            model.prompt_lookup = True
        _timed(model, "Hej", target, False)  # warm: the examples' start is kept
        on: list[float] = []
        off: list[float] = []
        same = 0
        for i, text in enumerate(texts):
            order = (True, False) if i % 2 == 0 else (False, True)
            runs = {drafts: _timed(model, text, target, drafts) for drafts in order}
            on.append(runs[True][0])
            off.append(runs[False][0])
            same += runs[True][1] == runs[False][1]
    wins = sum(a < b for a, b in zip(off, on, strict=True))
    losses = sum(a > b for a, b in zip(off, on, strict=True))
    click.echo(f"into {target}, {len(texts)} texts")
    for name, xs in (("drafted", on), ("not drafted", off)):
        click.echo(f"  {name:12} p50 {statistics.median(xs):5.2f} s  mean {statistics.fmean(xs):5.2f} s")
    click.echo(f"  not drafted faster for {wins}, slower for {losses} (sign test p = {sign_test(wins, losses):.2g})")
    click.echo(f"  the same words both ways: {same} of {len(texts)}")


if __name__ == "__main__":
    main()
