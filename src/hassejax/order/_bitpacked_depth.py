"""The convergence depth ``L*`` on bit-packed rows, with ``R`` in the same pass (private).

:func:`depth_bitpacked`: the closure of :mod:`hassejax.order._bitpacked`, then a breadth-first
search from every node at once on bit-packed rows, level by level
(:mod:`hassejax.order._bitpacked_levels`); spec hasse.md §1.3. The public wrapper is
:func:`hassejax.order.convergence_depth` (``method="bitpacked"``).

The same search gives ``R^(L) = A^L``: after level ``L`` the bits of ``R`` not reached yet are those
farther than ``L``. :func:`power_bitpacked` stops it at ``L`` (``reachability(mask, L)`` on the
bit-packed route), :func:`depth_counts_bitpacked` counts the rows of every requested ``R^(L)`` on the
way to ``L*`` (``flow_summary``'s `layers` on the bit-packed route).
"""

from __future__ import annotations

from typing import no_type_check

import numpy as np

from ._bitpacked import _CHUNK_WORDS, _WORD, _closure_rows, _csr_from_pairs, _edges, _unpack, num_words
from ._bitpacked_levels import (
    _DEPTH_CHUNK_PAIRS,
    _dense_level,
    _frontier_words,
    _prune_children,
    _set_bits,
    _sparse_level,
)
from ._progress import NO_BAR, Bar

__all__ = [
    "depth_bitpacked",
    "depth_counts_bitpacked",
    "depth_bitpacked_bytes",
    "padded_words",
    "power_bitpacked",
    "power_bitpacked_bytes",
]


# A level runs sparse (from the frontier words, through the parents of their nodes) when it has
# at most this many (frontier word, parent) pairs per packed word of the whole matrix (a dense
# level scans every word a few times), or at most _DEPTH_SPARSE_MIN pairs.
_DEPTH_SPARSE_PER_WORD = 1 / 16
_DEPTH_SPARSE_MIN = 1 << 12


