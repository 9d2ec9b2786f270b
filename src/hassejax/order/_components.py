"""Interleaved components: a mask that is the disjoint union of `W` interleaved masks (private; (derived)).

Position ``q`` is index ``j = q // W`` of component ``c = q % W``. When no key of a row lies in another component,
``A[c + jW, c + j'W] = B_c[j, j']`` and ``A`` is zero between components, every power splits: ``A^L`` is the
disjoint union of the ``B_c^L``, so ``R^(L)`` and ``R`` are the unions of the components', ``L* = max_c L*_c``,
the classes are the components' classes, and the quotient order is the disjoint union of the components' orders: a
longest chain lies in one component (the depth is the largest), an antichain takes one from each (the widths add), and
so do the covering pairs.

A dilated window whose `n` is no multiple of its stride `d` is such a union: residue `c` holds the positions
``c, c + d, …`` (``ceil((n − c) / d)`` of them, two lengths), and on them the window is a symmetric band of radius
``window // d``. (With `n` a multiple of `d` it is the Kronecker product ``band ⊗ I_d``, :mod:`._product`.) Its rows
have ``2 · (window // d) + 1`` runs, and its powers' runs multiply on the structured route, while each component's
band keeps one run a row. The constructor records the components
(:func:`~hassejax.masks._intervals.with_components`); they are not searched for.
"""

from __future__ import annotations

import numpy as np

from ..masks._intervals import IntervalMask
from ..masks._runs import check_host_memory

__all__ = ["components", "interleave"]


def components(a: IntervalMask):
    """``(W, ((B, count), ...))`` recorded by the constructor of `a` (:func:`~hassejax.masks._intervals.with_components`),
    or None."""
    return getattr(a, "_components", None)


def group_of_component(groups) -> np.ndarray:
    """int64 ``(W,)``: the group (index into `groups`) of each component."""
    return np.repeat(np.arange(len(groups)), [count for _, count in groups]).astype(np.int64)


def spread(per_group: list[np.ndarray], w: int, groups, n: int) -> np.ndarray:
    """int64 ``(n,)``: position ``q`` takes entry ``q // w`` of its component's group's array."""
    q = np.arange(n, dtype=np.int64)
    g = group_of_component(groups)[q % w]
    j = q // w
    out = np.empty(n, dtype=np.int64)
    for i, values in enumerate(per_group):
        pick = g == i
        out[pick] = np.asarray(values, dtype=np.int64)[j[pick]]
    return out


_BLOCK_KEYS = 1 << 22
"""Keys of the output a block of components builds at once (its temporaries: a few int64 arrays of them)."""


def _keys(p: IntervalMask) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The keys of `p` row by row (int64, row-major), the row of each and its slot within the row."""
    length = np.where(p.starts < p.stops, p.stops.astype(np.int64) - p.starts, 0).ravel()
    run_start = np.repeat(p.starts.astype(np.int64).ravel(), length)
    key = run_start + (np.arange(run_start.size, dtype=np.int64) - np.repeat(np.cumsum(length) - length, length))
    per_row = length.reshape(p.starts.shape).sum(axis=1)
    slot = np.arange(key.size, dtype=np.int64) - np.repeat(np.cumsum(per_row) - per_row, per_row)
    return key, np.repeat(np.arange(p.n, dtype=np.int64), per_row), slot


def interleave(parts: list[IntervalMask], w: int, groups, bar=None) -> IntervalMask:
    """The disjoint union of the components, component `c` being ``parts[g]`` of its group `g` (``parts[g].n`` equal
    to the group's mask's): row ``c + jW`` holds the keys ``c + k W`` for the keys `k` of row `j` of its part, each
    a run of its own (``W >= 2``). Built a block of components at a time (:data:`_BLOCK_KEYS` keys a block); `bar`:
    a progress bar counting the rows built, or None.

    **Raises:** :class:`~hassejax.errors.MemoryBudgetError` (naming `mask`) when the runs would not fit, before they
    are built."""
    n = sum(p.n * count for p, (_, count) in zip(parts, groups))
    nnz = [int((p.stops.astype(np.int64) - p.starts).sum()) for p in parts]
    kmax = max(1, max(int((p.stops.astype(np.int64) - p.starts).sum(axis=1).max(initial=0)) for p in parts))
    # the result (int32 starts and stops); a part's keys, rows and slots with their temporaries (about six int64
    # arrays of its keys); a block's rows and keys and the assignment's index arrays (about five of the block's keys)
    block = min(max(nnz) * w, max(_BLOCK_KEYS, max(nnz)))
    check_host_memory(
        8.0 * n * kmax + 48.0 * max(nnz) + 40.0 * block,
        f"the interval form of a union of {w} interleaved components ({n} rows, up to {kmax} runs a row)",
        "mask",
    )
    dtype = np.int32 if n < 2**31 - 1 else np.int64
    out_s = np.full((n, kmax), n, dtype=dtype)
    out_e = np.full((n, kmax), n, dtype=dtype)
    first = 0  # the group's first component
    for p, (_, count), size in zip(parts, groups, nnz):
        key, row, slot = _keys(p)
        step = max(1, _BLOCK_KEYS // max(1, size))  # components a block
        for c0 in range(first, first + count, step):
            cs = np.arange(c0, min(c0 + step, first + count), dtype=np.int64)[:, None]
            rows, keys = cs + w * row, cs + w * key
            out_s[rows, slot] = keys
            out_e[rows, slot] = keys + 1
            if bar is not None:
                bar.update(cs.size * p.n)
        first += count
    return IntervalMask(out_s, out_e, n, _normal=True)
