"""Per-head masks in the order analysis: `head_axis` ORs one layer's heads (spec hasse.md §1.1).

A layer whose heads have masks ``M_1 … M_H`` has adjacency ``(M_1 | … | M_H) | I``. Every
entry point with `head_axis` is checked against the same call on the OR-ed mask and against
independent networkx / NumPy references on small random masks.
"""

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hassejax.errors import MaskError, MemoryBudgetError, ParameterError
from hassejax.masks import IntervalMask, from_spec
from hassejax.order import HasseDiagram, convergence_depth, flow_summary, reachability
from hassejax.order.closure import heads_union

# ------------------------------------------------------------------ independent references


def _graph(mask: np.ndarray) -> nx.DiGraph:
    """Edges i -> j for M[i, j] (i attends to j) and the residual i -> i."""
    n = mask.shape[-1]
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(*np.nonzero(mask)))
    g.add_edges_from((i, i) for i in range(n))
    return g


def _nx_reach(mask: np.ndarray, num_layers: int | None) -> np.ndarray:
    """R^(L) (walks of at most L edges; any length for None) of one (n, n) mask, by BFS."""
    n = mask.shape[-1]
    g = _graph(mask)
    out = np.zeros((n, n), bool)
    for i in range(n):
        for j in nx.single_source_shortest_path_length(g, i, cutoff=num_layers):
            out[i, j] = True
    return out


def _nx_depth(mask: np.ndarray) -> int:
    """L*: the largest shortest-path length between two positions (at least 1)."""
    lengths = dict(nx.all_pairs_shortest_path_length(_graph(mask)))
    return max([1] + [d for row in lengths.values() for d in row.values()])


def _nx_classes(mask: np.ndarray) -> set[frozenset[int]]:
    return {frozenset(c) for c in nx.strongly_connected_components(_graph(mask))}


def _np_product(layers: list[np.ndarray]) -> np.ndarray:
    """A_L ⊗ … ⊗ A_1 for (n, n) masks by integer matmuls (layer 1 acts first)."""
    n = layers[0].shape[-1]
    r = layers[0] | np.eye(n, dtype=bool)
    for m in layers[1:]:
        r = ((m | np.eye(n, dtype=bool)).astype(np.int64) @ r.astype(np.int64)) > 0
    return r


def _random_heads(rng, heads: int, n: int, density: float) -> np.ndarray:
    """`heads` random (n, n) masks; one of them sometimes a cycle through every position."""
    m = rng.random((heads, n, n)) < density
    if rng.random() < 0.3:
        perm = rng.permutation(n)
        m[rng.integers(heads), perm, np.roll(perm, 1)] = True
    return m


# ------------------------------------------------------------------ dense masks


@settings(max_examples=25)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 8),
    heads=st.integers(1, 3),
    batch=st.sampled_from([None, 2]),
    num_layers=st.sampled_from([None, 1, 2, 3]),
    method=st.sampled_from(["auto", "matmul", "bitpacked", "structured"]),
    data=st.data(),
)
def test_reachability_with_head_axis_is_the_union_of_the_heads(seed, n, heads, batch, num_layers, method, data):
    rng = np.random.default_rng(seed)
    per_head = _random_heads(rng, heads, n, rng.choice([0.1, 0.3]))  # (H, n, n)
    if batch is None:
        stack, axis, union = per_head, data.draw(st.sampled_from([0, -3])), per_head.any(0)
    else:
        other = _random_heads(rng, heads, n, 0.2)
        both = np.stack([per_head, other])  # (B, H, n, n)
        union = both.any(1)
        if data.draw(st.booleans()):
            stack, axis = both, data.draw(st.sampled_from([1, -3]))
        else:
            stack, axis = np.moveaxis(both, 1, 0), data.draw(st.sampled_from([0, -4]))  # (H, B, n, n)
    got = np.asarray(reachability(stack, num_layers, head_axis=axis, method=method))
    np.testing.assert_array_equal(got, np.asarray(reachability(union, num_layers, method=method)))
    for b, m in enumerate(union.reshape(-1, n, n)):
        np.testing.assert_array_equal(got.reshape(-1, n, n)[b], _nx_reach(m, num_layers))
    depth = np.asarray(convergence_depth(stack, head_axis=axis, method=method))
    assert depth.shape == union.shape[:-2]
    assert [int(d) for d in depth.reshape(-1)] == [_nx_depth(m) for m in union.reshape(-1, n, n)]


