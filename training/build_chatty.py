"""Build the embedder's (message, passage) training pairs in both question styles (issue 32).

Four sources (the first two named with their commits in ``chatty_sources.json``):

* **Stack Exchange posts** (CC BY-SA). A question's *body* is a chatty message written by a
  person (context first, the asker's own words), its *title* the direct question; the
  accepted answer (else the best answer scoring at least 2) is the passage. Both give a pair.
* **SQuAD 2.0** (CC BY-SA 4.0): an answerable question and the stretch of its paragraph,
  about a chunk long, that holds the answer (direct style).
* **FAQ, how-to and definition positives** of ``data/train.jsonl`` (public domain / CC0,
  built by ``build_data.py``): direct style.
* **Chatty twins** of those positives' questions, written by the packaged 1.5B
  (``generate_twins.py``, frozen in ``data/chatty_twins.jsonl``): chatty style, with the
  passage of the question they rewrite. Twins that keep 90% or more of the question's
  content words are left out (they are the direct question again).

Every pair whose message or passage shares an 8-word shingle with an evaluation document is
dropped (``overlap_check.py``). Pairs are split into train and valid by source group (a Stack
Exchange site, a SQuAD article, a source document), so validation measures transfer::

    python training/build_chatty.py --mirrors /work/.mirror --eval-root ../shared/eval

``--mirrors`` holds bare clones laid out as ``OWNER+NAME/repo`` (what the search tool's fetch
makes) or ``OWNER+NAME`` git directories.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import random
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np
from bm25 import BM25
from overlap_check import EvalShingles, shingles
from textclean import words

HERE = Path(__file__).resolve().parent
MESSAGE_CHARS = 500  # a Slack message rarely runs longer (the eval's chatty messages: 60-260)
PASSAGE_CHARS = 600  # about one of Footnote's chunks (512 characters) plus its header
MIN_ANSWER_SCORE = 2
VALID_SHARE = 0.08
TWIN_MAX_COPIED = 0.9
SOURCES = ("stackexchange", "squad", "faq", "twins")


@dataclass
class Pair:
    query: str
    passage: str
    style: str  # "ticket" (a chatty message) or "course" (a direct question)
    source: str  # repository:path#id
    group: str  # the split unit
    negative: str = ""  # a passage of the same group that BM25 ranks high for the query, not its answer


def add_negatives(pairs: list[Pair]) -> None:
    """Each pair's hard negative: the passage of its own site / article / source that BM25
    ranks highest for its message, other than its own (and not one sharing half its words)."""
    by_group: dict[str, list[Pair]] = {}
    for p in pairs:
        by_group.setdefault(p.group, []).append(p)
    for group in by_group.values():
        passages = sorted({p.passage for p in group})
        if len(passages) < 2:
            continue
        index = BM25(passages)
        for p in group:
            for i in np.argsort(-index.scores(p.query))[:5]:
                candidate = passages[int(i)]
                if candidate != p.passage and not too_close(candidate, p.passage):
                    p.negative = candidate
                    break


def too_close(a: str, b: str) -> bool:
    wa, wb = set(words(a)), set(words(b))
    return len(wa & wb) >= 0.5 * min(len(wa), len(wb))


def git_show(mirrors: Path, repo: str, commit: str, path: str) -> bytes:
    """A file at a pinned commit from a bare mirror."""
    name = repo.replace("/", "+")
    for git_dir in (mirrors / name / "repo", mirrors / name / "repo" / ".git", mirrors / name):
        if (git_dir / "HEAD").exists():
            return subprocess.run(
                ["git", "--git-dir", str(git_dir), "show", f"{commit}:{path}"], check=True, capture_output=True
            ).stdout
    raise SystemExit(f"error: no mirror of {repo} under {mirrors}")


_CODE = re.compile(r"<pre[^>]*>.*?</pre>", re.S | re.I)
_TAG = re.compile(r"<[^>]+>")
_SPACE = re.compile(r"\s+")


def plain(body: str, limit: int) -> str:
    """Post HTML as one line of text: code blocks dropped, tags stripped, cut at a word."""
    text = _CODE.sub(" ", body)
    text = html.unescape(_TAG.sub(" ", text))
    text = _SPACE.sub(" ", text).strip()
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit]


_SENTENCE_END = re.compile(r"(?<=[.?!])\s+")


def message(text: str, limit: int) -> str:
    """A long post as the message a colleague would send: its opening sentence (the
    situation) and its last sentences (where the question usually is), within ``limit``."""
    if len(text) <= limit:
        return text
    parts = _SENTENCE_END.split(text)
    head = parts[0] if len(parts[0]) <= limit // 3 else ""
    tail: list[str] = []
    for part in reversed(parts[1:] if head else parts):
        if len(head) + sum(len(t) + 1 for t in tail) + len(part) > limit:
            break
        tail.insert(0, part)
    return " ".join([head, *tail]).strip() if tail else plain(text, limit)


def stackexchange_pairs(src: dict[str, str], raw: bytes) -> Iterator[Pair]:
    questions: dict[str, ET.Element] = {}
    answers: dict[str, list[ET.Element]] = {}
    by_id: dict[str, ET.Element] = {}
    for row in ET.fromstring(raw).iter("row"):
        by_id[row.get("Id", "")] = row
        if row.get("PostTypeId") == "1":
            questions[row.get("Id", "")] = row
        elif row.get("PostTypeId") == "2":
            answers.setdefault(row.get("ParentId", ""), []).append(row)
    for qid, q in questions.items():
        answer = by_id.get(q.get("AcceptedAnswerId", "")) if q.get("AcceptedAnswerId") else None
        if answer is None:
            scored = [a for a in answers.get(qid, []) if int(a.get("Score", "0")) >= MIN_ANSWER_SCORE]
            answer = max(scored, key=lambda a: int(a.get("Score", "0")), default=None)
        if answer is None:
            continue
        passage = plain(answer.get("Body", ""), PASSAGE_CHARS)
        body = message(plain(q.get("Body", ""), 100_000), MESSAGE_CHARS)
        title = html.unescape(q.get("Title", "")).strip()
        if len(passage.split()) < 15:  # "Sorry, best photo I could find." answers nothing
            continue
        where = f"{src['repo']}:{src['path']}#{qid}"
        if len(body.split()) >= 8:
            yield Pair(body, passage, "ticket", where, src["site"])
        if len(title.split()) >= 3:
            yield Pair(title, passage, "course", where, src["site"])


def squad_pairs(src: dict[str, str], raw: bytes) -> Iterator[Pair]:
    for article in json.loads(raw)["data"]:
        title = article["title"].replace("_", " ")
        for para in article["paragraphs"]:
            context = para["context"]
            for qa in para["qas"]:
                if qa.get("is_impossible") or not qa["answers"]:
                    continue
                start = qa["answers"][0]["answer_start"]
                passage = window(context, start, PASSAGE_CHARS)
                yield Pair(qa["question"].strip(), passage, "course", f"{src['repo']}:{src['path']}#{qa['id']}", title)


def window(text: str, at: int, size: int) -> str:
    """About ``size`` characters of ``text`` around ``at``, starting at a sentence."""
    if len(text) <= size:
        return text
    begin = max(0, at - size // 3)
    stop = text.rfind(". ", 0, begin)
    begin = stop + 2 if stop >= 0 and begin - stop < size // 3 else begin
    return text[begin : begin + size].strip()


def faq_pairs(train_jsonl: Path) -> Iterator[Pair]:
    kinds = {"faq-answer", "heading-howto", "heading-definition"}
    for line in train_jsonl.open(encoding="utf-8"):
        row = json.loads(line)
        if row["label"] == 1 and row["kind"] in kinds:
            yield Pair(row["question"], row["text"], "course", row["source"], row["source"].split("#")[0])


def twin_pairs(twins_jsonl: Path) -> Iterator[Pair]:
    if not twins_jsonl.is_file():
        return
    for line in twins_jsonl.open(encoding="utf-8"):
        row = json.loads(line)
        group = row["source"].split("#")[0]
        if row["copied_question"] < TWIN_MAX_COPIED:
            yield Pair(row["twin"], row["text"], "ticket", row["source"], group)
        if row["kind"] == "generated":  # its direct question is not among faq_pairs' kinds: both styles of each need
            yield Pair(row["question"], row["text"], "course", row["source"], group)


def split(pairs: list[Pair], seed: int) -> tuple[list[Pair], list[Pair]]:
    """Valid takes whole groups, smallest first by a seeded hash, until VALID_SHARE of the pairs."""
    sizes = Counter(p.group for p in pairs)

    def key(g: str) -> str:
        return hashlib.sha256(f"{seed}:{g}".encode()).hexdigest()

    valid: set[str] = set()
    held = 0
    for g in sorted(sizes, key=key):
        if held >= VALID_SHARE * len(pairs):
            break
        if sizes[g] < 400:  # a big site or article stays in train, where it teaches most
            valid.add(g)
            held += sizes[g]
    return [p for p in pairs if p.group not in valid], [p for p in pairs if p.group in valid]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mirrors", type=Path, help="bare clones as OWNER+NAME/repo (needed for stackexchange and squad)")
    ap.add_argument("--eval-root", type=Path, default=HERE.parent.parent / "shared" / "eval")
    ap.add_argument("--out", type=Path, default=HERE / "data" / "chatty")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument(
        "--only",
        default=",".join(SOURCES),
        help=f"comma-separated sources to use, of {', '.join(SOURCES)} (default: all)",
    )
    args = ap.parse_args()
    use = set(args.only.split(","))
    if use - set(SOURCES):
        ap.error(f"unknown source(s) {', '.join(sorted(use - set(SOURCES)))}; choose from {', '.join(SOURCES)}")
    if use & {"stackexchange", "squad"} and args.mirrors is None:
        ap.error("--mirrors is needed for the stackexchange and squad sources (or pass --only faq,twins)")
    sources = json.loads((HERE / "chatty_sources.json").read_text(encoding="utf-8"))
    pairs: list[Pair] = []
    counts: dict[str, Counter[str]] = {}
    for kind, reader in (("stackexchange", stackexchange_pairs), ("squad", squad_pairs)):
        for src in sources[kind] if kind in use else []:
            got = list(reader(src, git_show(args.mirrors, src["repo"], src["commit"], src["path"])))
            counts[f"{src['repo']} ({src['site']})"] = Counter(p.style for p in got)
            pairs += got
    local = (
        ("faq", "data/train.jsonl (FAQ, how-to, definition positives)", faq_pairs(HERE / "data" / "train.jsonl")),
        (
            "twins",
            "data/chatty_twins.jsonl (the 1.5B's chatty twins)",
            twin_pairs(HERE / "data" / "chatty_twins.jsonl"),
        ),
    )
    for kind, name, it in local:
        if kind in use:
            got = list(it)
            counts[name] = Counter(p.style for p in got)
            pairs += got
    evals = EvalShingles(args.eval_root)
    kept = [p for p in pairs if not any(evals.index.get(s) for s in shingles(p.query) | shingles(p.passage))]
    dropped = len(pairs) - len(kept)
    add_negatives(kept)
    train, valid = split(kept, args.seed)
    random.Random(args.seed).shuffle(train)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train", train), ("valid", valid)):
        with (args.out / f"{name}.jsonl").open("w", encoding="utf-8") as fh:
            for p in rows:
                fh.write(json.dumps(asdict(p), ensure_ascii=False) + "\n")
    stats = {
        "by_source": {k: dict(v) for k, v in counts.items()},
        "dropped_by_overlap_check": dropped,
        "train": dict(Counter(p.style for p in train)),
        "valid": dict(Counter(p.style for p in valid)),
        "valid_groups": sorted({p.group for p in valid}),
    }
    (args.out / "stats.json").write_text(json.dumps(stats, indent=1) + "\n", encoding="utf-8")
    write_judge_rows(args.out / "judge", train, valid)
    print(json.dumps(stats, indent=1))


def write_judge_rows(out: Path, train: list[Pair], valid: list[Pair]) -> None:
    """The same pairs for a cross-encoder (``train_reranker.py --data``): a message with the
    passage that answers it (label 1) and with its hard negative (label 0), both styles."""
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train", train), ("valid", valid)):
        with (out / f"{name}.jsonl").open("w", encoding="utf-8") as fh:
            for p in rows:
                for text, label in ((p.passage, 1), (p.negative, 0)):
                    if not text:  # no hard negative found in its group
                        continue
                    row = {"question": p.query, "text": text, "label": label, "kind": p.style, "source": p.source}
                    fh.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
