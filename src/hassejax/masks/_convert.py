"""Converters from foreign mask conventions (spec hasse.md §0: converted explicitly, never guessed)."""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Shaped

from ..errors import MaskError
from ._args import check_mask_memory, checked, describe, integer, is_traced, positive, require
from ._mask_mod import evaluate_mask_mod

__all__ = ["from_mask_mod", "from_additive_bias", "from_blocked"]


def _optional_positive(value, name: str):
    return None if value is None else positive(value, name)


def _int_arg(value, name: str) -> int:
    return integer(value, name)


def _array_arg(value, name: str):
    if isinstance(value, (list, tuple)):
        value = np.asarray(value)
    if not (hasattr(value, "shape") and hasattr(value, "dtype")):
        raise MaskError(f"`{name}` must be an array of shape (..., n_q, n_k); got {describe(value)}.")
    if value.ndim < 2:
        raise MaskError(
            f"`{name}` must have rank >= 2, shape (..., n_q, n_k); got shape {tuple(value.shape)} (rank {value.ndim}). "
            "A key-padding vector `pad` of shape (n_k,) is a mask after broadcasting: "
            "`jnp.broadcast_to(pad, (n_q, n_k))`."
        )
    if value.shape[-1] == 0 or value.shape[-2] == 0:
        raise MaskError(f"`{name}` must have at least one query and one key; got shape {tuple(value.shape)}.")
    return value


def _first_bad(bad, value) -> str:
    """Index and value of the first True entry of `bad` in a concrete array."""
    bad_np = np.asarray(bad)
    where = tuple(int(i) for i in np.argwhere(bad_np)[0])
    return f"{int(bad_np.sum())} such entr{'y' if bad_np.sum() == 1 else 'ies'}, first at index {where}: {np.asarray(value)[where].item()!r}"


def _callable_arg(value, name: str):
    if not callable(value):
        raise MaskError(f"`{name}` must be a callable (b, h, q_idx, kv_idx) -> bool; got {describe(value)}.")
    return value


@checked(fn=_callable_arg, n=positive, n_kv=_optional_positive, b=_int_arg, h=_int_arg)
def from_mask_mod(fn: Callable, n: int, n_kv: int | None = None, b: int = 0, h: int = 0) -> Bool[Array, "n_q n_k"]:
    """Evaluate a FlexAttention-style ``mask_mod(b, h, q_idx, kv_idx) -> bool`` on the full grid.

    ``M[q, k] = fn(b, h, q, k)`` for ``q < n``, ``k < n_kv``. `fn` receives int32 scalars
    (traced) and must be written with jnp operations; the grid is evaluated with two
    nested :func:`jax.vmap`, as PyTorch's ``create_mask`` does with ``torch.vmap``. The
    FlexAttention convention is this package's: True = may attend.

    **Arguments:**

    - `fn`: the mask_mod, a callable ``(b, h, q_idx, kv_idx) -> bool``.
    - `n`: number of queries, an integer >= 1.
    - `n_kv`: number of keys, an integer >= 1 (default: `n`, a square mask).
    - `b`, `h`: batch and head index passed to `fn` (default 0).

    **Returns:** a Boolean array of shape `(n, n_kv)`.

    **Raises:** :class:`~hassejax.errors.MaskError` if `fn` is not callable, raises while
    traced (e.g. Python ``if`` on an index), or returns something other than one
    Boolean per pair (an int, a float, a vector); or if a size is not an integer >= 1.

    **Example:** ``from_mask_mod(lambda b, h, q, k: q >= k, 4)`` equals ``causal(4)``.
    """
    n_kv = n if n_kv is None else n_kv
    check_mask_memory(n, n_kv, "from_mask_mod")
    q_idx = jnp.arange(n, dtype=jnp.int32)
    kv_idx = jnp.arange(n_kv, dtype=jnp.int32)
    return evaluate_mask_mod(fn, q_idx, kv_idx, b, h, "fn")


def _threshold_arg(value, name: str):
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise MaskError(f"`{name}` must be None or a negative number (entries <= it are blocked); got {describe(value)}.")
    value = float(value)
    if not value < 0:
        raise MaskError(f"`{name}` must be None or a negative number (entries <= it are blocked); got {value}.")
    return value


