"""Kronecker products of masks: a 2-D neighbourhood is the product of two 1-D masks (private; (derived)).

On a grid of `H` rows and `W` columns flattened row-major (position ``q = r·W + c``), a mask
is the Kronecker product ``P ⊗ C`` of `P` (``H × H``, over grid rows) and `C` (``W × W``, over
columns) when ``A[rW + c, r'W + c'] = P[r, r'] ∧ C[c, c']``. The one-layer adjacency
``A = M | I`` is reflexive, so its factors are too, and Boolean products factor (the
mixed-product property): ``A^L = P^L ⊗ C^L``. Hence ``R^(L) = P^(L) ⊗ C^(L)``, the limit
``R = R_P ⊗ R_C``, the convergence depth ``L* = max(L*_P, L*_C)``, the classes of ``R`` are
the pairs of classes, and the quotient order is the product order: a longest chain has
``depth_P + depth_C − 1`` classes, and a class pair covers another iff one coordinate is
equal and the other covers (``E_P · C_C + C_P · E_C`` covering pairs).

NATTEN's 2-D neighbourhoods (:func:`hassejax.masks.structured.natten_2d`) are such products
of two clamped 1-D windows: their powers have `k` runs a row that grow with `L`, which makes
the structured route's squarings merge ``~n k²`` candidate runs, while each factor has one
run a row. :func:`kron_factors` finds the factors of an interval mask exactly (or says there
are none), :func:`kron` builds the product of two interval masks.
"""

from __future__ import annotations

import numpy as np

from ..masks._intervals import IntervalMask
from ..masks._runs import check_host_memory

__all__ = ["kron", "kron_factors"]


_SAMPLE_ROWS = 64
"""Rows compared (evenly spaced, and as many drawn at random) before a candidate grid width is compared whole."""
_BLOCK_ENTRIES = 1 << 22
"""Unmerged runs a block of rows of a product holds at most (its temporaries: about 100 bytes a run)."""


class _Runs:
    """Normalised runs of some rows (`starts`, `stops` int64 `(m, k)`, padding `n`), with per-row runs and keys."""

    __slots__ = ("counts", "k", "n", "starts", "stops")

    def __init__(self, starts: np.ndarray, stops: np.ndarray, n: int):
        from ..masks._runs import normalize_runs

        s, e = normalize_runs(np.minimum(starts, n), np.minimum(stops, n), n)
        self.starts, self.stops, self.n = s.astype(np.int64), e.astype(np.int64), n
        self.k = np.count_nonzero(self.starts < self.stops, axis=1).astype(np.int64)
        self.counts = (self.stops - self.starts).sum(axis=1)

    def take(self, rows: np.ndarray) -> _Runs:
        out = _Runs.__new__(_Runs)
        out.starts, out.stops, out.n = self.starts[rows], self.stops[rows], self.n
        out.k, out.counts = self.k[rows], self.counts[rows]
        return out


