"""XLNet two-stream masks in interval form.

JAX-free like the whole :mod:`hassejax.masks.structured` package; spec hasse.md §0 conventions (row = query, column = key, True = may attend).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Literal, NamedTuple

import numpy as np

from .._intervals import IntervalMask
from .._validate import (
    check_permutation,
    checked,
    integer,
    nonnegative,
    stream_arg,
)
from ._common import _as_mask, _budget, _concrete_index_vector

__all__ = ["TwoStreamIntervals", "xlnet_two_stream"]


class TwoStreamIntervals(NamedTuple):
    """The two XLNet masks in interval form (row = query token, True = may attend).

    - `content`: the content stream `h` (sees its own token).
    - `query`: the query stream `g` (never sees its own token).

    Same fields as :class:`hassejax.masks.TwoStreamMasks`, each an
    :class:`~hassejax.masks.IntervalMask`.

    **Example:** the order `z = [1, 0]`: token 1 comes first, so its query row has no key run:

    ```python
    >>> from hassejax.masks import structured
    >>> streams = structured.xlnet_two_stream([1, 0])
    >>> streams.content.row(1), streams.query.row(1), streams.query.row(0)
    ([(1, 2)], [], [(1, 2)])
    >>> streams.query.to_dense().astype(int).tolist()
    [[0, 1], [0, 0]]

    ```

    **References:** Yang et al., "XLNet", arXiv:1906.08237, §2.3; spec hasse.md §3.2 (diagonal query groups with
    `l = 1` and a permutation are XLNet's two-stream attention).
    """

    content: IntervalMask
    query: IntervalMask


@checked(permutation=_concrete_index_vector, context=nonnegative)
def xlnet_two_stream(permutation: Sequence[int] | np.ndarray, context: int = 0) -> TwoStreamIntervals:
    """XLNet two-stream masks for the factorisation order `permutation`, as key runs.

    Rule of :func:`hassejax.masks.xlnet_two_stream`: row `q` of either stream is the set
    of tokens ``z[:m]`` listed before some rank `m` (``m = context`` for a context token;
    ``pos[q] + 1`` for a target's content row, ``pos[q]`` for its query row). These prefix
    sets are built incrementally in order of `z` (each new token opens a run or joins its
    neighbours' runs), in ``O(n · k)`` for ``k`` runs a row: few runs for orders close to
    left-to-right or blockwise, up to ``n / 2`` for a random permutation (then
    :class:`~hassejax.errors.MemoryBudgetError` if ``n · k`` does not fit).

    **Arguments:**

    - `permutation`: the factorisation order `z`, a permutation of `0 .. n-1` (concrete).
    - `context`: number of context tokens `c`, an integer in `[0, n]`.

    **Returns:** :class:`TwoStreamIntervals` ``(content, query)``, each an
    :class:`~hassejax.masks.IntervalMask` with `n` rows, equal to the dense streams.

    **Raises:** :class:`~hassejax.errors.MaskError` if `permutation` is not a permutation
    (naming a repeated, missing or out-of-range entry) or `context` is outside `[0, n]`.

    **Example:**

    ```python
    >>> from hassejax.masks import structured
    >>> content, query = structured.xlnet_two_stream([2, 0, 1])
    >>> content.row(0), query.row(0), query.row(2)
    ([(0, 1), (2, 3)], [(2, 3)], [])

    ```

    **References:** Yang et al., "XLNet", arXiv:1906.08237, §2.3; mask gallery "XLNet two-stream".
    """
    z = permutation
    n = z.shape[0]
    context = integer(context, "context", minimum=0, maximum=n, maximum_label="n")
    check_permutation(z)
    pos = np.empty(n, np.int64)
    pos[z] = np.arange(n)
    # runs of the prefix set z[:m]: adding x = z[m - 1] opens a run, minus one per neighbour already in
    x = z.astype(np.int64)
    left_in = (x > 0) & (pos[np.maximum(x - 1, 0)] < np.arange(n))
    right_in = (x < n - 1) & (pos[np.minimum(x + 1, n - 1)] < np.arange(n))
    runs = np.concatenate([[0], np.cumsum(1 - left_in.astype(np.int64) - right_in)])
    k = max(1, int(runs[context:].max()))
    rows = n + 1 - context
    _budget(
        rows + 2 * n,
        k,
        "xlnet_two_stream",
        "permutation",
        rows_are=f"in all: {rows} prefix sets (n + 1 - context) and the two streams' {n} rows each",
    )
    table_s = np.full((rows, k), n, np.int64)
    table_e = np.full((rows, k), n, np.int64)
    starts: list[int] = []
    stops: list[int] = []
    for m in range(n + 1):
        if m > 0:
            v = int(x[m - 1])
            i = bisect.bisect_right(starts, v)
            joins_left = i > 0 and stops[i - 1] == v
            joins_right = i < len(starts) and starts[i] == v + 1
            if joins_left and joins_right:
                stops[i - 1] = stops[i]
                del starts[i], stops[i]
            elif joins_left:
                stops[i - 1] = v + 1
            elif joins_right:
                starts[i] = v
            else:
                starts.insert(i, v)
                stops.insert(i, v + 1)
        if m >= context:
            table_s[m - context, : len(starts)] = starts
            table_e[m - context, : len(stops)] = stops
    ctx = pos < context
    rank_content = np.where(ctx, context, pos + 1) - context
    rank_query = np.where(ctx, context, pos) - context
    content = _as_mask(table_s[rank_content], table_e[rank_content], n, normal=True)
    query = _as_mask(table_s[rank_query], table_e[rank_query], n, normal=True)
    return TwoStreamIntervals(content=content, query=query)


# ---------------------------------------------------------------------------------- registry


@checked(stream=stream_arg)
def _xlnet_stream(
    permutation: Sequence[int] | np.ndarray,
    context: int = 0,
    *,
    stream: Literal["content", "query"],
) -> IntervalMask:
    """One stream of :func:`xlnet_two_stream` (the registry's ``xlnet_two_stream``).

    **Arguments:** `permutation` and `context` as in :func:`xlnet_two_stream`; `stream`:
    ``"content"`` or ``"query"`` (required, keyword only).

    **Returns:** the :class:`~hassejax.masks.IntervalMask` of that stream.

    **Raises:** :class:`~hassejax.errors.MaskError` as :func:`xlnet_two_stream`, or for a
    `stream` other than ``"content"``/``"query"``.
    """
    return getattr(xlnet_two_stream(permutation, context), stream)


_xlnet_stream.__name__ = "xlnet_two_stream"
