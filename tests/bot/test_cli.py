"""The command line: index and status on a small folder, help text, clear errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import main
from tests.conftest import EXAMPLES


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    docs = tmp_path / "docs"
    shutil.copytree(EXAMPLES, docs)
    (docs / "empty.md").write_bytes(b"")
    monkeypatch.setenv("FOOTNOTE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("FOOTNOTE_DOCS_DIR", str(docs))
    return docs, tmp_path / "data"


def test_index_then_status_json_reads_the_index(env: tuple[Path, Path]) -> None:
    runner = CliRunner()
    res = runner.invoke(main, ["index", "--quiet"])
    assert res.exit_code == 0, res.output
    assert "3 indexed" in res.output and "1 failed" in res.output
    res = runner.invoke(main, ["status", "--json"])
    assert res.exit_code == 0
    data = json.loads(res.output)
    by_path = {d["path"]: d for d in data["documents"]}
    assert by_path["empty.md"]["state"] == "failed" and "empty" in by_path["empty.md"]["reason"]
    assert by_path["on-call.md"]["state"] == "indexed" and by_path["on-call.md"]["chunks"] > 0
    stamps = by_path["on-call.md"]["stamps"]
    assert stamps["embedding_model"].endswith("all-MiniLM-L6-v2") and stamps["dimension"] == 384
    assert stamps["extractor"] == "markdown" and stamps["pipeline"].startswith("p1:chunk-v1")
    assert data["totals"] == {
        "documents": 4,
        "indexed": 3,
        "failed": 1,
        "stale": 0,
        "chunks": sum(d["chunks"] for d in data["documents"]),
    }


def test_index_of_a_missing_folder_exits_non_zero(env: tuple[Path, Path], tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["index", str(tmp_path / "missing")])
    assert res.exit_code == 1
    assert "docs folder not found" in res.output


def test_every_command_has_help() -> None:
    runner = CliRunner()
    for cmd in ([], ["index"], ["status"], ["search"]):
        res = runner.invoke(main, [*cmd, "--help"])
        assert res.exit_code == 0 and "Usage:" in res.output


def test_serve_without_tokens_explains_what_is_missing(env: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    res = CliRunner().invoke(main, ["serve", "--http", "0"])
    assert res.exit_code != 0 and "SLACK_BOT_TOKEN" in res.output
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    res = CliRunner().invoke(main, ["serve", "--http", "0"])
    assert res.exit_code != 0 and "SLACK_SIGNING_SECRET" in res.output


def test_feedback_lists_clicks(env: tuple[Path, Path]) -> None:
    _, data = env
    data.mkdir(parents=True, exist_ok=True)
    (data / "feedback.jsonl").write_text(json.dumps({"vote": "down", "user": "U9", "question": "Where is X?"}) + "\n")
    res = CliRunner().invoke(main, ["feedback"])
    assert "👎 U9: Where is X?" in res.output


def test_retry_reindexes_a_fixed_file_now(env: tuple[Path, Path]) -> None:
    docs, _ = env
    runner = CliRunner()
    assert runner.invoke(main, ["index", "--quiet"]).exit_code == 0
    (docs / "empty.md").write_text("# Parking\n\nBikes go in the basement.\n")
    res = runner.invoke(main, ["retry"])
    assert res.exit_code == 0, res.output
    assert "indexed  empty.md" in res.output
    assert runner.invoke(main, ["retry"]).output.startswith("Nothing to retry")
    res = runner.invoke(main, ["retry", "nope.md"])
    assert res.exit_code != 0 and "not in the docs folder" in res.output


def test_status_shows_documents_stale_after_a_chunker_change(
    env: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    assert runner.invoke(main, ["index", "--quiet"]).exit_code == 0
    monkeypatch.setenv("FOOTNOTE_CHUNK_SIZE", "300")
    res = runner.invoke(main, ["status", "--json"])
    data = json.loads(res.output)
    states = {d["path"]: (d["state"], d["reason"] or "") for d in data["documents"]}
    assert states["on-call.md"][0] == "stale" and "t512:o0:h1:b1:w256 → p1:chunk-v1:t300" in states["on-call.md"][1]
    assert data["totals"]["stale"] == 3
    res = runner.invoke(main, ["index", "--quiet"])
    assert "3 indexed" in res.output and "0 stale" in res.output
