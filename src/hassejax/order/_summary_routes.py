"""The stages of :func:`hassejax.order.flow_summary` on each route (private).

:class:`_StructuredFlow` works on an :class:`~hassejax.masks.IntervalMask` (no ``n × n`` array),
:class:`_DenseFlow` on a Boolean ``(n, n)`` array (``"matmul"`` or ``"bitpacked"``); both give
the limit's row counts, ``L*``, per-``L`` counts, the classes and the quotient order.
"""

from __future__ import annotations

import time

import numpy as np

from ..masks._intervals import IntervalMask


class _StructuredFlow:
    """The structured route's stages on an :class:`IntervalMask` (no ``n × n`` array)."""

    def __init__(self, mask: IntervalMask, delay: float | None = None):
        from ._structured import PowerTable

        self.n = mask.n
        self.table = PowerTable(mask.with_diagonal(), name="mask")
        self.delay = delay  # progress: a bar per stage that runs products (see _progress)

    def _bar(self, what: str):
        from ._progress import progress_bar

        return progress_bar(self.delay, f"{what} (structured)", "products")

    def limit_counts(self) -> np.ndarray:
        with self._bar("R") as bar:
            self.limit = self.table.limit(bar)
        return self.limit.row_counts()

    def depth(self) -> int:
        with self._bar("L*") as bar:
            return self.table.depth(bar)

    def counts(self, num_layers: int) -> np.ndarray:
        with self._bar(f"R^({num_layers})") as bar:
            return self.table.power(num_layers, bar).row_counts()

    def classes(self):
        from ._structured_poset import row_classes

        self.cls = row_classes(self.limit)
        return self.cls.num_classes, self.cls.sizes

    def order(self, quotient_limit: int):
        from ._structured_poset import (
            _cover_ranges,
            chain_depth,
            cover_pairs,
            cover_rows,
            dag_depth,
            interval_depth_width,
            quotient_matrix,
            strict_down_sets,
        )

        r, cls = self.limit, self.cls
        c = cls.num_classes
        depth = width = edges = pairs = None
        if r.num_runs == 1:
            depth, width = interval_depth_width(r, cls)
        if cls.contiguous:
            down = strict_down_sets(r, cls)
            cover = cover_rows(down)
            ranges = _cover_ranges(cls, cover)
            edges = int(ranges[2].sum())
            if (depth is None or c <= quotient_limit) and edges <= _PAIRS_PER_CLASS * c + _PAIRS_FLOOR:
                # the covers as pairs: the depth is one pass over them (the doubling costs 2 log2(depth) products)
                pairs = cover_pairs(cls, cover, ranges)
                if depth is None:
                    depth = dag_depth(c, *pairs)
        if c <= quotient_limit:
            diagram = _diagram_from_quotient(quotient_matrix(r, cls), cls, self.n, pairs, depth, width)
            return diagram.depth, diagram.width, len(diagram.edges), diagram, {}
        if cls.contiguous and depth is None:
            depth = chain_depth(down)
        big = f"{c} classes (> quotient_limit = {quotient_limit})"
        not_computed = {}
        if width is None:
            not_computed["width"] = (
                f"{big} and rows of R with {r.num_runs} runs: Dilworth's theorem needs the dense quotient order"
            )
        if not cls.contiguous:
            why = f"{big} that are not all runs of consecutive positions"
            not_computed["num_hasse_edges"] = why
            if depth is None:
                not_computed["depth"] = why
        return depth, width, edges, None, not_computed


_PAIRS_PER_CLASS = 4
_PAIRS_FLOOR = 1 << 22
"""The structured route lists the covers as pairs of classes (for the depth and the diagram) when there are at most
``_PAIRS_PER_CLASS · C + _PAIRS_FLOOR`` of them (16 bytes a pair, and a Python loop over them: about 0.1 µs a
pair); beyond, the depth comes from the doubling over the strict down-sets (:func:`~._structured_poset.chain_depth`)
and the diagram's covers from the dense quotient."""


