"""Per-row key runs (private; pure NumPy, no JAX): normal form, runs of dense rows, memory estimates.

Row ``q`` of an :class:`~hassejax.masks.IntervalMask` is the half-open key runs
``[starts[q, t], stops[q, t])``. :func:`normalize_runs` brings any runs to the normal form
(sorted, non-empty, separated by at least one key, padding ``n`` last), :func:`_runs_of_rows`
reads the runs of dense Boolean rows, :func:`check_host_memory` and :func:`runs_bytes` say
what a result would cost before it is allocated. Spec hasse.md §0 conventions.
"""

from __future__ import annotations

from typing import no_type_check

import numpy as np

from .._memory import host_memory_bytes
from ..errors import MaskError, MemoryBudgetError

__all__ = ["normalize_runs", "check_host_memory", "runs_bytes", "stack_row_blocks"]


_INDEX = np.int32  # positions < 2**31; halves the memory of long-context runs


_UNCHECKED_BYTES = 16 * 2**20
"""Requests below this are not checked: reading the free memory (``/proc``, cgroup files) costs ~0.4 ms, more
than the product of two short masks itself (a property test of 600 small masks spent 6 of its 19 s there)."""


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def check_host_memory(
    required_bytes: int | float, what: str, name: str, fraction: float = 0.8, hint: str | None = None
) -> None:
    """Raise :class:`~hassejax.errors.MemoryBudgetError` before allocating `required_bytes` on the host.

    `what` describes the computation, `name` the argument it comes from, `hint` what to do instead
    (default: a smaller n or fewer key runs a row). Requests under 16 MiB pass unchecked.
    """
    if required_bytes < _UNCHECKED_BYTES:
        return
    avail = host_memory_bytes()
    if required_bytes > fraction * avail:
        hint = "Use a smaller n, or a mask with fewer key runs a row." if hint is None else hint
        raise MemoryBudgetError(
            f"`{name}`: {what} needs about {required_bytes / 2**30:.2f} GiB, but only {avail / 2**30:.2f} GiB "
            f"is available ({fraction:.0%} may be used: {fraction * avail / 2**30:.2f} GiB). {hint}"
        )


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def normalize_runs(starts: np.ndarray, stops: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Normal form of per-row runs: sort, drop empty runs, merge overlapping or touching ones.

    **Arguments:**

    - `starts`, `stops`: int arrays of shape `(m, j)`, run `t` of row `r` being the half-open
      key range ``[starts[r, t], stops[r, t])``, in any order; runs with ``start >= stop`` are
      empty and ignored. Values must lie in ``[0, n]``.
    - `n`: the number of keys (the padding value).

    **Returns:** `(starts, stops)` int32 arrays of shape `(m, k)` in normal form (module
    docstring), ``k = max(1, largest number of runs of a row)``.

    Vectorised over rows: one sort of ``j`` entries a row, a running maximum and a scatter.
    """
    starts = np.asarray(starts, dtype=_INDEX)
    stops = np.asarray(stops, dtype=_INDEX)
    m, j = starts.shape
    if m == 0 or j == 0:
        return np.full((m, 1), n, _INDEX), np.full((m, 1), n, _INDEX)
    empty = starts >= stops
    if j == 1:
        return np.where(empty, n, starts), np.where(empty, n, stops)
    if j == 2:
        return _normalize_pair(starts, stops, empty, n)
    if j <= _NETWORK_WIDTH:
        return _normalize_network(starts, stops, empty, n)
    s = np.where(empty, n, starts)
    e = np.where(empty, n, stops)
    order = np.argsort(s, axis=1, kind="stable")
    s = np.take_along_axis(s, order, axis=1)
    e = np.take_along_axis(e, order, axis=1)
    reach = np.maximum.accumulate(e, axis=1)
    valid = s < n
    new = valid.copy()
    new[:, 1:] &= s[:, 1:] > reach[:, :-1]
    # A group ends where the next entry starts a new group or is padding.
    last = valid.copy()
    last[:, :-1] &= new[:, 1:] | ~valid[:, 1:]
    counts = new.sum(axis=1)
    k = max(1, int(counts.max()))
    out_s = np.full((m, k), n, _INDEX)
    out_e = np.full((m, k), n, _INDEX)
    slot = np.cumsum(new, axis=1) - 1
    rows, cols = np.nonzero(new)
    out_s[rows, slot[rows, cols]] = s[rows, cols]
    rows, cols = np.nonzero(last)
    out_e[rows, slot[rows, cols]] = reach[rows, cols]
    return out_s, out_e


# Up to this many runs a row, normalisation works column by column (a sorting network of
# elementwise min/max over contiguous columns): about 10x faster than a per-row argsort.
_NETWORK_WIDTH = 16


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def _normalize_pair(starts, stops, empty, n) -> tuple[np.ndarray, np.ndarray]:
    """:func:`normalize_runs` for two runs a row, in closed form (same result)."""
    s = np.where(empty, n, starts)
    e = np.where(empty, n, stops)
    swap = s[:, 1] < s[:, 0]
    s0 = np.where(swap, s[:, 1], s[:, 0])
    e0 = np.where(swap, e[:, 1], e[:, 0])
    s1 = np.where(swap, s[:, 0], s[:, 1])
    e1 = np.where(swap, e[:, 0], e[:, 1])
    merge = s1 <= e0  # overlapping or touching (padding n always "touches" and changes nothing)
    out_s = np.stack([s0, np.where(merge, n, s1)], axis=1)
    out_e = np.stack([np.where(merge, np.maximum(e0, e1), e0), np.where(merge, n, e1)], axis=1)
    if (out_s[:, 1] >= n).all():
        return out_s[:, :1].copy(), out_e[:, :1].copy()
    return out_s, out_e


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def _sort_columns(cols: list[np.ndarray]) -> None:
    """Sort the list of equal-length arrays elementwise across the list, in place (insertion network)."""
    for i in range(1, len(cols)):
        for t in range(i, 0, -1):
            lo = np.minimum(cols[t - 1], cols[t])
            np.maximum(cols[t - 1], cols[t], out=cols[t])
            cols[t - 1] = lo


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def _normalize_network(starts, stops, empty, n) -> tuple[np.ndarray, np.ndarray]:
    """:func:`normalize_runs` for a few runs a row, on columns (same result)."""
    j = starts.shape[1]
    pad = np.int64(n) << 32 | np.int64(n)
    key = np.where(empty, pad, starts.astype(np.int64) << 32 | stops.astype(np.int64)).T.copy()
    cols = list(key)
    _sort_columns(cols)
    s = [c >> 32 for c in cols]
    e = [c & 0xFFFFFFFF for c in cols]
    valid = [x < n for x in s]
    reach = [e[0]]
    for t in range(1, j):
        reach.append(np.maximum(reach[-1], e[t]))
    new = [valid[0]] + [valid[t] & (s[t] > reach[t - 1]) for t in range(1, j)]
    last = [valid[t] & (new[t + 1] | ~valid[t + 1]) for t in range(j - 1)] + [valid[j - 1]]
    # Compact: group starts (and stops) to the front; the padding value n sorts last.
    gs = [np.where(new[t], s[t], n) for t in range(j)]
    ge = [np.where(last[t], reach[t], n) for t in range(j)]
    _sort_columns(gs)
    _sort_columns(ge)
    k = 1
    for t in range(j):
        if (gs[t] < n).any():
            k = t + 1
    return np.stack(gs[:k], axis=1).astype(_INDEX), np.stack(ge[:k], axis=1).astype(_INDEX)


def _checked_runs(starts, stops, n) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 1:
        raise MaskError(f"`n` must be an int >= 1 (the number of positions); got {n!r}.")
    n = int(n)
    out = []
    for name, x in (("starts", starts), ("stops", stops)):
        a = np.asarray(x)
        if a.dtype == np.bool_ or not np.issubdtype(a.dtype, np.integer):
            raise MaskError(f"`{name}` must be an integer array of key positions; got dtype {a.dtype}.")
        if a.ndim == 1:
            a = a[:, None]
        if a.ndim != 2 or a.shape[0] != n:
            raise MaskError(f"`{name}` must have shape (n,) or (n, j) with n = {n}; got shape {np.shape(x)}.")
        out.append(np.clip(a, 0, n).astype(_INDEX))  # clip first: no wrap-around in int32
    if out[0].shape != out[1].shape:
        raise MaskError(f"`starts` and `stops` must have the same shape; got {out[0].shape} and {out[1].shape}.")
    return out[0], out[1]


def _runs_of_rows(a: np.ndarray, buffer: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Normal-form runs of the Boolean rows `a` (shape ``(m, n)``): int32 ``(m, k)`` starts, stops.

    The change marks ``a[q, j] != a[q, j - 1]`` (``a[q, -1] = a[q, n] = False``) are one
    byte-wise comparison into a row buffer of width ``8 · (n // 8 + 1)``. Where marks are
    sparse the buffer is scanned 8 marks at a time (as uint64 words) and only words holding a
    mark are opened; where they are dense (most words hold one: a row of thousands of runs)
    the bytes are scanned once. A row's marks alternate run start, run stop, and every row has
    an even number of them, so the marks of the whole block alternate too. `buffer`: a reusable
    Boolean ``(>= m, width)`` array whose columns past ``n`` are False. (An int8 ``np.diff`` and
    two ``np.nonzero`` scans took 0.9–3.0 s for the rows of ``natten_2d(100, 100, 3, 3)``, this
    0.04–0.07 s; rows of 4,096 runs, n = 8192: 1.6–1.7 s, this 0.4–0.6 s.)
    """
    m, n = a.shape
    width = 8 * (n // 8 + 1)
    if buffer is None:
        buffer = np.zeros((m, width), dtype=np.bool_)
    edges = buffer[:m]
    edges[:, 0] = a[:, 0]
    np.not_equal(a[:, 1:], a[:, :-1], out=edges[:, 1:n])
    edges[:, n] = a[:, -1]
    words = edges.view(np.uint64)
    hit = np.flatnonzero(words)
    if 4 * hit.size < words.size:  # sparse marks: open only the words that hold one
        which, offset = np.nonzero(edges.reshape(-1, 8)[hit])
        flat = hit[which] * 8 + offset
        runs = np.bincount(flat[0::2] // width, minlength=m)
    else:
        flat = np.flatnonzero(edges)
        runs = np.count_nonzero(edges, axis=1) // 2
    k = max(1, int(runs.max())) if m else 1
    row = np.repeat(np.arange(m, dtype=np.int64), runs)
    base = row * width
    col_s = (flat[0::2] - base).astype(_INDEX)
    col_e = (flat[1::2] - base).astype(_INDEX)
    starts = np.full((m, k), n, _INDEX)
    stops = np.full((m, k), n, _INDEX)
    if m and int(runs.min()) == k:  # every row k runs: no scatter
        starts[:] = col_s.reshape(m, k)
        stops[:] = col_e.reshape(m, k)
    else:
        at = row * k + (np.arange(row.size) - np.repeat(np.cumsum(runs) - runs, runs))
        starts.ravel()[at] = col_s
        stops.ravel()[at] = col_e
    return starts, stops


def stack_row_blocks(parts: list[tuple[np.ndarray, np.ndarray]], n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Stack per-block runs ``(starts, stops)`` of consecutive row blocks into ``(n, k)`` arrays.

    Blocks narrower than `k` runs are padded with the empty run ``[n, n)``; each block is
    already in normal form, so the result is too.
    """
    starts = np.full((n, k), n, _INDEX)
    stops = np.full((n, k), n, _INDEX)
    r0 = 0
    for s, e in parts:
        starts[r0 : r0 + s.shape[0], : s.shape[1]] = s
        stops[r0 : r0 + s.shape[0], : s.shape[1]] = e
        r0 += s.shape[0]
    return starts, stops


def runs_bytes(n: int, k: int) -> int:
    """Bytes of an :class:`IntervalMask` with `k` runs a row."""
    return 2 * 4 * n * max(1, k)
