"""Closed forms, product counts, routes, memory and bad inputs of the closure (spec hasse.md §1).

Convention: R[i, j] is True iff output i depends on input j (j reachable from i along edges
i -> j, one per A[i, j]). Property tests against networkx are in test_closure_properties.py.
"""

import math

import jax
import jax.numpy as jnp
import jaxtyping
import networkx as nx
import numpy as np
import pytest

import hassejax._checks
from hassejax.errors import MaskError, MemoryBudgetError, ParameterError
from hassejax.order import _bitpacked, _matmul, _routes, convergence_depth, layer_adjacency, reachability

ROUTES = ("matmul", "bitpacked")


# masks built here with NumPy (row = query q, column = key k)
def causal(n):
    q, k = np.indices((n, n))
    return k <= q


def full(n):
    return np.ones((n, n), dtype=bool)


def block_causal(n, block):
    q, k = np.indices((n, n))
    return k // block <= q // block


def window(n, left):
    """Each query sees itself and the `left` previous keys."""
    q, k = np.indices((n, n))
    return (k <= q) & (q - k <= left)


def chain(n):
    """Bidiagonal: query i sees i - 1 (and itself through the residual)."""
    return np.eye(n, k=-1, dtype=bool)


@pytest.fixture
def no_runtime_typecheck():
    """Call as a user does: without the jaxtyping import hook this suite runs with, so the
    library's own validation (not the annotation check) meets the bad input."""
    old = jaxtyping.config.jaxtyping_disable
    jaxtyping.config.update("jaxtyping_disable", True)
    yield
    jaxtyping.config.update("jaxtyping_disable", old)


# --------------------------------------------------------------------------- closed forms


def test_layer_adjacency_sets_diagonal_whatever_the_mask_says():
    m = np.zeros((2, 3, 3), dtype=bool)
    m[0, 2, 0] = True
    a = layer_adjacency(m)
    expected = m | np.eye(3, dtype=bool)
    np.testing.assert_array_equal(np.asarray(a), expected)
    assert a.dtype == jnp.bool_


@pytest.mark.parametrize("n", [1, 2, 3, 7, 16, 31, 33, 64])
def test_closed_masks_have_depth_one_and_are_their_own_closure(n):
    masks = [causal(n), full(n), block_causal(n, 3), np.eye(n, dtype=bool), np.zeros((n, n), bool)]
    assert np.asarray(convergence_depth(np.stack(masks))).tolist() == [1] * len(masks)
    for m in masks:
        a = m | np.eye(n, dtype=bool)
        for method in ROUTES:
            np.testing.assert_array_equal(np.asarray(reachability(m, method=method)), a)


@pytest.mark.parametrize("left", [1, 2, 3, 5, 8])
def test_sliding_window_depth_is_ceil_n_minus_1_over_left(left):
    sizes = list(range(1, 70))
    for n in sizes:
        expected = max(1, math.ceil((n - 1) / left))
        assert int(convergence_depth(window(n, left))) == expected, (n, left)
    for n in (1, 10, 41):
        for method in ROUTES:
            np.testing.assert_array_equal(np.asarray(reachability(window(n, left), method=method)), causal(n))
            depth = max(1, math.ceil((n - 1) / left))
            # R^(L) after L layers: query q sees keys q - L * left .. q
            for num_layers in {1, max(1, depth - 1), depth}:
                expected = window(n, min(n, num_layers * left))
                got = reachability(window(n, left), num_layers, method=method)
                np.testing.assert_array_equal(np.asarray(got), expected)


def test_chain_depth_is_n_minus_1():
    sizes = np.arange(1, 80)
    depths = [int(convergence_depth(chain(int(n)))) for n in sizes]
    assert depths == [max(1, int(n) - 1) for n in sizes]
    for method in ROUTES:
        np.testing.assert_array_equal(np.asarray(reachability(chain(50), method=method)), causal(50))


def test_spec_figure_2_window_of_width_one_converges_to_causal():
    """Spec §5 fig. 2: R^(1) … R^(L*) for a width-1 window, n = 6."""
    m = window(6, 1)
    assert int(convergence_depth(m)) == 5
    for num_layers in range(1, 6):
        np.testing.assert_array_equal(np.asarray(reachability(m, num_layers)), window(6, num_layers))


# --------------------------------------------------------------------------- product counts


