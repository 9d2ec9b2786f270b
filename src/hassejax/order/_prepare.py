"""Argument checks and input preparation of the closure functions (private).

``method`` and ``num_layers`` checks, ``A = M | I`` on the host (NumPy) or traced, the stack of
per-layer adjacencies, and the conversion of a dense mask to an
:class:`~hassejax.masks.IntervalMask` (spec hasse.md §1.1).
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import as_mask
from .._tracing import is_traced as _is_traced
from ..errors import MaskError, ParameterError
from ..masks._intervals import IntervalMask
from ._routes import _dense_memory

#: The routes accepted by ``method``.
METHODS = ("auto", "matmul", "bitpacked", "structured")


def _check_method(method) -> str:
    if not isinstance(method, str) or method not in METHODS:
        raise ParameterError(f"`method` must be one of {METHODS}; got {method!r}.")
    return method


def _check_num_layers(num_layers) -> int | None:
    if num_layers is None:
        return None
    if isinstance(num_layers, jax.core.Tracer):
        raise ParameterError(
            "`num_layers` must be a concrete positive int: it sets the number of squarings and the output, so it "
            "cannot be traced; under jax.jit mark it static (static_argnames=('num_layers',)) or call outside jit; "
            f"got a traced value of shape {num_layers.shape} and dtype {num_layers.dtype}."
        )
    if isinstance(num_layers, jax.Array) and num_layers.ndim == 0 and jnp.issubdtype(num_layers.dtype, jnp.integer):
        num_layers = int(num_layers)  # a concrete JAX integer scalar, as a NumPy one (a fresh user: jnp.int32(3))
    if isinstance(num_layers, (bool, np.bool_)) or not isinstance(num_layers, (int, np.integer)):
        raise ParameterError(
            f"`num_layers` must be a positive int (the number of layers L) or None (the limit); "
            f"got {num_layers!r} of type {type(num_layers).__name__}."
        )
    if num_layers < 1:
        raise ParameterError(f"`num_layers` must be >= 1 (R^(1) = A is one layer); got {int(num_layers)}.")
    return int(num_layers)


def _adjacency(m):
    """``m | I``: traced (jnp) for a tracer, else on the host (one NumPy copy, diagonal set)."""
    n = m.shape[-1]
    if _is_traced(m):
        return m | jnp.eye(n, dtype=bool)
    a = np.array(m, dtype=bool)
    diag = np.arange(n)
    a[..., diag, diag] = True
    return a


def _prepare(mask, name: str = "mask", memory=None):
    """Validate and return ``(A, traced)``: ``A = M | I`` as NumPy (concrete) or a tracer.

    `memory` (see :func:`_dense_memory`) runs on the validated shape before any copy.
    """
    m = as_mask(mask, name=name, memory=memory)
    traced = _is_traced(m)
    return _adjacency(m if traced else np.asarray(m)), traced


def _stack_layer_masks(layer_masks, method: str = "auto"):
    """Validate `layer_masks`; return ``(A_stack, traced)``, adjacencies of shape ``(L, *batch, n, n)``.

    The memory of the whole product is estimated from the shape of the first layer (sequence)
    or of the stack (array) before anything is copied.
    """
    if isinstance(layer_masks, Sequence) and not isinstance(layer_masks, str):
        if len(layer_masks) == 0:
            raise MaskError("`layer_masks` must hold at least one mask (one per layer); got an empty sequence.")
        num = len(layer_masks)
        memory = _dense_memory("layer_masks", f"the product of {num} layer masks", method, stored=num, layers=num)
        layers = [
            as_mask(m, name=f"layer_masks[{l}]", memory=memory if l == 0 else None) for l, m in enumerate(layer_masks)
        ]
        shape = layers[0].shape
        for l, m in enumerate(layers):
            if m.shape != shape:
                raise MaskError(
                    f"`layer_masks` must all have the same shape (*batch, n, n); layer_masks[0] has shape "
                    f"{shape} but layer_masks[{l}] has shape {m.shape}."
                )
        traced = any(_is_traced(m) for m in layers)
        stacked = jnp.stack(layers) if traced else np.stack([np.asarray(m) for m in layers])
    else:
        memory = _dense_memory("layer_masks", "the product of {num} layer masks", method, stacked=True)
        stacked = as_mask(layer_masks, name="layer_masks", memory=memory)
        if stacked.ndim < 3:
            raise MaskError(
                "`layer_masks` must be a sequence of masks or an array stacked along a leading layer axis, "
                f"shape (L, *batch, n, n); got an array of shape {stacked.shape} (rank {stacked.ndim}). "
                "For a single mask pass it as `mask`; the batch axis always means independent masks."
            )
        if stacked.shape[0] == 0:
            raise MaskError(
                "`layer_masks` must hold at least one mask (one per layer); got an array with an empty "
                f"leading layer axis, shape {stacked.shape}. An empty batch axis comes after the layer axis: "
                "(L, 0, n, n)."
            )
        traced = _is_traced(stacked)
        stacked = stacked if traced else np.asarray(stacked)
    return _adjacency(stacked), traced


def _as_intervals(m, name: str) -> IntervalMask:
    if isinstance(m, IntervalMask):
        return m
    a = as_mask(m, name, batched=False, memory=_dense_memory(name, "the interval form", "bitpacked"))
    return IntervalMask.from_dense(np.asarray(a), name=name)
