"""Attention masks: constructors, converters from foreign conventions, combinators, registry.

Convention (spec hasse.md §0): a mask is a JAX Boolean array of shape `(n, n)`
(`(..., n_q, n_k)` where stated); ``M[q, k] = True`` means query `q` (row) may attend to
key `k` (column). Every constructor's docstring gives its exact elementwise rule and the
library rule it reproduces (mask gallery, /shared/cases/mask_gallery.md).

- Constructors: :func:`causal`, :func:`full`, :func:`prefix_lm`, :func:`sliding_window`,
  :func:`block_causal`, :func:`chunked_causal`, :func:`document`, :func:`dilated`,
  :func:`global_sliding`, :func:`natten_2d`, :func:`tree_prefix`,
  :func:`block_diffusion`, :func:`xlnet_two_stream` (-> :class:`TwoStreamMasks`),
  :func:`attention_sinks` (StreamingLLM), :func:`causal_bottom_right` (rectangular).
- Compressed exact form: :class:`IntervalMask` (sorted key runs per row, no ``n × n``
  array), the form the closure uses at long contexts. :mod:`hassejax.masks.structured`
  has every square constructor above under the same name and arguments, returning an
  :class:`IntervalMask` built in ``O(n · runs)`` (pure NumPy, no JAX);
  ``from_spec(..., form="intervals")`` and ``from_mask_mod(..., form="intervals")`` give
  the same form.
- Converters: :func:`from_mask_mod`, :func:`from_additive_bias`, :func:`from_blocked`.
- Combinators: :func:`and_masks`, :func:`or_masks` (of arrays, or lazily of mask_mod callables).
- Packed sequences: :func:`packed_document_ids` (Hugging Face ``position_ids`` or
  flash-attn ``cu_seqlens`` -> the document ids that :func:`document` takes with ``kind="ids"``).
- Registry: :data:`MASKS` and :func:`from_spec` (``"sliding_window(n=16, left=2)"``,
  combinations with ``|`` and ``&``: ``"sliding_window(n=64, left=8) | attention_sinks(n=64, num=4)"``).

Bad arguments raise :class:`~hassejax.errors.MaskError` naming the argument, what was
expected and what came.
"""

from . import structured
from ._causal import block_causal, causal, causal_bottom_right, chunked_causal, full, prefix_lm
from ._combine import and_masks, or_masks
from ._convert import from_additive_bias, from_blocked, from_mask_mod
from ._diffusion import block_diffusion
from ._document import document
from ._intervals import IntervalMask
from ._natten import natten_2d
from ._packed import packed_document_ids
from ._sinks import attention_sinks
from ._spec import MASKS, from_spec
from ._tree import tree_prefix
from ._window import dilated, global_sliding, sliding_window
from ._xlnet import TwoStreamMasks, xlnet_two_stream

__all__ = [
    "causal",
    "full",
    "prefix_lm",
    "causal_bottom_right",
    "sliding_window",
    "block_causal",
    "chunked_causal",
    "document",
    "packed_document_ids",
    "dilated",
    "global_sliding",
    "natten_2d",
    "tree_prefix",
    "block_diffusion",
    "xlnet_two_stream",
    "TwoStreamMasks",
    "attention_sinks",
    "structured",
    "IntervalMask",
    "from_mask_mod",
    "from_additive_bias",
    "from_blocked",
    "and_masks",
    "or_masks",
    "MASKS",
    "from_spec",
]
