"""The matmul route of the closure (private): jitted Boolean products as float matmuls.

Each kernel also returns its number of Boolean products. Concrete inputs are padded to
:func:`_padded_size` (isolated positions: they change neither ``R`` nor ``L*``) so that masks of
many sizes share a few compilations. Used by :mod:`hassejax.order.reach` and
:mod:`hassejax.order.depth` (spec hasse.md §1.2–1.3).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from .._tracing import is_traced as _is_traced


def _padded_size(n: int) -> int:
    """Size the matmul kernels see: a multiple of 32 up to n = 1024 (few compilations), else n."""
    return n if n > 1024 else 32 * max(1, -(-n // 32))


def _pad(a, size: int):
    """Append ``size - n`` isolated positions (diagonal only) to the last two axes of ``a``."""
    n = a.shape[-1]
    if size == n:
        return a
    xp = jnp if _is_traced(a) else np
    widths = [(0, 0)] * (a.ndim - 2) + [(0, size - n), (0, size - n)]
    return xp.pad(a, widths) | xp.eye(size, dtype=bool)


def _unpad(r, n: int, traced: bool):
    """Cut the padding off a kernel result (on the host for concrete inputs: no per-n compile)."""
    if r.shape[-1] == n:
        return r
    if traced:
        return r[..., :n, :n]
    return jnp.asarray(np.asarray(r)[..., :n, :n])


# --------------------------------------------------------------------------------------------
# the matmul route (jitted kernels; each also returns its number of Boolean products)
# --------------------------------------------------------------------------------------------


def _matmul_dtype():
    """bfloat16 inputs on accelerators; float32 on the CPU, where XLA's bf16 dot is slower."""
    return jnp.float32 if jax.default_backend() == "cpu" else jnp.bfloat16


def _bool_matmul(x, y, dtype):
    """Boolean product ``(x ⊗ y)[i, j] = OR_k x[i, k] AND y[k, j]`` via a float matmul."""
    prod = jnp.matmul(x.astype(dtype), y.astype(dtype), preferred_element_type=jnp.float32)
    return prod > 0.5


@functools.partial(jax.jit, static_argnames="dtype")
def _closure_matmul(a, dtype):
    """The limit of ``A, A^2, A^4, …`` by repeated squaring until a square changes nothing.

    ``ceil(log2 L*) + 1`` products (the last one confirms the fixed point).
    """

    def body(state):
        r, _, count = state
        r2 = _bool_matmul(r, r, dtype)
        return r2, jnp.any(r2 != r), count + 1

    r, _, count = jax.lax.while_loop(lambda s: s[1], body, (a, jnp.array(True), jnp.int32(0)))
    return r, count


@functools.partial(jax.jit, static_argnames="dtype")
def _power_matmul(a, exponent, dtype):
    """``A^exponent`` (``exponent >= 1``, traced) by binary exponentiation with an early exit.

    Invariant: ``A^exponent = result ⊗ base^e`` (``result = I`` while ``have`` is False). If a
    squaring leaves ``base = A^(2^k)`` unchanged, ``base`` is the closure ``R`` and, as the
    remaining ``e >= 1``, ``A^exponent = R``. At most ``2 floor(log2 exponent)`` products.
    """

    def body(state):
        result, base, e, have, count = state
        bit = (e & 1) == 1

        def multiply(_):
            new = jax.lax.cond(have, lambda: _bool_matmul(result, base, dtype), lambda: base)
            return new, count + have.astype(jnp.int32)

        result, count = jax.lax.cond(bit, multiply, lambda _: (result, count), None)
        have = have | bit
        e = e >> 1

        def square(_):
            sq = _bool_matmul(base, base, dtype)
            return sq, jnp.all(sq == base), count + 1

        base2, closed, count = jax.lax.cond(e > 0, square, lambda _: (base, jnp.array(False), count), None)
        result = jnp.where(closed, base, result)
        e = jnp.where(closed, 0, e)
        return result, base2, e, have, count

    init = (a, a, jnp.asarray(exponent, jnp.int32), jnp.array(False), jnp.int32(0))
    result, _, _, _, count = jax.lax.while_loop(lambda s: s[2] > 0, body, init)
    return result, count


@functools.partial(jax.jit, static_argnames="dtype")
def _product_matmul(stacked, dtype):
    """``A_L ⊗ … ⊗ A_1`` for ``stacked = [A_1, …, A_L]`` (layer axis first), by a scan."""

    def step(r, a_l):
        return _bool_matmul(a_l, r, dtype), None

    r, _ = jax.lax.scan(step, stacked[0], stacked[1:])
    return r, jnp.int32(stacked.shape[0] - 1)


def _num_stored_powers(n: int) -> int:
    """Slots for ``P_k = A^(2^k)``, ``k = 0 … ceil(log2(max(1, n - 1))) + 1``."""
    return math.ceil(math.log2(max(1, n - 1))) + 2


def _depth_one(a, dtype):
    """``L*`` of one ``A`` (n, n): doubling, then a binary search over the stored powers.

    Doubling stores ``P_k = A^(2^k)`` until ``P_k = P_(k-1)`` (k products). Then ``L* = 1`` if
    ``k = 1``; otherwise ``2^(k-2) < L* <= 2^(k-1)`` and the search keeps ``X = A^c ≠ R`` while
    trying ``X ⊗ P_j = A^(c + 2^j)`` for ``j = k-3, …, 0`` (k − 2 products), giving ``L* = c + 1``.
    In all ``2 ceil(log2 L*)`` products for ``L* >= 2``, one for ``L* = 1``.
    """
    n = a.shape[-1]
    slots = _num_stored_powers(n)
    powers = jnp.zeros((slots, n, n), dtype=bool).at[0].set(a)

    def double(state):
        powers, k, cur, _, count = state
        nxt = _bool_matmul(cur, cur, dtype)
        powers = jax.lax.dynamic_update_index_in_dim(powers, nxt, jnp.minimum(k + 1, slots - 1), 0)
        return powers, k + 1, nxt, jnp.any(nxt != cur), count + 1

    init = (powers, jnp.int32(0), a, jnp.array(True), jnp.int32(0))
    powers, k, closure, _, count = jax.lax.while_loop(lambda s: s[3], double, init)

    def search(state):
        j, x, c, count = state
        y = _bool_matmul(x, jax.lax.dynamic_index_in_dim(powers, j, 0, keepdims=False), dtype)
        grow = jnp.any(y != closure)
        return j - 1, jnp.where(grow, y, x), c + jnp.where(grow, jnp.left_shift(1, j), 0), count + 1

    start = jnp.maximum(k - 2, 0)
    x0 = jax.lax.dynamic_index_in_dim(powers, start, 0, keepdims=False)
    c0 = jnp.where(k >= 2, jnp.left_shift(1, start), 0).astype(jnp.int32)
    _, _, c, count = jax.lax.while_loop(lambda s: s[0] >= 0, search, (k - 3, x0, c0, count))
    return jnp.where(k >= 2, c + 1, 1).astype(jnp.int32), count


@functools.partial(jax.jit, static_argnames="dtype")
def _depth_matmul(a, dtype):
    """:func:`_depth_one` over a stack ``(B, n, n)``: ``(depths, products)``, each of shape ``(B,)``."""
    return jax.vmap(lambda x: _depth_one(x, dtype))(a)