class _DenseFlow:
    """The dense routes' stages (``"matmul"`` or ``"bitpacked"``) on a Boolean ``(n, n)`` array."""

    def __init__(self, dense: np.ndarray, method: str, delay: float | None = None, layers: tuple[int, ...] = ()):
        self.n = dense.shape[-1]
        self.dense = dense
        self.method = method
        self.delay = delay
        self.progress = False if delay is None else delay  # the `progress` of the closure functions
        self.layers = layers  # the bit-packed route counts their R^(L) in L*'s search
        self._counts: dict[int, np.ndarray] = {}

    def limit_counts(self) -> np.ndarray:
        if self.method == "bitpacked":
            return self._search_bitpacked()
        from .reach import reachability

        self.limit = np.asarray(reachability(self.dense, method=self.method, progress=self.progress))
        return self.limit.sum(axis=1)

    def depth(self) -> int:
        if self.method == "bitpacked":
            return self._depth  # found with R by the limit stage's search
        from .depth import convergence_depth

        return int(convergence_depth(self.dense, method=self.method, progress=self.progress))

    def _search_bitpacked(self) -> np.ndarray:
        """``R``, ``L*`` and the rows of ``R^(L)`` for the requested layers by one bit-packed level search
        (:func:`~._bitpacked_depth.depth_counts_bitpacked`), where the closure was computed twice (the limit stage's
        and the search's own) and each ``R^(L)`` was a search of its own; returns ``R``'s row counts. The whole
        call's memory was checked up front (its ``L*`` stage: the search and ``R``)."""
        from ._bitpacked_depth import depth_counts_bitpacked
        from ._progress import progress_bar

        a = np.array(self.dense, dtype=bool)
        np.fill_diagonal(a, True)
        with progress_bar(self.delay, "R and L* (bit-packed)", "levels") as bar:
            depth, self._counts, self.limit, counts = depth_counts_bitpacked(
                a, [num for num in self.layers if num >= 1], bar
            )
        self._depth = int(depth)
        return counts

    def counts(self, num_layers: int) -> np.ndarray:
        if num_layers in self._counts:
            return self._counts[num_layers]
        from .reach import reachability

        r = reachability(self.dense, num_layers, method=self.method, progress=self.progress)
        return np.asarray(r).sum(axis=1)

    def classes(self):
        from .poset import _classes

        labels, c = _classes(self.limit, False, "mask")  # classes(R, check=False), its errors naming `mask`
        self.labels = np.asarray(labels)
        self.num_classes = c
        self.sizes = np.bincount(self.labels, minlength=c).astype(np.int64)
        return c, self.sizes

    def order(self, quotient_limit: int):
        if self.num_classes <= quotient_limit:
            diagram = _dense_diagram(self.limit, self.labels, self.sizes)
            return diagram.depth, diagram.width, len(diagram.edges), diagram, {}
        why = f"{self.num_classes} classes (> quotient_limit = {quotient_limit}) on the dense route"
        return None, None, None, None, {"depth": why, "width": why, "num_hasse_edges": why}


def _dense_diagram(limit: np.ndarray, labels: np.ndarray, sizes: np.ndarray):
    """The :class:`~hassejax.order.HasseDiagram` of the dense route from its closure ``R`` and the classes of the
    stage before (:func:`~hassejax.order.classes`' labels): the quotient order is ``R`` at the classes' smallest
    members, a ``(C, C)`` gather, the covers from it (the dense route's ``HasseDiagram.from_reachability`` found
    the classes again and checked the labels against ``R`` with ``(n, n)`` work: 14 s and 1 GiB at n = 16384 for 2
    classes, a fresh-user review). Checked against the free host memory by `C`, naming `mask`."""
    from ..masks._runs import check_host_memory

    c = len(sizes)
    # the quotient, then the covers (:func:`~._poset_host.covers`: about 14 bytes an entry), then the width's network
    # (:func:`~._poset_host.dilworth_width`: 80 bytes a strict pair, at most C²/2 of them, with the order and its
    # strict part): 43 bytes an entry at most
    check_host_memory(
        43.0 * c * c, f"the quotient order of C = {c} classes, its covers and its width ((C, C) arrays)", "mask"
    )
    reps = np.unique(labels, return_index=True)[1]  # the smallest member of every class, by class id
    order = limit[np.ix_(reps, reps)]
    return _diagram_from_quotient(order, _Classes(labels, sizes), limit.shape[-1])


