"""Read the sources named in ``sources.json`` from local git repositories at pinned commits.

Each source is one public repository at one commit; its files are selected by globs and
read with ``git cat-file`` (no work tree is needed, a bare mirror or a clone both work).
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from overlap_check import EvalShingles
from textclean import Section, parse_markdown, parse_rst, split_sentences

__all__ = [
    "BuildError",
    "Document",
    "Sentence",
    "Source",
    "SourceReport",
    "glob_regex",
    "load_corpus",
    "load_manifest",
    "locate_repo",
    "read_documents",
    "sentence_table",
]


class BuildError(Exception):
    """A one-line, user-facing error."""


@dataclass
class Source:
    repo: str
    commit: str
    include: list[str]
    exclude: list[str]
    format: str = "markdown"
    license_file: str | None = None
    license: str = ""
    license_quote: str = ""
    license_where: str = ""
    no_generate: list[str] = field(
        default_factory=list
    )  # files used for FAQ examples but not sampled for generated questions
    per_file_license: str | None = None
    git_dir: Path | None = None


@dataclass
class Document:
    source: Source
    path: str
    raw: str
    title: str
    sections: list[Section] = field(default_factory=list)

    @property
    def ident(self) -> str:
        return f"{self.source.repo}:{self.path}"


def load_manifest(path: Path) -> list[Source]:
    """The sources listed in a manifest file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BuildError(f"no sources manifest at {path}") from None
    except json.JSONDecodeError as exc:
        raise BuildError(f"{path} is not valid JSON: {exc}") from None
    fields = set(Source.__dataclass_fields__) - {"git_dir"}
    try:
        return [Source(**{k: v for k, v in s.items() if k in fields}) for s in data["sources"]]
    except (KeyError, TypeError) as exc:
        raise BuildError(f"{path}: every source needs repo, commit, include, exclude ({exc})") from None


def _git_dir(path: Path) -> Path | None:
    if (path / ".git").is_dir():
        return path / ".git"
    if (path / "objects").is_dir() and (path / "HEAD").is_file():
        return path
    return None


def locate_repo(repo: str, mirrors: list[Path], explicit: dict[str, Path]) -> Path:
    """The git directory holding ``repo`` (owner/name): an explicit path, or one found under a mirrors folder."""
    owner, name = repo.split("/", 1)
    candidates = [explicit[repo]] if repo in explicit else []
    for m in mirrors:
        candidates += [m / f"{owner}+{name}" / "repo", m / f"{owner}+{name}", m / owner / name, m / name]
    for c in candidates:
        g = _git_dir(c)
        if g is not None:
            return g
    where = ", ".join(str(m) for m in mirrors) or "(no --mirrors given)"
    raise BuildError(f"repository {repo} not found (looked in {where}); clone it and pass --repo {repo}=PATH")


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A path glob where ``*`` stays inside one folder and ``**/`` spans any number of folders."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out + r"\Z")


def _git(git_dir: Path, *args: str, data: bytes | None = None) -> bytes:
    try:
        return subprocess.run(
            ["git", "--git-dir", str(git_dir), *args], input=data, capture_output=True, check=True
        ).stdout
    except subprocess.CalledProcessError as exc:
        raise BuildError(
            f"git {' '.join(args[:2])} failed in {git_dir}: {exc.stderr.decode(errors='replace').strip()}"
        ) from None


def read_blobs(git_dir: Path, commit: str, paths: list[str]) -> dict[str, str]:
    """Text of each path at ``commit`` (one ``git cat-file --batch`` call)."""
    if not paths:
        return {}
    out = _git(git_dir, "cat-file", "--batch", data="".join(f"{commit}:{p}\n" for p in paths).encode())
    texts: dict[str, str] = {}
    pos = 0
    for p in paths:
        nl = out.index(b"\n", pos)
        header = out[pos:nl].split()
        if len(header) < 3 or header[1] != b"blob":
            raise BuildError(f"{p} is not a file at {commit[:12]}")
        size = int(header[2])
        texts[p] = out[nl + 1 : nl + 1 + size].decode("utf-8", errors="replace")
        pos = nl + 1 + size + 1
    return texts


def list_files(src: Source) -> list[str]:
    """Paths at the source's commit matching its include globs and none of its exclude globs."""
    assert src.git_dir is not None
    try:
        _git(src.git_dir, "cat-file", "-e", f"{src.commit}^{{commit}}")
    except BuildError:
        raise BuildError(f"{src.repo}: commit {src.commit} is not in {src.git_dir}; fetch that commit") from None
    names = _git(src.git_dir, "ls-tree", "-r", "--name-only", "-z", src.commit).decode().split("\0")
    inc = [glob_regex(g) for g in src.include]
    exc = [glob_regex(g) for g in src.exclude]
    return sorted(n for n in names if n and any(r.match(n) for r in inc) and not any(r.match(n) for r in exc))


_PEP_COPYRIGHT = re.compile(r"^Copyright\n=+\n(.*?)(?:\n\S[^\n]*\n[=\-~]+\n|\Z)", re.S | re.M)


def pep_license(text: str) -> str | None:
    """The PEP's own copyright statement when it is public domain or CC0, else None."""
    m = _PEP_COPYRIGHT.search(text)
    if not m:
        return None
    body = " ".join(m.group(1).split())
    low = body.lower()
    if "open publication" in low or "all rights reserved" in low:
        return None
    if "public domain" in low or "cc0" in low:
        return body
    return None


_SKIP_SECTIONS = re.compile(
    r"^(copyright|references?|footnotes?|acknowledge?ments?|resources|related|see also|further reading|links?|table of contents|contents)$",
    re.I,
)


