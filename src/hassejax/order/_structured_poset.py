"""Classes, quotient and chain/antichain sizes of a preorder given as interval rows (private; NumPy).

`R` is the reachability limit as an :class:`~hassejax.masks.IntervalMask` (reflexive and
transitive). Facts used (spec hasse.md §1.4–1.7, (derived)):

- ``j ∈ R[i] ⟺ R[j] ⊆ R[i]`` (reflexivity and transitivity), so two positions are in one
  class iff their rows are equal: the classes are the groups of identical rows, and the
  quotient order is inclusion of rows;
- numbering as :func:`hassejax.order.classes`: by the size of the reach set, then by the
  smallest member (a topological order);
- the strict down-set of ``i`` is ``D[i] = R[i] \\ class(i)``; ``c`` covers ``d`` iff
  ``d ∈ D[c] \\ (D ⊗ D)[c]`` (no element strictly between); ``D^m[i] ≠ ∅`` iff a chain of
  ``m + 1`` classes starts at ``i``: the depth by doubling and a binary search over ``D^(2^j)``;
- the covers ``D \\ D⊗D`` cost one product; listed as pairs of classes (as many as the Hasse
  edges), the depth is a longest path over them in the class numbering (a topological order):
  ``O(C + edges)`` after that one product, where the doubling costs ``2 log2(depth)`` products
  (a butterfly mask, depth ``n``: 36 products at ``n = 300000``);
- when every row of ``R`` is one run, the quotient is a set of intervals ordered by inclusion,
  a two-dimensional order: the depth is a longest non-increasing and the width a longest
  increasing subsequence of the right ends after sorting by (left end, −right end)
  (Dilworth's theorem for 2-D orders; Golumbic, "Algorithmic Graph Theory and Perfect
  Graphs", 1980, ch. 7).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import no_type_check

import numpy as np

from ..masks._intervals import IntervalMask, fill_runs, normalize_runs
from ._structured import compose

__all__ = [
    "RowClasses",
    "row_classes",
    "quotient_matrix",
    "strict_down_sets",
    "cover_rows",
    "covers_count",
    "cover_pairs",
    "dag_depth",
    "chain_depth",
    "interval_depth_width",
]


@dataclass(frozen=True)
class RowClasses:
    """The classes of a preorder `R` given as interval rows.

    - `labels`: int64 `(n,)`, class id of each position (topological numbering).
    - `num_classes`: ``C``.
    - `sizes`: int64 `(C,)`, members per class.
    - `first`, `last`: int64 `(C,)`, smallest and largest member of each class.
    - `representative`: int64 `(C,)`, one member of each class (its smallest).
    - `contiguous`: every class is a run of consecutive positions.
    """

    labels: np.ndarray
    num_classes: int
    sizes: np.ndarray
    first: np.ndarray
    last: np.ndarray
    contiguous: bool

    @property
    def representative(self) -> np.ndarray:
        return self.first


def row_classes(r: IntervalMask) -> RowClasses:
    """Group identical rows of `r`; number the groups by reach-set size, then smallest member."""
    n = r.n
    key = np.concatenate([r.starts, r.stops], axis=1)
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    reach = r.row_counts()[first]
    order = np.lexsort((first, reach))
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    labels = rank[inverse].astype(np.int64)
    c = int(order.size)
    sizes = np.bincount(labels, minlength=c).astype(np.int64)
    first_sorted = first[order].astype(np.int64)
    last = np.zeros(c, dtype=np.int64)
    np.maximum.at(last, labels, np.arange(n, dtype=np.int64))
    contiguous = bool(np.all(last - first_sorted + 1 == sizes))
    return RowClasses(labels, c, sizes, first_sorted, last, contiguous)


def quotient_matrix(r: IntervalMask, cls: RowClasses) -> np.ndarray:
    """Bool `(C, C)`: ``order[a, b]`` iff ``[b] ≤ [a]`` (the representative of b is in row a)."""
    from ..masks._runs import check_host_memory

    c = cls.num_classes
    # the order, the diagram's cover matrix and a block's temporaries: about 3 bytes an entry
    check_host_memory(3.0 * c * c, f"the quotient order of C = {c} classes (a (C, C) array)", "mask")
    reps = cls.first
    out = np.empty((cls.num_classes, cls.num_classes), dtype=bool)
    if cls.contiguous:
        # A run of a row holds whole classes: those whose smallest member is in it, a range of the classes in
        # the order of their smallest members; marked +1 / -1 at its ends, a running sum fills it.
        by_first, lo, count = _cover_ranges(cls, r)
        column = np.empty(c, dtype=np.int64)  # class b is column column[b] of the classes by smallest member
        column[by_first] = np.arange(c)
        fill_runs(lo, lo + count, c, out, columns=column)
        return out
    step = max(1, (1 << 22) // max(1, cls.num_classes * r.num_runs))
    for a0 in range(0, cls.num_classes, step):
        out[a0 : a0 + step] = r.contains(reps[a0 : a0 + step, None], reps[None, :])
    return out


def strict_down_sets(r: IntervalMask, cls: RowClasses) -> IntervalMask:
    """``D[i] = R[i]`` without the class of ``i`` (needs contiguous classes: a class is one run)."""
    lo = cls.first[cls.labels][:, None]
    hi = cls.last[cls.labels][:, None] + 1
    s = np.concatenate([r.starts, np.maximum(r.starts, hi)], axis=1)
    e = np.concatenate([np.minimum(r.stops, lo), r.stops], axis=1)
    s, e = normalize_runs(s, e, r.n)
    return IntervalMask(s, e, r.n, _normal=True)


def _difference(a: IntervalMask, b: IntervalMask) -> IntervalMask:
    """Row-wise set difference ``a \\ b``."""
    n = a.n
    # The complement of b's runs: the gaps [0, s_0), [e_0, s_1), …, [e_last, n).
    gap_s = np.concatenate([np.zeros((n, 1), b.starts.dtype), b.stops], axis=1)
    gap_e = np.concatenate([b.starts, np.full((n, 1), n, b.starts.dtype)], axis=1)
    gap_s, gap_e = normalize_runs(gap_s, gap_e, n)
    return a & IntervalMask(gap_s, gap_e, n, _normal=True)


def cover_rows(down: IntervalMask) -> IntervalMask:
    """Row ``i``: the classes covered by the class of ``i``, ``D[i] \\ (D ⊗ D)[i]`` (one product; contiguous classes)."""
    return _difference(down, compose(down, down, name="mask"))


def _cover_ranges(cls: RowClasses, cover: IntervalMask) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(by_first, lo, count)``: the class ids sorted by smallest member, and for each class and run of its row of
    `cover` (``(C, k)``; rows made of whole classes: a cover row, a row of ``R``) where the classes in the run start
    in that order and how many there are."""
    reps = cls.first
    s, e = cover.starts[reps], cover.stops[reps]
    by_first = np.argsort(cls.first, kind="stable")
    firsts = cls.first[by_first]
    lo = np.searchsorted(firsts, s, side="left")
    count = np.where(s < e, np.searchsorted(firsts, e, side="left") - lo, 0)
    return by_first, lo, count


