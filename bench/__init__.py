"""``python -m bench`` (or ``make bench``, ``footnote bench`` in a checkout): figures for throughput,
per-stage latency, memory and growth.

Tooling, not product: this package lives at the repository's top level and is not
installed with the wheel. Figures only, never a pass/fail. Runs on a temporary copy of the index so the
live one is never touched. The synthetic index uses generated text and random
unit vectors (embedding 100,000 real chunks would take a quarter of an hour on
two cores); it shows how search cost grows with the index, not quality.
"""

from __future__ import annotations

import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from bench.memory import TreePeak, peak_rss_mb
from bot.builder import Builder, build_slack_bot
from config.settings import Settings
from retrieval.index import Snapshot, StoredIndex
from retrieval.models import cpu_info, seed_models
from retrieval.search import Searcher, decide
from retrieval.types import Chunk

Echo = Callable[[str], None]
STAGES = ("embed", "dense", "bm25", "fuse", "rerank", "gate")


def percentiles(values: Sequence[float]) -> tuple[float, float]:
    """p50 and p95 (nearest rank)."""
    s = sorted(values)
    if not s:
        return 0.0, 0.0
    return statistics.median(s), s[min(len(s) - 1, round(0.95 * (len(s) - 1)))]


LABELS = {
    "llm_prompt": "LLM prompt (1st token)",
    "generation": "LLM whole call",
    "check": "support check",
    "total": "end-to-end answer",
    "pointer (no model)": "pointer, end to end",
}


def _stage_lines(samples: dict[str, list[float]], names: Sequence[str]) -> list[str]:
    out = []
    for name in names:
        if samples.get(name):
            p50, p95 = percentiles(samples[name])
            out.append(f"  {LABELS.get(name, name):22} p50 {p50:8.1f} ms   p95 {p95:8.1f} ms")
    return out


def bench(
    settings: Settings,
    docs_dir: Path,
    questions: Sequence[str],
    answers: int,
    synthetic: int,
    echo: Echo,
    generated: int = 0,
    slack: int = 0,
    fresh: bool = False,
) -> None:
    with tempfile.TemporaryDirectory(prefix="footnote-bench-") as tmp:
        # --fresh: nothing lent from the live data dir, so every measurement runs as on a first start.
        seeded = not fresh and seed_models(settings.data_dir / "models", Path(tmp) / "models")
        rt = Builder(settings.model_copy(update={"docs_dir": docs_dir, "data_dir": Path(tmp)}))
        t = time.perf_counter()
        with TreePeak() as embedding:
            rt.embedder.embed(["warm up"])  # the question runtime
            rt.embedder.embed(["warm up"] * 8)  # the batch runtime, when it is another
        echo(f"CPU                    {cpu_info().describe()}")
        choice = getattr(rt.embedder, "choice", None)
        echo(f"embedding runtime      {choice.describe() if choice else getattr(rt.embedder, 'runtime', '?')}")
        how = "the live data dir's runtime choice and models" if seeded else "includes measuring the runtimes"
        echo(f"embedder load          {time.perf_counter() - t:.1f} s, peak RSS {embedding.mb:.0f} MB, tree ({how})")
        report = rt.engine.sync()
        rate = report.chunks_embedded / report.seconds if report.seconds else 0.0
        echo(
            f"index                  {len(report.indexed)} docs, {report.chunks_embedded} chunks in "
            f"{report.seconds:.1f} s = {rate:.0f} chunks/s"
        )
        again = rt.engine.sync()
        echo(f"no-change sync         {again.seconds:.2f} s")
        t = time.perf_counter()
        searcher = rt.engine.searcher()
        echo(f"snapshot + BM25 load   {(time.perf_counter() - t) * 1000:.0f} ms")
        qs = list(questions) or _questions_from(searcher.snapshot.chunks)
        echo(f"\nQuery latency over {len(qs)} questions ({len(searcher.snapshot.chunks)} chunks):")
        echo("\n".join(_stage_lines(_query_stages(searcher, qs, rt), (*STAGES, "total retrieval"))))
        if answers:
            t = time.perf_counter()
            with TreePeak() as loading:
                model = rt.model
            echo(f"\nAnswers over {min(answers, len(qs))} questions ({model.name}):")
            weights = getattr(model, "weights", None)
            how = "weights " + weights.how if weights is not None else "a server"
            echo(
                f"  model load             {time.perf_counter() - t:.1f} s, peak RSS {loading.mb:.0f} MB, tree ({how})"
            )
            if weights is not None:
                echo(f"  weights                {weights.describe()}")
            lookup = getattr(rt.model, "lookup", None)
            if lookup is not None:
                echo(f"  prompt lookup          {lookup.describe()}")
            with TreePeak() as serving:
                echo("\n".join(_answer_lines(rt, qs[:answers])))
            echo(f"  serving peak RSS       {serving.mb:.0f} MB, process tree (everything loaded, answering)")
        if slack:
            echo(f"\nSlack, through the real Bolt app and a fake Web API, {min(slack, len(qs))} questions one by one:")
            echo("\n".join(_slack_lines(rt, qs[:slack], Path(tmp))))
        echo(f"\npeak RSS               {peak_rss_mb():.0f} MB, this process (everything above loaded)")
    echo("\nSync (on a temporary copy of the folder):")
    for line in _sync_figures(settings, docs_dir, generated):
        echo(line)
    if synthetic:
        echo(f"\nSynthetic index of {synthetic:,} chunks (generated text, random unit vectors):")
        for line in _synthetic(rt, synthetic):
            echo(line)


