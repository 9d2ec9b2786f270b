"""The bit-packed convergence depth (issue 10): ``L*`` and ``R`` in one pass, exactly.

``L*`` = the largest shortest-path length over reachable pairs i ≠ j (1 if none), spec hasse.md
§1.3. Checked against networkx (all-pairs shortest paths; a few hundred random small graphs with
cycles, self-loops, empty masks, n = 1), against SciPy's shortest paths at moderate n with every
kernel path forced (chunks, step loop and its coverage checks, narrow and wide blocks, sparse and
dense levels, child pruning on and off), against the structured route on windows, bands and
chains, and against the matmul route through ``convergence_depth`` (per-mask routes in a batch,
jit and vmap). No wall-clock assertions: timings are in the benchmark.
"""

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import shortest_path

import hassejax.order._bitpacked as bp
import hassejax.order._bitpacked_depth as bpd
import hassejax.order._bitpacked_levels as bpl
import hassejax.order.depth as depth_module
from hassejax.errors import MemoryBudgetError, ParameterError
from hassejax.masks import structured
from hassejax.order import convergence_depth, reachability
from hassejax.order._bitpacked import closure_bitpacked
from hassejax.order._bitpacked_depth import depth_bitpacked


def adjacency(mask: np.ndarray) -> np.ndarray:
    return mask | np.eye(mask.shape[0], dtype=bool)


def nx_depth_and_closure(mask: np.ndarray) -> tuple[int, np.ndarray]:
    """``L*`` and ``R`` from networkx's all-pairs shortest path lengths (edge i -> j per A[i, j])."""
    n = mask.shape[0]
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(*np.nonzero(mask)))
    depth, r = 1, np.zeros((n, n), dtype=bool)
    for i, row in nx.all_pairs_shortest_path_length(g):
        for j, d in row.items():
            r[i, j] = True
            depth = max(depth, d)
    return depth, r | np.eye(n, dtype=bool)


def scipy_depth(mask: np.ndarray) -> int:
    dist = shortest_path(sp.csr_array(mask.astype(np.int8)), unweighted=True, directed=True)
    np.fill_diagonal(dist, np.inf)
    finite = dist[np.isfinite(dist)]
    return max(1, int(finite.max())) if finite.size else 1


