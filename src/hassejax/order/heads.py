"""The heads of one layer: a layer's mask is the OR of its heads' masks (spec hasse.md §1.1).

Output ``i`` of a multi-head layer depends on input ``j`` iff some head lets ``i`` attend to
``j``: :func:`heads_union` gives the layer's mask, and the `head_axis` argument of
:func:`~hassejax.order.reachability`, :func:`~hassejax.order.convergence_depth`,
:meth:`~hassejax.order.HasseDiagram.from_mask` and :func:`~hassejax.order.flow_summary` calls it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool

from .._checks import check_memory
from .._mask_checks import NestedMask, as_bool_advice, refuse_unread_arrays, refuse_unread_nested
from .._tracing import is_traced as _is_traced
from ..errors import MaskError, ParameterError
from ..masks._intervals import IntervalMask, check_host_memory
from ._prepare import _as_intervals
from ._routes import _dense_memory

__all__ = ["heads_union"]


# --------------------------------------------------------------------------------------------
# heads of one layer (spec hasse.md §1.1: a layer's adjacency is the OR of its heads' masks, | I)
# --------------------------------------------------------------------------------------------


def _check_head_axis(head_axis, shape: tuple[int, ...], name: str, *, layer_axis: bool = False) -> int:
    """Normalise `head_axis`, an axis of one layer's mask, to an axis of `name` (shape `shape`).

    With `layer_axis`, `shape` has a leading layer axis that `head_axis` does not count.
    """
    if isinstance(head_axis, (bool, np.bool_)) or not isinstance(head_axis, (int, np.integer)):
        raise ParameterError(
            f"`head_axis` must be None or an int (the axis of one layer's mask that holds its heads); got "
            f"{head_axis!r} of type {type(head_axis).__name__}."
        )
    one = shape[1:] if layer_axis else shape
    ndim = len(one)
    whose = f"one layer's mask of `{name}`" if layer_axis else f"`{name}`"
    where = f"shape {one} after the leading layer axis" if layer_axis else f"shape {one}"
    if ndim < 3:
        raise ParameterError(
            f"`head_axis` = {int(head_axis)} needs {whose} to have a head axis before its last two (query, key) "
            f"axes, i.e. rank >= 3 (heads, n, n); got {where} (rank {ndim})."
        )
    axis = int(head_axis) + ndim if head_axis < 0 else int(head_axis)
    if not 0 <= axis < ndim - 2:
        raise ParameterError(
            f"`head_axis` must be an axis of {whose} before its last two (query, key) axes: one of 0 .. {ndim - 3} "
            f"or {-ndim} .. -3 (counted like NumPy) for {where}; got {int(head_axis)}."
        )
    return axis + 1 if layer_axis else axis


def _interval_heads_union(heads, head_axis, name: str) -> IntervalMask:
    """OR of a sequence of heads at least one of which is an :class:`IntervalMask` (``head_axis=0``)."""
    if (
        isinstance(head_axis, (bool, np.bool_))
        or not isinstance(head_axis, (int, np.integer))
        or head_axis not in (0, -3)
    ):
        raise ParameterError(
            f"`head_axis` must be 0 (or -3, as for a (heads, n, n) array) for `{name}` given as a sequence of "
            f"IntervalMask heads (the sequence is the head axis); got {head_axis!r}."
        )
    heads = [_as_intervals(m, f"{name}[{h}]") for h, m in enumerate(heads)]
    ns = sorted({m.n for m in heads})
    if len(ns) != 1:
        raise MaskError(f"`{name}`: the heads of one layer must all have the same n; got n in {ns}.")
    check_host_memory(3 * sum(m.nbytes for m in heads), f"the union of {len(heads)} interval heads", name)
    return IntervalMask.union(heads)  # one merge of every head's runs (`|` in turn merged them again and again)


def _heads_union(mask, head_axis, name: str = "mask", *, batched: bool = True, layer_axis: bool = False, memory=None):
    """The OR of the heads of `mask` along `head_axis` (the body of :func:`heads_union`).

    Concrete NumPy input gives a NumPy result, a ``jax.Array`` or a tracer a ``jax.Array`` (no
    full-size copy either way); a sequence holding an :class:`IntervalMask` gives an
    :class:`IntervalMask`. `memory` (see :func:`_dense_memory`) runs on the shape of the union
    before it is computed; with `layer_axis`, `mask` is a stack ``(L, …)`` of layers and
    `head_axis` counts the axes of one layer. Without `batched`, one layer's mask must be
    ``(heads, n, n)``.
    """
    if isinstance(mask, IntervalMask):
        raise ParameterError(
            f"`head_axis` = {head_axis!r} asks for the heads of `{name}`, but `{name}` is a single IntervalMask "
            "(one head). Pass the heads of a layer as a tuple of IntervalMask with head_axis=0, or head_axis=None."
        )
    nested = isinstance(mask, (list, tuple))
    if nested:
        if len(mask) == 0:
            raise MaskError(
                f"`{name}` must hold at least one head along `head_axis`; got an empty {type(mask).__name__}."
            )
        if any(isinstance(m, IntervalMask) for m in mask):
            if layer_axis:
                raise MaskError(
                    f"`{name}` must be a sequence of layers or a stacked array; got a sequence of IntervalMask."
                )
            return _interval_heads_union(mask, head_axis, name)
        refuse_unread_nested(mask, name)
        try:
            shapes = [tuple(np.shape(m)) for m in mask]
        except ValueError:  # a ragged head of nested lists (NumPy's "inhomogeneous shape"; a review)
            raise MaskError(
                f"`{name}`: got nested lists that are not rectangular (a head with rows of other lengths)."
            ) from None
        if any(sh != shapes[0] for sh in shapes[1:]):
            bad = next(i for i, sh in enumerate(shapes) if sh != shapes[0])
            raise MaskError(
                f"`{name}`: the heads of one layer must all have the same shape; `{name}[0]` has shape {shapes[0]} "
                f"but `{name}[{bad}]` has shape {shapes[bad]}."
            )
        mask = np.asarray(mask)
    refuse_unread_arrays(mask, name)
    if not hasattr(mask, "shape") or not hasattr(mask, "dtype"):
        raise MaskError(
            f"`{name}` must be a Boolean array with a head axis, e.g. of shape (heads, n, n), or a sequence of "
            f"IntervalMask heads; got an object of type {type(mask).__name__}."
        )
    shape = tuple(mask.shape)
    axis = _check_head_axis(head_axis, shape, name, layer_axis=layer_axis)
    if not batched and len(shape) != 3:
        raise MaskError(
            f"`{name}` with `head_axis` must have shape (heads, n, n) here (one layer's heads, no batch axes); "
            f"got shape {shape}."
        )
    if shape[axis] == 0:
        raise MaskError(
            f"`{name}` must hold at least one head along `head_axis` = {int(head_axis)}; got shape {shape}."
        )
    if mask.dtype != np.bool_:
        raise MaskError(
            f"`{name}` must have dtype bool (True = may attend); got dtype {mask.dtype}. Convert explicitly, "
            f"e.g. `{as_bool_advice(name, nested)}` for 0/1 'may attend' masks."
        )
    reduced = shape[:axis] + shape[axis + 1 :]
    if _is_traced(mask):
        return jnp.any(mask, axis=axis)
    if memory is not None and len(reduced) >= 2 and min(reduced[-2:]) > 0:
        memory(reduced)  # the caller's estimate for the union's shape; shape errors come from as_mask later
    if isinstance(mask, jax.Array):
        check_memory(math.prod(reduced), f"the union of {shape[axis]} heads, shape {reduced}", name)
        return jnp.any(mask, axis=axis)  # on the device; no host copy of the heads
    check_host_memory(math.prod(reduced), f"the union of {shape[axis]} heads, shape {reduced}", name)
    return np.any(np.asarray(mask), axis=axis)


def heads_union(
    mask: Bool[ArrayLike, "*batch_heads n n"] | Sequence[IntervalMask | Bool[ArrayLike, "n n"]] | NestedMask,
    head_axis: int,
) -> Bool[Array, "*batch n n"] | IntervalMask:
    """One layer's mask from its heads' masks: their OR along `head_axis` (spec hasse.md §1.1).

    Output ``i`` of a multi-head layer depends on input ``j`` iff some head lets ``i`` attend
    to ``j``, so a layer whose heads have masks ``M_1 … M_H`` has the adjacency
    ``(M_1 | … | M_H) | I``: the union of the heads is the layer's mask for everything in
    :mod:`hassejax.order`. :func:`reachability`, :func:`convergence_depth`,
    :meth:`~hassejax.order.HasseDiagram.from_mask` and :func:`~hassejax.order.flow_summary`
    call this for their `head_axis` argument.

    **Arguments:**

    - `mask`: bool array with a head axis, e.g. `(heads, n, n)` or `(*batch, heads, n, n)`;
      row = query, column = key, True = may attend. Or a sequence of heads
      ``[M_1, …, M_H]`` of which at least one is an :class:`~hassejax.masks.IntervalMask`
      (the others, dense `(n, n)`, are converted), with ``head_axis=0``.
    - `head_axis`: the axis of `mask` that holds the heads (negative counts from the end, as in
      NumPy); never one of the last two (query, key) axes.

    **Returns:** bool array of the shape of `mask` without `head_axis`; an
    :class:`~hassejax.masks.IntervalMask` for interval heads.

    **Raises:**

    - :class:`~hassejax.errors.ParameterError`: `head_axis` not an int, out of range, one of the
      last two axes, or not 0 for interval heads; a single :class:`~hassejax.masks.IntervalMask`.
    - :class:`~hassejax.errors.MaskError`: no heads, a non-Boolean mask, interval heads of
      different ``n``.
    - :class:`~hassejax.errors.MemoryBudgetError`: the union and its copies would not fit in the
      free memory (estimated from the shape before anything is copied).

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.order.closure import heads_union
    >>> heads = np.stack([np.eye(3, k=-1, dtype=bool), np.eye(3, k=-2, dtype=bool)])
    >>> heads_union(heads, 0).astype(int).tolist()    # head 0 sees i - 1, head 1 sees i - 2
    [[0, 0, 0], [1, 0, 0], [1, 1, 0]]

    ```

    Source: spec hasse.md §1.1 (the union of a layer's heads is (derived) from the layer's
    output being a sum over heads).
    """
    memory = _dense_memory("mask", "the union of the heads", route=False)
    union = _heads_union(mask, head_axis, "mask", memory=memory)
    return union if isinstance(union, IntervalMask) else jnp.asarray(union)
