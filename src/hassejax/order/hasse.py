"""The Hasse diagram of an attention mask's information flow (spec hasse.md §1.7).

A :class:`HasseDiagram` holds the quotient of the reachability preorder as a small
``networkx.DiGraph`` of classes: node `c` (ids `0 .. C-1`, a topological order) carries
``members``, the sorted tuple of positions in the class; an edge ``u -> v`` means class `u`
is **covered by** class `v` (`[u] ⋖ [v]`): the outputs of `v` depend on the inputs of `u`,
and information flows from `u` to `v`. Minimal classes (no incoming edge) only see
themselves; maximal classes see the most. Two masks have the same deep information flow
iff their diagrams are equal (same classes, same covers): the diagram determines `R`.

Source: C. Li, H. Guo, "Hasse Diagrams for Attention: A Partial Order Framework for
Designing Transformer Masks", arXiv:2606.09951 (2026) (paper); spec hasse.md §1.4–1.7, §3.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jaxtyping as jt
import networkx as nx
import numpy as np
from jaxtyping import Bool, Int
from networkx.algorithms.isomorphism import DiGraphMatcher

from .._mask_checks import NestedMask, refuse_unread_arrays
from ..errors import MaskError, ParameterError
from ..masks._intervals import IntervalMask, check_host_memory
from ._hasse_export import HasseExport, format_class
from ._poset_host import dilworth_width
from .summary_types import QUOTIENT_LIMIT

# JAX is imported by the methods that need it (dense masks, JAX results): a diagram built on
# the structured route (:func:`hassejax.order.flow_summary`) and its export start no JAX.

__all__ = ["HasseDiagram", "format_class"]


def _from_intervals(mask: IntervalMask, num_layers, quotient_limit: int, dense_input: bool = False) -> HasseDiagram:
    """:meth:`HasseDiagram.from_mask` for an :class:`IntervalMask` (structured route)."""
    from .summary import flow_summary

    if num_layers is not None and (
        isinstance(num_layers, bool) or not isinstance(num_layers, (int, np.integer)) or num_layers < 1
    ):
        raise MaskError(f"`num_layers` must be None or an int >= 1; got {num_layers!r}.")
    summary = flow_summary(mask, () if num_layers is None else (int(num_layers),), quotient_limit=quotient_limit)
    if num_layers is not None and not summary.reach[0].limit_reached:
        raise MaskError(
            f"`num_layers` = {int(num_layers)} is below the convergence depth of `mask` (the convergence depth is "
            f"L* = {summary.convergence_depth}): R^(L) still misses {summary.limit.pairs - summary.reach[0].pairs} "
            "dependent pair(s) of the limit R, is not transitive and has no Hasse diagram. Use num_layers=None "
            "(the limit) or num_layers >= L*."
        )
    if summary._diagram is None:
        raise MaskError(
            f"`mask` has {summary.num_classes} classes, more than quotient_limit = {quotient_limit} ("
            + (
                "default for a dense mask: no limit"
                if dense_input
                else f"default for an IntervalMask: QUOTIENT_LIMIT = {QUOTIENT_LIMIT}"
            )
            + "): the Hasse diagram was not built (its quotient order "
            "is a (C, C) array). Pass a larger quotient_limit to "
            "HasseDiagram.from_mask, or use hassejax.order.flow_summary for its depth, width and number of edges "
            "without the diagram."
        )
    return summary._diagram


def _structured_form(mask) -> IntervalMask | None:
    """The interval form of a concrete dense `(n, n)` Boolean mask that :func:`hassejax.order.flow_summary` would
    close on the structured route (``_STRUCTURED_MIN_N <= n <= DENSE_SCAN_LIMIT``, every row at most
    ``STRUCTURED_MAX_RUNS`` key runs); None otherwise (the dense route)."""
    from ._route_rules import _STRUCTURED_MIN_N, _few_runs
    from .summary import DENSE_SCAN_LIMIT

    refuse_unread_arrays(mask, "mask")
    shape = getattr(mask, "shape", None)
    if (
        shape is None
        or len(shape) != 2
        or shape[0] != shape[1]
        or not _STRUCTURED_MIN_N <= shape[0] <= DENSE_SCAN_LIMIT
    ):
        return None
    if getattr(mask, "dtype", None) != np.bool_:
        return None
    if not isinstance(mask, np.ndarray):  # a device array: its host copy counted first (a diff review)
        check_host_memory(float(shape[0]) * shape[1], f"a host copy of the dense ({shape[0]}, {shape[1]}) mask", "mask")
    dense = np.asarray(mask)
    if not _few_runs(dense[None])[0]:
        return None
    return IntervalMask.from_dense(dense, name="mask")


_SLOW_REDUCTION_S = 10.0
"""The estimated seconds from which the dense route's transitive reduction of the quotient warns before it runs."""


