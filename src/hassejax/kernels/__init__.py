"""Masks in and out of the attention kernels people train with.

- JAX splash attention (``jax.experimental.pallas.ops.tpu.splash_attention``):
  :func:`from_splash` reads any splash ``Mask`` (``MultiHeadMask`` gives a head axis) through
  the mask's own slicing, :func:`to_splash` writes the exact structured splash mask where
  one exists (``CausalMask``, ``LocalMask``, ``ChunkedCausalMask``, ``FullMask`` and their
  ``&`` / ``|``), a ``NumpyMask`` otherwise.
- FlexAttention-style callables ``mask_mod(b, h, q_idx, kv_idx) -> bool``:
  :func:`to_mask_mod` (written with ``jnp``; scalars and :func:`jax.vmap`) and
  :func:`mask_mod_source` (Python source to paste into FlexAttention); read them back with
  :func:`hassejax.masks.from_mask_mod`.
- Tile statistics: :func:`tile_stats` classifies each ``(block_q, block_kv)`` tile as empty,
  partial or full, as splash's ``MaskInfo`` and FlexAttention's ``BlockMask`` do.

Convention everywhere: row = query, column = key, True = may attend.

The names load on first use, so ``import hassejax.kernels`` starts neither JAX nor splash.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "from_splash": ".splash",
    "to_splash": ".splash",
    "to_mask_mod": ".mask_mod",
    "mask_mod_source": ".mask_mod",
    "mask_rule": ".mask_mod",
    "tile_stats": ".tiles",
    "TileStats": ".tiles",
}

__all__ = ["TileStats", "from_splash", "mask_mod_source", "mask_rule", "tile_stats", "to_mask_mod", "to_splash"]
assert sorted(_EXPORTS) == __all__


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
