"""Building a Hasse diagram (private; spec hasse.md §1.4–1.7): the checks of a given graph, the closure of a dense mask."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np

from .._checks import as_mask
from ..errors import MaskError
from ._poset_common import _bucket, _pad_square, _unpad
from .poset import cover_matrix as _cover_matrix
from .reach import reachability as _reachability


def _convergence_depth_or_none(mask) -> int | None:
    from .depth import convergence_depth

    return int(convergence_depth(mask))


def _check_graph(graph: nx.DiGraph, n: int) -> tuple[list, np.ndarray, int, np.ndarray, np.ndarray]:
    """The checks of :class:`~hassejax.order.HasseDiagram`'s constructor: ``(classes, labels, n, order, cover)``."""
    if not isinstance(graph, nx.DiGraph) or graph.is_multigraph():
        raise MaskError(f"`graph` must be a networkx.DiGraph (not a multigraph); got {type(graph).__name__}.")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise MaskError(f"`n` must be a positive int (the number of positions); got {n!r}.")
    n = int(n)
    c = graph.number_of_nodes()
    if c < 1 or set(graph.nodes) != set(range(c)):
        raise MaskError(
            f"`graph` must have nodes 0 .. C-1 (class ids); got {c} node(s): {sorted(graph.nodes, key=repr)[:10]}."
        )
    labels = np.full(n, -1, dtype=np.int64)
    classes = []
    for node in range(c):
        data = graph.nodes[node]
        if "members" not in data:
            raise MaskError(f"`graph` node {node} has no 'members' attribute (the positions of the class).")
        try:
            mem = tuple(sorted(int(p) for p in data["members"]))
        except (TypeError, ValueError):
            raise MaskError(
                f"`graph` node {node}: 'members' must be an iterable of int positions; got {data['members']!r}."
            ) from None
        if not mem:
            raise MaskError(f"`graph` node {node} has no members; every class holds at least one position.")
        if mem[0] < 0 or mem[-1] >= n:
            raise MaskError(f"`graph` node {node} has members {list(mem)} outside 0 .. n-1 = {n - 1}.")
        if len(set(mem)) != len(mem) or np.any(labels[list(mem)] >= 0):
            dup = next(p for p in mem if labels[p] >= 0 or mem.count(p) > 1)
            raise MaskError(f"`graph`: position {dup} belongs to more than one class (node {node}).")
        labels[list(mem)] = node
        classes.append(mem)
    if np.any(labels < 0):
        raise MaskError(
            f"`graph`: the classes must cover every position 0 .. {n - 1}; position "
            f"{int(np.flatnonzero(labels < 0)[0])} is in none."
        )
    cover = np.zeros((c, c), dtype=bool)
    for u, v in graph.edges:
        if not u < v:
            raise MaskError(
                f"`graph` edge {u} -> {v}: node ids must be a topological order, so every edge goes from a smaller "
                "to a larger id (and there are no self-loops)."
            )
        cover[v, u] = True
    # Order = reflexive-transitive closure of the covers (zero padding adds isolated
    # elements and keeps the jitted closure to a few compiled shapes).
    order = np.asarray(_reachability(_pad_square(cover, _bucket(c), "zeros")))[:c, :c]
    reduced = np.asarray(_cover_matrix(order))
    extra = cover & ~reduced
    if np.any(extra):
        v, u = (int(x) for x in np.argwhere(extra)[0])
        raise MaskError(
            f"`graph` must be transitively reduced (only covering pairs); edge {u} -> {v} is implied by a longer path."
        )
    return classes, labels, n, order, cover


def _mask_closure(mask, num_layers, memory) -> jax.Array:
    """The limit ``R`` of a dense `mask` for :meth:`~hassejax.order.HasseDiagram.from_mask`; checks that
    `num_layers` (if given) realises it."""
    m = as_mask(mask, "mask", batched=False, memory=memory)
    n = m.shape[-1]
    # Small masks are padded with isolated positions to a bucket size (their closure is
    # the top-left block), so that varying n compiles the closure only a few times.
    mp = _pad_square(m, _bucket(n), "zeros")
    r = _unpad(_reachability(mp), n)
    if num_layers is not None:
        if isinstance(num_layers, bool) or not isinstance(num_layers, (int, np.integer)) or num_layers < 1:
            raise MaskError(f"`num_layers` must be None or an int >= 1; got {num_layers!r}.")
        r_l = _unpad(_reachability(mp, int(num_layers)), n)
        if not bool(jnp.array_equal(r_l, r)):
            missing = int(jnp.sum(r & ~r_l))
            depth = _convergence_depth_or_none(m)
            lstar = f" (the convergence depth is L* = {depth})" if depth is not None else ""
            raise MaskError(
                f"`num_layers` = {int(num_layers)} is below the convergence depth of `mask`{lstar}: R^(L) still "
                f"misses {missing} dependent pair(s) of the limit R, is not transitive and has no Hasse diagram. "
                "Use num_layers=None (the limit) or num_layers >= L*."
            )
    return r
