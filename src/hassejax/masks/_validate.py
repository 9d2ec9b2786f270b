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

from .._tracing import is_traced
from ..errors import MaskCallError, MaskError

__all__ = ["checked", "describe", "integer", "positive", "nonnegative", "index_vector", "is_traced"]
__all__ += ["MaskCallError", "signature_text"]  # a call its signature does not take
# the checks of one constructor's arguments (end of this module)
__all__ += ["inner_arg", "kind_arg", "check_document_lengths", "check_contiguous_ids", "global_positions_arg"]
__all__ += ["global_flags", "odd_kernel", "check_parents", "check_permutation", "stream_arg"]


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


_INT64_MIN, _INT64_MAX = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)


def index_vector(value, name: str, *, allow_empty: bool = False):
    """Normalise a 1-D vector of integers.

    Returns a NumPy ``int64`` array for concrete input (lists, tuples, NumPy or concrete
    JAX arrays), so that value checks can say exactly which entry is wrong, or the JAX
    array itself when it is traced: cast to ``int32``, or to ``int64`` when it has 64 bits or
    is unsigned (with ``jax_enable_x64``; ``int32`` would wrap `2**32 + 1` to `1` and uint32
    `2**32 - 1` to `-1`, and a value check after the cast would pass them).
    """
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer)):
                raise MaskError(f"`{name}` must be a sequence of integers; entry {i} is {describe(item)}.")
            if not _INT64_MIN <= int(item) <= _INT64_MAX:
                raise MaskError(f"`{name}` entries must fit in 64-bit signed integers; entry {i} is {int(item)}.")
        arr = np.asarray([int(item) for item in value], dtype=np.int64).reshape(len(value))
    elif hasattr(value, "shape") and hasattr(value, "dtype"):
        if value.ndim != 1:
            raise MaskError(f"`{name}` must be a 1-D vector of integers; got shape {tuple(value.shape)}.")
        if not _is_integer_dtype(value.dtype):
            raise MaskError(f"`{name}` must have an integer dtype; got dtype {value.dtype}.")
        if is_traced(value):
            wide = np.dtype(value.dtype).itemsize > 4 or np.dtype(value.dtype).kind == "u"  # uint32 2**32 - 1 is not -1
            arr = value.astype(np.int64 if wide else np.int32)
        else:
            arr = np.asarray(value)
            if arr.dtype == np.uint64 and arr.size and int(arr.max()) > _INT64_MAX:  # astype would wrap it negative
                i = int(np.argmax(arr > _INT64_MAX))
                raise MaskError(f"`{name}` entries must fit in 64-bit signed integers; entry {i} is {int(arr[i])}.")
            arr = arr.astype(np.int64)
    else:
        raise MaskError(f"`{name}` must be a sequence or 1-D array of integers; got {describe(value)}.")
    if not allow_empty and arr.shape[0] == 0:
        raise MaskError(f"`{name}` must have at least one entry; got an empty vector.")
    return arr


def signature_text(name: str, signature: inspect.Signature) -> str:
    """``name(a, b=1, *, c='x')``: a signature without annotations, for error messages."""
    parts = []
    star_done = False
    for p in signature.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            parts.append(f"*{p.name}")
            star_done = True
            continue
        if p.kind is p.VAR_KEYWORD:
            parts.append(f"**{p.name}")
            continue
        if p.kind is p.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        parts.append(p.name if p.default is p.empty else f"{p.name}={p.default!r}")
    return f"{name}({', '.join(parts)})"


def _call_error(name: str, signature: inspect.Signature, kwargs: dict, exc: TypeError) -> MaskCallError:
    """The error of a call `signature` cannot bind: an unknown keyword named first (Python reports the required
    argument it then misses: ``sliding_window(n=8, window=2)`` said "missing a required argument: 'left'")."""
    params = signature.parameters
    usage = signature_text(name, signature)
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    named = [p for p, v in params.items() if v.kind not in (v.VAR_POSITIONAL, v.VAR_KEYWORD)]
    unknown = [k for k in kwargs if k not in params] if not takes_any else []
    if unknown:
        what = f"argument {unknown[0]!r}" if len(unknown) == 1 else f"arguments {', '.join(map(repr, unknown))}"
        return MaskCallError(f"{name}: unknown {what}; its arguments are {', '.join(named)} ({usage}).")
    return MaskCallError(f"{name}: {exc} ({usage}).")


