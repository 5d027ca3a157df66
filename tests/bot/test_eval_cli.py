"""`footnote eval` end to end on the small example corpus, with the real embedder."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import main
from retrieval.evaluation.cross_validation import auc
from tests.conftest import EXAMPLES

QUESTIONS = [
    {"id": "q1", "question": "How fast must a SEV1 page be acknowledged?", "style": "course",
     "needle": "For a SEV1, the on-call engineer must acknowledge the page within 5 minutes"},
    {"id": "q2", "question": "how much extra do I get paid for being on call", "style": "ticket",
     "needle": "On-call engineers receive a flat allowance of 1,200 DKK per week"},
    {"id": "q3", "question": "When is the post-mortem due?", "style": "course",
     "needle": "Every SEV1 and SEV2 gets a blameless post-mortem"},
]  # fmt: skip
OOD = [{"id": "o1", "question": "What is the capital of Mongolia?"}]  # no style: a direct question
OOD_TICKET = [
    {
        "id": "o2",
        "style": "ticket",
        "question": "trying to squeeze a transformer onto my laptop, how do LoRA adapters work?",
    },
]


def _jsonl(path: Path, rows: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_eval_reports_every_strategy_tests_and_sweep(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FOOTNOTE_DATA_DIR", str(tmp_path / "live"))
    monkeypatch.setenv("FOOTNOTE_DOCS_DIR", str(EXAMPLES))  # evaluating the live folder itself
    qs, ood = _jsonl(tmp_path / "q.jsonl", QUESTIONS), _jsonl(tmp_path / "ood.jsonl", OOD)
    ood_ticket = _jsonl(tmp_path / "ood-ticket.jsonl", OOD_TICKET)
    out, plots = tmp_path / "eval.json", tmp_path / "plots"
    res = CliRunner().invoke(
        main,
        [
            "eval",
            "--docs",
            str(EXAMPLES),
            "--questions",
            str(qs),
            "--ood",
            str(ood),
            "--ood",
            str(ood_ticket),
            "--json",
            str(out),
            "--plots",
            str(plots),
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    d = data["default"]
    assert d["n"] == 3 and d["recall_at"]["20"] == 1.0 and d["destroyed"] == 0
    assert d["wilson"]["20"][0] < 1.0 <= d["wilson"]["20"][1] + 1e-9  # 3/3 is still a wide interval
    assert set(d["by_style"]) == {"course", "ticket"}
    assert set(data["strategies"]) == {"bm25", "hybrid", "A", "B", "C", "D", "E", "F"}
    assert {(t["a"], t["b"], t["k"]) for t in data["sign_tests"]} >= {("E", "A", 20), ("default", "hybrid", 1)}
    sweep = data["refusal_sweep"]
    assert [r["threshold"] for r in sweep] == sorted(r["threshold"] for r in sweep)
    assert all(a["bluffs"] <= b["bluffs"] and a["refused"] >= b["refused"] for a, b in itertools.pairwise(sweep))
    assert sum(r["default"] for r in sweep) == 1 and sweep[0]["of"] == 2
    assert len(data["gate_signal"]["in_domain"]) == 3 and len(data["gate_signal"]["ood"]) == 2
    # The gate's parts, each as an AUC; the whole one agrees with the printed signals.
    aucs = data["gate_auc"]
    with_sentence = "chunk + 0.5 × coverage + 0.5 × nearest sentence (not in the gate)"
    assert list(aucs) == ["nearest chunk", "chunk + 0.5 × coverage", with_sentence, "the gate as configured"]
    whole = auc(data["gate_signal"]["in_domain"], data["gate_signal"]["ood"])
    assert aucs["the gate as configured"] == pytest.approx(whole)
    assert aucs["the gate as configured"] == aucs["chunk + 0.5 × coverage"]  # the sentence term is off by default
    assert all(0.0 <= v <= 1.0 for v in aucs.values())
    # Per style, each style's questions against the unanswerable ones of that style only
    # (o1 has no style: a direct question; the signals are in file order, o1 then o2).
    sig = data["gate_signal"]
    by_style = data["gate_by_style"]
    assert {k: (v["n"], v["n_ood"]) for k, v in by_style.items()} == {"course": (2, 1), "ticket": (1, 1)}
    assert by_style["course"]["auc"] == pytest.approx(auc([sig["in_domain"][0], sig["in_domain"][2]], sig["ood"][:1]))
    assert by_style["ticket"]["auc"] == pytest.approx(auc(sig["in_domain"][1:2], sig["ood"][1:]))
    default = next(r for r in sweep if r["default"])
    assert sum(v["bluffs"] for v in by_style.values()) == default["bluffs"]
    assert sum(v["refused"] for v in by_style.values()) == default["refused"]
    assert "Gate by question style" in res.output
    assert "Gate evidence, AUC in-domain vs out-of-domain" in res.output
    assert "Paired exact sign tests" in res.output and "← default" in res.output
    for png in ("recall.png", "refusal_sweep.png"):
        assert (plots / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Even on the live folder: a temporary index; the live data dir only gains the eval's vector cache.
    assert [p.name for p in (tmp_path / "live").iterdir()] == ["eval-cache"]
    assert len(list((tmp_path / "live" / "eval-cache").glob("*.npz"))) == 1


def test_eval_rejects_a_question_without_a_needle(tmp_path: Path) -> None:
    qs = _jsonl(tmp_path / "q.jsonl", [{"id": "x", "question": "where?"}])
    res = CliRunner().invoke(main, ["eval", "--docs", str(EXAMPLES), "--questions", str(qs)])
    assert res.exit_code != 0 and "needs" in res.output and "needle" in res.output


def test_eval_names_a_needle_no_document_holds_instead_of_calling_it_lost(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FOOTNOTE_DATA_DIR", str(tmp_path / "live"))
    elsewhere = {"id": "q9", "question": "How fast?", "needle": "a sentence from another version of the handbook"}
    qs, out = _jsonl(tmp_path / "q.jsonl", [QUESTIONS[0], elsewhere]), tmp_path / "eval.json"
    res = CliRunner().invoke(main, ["eval", "--docs", str(EXAMPLES), "--questions", str(qs), "--json", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["absent_needles"] == ["q9"] and data["default"]["destroyed"] == 0  # chunking lost nothing
    assert "warning: 1 needle(s) are in no document (q9)" in res.output


@pytest.mark.parametrize(
    ("content", "said"),
    [(b"5\n", "q.jsonl:1: not a JSON object"), (b'["q"]\n', "q.jsonl:1: not a JSON object"),
     (b"\xff\xfe{}\n", "q.jsonl: not UTF-8 text")],
)  # fmt: skip
def test_eval_says_which_line_of_a_questions_file_it_cannot_read(tmp_path: Path, content: bytes, said: str) -> None:
    (tmp_path / "q.jsonl").write_bytes(content)
    res = CliRunner().invoke(main, ["eval", "--docs", str(EXAMPLES), "--questions", str(tmp_path / "q.jsonl")])
    assert (
        res.exit_code == 1 and res.output.startswith(f"footnote: {tmp_path / said}") and "Traceback" not in res.output
    )


def test_eval_plots_without_matplotlib_say_how_to_install_it(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    qs = _jsonl(tmp_path / "q.jsonl", QUESTIONS)
    res = CliRunner().invoke(main, ["eval", "--docs", str(EXAMPLES), "--questions", str(qs), "--plots", str(tmp_path)])
    assert res.exit_code == 1 and "pip install 'footnote[plots]'" in res.output


def test_eval_pairs_its_ranks_with_an_earlier_run(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """--compare reads an earlier --json: every question paired by id and style, overall and per style."""
    monkeypatch.setenv("FOOTNOTE_DATA_DIR", str(tmp_path / "live"))
    qs = _jsonl(tmp_path / "q.jsonl", QUESTIONS)
    earlier = tmp_path / "earlier.json"
    ranks = [{"id": q["id"], "style": q["style"], "rank": None} for q in QUESTIONS]  # it found nothing
    earlier.write_text(json.dumps({"default": {"per_question": ranks}}), encoding="utf-8")
    out = tmp_path / "now.json"
    args = ["eval", "--docs", str(EXAMPLES), "--questions", str(qs), "--compare", str(earlier), "--json", str(out)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    found = {(q["id"], q["style"]) for q in data["default"]["per_question"] if q["rank"] is not None and q["rank"] <= 4}
    paired = {(t["style"], t["k"]): (t["n"], t["wins"], t["losses"]) for t in data["paired_with_earlier_run"]}
    assert paired[("all", 4)] == (3, len(found), 0)
    assert paired[("ticket", 4)] == (1, len(found & {("q2", "ticket")}), 0)
    assert "Paired against" in res.output
