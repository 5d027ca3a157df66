"""A temporary data dir borrowing the live one's model files (bench, eval)."""

from __future__ import annotations

from pathlib import Path

from retrieval.models.files import seed_models


def test_the_bench_reuses_the_live_runtime_choice_and_models_without_writing_them(tmp_path: Path) -> None:
    live = tmp_path / "live"
    (live / "onnx" / "abc").mkdir(parents=True)
    (live / "embed-runtime.json").write_text('{"chosen": "onnx"}')
    (live / "e5-runtime.json").write_text('{"trials": []}')
    (live / "onnx" / "abc" / "model.onnx").write_bytes(b"onnx")
    (live / "model.gguf").write_bytes(b"GGUF")
    (live / "model.f16-1a2b3c4d.gguf").write_bytes(b"GGUF f16")
    (live / "model.weights.json").write_text('{"chosen": "f16"}')
    (live / "model.f16-1a2b3c4d.lookup.json").write_text('{"on": true}')
    target = tmp_path / "bench" / "models"
    assert seed_models(live, target)
    assert (target / "embed-runtime.json").read_text() == '{"chosen": "onnx"}'
    assert (target / "e5-runtime.json").read_text() == '{"trials": []}'
    assert not (target / "onnx").is_symlink() and (target / "onnx" / "abc" / "model.onnx").read_bytes() == b"onnx"
    assert (target / "model.gguf").is_symlink() and (target / "model.gguf").read_bytes() == b"GGUF"
    assert (target / "model.f16-1a2b3c4d.gguf").is_symlink()
    assert (target / "model.weights.json").read_text() == '{"chosen": "f16"}'
    assert (target / "model.f16-1a2b3c4d.lookup.json").read_text() == '{"on": true}'
    (target / "onnx" / "abc" / "model.onnx").write_bytes(b"changed")  # the bench's copy, not the live export
    assert (live / "onnx" / "abc" / "model.onnx").read_bytes() == b"onnx"


def test_a_forced_embedding_runtime_still_lends_the_language_model(tmp_path: Path) -> None:
    live = tmp_path / "live"
    live.mkdir()
    (live / "model.gguf").write_bytes(b"GGUF")  # no embed-runtime.json: FOOTNOTE_EMBED_RUNTIME forced one
    assert seed_models(live, tmp_path / "bench")
    assert (tmp_path / "bench" / "model.gguf").is_symlink()


def test_without_a_live_choice_the_bench_measures_for_itself(tmp_path: Path) -> None:
    assert not seed_models(tmp_path / "nothing", tmp_path / "bench")
    assert not (tmp_path / "bench").exists()