def test_depth_uses_logarithmically_many_products_on_a_chain_of_1000():
    a = jnp.asarray(chain(1000) | np.eye(1000, dtype=bool))
    depth, products = _matmul._depth_matmul(a[None], _matmul._matmul_dtype())
    assert int(depth[0]) == 999
    # doubling to A^1024 (10 squarings + 1 confirming), binary search below 2^9 (9 products)
    assert int(products[0]) == 20 == 2 * math.ceil(math.log2(999))
    assert int(products[0]) < 0.05 * 999  # vs. 998 products for the naive sequence


def test_depth_product_count_is_exactly_two_ceil_log2_depth():
    lengths = np.arange(2, 65)
    stack = np.stack([_pad_chain(int(n), 64) for n in lengths])
    depth, products = _matmul._depth_matmul(jnp.asarray(stack), _matmul._matmul_dtype())
    np.testing.assert_array_equal(np.asarray(depth), lengths - 1)
    expected = [1 if d == 1 else 2 * math.ceil(math.log2(d)) for d in lengths - 1]
    np.testing.assert_array_equal(np.asarray(products), expected)


def _pad_chain(length, size):
    """A chain of `length` positions followed by isolated positions, as an adjacency (size, size)."""
    a = np.eye(size, dtype=bool)
    a[np.arange(1, length), np.arange(length - 1)] = True
    return a


def test_power_uses_binary_exponentiation():
    a = jnp.asarray(chain(1000) | np.eye(1000, dtype=bool))
    for num_layers in (1, 2, 3, 7, 64, 100, 513, 998, 999, 5000):
        r, products = _matmul._power_matmul(a, num_layers, _matmul._matmul_dtype())
        row = np.asarray(r[999])
        assert row.sum() == min(num_layers, 999) + 1 and row[999 - min(num_layers, 999)]
        assert int(products) <= 2 * math.floor(math.log2(num_layers)), num_layers


def test_closure_squarings_are_ceil_log2_depth_plus_one():
    for length in (2, 3, 5, 17, 33, 64):
        r, products = _matmul._closure_matmul(jnp.asarray(_pad_chain(length, 64)), _matmul._matmul_dtype())
        assert int(products) == math.ceil(math.log2(length - 1)) + 1
        np.testing.assert_array_equal(np.asarray(r)[:length, :length], causal(length))


def test_bitpacked_limit_needs_one_batch_per_chain_link():
    _, batches = _bitpacked.closure_bitpacked(chain(300) | np.eye(300, dtype=bool))
    assert batches == 300
    _, batches = _bitpacked.closure_bitpacked(np.eye(300, dtype=bool))
    assert batches == 1


# --------------------------------------------------------------------------- routes


def _nx_closure(adj):
    n = adj.shape[0]
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(*np.nonzero(adj)))
    out = np.zeros((n, n), dtype=bool)
    for i, j in nx.transitive_closure(g, reflexive=True).edges():
        out[i, j] = True
    return out


@pytest.mark.parametrize("relabel", ["shuffle", "reverse"])
def test_bitpacked_orders_the_condensation_whatever_scipy_labels_say(monkeypatch, relabel):
    """Force the fallback branches: labels in no topological order (Kahn's generations), or in
    the reverse one."""
    real = _bitpacked.connected_components
    rng = np.random.default_rng(3)

    def relabelled(*args, **kwargs):
        num, labels = real(*args, **kwargs)
        perm = rng.permutation(num) if relabel == "shuffle" else num - 1 - np.arange(num)
        return num, perm[labels]

    monkeypatch.setattr(_bitpacked, "connected_components", relabelled)
    for trial in range(30):
        n = int(rng.integers(2, 60))
        adj = (rng.random((n, n)) < rng.uniform(0.01, 0.15)) | np.eye(n, dtype=bool)
        if trial % 2:
            perm = rng.permutation(n)
            adj = np.tril(adj)[np.ix_(perm, perm)]  # a DAG not in index order
        np.testing.assert_array_equal(_bitpacked.closure_bitpacked(adj)[0], _nx_closure(adj))


def test_or_segments_in_small_chunks_equals_a_loop(monkeypatch):
    monkeypatch.setattr(_bitpacked, "_CHUNK_WORDS", 6)  # rows of 2 words: 3 gathered rows a chunk
    rng = np.random.default_rng(7)
    rows = rng.integers(0, 2**63, size=(40, 2), dtype=np.uint64)
    lengths = rng.integers(1, 9, size=10)
    seg = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    ch = rng.integers(0, 30, size=int(lengths.sum()))
    target = np.arange(30, 40)
    out = rows.copy()
    _bitpacked._or_segments(out, target, rows, ch, seg)
    expected = rows.copy()
    for p, (s0, length) in enumerate(zip(seg, lengths)):
        expected[target[p]] |= np.bitwise_or.reduce(rows[ch[s0 : s0 + length]], axis=0)
    np.testing.assert_array_equal(out, expected)


