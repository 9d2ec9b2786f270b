"""The host route of tasks (hassejax.order._poset_numpy) against the jitted route and networkx."""

import jax
import jax.monitoring
import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hassejax._checks
from hassejax.errors import MemoryBudgetError, ParameterError
from hassejax.order import (
    HasseDiagram,
    classes,
    convergence_depth,
    cover_matrix,
    quotient_order,
    reachability,
)
from hassejax.order._poset_numpy import closure_numpy, depth_numpy, diagram_numpy, poset_numpy
from hassejax.tasks import (
    Task,
    Token,
    audit,
    autoregressive,
    block_diffusion_task,
    block_generation,
    butterfly,
    sparsify,
    xlnet_two_stream_task,
)


def _mask(n: int, p: float, seed: int, kind: str) -> np.ndarray:
    """A random mask: i.i.d. entries, a DAG under a random slot order, or i.i.d. plus mutual blocks."""
    rng = np.random.default_rng(seed)
    m = rng.random((n, n)) < p
    if kind == "dag":  # strictly lower triangular, then the slots shuffled: a partial order with no cycles
        perm = rng.permutation(n)
        m = np.tril(m, -1)[np.ix_(perm, perm)]
    elif kind == "blocks":  # sparse, plus a few groups of mutually attending slots (classes of several slots)
        m &= rng.random((n, n)) < 0.3
        group = rng.integers(0, max(1, n // 3), n)
        m |= (group[:, None] == group[None, :]) & (rng.random((n, n)) < 0.5)
    return m


def _jax_route(m: np.ndarray):
    """The jitted route of Task before the host route: matmul closure, classes, quotient, covers."""
    r = reachability(m, method="matmul")
    labels, c = classes(r)
    order = quotient_order(r, labels, c)
    return np.asarray(r), np.asarray(labels), c, np.asarray(order), np.asarray(cover_matrix(order))


masks = dict(
    n=st.integers(1, 24),
    p=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**32 - 1),
    kind=st.sampled_from(["iid", "dag", "blocks"]),
)


@settings(max_examples=40)
@given(**masks, num_layers=st.integers(1, 6))
def test_host_route_equals_jax_route(n, p, seed, kind, num_layers):
    m = _mask(n, p, seed, kind)
    parts = poset_numpy(m)
    r, labels, c, order, cover = _jax_route(m)
    np.testing.assert_array_equal(parts.reach, r)
    assert parts.num_classes == c
    np.testing.assert_array_equal(parts.labels, labels)  # the same numbering, not only the same partition
    assert parts.labels.dtype == labels.dtype
    np.testing.assert_array_equal(parts.order, order)
    np.testing.assert_array_equal(parts.cover, cover)
    np.testing.assert_array_equal(
        closure_numpy(m, num_layers), np.asarray(reachability(m, num_layers, method="matmul"))
    )
    assert depth_numpy(m) == int(convergence_depth(m, method="matmul"))


@settings(max_examples=30)
@given(**{**masks, "n": st.integers(1, 10)})
def test_host_route_against_networkx(n, p, seed, kind):
    m = _mask(n, p, seed, kind)
    parts = poset_numpy(m)
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(*np.nonzero(m)))
    closure = np.zeros((n, n), bool)
    for i, j in nx.transitive_closure(g, reflexive=True).edges:
        closure[i, j] = True
    np.testing.assert_array_equal(parts.reach, closure)
    members = [frozenset(np.flatnonzero(parts.labels == a).tolist()) for a in range(parts.num_classes)]
    assert set(members) == {frozenset(s) for s in nx.strongly_connected_components(g)}
    cond = nx.condensation(g)
    red = nx.transitive_reduction(cond)
    expect = {(frozenset(cond.nodes[u]["members"]), frozenset(cond.nodes[v]["members"])) for u, v in red.edges}
    got = {(members[a], members[b]) for a, b in zip(*np.nonzero(parts.cover))}  # a covers b: edge a -> b
    assert got == expect
    assert all(a > b for a, b in zip(*np.nonzero(parts.order)) if a != b)  # ids are topological


@pytest.mark.parametrize("name", ["block_generation", "butterfly", "autoregressive", "single"])
def test_tasks_agree_with_jax_route(name):
    if name == "single":
        tasks = (xlnet_two_stream_task([2, 0, 3, 1], context=1), block_diffusion_task(6, 2))
    else:
        family = {"block_generation": lambda: block_generation(8, 2), "butterfly": lambda: butterfly(4)}.get(
            name, lambda: autoregressive(6)
        )()
        tasks = (*family.tasks, family.merge())
    for task in tasks:
        r, labels, c, _, cover = _jax_route(task.mask)
        st_ = task.structure()
        np.testing.assert_array_equal(st_.node, labels)
        np.testing.assert_array_equal(st_.cover, cover)
        assert st_.members == tuple(tuple(np.flatnonzero(labels == a).tolist()) for a in range(c))
        got = task.reachability()
        assert isinstance(got, jax.Array) and got.dtype == bool
        np.testing.assert_array_equal(got, r)
        np.testing.assert_array_equal(task.reachability(2), reachability(task.mask, 2, method="matmul"))
        assert task.is_dense() == bool(np.array_equal(task.mask | np.eye(task.n, dtype=bool), r))
        np.testing.assert_array_equal(task.dense().mask, r)
        d, expect = task.diagram(), HasseDiagram.from_mask(task.mask)
        assert d == expect and d.classes == expect.classes and d.edges == expect.edges
        np.testing.assert_array_equal(d.cover_matrix(), expect.cover_matrix())
        np.testing.assert_array_equal(d.order_matrix(), expect.order_matrix())
        np.testing.assert_array_equal(d.labels, expect.labels)
        assert d.labels.dtype == expect.labels.dtype and d.depth == expect.depth and d.width == expect.width


def test_no_programs_compiled_per_task_size():
    """Structure, diagram, closure, audit, sparsify and merge of tasks of new sizes compile no JAX program.

    (Building a Task still copies its mask to the device once, in ``as_mask``, before this runs.)
    """
    family = block_generation(18, 3)  # tasks of 3, 6, ..., 18 slots and a merged task
    merged = family.merge()
    events = []

    def listen(name, _secs, **_kw):
        if "compile" in name:
            events.append(name)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        family.merge()
        for task in (*family.tasks, merged):
            task.structure(), task.diagram(), task.is_dense(), task.dense()
            task.reachability(), task.reachability(2), audit(task), sparsify(task)
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert events == []


def test_errors(monkeypatch):
    task = Task([Token("w", i) for i in range(40)], np.tril(np.ones((40, 40), bool)))
    for bad in (0, True, -2):
        with pytest.raises(ParameterError, match="num_layers"):
            task.reachability(bad)
    monkeypatch.setattr(hassejax._checks, "available_memory_bytes", lambda: 20_000)  # 40 x 40: 1.6 kB a matrix
    for call in (task.structure, task.diagram, task.reachability, lambda: task.reachability(3), task.is_dense):
        with pytest.raises(MemoryBudgetError, match="`mask`.*n = 40"):
            call()
    with pytest.raises(MemoryBudgetError, match="`order`.*n = 40"):
        diagram_numpy(task.mask, name="order")  # the name of the caller's argument
    with pytest.raises(MemoryBudgetError, match="`m`.*n = 40"):
        closure_numpy(task.mask, None, name="m")
    with pytest.raises(MemoryBudgetError, match="`m`.*n = 40"):
        depth_numpy(task.mask, name="m")