class _Classes:
    """The labels and sizes of the dense route's classes, as :func:`_diagram_from_quotient` reads them."""

    def __init__(self, labels: np.ndarray, sizes: np.ndarray):
        self.labels, self.sizes = labels, sizes


def _diagram_from_quotient(order: np.ndarray, cls, n: int, pairs=None, depth=None, width=None):
    """The :class:`~hassejax.order.HasseDiagram` of a quotient order ``(C, C)``; its covers from `pairs`
    (``(lower, upper)`` of :func:`~._structured_poset.cover_pairs`) when given, else from the order
    (``C³/…`` float work, :func:`~._poset_host.covers`); `depth`, `width` when already known."""
    from ..masks._runs import check_host_memory
    from ._poset_host import covers
    from .hasse import HasseDiagram

    c = order.shape[-1]
    if pairs is None:
        from .hasse import _warn_slow_reduction

        _warn_slow_reduction(order.shape[0], host=True)  # C³ NumPy work: said before it starts (a diff review)
        cover = covers(np.asarray(order, dtype=bool))  # NumPy: the structured route starts no JAX
    else:
        check_host_memory(float(c) * c, f"the cover matrix of a quotient of C = {c} classes", "mask")
        cover = np.zeros((c, c), dtype=bool)
        cover[pairs[1], pairs[0]] = True
    members = np.split(np.argsort(cls.labels, kind="stable"), np.cumsum(cls.sizes)[:-1])
    diagram = HasseDiagram.__new__(HasseDiagram)
    diagram._init(members, cls.labels, n, order, cover, pairs)
    if depth is not None:  # the diagram's cached properties, already known on this route
        diagram.__dict__["depth"] = int(depth)
    if width is not None:
        diagram.__dict__["width"] = int(width)
    return diagram


def _factor_classes(flow, m: IntervalMask, limit_counts: np.ndarray):
    """The classes of a factor's (or component's) flow: ``(count, sizes, labels, first, reach)``, int64: the label of
    each position, the smallest member of each class and its reach-set size (the numbering's keys)."""
    num, sizes = flow.classes()
    labels = np.asarray(flow.cls.labels if hasattr(flow, "cls") else flow.labels, dtype=np.int64)
    first = np.full(num, m.n, dtype=np.int64)
    np.minimum.at(first, labels, np.arange(m.n, dtype=np.int64))
    return int(num), np.asarray(sizes, dtype=np.int64), labels, first, limit_counts[first]


