"""Peak resident memory of this process and every process it started, sampled.

``ru_maxrss`` tells one process's peak; the weights measurement runs in child processes,
and a box is killed for what the whole tree holds at once. So a thread sums ``VmRSS``
over this process and its descendants (read from ``/proc``) every ``interval_s`` and keeps
the largest sum. Linux only; elsewhere it reports this process's ``ru_maxrss``.
"""

from __future__ import annotations

import os
import resource
import threading
from pathlib import Path
from types import TracebackType

from retrieval.models.cpu import rss_mb


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(c) for c in (task / "children").read_text().split()]
    except OSError:  # the process ended between two reads
        pass
    return out


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (``ru_maxrss``), in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def tree_rss_mb(root: int | None = None) -> float:
    """What this process and its descendants hold in memory now, in MB."""
    todo, total = [root or os.getpid()], 0.0
    while todo:
        pid = todo.pop()
        total += rss_mb(pid)
        todo += _children(pid)
    return total


class TreePeak:
    """``with TreePeak() as peak: ...`` then ``peak.mb``: the largest tree RSS seen inside."""

    def __init__(self, interval_s: float = 0.05) -> None:
        self.interval_s = interval_s
        self.mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="tree-rss", daemon=True)

    def _sample(self) -> None:
        while True:
            self.mb = max(self.mb, tree_rss_mb())
            if self._stop.wait(self.interval_s):
                return

    def __enter__(self) -> TreePeak:
        if Path("/proc/self/status").is_file():
            self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join()
            self.mb = max(self.mb, tree_rss_mb())
        else:
            self.mb = peak_rss_mb()
