"""Each constructor against an independent elementwise definition written as Python loops."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hassejax.masks as M


def by_loops(n_q, n_k, rule):
    out = np.zeros((n_q, n_k), dtype=bool)
    for q in range(n_q):
        for k in range(n_k):
            out[q, k] = bool(rule(q, k))
    return out


def check(mask, expected):
    assert mask.dtype == np.bool_
    assert mask.shape == expected.shape
    np.testing.assert_array_equal(np.asarray(mask), expected)


SIZES = [1, 2, 3, 5, 8, 13]


@pytest.mark.parametrize("n", SIZES)
def test_causal_and_full(n):
    check(M.causal(n), by_loops(n, n, lambda q, k: k <= q))
    check(M.full(n), by_loops(n, n, lambda q, k: True))


def test_causal_small_literal():
    check(M.causal(3), np.array([[1, 0, 0], [1, 1, 0], [1, 1, 1]], dtype=bool))


@given(n=st.integers(1, 12), data=st.data())
@settings(max_examples=25)
def test_prefix_lm(n, data):
    p = data.draw(st.integers(0, n))
    check(M.prefix_lm(n, p), by_loops(n, n, lambda q, k: k < p or k <= q))


def test_prefix_lm_notebook_variant_is_one_more_key():
    # attention-gym's notebook rule `k <= P` equals our prefix P + 1.
    n, p = 7, 3
    check(M.prefix_lm(n, p + 1), by_loops(n, n, lambda q, k: k <= p or k <= q))
    check(M.prefix_lm(n, 0), np.asarray(M.causal(n)))
    check(M.prefix_lm(n, n), np.asarray(M.full(n)))


@given(n_q=st.integers(1, 9), n_k=st.integers(1, 9))
@settings(max_examples=25)
def test_causal_bottom_right(n_q, n_k):
    expected = by_loops(n_q, n_k, lambda q, k: k <= q + (n_k - n_q))
    check(M.causal_bottom_right(n_q, n_k), expected)
    # the last query sees every key; with n_q > n_k the first n_q - n_k rows are empty
    assert expected[-1].all()
    assert (~expected.any(axis=1)).sum() == max(0, n_q - n_k)


@given(n=st.integers(1, 14), data=st.data())
@settings(max_examples=25)
def test_block_causal(n, data):
    b = data.draw(st.integers(1, n))
    check(M.block_causal(n, b), by_loops(n, n, lambda q, k: q // b >= k // b))


@given(n=st.integers(1, 14), data=st.data())
@settings(max_examples=25)
def test_chunked_causal(n, data):
    c = data.draw(st.integers(1, n))
    check(M.chunked_causal(n, c), by_loops(n, n, lambda q, k: q // c == k // c and k <= q))


@given(n=st.integers(1, 14), left=st.integers(0, 16), right=st.integers(0, 16))
@settings(max_examples=30)
def test_sliding_window(n, left, right):
    check(M.sliding_window(n, left, right), by_loops(n, n, lambda q, k: q - left <= k <= q + right))


@given(n=st.integers(1, 14), window=st.integers(0, 14), dilation=st.integers(1, 5))
@settings(max_examples=30)
def test_dilated(n, window, dilation):
    expected = by_loops(n, n, lambda q, k: abs(q - k) <= window and abs(q - k) % dilation == 0)
    check(M.dilated(n, window, dilation), expected)


@given(n=st.integers(1, 14), window=st.integers(0, 5), data=st.data())
@settings(max_examples=30)
def test_global_sliding(n, window, data):
    idx = data.draw(st.lists(st.integers(0, n - 1), max_size=4))
    g = [i in idx for i in range(n)]
    expected = by_loops(n, n, lambda q, k: abs(q - k) <= window or g[q] or g[k])
    check(M.global_sliding(n, window, idx), expected)
    check(M.global_sliding(n, window, np.array(g)), expected)  # the same as Boolean flags
    check(M.global_sliding(n, window, np.array(idx, dtype=np.int64)), expected)


def natten_by_loops(h, w, kh, kw):
    n = h * w
    out = np.zeros((n, n), dtype=bool)
    for q in range(n):
        qr, qc = divmod(q, w)
        cr = min(max(qr, kh // 2), h - 1 - kh // 2)
        cc = min(max(qc, kw // 2), w - 1 - kw // 2)
        for k in range(n):
            kr, kc = divmod(k, w)
            out[q, k] = abs(cr - kr) <= kh // 2 and abs(cc - kc) <= kw // 2
    return out


@given(h=st.integers(1, 6), w=st.integers(1, 6), data=st.data())
@settings(max_examples=25)
def test_natten_2d(h, w, data):
    kh = data.draw(st.sampled_from(list(range(1, h + 1, 2))))
    kw = data.draw(st.sampled_from(list(range(1, w + 1, 2))))
    mask = np.asarray(M.natten_2d(h, w, kh, kw))
    check(mask, natten_by_loops(h, w, kh, kw))
    # every row has exactly kh * kw keys and sees itself
    assert (mask.sum(axis=1) == kh * kw).all()
    assert mask.diagonal().all()


def test_natten_matches_attention_gym_on_square_canvas():
    # attention-gym's generate_natten written as it is (x = idx // W clamped with canvas_w, kernel_w)
    size, kern = 5, 3

    def gym(q, k):
        qx, qy = divmod(q, size)
        kx, ky = divmod(k, size)
        cx = min(max(qx, kern // 2), size - 1 - kern // 2)
        cy = min(max(qy, kern // 2), size - 1 - kern // 2)
        return abs(cx - kx) <= kern // 2 and abs(cy - ky) <= kern // 2

    check(M.natten_2d(size, size, kern, kern), by_loops(size * size, size * size, gym))


def document_by_loops(doc, inner):
    n = len(doc)
    start = {}
    for i, d in enumerate(doc):
        start.setdefault(d, i)
    return by_loops(n, n, lambda q, k: doc[q] == doc[k] and inner(q - start[doc[q]], k - start[doc[k]]))


@given(lengths=st.lists(st.integers(1, 5), min_size=1, max_size=4))
@settings(max_examples=25)
def test_document_lengths(lengths):
    doc = [d for d, length in enumerate(lengths) for _ in range(length)]
    check(M.document(lengths), document_by_loops(doc, lambda qo, ko: ko <= qo))
    check(M.document(lengths, "full"), document_by_loops(doc, lambda qo, ko: True))


def window_of_one(b, h, q, k):
    return (k <= q) & (q - k <= 1)


@pytest.mark.parametrize("lengths", [[1], [4], [2, 3], [3, 1, 4]])
def test_document_inner_mask_mod(lengths):
    doc = [d for d, length in enumerate(lengths) for _ in range(length)]
    check(M.document(lengths, "causal"), np.asarray(M.document(lengths)))
    # a FlexAttention-style inner mask_mod over offsets: a window of one previous key
    check(M.document(lengths, window_of_one), document_by_loops(doc, lambda qo, ko: ko <= qo and qo - ko <= 1))


def test_document_ids_equal_lengths_and_any_labels():
    ids = [7, 7, 7, 2, 2, 9]
    check(M.document(ids, kind="ids"), np.asarray(M.document([3, 2, 1])))
    check(M.document(np.array(ids), "full", kind="ids"), document_by_loops(ids, lambda qo, ko: True))


def test_document_inner_sees_offsets_not_positions():
    # inner = "only offset 0 may be attended": each query sees the first token of its document
    inner = lambda b, h, q, k: k == 0
    check(M.document([2, 3], inner), document_by_loops([0, 0, 1, 1, 1], lambda qo, ko: ko == 0))


def ancestors_by_pointer_chasing(parents):
    t = len(parents)
    anc = np.zeros((t, t), dtype=bool)
    for i in range(t):
        j = i
        while j != -1:
            anc[i, j] = True
            j = parents[j]
    return anc


@st.composite
def trees(draw):
    t = draw(st.integers(1, 9))
    parents = [-1]
    for i in range(1, t):
        parents.append(draw(st.integers(-1, i - 1)))
    return parents


@given(parents=trees(), prefix=st.integers(0, 4))
@settings(max_examples=30)
def test_tree_prefix(parents, prefix):
    anc = ancestors_by_pointer_chasing(parents)
    t = len(parents)
    n = prefix + t

    def rule(q, k):
        if q < prefix:
            return k <= q
        return k < prefix or (k >= prefix and anc[q - prefix, k - prefix])

    mask = np.asarray(M.tree_prefix(parents, prefix))
    check(mask, by_loops(n, n, rule))
    # the tree rows are attention-gym's rectangular JetSpec mask (ancestor matrix built its way)
    gym_anc = np.eye(t, dtype=bool)
    for node in range(1, t):
        if parents[node] >= 0:
            gym_anc[node] |= gym_anc[parents[node]]
    rect = by_loops(t, n, lambda q, k: k < prefix or gym_anc[q, k - prefix])
    np.testing.assert_array_equal(mask[prefix:], rect)


def test_tree_prefix_jetspec_example():
    # attention-gym's demo tree: parents [-1, 0, 1, 1, 3, 3, 0]; node 4 = path 0-1-3-4
    mask = np.asarray(M.tree_prefix([-1, 0, 1, 1, 3, 3, 0], 0))
    assert np.flatnonzero(mask[4]).tolist() == [0, 1, 3, 4]
    assert np.flatnonzero(mask[6]).tolist() == [0, 6]
    assert not mask[5, 4]  # siblings never see each other
