"""JAX-free argument normalisation shared by the dense and the structured mask constructors (private).

:mod:`hassejax.masks._args` re-exports everything here (the dense constructors import it
from there); :mod:`hassejax.masks.structured` imports it directly, so that the structured
constructors run without importing JAX. JAX is consulted only when it is already loaded
(a traced value or a JAX array can exist only then), never imported here.
"""

from __future__ import annotations

import functools
import inspect
import operator
import sys
from collections.abc import Callable

import numpy as np

from ..errors import MaskError

__all__ = ["checked", "describe", "integer", "positive", "nonnegative", "index_vector", "is_traced"]


def describe(value) -> str:
    """A short description of a received value for error messages: repr and type."""
    if hasattr(value, "shape") and hasattr(value, "dtype") and getattr(value, "ndim", 0) > 0:
        return f"an array of shape {tuple(value.shape)} and dtype {value.dtype}"
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{text} ({type(value).__name__})"


def _bounds(minimum: int | None, maximum: int | None, maximum_label: str | None) -> str:
    top = f"{maximum_label}={maximum}" if maximum_label is not None else f"{maximum}"
    if minimum is not None and maximum is not None:
        return f" in [{minimum}, {top}]"
    if minimum is not None:
        return f" >= {minimum}"
    if maximum is not None:
        return f" <= {top}"
    return ""


def is_traced(value) -> bool:
    """True when `value` is a JAX tracer (its values are unknown until run time).

    Without JAX loaded nothing can be traced, so this never imports JAX.
    """
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(value, jax.core.Tracer)


def _is_integer_dtype(dtype) -> bool:
    jnp = sys.modules.get("jax.numpy")
    if jnp is not None:  # JAX's extended integer dtypes (int4, ...) count too
        return bool(jnp.issubdtype(dtype, jnp.integer))
    return bool(np.issubdtype(dtype, np.integer))


def integer(
    value,
    name: str,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    maximum_label: str | None = None,
) -> int:
    """Return `value` as a Python int, or raise :class:`MaskError` naming `name`.

    Accepts Python ints, NumPy integer scalars and concrete 0-d integer arrays; rejects
    bools (``True`` is not a size), floats (even ``4.0``), strings and traced values.
    """
    expected = f"`{name}` must be an integer{_bounds(minimum, maximum, maximum_label)}"
    if isinstance(value, (bool, np.bool_)) or (hasattr(value, "dtype") and value.dtype == np.bool_):
        raise MaskError(f"{expected}; got {describe(value)} (a bool is not accepted as a number here).")
    if is_traced(value):
        raise MaskError(
            f"{expected} known when the mask is built (a static Python int); got a traced value. "
            "Under jax.jit mark it static (static_argnums / static_argnames)."
        )
    try:
        result = operator.index(value)
    except TypeError:
        raise MaskError(f"{expected}; got {describe(value)}.") from None
    if (minimum is not None and result < minimum) or (maximum is not None and result > maximum):
        raise MaskError(f"{expected}; got {result}.")
    return result


def positive(value, name: str) -> int:
    """An integer >= 1 (a size)."""
    return integer(value, name, minimum=1)


def nonnegative(value, name: str) -> int:
    """An integer >= 0 (a width, an offset)."""
    return integer(value, name, minimum=0)


def index_vector(value, name: str, *, allow_empty: bool = False):
    """Normalise a 1-D vector of integers.

    Returns a NumPy ``int64`` array for concrete input (lists, tuples, NumPy or concrete
    JAX arrays), so that value checks can say exactly which entry is wrong, or the JAX
    array itself (cast to ``int32``) when it is traced.
    """
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer)):
                raise MaskError(
                    f"`{name}` must be a sequence of integers; entry {i} is {describe(item)}."
                )
        arr = np.asarray([int(item) for item in value], dtype=np.int64).reshape(len(value))
    elif hasattr(value, "shape") and hasattr(value, "dtype"):
        if value.ndim != 1:
            raise MaskError(f"`{name}` must be a 1-D vector of integers; got shape {tuple(value.shape)}.")
        if not _is_integer_dtype(value.dtype):
            raise MaskError(f"`{name}` must have an integer dtype; got dtype {value.dtype}.")
        if is_traced(value):
            arr = value.astype(np.int32)
        else:
            arr = np.asarray(value).astype(np.int64)
    else:
        raise MaskError(f"`{name}` must be a sequence or 1-D array of integers; got {describe(value)}.")
    if not allow_empty and arr.shape[0] == 0:
        raise MaskError(f"`{name}` must have at least one entry; got an empty vector.")
    return arr


def checked(**normalisers: Callable) -> Callable:
    """Decorator: normalise the named arguments with ``normaliser(value, name)`` before the call.

    Runs outside (before) the function, so that bad arguments meet a
    :class:`MaskError` with the argument's name rather than a type checker's error.
    """

    def decorate(fn: Callable) -> Callable:
        signature = inspect.signature(fn)
        unknown = set(normalisers) - set(signature.parameters)
        if unknown:  # a programming error in this package, not a user error
            raise AssertionError(f"{fn.__name__} has no parameter(s) {sorted(unknown)}")

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            for name, normalise in normalisers.items():
                bound.arguments[name] = normalise(bound.arguments[name], name)
            return fn(*bound.args, **bound.kwargs)

        return wrapper

    return decorate
