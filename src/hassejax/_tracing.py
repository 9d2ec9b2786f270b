"""The one tracer check of the package (private).

Argument checks that need concrete values skip themselves under ``jit``/``vmap``; they ask
:func:`is_traced`. It never imports JAX: without JAX loaded nothing can be traced.
"""

from __future__ import annotations

import sys

__all__ = ["is_traced", "refuse_traced", "tracing"]


def is_traced(*values) -> bool:
    """True when any of `values` is a JAX tracer (its value is unknown until run time).

    **Arguments:** `values`: any objects (arrays, scalars, None).

    **Returns:** `bool`.

    **Example:**

    >>> import jax, jax.numpy as jnp
    >>> is_traced(1.0), is_traced(jnp.ones(2))
    (False, False)
    >>> jax.jit(lambda x: jnp.asarray(is_traced(x)))(1.0).item()
    True
    """
    jax = sys.modules.get("jax")
    if jax is None:
        return False
    tracer = jax.core.Tracer
    return any(isinstance(v, tracer) for v in values)


def tracing() -> bool:
    """True inside a JAX transformation's trace (``jit``, ``vmap``, ``grad``, ...), where a function may close over
    tracers that no value passed to it shows (``vmap`` leaves unbatched values concrete).

    Uses JAX's private ``trace_state_clean``; a JAX without it answers True (callers then take their path that
    works under any transformation).

    **Example:**

    >>> import jax, jax.numpy as jnp
    >>> tracing()
    False
    >>> jax.vmap(lambda x: x + jnp.asarray(tracing(), x.dtype))(jnp.zeros(2)).tolist()
    [1.0, 1.0]
    """
    jax = sys.modules.get("jax")
    if jax is None:
        return False
    try:
        from jax._src.core import trace_state_clean
    except ImportError:  # pragma: no cover - a JAX without it
        return True
    return not trace_state_clean()


def refuse_traced(value, name: str, caller: str) -> None:
    """Raise :class:`~hassejax.errors.MaskError` if `value` is traced (under ``jax.jit``/``vmap``): `caller` runs on
    the host, where a tracer has no values (JAX's own ``TracerArrayConversionError`` names no argument)."""
    from .errors import MaskError

    if is_traced(value):
        raise MaskError(
            f"`{name}` must be a concrete array: {caller} runs on the host (NumPy/networkx) and cannot be traced "
            f"under jax.jit or jax.vmap; got a traced array of shape {tuple(value.shape)}. Call {caller} outside "
            "jit/vmap, on the computed array (e.g. jax.device_get of a jitted function's output)."
        )
