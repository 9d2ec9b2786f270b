"""``IntervalMask`` union and intersection, a block of rows at a time, against the dense Boolean operators."""

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from hassejax.errors import MemoryBudgetError
from hassejax.masks import IntervalMask, _intervals, _runs
from hassejax.masks import structured as S


@st.composite
def mask_pairs(draw):
    n = draw(st.integers(1, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    p, q = draw(st.sampled_from([0.0, 0.1, 0.4, 0.8])), draw(st.sampled_from([0.05, 0.3, 0.6, 1.0]))
    return rng.random((n, n)) < p, rng.random((n, n)) < q


@settings(max_examples=80, deadline=None)
@given(pair=mask_pairs(), block=st.sampled_from([1, 2, 5, 37, 1 << 22]))
def test_union_and_intersection_in_row_blocks_equal_the_dense_operators(pair, block):
    a, b = pair
    x, y = IntervalMask.from_dense(a), IntervalMask.from_dense(b)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_intervals, "_COMBINE_CANDIDATES", block)  # candidate runs a block: down to a row a block
        union, meet = x | y, x & y
    assert np.array_equal(union.to_dense(), a | b) and np.array_equal(meet.to_dense(), a & b)
    # the normal form: the same runs as the dense mask's own interval form (sorted, disjoint, separated)
    assert union == IntervalMask.from_dense(a | b) and meet == IntervalMask.from_dense(a & b)
    assert np.array_equal(union.starts, IntervalMask.from_dense(a | b).starts)
    assert np.array_equal(meet.stops, IntervalMask.from_dense(a & b).stops)


@settings(max_examples=40, deadline=None)
@given(pair=mask_pairs(), third=st.integers(0, 2**32 - 1), block=st.sampled_from([1, 3, 1 << 22]))
def test_union_of_many_in_one_pass_equals_the_dense_union(pair, third, block):
    """``IntervalMask.union`` (the heads' union in one merge, a review: ``|`` in turn merged four heads' runs 153
    times a row where once is 68) equals the dense OR, in normal form, a block of rows at a time or whole."""
    a, b = pair
    c = np.random.default_rng(third).random(a.shape) < 0.2
    masks = [IntervalMask.from_dense(m) for m in (a, b, c)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_intervals, "_COMBINE_CANDIDATES", block)
        union = IntervalMask.union(masks)
    want = IntervalMask.from_dense(a | b | c)
    assert np.array_equal(union.to_dense(), a | b | c) and union == want
    assert np.array_equal(union.starts, want.starts) and np.array_equal(union.stops, want.stops)
    assert IntervalMask.union(masks[:1]) is masks[0]


def test_union_and_intersection_check_their_memory_first(monkeypatch):
    """A fresh user: ``dilated(...) | attention_sinks(...)`` at n = 10^6 built for 49 s and 17 GB, unchecked; an
    intersection of two masks of k runs a row built all ``n · k²`` pairs at once."""
    n = 1_000_000
    window, sinks = S.dilated(n, 16, 4), S.attention_sinks(n, 4)  # 9 and 1 runs a row
    monkeypatch.setattr(_runs, "host_memory_bytes", lambda: 1 << 24)  # 16 MiB
    with pytest.raises(
        MemoryBudgetError, match=r"^`\|`: the union \(\|\) of two interval masks \(n = 1000000; 9 and 1"
    ):
        window | sinks
    with pytest.raises(MemoryBudgetError, match=r"^`&`: the intersection \(&\) of two interval masks"):
        window & window
