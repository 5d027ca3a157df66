"""Signed citation links: what the signature binds, expiry, and where the key comes from."""

from __future__ import annotations

import stat
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from pydantic import ValidationError

from config.settings import load_settings
from retrieval.answer.citations import Linker
from retrieval.answer.links import SECRET_FILE, LinkSigner, load_secret
from retrieval.errors import ConfigError

KEY = b"k" * 32
DAY = 86400.0


class Clock:
    """A clock the test moves by hand, so expiry is tested without waiting."""

    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _q(query: str) -> dict[str, str]:
    return dict(parse_qsl(query))


def test_a_signed_link_verifies_and_any_edit_breaks_it() -> None:
    signer = LinkSigner(KEY, 30 * DAY, Clock())
    q = _q(signer.sign("hr/time-off.txt", 10, 200))
    assert set(q) == {"from", "to", "exp", "sig"} and (q["from"], q["to"]) == ("10", "200")
    assert signer.verify("hr/time-off.txt", q) == (True, "ok")
    # The path is bound: the same query does not open another document.
    assert signer.verify("engineering/on-call.md", q) == (False, "tampered")
    assert signer.verify("hr/time-off.txt ", q) == (False, "tampered")
    # The range is bound: widening it to the whole document is refused.
    assert signer.verify("hr/time-off.txt", {**q, "from": "0"}) == (False, "tampered")
    assert signer.verify("hr/time-off.txt", {**q, "to": "99999"}) == (False, "tampered")
    assert signer.verify("hr/time-off.txt", {k: v for k, v in q.items() if k not in ("from", "to")}) == (
        False,
        "tampered",
    )
    # The expiry is bound: pushing it forward is tampering, not a longer life.
    assert signer.verify("hr/time-off.txt", {**q, "exp": str(int(q["exp"]) + 10 * 365 * 86400)}) == (
        False,
        "tampered",
    )
    assert signer.verify("hr/time-off.txt", {**q, "sig": q["sig"][:-1] + ("A" if q["sig"][-1] != "A" else "B")}) == (
        False,
        "tampered",
    )


def test_a_link_without_a_range_binds_the_absence_of_one() -> None:
    signer = LinkSigner(KEY, DAY, Clock())
    q = _q(signer.sign("a.md"))
    assert set(q) == {"exp", "sig"} and signer.verify("a.md", q) == (True, "ok")
    assert signer.verify("a.md", {**q, "from": "0", "to": "5"}) == (False, "tampered")


def test_unsigned_links_are_refused() -> None:
    signer = LinkSigner(KEY, DAY, Clock())
    assert signer.verify("a.md", {}) == (False, "unsigned")
    assert signer.verify("a.md", {"from": "0", "to": "5"}) == (False, "unsigned")
    q = _q(signer.sign("a.md", 0, 5))
    assert signer.verify("a.md", {k: v for k, v in q.items() if k != "sig"}) == (False, "unsigned")
    assert signer.verify("a.md", {k: v for k, v in q.items() if k != "exp"}) == (False, "unsigned")


def test_links_expire_after_their_lifetime() -> None:
    clock = Clock()
    signer = LinkSigner(KEY, 30 * DAY, clock)
    q = _q(signer.sign("a.md", 0, 5))
    clock.t += 30 * DAY - 1
    assert signer.verify("a.md", q) == (True, "ok")
    clock.t += 2
    assert signer.verify("a.md", q) == (False, "expired")


def test_a_link_signed_with_another_secret_is_refused() -> None:
    clock = Clock()
    q = _q(LinkSigner(b"another-footnote-key", DAY, clock).sign("a.md", 0, 5))
    assert LinkSigner(KEY, DAY, clock).verify("a.md", q) == (False, "tampered")
    with pytest.raises(ConfigError):
        LinkSigner(b"short", DAY, clock)


def test_the_secret_is_made_once_in_the_data_dir_private_to_its_owner(tmp_path: Path) -> None:
    data = tmp_path / "data"
    key = load_secret(data, None)
    path = data / SECRET_FILE
    assert len(key) == 32 and path.read_bytes() == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_secret(data, None) == key  # reused, so links survive a restart
    assert [p.name for p in data.iterdir()] == [SECRET_FILE]  # no temporary file left behind
    assert load_secret(tmp_path / "other", None) != key
    # A configured secret wins and writes nothing.
    assert load_secret(tmp_path / "configured", "s" * 16) == b"s" * 16
    assert not (tmp_path / "configured").exists()
    path.write_bytes(b"")
    with pytest.raises(ConfigError, match="too short"):
        load_secret(data, None)


def test_settings_default_to_thirty_days_and_reject_a_weak_secret(tmp_path: Path) -> None:
    s = load_settings(data_dir=tmp_path)
    assert s.link_ttl_days == 30 and s.link_secret is None
    with pytest.raises(ValidationError):
        load_settings(link_secret="short")
    with pytest.raises(ValidationError):
        load_settings(link_ttl_days=0)


def test_link_for_signs_only_viewer_links() -> None:
    signer = LinkSigner(KEY, DAY, Clock())
    url = Linker(None, None, "https://fn.example/", signer.sign).url("hr/tid off.md", "#char=3,9", (3, 9))
    parts = urlsplit(url)
    assert parts.path == "/view/hr/tid%20off.md" and parts.fragment == "char=3,9"
    assert signer.verify("hr/tid off.md", _q(parts.query)) == (True, "ok")
    drive = Linker("https://drive.example", None, "https://fn.example", signer.sign).url("hr/a.md", "#char=3,9", (3, 9))
    assert drive == "https://drive.example/hr/a.md#char=3,9"
