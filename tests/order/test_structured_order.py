"""The structured route's order stage (covers as pairs, depth over them) against networkx (condensation,
transitive reduction, longest path)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from test_poset import mask_graph
from test_structured_closure import build, interval_masks

from hassejax.masks import IntervalMask
from hassejax.order import flow_summary
from hassejax.order._structured import PowerTable
from hassejax.order._structured_poset import (
    chain_depth,
    cover_pairs,
    cover_rows,
    covers_count,
    dag_depth,
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