def checked(**normalisers: Callable) -> Callable:
    """Decorator: normalise the named arguments with ``normaliser(value, name)`` before the call.

    Runs outside (before) the function, so that bad arguments meet a
    :class:`MaskError` with the argument's name rather than a type checker's error. Arguments the signature
    does not take (an unknown keyword, a missing one, ...) are a :class:`MaskCallError` naming the function,
    the argument and the signature.
    """

    def decorate(fn: Callable) -> Callable:
        signature = inspect.signature(fn)
        unknown = set(normalisers) - set(signature.parameters)
        if unknown:  # a programming error in this package, not a user error
            raise AssertionError(f"{fn.__name__} has no parameter(s) {sorted(unknown)}")

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as exc:
                raise _call_error(fn.__name__, signature, kwargs, exc) from None
            bound.apply_defaults()
            for name, normalise in normalisers.items():
                bound.arguments[name] = normalise(bound.arguments[name], name)
            return fn(*bound.args, **bound.kwargs)

        return wrapper

    return decorate


# ------------------------------------------------------------ constructor arguments
# Checks of one constructor's arguments, shared by its dense (hassejax.masks) and its
# structured (hassejax.masks.structured) version, so that both say the same words. They
# take concrete NumPy values; the dense modules keep the checks of traced values.

INNER_NAMES = ("causal", "full")


def inner_arg(value, name: str):
    """`inner` of ``document``: None, ``"causal"``, ``"full"`` or a mask_mod callable."""
    if value is None or callable(value) or value in INNER_NAMES:
        return value
    raise MaskError(
        f"`{name}` must be None (causal), one of {list(INNER_NAMES)}, or a mask_mod callable "
        f"(b, h, q_idx, kv_idx) -> bool over within-document offsets; got {describe(value)}."
    )


def kind_arg(value, name: str):
    """`kind` of ``document``: ``"lengths"`` or ``"ids"``."""
    if isinstance(value, str) and value in ("lengths", "ids"):
        return value
    raise MaskError(f"`{name}` must be 'lengths' or 'ids'; got {describe(value)}.")


def check_document_lengths(segments: np.ndarray) -> None:
    """Raise :class:`MaskError` naming the first document length < 1 (concrete `segments`)."""
    bad = np.flatnonzero(segments < 1)
    if bad.size:
        raise MaskError(
            f"`segments` (document lengths) must all be integers >= 1; entry {int(bad[0])} is "
            f"{int(segments[bad[0]])} in {segments.tolist()}. Per-position document ids go with kind='ids'."
        )


def check_contiguous_ids(ids: np.ndarray) -> np.ndarray:
    """The document lengths of concrete per-position document ids, in order.

    Raises :class:`MaskError` naming the first position where an id comes back after
    another document (a split document).
    """
    change = np.flatnonzero(ids[1:] != ids[:-1]) + 1
    run_starts = np.concatenate([[0], change])
    run_ids = ids[run_starts]
    _, first = np.unique(run_ids, return_index=True)
    if first.size != run_ids.size:
        repeat = np.ones(run_ids.size, bool)
        repeat[first] = False
        i = int(run_starts[np.flatnonzero(repeat)[0]])
        raise MaskError(
            f"`segments` (document ids, kind='ids') must give each document one contiguous run; "
            f"id {int(ids[i])} reappears at position {i} after another document: {ids.tolist()}."
        )
    return np.diff(np.concatenate([run_starts, [ids.shape[0]]]))