def _sync_figures(settings: Settings, docs_dir: Path, generated: int) -> list[str]:
    """No-change sync, one edited file, one renamed file, and optionally N generated documents."""
    lines = []
    with tempfile.TemporaryDirectory(prefix="footnote-bench-sync-") as tmp:
        docs = Path(tmp) / "docs"
        shutil.copytree(docs_dir, docs)
        seed_models(settings.data_dir / "models", Path(tmp) / "data" / "models")
        rt = Builder(settings.model_copy(update={"docs_dir": docs, "data_dir": Path(tmp) / "data"}))
        rt.engine.sync()
        lines.append(f"  no-change sync         {rt.engine.sync().seconds:.2f} s")
        files = sorted(p for p in docs.rglob("*") if p.is_file() and not p.name.startswith("."))
        if files:
            files[0].write_text(files[0].read_text(errors="replace") + "\n\nA paragraph added by the benchmark.\n")
            r = rt.engine.sync()
            lines.append(
                f"  one-file edit          {r.seconds:.2f} s ({r.chunks_embedded} embedded, {r.chunks_reused} reused)"
            )
            files[0].rename(files[0].with_name("renamed-" + files[0].name))
            r = rt.engine.sync()
            lines.append(f"  one-file rename        {r.seconds:.2f} s ({r.chunks_embedded} embedded)")
        if generated:
            gen = docs / "generated"
            gen.mkdir()
            rng = random.Random(11)
            topics = ["billing", "refunds", "vpn", "laptops", "onboarding", "holidays", "incidents", "expenses"]
            for i in range(generated):
                t = rng.choice(topics)
                paras = [
                    f"Rule {j} for {t} team {i}: requests tagged {t}-{i}-{j} are handled within {rng.randint(1, 9)} days."
                    for j in range(4)
                ]
                (gen / f"doc-{i:05}.md").write_text(f"# {t.title()} {i}\n\n## Rules\n\n" + "\n\n".join(paras) + "\n")
            r = rt.engine.sync()
            rate = r.chunks_embedded / r.seconds if r.seconds else 0.0
            lines.append(
                f"  {generated} generated docs  {r.seconds:.1f} s ({r.chunks_embedded} chunks, {rate:.0f} chunks/s)"
            )
            lines.append(f"  no-change sync after   {rt.engine.sync().seconds:.2f} s ({len(files) + generated} docs)")
    return lines


def _questions_from(chunks: Sequence[Chunk], n: int = 20) -> list[str]:
    """Without a question file: each section's title, as a person would type a topic."""
    seen: list[str] = []
    for c in chunks:
        q = f"{c.section or c.doc_title}?"
        if q not in seen:
            seen.append(q)
    return seen[:n]


def _query_stages(searcher: Searcher, qs: Sequence[str], rt: Builder) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {}
    for q in qs:
        res = searcher.search(q, k=20)
        t = time.perf_counter()
        decide(res, rt.gate_config(), rt.settings.max_sources)
        for k, v in {**res.timings, "gate": (time.perf_counter() - t) * 1000}.items():
            samples.setdefault(k, []).append(v)
        samples.setdefault("total retrieval", []).append(sum(res.timings.values()))
    return samples


