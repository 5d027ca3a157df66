"""How the learned pairs' matching thresholds are chosen: ``python -m bench.matching CORPUS…``.

Each CORPUS folder holds ``docs/``, ``questions.jsonl`` (needs asked directly, "course", and
as chatty messages, "ticket") and ``ood-ticket.jsonl`` (chatty messages the docs do not
answer; ``ood.jsonl``, direct ones). For every direct question, the passage holding its
needle among the passages it finds (its pointers' excerpts and its passages' sentences, as a
teammate would click) is confirmed; then messages are matched against those pairs, on a grid
of (``alone``, ``with_passage``, ``over_sure``) thresholds and ``within`` (how many of the
message's first hits may hold the confirmed passage for ``with_passage``), each message
with the gate's verdict on its own search (``over_sure`` applies when the gate would answer
it):

- a chatty message matching its own twin's pair is a hit; another pair, wrong;
- an unanswerable one (chatty or direct) matching any pair would be answered from a passage
  that does not answer it (the model may still decline: ``footnote eval --replay`` says);
- a direct question matching another question's pair, its own left out, is **taken over**:
  a teammate confirmed a passage for a need on the same topic, and that question, asked
  before its own was confirmed, would get that other passage as a confirmed answer.

The chosen thresholds have the most hits, less the wrong ones, the direct questions taken
over (each of those loses its own answer: ``footnote eval --replay`` measured it) and the
unanswerable messages matched (each is answered wrongly), over all corpora while letting at most
``--max-ood`` unanswerable chatty messages match, and taking over at most ``--max-taken``
direct questions, on each corpus, per embedding model: each corpus is
indexed with the model ``FOOTNOTE_EMBED_MODEL`` (``auto``) gives it, and each model's
cosines have their own scale (MiniLM's 0.50 is multilingual-e5's 0.89), so each model gets
its own choice (``retrieval.learn.pairs.MEASURED``). No language model is called. These are
the development corpora (dev and guides for MiniLM, danish-dev for multilingual-e5): the
corpora scored independently check the choice.
Figures only, no pass/fail; run from a checkout with the project's venv.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import click
import numpy as np

from bench.drive import indexed, rows
from bot.builder import Builder
from retrieval.evaluation import normalise
from retrieval.learn import NEVER, MatchConfig, holder, ranks
from retrieval.models import cpu_info
from retrieval.search import Verdict, decide

ALONE = [round(0.40 + 0.005 * i, 3) for i in range(111)]  # 0.400 … 0.950
WITHIN = (1, 2, 3, 4)  # how many of a message's first hits may hold the confirmed passage
GRID = sorted(
    {
        MatchConfig(a, b, o, k if b < a else 1)
        for a in ALONE
        for b in ALONE
        for o in (a, 0.55, 0.6, 0.7, 0.8, 0.9, NEVER)
        for k in WITHIN
        if a - 0.1 <= b <= a <= o
    },
    key=lambda m: (m.alone, m.with_passage, m.over_sure, m.within),
)
SHOWN = {round(0.40 + 0.05 * i, 2) for i in range(12)}  # the rows printed besides the choice


@dataclass
class Probe:
    """A message with what matching needs: each pair's cosine to it and its passage's rank among
    the message's hits (the closest pair first), the gate's verdict, and what the message is."""

    pairs: list[tuple[float, int | None, str]]  # (cosine, rank of the pair's passage or None, pair id)
    sure: bool  # the gate would answer it from its own search
    twin: str | None  # a chatty message's direct twin's id (None: unanswerable)
    kind: str  # "chatty", or "direct" (``own``: its own pair, left out)
    own: str | None = None


@dataclass
class Counts:
    hits: int = 0  # chatty messages matched to their twin's pair
    wrong: int = 0  # ... to another pair
    ood: int = 0  # unanswerable chatty messages matched
    taken: int = 0  # direct questions taken over by another question's pair
    direct_ood: int = 0  # unanswerable direct questions matched

    def __str__(self) -> str:
        return f"{self.hits}/{self.wrong}/{self.ood}/{self.taken}/{self.direct_ood}"


def _corpus(folder: Path) -> tuple[str, dict[str, str], list[Probe]]:
    """Index ``folder``, confirm each direct question's needle passage (where the answer service
    keeps what it confirms), and the probes; the embedding model, which pair is whose, the probes."""
    b = indexed(folder)  # the gate as the product's after a sync: calibrated on this drive
    owner: dict[str, str] = {}  # pair id -> the direct question's id
    questions = rows(folder / "questions.jsonl")
    for q in questions:
        if q.get("style", "course") != "course":
            continue
        want = normalise(q["needle"])
        shown = next((c for c in b.answers.candidates(q["question"]) if want in normalise(c.quote)), None)
        if shown is not None:
            pair = b.answers.confirm(q["question"], shown, None, "bench", "replay")
            if pair is not None:
                owner[pair.id] = q["id"]
    return b.embedding_in_use or "minilm", owner, _probes(b, folder, questions, owner)


def _probes(b: Builder, folder: Path, questions: list[dict[str, str]], owner: dict[str, str]) -> list[Probe]:
    searcher = b.engine.searcher()
    snap = searcher.snapshot
    confirmed = b.learned.all()  # just confirmed on this index: each is held by a chunk
    vectors = np.stack([p.vector for p in confirmed])
    chunk_of = [snap.chunks[_held(holder(snap, p.path, p.start, p.end))].id for p in confirmed]
    gate = b.gate_config()
    own = {q: pid for pid, q in owner.items()}
    asked: list[tuple[dict[str, str], str | None, str]] = [
        (q, q["id"], "chatty") for q in questions if q.get("style") == "ticket"
    ]
    asked += [(q, None, "chatty") for q in rows(folder / "ood-ticket.jsonl")]
    asked += [(q, q["id"], "direct") for q in questions if q.get("style", "course") == "course"]
    asked += [(q, None, "direct") for q in rows(folder / "ood.jsonl")]
    probes = []
    for q, twin, kind in asked:
        r = searcher.search(q["question"], k=20)
        sure = decide(r, gate, b.settings.max_sources).verdict is Verdict.ANSWER
        rank = ranks([h.chunk for h in r.hits])
        cos = vectors @ np.asarray(r.query_vector, dtype=np.float32)
        near = sorted(
            ((float(c), rank.get(chunk_of[j]), confirmed[j].id) for j, c in enumerate(cos)), key=lambda t: -t[0]
        )
        mine = own.get(twin) if kind == "direct" and twin else None
        probes.append(Probe(near, sure, twin, kind, mine))
    return probes


def _held(where: int | None) -> int:
    if where is None:
        raise RuntimeError("a pair confirmed a moment ago is held by no chunk of the index")
    return where


def _matched(cfg: MatchConfig, p: Probe) -> str | None:
    """The pair ``LearnedPairs.match`` would give the message under ``cfg`` (a direct question's
    own pair left out: asked before its own was confirmed)."""
    return cfg.first((t for t in p.pairs if t[2] != p.own), p.sure)


def _count(cfg: MatchConfig, owner: dict[str, str], probes: Sequence[Probe]) -> Counts:
    n = Counts()
    for p in probes:
        pid = _matched(cfg, p)
        if pid is None:
            continue
        if p.kind == "direct":
            n.taken += p.twin is not None
            n.direct_ood += p.twin is None
        elif p.twin is None:
            n.ood += 1
        elif owner.get(pid) == p.twin:
            n.hits += 1
        else:
            n.wrong += 1
    return n


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("corpora", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--max-ood", default=3, show_default=True, help="Most unanswerable chatty messages that may match, per corpus."
)
@click.option(
    "--max-taken", default=3, show_default=True, help="Most direct questions another's pair may take over, per corpus."
)
def main(corpora: tuple[Path, ...], max_ood: int, max_taken: int) -> None:
    runs = [(c.name, *_corpus(c)) for c in corpora]
    for name, model, owner, probes in runs:
        kinds = Counter((p.kind, p.twin is not None) for p in probes)
        click.echo(
            f"{name} ({model}): {len(owner)} direct questions confirmed; {kinds['chatty', True]} chatty messages "
            f"and {kinds['chatty', False]} unanswerable; {kinds['direct', True]} direct questions and "
            f"{kinds['direct', False]} unanswerable"
        )
    for model in dict.fromkeys(r[1] for r in runs):
        _choose(model, [r for r in runs if r[1] == model], max_ood, max_taken)


Run = tuple[str, str, dict[str, str], list[Probe]]


def _choose(model: str, runs: list[Run], max_ood: int, max_taken: int) -> None:
    click.echo(f"\n{model} on {cpu_info().describe()}")
    click.echo(
        "alone  with-passage  over-sure  "
        + "  ".join(f"{r[0]:>16}" for r in runs)
        + "   (chatty hits/wrong/unanswerable, direct taken over/unanswerable)"
    )
    table = []
    for cfg in GRID:
        counts = [_count(cfg, owner, probes) for _, _, owner, probes in runs]
        table.append((cfg, counts))
        if cfg.alone == cfg.with_passage and cfg.alone in SHOWN and cfg.over_sure in (cfg.alone, NEVER):
            click.echo(
                f"{cfg.alone:5.3f}  {cfg.with_passage:12.3f}  {cfg.over_sure:9.3f}  "
                + "  ".join(f"{c!s:>16}" for c in counts)
            )
    ok = [t for t in table if all(c.ood <= max_ood and c.taken <= max_taken for c in t[1])]
    if not ok:
        click.echo(f"no thresholds keep the unanswerable matches at or below {max_ood} on every corpus")
        return
    cfg, counts = max(
        ok,
        key=lambda t: (
            # a question taken over loses its own answer; an unanswerable one matched is answered wrongly
            sum(c.hits - c.wrong - c.taken - c.ood - c.direct_ood for c in t[1]),
            (t[0].alone, t[0].with_passage, t[0].over_sure, -t[0].within),  # the strictest of equals
        ),
    )
    click.echo(
        f"chosen for {model}: alone {cfg.alone:.3f}, with the passage among the first {cfg.within} hits "
        f"{cfg.with_passage:.3f}, over a sure search "
        + ("never" if cfg.over_sure >= NEVER else f"{cfg.over_sure:.3f}")
        + ": "
        + ", ".join(
            f"{r[0]} {c.hits} hits, {c.wrong} wrong, {c.ood} unanswerable; {c.taken} direct taken over, "
            f"{c.direct_ood} unanswerable"
            for r, c in zip(runs, counts, strict=True)
        )
    )
    flat = next(t[1] for t in table if t[0] == MatchConfig(cfg.alone, cfg.alone, cfg.alone))
    click.echo(
        f"  {cfg.alone:.3f} alone, with no second signal and over a sure search too: "
        + ", ".join(f"{r[0]} {c}" for r, c in zip(runs, flat, strict=True))
    )


if __name__ == "__main__":
    main()
