"""OCR for image-only PDF pages: pypdfium2 renders the page, Debian's ``tesseract`` reads it.

Off unless ``FOOTNOTE_OCR=1``; tesseract is a system program (``apt install
tesseract-ocr``), called as a subprocess with a time limit, never a Python binding.
"""

from __future__ import annotations

import io
import shutil
import subprocess

from retrieval.errors import ExtractionError

DPI = 200


def tesseract_available() -> bool:
    return shutil.which("tesseract") is not None


def ocr_pages(data: bytes, pages: list[int], timeout_s: float = 60.0) -> dict[int, str]:
    """Text of the given 1-based pages, read from their rendered images."""
    import pypdfium2 as pdfium

    binary = shutil.which("tesseract")
    if binary is None:
        raise ExtractionError(
            "no text layer; OCR is enabled but tesseract is not installed (apt install tesseract-ocr)"
        )
    pdf = pdfium.PdfDocument(data)
    out: dict[int, str] = {}
    try:
        for n in pages:
            image = pdf[n - 1].render(scale=DPI / 72).to_pil()
            buf = io.BytesIO()
            image.save(buf, format="PNG")
            try:
                done = subprocess.run(
                    [binary, "stdin", "stdout", "--psm", "3"],
                    input=buf.getvalue(),
                    capture_output=True,
                    timeout=timeout_s,
                    check=False,
                )
            except subprocess.TimeoutExpired as exc:
                raise ExtractionError(f"OCR of page {n} took longer than {timeout_s:.0f}s") from exc
            if done.returncode != 0:
                raise ExtractionError(f"OCR of page {n} failed: {done.stderr.decode(errors='replace').strip()[:200]}")
            out[n] = done.stdout.decode("utf-8", errors="replace")
    finally:
        pdf.close()
    return out
