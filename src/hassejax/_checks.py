"""Argument validation shared by the whole package (private).

Shape and dtype checks are static (they work on tracers inside ``jit``); value checks
on traced arrays use :func:`equinox.error_if` at the call site instead.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ._mask_checks import check_mask
from ._memory import host_memory_bytes
from .errors import EmptyRowError, MemoryBudgetError

__all__ = [
    "as_mask",
    "check_rows_nonempty",
    "available_memory_bytes",
    "device_free_bytes",
    "check_memory",
    "int_value",
]


def as_mask(
    mask,
    name: str = "mask",
    *,
    square: bool = True,
    batched: bool = True,
    memory: Callable[[tuple[int, ...]], None] | None = None,
    concrete: str | None = None,
    relation: bool = False,
) -> jax.Array:
    """Validate a Boolean attention mask and return it as a ``jax.Array`` of dtype bool.

    **Arguments:**

    - `mask`: array-like of shape `(..., n_q, n_k)` and dtype bool; row = query, column = key,
      True = may attend (spec hasse.md §0).
    - `name`: the argument name used in error messages.
    - `square`: require `n_q == n_k` (everything that closes over layers does).
    - `batched`: allow leading batch axes (an empty batch axis, e.g. shape `(0, n, n)`, is
      fine); otherwise the rank must be exactly 2.
    - `memory`: a memory estimate, called with the validated shape after the checks above
      and before the mask is copied anywhere (to a device or on the host); it raises
      :class:`~hassejax.errors.MemoryBudgetError` when the caller's computation cannot fit.
    - `concrete`: the caller's name where it runs on the host (NumPy, networkx): a traced `mask` (under
      ``jax.jit``/``vmap``) is then refused with a :class:`~hassejax.errors.MaskError` naming `name` and it,
      instead of JAX's ``TracerArrayConversionError``.
    - `relation`: `mask` is a relation (a reachability preorder, a partial order), not an attention mask: the
      square and dtype errors say so, without the mask wording ("True = may attend", "self-attention").

    **Raises:** :class:`~hassejax.errors.MaskError` for a non-array, wrong rank, empty query
    or key axis, non-square (when `square`), non-Boolean dtype or a traced mask (when `concrete`);
    :class:`~hassejax.errors.MemoryBudgetError` from `memory`. (The checks alone, without JAX:
    :func:`hassejax._mask_checks.check_mask`.)
    """
    mask = check_mask(mask, name, square=square, batched=batched, memory=memory, concrete=concrete, relation=relation)
    return jnp.asarray(mask)


def check_rows_nonempty(mask, name: str = "mask") -> None:
    """Raise :class:`~hassejax.errors.EmptyRowError` if some row of a concrete mask allows no key.

    Works on concrete (non-traced) arrays only; inside ``jit`` use ``eqx.error_if``.
    """
    m = np.asarray(mask)
    empty = ~m.any(axis=-1)
    if empty.any():
        idx = np.argwhere(empty)
        first = tuple(int(i) for i in idx[0])
        raise EmptyRowError(
            f"`{name}` has {int(empty.sum())} empty row(s) (a query that may attend to no key), first at "
            f"index {first}; every row must allow at least one key here."
        )


def available_memory_bytes() -> int:
    """Memory available to the default JAX device, in bytes (best effort).

    For accelerators the device's ``bytes_limit - bytes_in_use``; on the CPU the
    ``MemAvailable`` line of ``/proc/meminfo`` (falling back to physical memory).
    """
    free = device_free_bytes(jax.devices()[0])
    return host_memory_bytes() if free is None else free


def device_free_bytes(dev) -> int | None:
    """Free bytes of an accelerator's own memory (``memory_stats()``: ``bytes_limit - bytes_in_use``); None for a
    CPU device (it uses the host's memory: :func:`~hassejax._memory.host_memory_bytes`) or a device that reports
    none."""
    if dev.platform == "cpu":
        return None
    try:
        stats = dev.memory_stats() or {}
    except Exception:
        return None
    return int(stats["bytes_limit"] - stats.get("bytes_in_use", 0)) if "bytes_limit" in stats else None


def check_memory(
    required_bytes: int,
    what: str,
    name: str = "mask",
    fraction: float = 0.8,
    hint: str | None = None,
    available: int | None = None,
) -> None:
    """Raise :class:`~hassejax.errors.MemoryBudgetError` if `required_bytes` exceeds `fraction` of the free memory.

    `what` describes the computation (e.g. ``"reachability of shape (16384, 16384)"``), `name`
    the argument it comes from; `hint` replaces the default advice ("Use a smaller n or batch.");
    `available` the free bytes to compare against when the caller measured them itself (the memory of
    other devices than the default one, or a value agreed by every process of a multi-process run),
    :func:`available_memory_bytes` by default.
    """
    avail = available_memory_bytes() if available is None else int(available)
    if required_bytes > fraction * avail:
        raise MemoryBudgetError(
            f"`{name}`: {what} needs about {required_bytes / 2**30:.2f} GiB, but only "
            f"{avail / 2**30:.2f} GiB is available (memory budget: {fraction:.0%} of it). "
            + (hint if hint is not None else "Use a smaller n or batch.")
        )


def int_value(value) -> int | None:
    """`value` as a Python int when it is an integer (``numbers.Integral``: Python's and NumPy's, ``np.int64(5)``),
    else None: a bool (``True`` is not a count), a float (even ``4.0``), a string, an array. The caller raises its own
    error, naming its argument and what it expected."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        return None
    return int(value)
