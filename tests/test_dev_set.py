"""The dev-set tests never skip in CI: a missing dev set fails them there, and skips them (saying why) locally."""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.conftest as conftest


def test_a_missing_dev_set_fails_in_ci_and_skips_locally(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest, "DEV", tmp_path / "none")
    monkeypatch.setattr(conftest, "DEV_DOCS", tmp_path / "none" / "docs")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run the dev-set tests"):
        conftest.require_dev_set()
    monkeypatch.setenv("CI", "")
    with pytest.raises(pytest.skip.Exception, match=f"dev set not found at {tmp_path / 'none'}"):
        conftest.require_dev_set()
    (tmp_path / "none" / "docs").mkdir(parents=True)
    monkeypatch.setenv("CI", "true")
    conftest.require_dev_set()  # present: nothing to say
