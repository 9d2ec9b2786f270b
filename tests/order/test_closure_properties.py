"""Property tests of the closure against networkx (spec hasse.md §1).

Convention checked throughout: the mask graph has an edge i -> j for every A[i, j] (query i
attends to key j), and R[i, j] is True iff j is reachable from i (output i depends on input j).
Over 500 random masks in all (n <= 40, directed, with cycles).
"""

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hassejax.order import convergence_depth, layer_adjacency, reachability

ROUTES = ("matmul", "bitpacked")
jit_reachability = jax.jit(reachability, static_argnames=("num_layers", "method"))


def random_mask(rng: np.random.Generator, n: int, kind: str, p: float) -> np.ndarray:
    """A random bool (n, n) mask of a given flavour (diagonal random: A sets it anyway)."""
    m = rng.random((n, n)) < p
    if kind == "lower":  # a DAG in index order (causal-type)
        m = np.tril(m)
    elif kind == "symmetric":  # bidirectional attention: many cycles
        m = m | m.T
    elif kind == "chain":  # a permuted chain with a few extra edges: long paths, some cycles
        perm = rng.permutation(n)
        m = rng.random((n, n)) < p / 8
        m[perm[1:], perm[:-1]] = True
    elif kind == "permuted_dag":  # a DAG whose topological order is not the index order
        perm = rng.permutation(n)
        m = np.tril(m)[np.ix_(perm, perm)]
    return m


@st.composite
def masks(draw, max_n: int = 40, batch: int | None = None, sizes: tuple[int, ...] | None = None):
    n = draw(st.sampled_from(sizes) if sizes else st.integers(1, max_n))
    kind = draw(st.sampled_from(["directed", "lower", "symmetric", "chain", "permuted_dag"]))
    p = draw(st.floats(0.0, 0.3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if batch is None:
        return random_mask(rng, n, kind, p)
    return np.stack([random_mask(rng, n, kind, p) for _ in range(batch)])


def mask_graph(mask: np.ndarray) -> nx.DiGraph:
    """The graph of A = M | I with an edge i -> j for every A[i, j]."""
    n = mask.shape[0]
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(*np.nonzero(mask | np.eye(n, dtype=bool))))
    return g


def nx_closure(mask: np.ndarray) -> np.ndarray:
    n = mask.shape[0]
    out = np.zeros((n, n), dtype=bool)
    for i, j in nx.transitive_closure(mask_graph(mask), reflexive=True).edges():
        out[i, j] = True
    return out


def nx_distances(mask: np.ndarray) -> np.ndarray:
    """Shortest-path lengths i -> j (10**9 where unreachable)."""
    n = mask.shape[0]
    dist = np.full((n, n), 10**9)
    for i, row in nx.all_pairs_shortest_path_length(mask_graph(mask)):
        for j, d in row.items():
            dist[i, j] = d
    return dist


@settings(max_examples=150)
@given(masks())
def test_limit_equals_networkx_transitive_closure(mask):
    expected = nx_closure(mask)
    for method in ROUTES + ("auto",):
        r = reachability(mask, method=method)
        assert r.dtype == jnp.bool_ and r.shape == mask.shape
        np.testing.assert_array_equal(np.asarray(r), expected, err_msg=method)


@settings(max_examples=120)
@given(masks())
def test_depth_and_finite_powers(mask):
    """L* = largest shortest-path length; R^(L) = {dist <= L}; monotone; equal to R from L* on."""
    n = mask.shape[0]
    dist = nx_distances(mask)
    reachable = (dist <= n) & ~np.eye(n, dtype=bool)
    expected_depth = max(1, int(dist[reachable].max())) if reachable.any() else 1

    depth = convergence_depth(mask)
    assert depth.shape == () and jnp.issubdtype(depth.dtype, jnp.integer)
    assert int(depth) == expected_depth
    assert 1 <= int(depth) <= max(1, n - 1)

    limit = np.asarray(reachability(mask))
    previous = None
    for num_layers in range(1, expected_depth + 3):
        expected = dist <= num_layers
        for method in ROUTES:
            r = np.asarray(reachability(mask, num_layers, method=method))
            np.testing.assert_array_equal(r, expected, err_msg=f"{method}, L={num_layers}")
        if previous is not None:
            assert not (previous & ~r).any()  # monotone in L
        if num_layers >= expected_depth:
            np.testing.assert_array_equal(r, limit)
        elif num_layers == expected_depth - 1:
            assert (r != limit).any()
        previous = r


@settings(max_examples=60)
@given(masks(max_n=24), st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_layer_masks_equal_sequential_product(first, num, seed):
    n = first.shape[0]
    rng = np.random.default_rng(seed)
    layers = [first] + [random_mask(rng, n, "directed", float(rng.uniform(0, 0.3))) for _ in range(num - 1)]
    adj = [np.asarray(layer_adjacency(m)) for m in layers]
    expected = adj[0]
    for a in adj[1:]:  # layer l acts after layer l - 1: R <- A_l ⊗ R
        expected = (a.astype(np.int64) @ expected.astype(np.int64)) > 0
    for method in ROUTES:
        np.testing.assert_array_equal(np.asarray(reachability(None, layer_masks=layers, method=method)), expected)
        stacked = reachability(None, layer_masks=np.stack(layers), method=method)
        np.testing.assert_array_equal(np.asarray(stacked), expected)
    # the same mask in every layer is R^(L)
    same = reachability(None, layer_masks=[first] * num)
    np.testing.assert_array_equal(np.asarray(same), np.asarray(reachability(first, num)))


@settings(max_examples=40)
@given(masks(batch=4, sizes=(1, 4, 9, 16)), st.integers(1, 6))
def test_batches_and_vmap_equal_per_mask(batch, num_layers):
    # A few sizes only: every new n under vmap is a new trace and compilation.
    per_limit = [np.asarray(reachability(m)) for m in batch]
    per_power = [np.asarray(reachability(m, num_layers)) for m in batch]
    per_depth = [int(convergence_depth(m)) for m in batch]
    stacked = jnp.asarray(batch)
    for method in ROUTES:
        np.testing.assert_array_equal(np.asarray(reachability(batch, method=method)), per_limit)
        np.testing.assert_array_equal(np.asarray(reachability(batch, num_layers, method=method)), per_power)
        vm = jax.vmap(lambda m, method=method: reachability(m, method=method))(stacked)
        np.testing.assert_array_equal(np.asarray(vm), per_limit)
        vm = jax.vmap(lambda m, method=method: reachability(m, num_layers, method=method))(stacked)
        np.testing.assert_array_equal(np.asarray(vm), per_power)
    np.testing.assert_array_equal(np.asarray(convergence_depth(batch)), per_depth)
    np.testing.assert_array_equal(np.asarray(jax.vmap(convergence_depth)(stacked)), per_depth)
    np.testing.assert_array_equal(np.asarray(jit_reachability(stacked)), per_limit)
    # two leading batch axes, and per-layer masks carrying a batch axis
    grid = batch.reshape(2, 2, *batch.shape[1:])
    np.testing.assert_array_equal(np.asarray(convergence_depth(grid)), np.reshape(per_depth, (2, 2)))
    layered = reachability(None, layer_masks=[batch] * num_layers)
    np.testing.assert_array_equal(np.asarray(layered), per_power)
