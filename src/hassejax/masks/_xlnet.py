"""XLNet two-stream attention masks for a factorisation order (permutation)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Bool, Int

from ._args import check_mask_memory, checked, index_vector, integer, is_traced, nonnegative, require
from ._validate import check_permutation

__all__ = ["TwoStreamMasks", "xlnet_two_stream"]


class TwoStreamMasks(NamedTuple):
    """The two masks of XLNet's two-stream attention (both `(n, n)`, row = query, True = may attend).

    - `content`: the content stream `h` (sees its own token).
    - `query`: the query stream `g` (never sees its own token: it predicts it).

    A plain named tuple: ``content, query = xlnet_two_stream(z)`` works.

    **Example:** the order `z = [1, 0]` (token 1 predicted first): the query stream of token 1
    is empty, the content stream lets each token see itself:

    ```python
    >>> from hassejax.masks import xlnet_two_stream
    >>> masks = xlnet_two_stream([1, 0])
    >>> masks.content.astype(int).tolist(), masks.query.astype(int).tolist()
    ([[1, 1], [0, 1]], [[0, 1], [0, 0]])
    >>> masks._fields
    ('content', 'query')

    ```

    **References:** Yang et al., "XLNet", arXiv:1906.08237, §2.3; spec hasse.md §3.2 (diagonal query groups with
    `l = 1` and a permutation are XLNet's two-stream attention).
    """

    content: Bool[Array, "n n"]
    query: Bool[Array, "n n"]


def _permutation_arg(value, name: str):
    return index_vector(value, name)


def _check_permutation(z, name: str = "permutation"):
    """Concrete: raise a MaskError saying what is wrong; traced: return the runtime check."""
    n = z.shape[0]
    if is_traced(z):
        return jnp.all(jnp.sort(z) == jnp.arange(n, dtype=z.dtype))
    check_permutation(z, name)
    return jnp.asarray(True)


@jax.jit
def _xlnet_two_stream(z, context):
    n = z.shape[0]
    pos = jnp.zeros((n,), dtype=jnp.int32).at[z].set(jnp.arange(n, dtype=jnp.int32))
    ctx = pos < context
    p_q, p_k = pos[:, None], pos[None, :]
    content = jnp.where(ctx[:, None], ctx[None, :], p_k <= p_q)
    query = jnp.where(ctx[:, None], ctx[None, :], p_k < p_q)
    return content, query


@checked(permutation=_permutation_arg, context=nonnegative)
def xlnet_two_stream(permutation: Sequence[int] | Int[ArrayLike, " n"], context: int = 0) -> TwoStreamMasks:
    """XLNet two-stream masks for the factorisation order `permutation` (= `z`).

    ``z[r]`` is the token predicted `r`-th; ``pos[i]`` is the rank of token `i` in `z`
    (``pos[z[r]] = r``). Masks are indexed by token position (row = query token,
    column = key token). The first `context` tokens of `z` are context (never
    predicted); the others are targets. Then::

        content[q, k] = ctx[k]               if ctx[q]   else  pos[k] <= pos[q]
        query[q, k]   = ctx[k]               if ctx[q]   else  pos[k] <  pos[q]

    with ``ctx[i] = pos[i] < context``: a target sees every context token and the targets
    before it in `z` (the content stream itself too, the query stream not), context
    tokens see each other bidirectionally and never a target. With ``context = 0`` the
    first token of `z` has an **empty query row** (it is predicted from nothing but its
    position); a model must treat that row explicitly (spec hasse.md §4). This is
    XLNet's ``_local_perm``: ``perm_mask`` (1 = cannot attend) is ``~query``, and the
    content mask is ``perm_mask`` with the diagonal re-allowed. For context rows XLNet's
    ``perm_mask`` also allows the token itself in the query stream, and so does this
    function (context tokens are not predicted, so no leak).

    **Arguments:**

    - `permutation`: the factorisation order `z`, a permutation of `0 .. n-1` (list or
      1-D integer array; may be traced under ``jax.jit``, then checked with
      :func:`equinox.error_if`).
    - `context`: number of context tokens `c`, an integer in `[0, n]`: the first `c`
      entries of `z`.

    **Returns:** :class:`TwoStreamMasks` ``(content, query)``, each Boolean of shape `(n, n)`.

    **Raises:** :class:`~hassejax.errors.MaskError` if `permutation` is not a permutation
    (naming a repeated, missing or out-of-range entry) or `context` is outside `[0, n]`.

    **Example:** the order `z = [2, 0, 1]`: token 2 comes first (empty query row), token 0
    sees token 2, token 1 sees both; with one context token (token 2) its row sees only itself:

    ```python
    >>> from hassejax.masks import xlnet_two_stream
    >>> content, query = xlnet_two_stream([2, 0, 1])
    >>> content.astype(int).tolist()
    [[1, 0, 1], [1, 1, 1], [0, 0, 1]]
    >>> query.astype(int).tolist()
    [[0, 0, 1], [1, 0, 1], [0, 0, 0]]
    >>> xlnet_two_stream([2, 0, 1], context=1).query[2].astype(int).tolist()
    [0, 0, 1]

    ```

    **References:** Yang et al., "XLNet: Generalized Autoregressive Pretraining for
    Language Understanding", arXiv:1906.08237, §2.3; zihangdai/xlnet ``data_utils.py``
    (``_local_perm``); mask gallery "XLNet two-stream".
    """
    z = permutation
    n = z.shape[0]
    context = integer(context, "context", minimum=0, maximum=n, maximum_label="n")
    ok = _check_permutation(z)
    check_mask_memory(n, n, "xlnet_two_stream")
    content, query = _xlnet_two_stream(jnp.asarray(z, dtype=jnp.int32), context=context)
    message = "`permutation` must be a permutation of 0..n-1 (each index exactly once)."
    content = require(content, ok, message)
    query = require(query, ok, message)
    return TwoStreamMasks(content=content, query=query)