def test_heads_union_matches_numpy_and_keeps_jax_arrays_on_the_device():
    rng = np.random.default_rng(0)
    m = rng.random((2, 3, 4, 5, 5)) < 0.3
    for axis in (0, 1, 2, -3, -4, -5):
        np.testing.assert_array_equal(np.asarray(heads_union(m, axis)), m.any(axis))
        np.testing.assert_array_equal(np.asarray(heads_union(jnp.asarray(m), axis)), m.any(axis))
    np.testing.assert_array_equal(np.asarray(heads_union(list(m[0, 0]), 0)), m[0, 0].any(0))


def test_head_axis_under_jit_and_vmap():
    rng = np.random.default_rng(1)
    heads = _random_heads(rng, 3, 6, 0.2)
    want = _nx_reach(heads.any(0), 2)
    jitted = jax.jit(lambda m: reachability(m, 2, head_axis=0, method="matmul"))
    np.testing.assert_array_equal(np.asarray(jitted(jnp.asarray(heads))), want)
    batch = np.stack([heads, _random_heads(rng, 3, 6, 0.2)])
    mapped = jax.vmap(lambda m: reachability(m, 2, head_axis=0))(jnp.asarray(batch))
    np.testing.assert_array_equal(np.asarray(mapped[1]), _nx_reach(batch[1].any(0), 2))
    depth = jax.jit(lambda m: convergence_depth(m, head_axis=-3))(jnp.asarray(batch))
    assert [int(d) for d in depth] == [_nx_depth(b.any(0)) for b in batch]


@settings(max_examples=15)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 8), heads=st.integers(1, 3))
def test_hasse_diagram_with_head_axis(seed, n, heads):
    rng = np.random.default_rng(seed)
    per_head = _random_heads(rng, heads, n, 0.2)
    union = per_head.any(0)
    d = HasseDiagram.from_mask(per_head, head_axis=0)
    assert d == HasseDiagram.from_mask(union)
    assert d == HasseDiagram.from_mask(per_head, head_axis=-3)
    assert {frozenset(c) for c in d.classes} == _nx_classes(union)
    np.testing.assert_array_equal(np.asarray(d.reachability()), _nx_reach(union, None))
    lstar = _nx_depth(union)
    assert HasseDiagram.from_mask(per_head, lstar, head_axis=0) == d
    if lstar > 1:
        with pytest.raises(MaskError, match="below the convergence depth"):
            HasseDiagram.from_mask(per_head, lstar - 1, head_axis=0)


def test_flow_summary_with_head_axis():
    rng = np.random.default_rng(2)
    per_head = _random_heads(rng, 3, 12, 0.15)
    s = flow_summary(per_head, (1, 2), head_axis=0)
    union = per_head.any(0)
    assert s.convergence_depth == _nx_depth(union)
    assert s.num_classes == len(_nx_classes(union))
    assert [r.pairs for r in s.reach] == [int(_nx_reach(union, num).sum()) for num in (1, 2)]


# ------------------------------------------------------------------ layer stacks


@settings(max_examples=20)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 7),
    heads=st.integers(1, 3),
    num=st.integers(1, 3),
    method=st.sampled_from(["auto", "matmul", "bitpacked", "structured"]),
)
def test_layer_masks_with_head_axis(seed, n, heads, num, method):
    rng = np.random.default_rng(seed)
    layers = np.stack([_random_heads(rng, heads, n, 0.25) for _ in range(num)])  # (L, H, n, n)
    want = _np_product(list(layers.any(1)))
    for given_layers, axis in (
        (layers, 0),  # stacked: head_axis counts one layer's axes, not the leading layer axis
        (layers, -3),
        (list(layers), 0),
        (list(np.moveaxis(layers, 1, -3)), -3),
    ):
        got = reachability(None, layer_masks=given_layers, head_axis=axis, method=method)
        np.testing.assert_array_equal(np.asarray(got), want)
    np.testing.assert_array_equal(np.asarray(reachability(None, layer_masks=list(layers.any(1)), method=method)), want)


