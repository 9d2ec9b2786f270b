"""The stages of :func:`hassejax.order.flow_summary` on each route (private).

:class:`_StructuredFlow` works on an :class:`~hassejax.masks.IntervalMask` (no ``n × n`` array),
:class:`_DenseFlow` on a Boolean ``(n, n)`` array (``"matmul"`` or ``"bitpacked"``); both give
the limit's row counts, ``L*``, per-``L`` counts, the classes and the quotient order.
"""

from __future__ import annotations

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
            chain_depth,
            covers_count,
            interval_depth_width,
            quotient_matrix,
            strict_down_sets,
        )

        r, cls = self.limit, self.cls
        if cls.num_classes <= quotient_limit:
            diagram = _diagram_from_quotient(quotient_matrix(r, cls), cls, self.n)
            return diagram.depth, diagram.width, len(diagram.edges), diagram, {}
        depth = width = edges = None
        if r.num_runs == 1:
            depth, width = interval_depth_width(r, cls)
        if cls.contiguous:
            down = strict_down_sets(r, cls)
            edges = covers_count(r, cls, down)
            if depth is None:
                depth = chain_depth(down)
        big = f"{cls.num_classes} classes (> quotient_limit = {quotient_limit})"
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


class _DenseFlow:
    """The dense routes' stages (``"matmul"`` or ``"bitpacked"``) on a Boolean ``(n, n)`` array."""

    def __init__(self, dense: np.ndarray, method: str, delay: float | None = None):
        self.n = dense.shape[-1]
        self.dense = dense
        self.method = method
        self.delay = delay
        self.progress = False if delay is None else delay  # the `progress` of the closure functions

    def limit_counts(self) -> np.ndarray:
        from .reach import reachability

        self.limit = np.asarray(reachability(self.dense, method=self.method, progress=self.progress))
        return self.limit.sum(axis=1)

    def depth(self) -> int:
        from .depth import convergence_depth

        return int(convergence_depth(self.dense, method=self.method, progress=self.progress))

    def counts(self, num_layers: int) -> np.ndarray:
        from .reach import reachability

        r = reachability(self.dense, num_layers, method=self.method, progress=self.progress)
        return np.asarray(r).sum(axis=1)

    def classes(self):
        from .poset import classes

        labels, c = classes(self.limit, check=False)
        self.num_classes = c
        return c, np.bincount(np.asarray(labels), minlength=c).astype(np.int64)

    def order(self, quotient_limit: int):
        from .hasse import HasseDiagram

        if self.num_classes <= quotient_limit:
            diagram = HasseDiagram.from_reachability(self.limit, check=False)
            return diagram.depth, diagram.width, len(diagram.edges), diagram, {}
        why = f"{self.num_classes} classes (> quotient_limit = {quotient_limit}) on the dense route"
        return None, None, None, None, {"depth": why, "width": why, "num_hasse_edges": why}


def _diagram_from_quotient(order: np.ndarray, cls, n: int):
    from ._poset_host import covers
    from .hasse import HasseDiagram

    cover = covers(np.asarray(order, dtype=bool))  # NumPy: the structured route starts no JAX
    members = np.split(np.argsort(cls.labels, kind="stable"), np.cumsum(cls.sizes)[:-1])
    diagram = HasseDiagram.__new__(HasseDiagram)
    diagram._init(members, cls.labels, n, order, cover)
    return diagram
