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

from __future__ import annotations

import importlib

# Names load their module on first use (PEP 562): the structured route (IntervalMask,
# structured, from_spec(..., form="intervals")) is pure NumPy, and ``import hassejax.masks``
# starts no JAX; the dense constructors import JAX when first named.
_LAZY = {
    "structured": ".structured",
    "block_causal": "._causal",
    "causal": "._causal",
    "causal_bottom_right": "._causal",
    "chunked_causal": "._causal",
    "full": "._causal",
    "prefix_lm": "._causal",
    "and_masks": "._combine",
    "or_masks": "._combine",
    "from_additive_bias": "._convert",
    "from_blocked": "._convert",
    "from_mask_mod": "._convert",
    "block_diffusion": "._diffusion",
    "document": "._document",
    "IntervalMask": "._intervals",
    "natten_2d": "._natten",
    "packed_document_ids": "._packed",
    "attention_sinks": "._sinks",
    "MASKS": "._registry",
    "from_spec": "._spec",
    "tree_prefix": "._tree",
    "dilated": "._window",
    "global_sliding": "._window",
    "sliding_window": "._window",
    "TwoStreamMasks": "._xlnet",
    "xlnet_two_stream": "._xlnet",
}

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


def __getattr__(name: str):
    """A public name from its module (:data:`_LAZY`), or a submodule, imported on first use."""
    if name in _LAZY:
        module = importlib.import_module(_LAZY[name], __name__)
        value = module if name == "structured" else getattr(module, name)
        globals()[name] = value
        return value
    if not name.startswith("__"):  # a submodule, as when this package imported them all eagerly
        try:
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