def test_batched_layer_stack_with_heads_after_the_batch_axis():
    rng = np.random.default_rng(3)
    layers = rng.random((2, 3, 2, 6, 6)) < 0.25  # (L, B, H, n, n)
    got = np.asarray(reachability(None, layer_masks=layers, head_axis=1))
    assert got.shape == (3, 6, 6)
    for b in range(3):
        np.testing.assert_array_equal(got[b], _np_product([layers[0, b].any(0), layers[1, b].any(0)]))
    np.testing.assert_array_equal(np.asarray(reachability(None, layer_masks=layers, head_axis=-3)), got)


# ------------------------------------------------------------------ interval heads


def test_interval_heads():
    n = 40
    window = from_spec(f"sliding_window(n={n}, left=3)", form="intervals")
    sinks = from_spec(f"attention_sinks(n={n}, num=2)", form="intervals")
    strided = IntervalMask.from_dense(np.eye(n, k=-7, dtype=bool))
    heads = (window, sinks, strided)
    dense = np.stack([h.to_dense() for h in heads])
    union = dense.any(0)
    for num_layers in (None, 1, 2, 5):
        got = reachability(heads, num_layers, head_axis=0)
        assert isinstance(got, IntervalMask)
        np.testing.assert_array_equal(got.to_dense(), _nx_reach(union, num_layers))
        np.testing.assert_array_equal(got.to_dense(), np.asarray(reachability(dense, num_layers, head_axis=0)))
    assert convergence_depth(list(heads), head_axis=0) == _nx_depth(union)
    assert heads_union(heads, 0) == IntervalMask.from_dense(union)
    # a dense head among interval heads is converted
    mixed = (window, sinks.to_dense(), strided)
    np.testing.assert_array_equal(reachability(mixed, 3, head_axis=0).to_dense(), _nx_reach(union, 3))
    assert HasseDiagram.from_mask(heads, head_axis=0) == HasseDiagram.from_mask(union)
    assert flow_summary(heads, head_axis=0).convergence_depth == _nx_depth(union)
    # -3 counts like NumPy on (heads, n, n), as for a dense stack (review: refused for interval heads, documented)
    assert reachability(heads, 2, head_axis=-3) == reachability(heads, 2, head_axis=0)
    assert HasseDiagram.from_mask(heads, head_axis=-3) == HasseDiagram.from_mask(union)
    assert flow_summary(heads, head_axis=-3).convergence_depth == _nx_depth(union)
    # layer masks, each layer a tuple of interval heads
    layers = [(window, strided), (sinks,), (strided, sinks)]
    want = _np_product([np.stack([h.to_dense() for h in hs]).any(0) for hs in layers])
    got = reachability(None, layer_masks=layers, head_axis=0)
    assert isinstance(got, IntervalMask)
    np.testing.assert_array_equal(got.to_dense(), want)


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    "shape, head_axis, fragment",
    [
        ((2, 4, 4), -1, r"`head_axis` must be an axis of `mask` before its last two.*got -1"),
        ((2, 4, 4), -2, r"`head_axis` must be an axis of `mask` before its last two.*got -2"),
        ((2, 4, 4), 1, r"one of 0 \.\. 0 or -3 \.\. -3.*got 1"),
        ((2, 4, 4), 3, r"`head_axis`.*got 3"),
        ((2, 4, 4), -4, r"`head_axis`.*got -4"),
        ((4, 4), 0, r"`head_axis` = 0 needs `mask` to have a head axis.*rank 2"),
        ((2, 4, 4), True, r"`head_axis` must be None or an int.*bool"),
        ((2, 4, 4), 0.0, r"`head_axis` must be None or an int.*float"),
        ((2, 4, 4), "0", r"`head_axis` must be None or an int.*str"),
    ],
)
def test_bad_head_axis(no_typecheck, shape, head_axis, fragment):
    mask = np.ones(shape, bool)
    with pytest.raises(ParameterError, match=fragment):
        reachability(mask, head_axis=head_axis)
    with pytest.raises(ParameterError, match=fragment):
        convergence_depth(mask, head_axis=head_axis)
    with pytest.raises(ParameterError, match=fragment):
        heads_union(mask, head_axis)


