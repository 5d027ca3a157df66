"""A tiny team drive (issue 32): seven files, two of them useless, one stating the meal
allowance in its own words. The self-calibrated gate must at least point the question at the
document that answers it, and still refuse what the drive does not hold. Real embedder,
real Chroma, the product's builder and calibration."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from bot.builder import Builder
from bot.gate_status import calibration
from config.settings import Settings
from retrieval.models import Embedder
from retrieval.search import Verdict, decide
from tests.retrieval.fixtures import pdf_bytes, xlsx_bytes

CAPTIONS = """WEBVTT

00:00:04.000 --> 00:00:09.500
<v Anna>Welcome to the all-hands, everyone.

00:00:10.000 --> 00:00:17.000
<v Anna>The new office in Aarhus opens on the first of March.

00:00:17.500 --> 00:00:24.000
<v Omar>And the summer party is on the twentieth of June this year.
"""


def _expenses_docx() -> bytes:
    import docx

    d = docx.Document()
    d.add_heading("Expenses", level=0)
    d.add_heading("Per diem", level=1)
    d.add_paragraph("When travelling for work, employees receive a per diem of 450 DKK per day for meals.")
    d.add_paragraph("Alcohol is never reimbursed.")
    d.add_heading("Receipts", level=1)
    d.add_paragraph("Upload every receipt to the expense tool within 30 days of the purchase.")
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def _drive(root: Path) -> Path:
    docs = root / "drive"
    docs.mkdir()
    travel = (
        "Travel Policy\n\nBook flights through the travel portal at least 14 days before departure. "
        "Flights under six hours are booked in economy class. Hotels may cost up to 1,400 DKK a night."
    )
    (docs / "travel-policy.pdf").write_bytes(pdf_bytes([travel]))
    (docs / "on-call.xlsx").write_bytes(
        xlsx_bytes(
            {"Rotation": [["Week", "Primary", "Secondary"], ["49", "Maja", "Tobias"], ["50", "Tobias", "Ingrid"]]}
        )
    )
    (docs / "all-hands.vtt").write_text(CAPTIONS, encoding="utf-8")
    (docs / "expenses.docx").write_bytes(_expenses_docx())
    (docs / "cafeteria.txt").write_text(
        "The cafeteria serves lunch from 11:30 to 13:00. Vegetarian dishes are marked green.\n", encoding="utf-8"
    )
    (docs / "empty.md").write_text("", encoding="utf-8")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog >> garbage")
    return docs


@pytest.fixture(scope="module")
def small_drive(embedder: Embedder, tmp_path_factory: pytest.TempPathFactory) -> Builder:
    root = tmp_path_factory.mktemp("small-drive")
    settings = Settings(docs_dir=_drive(root), data_dir=root / "data")
    b = Builder(settings, embedder)
    b.engine.sync()
    assert calibration(b, compute=True) is not None
    return b


def _decide(b: Builder, question: str):  # type: ignore[no-untyped-def]
    result = b.engine.searcher().search(question, k=20)
    return result, decide(result, b.gate_config(), b.settings.max_sources)


def test_the_meal_allowance_is_ranked_first_on_a_seven_file_drive(small_drive: Builder) -> None:
    result, _ = _decide(small_drive, "What is the daily meal allowance when travelling?")
    assert result.hits[0].chunk.path == "expenses.docx"


def test_the_meal_allowance_is_pointed_at_the_expenses_passage_on_a_seven_file_drive(small_drive: Builder) -> None:
    _, verdict = _decide(small_drive, "What is the daily meal allowance when travelling?")
    assert verdict.verdict in (Verdict.ANSWER, Verdict.POINT), verdict.reason
    assert verdict.sources[0].chunk.path == "expenses.docx"


# Open (issue 32, item 4; issue 40 "answered if you can"). Measured with the packaged MiniLM: the
# nearest chunk is the expenses document at distance 0.527, but only 16 % of the question's idf
# mass is in this drive's vocabulary ("daily", "meal", "allowance" are not; "meals" is), so the
# coverage term adds 0.42 and the signal (0.945) is past the assert threshold the calibration
# chose (0.423, the median of the drive's own probes): the question is pointed at the expenses
# passage, not answered, until a teammate confirms that passage for it. strict: the day this
# passes, the mark has to go.
@pytest.mark.xfail(strict=True, reason="issue 32 item 4: the coverage term keeps a tiny drive's paraphrase unsure")
def test_the_meal_allowance_is_answered_on_a_seven_file_drive(small_drive: Builder) -> None:
    _, verdict = _decide(small_drive, "What is the daily meal allowance when travelling?")
    assert verdict.answerable, verdict.reason


@pytest.mark.parametrize(
    "question",
    ["What is the capital of Mongolia?", "How do I rotate the database credentials in production?"],
)
def test_what_the_small_drive_does_not_hold_is_refused(small_drive: Builder, question: str) -> None:
    assert _decide(small_drive, question)[1].verdict is Verdict.REFUSE


def test_the_broken_and_empty_files_fail_without_stopping_the_rest(small_drive: Builder) -> None:
    states = {path: rec.state for path, rec in small_drive.engine.records().items()}
    assert states["broken.pdf"] == "failed" and states["empty.md"] == "failed"
    assert sum(s == "indexed" for s in states.values()) == 5
