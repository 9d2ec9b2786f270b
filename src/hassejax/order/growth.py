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

import numpy as np
from jaxtyping import ArrayLike, Bool

from .._checks import as_mask, int_value
from ..errors import MaskError, ParameterError

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


def _bool_product(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return (x.astype(np.int64) @ y.astype(np.int64)) > 0


def flow_growth(
    mask: Bool[ArrayLike, "n n"],
    reference: Bool[ArrayLike, "n n"] | None = None,
    max_layers: int | np.integer | None = None,
) -> FlowGrowth:
    """``R^(L) = (M | I)^L`` for ``L = 1 … L*`` counted against a reference closure.

    Computed on the host by repeated Boolean products ``R^(L+1) = R^(L) ⊗ A`` (small `n`: one
    ``(n, n)`` integer product a layer), stopping at the first depth where ``R^(L)`` stops
    changing (``L*``), or at `max_layers` if given.

    **Arguments:**

    - `mask`: bool `(n, n)` (row = query, column = key, True = may attend); the residual
      diagonal is added (spec hasse.md §1.1).
    - `reference`: bool `(n, n)`, the flow to compare with, e.g. the dense mask whose sparse
      variant `mask` is (a closed mask is its own closure). Default: the closure of `mask`.
    - `max_layers`: the largest depth to report (an int ``>= 1``); default ``L*``.

    **Returns:** a :class:`FlowGrowth`.

    **Raises:** :class:`~hassejax.errors.MaskError` for a mask or reference that is not a concrete square
    Boolean `(n, n)` array (a traced one is refused by name), or a reference of another size;
    :class:`~hassejax.errors.ParameterError` for `max_layers` not a positive int.

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
    m = np.asarray(as_mask(mask, "mask", batched=False, concrete="flow_growth"))
    n = m.shape[0]
    if max_layers is not None:
        layers = int_value(max_layers)
        if layers is None or layers < 1:
            raise ParameterError(f"`max_layers` must be a positive int or None; got {max_layers!r}.")
        max_layers = layers
    a = m | np.eye(n, dtype=bool)
    powers = [a]
    while True:
        nxt = _bool_product(powers[-1], a)
        if np.array_equal(nxt, powers[-1]):
            break
        powers.append(nxt)
    depth = len(powers)
    limit = powers[-1]
    if reference is None:
        ref = limit
    else:
        ref = np.asarray(as_mask(reference, "reference", batched=False, concrete="flow_growth"))
        if ref.shape != m.shape:
            raise MaskError(f"`reference` must have the mask's shape {m.shape}; got {ref.shape}.")
    k = depth if max_layers is None else max_layers
    while len(powers) < k:
        powers.append(limit)
    stack = np.stack(powers[:k])
    return FlowGrowth(
        layers=np.arange(1, k + 1),
        powers=stack,
        entries=stack.sum(axis=(1, 2)),
        missing=(ref & ~stack).sum(axis=(1, 2)),
        outside=(stack & ~ref).sum(axis=(1, 2)),
        reference_entries=int(ref.sum()),
        depth=depth,
        limit_equals_reference=bool(np.array_equal(limit, ref)),
    )
