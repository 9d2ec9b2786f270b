"""Reachability closure of attention masks (spec hasse.md §1).

MINIMAL FIRST VERSION (to be extended: convergence depth, bit-packed route, layer masks).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool

from .._checks import as_mask


def layer_adjacency(mask: Bool[Array, "*batch n n"]) -> Bool[Array, "*batch n n"]:
    """`A = M | I`: one layer with residual connections (spec hasse.md §1.1)."""
    m = as_mask(mask)
    n = m.shape[-1]
    return m | jnp.eye(n, dtype=bool)


def _bool_matmul(x, y):
    return jnp.matmul(x.astype(jnp.float32), y.astype(jnp.float32)) > 0.5


@jax.jit
def _closure(a):
    def cond(state):
        _, changed = state
        return changed

    def body(state):
        r, _ = state
        r2 = _bool_matmul(r, r)
        return r2, jnp.any(r2 != r)

    r, _ = jax.lax.while_loop(cond, body, (a, jnp.array(True)))
    return r


def reachability(mask: Bool[Array, "*batch n n"], num_layers: int | None = None) -> Bool[Array, "*batch n n"]:
    """`R^(L) = A^L` (Boolean power), or the limit `R` when `num_layers` is None (spec hasse.md §1.2)."""
    a = layer_adjacency(mask)
    if num_layers is None:
        return _closure(a)
    r = a
    for _ in range(num_layers - 1):
        r = _bool_matmul(r, a)
    return r