def global_positions_arg(value, name: str):
    """Normalise `global_positions`: Boolean flags (bool dtype or a list of bools) or integer indices.

    Traced flags are returned as they are, traced indices as :func:`index_vector` returns them.
    """
    if hasattr(value, "dtype") and value.dtype == np.bool_:
        if value.ndim != 1:
            raise MaskError(
                f"`{name}` given as Boolean flags must be 1-D of shape (n,); got shape {tuple(value.shape)}."
            )
        return value if is_traced(value) else np.asarray(value)
    if isinstance(value, (list, tuple)) and len(value) > 0 and all(isinstance(x, (bool, np.bool_)) for x in value):
        return np.asarray(value, dtype=bool)
    return index_vector(value, name, allow_empty=True)


def global_flags(positions, n: int):
    """The Boolean flags `g` of shape `(n,)` from normalised `global_positions`.

    Flags (possibly traced) are checked for their length and returned as they are;
    concrete indices are checked for their range and turned into NumPy flags.
    """
    name = "global_positions"
    if positions.dtype == np.bool_:
        if positions.shape[0] != n:
            raise MaskError(
                f"`{name}` given as Boolean flags must have shape (n,) = ({n},); got shape {tuple(positions.shape)}."
            )
        return positions
    bad = positions[(positions < 0) | (positions >= n)]
    if bad.size:
        raise MaskError(
            f"`{name}` must hold indices in [0, n-1] = [0, {n - 1}] (or be Boolean flags of shape ({n},)); "
            f"got out-of-range index {int(bad[0])} in {positions.tolist()}."
        )
    g = np.zeros(n, dtype=bool)
    g[positions] = True
    return g


def odd_kernel(kernel: int, size: int, name: str, size_name: str) -> int:
    """A NATTEN kernel size: an odd integer in ``[1, size]``."""
    kernel = integer(kernel, name, minimum=1, maximum=size, maximum_label=size_name)
    if kernel % 2 == 0:
        raise MaskError(
            f"`{name}` must be odd (a kernel centred on the query, as NATTEN requires); got {kernel}. "
            f"With an even kernel the clamped rule gives {kernel + 1} keys per axis, not {kernel}."
        )
    return kernel


def check_parents(parents: np.ndarray) -> None:
    """Raise :class:`MaskError` unless every concrete ``parents[i]`` is -1 or in ``[0, i - 1]``."""
    valid = (parents >= -1) & (parents < np.arange(parents.shape[0]))
    bad = np.flatnonzero(~valid)
    if bad.size:
        i = int(bad[0])
        raise MaskError(
            f"`parents` must list parents before children: parents[i] is -1 (a root) or an index in "
            f"[0, i-1]; got parents[{i}] = {int(parents[i])} in {parents.tolist()}."
        )


def check_permutation(z: np.ndarray, name: str = "permutation") -> None:
    """Raise :class:`MaskError` unless concrete `z` is a permutation of ``0 .. n-1``.

    The message names an out-of-range, a repeated and a missing entry where there is one.
    """
    n = z.shape[0]
    counts = np.bincount(z[(z >= 0) & (z < n)], minlength=n)
    out_of_range = z[(z < 0) | (z >= n)]
    if out_of_range.size or np.any(counts != 1):
        details = []
        if out_of_range.size:
            details.append(f"out-of-range value {int(out_of_range[0])}")
        repeated = np.flatnonzero(counts > 1)
        if repeated.size:
            details.append(f"{int(repeated[0])} appears {int(counts[repeated[0]])} times")
        missing = np.flatnonzero(counts == 0)
        if missing.size:
            details.append(f"{int(missing[0])} is missing")
        raise MaskError(
            f"`{name}` must be a permutation of 0..{n - 1} (each index exactly once); got {z.tolist()}: "
            + ", ".join(details)
            + "."
        )


def stream_arg(value, name: str):
    """`stream` of the registry's ``xlnet_two_stream``: ``"content"`` or ``"query"``."""
    if isinstance(value, str) and value in ("content", "query"):
        return value
    raise MaskError(
        f"`{name}` must be 'content' or 'query' (xlnet_two_stream returns two masks; a spec names one); "
        f"got {describe(value)}."
    )
