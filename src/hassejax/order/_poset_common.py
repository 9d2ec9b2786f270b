"""Helpers of the poset functions (private): memory checks, shape buckets, order checks.

Small inputs are padded to a few bucket sizes (:func:`_bucket`, :func:`_pad_square`) so that
varying ``n`` or ``C`` compiles each jitted core only a few times; the checks raise
:class:`~hassejax.errors.MaskError` naming the first pair that breaks reflexivity,
transitivity or antisymmetry (spec hasse.md §1.4–1.7).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_memory
from ..errors import MaskError


def _memory(name: str, what: str, matrices: int):
    """A memory check for :func:`as_mask`: about `matrices` bytes per entry of the ``(n, n)``
    input (its copies and the kernel's arrays), from the shape alone, before any copy."""

    def check(shape: tuple[int, ...]) -> None:
        n = shape[-1]
        check_memory(matrices * n * n, f"{what} of n = {n} elements (about {matrices} bytes an entry)", name)

    return check


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


def _first(mask2d: np.ndarray) -> tuple[int, int]:
    i, j = np.argwhere(mask2d)[0]
    return int(i), int(j)


_PREORDER = "a preorder (reflexive and transitive), e.g. the output of `reachability(mask)` with num_layers=None"
_PARTIAL_ORDER = "a partial order (reflexive, antisymmetric, transitive), e.g. the output of `quotient_order`"


def _raise_not_reflexive(r: np.ndarray, name: str, what: str) -> None:
    bad = np.flatnonzero(~np.diagonal(r))
    raise MaskError(
        f"`{name}` must be {what}; got a relation that is not reflexive: "
        f"{name}[{bad[0]}, {bad[0]}] is False ({bad.size} diagonal entr{'y' if bad.size == 1 else 'ies'} False)."
    )


def _raise_not_transitive(r: np.ndarray, name: str, what: str) -> None:
    f = r.astype(np.float32)
    i, k = _first(((f @ f) > 0.5) & ~r)  # BLAS float product: exact for 0/1 entries
    j = int(np.flatnonzero(r[i] & r[:, k])[0])
    hint = " (a finite-depth R^(L) with L below the convergence depth is not transitive)" if what == _PREORDER else ""
    raise MaskError(
        f"`{name}` must be {what}; got a relation that is not transitive: "
        f"{name}[{i}, {j}] and {name}[{j}, {k}] are True but {name}[{i}, {k}] is False{hint}."
    )


def _check_preorder(r: jax.Array, violations, name: str) -> None:
    not_reflexive, not_transitive = violations
    if int(not_reflexive):
        _raise_not_reflexive(np.asarray(r), name, _PREORDER)
    if int(not_transitive):
        _raise_not_transitive(np.asarray(r), name, _PREORDER)


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


def _check_partial_order(order: jax.Array, nr, na, nt, name: str) -> None:
    if int(nr):
        _raise_not_reflexive(np.asarray(order), name, _PARTIAL_ORDER)
    if int(na):
        o = np.asarray(order)
        a, b = _first(o & o.T & ~np.eye(o.shape[0], dtype=bool))
        raise MaskError(
            f"`{name}` must be {_PARTIAL_ORDER}; got a relation that is not antisymmetric: {name}[{a}, {b}] and "
            f"{name}[{b}, {a}] are both True ({int(na)} such pair(s)). Pass the quotient by `classes`, "
            "not the preorder R itself."
        )
    if int(nt):
        _raise_not_transitive(np.asarray(order), name, _PARTIAL_ORDER)
