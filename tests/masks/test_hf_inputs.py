"""Hugging Face / FlexAttention-style inputs: lazy and_masks / or_masks of mask_mods, packed document ids.

References are independent: NumPy on the index grid for the masks, and a plain NumPy
transcription of ``transformers.masking_utils.find_packed_sequence_indices`` /
``np.repeat`` over the lengths for the packed ids.
"""

import functools
import operator

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hassejax.masks as M
from hassejax.errors import MaskError
from hassejax.masks import structured as S

N = 9
IDS = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2])  # length N
_IDS = jnp.asarray(IDS)


def causal_mod(b, h, q, k):
    return k <= q


def window_mod(b, h, q, k):
    return jnp.abs(q - k) <= 2


def prefix_mod(b, h, q, k):
    return k < 3


def doc_mod(b, h, q, k):
    return _IDS[q] == _IDS[k]


def parity_mod(b, h, q, k):
    return (q + k + b + h) % 2 == 0


MODS = [causal_mod, window_mod, prefix_mod, doc_mod, parity_mod]
NUMPY = {  # the same rules on NumPy grids (q: column vector, k: row vector)
    "causal_mod": lambda b, h, q, k: k <= q,
    "window_mod": lambda b, h, q, k: np.abs(q - k) <= 2,
    "prefix_mod": lambda b, h, q, k: np.broadcast_to(k < 3, (q.shape[0], k.shape[1])),
    "doc_mod": lambda b, h, q, k: IDS[q] == IDS[k],
    "parity_mod": lambda b, h, q, k: (q + k + b + h) % 2 == 0,
}
Q, K = np.arange(N)[:, None], np.arange(N)[None, :]
COMBINATORS = [(M.and_masks, operator.and_), (M.or_masks, operator.or_)]


@given(
    picks=st.lists(st.sampled_from(range(len(MODS))), min_size=1, max_size=4),
    which=st.sampled_from(range(2)),
    bh=st.tuples(st.integers(0, 2), st.integers(0, 2)),
)
@settings(max_examples=25)
def test_callable_combination_equals_array_combination(picks, which, bh):
    combinator, op = COMBINATORS[which]
    mods = [MODS[i] for i in picks]
    b, h = bh
    lazy = combinator(*mods)
    got = np.asarray(M.from_mask_mod(lazy, N, b=b, h=h))
    arrays = combinator(*[M.from_mask_mod(m, N, b=b, h=h) for m in mods])
    reference = functools.reduce(op, [NUMPY[m.__name__](b, h, Q, K) for m in mods])
    np.testing.assert_array_equal(got, np.asarray(arrays))
    np.testing.assert_array_equal(got, reference)


@given(q=st.integers(0, N - 1), k=st.integers(0, N - 1))
@settings(max_examples=20)
def test_combination_on_scalars(q, k):
    for combinator, op in COMBINATORS:
        fn = combinator(causal_mod, window_mod, doc_mod)
        want = functools.reduce(
            op,
            [
                bool(NUMPY[m.__name__](0, 0, np.array([[q]]), np.array([[k]]))[0, 0])
                for m in (causal_mod, window_mod, doc_mod)
            ],
        )
        assert bool(fn(0, 0, q, k)) == want  # Python ints
        assert bool(fn(jnp.int32(0), jnp.int32(0), jnp.int32(q), jnp.int32(k))) == want  # JAX scalars


def test_combination_under_vmap_and_jit_and_nested():
    fn = M.or_masks(M.and_masks(causal_mod, window_mod), prefix_mod)
    q = jnp.arange(N, dtype=jnp.int32)
    got = jax.jit(jax.vmap(lambda qi: jax.vmap(lambda ki: fn(0, 0, qi, ki))(q)))(q)
    want = (NUMPY["causal_mod"](0, 0, Q, K) & NUMPY["window_mod"](0, 0, Q, K)) | NUMPY["prefix_mod"](0, 0, Q, K)
    np.testing.assert_array_equal(np.asarray(got), want)
    np.testing.assert_array_equal(M.from_mask_mod(fn, N, form="intervals").to_dense(), want)


