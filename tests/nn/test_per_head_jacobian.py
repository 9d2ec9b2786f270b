"""Per-head masks in the Transformer: the Jacobian support of `L` blocks with one mask per head is
``reachability(mask, L, head_axis=0)``, the powers of the union of the heads' masks with the
diagonal (spec hasse.md §1.1–1.2, §4)."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hassejax.errors import MaskError
from hassejax.nn import MaskedMultiHeadAttention, Transformer, jacobian_flow
from hassejax.order import reachability

D, LAYERS = 6, 2  # d_model divisible by 2 and 3 heads


@functools.cache
def _model(heads: int) -> Transformer:
    return Transformer(LAYERS, D, heads, vocab_size=3, num_positions=2, key=jax.random.key(10 + heads), mlp_ratio=1)


@eqx.filter_jit
def _support(model: Transformer, x, mask):
    """``support[i, j]``: some feature of output `i` has a nonzero derivative in some feature of input `j`."""
    jac = jax.jacfwd(lambda y: model.forward_embeddings(y, mask))(x)  # (n, d, n, d)
    return jnp.any(jac != 0, axis=(1, 3))


def _walks_at_most(mask: np.ndarray, num_layers: int) -> np.ndarray:
    """Independent R^(L): BFS on edges i -> j for mask[i, j] or i == j, at most L edges."""
    n = mask.shape[0]
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(*np.nonzero(mask | np.eye(n, dtype=bool))))
    out = np.zeros((n, n), bool)
    for i in range(n):
        for j in nx.single_source_shortest_path_length(g, i, cutoff=num_layers):
            out[i, j] = True
    return out


@settings(max_examples=8)
@given(
    n=st.sampled_from([5]),  # one n (that of the tests below): each new (heads, n) is a new compiled Jacobian
    heads=st.integers(2, 3),
    seed=st.integers(0, 2**32 - 1),
    density=st.sampled_from([0.15, 0.3]),
    diagonal=st.sampled_from(["random", "set", "clear"]),
)
def test_jacobian_support_is_the_reach_of_the_heads_union(n, heads, seed, density, diagonal):
    rng = np.random.default_rng(seed)
    mask = rng.random((heads, n, n)) < density
    if diagonal != "random":
        mask[:, np.arange(n), np.arange(n)] = diagonal == "set"
    mask[rng.integers(heads), rng.integers(n)] = False  # an empty row in one head
    x = jnp.asarray(rng.normal(size=(n, D)))  # float64 (tests/conftest.py): no accidental zeros
    assert x.dtype == jnp.float64
    support = np.asarray(jacobian_flow(_model(heads), x, jnp.asarray(mask)))
    np.testing.assert_array_equal(support, np.asarray(_support(_model(heads), x, jnp.asarray(mask))))
    expected = np.asarray(reachability(mask, LAYERS, head_axis=0))
    np.testing.assert_array_equal(support, expected)
    np.testing.assert_array_equal(support, _walks_at_most(mask.any(0), LAYERS))


def test_each_head_uses_its_own_mask():
    """Heads are not interchangeable: swapping the per-head masks changes the output, and a
    per-head mask with equal heads gives the same output as the shared (n, n) mask."""
    n = 5
    model = _model(2)
    x = jnp.asarray(np.random.default_rng(0).normal(size=(n, D)))
    back = np.eye(n, k=-1, dtype=bool)
    fwd = np.eye(n, k=1, dtype=bool)
    a = model.forward_embeddings(x, jnp.asarray(np.stack([back, fwd])))
    b = model.forward_embeddings(x, jnp.asarray(np.stack([fwd, back])))
    assert not np.allclose(np.asarray(a), np.asarray(b))
    shared = np.tril(np.ones((n, n), bool))
    np.testing.assert_allclose(
        np.asarray(model.forward_embeddings(x, jnp.asarray(np.stack([shared, shared])))),
        np.asarray(model.forward_embeddings(x, jnp.asarray(shared))),
        rtol=1e-12,
        atol=1e-12,
    )
    # head 0 sees only itself, head 1 nothing: attention weights follow each head's mask
    attn = MaskedMultiHeadAttention(D, 2, key=jax.random.key(3))
    w = np.asarray(attn.weights(x, jnp.asarray(np.stack([np.eye(n, dtype=bool), np.zeros((n, n), bool)]))))
    np.testing.assert_array_equal(w[0], np.eye(n))
    np.testing.assert_array_equal(w[1], np.zeros((n, n)))
    logits = model(jnp.zeros(n, int), jnp.zeros(n, int), jnp.asarray(np.stack([back, fwd])))
    assert logits.shape == (n, 3)


def test_per_head_mask_errors(no_runtime_typecheck):
    n = 4
    attn = MaskedMultiHeadAttention(D, 2, key=jax.random.key(0))
    x = jnp.zeros((n, D))
    with pytest.raises(MaskError, match=r"`mask` holds 3 per-head masks.*num_heads = 2.*\(2, 4, 4\)"):
        attn(x, jnp.ones((3, n, n), bool))
    with pytest.raises(MaskError, match=r"`mask` must have shape \(4, 4\) \(one mask for all heads\) or \(2, 4, 4\)"):
        attn(x, jnp.ones((2, n, n + 1), bool))
    with pytest.raises(MaskError, match=r"`mask` must have shape \(4, 4\).*got shape \(1, 2, 4, 4\)"):
        attn(x, jnp.ones((1, 2, n, n), bool))
    with pytest.raises(MaskError, match="`mask` must have dtype bool"):
        attn(x, jnp.ones((2, n, n)))
    model = _model(3)
    with pytest.raises(MaskError, match=r"`mask` holds 2 per-head masks.*num_heads = 3"):
        model.forward_embeddings(jnp.zeros((n, D)), jnp.ones((2, n, n), bool))
    with pytest.raises(MaskError, match=r"`mask` holds 2 per-head masks"):
        model(jnp.zeros(n, int), jnp.zeros(n, int), jnp.ones((2, n, n), bool))
    assert model.num_heads == 3


def test_annotations_accept_both_mask_shapes():
    """Under the runtime jaxtyping checks of this suite, (n, n) and (heads, n, n) both pass."""
    model = _model(2)
    x = jnp.zeros((4, D))
    assert model.forward_embeddings(x, jnp.ones((4, 4), bool)).shape == (4, D)
    assert model.forward_embeddings(x, jnp.ones((2, 4, 4), bool)).shape == (4, D)
    assert model.blocks.attention.num_heads == 2