def _warn_slow_reduction(c: int, host: bool = False) -> None:
    """Warn, before it starts, when the dense transitive reduction of a quotient of `c` classes (one ``(C, C)``
    float product: :func:`hassejax.order.cover_matrix` on the default backend, or with `host` NumPy's on the CPU,
    which the structured route uses and which imports no JAX) is estimated to take at least :data:`_SLOW_REDUCTION_S`."""
    from .._warn import user_stacklevel

    if host:
        from ._route_rules import host_matmul_seconds

        seconds = host_matmul_seconds(c)
    else:
        from ._routes import _matmul_seconds

        seconds = _matmul_seconds(c, 1)
    if seconds >= _SLOW_REDUCTION_S:
        import warnings

        warnings.warn(
            f"Hasse diagram: the covers of a quotient of C = {c} classes take one dense (C, C) product, "
            f"estimated {seconds:.3g} s ({2.0 * c**3:.3g} float operations) and {(14.0 if host else 17.0) * c * c / 2**30:.3g} GiB "
            "(C^3 work). A mask whose rows are a few key runs closes on the structured route without it: an "
            "IntervalMask (hassejax.masks.structured, from_spec(..., form='intervals')), or a dense array of "
            "1024 <= n <= 65536 with at most STRUCTURED_MAX_RUNS runs a row; hassejax.order.flow_summary (at its "
            "default quotient_limit) gives the depth, width and number of edges without the diagram.",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )


