"""XLNet two-stream masks: the gallery rule and XLNet's own `_local_perm` construction."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hassejax.masks as M


def gallery_rule(z, c):
    n = len(z)
    pos = {token: rank for rank, token in enumerate(z)}
    ctx = set(z[:c])
    content = np.zeros((n, n), dtype=bool)
    query = np.zeros((n, n), dtype=bool)
    for q in range(n):
        for k in range(n):
            if q in ctx:
                content[q, k] = query[q, k] = k in ctx
            else:
                content[q, k] = pos[k] <= pos[q]
                query[q, k] = pos[k] < pos[q]
    return content, query


def xlnet_local_perm(z, c):
    """zihangdai/xlnet data_utils._local_perm, transcribed to NumPy (1 in perm_mask = cannot attend).

    index = the permutation rank of each token; non-masked (context) tokens get rank -1.
    """
    n = len(z)
    index = np.empty(n, dtype=np.int64)
    index[np.asarray(z)] = np.arange(n)
    is_masked = np.ones(n, dtype=bool)
    is_masked[np.asarray(z[:c], dtype=np.int64)] = False
    non_mask_tokens = ~is_masked  # no functional (SEP/CLS) tokens here
    masked_or_func_tokens = ~non_mask_tokens
    rev_index = np.where(non_mask_tokens, -1, index)
    target_tokens = masked_or_func_tokens
    self_rev_index = np.where(target_tokens, rev_index, rev_index + 1)
    perm_mask = (self_rev_index[:, None] <= rev_index[None, :]) & masked_or_func_tokens[None, :]
    query = ~perm_mask
    content = query | np.eye(n, dtype=bool)  # non_tgt_mask: the content stream re-allows itself
    return content, query


@st.composite
def permutations_with_context(draw):
    n = draw(st.integers(1, 9))
    z = draw(st.permutations(list(range(n))))
    c = draw(st.integers(0, n))
    return list(z), c


@given(zc=permutations_with_context())
@settings(max_examples=40)
def test_gallery_rule_and_xlnet_source(zc):
    z, c = zc
    streams = M.xlnet_two_stream(z, context=c)
    assert isinstance(streams, M.TwoStreamMasks)
    content, query = (np.asarray(m) for m in streams)
    g_content, g_query = gallery_rule(z, c)
    np.testing.assert_array_equal(content, g_content)
    np.testing.assert_array_equal(query, g_query)
    x_content, x_query = xlnet_local_perm(z, c)
    np.testing.assert_array_equal(content, x_content)
    np.testing.assert_array_equal(query, x_query)
    # from_blocked reads XLNet's perm_mask directly
    np.testing.assert_array_equal(np.asarray(M.from_blocked((~x_query).astype(np.float32))), query)


@pytest.mark.parametrize("z", [[0], [2, 0, 1], [3, 1, 0, 2], [4, 3, 2, 1, 0]])
def test_first_token_of_z_has_empty_query_row(z):
    content, query = (np.asarray(m) for m in M.xlnet_two_stream(z))
    empty = np.flatnonzero(~query.any(axis=1)).tolist()
    assert empty == [z[0]]
    # no target sees itself in the query stream; content sees itself always
    assert not query.diagonal().any() and content.diagonal().all()


def test_identity_permutation_is_causal():
    n = 6
    content, query = M.xlnet_two_stream(list(range(n)))
    np.testing.assert_array_equal(np.asarray(content), np.asarray(M.causal(n)))
    np.testing.assert_array_equal(np.asarray(query), np.asarray(M.causal(n)) & ~np.eye(n, dtype=bool))


@pytest.mark.parametrize("c", [1, 2, 4])
def test_context_variant(c):
    z = [3, 0, 4, 1, 2]
    n = len(z)
    content, query = (np.asarray(m) for m in M.xlnet_two_stream(z, context=c))
    ctx = z[:c]
    targets = list(z[c:])
    for stream in (content, query):
        # context tokens see each other bidirectionally and never a target
        assert stream[np.ix_(ctx, ctx)].all()
        assert not stream[np.ix_(ctx, targets)].any()
        # every target sees every context token
        assert stream[np.ix_(targets, ctx)].all()
    assert query.any(axis=1).all()  # with context no query row is empty
    full_context = M.xlnet_two_stream(z, context=n)
    assert all(np.asarray(m).all() for m in full_context)


def test_numpy_and_jax_permutations():
    import jax.numpy as jnp

    z = [2, 0, 3, 1]
    ref = M.xlnet_two_stream(z)
    for arr in (np.array(z), np.array(z, dtype=np.int32), jnp.array(z)):
        got = M.xlnet_two_stream(arr)
        np.testing.assert_array_equal(np.asarray(got.content), np.asarray(ref.content))
        np.testing.assert_array_equal(np.asarray(got.query), np.asarray(ref.query))
