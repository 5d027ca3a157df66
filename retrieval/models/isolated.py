"""Running a measurement that may take the process down in a child process of its own.

llama.cpp picks its matrix kernels by the CPU it finds, and on some machines a form of
the weights faults inside them: on a 2-core Intel Xeon (Sapphire Rapids, AMX, virtualised)
the shipped Q5_0 file and its Q8_0 conversion ended the process with SIGSEGV on the first
probe prompt, while F16 and BF16 answered (on another such machine, with llama-cpp-python
0.3.36, every form did, in llama.cpp's AMX kernels: :mod:`retrieval.models.weights` then
times each form again with the plain ones). A segfault cannot be caught, so each trial runs
in a child: a crash is then a result ("that form is not usable here"), the process that
serves never loads a form that was not seen to answer, and the memory a conversion or a
trial takes is returned when its child ends.

The child is ``python -m retrieval.models.child``, not a multiprocessing spawn: spawn
imports the parent's main script again in the child, and a script that loads the model
without an ``if __name__ == "__main__"`` guard would then load it again there, forever.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from retrieval.errors import ModelError

T = TypeVar("T")


class Crashed(ModelError):
    """The child ended without a result: killed by a signal, exited, or ran out of time."""


def in_child(fn: Callable[..., T], *args: Any, timeout_s: float) -> T:
    """``fn(*args)`` run in a child Python process (``fn`` and ``args`` must pickle).

    A :class:`~retrieval.errors.ModelError` raised there is raised here with its message;
    a child that dies or gives no result within ``timeout_s`` raises :class:`Crashed`."""
    with tempfile.TemporaryDirectory(prefix="footnote-trial-") as tmp:
        job, result = Path(tmp) / "job.pickle", Path(tmp) / "result.pickle"
        job.write_bytes(pickle.dumps((fn, args)))
        # The child finds what this process imports (a checkout, tests' helpers) where it does.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        cmd = [sys.executable, "-m", "retrieval.models.child", str(job), str(result)]
        try:
            done = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise Crashed(f"no result within {timeout_s:.0f} s") from None
        if not result.is_file():
            raise Crashed(f"the process crashed ({_ending(done.returncode)})")
        ok, value = pickle.loads(result.read_bytes())
    if not ok:
        raise ModelError(value)
    out: T = value
    return out


def _ending(code: int) -> str:
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


def run_job(job: Path, result: Path) -> int:
    """The child's side (``retrieval.models.child``): run the pickled call, write its outcome."""
    fn, args = pickle.loads(job.read_bytes())
    try:
        outcome: tuple[bool, Any] = (True, fn(*args))
    except Exception as exc:  # the child's boundary: any failure is the trial's result
        outcome = (False, str(exc) if isinstance(exc, ModelError) else f"{type(exc).__name__}: {exc}")
    part = result.with_name(result.name + ".part")
    part.write_bytes(pickle.dumps(outcome))
    part.replace(result)  # whole or not at all: a crash while writing is a crash
    return 0
