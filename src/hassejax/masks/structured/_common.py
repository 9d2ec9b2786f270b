"""Helpers of the structured constructors (private): memory budget, wrapping runs, concrete arguments.

JAX-free like the whole :mod:`hassejax.masks.structured` package; spec hasse.md §0 conventions (row = query, column = key, True = may attend).
"""

from __future__ import annotations

import numpy as np

from ...errors import MaskError
from .._intervals import IntervalMask
from .._runs import _INDEX, check_host_memory, normalize_runs
from .._validate import (
    index_vector,
    is_traced,
)

# ---------------------------------------------------------------------------------- helpers


def _budget(
    rows: int,
    runs: int,
    fn: str,
    args: str = "n",
    hint: str | None = None,
    bytes_per_run: int = 48,
    rows_are: str = "in all",
) -> None:
    """Raise MemoryBudgetError (naming the arguments `args`, comma separated, that set the size) before `fn`
    builds `rows` rows of `runs` runs (`bytes_per_run` at the peak: int64 work arrays included by default); `hint`
    says what to do instead; `rows_are` what the rows are, after their count in the message."""
    check_host_memory(
        float(bytes_per_run) * rows * max(1, runs),
        f"the interval form of {fn} ({rows} rows {rows_are}, up to {runs} key runs a row)",
        "`, `".join(a.strip() for a in args.split(",")),
        hint=hint,
    )


def _positions(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.int64)


def _as_mask(starts: np.ndarray, stops: np.ndarray, n: int, *, normal: bool) -> IntervalMask:
    """Wrap per-row runs (shape `(rows,)` or `(rows, j)`) in an :class:`IntervalMask`.

    ``normal=True``: the caller guarantees sorted, disjoint, separated runs with the empty
    ones last; empty runs are set to the padding ``n`` and all-empty trailing columns are
    dropped. Otherwise :func:`normalize_runs` sorts and merges them.
    """
    starts = np.asarray(starts)
    stops = np.asarray(stops)
    if starts.ndim == 1:
        starts, stops = starts[:, None], stops[:, None]
    if not normal:
        starts, stops = normalize_runs(starts, stops, n)
        return IntervalMask(starts, stops, n, _normal=True)
    used = starts < stops
    per_column = np.flatnonzero(used.any(axis=0))
    k = int(per_column[-1]) + 1 if per_column.size else 1
    starts, stops, used = starts[:, :k], stops[:, :k], used[:, :k]
    if not used.all() and ((starts[~used] != n).any() or (stops[~used] != n).any()):
        starts = np.where(used, starts, n)
        stops = np.where(used, stops, n)
    return IntervalMask(starts.astype(_INDEX, copy=False), stops.astype(_INDEX, copy=False), n, _normal=True)


def _concrete(value, name: str):
    if is_traced(value):
        raise MaskError(
            f"`{name}` must be concrete: structured masks are built on the host with NumPy, not under "
            "jax.jit; call the dense constructor of hassejax.masks inside jit."
        )
    return value


def _concrete_index_vector(value, name: str):
    return _concrete(index_vector(value, name), name)
