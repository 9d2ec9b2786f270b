"""The constructors under jax.jit / jax.vmap: static sizes, traced index arrays, runtime checks."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hassejax.masks as M
from hassejax.errors import MaskError

STATIC = [
    (M.causal, (6,)),
    (M.full, (3,)),
    (M.prefix_lm, (6, 2)),
    (M.causal_bottom_right, (3, 5)),
    (M.sliding_window, (7, 2, 1)),
    (M.block_causal, (7, 3)),
    (M.chunked_causal, (7, 3)),
    (M.dilated, (9, 4, 2)),
    (M.natten_2d, (3, 4, 3, 3)),
    (M.block_diffusion, (5, 2)),
]


@pytest.mark.parametrize("fn, args", STATIC, ids=[f.__name__ for f, _ in STATIC])
def test_jit_with_static_sizes(fn, args):
    jitted = jax.jit(fn, static_argnums=tuple(range(len(args))))
    np.testing.assert_array_equal(np.asarray(jitted(*args)), np.asarray(fn(*args)))


def test_traced_size_is_a_clear_error():
    with pytest.raises(MaskError, match=r"`n` must be an integer >= 1 known when the mask is built .*static_argnums"):
        jax.jit(M.causal)(4)


def test_traced_permutation_and_vmap():
    perms = jnp.array([[2, 0, 1, 3], [0, 1, 2, 3], [3, 2, 1, 0]])
    jitted = jax.jit(functools.partial(M.xlnet_two_stream, context=1))
    for z in perms:
        got, want = jitted(z), M.xlnet_two_stream(np.asarray(z).tolist(), context=1)
        np.testing.assert_array_equal(np.asarray(got.query), np.asarray(want.query))
        np.testing.assert_array_equal(np.asarray(got.content), np.asarray(want.content))
    batched = jax.vmap(M.xlnet_two_stream)(perms)
    assert batched.query.shape == (3, 4, 4)
    for i, z in enumerate(perms):
        np.testing.assert_array_equal(np.asarray(batched.query[i]), np.asarray(M.xlnet_two_stream(np.asarray(z)).query))


def test_traced_bad_permutation_fails_at_run_time():
    with pytest.raises(Exception, match="`permutation` must be a permutation of 0..n-1"):
        jax.block_until_ready(jax.jit(M.xlnet_two_stream)(jnp.array([0, 0, 2])))


def test_traced_document_ids_and_parents_and_globals():
    ids = jnp.array([3, 3, 1, 1, 1, 8])
    np.testing.assert_array_equal(
        np.asarray(jax.jit(functools.partial(M.document, kind="ids"))(ids)), np.asarray(M.document([2, 3, 1]))
    )
    parents = jnp.array([-1, 0, 0, 1])
    np.testing.assert_array_equal(
        np.asarray(jax.jit(M.tree_prefix, static_argnums=1)(parents, 2)), np.asarray(M.tree_prefix([-1, 0, 0, 1], 2))
    )
    glob = jax.jit(M.global_sliding, static_argnums=(0, 1))
    np.testing.assert_array_equal(np.asarray(glob(6, 1, jnp.array([0, 4]))), np.asarray(M.global_sliding(6, 1, [0, 4])))
    flags = jnp.array([True, False, False, False, True, False])
    np.testing.assert_array_equal(np.asarray(glob(6, 1, flags)), np.asarray(M.global_sliding(6, 1, [0, 4])))


def test_document_ids_that_agree_in_their_low_32_bits_stay_distinct():
    """Ids are compared whole: 5 and 5 + 2**32 (e.g. hashed document ids) are two documents, concrete or traced
    (int64 under the suite's x64); a cast to int32 merged them, and the query of the second attended to the first."""
    two_docs = np.asarray(M.document([2, 1]))
    ids = np.array([5, 5, 5 + 2**32])
    np.testing.assert_array_equal(np.asarray(M.document(ids, kind="ids")), two_docs)
    np.testing.assert_array_equal(np.asarray(M.structured.document(ids, kind="ids")), two_docs)
    traced = jax.jit(functools.partial(M.document, kind="ids"))(jnp.asarray(ids))
    np.testing.assert_array_equal(np.asarray(traced), two_docs)
    with pytest.raises(MaskError, match="one contiguous run"):  # split in the high bits only: still a split
        M.document(np.array([0, 2**32, 0]), kind="ids")


@pytest.mark.parametrize(
    "ids, entry",
    [([2**63, 2**63, 1], 0), ([0, -(2**63) - 1], 1), (np.array([1, 2**63 + 5], np.uint64), 1)],
    ids=["list-2**63", "list-below-int64", "uint64-array"],
)
def test_ids_beyond_64_bit_signed_integers_are_refused_by_name(ids, entry):
    """An id outside int64 is a MaskError naming the argument and the entry (was a raw OverflowError for a list; a
    uint64 array wrapped 2**63 + 5 to a negative id, and lengths or parents to a negative value the message showed)."""
    with pytest.raises(MaskError, match=rf"`segments` entries must fit in 64-bit signed integers; entry {entry} is"):
        M.document(ids, kind="ids")
    with pytest.raises(MaskError, match=r"`parents` entries must fit"):
        M.tree_prefix(ids, 1)


def test_uint64_ids_within_int64_are_accepted():
    ids = np.array([7, 7, 2**63 - 1], np.uint64)
    np.testing.assert_array_equal(np.asarray(M.document(ids, kind="ids")), np.asarray(M.document([2, 1])))


def test_traced_64_bit_parents_are_checked_before_any_cast():
    """A traced int64 parent 2**32 is out of range; cast to int32 first it was 0, a valid parent."""
    with pytest.raises(Exception, match="parents before children"):
        jax.block_until_ready(jax.jit(M.tree_prefix, static_argnums=1)(jnp.array([-1, 2**32]), 0))
    with pytest.raises(Exception, match="parents before children"):  # uint32 2**32 - 1 is not the root -1
        jax.block_until_ready(jax.jit(M.tree_prefix, static_argnums=1)(jnp.array([2**32 - 1, 0], jnp.uint32), 0))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: jax.jit(functools.partial(M.document, kind="ids"))(jnp.array([0, 1, 0])), "one contiguous run"),
        (lambda: jax.jit(M.tree_prefix, static_argnums=1)(jnp.array([-1, 2, 0]), 0), "parents before children"),
        (
            lambda: jax.jit(M.global_sliding, static_argnums=(0, 1))(4, 1, jnp.array([7])),
            "indices in [0, n-1] = [0, 3]",
        ),
        (lambda: jax.jit(M.from_additive_bias)(jnp.array([[0.0, 1.0]])), "exactly 0 (may attend) or -inf"),
        (lambda: jax.jit(M.from_blocked)(jnp.array([[0, 2]])), "only 0 (may attend) and 1 (blocked)"),
    ],
)
def test_traced_value_checks_fail_at_run_time(call, message):
    with pytest.raises(Exception) as info:
        jax.block_until_ready(call())
    assert message in str(info.value)


def test_traced_lengths_are_refused():
    with pytest.raises(MaskError, match="lengths fix the mask's shape and must be concrete"):
        jax.jit(M.document)(jnp.array([2, 3]))


def test_traced_converters_round_trip():
    m = np.asarray(M.sliding_window(5, 1, 1))
    np.testing.assert_array_equal(np.asarray(jax.jit(M.from_blocked)(jnp.asarray(~m))), m)
    bias = jnp.where(jnp.asarray(m), 0.0, -jnp.inf)
    np.testing.assert_array_equal(np.asarray(jax.jit(M.from_additive_bias)(bias)), m)
    mm = jax.jit(lambda: M.from_mask_mod(lambda b, h, q, k: q >= k, 5))
    np.testing.assert_array_equal(np.asarray(mm()), np.asarray(M.causal(5)))
