"""Closed-form family masks in interval form: equal to the dense closed forms, and cheap at large n."""

import doctest
import inspect
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hassejax.errors import TaskError
from hassejax.masks import IntervalMask
from hassejax.tasks import block_two_stream_mask, butterfly, butterfly_mask


def assert_same(structured_mask, dense):
    dense = np.asarray(dense)
    assert isinstance(structured_mask, IntervalMask) and structured_mask.shape == dense.shape
    np.testing.assert_array_equal(structured_mask.to_dense(), dense)
    want = IntervalMask.from_dense(dense)  # the normal form, run for run
    np.testing.assert_array_equal(structured_mask.starts, want.starts)
    np.testing.assert_array_equal(structured_mask.stops, want.stops)


# The dense closed forms run op by op and compile once per size: sizes come from small fixed
# sets, the options range freely.
block_layouts = st.sampled_from([(1, 1), (6, 2), (6, 3), (8, 4)])


@given(
    layout=block_layouts,
    group=st.sampled_from(["full", "causal", "diagonal"]),
    content=st.sampled_from(["causal", "block_causal"]),
    keep_last_block=st.booleans(),
)
@settings(max_examples=20)
def test_block_two_stream_intervals_equal_dense(layout, group, content, keep_last_block):
    n, l = layout
    dense = block_two_stream_mask(n, l, group, content, keep_last_block)
    assert_same(block_two_stream_mask(n, l, group, content, keep_last_block, form="intervals"), dense)


def test_block_two_stream_spec_table_and_edge_layouts():
    m = block_two_stream_mask(6, 2, form="intervals")  # the n = 6, l = 2 table of spec hasse.md §3.2
    assert [m.row(q) for q in (0, 5, 6, 7, 8, 10, 11)] == [
        [(0, 1)],
        [(0, 6)],
        [(6, 8)],
        [(6, 8)],
        [(0, 2), (8, 10)],
        [(0, 4), (10, 12)],
        [(0, 4), (10, 12)],
    ]
    for n, l in [(1, 1), (2, 2), (4, 4), (5, 1)]:  # one block only; without the last block c = 0
        for keep in (True, False):
            assert_same(
                block_two_stream_mask(n, l, keep_last_block=keep, form="intervals"),
                block_two_stream_mask(n, l, keep_last_block=keep),
            )


@given(n=st.sampled_from([2, 3, 7, 16]), sparse=st.booleans())
@settings(max_examples=10)
def test_butterfly_intervals_equal_dense(n, sparse):
    assert_same(butterfly_mask(n, sparse, form="intervals"), butterfly_mask(n, sparse))


def test_butterfly_intervals_equal_the_merged_family():
    merged = butterfly(5).merge()
    assert_same(butterfly_mask(5, form="intervals"), merged.mask)


def test_butterfly_at_300000_in_seconds_without_a_dense_array():
    n = 300_000
    t0 = time.perf_counter()
    dense_form = butterfly_mask(n, form="intervals")
    sparse_form = butterfly_mask(n, sparse=True, form="intervals")
    seconds = time.perf_counter() - t0
    assert seconds < 10, seconds  # well under a second here; the dense form would need 810 GB
    size = 3 * n - 2
    assert dense_form.shape == (size, size) and dense_form.num_runs <= 3 and sparse_form.num_runs <= 3
    assert dense_form.nbytes <= 3 * 2 * 8 * size
    assert dense_form.nnz() == 2 * n * n - n and sparse_form.nnz() == 7 * n - 8  # spec hasse.md §3.3
    # C_k (slot k + 2n - 3) sees F_1..F_{k-1}, B_{k+1}..B_n and itself
    k = 1000
    c = k + 2 * n - 3
    assert dense_form.row(c) == [(0, k - 1), (k + n - 2, 2 * n - 2), (c, c + 1)]
    assert sparse_form.row(c) == [(k - 2, k - 1), (k + n - 2, k + n - 1), (c, c + 1)]
    assert dense_form.row(0) == [(0, 1)] and dense_form.row(n - 1) == [(n - 1, 2 * n - 2)]


def test_block_two_stream_at_large_n():
    n, l = 262_144, 1024
    m = block_two_stream_mask(n, l, form="intervals")
    assert m.shape == (2 * n, 2 * n) and m.num_runs == 2
    t = 5000  # the query slot of position t sees the whole blocks before its own and its group
    first = ((t - 1) // l) * l
    assert m.row(n + t - 1) == [(0, first), (n + first, n + first + l)]


def test_form_argument_errors(no_typecheck):
    with pytest.raises(TaskError, match=r"`form` must be one of \('dense', 'intervals'\); got 'runs'"):
        butterfly_mask(4, form="runs")
    with pytest.raises(TaskError, match=r"`form` must be one of \('dense', 'intervals'\); got 'sparse'"):
        block_two_stream_mask(4, 2, form="sparse")
    with pytest.raises(TaskError, match="`sparse` must be True or False"):
        butterfly_mask(4, sparse="no", form="intervals")
    with pytest.raises(TaskError, match="`block_size` must divide `n`"):
        block_two_stream_mask(7, 2, form="intervals")
    with pytest.raises(TaskError, match="`n` must be an int >= 2"):
        butterfly_mask(1, form="intervals")


@pytest.mark.parametrize("fn", [block_two_stream_mask, butterfly_mask])
def test_docstring_examples_run(fn):
    tests = doctest.DocTestFinder().find(inspect.unwrap(fn), fn.__name__, globs={})
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    attempted = sum(runner.run(t).attempted for t in tests)
    assert attempted > 0 and runner.failures == 0