def test_names_and_repr():
    fn = M.and_masks(causal_mod, window_mod)
    assert fn.__name__ == "and_masks(causal_mod, window_mod)"
    assert repr(fn) == "<mask_mod and_masks(causal_mod, window_mod)>"
    nested = M.or_masks(fn, lambda b, h, q, k: k == 0)
    assert nested.__name__ == "or_masks(and_masks(causal_mod, window_mod), <lambda>)"
    assert callable(nested) and nested.mask_mods[0] is fn
    # lazy: nothing is evaluated before the call
    calls = []
    M.and_masks(lambda b, h, q, k: calls.append(1) or True)
    assert calls == []


def test_single_callable_and_array_behaviour_unchanged():
    np.testing.assert_array_equal(np.asarray(M.from_mask_mod(M.and_masks(causal_mod), 4)), np.asarray(M.causal(4)))
    a, c = M.sliding_window(5, 1, 1), M.causal(5)
    np.testing.assert_array_equal(np.asarray(M.and_masks(a, c)), np.asarray(a) & np.asarray(c))
    np.testing.assert_array_equal(np.asarray(M.or_masks(a, c)), np.asarray(a) | np.asarray(c))


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: M.and_masks(causal_mod, M.causal(3)),
            "and_masks: masks[0] is a mask_mod callable, so every mask must be one (combined lazily); masks[1] is an array of shape (3, 3)",
        ),
        (
            lambda: M.or_masks(M.causal(3), M.causal(3), causal_mod),
            "or_masks: masks[0] is an array, so every mask must be one; masks[2] is a mask_mod callable (causal_mod)",
        ),
        (
            lambda: M.from_mask_mod(M.and_masks(causal_mod, lambda b, h, q, k: q - k), 3),
            "and_masks: masks[1] (<lambda>) must return a Boolean (True = may attend); it returned dtype int32",
        ),
        (lambda: M.and_masks(), "and_masks needs at least one mask; got none"),
    ],
)
def test_combination_errors_name_the_position(call, message):
    with pytest.raises(MaskError) as info:
        call()
    assert message in str(info.value), str(info.value)


# ------------------------------------------------------------------ packed documents


def hf_find_packed_sequence_indices(position_ids: np.ndarray) -> np.ndarray:
    """NumPy transcription of transformers.masking_utils.find_packed_sequence_indices (2-D input)."""
    first_dummy_value = position_ids[:, :1] - 1
    position_diff = np.diff(position_ids, prepend=first_dummy_value, axis=-1)
    return (position_diff != 1).cumsum(-1)  # the dummy makes position 0 no change: ids count from 0


lengths_st = st.lists(st.integers(1, 6), min_size=1, max_size=5)


@given(lengths=lengths_st)
@settings(max_examples=15)
def test_packed_ids_from_position_ids_and_cu_seqlens(lengths):
    lengths = np.asarray(lengths)
    want = np.repeat(np.arange(lengths.size), lengths)
    position_ids = np.concatenate([np.arange(n) for n in lengths])
    cu_seqlens = np.concatenate([[0], np.cumsum(lengths)])
    from_pos = M.packed_document_ids(position_ids=position_ids)
    from_cu = M.packed_document_ids(cu_seqlens=cu_seqlens)
    assert from_pos.dtype == jnp.int32 and from_cu.dtype == jnp.int32
    np.testing.assert_array_equal(np.asarray(from_pos), want)
    np.testing.assert_array_equal(np.asarray(from_cu), want)
    np.testing.assert_array_equal(np.asarray(M.packed_document_ids(position_ids=position_ids.tolist())), want)
    # the masks: document(ids, kind="ids") is the dense packed rule, causal and full
    n = want.size
    q, k = np.arange(n)[:, None], np.arange(n)[None, :]
    same = want[q] == want[k]
    np.testing.assert_array_equal(np.asarray(M.document(from_pos, kind="ids")), same & (k <= q))
    np.testing.assert_array_equal(np.asarray(M.document(from_cu, "full", kind="ids")), same)
    np.testing.assert_array_equal(S.document(from_cu, kind="ids").to_dense(), same & (k <= q))
    np.testing.assert_array_equal(np.asarray(M.document(np.diff(cu_seqlens))), same & (k <= q))  # lengths


