"""Converters (mask_mod callables, additive biases, "1 = blocked" masks) and combinators."""

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import hassejax.masks as M

# Three shapes (a single entry, a rectangle, a batch of rectangles), random values: each new shape compiles the
# conversions again
bool_masks = st.sampled_from([(1, 1, 1), (1, 3, 4), (2, 4, 3)]).flatmap(lambda s: arrays(np.bool_, s))


@given(m=bool_masks)
@settings(max_examples=12)
def test_from_blocked_round_trip(m):
    np.testing.assert_array_equal(np.asarray(M.from_blocked(~m)), m)
    np.testing.assert_array_equal(np.asarray(M.from_blocked((~m).astype(np.int32))), m)
    np.testing.assert_array_equal(np.asarray(M.from_blocked((~m).astype(np.float32))), m)
    np.testing.assert_array_equal(np.asarray(M.from_blocked(jnp.asarray(~m).astype(jnp.uint8))), m)


@given(m=bool_masks)
@settings(max_examples=12)
def test_from_additive_bias_round_trip(m):
    bias = np.where(m, 0.0, -np.inf)
    out = M.from_additive_bias(bias)
    assert out.dtype == np.bool_ and out.shape == m.shape
    np.testing.assert_array_equal(np.asarray(out), m)
    np.testing.assert_array_equal(np.asarray(M.from_additive_bias(jnp.asarray(bias, dtype=jnp.float32))), m)


def test_from_additive_bias_threshold_for_finite_blocking_values():
    m = np.asarray(M.causal(5))
    for blocked_value, dtype in [(np.finfo(np.float32).min, np.float32), (-1e9, np.float64), (-10000, np.int32)]:
        bias = np.where(m, 0, blocked_value).astype(dtype)
        np.testing.assert_array_equal(np.asarray(M.from_additive_bias(bias, threshold=-1e4)), m)


def test_from_additive_bias_is_what_softmax_attention_does():
    # softmax(logits + bias) puts zero weight exactly where from_additive_bias says False
    import jax

    m = np.asarray(M.sliding_window(6, 2, 1))
    bias = np.where(m, 0.0, -np.inf)
    logits = np.random.default_rng(0).normal(size=(6, 6))
    weights = np.asarray(jax.nn.softmax(logits + bias, axis=-1))
    np.testing.assert_array_equal(weights > 0, np.asarray(M.from_additive_bias(bias)))


@pytest.mark.parametrize("n", [1, 3, 7])
def test_from_mask_mod_causal_lambda(n):
    out = M.from_mask_mod(lambda b, h, q_idx, kv_idx: q_idx >= kv_idx, n)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(M.causal(n)))


def test_from_mask_mod_flex_style_mask_mods():
    # attention-gym style: closures over arrays indexed by q_idx / kv_idx
    doc = jnp.array([0, 0, 0, 1, 1])

    def document_causal(b, h, q_idx, kv_idx):
        return (doc[q_idx] == doc[kv_idx]) & (q_idx >= kv_idx)

    np.testing.assert_array_equal(np.asarray(M.from_mask_mod(document_causal, 5)), np.asarray(M.document([3, 2])))
    # rectangular, and b / h reach the callable
    rect = M.from_mask_mod(lambda b, h, q, k: k <= q + (b + h), 3, n_kv=6, b=1, h=2)
    np.testing.assert_array_equal(np.asarray(rect), np.asarray(M.causal_bottom_right(3, 6)))
    # a constant mask_mod (FlexAttention's noop_mask) broadcasts
    np.testing.assert_array_equal(np.asarray(M.from_mask_mod(lambda b, h, q, k: True, 4)), np.ones((4, 4), bool))


def test_from_mask_mod_of_block_diffusion_rule_matches_constructor():
    n, B = 5, 2

    def bd3lm(b, h, q_idx, kv_idx):  # attention-gym generate_block_diffusion_mask, with jnp
        q_noised, kv_noised = q_idx < n, kv_idx < n
        q_block, kv_block = (q_idx % n) // B, (kv_idx % n) // B
        return (
            ((q_block == kv_block) & (q_noised == kv_noised))
            | ((q_block > kv_block) & q_noised & ~kv_noised)
            | ((q_block >= kv_block) & ~q_noised & ~kv_noised)
        )

    np.testing.assert_array_equal(np.asarray(M.from_mask_mod(bd3lm, 2 * n)), np.asarray(M.block_diffusion(n, B)))


@given(a=arrays(np.bool_, (4, 5)), b=arrays(np.bool_, (4, 5)), c=arrays(np.bool_, (4, 5)))
@settings(max_examples=20)
def test_and_or_masks(a, b, c):
    np.testing.assert_array_equal(np.asarray(M.and_masks(a, b, c)), a & b & c)
    np.testing.assert_array_equal(np.asarray(M.or_masks(a, b, c)), a | b | c)
    np.testing.assert_array_equal(np.asarray(M.and_masks(a)), a)


def test_and_masks_builds_library_masks():
    n = 8
    causal_band = M.and_masks(M.sliding_window(n, 3, 3), M.causal(n))
    np.testing.assert_array_equal(np.asarray(causal_band), np.asarray(M.sliding_window(n, 3)))
    np.testing.assert_array_equal(np.asarray(M.or_masks(M.causal(n), M.prefix_lm(n, 3))), np.asarray(M.prefix_lm(n, 3)))
    batched = np.stack([np.asarray(M.causal(3)), np.eye(3, dtype=bool)])
    np.testing.assert_array_equal(
        np.asarray(M.or_masks(batched, batched[::-1])), batched.any(axis=0)[None].repeat(2, 0)
    )
