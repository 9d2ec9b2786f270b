"""Information flow of a mask at any length: ``R^(L)`` statistics, ``L*``, classes, depth, width, Hasse edges.

:func:`flow_summary` answers the first question of a mask designer, "after ``L`` layers,
which positions can each output depend on, and how many layers until the flow stops
growing?", at the lengths people train at (``n`` up to ``2**20`` and beyond), returning a
:class:`FlowSummary`. Masks given as :class:`~hassejax.masks.IntervalMask` (or dense masks
whose rows are a few runs of keys) take the structured route of
:mod:`hassejax.order._structured` (no ``n × n`` array anywhere); other dense masks take the
dense routes of :func:`hassejax.order.reachability`.

The result types :class:`FlowSummary` and :class:`ReachStats` live in
:mod:`hassejax.order.summary_types`, the two routes' stages in ``_summary_routes``; all are
importable from here.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import no_type_check

import numpy as np

from .._mask_checks import NestedMask, check_mask
from ..errors import MaskError, ParameterError
from ..masks._intervals import IntervalMask
from ._progress import check_progress, progress_bar
from ._summary_routes import _ComponentsFlow, _DenseFlow, _ProductFlow, _StructuredFlow
from .summary_types import QUOTIENT_LIMIT, FlowSummary, ReachStats, _stats

__all__ = ["FlowSummary", "ReachStats", "flow_summary", "choose_route", "ROUTES"]


#: Routes of :func:`flow_summary` (``"auto"`` picks one and says why in the result).
ROUTES = ("auto", "structured", "matmul", "bitpacked")

#: Dense masks with at most this many key runs in every row go the structured route (runs
#: multiply under products; beyond a few a row the bit-packed rows are cheaper).
STRUCTURED_MAX_RUNS = 4

#: Dense input longer than this is not scanned for runs (n² entries): build it as an IntervalMask.
DENSE_SCAN_LIMIT = 65536


def _check_layers(layers) -> tuple[int, ...]:
    """`layers` as a tuple of Python ints: an int (NumPy's too), a sequence of them or a 1-D integer NumPy array (a
    0-d one as its int); bools and floats refused by name, in an array too (its entries are checked one by one)."""
    if isinstance(layers, np.ndarray) and layers.ndim == 0:
        layers = layers[()]  # its NumPy scalar, checked as one
    if isinstance(layers, (int, np.integer)) and not isinstance(layers, (bool, np.bool_)):
        layers = (layers,)
    if isinstance(layers, np.ndarray) and layers.ndim != 1:
        raise ParameterError(
            f"`layers` must be a sequence of positive ints (layer counts L) or a 1-D integer array; got an array of "
            f"shape {layers.shape}."
        )
    if not isinstance(layers, (Sequence, np.ndarray)) or isinstance(layers, str):
        raise ParameterError(f"`layers` must be a sequence of positive ints (layer counts L); got {layers!r}.")
    out = []
    for value in layers:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ParameterError(
                f"`layers` must hold positive ints (layer counts L >= 1); got {value!r} in {layers!r}."
            )
        out.append(int(value))
    return tuple(out)


def choose_route(mask, method: str = "auto") -> tuple[str, str, IntervalMask | None]:
    """The closure route for `mask` and the reason: ``(route, reason, interval_form_or_None)``.

    ``"structured"`` for a mask (an :class:`~hassejax.masks.IntervalMask` or a dense array) whose rows have at most
    :data:`STRUCTURED_MAX_RUNS` key runs, and for an :class:`~hassejax.masks.IntervalMask` with more that is too long
    for the dense routes; otherwise the dense route that :func:`hassejax.order.reachability` picks by its cost model
    (``"matmul"`` or ``"bitpacked"``; a fresh user read "structured for an IntervalMask" and got ``"matmul"``). An explicit `method` is honoured (a dense route for an
    :class:`IntervalMask` first builds the dense array, after a memory check).

    **Arguments:** `mask`: an :class:`~hassejax.masks.IntervalMask`, or a concrete Boolean `(n, n)` array (nested
    lists of bools too), checked as :func:`flow_summary` checks it on every route; `method`: one of :data:`ROUTES`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for an unknown `method`;
    :class:`~hassejax.errors.MaskError` for a mask that is not a concrete square Boolean `(n, n)` array or an
    :class:`~hassejax.masks.IntervalMask`, or for a dense array of more than ``DENSE_SCAN_LIMIT`` = 65536
    positions on a route that scans its rows (``"auto"``, ``"structured"``; build an ``IntervalMask`` instead).

    Source: (derived); DESIGN.md "Principles" (large sparse masks may take a faster exact route, chosen
    automatically) and "Data flow" (the closure route chosen once); spec hasse.md §1.2–1.3 (the closure).

    **Example:** a dense causal mask has one key run a row and goes the structured route (its interval
    form returned); a dilated window with 6 runs in a row goes a dense route (which one depends on the backend's
    cost model); an explicit `method` is honoured:

    ```python
    >>> import numpy as np
    >>> from hassejax.masks import dilated
    >>> from hassejax.order import choose_route
    >>> route, reason, intervals = choose_route(np.tril(np.ones((8, 8), bool)))
    >>> route, reason, intervals.row(3)
    ('structured', 'interval rows, at most 1 key run(s) a row', [(0, 4)])
    >>> m = np.asarray(dilated(12, window=12, dilation=2))
    >>> route, reason, intervals = choose_route(m)
    >>> route in ("matmul", "bitpacked"), reason.split(":")[0], intervals
    (True, '6 key runs in some row (> 4)', None)
    >>> choose_route(m, "bitpacked")
    ('bitpacked', 'requested', None)

    ```
    """
    if not isinstance(method, str) or method not in ROUTES:
        raise ParameterError(f"`method` must be one of {ROUTES}; got {method!r}.")
    from ._route_rules import _prefer_dense

    if isinstance(mask, IntervalMask):
        if method == "structured" or (method == "auto" and not _prefer_dense(mask)):
            return "structured", f"interval rows, at most {mask.num_runs} key run(s) a row", mask
        if method != "auto":
            return method, "requested", None
        intervals = mask
    else:
        mask = check_mask(mask, "mask", batched=False, concrete="choose_route")  # on every route, nested lists taken
        if method in ("matmul", "bitpacked"):
            return method, "requested", None
        n = mask.shape[-1]
        if n > DENSE_SCAN_LIMIT:
            raise MaskError(
                f"`mask` is a dense ({n}, {n}) array: too long to scan for its key runs ({float(n) * n:.2g} entries, "
                f"more than DENSE_SCAN_LIMIT = {DENSE_SCAN_LIMIT} positions); build it as an IntervalMask "
                "(hassejax.masks.structured, or from_spec(..., form='intervals'))."
            )
        intervals = IntervalMask.from_dense(np.asarray(mask), name="mask")
    if method == "structured" or intervals.num_runs <= STRUCTURED_MAX_RUNS:
        why = "requested" if method == "structured" else f"interval rows, at most {intervals.num_runs} key run(s) a row"
        return "structured", why, intervals
    from ._routes import _closure_costs

    n = intervals.n
    matmul, bitpacked = _closure_costs(n, intervals.nnz())
    route = "bitpacked" if bitpacked < matmul else "matmul"
    other = "matmul" if route == "bitpacked" else "bitpacked"
    why = (
        f"{intervals.num_runs} key runs in some row (> {STRUCTURED_MAX_RUNS}): unstructured; the closure R estimated "
        f"{min(matmul, bitpacked):.2g} s {route} vs {max(matmul, bitpacked):.2g} s {other} (L*'s search, the classes and the "
        "order come on top: several times R for a deep L*)"
    )
    return route, why, None


def flow_summary(
    mask: IntervalMask | np.ndarray | Sequence[IntervalMask] | NestedMask,
    layers: Sequence[int | np.integer] | int | np.integer | np.ndarray = (),
    *,
    method: str = "auto",
    quotient_limit: int = QUOTIENT_LIMIT,
    head_axis: int | None = None,
    progress: bool | int | float = False,
) -> FlowSummary:
    """Exact information flow of one mask at any length, without ``n × n`` arrays on the structured route.

    Computes the limit ``R``, the exact convergence depth ``L*``, the reach after each
    requested number of layers, the classes of mutually reachable positions with their sizes,
    and the depth (longest chain), width (largest antichain, Dilworth) and number of Hasse
    edges of the quotient order; the :class:`~hassejax.order.HasseDiagram` when the quotient
    has at most `quotient_limit` classes.

    On the structured route (spec hasse.md §1, (derived)): products of interval rows by sparse
    tables, ``O(n · k log n)`` each for ``k`` runs a row; ``R`` by repeated squaring and ``L*``
    by a binary search over the stored powers (``2 ceil(log2 L*)`` products in all); classes
    are the groups of equal rows of ``R``; depth and width by longest monotone subsequences
    when the rows of ``R`` are single runs; when classes are runs of positions, the Hasse edges
    as the strict down-sets less their square (one product) and the depth as a longest path
    over those edges (``O(C + edges)``; by powers of the strict down-sets when the edges are
    more than a few a class); otherwise, on a quotient of at most
    `quotient_limit` classes, the dense quotient order. What could not be computed is reported
    in ``not_computed`` with the reason, never guessed.

    On the product route (``route == "product"``, under ``method="auto"`` for an
    :class:`~hassejax.masks.IntervalMask` whose rows have several runs): a mask that is a Kronecker
    product ``A = P ⊗ C`` on an ``H × W`` grid (a 2-D neighbourhood such as ``natten_2d``; a dilated
    window whose `n` is a multiple of its stride, ``window ⊗ I``) has ``A^L = P^L ⊗ C^L``, so every
    quantity comes from the two factors' own flows: row counts multiply, ``L* = max(L*_P, L*_C)``,
    classes are pairs of classes, the quotient is the product order (depth ``depth_P + depth_C − 1``,
    covering pairs ``E_P C_C + C_P E_C``; the width when one factor has one class, is an antichain
    (``a · width``) or both are chains (``min(a, b)``), else from the diagram when it is built). The
    factors are found exactly (:mod:`hassejax.order._product`); the powers of such masks have runs
    that multiply on the structured route (``natten_2d(181, 181, 7, 7)``: 45–58 s on the bit-packed
    route, now 0.3 s; ``natten_2d(1024, 1024, 3, 3)``, n = 2^20: refused, now about 1 s).

    On the components route (``route == "components"``, under ``method="auto"``): a dilated window whose `n` is no
    multiple of its stride `d` is the disjoint union of its `d` residue classes (position `q` in class ``q mod d``),
    each a band over ``ceil((n − c) / d)`` positions (two lengths), which its constructor records
    (:mod:`hassejax.order._components`): ``A^L`` is the union of the bands' powers, so row counts are the bands',
    ``L*`` the largest, the classes the bands' classes, and the quotient the disjoint union of their orders (depth
    the largest, width and covering pairs the sums). ``dilated(n=100000, window=300, dilation=3)`` (201 runs a
    row): refused before (the structured route's squarings, 68 GiB on the bit-packed route), now 0.45 s.

    **Arguments:**

    - `mask`: an :class:`~hassejax.masks.IntervalMask`, or a Boolean NumPy/JAX array of
      shape `(n, n)` (row = query, column = key, True = may attend), or nested lists of bools of
      that shape (checked as :func:`hassejax.order.reachability` checks its `mask`). The diagonal is implied
      (``A = M | I``, spec §1.1).
    - `layers`: the layer counts ``L`` whose reach is reported (e.g. ``(1, 2, 4, 8)``): an int, a sequence of ints
      or a 1-D integer NumPy array (NumPy integers count as ints; bools and floats are refused).
    - `method`: ``"auto"`` (see :func:`choose_route`), ``"structured"``, ``"matmul"`` or
      ``"bitpacked"``.
    - `quotient_limit`: build the Hasse diagram (and the dense quotient order) only up to this
      many classes.
    - `head_axis`: ``None`` (default), or ``0`` (equivalently ``-3``) for `mask` given as the
      masks of one layer's heads, a Boolean `(heads, n, n)` array or a tuple of
      :class:`~hassejax.masks.IntervalMask`: they are OR-ed first
      (:func:`hassejax.order.closure.heads_union`; the layer's adjacency is
      ``(M_1 | … | M_H) | I``, spec §1.1).
    - `progress`: ``False`` (default: silent), ``True`` for a tqdm progress bar on stderr for
      each stage that loops (``R``, ``L*``, each ``R^(L)`` below ``L*``), or a number of seconds
      ``d >= 0``: a stage's bar shows once it has run ``d`` seconds (``hassejax analyze`` uses
      2 on a terminal). The bars count products of interval rows on the structured route, as
      :func:`hassejax.order.reachability` and :func:`hassejax.order.convergence_depth` on the
      matmul route, and the levels of the one search that gives ``R``, ``L*`` and every ``R^(L)``
      on the bit-packed route ("R and L* (bit-packed)"); the steps without iterations (choosing the route with a dense
      conversion, the classes, the quotient order) show their elapsed time once they have run
      1 s (or ``d``).

    **Returns:** a :class:`FlowSummary`.

    **Raises:** :class:`~hassejax.errors.MaskError` for a mask that is not square Boolean
    `(n, n)` (or `(heads, n, n)` with `head_axis`), or a traced one (it runs on the host: call it outside
    ``jit``/``vmap``); :class:`~hassejax.errors.ParameterError`
    for bad `layers`, `method`, `quotient_limit`, `head_axis` or `progress`; :class:`~hassejax.errors.MemoryBudgetError`
    (naming `mask`) when a step would not fit in memory, estimated before allocating: on a dense route for the whole
    call at once (the dense mask, its closure, L*, the classes and a quotient of up to `quotient_limit` classes,
    at most :data:`QUOTIENT_LIMIT` up front: a larger quotient is checked once its classes are counted).

    **Example:**

    ```python
    >>> from hassejax.masks import from_spec
    >>> from hassejax.order import flow_summary
    >>> m = from_spec("sliding_window(n=131072, left=4096) | attention_sinks(n=131072, num=4)", form="intervals")
    >>> s = flow_summary(m, layers=(1, 8))
    >>> s.route, s.convergence_depth, s.num_classes, s.depth         # L* = ceil((n - 1 - 4) / 4096)
    ('structured', 32, 131072, 131072)
    >>> [r.max for r in s.reach]
    [4101, 32773]
    >>> heads = (from_spec("sliding_window(n=131072, left=4096)", form="intervals"),
    ...          from_spec("attention_sinks(n=131072, num=4)", form="intervals"))
    >>> t = flow_summary(heads, layers=(1, 8), head_axis=0)           # the heads' union is m
    >>> t.convergence_depth, [r.max for r in t.reach]
    (32, [4101, 32773])

    ```

    Source: Li & Guo, arXiv:2606.09951 (paper); spec hasse.md §1.2–1.7; the structured route
    is (derived), DESIGN.md "Scale".
    """
    start = time.perf_counter()  # the heads' union and the checks count under "route" too (a review)
    layers = _check_layers(layers)
    delay = check_progress(progress)
    if isinstance(quotient_limit, bool) or not isinstance(quotient_limit, (int, np.integer)) or quotient_limit < 1:
        raise ParameterError(f"`quotient_limit` must be a positive int; got {quotient_limit!r}.")
    if head_axis is not None:
        from .heads import _heads_union

        mask = _heads_union(mask, head_axis, "mask", batched=False)
    if not isinstance(mask, IntervalMask):
        if isinstance(mask, (list, tuple)) and any(isinstance(m, IntervalMask) for m in mask):
            raise MaskError(  # not densified into a (heads, n, n) array, which is then refused
                f"`mask` must be an IntervalMask or a Boolean array of shape (n, n); got a {type(mask).__name__} of "
                "IntervalMask: for the heads of one layer pass head_axis=0 (their union is analysed)."
            )
        # The checks of reachability, convergence_depth and HasseDiagram.from_mask (nested lists accepted), no JAX.
        mask = check_mask(mask, "mask", batched=False, concrete="flow_summary")
    summary = _routed_summary(mask, method, delay, layers, int(quotient_limit))
    # a fresh user: a failed Kronecker factor search (~3 s at n = 2^20) and the route choice were in no stage
    staged = sum(summary.seconds.values())
    summary.seconds.update(route=max(0.0, time.perf_counter() - start - staged))
    return summary


def _routed_summary(mask, method: str, delay: float | None, layers: tuple[int, ...], quotient_limit: int):
    """Choose the route for the checked `mask` and run its stages (:func:`flow_summary`)."""
    if isinstance(mask, IntervalMask):
        from ._route_rules import product_first

        answer = product_first(mask, method, lambda: _factored_summary(mask, delay, layers, int(quotient_limit)))
        if answer is not None:
            return answer
    with progress_bar(_step_delay(delay), "choosing the route", "", tick=True):
        route, reason, intervals = choose_route(mask, method)
        if route != "structured":
            flow = _dense_flow(mask, route, delay, layers, int(quotient_limit))
    if route != "structured":
        return _summarize(flow, route, reason, layers, int(quotient_limit))
    from ._route_rules import structured_or_dense

    @no_type_check  # a closure made per call: not re-decorated by the test suite's type-check hook each time (see pyproject)
    def dense(why):
        flow = _dense_flow(intervals, "bitpacked", delay, layers, int(quotient_limit))
        return _summarize(flow, "bitpacked", why, layers, int(quotient_limit))

    return structured_or_dense(
        intervals,
        method,
        lambda: _summarize(_StructuredFlow(intervals, delay), route, reason, layers, int(quotient_limit)),
        dense,
        dense_bytes=_dense_flow_bytes(intervals, layers, int(quotient_limit), isinstance(mask, IntervalMask)),
        auto_takes_record=True,
    )


def _dense_flow_bytes(mask: IntervalMask, layers: tuple[int, ...], quotient_limit: int, densify: bool = True):
    """The bytes :func:`_dense_flow`'s check counts for `mask` on the bit-packed route, as a function of `n` (for a
    structured refusal's advice: what ``method="bitpacked"`` asks for, the dense copy counted when the caller's
    mask is an IntervalMask, `densify`; the nonzeros counted only then; no JAX)."""

    def need(n: int) -> int:
        from ._summary_memory import _flow_summary_bytes

        return _flow_summary_bytes(n, mask.with_diagonal().nnz(), "bitpacked", layers, quotient_limit, densify)[0]

    return need


def _factored_summary(mask: IntervalMask, delay: float | None, layers: tuple[int, ...], quotient_limit: int):
    """The summary on the product route, or None when `mask` is no Kronecker product (:mod:`._product`); on the
    components route when its constructor recorded interleaved components (:mod:`._components`)."""
    from ._components import components
    from ._product import kron_factors

    recorded = components(mask)
    if recorded is not None:
        flow = _ComponentsFlow(*recorded, delay, layers, quotient_limit)
        sizes = sorted({m.n for m, _ in recorded[1]}, reverse=True)
        why = (
            f"a disjoint union of {recorded[0]} interleaved components (position q in component q mod {recorded[0]}) "
            f"of {' and '.join(map(str, sizes))} positions, whose powers' runs would multiply on the structured "
            f"route: the components' flows ({flow.route()})"
        )
        summary = _summarize(flow, "components", why, layers, quotient_limit)
        summary.seconds["factors"] = flow.seconds  # the components' R and L*
        return summary
    t = time.perf_counter()
    with progress_bar(_step_delay(delay), "Kronecker factors", "", tick=True):
        factors = kron_factors(mask.with_diagonal())
    if factors is None:
        return None
    searched = time.perf_counter() - t
    flow = _ProductFlow(*factors, delay, layers, quotient_limit)
    why = (
        f"a Kronecker product P ⊗ C on a {factors[0].n} × {factors[1].n} grid (A^L = P^L ⊗ C^L), whose powers' runs "
        f"would multiply on the structured route: the factors' flows ({flow.route()})"
    )
    summary = _summarize(flow, "product", why, layers, quotient_limit)
    summary.seconds["factors"] = searched + flow.seconds  # the search for P and C, and their R and L*
    return summary


def _dense_flow(mask, route: str, delay: float | None, layers: tuple[int, ...], quotient_limit: int) -> _DenseFlow:
    """The stages of a dense route, after a check of the whole call's memory (every stage: the closure, L*, the
    classes, the quotient order) that names `mask`, before an IntervalMask is densified."""
    from ._routes import _check_flow_summary_memory

    if isinstance(mask, IntervalMask):
        from ..masks._intervals import DENSE_HINT

        nnz = mask.with_diagonal().nnz()
        _check_flow_summary_memory(mask.n, nnz, route, layers, quotient_limit, True, DENSE_HINT)
        return _DenseFlow(mask.to_dense(name="mask"), route, delay, layers)
    dense = np.asarray(mask)
    n = dense.shape[-1]
    # from the shape alone first (the fewest nonzeros: a huge zero-stride view is refused without a scan), then,
    # as the bit-packed route's memory grows with them, the nonzeros of M | I (at most those of M and the diagonal)
    _check_flow_summary_memory(n, n, route, layers, quotient_limit, False)
    if route == "bitpacked":
        _check_flow_summary_memory(n, int(np.count_nonzero(dense)) + n, route, layers, quotient_limit, False)
    return _DenseFlow(dense, route, delay, layers)


def _step_delay(delay: float | None) -> float | None:
    """The delay of a step without iterations: its ticking bar shows once it has run 1 s or `delay`."""
    return None if delay is None else max(delay, 1.0)


def _summarize(flow, route: str, reason: str, layers: tuple[int, ...], quotient_limit: int) -> FlowSummary:
    """Run the stages of one route, timing each, and collect the :class:`FlowSummary`."""
    seconds: dict[str, float] = {}

    @no_type_check  # a closure made per call: not re-decorated by the test suite's type-check hook each time (see pyproject)
    def stage(name, fn, *args, bar: str | None = None):
        t = time.perf_counter()
        # the stages that loop have their own bars; the others a ticking one (elapsed time)
        with progress_bar(_step_delay(flow.delay) if bar else None, f"{bar} ({route})", "", tick=True):
            out = fn(*args)
        seconds[name] = time.perf_counter() - t
        return out

    limit_counts = stage("limit", flow.limit_counts)
    lstar = stage("convergence_depth", flow.depth)
    limit_total = int(limit_counts.sum())

    @no_type_check  # a closure made per call: not re-decorated by the test suite's type-check hook each time (see pyproject)
    def reach_stats():
        return [
            _stats(limit_counts if num >= lstar else flow.counts(num), limit_total, num, num >= lstar) for num in layers
        ]

    reach = stage("layers", reach_stats)
    num_classes, sizes = stage("classes", flow.classes, bar="classes")
    depth, width, edges, diagram, not_computed = stage("order", flow.order, quotient_limit, bar="quotient order")
    return FlowSummary(
        n=flow.n,
        route=route,
        route_reason=reason,
        layers=layers,
        reach=tuple(reach),
        limit=_stats(limit_counts, limit_total, None, True),
        convergence_depth=lstar,
        num_classes=num_classes,
        class_sizes=sizes,
        depth=depth,
        width=width,
        num_hasse_edges=edges,
        not_computed=not_computed,
        seconds=seconds,
        quotient_limit=quotient_limit,
        _diagram=diagram,
    )
