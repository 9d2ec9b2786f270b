"""Mask constructors that return the compressed exact form :class:`~hassejax.masks.IntervalMask`.

Same names, arguments, defaults and error messages as the dense constructors of
:mod:`hassejax.masks`, and the same masks (``structured.X(...).to_dense()`` equals
``np.asarray(hassejax.masks.X(...))`` entry for entry), but built directly from each rule
as per-row sorted key runs, in ``O(n · k)`` time and memory for ``k`` runs a row, with
vectorised NumPy: no ``(n, n)`` array is ever made, so ``n = 1,048,576`` takes well under
a second for the window and causal families.

Convention (spec hasse.md §0): row = query `q`, column = key `k`, True = may attend; row
``q`` of the result holds the half-open key runs ``[starts[q, t], stops[q, t])``.

This module is pure NumPy and imports no JAX (only :func:`document` with a callable
`inner` rule evaluates that callable with JAX, which the callable itself needs). Bad
arguments raise :class:`~hassejax.errors.MaskError` naming the argument; a result that
would not fit in memory raises :class:`~hassejax.errors.MemoryBudgetError` before anything
is allocated.

**Example** (StreamingLLM at 1M tokens: a causal window with four sink tokens):

```python
>>> from hassejax.masks import structured
>>> n = 1_048_576
>>> m = structured.sliding_window(n, left=4096) | structured.attention_sinks(n, num=4)
>>> m.num_runs, m.row(10_000), int(m.row_counts()[10_000])
(2, [(0, 4), (5904, 10001)], 4101)

```

Source: the rules are those of the dense constructors (mask gallery,
/shared/cases/mask_gallery.md); the interval form is :mod:`hassejax.masks._intervals`.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Literal, NamedTuple

import numpy as np

from ..errors import MaskError
from ._intervals import IntervalMask
from ._runs import _INDEX, _runs_of_rows, check_host_memory, normalize_runs
from ._validate import (
    check_contiguous_ids,
    check_document_lengths,
    check_parents,
    check_permutation,
    checked,
    global_flags,
    global_positions_arg,
    index_vector,
    inner_arg,
    integer,
    is_traced,
    kind_arg,
    nonnegative,
    odd_kernel,
    positive,
    stream_arg,
)

__all__ = [
    "causal",
    "full",
    "prefix_lm",
    "sliding_window",
    "attention_sinks",
    "block_causal",
    "chunked_causal",
    "document",
    "dilated",
    "global_sliding",
    "natten_2d",
    "tree_prefix",
    "block_diffusion",
    "xlnet_two_stream",
    "TwoStreamIntervals",
    "MASKS",
]


# ---------------------------------------------------------------------------------- helpers


def _budget(rows: int, runs: int, name: str) -> None:
    """Raise MemoryBudgetError before building `rows` rows of `runs` runs (int64 work arrays included)."""
    check_host_memory(
        6 * 8 * float(rows) * max(1, runs),
        f"the interval form of {name} ({rows} rows, up to {runs} key runs a row)",
        name,
    )


def _positions(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.int64)


def _as_mask(starts: np.ndarray, stops: np.ndarray, n: int, *, normal: bool) -> IntervalMask:
    """Wrap per-row runs (shape `(rows,)` or `(rows, j)`) in an :class:`IntervalMask`.

    ``normal=True``: the caller guarantees sorted, disjoint, separated runs with the empty
    ones last; empty runs are set to the padding ``n`` and all-empty trailing columns are
    dropped. Otherwise :func:`normalize_runs` sorts and merges them.
    """
    starts = np.asarray(starts)
    stops = np.asarray(stops)
    if starts.ndim == 1:
        starts, stops = starts[:, None], stops[:, None]
    if not normal:
        starts, stops = normalize_runs(starts, stops, n)
        return IntervalMask(starts, stops, n, _normal=True)
    used = starts < stops
    per_column = np.flatnonzero(used.any(axis=0))
    k = int(per_column[-1]) + 1 if per_column.size else 1
    starts, stops, used = starts[:, :k], stops[:, :k], used[:, :k]
    if not used.all() and ((starts[~used] != n).any() or (stops[~used] != n).any()):
        starts = np.where(used, starts, n)
        stops = np.where(used, stops, n)
    return IntervalMask(starts.astype(_INDEX, copy=False), stops.astype(_INDEX, copy=False), n, _normal=True)


def _concrete(value, name: str):
    if is_traced(value):
        raise MaskError(
            f"`{name}` must be concrete: structured masks are built on the host with NumPy, not under "
            "jax.jit; call the dense constructor of hassejax.masks inside jit."
        )
    return value


def _concrete_index_vector(value, name: str):
    return _concrete(index_vector(value, name), name)


# ---------------------------------------------------------------------------------- causal family


@checked(n=positive)
def causal(n: int) -> IntervalMask:
    """Causal mask as key runs: ``M[q, k] = k <= q``; row `q` is the run ``[0, q + 1)``.

    **Arguments:**

    - `n`: sequence length, an integer >= 1.

    **Returns:** an :class:`~hassejax.masks.IntervalMask` with `n` rows and one run a row
    (row = query, column = key, True = may attend), equal to :func:`hassejax.masks.causal`.

    **Raises:** :class:`~hassejax.errors.MaskError` if `n` is not an integer >= 1.

    **Example:**

    ```python
    >>> from hassejax.masks import structured
    >>> structured.causal(4).row(2)
    [(0, 3)]

    ```
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

    **Raises:** :class:`~hassejax.errors.MaskError` if `n` is not an integer >= 1.

    **Example:**

    ```python
    >>> from hassejax.masks import structured
    >>> structured.full(3).row(0)
    [(0, 3)]

    ```
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

    **Raises:** :class:`~hassejax.errors.MaskError` for a bad `n` or a `block_size` outside `[1, n]`.

    **Example:**

    ```python
    >>> from hassejax.masks import structured
    >>> structured.block_causal(5, block_size=2).row(2)
    [(0, 4)]

    ```
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

    **Raises:** :class:`~hassejax.errors.MaskError` for a bad `n` or a `chunk` outside `[1, n]`.

    **Example:**

    ```python
    >>> from hassejax.masks import structured
    >>> structured.chunked_causal(7, chunk=3).row(5)
    [(3, 6)]

    ```
    """
    chunk = integer(chunk, "chunk", minimum=1, maximum=n, maximum_label="n")
    _budget(n, 1, "chunked_causal")
    q = _positions(n)
    return _as_mask((q // chunk) * chunk, q + 1, n, normal=True)


# ---------------------------------------------------------------------------------- documents


@checked(segments=_concrete_index_vector, inner=inner_arg, kind=kind_arg)
def document(
    segments: Sequence[int] | np.ndarray,
    inner: Callable | Literal["causal", "full"] | None = None,
    *,
    kind: Literal["lengths", "ids"] = "lengths",
) -> IntervalMask:
    """Document mask of packed sequences as key runs: ``M[q, k] = doc[q] == doc[k] and inner(q - start[q], k - start[k])``.

    With the default causal `inner` row `q` is ``[start[q], q + 1)``; with ``"full"`` it
    is the whole document ``[start[q], end[q])`` (block diagonal). A callable `inner` is
    evaluated with JAX on the within-document offsets (``(L, L)`` for the longest document
    `L`, rows in blocks, see :func:`hassejax.masks.from_mask_mod` with
    ``form="intervals"``), and its runs are cut to each document.

    **Arguments:**

    - `segments`: with ``kind="lengths"`` (default) the document lengths, integers >= 1;
      with ``kind="ids"`` one document id per position, each document one contiguous run.
      Must be concrete (not traced).
    - `inner`: ``None`` or ``"causal"``, ``"full"``, or a FlexAttention-style callable
      ``inner(b, h, q_off, k_off) -> bool`` written with jnp.
    - `kind`: ``"lengths"`` or ``"ids"``: how to read `segments` (never guessed).

    **Returns:** an :class:`~hassejax.masks.IntervalMask`, equal to
    :func:`hassejax.masks.document` with the same arguments.

    **Raises:** :class:`~hassejax.errors.MaskError` for non-integer or traced segments, a
    length < 1, ids that split a document, a bad `kind`, or an `inner` that is not a
    Boolean mask_mod.

    **Example:**

    ```python
    >>> from hassejax.masks import structured
    >>> m = structured.document([3, 2])
    >>> m.row(1), m.row(4)
    ([(0, 2)], [(3, 5)])
    >>> structured.document([0, 0, 1, 1, 1], "full", kind="ids").row(3)
    [(2, 5)]

    ```

    **References:** mask gallery "document / packed causal"; attention-gym
    ``document_mask.py``; xformers ``BlockDiagonalCausalMask``.
    """
    if kind == "lengths":
        check_document_lengths(segments)
        lengths = segments
    else:
        lengths = check_contiguous_ids(segments)
    n = int(lengths.sum())
    _budget(n, 1, "document")
    doc_start = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    start = np.repeat(doc_start, lengths)
    end = start + np.repeat(lengths.astype(np.int64), lengths)
    q = _positions(n)
    if inner is None or (isinstance(inner, str) and inner == "causal"):
        return _as_mask(start, q + 1, n, normal=True)
    if isinstance(inner, str):  # "full"
        return _as_mask(start, end, n, normal=True)
    from ._convert import mask_mod_runs  # JAX: the callable is a jnp function

    longest = int(lengths.max())
    off_s, off_e = mask_mod_runs(inner, longest, name="inner")
    offset = q - start
    length = (end - start)[:, None]
    s = np.minimum(off_s[offset].astype(np.int64), length)
    e = np.minimum(off_e[offset].astype(np.int64), length)
    _budget(n, s.shape[1], "document")
    return _as_mask(s + start[:, None], np.where(s < e, e + start[:, None], 0), n, normal=False)


# ---------------------------------------------------------------------------------- banded


@checked(n=positive, window=nonnegative, dilation=positive)
def dilated(n: int, window: int, dilation: int) -> IntervalMask:
    """Dilated sliding window as key runs: ``M[q, k] = |q - k| <= window and |q - k| % dilation == 0``.

    With ``dilation = 1`` each row is one run; otherwise every kept key is its own run of
    length 1: row `q` holds the keys ``q + j · dilation`` for ``|j| <= window // dilation``
    inside ``[0, n)``, so ``k = 2 · (window // dilation) + 1`` runs a row.

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
    _budget(n, k, "dilated")
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
    return _as_mask(key, stops, n, normal=True)


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
    _budget(n, runs + 1, "global_sliding")
    q = _positions(n)
    w_s = np.where(g, 0, np.maximum(q - window, 0))
    w_e = np.where(g, n, np.minimum(q + window + 1, n))
    starts = np.concatenate([np.broadcast_to(g_s.astype(np.int64), (n, runs)), w_s[:, None]], axis=1)
    stops = np.concatenate([np.broadcast_to(g_e.astype(np.int64), (n, runs)), w_e[:, None]], axis=1)
    return _as_mask(starts, stops, n, normal=False)


# ---------------------------------------------------------------------------------- grids, trees


@checked(height=positive, width=positive, kernel_h=positive, kernel_w=positive)
def natten_2d(height: int, width: int, kernel_h: int, kernel_w: int) -> IntervalMask:
    """2-D neighbourhood attention (NATTEN) on a row-major grid, as key runs.

    Query ``q = r · width + c`` sees the `kernel_h × kernel_w` cells around the clamped
    centre ``(clamp(r, kh//2, height-1-kh//2), clamp(c, kw//2, width-1-kw//2))`` (rule of
    :func:`hassejax.masks.natten_2d`): one run of `kernel_w` keys in each of `kernel_h`
    grid rows, or a single run when ``kernel_w == width``.

    **Arguments:**

    - `height`, `width`: grid size, integers >= 1; `n = height * width`.
    - `kernel_h`, `kernel_w`: odd kernel sizes, ``1 <= kernel_h <= height``,
      ``1 <= kernel_w <= width``.

    **Returns:** an :class:`~hassejax.masks.IntervalMask` with `n` rows, equal to
    :func:`hassejax.masks.natten_2d`.

    **Raises:** :class:`~hassejax.errors.MaskError` for a non-positive grid size, or a
    kernel that is not an odd integer within its axis.

    **Example:**

    ```python
    >>> from hassejax.masks import structured
    >>> structured.natten_2d(3, 4, kernel_h=3, kernel_w=1).row(0)
    [(0, 1), (4, 5), (8, 9)]

    ```

    **References:** Hassani et al., "Neighborhood Attention Transformer", arXiv:2204.07143;
    mask gallery "2-D neighbourhood (NATTEN)".
    """
    kernel_h = odd_kernel(kernel_h, height, "kernel_h", "height")
    kernel_w = odd_kernel(kernel_w, width, "kernel_w", "width")
    n = height * width
    hh, hw = kernel_h // 2, kernel_w // 2
    q = _positions(n)
    centre_r = np.clip(q // width, hh, height - 1 - hh)
    centre_c = np.clip(q % width, hw, width - 1 - hw)
    if kernel_w == width:  # the grid rows touch: one run
        _budget(n, 1, "natten_2d")
        return _as_mask((centre_r - hh) * width, (centre_r + hh + 1) * width, n, normal=True)
    _budget(n, kernel_h, "natten_2d")
    rows = (centre_r - hh)[:, None] + np.arange(kernel_h, dtype=np.int64)[None, :]
    starts = rows * width + (centre_c - hw)[:, None]
    return _as_mask(starts, starts + kernel_w, n, normal=True)


@checked(parents=_concrete_index_vector, prefix=nonnegative)
def tree_prefix(parents: Sequence[int] | np.ndarray, prefix: int) -> IntervalMask:
    """Tree (speculative decoding) attention after a causal prefix, as key runs.

    Rule of :func:`hassejax.masks.tree_prefix` with `n = P + N`: a prefix row `q < P` is
    ``[0, q + 1)``; the row of tree node `i` is ``[0, P)`` joined with the positions
    ``P + j`` of the nodes `j` on its root-to-self path, one run per stretch of consecutive
    indices on that path (a chain of nodes listed in order is one run).

    **Arguments:**

    - `parents`: parent index of each tree node, parents before children: ``parents[i]``
      is `-1` (a root) or in `[0, i - 1]`. Must be concrete.
    - `prefix`: prefix length `P`, an integer >= 0.

    **Returns:** an :class:`~hassejax.masks.IntervalMask` with `P + N` rows, equal to
    :func:`hassejax.masks.tree_prefix`.

    **Raises:** :class:`~hassejax.errors.MaskError` for an empty, non-integer or traced
    `parents`, a parent that is not `-1` or an earlier node, or a negative `prefix`.

    **Example:**

    ```python
    >>> from hassejax.masks import structured
    >>> m = structured.tree_prefix([-1, 0, 0, 1], prefix=2)
    >>> m.row(1), m.row(4), m.row(5)
    ([(0, 2)], [(0, 3), (4, 5)], [(0, 4), (5, 6)])

    ```

    **References:** attention-gym ``jetspec.py``; Miao et al., "SpecInfer",
    arXiv:2305.09781; mask gallery "tree / speculative decoding".
    """
    check_parents(parents)
    t = parents.shape[0]
    n = prefix + t
    # Runs of the root-to-node path. A node continues its parent's run when the parent is the
    # node just before it; head[x] is the first node of the run through x (a running maximum
    # of the break points), and the next run down the path ends at parents[head[x]]. Walking
    # all nodes one run at a time gives the runs last-first: k vectorised steps for k runs.
    node = np.arange(t, dtype=np.int64)
    par = parents.astype(np.int64)
    head = np.maximum.accumulate(np.where((par < 0) | (par != node - 1), node, 0))
    below = par[head]
    tops = [node]
    while True:
        cur = tops[-1]
        nxt = np.where(cur >= 0, below[np.maximum(cur, 0)], -1)
        if not (nxt >= 0).any():
            break
        tops.append(nxt)
    k = len(tops)
    count = sum((top >= 0).astype(np.int64) for top in tops)
    _budget(n, k + 1, "tree_prefix")
    s = np.full((t, k), t, np.int64)
    e = np.full((t, k), t, np.int64)
    for c, top in enumerate(tops):
        alive = np.flatnonzero(top >= 0)
        col = count[alive] - 1 - c
        s[alive, col] = head[top[alive]]
        e[alive, col] = top[alive] + 1
    pad = s >= t
    tree_s = np.where(pad, n, s + prefix)
    tree_e = np.where(pad, n, e + prefix)
    q = _positions(prefix)
    head_s = np.concatenate([np.zeros(prefix, np.int64), np.zeros(t, np.int64)])
    head_e = np.concatenate([q + 1, np.full(t, prefix, np.int64)])
    body_s = np.concatenate([np.full((prefix, k), n, np.int64), tree_s])
    body_e = np.concatenate([np.full((prefix, k), n, np.int64), tree_e])
    starts = np.concatenate([head_s[:, None], body_s], axis=1)
    stops = np.concatenate([head_e[:, None], body_e], axis=1)
    return _as_mask(starts, stops, n, normal=False)


# ---------------------------------------------------------------------------------- two-stream layouts


@checked(n=positive, block_size=positive)
def block_diffusion(n: int, block_size: int) -> IntervalMask:
    """BD3-LM block diffusion training mask over `2n` slots ``[x_t ; x_0]``, as key runs.

    Rule of :func:`hassejax.masks.block_diffusion`, with ``b = (q mod n) // block_size``:
    a noised row `q < n` sees its own noised block ``[b·B, min((b+1)·B, n))`` and the
    earlier clean blocks ``[n, n + b·B)``; a clean row sees the clean blocks up to its own,
    ``[n, n + min((b+1)·B, n))``. A partial last block is allowed.

    **Arguments:**

    - `n`: length of the clean sequence, an integer >= 1.
    - `block_size`: diffusion block length `B`, an integer in `[1, n]`.

    **Returns:** an :class:`~hassejax.masks.IntervalMask` over `2n` positions (at most two
    runs a row), equal to :func:`hassejax.masks.block_diffusion`.

    **Raises:** :class:`~hassejax.errors.MaskError` for a bad `n` or a `block_size` outside `[1, n]`.

    **Example:**

    ```python
    >>> from hassejax.masks import structured
    >>> m = structured.block_diffusion(6, block_size=2)   # slots x_t 0..5, x_0 6..11
    >>> m.n, m.row(2), m.row(8)
    (12, [(2, 4), (6, 8)], [(6, 10)])

    ```

    **References:** Arriola et al., "Block Diffusion", arXiv:2503.09573, §3.1; mask gallery
    "block diffusion".
    """
    block_size = integer(block_size, "block_size", minimum=1, maximum=n, maximum_label="n")
    _budget(2 * n, 2, "block_diffusion")
    i = _positions(n)
    first = (i // block_size) * block_size
    last = np.minimum(first + block_size, n)
    noisy_s = np.stack([first, np.full(n, n, np.int64)], axis=1)
    noisy_e = np.stack([last, n + first], axis=1)
    clean_s = np.stack([np.full(n, n, np.int64), np.full(n, 2 * n, np.int64)], axis=1)
    clean_e = np.stack([n + last, np.full(n, 2 * n, np.int64)], axis=1)
    return _as_mask(np.concatenate([noisy_s, clean_s]), np.concatenate([noisy_e, clean_e]), 2 * n, normal=False)


class TwoStreamIntervals(NamedTuple):
    """The two XLNet masks in interval form (row = query token, True = may attend).

    - `content`: the content stream `h` (sees its own token).
    - `query`: the query stream `g` (never sees its own token).

    Same fields as :class:`hassejax.masks.TwoStreamMasks`, each an
    :class:`~hassejax.masks.IntervalMask`.
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
    _budget(rows + 2 * n, k, "xlnet_two_stream")
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

MASKS: dict[str, Callable[..., IntervalMask]] = {
    "causal": causal,
    "full": full,
    "prefix_lm": prefix_lm,
    "sliding_window": sliding_window,
    "attention_sinks": attention_sinks,
    "block_causal": block_causal,
    "chunked_causal": chunked_causal,
    "document": document,
    "dilated": dilated,
    "global_sliding": global_sliding,
    "natten_2d": natten_2d,
    "tree_prefix": tree_prefix,
    "block_diffusion": block_diffusion,
    "xlnet_two_stream": _xlnet_stream,
}
"""The structured constructors by name: the same names and signatures as
:data:`hassejax.masks.MASKS`, each returning an :class:`~hassejax.masks.IntervalMask`
(``MASKS["xlnet_two_stream"]`` takes ``stream="content"`` or ``"query"``). Used by
``hassejax.masks.from_spec(..., form="intervals")``.
"""