class _ProductFlow:
    """The stages on a Kronecker product ``A = P ⊗ C`` (:mod:`._product`), from the flows of its two factors.

    ``R^(L) = P^(L) ⊗ C^(L)``: row counts multiply, ``L* = max(L*_P, L*_C)``; the classes are the pairs of classes,
    numbered as :func:`hassejax.order.classes` numbers them (reach-set size, then smallest member); the quotient is
    the product order: ``depth_P + depth_C − 1`` classes in a longest chain, ``E_P C_C + C_P E_C`` covering pairs,
    the width from the factors where the product order's is known (one factor with one class: the other's; an
    antichain of `a` classes times an order of width `w`: `a·w`, `a` disjoint copies; two chains of `a` and `b`
    classes: `min(a, b)`, the grid's diagonals), else from the diagram, when it is built."""

    def __init__(self, first: IntervalMask, second: IntervalMask, delay: float | None, layers, quotient_limit: int):
        self.parts = (first, second)
        self.n = first.n * second.n
        self.delay = delay
        t = time.perf_counter()
        self.flows = tuple(_factor_flow(m, delay, layers, quotient_limit) for m in self.parts)
        self.seconds = time.perf_counter() - t  # the factors' R and L*, before the stages that combine them

    def route(self) -> str:
        """The factors' routes, for the reason."""
        return " and ".join(f.route_name for f in self.flows)

    def limit_counts(self) -> np.ndarray:
        self._limits = [np.asarray(f.limit_counts_value, dtype=np.int64) for f in self.flows]
        return np.outer(*self._limits).ravel()

    def depth(self) -> int:
        self._depths = [int(f.depth_value) for f in self.flows]
        return max(self._depths)

    def counts(self, num_layers: int) -> np.ndarray:
        rows = [
            lim if num_layers >= d else np.asarray(f.counts(num_layers), dtype=np.int64)
            for f, lim, d in zip(self.flows, self._limits, self._depths)
        ]
        return np.outer(*rows).ravel()

    def classes(self):
        parts = [_factor_classes(f, m, lim) for f, m, lim in zip(self.flows, self.parts, self._limits)]
        (ca, sa, la, fa, ra), (cb, sb, lb, fb, rb) = parts
        w = self.parts[1].n
        # class pair (i, j) is i * cb + j; numbered by reach-set size, then smallest member (classes' numbering)
        perm = np.lexsort(((fa[:, None] * w + fb[None, :]).ravel(), np.outer(ra, rb).ravel()))
        self.rank = np.empty(perm.size, dtype=np.int64)
        self.rank[perm] = np.arange(perm.size)
        self.perm = perm
        self.num_classes = ca * cb
        self.sizes = np.empty(perm.size, dtype=np.int64)
        self.sizes[self.rank] = np.outer(sa, sb).ravel()
        self._factor_classes = (ca, la), (cb, lb)
        return self.num_classes, self.sizes

    def order(self, quotient_limit: int):
        (ca, la), (cb, lb) = self._factor_classes
        out = [f.order(quotient_limit) for f in self.flows]
        (da, wa, ea, diag_a, nca), (db, wb, eb, diag_b, ncb) = out
        not_computed = {}
        depth = None if da is None or db is None else da + db - 1
        edges = None if ea is None or eb is None else ea * cb + ca * eb
        width = _product_width(ca, da, wa, cb, db, wb)
        for key, value in (("depth", depth), ("num_hasse_edges", edges)):
            if value is None:
                why = nca.get(key) or ncb.get(key) or "not computed for a factor"
                not_computed[key] = f"a factor of the Kronecker product: {why}"
        c = self.num_classes
        if c <= quotient_limit and diag_a is not None and diag_b is not None:
            from ..masks._runs import check_host_memory
            from .hasse import HasseDiagram

            check_host_memory(4.0 * c * c, f"the quotient order of C = {c} classes (a (C, C) array)", "mask")
            pick = np.ix_(self.perm, self.perm)
            order = np.kron(diag_a._order, diag_b._order)[pick]
            cover = (np.kron(diag_a._cover, np.eye(cb, dtype=bool)) | np.kron(np.eye(ca, dtype=bool), diag_b._cover))[
                pick
            ]
            labels = self.rank[(la[:, None] * cb + lb[None, :]).ravel()]
            members = np.split(np.argsort(labels, kind="stable"), np.cumsum(self.sizes)[:-1])
            diagram = HasseDiagram.__new__(HasseDiagram)
            diagram._init(members, labels, self.n, order, cover)
            if depth is not None:
                diagram.__dict__["depth"] = int(depth)
            if width is not None:
                diagram.__dict__["width"] = int(width)
            return diagram.depth, diagram.width, len(diagram.edges), diagram, {}
        one = ncb if ca == 1 else nca if cb == 1 else None  # the width is that factor's, which it did not give
        if width is None and one is not None:
            not_computed["width"] = f"a factor of the Kronecker product: {one.get('width', 'not computed')}"
        elif width is None:
            not_computed["width"] = (
                f"{c} classes (> quotient_limit = {quotient_limit}) of a product of two orders with {ca} and {cb} "
                "classes: Dilworth's theorem needs the dense quotient order"
            )
        return depth, width, edges, None, not_computed


