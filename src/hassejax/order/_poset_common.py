"""Helpers of the poset functions (private): memory checks, shape buckets, order checks.

Small inputs are padded to a few bucket sizes (:func:`_bucket`, :func:`_pad_square`) so that
varying ``n`` or ``C`` compiles each jitted core only a few times; the checks
(:mod:`hassejax.order._poset_checks`, NumPy, re-exported here) raise
:class:`~hassejax.errors.MaskError` naming the first pair that breaks reflexivity,
transitivity or antisymmetry (spec hasse.md §1.4–1.7).
"""

from __future__ import annotations

from typing import no_type_check

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import as_mask, check_memory
from ._poset_checks import _check_partial_order, _check_preorder, _first  # noqa: F401 (re-exported)


def _memory(name: str, what: str, matrices: int):
    """A memory check for :func:`as_mask`: about `matrices` bytes per entry of the ``(n, n)``
    input (its copies and the kernel's arrays), from the shape alone, before any copy."""

    @no_type_check  # a closure made per call: not re-decorated by the test suite's type-check hook each time (see pyproject)
    def check(shape: tuple[int, ...]) -> None:
        n = shape[-1]
        check_memory(matrices * n * n, f"{what} of n = {n} elements (about {matrices} bytes an entry)", name)

    return check


def _as_relation(value, name: str, what: str, matrices: int, caller: str):
    """`value` checked as a concrete square Boolean relation (errors in relation wording, naming `name`) with
    :func:`_memory`'s check of `matrices` bytes an entry for `what`, as a ``jax.Array`` (see :func:`as_mask`)."""
    return as_mask(value, name, batched=False, memory=_memory(name, what, matrices), concrete=caller, relation=True)


def _bool_matmul(x, y):
    # Boolean product (X ⊗ Y)[i, j] = OR_k X[i, k] AND Y[k, j] as a float32 matmul with a
    # threshold: exact, since the sums are integers <= n < 2**24.
    return jnp.matmul(x.astype(jnp.float32), y.astype(jnp.float32)) > 0.5


# ------------------------------------------------------------------- shape buckets
# Small inputs are padded to a few bucket sizes so that varying n or C does not recompile
# every jitted core (compilation dominates below a few hundred positions). Paddings are
# chosen so that they change no result: an identity border adds isolated elements to a
# partial order; a "reaches everything" border adds one extra top class to a preorder. Large
# inputs keep their exact shapes (no host round trip, no wasted flops).

_PAD_LIMIT = 256


def _bucket(k: int) -> int:
    if k > _PAD_LIMIT:
        return k
    if k <= 64:
        return max(8, 1 << (k - 1).bit_length())  # 8, 16, 32, 64
    return -(-k // 32) * 32  # 96, 128, ..., 256


def _pad_square(x, size: int, fill: str) -> jax.Array:
    """Pad a small square Boolean matrix to `size`: ``fill`` is "zeros", "identity" or "top"."""
    k = x.shape[-1]
    if size == k:
        return jnp.asarray(x)
    out = np.zeros((size, size), dtype=bool)
    out[:k, :k] = np.asarray(x)
    if fill == "identity":
        out[np.arange(k, size), np.arange(k, size)] = True
    elif fill == "top":
        out[k:, :] = True
    return jnp.asarray(out)


def _unpad(x, k: int) -> jax.Array:
    if x.shape[-1] == k:
        return x
    a = np.asarray(x)
    return jnp.asarray(a[:k, :k] if a.ndim == 2 else a[:k])


# ----------------------------------------------------------------------------- checks


def _preorder_violations(r):
    """Counts of reflexivity and transitivity violations of a square Boolean relation."""
    not_reflexive = jnp.sum(~jnp.diagonal(r))
    not_transitive = jnp.sum(_bool_matmul(r, r) & ~r)
    return not_reflexive, not_transitive


@jax.jit
def _order_parts(order):
    """Strict order `S`, the covers `S & ~(S ⊗ S)`, and the partial-order violation counts."""
    c = order.shape[-1]
    eye = jnp.eye(c, dtype=bool)
    s = order & ~eye
    ss = _bool_matmul(s, s)
    not_reflexive = jnp.sum(~jnp.diagonal(order))
    not_antisymmetric = jnp.sum(s & s.T) // 2
    not_transitive = jnp.sum(ss & ~s)
    return s, s & ~ss, not_reflexive, not_antisymmetric, not_transitive
