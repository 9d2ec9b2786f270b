"""Window masks in interval form: sliding window, attention sinks, dilated, global + sliding.

JAX-free like the whole :mod:`hassejax.masks.structured` package; spec hasse.md §0 conventions (row = query, column = key, True = may attend).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._intervals import IntervalMask, with_components, with_factors
from .._runs import _runs_of_rows
from .._validate import (
    checked,
    global_flags,
    global_positions_arg,
    integer,
    nonnegative,
    positive,
)
from ._common import _as_mask, _budget, _concrete, _positions

__all__ = ["sliding_window", "attention_sinks", "dilated", "global_sliding"]


@checked(n=positive, left=nonnegative, right=nonnegative)
def sliding_window(n: int, left: int, right: int = 0) -> IntervalMask:
    """Sliding-window mask as key runs: ``M[q, k] = q - left <= k <= q + right``.

    Row `q` is the single run ``[max(q - left, 0), min(q + right + 1, n))``. The window
    conventions of other libraries map to `left`/`right` as in the table of
    :func:`hassejax.masks.sliding_window` (attention-gym ``generate_sliding_window(W)`` is
    ``left=W``; HF/xformers ``sliding_window=W`` is ``left=W - 1``).

    **Arguments:**

    - `n`: sequence length, an integer >= 1.
    - `left`: keys seen before the query, an integer >= 0.
    - `right`: keys seen after the query, an integer >= 0 (default 0: causal).

    **Returns:** an :class:`~hassejax.masks.IntervalMask` with one run a row, equal to
    :func:`hassejax.masks.sliding_window`.

    **Raises:** :class:`~hassejax.errors.MaskError` if `n` is not an integer >= 1 or
    `left`/`right` is not an integer >= 0.

    **Example:**

    ```python
    >>> from hassejax.masks import structured
    >>> structured.sliding_window(8, left=2, right=1).row(5)
    [(3, 7)]

    ```

    **References:** mask gallery "sliding window W", "local (left, right)"; Beltagy et al.,
    "Longformer", arXiv:2004.05150.
    """
    _budget(n, 1, "sliding_window")
    left, right = min(left, n), min(right, n)
    q = _positions(n)
    return _as_mask(np.maximum(q - left, 0), np.minimum(q + right + 1, n), n, normal=True)


@checked(n=positive)
def attention_sinks(n: int, num: int) -> IntervalMask:
    """Attention-sink mask as key runs: ``M[q, k] = (k < num) and (k <= q)``; row `q` is ``[0, min(num, q + 1))``.

    The first `num` positions are StreamingLLM's sink tokens; OR the result with a causal
    window: ``sliding_window(n, left=W) | attention_sinks(n, num=4)`` (two runs a row).

    **Arguments:**

    - `n`: sequence length, an integer >= 1.
    - `num`: number of sink tokens, an integer in `[0, n]` (`0`: every row empty).

    **Returns:** an :class:`~hassejax.masks.IntervalMask` with at most one run a row, equal
    to :func:`hassejax.masks.attention_sinks`.

    **Raises:** :class:`~hassejax.errors.MaskError` for a bad `n` or a `num` outside `[0, n]`.

    **Example:**

    ```python
    >>> from hassejax.masks import structured
    >>> m = structured.attention_sinks(8, num=2)
    >>> m.row(0), m.row(6)
    ([(0, 1)], [(0, 2)])

    ```

    **References:** Xiao et al., "Efficient Streaming Language Models with Attention
    Sinks", arXiv:2309.17453, §3.2.
    """
    num = integer(num, "num", minimum=0, maximum=n, maximum_label="n")
    _budget(n, 1, "attention_sinks")
    q = _positions(n)
    return _as_mask(np.zeros_like(q), np.minimum(num, q + 1), n, normal=True)


# ---------------------------------------------------------------------------------- banded


@checked(n=positive, window=nonnegative, dilation=positive)
def dilated(n: int, window: int, dilation: int) -> IntervalMask:
    """Dilated sliding window as key runs: ``M[q, k] = |q - k| <= window and |q - k| % dilation == 0``.

    With ``dilation = 1`` each row is one run; otherwise every kept key is its own run of
    length 1: row `q` holds the keys ``q + j · dilation`` for ``|j| <= window // dilation``
    inside ``[0, n)``, so ``k = 2 · (window // dilation) + 1`` runs a row. The mask records
    its structure for the closure routes: with `n` a multiple of `dilation` the Kronecker
    product ``band ⊗ I`` (:mod:`hassejax.order._product`), otherwise the disjoint union of
    the residue classes mod `dilation`, each a band (:mod:`hassejax.order._components`).

    **Arguments:**

    - `n`: sequence length, an integer >= 1.
    - `window`: radius `W`, an integer >= 0.
    - `dilation`: step `d`, an integer >= 1.

    **Returns:** an :class:`~hassejax.masks.IntervalMask`, equal to :func:`hassejax.masks.dilated`.

    **Raises:** :class:`~hassejax.errors.MaskError` for a bad `n`, a `window` < 0 or a
    `dilation` < 1; :class:`~hassejax.errors.MemoryBudgetError` if ``n · k`` runs do not fit.

    **Example:**

    ```python
    >>> from hassejax.masks import structured
    >>> structured.dilated(9, window=4, dilation=2).row(3)
    [(1, 2), (3, 4), (5, 6), (7, 8)]

    ```

    **References:** mask gallery "dilated W, d"; Beltagy et al., "Longformer", arXiv:2004.05150.
    """
    window, dilation = min(window, n), min(dilation, n)
    if dilation == 1:
        return sliding_window(n, window, window)
    m = window // dilation
    k = 2 * m + 1
    h = -(-n // dilation)  # positions in the longest residue class
    _budget(
        n,
        k,
        "dilated",
        hint=f"Its reachability is that of its {dilation} residue classes mod the dilation, each a band of at most "
        f"{h} positions: structured.sliding_window({h}, {m}, {m}) gives L* and the depth, and a band's classes and "
        "width (their sums over the residue classes are the mask's), without this form.",
    )
    # Key t of row q is q + (first + t - m)·d, first = the first offset index with a key >= 0;
    # it is kept while it is <= q + m·d and < n (then padding n). Built in place, in int64
    # only when positions need it.
    dtype = np.int32 if n + 2 * window + 2 < 2**31 else np.int64
    q = np.arange(n, dtype=dtype)[:, None]
    first = np.maximum(0, m - q // dilation)
    key = (q + (first - m) * dilation) + (dilation * np.arange(k, dtype=dtype))[None, :]
    np.putmask(key, key > np.minimum(q + m * dilation, n - 1), n)
    stops = key + 1
    np.putmask(stops, stops > n, n)
    out = _as_mask(key, stops, n, normal=True)
    if n % dilation == 0 and n // dilation >= 2:  # q = r·d + c: the product of a band over r and the identity over c
        out = with_factors(out, sliding_window(n // dilation, m, m), sliding_window(dilation, 0, 0))  # band ⊗ I
    elif n > dilation:  # residue c: a band over the ceil((n - c) / d) positions c, c + d, ...: two lengths
        longer = n - (h - 1) * dilation  # the residues with h positions
        groups = ((sliding_window(h, m, m), longer), (sliding_window(h - 1, m, m), dilation - longer))
        out = with_components(out, dilation, groups)
    return out


def _concrete_global_positions(value, name: str):
    return global_positions_arg(_concrete(value, name), name)


@checked(n=positive, window=nonnegative, global_positions=_concrete_global_positions)
def global_sliding(
    n: int,
    window: int,
    global_positions: Sequence[int] | Sequence[bool] | np.ndarray,
) -> IntervalMask:
    """Global + sliding window (Longformer) as key runs: ``M[q, k] = |q - k| <= window or g[q] or g[k]``.

    A global row is ``[0, n)``; any other row is its window ``[q - window, q + window + 1)``
    joined with the runs of global positions, so ``k <= R + 1`` runs a row for `R` runs of
    consecutive global positions.

    **Arguments:**

    - `n`: sequence length, an integer >= 1.
    - `window`: radius `W`, an integer >= 0.
    - `global_positions`: integer indices in `[0, n - 1]` (possibly empty, repeats harmless)
      or Boolean flags of shape `(n,)` (a Boolean dtype means flags; never guessed from
      values). Must be concrete.

    **Returns:** an :class:`~hassejax.masks.IntervalMask`, equal to
    :func:`hassejax.masks.global_sliding`.

    **Raises:** :class:`~hassejax.errors.MaskError` for a bad `n` or `window`, an index out
    of range, non-integer indices, or flags of the wrong length.

    **Example:**

    ```python
    >>> from hassejax.masks import structured
    >>> m = structured.global_sliding(10, window=1, global_positions=[0])
    >>> m.row(0), m.row(5)
    ([(0, 10)], [(0, 1), (4, 7)])

    ```

    **References:** mask gallery "global + sliding (Longformer)"; Beltagy et al.,
    "Longformer", arXiv:2004.05150.
    """
    g = global_flags(global_positions, n)
    window = min(window, n)
    g_s, g_e = _runs_of_rows(g[None, :])
    runs = g_s.shape[1]
    # built in normal form in int32 (below): starts, stops, the run index and its temporary; a review measured 13
    # bytes a run at the peak with 512 global runs at n = 2^20 (the sort before took 48)
    _budget(n, runs + 1, "global_sliding", bytes_per_run=24)
    q = _positions(n)
    w_s = np.where(g, 0, np.maximum(q - window, 0))
    w_e = np.where(g, n, np.minimum(q + window + 1, n))
    if runs == 0:
        return _as_mask(w_s, w_e, n, normal=True)
    # Built in normal form (sorting n x (R + 1) runs took 8 s at n = 2^20 with 64 global tokens): the global runs
    # before the window, the window joined with the global runs it touches, the global runs after it.
    dtype = np.int32 if n < 2**31 - 1 else np.int64
    gs, ge = g_s[0].astype(dtype), g_e[0].astype(dtype)
    before = np.searchsorted(ge, w_s, side="left")[:, None]  # global runs ending before the window (not touching)
    upto = np.searchsorted(gs, w_e, side="right")[:, None]  # global runs starting at or before its end
    joined = upto > before
    lo = np.where(joined[:, 0], np.minimum(w_s, gs[np.minimum(before[:, 0], runs - 1)]), w_s).astype(dtype)
    hi = np.where(joined[:, 0], np.maximum(w_e, ge[np.maximum(upto[:, 0] - 1, 0)]), w_e).astype(dtype)
    col = np.arange(runs + 1, dtype=np.int32)[None, :]
    idx = col + np.where(col > before, (upto - before - 1).astype(np.int32), np.int32(0))  # its global run
    np.minimum(idx, runs, out=idx)  # past the last: the padding entry
    starts = np.append(gs, dtype(n))[idx]
    stops = np.append(ge, dtype(n))[idx]
    rows = np.arange(n)
    starts[rows, before[:, 0]] = lo  # the window, joined
    stops[rows, before[:, 0]] = hi
    return _as_mask(starts, stops, n, normal=True)
