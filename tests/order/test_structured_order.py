"""The structured route's order stage (covers as pairs, depth over them) and dense masks on the structured route
of :meth:`HasseDiagram.from_mask`, against networkx (condensation, transitive reduction, longest path) and the
dense route of hassejax."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_poset import mask_graph
from test_structured_closure import build, interval_masks

from hassejax.errors import MaskError, ParameterError
from hassejax.masks import IntervalMask, structured
from hassejax.order import HasseDiagram, flow_summary, reachability
from hassejax.order._structured import PowerTable
from hassejax.order._structured_poset import (
    RowClasses,
    chain_depth,
    cover_pairs,
    cover_rows,
    covers_count,
    dag_depth,
    quotient_matrix,
    row_classes,
    strict_down_sets,
)
from hassejax.tasks import butterfly_mask


def nx_reference(dense: np.ndarray):
    """(class sets, covering pairs as (members below, members above), depth) by networkx alone."""
    cond = nx.condensation(mask_graph(dense))
    members = {u: frozenset(cond.nodes[u]["members"]) for u in cond.nodes}
    edges = {(members[u], members[v]) for u, v in nx.transitive_reduction(cond).edges}
    return set(members.values()), edges, nx.dag_longest_path_length(cond) + 1


def structured_order(m: IntervalMask):
    """(class sets, covering pairs, depth by the pairs, depth by doubling, count) on the structured route, or None
    when the classes are not runs of positions."""
    limit = PowerTable(m.with_diagonal()).limit()
    cls = row_classes(limit)
    if not cls.contiguous:
        return None
    down = strict_down_sets(limit, cls)
    cover = cover_rows(down)
    lower, upper = cover_pairs(cls, cover)
    sets = [frozenset(np.flatnonzero(cls.labels == c).tolist()) for c in range(cls.num_classes)]
    pairs = {(sets[a], sets[b]) for a, b in zip(lower.tolist(), upper.tolist())}
    assert len(pairs) == lower.size  # no pair listed twice
    assert (lower < upper).all()  # the ids are a topological order
    count = covers_count(limit, cls, down, cover)
    return set(sets), pairs, dag_depth(cls.num_classes, lower, upper), chain_depth(down), count


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(interval_masks(max_n=30))
def test_cover_pairs_and_depth_equal_networkx(case):
    m, dense = build(case)
    ours = structured_order(m)
    if ours is None:
        return
    sets, pairs, depth, doubling, count = ours
    ref_sets, ref_edges, ref_depth = nx_reference(dense)
    assert sets == ref_sets
    assert pairs == ref_edges
    assert count == len(ref_edges)
    assert depth == doubling == ref_depth


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(interval_masks(max_n=30))
def test_quotient_matrix_of_contiguous_classes_equals_the_contains_path(case):
    """The running-sum fill of contiguous classes equals the membership test of the representatives, and the
    dense closure read at the representatives."""
    m, dense = build(case)
    limit = PowerTable(m.with_diagonal()).limit()
    cls = row_classes(limit)
    general = RowClasses(cls.labels, cls.num_classes, cls.sizes, cls.first, cls.last, False)
    order = quotient_matrix(limit, cls)
    assert (order == quotient_matrix(limit, general)).all()
    closure = np.asarray(limit.to_dense())
    assert (order == closure[np.ix_(cls.first, cls.first)]).all()


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("n", [2, 3, 5, 12])
def test_butterfly_order_equals_networkx(n, sparse):
    """Butterfly masks: classes 3n − 2, depth n, 4n − 6 Hasse edges (dense form), against networkx; the summary's
    counts without the quotient (quotient_limit=1) equal the diagram's."""
    m = butterfly_mask(n, sparse=sparse, form="intervals")
    dense = np.asarray(m.to_dense())
    ref_sets, ref_edges, ref_depth = nx_reference(dense)
    sets, pairs, depth, doubling, count = structured_order(m)
    assert (sets, pairs) == (ref_sets, ref_edges)
    assert depth == doubling == ref_depth
    big = flow_summary(m, quotient_limit=1)
    small = flow_summary(m)
    assert big.num_classes == small.num_classes == len(ref_sets)
    assert big.depth == small.depth == ref_depth
    assert big.num_hasse_edges == small.num_hasse_edges == len(ref_edges)
    d = small.diagram()
    assert {(frozenset(d.classes[u]), frozenset(d.classes[v])) for u, v in d.edges} == ref_edges
    if not sparse:
        assert (len(ref_sets), ref_depth, len(ref_edges)) == (3 * n - 2, n, max(0, 4 * n - 6))


