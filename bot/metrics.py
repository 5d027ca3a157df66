"""Prometheus metrics for ``GET /metrics``: questions, refusals, errors, questions by
outcome (answered, refused by the gate or the model, every claim removed, error), answer
latency, sync durations, and documents by state (read from the index at scrape time; while
a Chroma server does not answer, ``footnote_index_reachable`` is 0 and they are left out)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from retrieval.answer import Answer, Outcome
from retrieval.errors import StoreUnreachable
from retrieval.ingest import SyncReport

CONTENT_TYPE = CONTENT_TYPE_LATEST


class _Documents(Collector):
    def __init__(self, totals: Callable[[], dict[str, int]]) -> None:
        self._totals = totals

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            t: dict[str, int] | None = self._totals()
        except StoreUnreachable:  # no counts to give; the rest of the page still is
            t = None
        yield GaugeMetricFamily(
            "footnote_index_reachable", "Whether the index's store answers", value=int(t is not None)
        )
        if t is None:
            return
        docs = GaugeMetricFamily("footnote_documents", "Documents in the index by state", labels=["state"])
        for state in ("indexed", "failed", "stale"):
            docs.add_metric([state], t.get(state, 0))
        yield docs
        yield GaugeMetricFamily("footnote_chunks", "Chunks stored in the index", value=t.get("chunks", 0))


class Metrics:
    """One registry per process (not the global one, so tests can build several)."""

    def __init__(self, totals: Callable[[], dict[str, int]]) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.questions = Counter("footnote_questions", "Questions received", ["surface"], registry=r)
        self.refusals = Counter("footnote_refusals", "Questions answered with a refusal", registry=r)
        self.errors = Counter("footnote_errors", "Questions that ended in an error", registry=r)
        self.outcomes = Counter("footnote_outcomes", "Questions by how they ended", ["outcome"], registry=r)
        for kind in Outcome:  # every kind is on the page from the start, at 0
            self.outcomes.labels(kind.value)
        self.answer_seconds = Histogram(
            "footnote_answer_seconds",
            "Time from question to final answer",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 8, 13, 20, 30, 60),
            registry=r,
        )
        self.sync_seconds = Histogram(
            "footnote_sync_seconds",
            "Duration of index syncs",
            buckets=(0.1, 0.5, 1, 3, 10, 30, 60, 300, 900),
            registry=r,
        )
        self.sync_failures = Counter("footnote_sync_failures", "Syncs that raised an error", registry=r)
        r.register(_Documents(totals))

    def answered(self, surface: str, answer: Answer | None, seconds: float) -> None:
        self.questions.labels(surface).inc()
        self.outcomes.labels((answer.outcome if answer is not None else Outcome.ERROR).value).inc()
        if answer is None or answer.outcome.failed:  # a model that failed, even with the passages shown instead
            self.errors.inc()
        if answer is None:
            return
        if answer.refused:
            self.refusals.inc()
        self.answer_seconds.observe(seconds)

    def synced(self, report: SyncReport | None, seconds: float) -> None:
        if report is None:
            self.sync_failures.inc()
        else:
            self.sync_seconds.observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