def test_bitpacked_routes_in_small_chunks(monkeypatch):
    """Bounded-memory gathers (forced tiny) give the same closures and products."""
    monkeypatch.setattr(_bitpacked, "_CHUNK_WORDS", 5)
    monkeypatch.setattr(_bitpacked, "_PRUNE_MIN_WORDS", 4)  # exercise the pruned path too
    rng = np.random.default_rng(11)
    for _ in range(10):
        n = int(rng.integers(2, 90))
        adj = (rng.random((n, n)) < rng.uniform(0.02, 0.4)) | np.eye(n, dtype=bool)
        np.testing.assert_array_equal(_bitpacked.closure_bitpacked(adj)[0], _nx_closure(adj))
        square = (adj.astype(np.int64) @ adj.astype(np.int64)) > 0
        np.testing.assert_array_equal(_bitpacked.product_bitpacked([adj, adj])[0], square)
    np.testing.assert_array_equal(_bitpacked.closure_bitpacked(causal(200))[0], causal(200))


def test_generations_match_networkx():
    rng = np.random.default_rng(5)
    n = 80
    adj = np.tril(rng.random((n, n)) < 0.05, k=-1)[np.ix_(*(2 * [rng.permutation(n)]))]
    src, dst = np.nonzero(adj)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    gen = _bitpacked._generations(indptr, dst.astype(np.int64), n)
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(dst, src))  # reversed: generation 0 = no out-edge in the mask graph
    for level, nodes in enumerate(nx.topological_generations(g)):
        assert all(gen[v] == level for v in nodes)


