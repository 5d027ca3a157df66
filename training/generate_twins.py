"""Write a chatty Slack twin of each direct question in ``data/train.jsonl`` with the packaged Qwen2.5-Coder-1.5B.

Issue 32, data source 3. The direct questions are the public-domain corpus's positives that
``build_data.py`` built (FAQ questions, how-to and definition headings, and the generated
doc-style questions that survived its round trip), each with the passage that answers it.
The 1.5B rewrites each question as a colleague would write it in Slack: first the asker's
situation, then the need, in their own words rather than the document's. A (twin, passage)
pair then teaches the embedder the vocabulary gap that Stack Exchange bodies did not; the
need is the original question's, so the passage still answers it.

Decoding is greedy, so a rerun writes the same messages. Work is resumable and bounded:
replies are appended to ``training/.cache/twins.jsonl`` and the run stops after
``--minutes``; ``--export`` writes the frozen copy ``build_chatty.py`` reads
(``training/data/chatty_twins.jsonl``, committed), with each twin's noise measure::

    python training/generate_twins.py --minutes 45     # repeat until "0 left"
    python training/generate_twins.py --export

Needs llama-cpp-python and the 1.5B's packages (``pip install '.[large-model]'``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from generate_questions import doc_parser, read_cache  # noqa: E402
from textclean import words  # noqa: E402

MODEL_ID = "qwen2.5-coder-1.5b-instruct"
# the direct positives of data/train.jsonl whose question a person could have asked
KINDS = ("faq-answer", "heading-howto", "heading-definition", "generated")

SYSTEM = (
    "You rewrite a question from a team's documents as the Slack message a colleague really sends. "
    "Start with their situation in a few casual words, then ask for the same thing. Use everyday words, not the "
    "document's terms: a nickname, a description or a synonym instead of the official name. Lower case, one or two "
    "sentences. The answer given must still answer the message."
)
# invented examples (none from any evaluation corpus): each keeps the need and swaps the key term
SHOTS: list[tuple[str, str, str]] = [
    (
        "How far in advance must work flights be booked?",
        "Employees must book all work flights through the agency travel system at least 14 days before departure.",
        "conference is in a few weeks and i haven't sorted anything yet. how early do i have to get plane "
        "tickets through the official booking site?",
    ),
    (
        "How long are production database backups kept?",
        "Production databases are backed up every night and backups are kept for 30 days.",
        "ugh, someone dropped a table in prod about a month ago and we only just noticed. how long do we hang "
        "on to the nightly copies?",
    ),
    (
        "When is a release candidate tagged?",
        "A release candidate is tagged once all blocking issues are closed and the test suite passes.",
        "pm keeps asking when we can cut the rc for the next version. what has to be true before a build "
        "gets marked as the candidate?",
    ),
    (
        "How often is system access reviewed?",
        "Managers review each employee's system access every quarter and revoke permissions that are no longer needed.",
        "just noticed i can still get into the old billing dashboard from my last team lol. how often does "
        "someone go through who can log into what?",
    ),
]
ANSWER_CHARS = 300  # the opening of the answer is enough to pin the need


def load_questions(train_jsonl: Path, seed: int) -> list[dict[str, str]]:
    """The direct positives, one per question, in a seeded order (any prefix mixes sources and kinds)."""
    seen: set[str] = set()
    rows: list[dict[str, str]] = []
    for line in train_jsonl.open(encoding="utf-8"):
        r = json.loads(line)
        if (
            r["label"] == 1
            and r["kind"] in KINDS
            and r.get("qtype") != "generated-ticket"
            and r["question"] not in seen
        ):
            seen.add(r["question"])
            rows.append({"question": r["question"], "text": r["text"], "kind": r["kind"], "source": r["source"]})
    random.Random(seed).shuffle(rows)
    return rows


def key(question: str) -> str:
    return hashlib.sha256(f"{MODEL_ID}\0twin\0{question}".encode()).hexdigest()[:20]


def messages(question: str, answer: str) -> list[Any]:
    m: list[Any] = [{"role": "system", "content": SYSTEM}]
    for q, a, t in SHOTS:
        m += [{"role": "user", "content": f"Question: {q}\nAnswer: {a}"}, {"role": "assistant", "content": t}]
    m.append({"role": "user", "content": f"Question: {question}\nAnswer: {answer[:ANSWER_CHARS]}"})
    return m


def clean_twin(text: str) -> str | None:
    """The reply's first paragraph up to its last question mark, if 6-70 words, else None."""
    msg = " ".join(text.strip().split("\n\n")[0].split()).strip('"').strip()
    if "?" not in msg:
        return None
    msg = msg[: msg.rfind("?") + 1]
    return msg if 6 <= len(msg.split()) <= 70 else None


