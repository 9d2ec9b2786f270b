"""Classes, quotient order, cover matrix, depth and width against networkx and brute force."""

import itertools

import hypothesis.strategies as st
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings

from hassejax.errors import MaskError
from hassejax.order import classes, cover_matrix, longest_chain, quotient_order, width

# ----------------------------------------------------------------------------- helpers


@st.composite
def masks(draw, max_n=40):
    """Random Boolean masks with cycles: i.i.d. entries, DAGs with back edges, hidden blocks."""
    n = draw(st.integers(1, max_n))
    kind = draw(st.sampled_from(["iid", "dag_back", "blocks"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if kind == "iid":
        p = draw(st.sampled_from([0.0, 0.02, 0.05, 0.1, 0.3]))
        m = rng.random((n, n)) < p
    elif kind == "dag_back":
        m = np.tril(rng.random((n, n)) < draw(st.sampled_from([0.05, 0.15, 0.4])))
        back = draw(st.integers(0, 3))
        for _ in range(back):  # an edge against the order closes cycles
            i, j = sorted(rng.integers(0, n, size=2))
            m[i, j] = True
    else:
        # Positions grouped into strongly connected blocks (a cycle each), blocks ordered
        # randomly, then shuffled so that classes are not contiguous.
        k = int(rng.integers(1, n + 1))
        block = np.sort(rng.integers(0, k, size=n))
        m = np.zeros((n, n), bool)
        for b in range(k):
            idx = np.flatnonzero(block == b)
            for a, c in zip(idx, np.roll(idx, 1)):
                m[a, c] = True
        between = rng.random((k, k)) < 0.3
        m |= np.tril(between, -1)[block][:, block]
        perm = rng.permutation(n)
        m = m[np.ix_(perm, perm)]
    return m


def mask_graph(m):
    """networkx graph of a mask: edge j -> i when query i attends key j (information flows j -> i)."""
    n = m.shape[0]
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    i, j = np.nonzero(m)
    g.add_edges_from((int(b), int(a)) for a, b in zip(i, j) if a != b)
    return g


def nx_reach(m):
    """Reflexive-transitive closure by networkx: R[i, j] iff j == i or j is an ancestor of i."""
    g = mask_graph(m)
    n = m.shape[0]
    r = np.eye(n, dtype=bool)
    for i in range(n):
        r[i, list(nx.ancestors(g, i))] = True
    return r


def class_sets(labels, c):
    lab = np.asarray(labels)
    return [frozenset(np.flatnonzero(lab == k).tolist()) for k in range(c)]


# The closure itself is tested in test_closure.py; here R comes from networkx so that these
# tests are independent of it.

# ----------------------------------------------------------------------------- classes


@settings(max_examples=60)
@given(masks())
def test_classes_are_sccs_in_topological_order(m):
    r_ref = nx_reach(m)
    labels, c = classes(jnp.asarray(r_ref))
    sets = class_sets(labels, c)
    g = mask_graph(m)
    sccs = {frozenset(s) for s in nx.strongly_connected_components(g)}
    assert c == len(sccs)
    assert set(sets) == sccs
    lab = np.asarray(labels)
    # Topological: information flows j -> i only from lower or equal ids.
    for j, i in g.edges:
        assert lab[j] <= lab[i]
        if j not in sets[lab[i]]:
            assert lab[j] < lab[i]
    # And for every dependent pair of the closure, not just the mask edges.
    ii, jj = np.nonzero(r_ref)
    assert np.all(lab[jj] <= lab[ii])


@settings(max_examples=60)
@given(masks())
def test_quotient_and_cover_match_networkx_condensation(m):
    r_ref = nx_reach(m)
    r = jnp.asarray(r_ref)
    labels, c = classes(r)
    sets = class_sets(labels, c)
    q = np.asarray(quotient_order(r, labels, c))
    # Quotient: [b] <= [a] iff some (hence every) i in a reaches j in b.
    for a, b in itertools.product(range(c), repeat=2):
        block = r_ref[np.ix_(sorted(sets[a]), sorted(sets[b]))]
        assert block.all() == block.any() == q[a, b]
    assert np.array_equal(q, np.tril(q))  # topological ids: lower triangular
    cov = np.asarray(cover_matrix(jnp.asarray(q)))
    # Independent: transitive reduction of networkx's condensation (no self-loops there).
    cond = nx.condensation(mask_graph(m))
    tr = nx.transitive_reduction(cond)
    ref_edges = {(frozenset(cond.nodes[u]["members"]), frozenset(cond.nodes[v]["members"])) for u, v in tr.edges}
    a_idx, b_idx = np.nonzero(cov)
    ours = {(sets[b], sets[a]) for a, b in zip(a_idx, b_idx)}  # cover[a, b]: b -> a
    assert ours == ref_edges


@settings(max_examples=40)
@given(masks(max_n=10))
def test_width_and_depth_against_brute_force(m):
    r_ref = nx_reach(m)
    labels, c = classes(jnp.asarray(r_ref))
    q = quotient_order(jnp.asarray(r_ref), labels, c)
    sets = class_sets(labels, c)
    rep = [min(s) for s in sets]
    comparable = np.array([[r_ref[rep[a], rep[b]] or r_ref[rep[b], rep[a]] for b in range(c)] for a in range(c)])
    best = 0
    for size in range(1, c + 1):
        if any(
            not any(comparable[a, b] for a, b in itertools.combinations(sub, 2))
            for sub in itertools.combinations(range(c), size)
        ):
            best = size
        else:
            break
    assert width(q) == best
    cond = nx.condensation(mask_graph(m))
    depth_ref = len(nx.dag_longest_path(cond))
    cov = cover_matrix(q)
    assert longest_chain(cov) == depth_ref
    assert longest_chain(q) == depth_ref  # the order itself has the same longest chains


@settings(max_examples=30)
@given(masks(max_n=25), st.integers(0, 2**32 - 1))
def test_longest_chain_and_width_do_not_need_topological_ids(m, seed):
    r = jnp.asarray(nx_reach(m))
    labels, c = classes(r)
    q = np.asarray(quotient_order(r, labels, c))
    perm = np.random.default_rng(seed).permutation(c)
    qp = q[np.ix_(perm, perm)]
    cov = np.asarray(cover_matrix(jnp.asarray(q)))
    covp = np.asarray(cover_matrix(jnp.asarray(qp)))
    assert np.array_equal(covp, cov[np.ix_(perm, perm)])
    assert longest_chain(jnp.asarray(covp)) == longest_chain(jnp.asarray(cov))
    assert width(jnp.asarray(qp)) == width(jnp.asarray(q))


def test_known_posets():
    n = 6
    causal = np.tril(np.ones((n, n), bool))
    r = jnp.asarray(nx_reach(causal))
    labels, c = classes(r)
    assert c == n and np.array_equal(np.asarray(labels), np.arange(n))
    q = quotient_order(r, labels, c)
    assert longest_chain(cover_matrix(q)) == n and width(q) == 1
    # Diagonal-only mask: an antichain of n singletons.
    r = jnp.asarray(nx_reach(np.zeros((n, n), bool)))
    labels, c = classes(r)
    q = quotient_order(r, labels, c)
    assert c == n and width(q) == n and longest_chain(cover_matrix(q)) == 1
    assert not np.asarray(cover_matrix(q)).any()
    # Full mask: one class.
    r = jnp.asarray(nx_reach(np.ones((n, n), bool)))
    labels, c = classes(r)
    assert c == 1 and np.all(np.asarray(labels) == 0)
    # Block-causal, 3 blocks of 2: a chain of three classes {0,1} < {2,3} < {4,5}.
    blocks = np.arange(n) // 2
    r = jnp.asarray(nx_reach(blocks[None, :] <= blocks[:, None]))
    labels, c = classes(r)
    assert c == 3 and np.array_equal(np.asarray(labels), blocks)
    assert np.array_equal(np.asarray(cover_matrix(quotient_order(r, labels, c))), np.eye(3, k=-1, dtype=bool))


def test_class_ids_sorted_by_reach_size_then_smallest_member():
    # Two incomparable singletons {3} and {1} below {0, 2}: sizes 1, 1, 4 -> ids by smallest member.
    m = np.zeros((4, 4), bool)
    m[0, 2] = m[2, 0] = True
    m[0, 1] = m[0, 3] = True
    labels, c = classes(jnp.asarray(nx_reach(m)))
    assert c == 3
    assert np.asarray(labels).tolist() == [2, 0, 2, 1]


# ------------------------------------------------------------------------------ errors


def test_classes_rejects_non_reflexive():
    r = np.eye(3, dtype=bool)
    r[1, 1] = False
    with pytest.raises(MaskError, match=r"`reach` must be a preorder .*not reflexive: reach\[1, 1\] is False"):
        classes(jnp.asarray(r))


def test_classes_rejects_non_transitive():
    a = np.eye(3, dtype=bool) | np.eye(3, k=-1, dtype=bool)  # one layer of a bidiagonal chain
    with pytest.raises(
        MaskError, match=r"not transitive: reach\[2, 1\] and reach\[1, 0\] are True but reach\[2, 0\] is False"
    ):
        classes(jnp.asarray(a))
    # Skipping the check is explicit and documented; a closure passes.
    labels, c = classes(jnp.asarray(nx_reach(a)), check=False)
    assert c == 3


def test_quotient_order_rejects_bad_labels():
    m = np.zeros((4, 4), bool)
    m[0, 1] = m[1, 0] = True
    r = jnp.asarray(nx_reach(m))
    labels, c = classes(r)
    with pytest.raises(MaskError, match=r"`labels` must lie in 0 \.\. num_classes - 1 = 1"):
        quotient_order(r, labels, 2)
    with pytest.raises(MaskError, match=r"`labels` leaves class 3 empty"):
        quotient_order(r, labels, 4)
    with pytest.raises(MaskError, match=r"`num_classes` must be a positive int"):
        quotient_order(r, labels, 0)
    bad = np.asarray(labels).copy()
    bad[0], bad[2] = bad[2], bad[0]  # 0 grouped with 2 instead of 1
    with pytest.raises(MaskError, match=r"`labels` must group exactly the mutually reachable positions"):
        quotient_order(r, jnp.asarray(bad), c)


def test_quotient_order_detects_non_preorder_blocks():
    # Labels consistent with mutual reachability, but R not constant on a class block.
    r = np.eye(3, dtype=bool)
    r[0, 1] = r[1, 0] = True
    r[2, 0] = True  # reaches 0 but not 1, although 0 ~ 1
    labels = jnp.asarray([0, 0, 1])
    with pytest.raises(MaskError, match=r"not constant on the blocks of its own classes"):
        quotient_order(jnp.asarray(r), labels, 2)


def test_cover_and_width_reject_non_partial_orders():
    pre = np.ones((2, 2), bool)  # a preorder, not antisymmetric
    for fn in (cover_matrix, width):
        with pytest.raises(MaskError, match=r"`order` must be a partial order .*not antisymmetric: order\[0, 1\]"):
            fn(jnp.asarray(pre))
    chain_step = np.eye(3, dtype=bool) | np.eye(3, k=-1, dtype=bool)
    for fn in (cover_matrix, width):
        with pytest.raises(MaskError, match=r"`order` must be a partial order .*not transitive"):
            fn(jnp.asarray(chain_step))
    strict = np.tril(np.ones((3, 3), bool), -1)
    for fn in (cover_matrix, width):
        with pytest.raises(MaskError, match=r"not reflexive: order\[0, 0\] is False"):
            fn(jnp.asarray(strict))


def test_longest_chain_rejects_cycles():
    rel = np.zeros((3, 3), bool)
    rel[1, 0] = rel[2, 1] = rel[0, 2] = True
    with pytest.raises(MaskError, match=r"`relation` must be acyclic .*directed cycle"):
        longest_chain(jnp.asarray(rel))


@pytest.mark.parametrize("n", [100, 300])
def test_larger_sizes_match_networkx(n):
    # 100 is padded to the bucket 128; above 256 shapes are exact (no padding).
    rng = np.random.default_rng(n)
    m = np.tril(rng.random((n, n)) < 3.0 / n)
    for _ in range(n // 10):  # back edges close cycles
        i, j = sorted(rng.integers(0, n, size=2))
        m[i, j] = True
    r_ref = nx_reach(m)
    labels, c = classes(jnp.asarray(r_ref))
    assert set(class_sets(labels, c)) == {frozenset(s) for s in nx.strongly_connected_components(mask_graph(m))}
    q = quotient_order(jnp.asarray(r_ref), labels, c)
    cov = np.asarray(cover_matrix(q))
    cond = nx.condensation(mask_graph(m))
    ref = {
        (frozenset(cond.nodes[u]["members"]), frozenset(cond.nodes[v]["members"]))
        for u, v in nx.transitive_reduction(cond).edges
    }
    sets = class_sets(labels, c)
    assert {(sets[b], sets[a]) for a, b in zip(*np.nonzero(cov))} == ref
    assert longest_chain(jnp.asarray(cov)) == len(nx.dag_longest_path(cond))
    # Width: Dilworth via scipy against networkx's own maximum matching on the same bipartite graph.
    s = np.asarray(q) & ~np.eye(c, dtype=bool)
    bip = nx.Graph()
    bip.add_nodes_from(("L", a) for a in range(c))
    bip.add_nodes_from(("R", b) for b in range(c))
    bip.add_edges_from((("L", a), ("R", b)) for a, b in zip(*np.nonzero(s)))
    matching = nx.bipartite.hopcroft_karp_matching(bip, top_nodes=[("L", a) for a in range(c)])
    assert width(q) == c - len(matching) // 2
