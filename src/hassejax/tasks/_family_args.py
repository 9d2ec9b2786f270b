"""Argument and memory checks shared by the task-family builders and the closed forms (private)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._checks import check_memory
from ..errors import TaskError


def _positive_int(value, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise TaskError(f"`{name}` must be an int >= {minimum}; got {value!r}.")
    return int(value)


def _flag(value, name: str) -> None:
    """Raise :class:`TaskError` unless `value` is a bool (a string such as ``"no"`` would count as True)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TaskError(f"`{name}` must be True or False; got {value!r}.")


def _choice(value, name: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise TaskError(f"`{name}` must be one of {tuple(allowed)}; got {value!r}.")
    return value


#: Bytes per slot of a built task beside its mask (the Token, list and tuple entries, label
#: and stream tag; 110-230 measured with tracemalloc).
_SLOT_BYTES = 250

#: Bool ``(size, size)`` arrays alive at once while a closed-form mask is built (the result
#: and the elementwise temporaries of its formula).
_CLOSED_FORM_MATRICES = 8


def _check_family_memory(
    family: str, n: int, num_tasks: int, sum_sq: int, sum_slots: int, largest: int, closed_form: str
) -> None:
    """Raise :class:`~hassejax.errors.MemoryBudgetError` naming `n` before a family's tasks are built.

    The tasks are kept together: each its dense ``(s, s)`` mask (`sum_sq` bytes in all) and
    :data:`_SLOT_BYTES` a slot; building one task takes about four more ``(s, s)`` arrays.
    """
    need = sum_sq + _SLOT_BYTES * sum_slots + 4 * largest * largest
    check_memory(
        need,
        f"the {family} family with n = {n} ({num_tasks} tasks of up to {largest} slots, each with a dense mask)",
        "n",
        hint=f"Use a smaller n; the merged mask has a closed form, {closed_form}, which builds no task family.",
    )


def _check_closed_form_memory(what: str, n: int, size: int) -> None:
    """Raise :class:`~hassejax.errors.MemoryBudgetError` naming `n` before a closed-form mask is built."""
    check_memory(
        _CLOSED_FORM_MATRICES * size * size,
        f"{what} with n = {n} (a dense ({size}, {size}) mask and its temporaries)",
        "n",
        hint="Use a smaller n, or form='intervals' (an IntervalMask: no dense (n, n) array at any n).",
    )