def test_auto_prefers_bitpacked_for_large_sparse_masks_on_cpu():
    n = 2048
    for nnz in (n * 65, n * 21, n * (n + 1) // 2):  # window 64, random 1 %, causal
        matmul, bitpacked = _routes._closure_costs(n, nnz)
        assert bitpacked < matmul
    matmul, bitpacked = _routes._closure_costs(8, 20)
    assert matmul < bitpacked


def test_padding_changes_neither_closure_nor_depth():
    for n in (1, 5, 31, 32, 33, 200):
        assert _matmul._padded_size(n) >= n and _matmul._padded_size(n) % 32 == 0
    assert _matmul._padded_size(2048) == 2048 and _matmul._padded_size(1500) == 1500
    m = window(37, 4)
    np.testing.assert_array_equal(np.asarray(reachability(m, method="matmul")), causal(37))
    assert int(convergence_depth(m)) == 9


# --------------------------------------------------------------------------- memory


def test_memory_estimate_raises_before_allocating(monkeypatch):
    monkeypatch.setattr(hassejax._checks, "available_memory_bytes", lambda: 2**20)
    m = causal(256)
    for call in (
        lambda: reachability(m, method="matmul"),
        lambda: reachability(m, 3, method="matmul"),
        lambda: reachability(m, method="bitpacked"),
        lambda: convergence_depth(m),
    ):
        with pytest.raises(MemoryBudgetError, match=r"`mask`: .* n = 256.* GiB"):
            call()
    with pytest.raises(MemoryBudgetError, match=r"`layer_masks`: the product of 3 layer masks"):
        reachability(None, layer_masks=[m, m, m], method="matmul")


def test_n_16384_fits_in_24_gib():
    """DESIGN.md "Scale": closures up to n = 16384 fit on a 24 GiB CPU machine."""
    n, budget = 16384, 0.8 * 24 * 2**30
    assert _routes._matmul_bytes(n, 1, 0, jnp.float32) < budget
    assert _routes._matmul_bytes(n, 1, _matmul._num_stored_powers(n), jnp.float32) < budget
    assert _bitpacked.bitpacked_bytes(n, n * (n + 1) // 2) + 2 * n * n < budget


# --------------------------------------------------------------------------- bad inputs


BAD_MASKS = [
    (np.ones((3, 4), bool), "must be square"),
    (np.ones((3, 3), np.float32), "dtype bool"),
    (np.ones((3,), bool), "rank"),
]


@pytest.mark.parametrize("bad, fragment", BAD_MASKS)
def test_bad_masks(no_runtime_typecheck, bad, fragment):
    for call in (layer_adjacency, reachability, convergence_depth, lambda m: reachability(m, 2)):
        with pytest.raises(MaskError, match=fragment) as info:
            call(bad)
        assert "`mask`" in str(info.value)


def test_bad_mask_meets_the_annotation_first_under_runtime_type_checks():
    with pytest.raises(TypeError):
        reachability(np.ones((3, 3), np.float32))


@pytest.mark.parametrize(
    "layers, fragment",
    [
        ([causal(3), causal(4)], r"same shape .*layer_masks\[1\] has shape \(4, 4\)"),
        ([causal(3), np.ones((3, 3), np.int8)], r"`layer_masks\[1\]` must have dtype bool"),
        ([causal(3), np.ones((3, 4), bool)], r"`layer_masks\[1\]` must be square"),
        ([], "at least one mask"),
        (causal(3), r"leading layer axis, shape \(L, \*batch, n, n\); got an array of shape \(3, 3\)"),
    ],
)
def test_bad_layer_masks(no_runtime_typecheck, layers, fragment):
    with pytest.raises(MaskError, match=fragment):
        reachability(None, layer_masks=layers)


def test_mask_and_layer_masks_are_exclusive(no_runtime_typecheck):
    with pytest.raises(MaskError, match="not both"):
        reachability(causal(3), layer_masks=[causal(3)])
    with pytest.raises(MaskError, match="unless `layer_masks` is given"):
        reachability(None)
    with pytest.raises(MaskError, match="unless `layer_masks` is given"):
        reachability()
    # `mask` defaults to None: layer masks alone, by keyword (was a raw TypeError: a missing positional argument)
    np.testing.assert_array_equal(
        np.asarray(reachability(layer_masks=[causal(3), causal(3)])),
        np.asarray(reachability(None, layer_masks=[causal(3), causal(3)])),
    )


@pytest.mark.parametrize(
    "num_layers, fragment",
    [(0, ">= 1"), (-2, ">= 1"), (2.5, "positive int"), ("3", "positive int"), (True, "positive int")],
)
def test_bad_num_layers(no_runtime_typecheck, num_layers, fragment):
    with pytest.raises(ParameterError, match=fragment) as info:
        reachability(causal(4), num_layers)
    assert "`num_layers`" in str(info.value)


def test_concrete_integer_scalars_are_layer_counts(no_runtime_typecheck):
    """A fresh user: ``jnp.int32(3)`` was refused where ``np.uint8(3)`` was taken; a JAX bool or float scalar still is."""
    for k in (np.uint8(3), jnp.int32(3), jnp.asarray(3, jnp.int64)):
        np.testing.assert_array_equal(np.asarray(reachability(chain(5), k)), window(5, 3))
    for bad in (jnp.asarray(True), jnp.asarray(3.0), jnp.asarray([3])):
        with pytest.raises(ParameterError, match="`num_layers` must be a positive int"):
            reachability(chain(5), bad)


def test_traced_num_layers_is_told_to_be_static(no_runtime_typecheck):
    """Under jit, `num_layers` must be static: the error says so (it said "must be a positive int ... got JitTracer",
    a review); marked static, the same call works and equals the eager one."""
    with pytest.raises(ParameterError, match=r"`num_layers` must be a concrete .*\(static_argnames=\('num_layers',\)"):
        jax.jit(lambda m, k: reachability(m, k))(causal(4), 2)
    jitted = jax.jit(reachability, static_argnames=("num_layers",))
    np.testing.assert_array_equal(np.asarray(jitted(chain(5), num_layers=2)), window(5, 2))


def test_num_layers_must_match_layer_masks(no_runtime_typecheck):
    with pytest.raises(ParameterError, match=r"equal to the number of `layer_masks` \(2\); got 3"):
        reachability(None, 3, layer_masks=[causal(4), causal(4)])
    np.testing.assert_array_equal(np.asarray(reachability(None, 2, layer_masks=[chain(4), chain(4)])), window(4, 2))


def test_bad_method(no_runtime_typecheck):
    with pytest.raises(
        ParameterError, match=r"`method` must be one of \('auto', 'matmul', 'bitpacked', 'structured'\); got 'fast'"
    ):
        reachability(causal(4), method="fast")


def test_numpy_integer_num_layers_is_accepted(no_runtime_typecheck):
    np.testing.assert_array_equal(np.asarray(reachability(chain(5), np.int64(2))), window(5, 2))
