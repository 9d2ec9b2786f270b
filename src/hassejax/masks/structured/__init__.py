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

One family a file, as for the dense constructors: ``_causal`` (causal, full, prefix-LM,
block-causal, chunked), ``_window`` (sliding windows, sinks, dilated, global + sliding),
``_document``, ``_tree``, ``_natten``, ``_diffusion``, ``_xlnet``; the shared helpers in
``_common``. Every name is importable from here.

Source: the rules are those of the dense constructors (mask gallery,
/shared/cases/mask_gallery.md); the interval form is :mod:`hassejax.masks._intervals`.
"""

from __future__ import annotations

from collections.abc import Callable

from .._intervals import IntervalMask
from ._causal import block_causal, causal, chunked_causal, full, prefix_lm
from ._diffusion import block_diffusion
from ._document import document
from ._natten import natten_2d
from ._tree import tree_prefix
from ._window import attention_sinks, dilated, global_sliding, sliding_window
from ._xlnet import TwoStreamIntervals, _xlnet_stream, xlnet_two_stream

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
