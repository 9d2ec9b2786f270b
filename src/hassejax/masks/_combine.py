"""Combinators: intersection and union of masks of the same shape."""

from __future__ import annotations

import functools
import operator

import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Shaped

from .._checks import as_mask, check_memory
from ..errors import MaskError

__all__ = ["and_masks", "or_masks"]


def _same_shape(masks: tuple, who: str) -> list:
    if not masks:
        raise MaskError(f"{who} needs at least one mask; got none (the shape of the result would be unknown).")
    def memory(shape: tuple[int, ...]) -> None:  # every input's device copy and the result, before any copy
        entries = int(np.prod(shape, dtype=object))
        check_memory((len(masks) + 1) * entries, f"{who} of {len(masks)} masks of shape {shape}", "masks")

    checked = [
        as_mask(m, name=f"masks[{i}]", square=False, batched=True, memory=memory if i == 0 else None)
        for i, m in enumerate(masks)
    ]
    shape = checked[0].shape
    for i, m in enumerate(checked[1:], start=1):
        if m.shape != shape:
            raise MaskError(
                f"{who}: every mask must have the shape of masks[0], {shape}; masks[{i}] has shape {m.shape}."
            )
    return checked


def and_masks(*masks: Shaped[ArrayLike, "..."]) -> Bool[Array, "*batch n_q n_k"]:
    """Intersection: ``M[q, k] = all(m[q, k] for m in masks)`` (attend only where every mask allows).

    Like FlexAttention's ``and_masks``, but over arrays, e.g.
    ``and_masks(sliding_window(n, 4, 4), causal(n))``.

    **Arguments:**

    - `*masks`: one or more Boolean arrays of one and the same shape `(..., n_q, n_k)`
      (no broadcasting).

    **Returns:** a Boolean array of that shape.

    **Raises:** :class:`~hassejax.errors.MaskError` for no mask, a non-Boolean mask or
    differing shapes (naming the offending position in `masks`);
    :class:`~hassejax.errors.MemoryBudgetError` (naming `masks`) if the copies and the result
    would not fit, estimated from the shape of `masks[0]` before anything is copied.
    """
    return functools.reduce(operator.and_, _same_shape(masks, "and_masks"))


def or_masks(*masks: Shaped[ArrayLike, "..."]) -> Bool[Array, "*batch n_q n_k"]:
    """Union: ``M[q, k] = any(m[q, k] for m in masks)`` (attend where some mask allows).

    Like FlexAttention's ``or_masks``, but over arrays, e.g.
    ``or_masks(causal(n), prefix_lm(n, 3))``.

    **Arguments:**

    - `*masks`: one or more Boolean arrays of one and the same shape `(..., n_q, n_k)`
      (no broadcasting).

    **Returns:** a Boolean array of that shape.

    **Raises:** :class:`~hassejax.errors.MaskError` for no mask, a non-Boolean mask or
    differing shapes (naming the offending position in `masks`);
    :class:`~hassejax.errors.MemoryBudgetError` (naming `masks`) if the copies and the result
    would not fit, estimated from the shape of `masks[0]` before anything is copied.
    """
    return functools.reduce(operator.or_, _same_shape(masks, "or_masks"))
