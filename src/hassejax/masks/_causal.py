"""Causal-family masks: causal, full, prefix LM, bottom-right causal, block causal, chunked causal.

Convention (spec hasse.md §0): row = query q, column = key k, True = may attend; the rules
are those of /shared/cases/mask_gallery.md, quoted in each docstring.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool

from ._args import check_mask_memory, checked, index_grid, integer, nonnegative, positive

__all__ = ["causal", "full", "prefix_lm", "causal_bottom_right", "block_causal", "chunked_causal"]


@functools.partial(jax.jit, static_argnames=("n",))
def _causal(n):
    q, k = index_grid(n, n)
    return k <= q


@functools.partial(jax.jit, static_argnames=("n",))
def _prefix_lm(n, prefix):
    q, k = index_grid(n, n)
    return (k < prefix) | (k <= q)


@functools.partial(jax.jit, static_argnames=("n_q", "n_k"))
def _causal_bottom_right(n_q, n_k):
    q, k = index_grid(n_q, n_k)
    return k <= q + (n_k - n_q)


@functools.partial(jax.jit, static_argnames=("n",))
def _block_causal(n, block_size):
    q, k = index_grid(n, n)
    return q // block_size >= k // block_size


@functools.partial(jax.jit, static_argnames=("n",))
def _chunked_causal(n, chunk):
    q, k = index_grid(n, n)
    return (q // chunk == k // chunk) & (k <= q)


@checked(n=positive)
def causal(n: int) -> Bool[Array, "n n"]:
    """Causal (autoregressive) mask: ``M[q, k] = k <= q``.

    **Arguments:**

    - `n`: sequence length, an integer >= 1.

    **Returns:** a Boolean array of shape `(n, n)` (row = query, column = key,
    True = may attend). Closed (dense): its reachability closure is itself,
    convergence depth 1 (spec hasse.md §1.3).

    **Raises:** :class:`~hassejax.errors.MaskError` if `n` is not an integer >= 1.

    **Example:** ``causal(3)`` is the lower triangle, diagonal included:

    ```python
    >>> from hassejax.masks import causal
    >>> causal(3).astype(int).tolist()
    [[1, 0, 0], [1, 1, 0], [1, 1, 1]]

    ```
    """
    check_mask_memory(n, n, "causal")
    return _causal(n=n)


@checked(n=positive)
def full(n: int) -> Bool[Array, "n n"]:
    """Full (bidirectional) mask: ``M[q, k] = True`` for every pair.

    **Arguments:**

    - `n`: sequence length, an integer >= 1.

    **Returns:** a Boolean array of shape `(n, n)`, all True.

    **Raises:** :class:`~hassejax.errors.MaskError` if `n` is not an integer >= 1;
    :class:`~hassejax.errors.MemoryBudgetError` if the `(n, n)` array would not fit.

    **Example:** every query sees every key:

    ```python
    >>> from hassejax.masks import full
    >>> m = full(2)
    >>> m.dtype, m.astype(int).tolist()
    (dtype('bool'), [[1, 1], [1, 1]])

    ```

    **References:** spec hasse.md §1.3 (a closed mask: convergence depth `L* = 1`, as causal and block-causal).
    """
    check_mask_memory(n, n, "full")
    return jnp.ones((n, n), dtype=bool)


@checked(n=positive, prefix=nonnegative)
def prefix_lm(n: int, prefix: int) -> Bool[Array, "n n"]:
    """Prefix-LM mask: ``M[q, k] = (k < prefix) or (k <= q)``.

    The first `prefix` positions form a bidirectional prefix that every position sees;
    the rest is causal. This is attention-gym's ``generate_prefix_lm_mask(P)``
    (``kv_idx < P`` or causal). Note: the attention-gym *notebook* writes
    ``kv_idx <= P`` instead, which gives every query one more key (position `P`);
    ``prefix_lm(n, P + 1)`` reproduces that variant.

    **Arguments:**

    - `n`: sequence length, an integer >= 1.
    - `prefix`: prefix length `P`, an integer in `[0, n]` (`0` gives :func:`causal`,
      `n` gives :func:`full`).

    **Returns:** a Boolean array of shape `(n, n)`.

    **Raises:** :class:`~hassejax.errors.MaskError` for a bad `n` or a `prefix` outside `[0, n]`.

    **Example:** the first two positions see each other both ways, the rest is causal:

    ```python
    >>> from hassejax.masks import prefix_lm
    >>> prefix_lm(4, prefix=2).astype(int).tolist()
    [[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]

    ```

    **References:** Raffel et al., "Exploring the Limits of Transfer Learning with a
    Unified Text-to-Text Transformer" (T5), arXiv:1910.10683; mask gallery "prefix LM P".
    """
    prefix = integer(prefix, "prefix", minimum=0, maximum=n, maximum_label="n")
    check_mask_memory(n, n, "prefix_lm")
    return _prefix_lm(n=n, prefix=prefix)


@checked(n_q=positive, n_k=positive)
def causal_bottom_right(n_q: int, n_k: int) -> Bool[Array, "n_q n_k"]:
    """Causal mask aligned to the bottom-right corner: ``M[q, k] = k <= q + (n_k - n_q)``.

    The convention of FlashAttention >= 2.1 and xformers' ``...FromBottomRight`` masks
    for a query block that continues a longer key sequence (KV cache): the last query
    sees every key. With `n_q > n_k` the first `n_q - n_k` rows are empty.

    Rectangular masks are **not closable** (spec hasse.md §0: closing over layers needs
    self-attention, queries and keys being the same positions); analyse the square case
    (`n_q == n_k`, equal to :func:`causal`) or square it with the prefix rows first.
    For that reason it is not in the :data:`~hassejax.masks.MASKS` registry.

    **Arguments:**

    - `n_q`: number of queries, an integer >= 1.
    - `n_k`: number of keys, an integer >= 1.

    **Returns:** a Boolean array of shape `(n_q, n_k)`.

    **Raises:** :class:`~hassejax.errors.MaskError` if `n_q` or `n_k` is not an integer >= 1.

    **Example:** two queries continuing four keys (the last query sees every key), then
    three queries on two keys (the first row is empty):

    ```python
    >>> from hassejax.masks import causal_bottom_right
    >>> causal_bottom_right(2, 4).astype(int).tolist()
    [[1, 1, 1, 0], [1, 1, 1, 1]]
    >>> causal_bottom_right(3, 2).astype(int).tolist()
    [[0, 0], [1, 0], [1, 1]]

    ```
    """
    check_mask_memory(n_q, n_k, "causal_bottom_right", argument="n_q` and `n_k")
    return _causal_bottom_right(n_q=n_q, n_k=n_k)


@checked(n=positive, block_size=positive)
def block_causal(n: int, block_size: int) -> Bool[Array, "n n"]:
    """Block-causal mask: ``M[q, k] = q // block_size >= k // block_size``.

    Positions are grouped into consecutive blocks of `block_size`; each query sees its
    whole block and every earlier block. When `block_size` does not divide `n` the last
    block is partial (it holds the remaining `n mod block_size` positions); nothing else
    changes. Closed: convergence depth 1 (spec hasse.md §1.3).

    **Arguments:**

    - `n`: sequence length, an integer >= 1.
    - `block_size`: block length, an integer in `[1, n]` (`1` gives :func:`causal`,
      `n` gives :func:`full`).

    **Returns:** a Boolean array of shape `(n, n)`.

    **Raises:** :class:`~hassejax.errors.MaskError` for a bad `n` or a `block_size` outside `[1, n]`.

    **Example:** blocks `{0, 1}`, `{2, 3}` and a partial last block `{4}`:

    ```python
    >>> from hassejax.masks import block_causal
    >>> block_causal(5, block_size=2).astype(int).tolist()
    [[1, 1, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]

    ```
    """
    block_size = integer(block_size, "block_size", minimum=1, maximum=n, maximum_label="n")
    check_mask_memory(n, n, "block_causal")
    return _block_causal(n=n, block_size=block_size)


@checked(n=positive, chunk=positive)
def chunked_causal(n: int, chunk: int) -> Bool[Array, "n n"]:
    """Chunked causal mask: ``M[q, k] = (q // chunk == k // chunk) and (k <= q)``.

    Causal attention restricted to consecutive chunks of `chunk` positions (JAX
    ``ChunkedCausalMask``, Llama 4's chunked attention). A partial last chunk is allowed
    when `chunk` does not divide `n`.

    **Arguments:**

    - `n`: sequence length, an integer >= 1.
    - `chunk`: chunk length, an integer in `[1, n]` (`1` gives the identity, `n` gives
      :func:`causal`).

    **Returns:** a Boolean array of shape `(n, n)`.

    **Raises:** :class:`~hassejax.errors.MaskError` for a bad `n` or a `chunk` outside `[1, n]`;
    :class:`~hassejax.errors.MemoryBudgetError` if the `(n, n)` array would not fit.

    **Example:** causal inside the chunks `{0, 1}`, `{2, 3}` and `{4}`, nothing across them:

    ```python
    >>> from hassejax.masks import chunked_causal
    >>> chunked_causal(5, chunk=2).astype(int).tolist()
    [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 0, 1]]

    ```

    **References:** JAX's splash attention ``ChunkedCausalMask`` (the JAX repository's
    ``jax/experimental/pallas/ops/tpu/splash_attention``); conventions of spec hasse.md §0.
    """
    chunk = integer(chunk, "chunk", minimum=1, maximum=n, maximum_label="n")
    check_mask_memory(n, n, "chunked_causal")
    return _chunked_causal(n=n, chunk=chunk)
