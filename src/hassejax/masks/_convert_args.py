"""Argument checks of the converters (private): each raises :class:`~hassejax.errors.MaskError`
naming the argument, what was expected and what came.
"""

from __future__ import annotations

import numpy as np

from .._checks import check_memory
from ..errors import MaskError
from ._args import describe, integer, positive


def _optional_positive(value, name: str):
    return None if value is None else positive(value, name)


def _int_arg(value, name: str) -> int:
    return integer(value, name)


def _array_arg(value, name: str):
    if isinstance(value, (list, tuple)):
        value = np.asarray(value)
    if not (hasattr(value, "shape") and hasattr(value, "dtype")):
        raise MaskError(f"`{name}` must be an array of shape (..., n_q, n_k); got {describe(value)}.")
    if value.ndim < 2:
        raise MaskError(
            f"`{name}` must have rank >= 2, shape (..., n_q, n_k); got shape {tuple(value.shape)} (rank {value.ndim}). "
            "A key-padding vector `pad` of shape (n_k,) is a mask after broadcasting: "
            "`jnp.broadcast_to(pad, (n_q, n_k))`."
        )
    if value.shape[-1] == 0 or value.shape[-2] == 0:
        raise MaskError(f"`{name}` must have at least one query and one key; got shape {tuple(value.shape)}.")
    return value


def _check_array_memory(value, name: str, who: str) -> None:
    """Raise :class:`~hassejax.errors.MemoryBudgetError` naming `name` before `value` is copied.

    Counts its device copy (its itemsize an entry) and four bool temporaries of its shape.
    """
    shape = tuple(int(d) for d in value.shape)
    entries = int(np.prod(shape, dtype=object))
    check_memory(
        entries * (np.dtype(value.dtype).itemsize + 4),
        f"{who} of an array of shape {shape} (its device copy and bool temporaries)",
        name,
    )


def _first_bad(bad, value) -> str:
    """Index and value of the first True entry of `bad` in a concrete array."""
    bad_np = np.asarray(bad)
    where = tuple(int(i) for i in np.argwhere(bad_np)[0])
    return f"{int(bad_np.sum())} such entr{'y' if bad_np.sum() == 1 else 'ies'}, first at index {where}: {np.asarray(value)[where].item()!r}"


def _callable_arg(value, name: str):
    if not callable(value):
        raise MaskError(f"`{name}` must be a callable (b, h, q_idx, kv_idx) -> bool; got {describe(value)}.")
    return value


def _bool_arg(value, name: str) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise MaskError(f"`{name}` must be True or False; got {describe(value)}.")


def _form_arg(value, name: str):
    if isinstance(value, str) and value in ("dense", "intervals", "auto"):
        return value
    raise MaskError(f"`{name}` must be 'dense', 'intervals' or 'auto'; got {describe(value)}.")


class _Unstructured(Exception):
    """Raised by :func:`mask_mod_runs` when the rows need more than `max_runs` runs."""


def _threshold_arg(value, name: str):
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise MaskError(
            f"`{name}` must be None or a negative number (entries <= it are blocked); got {describe(value)}."
        )
    value = float(value)
    if not value < 0:
        raise MaskError(f"`{name}` must be None or a negative number (entries <= it are blocked); got {value}.")
    return value
