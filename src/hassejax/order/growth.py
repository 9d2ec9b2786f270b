"""How ``R^(L)`` of a mask grows, layer by layer, towards a reference closure (spec hasse.md §1.3, §2).

A sparse variant of a dense mask (Li & Guo, arXiv:2606.09951, Def. 3.8) has the dense mask's
closure as its limit. With fewer layers than its convergence depth ``L*`` it sees a subset of
that closure: some entries are still missing, and none lies outside it (no leak).
:func:`flow_growth` counts both, for ``L = 1 … L*``.

Source: Li & Guo, arXiv:2606.09951, Def. 3.8 (paper: sparse variants, their depth); spec
hasse.md §1.2–1.3 (``R^(L) = (M | I)^L``, ``L*``); the counts are (derived).
"""

from __future__ import annotations

import dataclasses
from typing import no_type_check

import numpy as np
from jaxtyping import ArrayLike, Bool

from .._checks import as_mask, int_value
from .._mask_checks import NestedMask
from ..errors import MaskError, ParameterError
from ..masks._runs import check_host_memory

__all__ = ["FlowGrowth", "flow_growth"]


@dataclasses.dataclass(frozen=True)
class FlowGrowth:
    """Result of :func:`flow_growth` (host NumPy arrays; one entry per depth ``L = 1 … max_layers``).

    - `layers`: int `(k,)`, the depths ``1 … k``.
    - `powers`: bool `(k, n, n)`, ``R^(L)`` of the mask at each depth.
    - `entries`: int `(k,)`, True entries of ``R^(L)`` (diagonal included).
    - `missing`: int `(k,)`, entries of the reference not yet in ``R^(L)``.
    - `outside`: int `(k,)`, entries of ``R^(L)`` outside the reference (leaks when the
      reference is the flow a task allows).
    - `reference_entries`: True entries of the reference.
    - `depth`: the mask's convergence depth ``L*`` (smallest ``L`` with ``R^(L) = R^(L+1)``).
    - `limit_equals_reference`: whether the mask's limit ``R`` equals the reference.
    """

    layers: np.ndarray
    powers: np.ndarray
    entries: np.ndarray
    missing: np.ndarray
    outside: np.ndarray
    reference_entries: int
    depth: int
    limit_equals_reference: bool

    def to_dict(self) -> dict:
        """The counts as plain JSON-ready values (without `powers`)."""
        return {
            "layers": self.layers.tolist(),
            "entries": self.entries.tolist(),
            "missing": self.missing.tolist(),
            "outside": self.outside.tolist(),
            "reference_entries": self.reference_entries,
            "depth": self.depth,
            "limit_equals_reference": self.limit_equals_reference,
        }


_WORK_BYTES_PER_ENTRY = 2 + 3 * 8 + 3
"""Host bytes per `(n, n)` entry besides the powers: the adjacency and the current power (bool), the adjacency, the
current power and their product as floats (at most float64), a reference and a layer's count temporaries (bool)."""

_BYTES_PER_LAYER = 4 * 8
"""Host bytes per layer of the result besides its power: the four int64 counts (`layers` and three counts)."""


_COUNT_BLOCK_BYTES = 16 * 2**20
"""The layers whose counts are taken at once hold at most this many bytes (their temporaries twice that)."""


