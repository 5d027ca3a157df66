"""The eval's vector cache: each text embedded once, remembered by model and text hash."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from retrieval.evaluation.vectors import CachingEmbedder
from testkit.fakes import CountingEmbedder, HashEmbedder, RenamedEmbedder


def test_a_second_run_embeds_only_the_texts_it_has_not_seen(tmp_path: Path) -> None:
    first = CachingEmbedder(counting := CountingEmbedder(HashEmbedder()), tmp_path)
    v = first.embed(["alpha", "beta", "alpha"])
    assert counting.calls == 2 and first.hits == 1
    first.save()
    again = CachingEmbedder(recount := CountingEmbedder(HashEmbedder()), tmp_path)
    w = again.embed(["beta", "alpha", "gamma"])
    assert recount.calls == 1 and again.hits == 2  # only "gamma"
    np.testing.assert_array_equal(w[1], v[0])
    np.testing.assert_allclose(w, HashEmbedder().embed(["beta", "alpha", "gamma"]))


def test_a_text_whose_digest_ends_in_a_zero_byte_is_found_again(tmp_path: Path) -> None:
    text = next(t for i in range(100_000) if hashlib.sha1((t := f"text {i}").encode()).digest()[-1] == 0)
    first = CachingEmbedder(HashEmbedder(), tmp_path)
    first.embed([text])
    first.save()
    again = CachingEmbedder(counting := CountingEmbedder(HashEmbedder()), tmp_path)
    again.embed([text])
    assert counting.calls == 0


def test_it_keeps_only_the_last_runs_texts_and_one_file_per_model(tmp_path: Path) -> None:
    run = CachingEmbedder(HashEmbedder(), tmp_path)
    run.embed(["old"])
    run.save()
    run = CachingEmbedder(HashEmbedder(), tmp_path)
    run.embed(["new"])
    run.save()
    third = CachingEmbedder(counting := CountingEmbedder(HashEmbedder()), tmp_path)
    third.embed(["old"])
    assert counting.calls == 1  # "old" was not in the last run: dropped, so the file stays small
    other = CachingEmbedder(recount := CountingEmbedder(RenamedEmbedder(HashEmbedder())), tmp_path)
    other.embed(["new"])
    assert recount.calls == 1 and other.path != third.path  # another model never reads these vectors


def test_an_unreadable_cache_is_ignored_and_an_unwritable_one_only_costs_speed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = CachingEmbedder(HashEmbedder(), tmp_path)
    cache.path.write_bytes(b"not a numpy file")
    broken = CachingEmbedder(counting := CountingEmbedder(HashEmbedder()), tmp_path)
    broken.embed(["alpha"])
    assert counting.calls == 1
    (tmp_path / "a-file").write_text("x")
    stuck = CachingEmbedder(HashEmbedder(), tmp_path / "a-file" / "cache")  # cannot be created, even by root
    stuck.embed(["alpha"])
    stuck.save()
    assert "embeds them again" in caplog.text
