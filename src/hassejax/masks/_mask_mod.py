"""Evaluate a FlexAttention-style ``mask_mod`` over an index grid (private)."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from ..errors import MaskError
from ._args import describe

__all__ = ["evaluate_mask_mod"]


def evaluate_mask_mod(fn: Callable, q_idx: jax.Array, kv_idx: jax.Array, b: int, h: int, name: str) -> jax.Array:
    """``out[i, j] = fn(b, h, q_idx[i], kv_idx[j])`` for int32 vectors `q_idx`, `kv_idx`.

    `fn` sees int32 scalars, as FlexAttention's ``create_mask`` gives them; the grid is
    built with two nested :func:`jax.vmap` (no Python loop). The result must be a Boolean
    scalar per pair; anything else is a :class:`MaskError` naming `name`.
    """
    if not callable(fn):
        raise MaskError(
            f"`{name}` must be a callable (b, h, q_idx, kv_idx) -> bool; got {describe(fn)}."
        )
    b_arr = jnp.asarray(b, dtype=jnp.int32)
    h_arr = jnp.asarray(h, dtype=jnp.int32)

    def row(q):
        return jax.vmap(lambda k: jnp.asarray(fn(b_arr, h_arr, q, k)))(kv_idx)

    try:
        out = jax.vmap(row)(q_idx)
    except MaskError:
        raise
    except Exception as exc:  # noqa: BLE001 - re-raised with context below
        raise MaskError(
            f"`{name}` raised {type(exc).__name__} when evaluated on traced int32 scalar indices "
            f"(b, h, q_idx, kv_idx) under jax.vmap: {exc}. Write it with jnp operations "
            "(jnp.where / & / | instead of Python if / and / or)."
        ) from exc
    want = (q_idx.shape[0], kv_idx.shape[0])
    if out.shape != want:
        raise MaskError(
            f"`{name}` must return one Boolean scalar per (q_idx, kv_idx) pair; evaluated over the grid it "
            f"gave shape {out.shape} instead of {want} (per pair: shape {out.shape[2:]})."
        )
    if out.dtype != jnp.bool_:
        raise MaskError(
            f"`{name}` must return a Boolean (True = may attend); it returned dtype {out.dtype}. "
            "Compare explicitly (e.g. `q_idx >= kv_idx`) or cast with `.astype(bool)` if 0/1 means blocked/allowed."
        )
    return out