def _counts(stack: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """int64 `(3, k)`: the True entries of each power of `stack` `(k, n, n)`, those of `ref` it lacks, those outside
    `ref`; a block of layers at a time (no `(k, n, n)` temporaries, no Python object a layer)."""
    k, n = stack.shape[0], stack.shape[-1]
    block = max(1, _COUNT_BLOCK_BYTES // max(1, n * n))
    out = np.empty((3, k), np.int64)
    for i in range(0, k, block):
        part = stack[i : i + block]
        flat = (len(part), -1)
        out[0, i : i + block] = part.reshape(flat).sum(axis=1)
        out[1, i : i + block] = (ref & ~part).reshape(flat).sum(axis=1)
        out[2, i : i + block] = (part & ~ref).reshape(flat).sum(axis=1)
    return out


def _stack_bytes(layers: int, n: int) -> float:
    """Host bytes of `layers` powers held twice (the list of powers and their stack) with their counts, and the
    working arrays of :data:`_WORK_BYTES_PER_ENTRY` and the counts' blocks (a review: the first estimate left out the
    counts' temporaries, 1.5–5x below the peak)."""
    return (
        (2 * layers + _WORK_BYTES_PER_ENTRY) * float(n) * n + _BYTES_PER_LAYER * float(layers) + 3 * _COUNT_BLOCK_BYTES
    )


def _bool_product(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x ⊗ y`` for a Boolean `(n, n)` `x` and `y` as 0/1 floats, through BLAS: sums of at most `n` such terms are
    exact in float32 below `2^24` (NumPy's integer matmul does not use BLAS: 23 s for the 399 products of a
    400-chain)."""
    return (x.astype(y.dtype) @ y) > 0


_HINT = "Use a smaller n, or hassejax.order.flow_summary / reachability for large masks (no stack of powers)."


@no_type_check  # a closure made per call (see pyproject: not re-decorated by the suite's type-check hook)
def _memory_check(max_layers: int | None):
    """:func:`as_mask`'s `memory` for :func:`flow_growth`: the working arrays (and a reference), and with
    `max_layers` the ``(max_layers, n, n)`` result, from the mask's shape."""

    def check(shape: tuple[int, ...]) -> None:
        if max_layers is not None:
            check_host_memory(
                _stack_bytes(max_layers, shape[-1]),
                f"the {max_layers} powers R^(1..{max_layers}) of a ({shape[-1]}, {shape[-1]}) mask",
                "max_layers",
                hint=_HINT,
            )
        else:
            check_host_memory(
                _stack_bytes(1, shape[-1]),
                f"the powers of a ({shape[-1]}, {shape[-1]}) mask",
                "mask",
                hint=_HINT,
            )

    return check


def flow_growth(
    mask: Bool[ArrayLike, "n n"] | NestedMask,
    reference: Bool[ArrayLike, "n n"] | NestedMask | None = None,
    max_layers: int | np.integer | None = None,
) -> FlowGrowth:
    """``R^(L) = (M | I)^L`` for ``L = 1 … L*`` counted against a reference closure.

    Computed on the host by repeated Boolean products ``R^(L+1) = R^(L) ⊗ A`` (small `n`: one
    ``(n, n)`` floating-point BLAS product a layer, exact for 0/1 entries), up to the first depth where
    ``R^(L)`` stops changing (``L*``: also with a smaller `max_layers`, for `depth` and the limit), keeping
    the powers up to `max_layers` (default ``L*``). For large masks, :func:`hassejax.order.flow_summary`
    and :func:`hassejax.order.reachability` give `L*`, `R` and `R^(L)` without a stack of powers.

    **Arguments:**

    - `mask`: bool `(n, n)` (row = query, column = key, True = may attend); the residual
      diagonal is added (spec hasse.md §1.1).
    - `reference`: bool `(n, n)`, the flow to compare with, e.g. the dense mask whose sparse
      variant `mask` is (a closed mask is its own closure). Default: the closure of `mask`.
    - `max_layers`: the largest depth to report (an int ``>= 1``); default ``L*``.

    **Returns:** a :class:`FlowGrowth`.

    **Raises:** :class:`~hassejax.errors.MaskError` for a mask or reference that is not a concrete square
    Boolean `(n, n)` array (a traced one is refused by name), or a reference of another size;
    :class:`~hassejax.errors.ParameterError` for `max_layers` not a positive int;
    :class:`~hassejax.errors.MemoryBudgetError` (estimated before the arrays are formed) naming `max_layers` when the
    `(max_layers, n, n)` powers would not fit in 80 % of the free host memory, or `mask` when the powers up to
    ``L*`` would not (checked a power at a time: `L*` is not known before).

    Source: Li & Guo, arXiv:2606.09951, Def. 3.8; spec hasse.md §1.2–1.3 (derived counts).

    **Example:**

    >>> import numpy as np
    >>> chain = np.eye(4, k=-1, dtype=bool)  # each query sees the previous key: L* = 3
    >>> g = flow_growth(chain, reference=np.tril(np.ones((4, 4), bool)))
    >>> g.layers.tolist(), g.entries.tolist(), g.missing.tolist(), g.outside.tolist()
    ([1, 2, 3], [7, 9, 10], [3, 1, 0], [0, 0, 0])
    >>> g.depth, g.limit_equals_reference
    (3, True)
    """
    if max_layers is not None:
        layers = int_value(max_layers)
        if layers is None or layers < 1:
            raise ParameterError(f"`max_layers` must be a positive int or None; got {max_layers!r}.")
        max_layers = layers
    memory = _memory_check(max_layers)  # from the shape, before the mask is copied anywhere
    m = np.asarray(as_mask(mask, "mask", batched=False, concrete="flow_growth", memory=memory))
    n = m.shape[0]
    if reference is not None:
        ref = np.asarray(as_mask(reference, "reference", batched=False, concrete="flow_growth"))
        if ref.shape != m.shape:
            raise MaskError(f"`reference` must have the mask's shape {m.shape}; got {ref.shape}.")
    a = m | np.eye(n, dtype=bool)
    a_float = a.astype(np.float32 if n < 2**24 else np.float64)  # once: the right factor of every product
    powers, current, depth = [a], a, 1  # the powers kept: up to `max_layers` (default: all, up to L*)
    while True:
        nxt = _bool_product(current, a_float)
        if np.array_equal(nxt, current):
            break
        current, depth = nxt, depth + 1
        if max_layers is None or depth <= max_layers:
            if max_layers is None:  # the stack grows with L*, unknown before: checked a power at a time
                check_host_memory(
                    _stack_bytes(depth, n),
                    f"the powers R^(1..{depth}) of a ({n}, {n}) mask (L* = {depth} or more) and their stack",
                    "mask",
                    hint=_HINT,
                )
            powers.append(nxt)
    limit = current
    ref = limit if reference is None else ref
    k = depth if max_layers is None else max_layers
    stack = np.empty((k, n, n), dtype=bool)
    stack[: len(powers)] = powers
    stack[len(powers) :] = limit
    del powers
    counts = _counts(stack, ref)
    return FlowGrowth(
        layers=np.arange(1, k + 1),
        powers=stack,
        entries=counts[0],
        missing=counts[1],
        outside=counts[2],
        reference_entries=int(ref.sum()),
        depth=depth,
        limit_equals_reference=bool(np.array_equal(limit, ref)),
    )
