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
"""Rows compared before a whole product is built for a candidate grid width."""
_RUNS_SLACK = 4
"""A candidate factorisation is built only when its unmerged runs are at most this many times the mask's runs (plus
one a row): a product of `A`'s runs merges touching runs of adjacent grid rows only, two into one at most a
boundary."""


def _real_runs(m: IntervalMask) -> np.ndarray:
    """Runs of each row (normal form: the real runs first, padding ``n`` after)."""
    return np.count_nonzero(m.starts < m.stops, axis=1)


def _kron_runs(p: IntervalMask, c: IntervalMask, rows: np.ndarray, budget: int | float | None = None):
    """The runs of rows `rows` of ``p ⊗ c``, normalised: int32 `(len(rows), k)` starts and stops (padding ``n``); None
    when they would hold more than `budget` unmerged runs."""
    h, w = p.n, c.n
    n = h * w
    r, cc = rows // w, rows % w
    kc = _real_runs(c)
    full = (kc == 1) & (c.starts[:, 0] == 0) & (c.stops[:, 0] == w)  # a whole grid row: P's runs scaled by w
    kp = _real_runs(p)
    counts = np.asarray(p.row_counts(), dtype=np.int64)
    per_row = np.where(full[cc], kp[r], counts[r] * kc[cc]).astype(np.int64)
    total = int(per_row.sum())
    if budget is not None and total > budget:
        return None
    kmax = max(1, int(per_row.max()) if per_row.size else 1)
    check_host_memory(
        16.0 * len(rows) * kmax + 64.0 * total,
        f"the runs of a Kronecker product of an {h}-position and a {w}-position mask",
        "mask",
    )
    which = np.repeat(np.arange(len(rows)), per_row)
    off = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(per_row) - per_row, per_row)
    rr, cw = r[which], cc[which]
    starts = np.full((len(rows), kmax), n, dtype=np.int64)
    stops = np.full((len(rows), kmax), n, dtype=np.int64)
    f = full[cw]
    if f.any():  # P's runs times w
        t = off[f]
        starts[which[f], t] = p.starts[rr[f], t].astype(np.int64) * w
        stops[which[f], t] = p.stops[rr[f], t].astype(np.int64) * w
    g = ~f
    if g.any():  # each key r' of P's row times each run of C's row: [r'w + a, r'w + b)
        rg, cg, og = rr[g], cw[g], off[g]
        j, t = og // kc[cg], og % kc[cg]
        length = (p.stops - p.starts).astype(np.int64)[rg]  # (T, kp): the runs of P's row
        before = np.cumsum(length, axis=1) - length
        u = np.count_nonzero(before <= j[:, None], axis=1) - 1  # the run of P's row holding its j-th key
        key = p.starts[rg, u].astype(np.int64) + j - before[np.arange(rg.size), u]
        starts[which[g], og] = key * w + c.starts[cg, t]
        stops[which[g], og] = key * w + c.stops[cg, t]
    from ..masks._runs import normalize_runs

    return normalize_runs(starts, stops, n)


def kron(p: IntervalMask, c: IntervalMask) -> IntervalMask:
    """``p ⊗ c`` on the `p.n × c.n` grid flattened row-major: ``out[rW + c, r'W + c'] = p[r, r'] ∧ c[c, c']``.

    **Raises:** :class:`~hassejax.errors.MemoryBudgetError` (naming `mask`) when its runs would not fit, before
    they are built.
    """
    n = p.n * c.n
    s, e = _kron_runs(p, c, np.arange(n, dtype=np.int64))
    return IntervalMask(s, e, n, _normal=True)


def _divisors(n: int) -> list[int]:
    """The grid widths `W` with ``2 <= W <= n / 2`` dividing `n`, nearest to a square grid first."""
    small = [d for d in range(2, int(n**0.5) + 1) if n % d == 0]
    both = sorted(set(small) | {n // d for d in small})
    return sorted(both, key=lambda d: (abs(np.log(d) - 0.5 * np.log(n)), d))


def kron_factors(a: IntervalMask) -> tuple[IntervalMask, IntervalMask] | None:
    """``(P, C)`` with ``a = P ⊗ C`` on an ``H × W`` grid, ``H, W >= 2`` (the grid nearest a square first), or None.

    `a` must be reflexive (``A = M | I``); its factors then are too: `C` is the block of its first `W` rows and
    columns, `P` the grid rows that row ``rW`` reaches at column 0. A candidate is compared on
    :data:`_SAMPLE_ROWS` rows first, then, when its runs stay within :data:`_RUNS_SLACK` times `a`'s, as a whole.
    """
    n = a.n
    if n < 4:
        return None
    real = int(np.count_nonzero(a.starts < a.stops))
    budget = _RUNS_SLACK * real + n
    sample = np.unique(np.linspace(0, n - 1, _SAMPLE_ROWS).astype(np.int64))
    for w in _divisors(n):
        h = n // w
        c = IntervalMask(np.minimum(a.starts[:w], w), np.minimum(a.stops[:w], w), w)
        p = IntervalMask(-(-a.starts[::w].astype(np.int64) // w), -(-a.stops[::w].astype(np.int64) // w), h)
        rows = np.unique(np.concatenate([sample, np.arange(min(w + 1, n)), [n - w, n - 1]]))
        got = _kron_runs(p, c, rows, budget)
        if got is None or not _same_rows(got, a, rows):
            continue
        got = _kron_runs(p, c, np.arange(n, dtype=np.int64), budget)
        if got is not None and _same_rows(got, a, None):
            return p, c
    return None


def _same_rows(got: tuple[np.ndarray, np.ndarray], a: IntervalMask, rows: np.ndarray | None) -> bool:
    """Normalised runs `got` equal rows `rows` of `a` (all when None), whatever their padding widths."""
    s, e = got
    a_s, a_e = (a.starts, a.stops) if rows is None else (a.starts[rows], a.stops[rows])
    k = max(s.shape[1], a_s.shape[1])

    def pad(x):
        return np.pad(x, ((0, 0), (0, k - x.shape[1])), constant_values=a.n)

    return bool(np.array_equal(pad(s), pad(a_s)) and np.array_equal(pad(e), pad(a_e)))
