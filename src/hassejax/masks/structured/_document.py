"""Document (packed-sequence) masks in interval form.

JAX-free like the whole :mod:`hassejax.masks.structured` package; spec hasse.md §0 conventions (row = query, column = key, True = may attend).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

from .._intervals import IntervalMask
from .._validate import (
    check_contiguous_ids,
    check_document_lengths,
    checked,
    inner_arg,
    kind_arg,
)
from ._common import _as_mask, _budget, _concrete_index_vector, _positions

__all__ = ["document"]


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
    _budget(n, 1, "document", "segments")
    doc_start = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    start = np.repeat(doc_start, lengths)
    end = start + np.repeat(lengths.astype(np.int64), lengths)
    q = _positions(n)
    if inner is None or (isinstance(inner, str) and inner == "causal"):
        return _as_mask(start, q + 1, n, normal=True)
    if isinstance(inner, str):  # "full"
        return _as_mask(start, end, n, normal=True)
    from .._convert import mask_mod_runs  # JAX: the callable is a jnp function

    longest = int(lengths.max())
    off_s, off_e = mask_mod_runs(inner, longest, name="inner")
    offset = q - start
    length = (end - start)[:, None]
    s = np.minimum(off_s[offset].astype(np.int64), length)
    e = np.minimum(off_e[offset].astype(np.int64), length)
    _budget(n, s.shape[1], "document", "segments")
    return _as_mask(s + start[:, None], np.where(s < e, e + start[:, None], 0), n, normal=False)
