"""The bit-packed route of the closure on the host (private): one mask of a batch at a time.

Wrappers of :mod:`hassejax.order._bitpacked` and :mod:`hassejax.order._bitpacked_depth` over
batch axes, and :func:`_on_host`, which runs them through :func:`jax.pure_callback` under a trace.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._tracing import is_traced as _is_traced
from ._bitpacked import closure_bitpacked, product_bitpacked
from ._bitpacked_depth import power_bitpacked
from ._progress import NO_BAR, Bar

# --------------------------------------------------------------------------------------------
# the bit-packed route (host)
# --------------------------------------------------------------------------------------------


def _note_mask(bar: Bar, b: int, batch: int) -> None:
    if batch > 1:
        bar.note(f"mask {b + 1}/{batch}")


def _host_closure(a, bar: Bar = NO_BAR) -> np.ndarray:
    """Limit for ``a`` of shape ``(..., n, n)`` (adjacencies), one mask at a time; `bar` counts batches."""
    a = np.asarray(a, dtype=bool)
    if a.ndim == 2:
        return closure_bitpacked(a, bar)[0]
    n = a.shape[-1]
    flat = a.reshape(-1, n, n)
    out = np.empty_like(flat)
    for b in range(flat.shape[0]):
        _note_mask(bar, b, flat.shape[0])
        out[b] = closure_bitpacked(flat[b], bar)[0]
    return out.reshape(a.shape)


def _host_power(a, num_layers, bar: Bar = NO_BAR) -> np.ndarray:
    """``A^num_layers`` for ``a`` of shape ``(..., n, n)`` (adjacencies), by the bit-packed level search stopped at
    ``num_layers`` (:func:`~hassejax.order._bitpacked_depth.power_bitpacked`; `bar` counts the levels).

    `num_layers` may come as an array (it does through :func:`jax.pure_callback`).
    """
    a = np.asarray(a, dtype=bool)
    num_layers = int(np.ravel(num_layers)[0])
    n = a.shape[-1]
    flat = a.reshape(-1, n, n)
    out = np.empty_like(flat)
    for b in range(flat.shape[0]):
        _note_mask(bar, b, flat.shape[0])
        out[b] = power_bitpacked(flat[b], num_layers, bar)[0]
    return out.reshape(a.shape)


def _host_product(layers, bar: Bar = NO_BAR) -> np.ndarray:
    """Per-layer product for ``layers`` of shape ``(..., L, n, n)`` (layer axis third from last; `bar` counts rounds)."""
    layers = np.asarray(layers, dtype=bool)
    num, n = layers.shape[-3], layers.shape[-1]
    flat = layers.reshape(-1, num, n, n)
    out = np.empty((flat.shape[0], n, n), dtype=bool)
    for b in range(flat.shape[0]):
        _note_mask(bar, b, flat.shape[0])
        out[b] = product_bitpacked(list(flat[b]), bar)[0]
    return out.reshape(layers.shape[:-3] + (n, n))


def _on_host(fn, x, out_shape, *args, bar: Bar = NO_BAR):
    """Run a host kernel on a concrete array, or through :func:`jax.pure_callback` under a trace.

    `fn` is a module-level function (a stable callback: no recompilation per call); extra
    arguments travel as arrays. `bar` (a progress bar) goes to `fn` on a concrete array only.
    """
    if _is_traced(x):
        spec = jax.ShapeDtypeStruct(out_shape, jnp.bool_)
        extra = [jnp.asarray(v) for v in args]
        return jax.pure_callback(fn, spec, x, *extra, vmap_method="expand_dims")
    return jnp.asarray(fn(x, *args, bar=bar))


def _host_depth(a, bar: Bar = NO_BAR) -> np.ndarray:
    """``L*`` of every adjacency of ``a`` (``(..., n, n)``) by the bit-packed depth route, as int32 (`bar`: levels)."""
    from ._bitpacked_depth import depth_bitpacked

    a = np.asarray(a, dtype=bool)
    n = a.shape[-1]
    flat = a.reshape(-1, n, n)
    out = np.empty(flat.shape[0], dtype=np.int32)
    for b in range(flat.shape[0]):
        _note_mask(bar, b, flat.shape[0])
        out[b] = depth_bitpacked(flat[b], return_closure=False, bar=bar)[0]
    return out.reshape(a.shape[:-2])