def test_butterfly_at_length_without_the_doubling(monkeypatch):
    """A longer butterfly (depth n): the depth from the covering pairs, no power of the strict down-sets."""
    import hassejax.order._structured_poset as poset

    def refuse(*args, **kwargs):
        raise AssertionError("chain_depth called")

    monkeypatch.setattr(poset, "chain_depth", refuse)
    n = 3000
    s = flow_summary(butterfly_mask(n, form="intervals"))
    assert (s.num_classes, s.depth, s.num_hasse_edges, s.convergence_depth) == (3 * n - 2, n, 4 * n - 6, 1)


def test_dag_depth_small_cases():
    assert dag_depth(1, np.zeros(0, np.int64), np.zeros(0, np.int64)) == 1
    assert dag_depth(4, np.array([0, 1, 2]), np.array([1, 2, 3])) == 4  # a chain
    assert dag_depth(4, np.array([0, 0, 1, 2]), np.array([1, 2, 3, 3])) == 3  # a diamond
    assert dag_depth(5, np.array([0, 1, 0]), np.array([1, 4, 4])) == 3  # a short and a long path to 4


def _dense_reference(m: np.ndarray) -> HasseDiagram:
    """The diagram by the dense route: the closure by the dense matmul route, then from_reachability (classes,
    quotient order, covers as dense matrices; tested against networkx in test_hasse.py)."""
    return HasseDiagram.from_reachability(reachability(m, method="matmul"))


def _look_ahead_with_sinks(n: int, right: int, sinks: int) -> IntervalMask:
    """Row i >= sinks sees i .. i + right and the first `sinks` positions, which see only themselves: rows of R
    are two runs, [0, sinks) and [i, n); a chain of n - sinks classes above an antichain of `sinks`."""
    i = np.arange(n)
    plain = i >= sinks
    starts = np.stack([np.where(plain, 0, i), i], axis=1)
    stops = np.stack([np.where(plain, sinks, i + 1), np.where(plain, np.minimum(i + right + 1, n), i + 1)], axis=1)
    return IntervalMask.from_runs(starts, stops, n)


@pytest.mark.parametrize(
    "make",
    [
        lambda n: structured.sliding_window(n, 64),
        lambda n: structured.sliding_window(n, 5) | structured.attention_sinks(n, 3),
        lambda n: structured.causal(n),
        lambda n: structured.block_causal(n, 64),
        lambda n: _look_ahead_with_sinks(n, 9, 3),
    ],
    ids=["window", "window_sinks", "causal", "blocks", "look_ahead_sinks"],
)
def test_from_mask_of_dense_windows_takes_the_structured_route(make):
    """A dense mask of few runs a row at n >= 1024: the structured route, the same diagram as the dense route."""
    n = 1100
    m = np.asarray(make(n).to_dense())
    d = HasseDiagram.from_mask(m)
    ref = _dense_reference(m)
    assert d == ref
    assert d.classes == ref.classes and d.edges == ref.edges  # same ids (reach size, then smallest member)
    assert (np.asarray(d.order_matrix()) == np.asarray(ref.order_matrix())).all()
    assert d.depth == nx.dag_longest_path_length(ref.graph) + 1 == ref.depth
    assert d.width == ref.width
    assert d.__dict__.get("depth") is not None  # known from the route, not recomputed


def test_from_mask_dense_window_with_layers():
    n = 1024
    m = np.asarray(structured.sliding_window(n, 64).to_dense())  # L* = ceil(1023 / 64) = 16
    assert HasseDiagram.from_mask(m, num_layers=16) == HasseDiagram.from_mask(m)
    with pytest.raises(MaskError, match="L\\* = 16"):
        HasseDiagram.from_mask(m, num_layers=15)


def test_from_mask_quotient_limit(no_typecheck):
    m = structured.sliding_window(3000, 7)
    with pytest.raises(MaskError, match="larger quotient_limit to HasseDiagram.from_mask"):
        HasseDiagram.from_mask(m)
    d = HasseDiagram.from_mask(m, quotient_limit=3000)
    assert (d.num_classes, d.depth, d.width, len(d.edges)) == (3000, 3000, 1, 2999)
    with pytest.raises(MaskError, match="quotient_limit = 10"):
        HasseDiagram.from_mask(np.asarray(m.to_dense()), quotient_limit=10)
    with pytest.raises(MaskError, match="quotient_limit = 10"):
        HasseDiagram.from_mask(np.tril(np.ones((20, 20), bool)), quotient_limit=10)  # the dense route
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ParameterError, match="quotient_limit"):
            HasseDiagram.from_mask(np.eye(4, dtype=bool), quotient_limit=bad)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1024, 1200), st.integers(1, 64), st.integers(0, 4))