def _grid_rows(a: IntervalMask, rows: np.ndarray, w: int) -> _Runs:
    """Rows `rows` of the candidate `P` (``H × H``): grid row `r` reaches `r'` iff row ``rW`` of `a` holds ``r'W``."""
    s = a.starts[rows * w].astype(np.int64)
    e = a.stops[rows * w].astype(np.int64)
    return _Runs(-(-s // w), -(-e // w), a.n // w)


def _column_rows(a: IntervalMask, rows: np.ndarray, w: int) -> _Runs:
    """Rows `rows` of the candidate `C` (``W × W``): row `c` of `a` below column `W`."""
    return _Runs(a.starts[rows].astype(np.int64), a.stops[rows].astype(np.int64), w)


def _whole_rows(c: _Runs, w: int) -> np.ndarray:
    """Where C's row is the whole grid row ``[0, W)``: the product's runs are then P's runs scaled by `W`."""
    return (c.k == 1) & (c.starts[:, 0] == 0) & (c.stops[:, 0] == w)


def _per_row(p: _Runs, c: _Runs, w: int) -> tuple[np.ndarray, np.ndarray]:
    """Unmerged runs of each product row (P's row `i` with C's row `i`), and where C's row is a whole grid row."""
    full = _whole_rows(c, w)
    return np.where(full, p.k, p.counts * c.k).astype(np.int64), full


def _product_rows(p: _Runs, c: _Runs, w: int) -> tuple[np.ndarray, np.ndarray]:
    """Normalised runs of the product rows pairing P's row `i` with C's row `i` (int32, padding ``n = H W``).

    The runs come out sorted within each row (keys `r'` of P's row in order, C's runs in order), so only runs that
    touch are merged (``O(runs)``, no sort); the temporaries are a few int64 arrays of the unmerged runs."""
    n = p.n * w
    per_row, full = _per_row(p, c, w)
    m = per_row.size
    total = int(per_row.sum())
    which = np.repeat(np.arange(m), per_row)
    off = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(per_row) - per_row, per_row)
    starts = np.empty(total, dtype=np.int64)
    stops = np.empty(total, dtype=np.int64)
    f = full[which]
    if f.any():  # C's row a whole grid row: P's runs times w
        wf, t = which[f], off[f]
        starts[f] = p.starts[wf, t] * w
        stops[f] = p.stops[wf, t] * w
    g = ~f
    if g.any():  # each key r' of P's row times each run of C's row: [r'w + a, r'w + b)
        wg, og = which[g], off[g]
        j, t = og // c.k[wg], og % c.k[wg]
        # the j-th key of P's row: P's runs flattened in row order, each with the number of keys before it
        real = (p.starts < p.stops).ravel()
        length = (p.stops - p.starts).ravel()[real]
        first_key = np.cumsum(length) - length  # keys before each real run, over all rows
        key_base = np.cumsum(p.counts) - p.counts  # keys before each row
        g_key = key_base[wg] + j
        u = np.searchsorted(first_key, g_key, side="right") - 1  # the real run holding that key
        key = p.starts.ravel()[real][u] + (g_key - first_key[u])
        starts[g] = key * w + c.starts[wg, t]
        stops[g] = key * w + c.stops[wg, t]
    if total == 0:  # rows without keys (a factor with an empty row; a review: IndexError)
        return np.full((m, 1), n, dtype=np.int32), np.full((m, 1), n, dtype=np.int32)
    # merge runs that touch (the end of a grid row's run and the start of the next one's), row by row
    new = np.ones(total, dtype=bool)
    new[1:] = (which[1:] != which[:-1]) | (starts[1:] != stops[:-1])
    first = np.flatnonzero(new)
    last = np.r_[first[1:], total] - 1
    row = which[first]
    k_row = np.bincount(row, minlength=m)
    slot = np.arange(first.size) - np.repeat(np.cumsum(k_row) - k_row, k_row)
    kmax = max(1, int(k_row.max()) if m else 1)
    out_s = np.full((m, kmax), n, dtype=np.int32)
    out_e = np.full((m, kmax), n, dtype=np.int32)
    out_s[row, slot] = starts[first]
    out_e[row, slot] = stops[last]
    return out_s, out_e


def _blocks(per_row: np.ndarray):
    """``(q0, q1)`` row ranges of about :data:`_BLOCK_ENTRIES` unmerged runs each (at least one row)."""
    ends = np.cumsum(per_row)
    q0, n = 0, per_row.size
    while q0 < n:
        base = int(ends[q0 - 1]) if q0 else 0
        q1 = min(n, max(q0 + 1, int(np.searchsorted(ends, base + _BLOCK_ENTRIES, side="right"))))
        yield q0, q1
        q0 = q1


def kron(p: IntervalMask, c: IntervalMask, bar=None) -> IntervalMask:
    """``p ⊗ c`` on the `p.n × c.n` grid flattened row-major: ``out[rW + c, r'W + c'] = p[r, r'] ∧ c[c, c']``.

    Built a block of rows at a time (:data:`_BLOCK_ENTRIES` unmerged runs a block); `bar`: a progress bar
    (:mod:`._progress`) counting the rows built, or None.

    **Raises:** :class:`~hassejax.errors.MemoryBudgetError` (naming `mask`) when its runs would not fit, before
    they are built.
    """
    from ..masks._runs import stack_row_blocks

    h, w = p.n, c.n
    n = h * w
    pr = _Runs(p.starts.astype(np.int64), p.stops.astype(np.int64), h)
    cr = _Runs(c.starts.astype(np.int64), c.stops.astype(np.int64), w)
    full = _whole_rows(cr, w)
    per_row = np.where(full[None, :], pr.k[:, None], pr.counts[:, None] * cr.k[None, :]).ravel()
    kmax = max(1, int(per_row.max()))
    check_host_memory(  # the result (int32 starts and stops, twice while stacked) and one block's temporaries
        16.0 * n * kmax + 100.0 * min(int(per_row.sum()), _BLOCK_ENTRIES),
        f"the interval form of a Kronecker product of an {h}-position and a {w}-position mask ({n} rows, up to {kmax} runs)",
        "mask",
    )
    parts, widest = [], 1
    # a block's rows copy their factors' padded rows too (a review: P with one row of 129 runs, 1.6x the estimate)
    for q0, q1 in _blocks(per_row + pr.starts.shape[1] + cr.starts.shape[1]):
        rows = np.arange(q0, q1, dtype=np.int64)
        s, e = _product_rows(pr.take(rows // w), cr.take(rows % w), w)
        widest = max(widest, s.shape[1])
        parts.append((s, e))
        if bar is not None:
            bar.update(q1 - q0)
    s, e = stack_row_blocks(parts, n, widest)
    return IntervalMask(s, e, n, _normal=True)


def _divisors(n: int) -> list[int]:
    """The grid widths `W` with ``2 <= W <= n / 2`` dividing `n`, nearest to a square grid first."""
    small = [d for d in range(2, int(n**0.5) + 1) if n % d == 0]
    both = sorted(set(small) | {n // d for d in small})
    return sorted(both, key=lambda d: (abs(np.log(d) - 0.5 * np.log(n)), d))


def kron_factors(a: IntervalMask) -> tuple[IntervalMask, IntervalMask] | None:
    """``(P, C)`` with ``a = P ⊗ C`` on an ``H × W`` grid, ``H, W >= 2`` (the grid nearest a square first), or None.

    `a` must be reflexive (``A = M | I``); its factors then are too: `C` is the block of its first `W` rows and
    columns, `P` the grid rows that row ``rW`` reaches at column 0. A row of a product has as many keys as the
    product of its factors' rows, and at least half its unmerged runs (a run of `C`'s row merges only with one of
    the next grid row, at the edge): a candidate whose rows break either is no product, known from counts. A
    candidate is compared on :data:`_SAMPLE_ROWS` evenly spaced and as many random rows first (``O(rows · runs)``),
    then on :data:`_SECOND_SAMPLE` random rows, then as a whole, a block of rows at a time (``O(n · runs)``, memory
    of a block). A mask its constructor built as a product (a dilated window with `n` a multiple of its stride, a 2-D
    neighbourhood: :func:`~hassejax.masks._intervals.with_factors`) gives its factors without a search
    (``dilated(16384, 4096, 4)``: 16.0 s searching, on the 2-core CI machine). Its grid may differ from the one the
    search finds first (a dilated window: the band over `n / d` times the identity over the stride `d`); the answers
    do not depend on the grid, but which of depth, width and covering pairs a small ``quotient_limit`` of a factor
    leaves not computed does.
    """
    n = a.n
    if n < 4:
        return None
    recorded = getattr(a, "_factors", None)  # built as a product by its constructor (masks._intervals.with_factors)
    if recorded is not None:
        return recorded
    a_runs = np.count_nonzero(a.starts < a.stops, axis=1).astype(np.int64)
    a_keys = (a.stops.astype(np.int64) - a.starts).sum(axis=1)
    rng = np.random.default_rng(0)
    for w in _divisors(n):
        h = n // w
        edges = np.array([0, 1, w - 1, w, w + 1, n - w, n - 1], dtype=np.int64)
        rows = np.unique(np.concatenate([np.linspace(0, n - 1, _SAMPLE_ROWS).astype(np.int64), edges,
                                         rng.integers(0, n, _SAMPLE_ROWS)]))  # fmt: skip
        if not _rows_match(a, a_runs, a_keys, rows, w):
            continue
        # a second sample of many rows (a review: a mask that is a product but for a stretch of 4096 rows in the
        # middle met a whole comparison, 4-12 s, for each of 10 grid widths), then the whole factors once, then all
        more = np.unique(rng.integers(0, n, min(n, _SECOND_SAMPLE)))
        if not _rows_match(a, a_runs, a_keys, more, w):
            continue
        p = _grid_rows(a, np.arange(h, dtype=np.int64), w)
        c = _column_rows(a, np.arange(w, dtype=np.int64), w)
        if all(_rows_match(a, a_runs, a_keys, np.arange(q0, q1), w, (p, c)) for q0, q1 in _blocks(2 * a_runs)):
            return IntervalMask(p.starts, p.stops, h), IntervalMask(c.starts, c.stops, w)
    return None


_SECOND_SAMPLE = 8192
"""Random rows a candidate that passed the first sample is compared on before the whole comparison (a stretch of
`s` rows that is no product is missed by all with probability about ``exp(-8192 s / n)``: 4096 rows of 2^20, 1e-14)."""


def _rows_match(a: IntervalMask, a_runs: np.ndarray, a_keys: np.ndarray, rows: np.ndarray, w: int, whole=None) -> bool:
    """Rows `rows` of `a` equal those of the candidate product on grid width `w` (counts first, then the runs);
    `whole`: the candidate factors ``(P, C)`` already built (their rows are taken, not rebuilt)."""
    rows = np.asarray(rows, dtype=np.int64)
    if whole is None:
        p, c = _grid_rows(a, rows // w, w), _column_rows(a, rows % w, w)
    else:
        p, c = whole[0].take(rows // w), whole[1].take(rows % w)
    per_row, _ = _per_row(p, c, w)
    if np.any(per_row > 2 * a_runs[rows]) or np.any(p.counts * c.counts != a_keys[rows]):
        return False
    return _same_rows(_product_rows(p, c, w), a, rows)


def _same_rows(got: tuple[np.ndarray, np.ndarray], a: IntervalMask, rows: np.ndarray | None) -> bool:
    """Normalised runs `got` equal rows `rows` of `a` (all when None), whatever their padding widths."""
    s, e = got
    a_s, a_e = (a.starts, a.stops) if rows is None else (a.starts[rows], a.stops[rows])
    k = max(s.shape[1], a_s.shape[1])

    def pad(x):
        return np.pad(x, ((0, 0), (0, k - x.shape[1])), constant_values=a.n)

    return bool(np.array_equal(pad(s), pad(a_s)) and np.array_equal(pad(e), pad(a_e)))
