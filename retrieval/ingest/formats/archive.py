"""Guards for zip-based formats (DOCX, XLSX, PPTX): refuse a zip bomb before parsing."""

from __future__ import annotations

import io
import zipfile

from retrieval.errors import ExtractionError

MAX_EXPANDED = 500_000_000  # bytes an office file may expand to
MAX_RATIO = 200  # expanded / compressed; real office files stay far below this


def check_zip(data: bytes, kind: str) -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            infos = z.infolist()
    except zipfile.BadZipFile as exc:
        raise ExtractionError(f"corrupt {kind}: not a valid zip container ({exc})") from exc
    expanded = sum(i.file_size for i in infos)
    packed = max(1, sum(i.compress_size for i in infos))
    if expanded > MAX_EXPANDED or expanded / packed > MAX_RATIO:
        raise ExtractionError(
            f"refused {kind}: it expands to {expanded / 1e6:.0f} MB from {packed / 1e6:.1f} MB (a zip bomb?)"
        )
