"""Argument normalisation and checks shared by the mask constructors (private).

Every public constructor is wrapped by :func:`checked`, which normalises its scalar and
index arguments *before* the function body runs (and therefore before any runtime type
checker on the body): a float, a bool or a string given as `n` is a
:class:`~hassejax.errors.MaskError` naming `n`, whether or not runtime type checking
is switched on. Value checks that involve several arguments live in the bodies.

Index arrays (permutations, parent pointers, segment ids) may be traced inside
``jax.jit``: concrete values are checked on the host with a detailed message, traced
values through :func:`equinox.error_if` (see :func:`require`).

The JAX-free part (:func:`checked`, :func:`integer`, :func:`index_vector`, ...) lives in
:mod:`hassejax.masks._validate` and is re-exported here; the structured constructors
(:mod:`hassejax.masks.structured`) import it from there without importing JAX.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from .._checks import check_memory
from ..errors import MaskError
from ._validate import checked, describe, index_vector, integer, is_traced, nonnegative, positive

__all__ = [
    "checked",
    "describe",
    "integer",
    "positive",
    "nonnegative",
    "index_vector",
    "is_traced",
    "require",
    "check_mask_memory",
    "index_grid",
]


def require(out, ok, message: str):
    """Check a value condition on concrete or traced data.

    `ok` is a Boolean scalar computed from the (possibly traced) inputs. Concrete and
    False: raise :class:`MaskError` with `message`. Traced: attach
    :func:`equinox.error_if` to `out` (a runtime error with `message` if `ok` is False).
    Returns `out`.
    """
    if is_traced(ok):
        return eqx.error_if(out, ~ok, message)
    if not bool(ok):
        raise MaskError(message)
    return out


def check_mask_memory(n_q: int, n_k: int, name: str = "mask", argument: str = "n") -> None:
    """Raise :class:`~hassejax.errors.MemoryBudgetError` before building an `(n_q, n_k)` mask that cannot fit.

    Counts the Boolean result plus one int32 intermediate of the same shape (5 bytes an entry).
    `name` is the constructor, `argument` the size argument the error names (a fresh user: ``causal(10**9)`` named
    `causal`, where the structured constructors name `n`); the message gives the shape it asks for.
    """
    check_memory(
        5 * n_q * n_k,
        f"{name}'s mask of shape ({n_q}, {n_k}) (bool plus int32 intermediates)",
        name=argument,
        hint="Use a smaller n, or the constructor's interval form (hassejax.masks.structured, or "
        "from_spec(..., form='intervals')): an IntervalMask needs no dense (n, n) array.",
    )


def index_grid(n_q: int, n_k: int) -> tuple[jax.Array, jax.Array]:
    """Query indices of shape `(n_q, 1)` and key indices of shape `(1, n_k)` (int32).

    Broadcasting the two builds any elementwise rule as an `(n_q, n_k)` array without a
    Python loop. Pure (use inside jitted kernels); call :func:`check_mask_memory` first.
    """
    q = jnp.arange(n_q, dtype=jnp.int32)[:, None]
    k = jnp.arange(n_k, dtype=jnp.int32)[None, :]
    return q, k
