"""scripts/system-deps.sh, which `make test` runs first: installs the system programs the tests drive.

Run against a PATH of stubs, so nothing is installed: what it does as root, as a
user with sudo, as a user without, and when everything is already there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "system-deps.sh"
PACKAGES = "chromium chromium-driver tesseract-ocr tesseract-ocr-eng"


def _stub(bin_dir: Path, name: str, body: str = "") -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def _run(tmp_path: Path, *, uid: int, present: tuple[str, ...] = (), sudo: bool = False, apt: bool = True):  # type: ignore[no-untyped-def]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "calls.log"
    _stub(bin_dir, "id", f"echo {uid}")
    if apt:
        _stub(bin_dir, "apt-get", f'echo "apt-get $*" >> {log}')
    if sudo:
        _stub(bin_dir, "sudo", f'echo "sudo $1" >> {log}; "$@"')
    for name in present:
        _stub(bin_dir, name)
    if not (bin_dir / "env").exists():
        (bin_dir / "env").symlink_to(shutil.which("env") or "/usr/bin/env")
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path)}
    res = subprocess.run(["/bin/sh", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30, check=False)
    return res, (log.read_text().splitlines() if log.exists() else [])


def test_nothing_happens_when_every_program_is_there(tmp_path: Path) -> None:
    res, calls = _run(tmp_path, uid=1000, present=("chromium", "chromedriver", "tesseract"))
    assert res.returncode == 0 and calls == []


def test_root_installs_only_what_is_missing(tmp_path: Path) -> None:
    res, calls = _run(tmp_path, uid=0, present=("chromium", "chromedriver"))
    assert res.returncode == 0, res.stderr
    assert calls == [
        "apt-get update -qq",
        "apt-get install -y -qq --no-install-recommends tesseract-ocr tesseract-ocr-eng",
    ]


def test_a_user_with_sudo_installs_through_it(tmp_path: Path) -> None:
    res, calls = _run(tmp_path, uid=1000, sudo=True)
    assert res.returncode == 0, res.stderr
    assert calls[0] == "sudo apt-get" and calls[-1] == f"apt-get install -y -qq --no-install-recommends {PACKAGES}"


@pytest.mark.parametrize("apt", [True, False])
def test_without_root_or_sudo_it_stops_naming_the_packages(tmp_path: Path, apt: bool) -> None:
    res, calls = _run(tmp_path, uid=1000, apt=apt)
    assert res.returncode == 1 and calls == []
    assert f"not installed: {PACKAGES}" in res.stderr
    assert ("apt-get install " + PACKAGES in res.stderr) if apt else ("package manager" in res.stderr)


def test_make_test_and_ci_use_it() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "test: install system-deps" in makefile and "scripts/system-deps.sh" in makefile
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci and "apt-get" not in ci  # CI runs exactly the README's command
    assert "make test" in (ROOT / "README.md").read_text()
    assert os.access(SCRIPT, os.X_OK)
