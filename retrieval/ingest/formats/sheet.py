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
from retrieval.ingest.formats.builder import TextBuilder, title_rows
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
    """The header is the first non-empty row with two or more cells, so a title above the table
    ("Travel budget 2026") stays a line of its own instead of labelling every column; a sheet of
    one column takes its first row. Later rows become lines marked with their row number."""
    filled = ((n, [_cell(v) for v in raw]) for n, raw in enumerate(rows, start=1))
    lead, rest = title_rows(((n, cells) for n, cells in filled if any(cells)), lambda row: row[1])
    header = next(rest, None)
    lines = [" ".join(c for c in cells if c) for _, cells in lead]
    marks = [n for n, _ in lead]
    width = max((len(cells) for _, cells in lead), default=0)
    names = header[1] if header else []
    for number, cells in rest:
        width = max(width, len(cells))
        pairs = [
            f"{names[i] if i < len(names) and names[i] else column_letter(i + 1)}: {v}"
            for i, v in enumerate(cells)
            if v
        ]
        lines.append("; ".join(pairs))
        marks.append(number)
    if header and len(lines) == len(lead):  # a table that is only a header row is still text
        lines.append("; ".join(c for c in names if c))
        marks.append(header[0])
        width = max(width, len(names))
    b.section(name, lines, {"sheet": name, "last_col": column_letter(max(width, 1))}, marks)


@dataclass(frozen=True)
class XlsxExtractor:
    name: str = "xlsx"
    version: str = "3"  # 3: a title row above the table; a date reads "2026-01-05" (2: rows per chunk)
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
    version: str = "3"  # 3: a title row above the table (2: chunks carry every row they cover)
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
