"""The one tracer check of the package (private).

Argument checks that need concrete values skip themselves under ``jit``/``vmap``; they ask
:func:`is_traced`. It never imports JAX: without JAX loaded nothing can be traced.
"""

from __future__ import annotations

import sys

__all__ = ["is_traced"]


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
