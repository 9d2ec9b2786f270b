"""The structured closure route: exact ``R^(L)``, ``R``, ``L*`` on interval rows (private; pure NumPy).

Masks are :class:`~hassejax.masks.IntervalMask` objects: row ``i`` is a few sorted runs of
keys. Read as a graph with an edge ``i -> j`` for every ``A[i, j]``, the Boolean product is

    ``(P ⊗ Q)[i] = ⋃_{j ∈ P[i]} Q[j]``,

a union of the rows of ``Q`` over the runs of ``P[i]``. A sparse table over the rows of ``Q``
(level ``l`` holds the union of ``2^l`` consecutive rows) answers every such range union with
two table entries (union is idempotent, so the two may overlap). When every row of ``Q`` is one
run that contains its own index (true for every power of ``A = M | I`` of a single-run mask:
causal, windows, prefix-LM, block/chunked causal, documents), the union over a range of rows
is one run ``[min start, max stop)``: a range-min/range-max table. A product costs
``O(n · k log n)`` for ``k`` runs a row, never ``n²``. A row of ``P`` that holds the index of a full row of
``Q`` is full in the product and merges nothing (Longformer's global tokens: every row holds their keys).

On that product:

- ``P_k = A^(2^k)`` by repeated squaring, stored; the limit ``R`` is the first ``P_k`` equal
  to ``P_(k-1)`` (``ceil(log2 L*) + 1`` products);
- ``R^(L)``: ``R`` when ``2^floor(log2 L) >= 2^(k-1)``, else the product of the stored powers
  of the bits of ``L``;
- ``L*``: a binary search over the stored powers (``k − 2`` more products), as the matmul
  route (:func:`hassejax.order.closure.convergence_depth`);
- the product ``A_L ⊗ … ⊗ A_1`` of per-layer masks, layer by layer.

Source: (derived) from spec hasse.md §1.2–1.3; sparse tables: Bender & Farach-Colton, "The LCA
problem revisited", LATIN 2000 (range-minimum queries in O(1) after O(n log n) preprocessing).
"""

from __future__ import annotations

import contextlib
import contextvars
import warnings
from collections.abc import Callable, Sequence
from typing import NamedTuple, no_type_check

import numpy as np

from .._memory import host_memory_bytes
from .._warn import user_stacklevel
from ..errors import CandidateLimitError, MemoryBudgetError
from ..masks._intervals import IntervalMask, check_host_memory, normalize_runs
from ._progress import NO_BAR, Bar

__all__ = ["compose", "PowerTable", "product", "CandidateLimitError", "candidate_limit"]

_INDEX = np.int32


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def _floor_log2(x: np.ndarray) -> np.ndarray:
    """``floor(log2 x)`` elementwise for positive ints below ``2**53`` (exact: the float exponent)."""
    return np.frexp(np.asarray(x, dtype=np.float64))[1].astype(np.int64) - 1


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def _table_bytes(n: int, k: int, levels: int) -> float:
    # every level: starts and stops (int32), each normalisation holds about 4x its output.
    return float(levels + 4) * n * max(1, 2 * k) * 2 * 4


