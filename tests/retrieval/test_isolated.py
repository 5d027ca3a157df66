"""Trials run in a child process: a result comes back, an error keeps its message, a
crash is a value, and a script without a main guard is never run again in the child."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval.errors import ModelError
from retrieval.models.isolated import Crashed, in_child
from testkit.fakes import CrashingLoad
from tests.conftest import ROOT


def test_the_result_comes_back_from_another_process() -> None:
    assert in_child(os.getpid, timeout_s=60) != os.getpid()


def test_a_model_error_there_keeps_its_message_and_a_crash_is_named() -> None:
    with pytest.raises(ModelError, match=r"FileNotFoundError: .*No such file"):
        in_child(Path.read_bytes, Path("/nonexistent/model.gguf"), timeout_s=60)  # FileNotFoundError, named
    with pytest.raises(Crashed, match="SIGSEGV"):
        in_child(CrashingLoad(frozenset({"as-shipped"})), Path("model.gguf"), timeout_s=60)


def test_a_script_without_a_main_guard_is_not_run_again_in_the_child(tmp_path: Path) -> None:
    script = tmp_path / "measure.py"
    script.write_text(
        "import os\nfrom retrieval.models.isolated import in_child\n"
        "print('child', in_child(os.getpid, timeout_s=60) != os.getpid())\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0 and done.stdout.splitlines() == ["child True"], done.stderr


def test_ctrl_c_ends_the_child_without_a_traceback(tmp_path: Path) -> None:
    """Ctrl-C reaches every process of the terminal's group: `footnote index` says "Aborted!",
    and its trial child used to add a hundred lines of KeyboardInterrupt traceback."""
    job = tmp_path / "job.pickle"
    job.write_bytes(pickle.dumps((signal.raise_signal, (signal.SIGINT,))))
    cmd = [sys.executable, "-m", "retrieval.models.child", str(job), str(tmp_path / "result.pickle")]

    # As from a terminal: a suite started in the background (`make test &`) ignores SIGINT,
    # and its children would inherit that.
    def terminal() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False, preexec_fn=terminal)
    assert done.returncode == 130 and done.stderr == "" and not (tmp_path / "result.pickle").exists()
