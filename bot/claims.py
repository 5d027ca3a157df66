"""Which Slack deliveries are handled here: each event id is answered once.

Slack retries a delivery it thinks failed, and with several replicas the retry may land
on another one. :class:`FirstDelivery` answers "is this the first time?": a bounded
local memory first, then (with a shared index) a claim every replica sees. An id is
remembered locally only once the shared claim has answered; when the claim store itself
fails, the event is answered rather than dropped (a rare double answer beats a silent
question). A retry that reaches a process started since is recognised by the question
journal instead, which journals each message once (:meth:`bot.journal.Journal.record`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from retrieval.errors import StoreUnreachable
from retrieval.index import SharedRecords

log = logging.getLogger("footnote.slack")

CLAIMS = "footnote_claims"  # the shared records every replica claims events in


class SharedClaims:
    """First-come claims on keys (Slack event ids) shared by every replica: only the
    replica whose claim is stored handles the event."""

    def __init__(self, records: SharedRecords, owner: str, keep_s: float = 86_400.0) -> None:
        self._r = records
        self.owner = owner
        self.keep_s = keep_s
        self._n = 0

    def claim(self, key: str) -> bool:
        now = time.time()
        mine = self._r.put_if_absent(key, {"owner": self.owner, "at": now})
        self._n += 1
        if self._n % 500 == 0:  # Slack retries within minutes; old claims only take space
            self._r.delete_older_than("at", now - self.keep_s)
        return mine


class FirstDelivery:
    """``first(key)`` is True exactly once per delivery id, in this process and (with a
    shared claim) across replicas."""

    def __init__(self, shared: Callable[[str], bool] | None = None, size: int = 5000) -> None:
        self._shared = shared
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._busy: set[str] = set()  # ids whose shared claim is being asked right now
        self._size = size
        self._lock = threading.Lock()

    def first(self, key: str) -> bool:
        with self._lock:
            if key in self._seen or key in self._busy:
                return False
            self._busy.add(key)
        try:
            mine = self._claim(key)
        finally:
            with self._lock:
                self._busy.discard(key)
                self._seen[key] = None  # answered here, or owned by another replica
                if len(self._seen) > self._size:
                    self._seen.popitem(last=False)
        return mine

    def _claim(self, key: str) -> bool:
        if self._shared is None:
            return True
        try:
            return self._shared(key)
        except StoreUnreachable as exc:
            log.warning("the shared claim on %s failed; answering it here: %s", key, exc)
            return True
        except Exception:
            log.warning("the shared claim on %s failed; answering it here", key, exc_info=True)
            return True
