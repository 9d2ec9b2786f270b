"""Which masks take the structured route under ``method="auto"`` (private; imports no JAX).

The rules of :mod:`hassejax.order._routes` that :func:`hassejax.order.flow_summary` needs on
its structured route, which starts no JAX; :mod:`hassejax.order._routes` re-exports them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np

from ..masks._intervals import IntervalMask

# ``method="auto"``: concrete dense masks at least this long whose rows are at most
# ``_STRUCTURED_MAX_RUNS`` runs of keys take the structured route.
_STRUCTURED_MIN_N = 1024
_STRUCTURED_MAX_RUNS = 4


# An IntervalMask with more runs a row than that, up to this n, takes the dense bit-packed routes
# under ``method="auto"``: runs multiply under products (a dilated window's k runs become k² …),
# while the packed rows stay n/64 words.
_DENSE_FALLBACK_N = 16384

# Above `_DENSE_FALLBACK_N` and up to this n, ``method="auto"`` tries the structured route at its own limit (and
# the growing one, :func:`growth_limit`) and goes bit-packed when a product outgrows it (a dilated window,
# n = 20000: refused after 23 s of squarings, where the bit-packed route then answers in about 20 s more); beyond
# it the refusal stands (the bit-packed closure costs n³/64 word operations: an hour at n = 131072).
_DENSE_RESCUE_N = 32768


def _prefer_dense(m: IntervalMask) -> bool:
    """True for an interval mask with many runs a row that is short enough for the dense routes, unless its first
    product answers at once (:func:`_squares_to_full`)."""
    return m.num_runs > _STRUCTURED_MAX_RUNS and m.n <= _DENSE_FALLBACK_N and not _squares_to_full(m)


def _squares_to_full(m: IntervalMask) -> bool:
    """True when every row of ``A = M | I`` is full or holds the key of a full row, so that ``A²`` is full and the
    structured route answers from its first product without merging a run (:func:`~._structured.compose`): Longformer's
    global tokens (``global_sliding(16384, 64, ...)`` with 17 isolated global positions, 18 runs a row, took the
    bit-packed route in 5.45 s where the structured one answers in 0.02 s, 0.4 s on a first call, a review). O(n · runs) of NumPy."""
    from ._structured import _rows_to_merge

    a = m.with_diagonal()
    starts, _, short = _rows_to_merge(a, a)
    return short is not None and (starts is None or starts.shape[0] == 0)


_FLOPS = {"cpu": 1.0e11, "gpu": 1.0e14, "tpu": 1.0e14}
"""Float operations a second of a dense product on each backend (the route estimates of :mod:`._routes`)."""
_MATMUL_OVERHEAD_S = 5e-5

# The bit-packed route's costs (seconds): per edge, per propagation batch (at most n of them), per output entry, per
# packed word of a round, and fixed; calibrated on a 2-core x86 CPU (benchmarks/closure.py). Here (JAX-free) for
# :func:`growth_limit`; :mod:`._routes`' cost model re-exports them.
_BP_PER_EDGE_S = 4e-8
_BP_PER_BATCH_S = 3e-5
_BP_PER_ENTRY_S = 1.5e-9
_BP_PER_WORD_S = 1e-9
_BP_OVERHEAD_S = 3e-4


def bitpacked_closure_seconds(n: int, nnz: int | float) -> float:
    """Estimated seconds of the bit-packed closure of one mask of `n` positions and `nnz` nonzeros (imports no
    JAX): per edge, per batch (at most n of them) and per output entry."""
    return _BP_OVERHEAD_S + _BP_PER_EDGE_S * nnz + _BP_PER_BATCH_S * n + _BP_PER_ENTRY_S * float(n) * n


def host_matmul_seconds(c: int) -> float:
    """Estimated seconds of one ``(c, c)`` float product in NumPy on the host (imports no JAX)."""
    return 2.0 * float(c) ** 3 / _FLOPS["cpu"] + _MATMUL_OVERHEAD_S


_FALLBACK_FLOOR = float(1 << 22)
"""The least candidate-run limit :func:`structured_or_dense` sets (small masks: about 0.2 s of one structured
product, where a dense route's own set-up is not much cheaper)."""

_CANDIDATE_COST = 64.0
"""How many dense bit-packed word operations one candidate run of the structured route costs, rounded down: a
candidate takes 40–60 ns (a random mask of 3 keys a row, n = 2048: products of 1.3e5, 1.4e6 and 1.2e8 candidates),
a packed word well under 1 ns (the bit-packed closure of that mask 0.03 s, n = 8192 0.3 s; 2026-12-05, 2-core
EPYC). With the limit at `n³/64` candidates the structured route spent 5.2 s on that mask before switching."""


def dense_cost_limit(n: int) -> float:
    """The candidate runs of one structured product beyond which the dense bit-packed route is the cheaper one for
    masks of size `n`: about `n³/64` word operations of a dense product, counted in candidate runs
    (:data:`_CANDIDATE_COST`), at least :data:`_FALLBACK_FLOOR`."""
    return max(_FALLBACK_FLOOR, float(n) ** 3 / 64 / _CANDIDATE_COST)


def growth_limit(n: int, nnz: int | float) -> float:
    """The candidate runs of one structured squaring beyond which, once the runs a row have grown in the squaring
    before, ``method="auto"`` goes to the dense bit-packed route: the whole bit-packed closure's estimated seconds
    (:func:`bitpacked_closure_seconds`, a mask of `n` positions and `nnz` nonzeros) counted in candidate runs
    (:data:`_CANDIDATE_COST` packed words each), at least :data:`_FALLBACK_FLOOR` and at most
    :func:`dense_cost_limit`.

    Runs that grew in one squaring go on growing in the next where the powers' runs multiply (a 2-D neighbourhood's
    3 runs a row become 5, 9, 17, 33, 65 …, each squaring about 4x the candidates of the one before), so the next
    squaring alone costing more than the whole dense route is the point to switch. :func:`dense_cost_limit` (one
    dense product's `n³/64` word operations) is far above the sparse closure's cost: ``natten_2d(100, 100, 3, 3)``
    (n = 10,000) squared up to 65 runs a row (about 10 s) before it switched, where the bit-packed closure takes
    0.3–0.6 s. A mask whose runs do not grow (causal, windows, sinks, documents, prefix-LM, blocks) is held to
    :func:`dense_cost_limit` only. Above ``_DENSE_FALLBACK_N`` (up to ``_DENSE_RESCUE_N``) the plain limit is the
    structured route's own, and a refusal at this one is retried at that where the bit-packed route does not fit in
    memory (:func:`structured_or_dense`)."""
    seconds = bitpacked_closure_seconds(n, nnz)
    return min(dense_cost_limit(n), max(_FALLBACK_FLOOR, seconds / (_CANDIDATE_COST * _BP_PER_WORD_S)))


def _growth_limit_of(m: IntervalMask) -> float:
    """:func:`growth_limit` for the adjacency of `m` (its nonzeros and at most `n` more on the diagonal)."""
    return growth_limit(m.n, m.nnz() + m.n)


def warn_if_forced_structured(n: int, method: str, nnz: int | None = None):
    """The context of a structured route on masks of size `n`: under ``method="structured"`` (forced) with `n` at
    most ``_DENSE_FALLBACK_N``, a ``RuntimeWarning`` at the first product where ``"auto"`` would have switched to the
    dense bit-packed route (more candidate runs than :func:`dense_cost_limit`, or, given the adjacency's `nnz`,
    than :func:`growth_limit` in a squaring whose runs grew in the squaring before; see
    :func:`structured_or_dense`); else nothing."""
    from ._structured import warn_when_slower_than_dense

    if method == "structured" and n <= _DENSE_FALLBACK_N:
        return warn_when_slower_than_dense(dense_cost_limit(n), None if nnz is None else growth_limit(n, nnz))
    return contextlib.nullcontext()


_SAMPLED_ROWS = 4
"""Evenly spaced rows :func:`predicted_refusal` follows, with the middle row (where a 2-D neighbourhood's rows have the
most runs): 5 rows, or fewer when they coincide."""

_PREDICT_FLOOR = 2e6
"""Entries :func:`predicted_refusal`'s search may always touch (a sampled row of `n` entries, or a frontier node's
runs, each counts one): a few milliseconds."""

_PREDICT_SHARE = 0.5
"""The share of the candidate runs the structured route is sure to merge (:func:`predicted_refusal`) that the search
may spend in entries (an entry of the search costs about what a candidate run costs, 5–10 ns): a search that finds
nothing adds at most about half the route's own work before the squaring in question."""

_PREDICT_LEVEL_CAP = 2e7
"""The most entries one level of :func:`predicted_refusal` may touch (its frontier's runs are gathered at once):
about 0.3 GB of temporaries."""


def predicted_refusal(m: IntervalMask, limit: float, num_layers: int | None = None) -> str | None:
    """Why the structured route will refuse `m` at `limit` candidate runs a product, found before any product, or
    None when that is not certain.

    The first product ``A ⊗ A`` of ``A = M | I`` (always made, ``n >= 2``, unless ``num_layers`` is 1) is counted
    exactly as :func:`~._structured.compose` counts it. Beyond it, a breadth-first search on ``A`` from up to 5 sampled
    rows: after ``L`` levels row ``i`` of the search is row ``i`` of ``A^L``. Where at ``L = 2^j`` a sampled row has
    ``k`` runs and has gained keys since ``2^(j-1)``, ``P_j = A^(2^j)`` differs from ``P_(j-1)``, so
    :class:`~._structured.PowerTable` squares it (for ``R``, or for ``R^(num_layers)`` when ``2^(j+1) <= num_layers``),
    and that product merges ``r · 4 · runs(rows merged) · runs(P_j)`` candidate runs over the ``r`` rows of ``P_j``
    that reach no full row of ``P_j`` (:func:`~._structured.compose`). Such a row's ``A^(2L)`` is not full, nor is
    the same row of ``E^(2L)``, ``E ⊇ A`` the mask of each row's hull (one run, so its powers cost a range minimum
    each): the rows whose ``E^(2L)`` is not full are merged, at least ``r`` of them, and a sampled one among them
    holds ``k`` runs. So are the rows of ``A^(2L)`` that miss one of a few evenly spaced columns (a backward search
    from those columns, :class:`_ColumnReach`, within the same budget), which the hull cannot see where every row
    holds a far key: with a sink token every row's hull starts at 0 and soon covers ``[0, n)``
    (``natten_2d(200, 200, 7, 7) | attention_sinks(40000, 1)`` was refused after four squarings, 53 s, a review;
    now before any product, in about 1 s). Beyond `limit`, the squaring is refused. Rows of one run keep one run in every power (each run
    holds its own row) and are not searched. The search's cost is held to what it can save: its entries (a sampled
    row per level, the runs of its frontier) stay within :data:`_PREDICT_SHARE` of the candidate runs the route
    merges before the squaring in question (``A ⊗ A``, then each squaring's ``n · 4 · k²``, or the bound above where
    that exceeds `limit`), or :data:`_PREDICT_FLOOR`, and
    within :data:`_PREDICT_LEVEL_CAP` a level; it stops at the sampled rows' ``L*``. A 2-D neighbourhood of 362 × 362
    positions (7 × 7 kernel) was refused after 73 s of squarings (a fresh-user review); its sampled rows have 97 runs
    at ``A^16``: refused at once. A window with sink tokens (2 runs a row that never grow) stops after a few levels
    (a review: 0.45 s at n = 40000 with a fixed budget). Longformer's global tokens (``global_sliding``, 64 of them
    at n = 131072: 65 runs a row) are not refused: every row holds a global token's key, whose row is full, so
    ``A ⊗ A`` merges nothing.
    """
    from ._structured import _rows_to_merge

    a = m.with_diagonal()
    n = a.n
    if n < 2 or a.num_runs < 2:
        return None
    starts, stops = a.starts, a.stops
    k = starts.shape[1]
    # A ⊗ A, counted as compose counts it: the rows that reach no full row of A, their runs by A's
    first_starts, _, _ = _rows_to_merge(a, a)
    route = 0.0 if first_starts is None else float(first_starts.shape[0]) * 4 * first_starts.shape[1] * k
    if route > limit and (num_layers is None or num_layers >= 2):
        rows = n if first_starts is None else first_starts.shape[0]
        return (
            f"`mask`: the structured route would square A^1 (n = {n}), whose rows have up to {k} runs (found before "
            f"any product, counted as the product counts them): {route:.3g} candidate runs to merge ({'n' if rows == n else f'{rows} rows without a full one'} x 4 x "
            f"runs x runs), more than the structured route takes ({limit:.3g}: tens of seconds a product): the mask's "
            "own rows hold too many runs for the first product, A ⊗ A."
        )
    rows = np.unique(np.linspace(0, n - 1, _SAMPLED_ROWS + 2).round().astype(np.int64)[1:-1])
    rows = np.union1d(rows, [n // 2])
    s = len(rows)
    reach = np.zeros((s, n), dtype=bool)
    reach[np.arange(s), rows] = True
    frontier = reach.copy()
    width = n + 1
    level = 0
    spent = 0.0  # entries the search touched
    hull = _HullPowers(a)
    columns = _ColumnReach(a)
    while True:
        sample, node = np.nonzero(frontier)
        work = float(s) * n + float(node.size) * k
        if work > _PREDICT_LEVEL_CAP or spent + work > max(_PREDICT_FLOOR, _PREDICT_SHARE * route):
            return None  # no cheap certainty
        spent += work
        offset = np.repeat(sample * width, k)
        st, sp = starts[node].ravel() + offset, stops[node].ravel() + offset
        diff = np.bincount(st, minlength=s * width) - np.bincount(sp, minlength=s * width)
        new = (np.cumsum(diff.reshape(s, width), axis=1)[:, :n] > 0) & ~reach
        level += 1
        if not new.any():
            return None  # the sampled rows reached R: no certain refusal
        reach |= new  # keys gained at this level: at a power of two 2^j, P_j differs from P_(j-1)
        frontier = new
        if level == 1 or level & (level - 1):
            continue  # A ⊗ A is counted exactly above; not a power of two
        if num_layers is not None and 2 * level > num_layers:
            return None  # R^(num_layers) squares no further
        runs = reach[:, 0].astype(np.int64) + np.count_nonzero(reach[:, 1:] & ~reach[:, :-1], axis=1)
        most = int(runs.max())
        if float(n) * 4 * most * most <= limit:  # within the limit even were every row merged
            route += float(n) * 4 * most * most  # (an upper bound here: the search's budget, not a refusal)
            continue
        merged = ~hull.full(2 * level)  # rows certainly merged in this squaring: E^(2L) not full
        candidates = _merged_candidates(merged, runs, rows, most)
        if candidates <= limit:  # the hull is loose where every row holds a far key (a sink): columns missed
            cost = columns.cost(2 * level)
            if spent + cost <= max(_PREDICT_FLOOR, _PREDICT_SHARE * route):
                spent += cost
                merged |= columns.missed(2 * level)
                candidates = _merged_candidates(merged, runs, rows, most)
        merged_rows = int(np.count_nonzero(merged))
        if candidates > limit:
            return (
                f"`mask`: the structured route would square A^{level} (n = {n}), whose rows have up to {most} runs "
                f"or more (found before any product, from {s} sampled rows): at least {candidates:.3g} candidate runs "
                f"to merge ({'n' if merged_rows == n else f'{merged_rows} rows'} x 4 x runs x runs), more than the "
                f"structured route takes ({limit:.3g}: tens of seconds a product): the runs of this mask's powers "
                "multiply."
            )
        route += candidates  # this squaring runs (within the limit) before the next one is in question


def _merged_candidates(merged: np.ndarray, runs: np.ndarray, rows: np.ndarray, most: int) -> float:
    """The candidate runs a squaring of ``P_j`` merges at least: the `merged` rows (certainly merged), 4 x the runs
    of the sampled rows (`rows`, their runs `runs` in ``P_j``) among them x `most` (the runs of ``P_j``'s widest
    sampled row), as :func:`~._structured.compose` counts them."""
    sampled = runs[merged[rows]]
    return float(np.count_nonzero(merged)) * 4 * (int(sampled.max()) if sampled.size else 0) * most


_COLUMNS = 8
"""Evenly spaced columns (the first and the last among them) whose reaching rows :class:`_ColumnReach` follows."""


class _ColumnReach:
    """The rows of ``A^t`` that miss one of a few evenly spaced columns ``c`` (key positions), for the reflexive
    interval mask `a`: a breadth-first search backwards from each column, ``S_0 = {c}``, ``S_(t+1)`` the rows with a
    key in ``S_t`` (a prefix sum of ``S_t`` answers each run in O(1)), so ``S_t`` is column ``c`` of ``A^t``. A row
    outside some ``S_t`` is not full in ``A^t``. The hull mask of :class:`_HullPowers` cannot see this where every
    row holds a far key: with a sink token at 0 every row's hull starts at 0, though a 2-D neighbourhood's rows still
    miss the keys more than ``t`` kernel radii away (a review: ``natten_2d(200, 200, 7, 7) | attention_sinks(40000,
    1)`` was refused after four squarings, 53 s, where every row of ``A^16`` misses a column)."""

    def __init__(self, a: IntervalMask):
        self.a = a
        self.n = a.n
        k = a.starts.shape[1]
        # as many columns as one step's gather of n x k runs a column keeps within the level cap
        self.columns = np.unique(np.linspace(0, a.n - 1, max(1, min(_COLUMNS, int(_PREDICT_LEVEL_CAP // (a.n * k)))))
                                 .round().astype(np.int64))  # fmt: skip
        self.hit = None  # column c of A^depth, one row a column; from the first call on
        self.depth = 0
        self.closed = False

    def cost(self, depth: int) -> float:
        """Entries the steps up to `depth` still touch (a column's prefix sum and its n x k runs a step)."""
        if self.closed or depth <= self.depth:
            return 0.0
        return float(depth - self.depth) * len(self.columns) * self.n * (self.a.starts.shape[1] + 1)

    def missed(self, depth: int) -> np.ndarray:
        """Rows of ``A^depth`` that miss at least one of the columns (not full), a Boolean array of `n`."""
        n = self.n
        if self.hit is None:
            self.hit = np.zeros((len(self.columns), n), dtype=bool)
            self.hit[np.arange(len(self.columns)), self.columns] = True
        starts, stops = self.a.starts, self.a.stops  # padding runs [n, n) hold no key
        while self.depth < depth and not self.closed:
            grown = np.empty_like(self.hit)
            for c, hit in enumerate(self.hit):
                prefix = np.concatenate([[0], np.cumsum(hit, dtype=np.int64)])
                grown[c] = (prefix[stops] > prefix[starts]).any(axis=1)
            self.closed = bool((grown == self.hit).all())  # column c of A^t stops changing: so do the later ones
            self.hit = grown
            self.depth += 1
        return ~self.hit.all(axis=0)


class _HullPowers:
    """The powers ``E^L`` of the hull mask ``E`` of a reflexive interval mask `a` (row ``i``: one run from its first
    key to its last, ``E ⊇ A``), each a single run a row, so a product is a range minimum and maximum
    (:func:`~._structured._minmax_query`); :meth:`full` says which rows of ``E^L`` are full, for ``L`` a power of two,
    doubling from the last power asked for."""

    def __init__(self, a: IntervalMask):
        self.a = a
        self.n = a.n
        self.lo = self.hi = None  # E^power's runs, from the first call on
        self.power = 1

    def full(self, power: int) -> np.ndarray:
        """Rows of ``E^power`` that are ``[0, n)``; `power` a power of two at least the last one asked for."""
        from ._structured import _floor_log2, _minmax_query

        if self.lo is None:
            a = self.a
            self.lo = a.starts[:, 0].astype(np.int64)  # normal form: the first run starts first
            self.hi = np.where(a.stops > a.starts, a.stops, 0).max(axis=1).astype(np.int64)
        while self.power < power and not self._closed():
            longest = int((self.hi - self.lo).max())
            levels = int(_floor_log2(np.array([longest]))[0]) + 1
            lo, hi = _minmax_query(self.lo, self.hi, self.lo[:, None], self.hi[:, None], self.n, levels)
            self.lo, self.hi = lo[:, 0].astype(np.int64), hi[:, 0].astype(np.int64)
            self.power *= 2
        return (self.lo == 0) & (self.hi == self.n)

    def _closed(self) -> bool:
        return bool(((self.lo == 0) & (self.hi == self.n)).all())


def _refusal_alone(err: Exception) -> str:
    """A structured route's refusal without its advice on the dense route (:func:`~._structured._dense_advice`)."""
    return str(err).split(" Use the dense bit-packed route")[0].split(" The dense bit-packed route needs")[0]


def structured_or_dense(
    m: IntervalMask,
    method: str,
    structured: Callable,
    dense: Callable,
    num_layers: int | None = None,
    dense_bytes: Callable[[int], float] | None = None,
    auto_takes_record: bool = False,
):
    """``structured()``, or under ``method="auto"`` for `m` short enough for the dense routes (at most
    ``_DENSE_FALLBACK_N``) ``dense(reason)`` once a product of the structured route would merge more candidate runs
    than a dense bit-packed product costs (:func:`dense_cost_limit`), or once a squaring after one that grew the
    runs a row would merge more than the whole bit-packed closure costs (:func:`growth_limit`): the runs of some
    masks' powers multiply (a dilated window of 3 runs a row, n = 3000: 513 runs a row in a power, refused after
    17 s where the bit-packed route takes 3 s, a fresh-user review; ``natten_2d(100, 100, 3, 3)``: 3 runs a row,
    65 in its sixth power, 8–15 s of squarings before the switch where the bit-packed closure takes 0.3–0.6 s). Up
    to ``_DENSE_RESCUE_N``, ``dense(reason)`` also when a product outgrows the structured route's own limit, or a
    squaring after one that grew the runs a row the growing limit (``natten_2d(181, 181, 7, 7)``, n = 32761: 99 s
    of squarings before the own limit refused); if the dense mask then does not fit in memory, a refusal at the
    growing limit goes back to the structured route at its own limit, and only a refusal there stands (both routes
    named). Under ``method="structured"`` the route stays, with a ``RuntimeWarning`` at the first product
    where ``"auto"`` would have switched (a random sparse mask, n = 1024–1500: 62–73 s forced structured against
    0.03 s bit-packed, a fresh-user review). Above ``_DENSE_FALLBACK_N`` under ``"auto"`` a refusal that a search
    from sampled rows finds certain before any product (:func:`predicted_refusal`; `num_layers`: the ``L`` of
    ``R^(L)``, None for ``R`` and ``L*``) skips the structured route: the dense route at once up to
    ``_DENSE_RESCUE_N``, the refusal at once beyond (``natten_2d(362, 362, 7, 7)``: after 73 s of squarings before).
    `dense_bytes(n)`: the peak bytes the caller's own check counts for its dense bit-packed route, which a refusal's
    advice quotes (None: the reachability's). `auto_takes_record`: the caller's ``"auto"`` takes the product or
    components route of a mask whose constructor recorded its factors or components (``flow_summary`` and
    ``convergence_depth``; not ``reachability``, whose output is ``n × n`` at any route): then a refusal under
    ``"structured"`` says so."""
    from ._structured import dense_need

    with dense_need(dense_bytes):  # what a refusal quotes for the dense route: the caller's own check
        return _structured_or_dense(m, method, structured, dense, num_layers, auto_takes_record)


def _structured_or_dense(
    m: IntervalMask, method: str, structured: Callable, dense: Callable, num_layers: int | None, auto_takes_record: bool
):
    """:func:`structured_or_dense`'s rules."""
    from ..errors import MemoryBudgetError
    from ._structured import _CANDIDATE_LIMIT, CandidateLimitError, candidate_limit

    if method == "structured":
        # forced: a warning where "auto" would switch (up to the dense routes' n)
        warn = m.n <= _DENSE_FALLBACK_N
        try:
            with warn_if_forced_structured(m.n, method, m.nnz() + m.n) if warn else contextlib.nullcontext():
                return structured()
        except CandidateLimitError as err:
            recorded = "product" if m._factors is not None else "components" if m._components is not None else None
            if recorded is None or not auto_takes_record:
                raise
            # a fresh user: the refusal of a mask that "auto" answers from its constructor's record sent them to the
            # dense route, or to a smaller n
            raise CandidateLimitError(
                f"{_refusal_alone(err)} method='auto' (the default; hassejax analyze without --method) takes the "
                f"{recorded} route for this mask, from the {'factors' if recorded == 'product' else 'components'} its "
                "constructor recorded, without a dense array."
            ) from None
    if method != "auto" or m.n <= _DENSE_FALLBACK_N:
        predicted = None
    else:
        predicted = predicted_refusal(m, _CANDIDATE_LIMIT.get(), num_layers)
    if method != "auto" or m.n > _DENSE_RESCUE_N:
        if predicted is not None:
            from ._structured import _dense_advice

            raise CandidateLimitError(f"{predicted} {_dense_advice(m.n)}")
        return structured()
    if m.n > _DENSE_FALLBACK_N:
        if predicted is not None:
            refused = CandidateLimitError(predicted)
        else:
            try:  # the structured route's own limit, and the growing one: runs that multiply switch early
                with candidate_limit(_CANDIDATE_LIMIT.get(), growing=_growth_limit_of(m)):
                    return structured()
            except CandidateLimitError as err:
                refused = err
        try:
            return dense(
                "interval rows whose powers' runs multiply (a product beyond the structured route's limit, or a "
                "squaring after one that grew the runs a row beyond the whole bit-packed closure's cost): the dense "
                "bit-packed route"
            )
        except MemoryBudgetError:
            if refused.growing:  # the early switch must not refuse a mask the structured route could finish
                try:
                    return structured()
                except CandidateLimitError as err:
                    refused = err
            # neither route: say both (the refusal alone names the route just tried)
            first = _refusal_alone(refused)
            raise MemoryBudgetError(
                f"{first} The dense bit-packed route, tried next, does not fit in memory either (a dense "
                f"({m.n}, {m.n}) mask and its packed powers). Use a smaller n, or a machine with more memory."
            ) from None
    try:
        with candidate_limit(dense_cost_limit(m.n), growing=_growth_limit_of(m)):
            return structured()
    except CandidateLimitError:
        return dense(
            "interval rows whose powers' runs multiply (a product beyond the dense bit-packed cost): the dense "
            "bit-packed route"
        )


def product_first(m: IntervalMask, method: str, product: Callable):
    """Under ``method="auto"``, for rows of several runs, ``product()``: the answer from the factors of a Kronecker
    product ``A = P ⊗ C`` (:mod:`._product`; a 2-D neighbourhood, a dilated window with `n` a multiple of its
    stride) or from the components of a disjoint union (:mod:`._components`; a dilated window with `n` no multiple
    of its stride), whose own powers keep one run a row where `A`'s multiply; None when `m` is none, for other methods, for
    rows of one run (the structured route keeps them at one run), or when a factor's own structured route refuses."""
    from ._structured import CandidateLimitError

    if method != "auto" or m.num_runs < 2:
        return None
    try:
        return product()
    except CandidateLimitError:
        return None


def _few_runs(flat: np.ndarray) -> np.ndarray:
    """Per mask of ``flat`` ``(B, n, n)``: True iff every row has at most ``_STRUCTURED_MAX_RUNS`` runs.

    Counted in row blocks (a run starts where a True follows a False), no ``n × n`` temporary.
    """
    b, n, _ = flat.shape
    out = np.ones(b, dtype=bool)
    step = max(1, (1 << 24) // n)
    for i in range(b):
        for r0 in range(0, n, step):
            rows = flat[i, r0 : r0 + step]
            runs = rows[:, 0].astype(np.int64) + np.count_nonzero(rows[:, 1:] & ~rows[:, :-1], axis=1)
            if runs.max() > _STRUCTURED_MAX_RUNS:
                out[i] = False
                break
    return out
