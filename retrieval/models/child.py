"""``python -m retrieval.models.child JOB RESULT``: the child process of
:func:`retrieval.models.isolated.in_child` (a module of its own, imported by nothing, so
running it does not import it twice)."""

from __future__ import annotations

import sys
from pathlib import Path

from retrieval.models.isolated import run_job

if __name__ == "__main__":
    try:
        sys.exit(run_job(Path(sys.argv[1]), Path(sys.argv[2])))
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the parent says so, in one line
        sys.exit(130)
