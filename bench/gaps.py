"""What the docs don't answer: the cost of recording, the cost of `footnote gaps`, how the
grouping threshold is chosen, and how pure the groups are. Figures, never pass/fail.

``python -m bench.gaps speed``
    Recording one question into a record of 10,000 (what it adds to an answer), and
    `footnote gaps` over 10,000 recorded refusals, run as a command (process start
    included): topics of paraphrases, every question different (the most groups), and
    a few huge topics (too many close pairs to keep: similarities computed twice).
    Prints the CPU.

``python -m bench.gaps threshold [--eval DIR]``
    The procedure that chose ``bot.grouping.THRESHOLD``: on the dev and guides sets'
    question pairs (one fact asked in the document's words, ``course``, and as an
    engineer would type it, ``ticket``: other words, at most two content words shared),
    group the 128 questions at thresholds 0.300-0.800 in steps of 0.025 and take the one
    with the best F0.5 of pairwise precision (grouped pairs that are one fact) and pair
    recall (facts whose two questions share a group), the higher on a tie. Precision
    counts double: a wrong merge hides a question behind another's label, a missed pair
    only shows one gap twice. The same sweep on the purity set is printed beside it,
    as information, not used for the choice.

``python -m bench.gaps purity [--eval DIR] [--data-dir DIR]``
    Asks the dev and guides sets' 30 unanswerable questions each, and the paraphrases of
    30 of them in ``bench/data/gaps_paraphrases.jsonl``, through `footnote ask` on each
    set's documents (indexed, gate calibrated), then reads `footnote gaps --json --since
    all`: how many paraphrase pairs share a group, how many questions of different
    topics were put together, and purity (the share of each group's questions that are
    its largest topic). Then again with a 👎 on every question that got an answer (they
    are all unanswerable). Tooling: uses the held-out sets never.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench import percentiles
from bench.drive import rows
from bot.gaps import FILE, GapRecord, find_gaps
from bot.grouping import THRESHOLD, group_by_meaning
from retrieval.answer import Answer, Outcome

ROOT = Path(__file__).resolve().parent.parent
PARAPHRASES = Path(__file__).resolve().parent / "data" / "gaps_paraphrases.jsonl"
SETS = ("dev", "guides")


def cpu() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        name = next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), "?")
    except (OSError, subprocess.CalledProcessError):
        name = "?"
    return f"{name}, {os.cpu_count()} cores"


# -- speed ----------------------------------------------------------------------------------------


def _vectors(n: int, topics: int, rng: np.random.Generator, dim: int = 384) -> np.ndarray:
    """``n`` unit vectors: ``topics`` centres with paraphrase-like spread (cosine ~0.8 to the
    centre, ~0.64 to each other), or all different when ``topics`` is 0."""
    if topics == 0:
        x = rng.standard_normal((n, dim))
    else:
        centres = rng.standard_normal((topics, dim))
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        noise = rng.standard_normal((n, dim)) * (0.75 / np.sqrt(dim))
        x = centres[rng.integers(0, topics, n)] + noise
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _fill(rec: GapRecord, vectors: np.ndarray, outcome: Outcome = Outcome.REFUSED_GATE) -> None:
    docs = ["Expenses", "Travel", "On-call", "Security", "Onboarding"]
    for i, v in enumerate(vectors):
        nearest = [docs[i % 5], docs[(i + 1) % 5]]
        answer = Answer(f"q{i}", outcome.refused, "r", "", [], nearest=nearest, gate=0.9, outcome=outcome, vector=v)
        folders = None if i % 3 else ["engineering"]
        rec.record(f"recorded question number {i} about topic", outcome, folders, surface="slack", answer=answer)


def speed(n: int = 10_000) -> None:
    from retrieval.models import limit_blas_threads

    limit_blas_threads()  # as every footnote command does (bot.builder)
    print(f"CPU: {cpu()}")
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        rec = GapRecord(Path(tmp) / "record")
        t = time.perf_counter()
        _fill(rec, _vectors(n, 500, rng))
        print(f"Filled a record with {n:,} questions in {time.perf_counter() - t:.1f} s")
        answer = Answer("q", True, "r", "", [], nearest=["Expenses", "Travel", "On-call"], gate=0.9,
                        outcome=Outcome.REFUSED_GATE, vector=_vectors(1, 0, rng)[0])  # fmt: skip
        times = []
        for i in range(1000):
            t = time.perf_counter()
            rec.record(f"How do I expense item {i}?", Outcome.REFUSED_GATE, ["hr"], surface="slack", answer=answer)
            times.append((time.perf_counter() - t) * 1000)
        p50, p95 = percentiles(times)
        print(f"Recording one question (record of {n:,}): p50 {p50:.3f} ms, p95 {p95:.3f} ms, max {max(times):.3f} ms")
        rec.close()

    cases = (
        ("500 topics of paraphrases", 500),
        ("every question different", 0),
        ("10 topics of 1,000: too many close pairs to keep", 10),
    )
    for label, topics in cases:
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp)
            rec = GapRecord(data)
            _fill(rec, _vectors(n, topics, rng))
            rows = rec.asked(None, gaps_only=True)
            t = time.perf_counter()
            groups = find_gaps(rows)
            grouping = time.perf_counter() - t
            rec.close()
            env = {**os.environ, "FOOTNOTE_DATA_DIR": str(data)}
            walls = []
            for _ in range(3):
                t = time.perf_counter()
                out = subprocess.run(
                    [sys.executable, "-m", "bot.cli", "gaps", "--since", "all", "--json"],
                    cwd=ROOT, env=env, capture_output=True, text=True, check=True,
                )  # fmt: skip
                walls.append(time.perf_counter() - t)
            found = len(json.loads(out.stdout)["groups"])
            print(
                f"`footnote gaps` over {n:,} refusals ({label}): {min(walls):.2f} s best of 3, "
                f"{max(walls):.2f} s worst (process start included); grouping alone {grouping:.2f} s; "
                f"{len(groups):,} groups ({found:,} printed)"
            )


# -- purity and the threshold ---------------------------------------------------------------------


def _together(groups: Sequence[np.ndarray], topic: np.ndarray) -> tuple[int, int, int, int, float]:
    """(pairs of one topic grouped, such pairs, pairs of different topics grouped, grouped pairs, purity)."""
    label = np.empty(len(topic), dtype=np.int64)
    for g, members in enumerate(groups):
        label[members] = g
    same = topic[:, None] == topic[None, :]
    grouped = label[:, None] == label[None, :]
    upper = np.triu_indices(len(topic), 1)
    same, grouped = same[upper], grouped[upper]
    purity = sum(int(np.unique(topic[m], return_counts=True)[1].max()) for m in groups) / max(len(topic), 1)
    return int((same & grouped).sum()), int(same.sum()), int((~same & grouped).sum()), int(grouped.sum()), purity


def _f(precision: float, recall: float, beta: float = 0.5) -> float:
    b2 = beta * beta
    return (1 + b2) * precision * recall / (b2 * precision + recall) if precision + recall else 0.0


def _sweep(x: np.ndarray, topic: np.ndarray) -> list[tuple[float, float, float, float, float]]:
    rows = []
    for t in np.round(np.arange(0.300, 0.8001, 0.025), 3):
        hit, pairs, _, grouped, purity = _together(group_by_meaning(x, float(t)), topic)
        precision = hit / grouped if grouped else 1.0
        rows.append((float(t), precision, hit / pairs, _f(precision, hit / pairs), purity))
    return rows


def _embedder(data_dir: Path):  # type: ignore[no-untyped-def]
    from retrieval.models import load_embedder

    return load_embedder(cache_dir=data_dir / "models")


def threshold(eval_dir: Path, data_dir: Path) -> None:
    print(f"CPU: {cpu()}")
    embedder = _embedder(data_dir)
    texts, topic = [], []
    for s in SETS:
        for q in rows(eval_dir / s / "questions.jsonl"):
            texts.append(q["question"])
            topic.append(f"{s}:{q['id']}")
    choice = _sweep(embedder.embed(texts), np.array(topic))
    texts, topic = _purity_questions(eval_dir)
    shown = _sweep(embedder.embed(texts), np.array(topic))
    print("threshold | course/ticket pairs (the choice): precision recall F0.5 purity | purity set: same")
    for (t, p, r, f, pu), (_, p2, r2, f2, pu2) in zip(choice, shown, strict=True):
        print(f"   {t:.3f}  |  {p:.3f} {r:.3f} {f:.3f} {pu:.3f}  |  {p2:.3f} {r2:.3f} {f2:.3f} {pu2:.3f}")
    best = max(choice, key=lambda row: (round(row[3], 9), row[0]))
    print(f"Chosen: {best[0]:.3f} (best F0.5 on the course/ticket pairs); bot.grouping.THRESHOLD is {THRESHOLD}")


def _purity_questions(eval_dir: Path, sets: Sequence[str] = SETS) -> tuple[list[str], list[str]]:
    """The unanswerable questions of ``sets`` and the paraphrases of theirs; topic = the original's id."""
    texts, topic = [], []
    ids = set()
    for s in sets:
        for r in rows(eval_dir / s / "ood.jsonl"):
            texts.append(r["question"])
            topic.append(r["id"])
            ids.add(r["id"])
    for r in rows(PARAPHRASES):
        if r["of"] in ids:
            texts.append(r["question"])
            topic.append(r["of"])
    return texts, topic


