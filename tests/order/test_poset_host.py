"""The host width (Dilworth by a maximum flow) against networkx's Hopcroft–Karp, on random and layered orders."""

import hypothesis.strategies as st
import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings

from hassejax.errors import MemoryBudgetError
from hassejax.masks import _runs, structured
from hassejax.order import flow_summary
from hassejax.order._poset_host import dilworth_width


def networkx_width(strict: np.ndarray) -> int:
    """C minus a maximum matching of the bipartite graph a -> b' of the strict pairs (networkx, pure Python)."""
    c = strict.shape[0]
    graph = nx.Graph()
    graph.add_nodes_from(range(2 * c))
    upper, lower = np.nonzero(strict)
    graph.add_edges_from(zip(upper.tolist(), (lower + c).tolist()))
    matching = nx.bipartite.hopcroft_karp_matching(graph, top_nodes=range(c))
    return c - len(matching) // 2


def strict_closure(edges: np.ndarray) -> np.ndarray:
    """Strict part of the transitive closure of a DAG given by `edges[a, b]` (a above b)."""
    c = edges.shape[0]
    graph = nx.DiGraph(np.argwhere(edges).tolist())
    graph.add_nodes_from(range(c))
    closure = nx.transitive_closure_dag(graph)
    strict = np.zeros((c, c), bool)
    for a, b in closure.edges:
        strict[a, b] = True
    return strict


@st.composite
def partial_orders(draw, max_c=60):
    """Strict parts of partial orders: random DAGs (closure), products of chains, levels; shuffled."""
    c = draw(st.integers(1, max_c))
    kind = draw(st.sampled_from(["dag", "grid", "levels"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if kind == "dag":
        p = draw(st.sampled_from([0.02, 0.08, 0.2, 0.5]))
        strict = strict_closure(np.tril(rng.random((c, c)) < p, k=-1))
    elif kind == "grid":  # [a] x [b]: width min(a, b), layered
        a = draw(st.integers(1, max(1, c // 2)))
        b = max(1, c // a)
        i = np.arange(a * b)
        x, y = i // b, i % b
        strict = (x[:, None] >= x[None, :]) & (y[:, None] >= y[None, :]) & ~np.eye(a * b, dtype=bool)
    else:  # random level sizes, every element above every element of lower levels, some pairs dropped above
        level = np.sort(rng.integers(0, draw(st.integers(1, c)), size=c))
        edges = (level[:, None] == level[None, :] + 1) & (rng.random((c, c)) < 0.7)
        strict = strict_closure(edges)
    perm = rng.permutation(strict.shape[0])
    return strict[np.ix_(perm, perm)]


@settings(max_examples=60, deadline=None)
@given(partial_orders())
def test_width_equals_networkx_matching(strict):
    assert dilworth_width(strict) == networkx_width(strict)


def test_width_of_known_orders():
    c = 7
    chain = np.tril(np.ones((c, c), bool), k=-1)
    assert dilworth_width(chain) == 1
    assert dilworth_width(np.zeros((c, c), bool)) == c
    i = np.arange(12)
    x, y = i // 4, i % 4  # the product of chains [3] x [4]
    grid = (x[:, None] >= x[None, :]) & (y[:, None] >= y[None, :]) & ~np.eye(12, dtype=bool)
    assert dilworth_width(grid) == 3


def test_deep_layered_quotient_is_answered():
    """1,600 classes in 80 levels: scipy's maximum_bipartite_matching did not finish in 25 s (over ten minutes
    for the 2,000 of ``natten_2d(40, 50, 5, 3) & causal(2000)``; scipy issue 26147)."""
    summary = flow_summary(structured.natten_2d(40, 40, 5, 3) & structured.causal(1600))
    order = np.asarray(summary.diagram().order_matrix())
    strict = order & ~np.eye(order.shape[0], dtype=bool)
    assert summary.width == networkx_width(strict) == dilworth_width(strict)
    assert summary.num_classes == 1600


def test_width_refuses_a_network_larger_than_the_free_memory(monkeypatch):
    monkeypatch.setattr(_runs, "host_memory_bytes", lambda: 2**20)  # 1 MiB free
    chain = np.tril(np.ones((1000, 1000), bool), k=-1)  # 499,500 pairs: ~40 MB of network
    with pytest.raises(MemoryBudgetError, match=r"`order`.*width of a partial order on C = 1000"):
        dilworth_width(chain)


def test_a_hasse_diagram_s_width_refusal_names_the_mask_and_the_quotient_limit(monkeypatch):
    """A review: the width's refusal inside ``flow_summary`` named an argument `order` that the caller never passed."""
    from hassejax.order import HasseDiagram

    chain = np.tril(np.ones((1000, 1000), bool))  # the reachability of a causal mask: 1000 classes, a chain
    diagram = HasseDiagram.from_reachability(chain)
    monkeypatch.setattr(_runs, "host_memory_bytes", lambda: 2**20)
    with pytest.raises(MemoryBudgetError, match=r"^`mask`: the width .* A smaller quotient_limit"):
        _ = diagram.width


def test_a_network_beyond_scipy_s_int32_indices_is_refused(monkeypatch):
    """SciPy's maximum flow takes int32 indices: 2**31 edges or more would wrap (a review); refused, never wrong."""
    import hassejax.order._poset_host as host

    monkeypatch.setattr(host, "check_host_memory", lambda *args, **kwargs: None)  # a machine with the memory
    strict = np.broadcast_to(np.True_, (46341, 46341))  # 2**31 + 4633 pairs, one byte held
    with pytest.raises(MemoryBudgetError, match=r"^`order`: .* more than SciPy's maximum flow takes"):
        dilworth_width(strict)
