"""Banded masks: sliding window, dilated sliding window, global + sliding window (Longformer).

Convention (spec hasse.md §0): row = query q, column = key k, True = may attend.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Int

from ._args import check_mask_memory, checked, index_grid, is_traced, nonnegative, positive, require
from ._validate import global_flags, global_positions_arg

__all__ = ["sliding_window", "dilated", "global_sliding"]


@functools.partial(jax.jit, static_argnames=("n",))
def _sliding_window(n, left, right):
    q, k = index_grid(n, n)
    return (k >= q - left) & (k <= q + right)


@functools.partial(jax.jit, static_argnames=("n",))
def _dilated(n, window, dilation):
    q, k = index_grid(n, n)
    dist = jnp.abs(q - k)
    return (dist <= window) & (dist % dilation == 0)


@jax.jit
def _global_sliding(g, window):
    n = g.shape[0]
    q, k = index_grid(n, n)
    return (jnp.abs(q - k) <= window) | g[:, None] | g[None, :]


@functools.partial(jax.jit, static_argnames=("n",))
def _flags_from_indices(idx, n):
    return jnp.zeros((n,), dtype=bool).at[idx].set(True, mode="drop")


@checked(n=positive, left=nonnegative, right=nonnegative)
def sliding_window(n: int, left: int, right: int = 0) -> Bool[Array, "n n"]:
    """Sliding-window (local) mask: ``M[q, k] = q - left <= k <= q + right``.

    Query `q` sees the keys `q - left .. q + right` (cut at the sequence ends), itself
    included: `left + right + 1` keys in the interior. `right = 0` (the default) is the
    causal sliding window. Libraries count "window" differently; the same mask in each:

    | library call | its rule | keys per row | ours |
    |---|---|---|---|
    | attention-gym `generate_sliding_window(W)` | `k <= q and q - k <= W` | `W + 1` | `sliding_window(n, left=W)` |
    | xformers `BlockDiagonalCausalLocalAttentionMask(W)`; HF transformers `sliding_window=W` (`sliding_window_overlay(W)` and causal) | `q - W < k <= q` | `W` | `sliding_window(n, left=W - 1)` |
    | JAX `dot_product_attention(local_window_size=(l, r))`, JAX `LocalMask` | `q - l <= k <= q + r` | `l + r + 1` | `sliding_window(n, left=l, right=r)` |

    (keys per row: in the interior, away from the sequence ends.)

    A causal window where each query sees itself and the `w` previous keys
    (``left=w``) has convergence depth ``ceil((n - 1) / w)`` (spec hasse.md §1.3).

    **Arguments:**

    - `n`: sequence length, an integer >= 1.
    - `left`: keys seen before the query, an integer >= 0.
    - `right`: keys seen after the query, an integer >= 0 (default 0: causal).

    **Returns:** a Boolean array of shape `(n, n)`.

    **Raises:** :class:`~hassejax.errors.MaskError` if `n` is not an integer >= 1 or
    `left`/`right` is not an integer >= 0.

    **Example:** a causal window of one previous key, then a symmetric one (rows cut at the ends):

    ```python
    >>> from hassejax.masks import sliding_window
    >>> sliding_window(5, left=1).astype(int).tolist()
    [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 1, 1, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 1, 1]]
    >>> sliding_window(5, left=1, right=1).sum(axis=1).tolist()
    [2, 3, 3, 3, 2]

    ```

    **References:** mask gallery rows "sliding window W", "local (left, right)", "causal
    local W"; Beltagy et al., "Longformer", arXiv:2004.05150; Jiang et al., "Mistral 7B",
    arXiv:2310.06825.
    """
    check_mask_memory(n, n, "sliding_window")
    # beyond n - 1 a wider window changes nothing; clipping keeps int32 arithmetic and the jit cache small
    return _sliding_window(n=n, left=min(left, n), right=min(right, n))


@checked(n=positive, window=nonnegative, dilation=positive)
def dilated(n: int, window: int, dilation: int) -> Bool[Array, "n n"]:
    """Dilated sliding window: ``M[q, k] = |q - k| <= window and |q - k| % dilation == 0``.

    attention-gym's ``generate_dilated_sliding_window(window, dilation)``: a symmetric
    window of radius `window` keeping every `dilation`-th offset (the diagonal always).
    `dilation = 1` is the symmetric ``sliding_window(n, window, window)``.

    **Arguments:**

    - `n`: sequence length, an integer >= 1.
    - `window`: radius `W`, an integer >= 0.
    - `dilation`: step `d`, an integer >= 1.

    **Returns:** a Boolean array of shape `(n, n)`, symmetric.

    **Raises:** :class:`~hassejax.errors.MaskError` for a bad `n`, a `window` < 0 or a
    `dilation` < 1.

    **Example:** radius 2 keeping every second offset: each query sees the keys at distance 0 and 2:

    ```python
    >>> from hassejax.masks import dilated
    >>> dilated(5, window=2, dilation=2).astype(int).tolist()
    [[1, 0, 1, 0, 0], [0, 1, 0, 1, 0], [1, 0, 1, 0, 1], [0, 1, 0, 1, 0], [0, 0, 1, 0, 1]]

    ```

    **References:** mask gallery "dilated W, d"; Beltagy et al., "Longformer", arXiv:2004.05150.
    """
    check_mask_memory(n, n, "dilated")
    return _dilated(n=n, window=min(window, n), dilation=min(dilation, n))


def _global_flags(positions, n: int):
    """A Boolean vector `g` of shape (n,) from normalised flags or indices (concrete or traced)."""
    if is_traced(positions) and positions.dtype != np.bool_:
        g = _flags_from_indices(positions, n=n)
        ok = jnp.all((positions >= 0) & (positions < n))
        return require(
            g, ok, f"`global_positions` must hold indices in [0, n-1] = [0, {n - 1}]; some index is out of range."
        )
    return jnp.asarray(global_flags(positions, n))


@checked(n=positive, window=nonnegative, global_positions=global_positions_arg)
def global_sliding(
    n: int,
    window: int,
    global_positions: Sequence[int] | Sequence[bool] | Int[ArrayLike, " g"] | Bool[ArrayLike, " g"],
) -> Bool[Array, "n n"]:
    """Global + sliding window (Longformer): ``M[q, k] = |q - k| <= window or g[q] or g[k]``.

    attention-gym's ``generate_global_sliding_window(window, is_global)``: a symmetric
    local window plus global tokens (e.g. CLS) that see every position and are seen by
    every position.

    **Arguments:**

    - `n`: sequence length, an integer >= 1.
    - `window`: radius `W` of the local window, an integer >= 0.
    - `global_positions`: the global tokens, either as integer indices in `[0, n - 1]`
      (a list or 1-D integer array, possibly empty; repeats are harmless) or as Boolean
      flags `g` of shape `(n,)`. A Boolean dtype means flags, an integer dtype means
      indices (never guessed from the values). May be traced under ``jax.jit``.

    **Returns:** a Boolean array of shape `(n, n)`, symmetric.

    **Raises:** :class:`~hassejax.errors.MaskError` for a bad `n` or `window`, an index out
    of range, non-integer indices, or flags of the wrong length.

    **Example:** a CLS token at position 0 with a window of radius 0: row 0 and column 0 are
    full, every other query sees only itself and the CLS token (indices and flags give the same mask):

    ```python
    >>> from hassejax.masks import global_sliding
    >>> m = global_sliding(4, window=0, global_positions=[0])
    >>> m.astype(int).tolist()
    [[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 0, 1]]
    >>> bool((m == global_sliding(4, 0, [True, False, False, False])).all())
    True

    ```

    **References:** mask gallery "global + sliding (Longformer)"; Beltagy et al.,
    "Longformer: The Long-Document Transformer", arXiv:2004.05150.
    """
    g = _global_flags(global_positions, n)
    check_mask_memory(n, n, "global_sliding")
    return _global_sliding(g, window=min(window, n))