def padded_words(n: int) -> int:
    """Words of a packed row in :func:`depth_bitpacked`: ``num_words(n)`` rounded up so that
    every block size of :data:`~hassejax.order._bitpacked_levels._DEPTH_BLOCKS` up to 16 (or the next power of two) divides it."""
    w = num_words(n)
    step = min(16, 1 << max(0, (w - 1).bit_length()))
    return -(-w // step) * step


def depth_bitpacked_bytes(n: int, nnz: int) -> int:
    """Estimated peak host memory in bytes of :func:`depth_bitpacked` (`n` nodes, `nnz` edges),
    without the optional bool ``(n, n)`` closure it can return (``n * n`` bytes more)."""
    w, wp = num_words(n), padded_words(n)
    # the closure kernel (its packed rows, edge arrays, one gathered chunk; no bool output),
    # then four packed matrices (closure, missing bits, two frontiers), two more while pruning,
    # word flags, the reversed edge lists, and the index arrays (about 64 bytes a pair) and
    # gathered words of one chunk of pairs.
    closure = 2 * n * w * 8 + 64 * nnz + 8 * min(_CHUNK_WORDS, (nnz + n) * w)
    pairs = min(_DEPTH_CHUNK_PAIRS, (nnz + n) * wp)
    gathered = 8 * min(_CHUNK_WORDS, (nnz + n) * wp)
    return closure + 6 * n * wp * 8 + 3 * n * wp + 16 * nnz + 64 * pairs + gathered


def power_bitpacked_bytes(n: int, nnz: int) -> int:
    """Estimated peak host memory in bytes of :func:`power_bitpacked` (`n` nodes, `nnz` edges): the search's
    (:func:`depth_bitpacked_bytes`) and its bool ``(n, n)`` result, unpacked through a uint8 copy."""
    return depth_bitpacked_bytes(n, nnz) + 2 * n * n


def _depth_levels(
    indptr: np.ndarray,
    dst: np.ndarray,
    frontier: np.ndarray,
    missing: np.ndarray,
    bar: Bar = NO_BAR,
    stop: int | None = None,
    on_level=None,
) -> int:
    """Frontier propagation from every node at once, level by level; returns ``L*``.

    `frontier` holds ``F^1`` (the nodes at distance 1: the off-diagonal edges), `missing` the
    bits of ``R`` farther than 1; both packed ``(n, wp)``, both overwritten. Level
    ``L -> L + 1``: ``F^(L+1)_i = (OR over children c of F^L_c) & M^L_i``,
    ``M^(L+1)_i = M^L_i & ~F^(L+1)_i``. A level runs dense (:func:`_dense_level`, from the
    parents' side) or sparse (:func:`_sparse_level`, from the frontier words) by size. The
    first level without new bits ends it: ``L*`` is the last level with a non-empty frontier.
    `bar` counts the levels.

    After every level that added bits, ``R^(L) = R & ~missing`` (``L`` the new depth): `on_level`
    (when given) is called as ``on_level(L, missing)``, and the search returns ``L`` once it
    reaches `stop` (the ``L`` of :func:`power_bitpacked`). The returned value is ``L*`` only when
    it is below `stop`; in every case ``R & ~missing`` is then ``R^(stop)``.
    """
    n, wp = frontier.shape
    outdeg = np.diff(indptr)
    nxt = np.zeros_like(frontier)
    reverse = None
    written: list = []  # virtual rows (ids, block size) of `nxt` written this level
    old: list = [(None, None)]  # those of `frontier` (None: anywhere)
    depth = 1
    sparse_max = max(_DEPTH_SPARSE_MIN, int(n * wp * _DEPTH_SPARSE_PER_WORD))
    mean_indeg = float(indptr[-1]) / max(1, n)

    @no_type_check  # a closure made per call: not re-decorated by the test suite's type-check hook each time (see pyproject)
    def sparse_enough(fw: np.ndarray) -> bool:
        """Few enough (frontier word, parent) pairs for a sparse level (exact once the
        reversed edges exist, else from the mean in-degree)."""
        if reverse is None:
            return bool(fw.size * mean_indeg <= sparse_max)
        return int(reverse[2][fw // wp].sum()) <= sparse_max

    if stop is not None and stop <= 1:
        return depth
    # flat ids of the nonzero words of `frontier` when the next level runs sparse, else None
    fwords = None
    if indptr[-1] * mean_indeg <= sparse_max:
        fwords = np.flatnonzero(frontier.reshape(-1))
    while True:
        bar.begin()
        if fwords is not None:
            if reverse is None:
                tptr, tsrc = _csr_from_pairs(dst, np.repeat(np.arange(n, dtype=np.int64), outdeg), n)
                reverse = (tptr, tsrc, np.diff(tptr))
            fwords = _sparse_level(*reverse, frontier, missing, nxt, fwords)
            written.append((fwords, 1))
            grew = fwords.size > 0
            if not sparse_enough(fwords):
                fwords = None  # the frontier has grown: back to dense levels
        else:
            words = _dense_level(indptr, dst, outdeg, frontier, missing, nxt, written)
            grew = words > 0
            fwords = None
            if grew and words * mean_indeg <= 4 * sparse_max:
                fwords = _frontier_words(nxt, written)
                if not sparse_enough(fwords):
                    fwords = None
        bar.note(f"L* >= {depth + grew}")
        bar.update()
        if not grew:
            return depth
        depth += 1
        if on_level is not None:
            on_level(depth, missing)
        if stop is not None and depth >= stop:
            return depth
        # the new frontier becomes current; the old one is cleared where it may be nonzero
        for ids, bw in old:
            if ids is None:
                frontier[...] = 0
            else:
                frontier.reshape(-1, bw)[ids] = 0
        frontier, nxt = nxt, frontier
        old, written = written, []


def depth_bitpacked(
    adj: np.ndarray, *, return_closure: bool = True, bar: Bar = NO_BAR
) -> tuple[int, np.ndarray | None]:
    """Convergence depth ``L*`` and closure ``R`` of one bool ``(n, n)`` adjacency (diagonal set).

    ``L*`` is the smallest ``L`` with ``A^L = R``: the largest shortest-path length over the
    pairs (i, j), i ≠ j, with j reachable from i, or 1 if there are none (spec hasse.md §1.3).

    1. ``R``, packed, by :func:`closure_bitpacked`'s kernel (condensation, topological order);
    2. a breadth-first search from every node at once on the original graph (not on the
       condensation: distances inside a strongly connected class are not 1 in general), on
       bit-packed rows: ``F^L_i`` = the nodes at distance exactly ``L`` from i, and
       ``M^L_i = R_i & ~({i} | F^1_i | … | F^L_i)`` the nodes still to be reached. Exactly
       ``F^(L+1)_i = (OR over children c of F^L_c) & M^L_i``: a node at distance L + 1 from i
       is at distance L from some child, a node at distance L from a child is within L + 1 of
       i, and the nodes within L of i are not in ``M^L_i``. While some ``M^L`` is not empty,
       some pair is at distance exactly ``L + 1`` (a prefix of a shortest path), so the first
       level without new bits is ``L* + 1`` (``L* = 1`` when ``F^2`` is empty).
    3. Each level touches only what can change: a *dense* level works from the parents' side
       on virtual rows (node, block of words) whose missing block is not empty, OR-ing only
       children whose frontier block is not empty; the block size (1 word to the whole row) is
       chosen by a cost estimate. Once the frontier has few words, a *sparse* level pushes each
       nonzero frontier word into the same word of each parent instead, without scanning the
       matrix. Before the levels, children that cannot add anything beyond two of their
       siblings are dropped (:func:`_prune_children`; exact, and it leaves one or two children
       per node for windows, bands and chains).

    Cost: the closure, then per dense level a few scans of the ``n · n / 64`` packed words and
    the OR-ed words (about ``nnz · n / 64`` on the early levels of a random sparse mask, far
    fewer later), per sparse level ``O(pairs log pairs)``.

    Returns ``(L*, R)``: ``R`` as bool ``(n, n)``, or None with ``return_closure=False``. `bar`
    counts the levels (the closure before them is not counted).
    """
    n = adj.shape[0]
    closure, frontier, missing, indptr, dst = _search_start(adj)
    depth = _depth_levels(*_prune_children(indptr, dst, frontier), frontier, missing, bar)
    return depth, (_unpack(closure[:, : num_words(n)], n) if return_closure else None)


def _search_start(adj: np.ndarray):
    """The closure and level 1 of the search: ``(closure, frontier, missing, indptr, dst)``, packed ``(n, wp)``.

    ``frontier = F^1`` (the off-diagonal edges), ``missing = M^1 = R & ~(I | F^1)``; `indptr`, `dst` the CSR of
    the off-diagonal edges (not pruned yet).
    """
    n = adj.shape[0]
    edges = _edges(adj)
    indptr, src, dst = edges
    crow, cls, _ = _closure_rows(adj, edges)
    w, wp = num_words(n), padded_words(n)
    closure = np.zeros((n, wp), dtype=_WORD)
    closure[:, :w] = crow[cls]
    del crow
    frontier = np.zeros((n, wp), dtype=_WORD)
    _set_bits(frontier, src, dst)  # F^1: the off-diagonal edges
    node = np.arange(n, dtype=np.int64)
    missing = closure & ~frontier
    missing.reshape(-1)[node * wp + (node >> 6)] &= ~np.left_shift(_WORD(1), (node & 63).astype(_WORD))
    return closure, frontier, missing, indptr, dst


def _reached_counts(closure: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """Row counts of ``closure & ~missing`` (packed ``(n, wp)``), a block of rows at a time (no full temporary)."""
    n, wp = closure.shape
    out = np.empty(n, dtype=np.int64)
    step = max(1, _CHUNK_WORDS // max(1, wp))
    for r0 in range(0, n, step):
        block = closure[r0 : r0 + step] & ~missing[r0 : r0 + step]
        out[r0 : r0 + step] = np.bitwise_count(block).sum(axis=1, dtype=np.int64)
    return out


def power_bitpacked(adj: np.ndarray, num_layers: int, bar: Bar = NO_BAR) -> tuple[np.ndarray, int]:
    """``A^num_layers`` of one bool ``(n, n)`` adjacency (diagonal set), exact, and the levels run.

    The search of :func:`depth_bitpacked` stopped at level ``L = num_layers``: after it,
    ``M^L_i = R_i & ~({i} | F^1_i | … | F^L_i)`` are the bits of ``R`` farther than ``L`` from i,
    so ``A^L = R & ~M^L`` (walks of at most ``L`` edges, spec hasse.md §1.2). It stops earlier at
    ``L*``, where ``M`` is empty and ``A^L = R``. Cost: the closure plus ``min(L, L*) − 1`` levels,
    at most that of ``L*`` (the ``L − 1`` rounds of ``O(nnz · n / 64)`` each that ran before cost about ``L``
    closures on long windows). `bar` counts the levels (at most ``L − 1``: each level run, the last one
    possibly without new bits).
    """
    n = adj.shape[0]
    closure, frontier, missing, indptr, dst = _search_start(adj)
    bar.add_total(num_layers - 1)
    counted = bar.n
    levels = _depth_levels(*_prune_children(indptr, dst, frontier), frontier, missing, bar, stop=num_layers)
    if levels < num_layers:  # the search reached L* before L: the bar's total is the levels run, L* known
        bar.add_total((bar.n - counted) - (num_layers - 1))
        bar.note(f"L* = {levels}")
    del frontier
    closure &= ~missing
    del missing
    return _unpack(closure[:, : num_words(n)], n), levels


def depth_counts_bitpacked(
    adj: np.ndarray, layers, bar: Bar = NO_BAR
) -> tuple[int, dict[int, np.ndarray], np.ndarray, np.ndarray]:
    """``L*`` of one bool ``(n, n)`` adjacency (diagonal set), the row counts of ``A^L`` for every ``L`` in
    `layers` (``L >= 1``), and the closure ``R`` with its row counts, from one search (:func:`depth_bitpacked`'s):
    ``(L*, {L: counts}, R, R's counts)``, ``R`` bool ``(n, n)``.

    ``A^L = R & ~M^L`` after level ``L`` (:func:`power_bitpacked`), counted when the search passes ``L``; an
    ``L >= L*`` gets the counts of ``R``. Cost: :func:`depth_bitpacked`'s plus one count of the packed rows per
    requested ``L`` and one for ``R`` (``n · n / 64`` words each). `bar` counts the levels.
    """
    closure, frontier, missing, indptr, dst = _search_start(adj)
    wanted = {int(num) for num in layers}
    counts: dict[int, np.ndarray] = {}
    if 1 in wanted:
        counts[1] = _reached_counts(closure, missing)

    @no_type_check  # a closure made per call (see pyproject)
    def on_level(level, miss):
        if level in wanted:
            counts[level] = _reached_counts(closure, miss)

    depth = _depth_levels(*_prune_children(indptr, dst, frontier), frontier, missing, bar, on_level=on_level)
    del frontier, missing  # empty after the last level
    n = adj.shape[0]
    limit = np.bitwise_count(closure).sum(axis=1, dtype=np.int64)  # R's counts (the padding words are zero)
    for num in wanted:
        counts.setdefault(num, limit)
    return depth, counts, _unpack(closure[:, : num_words(n)], n), limit
