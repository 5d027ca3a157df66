"""Spreadsheets (XLSX, XLSM, CSV): one section per sheet, one "Header: value; …" line
per row, and every chunk knows its sheet and A1 range (``#sheet=Escalation&range=A3:B4``)."""

from __future__ import annotations

import csv
import datetime
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from retrieval.errors import ExtractionError
from retrieval.ingest.formats.archive import check_zip
from retrieval.ingest.formats.builder import TextBuilder
from retrieval.ingest.text import decode_text
from retrieval.types import Document


def column_letter(n: int) -> str:
    """1 -> A, 27 -> AA."""
    out = ""
    while n:
        n, r = divmod(n - 1, 26)
        out = chr(65 + r) + out
    return out


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, datetime.datetime | datetime.time):
        v = _moment(v)
    return " ".join(str(v).split())


def _moment(v: datetime.datetime | datetime.time) -> str:
    """A date cell as the sheet shows it: "2026-01-05", not "2026-01-05 00:00:00" (a spreadsheet
    stores every date as a moment); a time without seconds as "14:30"."""
    if isinstance(v, datetime.datetime) and v.time() == datetime.time(0):
        return v.date().isoformat()
    spec = "minutes" if v.second == 0 and v.microsecond == 0 else "seconds"
    return v.isoformat(sep=" ", timespec=spec) if isinstance(v, datetime.datetime) else v.isoformat(timespec=spec)


def add_sheet(b: TextBuilder, name: str, rows: Iterable[Sequence[Any]]) -> None:
    """The first non-empty row is the header; later rows become lines marked with their row number."""
    header: list[str] | None = None
    lines: list[str] = []
    marks: list[int] = []
    width = 0
    for number, raw in enumerate(rows, start=1):
        cells = [_cell(v) for v in raw]
        if not any(cells):
            continue
        if header is None:
            header = cells
            continue
        width = max(width, len(cells))
        pairs = [
            f"{header[i] if i < len(header) and header[i] else column_letter(i + 1)}: {v}"
            for i, v in enumerate(cells)
            if v
        ]
        lines.append("; ".join(pairs))
        marks.append(number)
    if header is not None and not lines:  # a sheet that is only a header row is still text
        lines, marks, width = ["; ".join(c for c in header if c)], [1], len(header)
    b.section(name, lines, {"sheet": name, "last_col": column_letter(max(width, 1))}, marks)


@dataclass(frozen=True)
class XlsxExtractor:
    name: str = "xlsx"
    version: str = "3"  # 3: a date cell reads "2026-01-05" (2: chunks carry every row they cover)
    suffixes: tuple[str, ...] = (".xlsx", ".xlsm")
    isolated: bool = True

    def extract(self, rel_path: str, data: bytes) -> Document:
        import openpyxl

        check_zip(data, "spreadsheet")
        try:
            wb = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
        except Exception as exc:
            raise ExtractionError(f"corrupt spreadsheet: {exc}") from exc
        b = TextBuilder()
        try:
            for ws in wb.worksheets:
                add_sheet(b, ws.title, ws.iter_rows(values_only=True))
        finally:
            wb.close()
        if b.empty:
            raise ExtractionError("no text: every sheet is empty")
        return b.document(rel_path, PurePath(rel_path).stem, self.name, self.version, locator="sheet")


@dataclass(frozen=True)
class CsvExtractor:
    name: str = "csv"
    version: str = "2"  # 2: rebuilt so its chunks carry every row they cover (sentence-exact citations)
    suffixes: tuple[str, ...] = (".csv", ".tsv")
    isolated: bool = True

    def extract(self, rel_path: str, data: bytes) -> Document:
        text = decode_text(data)
        dialect: type[csv.Dialect] = csv.excel_tab  # a .tsv says its delimiter: commas in its cells do not count
        if not rel_path.lower().endswith(".tsv"):
            try:
                dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|")
            except csv.Error:
                dialect = csv.excel
        stem = PurePath(rel_path).stem
        b = TextBuilder()
        add_sheet(b, stem, csv.reader(io.StringIO(text), dialect))
        if b.empty:
            raise ExtractionError("no text: the CSV file has no rows")
        return b.document(rel_path, stem, self.name, self.version, locator="sheet")
