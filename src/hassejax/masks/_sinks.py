"""Attention sinks (StreamingLLM): the first few keys, seen by every query at or after them."""

from __future__ import annotations

import functools

import jax
from jaxtyping import Array, Bool

from ._args import check_mask_memory, checked, index_grid, integer, positive

__all__ = ["attention_sinks"]


@functools.partial(jax.jit, static_argnames=("n",))
def _attention_sinks(n, num):
    q, k = index_grid(n, n)
    return (k < num) & (k <= q)


@checked(n=positive)
def attention_sinks(n: int, num: int) -> Bool[Array, "n n"]:
    """Attention-sink mask: ``M[q, k] = (k < num) and (k <= q)``.

    The first `num` positions are *sink tokens* that every later query keeps attending to
    (StreamingLLM keeps their keys and values in the cache next to a sliding window).
    Alone it is rarely useful; OR it with a causal window, as StreamingLLM does:
    ``sliding_window(n, left=W) | attention_sinks(n, num=4)``, or in a spec,
    ``from_spec("sliding_window(n=1024, left=128) | attention_sinks(n=1024, num=4)")``.
    Causal: a query before a sink does not see it, so the union stays causal.

    **Arguments:**

    - `n`: sequence length, an integer >= 1.
    - `num`: number of sink tokens, an integer in `[0, n]` (`0` gives an empty mask,
      `n` gives :func:`causal`).

    **Returns:** a Boolean array of shape `(n, n)` (row = query, column = key,
    True = may attend).

    **Raises:** :class:`~hassejax.errors.MaskError` for a bad `n` or a `num` outside `[0, n]`.

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.masks import attention_sinks
    >>> np.asarray(attention_sinks(4, num=2)).astype(int)
    array([[1, 0, 0, 0],
           [1, 1, 0, 0],
           [1, 1, 0, 0],
           [1, 1, 0, 0]])

    ```

    **References:** Xiao et al., "Efficient Streaming Language Models with Attention
    Sinks" (StreamingLLM), arXiv:2309.17453, §3.2.
    """
    num = integer(num, "num", minimum=0, maximum=n, maximum_label="n")
    check_mask_memory(n, n, "attention_sinks")
    return _attention_sinks(n=n, num=num)