class HasseDiagram(HasseExport):
    """Hasse diagram of the quotient partial order of a mask's reachability (spec hasse.md §1.7).

    Build it with :meth:`from_mask` or :meth:`from_reachability`; the constructor takes a
    graph directly (e.g. from :meth:`from_json`) and validates it.

    **Attributes:**

    - `graph`: a frozen ``networkx.DiGraph`` on nodes `0 .. C-1`, a topological order
      (every edge goes from a smaller to a larger id). Node attribute ``members``: the sorted
      tuple of positions of the class. Edge ``u -> v``: `[u] ⋖ [v]`, class `u` is covered by
      class `v`, i.e. information flows from `u` to `v` (`R[i, j]` for `i ∈ v`, `j ∈ u`).
    - `n`: number of positions.
    - `num_classes`: `C`, number of classes (nodes).

    Graph work (isomorphism, generations, export) runs on this quotient only; the `n × n`
    closure is formed only by :meth:`reachability`.

    Equality (``==``) is equality of the information flow: same `n`, same classes as
    position sets and the same covering relation between them (node ids may differ).

    **Example:** the causal mask's diagram is a chain of four one-position classes
    `{0} -> {1} -> {2} -> {3}`:

    ```python
    >>> import numpy as np
    >>> from hassejax.order import HasseDiagram
    >>> m = np.tril(np.ones((4, 4), bool))      # causal
    >>> d = HasseDiagram.from_mask(m)
    >>> d
    HasseDiagram(n=4, num_classes=4, num_edges=3)
    >>> d.depth, d.width, d.edges
    (4, 1, ((0, 1), (1, 2), (2, 3)))

    ```

    Source: Li & Guo, arXiv:2606.09951 (paper); spec hasse.md §1.4–1.7.
    """

    def __init__(self, graph: nx.DiGraph, n: int):
        """Validate `graph` as the Hasse diagram of a preorder on `n` positions.

        **Arguments:**

        - `graph`: ``networkx.DiGraph`` with nodes `0 .. C-1`, each with a ``members``
          attribute (iterable of positions); the classes must partition `0 .. n-1`. Edges
          ``u -> v`` with `u < v` (ids in topological order) forming a transitively reduced DAG.
        - `n`: number of positions, `n >= 1`.

        **Raises:** :class:`~hassejax.errors.MaskError` naming what is wrong: a multigraph,
        node ids not `0 .. C-1`, missing/empty/overlapping/out-of-range members, members
        not covering `0 .. n-1`, a self-loop or an edge against the id order, or an edge
        implied by transitivity (not a cover).
        """
        from ._hasse_build import _check_graph

        self._init(*_check_graph(graph, n))

    # ------------------------------------------------------------------ construction

    def _init(self, classes, labels, n, order, cover, pairs=None) -> None:
        # Host copies first: numpy functions on jax arrays would dispatch to (compiled) jax ops.
        order, cover, labels = np.asarray(order, dtype=bool), np.asarray(cover, dtype=bool), np.asarray(labels)
        g = nx.DiGraph()
        for node, mem in enumerate(classes):
            g.add_node(node, members=tuple(int(p) for p in mem))
        if pairs is None:  # the edges u -> v of the cover matrix (cover[v, u])
            vs, us = np.nonzero(cover)
        else:  # the same, given as (lower, upper): no (C, C) scan
            us, vs = np.asarray(pairs[0]), np.asarray(pairs[1])
        first = np.lexsort((vs, us))
        g.add_edges_from(zip(us[first].tolist(), vs[first].tolist()))
        self._graph = nx.freeze(g)
        self._n = int(n)
        self._labels = labels.astype(np.int64)
        self._order = order
        self._cover = cover

    @classmethod
    def from_reachability(cls, reach: Bool[jt.ArrayLike, "n n"], *, check: bool = True) -> HasseDiagram:
        """Diagram of a reachability preorder `R` (spec hasse.md §1.4–1.7).

        **Arguments:**

        - `reach`: Boolean `(n, n)` preorder, `R[i, j]` True iff output `i` depends on input `j`
          (e.g. :func:`hassejax.order.reachability` with `num_layers=None`).
        - `check`: verify that `reach` is reflexive and transitive (one `n × n` matmul). With ``False`` the check
          runs only when the quotient turns out not to be a partial order, to refuse `reach` with a violating entry.

        **Returns:** the :class:`HasseDiagram`; class ids are those of
        :func:`hassejax.order.classes` (sorted by reach-set size, then smallest member).

        **Raises:** :class:`~hassejax.errors.MaskError` if `reach` is not a concrete square Boolean
        preorder (a traced one, under ``jit``/``vmap``, is refused by name);
        :class:`~hassejax.errors.MemoryBudgetError` (naming `reach`) if its copies, the classes and the quotient
        would not fit, estimated from its shape before anything is copied.

        **Warns:** :class:`RuntimeWarning` with the estimated seconds and memory, before it
        starts, when the transitive reduction of the quotient (``O(C³)``) is estimated to take
        at least 10 s (about ``C >= 8000`` classes on a CPU).
        """

        from .poset import _check_flag

        _check_flag(check, "check")
        # Copies of `reach` and about four (n, n) arrays for the classes and the quotient (the
        # check's matmul: four more).
        return cls._from_closure(reach, check, None)

    @classmethod
    def _from_closure(cls, reach, check: bool, quotient_limit: int | None) -> HasseDiagram:
        """:meth:`from_reachability`, refusing (before the quotient and its reduction) more classes than
        `quotient_limit` (:meth:`from_mask`'s dense route)."""
        from .._checks import as_mask
        from ._routes import _dense_memory
        from .poset import classes as _classes
        from .poset import cover_matrix as _cover_matrix
        from .poset import quotient_order as _quotient_order

        # Copies of `reach` and about four (n, n) arrays for the classes and the quotient (the
        # check's matmul: four more).
        memory = _dense_memory("reach", "the Hasse diagram of a preorder", extra=8 if check else 4, route=False)
        r = as_mask(
            reach, "reach", batched=False, memory=memory, concrete="HasseDiagram.from_reachability", relation=True
        )
        labels, c = _classes(r, check=check)
        if quotient_limit is not None and c > quotient_limit:
            raise MaskError(
                f"`mask` has {c} classes, more than quotient_limit = {quotient_limit}: the Hasse diagram was not "
                "built. Pass a larger quotient_limit to HasseDiagram.from_mask (or None, the default for a dense "
                "mask), or use hassejax.order.flow_summary for its depth, width and number of edges."
            )
        try:
            order = _quotient_order(r, labels, c)
            _warn_slow_reduction(c)
            cover = _cover_matrix(order)
        except MaskError:  # with check=False, a `reach` that is not a preorder (not reflexive: the quotient's label
            # check fails; not transitive: the cover relation's): name it, with one of its violations (a new user
            # got "positions 0 and 0 have labels 0 and 0" for a strict order)
            from .poset import _classes as _checked_classes

            _checked_classes(r, True, "reach")
            raise
        lab = np.asarray(labels)
        members = [[] for _ in range(c)]
        for p, k in enumerate(lab.tolist()):
            members[k].append(p)
        diagram = cls.__new__(cls)
        diagram._init(members, lab, r.shape[-1], order, cover)
        return diagram

    @classmethod
    def from_mask(
        cls,
        mask: Bool[jt.ArrayLike, "n n"]
        | Bool[jt.ArrayLike, "heads n n"]
        | IntervalMask
        | Sequence[IntervalMask | Bool[jt.ArrayLike, "n n"]]
        | NestedMask,
        num_layers: int | None = None,
        *,
        head_axis: int | None = None,
        quotient_limit: int | None = None,
    ) -> HasseDiagram:
        """Diagram of the information flow of a mask (spec hasse.md §1).

        **Arguments:**

        - `mask`: Boolean `(n, n)` mask, row = query, column = key, True = may attend. The
          diagonal is implied (residual stream, `A = M | I`). Or an
          :class:`~hassejax.masks.IntervalMask` of any length: closed on the structured route
          (:func:`hassejax.order.flow_summary`), the diagram built when the quotient has at
          most :data:`hassejax.order.summary.QUOTIENT_LIMIT` classes.
        - `num_layers`: `None` for the limit `R` (any depth). Given `L`, the diagram of
          `R^(L)` is returned only if `L` layers already realise the limit (`R^(L) = R`, i.e.
          `L >= L*`); otherwise `R^(L)` is not transitive, has no Hasse diagram, and this
          raises. (`R^(L)` is transitive exactly when it equals the limit.)
        - `head_axis`: ``None`` (default), or ``0`` (equivalently ``-3``) for `mask` given as the
          masks of one layer's heads, `(heads, n, n)` or a tuple of
          :class:`~hassejax.masks.IntervalMask`: they are OR-ed first
          (:func:`hassejax.order.closure.heads_union`; the layer's adjacency is
          ``(M_1 | … | M_H) | I``, spec hasse.md §1.1).
        - `quotient_limit`: build the diagram only up to this many classes (its quotient order is a
          ``(C, C)`` array), as :func:`hassejax.order.flow_summary`'s. ``None`` (default):
          :data:`hassejax.order.summary.QUOTIENT_LIMIT` for an :class:`~hassejax.masks.IntervalMask`,
          no limit for a dense mask (its ``(n, n)`` closure is at least as large as the quotient).

        A concrete dense mask of ``1024 <= n <= 65536`` positions whose rows are at most
        :data:`hassejax.order.summary.STRUCTURED_MAX_RUNS` runs of keys (windows, causal, blocks, …)
        is closed on the structured route, as :func:`hassejax.order.flow_summary` does: no dense
        closure, the covers (Hasse edges) from the strict down-sets in ``O(n log n)`` when the
        classes are runs of positions, never an ``O(C³)`` transitive reduction; only the
        ``(C, C)`` quotient order is dense (checked against the free memory first).

        **Returns:** the :class:`HasseDiagram` of the closure.

        **Raises:** :class:`~hassejax.errors.ParameterError` for a bad `head_axis` (not an int,
        not the leading axis of a `(heads, n, n)` mask);
        :class:`~hassejax.errors.MaskError` for a bad mask, a non-positive
        `num_layers`, or `num_layers` below the convergence depth, or a traced mask (the
        diagram is a host-side networkx graph: build it outside `jit`/`vmap`);
        :class:`~hassejax.errors.MemoryBudgetError` when the dense closure and the classes
        would not fit in the free memory (estimated from the shape before the mask is copied;
        the message names `mask`, `n`, the estimated and the free GiB). For an
        :class:`~hassejax.masks.IntervalMask`, :class:`~hassejax.errors.MaskError` when the
        quotient has more than `quotient_limit` classes (pass a larger one, or use
        :func:`hassejax.order.flow_summary` for the depth, width and edges without the diagram);
        :class:`~hassejax.errors.ParameterError` for a `quotient_limit` that is not a positive int.

        **Warns:** :class:`RuntimeWarning` before a dense route's transitive reduction estimated
        at 10 s or more (see :meth:`from_reachability`).

        **Example:**

        ```python
        >>> import numpy as np
        >>> from hassejax.order import HasseDiagram
        >>> heads = np.stack([np.eye(4, k=-1, dtype=bool), np.eye(4, k=1, dtype=bool)])  # back, forward
        >>> HasseDiagram.from_mask(heads, head_axis=0).classes   # together: one class of all positions
        ((0, 1, 2, 3),)
        >>> HasseDiagram.from_mask(heads[0]).classes             # one head alone: a chain
        ((0,), (1,), (2,), (3,))
        >>> from hassejax.masks import structured
        >>> w = structured.sliding_window(4096, 64)                 # a chain of 4096 classes
        >>> d = HasseDiagram.from_mask(w, quotient_limit=4096)      # (the default stops an IntervalMask at 2048)
        >>> d.depth, d.width, len(d.edges), d == HasseDiagram.from_mask(w.to_dense())
        (4096, 1, 4095, True)

        ```
        """
        import jax

        from ._hasse_build import _mask_closure
        from ._routes import _dense_memory
        from .heads import _heads_union

        # The closure plus about four more (n, n) matrices for the classes and the quotient.
        memory = _dense_memory("mask", "the Hasse diagram (closure, classes, quotient)", extra=4)
        if head_axis is not None:
            mask = _heads_union(mask, head_axis, "mask", batched=False, memory=memory)
        if quotient_limit is not None and (
            isinstance(quotient_limit, bool) or not isinstance(quotient_limit, (int, np.integer)) or quotient_limit < 1
        ):
            raise ParameterError(f"`quotient_limit` must be None or a positive int; got {quotient_limit!r}.")
        if isinstance(mask, IntervalMask):
            return _from_intervals(mask, num_layers, QUOTIENT_LIMIT if quotient_limit is None else int(quotient_limit))
        if isinstance(mask, jax.core.Tracer):
            raise MaskError(
                "`mask` is a JAX tracer: HasseDiagram is a host-side networkx graph and cannot be built inside "
                "jit/vmap; compute `reachability` there and build the diagram outside."
            )
        intervals = _structured_form(mask)
        if intervals is not None:
            return _from_intervals(
                intervals, num_layers, intervals.n if quotient_limit is None else int(quotient_limit), dense_input=True
            )
        return cls._from_closure(_mask_closure(mask, num_layers, memory), False, quotient_limit)

    # ------------------------------------------------------------------ accessors

    @property
    def graph(self) -> nx.DiGraph:
        """The frozen ``networkx.DiGraph`` of classes (see the class docstring for conventions)."""
        return self._graph

    @property
    def n(self) -> int:
        """Number of positions."""
        return self._n

    @property
    def num_classes(self) -> int:
        """Number of classes `C` (nodes of the diagram)."""
        return self._graph.number_of_nodes()

    @property
    def classes(self) -> tuple[tuple[int, ...], ...]:
        """Members of each class, indexed by class id: ``classes[c]`` is a sorted tuple of positions."""
        return tuple(self._graph.nodes[c]["members"] for c in range(self.num_classes))

    @property
    def edges(self) -> tuple[tuple[int, int], ...]:
        """Covering pairs ``(u, v)``, `[u] ⋖ [v]` (information flows `u -> v`), sorted."""
        return tuple(sorted(self._graph.edges))

    @property
    def labels(self) -> Int[jt.Array, " n"]:
        """Class id of every position, shape `(n,)`."""
        import jax.numpy as jnp

        return jnp.asarray(self._labels)

    def order_matrix(self) -> Bool[jt.Array, "c c"]:
        """Quotient order, `(C, C)`: entry `[a, b]` True iff `[b] ≤ [a]` (row = upper class)."""
        import jax.numpy as jnp

        return jnp.asarray(self._order)

    def cover_matrix(self) -> Bool[jt.Array, "c c"]:
        """Covering relation, `(C, C)`: entry `[a, b]` True iff `[b] ⋖ [a]` (edge ``b -> a``)."""
        import jax.numpy as jnp

        return jnp.asarray(self._cover)

    def reachability(self) -> Bool[jt.Array, "n n"]:
        """Close the diagram back to the `n × n` reachability `R` (spec hasse.md §1.7).

        `R[i, j] = order[class(i), class(j)]`, the order being the reflexive–transitive
        closure of the covers. The diagram determines `R` uniquely.
        """
        import jax.numpy as jnp

        return jnp.asarray(self._order[np.ix_(self._labels, self._labels)])

    @functools.cached_property
    def depth(self) -> int:
        """Number of classes in a longest chain (:func:`hassejax.order.longest_chain` of the covers).

        The longest path of covers in :attr:`graph` plus one (networkx, on the host).
        """
        return nx.dag_longest_path_length(self._graph) + 1

    @functools.cached_property
    def width(self) -> int:
        """Size of a largest antichain of classes, by Dilworth's theorem (:func:`hassejax.order.width`).

        On the host (the order is a partial order by construction): a maximum matching on its strict part, by a
        maximum flow (:func:`hassejax.order.width`). Raises :class:`~hassejax.errors.MemoryBudgetError` (naming `mask`)
        when the flow network would not fit in the free host memory.
        """
        return dilworth_width(
            self._order & ~np.eye(self.num_classes, dtype=bool),
            "mask",
            hint="A smaller quotient_limit (flow_summary, HasseDiagram.from_mask) skips the diagram of so many classes.",
        )

    @property
    def generations(self) -> tuple[tuple[int, ...], ...]:
        """Topological generations (``networkx.topological_generations``), bottom first.

        Generation 0 holds the minimal classes (no incoming edge); a class lies in
        generation `k` iff the longest chain ending at it has `k + 1` classes, so there are
        :attr:`depth` generations, each an antichain.
        """
        return tuple(tuple(sorted(g)) for g in nx.topological_generations(self._graph))

    # ------------------------------------------------------------------ comparison

    def _flow_key(self):
        cls_sets = [frozenset(m) for m in self.classes]
        return (
            self._n,
            frozenset(cls_sets),
            frozenset((cls_sets[u], cls_sets[v]) for u, v in self._graph.edges),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HasseDiagram):
            return NotImplemented
        return self._flow_key() == other._flow_key()

    def __hash__(self) -> int:
        return hash(self._flow_key())

    def __repr__(self) -> str:
        return f"HasseDiagram(n={self._n}, num_classes={self.num_classes}, num_edges={self._graph.number_of_edges()})"

    def is_isomorphic(self, other: HasseDiagram, match_members: bool = False) -> bool:
        """Whether two diagrams are isomorphic as directed graphs with class sizes.

        Uses ``networkx``'s ``DiGraphMatcher`` (VF2 for directed graphs: edge direction
        matters, a chain ``a -> b`` is not the chain ``b -> a`` when the class sizes
        differ, an in-star is not an out-star).

        **Arguments:**

        - `other`: another :class:`HasseDiagram`.
        - `match_members`: if True, matched classes must hold the same positions (then
          isomorphism coincides with ``==``); otherwise only the class sizes must agree.

        **Returns:** bool.

        **Raises:** :class:`~hassejax.errors.MaskError` if `other` is not a HasseDiagram.
        """
        if not isinstance(other, HasseDiagram):
            raise MaskError(f"`other` must be a HasseDiagram; got {type(other).__name__}.")
        g1, g2 = self._graph, other._graph
        if (
            self._n != other._n
            or g1.number_of_nodes() != g2.number_of_nodes()
            or g1.number_of_edges() != g2.number_of_edges()
            or sorted(map(len, self.classes)) != sorted(map(len, other.classes))
        ):
            return False
        if match_members:

            def node_match(a, b):
                return a["members"] == b["members"]
        else:

            def node_match(a, b):
                return len(a["members"]) == len(b["members"])

        return DiGraphMatcher(g1, g2, node_match=node_match).is_isomorphic()
