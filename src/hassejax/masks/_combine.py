"""Combinators: intersection and union of masks of the same shape, or of mask_mod callables."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Shaped

from .._checks import as_mask, check_memory
from ..errors import MaskError
from ._validate import describe

__all__ = ["and_masks", "or_masks"]

MaskMod = Callable[..., object]
"""A FlexAttention-style ``mask_mod(b, h, q_idx, kv_idx) -> bool`` (True = may attend)."""


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


def _mod_name(fn: Callable) -> str:
    return getattr(fn, "__name__", None) or repr(fn)


class _CombinedMaskMod:
    """The lazy AND / OR of mask_mod callables: itself a mask_mod ``(b, h, q_idx, kv_idx) -> bool``.

    Calls every part on the same four indices and combines the Boolean results with ``&``
    (``or`` : ``|``); no part is evaluated before the combination is called. Works on JAX
    scalars (under :func:`jax.vmap`, as :func:`~hassejax.masks.from_mask_mod` calls it),
    on arrays that broadcast, and on Python or NumPy integers.
    """

    def __init__(self, who: str, op: Callable, mods: tuple[Callable, ...]):
        self._who = who
        self._op = op
        self.mask_mods = mods
        self.__name__ = self.__qualname__ = f"{who}({', '.join(_mod_name(m) for m in mods)})"
        self.__doc__ = f"{'AND' if who == 'and_masks' else 'OR'} of the mask_mods {self.__name__[len(who) + 1 : -1]}."

    def __call__(self, b, h, q_idx, kv_idx):
        out = None
        for i, mod in enumerate(self.mask_mods):
            value = jnp.asarray(mod(b, h, q_idx, kv_idx))
            if value.dtype != jnp.bool_:
                raise MaskError(
                    f"{self._who}: masks[{i}] ({_mod_name(mod)}) must return a Boolean (True = may attend); "
                    f"it returned dtype {value.dtype}."
                )
            out = value if out is None else self._op(out, value)
        return out

    @property
    def heads(self) -> int | None:
        """The heads ``0 .. heads - 1`` outside which this mask_mod attends nowhere, as its per-head parts (those of
        :func:`hassejax.kernels.to_mask_mod`, carrying ``.rule.heads``, or combined ones) give it: for AND, the
        fewest heads of such a part (a head beyond it has an all-False part); for OR, the most heads when every
        part is per-head (else ``None``: a part the same for every head, or a plain callable, may attend there)."""
        heads = [mask_mod_heads(m) for m in self.mask_mods]
        known = [h for h in heads if h is not None]
        if self._who == "and_masks":
            return min(known) if known else None
        return max(heads) if heads and len(known) == len(heads) else None

    def __repr__(self) -> str:
        return f"<mask_mod {self.__name__}>"


def mask_mod_heads(fn: Callable) -> int | None:
    """The number of heads outside which the mask_mod `fn` attends nowhere, where it is known: ``.rule.heads`` of a
    per-head function of :func:`hassejax.kernels.to_mask_mod`, or :attr:`_CombinedMaskMod.heads` of
    :func:`and_masks` / :func:`or_masks` of such functions; else ``None``."""
    heads = fn.heads if isinstance(fn, _CombinedMaskMod) else getattr(getattr(fn, "rule", None), "heads", None)
    return heads if isinstance(heads, int) and not isinstance(heads, bool) else None


def mask_mod_size(fn: Callable) -> tuple[int, str, bool] | None:
    """The fewest positions of a mask behind the mask_mod `fn`, where it is known: ``(n, part, tables)``, ``n`` the
    ``.n`` of a function of :func:`hassejax.kernels.to_mask_mod` (it carries ``.rule``), the smallest such part of
    :func:`and_masks` / :func:`or_masks`, `part` its name, `tables` whether that part reads lookup tables (beyond
    ``n`` they are read at ``q_idx % n``, the padding of a kernel's grid); else ``None``."""
    if isinstance(fn, _CombinedMaskMod):
        sizes = [s for s in (mask_mod_size(m) for m in fn.mask_mods) if s is not None]
        return min(sizes, key=lambda s: (s[0], not s[2])) if sizes else None
    rule = getattr(fn, "rule", None)
    n = getattr(rule, "n", None)
    if isinstance(n, int) and not isinstance(n, bool) and isinstance(getattr(fn, "n", None), int):
        label = getattr(rule, "label", "")
        return n, f"to_mask_mod({label})" if label else _mod_name(fn), bool(getattr(rule, "tables", ()))
    return None


def _combine(masks: tuple, who: str, op: Callable):
    if masks and callable(masks[0]):
        for i, m in enumerate(masks):
            if not callable(m):
                raise MaskError(
                    f"{who}: masks[0] is a mask_mod callable, so every mask must be one (combined lazily); "
                    f"masks[{i}] is {describe(m)}. Evaluate the callables first "
                    "(hassejax.masks.from_mask_mod(fn, n)) to combine arrays."
                )
        return _CombinedMaskMod(who, op, masks)
    for i, m in enumerate(masks):
        if callable(m):
            raise MaskError(
                f"{who}: masks[0] is an array, so every mask must be one; masks[{i}] is a mask_mod callable "
                f"({_mod_name(m)}). Evaluate it first (hassejax.masks.from_mask_mod(fn, n)) or pass only callables."
            )
    return functools.reduce(op, _same_shape(masks, who))


def and_masks(
    *masks: Shaped[ArrayLike, ...] | MaskMod,
) -> Bool[Array, "*batch n_q n_k"] | MaskMod:
    """Intersection: ``M[q, k] = all(m[q, k] for m in masks)`` (attend only where every mask allows).

    Over arrays, e.g. ``and_masks(sliding_window(n, 4, 4), causal(n))``. Over
    FlexAttention-style mask_mod callables ``(b, h, q_idx, kv_idx) -> bool`` it is lazy,
    as FlexAttention's and Hugging Face ``transformers.masking_utils``' ``and_masks``:
    the result is again a mask_mod, ``fn(b, h, q, k) = m0(b, h, q, k) & m1(b, h, q, k) & ...``,
    named ``"and_masks(m0, m1, ...)"`` after its parts (``__name__`` and repr); evaluate it
    with :func:`~hassejax.masks.from_mask_mod` or pass it on.

    **Arguments:**

    - `*masks`: one or more Boolean arrays of one and the same shape `(..., n_q, n_k)`
      (no broadcasting), or one or more mask_mod callables (all arrays or all callables).

    **Returns:** a Boolean array of that shape, or a mask_mod callable.

    **Raises:** :class:`~hassejax.errors.MaskError` for no mask, a non-Boolean mask,
    differing shapes, or arrays and callables mixed (naming the offending position in
    `masks`); when the combined mask_mod is called, if a part returns a non-Boolean
    (naming its position). :class:`~hassejax.errors.MemoryBudgetError` (naming `masks`)
    if the copies and the result would not fit, estimated from the shape of `masks[0]`
    before anything is copied.

    Source: (derived); PyTorch FlexAttention ``and_masks``.

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.masks import and_masks, causal, from_mask_mod, sliding_window
    >>> np.asarray(and_masks(sliding_window(4, 1, 1), causal(4))).astype(int)
    array([[1, 0, 0, 0],
           [1, 1, 0, 0],
           [0, 1, 1, 0],
           [0, 0, 1, 1]])
    >>> def causal_mod(b, h, q_idx, kv_idx):
    ...     return kv_idx <= q_idx
    >>> def near(b, h, q_idx, kv_idx):
    ...     return q_idx - kv_idx <= 1
    >>> fn = and_masks(causal_mod, near)
    >>> fn
    <mask_mod and_masks(causal_mod, near)>
    >>> bool(np.array_equal(from_mask_mod(fn, 4), and_masks(sliding_window(4, 1, 1), causal(4))))
    True

    ```
    """
    return _combine(masks, "and_masks", operator.and_)


def or_masks(
    *masks: Shaped[ArrayLike, ...] | MaskMod,
) -> Bool[Array, "*batch n_q n_k"] | MaskMod:
    """Union: ``M[q, k] = any(m[q, k] for m in masks)`` (attend where some mask allows).

    Over arrays, e.g. ``or_masks(causal(n), prefix_lm(n, 3))``. Over FlexAttention-style
    mask_mod callables ``(b, h, q_idx, kv_idx) -> bool`` it is lazy, as FlexAttention's
    and Hugging Face ``transformers.masking_utils``' ``or_masks``: the result is again a
    mask_mod, ``fn(b, h, q, k) = m0(b, h, q, k) | m1(b, h, q, k) | ...``, named
    ``"or_masks(m0, m1, ...)"`` after its parts (``__name__`` and repr).

    **Arguments:**

    - `*masks`: one or more Boolean arrays of one and the same shape `(..., n_q, n_k)`
      (no broadcasting), or one or more mask_mod callables (all arrays or all callables).

    **Returns:** a Boolean array of that shape, or a mask_mod callable.

    **Raises:** :class:`~hassejax.errors.MaskError` for no mask, a non-Boolean mask,
    differing shapes, or arrays and callables mixed (naming the offending position in
    `masks`); when the combined mask_mod is called, if a part returns a non-Boolean
    (naming its position). :class:`~hassejax.errors.MemoryBudgetError` (naming `masks`)
    if the copies and the result would not fit, estimated from the shape of `masks[0]`
    before anything is copied.

    Source: (derived); PyTorch FlexAttention ``or_masks``.

    **Example:** a causal mask with a bidirectional prefix of 2 (``prefix_lm``):

    ```python
    >>> import numpy as np
    >>> from hassejax.masks import causal, from_mask_mod, or_masks, prefix_lm
    >>> def causal_mod(b, h, q_idx, kv_idx):
    ...     return kv_idx <= q_idx
    >>> def prefix(b, h, q_idx, kv_idx):
    ...     return kv_idx < 2
    >>> fn = or_masks(causal_mod, prefix)
    >>> fn.__name__
    'or_masks(causal_mod, prefix)'
    >>> np.asarray(from_mask_mod(fn, 4)).astype(int)
    array([[1, 1, 0, 0],
           [1, 1, 0, 0],
           [1, 1, 1, 0],
           [1, 1, 1, 1]])
    >>> bool(np.array_equal(from_mask_mod(fn, 4), or_masks(causal(4), prefix_lm(4, 2))))
    True

    ```
    """
    return _combine(masks, "or_masks", operator.or_)
