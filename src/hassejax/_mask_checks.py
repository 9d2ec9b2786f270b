"""The shape and dtype checks of a dense Boolean mask, without JAX (private).

:func:`hassejax._checks.as_mask` runs them and converts the result to a ``jax.Array``; the functions that run on
the host without JAX (:func:`hassejax.order.flow_summary`) run them alone, so that they accept and refuse the
same inputs as the jitted ones (nested lists included) and start no JAX.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._tracing import refuse_traced
from .errors import MaskError

__all__ = ["NestedMask", "as_bool_advice", "check_mask", "refuse_unread_arrays", "refuse_unread_nested"]

#: A mask given as nested lists or tuples of bools, `(n, n)` or `(heads, n, n)`: the order functions, the models,
#: :func:`~hassejax.nn.jacobian_flow` and :class:`~hassejax.tasks.Task` take them (as NumPy would read them).
NestedMask = Sequence[Sequence[Any]]


_MASKED = np.ma.MaskedArray  # bound once: the attribute lookup cost microseconds an element (a review)


def refuse_unread_arrays(mask, name: str = "mask") -> None:
    """Raise :class:`~hassejax.errors.MaskError` naming `name` for a SciPy sparse matrix or array and a NumPy
    masked array: both have a shape and a dtype, but ``np.asarray`` reads a sparse matrix as a 0-d object array and
    a masked array as its data with the mask dropped (a fresh user: ``flow_summary`` of a masked causal mask
    answered for full attention). Nothing is imported to tell them apart."""
    if isinstance(mask, _MASKED):
        raise MaskError(
            f"`{name}` must be a Boolean array of shape (n, n); got a NumPy masked array, whose hidden entries would "
            "be read as their data: pass `mask.filled(False)` (hidden entries may not attend) or the array you mean."
        )
    module = type(mask).__module__ or ""
    if module == "scipy.sparse" or module.startswith("scipy.sparse."):
        raise MaskError(
            f"`{name}` must be a Boolean array of shape (n, n); got a SciPy sparse {type(mask).__name__}: pass "
            "`mask.toarray()` for a dense route, or build the mask's key runs as an IntervalMask "
            "(hassejax.masks.structured, or from_spec(..., form='intervals')) for long sequences."
        )


def refuse_unread_nested(seq, name: str = "mask") -> None:
    """:func:`refuse_unread_arrays` for every array inside nested lists or tuples (``np.asarray`` of a list of masked
    arrays drops their masks: a review found ``convergence_depth([ma, ma])`` answering for full attention). A level
    whose first element is a scalar is a row of scalars and is not scanned, so nested lists of bools cost ``O(rows)``
    here."""
    for i, item in enumerate(seq):
        if isinstance(item, (list, tuple)):
            refuse_unread_nested(item, f"{name}[{i}]")
        elif isinstance(item, (bool, int, float, complex, np.generic)) or (
            getattr(item, "ndim", None) == 0 and not isinstance(item, _MASKED)  # a 0-d array: a row of scalars too
        ):
            return
        else:
            refuse_unread_arrays(item, f"{name}[{i}]")


def check_mask(
    mask,
    name: str = "mask",
    *,
    square: bool = True,
    batched: bool = True,
    memory: Callable[[tuple[int, ...]], None] | None = None,
    concrete: str | None = None,
    relation: bool = False,
):
    """Validate a Boolean attention mask; return it, as a NumPy array if it came as nested lists or tuples.

    The arguments and errors are those of :func:`hassejax._checks.as_mask` (which returns a ``jax.Array``).
    """
    nested = isinstance(mask, (list, tuple))
    if nested:
        refuse_unread_nested(mask, name)
        try:
            mask = np.asarray(mask)
        except ValueError as err:  # ragged nested lists: NumPy's "inhomogeneous shape"
            raise MaskError(
                f"`{name}` must be a Boolean array of shape (n, n); got nested {type(mask).__name__}s that are not "
                f"rectangular ({' '.join(str(err).split())})."
            ) from None
        except TypeError as err:  # nested lists holding tracers (under jit/vmap): JAX's TracerArrayConversionError
            if type(err).__name__ != "TracerArrayConversionError":
                raise
            import jax.numpy as jnp  # loaded already: the lists hold its tracers

            mask = jnp.asarray(mask)  # traced: refused below when `concrete`, else the jitted callers' input
    refuse_unread_arrays(mask, name)
    if not hasattr(mask, "shape") or not hasattr(mask, "dtype"):
        spec = " (a mask spec: build the mask with hassejax.masks.from_spec first)" if isinstance(mask, str) else ""
        raise MaskError(
            f"`{name}` must be a Boolean array of shape (n, n); got an object of type {type(mask).__name__}{spec}."
        )
    if concrete is not None:
        refuse_traced(mask, name, concrete)
    shape = tuple(mask.shape)
    if len(shape) < 2 or (not batched and len(shape) != 2):
        want = "rank 2 (n, n) or rank >= 2 (..., n, n)" if batched else "rank 2, shape (n, n)"
        heads = (  # a fresh user: flow_summary of a (heads, n, n) array said "rank 2" alone
            " (the masks of one layer's heads, (heads, n, n): pass head_axis=0 where the function takes it, as "
            "flow_summary, convergence_depth and HasseDiagram.from_mask do)"
            if not batched and len(shape) == 3
            else ""
        )
        raise MaskError(f"`{name}` must have {want}; got shape {shape} (rank {len(shape)}){heads}.")
    if shape[-1] == 0 or shape[-2] == 0:
        what = "one row and one column" if relation else "one query and one key"
        raise MaskError(f"`{name}` must have at least {what}; got shape {shape}.")
    if relation and square and shape[-1] != shape[-2]:
        raise MaskError(
            f"`{name}` must be square (n, n): a relation on one set of n elements, rows and columns indexing the "
            f"same elements; got shape {shape} with {shape[-2]} rows and {shape[-1]} columns."
        )
    if relation and mask.dtype != np.bool_:
        raise MaskError(
            f"`{name}` must have dtype bool (a relation: True = related); got dtype {mask.dtype}. "
            f"Convert a 0/1 relation explicitly: `{as_bool_advice(name, nested)}`."
        )
    if square and shape[-1] != shape[-2]:
        raise MaskError(
            f"`{name}` must be square (n, n): closing over layers needs self-attention, where queries "
            f"and keys are the same positions; got shape {shape} with {shape[-2]} queries and {shape[-1]} keys. "
            "For cross-attention or a KV cache, square it first (e.g. add the prefix rows)."
        )
    if mask.dtype != np.bool_:
        raise MaskError(
            f"`{name}` must have dtype bool (True = may attend); got dtype {mask.dtype}. "
            f"Convert explicitly: `{as_bool_advice(name, nested)}` for 0/1 'may attend' masks, "
            "`hassejax.masks.from_blocked` for '1 = cannot attend' masks, "
            "`hassejax.masks.from_additive_bias` for 0/-inf biases."
        )
    if memory is not None:
        memory(shape)
    return mask


def as_bool_advice(name: str, nested: bool) -> str:
    """The conversion to suggest: nested lists have no ``astype`` (a fresh user's review)."""
    return f"numpy.asarray({name}, dtype=bool)" if nested else f"{name}.astype(bool)"