def _answer_lines(rt: Builder, qs: Sequence[str]) -> list[str]:
    samples: dict[str, list[float]] = {}
    kinds: dict[str, int] = {}
    for q in qs:
        a = rt.answers.answer(q)
        kinds[a.kind] = kinds.get(a.kind, 0) + 1
        if "generation" not in a.timings:  # pointed at passages or refused by the gate: no model call
            if a.kind == "pointed":
                samples.setdefault("pointer (no model)", []).append(a.timings["total"])
            continue
        for k, v in a.timings.items():
            samples.setdefault(k, []).append(v)
    lines = _stage_lines(samples, ("llm_prompt", "generation", "check", "total", "pointer (no model)"))
    told = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    lines.append(f"  ({told}; the model's stages are timed over the questions it was called for)")
    return lines


def _slack_lines(rt: Builder, qs: Sequence[str], tmp: Path) -> list[str]:
    """Signed request in -> first visible sign of work (the placeholder) -> final answer."""
    import json

    from bot.http_server import SlackEvents, make_server
    from testkit.slack import FakeSlack, signed_post

    secret = "bench-secret"
    fake = FakeSlack()
    bot = build_slack_bot(rt.answers, "xoxb-bench", secret, tmp / "slack", api_url=fake.url)
    server = make_server(("127.0.0.1", 0), lambda: {"ok": True}, slack=SlackEvents(bot.app, secret)).start()
    url = f"{server.url}/slack/events"
    samples: dict[str, list[float]] = {}
    try:
        for i, q in enumerate(qs):
            ts = f"9000.{i:04d}"
            event = {
                "type": "event_callback",
                "event_id": f"EvBench{i}",
                "team_id": "T1",
                "api_app_id": "A1",
                "event": {"type": "app_mention", "user": "U1", "text": f"<@UBOT> {q}", "ts": ts, "channel": "C1"},
            }
            t0 = time.monotonic()
            signed_post(url, json.dumps(event), "application/json", secret)
            samples.setdefault("ack (HTTP 200)", []).append((time.monotonic() - t0) * 1000)
            while not any(p.get("thread_ts") == ts for p in fake.of("chat.postMessage")):
                time.sleep(0.002)
            samples.setdefault("first visible sign", []).append((time.monotonic() - t0) * 1000)
            bot.drain(300)
            last_update = max(t for m, t in fake.seen_at if m == "chat.update")
            samples.setdefault("final answer", []).append((last_update - t0) * 1000)
    finally:
        server.stop()
        fake.close()
    return _stage_lines(samples, ("ack (HTTP 200)", "first visible sign", "final answer"))


def _synthetic(rt: Builder, n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(20_000)] + [
        "access",
        "policy",
        "deploy",
        "invoice",
        "rotate",
        "laptop",
        "vpn",
        "refund",
    ]
    t = time.perf_counter()
    chunks = []
    for i in range(n):
        body = " ".join(rng.choices(words, k=60))
        chunks.append(
            Chunk(f"s{i}", f"synthetic/{i // 50}.md", "Synthetic", f"S{i % 50}", i % 50, body, body, 0, len(body))
        )
    dim = rt.embedder.dimension
    vecs = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    empty = np.zeros((0, dim), np.float32)
    snap = Snapshot.build(StoredIndex(chunks, vecs, empty, np.zeros(0, np.int64)), rt.embedder.name)
    build = time.perf_counter() - t
    searcher = Searcher(snap, rt.embedder, rt.search_config(), rt.engine.reranker)
    qs = [
        "how do I rotate the vpn access keys",
        "refund an invoice",
        "laptop policy for contractors",
        "deploy on friday",
    ]
    samples: dict[str, list[float]] = {}
    for _ in range(5):
        for q in qs:
            res = searcher.search(q, k=20)
            for k, v in res.timings.items():
                samples.setdefault(k, []).append(v)
            samples.setdefault("total retrieval", []).append(sum(res.timings.values()))
    lines = [f"  build (text + BM25)    {build:.1f} s (dense: exact scan in memory)"]
    return lines + _stage_lines(samples, (*STAGES, "total retrieval"))
