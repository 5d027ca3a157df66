"""Bytes to canonical text: the encoding detected, line endings normalised, binary refused.

Every text-based format (Markdown, HTML, CSV, captions) decodes through here, so
``document.text`` is the one string all offsets refer to.
"""

from __future__ import annotations

from charset_normalizer import from_bytes
from charset_normalizer.md import mess_ratio

from retrieval.errors import ExtractionError

_BOMS = (
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)


def decode_text(data: bytes) -> str:
    """Decode bytes as text: BOM, then UTF-8, then the detected encoding.

    Binary junk is refused rather than indexed as mojibake.
    """
    if not data:
        raise ExtractionError("empty file (0 bytes): nothing to index")
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return _checked(data.decode(codec))
    if b"\x00" in data[:8192]:
        raise ExtractionError("binary content (NUL bytes), not a text document")
    try:
        return _checked(data.decode("utf-8"))
    except UnicodeDecodeError:
        pass
    # Legacy files on a team drive are overwhelmingly Windows-1252/latin-1, and on short
    # texts the detector guesses wildly (latin-1 "smørrebrød" came back as Big5), so
    # cp1252 wins whenever it reads as clean text; the detector handles the rest.
    try:
        western = data.decode("cp1252")
        if mess_ratio(western) < 0.1:
            return _checked(western)
    except UnicodeDecodeError:
        pass
    best = from_bytes(data).best()
    if best is None:
        raise ExtractionError("binary content: no text encoding fits")
    return _checked(str(best))


def _checked(text: str) -> str:
    """Reject decoded text that is mostly control characters (a binary file in disguise)."""
    sample = text[:8192]
    controls = sum(1 for c in sample if ord(c) < 32 and c not in "\n\r\t\f")
    if sample and controls / len(sample) > 0.05:
        raise ExtractionError("binary content (control characters), not a text document")
    return text


def canonical(text: str) -> str:
    """The canonical text all offsets refer to: line endings normalised to ``\\n``."""
    return text.replace("\r\n", "\n").replace("\r", "\n")
