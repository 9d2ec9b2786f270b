"""Block diffusion (BD3-LM) training mask over the concatenation ``[x_t ; x_0]``."""

from __future__ import annotations

import functools

import jax
from jaxtyping import Array, Bool

from ._args import check_mask_memory, checked, index_grid, integer, positive

__all__ = ["block_diffusion"]


@functools.partial(jax.jit, static_argnames=("n",))
def _block_diffusion(n, block_size):
    q, k = index_grid(2 * n, 2 * n)
    noisy_q, noisy_k = q < n, k < n
    blk_q, blk_k = (q % n) // block_size, (k % n) // block_size
    block_diagonal = (blk_q == blk_k) & (noisy_q == noisy_k)
    offset_block_causal = (blk_q > blk_k) & noisy_q & ~noisy_k
    clean_block_causal = (blk_q >= blk_k) & ~noisy_q & ~noisy_k
    return block_diagonal | offset_block_causal | clean_block_causal


@checked(n=positive, block_size=positive)
def block_diffusion(n: int, block_size: int) -> Bool[Array, "two_n two_n"]:
    """BD3-LM block diffusion training mask over `2n` slots ``[x_t ; x_0]``.

    Slots `0 .. n-1` hold the noised tokens `x_t`, slots `n .. 2n-1` the clean tokens
    `x_0`. For a slot `i`: ``noisy(i) = i < n`` and ``blk(i) = (i mod n) // block_size``.
    Then ``M[q, k]`` is the union of three parts::

        (blk(q) == blk(k) and noisy(q) == noisy(k))          # block diagonal (each stream)
        or (blk(q) >  blk(k) and noisy(q) and not noisy(k))  # offset block causal: x_t -> earlier clean blocks
        or (blk(q) >= blk(k) and not noisy(q) and not noisy(k))  # block causal among clean tokens

    Clean tokens never see noised ones. When `block_size` does not divide `n` the last
    block is partial (``n mod block_size`` positions); the rule is unchanged. This is
    attention-gym's ``generate_block_diffusion_mask(seq_len=n, block_size)`` and the
    kuleshov-group/bd3lms training mask; it is the Block Two-Stream layout of spec
    hasse.md §3.2 with a block-causal content stream and full attention inside each
    noised block.

    **Arguments:**

    - `n`: length of the clean sequence `x_0`, an integer >= 1.
    - `block_size`: diffusion block length `B`, an integer in `[1, n]`.

    **Returns:** a Boolean array of shape `(2n, 2n)`.

    **Raises:** :class:`~hassejax.errors.MaskError` for a bad `n` or a `block_size` outside `[1, n]`.

    **Example:** `n = 2`, blocks of 1: slots 0, 1 are `x_t`, slots 2, 3 are `x_0`; the noised
    block 1 (row 1) sees itself and the clean block 0 (slot 2), clean rows never see a noised slot:

    ```python
    >>> from hassejax.masks import block_diffusion
    >>> block_diffusion(2, block_size=1).astype(int).tolist()
    [[1, 0, 0, 0], [0, 1, 1, 0], [0, 0, 1, 0], [0, 0, 1, 1]]

    ```

    **References:** Arriola et al., "Block Diffusion: Interpolating Between Autoregressive
    and Diffusion Language Models", arXiv:2503.09573, §3.1; mask gallery "block diffusion".
    """
    block_size = integer(block_size, "block_size", minimum=1, maximum=n, maximum_label="n")
    check_mask_memory(2 * n, 2 * n, "block_diffusion")
    return _block_diffusion(n=n, block_size=block_size)
