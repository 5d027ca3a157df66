"""numpy's BLAS runs on one thread in Footnote's processes, set when the builder starts them (its
spinning threads slowed the query embedding's ONNX Runtime threads by half on 2 cores); an
explicit setting wins."""

from __future__ import annotations

import os
import subprocess
import sys

CODE = (
    "import tempfile\n"
    "from bot.builder import Builder\n"
    "from config.settings import Settings\n"
    "Builder(Settings(data_dir=tempfile.mkdtemp()))\n"
    "from threadpoolctl import threadpool_info\n"
    "print(sorted({i['num_threads'] for i in threadpool_info() if i['internal_api'] == 'openblas'}))\n"
)


def _blas_threads(env: dict[str, str]) -> str:
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


def test_numpy_runs_on_one_blas_thread_unless_told_otherwise() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    assert _blas_threads(env) == "[1]"
    if (os.cpu_count() or 1) >= 2:  # OpenBLAS never runs more threads than there are cores
        assert _blas_threads({**env, "OPENBLAS_NUM_THREADS": "2"}) == "[2]"
