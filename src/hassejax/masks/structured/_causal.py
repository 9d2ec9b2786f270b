"""Causal-type masks in interval form: causal, full, prefix-LM, block-causal, chunked causal.

JAX-free like the whole :mod:`hassejax.masks.structured` package; spec hasse.md §0 conventions (row = query, column = key, True = may attend).
"""

from __future__ import annotations

import numpy as np

from .._intervals import IntervalMask
from .._validate import (
    checked,
    integer,
    nonnegative,
    positive,
)
from ._common import _as_mask, _budget, _positions

__all__ = ["causal", "full", "prefix_lm", "block_causal", "chunked_causal"]


# ---------------------------------------------------------------------------------- causal family


@checked(n=positive)
def causal(n: int) -> IntervalMask:
    """Causal mask as key runs: ``M[q, k] = k <= q``; row `q` is the run ``[0, q + 1)``.

    **Arguments:**

    - `n`: sequence length, an integer >= 1.

    **Returns:** an :class:`~hassejax.masks.IntervalMask` with `n` rows and one run a row
    (row = query, column = key, True = may attend), equal to :func:`hassejax.masks.causal`.

    **Raises:** :class:`~hassejax.errors.MaskError` if `n` is not an integer >= 1;
    :class:`~hassejax.errors.MemoryBudgetError` if the `n` rows of the interval form would not fit.

    **Example:**

    ```python
    >>> from hassejax.masks import structured
    >>> structured.causal(4).row(2)
    [(0, 3)]

    ```

    **References:** spec hasse.md §3.1 (causal = the minimal merged autoregressive family, C. Li, H. Guo,
    arXiv:2606.09951) and §1.3 (closed: `L* = 1`).
    """
    _budget(n, 1, "causal")
    q = _positions(n)
    return _as_mask(np.zeros_like(q), q + 1, n, normal=True)


@checked(n=positive)
def full(n: int) -> IntervalMask:
    """Full (bidirectional) mask as key runs: ``M[q, k] = True``; every row is ``[0, n)``.

    **Arguments:**

    - `n`: sequence length, an integer >= 1.

    **Returns:** an :class:`~hassejax.masks.IntervalMask` with one run a row, equal to
    :func:`hassejax.masks.full`.

    **Raises:** :class:`~hassejax.errors.MaskError` if `n` is not an integer >= 1;
    :class:`~hassejax.errors.MemoryBudgetError` if the `n` rows of the interval form would not fit.

    **Example:**

    ```python
    >>> from hassejax.masks import structured
    >>> structured.full(3).row(0)
    [(0, 3)]

    ```

    **References:** spec hasse.md §1.3 (a closed mask: convergence depth `L* = 1`, as causal and block-causal).
    """
    _budget(n, 1, "full")
    return _as_mask(np.zeros(n, np.int64), np.full(n, n, np.int64), n, normal=True)


@checked(n=positive, prefix=nonnegative)
def prefix_lm(n: int, prefix: int) -> IntervalMask:
    """Prefix-LM mask as key runs: ``M[q, k] = (k < prefix) or (k <= q)``; row `q` is ``[0, max(prefix, q + 1))``.

    The first `prefix` positions form a bidirectional prefix seen by every query; the rest
    is causal (attention-gym ``generate_prefix_lm_mask(P)``; see
    :func:`hassejax.masks.prefix_lm` for the notebook's ``kv_idx <= P`` variant).

    **Arguments:**

    - `n`: sequence length, an integer >= 1.
    - `prefix`: prefix length `P`, an integer in `[0, n]`.

    **Returns:** an :class:`~hassejax.masks.IntervalMask` with one run a row, equal to
    :func:`hassejax.masks.prefix_lm`.

    **Raises:** :class:`~hassejax.errors.MaskError` for a bad `n` or a `prefix` outside `[0, n]`.

    **Example:**

    ```python
    >>> from hassejax.masks import structured
    >>> m = structured.prefix_lm(6, prefix=3)
    >>> m.row(0), m.row(4)
    ([(0, 3)], [(0, 5)])

    ```

    **References:** Raffel et al. (T5), arXiv:1910.10683; mask gallery "prefix LM P".
    """
    prefix = integer(prefix, "prefix", minimum=0, maximum=n, maximum_label="n")
    _budget(n, 1, "prefix_lm")
    q = _positions(n)
    return _as_mask(np.zeros_like(q), np.maximum(prefix, q + 1), n, normal=True)


@checked(n=positive, block_size=positive)
def block_causal(n: int, block_size: int) -> IntervalMask:
    """Block-causal mask as key runs: ``M[q, k] = q // block_size >= k // block_size``.

    Row `q` is ``[0, min((q // block_size + 1) · block_size, n))``; a partial last block is
    allowed.

    **Arguments:**

    - `n`: sequence length, an integer >= 1.
    - `block_size`: block length, an integer in `[1, n]`.

    **Returns:** an :class:`~hassejax.masks.IntervalMask` with one run a row, equal to
    :func:`hassejax.masks.block_causal`.

    **Raises:** :class:`~hassejax.errors.MaskError` for a bad `n` or a `block_size` outside `[1, n]`;
    :class:`~hassejax.errors.MemoryBudgetError` if the `n` rows of the interval form would not fit.

    **Example:**

    ```python
    >>> from hassejax.masks import structured
    >>> structured.block_causal(5, block_size=2).row(2)
    [(0, 4)]

    ```

    **References:** spec hasse.md §1.3 (closed: convergence depth `L* = 1`) and §5 item 3 (the block-causal
    preorder, 3 blocks × 2).
    """
    block_size = integer(block_size, "block_size", minimum=1, maximum=n, maximum_label="n")
    _budget(n, 1, "block_causal")
    q = _positions(n)
    return _as_mask(np.zeros_like(q), np.minimum((q // block_size + 1) * block_size, n), n, normal=True)


@checked(n=positive, chunk=positive)
def chunked_causal(n: int, chunk: int) -> IntervalMask:
    """Chunked causal mask as key runs: ``M[q, k] = (q // chunk == k // chunk) and (k <= q)``.

    Row `q` is ``[(q // chunk) · chunk, q + 1)`` (Llama 4's chunked attention, JAX
    ``ChunkedCausalMask``); a partial last chunk is allowed.

    **Arguments:**

    - `n`: sequence length, an integer >= 1.
    - `chunk`: chunk length, an integer in `[1, n]`.

    **Returns:** an :class:`~hassejax.masks.IntervalMask` with one run a row, equal to
    :func:`hassejax.masks.chunked_causal`.

    **Raises:** :class:`~hassejax.errors.MaskError` for a bad `n` or a `chunk` outside `[1, n]`;
    :class:`~hassejax.errors.MemoryBudgetError` if the `n` rows of the interval form would not fit.

    **Example:**

    ```python
    >>> from hassejax.masks import structured
    >>> structured.chunked_causal(7, chunk=3).row(5)
    [(3, 6)]

    ```

    **References:** JAX's splash attention ``ChunkedCausalMask`` (the JAX repository's
    ``jax/experimental/pallas/ops/tpu/splash_attention``); conventions of spec hasse.md §0.
    """
    chunk = integer(chunk, "chunk", minimum=1, maximum=n, maximum_label="n")
    _budget(n, 1, "chunked_causal")
    q = _positions(n)
    return _as_mask((q // chunk) * chunk, q + 1, n, normal=True)