def test_from_mask_dense_windows_property(n, left, sinks):
    """Windows with sinks, looking back or ahead, as dense arrays: the structured route's diagram equals the dense
    route's."""
    mask = structured.sliding_window(n, left) if left % 2 else _look_ahead_with_sinks(n, left, sinks)
    if sinks:
        mask = mask | structured.attention_sinks(n, sinks)
    m = np.asarray(mask.to_dense())
    d = HasseDiagram.from_mask(m)
    ref = _dense_reference(m)
    assert d == ref
    assert (d.depth, d.width) == (ref.depth, ref.width)


def test_a_slow_dense_reduction_warns_before_it_runs(monkeypatch):
    """The dense route's O(C^3) covers warn with their estimate first; the structured route never reaches them."""
    import warnings

    import hassejax.order.hasse as hasse

    monkeypatch.setattr(hasse, "_SLOW_REDUCTION_S", 0.0)
    rng = np.random.default_rng(0)
    m = np.tril(rng.random((40, 40)) < 0.1, -1)  # a DAG: 40 classes on the dense route
    with pytest.warns(RuntimeWarning, match=r"C = 40 classes take one dense \(C, C\) product, estimated .* s"):
        d = HasseDiagram.from_mask(m)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        HasseDiagram.from_mask(np.asarray(structured.sliding_window(1024, 8).to_dense()))  # structured: no warning
    monkeypatch.setattr(hasse, "_SLOW_REDUCTION_S", 10.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert HasseDiagram.from_mask(m) == d  # estimated well under 10 s: silent


def test_the_structured_routes_own_dense_reduction_warns_and_limits_come_first(monkeypatch):
    """A diff review: classes that are not runs of positions leave the structured route's diagram to the same
    ``O(C^3)`` reduction, without the warning; and the dense route checked `quotient_limit` only after building the
    diagram (its reduction included). Now both warn first, the limit is checked before any reduction, and the
    message of a dense mask names its own default."""
    import warnings

    import hassejax.order.hasse as hasse

    n, h = 2048, 1024
    i = np.arange(n)
    m = np.zeros((n, n), bool)
    m[i, i] = True
    m[i, np.where(i < h, i + h, i - h)] = True  # classes {i, i + h}: not runs of positions
    m[i[1:h], i[1:h] - 1] = True  # a chain of h classes
    ref = _dense_reference(m)
    monkeypatch.setattr(hasse, "_SLOW_REDUCTION_S", 0.0)
    with pytest.warns(RuntimeWarning, match=r"C = 1024 classes take one dense \(C, C\) product"):
        d = HasseDiagram.from_mask(m)  # n >= 1024, few runs a row: the structured route
    assert d == ref and (d.num_classes, d.depth, d.width) == (h, h, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning before the refusal would raise here instead
        with pytest.raises(MaskError, match="more than quotient_limit = 10: the Hasse diagram was not built"):
            HasseDiagram.from_mask(np.tril(np.ones((20, 20), bool)), quotient_limit=10)  # the dense route
        with pytest.raises(MaskError, match=r"quotient_limit = 10 \(default for a dense mask: no limit\)"):
            HasseDiagram.from_mask(m, quotient_limit=10)  # the structured route of a dense array


def test_a_device_arrays_host_copy_is_checked_before_it_is_made(monkeypatch):
    """A diff review: the structured route of a dense JAX array copied it to the host unchecked."""
    import jax.numpy as jnp

    import hassejax.masks._runs as runs
    from hassejax.errors import MemoryBudgetError

    m = jnp.asarray(structured.sliding_window(4096, 8).to_dense())  # 16 MiB
    monkeypatch.setattr(runs, "host_memory_bytes", lambda: 1 << 24)
    with pytest.raises(MemoryBudgetError, match=r"`mask`: a host copy of the dense \(4096, 4096\) mask"):
        HasseDiagram.from_mask(m)


def test_the_structured_routes_reduction_estimate_starts_no_jax():
    """A diff review: the structured route's own O(C^3) warning estimated its NumPy product with the JAX backend's
    speed, importing JAX and starting its backend from a host-only route; now a host estimate, JAX-free."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(
        """
        import sys
        import numpy as np
        from hassejax.masks import IntervalMask
        from hassejax.order import flow_summary
        import hassejax.order.hasse as hasse
        hasse._SLOW_REDUCTION_S = 0.0  # the warning path always
        n, h = 16, 8
        i = np.arange(n)
        m = np.zeros((n, n), bool)
        m[i, i] = True
        m[i, np.where(i < h, i + h, i - h)] = True  # classes {i, i + h}: not runs of positions
        m[i[1:h], i[1:h] - 1] = True
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            s = flow_summary(IntervalMask.from_dense(m))
        assert s.num_classes == h and s.diagram().depth == h, s
        assert any("take one dense (C, C) product" in str(w.message) for w in caught), caught
        print("jax" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"
