"""Closure, classes, quotient and covers of one small mask on the host (private; NumPy, compiles no JAX).

The route of host-side objects such as :class:`hassejax.tasks.Task`: their masks are NumPy arrays
of a few dozen slots and of many different sizes, and the jitted :func:`~hassejax.order.reachability`,
:func:`~hassejax.order.classes`, :func:`~hassejax.order.quotient_order` and
:func:`~hassejax.order.cover_matrix` compile programs for every new size. The results here are
exactly theirs (tested against them): the closure of ``mask | I`` by the bit-packed kernels of
:mod:`hassejax.order._bitpacked` (exact), the classes numbered as :func:`~hassejax.order.classes`
numbers them (sorted by the size of the reach set, ties by smallest member), the quotient read off
at the classes' smallest members, and the covers of :func:`hassejax.order._poset_host.covers`.

Matrix convention (as in :mod:`hassejax.order.poset`): row = query / upper element, column =
key / lower one; ``R[i, j]`` True iff output `i` depends on input `j`.

Source: Li & Guo, arXiv:2606.09951 (paper); spec hasse.md §1.1–1.7; this host route is (derived).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from jaxtyping import Bool, Int

from .._checks import check_memory
from ..masks._runs import check_host_memory
from ._bitpacked import _CHUNK_WORDS, closure_bitpacked, num_words
from ._bitpacked_depth import power_bitpacked, power_bitpacked_bytes
from ._poset_host import covers

__all__ = [
    "closure_numpy",
    "depth_numpy",
    "classes_numpy",
    "quotient_numpy",
    "PosetParts",
    "poset_numpy",
    "diagram_numpy",
]


def _check(need: int | float, what: str, name: str) -> None:
    """Both budgets: the free host memory (where this runs) and the project's (as :class:`~hassejax.tasks.Task`)."""
    check_host_memory(need, what, name)
    check_memory(int(need), what, name)


def _closure_bytes(n: int, nnz: int) -> int:
    """Peak bytes of :func:`closure_numpy` (`nnz` edges with the diagonal), from sizes alone.

    Five bool ``(n, n)`` arrays (the adjacency ``M | I``, the result, its unpacking), two sets
    of packed rows, a few int64 arrays per node and per edge (CSR, SciPy's graph, class labels:
    64 bytes each) and the gathered rows (at most one chunk). At or above ``tracemalloc``'s peak
    on random masks of 32 to 2000 positions (up to 5 times above it on dense ones), except for
    a fixed ~10 kB of NumPy/SciPy objects that shows on masks of a few dozen positions.
    """
    w = num_words(n)
    return 5 * n * n + 16 * n * w + 64 * n + 64 * nnz + 8 * min(nnz * w, _CHUNK_WORDS)


def closure_numpy(mask: Bool[np.ndarray, "n n"], num_layers: int | None = None, name: str = "mask") -> np.ndarray:
    """``R^(L) = (M | I)^L`` of one Boolean mask, or the limit ``R`` (spec hasse.md §1.1–1.3), on the host.

    **Arguments:**

    - `mask`: Boolean NumPy `(n, n)`, row = query, column = key, True = may attend; the
      diagonal is implied (residual stream).
    - `num_layers`: ``None`` for the limit, else an int ``L >= 1`` (already validated by the
      caller); ``L >= max(1, n - 1)`` gives the limit, as in :func:`~hassejax.order.reachability`.
    - `name`: the argument's name in errors.

    **Returns:** Boolean NumPy `(n, n)`, equal to ``reachability(mask, num_layers)``.

    **Raises:** :class:`~hassejax.errors.MemoryBudgetError` (naming `name`) when the bit-packed
    work would not fit in the free host memory or the project's budget
    (:func:`hassejax._checks.check_memory`), estimated from `n` and the nonzeros first.

    **Example:**

    ```python
    >>> import numpy as np
    >>> chain = np.eye(4, k=-1, dtype=bool)           # i attends to i - 1
    >>> closure_numpy(chain, 2)[3].tolist(), closure_numpy(chain)[3].tolist()
    ([False, True, True, True], [True, True, True, True])

    ```

    Source: spec hasse.md §1.2–1.3; the bit-packed kernels are (derived), DESIGN.md "Principles".
    """
    n = mask.shape[-1]
    if num_layers is not None and num_layers >= max(1, n - 1):
        num_layers = None  # L* <= max(1, n - 1): the flow has converged
    nnz = int(np.count_nonzero(mask)) + n - int(np.count_nonzero(np.diagonal(mask)))
    need = _closure_bytes(n, nnz)
    if num_layers is not None and num_layers > 1:  # the level search of power_bitpacked, with the mask's copies
        need = max(need, 2 * n * n + power_bitpacked_bytes(n, nnz))
    _check(need, f"the closure of a mask of n = {n} positions (bit-packed, on the host)", name)
    a = np.array(mask, dtype=bool)
    np.fill_diagonal(a, True)
    if num_layers == 1:
        return a
    if num_layers is None:
        return closure_bitpacked(a)[0]
    return power_bitpacked(a, num_layers)[0]