def copied(twin: str, text: str) -> float:
    """Share of the twin's content words (4+ letters) found in the text: high means it kept the doc's words."""
    t = {w for w in words(twin) if len(w) >= 4}
    return round(len(t & set(words(text))) / max(len(t), 1), 3)


def export(rows: list[dict[str, str]], done: dict[str, dict[str, str]]) -> int:
    out = HERE / "data" / "chatty_twins.jsonl"
    n = kept = 0
    with out.open("w", encoding="utf-8") as f:
        for r in rows:
            rec = done.get(key(r["question"]))
            if rec is None:
                continue
            n += 1
            twin = clean_twin(rec["reply"])
            if twin is None:
                continue
            kept += 1
            row = {
                **r,
                "twin": twin,
                "copied_question": copied(twin, r["question"]),
                "copied_answer": copied(twin, r["text"]),
                "model": MODEL_ID,
            }
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {kept} twins ({n - kept} replies dropped by the format filter) to {out}")
    return 0


def generate(rows: list[dict[str, str]], args: argparse.Namespace) -> int:
    cache_file = args.cache / "twins.jsonl"
    done = read_cache(cache_file)
    left = [r for r in rows if key(r["question"]) not in done]
    print(f"{len(rows)} questions, {len(rows) - len(left)} already in the cache, {len(left)} left", flush=True)
    if not left:
        return 0
    from llama_cpp import Llama

    from retrieval.models.files import packaged_gguf

    gguf = packaged_gguf(args.cache / "models", "qwen-1.5b")
    llm = Llama(model_path=str(gguf), n_ctx=1024, n_threads=args.threads, seed=args.seed, verbose=False)
    start = time.monotonic()
    n = toks = 0
    args.cache.mkdir(parents=True, exist_ok=True)
    with cache_file.open("a", encoding="utf-8") as f:
        for r in left:
            if time.monotonic() - start > args.minutes * 60:
                break
            resp: Any = llm.create_chat_completion(messages(r["question"], r["text"]), temperature=0.0, max_tokens=80)
            reply = resp["choices"][0]["message"]["content"] or ""
            toks += resp["usage"]["completion_tokens"]
            rec = {"key": key(r["question"]), "question": r["question"], "reply": reply}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            f.flush()
            n += 1
            if n % 25 == 0:
                el = time.monotonic() - start
                print(f"  {n} of {len(left)} ({el / n:.1f} s each)", flush=True)
    el = time.monotonic() - start
    print(
        f"wrote {n} twins in {el:.0f} s ({el / max(n, 1):.2f} s each, {toks / max(el, 1e-9):.1f} tokens/s); "
        f"{len(left) - n} left",
        flush=True,
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = doc_parser(__doc__)
    ap.add_argument(
        "--train", type=Path, default=HERE / "data" / "train.jsonl", help="built examples (default data/train.jsonl)"
    )
    ap.add_argument("--seed", type=int, default=32)
    ap.add_argument("--minutes", type=float, default=45.0, help="stop after this long (default 45)")
    ap.add_argument("--cache", type=Path, default=HERE / ".cache", help="cache folder (default training/.cache)")
    ap.add_argument("--export", action="store_true", help="write data/chatty_twins.jsonl from the cache and exit")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    rows = load_questions(args.train, args.seed)
    if args.export:
        return export(rows, read_cache(args.cache / "twins.jsonl"))
    return generate(rows, args)


if __name__ == "__main__":
    sys.exit(main())
