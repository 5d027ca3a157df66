"""The ``footnote`` command line: index, status, search, ask, eval, bench, serve.

Errors from the core (:class:`FootnoteError`) become a one-line message and exit
code 1 here; a bad setting is shown once, with its variable's name, and exits 2.
Nothing below this module prints or exits. Read commands (status, search, ask,
eval) never write to the live index.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from functools import wraps
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import click
from pydantic import ValidationError

from bot.builder import Builder
from bot.gate_status import calibration, gate_json, gate_text
from bot.scheduler import make_trigger
from bot.warmup import State, serving_states
from config.settings import Settings, load_settings, unknown_variables
from retrieval.errors import ConfigError, FootnoteError, ModelError, disk_full, no_space
from retrieval.index import DocRecord, totals
from retrieval.search import main_of

F = TypeVar("F", bound=Callable[..., Any])
P = ParamSpec("P")
R = TypeVar("R")


def _friendly(fn: Callable[P, R]) -> Callable[P, R]:
    """Translate core errors into a clear message and a non-zero exit."""

    @wraps(fn)
    def inner(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except FootnoteError as exc:
            click.secho(f"footnote: {exc}", fg="red", err=True)
            sys.exit(1)
        except Exception as exc:
            if not disk_full(exc):  # anything else is a defect: its traceback is wanted
                raise
            click.secho(f"footnote: {no_space(exc)}", fg="red", err=True)
            sys.exit(1)

    return inner


def settings_errors(exc: ValidationError) -> list[str]:
    """One line per bad setting, named as the operator sets it (``FOOTNOTE_FUSION``, ``SLACK_BOT_TOKEN``)."""
    lines = []
    for err in exc.errors():
        field = str(err["loc"][0]) if err["loc"] else None
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "literal_error":
            choices = str(err.get("ctx", {}).get("expected", "")).replace(" or ", ", ").replace("'", "")
            msg = f"must be one of {choices}"
        msg = msg.replace("Input should be", "must be")
        if field is not None and not isinstance(err.get("input"), Mapping):
            msg += f" (got {err['input']!r})"
        lines.append(f"footnote: {_env_name(field)}: {msg}" if field else f"footnote: {msg}")
    return lines


def _env_name(field: str) -> str:
    alias = Settings.model_fields[field].validation_alias if field in Settings.model_fields else None
    choices = getattr(alias, "choices", None)
    return str(choices[0]) if choices else f"FOOTNOTE_{field.upper()}"


class _Commands(click.Group):
    """Footnote's commands: a command's own error reads as every other error Footnote prints,
    one line starting "footnote:" (click's usage errors keep their usage line)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError:
            raise
        except click.ClickException as exc:
            click.secho(f"footnote: {exc.format_message()}", fg="red", err=True)
            ctx.exit(exc.exit_code)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--data-dir", type=click.Path(path_type=Path), help="Where the index lives [env FOOTNOTE_DATA_DIR].")
@click.pass_context
def main(ctx: click.Context, data_dir: Path | None) -> None:
    """Footnote answers questions from your team's documents, cites exactly where
    each answer came from, and says so when the documents don't say.

    Settings come from FOOTNOTE_* environment variables or a .env file.
    """
    _say_one_time_work()
    _make_temp_dir()
    for warning in unknown_variables(os.environ, _dotenv_names()):
        click.secho(f"footnote: {warning}", fg="yellow", err=True)
    try:
        ctx.obj = load_settings(data_dir=data_dir)
    except ValidationError as exc:
        for line in settings_errors(exc):
            click.secho(line, fg="red", err=True)
        sys.exit(2)
    try:
        make_trigger(ctx.obj.sync_minutes, ctx.obj.sync_cron)  # APScheduler's own parser and TZ, before any command
    except ConfigError as exc:
        click.secho(f"footnote: {exc}", fg="red", err=True)
        sys.exit(2)


def _make_temp_dir() -> None:
    """The TMPDIR the environment names, made when missing: the image points it into the data
    volume (its root filesystem may be read-only), where a new volume does not have it yet.
    SQLite (Chroma) and the model trials need a writable temporary directory."""
    for name in ("TMPDIR", "SQLITE_TMPDIR"):
        if where := os.environ.get(name):
            with contextlib.suppress(OSError):  # an unwritable one is reported by what needs it
                Path(where).mkdir(parents=True, exist_ok=True)


def _dotenv_names() -> list[str]:
    """The names a ``.env`` file in the working directory sets (read, never applied)."""
    from dotenv import dotenv_values

    return list(dotenv_values(".env")) if Path(".env").is_file() else []


class _StderrUnlessConfigured(logging.StreamHandler):
    """Writes to the current stderr, and only while the root logger has no handler of its
    own (`serve` configures one, pytest adds one): those get the record by propagation."""

    def emit(self, record: logging.LogRecord) -> None:
        if logging.getLogger().handlers:
            return
        self.setStream(sys.stderr)
        super().emit(record)


def _say_one_time_work() -> None:
    """The model loaders say on stderr when they do once-per-machine work (an ONNX export,
    timing the language model's weights): the first `footnote ask` should not just hang."""
    for name in ("footnote.embed", "footnote.llm"):
        logger = logging.getLogger(name)
        if not any(isinstance(h, _StderrUnlessConfigured) for h in logger.handlers):
            handler = _StderrUnlessConfigured()
            handler.setFormatter(logging.Formatter("footnote: %(message)s"))
            logger.addHandler(handler)
            logger.setLevel(logging.INFO)


def _reindex_option(fn: F) -> F:
    return click.option(
        "--reindex-from",
        type=click.Path(file_okay=False, path_type=Path),
        help="Rebuild the index from this folder, replacing the one it was built from.",
    )(fn)


def _claim_folder(rt: Builder, reindex: bool) -> None:
    """An index belongs to one docs folder: another one is refused unless --reindex-from said so.
    Reads and writes the manifest only: `serve` checks this before it listens, and loads no model."""
    from retrieval.search import adopt_folder, check_folder

    claim = adopt_folder if reindex else check_folder
    claim(rt.storage.manifest, rt.settings.docs_dir)


def _folder_settings(settings: Settings, docs_dir: Path | None, reindex_from: Path | None) -> Settings:
    if reindex_from is not None and docs_dir is not None and docs_dir.resolve() != reindex_from.resolve():
        raise click.UsageError("give the folder once: DOCS_DIR or --reindex-from")
    folder = reindex_from or docs_dir
    return settings.model_copy(update={"docs_dir": folder}) if folder is not None else settings


@main.command()
@click.argument("docs_dir", required=False, type=click.Path(path_type=Path))
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option(
    "--allow-empty",
    is_flag=True,
    help="Let an empty folder empty the index. Without it, an empty folder (a drive that is not "
    "mounted?) removes nothing and is an error.",
)
@_reindex_option
@click.pass_obj
@_friendly
def index(settings: Settings, docs_dir: Path | None, quiet: bool, allow_empty: bool, reindex_from: Path | None) -> None:
    """Sync DOCS_DIR (default FOOTNOTE_DOCS_DIR) into the index.

    Unchanged files are skipped by content hash; changed files are rebuilt; deleted
    files leave the index. A file that cannot be read is recorded as failed with its
    reason and never stops the others; the documents of a folder that cannot be listed
    are kept. An empty folder removes nothing unless --allow-empty says so. Then the
    gate is calibrated on the index (when it changed), and confirmed pairs whose
    passage is gone retire. Exits 0 when the sync ran, even with failures.
    An index belongs to the folder it was first built from: another folder is
    refused unless given as --reindex-from.
    """
    settings = _folder_settings(settings, docs_dir, reindex_from)
    rt = Builder(settings)
    _claim_folder(rt, reindex_from is not None)
    report = rt.engine.sync(progress=not quiet and sys.stderr.isatty(), allow_empty=allow_empty)
    rt.engine.searcher()  # reads the index as it is now: the drive's languages are recorded
    wanted = rt.embedding_model(rt.drive_languages())
    if rt.embedding_in_use is not None and wanted != rt.embedding_in_use:
        # The sync found documents in another language than the folder's text files showed:
        # the index is built again with the model that reads them (every document is stale).
        click.echo(f"The drive's languages call for the {wanted} embedding model: indexing again with it.")
        rt = Builder(settings)
        report = rt.engine.sync(progress=not quiet and sys.stderr.isatty(), allow_empty=allow_empty)
    retired = rt.learned.retire(rt.engine.searcher().snapshot)
    click.echo(
        f"Synced {settings.docs_dir} in {report.seconds:.1f}s: {len(report.indexed)} indexed "
        f"({report.chunks_embedded} chunks embedded), {report.unchanged} unchanged, "
        f"{len(report.removed)} removed, {len(report.failed)} failed, {len(report.skipped)} skipped."
        + (f" {retired} learned pair(s) retired: their passage is gone." if retired else "")
    )
    for path, reason in report.failed.items():
        click.secho(f"  failed  {_shown(path)}: {reason}", fg="yellow")
    for path, reason in report.skipped.items():
        click.echo(f"  skipped {_shown(path)}: {reason}")
    _print_totals(rt.engine.manifest.all())
    # What `serve` does after a sync, so that `footnote ask` answers with this index's own thresholds.
    cal = calibration(rt, compute=True, say=click.echo)
    if cal is not None:
        a, p = cal.thresholds
        click.echo(f"Gate: answers at ≤ {a:.3f}, points at the closest passages up to {p:.3f} (`footnote status`).")


def _shown(path: str) -> str:
    """A file's path on one line: a name holding a newline or another control character is
    shown with Python's escapes (``name\\nwith newline.md``), so one file is one line."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in path)


def _drive_language_text(passages: Mapping[str, int]) -> str:
    """What the drive's languages mean for a question in another one (status's line)."""
    if len(passages) < 2:
        return ""
    main = main_of(passages)
    if main is None:
        return " (mixed: every question is searched as asked)"
    return f" (a {main} drive: a question in another language is translated into {main})"


def _print_totals(recs: Mapping[str, DocRecord]) -> None:
    t = totals(recs.values())
    click.echo(
        f"Index: {t['documents']} documents: {t['indexed']} indexed, {t['failed']} failed, "
        f"{t['stale']} stale; {t['chunks']} chunks stored."
    )


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--calibrate", is_flag=True, help="Self-calibrate the gate now if this index has no calibration yet.")
@click.pass_obj
@_friendly
def status(settings: Settings, as_json: bool, calibrate: bool) -> None:
    """Every document in the index with its state, reason, chunk count and stamps.

    Counts are read from the index, not from what the last sync said it did.
    The drive's languages are shown as the last sync found them, with the embedding model
    they call for. Documents built with another embedding model, chunker or extractor version
    than the current settings are shown as stale (nothing is written: the next
    sync marks and rebuilds them). Files the sync skips are listed with the reason, so
    are files the index does not hold yet (a sync that stopped halfway, or a new file
    before the next one) and indexed files no longer in the folder; and each `footnote
    serve` on this data dir with its phase (starting, loading, syncing with counts,
    ready, model unavailable, failed).
    """
    from retrieval.models import measurements

    rt = Builder(settings)
    servers = serving_states(settings.data_dir)
    if not rt.storage.manifest.all():  # read before any model loads: nothing is timed for an empty index
        message = f"The index at {settings.chroma_url or settings.data_dir} is empty. Run `footnote index` first."
        if as_json:
            empty: dict[str, object] = {
                "documents": [], "totals": totals([]), "skipped": {}, "message": message,
                "servers": _servers_json(servers),
            }  # fmt: skip
            click.echo(json.dumps(empty, indent=2))
        else:
            _print_servers(servers)
            click.echo(message)
        return
    engine = rt.engine
    recs = engine.records()
    docs = [r.as_json() for r in recs.values()]
    measured = measurements(settings.data_dir / "models", lean=settings.memory_mb > 0)
    skipped, read = engine.indexer.survey()
    built_from = engine.manifest.docs_folder()
    # Against the folder the index was built from only: another folder would differ in every file.
    ours = built_from is None or built_from == str(engine.docs_folder())
    not_indexed = sorted(set(read) - set(recs)) if ours else []
    gone = sorted(set(recs) - set(read) - set(skipped)) if ours else []
    planted = engine.flagged()
    if as_json:
        out = {
            "documents": docs,
            "totals": totals(recs.values()),
            "skipped": skipped,
            "not_indexed": not_indexed,
            "gone": gone,
            "flagged": [{"path": f.path, "start": f.start, "end": f.end, "text": f.text} for f in planted],
            "gate": gate_json(rt, calibrate, click.echo),
            "docs_folder": built_from,
            "languages": engine.manifest.languages(),
            "passages_by_language": engine.manifest.passages_by_language(),
            "main_language": main_of(rt.drive_languages()),
            "embedding_model": rt.embedding_model(),
            "servers": _servers_json(servers),
            **measured,
        }
        click.echo(json.dumps(out, indent=2))
        return
    for d in docs:
        line = f"{d['state']:8} {d['chunks']:5} chunks  {_shown(d['path'])}"
        if d["reason"]:
            line += f"  ({d['reason']})"
        click.echo(line)
    for path, reason in skipped.items():
        click.echo(f"skipped        {_shown(path)}  ({reason})")
    for path in not_indexed:
        click.echo(f"not indexed    {_shown(path)}  (new in the folder: the next sync reads it)")
    for path in gone:
        click.echo(f"gone           {_shown(path)}  (no longer in the folder: the next sync drops it)")
    for f in planted:
        quote = " ".join(f.text.split())
        quote = quote if len(quote) <= 80 else quote[:79] + "…"
        click.echo(f"flagged        {_shown(f.path)}  #char={f.start},{f.end}  “{quote}”")
    if planted:
        click.echo("Flagged text addresses an assistant: it is never offered to the model nor quoted.")
    if not ours:
        click.secho(f"The index was built from {built_from}, not {engine.docs_folder()}.", fg="yellow")
    _print_totals(recs)
    langs = engine.manifest.languages()
    said = ", ".join(f"{n} {lang}" for lang, n in sorted(langs.items())) if langs else "not known yet (no sync)"
    model = rt.embedding_model()
    click.echo(f"Languages: {said}{_drive_language_text(rt.drive_languages())}; embedding model: {model}")
    runtime = measured["multilingual_runtime" if model == "multilingual-e5" else "embedding_runtime"]
    click.echo(f"Embedding runtime: {runtime}")
    if not settings.llm_url:
        click.echo(f"Language model weights: {measured['llm_weights']}")
        click.echo(f"Prompt lookup: {measured['llm_prompt_lookup']}")
    click.echo(gate_text(rt, calibrate, click.echo))
    _print_servers(servers)


def _servers_json(servers: list[tuple[State, bool | None]]) -> list[dict[str, object]]:
    return [{**st.as_json(), "pid": st.pid, "host": st.host, "running": alive} for st, alive in servers]


def _print_servers(servers: list[tuple[State, bool | None]]) -> None:
    """One line per `footnote serve` on this data dir: the phase it recorded (see bot.warmup)."""
    for st, alive in servers:
        where = f"Server {st.host} pid {st.pid}"
        if alive is False:
            click.echo(f"{where}: not running (it stopped without saying so; last phase: {st.phase})")
        else:
            click.echo(f"{where}: {st.describe()}")


@main.command()
@click.argument("paths", nargs=-1)
@_reindex_option
@click.pass_obj
@_friendly
def retry(settings: Settings, paths: tuple[str, ...], reindex_from: Path | None) -> None:
    """Try failed (and stale) documents again now, or only PATHS (relative to the docs folder).

    Every sync retries them anyway; this is for when you fixed a file and want it
    searchable without waiting for the schedule. With --reindex-from, the whole
    index is rebuilt from that folder instead.
    """
    rt = Builder(_folder_settings(settings, None, reindex_from))
    engine = rt.engine
    _claim_folder(rt, reindex_from is not None)
    if reindex_from is not None:
        report = engine.sync()
        click.echo(f"Rebuilt the index from {engine.docs_folder()} in {report.seconds:.1f}s.")
        _print_totals(engine.manifest.all())
        return
    engine.mark_stale()
    recs = engine.manifest.all()
    wanted = list(paths) or [p for p, r in recs.items() if r.state != "indexed"]
    unknown = [p for p in wanted if p not in recs and not (settings.docs_dir / p).is_file()]
    if unknown:
        raise click.ClickException(f"not in the docs folder or the index: {', '.join(unknown)}")
    if not wanted:
        click.echo("Nothing to retry: every document is indexed.")
        return
    report = engine.sync(only=set(wanted))
    for p in wanted:
        rec = engine.manifest.get(p)
        state = rec.state if rec else "removed"
        reason = f": {rec.reason}" if rec and rec.reason else ""
        click.echo(f"{state:8} {p}{reason}")
    click.echo(f"Retried {len(wanted)} in {report.seconds:.1f}s.")


def _require_an_index(rt: Builder) -> None:
    """An empty index answers nothing: say what to run, before any model is loaded or timed."""
    if not rt.storage.manifest.all():
        where = rt.settings.chroma_url or rt.settings.data_dir
        raise ConfigError(f"the index at {where} is empty: run `footnote index` first")


def _questions(question: str | None, from_file: Path | None) -> Iterator[str]:
    if from_file is not None:
        for line in from_file.read_text(encoding="utf-8").splitlines():
            if line.strip():
                yield line.strip()
    elif question:
        yield question
    else:
        raise click.UsageError("give a question or --from-file")


@main.command()
@click.argument("question", required=False)
@click.option("--k", default=20, show_default=True, help="How many results.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option(
    "--from-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="One question per line."
)
@click.pass_obj
@_friendly
def search(settings: Settings, question: str | None, k: int, as_json: bool, from_file: Path | None) -> None:
    """Rank passages for QUESTION as `footnote ask` searches it, without an answer.

    Shows what the gate would do: answer it, point at the closest passages (not sure), or
    refuse it (nothing is close). No learned pair is consulted: `footnote ask` does that. A
    question in another language than the drive's is searched as `ask` searches it:
    translated into the drive's language by the language model (FOOTNOTE_TRANSLATE), with
    its words looked up in the glossary (FOOTNOTE_GLOSSARY); `--json` prints what was searched.
    """
    from retrieval.answer import locator_for
    from retrieval.search import decide

    rt = Builder(settings)
    searcher = rt.engine.searcher()
    for q in _questions(question, from_file):
        searched = rt.answers.searched_as(q)
        res = searcher.search(searched.text, k=k, glosses=searched.glosses)
        gate = decide(res, rt.gate_config(), settings.max_sources)
        rows: list[dict[str, Any]] = [
            {
                "rank": i + 1,
                "locator": locator_for(h)[0],
                "label": locator_for(h)[1],
                "path": h.chunk.path,
                "doc": h.chunk.doc_title,
                "section": h.chunk.section,
                "from": h.chunk.start,
                "to": h.chunk.end,
                "content": h.chunk.content,
                "distance": round(h.distance, 4),
                "score": round(h.score, 4),
            }
            for i, h in enumerate(res.hits)
        ]
        outcome = {"answer": "answered", "point": "pointed", "refuse": "refused"}[gate.verdict.value]
        if as_json:
            line = {"query": q, "outcome": outcome, "answerable": gate.answerable, "gate": round(gate.signal, 4)}
            if searched.text != q or searched.glosses:  # asked in another language than the drive's
                line |= {"searched": searched.text, "glosses": searched.glosses, "untranslated": searched.failed}
            click.echo(json.dumps({**line, "reason": gate.reason, "results": rows}))
            continue
        verdict = {"answered": "answerable", "pointed": f"would be pointed at: {gate.reason}"}.get(
            outcome, f"would be refused: {gate.reason}"
        )
        click.secho(f"{q}  [{verdict}]", bold=True)
        for r in rows:
            snippet = " ".join(r["content"].split())[:100]
            click.echo(
                f"{r['rank']:3}. {r['score']:.3f} d={r['distance']:.3f}  {r['doc']} > {r['section']}  {r['locator']}"
            )
            click.echo(f"       {snippet}")


@main.command()
@click.argument("question", required=False)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option(
    "--from-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="One question per line."
)
@click.pass_obj
@_friendly
def ask(settings: Settings, question: str | None, as_json: bool, from_file: Path | None) -> None:
    """Answer QUESTION from the indexed documents, with citations.

    The model writes only [n]; Footnote attaches each source's document, section,
    link and quote. When Footnote is not sure, it quotes the closest passages instead,
    plainly not an answer; when nothing is close, it refuses. The model writes neither.
    A question in Danish to an English drive (or the other way) is translated by the
    model first.
    Each question and its outcome is recorded for `footnote gaps` (asked in "all
    documents"; nothing with FOOTNOTE_GAPS=off).
    """
    from bot.render import answer_json, answer_text
    from retrieval.answer import Outcome

    rt = Builder(settings)
    _require_an_index(rt)
    gaps = rt.gaps()
    failed = None
    for q in _questions(question, from_file):
        try:
            result = rt.answers.answer(q)
        except FootnoteError:
            if gaps is not None:
                gaps.record(q, Outcome.ERROR, None, surface="cli")
            raise
        if gaps is not None:  # the operator's questions are demand too; `footnote gaps` says where each came from
            gaps.record(q, result.outcome, None, surface="cli", answer=result)
        click.echo(json.dumps(answer_json(result)) if as_json else answer_text(result) + "\n")
        failed = result.reason if result.outcome.failed else failed
    if failed is not None:  # the passages were shown instead; a script still learns that the model failed
        raise ModelError(failed)


def _docs_option(help_text: str) -> Callable[[F], F]:
    return click.option(
        "--docs", "docs_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), help=help_text
    )


def _read_questions(path: Path, *, needs_needle: bool) -> list[Any]:
    from retrieval.evaluation import Question

    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise click.ClickException(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    rows = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise click.ClickException(f"{path}:{n}: not a JSON line ({exc.msg})") from exc
        if not isinstance(row, dict):
            raise click.ClickException(f'{path}:{n}: not a JSON object such as {{"id": …, "question": …}}')
        rows.append(Question.from_json(row, needs_needle=needs_needle))
    return rows


@main.command("eval")
@_docs_option("Documents to evaluate on [default FOOTNOTE_DOCS_DIR].")
@click.option(
    "--questions",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help='JSON lines: {"id", "question", "needle", "style"?}.',
)
@click.option(
    "--ood",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    multiple=True,
    help='JSON lines of questions the docs cannot answer: {"id", "question", "style"?}; may be given again '
    "(e.g. direct and chatty twins). With styles, the gate is also scored per style against its own style.",
)
@click.option(
    "--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), help="Also write the results as JSON here."
)
@click.option(
    "--plots",
    "plots_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write recall and refusal-sweep PNGs here.",
)
@click.option(
    "--answers",
    "with_answers",
    is_flag=True,
    help="Also ask every question through the model: citations, evidence hits, bluffs, answer time (slow).",
)
@click.option(
    "--replay",
    "replay_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Before scoring (implies --answers): ask these questions and confirm the passage that showed each one's "
    'needle, as a satisfied teammate would click ("This answers it", 👍). E.g. the direct twins of chatty questions.',
)
@click.option(
    "--replay-style",
    metavar="STYLE",
    help="Replay only the lines of this style, e.g. course (the direct twins of a file holding both styles; a line "
    "without a style is course).",
)
@click.option(
    "--compare",
    "--compare-answers",
    "compare_answers",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A previous --json output: paired sign tests of its ranks (R@1, R@4, per style) and, with --answers, "
    "its answers against this run's.",
)
@click.option(
    "--cv",
    is_flag=True,
    help="Also cross-validate the gate: split by document, choose on one half, report on the other.",
)
@click.option(
    "--cv-seeds",
    type=click.IntRange(1, 20),
    default=1,
    show_default=True,
    help="Probe seeds for --cv: the calibration samples its probes, and each seed calibrates again (slower).",
)
@click.pass_obj
@_friendly
def eval_cmd(
    settings: Settings,
    docs_dir: Path | None,
    questions: Path,
    ood: tuple[Path, ...],
    json_out: Path | None,
    plots_dir: Path | None,
    with_answers: bool,
    replay_path: Path | None,
    replay_style: str | None,
    compare_answers: Path | None,
    cv: bool,
    cv_seeds: int,
) -> None:
    """Measure retrieval and refusals on your own documents (and, with --answers, the answers).

    Each question's NEEDLE is a sentence copied verbatim from the document that
    answers it; a strategy finds it when a returned passage contains the whole
    sentence. Prints recall@1/4/8/20, MRR@20, answers destroyed by chunking, 95 %
    Wilson intervals, paired sign tests between strategies (the seed's A-F, BM25,
    hybrid, default), and, with --ood, the refusal sweep over the gate threshold,
    marking the threshold self-calibrated on DOCS (or FOOTNOTE_GATE_THRESHOLD).
    When questions carry a "style" (e.g. "course" for a direct question, "ticket"
    for a chatty message), every figure is also shown per style, and the gate of
    each style is scored against unanswerable questions of that same style.

    Always indexes DOCS into a temporary directory: the live index is never
    touched, even when DOCS is the configured docs folder. Every text's vector is
    remembered in DATA_DIR/eval-cache (by model and text hash), so the next eval
    embeds only what changed.
    """
    from bot.evaluate import evaluate
    from retrieval.evaluation import format_answers, format_cv, format_eval, format_paired, write_plots

    if plots_dir is not None and importlib.util.find_spec("matplotlib") is None:
        raise click.ClickException("--plots needs matplotlib, an optional extra: pip install 'footnote[plots]'")
    qs = _read_questions(questions, needs_needle=True)
    oods = [q for path in ood for q in _read_questions(path, needs_needle=False)]
    first = _read_questions(replay_path, needs_needle=True) if replay_path is not None else []
    if replay_style:
        first = [q for q in first if (q.style or "course") == replay_style]
    result = evaluate(
        settings,
        (docs_dir or settings.docs_dir).resolve(),
        qs,
        oods,
        with_answers=with_answers,
        replay_first=first,
        replay_file=str(replay_path or ""),
        compare_to=compare_answers,
        cv_seeds=cv_seeds if cv else 0,
        progress=lambda msg: click.echo(f"Evaluating: {msg} …", err=True),
        indexing=sys.stderr.isatty(),
    )
    langs = result.languages
    said = "; ".join(f"{k} " + ", ".join(f"{lang} {n}" for lang, n in v.items()) for k, v in langs.items() if v)
    click.echo(f"Languages: {said}" if said else "Languages: unknown")
    click.echo(format_eval(result.report))
    if result.paired:
        click.echo("\n" + format_paired(result.paired, compare_answers))
    click.echo("\n" + result.gate_text)
    if result.folds:
        click.echo("\n" + format_cv(result.folds))
    if result.answers is not None:
        click.echo(format_answers(result.answers))
    if json_out is not None:
        json_out.write_text(json.dumps(result.as_json(), indent=2), encoding="utf-8")
        click.echo(f"Wrote {json_out}")
    if plots_dir is not None:
        for png in write_plots(result.report, plots_dir):
            click.echo(f"Wrote {png}")


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_obj
def bench(settings: Settings, args: tuple[str, ...]) -> None:
    """Benchmarks (figures, never pass/fail): `python -m bench` in a source checkout.

    The benchmarks are tooling, not product: they live in the repository's bench/
    package, which the installed wheel does not include. From a checkout this runs
    them (`footnote bench --help` lists their options); elsewhere it says where they are.
    """
    import subprocess

    root = Path(__file__).resolve().parent.parent
    if not (root / "bench" / "__main__.py").is_file():
        raise click.ClickException(
            "the benchmarks run from a source checkout of Footnote (bench/ is not installed with the wheel): "
            "clone the repository and run `make bench` there"
        )
    env = {**os.environ, "FOOTNOTE_DATA_DIR": str(settings.data_dir.resolve())}  # the same data dir from the checkout
    sys.exit(subprocess.call([sys.executable, "-m", "bench", *args], cwd=root, env=env))


@main.command()
@click.argument("question")
@click.option(
    "--source",
    required=True,
    help="The passage that answers it: a citation's or a pointer's url or locator, as `footnote ask --json` printed it.",
)
@click.option(
    "--channel", help="Confirm it in this Slack channel's scope (FOOTNOTE_CHANNEL_FOLDERS) [default: all documents]."
)
@click.option("--user", default="cli", show_default=True, help="Who confirms it (kept with the pair).")
@click.option("--json", "as_json", is_flag=True, help="Print the pair as JSON.")
@click.pass_obj
@_friendly
def confirm(settings: Settings, question: str, source: str, channel: str | None, user: str, as_json: bool) -> None:
    """Record that SOURCE answers QUESTION, exactly as Slack's "This answers it" button does.

    A later message in the same scope that reads like QUESTION is answered from that
    passage, with confidence, and says a teammate confirmed it. The pair retires by
    itself when the passage's words leave its document; `footnote feedback --learned`
    lists the pairs and `--forget ID` removes one.
    """
    from bot.scoping import ChannelScopes
    from retrieval.answer import find_passage

    rt = Builder(settings)
    _require_an_index(rt)
    scope = ChannelScopes(settings.channel_folders, settings.excluded_channels).for_channel(channel or "")
    if channel and scope.excluded:
        raise click.ClickException(f"Footnote does not answer in {channel} (FOOTNOTE_EXCLUDED_CHANNELS)")
    folders = scope.folders if channel else None
    passage = find_passage(source, rt.answers.candidates(question, folders))
    if passage is None:
        raise click.ClickException(
            f"{source!r} is none of the passages this question finds: copy a citation's or a pointer's url or "
            "locator from `footnote ask --json` for the same question"
        )
    pair = rt.answers.confirm(question, passage, folders, user, "cli")
    if pair is None:
        raise click.ClickException(f"the passage at {passage.path}{passage.locator} is no longer in the index")
    if as_json:
        click.echo(json.dumps(pair.as_json(), ensure_ascii=False))
        return
    click.echo(f"Confirmed {pair.id}: {passage.doc} — {passage.label} answers {question!r} (scope {pair.scope}).")


@main.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option("--learned", is_flag=True, help="List the confirmed (message, passage) pairs instead.")
@click.option("--forget", "forget_id", metavar="ID", help="Remove the learned pair with this id.")
@click.pass_obj
@_friendly
def feedback(settings: Settings, as_json: bool, learned: bool, forget_id: str | None) -> None:
    """List the 👍/👎 clicks people gave answers in Slack, or the learned pairs.

    A pair is kept when a teammate clicks "This answers it" under a pointer, 👍 on an
    answer, or runs `footnote confirm`; 👎 on an answer that came from a pair removes it.
    """
    if learned or forget_id:
        _learned(Builder(settings), as_json, forget_id)
        return
    path = settings.data_dir / "feedback.jsonl"
    if not path.is_file():
        click.echo("No feedback yet.")
        return
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if as_json:
            click.echo(json.dumps(rec))
        else:
            click.echo(f"{'👍' if rec.get('vote') == 'up' else '👎'} {rec.get('user')}: {rec.get('question', '?')}")


def _learned(rt: Builder, as_json: bool, forget_id: str | None) -> None:
    if forget_id:
        if not rt.learned.forget(forget_id):
            raise click.ClickException(
                f"no learned pair has the id {forget_id!r} (`footnote feedback --learned` lists them)"
            )
        click.echo(f"Forgot {forget_id}.")
        return
    pairs = rt.learned.all()
    if not pairs and not as_json:
        click.echo("No learned pairs yet.")
    for p in pairs:
        if as_json:
            click.echo(json.dumps(p.as_json(), ensure_ascii=False))
        else:
            click.echo(f"{p.id}  [{p.scope}] {p.message!r} -> {p.path}#char={p.start},{p.end} ({p.via}, {p.user})")


_UNITS = {"h": 3600.0, "d": 86_400.0, "w": 7 * 86_400.0}


def _since(text: str) -> float | None:
    """``30d``, ``12h``, ``2w`` as seconds; ``all`` as None (everything kept)."""
    text = text.strip().lower()
    if text == "all":
        return None
    try:
        value = float(text[:-1])
    except ValueError:
        value = -1.0
    if text[-1:] not in _UNITS or value <= 0:
        raise click.BadParameter(f"{text!r}: a number of hours, days or weeks such as 12h, 30d, 2w, or 'all'")
    return value * _UNITS[text[-1]]


@main.command()
@click.option("--since", "since", default="30d", show_default=True, help="How far back: 12h, 30d, 2w or all.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--purge", is_flag=True, help="Delete every recorded question now (the file is rewritten).")
@click.pass_obj
def gaps(settings: Settings, since: str, as_json: bool, purge: bool) -> None:
    """What the docs don't answer: refused and 👎 questions, grouped by meaning.

    Every question asked in Slack or with `footnote ask` is recorded with its outcome
    (answered, pointed at passages, refused by the gate, every claim removed, the model
    failed, error),
    its scope and the documents nearest to it, and kept FOOTNOTE_GAPS_DAYS (90) days.
    Each group is labelled by its most central question, with how many asked and the
    documents where the answer would likely belong. This command shows every scope;
    the App Home shows each person only the questions their channels may see.
    """
    from bot.gaps import FILE, find_gaps, gaps_text

    seconds = _since(since)
    if not (settings.data_dir / FILE).is_file():
        off = "" if settings.gaps else " (recording is off: FOOTNOTE_GAPS=off)"
        click.echo(json.dumps({"groups": []}) if as_json and not purge else f"No questions recorded yet{off}.")
        return
    record = Builder(settings).gap_record
    if purge:
        click.echo(f"Deleted {record.purge()} recorded questions.")
        return
    rows = record.asked(seconds)
    found = find_gaps(rows)
    label = "everything kept" if seconds is None else f"last {since}"
    if as_json:
        out = {
            "since": since,
            "recording": settings.gaps,
            "keep_days": settings.gaps_days,
            "outcomes": record.outcomes(seconds),
            "groups": [g.as_json() for g in found],
        }
        click.echo(json.dumps(out, indent=2, ensure_ascii=False))
        return
    click.echo(gaps_text(found, label, len(rows)))
    if not settings.gaps:
        click.secho("Recording is off (FOOTNOTE_GAPS=off): these are questions recorded before.", fg="yellow")


@main.command("model-path")
@click.pass_obj
@_friendly
def model_path(settings: Settings) -> None:
    """Print the path of the GGUF model file, assembling the packaged default if needed.

    For running llama.cpp's server on the same model yourself (`footnote model-server`
    does it for you): llama-server --model "$(footnote model-path)"
    """
    from retrieval.models import packaged_gguf

    click.echo(str(settings.llm_gguf or packaged_gguf(settings.data_dir / "models", settings.llm)))


@main.command("model-server")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every interface).")
@click.option("--port", default=8080, show_default=True, help="Port to listen on.")
@click.option("--n-ctx", default=4096, show_default=True, help="Context size in tokens (Footnote's prompts fit 4,096).")
@click.pass_obj
@_friendly
def model_server(settings: Settings, host: str, port: int, n_ctx: int) -> None:
    """Serve the configured language model as an OpenAI-compatible server (llama-cpp-python's).

    Point every bot replica's FOOTNOTE_LLM_URL at http://HOST:PORT/v1 to scale the model
    out. The model is the one `footnote model-path` prints. Before it listens, a child
    process checks which of llama.cpp's kernels run on this CPU: on some (a Xeon with
    AMX) its default ones crash, and the plain ones are used instead.
    """
    from bot.http_server import HttpServer
    from bot.serve import until_signalled
    from retrieval.models import openai_compatible_app, packaged_gguf

    gguf = settings.llm_gguf or packaged_gguf(settings.data_dir / "models", settings.llm)
    server = HttpServer(openai_compatible_app(gguf, n_ctx, settings.llm_threads), (host, port)).start()
    click.echo(f"serving {gguf.name} at {server.url}/v1 (FOOTNOTE_LLM_URL); Ctrl-C stops it", err=True)
    until_signalled()
    server.stop()


@main.command()
@click.option("--http", "http_port", type=int, help="Serve Slack's HTTP events on this port (at /slack/events).")
@click.option("--socket", "socket_mode", is_flag=True, help="Use Socket Mode (needs SLACK_APP_TOKEN).")
@click.option("--host", default="0.0.0.0", show_default=True, help="Address for --http.")
@_reindex_option
@click.pass_obj
@_friendly
def serve(settings: Settings, http_port: int | None, socket_mode: bool, host: str, reindex_from: Path | None) -> None:
    """Run the Slack bot: Socket Mode when SLACK_APP_TOKEN is set, else HTTP.

    Needs SLACK_BOT_TOKEN, and SLACK_SIGNING_SECRET for HTTP mode. It listens
    (or connects, in Socket Mode) within seconds, then warms up behind it: loads the
    models, syncs, and answers the questions that arrived meanwhile in their threads.
    A restart on an existing index answers from it while the sync catches up; a new
    index is read whole first. GET /healthz shows the phase (503 only when broken),
    GET /readyz is 200 once questions are answered now. A docs folder other than the
    one the index was built from is refused (before anything starts) unless given as
    --reindex-from.
    """
    from bot import serve as serving

    settings = _folder_settings(settings, None, reindex_from)
    if settings.slack_bot_token is None:
        raise click.ClickException("SLACK_BOT_TOKEN is not set: create the app from config/slack_manifest.yaml first")
    use_socket = socket_mode or (http_port is None and settings.slack_app_token is not None)
    if use_socket and settings.slack_app_token is None:
        raise click.ClickException("Socket Mode needs SLACK_APP_TOKEN (an xapp- token with connections:write)")
    if not use_socket and settings.slack_signing_secret is None:
        raise click.ClickException("HTTP mode needs SLACK_SIGNING_SECRET to check Slack's signatures")
    b = Builder(settings, measure_at_load=False)  # the forms of the weights are timed behind the listener
    opts = b.serve_options(host, http_port, use_socket)
    listener = serving.preflight(opts, b.slack_client())  # a port in use or a refused token: one line, at once
    try:
        _claim_folder(b, reindex_from is not None)
    except BaseException:
        listener.close()
        raise
    serving.run(b.service, b.models_to_load(), opts, listener)


if __name__ == "__main__":
    main()
