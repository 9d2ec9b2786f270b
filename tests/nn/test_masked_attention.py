"""Masked attention: a numpy reference on non-empty rows, the explicit empty-row rule (spec hasse.md §4)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.errors import MaskError, ParameterError
from hassejax.nn import MaskedMultiHeadAttention, masked_softmax


def _numpy_attention(attn, x, mask):
    """Independent reference: per head, per query, a softmax over the allowed keys only."""
    wq, wk, wv, wo = (
        np.asarray(a) for a in (attn.query_weight, attn.key_weight, attn.value_weight, attn.output_weight)
    )
    x = np.asarray(x)
    n = x.shape[0]
    heads = np.zeros((n, attn.num_heads, attn.head_size))
    for h in range(attn.num_heads):
        q, k, v = x @ wq[h].T, x @ wk[h].T, x @ wv[h].T
        for i in range(n):
            allowed = np.flatnonzero(mask[i])
            if allowed.size == 0:
                continue  # documented rule: zero update
            s = np.array([q[i] @ k[j] for j in allowed]) / np.sqrt(attn.head_size)
            p = np.exp(s - s.max())
            p /= p.sum()
            heads[i, h] = (p[:, None] * v[allowed]).sum(0)
    return np.einsum("dhk,ihk->id", wo, heads)


def test_masked_softmax_matches_reference_and_zeroes_empty_rows():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(5, 6)) * 3
    mask = rng.random((5, 6)) < 0.5
    mask[2] = False
    w = np.asarray(masked_softmax(jnp.asarray(logits), jnp.asarray(mask)))
    for i in range(5):
        if not mask[i].any():
            np.testing.assert_array_equal(w[i], 0.0)
            continue
        e = np.where(mask[i], np.exp(logits[i] - logits[i][mask[i]].max()), 0.0)
        np.testing.assert_allclose(w[i], e / e.sum(), rtol=1e-12, atol=0)
        assert np.all(w[i][~mask[i]] == 0.0)


def test_masked_softmax_gradient_is_exactly_zero_on_masked_entries():
    rng = np.random.default_rng(1)
    logits = jnp.asarray(rng.normal(size=(4, 4)))
    mask = jnp.asarray(np.array([[1, 0, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 0, 0]], bool))
    jac = jax.jacrev(lambda s: masked_softmax(s, mask))(logits)  # (4, 4, 4, 4)
    for i in range(4):
        assert np.all(np.asarray(jac[i][:, i, ~np.asarray(mask[i])]) == 0.0)
    assert np.all(np.asarray(jac[1]) == 0.0)  # the empty row depends on nothing
    assert np.all(np.isfinite(np.asarray(jac)))


def test_attention_matches_numpy_reference_with_empty_rows():
    attn = MaskedMultiHeadAttention(12, 3, key=jax.random.key(0))
    rng = np.random.default_rng(2)
    x = jnp.asarray(rng.normal(size=(7, 12)))
    mask = rng.random((7, 7)) < 0.4
    mask[[1, 5]] = False
    out = np.asarray(attn(x, jnp.asarray(mask)))
    np.testing.assert_allclose(out, _numpy_attention(attn, x, mask), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(out[[1, 5]], 0.0)


def test_empty_row_is_not_the_uniform_average_of_jax_nn():
    """jax.nn.dot_product_attention averages all keys on an empty row; ours gives 0."""
    rng = np.random.default_rng(3)
    q, k, v = (jnp.asarray(rng.normal(size=(1, 4, 1, 8))) for _ in range(3))
    mask = np.ones((4, 4), bool)
    mask[0] = False
    ref = np.asarray(jax.nn.dot_product_attention(q, k, v, mask=jnp.asarray(mask)[None, None]))[0, :, 0]
    np.testing.assert_allclose(ref[0], np.asarray(v)[0, :, 0].mean(0), rtol=1e-6)  # the silent uniform average
    logits = jnp.einsum("qd,kd->qk", q[0, :, 0], k[0, :, 0]) / np.sqrt(8)
    ours = np.asarray(masked_softmax(logits, jnp.asarray(mask)) @ v[0, :, 0])
    np.testing.assert_array_equal(ours[0], 0.0)
    np.testing.assert_allclose(ours[1:], ref[1:], rtol=1e-6, atol=1e-6)  # jax.nn rounds through float32


def test_attention_is_jittable_with_the_mask_as_argument():
    attn = MaskedMultiHeadAttention(8, 2, key=jax.random.key(1))
    x = jax.random.normal(jax.random.key(2), (5, 8))
    f = jax.jit(attn.__call__)
    a = np.tril(np.ones((5, 5), bool))
    b = np.eye(5, dtype=bool)
    np.testing.assert_allclose(np.asarray(f(x, jnp.asarray(a))), _numpy_attention(attn, x, a), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(f(x, jnp.asarray(b))), _numpy_attention(attn, x, b), rtol=1e-10, atol=1e-12)


def test_attention_errors(no_runtime_typecheck):
    with pytest.raises(ParameterError, match="`num_heads` must divide `d_model`"):
        MaskedMultiHeadAttention(10, 3, key=jax.random.key(0))
    with pytest.raises(ParameterError, match="`d_model` must be a positive int"):
        MaskedMultiHeadAttention(0, 1, key=jax.random.key(0))
    attn = MaskedMultiHeadAttention(4, 2, key=jax.random.key(0))
    x = jnp.zeros((3, 4))
    with pytest.raises(MaskError, match=r"`mask` must have shape \(3, 3\).*got shape \(4, 4\)"):
        attn(x, jnp.ones((4, 4), bool))
    with pytest.raises(MaskError, match="`mask` must have dtype bool.*float"):
        attn(x, jnp.ones((3, 3)))


def test_attention_names_x_not_the_mask_for_a_batched_x(no_runtime_typecheck):
    """A 3-D `x` was blamed on the mask ("must have shape (2, 2)", read off x.shape[0]); now `x` is named, with the
    (n, d_model) shape it must have."""
    attn = MaskedMultiHeadAttention(8, 2, key=jax.random.key(0))
    with pytest.raises(ParameterError, match=r"`x` must be a real .* \(n, 8\), n >= 1 .*jax.vmap.*\(2, 4, 8\)"):
        attn(jnp.ones((2, 4, 8)), jnp.ones((4, 4), bool))
    with pytest.raises(ParameterError, match=r"`x` must be a real .* \(n, 8\), n >= 1; got shape \(4, 6\)"):
        attn.weights(jnp.ones((4, 6)), jnp.ones((4, 4), bool))
    with pytest.raises(ParameterError, match=r"n >= 1; got shape \(0, 8\)"):  # was NumPy's zero-size reduction error
        attn(jnp.ones((0, 8)), jnp.zeros((0, 0), bool))
    with pytest.raises(ParameterError, match=r"`x` must be a real .*dtype bool"):
        attn(jnp.ones((4, 8), bool), jnp.ones((4, 4), bool))
    # integer entries are promoted, as before the check (a review: the first version refused them)
    mask = jnp.tril(jnp.ones((4, 4), bool))
    np.testing.assert_array_equal(attn(jnp.ones((4, 8), jnp.int32), mask), attn(jnp.ones((4, 8)), mask))
    assert jax.vmap(attn, in_axes=(0, None))(jnp.ones((2, 4, 8)), jnp.ones((4, 4), bool)).shape == (2, 4, 8)


def test_allowed_keys_at_minus_infinity_get_weight_zero():
    """An additive −inf bias beside the mask: a row whose allowed logits are all −inf is an empty row (zeros; was NaN
    everywhere, masked entries included), and in a mixed row those keys get weight 0, as if masked; the gradient
    stays finite."""
    logits = jnp.array([[-jnp.inf, -jnp.inf, 0.0], [-jnp.inf, 1.0, 1.0], [0.0, 1.0, 2.0]])
    mask = jnp.array([[True, True, False], [True, True, True], [True, False, True]])
    w = np.asarray(masked_softmax(logits, mask))
    np.testing.assert_array_equal(w[0], 0.0)
    np.testing.assert_array_equal(w[1], [0.0, 0.5, 0.5])
    np.testing.assert_allclose(w[2], np.array([1.0, 0.0, np.e**2]) / (1 + np.e**2), rtol=1e-12)
    grad = jax.grad(lambda s: jnp.sum(masked_softmax(s, mask) * jnp.arange(3.0)))(logits)
    assert np.all(np.isfinite(np.asarray(grad)))
    # a NaN logit on an allowed key is not hidden as a masked key: the row is NaN
    assert np.all(np.isnan(np.asarray(masked_softmax(jnp.array([[jnp.nan, 1.0, 0.0]]), jnp.ones((1, 3), bool)))))
