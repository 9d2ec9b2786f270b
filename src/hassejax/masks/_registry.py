"""The dense mask registry :data:`MASKS`: square mask constructors by name (imports JAX).

:func:`hassejax.masks.from_spec` builds specs from it with ``form="dense"``; the parser
(:mod:`hassejax.masks._spec`) and the interval registry
(:data:`hassejax.masks.structured.MASKS`) import no JAX.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from jaxtyping import Array, ArrayLike, Bool, Int

from ._args import checked
from ._causal import block_causal, causal, chunked_causal, full, prefix_lm
from ._diffusion import block_diffusion
from ._document import document
from ._natten import natten_2d
from ._sinks import attention_sinks
from ._tree import tree_prefix
from ._validate import stream_arg
from ._window import dilated, global_sliding, sliding_window
from ._xlnet import xlnet_two_stream

__all__ = ["MASKS"]


@checked(stream=stream_arg)
def _xlnet_stream(
    permutation: Sequence[int] | Int[ArrayLike, " n"],
    context: int = 0,
    *,
    stream: Literal["content", "query"],
) -> Bool[Array, "n n"]:
    """One stream of :func:`~hassejax.masks.xlnet_two_stream` (the registry's ``xlnet_two_stream``).

    **Arguments:** `permutation` and `context` as in :func:`~hassejax.masks.xlnet_two_stream`;
    `stream`: ``"content"`` or ``"query"`` (required, keyword only).

    **Returns:** the Boolean `(n, n)` mask of that stream.

    **Raises:** :class:`~hassejax.errors.MaskError` as :func:`~hassejax.masks.xlnet_two_stream`,
    or for a `stream` other than ``"content"``/``"query"``.
    """
    return getattr(xlnet_two_stream(permutation, context), stream)


_xlnet_stream.__name__ = "xlnet_two_stream"

MASKS: dict[str, Callable[..., Bool[Array, "n n"]]] = {
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
"""Square mask constructors by name, for users who pick by string (the CLI's ``MASK_SPEC``).

Each value returns one Boolean `(n, n)` mask. ``MASKS["xlnet_two_stream"]`` selects one
of the two XLNet streams with a required keyword ``stream="content"`` or ``"query"``
(``xlnet_two_stream(permutation=[2, 0, 1], stream="query")``); call
:func:`hassejax.masks.xlnet_two_stream` directly for both. ``causal_bottom_right`` is
not registered: it is rectangular, and closures need square masks (spec hasse.md §0).
:data:`hassejax.masks.structured.MASKS` has the same names and signatures and returns
:class:`~hassejax.masks.IntervalMask` (``from_spec(..., form="intervals")``).
"""
