"""Confirmed (message, passage) pairs: a teammate said this passage answers this message.

A pair is kept with the channel scope it was confirmed under (the folders that channel may
search; every document when unscoped), the message's vector, the passage's path, exact
range and words, who confirmed it and when. A later message in the same scope that reads
like a confirmed one gets the confirmed passage first, as a confident answer; a message in
another scope never sees it.

Matching is question to question, the thing MiniLM was trained for (duplicate questions),
and far stronger than question to passage for a chatty message: the messages match when
their cosine reaches ``alone``, or ``with_passage`` while the confirmed passage is also among the
message's own first ``within`` search hits (two signals agree). When search is sure on its
own (the calibrated gate would answer), a pair takes over only from ``over_sure``, whichever
passages search found: two needs on one topic read alike, and with one cosine of 0.46 for
all, 10 of dev's 32 direct questions and 6 of guides' would be answered from the passage a
teammate confirmed for another need; two needs are often answered in one passage, too, so
search finding the confirmed passage does not make its confirmed sentence the answer
(danish-dev's "who may see the data Microsoft keeps for five years" was answered with the
sentence confirmed for "from which year does it keep them"). ``python -m bench.matching``
chooses the four on the development corpora, on a grid of 0.005 steps and 1-4 hits: the
most chatty messages matched to their own direct twin's pair, less those matched to another
pair, the direct questions taken over (each loses its own answer: replay measured it) and
the unanswerable messages matched (each would be answered wrongly), while at most 3 of 30
unanswerable chatty messages match anything and at most 3 direct questions are taken over,
per embedding model, whose cosines have their own scale (multilingual-e5's lie between 0.8
and 0.95 for any two questions on a topic). For MiniLM it chose 0.47 alone and 0.46 with the
passage among the first 3 hits, never over a sure search: on dev 12 of 32 chatty messages
matched, none wrongly, no unanswerable one, no direct question taken over; on guides 12, 2,
2 and none, and 3 unanswerable direct questions (before the sure rule covered the second
signal: 0.46 for both, 13 and 13, and 4 on guides). For multilingual-e5, on danish-dev, 0.925
alone and over a sure search, 0.88 with the passage among the first 4 hits: 18 of 32, 2
wrongly, 2 unanswerable, 2 taken over (before: 0.95 and 0.88 within 3, never over a sure
search: 14, 1, 2 and 3; at MiniLM's 0.46 every one of the 30 unanswerable messages matched).
``docs/measurements.md`` keeps the earlier choices.

A pair keeps the embedding model its vector came from; a message is matched only against
pairs of the model that embedded it, and :meth:`LearnedPairs.refresh` embeds the others
again with the model in use (a drive that changed languages changed its model).

Pairs retire themselves: :meth:`LearnedPairs.retire` (after each sync) drops a pair whose
words no longer stand in its document, and follows them where an edit moved them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np

from retrieval.errors import StoreUnreachable
from retrieval.index import Scalar, SharedRecords, Snapshot
from retrieval.types import Chunk

log = logging.getLogger("footnote.learn")
T = TypeVar("T")

EVERYWHERE = "*"  # the scope of a channel that may search every document


def scope_key(folders: Sequence[str] | None) -> str:
    """The scope a pair is kept under: the sorted folders, or ``*`` for every document."""
    if folders is None:
        return EVERYWHERE
    names = sorted({f.strip("/") for f in folders})
    return EVERYWHERE if "" in names else "|".join(names)


@dataclass(frozen=True)
class MatchConfig:
    alone: float  # cosine of two messages that match whatever search says, when search is unsure
    with_passage: float  # ... that match when the confirmed passage is also among the first hits (= alone: off)
    over_sure: float  # ... that match when search is sure on its own (> 1: never)
    within: int = 1  # how many of the message's first hits count for ``with_passage``

    @classmethod
    def measured(
        cls, model: str, alone: float | None = None, with_passage: float | None = None, within: int | None = None
    ) -> MatchConfig:
        """The thresholds ``python -m bench.matching`` chose for the embedding model ``model``
        (MiniLM's for a model it has not measured), each overridden when given."""
        base = MEASURED.get(model, MEASURED["minilm"])
        return replace(
            base,
            alone=base.alone if alone is None else alone,
            with_passage=base.with_passage if with_passage is None else with_passage,
            within=base.within if within is None else within,
        )

    @property
    def lowest(self) -> float:
        return min(self.alone, self.with_passage, self.over_sure)

    def needs(self, rank: int | None, sure: bool) -> float:
        """The cosine a pair must reach: ``rank`` is its passage's place among the message's
        hits (0: the best; None: not among them), ``sure`` whether search would answer alone."""
        if sure:  # search answers on its own: a pair must read like the message closely
            return self.over_sure
        if rank is not None and rank < self.within:
            return self.with_passage
        return self.alone

    def first(self, near: Iterable[tuple[float, int | None, T]], sure: bool) -> T | None:
        """What the first of ``near`` that matches stands for. ``near`` holds, the closest pair
        first, (cosine, its passage's rank among the message's hits as in :meth:`needs`, what
        it stands for); nothing past a cosine below every threshold is read."""
        for cos, rank, item in near:
            if cos < self.lowest:
                return None
            if cos >= self.needs(rank, sure):
                return item
        return None


def ranks(hits: Sequence[Chunk]) -> dict[str, int]:
    """Each chunk's first place among a message's ``hits`` (0: the best)."""
    return {c.id: i for i, c in reversed(list(enumerate(hits)))}


NEVER = 2.0  # above any cosine

# Chosen by ``python -m bench.matching`` on the development corpora each model serves.
MEASURED = {
    "minilm": MatchConfig(0.47, 0.46, NEVER, 3),
    "multilingual-e5": MatchConfig(0.925, 0.88, 0.925, 4),
}


@dataclass(frozen=True)
class Pair:
    id: str
    message: str
    vector: np.ndarray
    scope: str
    path: str
    start: int
    end: int
    quote: str
    user: str
    at: float
    via: str  # "pointer" (This answers it), "answer" (👍), "cli" (footnote confirm), "replay" (footnote eval)
    model: str = "minilm"  # the embedding model of ``vector`` (a pair kept before models were named: MiniLM)

    def fields(self) -> dict[str, Scalar]:
        vec = base64.b64encode(np.asarray(self.vector, dtype=np.float32).tobytes()).decode()
        return {
            "message": self.message,
            "vector": vec,
            "scope": self.scope,
            "path": self.path,
            "start": self.start,
            "end": self.end,
            "quote": self.quote,
            "user": self.user,
            "at": self.at,
            "via": self.via,
            "model": self.model,
        }

    @classmethod
    def from_fields(cls, pid: str, f: dict[str, Scalar]) -> Pair:
        vec = np.frombuffer(base64.b64decode(str(f["vector"])), dtype=np.float32)
        return cls(
            pid,
            str(f["message"]),
            vec,
            str(f["scope"]),
            str(f["path"]),
            int(f["start"]),
            int(f["end"]),
            str(f["quote"]),
            str(f.get("user", "")),
            float(f.get("at", 0.0)),
            str(f.get("via", "")),
            str(f.get("model", "minilm")),
        )

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {"id": self.id}
        out.update((k, v) for k, v in self.fields().items() if k != "vector")
        return out


@dataclass(frozen=True)
class Match:
    """A confirmed pair a message reads like, and the chunk holding its passage now."""

    pair: Pair
    chunk: int  # index into the snapshot's chunks
    cosine: float


def pair_id(scope: str, message: str, path: str, start: int, end: int) -> str:
    """The same message confirmed for the same passage in the same scope is one pair."""
    key = json.dumps([scope, " ".join(message.lower().split()), path, start, end])
    return hashlib.sha1(key.encode()).hexdigest()[:16]


def holder(snapshot: Snapshot, path: str, start: int, end: int) -> int | None:
    """The chunk whose content holds the range ``[start, end)`` of ``path``, if any."""
    for i, c in enumerate(snapshot.chunks):
        if c.path == path and c.start <= start and end <= c.end:
            return i
    return None


def _still_there(c: Chunk, p: Pair) -> bool:
    return c.content[p.start - c.start : p.end - c.start] == p.quote


class LearnedPairs:
    """The confirmed pairs of one index, in records every replica shares (or a data-dir file)."""

    def __init__(self, records: SharedRecords, cfg: MatchConfig | None = None, model: str = "minilm") -> None:
        self.records = records
        self.model = model  # the embedding model that embeds the messages now
        self.cfg = cfg or MatchConfig.measured(model)
        self._cache: dict[str, Pair] = {}  # parsed once: a vector is decoded per pair, not per question

    # -- writing ---------------------------------------------------------------------------

    def confirm(
        self,
        message: str,
        vector: np.ndarray,
        folders: Sequence[str] | None,
        path: str,
        start: int,
        end: int,
        quote: str,
        user: str,
        via: str,
    ) -> Pair:
        """Keep (or renew) the pair; confirming it again changes only who and when."""
        scope = scope_key(folders)
        pid = pair_id(scope, message, path, start, end)
        v = np.asarray(vector, dtype=np.float32)
        pair = Pair(
            pid,
            message,
            v / (np.linalg.norm(v) or 1.0),
            scope,
            path,
            start,
            end,
            quote,
            user,
            time.time(),
            via,
            self.model,
        )
        self._put(pair)
        return pair

    def _put(self, pair: Pair) -> None:
        self.records.put(pair.id, pair.fields())
        self._cache[pair.id] = pair

    def forget(self, pid: str) -> bool:
        """Remove one pair; False when there was none with that id."""
        known = self.records.get(pid) is not None
        self.records.delete(pid)
        self._cache.pop(pid, None)
        return known

    # -- reading ---------------------------------------------------------------------------

    def all(self) -> list[Pair]:
        """Every pair, newest first (read from the records: another replica may have added or
        removed some). While a Chroma server does not answer, the pairs as last read: what the
        team taught keeps answering through the outage, as the index in memory does."""
        try:
            stored = self.records.all()
        except StoreUnreachable as exc:
            log.warning("learned pairs as last read: %s", exc)
            return sorted(self._cache.values(), key=lambda p: -p.at)
        read: dict[str, Pair] = {}
        for pid, fields in stored.items():
            pair = self._cache.get(pid)
            if pair is None or pair.at != float(fields.get("at", 0.0)):
                try:
                    pair = Pair.from_fields(pid, fields)
                except (KeyError, ValueError, TypeError):
                    log.warning("skipping unreadable learned pair %s", pid)
                    continue
            read[pid] = pair
        self._cache = read
        return sorted(read.values(), key=lambda p: -p.at)

    def match(
        self,
        vector: np.ndarray,
        folders: Sequence[str] | None,
        snapshot: Snapshot,
        hits: Sequence[Chunk],
        sure: bool = False,
    ) -> Match | None:
        """The confirmed pair in this scope the message reads most like, if it matches at all.
        ``hits``: the message's own search hits, best first; a pair whose passage is among the
        first ``within`` of them needs only ``with_passage`` (two signals agree). ``sure``:
        search would answer on its own; then a pair must read like the message more closely
        (``over_sure``), whichever passages search found: two needs on one topic read alike,
        often in one passage, and a confident answer is not to be taken over by another need's
        confirmed sentence."""
        scope = scope_key(folders)
        mine = [p for p in self.all() if p.scope == scope and p.model == self.model and len(p.vector) == len(vector)]
        if not mine:
            return None
        cos = np.stack([p.vector for p in mine]) @ np.asarray(vector, dtype=np.float32)
        rank = ranks(hits)

        def near() -> Iterator[tuple[float, int | None, Match]]:
            for j in np.argsort(-cos):
                p, c = mine[int(j)], float(cos[int(j)])
                if c < self.cfg.lowest:
                    return  # before holder's scan of the chunks: no farther pair can match
                where = holder(snapshot, p.path, p.start, p.end)
                if where is None or not _still_there(snapshot.chunks[where], p):
                    continue  # not in this index (now): the next sync retires it
                yield c, rank.get(snapshot.chunks[where].id), Match(p, where, c)

        return self.cfg.first(near(), sure)

    # -- keeping true to the documents -------------------------------------------------------

    def refresh(self, embed: Callable[[list[str]], np.ndarray]) -> int:
        """Embed again, with the model in use (``embed``: its question embedding), every pair
        another model embedded; how many. Who confirmed it and when stay as they were."""
        stale = [p for p in self.all() if p.model != self.model]
        if not stale:
            return 0
        vectors = embed([p.message for p in stale])
        for p, v in zip(stale, vectors, strict=True):
            v = np.asarray(v, dtype=np.float32)
            self._put(replace(p, vector=v / (np.linalg.norm(v) or 1.0), model=self.model))
        log.info("embedded %d learned pairs again with %s", len(stale), self.model)
        return len(stale)

    def retire(self, snapshot: Snapshot) -> int:
        """After a sync: drop each pair whose words are no longer in its document, and move
        those an edit moved (to their first place in the document now). How many were dropped."""
        by_path: dict[str, list[Chunk]] = {}
        for c in snapshot.chunks:
            by_path.setdefault(c.path, []).append(c)
        dropped = 0
        for p in self.all():
            chunks = by_path.get(p.path, [])
            if any(c.start <= p.start and p.end <= c.end and _still_there(c, p) for c in chunks):
                continue
            moved = next((c for c in chunks if p.quote in c.content), None)
            if moved is not None:
                start = moved.start + moved.content.index(p.quote)
                end = start + len(p.quote)
                self.forget(p.id)
                self._put(replace(p, id=pair_id(p.scope, p.message, p.path, start, end), start=start, end=end))
                continue
            log.info("retiring learned pair %s: its passage is no longer in %s", p.id, p.path)
            self.forget(p.id)
            dropped += 1
        return dropped