def parse_document(src: Source, path: str, raw: str) -> Document:
    """Parse one file of a source into plain-text sections (boilerplate sections dropped)."""
    if src.format == "rst":
        title, sections, _ = parse_rst(raw)
    else:
        title, sections = parse_markdown(raw)
    sections = [s for s in sections if not _SKIP_SECTIONS.match(s.heading.strip())]
    return Document(src, path, raw, title or title_from_path(path), sections)


def title_from_path(path: str) -> str:
    """A readable title for a page without one: uswds-style ``_components/NAME/...`` gives NAME."""
    parts = path.split("/")
    if len(parts) > 2 and parts[0] in ("_components", "_utilities", "_templates"):
        stem = parts[1]
    else:
        stem = parts[-1].rsplit(".", 1)[0]
        if stem in ("index", "_index", "README") and len(parts) > 1:
            stem = parts[-2]
    return stem.replace("-", " ").replace("_", " ").strip().capitalize()


def read_documents(src: Source) -> tuple[list[Document], list[tuple[str, str]]]:
    """(documents, [(path, why skipped)]) of one source."""
    assert src.git_dir is not None
    paths = list_files(src)
    if not paths:
        raise BuildError(f"{src.repo}: no file at {src.commit[:12]} matches {src.include}")
    texts = read_blobs(src.git_dir, src.commit, paths)
    docs: list[Document] = []
    skipped: list[tuple[str, str]] = []
    for p in paths:
        raw = texts[p]
        if src.per_file_license == "pep" and pep_license(raw) is None:
            skipped.append((p, "no public-domain/CC0 copyright statement in the PEP"))
            continue
        docs.append(parse_document(src, p, raw))
    return docs, skipped


# ---------------------------------------------------------------- sentences


@dataclass
class Sentence:
    """One sentence of the corpus, with where it sits (document, section, block, position)."""

    id: int
    doc: int
    section: int
    block: int
    pos: int  # index among the section's sentences
    text: str


_CODEISH = re.compile(r"[{}\[\]<>=;$|\\]|\w\(\)|::|->|/\w+/|\w_\w")
_URL = re.compile(r"https?://|www\.")
_LOREM = re.compile(r"\b(lorem|ipsum|consectetur|adipiscing|nullam)\b", re.I)
_ENGLISH = set(
    [
        "the",
        "a",
        "an",
        "of",
        "to",
        "and",
        "in",
        "is",
        "are",
        "for",
        "on",
        "with",
        "that",
        "this",
        "be",
        "by",
        "as",
        "you",
        "it",
        "or",
        "your",
        "can",
        "if",
        "not",
        "from",
        "at",
        "we",
        "will",
        "was",
        "has",
        "have",
        "should",
        "must",
        "when",
        "how",
        "what",
        "which",
    ]
)


def usable(text: str) -> bool:
    """A sentence a reader would cite: 6-80 words, at most 400 characters, mostly prose."""
    n = len(text.split())
    if n < 6 or n > 80 or len(text) > 400 or (not text[0].isalnum() and text[0] not in "\"“'("):
        return False
    letters = sum(c.isalpha() or c.isspace() for c in text)
    if letters < 0.85 * len(text) or len(_CODEISH.findall(text)) > 2 or _URL.search(text) or _LOREM.search(text):
        return False
    w = re.findall(r"[a-z]+", text.lower())
    return sum(x in _ENGLISH for x in w) >= max(1, 0.12 * len(w))  # English prose, not Spanish or a list of names


def sentence_table(docs: list[Document]) -> list[Sentence]:
    """Every usable sentence of every document, in document order."""
    out: list[Sentence] = []
    for d_i, d in enumerate(docs):
        for s_i, sec in enumerate(d.sections):
            pos = 0
            for b_i, block in enumerate(sec.blocks):
                for s in split_sentences(block):
                    if usable(s):
                        out.append(Sentence(len(out), d_i, s_i, b_i, pos, s))
                    pos += 1
    return out


@dataclass
class SourceReport:
    """What became of one source's files: kept, skipped for their license, dropped for overlap."""

    source: Source
    kept: list[str] = field(default_factory=list)
    license_skipped: list[tuple[str, str]] = field(default_factory=list)
    overlap_dropped: list[tuple[str, dict[str, int], str]] = field(default_factory=list)
    raw_only: list[tuple[str, str]] = field(default_factory=list)  # kept: only the raw file's markup overlaps


def load_corpus(
    manifest: Path, mirrors: list[Path], explicit: dict[str, Path], eval_root: Path
) -> tuple[list[Document], list[SourceReport]]:
    """Every document of every source that passes its license check and the overlap check.

    A file whose plain text (title, headings, paragraphs: what examples are built from)
    shares any 8-word shingle with any evaluation document is dropped whole.
    """
    ev = EvalShingles(eval_root)
    sources = load_manifest(manifest)
    docs: list[Document] = []
    reports: list[SourceReport] = []
    for src in sources:
        src.git_dir = locate_repo(src.repo, mirrors, explicit)
        found, skipped = read_documents(src)
        rep = SourceReport(src, license_skipped=skipped)
        for d in found:
            texts = [d.title] + [t for sec in d.sections for t in [sec.heading, *sec.blocks]]
            hits = ev.hits(texts)
            if hits:
                rep.overlap_dropped.append((d.path, hits, ev.example(texts)))
                continue
            if ev.hits([d.raw]):
                rep.raw_only.append((d.path, ev.example([d.raw])))
            rep.kept.append(d.path)
            docs.append(d)
        reports.append(rep)
    return docs, reports