class _ComponentsFlow:
    """The stages on a disjoint union of `W` interleaved components (:mod:`._components`), from the flows of its
    distinct component masks (a dilated window whose `n` is no multiple of its stride: two bands).

    Row counts are the components' (position ``c + jW`` takes row `j` of its component's), ``L* = max_c L*_c``; the
    classes are the components' classes, numbered as :func:`hassejax.order.classes` numbers them (reach-set size,
    then smallest member); the quotient is the disjoint union of the components' orders: depth the largest, width
    and covering pairs the sums."""

    def __init__(self, w: int, groups, delay: float | None, layers, quotient_limit: int):
        from ._components import group_of_component

        self.w, self.groups = int(w), tuple(groups)
        self.parts = tuple(m for m, _ in self.groups)
        self.n = sum(m.n * count for m, count in self.groups)
        self.delay = delay
        self._group = group_of_component(self.groups)
        t = time.perf_counter()
        self.flows = tuple(_factor_flow(m, delay, layers, quotient_limit) for m in self.parts)
        self.seconds = time.perf_counter() - t  # the components' R and L*, before the stages that combine them

    def route(self) -> str:
        """The components' routes, for the reason."""
        return " and ".join(dict.fromkeys(f.route_name for f in self.flows))

    def _spread(self, per_group) -> np.ndarray:
        from ._components import spread

        return spread(per_group, self.w, self.groups, self.n)

    def limit_counts(self) -> np.ndarray:
        self._limits = [np.asarray(f.limit_counts_value, dtype=np.int64) for f in self.flows]
        return self._spread(self._limits)

    def depth(self) -> int:
        self._depths = [int(f.depth_value) for f in self.flows]
        return max(self._depths)

    def counts(self, num_layers: int) -> np.ndarray:
        return self._spread(
            [
                lim if num_layers >= d else np.asarray(f.counts(num_layers), dtype=np.int64)
                for f, lim, d in zip(self.flows, self._limits, self._depths)
            ]
        )

    def classes(self):
        per = [_factor_classes(f, m, lim) for f, m, lim in zip(self.flows, self.parts, self._limits)]
        # entries: the classes of component 0, then of component 1, ...; (component c, local class i)
        nums = np.array([per[g][0] for g in self._group], dtype=np.int64)
        self._offset = np.cumsum(nums) - nums  # the first entry of each component
        comp = np.repeat(np.arange(self.w, dtype=np.int64), nums)
        local = np.arange(comp.size, dtype=np.int64) - self._offset[comp]
        group = self._group[comp]
        sizes = np.empty(comp.size, dtype=np.int64)
        first = np.empty(comp.size, dtype=np.int64)
        reach = np.empty(comp.size, dtype=np.int64)
        for g, (_, sz, _, fi, ra) in enumerate(per):
            pick = group == g
            sizes[pick], first[pick], reach[pick] = (
                sz[local[pick]],
                comp[pick] + self.w * fi[local[pick]],
                ra[local[pick]],
            )
        self.perm = np.lexsort((first, reach))  # class number -> entry
        self.rank = np.empty(self.perm.size, dtype=np.int64)
        self.rank[self.perm] = np.arange(self.perm.size)
        self.num_classes = int(comp.size)
        self.sizes = sizes[self.perm]
        self._labels = [p[2] for p in per]
        return self.num_classes, self.sizes

    def order(self, quotient_limit: int):
        out = [f.order(quotient_limit) for f in self.flows]
        counts = [count for _, count in self.groups]
        not_computed = {}
        values = {}
        for key, at, combine in (
            ("depth", 0, max),
            ("width", 1, lambda v: sum(c * x for c, x in zip(counts, v))),
            ("num_hasse_edges", 2, lambda v: sum(c * x for c, x in zip(counts, v))),
        ):
            got = [o[at] for o in out]
            if any(v is None for v in got):
                why = next(o[4].get(key) for o in out if o[at] is None) or "not computed for a component"
                not_computed[key] = f"a component of the disjoint union: {why}"
                values[key] = None
            else:
                values[key] = int(combine(got))
        c = self.num_classes
        if c <= quotient_limit and all(o[3] is not None for o in out):
            from ..masks._runs import check_host_memory
            from .hasse import HasseDiagram

            # the two (C, C) arrays, their permuted copies and a block's index arrays (a review measured 5 C² bytes)
            check_host_memory(6.0 * c * c, f"the quotient order of C = {c} classes (four (C, C) arrays)", "mask")
            order = np.zeros((c, c), dtype=bool)
            cover = np.zeros((c, c), dtype=bool)
            for comp in range(self.w):
                g = int(self._group[comp])
                diag = out[g][3]
                block = self._offset[comp] + np.arange(diag._order.shape[0])
                ix = np.ix_(block, block)
                order[ix], cover[ix] = diag._order, diag._cover
            pick = np.ix_(self.perm, self.perm)
            order, cover = order[pick], cover[pick]
            from ._components import spread

            local = spread(self._labels, self.w, self.groups, self.n)  # each position's class in its component
            labels = self.rank[self._offset[np.arange(self.n) % self.w] + local]
            members = np.split(np.argsort(labels, kind="stable"), np.cumsum(self.sizes)[:-1])
            diagram = HasseDiagram.__new__(HasseDiagram)
            diagram._init(members, labels, self.n, order, cover)
            for key in ("depth", "width"):
                if values[key] is not None:
                    diagram.__dict__[key] = values[key]
            return diagram.depth, diagram.width, len(diagram.edges), diagram, {}
        return values["depth"], values["width"], values["num_hasse_edges"], None, not_computed