def random_mask(rng: np.random.Generator, n: int, kind: str, p: float) -> np.ndarray:
    """A random bool (n, n) mask; the diagonal is random too (self-loops change nothing)."""
    m = rng.random((n, n)) < p
    if kind == "lower":
        m = np.tril(m)
    elif kind == "symmetric":  # bidirectional: large strongly connected classes
        m = m | m.T
    elif kind == "chain":  # a permuted chain plus a few edges: long paths, some cycles
        perm = rng.permutation(n)
        m = rng.random((n, n)) < p / 8
        m[perm[1:], perm[:-1]] = True
    elif kind == "cycles":  # a few directed cycles joined by sparse edges: distances inside classes
        perm = rng.permutation(n)
        m = rng.random((n, n)) < p / 10
        for part in np.array_split(perm, max(1, n // 7)):
            m[part, np.roll(part, 1)] = True
    elif kind == "window":  # rows of a few runs (child pruning applies)
        q, k = np.indices((n, n))
        w = int(rng.integers(1, 6))
        m = ((k <= q) & (q - k <= w)) | (rng.random((n, n)) < p / 20)
        if rng.random() < 0.5:
            m |= (k < 2) & (k <= q)  # sink tokens
    elif kind == "empty":
        m = np.zeros((n, n), dtype=bool)
    return m


KINDS = ["directed", "lower", "symmetric", "chain", "cycles", "window", "empty"]


@st.composite
def masks(draw, max_n: int = 40):
    n = draw(st.integers(1, max_n))
    kind = draw(st.sampled_from(KINDS))
    p = draw(st.floats(0.0, 0.4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return random_mask(rng, n, kind, p)


@settings(max_examples=300)
@given(masks())
def test_depth_and_closure_equal_networkx(mask):
    expected_depth, expected_r = nx_depth_and_closure(mask)
    depth, r = depth_bitpacked(adjacency(mask))
    assert depth == expected_depth
    assert 1 <= depth <= max(1, mask.shape[0] - 1)
    np.testing.assert_array_equal(r, expected_r)
    assert depth_bitpacked(adjacency(mask), return_closure=False) == (depth, None)


@pytest.mark.parametrize("n", [7, 20, 32])
def test_depth_equals_matmul_route(n):
    """200 random masks per size, against the dense matmul route (doubling + binary search)."""
    rng = np.random.default_rng(n)
    batch = np.stack([random_mask(rng, n, KINDS[t % len(KINDS)], float(rng.uniform(0, 0.4))) for t in range(200)])
    expected = np.asarray(convergence_depth(batch, method="matmul"))
    np.testing.assert_array_equal([depth_bitpacked(adjacency(m))[0] for m in batch], expected)


@pytest.mark.parametrize("n", [1, 2, 3, 64, 65])
def test_edge_cases(n):
    eye = np.eye(n, dtype=bool)
    assert depth_bitpacked(eye)[0] == 1
    full = np.ones((n, n), dtype=bool)
    depth, r = depth_bitpacked(full)
    assert depth == 1 and r.all()
    chain = adjacency(np.eye(n, k=-1, dtype=bool))
    depth, r = depth_bitpacked(chain)
    assert depth == max(1, n - 1)
    np.testing.assert_array_equal(r, np.tril(np.ones((n, n), dtype=bool)))
    cycle = adjacency(np.roll(np.eye(n, dtype=bool), 1, axis=1))  # i -> i + 1 (mod n)
    assert depth_bitpacked(cycle)[0] == max(1, n - 1)


# every kernel path, forced by shrinking the module's constants
CONFIGS = {
    "defaults": {},
    "tiny_chunks": {"_DEPTH_CHUNK_PAIRS": 331, "_CHUNK_WORDS": 50},
    "step_loop_everywhere": {"_DEPTH_STEP_MIN_BLOCK": 1, "_DEPTH_STEP_MIN_WORDS": 1, "_DEPTH_CHECK_STEPS": 1},
    "step_loop_with_tail": {"_DEPTH_STEP_MIN_BLOCK": 2, "_DEPTH_STEP_MIN_WORDS": 24, "_DEPTH_CHECK_STEPS": 2},
    "reduceat_only": {"_DEPTH_STEP_MIN_BLOCK": 10**9},
    "always_sparse": {"_DEPTH_SPARSE_MIN": 10**12},
    "never_sparse": {"_DEPTH_SPARSE_MIN": 0, "_DEPTH_SPARSE_PER_WORD": 0.0},
    "no_pruning": {"_DEPTH_PRUNE_PER_WORD": -1},
    "narrow_blocks": {"_DEPTH_PAIR_COST": 0.0, "_DEPTH_KEPT_COST": 0.0},
    "wide_blocks": {"_DEPTH_WORD_COST": 0.0, "_DEPTH_KEPT_COST": 0.0},
}


@pytest.mark.parametrize("config", list(CONFIGS))
def test_kernel_paths_equal_scipy(config, monkeypatch):
    for name, value in CONFIGS[config].items():
        for module in (bp, bpl, bpd):  # every module that reads the constant
            if hasattr(module, name):
                monkeypatch.setattr(module, name, value)
    rng = np.random.default_rng(sorted(CONFIGS).index(config))
    for t, kind in enumerate(KINDS[:-1] + ["lower", "directed"]):
        n = int(rng.integers(60, 300)) if t % 2 else int(rng.integers(500, 1100))
        p = float(10 ** rng.uniform(-2.7, -1.3))
        mask = random_mask(rng, n, kind, p)
        depth, r = depth_bitpacked(adjacency(mask))
        assert depth == scipy_depth(mask), (config, kind, n, p)
        np.testing.assert_array_equal(r, closure_bitpacked(adjacency(mask))[0])


@pytest.mark.parametrize(
    "name, build",
    [
        ("window", lambda n: structured.sliding_window(n, 37)),
        ("window_sinks", lambda n: structured.sliding_window(n, 50) | structured.attention_sinks(n, 4)),
        ("band", lambda n: structured.sliding_window(n, 20, 20)),
        ("chain", lambda n: structured.sliding_window(n, 1)),
        ("causal", lambda n: structured.sliding_window(n, n)),
    ],
)
def test_runs_equal_structured_route(name, build):
    """Windows, bands and chains (child pruning leaves one or two children a node) at n = 1500."""
    mask = build(1500)
    dense = np.asarray(mask.to_dense())
    expected = convergence_depth(mask)  # structured route
    depth, r = depth_bitpacked(adjacency(dense))
    assert depth == expected
    np.testing.assert_array_equal(r, np.asarray(reachability(mask).to_dense()))


def test_pruning_keeps_one_or_two_children_for_windows():
    n = 600
    dense = adjacency(np.asarray((structured.sliding_window(n, 40) | structured.attention_sinks(n, 3)).to_dense()))
    indptr, src, dst = bp._edges(dense)
    frontier = np.zeros((n, bpd.padded_words(n)), dtype=np.uint64)
    bpl._set_bits(frontier, src, dst)
    kept_ptr, kept = bpl._prune_children(indptr, dst, frontier)
    assert np.diff(kept_ptr).max() <= 2 < np.diff(indptr).max()
    assert set(kept.tolist()) <= set(dst.tolist())


def test_pruning_keeps_four_corners_of_a_2d_neighbourhood():
    """A 7 x 7 neighbourhood on a 2-D grid: the greedy rounds leave the four corners (the first and last useful
    children leave most of the 48 uncovered), at most 6 near the border; ``L*`` still equals SciPy's."""
    mask = np.asarray(structured.natten_2d(20, 23, 7, 7).to_dense())
    dense = adjacency(mask)
    n = dense.shape[0]
    indptr, src, dst = bp._edges(dense)
    frontier = np.zeros((n, bpd.padded_words(n)), dtype=np.uint64)
    bpl._set_bits(frontier, src, dst)
    kept_ptr, kept = bpl._prune_children(indptr, dst, frontier)
    deg = np.diff(kept_ptr).reshape(20, 23)
    assert deg[3:-3, 3:-3].max() == 4 and deg.max() <= 6 and np.diff(indptr).max() == 48
    assert depth_bitpacked(dense, return_closure=False)[0] == scipy_depth(mask)


def test_convergence_depth_routes_agree_on_batches():
    rng = np.random.default_rng(7)
    for n in (1, 5, 30):  # one padded size for the matmul route; larger n are checked above
        batch = np.stack([random_mask(rng, n, kind, 0.05) for kind in ("directed", "lower", "cycles", "empty")])
        expected = [nx_depth_and_closure(m)[0] for m in batch]
        for method in ("auto", "matmul", "bitpacked", "structured"):
            got = convergence_depth(batch, method=method)
            assert got.shape == (4,) and got.dtype == jnp.int32
            np.testing.assert_array_equal(np.asarray(got), expected, err_msg=method)
        grid = convergence_depth(batch.reshape(2, 2, n, n), method="bitpacked")
        np.testing.assert_array_equal(np.asarray(grid), np.reshape(expected, (2, 2)))
        single = convergence_depth(batch[0], method="bitpacked")
        assert single.shape == () and int(single) == expected[0]


def test_auto_route_per_mask_of_a_batch(monkeypatch):
    """``auto`` decides mask by mask: here odd nonzero counts go bit-packed, even ones matmul."""
    routes = []
    real_host_depth = depth_module._host_depth

    def host_depth(a):
        routes.append(np.asarray(a).shape[0])
        return real_host_depth(a)

    monkeypatch.setattr(depth_module, "_depth_costs", lambda n, nnz: (0.0, 1.0) if nnz % 2 == 0 else (1.0, 0.0))
    monkeypatch.setattr(depth_module, "_host_depth", host_depth)
    rng = np.random.default_rng(3)
    batch = np.stack([random_mask(rng, 24, "chain", 0.1) for _ in range(6)])
    nnz = np.count_nonzero(adjacency_batch(batch), axis=(-2, -1))
    assert 0 < (nnz % 2).sum() < 6
    expected = [nx_depth_and_closure(m)[0] for m in batch]
    np.testing.assert_array_equal(np.asarray(convergence_depth(batch)), expected)
    assert routes == [int((nnz % 2).sum())]


def adjacency_batch(batch: np.ndarray) -> np.ndarray:
    return batch | np.eye(batch.shape[-1], dtype=bool)


def test_cost_model_prefers_bitpacked_for_large_sparse_masks():
    n = 8192
    matmul, bitpacked = depth_module._depth_costs(n, n + n * n // 200)  # random 1 % lower-triangular
    assert bitpacked < matmul
    matmul, bitpacked = depth_module._depth_costs(16, 16 * 8)
    assert matmul < bitpacked


def test_traced_bitpacked_route_equals_matmul():
    rng = np.random.default_rng(11)
    batch = np.stack([random_mask(rng, 20, kind, 0.1) for kind in ("directed", "chain", "cycles")])
    expected = np.asarray(convergence_depth(batch, method="matmul"))
    stacked = jnp.asarray(batch)
    jitted = jax.jit(lambda m: convergence_depth(m, method="bitpacked"))(stacked)
    np.testing.assert_array_equal(np.asarray(jitted), expected)
    mapped = jax.vmap(lambda m: convergence_depth(m, method="bitpacked"))(stacked)
    np.testing.assert_array_equal(np.asarray(mapped), expected)
    auto = jax.jit(convergence_depth)(stacked)  # auto under a trace: matmul
    np.testing.assert_array_equal(np.asarray(auto), expected)


def test_errors_and_empty_batches():
    with pytest.raises(ParameterError, match="method"):
        convergence_depth(np.eye(3, dtype=bool), method="fast")
    # an IntervalMask on a dense route runs there (converted after a memory check), as in flow_summary
    assert convergence_depth(structured.sliding_window(8, 2), method="bitpacked") == 4
    with pytest.raises(ParameterError, match="concrete"):
        jax.jit(lambda m: convergence_depth(m, method="structured"))(jnp.eye(4, dtype=bool))
    for method in ("auto", "matmul", "bitpacked", "structured"):
        d = convergence_depth(np.zeros((0, 3, 5, 5), bool), method=method)
        assert d.shape == (0, 3) and d.dtype == jnp.int32


@pytest.mark.parametrize("method", ["auto", "bitpacked", "structured"])
def test_huge_mask_raises_before_copying(method):
    big = np.broadcast_to(np.array(True), (300_000, 300_000))  # zero strides: costs nothing
    with pytest.raises(MemoryBudgetError) as info:
        convergence_depth(big, method=method)
    msg = str(info.value)
    assert msg.startswith("`mask`") and "n = 300000" in msg and "GiB" in msg and "IntervalMask" in msg


def test_memory_estimate_grows_with_n_and_nnz():
    assert (
        bpd.depth_bitpacked_bytes(8192, 10**6)
        > bpd.depth_bitpacked_bytes(8192, 10**4)
        > bpd.depth_bitpacked_bytes(1024, 10**4)
    )
    assert bpd.padded_words(1) == 1 and bpd.padded_words(300) == 8 and bpd.padded_words(8192) == 128
    assert bpd.padded_words(3000) % 16 == 0


def boolean_powers(a: np.ndarray) -> list[np.ndarray]:
    """[A, A^2, …, R] by NumPy Boolean products (R once, at index L* - 1)."""
    out = [a]
    while True:
        nxt = (out[-1].astype(np.int32) @ a.astype(np.int32)) > 0
        if np.array_equal(nxt, out[-1]):
            return out
        out.append(nxt)


@pytest.mark.parametrize("config", ["defaults", "always_sparse", "never_sparse", "no_pruning"])
def test_power_and_layer_counts_equal_numpy_powers(config, monkeypatch):
    """``A^L`` as the level search stopped at ``L`` (:func:`power_bitpacked`) and the row counts of every requested
    ``A^L`` from ``L*``'s search (:func:`depth_counts_bitpacked`), with ``R`` and its counts, equal NumPy Boolean powers: random masks with cycles
    and bidirectional edges, windows, a 2-D neighbourhood and a dilated window; ``L = 1``, ``L*`` and beyond."""
    for name, value in CONFIGS[config].items():
        for module in (bp, bpl, bpd):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, value)
    rng = np.random.default_rng(3)
    cases = [random_mask(rng, int(rng.integers(2, 90)), kind, 0.04) for kind in KINDS]
    cases += [
        np.asarray(structured.natten_2d(7, 9, 3, 3).to_dense()),
        np.asarray(structured.dilated(80, 6, 3).to_dense()),
        np.ones((1, 1), dtype=bool),
    ]
    for mask in cases:
        a = adjacency(mask)
        powers = boolean_powers(a)
        lstar = len(powers)
        wanted = sorted({1, 2, 3, max(1, lstar - 1), lstar, lstar + 4})
        for num in wanted:
            r, levels = bpd.power_bitpacked(a, num)
            np.testing.assert_array_equal(r, powers[min(num, lstar) - 1])
            assert levels == min(num, lstar)
        depth, counts, closure, limit = bpd.depth_counts_bitpacked(a, wanted)
        assert depth == lstar and sorted(counts) == wanted
        for num in wanted:
            np.testing.assert_array_equal(counts[num], powers[min(num, lstar) - 1].sum(axis=1))
        np.testing.assert_array_equal(closure, powers[-1])  # R from the same search
        np.testing.assert_array_equal(limit, powers[-1].sum(axis=1))
