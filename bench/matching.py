"""How the learned pairs' matching thresholds are chosen: ``python -m bench.matching CORPUS…``.

Each CORPUS folder holds ``docs/``, ``questions.jsonl`` (needs asked directly, "course", and
as chatty messages, "ticket") and ``ood-ticket.jsonl`` (chatty messages the docs do not
answer). For every direct question, the passage holding its needle among the passages it
finds (its pointers' excerpts and its passages' sentences, as a teammate would click) is
confirmed; then every chatty message is matched against those pairs, on a grid of
(``alone``, ``with_passage``) thresholds:

- an answerable message matching its own twin's pair is a hit; another pair, wrong;
- an unanswerable one matching any pair would be answered from a passage that does not
  answer it (the model may still decline: ``footnote eval --replay`` measures that).

The chosen pair of thresholds has the most hits over all corpora while letting at most
``--max-ood`` unanswerable messages match on each, per embedding model: each corpus is
indexed with the model ``FOOTNOTE_EMBED_MODEL`` (``auto``) gives it, and each model's
cosines have their own scale (MiniLM's 0.50 is multilingual-e5's 0.89), so each model gets
its own choice (``retrieval.learn.pairs.MEASURED``). No language model is called. These are
the development corpora (dev and guides for MiniLM, danish-dev for multilingual-e5): the
corpora scored independently check the choice.
Figures only, no pass/fail; run from a checkout with the project's venv.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import click
import numpy as np

from bot.builder import Builder
from config.settings import load_settings
from retrieval.evaluation import CachingEmbedder, normalise
from retrieval.learn import LearnedPairs, MatchConfig
from retrieval.models import cpu_info, seed_models

ALONE = [round(0.40 + 0.005 * i, 3) for i in range(111)]  # 0.400 … 0.950
GRID = sorted({(a, b) for a in ALONE for b in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, a) if b <= a})
SHOWN = {round(0.40 + 0.05 * i, 2) for i in range(12)}  # the rows printed besides the choice


@dataclass
class Probe:
    """A chatty message with what matching needs: its vector, its best hit, whose twin it is."""

    vector: np.ndarray
    best_hit: object
    twin: str | None  # the id of its direct twin (None: unanswerable)


def _rows(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _corpus(folder: Path, progress: bool) -> tuple[str, Builder, LearnedPairs, dict[str, str], list[Probe]]:
    """Index ``folder``, confirm each direct question's needle passage, and the chatty probes."""
    live = load_settings()
    tmp = Path(tempfile.mkdtemp(prefix="footnote-matching-"))
    seed_models(live.data_dir / "models", tmp / "models")
    s = live.model_copy(update={"docs_dir": folder / "docs", "data_dir": tmp, "chroma_url": None})
    plain = Builder(s)
    b = Builder(s, CachingEmbedder(plain.embedder, live.data_dir / "eval-cache"))
    b.embedding_in_use = plain.embedding_in_use  # the model the cache wraps
    b.engine.sync(progress=progress)
    pairs = b.learned  # where the answer service keeps what it confirms
    owner: dict[str, str] = {}  # pair id -> the direct question's id
    questions = _rows(folder / "questions.jsonl")
    for q in questions:
        if q.get("style", "course") != "course":
            continue
        want = normalise(q["needle"])
        shown = next((c for c in b.answers.candidates(q["question"]) if want in normalise(c.quote)), None)
        if shown is not None:
            pair = b.answers.confirm(q["question"], shown, None, "bench", "replay")
            if pair is not None:
                owner[pair.id] = q["id"]
    searcher = b.engine.searcher()
    probes = []
    chatty: list[tuple[dict[str, str], str | None]] = [(q, q["id"]) for q in questions if q.get("style") == "ticket"]
    chatty += [(q, None) for q in _rows(folder / "ood-ticket.jsonl")]
    for q, twin in chatty:
        r = searcher.search(q["question"], k=1)
        probes.append(Probe(r.query_vector, r.hits[0].chunk if r.hits else None, twin))  # type: ignore[arg-type]
    return plain.embedding_in_use or "minilm", b, pairs, owner, probes


def _count(b: Builder, pairs: LearnedPairs, owner: dict[str, str], probes: Sequence[Probe]) -> tuple[int, int, int]:
    hits = wrong = ood = 0
    snap = b.engine.searcher().snapshot
    for p in probes:
        m = pairs.match(p.vector, None, snap, p.best_hit)  # type: ignore[arg-type]
        if m is None:
            continue
        if p.twin is None:
            ood += 1
        elif owner.get(m.pair.id) == p.twin:
            hits += 1
        else:
            wrong += 1
    return hits, wrong, ood


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("corpora", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--max-ood", default=3, show_default=True, help="Most unanswerable chatty messages that may match, per corpus."
)
def main(corpora: tuple[Path, ...], max_ood: int) -> None:
    runs = [(c.name, *_corpus(c, progress=False)) for c in corpora]
    for name, model, _, _, owner, probes in runs:
        n_in = sum(p.twin is not None for p in probes)
        click.echo(
            f"{name} ({model}): {len(owner)} direct questions confirmed; {n_in} chatty messages, "
            f"{len(probes) - n_in} unanswerable"
        )
    for model in dict.fromkeys(r[1] for r in runs):
        _choose(model, [r for r in runs if r[1] == model], max_ood)


def _choose(
    model: str, runs: list[tuple[str, str, Builder, LearnedPairs, dict[str, str], list[Probe]]], max_ood: int
) -> None:
    click.echo(f"\n{model} on {cpu_info().describe()}")
    click.echo("alone  with-passage  " + "  ".join(f"{r[0]:>22}" for r in runs) + "   (hits/wrong/unanswerable)")
    table = []
    for a, bp in GRID:
        counts = []
        for _, _, b, pairs, owner, probes in runs:
            pairs.cfg = MatchConfig(a, bp)
            counts.append(_count(b, pairs, owner, probes))
        table.append((a, bp, counts))
        if a == bp and a in SHOWN:
            click.echo(f"{a:5.3f}  {bp:12.3f}  " + "  ".join(f"{h:>10}/{w}/{o:<9}" for h, w, o in counts))
    ok = [t for t in table if all(o <= max_ood for _, _, o in t[2])]
    if not ok:
        click.echo(f"no thresholds keep the unanswerable matches at or below {max_ood} on every corpus")
        return
    a, bp, counts = max(ok, key=lambda t: (sum(h for h, _, _ in t[2]), -sum(w for _, w, _ in t[2]), t[0], t[1]))
    click.echo(
        f"chosen for {model}: alone {a:.3f}, with the passage as the best hit {bp:.3f}: "
        + ", ".join(f"{r[0]} {h} hits, {w} wrong, {o} unanswerable" for r, (h, w, o) in zip(runs, counts, strict=True))
    )


if __name__ == "__main__":
    main()