def _footnote(args: list[str], env: dict[str, str], ok: Sequence[int] = (0,)) -> str:
    from click.testing import CliRunner

    from bot.cli import main

    res = CliRunner().invoke(main, args, env=env, catch_exceptions=False)
    if res.exit_code not in ok:
        raise SystemExit(f"footnote {' '.join(args)} failed: {res.output}")
    return res.stdout


def purity(eval_dir: Path, data_root: Path) -> None:
    print(f"CPU: {cpu()}")
    # questions, pairs together, pairs, different topics together, grouped pairs, purity × questions
    totals: dict[str, list[float]] = {"as recorded": [0.0] * 6, "with a 👎 on every answer": [0.0] * 6}
    for s in SETS:
        data = data_root / s
        env = {"FOOTNOTE_DATA_DIR": str(data), "FOOTNOTE_DOCS_DIR": str(eval_dir / s / "docs"), "FOOTNOTE_GAPS": "on"}
        _footnote(["index", "--quiet"], env)
        gate = json.loads(_footnote(["status", "--json", "--calibrate"], env))["gate"]["threshold"]
        if (data / FILE).exists():
            _footnote(["gaps", "--purge"], env)
        texts, topic = _purity_questions(eval_dir, [s])
        of = dict(zip(texts, topic, strict=True))
        t = time.perf_counter()
        for q in texts:  # one command each: a model error (recorded as such) ends only its own
            _footnote(["ask", q], env, ok=(0, 1))
        asked_s = time.perf_counter() - t
        record = GapRecord(data)
        outcomes = record.outcomes()
        record.close()
        print(f"\n{s}: {len(texts)} questions ({len(set(topic))} topics), gate {gate:.3f}, asked in {asked_s:.0f} s")
        print("  outcomes: " + ", ".join(f"{k} {v}" for k, v in outcomes.items() if v))
        for variant in totals:
            if variant != "as recorded":
                with sqlite3.connect(data / FILE) as db:  # as if the asker clicked 👎 on each bluff
                    db.execute("UPDATE asked SET down = 1 WHERE outcome = ?", (Outcome.ANSWERED.value,))
            out = json.loads(_footnote(["gaps", "--json", "--since", "all"], env))
            groups = [g["questions"] for g in out["groups"]]
            members = [q for g in groups for q in g]
            index = {q: i for i, q in enumerate(members)}
            idx = [np.array([index[q] for q in g]) for g in groups]
            hit, pairs, wrong, grouped, pur = _together(idx, np.array([of[q] for q in members]))
            add = [len(members), hit, pairs, wrong, grouped, pur * len(members)]
            totals[variant] = [a + b for a, b in zip(totals[variant], add, strict=True)]
            print(
                f"  {variant}: {len(members)} questions in {len(groups)} groups; paraphrase pairs together "
                f"{hit}/{pairs}; pairs of different topics together {wrong}; purity {pur:.3f}"
            )
    print(f"\nBoth sets, threshold {THRESHOLD}:")
    for variant, (n, n_hit, n_pairs, n_wrong, n_grouped, weighted) in totals.items():
        print(
            f"  {variant}: {n:.0f} questions; paraphrase pairs together {n_hit:.0f}/{n_pairs:.0f}; pairs of different "
            f"topics together {n_wrong:.0f} (of {n_grouped:.0f} grouped pairs); purity {weighted / max(n, 1):.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.gaps", description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("speed", "threshold", "purity"))
    parser.add_argument("--eval", type=Path, default=ROOT.parent / "shared" / "eval", help="the dev and guides sets")
    parser.add_argument("--data-dir", type=Path, help="keep the indexes and model measurements here (purity)")
    parser.add_argument("-n", type=int, default=10_000, help="recorded questions (speed)")
    args = parser.parse_args()
    if args.what == "speed":
        speed(args.n)
        return
    eval_dir = args.eval if (args.eval / "dev").is_dir() else Path("/work/shared/eval")
    data = args.data_dir or Path(tempfile.mkdtemp(prefix="footnote-gaps-"))
    try:
        (threshold if args.what == "threshold" else purity)(eval_dir, data)
    finally:
        if args.data_dir is None:
            shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
