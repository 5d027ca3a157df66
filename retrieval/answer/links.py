"""Signed citation links: who may open ``/view/<path>`` is decided when the citation is made.

A viewer link carries ``exp`` (a Unix time), ``h`` (a fingerprint of the words cited, so
the viewer can tell when an edit has moved them away from the range) and ``sig``, an
HMAC-SHA256 over the document path, the cited range, the fingerprint and the expiry, keyed
by a secret only Footnote holds. (Links minted before ``h`` existed carry none, and open as
they did.)
The answer service only cites documents the asker's channel may search, so a valid
signature is proof that the link was minted for that document: editing the path,
the range or the expiry breaks it.

The key is ``FOOTNOTE_LINK_SECRET`` when set (replicas that do not share a data dir
must set the same one), else ``<data dir>/link-secret``, created once with mode 0600.
Changing the key invalidates every link already posted.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import secrets
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from retrieval.errors import ConfigError

SECRET_FILE = "link-secret"
_SECRET_BYTES = 32
_VERSION = b"footnote-link-v1"  # domain separation: this key signs nothing else
_VERSION_WORDS = b"footnote-link-v2"  # a link that also binds the words cited (``h``)

# (path, from, to, fingerprint) -> the query string ``from=&to=&h=&exp=&sig=`` (no leading "?")
SignLink = Callable[[str, int | None, int | None, str | None], str]
# (path, query) -> (ok, reason)
VerifyLink = Callable[[str, Mapping[str, str]], tuple[bool, str]]


class LinkSigner:
    """Mints and checks viewer links; ``now`` is injectable so tests never sleep."""

    def __init__(self, secret: bytes, ttl_s: float, now: Callable[[], float] = time.time) -> None:
        if len(secret) < 16:
            raise ConfigError("the link secret must be at least 16 bytes")
        self._key = secret
        self.ttl_s = ttl_s
        self._now = now

    def _mac(self, path: str, start: str, end: str, exp: str, words: str | None = None) -> str:
        # NUL cannot occur in a path or a decimal, so the fields cannot be shifted into one
        # another; a link with a fingerprint is signed under its own version.
        fields = (path, start, end, exp) if words is None else (path, start, end, words, exp)
        msg = b"\x00".join(x.encode() for x in fields)
        version = _VERSION if words is None else _VERSION_WORDS
        digest = hmac.new(self._key, version + b"\x00" + msg, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    def sign(self, path: str, start: int | None = None, end: int | None = None, words: str | None = None) -> str:
        """The query string for a link to ``path`` (optionally its range ``start``–``end``,
        and ``words``, the :func:`text_digest` of what the range holds now)."""
        exp = str(int(self._now() + self.ttl_s))
        if start is None or end is None:
            return f"exp={exp}&sig={self._mac(path, '', '', exp)}"
        a, b = str(start), str(end)
        h = f"h={words}&" if words is not None else ""
        return f"from={a}&to={b}&{h}exp={exp}&sig={self._mac(path, a, b, exp, words)}"

    def verify(self, path: str, query: Mapping[str, str]) -> tuple[bool, str]:
        """(True, "ok") for a link this key minted for ``path`` that has not expired,
        else (False, "unsigned" | "tampered" | "expired")."""
        sig, exp = query.get("sig"), query.get("exp")
        if not sig or not exp:
            return False, "unsigned"
        expected = self._mac(path, query.get("from", ""), query.get("to", ""), exp, query.get("h"))
        if not hmac.compare_digest(expected.encode(), sig.encode()):
            return False, "tampered"
        # Checked after the signature, so a forged expiry reads as tampering, not as expiry.
        if not exp.isdigit() or int(exp) < self._now():
            return False, "expired"
        return True, "ok"


def text_digest(text: str) -> str:
    """A short fingerprint of cited words (72 bits of SHA-256, URL-safe): whether a range
    still holds them."""
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()[:9]).decode()


def load_secret(data_dir: Path, configured: str | None) -> bytes:
    """The configured secret, else the data dir's, creating it on first use."""
    if configured:
        return configured.encode()
    path = data_dir / SECRET_FILE
    if not path.exists():
        _create_secret(path)
    key = path.read_bytes()
    if len(key) < 16:
        raise ConfigError(f"{path} is too short to be a link secret; delete it to make a new one")
    return key


def _create_secret(path: Path) -> None:
    """Write a fresh key atomically: two replicas starting together on one data dir agree on one key."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(_SECRET_BYTES))
        with contextlib.suppress(FileExistsError):  # another process won the race: its key is the key
            os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
