"""Grouping questions by meaning: their vectors (the embedder's, as the search made them) in,
groups out, each with its most central question first.

The groups are leader clusters on cosine similarity. A question with many neighbours
(within ``threshold``) founds a group before one with few, and takes every ungrouped
question within ``threshold`` of it; then every question moves to the founder it is most
similar to. So every member is within ``threshold`` of its group's founder: a group never
drifts along a chain of questions each a little different from the last, as single-linkage
groups do. Similarities are computed a block of rows at a time (memory ``block × n``),
once for each pair of rows; ``python -m bench.gaps speed`` times 10,000 questions.
``THRESHOLD`` is chosen by ``python -m bench.gaps threshold`` (see there).
"""

from __future__ import annotations

import numpy as np

# Chosen by `python -m bench.gaps threshold`: the threshold with the best pair F1 on the dev and
# guides sets' 64 course/ticket question pairs (one fact asked in the document's words and as a
# ticket, sharing at most two content words), all-MiniLM-L6-v2. README: "What the docs don't answer".
THRESHOLD = 0.5


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 (a zero row stays zero), as float32."""
    x = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def group_by_meaning(
    vectors: np.ndarray, threshold: float = THRESHOLD, block: int = 512, max_pairs: int = 4_000_000
) -> list[np.ndarray]:
    """Groups of row indices, largest first; in each, the most central row first.

    "Most central" is the member with the highest summed cosine to the group's members.
    Ties keep the input order, so the same rows always give the same groups. The pairs
    within the threshold are found in one pass over half the similarity matrix and kept
    (sparse) when there are at most ``max_pairs``; with more (thousands of one question)
    the similarities are computed again where needed instead of kept.
    """
    x = unit_rows(vectors)
    n = len(x)
    if n == 0:
        return []
    closeness = x @ x.sum(axis=0)  # each row's summed cosine to all rows: the tie-break
    pairs = _close_pairs(x, threshold, block, max_pairs)
    group = _lead_sparse(n, pairs, closeness) if pairs is not None else _lead_dense(x, threshold, closeness, block)

    groups = []
    by_group = np.argsort(group, kind="stable")
    cuts = np.flatnonzero(np.diff(group[by_group])) + 1
    for members in np.split(by_group, cuts):
        central = x[members] @ x[members].sum(axis=0)
        groups.append(members[np.lexsort((members, -central))])
    groups.sort(key=lambda m: (-len(m), int(m[0])))
    return groups


Pairs = tuple[np.ndarray, np.ndarray, np.ndarray]  # rows, columns, cosines: both (i, j) and (j, i)


def _close_pairs(x: np.ndarray, threshold: float, block: int, max_pairs: int) -> Pairs | None:
    """Every pair of different rows within the threshold; None when there are more than ``max_pairs``."""
    n = len(x)
    rows, cols, sims = [], [], []
    found = 0
    for s in range(0, n, block):
        for t in range(s, n, block):
            sim = x[s : s + block] @ x[t : t + block].T
            if s == t:
                sim = np.triu(sim, k=1) + np.tril(np.full_like(sim, -2.0))  # each pair once, never a row with itself
            i, j = np.nonzero(sim >= threshold)
            found += len(i)
            if found > max_pairs:
                return None
            rows.append(i + s)
            cols.append(j + t)
            sims.append(sim[i, j])
    r, c, v = np.concatenate(rows), np.concatenate(cols), np.concatenate(sims)
    return np.concatenate([r, c]), np.concatenate([c, r]), np.concatenate([v, v])


def _order(neighbours: np.ndarray, closeness: np.ndarray) -> np.ndarray:
    """Founding order: most neighbours first, then the most central, then input order."""
    return np.lexsort((np.arange(len(closeness)), -closeness, -neighbours))


def _lead_sparse(n: int, pairs: Pairs, closeness: np.ndarray) -> np.ndarray:
    rows, cols, sims = pairs
    by_row = np.lexsort((cols, rows))
    rows, cols, sims = rows[by_row], cols[by_row], sims[by_row]
    starts = np.searchsorted(rows, np.arange(n + 1))
    group = np.full(n, -1, dtype=np.int64)
    founders: list[int] = []
    for i in _order(np.diff(starts), closeness):
        if group[i] >= 0:
            continue
        near = cols[starts[i] : starts[i + 1]]
        group[near[group[near] < 0]] = len(founders)
        group[i] = len(founders)
        founders.append(int(i))
    # Each row joins the founder it is most similar to (all founders within the threshold are its pairs).
    founder = np.zeros(n, dtype=bool)
    founder[founders] = True
    to_founder = founder[cols] & ~founder[rows]
    r, c, v = rows[to_founder], cols[to_founder], sims[to_founder]
    best = np.lexsort((group[c], -v, r))  # per row: the most similar founder first (the earlier founded on a tie)
    first = best[np.r_[True, r[best][1:] != r[best][:-1]]] if len(best) else best
    group[r[first]] = group[c[first]]
    return group


def _lead_dense(x: np.ndarray, threshold: float, closeness: np.ndarray, block: int) -> np.ndarray:
    """The same as :func:`_lead_sparse`, computing similarities block by block instead of keeping them."""
    n = len(x)
    neighbours = np.zeros(n, dtype=np.int64)
    for s in range(0, n, block):  # each pair once
        for t in range(s, n, block):
            close = x[s : s + block] @ x[t : t + block].T >= threshold
            if s == t:
                close = np.triu(close, k=1)  # each pair once, never a row with itself
            neighbours[s : s + block] += close.sum(axis=1)
            neighbours[t : t + block] += close.sum(axis=0)
    order = _order(neighbours, closeness)
    group = np.full(n, -1, dtype=np.int64)
    founders: list[int] = []
    for s in range(0, n, block):
        batch = order[s : s + block]
        batch = batch[group[batch] < 0]
        if not len(batch):
            continue
        sims = x[batch] @ x.T
        for row, i in zip(sims, batch, strict=True):
            if group[i] >= 0:
                continue
            take = (row >= threshold) & (group < 0)
            take[i] = True
            group[take] = len(founders)
            founders.append(int(i))
    ids = np.array(founders)
    centres = x[ids]
    for s in range(0, n, block):
        sims = x[s : s + block] @ centres.T
        group[s : s + block] = sims.argmax(axis=1)  # the earlier founded on a tie
    group[ids] = np.arange(len(ids))  # a founder stays in its own group
    return group
