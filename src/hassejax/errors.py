"""Exceptions raised by hassejax.

One small hierarchy; every message names the argument, what was expected and what
was received. All classes derive from :class:`HassejaxError`, and from the builtin
exception a caller would naturally catch (``ValueError``, ``MemoryError``,
``RuntimeError``), so ``except ValueError`` keeps working.

Hierarchy::

    HassejaxError
    ├── MaskError (ValueError)          bad mask: rank, shape, dtype, batch mismatch
    │   ├── EmptyRowError               a row with no key where every row needs one
    │   └── MaskCallError (TypeError)   a mask function called with arguments its signature does not take
    ├── MemoryBudgetError (MemoryError) n (or the batch) too large for the memory at hand
    ├── TaskError (ValueError)          ill-formed training task or task family
    │   └── LabelConflictError          equivalent labelled nodes with different targets
    ├── ParameterError (ValueError)     a bad non-mask argument (num_layers, method, dynamics parameters)
    └── SolveError (RuntimeError)       an ODE solve that failed (never a blow-up: that is a result)
"""

from __future__ import annotations

__all__ = [
    "HassejaxError",
    "MaskError",
    "EmptyRowError",
    "MaskCallError",
    "MemoryBudgetError",
    "CandidateLimitError",
    "TaskError",
    "LabelConflictError",
    "ParameterError",
    "SolveError",
]


class HassejaxError(Exception):
    """Base class of every exception raised by hassejax."""


class MaskError(HassejaxError, ValueError):
    """An attention mask has the wrong rank, shape or dtype (spec hasse.md §0)."""


class EmptyRowError(MaskError):
    """A mask row allows no key, where the caller needs every row non-empty."""


class MaskCallError(MaskError, TypeError):
    """A call of a mask function with arguments its signature does not take (an unknown keyword, a missing or
    repeated argument, too many positional ones): a :class:`MaskError` that is also the ``TypeError`` Python raises
    for such a call, so ``except TypeError`` keeps working. The message names the function, the argument and the
    signature."""


class MemoryBudgetError(HassejaxError, MemoryError):
    """The requested computation would not fit in the memory at hand (estimated before allocating)."""


class CandidateLimitError(MemoryBudgetError):
    """A product of the structured (interval) route would merge more candidate runs than its limit (estimated before
    the product; the message names the bit-packed route where that one can take the mask). Spec hasse.md §1.3.
    `growing`: True where a squaring whose runs grew was refused at the lower growing limit, within the plain one."""

    growing: bool = False


class TaskError(HassejaxError, ValueError):
    """A training task or task family is ill-formed (spec hasse.md §2)."""


class LabelConflictError(TaskError):
    """Two equivalent labelled nodes carry different targets, so no merge exists (spec hasse.md §2)."""


class ParameterError(HassejaxError, ValueError):
    """A non-mask argument has the wrong type, shape or value.

    For example `num_layers < 1` or an unknown `method` of the closure, or parameters of an
    attention dynamics model (spec dynamics.md §1) with mismatched shapes.
    """


class SolveError(HassejaxError, RuntimeError):
    """An ODE solve failed for a reason other than blow-up (spec dynamics.md §4)."""