def covers_count(r: IntervalMask, cls: RowClasses, down: IntervalMask, cover: IntervalMask | None = None) -> int:
    """Number of covering pairs (Hasse edges), for contiguous classes: classes in ``D \\ D⊗D`` (`cover`, if given)."""
    cover = cover_rows(down) if cover is None else cover
    return int(_cover_ranges(cls, cover)[2].sum())


def cover_pairs(cls: RowClasses, cover: IntervalMask, ranges=None) -> tuple[np.ndarray, np.ndarray]:
    """The covering pairs ``(lower, upper)``, int64 ``(edges,)`` each: class ``upper`` covers class ``lower``.

    Sorted by ``upper``, then by the smallest member of ``lower``; `cover` from :func:`cover_rows`
    (contiguous classes: a run of a cover row holds whole classes, found by their smallest member);
    `ranges`: :func:`_cover_ranges` of the same, if already known.
    """
    by_first, lo, count = _cover_ranges(cls, cover) if ranges is None else ranges
    flat_lo, flat_count = lo.ravel(), count.ravel()
    total = int(flat_count.sum())
    upper = np.repeat(np.arange(cls.num_classes, dtype=np.int64), count.sum(axis=1))
    # position t of the listing, in range r: lo[r] + (t - first t of r)
    offset = np.repeat(flat_lo - (np.cumsum(flat_count) - flat_count), flat_count)
    lower = by_first[offset + np.arange(total, dtype=np.int64)].astype(np.int64)
    return lower, upper


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def dag_depth(num_classes: int, lower: np.ndarray, upper: np.ndarray) -> int:
    """Classes in a longest chain, from the covering pairs of :func:`cover_pairs` (``lower < upper`` as ids).

    The ids are a topological order (a class covers only classes of smaller reach, so of smaller id): one pass
    ``h[c] = 1 + max h[lower]`` over the covers of ``c``, ``O(C + edges)`` (a Python loop over the classes that
    cover something; one that covers one class, as along a chain, costs a list lookup).
    """
    if lower.size == 0:
        return 1
    ptr = np.concatenate([[0], np.cumsum(np.bincount(upper, minlength=num_classes))]).tolist()
    low = lower.tolist()
    h = [1] * num_classes
    for c in np.unique(upper).tolist():
        a, b = ptr[c], ptr[c + 1]
        if b - a == 1:
            h[c] = h[low[a]] + 1
        else:
            h[c] = 1 + max([h[x] for x in low[a:b]])
    return max(h)


