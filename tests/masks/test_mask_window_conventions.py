"""The window off-by-one table of `sliding_window`: each library's own rule gives our mask.

Each convention is written here as that library writes it (mask gallery), independently of
`sliding_window`'s formula; JAX's convention is also checked against JAX itself.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hassejax.masks as M


def by_loops(n, rule):
    return np.array([[bool(rule(q, k)) for k in range(n)] for q in range(n)])


def attention_gym_sliding_window(W):
    # attn_gym.masks.generate_sliding_window(W): and_masks(q - k <= W, causal)
    return lambda q, k: (q - k <= W) and (q >= k)


def xformers_causal_local(W):
    # xformers BlockDiagonalCausalLocalAttentionMask(W) / HF sliding_window=W: W keys incl. itself
    return lambda q, k: q - W < k <= q


def jax_local(left, right):
    # jax.nn.dot_product_attention(local_window_size=(left, right))
    return lambda q, k: q - left <= k <= q + right


def jax_dot_product_attention_support(n, local_window_size, is_causal=False):
    """The mask JAX itself applies: attention weights of a uniform query are > 0 exactly where allowed."""
    zeros = jnp.zeros((1, n, 1, n), dtype=jnp.float32)
    values = jnp.eye(n, dtype=jnp.float32)[None, :, None, :]  # output row = attention weights
    out = jax.nn.dot_product_attention(zeros, zeros, values, local_window_size=local_window_size, is_causal=is_causal)
    return np.asarray(out[0, :, 0, :] > 0)


@pytest.mark.parametrize("n", [1, 4, 9])
@pytest.mark.parametrize("W", [0, 1, 2, 5, 12])
def test_attention_gym_W_is_left_W(n, W):
    expected = by_loops(n, attention_gym_sliding_window(W))
    np.testing.assert_array_equal(np.asarray(M.sliding_window(n, left=W)), expected)
    if n > W:  # a row far enough from the start sees W + 1 keys
        assert expected[-1].sum() == W + 1


@pytest.mark.parametrize("n", [1, 4, 9])
@pytest.mark.parametrize("W", [1, 2, 5, 12])
def test_xformers_and_hf_W_is_left_W_minus_1(n, W):
    expected = by_loops(n, xformers_causal_local(W))
    np.testing.assert_array_equal(np.asarray(M.sliding_window(n, left=W - 1)), expected)
    if n >= W:
        assert expected[-1].sum() == W
    # the two libraries differ by one key: attention-gym's W is xformers' W + 1
    np.testing.assert_array_equal(by_loops(n, attention_gym_sliding_window(W - 1)), expected)


@pytest.mark.parametrize("n", [1, 5, 8])
@pytest.mark.parametrize("left, right", [(0, 0), (2, 0), (0, 3), (2, 1), (4, 4), (9, 2)])
def test_jax_local_window_size_is_ours(n, left, right):
    expected = by_loops(n, jax_local(left, right))
    ours = np.asarray(M.sliding_window(n, left=left, right=right))
    np.testing.assert_array_equal(ours, expected)
    # and JAX itself agrees (not only its documented rule)
    np.testing.assert_array_equal(jax_dot_product_attention_support(n, (left, right)), ours)


def test_jax_causal_local_is_left_only():
    n, left = 7, 2
    support = jax_dot_product_attention_support(n, (left, 3), is_causal=True)
    np.testing.assert_array_equal(support, np.asarray(M.sliding_window(n, left=left)))


def test_dilation_one_is_symmetric_window():
    for n, w in [(6, 0), (6, 2), (9, 4)]:
        np.testing.assert_array_equal(np.asarray(M.dilated(n, w, 1)), np.asarray(M.sliding_window(n, w, w)))


def test_huge_window_is_full_band():
    # windows beyond n change nothing (and do not overflow int32)
    np.testing.assert_array_equal(np.asarray(M.sliding_window(5, 2**40, 2**40)), np.ones((5, 5), bool))
    np.testing.assert_array_equal(np.asarray(M.dilated(5, 2**40, 2**40)), np.eye(5, dtype=bool))