@given(rows=st.lists(st.lists(st.integers(0, 4), min_size=7, max_size=7), min_size=1, max_size=3))
@settings(max_examples=30)
def test_packed_ids_follow_the_hf_rule_on_any_position_ids(rows):
    position_ids = np.asarray(rows)
    want = hf_find_packed_sequence_indices(position_ids)
    np.testing.assert_array_equal(np.asarray(M.packed_document_ids(position_ids=position_ids)), want)
    np.testing.assert_array_equal(np.asarray(M.packed_document_ids(position_ids=position_ids[0])), want[0])
    traced = jax.jit(lambda p: M.packed_document_ids(position_ids=p))(jnp.asarray(position_ids))
    np.testing.assert_array_equal(np.asarray(traced), want)


def test_packed_ids_batched_and_under_jit_with_document():
    position_ids = jnp.asarray([[0, 1, 2, 0, 1, 0], [0, 1, 0, 1, 2, 3]])
    ids = M.packed_document_ids(position_ids=position_ids)
    masks = jax.jit(lambda p: jax.vmap(lambda r: M.document(r, kind="ids"))(M.packed_document_ids(position_ids=p)))(
        position_ids
    )
    q, k = np.arange(6)[:, None], np.arange(6)[None, :]
    for row in range(2):
        r = np.asarray(ids[row])
        np.testing.assert_array_equal(np.asarray(masks[row]), (r[q] == r[k]) & (k <= q))
    with pytest.raises(Exception) as info:
        jax.block_until_ready(jax.jit(lambda p: M.packed_document_ids(position_ids=p))(jnp.asarray([0, -1, 0])))
    assert "`position_ids` must be >= 0" in str(info.value)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({}, "pass exactly one of `position_ids` and `cu_seqlens` (as keywords); got neither"),
        ({"position_ids": [0, 1], "cu_seqlens": [0, 2]}, "got both"),
        (
            {"position_ids": [0, 1, -1]},
            "`position_ids` must be >= 0 (positions inside each document); got -1 at index 2",
        ),
        ({"position_ids": [[0, 1], [0, -2]]}, "got -2 at index (1, 1)"),
        (
            {"position_ids": np.zeros((1, 1, 2), int)},
            "`position_ids` must have shape (n,) or (batch, n); got shape (1, 1, 2) (rank 3)",
        ),
        (
            {"position_ids": np.zeros(3)},
            "`position_ids` must have an integer dtype (positions 0, 1, 2, ...); got dtype float64",
        ),
        ({"position_ids": [0.0, 1.0]}, "`position_ids` must hold integers"),
        ({"position_ids": []}, "`position_ids` must hold at least one position"),
        (
            {"position_ids": np.zeros((2, 0), int)},
            "`position_ids` must hold at least one position a row; got shape (2, 0)",
        ),
        ({"position_ids": [[0, 1], [0]]}, "`position_ids` must be a rectangular (n,) or (batch, n) array"),
        (
            {"cu_seqlens": [1, 3]},
            "`cu_seqlens` must start at 0 (cumulative lengths [0, l1, l1 + l2, ..., n]); got [1, 3]",
        ),
        (
            {"cu_seqlens": [0, 2, 2, 5]},
            "`cu_seqlens` must be strictly increasing (every document at least one position); got cu_seqlens[1] = 2 and cu_seqlens[2] = 2",
        ),
        ({"cu_seqlens": [0, 3, 1]}, "cu_seqlens[1] = 3 and cu_seqlens[2] = 1"),
        ({"cu_seqlens": [0]}, "`cu_seqlens` must hold at least two entries"),
        ({"cu_seqlens": np.zeros((2, 2), int)}, "`cu_seqlens` must be a 1-D vector of integers; got shape (2, 2)"),
        ({"cu_seqlens": np.array([0.0, 2.0])}, "`cu_seqlens` must have an integer dtype"),
    ],
)
def test_packed_ids_errors_name_the_argument(kwargs, message):
    with pytest.raises(MaskError) as info:
        M.packed_document_ids(**kwargs)
    assert message in str(info.value), str(info.value)


def test_traced_cu_seqlens_are_refused():
    with pytest.raises(MaskError, match="`cu_seqlens` fixes the number of positions"):
        jax.jit(lambda c: M.packed_document_ids(cu_seqlens=c))(jnp.asarray([0, 2, 3]))
