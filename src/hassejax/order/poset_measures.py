"""Depth and width of a finite poset given as a Boolean relation (spec hasse.md §3).

:func:`longest_chain` counts the elements of a longest chain (the height, the depth of a
Hasse diagram); :func:`width` the size of a largest antichain, by Dilworth's theorem (a
maximum bipartite matching). Matrix convention: row = the later / upper element, column =
the earlier / lower one.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
from jaxtyping import ArrayLike, Bool

from ..errors import MaskError
from ._poset_common import _as_relation, _bucket, _check_partial_order, _order_parts, _pad_square
from ._poset_host import dilworth_width

__all__ = ["longest_chain", "width"]


# ------------------------------------------------------------------------------ depth


@jax.jit
def _longest_chain_sorted(rel):
    # rel strictly lower triangular: rel[i, j] => j < i. Dynamic programming in id order:
    # h[i] = 1 + max{h[j] : rel[i, j]}, the number of elements in a longest chain ending at i.
    c = rel.shape[-1]

    def body(i, h):
        best = jnp.max(jnp.where(rel[i], h, 0))
        return h.at[i].set(best + 1)

    h = jax.lax.fori_loop(0, c, body, jnp.zeros((c,), dtype=jnp.int32))
    return jnp.max(h)


def longest_chain(relation: Bool[ArrayLike, "c c"]) -> int:
    """Depth of a poset: the number of elements in a longest chain (its height).

    Works on the cover matrix (Hasse diagram) or on the order itself (both have the same
    longest chains: every maximal chain of a finite poset is a path of covers); the
    diagonal is ignored. For the quotient of a mask it is the number of classes on the
    longest dependency path; it equals the number of topological generations (Mirsky's
    theorem). A chain of `C` classes has depth `C`; an antichain has depth 1.

    **Arguments:**

    - `relation`: Boolean `(C, C)`, `relation[a, b]` True iff `[b] < [a]` (or `[b] ⋖ [a]`);
      row = upper element. Must be acyclic off the diagonal.

    **Returns:** a Python int in `1 .. C`.

    **Raises:** :class:`~hassejax.errors.MaskError` if `relation` is not a concrete square Boolean array or
    has a directed cycle (then it is not a strict order).
    :class:`~hassejax.errors.MemoryBudgetError` (naming `relation`) if its copies would not
    fit in the free memory, estimated from its shape before anything is copied.

    Complexity: `O(C²)` in one jitted loop when the ids are topologically ordered (the
    relation strictly lower triangular, as for the quotient of :func:`classes`); otherwise
    a topological order is computed first with networkx on the relation's edges.

    **Example:** the diamond `0 < 1, 2 < 3` has chains of 3 classes (from the order or from its
    covers alike); an antichain has depth 1:

    ```python
    >>> import numpy as np
    >>> from hassejax.order import cover_matrix, longest_chain
    >>> order = np.array([[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 1, 1]], dtype=bool)
    >>> longest_chain(order), longest_chain(cover_matrix(order)), longest_chain(np.zeros((3, 3), dtype=bool))
    (3, 3, 1)

    ```

    Source: spec hasse.md §3 (last paragraph: depth is the longest chain); L. Mirsky,
    "A dual of Dilworth's decomposition theorem", Amer. Math. Monthly 78 (1971).
    """
    rel = np.asarray(_as_relation(relation, "relation", "the longest chain", 5, "longest_chain"))
    c = rel.shape[0]
    rel = rel & ~np.eye(c, dtype=bool)
    if np.any(np.triu(rel)):
        # Not in topological id order: sort with networkx on the (small) quotient graph.
        g = nx.DiGraph()
        g.add_nodes_from(range(c))
        a, b = np.nonzero(rel)
        g.add_edges_from(zip(b.tolist(), a.tolist()))  # lower -> upper
        try:
            topo = np.asarray(list(nx.topological_sort(g)), dtype=np.int64)
        except nx.NetworkXUnfeasible:
            cycle = nx.find_cycle(g)
            raise MaskError(
                "`relation` must be acyclic (a strict order or its cover relation); got a directed cycle "
                f"through elements {[u for u, _ in cycle]}."
            ) from None
        rel = rel[np.ix_(topo, topo)]
    return int(_longest_chain_sorted(_pad_square(rel, _bucket(c), "zeros")))


# ------------------------------------------------------------------------------ width


def width(order: Bool[ArrayLike, "c c"]) -> int:
    """Width of a poset: the size of a largest antichain, by Dilworth's theorem.

    Dilworth: the largest antichain has as many elements as a smallest partition into
    chains, and (Fulkerson) a smallest chain partition has `C - ν` chains, `ν` the size of
    a maximum matching in the bipartite graph with an edge `(a, b)` for every strict pair
    `[b] < [a]`. The matching is a maximum flow of the unit network (scipy's Dinic, not its
    Hopcroft–Karp, exponential on layered graphs: scipy issue 26147); antichains are never enumerated.

    **Arguments:**

    - `order`: Boolean `(C, C)` partial order, `order[a, b]` True iff `[b] ≤ [a]`
      (row = upper), e.g. from :func:`quotient_order`.

    **Returns:** a Python int in `1 .. C`.

    **Raises:** :class:`~hassejax.errors.MaskError` if `order` is not a concrete square Boolean array or not
    a partial order (the bipartite reduction needs the transitive relation: on the cover
    relation alone it would count vertex-disjoint paths, not chains).
    :class:`~hassejax.errors.MemoryBudgetError` (naming `order`) if the matmul, or the flow
    network (about 80 bytes a strict pair), would not fit in the free memory, estimated before it is built.

    Complexity `O(C³)` for the check (one matmul) and `O(E √C)` for the matching (Even and Tarjan), `E` the
    number of strict pairs.

    **Example:** the diamond `0 < 1, 2 < 3` has the antichain `{1, 2}`; a chain has width 1,
    three incomparable classes width 3:

    ```python
    >>> import numpy as np
    >>> from hassejax.order import width
    >>> order = np.array([[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 1, 1]], dtype=bool)
    >>> width(order), width(np.tril(np.ones((3, 3), dtype=bool))), width(np.eye(3, dtype=bool))
    (2, 1, 3)

    ```

    Source: spec hasse.md §3 (last paragraph); R. P. Dilworth, "A decomposition theorem for
    partially ordered sets", Ann. Math. 51 (1950); D. R. Fulkerson, "Note on Dilworth's
    decomposition theorem for partially ordered sets", Proc. AMS 7 (1956); S. Even, R. E. Tarjan,
    "Network flow and testing graph connectivity", SIAM J. Comput. 4 (1975).
    """
    o = _as_relation(order, "order", "the width", 18, "width")
    c = o.shape[-1]
    s, _, nr, na, nt = _order_parts(_pad_square(o, _bucket(c), "identity"))
    _check_partial_order(o, nr, na, nt, "order")
    return dilworth_width(np.asarray(s)[:c, :c])