@checked(bias=_array_arg, threshold=_threshold_arg)
def from_additive_bias(
    bias: Shaped[ArrayLike, "*batch n_q n_k"], threshold: float | None = None
) -> Bool[Array, "*batch n_q n_k"]:
    """Boolean mask from an additive attention bias: ``M = (bias == 0)``, blocked where ``bias == -inf``.

    Softmax attention adds the bias to the logits: `0` keeps a key, `-inf` removes it.
    Only a *binary* bias is a mask; every entry must be exactly `0` (True) or `-inf`
    (False). Libraries that block with a large finite negative number instead (HF
    transformers uses ``torch.finfo(dtype).min``, others `-1e9`) need `threshold`: then
    every entry ``<= threshold`` counts as blocked. Anything else (positive values,
    small negative values such as ALiBi distances, NaN) is not a mask and an error.

    **Arguments:**

    - `bias`: real array of shape `(..., n_q, n_k)` (any float or integer dtype).
    - `threshold`: ``None`` (default: only `-inf` blocks) or a negative number: entries
      ``<= threshold`` block.

    **Returns:** a Boolean array of the same shape (True = may attend).

    **Raises:** :class:`~hassejax.errors.MaskError` for a Boolean or complex dtype, a rank
    below 2, a non-negative `threshold`, or an entry that is neither `0` nor blocked
    (the message gives how many, the first index and its value). Traced inputs are
    checked with :func:`equinox.error_if`.
    """
    dtype = bias.dtype
    if dtype == np.bool_ or not (jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer)):
        raise MaskError(
            f"`bias` must have a real (float or integer) dtype; got dtype {dtype}. "
            "A Boolean array is already a mask (True = may attend); use it directly."
        )
    check_mask_memory(int(np.prod(bias.shape[:-1])), bias.shape[-1], "from_additive_bias")
    x = jnp.asarray(bias)
    allowed = x == 0
    blocked = (x == -jnp.inf) if threshold is None else (x <= threshold)
    bad = ~(allowed | blocked)
    rule = "exactly 0 (may attend) or -inf (blocked)" if threshold is None else f"exactly 0 or <= threshold={threshold}"
    if not is_traced(bad) and bool(jnp.any(bad)):
        hint = "" if threshold is not None else " For a finite blocking value (e.g. finfo.min or -1e9) pass `threshold`."
        raise MaskError(f"`bias` entries must be {rule}; got {_first_bad(bad, x)}.{hint}")
    return require(allowed, ~jnp.any(bad), f"`bias` entries must be {rule}.")


@checked(blocked=_array_arg)
def from_blocked(blocked: Shaped[ArrayLike, "*batch n_q n_k"]) -> Bool[Array, "*batch n_q n_k"]:
    """Boolean mask from a "1 = cannot attend" mask: ``M = (blocked == 0)``.

    The convention of XLNet's ``perm_mask`` (``perm_mask[i, j] = 1``: `i` cannot attend
    to `j`), of padding masks and of PyTorch ``nn.MultiheadAttention``'s Boolean
    ``attn_mask`` (True = not allowed). Values must be 0/1 only (bool, integer or float
    dtype), so that a 0/1 "may attend" mask or a bias is never taken for one silently.

    **Arguments:**

    - `blocked`: array of shape `(..., n_q, n_k)` holding only 0 and 1 (or False/True);
      1 = blocked.

    **Returns:** a Boolean array of the same shape, ``~blocked`` (True = may attend).

    **Raises:** :class:`~hassejax.errors.MaskError` for a rank below 2, a complex or
    non-numeric dtype, or a value other than 0/1 (the message gives the first one).
    Traced inputs are checked with :func:`equinox.error_if`.
    """
    dtype = blocked.dtype
    if not (dtype == np.bool_ or jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer)):
        raise MaskError(f"`blocked` must have a bool, integer or float dtype holding 0/1; got dtype {dtype}.")
    check_mask_memory(int(np.prod(blocked.shape[:-1])), blocked.shape[-1], "from_blocked")
    x = jnp.asarray(blocked)
    if dtype == np.bool_:
        return ~x
    bad = ~((x == 0) | (x == 1))
    if not is_traced(bad) and bool(jnp.any(bad)):
        raise MaskError(f"`blocked` must hold only 0 (may attend) and 1 (blocked); got {_first_bad(bad, x)}.")
    return require(x == 0, ~jnp.any(bad), "`blocked` must hold only 0 (may attend) and 1 (blocked).")