def test_bad_heads(no_typecheck):
    m = np.eye(4, dtype=bool)
    with pytest.raises(MaskError, match=r"`mask` must hold at least one head along `head_axis` = 0"):
        reachability(np.ones((0, 4, 4), bool), head_axis=0)
    with pytest.raises(MaskError, match=r"`mask` must have dtype bool.*float"):
        reachability(np.ones((2, 4, 4)), head_axis=0)
    with pytest.raises(MaskError, match=r"`mask` must be square"):
        reachability(np.ones((2, 4, 5), bool), head_axis=0)
    with pytest.raises(MaskError, match=r"must hold at least one head.*empty tuple"):
        reachability((), head_axis=0)
    with pytest.raises(
        ParameterError,
        match=r"`head_axis` must be an axis of one layer's mask of `layer_masks`.*\(3, 4, 4\) after the leading",
    ):
        reachability(None, layer_masks=np.ones((2, 3, 4, 4), bool), head_axis=1)  # one layer is (3, 4, 4)
    with pytest.raises(ParameterError, match=r"`head_axis` = 0 needs one layer's mask of `layer_masks`.*rank 2"):
        reachability(None, layer_masks=np.ones((2, 4, 4), bool), head_axis=0)
    with pytest.raises(ParameterError, match=r"`head_axis` = 0 needs `layer_masks\[1\]`"):
        reachability(None, layer_masks=[np.ones((2, 4, 4), bool), m], head_axis=0)
    iv = IntervalMask.from_dense(m)
    with pytest.raises(ParameterError, match="single IntervalMask"):
        reachability(iv, head_axis=0)
    with pytest.raises(ParameterError, match="single IntervalMask"):
        convergence_depth(iv, head_axis=0)
    with pytest.raises(
        ParameterError,
        match=r"`head_axis` must be 0 \(or -3, as for a \(heads, n, n\) array\) for `mask` given as a sequence",
    ):
        reachability((iv, iv), head_axis=-1)
    with pytest.raises(MaskError, match="same n"):
        reachability((iv, IntervalMask.from_dense(np.eye(5, dtype=bool))), head_axis=0)
    with pytest.raises(MaskError, match=r"shape \(heads, n, n\) here.*\(2, 2, 4, 4\)"):
        HasseDiagram.from_mask(np.ones((2, 2, 4, 4), bool), head_axis=0)
    with pytest.raises(ParameterError, match="`head_axis`"):
        HasseDiagram.from_mask(np.ones((2, 4, 4), bool), head_axis=1)
    with pytest.raises(MaskError, match=r"shape \(heads, n, n\) here"):
        flow_summary(np.ones((2, 2, 4, 4), bool), head_axis=0)


def test_memory_is_checked_before_the_union():
    huge = np.broadcast_to(np.zeros((), bool), (2, 10**6, 10**6))  # zero-stride: 2 TB as a dense mask
    with pytest.raises(MemoryBudgetError, match="`mask`"):
        reachability(huge, head_axis=0)
    with pytest.raises(MemoryBudgetError, match="`mask`"):
        convergence_depth(huge, head_axis=0)
    with pytest.raises(MemoryBudgetError, match="`mask`"):
        heads_union(huge, 0)
    with pytest.raises(MemoryBudgetError, match="`layer_masks`"):
        reachability(None, layer_masks=[huge, huge], head_axis=0)