def chain_depth(down: IntervalMask) -> int:
    """Classes in a longest chain: ``1 + max{m : D^m ≠ ∅}`` by doubling and a binary search."""

    def nonempty(x: IntervalMask) -> bool:
        return bool((x.starts < x.stops).any())

    if not nonempty(down):
        return 1
    powers = [down]  # D^(2^j), all nonempty
    while True:
        sq = compose(powers[-1], powers[-1], name="mask")
        if not nonempty(sq):
            break
        powers.append(sq)
    # D^(2^(len-1)) ≠ ∅ and D^(2^len) = ∅: search the largest m in [2^(len-1), 2^len).
    x, m = powers[-1], 1 << (len(powers) - 1)
    for j in range(len(powers) - 2, -1, -1):
        y = compose(x, powers[j], name="mask")
        if nonempty(y):
            x, m = y, m + (1 << j)
    return m + 1


def interval_depth_width(r: IntervalMask, cls: RowClasses) -> tuple[int, int]:
    """Depth and width when every row of `r` is one run (the quotient is an interval order by inclusion)."""
    reps = cls.first
    lo = r.starts[reps, 0].astype(np.int64)
    hi = r.stops[reps, 0].astype(np.int64)
    order = np.lexsort((-hi, lo))
    ordered = hi[order]
    # depth: longest non-increasing subsequence = longest non-decreasing of the negated values;
    # width: longest strictly increasing subsequence.
    return longest_increasing(-ordered, strict=False), longest_increasing(ordered, strict=True)


def longest_increasing(seq: np.ndarray, *, strict: bool) -> int:
    """Length of a longest (strictly, or weakly) increasing subsequence of the int array `seq`.

    Patience sorting (Fredman, "On computing the length of longest increasing subsequences",
    Discrete Math. 11, 1975). A block of consecutive values that cannot hold two elements of
    such a subsequence (a non-increasing block when `strict`, a strictly decreasing one
    otherwise) is placed in one vectorised step: each value's pile found against the piles
    before the block is the pile the sequential algorithm finds, since the piles the block
    changes only get values that compare the same way with the block's later, smaller values.
    Blocks of one value fall back to the element loop.
    """
    n = int(seq.size)
    if n == 0:
        return 0
    rising = seq[1:] > seq[:-1] if strict else seq[1:] >= seq[:-1]
    cuts = np.flatnonzero(rising) + 1
    side = "left" if strict else "right"
    if cuts.size == n - 1:  # the whole sequence is increasing (e.g. a chain of classes)
        return n
    if cuts.size > n // 8:  # mostly one-value blocks: the plain loop is faster
        tails: list[int] = []
        pick = bisect.bisect_left if strict else bisect.bisect_right
        for v in seq.tolist():
            i = pick(tails, v)
            if i == len(tails):
                tails.append(v)
            else:
                tails[i] = v
        return len(tails)
    piles = np.full(n + 1, np.iinfo(np.int64).max, dtype=np.int64)
    size = 0
    bounds = np.concatenate([[0], cuts, [n]])
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        block = seq[a:b]
        pos = np.searchsorted(piles[:size], block, side=side)
        np.minimum.at(piles, pos, block)
        size = max(size, int(pos.max()) + 1)
    return size