def compose(p: IntervalMask, q: IntervalMask, *, name: str = "mask", grown_from: int | None = None) -> IntervalMask:
    """The Boolean product ``P ⊗ Q``: row ``i`` is the union of the rows ``Q[j]``, ``j ∈ P[i]``.

    Exact; ``O(r · k_P k_Q log n)`` time and ``O(n · k_Q log(longest run of P))`` memory for the ``r`` rows of `p`
    that reach no full row of `q` (a row of `p` that does is full in the product, answered at once: a global token's
    row, whose key every row of a Longformer mask holds), estimated before anything is allocated (raises
    :class:`~hassejax.errors.MemoryBudgetError` naming `name`, also for a product of more than
    :data:`_MAX_CANDIDATES` candidate runs); rows are answered in blocks whose temporaries stay
    within :data:`_TEMP_BYTES`. `grown_from`: the runs a row of the factor `p` came from when
    the product that made it grew them (a squaring of :class:`PowerTable`); such a product is
    also held to the lower limit of runs that multiply (:func:`candidate_limit`'s `growing`).
    """
    n = p.n
    p_starts, p_stops, short = _rows_to_merge(p, q)
    longest = 0 if p_starts is None else int((p_stops - p_starts).max(initial=0))
    if longest == 0:  # every row reaches a full row of q or has no key: no run to merge
        return _full_rows(short, n)
    rows_left = p_starts.shape[0]
    p_runs = p_starts.shape[1]
    levels = int(_floor_log2(np.array([longest]))[0]) + 1
    width = 4 * p_runs * q.num_runs  # candidate runs a row before normalisation (at most)
    block = min(_row_block(width), rows_left)  # rows of one block (the estimate below counts no rows beyond them)
    what = f"a product of interval masks (n = {n}, {p_runs} x {q.num_runs} runs a row, {levels} table levels)"
    rows_text = "n" if rows_left == n else f"{rows_left} rows without a full one"
    candidates = float(rows_left) * width

    @no_type_check  # defined a call: not decorated by the test suite's runtime type checks (milliseconds each)
    def refuse_above_limits(candidates: float, what: str, count: str) -> None:
        if candidates > _CANDIDATE_LIMIT.get():
            why = (  # "multiply" only where the product before grew the runs (a new user: A's own runs, A² full)
                "the runs of this mask's powers multiply"
                if grown_from is not None
                else "the factors' rows hold too many runs for a structured product"
            )
            raise CandidateLimitError(
                f"`{name}`: {what} has up to {candidates:.3g} candidate runs to merge ({count}), more than the "
                f"structured route takes ({_CANDIDATE_LIMIT.get():.3g}: tens of seconds a product): {why}. "
                f"{_dense_advice(n)}"
            )
        growing = _GROWING_LIMIT.get() if grown_from is not None else None
        if growing is not None and candidates > growing:
            err = CandidateLimitError(
                f"`{name}`: {what} has up to {candidates:.3g} candidate runs to merge ({count}), and the product "
                f"before grew the runs a row from {grown_from} to {p.num_runs}: the runs of this mask's powers "
                f"multiply, and this product alone would cost more than the whole dense bit-packed closure (about "
                f"{growing:.3g} candidate runs). {_dense_advice(n)}"
            )
            err.growing = True  # refused at the growing limit, within the plain one (structured_or_dense may retry)
            raise err

    refuse_above_limits(candidates, what, f"{rows_text} x 4 x runs x runs")
    slow = _SLOW_AT.get()
    if slow is not None and grown_from is not None and slow[2] is not None:
        slow_at = min(slow[0], slow[2])
    else:
        slow_at = None if slow is None else slow[0]

    @no_type_check
    def warn_if_slow(count: float) -> None:
        if slow is not None and count > slow_at and not slow[1]:
            slow[1] = True  # once a call
            warnings.warn(
                f"`{name}`: method='structured' forced on a mask whose powers' runs multiply: a product merges up to "
                f"{count:.3g} candidate runs, more than the dense bit-packed route costs ({slow_at:.3g}); "
                "method='bitpacked' (or 'auto', which switches there, or, for a Kronecker product such as a 2-D "
                "neighbourhood, takes its factors) is likely much faster.",
                RuntimeWarning,
                stacklevel=user_stacklevel(),
            )

    direct = float((p_stops - p_starts).sum()) * q.num_runs  # runs of q a union row by row would merge
    table = float(n) * q.num_runs * levels  # entries of a union table over all rows of q, at q's width at least
    limits = [x for x in (_CANDIDATE_LIMIT.get(), _GROWING_LIMIT.get() if grown_from is not None else None) if x]
    row_by_row = short is not None and rows_left <= _DIRECT_ROWS and table >= _DIRECT_MIN_TABLE
    row_by_row = row_by_row and 2 * direct <= min(limits)

    @no_type_check
    def answer_row_by_row() -> IntervalMask:
        warn_if_slow(direct)
        rows = _union_rows(p_starts, p_stops, q, n, f"{what}: a row's union", name)
        return _assemble([rows], short, n, what, name)

    # Few rows left (the others reach a full row): their unions row by row where that costs less than the route
    # below (range minima over the rows' own runs, a union table over q at q's width), or, further down, once a
    # union table grows past twice q's width (reviews: one or two rows of one long run over rows of 65 random
    # keys built a table of 2.9 GB for them, 12-14 s; rows left row by row where the table kept q's width, or
    # range minima sufficed, took 7.6-9.2 s against 0.05-0.11 s)
    parts = _range_parts(q, n)
    if row_by_row and direct <= (table if parts.needs_table else float(n) * levels):
        return answer_row_by_row()
    warn_if_slow(candidates)
    check_host_memory(_table_bytes(n, q.num_runs, levels) + _TEMP_BYTES_PER_ENTRY * block * width, what, name)

    @no_type_check
    def union_table(starts: np.ndarray, stops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # The unions of 2^l rows of q can hold far more runs than a row (scattered keys: up to n/2), which the
        # counts above do not see (a review: a row of one long run over rows of 65 random keys, n = 8192, counted
        # 264 candidate runs and took 13.5 s and 2.9 GB): each level's width is counted as it is built, the rows'
        # candidates at that width against the limits, its bytes against the memory.
        grown = [0.0]  # the table's merges at widths beyond q's own (scattered keys), which no count above sees

        @no_type_check
        def level_built(level: int, width_before: int, width_now: int, held_bytes: float) -> None:
            if row_by_row and width_now > 2 * q.num_runs:
                raise _TableGrows  # the rows left row by row instead (compose)
            if width_before > q.num_runs:  # a merge of the table costs about four candidates (a review: 95 ns)
                grown[0] += _TABLE_MERGE_COST * 2.0 * n * width_before
            if width_now > q.num_runs:
                refuse_above_limits(
                    grown[0] + float(rows_left) * 4 * p_runs * width_now,
                    f"{what}, whose union table over {1 << level} rows of the second factor holds {width_now} runs "
                    "a row",
                    f"the table's merges beyond the width of q, and {rows_text} x 4 x runs x runs of the table",
                )
            # held, the table stacked at this width, and the next level's merge of 2 x this width a row
            need = held_bytes + 8.0 * levels * n * width_now
            if level + 1 < levels:
                need += _TEMP_BYTES_PER_ENTRY * 2.0 * n * width_now
            try:  # a refusal of the structured route, as the limits' (method="auto" then tries the dense route)
                check_host_memory(need, f"{what}: its union table ({width_now} runs a row at level {level})", name)
            except MemoryBudgetError as err:
                raise CandidateLimitError(f"{err} {_dense_advice(n)}") from None

        return _union_table(starts, stops, n, levels, level_built)

    try:
        lo, hi, tab_s, tab_e, shared, cross = _ranges(p_starts, p_stops, q, parts, levels, union_table)
    except _TableGrows:
        return answer_row_by_row()
    if tab_s is not None and tab_s.shape[2] > q.num_runs:  # rows of blocks sized for the table's width
        width = 4 * p_runs * tab_s.shape[2]
        block = min(_row_block(width), rows_left)
        check_host_memory(tab_s.nbytes * 2 + _TEMP_BYTES_PER_ENTRY * block * width, what, name)
    # Answer the range unions row block by row block: the temporaries stay in cache.
    out_s, out_e = [], []
    for r0 in range(0, rows_left, block):
        ps, pe = p_starts[r0 : r0 + block], p_stops[r0 : r0 + block]
        valid = pe > ps
        a = np.where(valid, ps, 0)
        b = np.where(valid, pe, 1)
        lev = _floor_log2(np.maximum(b - a, 1))
        right = b - (np.int64(1) << lev)
        parts_s, parts_e = [], []
        if lo is not None:
            run_s, run_e = lo[r0 : r0 + block], hi[r0 : r0 + block]
            empty = run_s >= run_e  # only empty rows in the range (chained rows)
            if cross is not None:
                empty |= cross[r0 : r0 + block]
            parts_s.append(np.where(empty, n, run_s)[..., None])
            parts_e.append(np.where(empty, n, run_e)[..., None])
        if tab_s is not None:
            left_s, left_e = tab_s[lev, a], tab_e[lev, a]
            right_s, right_e = tab_s[lev, right], tab_e[lev, right]
            same = ((left_s == right_s) & (left_e == right_e)).all(axis=-1, keepdims=True)
            if cross is not None:  # the table answers only the ranges across segments
                same |= ~cross[r0 : r0 + block, :, None]
                left_s = np.where(cross[r0 : r0 + block, :, None], left_s, n)
            parts_s += [left_s, np.where(same, n, right_s)]
            parts_e += [left_e, np.where(same, n, right_e)]
        if shared is not None:
            # The same runs G in every row that has runs besides its own: G if the range holds one.
            g_s, g_e, count = shared
            hit = (count[b] - count[a] > 0)[..., None]
            parts_s.append(np.where(hit, g_s, n))
            parts_e.append(np.where(hit, g_e, n))
        s = np.concatenate(parts_s, axis=2)
        e = np.concatenate(parts_e, axis=2)
        s[~valid] = n
        e[~valid] = n
        s = s.reshape(s.shape[0], -1)
        e = e.reshape(e.shape[0], -1)
        used = (s < n).any(axis=0)  # drop columns that are padding in every row of the block
        s, e = normalize_runs(s[:, used], e[:, used], n)
        out_s.append(s)
        out_e.append(e)
    return _assemble(list(zip(out_s, out_e)), short, n, what, name)


_DIRECT_ROWS = 4096
"""The most rows of the first factor :func:`compose` answers one by one (:func:`_union_rows`) where the other rows
reach a full row (at least ``n / _SHORT_SHARE`` of them), a union table over all rows of the second factor would hold
at least :data:`_DIRECT_MIN_TABLE` entries, and twice the runs merged row by row (a review: 35-45 ns a run) are
within the limits; not where the rows' own runs need only range minima that cost less (a reflexive or chained
second factor without a union table)."""


_TABLE_MERGE_COST = 4.0
"""Candidate runs one merged run of a union table counts for (:func:`compose`'s level checks): a review measured about
95 ns a merged run against 5-25 ns a candidate run."""

_DIRECT_MIN_TABLE = float(1 << 16)
"""The fewest entries of a union table for which :func:`compose` weighs answering the rows left one by one: below
it the table is cheaper than a Python loop over the rows."""


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def _union_rows(p_starts: np.ndarray, p_stops: np.ndarray, q: IntervalMask, n_rows: int, what: str, name: str):
    """The union of the rows of `q` over the runs of each row of `p_starts`, `p_stops`, a row at a time: the rows of
    `q` its runs cover gathered together, a bounded number of runs at once, each batch merged with the union so far.
    ``(starts, stops)`` of shape ``(rows, k)`` in normal form; the product's `n_rows` x k output is checked against
    the memory as k grows."""
    n = q.n
    per_batch = max(1, _TEMP_BYTES // (_TEMP_BYTES_PER_ENTRY * q.num_runs))  # rows of q merged at once
    rows = []
    widest = 1
    for ps, pe in zip(p_starts, p_stops):
        keep = pe > ps
        covered = np.concatenate([np.arange(a, b) for a, b in zip(ps[keep], pe[keep])]) if keep.any() else None
        acc_s = np.full((1, 1), n, _INDEX)
        acc_e = np.full((1, 1), n, _INDEX)
        for c in range(0, 0 if covered is None else covered.size, per_batch):
            at = covered[c : c + per_batch]
            part_s = np.concatenate([acc_s, q.starts[at].reshape(1, -1)], axis=1)
            part_e = np.concatenate([acc_e, q.stops[at].reshape(1, -1)], axis=1)
            check_host_memory(_TEMP_BYTES_PER_ENTRY * part_s.size, what, name)
            acc_s, acc_e = normalize_runs(part_s, part_e, n)
            if acc_s.shape[1] > widest:
                widest = acc_s.shape[1]
                check_host_memory(2.0 * np.dtype(_INDEX).itemsize * n_rows * widest, f"{what}: {widest} runs", name)
        rows.append((acc_s, acc_e))
    k = max(r[0].shape[1] for r in rows)
    starts = np.full((len(rows), k), n, _INDEX)
    stops = np.full((len(rows), k), n, _INDEX)
    for i, (rs, re_) in enumerate(rows):
        starts[i, : rs.shape[1]] = rs[0]
        stops[i, : re_.shape[1]] = re_[0]
    return starts, stops


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def _assemble(blocks: list, short: np.ndarray | None, n: int, what: str, name: str) -> IntervalMask:
    """The product of :func:`compose` from the `blocks` ``(starts, stops)`` of the rows it merged, in order, and the
    full rows `short` (None: every row was merged)."""
    k = max(b[0].shape[1] for b in blocks)
    check_host_memory(2.0 * np.dtype(_INDEX).itemsize * n * k, f"{what}: its {k} runs a row", name)
    starts = np.full((n, k), n, _INDEX)
    stops = np.full((n, k), n, _INDEX)
    left = None if short is None else np.flatnonzero(~short)
    r0 = 0
    for s, e in blocks:
        at = slice(r0, r0 + s.shape[0]) if left is None else left[r0 : r0 + s.shape[0]]
        starts[at, : s.shape[1]] = s
        stops[at, : s.shape[1]] = e
        r0 += s.shape[0]
    if short is not None:
        starts[short, 0], stops[short, 0] = 0, n
    return IntervalMask(starts, stops, n, _normal=True)


class _TableGrows(Exception):
    """Raised by :func:`compose`'s union-table check where the rows left are answered row by row instead."""


class _RangeParts(NamedTuple):
    """How the rows of a second factor `q` union over a range of rows (:func:`_range_parts`)."""

    diag: tuple | None  # reflexive rows: (diag_s, diag_e, off_s, off_e) of :func:`_diagonal_runs`
    chained: tuple | None  # rows of single runs in chained segments (:func:`_chained_single_runs`)
    shared: tuple | None  # the other runs of reflexive rows, the same in every row that has them (:func:`_shared_runs`)

    @property
    def needs_table(self) -> bool:
        """Whether a union table over the rows is needed (beyond chained segments' crossings)."""
        if self.chained is not None:
            return False
        return self.diag is None or (self.diag[2] is not None and self.shared is None)


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def _range_parts(q: IntervalMask, n: int) -> _RangeParts:
    """The :class:`_RangeParts` of `q`."""
    diag = _diagonal_runs(q)
    chained = _chained_single_runs(q) if diag is None else None
    shared = _shared_runs(diag[2], diag[3], n) if diag is not None and diag[2] is not None else None
    return _RangeParts(diag, chained, shared)


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def _ranges(
    p_starts: np.ndarray, p_stops: np.ndarray, q: IntervalMask, parts: _RangeParts, levels: int, union_table: Callable
):
    """What :func:`compose` answers the range unions with: ``(lo, hi, tab_s, tab_e, shared, cross)``, the range
    minima and maxima of the runs that merge to one run (None where there are none), the union table (by
    `union_table`, None where none is needed), the runs shared by every row (None) and the runs across segments of
    chained rows (None)."""
    n = q.n
    lo = hi = tab_s = tab_e = cross = None
    shared = parts.shared
    if parts.chained is not None:
        # Single runs in chained segments (documents, chunks, strict down-sets): a range inside
        # one segment unions to one run; only ranges across segments need the union table.
        c_lo, c_hi, segment, next_full, prev_full = parts.chained
        lo, hi = _minmax_query(c_lo, c_hi, p_starts, p_stops, n, levels)
        valid = p_stops > p_starts
        first = next_full[np.where(valid, p_starts, 0)]
        last = prev_full[np.where(valid, p_stops - 1, 0)]
        cross = valid & (first <= last) & (segment[np.minimum(first, n - 1)] != segment[np.maximum(last, 0)])
        if cross.any():
            tab_s, tab_e = union_table(q.starts, q.stops)
        else:
            cross = None
    elif parts.diag is not None:
        # Reflexive rows: the runs that hold their own index merge over any range of rows into
        # one run [range-min start, range-max stop); only the other runs need the union table.
        diag_s, diag_e, off_s, off_e = parts.diag
        lo, hi = _minmax_query(diag_s, diag_e, p_starts, p_stops, n, levels)
        if off_s is not None and shared is None:
            tab_s, tab_e = union_table(off_s, off_e)
    else:
        tab_s, tab_e = union_table(q.starts, q.stops)
    return lo, hi, tab_s, tab_e, shared, cross


_SHORT_SHARE = 16
""":func:`compose` answers the rows that reach a full row at once where they are at least ``1 / _SHORT_SHARE`` of
the rows; fewer are merged like the others (the same product)."""


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def _rows_to_merge(p: IntervalMask, q: IntervalMask):
    """``(starts, stops, short)``: the runs of the rows of `p` whose product row :func:`compose` merges (padding
    columns dropped), and `short`, the rows of `p` that reach a full row of `q` (their product row is ``[0, n)``;
    None when there are none, or fewer than ``n / _SHORT_SHARE``, which are merged with the others). ``starts`` is
    None when the rows left have no run (the product is `short`'s full rows, the other rows empty)."""
    n = p.n
    ends = np.flatnonzero(q.stops[:, 0] == n)  # normal form: a full row is the one run [0, n)
    full = ends[q.starts[ends, 0] == 0]
    if full.size == 0:  # no row to reach: every row of p is merged (its normal form has no padding column)
        return p.starts, p.stops, None
    following = np.full(n + 1, n, _INDEX)  # the first full row at or after each position (n: none)
    following[full] = full
    following = np.minimum.accumulate(following[::-1])[::-1]
    short = np.zeros(n, dtype=bool)  # padding runs [n, n) hold none
    left = None  # the rows not yet found short, once they are few: a column at a time (a fresh user: a gather of
    for c in range(p.starts.shape[1]):  # all n x 257 runs took 0.85 s a product for 256 global tokens at 2^20)
        if left is None:
            short |= following[p.starts[:, c]] < p.stops[:, c]
            if 2 * np.count_nonzero(short) > n:
                left = np.flatnonzero(~short)
        elif left.size:
            hit = following[p.starts[left, c]] < p.stops[left, c]
            short[left[hit]] = True
            left = left[~hit]
    p_starts, p_stops = p.starts, p.stops
    if np.count_nonzero(short) * _SHORT_SHARE >= n:  # else merged with the others (a causal mask's last row:
        # copying the other rows cost more than the one row saves, a review: 63 -> 86 ms at n = 2^20)
        left = np.flatnonzero(~short)
        p_starts, p_stops = p.starts[left], p.stops[left]
    else:
        short = None
    used = (p_starts < n).any(axis=0)
    if not used.any():
        return None, None, short
    if used.all():
        return p_starts, p_stops, short
    return p_starts[:, used], p_stops[:, used], short


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def _full_rows(short: np.ndarray | None, n: int) -> IntervalMask:
    """The product of :func:`compose` when no row merges runs: the rows in `short` full, the others empty."""
    starts = np.full((n, 1), n, _INDEX)
    stops = np.full((n, 1), n, _INDEX)
    if short is not None:
        starts[short, 0], stops[short, 0] = 0, n
    return IntervalMask(starts, stops, n, _normal=True)


# Rows answered at a time by :func:`compose` (keeps its temporaries in cache) ...
_ROW_BLOCK = 1 << 15
# ... and fewer where the rows have many candidate runs, so that a block's temporaries stay within this.
_TEMP_BYTES = 1 << 28
_TEMP_BYTES_PER_ENTRY = 64
"""Bytes per candidate run of a row block at the peak of :func:`compose`: the candidates' starts and stops (int64,
16) and :func:`~hassejax.masks._runs.normalize_runs`' sort order, sorted copies, running maximum, masks and slots
(about 40 more)."""


def _dense_advice(n: int) -> str:
    """Where to go when the structured route refuses an `n`-position mask: the dense bit-packed route with its peak
    memory as the call's own check counts it (:data:`_DENSE_NEED`; the reachability's by default, from the interval
    form: two bool ``(n, n)`` copies, the packed closure and its two bool ``(n, n)`` arrays,
    :func:`hassejax.order._routes._dense_bytes`), or, when that does not
    fit in the free host memory either, a smaller n. The bit-packed route runs on the host (NumPy); its own check
    reads the default device's free memory, which is the host's on a CPU."""
    from ._bitpacked import bitpacked_route_bytes  # SciPy: only on this error's path

    need_of = _DENSE_NEED.get()
    # the call's own estimate (a fresh user: L*'s and flow_summary's differ from the reachability's), else the
    # reachability's: the interval form's two dense copies, then the route
    need = 2 * n * n + bitpacked_route_bytes(n, n) if need_of is None else need_of(n)
    free = host_memory_bytes()
    size = f"{need / 2**30:.3g} GiB" if need >= 2**30 else f"{need / 2**20:.3g} MiB"
    if need > _DENSE_FRACTION * free:
        return (
            f"The dense bit-packed route needs about {size} of host memory for this n ({free / 2**30:.3g} GiB is "
            "free): use a smaller n, or a machine with more memory."
        )
    return (
        f"Use the dense bit-packed route (about {size} for this n): the same call with method='bitpacked' "
        "(hassejax analyze ... --method bitpacked); or a smaller n."
    )


_DENSE_NEED: contextvars.ContextVar[Callable[[int], float] | None] = contextvars.ContextVar("dense_need", default=None)
"""The peak bytes, for `n` positions, of the dense bit-packed route of the call under way (its own memory check's
count), which :func:`_dense_advice` quotes; set by :func:`hassejax.order._route_rules.structured_or_dense` from its
caller; None: the reachability's."""


@contextlib.contextmanager
def dense_need(need: Callable[[int], float] | None):
    """Within the block, a refusal's advice quotes ``need(n)`` for the dense bit-packed route (:data:`_DENSE_NEED`):
    the estimate of the call under way's own check with ``method="bitpacked"``."""
    token = _DENSE_NEED.set(need)
    try:
        yield
    finally:
        _DENSE_NEED.reset(token)


_DENSE_FRACTION = 0.8
"""The share of the free memory a route's check allows (:func:`hassejax._checks.check_memory`'s default)."""


_MAX_CANDIDATES = float(1 << 31)
"""The most candidate runs (`r · 4 · runs(p) · runs(q)` over the `r` rows of `p` that reach no full row of `q`, whose
product rows :func:`compose` merges) one product takes: measured 5–25 ns a
candidate, so about 10–50 s at the limit (a local + strided mask at n = 16384: at most 1.0e9, 5.4 s; a dilated
window, n = 32768, 161 runs a row: 3.4e9 a product and more in the next, refused)."""


_CANDIDATE_LIMIT: contextvars.ContextVar[float] = contextvars.ContextVar("candidate_limit", default=_MAX_CANDIDATES)


_GROWING_LIMIT: contextvars.ContextVar[float | None] = contextvars.ContextVar("growing_limit", default=None)


_SLOW_AT: contextvars.ContextVar[list | None] = contextvars.ContextVar("slow_at", default=None)


@contextlib.contextmanager
def warn_when_slower_than_dense(limit: float, growing: float | None = None):
    """Within the block, the first product of :func:`compose` with more than `limit` candidate runs (or more than
    `growing`, a squaring whose runs grew in the squaring before) warns that the dense bit-packed route is likely
    faster (``method="structured"`` forced where ``"auto"`` would switch)."""
    token = _SLOW_AT.set([float(limit), False, None if growing is None else float(growing)])
    try:
        yield
    finally:
        _SLOW_AT.reset(token)


@contextlib.contextmanager
def candidate_limit(limit: float, growing: float | None = None):
    """Within the block, :func:`compose` refuses products of more than `limit` candidate runs (at most
    :data:`_MAX_CANDIDATES`), and, with `growing`, the squarings of :class:`PowerTable` of more than `growing`
    whose runs a row grew in the squaring before (runs that multiply: each squaring about 4x the candidates of the
    one before); ``method="auto"`` sets both where the dense bit-packed route is the cheaper one
    (:func:`hassejax.order._route_rules.structured_or_dense`)."""
    token = _CANDIDATE_LIMIT.set(min(float(limit), _MAX_CANDIDATES))
    grow = _GROWING_LIMIT.set(None if growing is None else float(growing))
    try:
        yield
    finally:
        _GROWING_LIMIT.reset(grow)
        _CANDIDATE_LIMIT.reset(token)


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def _row_block(width: int) -> int:
    """Rows of one block of :func:`compose` for `width` candidate runs a row: at most :data:`_ROW_BLOCK`, and few
    enough that the block's temporaries stay within :data:`_TEMP_BYTES` (a local + strided mask, 2 runs a row,
    has powers of ~45 runs, ~8,000 candidates a row: a block of all 16,384 rows needed 1 GiB for one sort alone
    and the whole product 13 GB, which a fresh-user review met as a raw MemoryError)."""
    return int(max(64, min(_ROW_BLOCK, _TEMP_BYTES // max(1, _TEMP_BYTES_PER_ENTRY * width))))


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def _minmax_query(
    lo0: np.ndarray, hi0: np.ndarray, starts: np.ndarray, stops: np.ndarray, n: int, levels: int
) -> tuple[np.ndarray, np.ndarray]:
    """For every run ``[a, b)`` of `starts`, `stops` (runs of rows of an `n`-position mask): the minimum of `lo0` and
    the maximum of `hi0` over rows ``a .. b-1``, arrays shaped like `starts` (``lo = n, hi = 0`` for padding runs).

    A sparse table streamed level by level: level ``l`` (the min/max over ``[i, i + 2^l)``)
    answers the runs of length ``[2^l, 2^(l+1))`` with two lookups, then becomes level
    ``l + 1`` in place; ``O(n)`` memory, each level one pass that stays in cache.
    """
    valid = stops > starts
    a = np.where(valid, starts, 0)
    b = np.where(valid, stops, 1)
    lev = _floor_log2(np.maximum(b - a, 1))
    right = b - (np.int64(1) << lev)
    out_lo = np.full(starts.shape, n, _INDEX)
    out_hi = np.zeros(starts.shape, _INDEX)
    lo, hi = lo0.copy(), hi0.copy()
    # Group the runs by level once (a radix sort of small keys), then answer group by group.
    flat_level = np.where(valid, lev, levels).astype(np.int8).ravel()
    order = np.argsort(flat_level, kind="stable")
    bounds = np.searchsorted(flat_level[order], np.arange(levels + 1))
    a_flat, right_flat = a.ravel(), right.ravel()
    out_lo_flat, out_hi_flat = out_lo.ravel(), out_hi.ravel()
    for level in range(levels):
        at = order[bounds[level] : bounds[level + 1]]
        if at.size:
            out_lo_flat[at] = np.minimum(lo[a_flat[at]], lo[right_flat[at]])
            out_hi_flat[at] = np.maximum(hi[a_flat[at]], hi[right_flat[at]])
        half = 1 << level
        if level + 1 < levels and half < n:
            np.minimum(lo[:-half], lo[half:], out=lo[:-half])
            np.maximum(hi[:-half], hi[half:], out=hi[:-half])
    return out_lo, out_hi


def _chained_single_runs(q: IntervalMask):
    """Rows of single runs cut into *chained segments*: maximal stretches of non-empty rows in
    which each run overlaps or touches the next one, so that the union over rows of one segment
    is one run ``[min lo, max hi)``. Returns ``(lo, hi, segment, next_full, prev_full)``: the
    runs (empty rows get ``lo = n, hi = 0``, ignored by min and max), the segment id of each
    non-empty row, and for each position the next non-empty row at or after it (``n`` if none)
    and the last one at or before it (``-1`` if none). None unless every row is at most one run.
    """
    if q.num_runs != 1:
        return None
    n = q.n
    s, e = q.starts[:, 0], q.stops[:, 0]
    full = s < e
    rows = np.flatnonzero(full)
    ss, ee = s[rows], e[rows]
    breaks = ~((ss[1:] <= ee[:-1]) & (ss[:-1] <= ee[1:]))
    segment = np.zeros(n, dtype=np.int64)
    segment[rows] = np.concatenate([[0], np.cumsum(breaks)])
    idx = np.arange(n)
    prev_full = np.maximum.accumulate(np.where(full, idx, -1))
    next_full = np.minimum.accumulate(np.where(full, idx, n)[::-1])[::-1]
    return np.where(full, s, n).astype(_INDEX), np.where(full, e, 0).astype(_INDEX), segment, next_full, prev_full


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def _shared_runs(off_s: np.ndarray, off_e: np.ndarray, n: int):
    """``(g_s, g_e, count)`` when every row with off-diagonal runs has the same ones ``G`` (sink or
    global-token columns): ``count[i]`` = rows before ``i`` that have them. None otherwise."""
    has = off_s[:, 0] < n
    rows = np.flatnonzero(has)
    if rows.size == 0:
        return None
    g_s, g_e = off_s[rows[0]], off_e[rows[0]]
    if not ((off_s[rows] == g_s).all() and (off_e[rows] == g_e).all()):
        return None
    count = np.concatenate([[0], np.cumsum(has)])
    return g_s, g_e, count


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def _diagonal_runs(q: IntervalMask):
    """For reflexive `q`: ``(diag_s, diag_e, off_s, off_e)``, the run holding each row's index
    (shape ``(n,)``) and the other runs (``(n, k - 1)``, None if no row has one); None if some
    row misses its own index."""
    n, k = q.starts.shape
    idx = np.arange(n, dtype=_INDEX)[:, None]
    holds = (q.starts <= idx) & (idx < q.stops)
    if not holds.any(axis=1).all():
        return None
    which = np.argmax(holds, axis=1)
    rows = np.arange(n)
    diag_s = q.starts[rows, which]
    diag_e = q.stops[rows, which]
    if k == 1:
        return diag_s, diag_e, None, None
    off_s = np.where(holds, n, q.starts)
    off_e = np.where(holds, n, q.stops)
    off_s, off_e = normalize_runs(off_s, off_e, n)
    if (off_s >= n).all():
        return diag_s, diag_e, None, None
    return diag_s, diag_e, off_s, off_e


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def _union_table(
    starts: np.ndarray, stops: np.ndarray, n: int, levels: int, level_built: Callable | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Level ``l``: the normalised union of the rows ``[i, i + 2^l)``, arrays ``(levels, n, k)``.

    Entries past ``n - 2^l`` are never queried. Rows are padded with ``n`` to the widest level.
    `starts`, `stops`: the rows ``(n, k)`` in normal form. `level_built(l, width before, width, bytes held)`, if
    given, is called once level ``l >= 1`` is built (it may raise, to stop a table that grows too wide).
    """
    tab_s, tab_e = [starts], [stops]
    held = 2.0 * starts.nbytes
    for level in range(1, levels):
        half = 1 << (level - 1)
        s_prev, e_prev = tab_s[-1], tab_e[-1]
        if half >= n:
            tab_s.append(s_prev)
            tab_e.append(e_prev)
            continue
        lo_s, hi_s, lo_e, hi_e = s_prev[:-half], s_prev[half:], e_prev[:-half], e_prev[half:]
        # Rows whose two halves are equal (common: the same sink or global run everywhere)
        # keep their runs; only the others are merged.
        differ = np.flatnonzero(((lo_s != hi_s) | (lo_e != hi_e)).any(axis=1))
        s_sub, e_sub = normalize_runs(
            np.concatenate([lo_s[differ], hi_s[differ]], axis=1),
            np.concatenate([lo_e[differ], hi_e[differ]], axis=1),
            n,
        )
        k = max(s_prev.shape[1], s_sub.shape[1])
        s = np.full((n, k), n, _INDEX)
        e = np.full((n, k), n, _INDEX)
        s[: n - half, : s_prev.shape[1]] = lo_s
        e[: n - half, : s_prev.shape[1]] = lo_e
        s[differ] = n
        e[differ] = n
        s[differ, : s_sub.shape[1]] = s_sub
        e[differ, : s_sub.shape[1]] = e_sub
        tab_s.append(s)
        tab_e.append(e)
        held += 2.0 * s.nbytes
        if level_built is not None:
            level_built(level, s_prev.shape[1], k, held)
    k = max(t.shape[1] for t in tab_s)
    out_s = np.full((levels, n, k), n, _INDEX)
    out_e = np.full((levels, n, k), n, _INDEX)
    for level in range(levels):
        kk = tab_s[level].shape[1]
        out_s[level, :, :kk] = tab_s[level]
        out_e[level, :, :kk] = tab_e[level]
    return out_s, out_e


class PowerTable:
    """The stored powers ``P_k = A^(2^k)`` of one adjacency ``A = M | I``, computed on demand.

    `adjacency` must contain the diagonal. ``products`` counts the Boolean products done. Each
    method takes a progress `bar` (:class:`~hassejax.order._progress.Bar`), updated once a product.
    """

    def __init__(self, adjacency: IntervalMask, *, name: str = "mask"):
        self.powers = [adjacency]
        self.closed_at: int | None = None  # k with P_k == P_(k-1): P_(k-1) is the limit R
        self.products = 0
        self.name = name
        if adjacency.n == 1:
            self.closed_at = 1
            self.powers.append(adjacency)

    def _square(self, bar: Bar) -> None:
        bar.begin()
        last = self.powers[-1]
        before = self.powers[-2].num_runs if len(self.powers) > 1 else None
        grown = before if before is not None and last.num_runs > before else None
        nxt = compose(last, last, name=self.name, grown_from=grown)
        self.products += 1
        self.powers.append(nxt)
        if nxt == last:
            self.closed_at = len(self.powers) - 1
        bar.note(f"A^{1 << (len(self.powers) - 1)}" + (" = R" if self.closed_at is not None else ""))
        bar.update()

    def limit(self, bar: Bar = NO_BAR) -> IntervalMask:
        """The reachability limit ``R`` (squaring until a square changes nothing)."""
        while self.closed_at is None:
            self._square(bar)
        return self.powers[self.closed_at]

    def power(self, num_layers: int, bar: Bar = NO_BAR) -> IntervalMask:
        """``R^(L) = A^L`` for ``L >= 1``: stored powers of the bits of ``L`` (``R`` once they reach it)."""
        top = int(num_layers).bit_length() - 1
        if self.closed_at is None or top < self.closed_at - 1:  # at most this many products
            squarings = 0 if self.closed_at is not None else max(0, top + 1 - len(self.powers))
            bar.add_total(squarings + int(num_layers).bit_count() - 1)
        while len(self.powers) <= top and self.closed_at is None:
            self._square(bar)
        if self.closed_at is not None and top >= self.closed_at - 1:
            return self.powers[self.closed_at]
        result = self.powers[top]
        for bit in range(top - 1, -1, -1):
            if (num_layers >> bit) & 1:
                bar.begin()
                result = compose(result, self.powers[bit], name=self.name)
                self.products += 1
                bar.update()
        return result

    def depth(self, bar: Bar = NO_BAR) -> int:
        """``L*``, the smallest ``L`` with ``A^L = R``: doubling, then a binary search."""
        limit = self.limit(bar)
        k = self.closed_at
        if k == 1:
            return 1
        # 2^(k-2) < L* <= 2^(k-1): keep X = A^c != R and try X ⊗ P_j for j = k-3 .. 0.
        bar.set_total(bar.n + k - 2)
        x, c = self.powers[k - 2], 1 << (k - 2)
        for j in range(k - 3, -1, -1):
            bar.begin()
            y = compose(x, self.powers[j], name=self.name)
            self.products += 1
            if y != limit:
                x, c = y, c + (1 << j)
            bar.note(f"{c + 1} <= L* <= {c + (1 << j)}")
            bar.update()
        return c + 1


def product(adjacencies: Sequence[IntervalMask], *, name: str = "layer_masks", bar: Bar = NO_BAR) -> IntervalMask:
    """``A_L ⊗ … ⊗ A_1`` for ``adjacencies = [A_1, …, A_L]`` (layer 1 acts first); `bar` counts the products."""
    bar.add_total(len(adjacencies) - 1)
    result = adjacencies[0]
    for a in adjacencies[1:]:
        bar.begin()
        result = compose(a, result, name=name)
        bar.update()
    return result
