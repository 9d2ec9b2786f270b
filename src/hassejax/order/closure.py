"""Reachability closure of attention masks (spec hasse.md §0–1; DESIGN.md "Principles", "Scale").

Convention (spec §0): a mask ``M`` has shape ``(..., n, n)``; ``M[i, j] = True`` means query
position ``i`` may attend to key position ``j``. Read as a graph, ``M`` has an edge
``i -> j`` ("i attends to j"; information flows from ``j`` to ``i``), and

- ``A = M | I`` is one layer with its residual stream (spec §1.1);
- ``R^(L) = A^L`` (Boolean power) is the flow after ``L`` layers: ``R^(L)[i, j]`` is True iff
  output ``i`` after ``L`` layers can depend on input ``j``, i.e. iff the graph has a walk of
  length at most ``L`` from ``i`` to ``j`` (spec §1.2);
- ``R`` is the limit, the reflexive-transitive closure: ``R[i, j]`` iff ``j`` is reachable
  from ``i`` (``networkx.transitive_closure(G, reflexive=True)`` of the graph with edges
  ``i -> j``); ``L*`` is the smallest ``L`` with ``R^(L) = R`` (spec §1.3).

Three exact routes compute these:

- ``"matmul"``: jitted Boolean matrix products as float matmuls (``float32`` inputs on the CPU,
  ``bfloat16`` on accelerators, always with ``float32`` accumulation, which counts exactly up
  to ``2**24``, far beyond any ``n`` that fits in memory) thresholded at ``0.5``; the limit by repeated squaring with an early exit in a
  :func:`jax.lax.while_loop`, ``R^(L)`` by binary exponentiation (``O(log L)`` products),
  ``L*`` by doubling and a binary search over the stored powers (``O(log L*)`` products).
  Works under :func:`jax.jit` and :func:`jax.vmap`.
- ``"bitpacked"``: bit-packed rows propagated on the host along a topological order of the
  strongly connected components (:mod:`hassejax.order._bitpacked`); the fast route for large
  sparse masks. Under a trace it runs as a :func:`jax.pure_callback`.
- ``"structured"``: masks given as :class:`~hassejax.masks.IntervalMask` (sorted key runs per
  row) are closed on interval rows by sparse-table products, ``O(n · k log n)`` each, with no
  ``n × n`` array (:mod:`hassejax.order._structured`): the route for long contexts. The result
  is an :class:`~hassejax.masks.IntervalMask` too; dense input with ``method="structured"`` is
  converted there and back.

``L*`` (:func:`convergence_depth`) has the same three routes; on the bit-packed one it is a
multi-source breadth-first search on packed rows that yields ``L*`` and ``R`` in one pass
(:func:`hassejax.order._bitpacked.depth_bitpacked`).

``method="auto"`` takes the structured route for an :class:`~hassejax.masks.IntervalMask` and for
a concrete dense mask with ``n >= 1024`` whose rows are at most 4 runs of keys (the dense result
is returned); otherwise it picks by a cost estimate from ``n``, the number of nonzeros and the
backend; inside a trace (``jit``/``vmap``) it always picks ``"matmul"``.

Concrete (non-traced) inputs are prepared with NumPy on the host, and the matmul kernels see
``n`` rounded up to a multiple of 32 for ``n <= 1024`` (padding positions are isolated: they
change neither ``R`` nor ``L*``), so that masks of many sizes share a few compilations.

Where things live: :mod:`hassejax.order.reach` (:func:`layer_adjacency`, :func:`reachability`),
:mod:`hassejax.order.depth` (:func:`convergence_depth`), :mod:`hassejax.order.heads`
(:func:`heads_union`); the routes in the private modules ``_matmul`` (jitted kernels),
``_host`` (bit-packed kernels over a batch), ``_routes`` (cost model and memory estimates) and
``_prepare`` (argument checks, ``A = M | I``). This module keeps the names importable from
``hassejax.order.closure``.
"""

from __future__ import annotations

from ._prepare import METHODS
from .depth import convergence_depth
from .heads import heads_union
from .reach import layer_adjacency, reachability

__all__ = ["layer_adjacency", "reachability", "convergence_depth", "heads_union", "METHODS"]
