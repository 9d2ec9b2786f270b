"""The results of :func:`hassejax.order.flow_summary`: :class:`FlowSummary` and :class:`ReachStats`.

Frozen dataclasses with the numbers a mask designer reads (keys reached per query after ``L``
layers, ``L*``, classes, depth, width, Hasse edges) and a text report; spec hasse.md §1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import MaskError

__all__ = ["FlowSummary", "ReachStats", "QUOTIENT_LIMIT"]


#: Largest quotient (number of classes) for which the full Hasse diagram is built.
QUOTIENT_LIMIT = 2048


@dataclass(frozen=True)
class ReachStats:
    """Keys reached per query after ``num_layers`` layers (``None``: the limit ``R``).

    Fields: `num_layers`; `pairs`: dependent pairs ``(i, j)`` of ``R^(L)`` (its True entries);
    `min`, `median`, `max`, `mean` of the row counts of ``R^(L)``;
    `fraction_of_limit`: dependent pairs of ``R^(L)`` over those of ``R`` (1.0 at the limit);
    `limit_reached`: ``R^(L) = R``.

    Source: (derived), a summary of ``R^(L)`` and of its limit ``R`` (spec hasse.md §1.2–1.3).

    **Example:** a causal window of two previous keys on 8 positions: one layer reaches
    `1 + 2 + 3 · 6 = 21` of the 36 pairs of the limit (the causal mask):

    ```python
    >>> from hassejax.masks import structured
    >>> from hassejax.order import flow_summary
    >>> r = flow_summary(structured.sliding_window(8, left=2), layers=1).reach[0]
    >>> r.num_layers, r.pairs, r.min, r.max, r.limit_reached
    (1, 21, 1, 3, False)
    >>> r.fraction_of_limit     # 21 / 36  # doctest: +ELLIPSIS
    0.5833...

    ```
    """

    num_layers: int | None
    pairs: int
    min: int
    median: float
    max: int
    mean: float
    fraction_of_limit: float
    limit_reached: bool

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict of the fields."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class FlowSummary:
    """The information flow of one mask (spec hasse.md §1), as computed by :func:`flow_summary`.

    **Fields:**

    - `n`: positions.
    - `route`, `route_reason`: the closure route taken and why (``"structured"``, ``"bitpacked"``, ``"matmul"``, or
      ``"product"``: the factors of a Kronecker product, ``"components"``: the components of a disjoint union,
      :func:`~hassejax.order.flow_summary`).
    - `layers`: the requested ``L`` values; `reach`: one :class:`ReachStats` each; `limit`:
      :class:`ReachStats` of ``R``.
    - `convergence_depth`: ``L*``, the smallest ``L`` with ``R^(L) = R`` (exact).
    - `num_classes`: classes of mutually reachable positions; `class_sizes`: int64 `(C,)`,
      members per class, classes numbered as :func:`hassejax.order.classes`.
    - `depth`: classes in a longest chain; `width`: classes in a largest antichain;
      `num_hasse_edges`: covering pairs of the quotient order. Each is ``None`` when not
      computed, with the reason in `not_computed`.
    - `quotient_limit`: the largest quotient for which the diagram was built.
    - `seconds`: wall-clock seconds per stage (``"limit"``, ``"convergence_depth"``,
      ``"layers"``, ``"classes"``, ``"order"``; on the bit-packed route one level search gives ``R``, ``L*`` and
      the ``R^(L)`` of `layers`, all counted under ``"limit"``; on the product route ``"factors"``: the search for
      the factors and their own ``R`` and ``L*``, before the stages that combine them; on the components route
      ``"factors"``: the components' own ``R`` and ``L*``; ``"route"``: the rest of the call: the checks, the
      heads' union, choosing the route (a Kronecker factor search that found none, densifying an IntervalMask for a
      dense route, a structured attempt that ``method="auto"`` gave up for a dense route)).

    :meth:`diagram` returns the :class:`~hassejax.order.HasseDiagram` when the quotient has at
    most :data:`QUOTIENT_LIMIT` classes.

    **Example:** a causal window of two previous keys on 8 positions converges in
    ``ceil(7 / 2) = 4`` layers to the causal mask, a chain of 8 classes:

    ```python
    >>> from hassejax.masks import structured
    >>> from hassejax.order import flow_summary
    >>> s = flow_summary(structured.sliding_window(8, left=2), layers=(1, 2))
    >>> s.route, s.convergence_depth, s.num_classes, s.depth, s.width, s.num_hasse_edges
    ('structured', 4, 8, 8, 1, 7)
    >>> [r.pairs for r in s.reach], s.limit.pairs
    ([21, 30], 36)

    ```

    Source: Li & Guo, arXiv:2606.09951 (paper); spec hasse.md §1.2–1.7.
    """

    n: int
    route: str
    route_reason: str
    layers: tuple[int, ...]
    reach: tuple[ReachStats, ...]
    limit: ReachStats
    convergence_depth: int
    num_classes: int
    class_sizes: np.ndarray
    depth: int | None
    width: int | None
    num_hasse_edges: int | None
    not_computed: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    quotient_limit: int = QUOTIENT_LIMIT
    _diagram: Any = field(default=None, repr=False, compare=False)

    def diagram(self):
        """The :class:`~hassejax.order.HasseDiagram` of the quotient.

        **Raises:** :class:`~hassejax.errors.MaskError` when the quotient has more than
        :data:`QUOTIENT_LIMIT` classes (too many to build and draw as a graph; the summary's
        counts stand in for it).
        """
        if self._diagram is None:
            known = [k for k in ("depth", "width", "num_hasse_edges") if getattr(self, k) is not None]
            have = (
                f"The summary has its {', '.join(known)}"
                + (f" (not {', '.join(self.not_computed)})" if self.not_computed else "")
                if known
                else "The summary has no depth, width or number of edges either (`not_computed` says why)"
            )  # a fresh user: on the dense route all three were None, and the message said they were in the summary
            raise MaskError(
                f"`mask` has {self.num_classes} classes, more than quotient_limit = {self.quotient_limit} (default "
                f"QUOTIENT_LIMIT = {QUOTIENT_LIMIT}): the Hasse diagram was not built (too large to draw). {have}; pass "
                "a larger quotient_limit to flow_summary (`hassejax analyze --quotient-limit`) to build it."
            )
        return self._diagram

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (class sizes summarised as min / median / max and a histogram).

        ``class_sizes["histogram"]`` maps every distinct class size (a decimal string) to the number of classes of
        that size, all of them: its counts sum to `num_classes`. It stays small at any length, as ``d`` distinct sizes
        cover at least ``1 + 2 + … + d`` positions (``d <= 1448`` at ``n = 2**20``).
        """
        sizes = self.class_sizes
        values, counts = np.unique(sizes, return_counts=True)
        return {
            "n": self.n,
            "route": self.route,
            "route_reason": self.route_reason,
            "convergence_depth": self.convergence_depth,
            "reach": [r.to_dict() for r in self.reach],
            "limit": self.limit.to_dict(),
            "num_classes": self.num_classes,
            "class_sizes": {
                "min": int(sizes.min()),
                "median": float(np.median(sizes)),
                "max": int(sizes.max()),
                "histogram": {str(int(v)): int(c) for v, c in zip(values, counts, strict=True)},
            },
            "depth": self.depth,
            "width": self.width,
            "num_hasse_edges": self.num_hasse_edges,
            "not_computed": dict(self.not_computed),
            "seconds": dict(self.seconds),
        }

    def lines(self) -> list[str]:
        """Human-readable lines (what ``hassejax analyze`` prints)."""
        sizes = self.class_sizes
        out = [
            f"n (positions): {self.n}",
            f"route: {self.route} ({self.route_reason})",
            f"convergence depth L*: {self.convergence_depth}",
        ]
        for r in self.reach:
            if r.limit_reached:
                status = f"limit reached (R^({r.num_layers}) = R)"
            else:
                status = (
                    f"limit not reached (R^({r.num_layers}) misses {self.limit.pairs - r.pairs} of "
                    f"{self.limit.pairs} dependent pairs of R)"
                )
            out.append(
                f"layers L = {r.num_layers}: {status}; keys per query {_spread(r)}, "
                f"{100 * r.fraction_of_limit:.2f}% of the limit"
            )
        out.append(f"limit R: keys per query {_spread(self.limit)}; {self.limit.pairs} dependent pairs")
        out.append(
            f"classes: {self.num_classes} (sizes min {int(sizes.min())} / median {_number(np.median(sizes))} / "
            f"max {int(sizes.max())})"
        )
        for name, value, what in (
            ("depth", self.depth, "longest chain of classes"),
            ("width", self.width, "largest antichain of classes"),
            ("num_hasse_edges", self.num_hasse_edges, "covering pairs"),
        ):
            label = "Hasse edges" if name == "num_hasse_edges" else name
            text = str(value) if value is not None else f"not computed ({self.not_computed[name]})"
            out.append(f"{label} ({what}): {text}")
        return out


def _number(x: float) -> str:
    """An exact integer as one (no exponent at any size), else the float."""
    return str(int(x)) if float(x).is_integer() else str(x)


def _spread(r: ReachStats) -> str:
    return f"min {r.min} / median {_number(r.median)} / max {r.max}"


def _stats(counts: np.ndarray, limit_total: int, num_layers: int | None, reached: bool) -> ReachStats:
    total = int(counts.sum())
    return ReachStats(
        num_layers=num_layers,
        pairs=total,
        min=int(counts.min()),
        median=float(np.median(counts)),
        max=int(counts.max()),
        mean=float(counts.mean()),
        fraction_of_limit=total / limit_total if limit_total else 1.0,
        limit_reached=reached,
    )
