"""Jacobian information flow of the Transformer equals R^(L) exactly (spec hasse.md §1.2, §4)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hassejax.errors import MaskError, ParameterError
from hassejax.nn import Transformer, jacobian_flow
from hassejax.order import reachability

D, HEADS = 8, 2


def _model(num_layers: int, seed: int) -> Transformer:
    return Transformer(num_layers, D, HEADS, vocab_size=3, num_positions=2, key=jax.random.key(seed), mlp_ratio=1)


def _inputs(n: int, seed: int):
    return jnp.asarray(np.random.default_rng(seed).normal(size=(n, D)))


def _walks_at_most(mask: np.ndarray, num_layers: int) -> np.ndarray:
    """Independent R^(L): BFS on the graph with edges i -> j (i attends to j), paths of <= L edges."""
    n = mask.shape[0]
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(*np.nonzero(mask)))
    out = np.zeros((n, n), bool)
    for i in range(n):
        for j in nx.single_source_shortest_path_length(g, i, cutoff=num_layers):
            out[i, j] = True
    return out


def _masks(draw, n: int) -> list[np.ndarray]:
    """Random masks of several kinds: sparse/dense, with cycles, without diagonal, with empty rows."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    out = []
    for density in (0.15, 0.35):
        out.append(rng.random((n, n)) < density)
    cyc = np.zeros((n, n), bool)
    perm = rng.permutation(n)
    cyc[perm, np.roll(perm, 1)] = True  # one directed cycle through every position
    out.append(cyc | (rng.random((n, n)) < 0.1))
    empty = rng.random((n, n)) < 0.3
    empty[rng.integers(0, n, size=max(1, n // 3))] = False  # empty rows (no diagonal either)
    out.append(empty)
    return out


@settings(max_examples=10)
# A few (n, L) only, those of the tests below where they can be: every new pair is a new compiled
# Jacobian (and reachability) program; the masks, model and inputs vary freely.
@given(n=st.sampled_from([5, 6]), num_layers=st.sampled_from([1, 2, 5]), data=st.data())
def test_jacobian_flow_equals_reachability(n, num_layers, data):
    model = _model(num_layers, data.draw(st.integers(0, 1000)))
    x = _inputs(n, data.draw(st.integers(0, 1000)))
    for mask in _masks(data.draw, n):
        flow = np.asarray(jacobian_flow(model, x, jnp.asarray(mask)))
        expected = np.asarray(reachability(jnp.asarray(mask), num_layers=num_layers))
        np.testing.assert_array_equal(flow, expected)
        np.testing.assert_array_equal(flow, _walks_at_most(mask | np.eye(n, dtype=bool), num_layers))


def test_flow_grows_with_depth_on_a_chain_until_convergence():
    """A bidiagonal chain (L* = n − 1): every extra layer adds exactly one more diagonal."""
    n = 6
    mask = np.eye(n, k=-1, dtype=bool)
    x = _inputs(n, 0)
    for num_layers in (2, 5):  # below and at the convergence depth L* = 5
        flow = np.asarray(jacobian_flow(_model(num_layers, num_layers), x, jnp.asarray(mask)))
        q, k = np.indices((n, n))
        np.testing.assert_array_equal(flow, (k <= q) & (q - k <= num_layers))


def test_empty_row_keeps_only_the_residual_edge():
    """Position 2 attends to nothing: its output depends on itself alone; others may read it."""
    n = 5
    mask = np.ones((n, n), bool)
    mask[2] = False
    x = _inputs(n, 1)
    for num_layers in (1, 2):
        flow = np.asarray(jacobian_flow(_model(num_layers, 7), x, jnp.asarray(mask)))
        expected = np.ones((n, n), bool)
        expected[2] = np.arange(n) == 2
        np.testing.assert_array_equal(flow, expected)


def test_fwd_and_rev_agree_and_callables_work():
    n = 7
    rng = np.random.default_rng(5)
    mask = jnp.asarray(rng.random((n, n)) < 0.3)
    model = _model(2, 3)
    x = _inputs(n, 2)
    fwd = np.asarray(jacobian_flow(model, x, mask))
    rev = np.asarray(jacobian_flow(model, x, mask, mode="rev"))
    np.testing.assert_array_equal(rev, fwd)
    # a callable: token shift (out_i depends on x_i and x_{i-1}) is a non-attention mixer
    shift = lambda y: y + jnp.roll(y, 1, axis=0).at[0].set(0.0)
    q, k = np.indices((n, n))
    np.testing.assert_array_equal(np.asarray(jacobian_flow(shift, x)), (q == k) | (q - k == 1))
    np.testing.assert_array_equal(np.asarray(jacobian_flow(model.forward_embeddings, x, mask)), rev)


def test_jacobian_flow_errors(no_runtime_typecheck):
    model = _model(1, 0)
    x = jnp.zeros((3, D))
    with pytest.raises(MaskError, match="`mask` is required when `model` is a Transformer"):
        jacobian_flow(model, x)
    # the positions of the argument passed (a fresh user: "the 3 positions of `x`", which jacobian_flow has not)
    with pytest.raises(MaskError, match=r"`mask` must have shape \(3, 3\).*the 3 positions of `inputs`"):
        jacobian_flow(model, x, jnp.ones((2, 2), bool))
    with pytest.raises(ParameterError, match=r"`inputs` must be a floating array of shape \(n, d\); got shape \(3,\)"):
        jacobian_flow(model, jnp.zeros((3,)), jnp.ones((3, 3), bool))
    with pytest.raises(ParameterError, match=r"`inputs` must have d = d_model = 8 features"):
        jacobian_flow(model, jnp.zeros((3, 5)), jnp.ones((3, 3), bool))
    with pytest.raises(ParameterError, match="`mode` must be 'fwd' or 'rev'"):
        jacobian_flow(model, x, jnp.ones((3, 3), bool), mode="both")
    with pytest.raises(ParameterError, match=r"its output has shape \(\)"):
        jacobian_flow(lambda y: jnp.sum(y), x)
    with pytest.raises(ParameterError, match="`model` must be a Transformer or a callable"):
        jacobian_flow(3, x)


def test_non_finite_jacobians_are_refused_not_read_as_flow():
    """A NaN input or weight makes `∂out/∂in` NaN wherever it spreads, and `NaN != 0` read as a dependence: under a
    causal mask the flow came back all True (a fresh-user review). Concrete inputs are checked up front, the
    Jacobian itself after the compiled program (which holds no host callback), and inside a caller's `jit` at run
    time."""
    from hassejax.nn.flow import _flow_jit

    model, x = _model(2, 0), _inputs(5, 1)
    causal = jnp.tril(jnp.ones((5, 5), bool))
    np.testing.assert_array_equal(np.asarray(jacobian_flow(model, x, causal)), np.asarray(causal))
    with pytest.raises(ParameterError, match="`inputs` must be finite"):
        jacobian_flow(model, x.at[4, 0].set(jnp.nan), causal)
    broken = jax.tree_util.tree_map(lambda a: a * jnp.nan if eqx.is_inexact_array(a) else a, model)
    with pytest.raises(ParameterError, match="the Jacobian has NaN/inf entries"):
        jacobian_flow(broken, x, causal)
    with pytest.raises(Exception, match="the Jacobian has NaN/inf entries"):
        jax.block_until_ready(jax.jit(lambda y: jacobian_flow(model, y, causal))(x.at[0, 0].set(jnp.inf)))
    text = _flow_jit.lower(model.forward_embeddings, x, causal, "fwd").as_text()
    assert "callback" not in text


def test_interval_masks_and_dtypes_in_the_transformer():
    """The package's own IntervalMask is accepted (made dense; was a raw "'IntervalMask' object is not
    subscriptable"); `x` of another dtype than the parameters is a ParameterError naming it (was a raw
    `lax.scan` carry-type error)."""
    from hassejax.masks import from_spec

    model, x = _model(2, 0), _inputs(5, 1)
    intervals = from_spec("sliding_window(n=5, left=1)", form="intervals")
    dense = jnp.asarray(intervals.to_dense())
    np.testing.assert_array_equal(
        np.asarray(jacobian_flow(model, x, intervals)), np.asarray(jacobian_flow(model, x, dense))
    )
    np.testing.assert_array_equal(
        np.asarray(model.forward_embeddings(x, intervals)), np.asarray(model.forward_embeddings(x, dense))
    )
    with pytest.raises(ParameterError, match=r"`x` must have the model's parameter dtype float64; got bfloat16"):
        model.forward_embeddings(x.astype(jnp.bfloat16), dense)
    with pytest.raises(ParameterError, match=r"`inputs` must have the model's parameter dtype float64; got float32"):
        jacobian_flow(model, x.astype(jnp.float32), dense)


def test_empty_inputs_of_a_transformer_name_inputs(no_runtime_typecheck):
    """Issue: ``jacobian_flow(model, jnp.zeros((0, 8)), mask)`` said "`x` must be a real (float or integer) array ...
    n >= 1": the argument is `inputs`, and a Transformer takes floats only. A callable still takes n = 0."""
    model = _model(1, 0)
    with pytest.raises(
        ParameterError,
        match=r"`inputs` must be a floating array of shape \(n, 8\), n >= 1; got shape "
        r"\(0, 8\)",
    ):
        jacobian_flow(model, jnp.zeros((0, D)), jnp.zeros((0, 0), bool))
    with pytest.raises(ParameterError, match=r"`x` must be a floating array of shape \(n, 8\), n >= 1"):
        model.forward_embeddings(jnp.zeros((0, D)), jnp.zeros((0, 0), bool))
    assert jacobian_flow(lambda y: 2 * y, jnp.zeros((0, D))).shape == (0, 0)


def test_rev_is_exact_in_float32_at_n_times_d_of_256_and_more():
    """A fresh user: on jaxlib 0.10.2's CPU backend `jit(jacrev)` of a float32 model with `n·d >= 256` reported 15
    dependences a one-layer sliding window forbids (a miscompiled YNNPACK reduction, jax-ml/jax#39103); importing
    hassejax sets the XLA flag that keeps reductions out of those fusions (hassejax._xla_flags.correctness_flags)."""
    from hassejax.masks import sliding_window

    n, d = 16, 16
    mask = jnp.asarray(sliding_window(n, 1))
    model = Transformer(1, d, 1, vocab_size=5, num_positions=n + 1, key=jax.random.key(1), dtype=jnp.float32)
    x = jax.random.normal(jax.random.key(9), (n, d), dtype=jnp.float32)
    assert model.token_embedding.dtype == jnp.float32  # the float32 programs the bug hit (float64 was exact)
    expected = np.asarray(reachability(mask, 1))
    np.testing.assert_array_equal(np.asarray(jacobian_flow(model, x, mask, mode="rev")), expected)
    np.testing.assert_array_equal(np.asarray(jacobian_flow(model, x, mask)), expected)


def test_a_callable_returning_a_tuple_is_a_parameter_error(no_runtime_typecheck):
    """Review: a callable returning a tuple failed with AttributeError "'tuple' object has no attribute 'shape'"."""
    x = _inputs(3, 0)
    with pytest.raises(ParameterError, match=r"`model` must return one \(n, d_out\) array, n = 3; it returned a tuple"):
        jacobian_flow(lambda x: (x, 2 * x), x)
    with pytest.raises(ParameterError, match=r"lambda x, mask: model\(x, mask\)\[0\]"):
        jacobian_flow(lambda x, mask: (x, x), x, jnp.eye(3, dtype=bool))


def test_a_block_takes_per_head_and_nested_list_masks():
    """Review: jacobian_flow refused a per-head (h, n, n) mask for a TransformerBlock, which the block takes, and
    nested lists, which the rest of the package takes. Its flow is one layer of the heads' union."""
    from hassejax.nn import TransformerBlock

    block = TransformerBlock(D, HEADS, D, key=jax.random.key(0))
    x = _inputs(4, 1)
    per_head = jnp.stack([jnp.eye(4, k=-1, dtype=bool), jnp.eye(4, k=2, dtype=bool)])
    want = np.asarray(reachability(per_head, 1, head_axis=0))
    np.testing.assert_array_equal(np.asarray(jacobian_flow(block, x, per_head)), want)
    np.testing.assert_array_equal(np.asarray(jacobian_flow(block, x, np.asarray(per_head).tolist())), want)


def test_deep_models_and_large_inputs_whose_dependences_do_not_underflow_are_taken():
    """A review: a pre-check that refused inputs with ``σ^(L+1) > 1 / (tiny · 2^24)`` assumed every dependence needs
    an `L`-hop path, so a 24-layer causal model was refused at unit-ish inputs (std 20) and a 3-layer one at 1e9,
    where every dependence has a one-hop path and the flow was exact. Now taken, equal to the independent BFS; a band
    mask that needs the long paths at 1e9 is still refused (its dependences need three hops)."""
    n = 8
    causal = np.tril(np.ones((n, n), dtype=bool))
    band = causal & ~np.tril(np.ones((n, n), dtype=bool), -2)
    x = jax.random.normal(jax.random.key(1), (n, 8), dtype=jnp.float32)
    for layers, scale in ((24, 20.0), (3, 1e9)):
        model = Transformer(layers, 8, 2, vocab_size=5, num_positions=n, key=jax.random.key(0), dtype=jnp.float32)
        flow = np.asarray(jacobian_flow(model, scale * x, jnp.asarray(causal)))
        np.testing.assert_array_equal(flow, _walks_at_most(causal, layers))
    with pytest.raises(ParameterError, match=r"`inputs` are too large .* 4 LayerNorms"):
        jacobian_flow(model, 1e9 * x, jnp.asarray(band))


def test_overflowing_or_underflowing_inputs_are_refused_not_read_as_flow():
    """A review: float32 embeddings of 1e20 overflow LayerNorm's variance, every row normalised to a constant, and
    the flow came back all False (diagonal included); at 1e15 or 1e18 each LayerNorm divides by the row's scale, the
    two-hop entries (about scale^-3) underflow to exact zeros, and true dependences were silently missing. The
    expected flow at unit scale is the independent BFS of `_walks_at_most`."""
    model = Transformer(2, 4, 2, vocab_size=3, num_positions=5, key=jax.random.key(0), dtype=jnp.float32)
    x = jax.random.normal(jax.random.key(1), (4, 4), dtype=jnp.float32)
    mask = np.eye(4, k=-1, dtype=bool)
    flow = np.asarray(jacobian_flow(model, x, jnp.asarray(mask)))
    np.testing.assert_array_equal(flow, _walks_at_most(mask, 2))
    with pytest.raises(ParameterError, match=r"`inputs` overflows the model's dtype float32 in LayerNorm"):
        jacobian_flow(model, x * 1e20, jnp.asarray(mask))
    with pytest.raises(ParameterError, match=r"`x` overflows"):
        model.forward_embeddings(x * 1e20, jnp.asarray(mask))
    for scale in (1e13, 1e15, 1e18):
        with pytest.raises(ParameterError, match=r"`inputs` are too large for this Transformer and mask in float32"):
            jacobian_flow(model, x * scale, jnp.asarray(mask))
    # a callable (no input check): the Jacobian's own smallest entries give the underflow away
    with pytest.raises(ParameterError, match=r"near the underflow threshold"):
        jacobian_flow(lambda y, m: model.forward_embeddings(y, m), x * 1e15, jnp.asarray(mask))
    # the catch-all: a residual model whose flow lacks its diagonal (a final LayerNorm of zero weight: a constant)
    flat = eqx.tree_at(lambda m: m.final_norm.weight, model, jnp.zeros_like(model.final_norm.weight))
    with pytest.raises(ParameterError, match=r"misses its diagonal at position\(s\) \[0, 1, 2, 3\]"):
        jacobian_flow(flat, x, jnp.asarray(mask))