def _product_width(ca: int, da, wa, cb: int, db, wb) -> int | None:
    """Width of the product of two orders of `ca`, `cb` classes, depths `da`, `db` and widths `wa`, `wb` (None: not
    known), where it follows from the factors; None otherwise (a chain times a general order has no such formula).

    A one-class factor: the other's width. A factor of depth 1 is an antichain (no two of its classes comparable): the
    product is that many disjoint copies of the other order. Two chains of `a <= b` elements: the `a` chains
    `{(i, j): 0 <= j < b}`, one for each `i < a`, cover the grid, so no antichain is larger than `a`, and
    `{(i, a − 1 − i): i < a}` is an antichain of `a` elements.

    Source: (derived); R. P. Dilworth (1950), "A decomposition theorem for partially ordered sets", Ann. of Math.
    51(1), 161–166."""
    if ca == 1 or cb == 1:
        return wb if ca == 1 else wa
    if da == 1 and wb is not None:
        return ca * wb
    if db == 1 and wa is not None:
        return cb * wa
    if wa == 1 and wb == 1:
        return min(ca, cb)
    return None


def _factor_flow(m: IntervalMask, delay: float | None, layers, quotient_limit: int):
    """The flow of one factor of a Kronecker product, with ``R`` and ``L*`` computed, on the route ``"auto"`` takes
    for it (:func:`~hassejax.order.choose_route`, then the structured route's switches and refusals,
    :func:`~._route_rules.structured_or_dense`: a review found a factor squared until the structured route's own
    limit, 20 s before the refusal, where the whole mask took 1.3 s on the bit-packed route)."""
    from ._route_rules import structured_or_dense
    from .summary import _dense_flow, _dense_flow_bytes, choose_route

    def primed(flow, route):
        flow.route_name = route
        flow.limit_counts_value = flow.limit_counts()
        flow.depth_value = flow.depth()
        return flow

    route, _, intervals = choose_route(m, "auto")
    if route != "structured":
        return primed(_dense_flow(m, route, delay, layers, quotient_limit), route)
    return structured_or_dense(
        intervals,
        "auto",
        lambda: primed(_StructuredFlow(intervals, delay), "structured"),
        lambda why: primed(_dense_flow(intervals, "bitpacked", delay, layers, quotient_limit), "bitpacked"),
        dense_bytes=_dense_flow_bytes(intervals, layers, quotient_limit),
    )
