"""Check training text against every evaluation document by 8-word shingles.

A shingle is 8 consecutive words of the lowercased text with punctuation stripped
(words are runs of letters and digits, in any script: æ, ø and å are letters). Training
data must share no shingle with any document under ``EVAL_ROOT/*/docs/``; this script
checks JSON-lines files of it::

    python training/overlap_check.py --eval-root ../shared/eval DATA.jsonl…

It exits 1 (and names the lines) when any example's question or text overlaps.
The evaluation text is only read here, never used as training data.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path

_WORD = re.compile(r"[^\W_]+")

SHINGLE = 8

__all__ = ["SHINGLE", "EvalShingles", "shingles"]


def words(text: str) -> list[str]:
    """Lowercased runs of letters and digits."""
    return _WORD.findall(text.lower())


def shingles(text: str, n: int = SHINGLE) -> set[str]:
    """The set of n-word shingles of ``text`` (lowercased, punctuation-stripped words)."""
    w = words(text)
    return {" ".join(w[i : i + n]) for i in range(len(w) - n + 1)}


class EvalShingles:
    """Every 8-word shingle of every file under ``eval_root/*/docs/``, with the files it occurs in."""

    def __init__(self, eval_root: Path) -> None:
        files = sorted(p for p in eval_root.glob("*/docs/**/*") if p.is_file())
        if not files:
            raise SystemExit(f"error: no evaluation documents under {eval_root}/*/docs/")
        self.files = [str(p.relative_to(eval_root)) for p in files]
        self.index: dict[str, list[int]] = {}
        for i, p in enumerate(files):
            for s in shingles(p.read_text(encoding="utf-8", errors="replace")):
                self.index.setdefault(s, []).append(i)

    def hits(self, texts: Iterable[str]) -> dict[str, int]:
        """{evaluation file: number of distinct shared shingles} over all ``texts``."""
        found: dict[str, set[str]] = {}
        for text in texts:
            for s in shingles(text):
                for i in self.index.get(s, ()):
                    found.setdefault(self.files[i], set()).add(s)
        return {f: len(v) for f, v in sorted(found.items())}

    def example(self, texts: Iterable[str]) -> str:
        """One shared shingle (for the report), or ''."""
        for text in texts:
            for s in sorted(shingles(text)):
                if s in self.index:
                    return s
        return ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--eval-root",
        type=Path,
        required=True,
        help="folder holding dev/, guides/, holdout/, handbook/ (each with docs/)",
    )
    ap.add_argument("jsonl", nargs="+", type=Path, help="data files to check (every text field of every line)")
    args = ap.parse_args(argv)
    ev = EvalShingles(args.eval_root)
    bad = 0
    total = 0
    for path in args.jsonl:
        if not path.is_file():
            print(f"error: no such file: {path}", file=sys.stderr)
            return 2
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            ex = json.loads(line)
            texts = [v for v in ex.values() if isinstance(v, str)]  # every text field of the line
            total += 1
            h = ev.hits(texts)
            if h:
                bad += 1
                print(f"{path}:{n}: overlaps {', '.join(h)} ({ev.example(texts)!r})")
    print(
        f"checked {total} examples against {len(ev.files)} evaluation documents "
        f"({len(ev.index)} shingles of {SHINGLE} words): {bad} overlap"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