def depth_numpy(mask: Bool[np.ndarray, "n n"], name: str = "mask") -> int:
    """The convergence depth ``L*`` of one Boolean mask on the host (spec hasse.md §1.3).

    Equal to ``int(convergence_depth(mask))``: the bit-packed breadth-first search of
    :func:`hassejax.order._bitpacked_depth.depth_bitpacked` (exact), run directly.

    **Raises:** :class:`~hassejax.errors.MemoryBudgetError` (naming `name`) when the search
    would not fit, estimated from `n` and the nonzeros first.

    **Example:**

    ```python
    >>> import numpy as np
    >>> q, k = np.indices((9, 9))
    >>> depth_numpy((k <= q) & (q - k <= 2))   # sliding window, 2 previous keys: ceil(8 / 2)
    4

    ```

    Source: spec hasse.md §1.3; the bit-packed search is (derived).
    """
    from ._bitpacked_depth import depth_bitpacked, depth_bitpacked_bytes

    n = mask.shape[-1]
    nnz = int(np.count_nonzero(mask)) + n - int(np.count_nonzero(np.diagonal(mask)))
    _check(n * n + depth_bitpacked_bytes(n, nnz), f"the convergence depth of n = {n} positions (bit-packed)", name)
    a = np.array(mask, dtype=bool)
    np.fill_diagonal(a, True)
    return int(depth_bitpacked(a, return_closure=False)[0])


def classes_numpy(reach: Bool[np.ndarray, "n n"], name: str = "reach") -> tuple[Int[np.ndarray, " n"], int]:
    """Classes of a closure numbered exactly as :func:`hassejax.order.classes` numbers them (spec §1.5).

    Classes sorted by the size of their reach set (a topological order), ties broken by their
    smallest member. `reach` must be a preorder (not checked: pass a closure); `name` names it
    in errors.

    **Returns:** ``(labels, num_classes)``: int32 NumPy `(n,)` and a Python int.

    **Raises:** :class:`~hassejax.errors.MemoryBudgetError` (naming `name`) when the work would
    not fit in the free host memory.

    **Example:**

    ```python
    >>> import numpy as np
    >>> r = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]], dtype=bool)   # {0, 1} and {2}
    >>> labels, c = classes_numpy(r)
    >>> labels.tolist(), c
    ([1, 1, 0], 2)

    ```

    Source: spec hasse.md §1.5; the numbering by reach-set size is (derived), as in
    :func:`hassejax.order.classes`.
    """
    n = reach.shape[-1]
    # r & r.T, its argmax and the counts: about two bytes an entry besides `reach`
    _check(2.0 * n * n + 64 * n, f"the classes of a closure of n = {n} positions", name)
    rep = np.argmax(reach & reach.T, axis=1)  # smallest member of each position's class
    count = np.count_nonzero(reach, axis=1)
    perm = np.lexsort((rep, count))
    rep_sorted = rep[perm]
    starts = np.concatenate([np.ones(1, dtype=bool), rep_sorted[1:] != rep_sorted[:-1]])
    labels = np.empty(n, dtype=np.int32)
    labels[perm] = np.cumsum(starts, dtype=np.int32) - 1
    return labels, int(np.count_nonzero(starts))


def quotient_numpy(
    reach: Bool[np.ndarray, "n n"], labels: Int[np.ndarray, " n"], num_classes: int
) -> Bool[np.ndarray, "c c"]:
    """The quotient order ``order[a, b] = R[rep(a), rep(b)]`` at the classes' smallest members (spec §1.6).

    `labels` must be the classes of `reach` (from :func:`classes_numpy`; not checked).
    **Returns:** Boolean NumPy `(C, C)`, as :func:`hassejax.order.quotient_order`.

    Source: spec hasse.md §1.6.
    """
    n = reach.shape[-1]
    reps = np.full(num_classes, n, dtype=np.int64)
    np.minimum.at(reps, labels, np.arange(n))
    return reach[np.ix_(reps, reps)]


class PosetParts(NamedTuple):
    """The closure `reach` `(n, n)`, `labels` int32 `(n,)`, `num_classes`, `order` and `cover` `(C, C)`."""

    reach: np.ndarray
    labels: np.ndarray
    num_classes: int
    order: np.ndarray
    cover: np.ndarray


def poset_numpy(mask: Bool[np.ndarray, "n n"], name: str = "mask") -> PosetParts:
    """Closure of ``mask | I``, its classes, quotient order and covers, all on the host (spec §1.3–1.7).

    **Returns:** a :class:`PosetParts`, entry for entry those of ``reachability(mask)``,
    ``classes``, ``quotient_order`` and ``cover_matrix``.

    **Raises:** :class:`~hassejax.errors.MemoryBudgetError` (naming `name`) as
    :func:`closure_numpy`, and before the classes and the covers.

    **Example:**

    ```python
    >>> import numpy as np
    >>> parts = poset_numpy(np.tril(np.ones((3, 3), dtype=bool)))   # causal: a chain
    >>> parts.labels.tolist(), parts.cover.astype(int).tolist()
    ([0, 1, 2], [[0, 0, 0], [1, 0, 0], [0, 1, 0]])

    ```

    Source: spec hasse.md §1.3–1.7 (derived host route).
    """
    r = closure_numpy(mask, None, name)
    labels, c = classes_numpy(r, name)
    order = quotient_numpy(r, labels, c)
    return PosetParts(r, labels, c, order, covers(order, name))


def diagram_numpy(mask: Bool[np.ndarray, "n n"], name: str = "mask"):
    """``HasseDiagram.from_mask(mask)`` for one dense NumPy mask, built from :func:`poset_numpy` (no JAX program).

    **Returns:** the :class:`~hassejax.order.HasseDiagram` (equal to ``from_mask``'s, with the
    same node ids). **Raises:** :class:`~hassejax.errors.MemoryBudgetError` as :func:`poset_numpy`.

    Source: spec hasse.md §1.7 (derived host route).
    """
    from .hasse import HasseDiagram

    parts = poset_numpy(mask, name)
    members: list[list[int]] = [[] for _ in range(parts.num_classes)]
    for p, k in enumerate(parts.labels.tolist()):
        members[k].append(p)
    diagram = HasseDiagram.__new__(HasseDiagram)
    diagram._init(members, parts.labels, mask.shape[-1], parts.order, parts.cover)
    return diagram
