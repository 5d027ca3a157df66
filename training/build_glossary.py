"""Build Footnote's English-Danish glossary from Wiktionary's English-Danish word list.

    python3 training/build_glossary.py en-da-enwiktionary.txt

SOURCE is the list Matthias Buchmeier extracts from the English Wiktionary (version
20200401, CC BY-SA 3.0 or GFDL; one line per sense: ``head {pos} (sense) :: translation
{gender}, translation [note]``). Kept: nouns, verbs, adjectives, adverbs, numerals, phrases
and abbreviations whose head and translation are each one to three words; senses, genders
and notes are dropped, and each (English, Danish) pair is written once, lowercased, in the
order of the source. Proper names, function words, prefixes, suffixes and proverbs are
left out: search needs the words a question is about. Writes
``retrieval/search/data/glossary_en_da.tsv`` and prints its size and SHA-256, which
``retrieval/search/glossary.py`` checks when it loads the file.
"""

from __future__ import annotations

import argparse
import hashlib
import re
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "retrieval" / "search" / "data" / "glossary_en_da.tsv"
KEEP = {"n", "v", "adj", "adv", "num", "phrase", "abbr"}
_ENTRY = re.compile(r"^(?P<head>[^{]+?)\s*\{(?P<pos>[^}]*)\}")
_NOTES = re.compile(r"\{[^}]*\}|\[[^\]]*\]|\([^)]*\)")
HEADER = (
    "# English-Danish glossary for searching across languages (Footnote, retrieval/search/glossary.py).\n"
    "# Built by training/build_glossary.py from the English-Danish dictionary extracted from\n"
    "# https://en.wiktionary.org/ by Matthias Buchmeier (version 20200401).\n"
    "# (c) Wiktionary contributors. License: Creative Commons Attribution-ShareAlike 3.0 Unported\n"
    "# (https://creativecommons.org/licenses/by-sa/3.0/); this file is shared under the same license.\n"
)


def pairs(lines: list[str]) -> list[tuple[str, str]]:
    """The (English, Danish) pairs worth a search: see the module's docstring."""
    out: dict[tuple[str, str], None] = {}
    for line in lines:
        if line.startswith("#") or "::" not in line:
            continue
        left, right = line.split("::", 1)
        m = _ENTRY.match(left)
        if m is None or m["pos"] not in KEEP or "SEE:" in left:
            continue
        head = " ".join(m["head"].lower().split())
        if not 1 <= len(head.split()) <= 3:
            continue
        for t in _NOTES.sub("", right).split(","):
            t = " ".join(t.lower().split())
            if t and "\t" not in t and not t.startswith("-") and 1 <= len(t.split()) <= 3:
                out[head, t] = None
    return list(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", type=Path, help="en-da-enwiktionary.txt (Wiktionary's English-Danish word list)")
    args = ap.parse_args()
    found = pairs(args.source.read_text(encoding="utf-8").splitlines())
    text = HEADER + "".join(f"{en}\t{da}\n" for en, da in found)
    OUT.write_text(text, encoding="utf-8")
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    heads = len({en for en, _ in found})
    print(f"{OUT}: {len(found)} pairs, {heads} English heads, {len(text.encode()):,} bytes, sha256 {digest}")


if __name__ == "__main__":
    main()
