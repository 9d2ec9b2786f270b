"""Covers and width of a small partial order on the host (private; NumPy and SciPy, imports no JAX).

A :class:`~hassejax.order.HasseDiagram` keeps its quotient order and covers as NumPy arrays:
its width, and on the structured route of :func:`hassejax.order.flow_summary` its covers, are
computed here, so that the structured route (and ``hassejax analyze`` of a structured spec)
never starts JAX. The results are those of the jitted :func:`~hassejax.order.cover_matrix` and
:func:`~hassejax.order.width`: the Boolean product is a float32 BLAS product of 0/1 matrices,
exact while the sums (at most ``C``) stay below ``2**24``.

Matrix convention (as in :mod:`hassejax.order.poset`): row = the upper element, column = the
lower one; ``order[a, b]`` True iff ``[b] ≤ [a]``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse
import scipy.sparse.csgraph
from jaxtyping import Bool

from ..errors import MemoryBudgetError
from ..masks._runs import check_host_memory
from ._poset_checks import _check_partial_order

__all__ = ["covers", "dilworth_width"]


def covers(order: Bool[np.ndarray, "c c"], name: str = "order") -> Bool[np.ndarray, "c c"]:
    """The covering relation ``S & ~(S ⊗ S)`` of a partial order, ``S = order & ~I`` (spec hasse.md §1.7).

    **Arguments:** `order`: Boolean NumPy `(C, C)` partial order; `name`: its name in errors.

    **Returns:** Boolean NumPy `(C, C)`, ``cover[a, b]`` True iff `a` covers `b`.

    **Raises:** :class:`~hassejax.errors.MaskError` if `order` is not reflexive, antisymmetric
    and transitive (checked from the same product); :class:`~hassejax.errors.MemoryBudgetError`
    (naming `name`) when the product would not fit in the free host memory.

    Source: Li & Guo, arXiv:2606.09951 (paper); spec hasse.md §1.7 (the matrix formula).
    """
    c = order.shape[-1]
    # order, S, the float32 operand and product, S ⊗ S, the covers and a temporary: ~14 bytes an entry
    check_host_memory(14.0 * c * c, f"the covers of a partial order on C = {c} classes", name)
    strict = order & ~np.eye(c, dtype=bool)
    f = strict.astype(np.float32)
    two_step = (f @ f) > 0.5
    not_reflexive = np.count_nonzero(~np.diagonal(order))
    not_antisymmetric = np.count_nonzero(strict & strict.T) // 2
    not_transitive = np.count_nonzero(two_step & ~strict)
    _check_partial_order(order, not_reflexive, not_antisymmetric, not_transitive, name)
    return strict & ~two_step


def dilworth_width(strict: Bool[np.ndarray, "c c"], name: str = "order", hint: str | None = None) -> int:
    """Width of a partial order from its strict part `S` (``S[a, b]`` iff ``[b] < [a]``), by Dilworth's theorem.

    ``C - ν``, with ``ν`` the size of a maximum matching of the bipartite graph with an edge
    ``(a, b)`` for every strict pair (Fulkerson). The matching is a maximum flow of the unit
    network source → ``a`` → ``b'`` → sink, by scipy's Dinic, ``O(E √C)`` on such a network (Even
    and Tarjan), ``E`` the number of strict pairs. Not scipy's ``maximum_bipartite_matching``: its
    Hopcroft–Karp never marks dead ends and takes exponential time on layered graphs (scipy issue
    26147), which the strict part of a deep order is (the 2,000 classes of
    ``natten_2d(40, 50, 5, 3) & causal(2000)`` did not finish in ten minutes; 0.3 s here). `S` must be
    transitive (the strict part of a partial order), which is not checked here.

    **Returns:** a Python int in ``1 .. C``.

    **Raises:** :class:`~hassejax.errors.MemoryBudgetError` (naming `name`, with `hint`) when the network
    (about 80 bytes a strict pair) would not fit in the free host memory, or has ``2**31`` edges or more (SciPy's
    int32 indices).

    Source: R. P. Dilworth, Ann. Math. 51 (1950); D. R. Fulkerson, Proc. AMS 7 (1956); S. Even,
    R. E. Tarjan, "Network flow and testing graph connectivity", SIAM J. Comput. 4 (1975).
    """
    c = strict.shape[-1]
    pairs = int(np.count_nonzero(strict))
    # the CSR of S, the network's indices and capacities, and scipy's residual graph with reverse edges,
    # flows, levels and edge pointers: ~80 bytes a strict pair
    what = f"the width of a partial order on C = {c} classes ({pairs} strict pairs)"
    check_host_memory(80.0 * (pairs + 2 * c), what, name, hint=hint)
    if pairs + 2 * c >= 2**31:  # the network's indices are int32 (SciPy's maximum_flow)
        raise MemoryBudgetError(
            f"`{name}`: {what} needs a network of {pairs + 2 * c} edges, more than SciPy's maximum flow takes "
            f"(2**31 - 1). {hint or 'Use a partial order on fewer classes.'}"
        )
    # vertices: a = 0..C-1 (upper), b' = C..2C-1 (lower), source 2C, sink 2C+1; rows in vertex order, the strict
    # pairs' rows straight from the row-major nonzeros (scipy's dense-to-CSR conversion takes 5x longer)
    upper_ptr = np.concatenate([[0], np.cumsum(np.count_nonzero(strict, axis=1))])
    lower = (np.flatnonzero(strict) % c + c).astype(np.int32)
    indptr = np.concatenate([upper_ptr, pairs + np.arange(1, c + 1), [pairs + 2 * c, pairs + 2 * c]])
    indices = np.concatenate([lower, np.full(c, 2 * c + 1, np.int32), np.arange(c, dtype=np.int32)])
    network = scipy.sparse.csr_array(
        (np.ones(indices.size, np.int32), indices, indptr.astype(np.int32)), shape=(2 * c + 2, 2 * c + 2)
    )
    flow = scipy.sparse.csgraph.maximum_flow(network, 2 * c, 2 * c + 1, method="dinic")
    return c - int(flow.flow_value)
