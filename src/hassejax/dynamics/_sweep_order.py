"""Cost-ordered sweeps: members sorted by a cost estimate, chunk width chosen for little lockstep waste (private).

Under ``vmap`` an adaptive solve's loop runs until the chunk's slowest member stops, so a
chunk costs about `width × max(cost)` member-steps. A sweep given per-member cost estimates
(:func:`hassejax.dynamics.sweep`'s `cost`) sorts its members by cost (stable ``argsort``),
so each chunk holds members of similar cost, cuts the sorted batch into chunks of one width
(one compiled program), and puts the results back in the caller's order. Each member's
result is that of a solo run whatever chunk it lands in, so the results equal the unordered
sweep's.

Width: with `chunk_size=None` the fewest equal chunks (1, 2, 4, 8 or 16, at least
:data:`MIN_WIDTH` members each) whose lockstep efficiency `Σ cost / Σ_chunks width ·
max(cost in chunk)` is at least :data:`TARGET_EFFICIENCY`, else the most efficient of them.
The estimate only needs the right order and rough ratios (e.g. steps). (derived)
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import PyTree

from ..errors import ParameterError
from . import _processes

__all__ = ["plan", "member_costs", "order_batch", "restore_order", "auto_chunk_size", "TARGET_EFFICIENCY", "MIN_WIDTH"]

TARGET_EFFICIENCY = 0.9
"""The automatic width takes the fewest chunks whose estimated lockstep efficiency reaches this."""

MIN_WIDTH = 64
"""Chunks of the automatic width hold at least this many members (fewer chunks are cheaper to run)."""

CHUNK_COUNTS = (1, 2, 4, 8, 16)


def plan(cost, batch_params: PyTree, B: int, chunk_size: int | None, ndev: int):
    """`(batch in run order, permutation or None, chunk size)` for a sweep given `cost` (None: unchanged).

    The automatic chunk size (`chunk_size=None` with a cost) is taken from this process's share
    of the sorted costs (all of them with one process).
    """
    if cost is None:
        return batch_params, None, chunk_size
    costs = member_costs(cost, batch_params, B)
    ordered, perm = order_batch(batch_params, costs)
    if chunk_size is None:
        share = _processes.share_indices(B, jax.process_index(), jax.process_count())
        chunk_size = auto_chunk_size(costs[perm][share], ndev)
    return ordered, perm, chunk_size


def check_cost(cost, allow_array: bool = True) -> None:
    """Raise :class:`~hassejax.errors.ParameterError` unless `cost` is None, a callable or (if allowed) array-like."""
    if cost is None or callable(cost):
        return
    if not allow_array:
        raise ParameterError(
            "`cost` of a held Sweep must be None or a callable on the batch (give an array per call instead); "
            f"got {type(cost).__name__}."
        )


def member_costs(cost: Callable | object, batch_params: PyTree, B: int) -> np.ndarray:
    """The per-member cost estimates as a float64 NumPy array of shape `(B,)`.

    `cost` is an array-like of `B` finite non-negative numbers, or a callable taking
    `batch_params` and returning one.

    **Raises:** :class:`~hassejax.errors.ParameterError` naming `cost` for another shape, a
    non-real, negative or non-finite entry.
    """
    value = cost(batch_params) if callable(cost) else cost
    try:
        arr = np.asarray(value)
    except Exception as err:  # e.g. a tracer, or a ragged list
        raise ParameterError(f"`cost` must be a concrete array of shape ({B},); got {type(value).__name__}.") from err
    if arr.dtype.kind in "USO":  # not numbers, whatever the shape (a fresh user: cost="abc" met "one entry per member")
        raise ParameterError(
            f"`cost` must be real numbers, shape ({B},), or a callable on the batch; got {value!r:.40} (dtype {arr.dtype})."
        )
    if arr.shape != (B,):
        raise ParameterError(f"`cost` must have one entry per member, shape ({B},); got shape {arr.shape}.")
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)) or arr.dtype == bool:
        raise ParameterError(f"`cost` must be real numbers; got dtype {arr.dtype}.")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        bad = int(np.flatnonzero(~np.isfinite(arr) | (arr < 0))[0])
        raise ParameterError(f"`cost` must be finite and >= 0; got cost[{bad}] = {arr[bad]!r}.")
    return arr


@jax.jit
def _take_rows(tree: PyTree, index: jax.Array | np.ndarray) -> PyTree:
    """Rows `index` of every leaf of `tree` (outputs of one sweep, all on its devices), in one compiled program per
    tree of shapes (eagerly, one ``take`` program per leaf shape)."""
    return jax.tree_util.tree_map(lambda leaf: jnp.take(leaf, index, axis=0), tree)


def order_batch(batch_params: PyTree, costs: np.ndarray) -> tuple[PyTree, np.ndarray]:
    """`(the batch sorted by cost, the permutation)`; a stable sort, so equal costs keep their order.

    Host (NumPy) leaves are reordered on the host (they stay there), device arrays on their own devices."""
    perm = np.argsort(costs, kind="stable")
    if np.array_equal(perm, np.arange(perm.size)):
        return batch_params, perm
    on_device = any(isinstance(leaf, jax.Array) for leaf in jax.tree_util.tree_leaves(batch_params))
    index = jnp.asarray(perm) if on_device else None

    def take(leaf):  # device leaves one by one: they may be committed to different devices
        if isinstance(leaf, jax.Array):
            return jnp.take(leaf, index, axis=0)
        return np.take(np.asarray(leaf), perm, axis=0)

    return jax.tree_util.tree_map(take, batch_params), perm


def restore_order(out: PyTree, perm: np.ndarray | None) -> PyTree:
    """The outputs of the sorted batch (`out[i]` is member `perm[i]`) back in the caller's order (None: as is)."""
    if perm is None or np.array_equal(perm, np.arange(perm.size)):
        return out
    return _take_rows(out, np.argsort(perm, kind="stable"))


def _efficiency(costs: np.ndarray, width: int) -> float:
    """`Σ cost / Σ_chunks width · max(cost in chunk)` for chunks of `width` in this order (the last one padded)."""
    scale = float(costs.max()) if costs.size else 0.0
    if not scale > 0:
        return 1.0
    # scaled: sums of costs near float64's largest (1e308) overflowed with a RuntimeWarning (a fresh user)
    costs = costs / scale
    total = float(costs.sum())
    lockstep = float(width * np.maximum.reduceat(costs, np.arange(0, costs.size, width)).sum())
    return 1.0 if lockstep <= 0 else total / lockstep


def auto_chunk_size(sorted_costs: np.ndarray, ndev: int = 1) -> int:
    """The chunk width for members sorted by cost (see the module docstring), a multiple of `ndev`.

    **Example:** half the members cost 100 steps, half 10: two chunks of 64:

    >>> import numpy as np
    >>> from hassejax.dynamics._sweep_order import auto_chunk_size
    >>> auto_chunk_size(np.repeat([10.0, 100.0], 64))
    64
    """
    n = int(sorted_costs.size)
    best = None
    for k in CHUNK_COUNTS:
        width = math.ceil(math.ceil(n / k) / ndev) * ndev
        if k > 1 and width < MIN_WIDTH:
            break
        eff = _efficiency(sorted_costs, width)
        if eff >= TARGET_EFFICIENCY:
            return width
        if best is None or eff > best[0] + 1e-12:
            best = (eff, width)
    return best[1]
