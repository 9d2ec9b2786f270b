"""The three case studies come out of the merge pipeline (spec hasse.md §3)."""

import numpy as np
import pytest

from hassejax.errors import TaskError
from hassejax.tasks import (
    Token,
    audit,
    autoregressive,
    block_generation,
    block_two_stream_mask,
    butterfly,
    butterfly_mask,
    sparsify,
)

SPEC_BLOCK_6_2 = """
1 0 0 0 0 0 0 0 0 0 0 0
1 1 0 0 0 0 0 0 0 0 0 0
1 1 1 0 0 0 0 0 0 0 0 0
1 1 1 1 0 0 0 0 0 0 0 0
1 1 1 1 1 0 0 0 0 0 0 0
1 1 1 1 1 1 0 0 0 0 0 0
0 0 0 0 0 0 1 1 0 0 0 0
0 0 0 0 0 0 1 1 0 0 0 0
1 1 0 0 0 0 0 0 1 1 0 0
1 1 0 0 0 0 0 0 1 1 0 0
1 1 1 1 0 0 0 0 0 0 1 1
1 1 1 1 0 0 0 0 0 0 1 1
"""

SPEC_BUTTERFLY_4 = """
1 0 0 0 0 0 0 0 0 0
1 1 0 0 0 0 0 0 0 0
1 1 1 0 0 0 0 0 0 0
0 0 0 1 1 1 0 0 0 0
0 0 0 0 1 1 0 0 0 0
0 0 0 0 0 1 0 0 0 0
0 0 0 1 1 1 1 0 0 0
1 0 0 0 1 1 0 1 0 0
1 1 0 0 0 1 0 0 1 0
1 1 1 0 0 0 0 0 0 1
"""


def _parse(text):
    return np.array([[int(x) for x in line.split()] for line in text.strip().splitlines()], dtype=bool)


def _w(j):
    return Token("w", j)


@pytest.mark.parametrize("n", range(2, 33))
def test_autoregressive_merges_to_causal(n):
    merged = autoregressive(n).merge()
    assert merged.n == n - 1
    np.testing.assert_array_equal(merged.mask, np.tril(np.ones((n - 1, n - 1), bool)))
    assert merged.inputs == tuple(_w(j) for j in range(1, n))
    assert merged.labels == tuple(_w(j) for j in range(2, n + 1))


def test_bidirectional_prefixes_share_nothing():
    n = 6
    merged = autoregressive(n, prefix="bidirectional").merge()
    assert merged.n == sum(range(1, n))  # n − 1 separate copies of sizes 1..n−1
    assert audit(merged).ok


def test_block_two_stream_spec_matrix():
    merged = block_generation(6, 2).merge()
    np.testing.assert_array_equal(merged.mask, _parse(SPEC_BLOCK_6_2))
    assert merged.slot_names() == tuple(f"w{j}" for j in range(1, 7)) + tuple(f"mask{j}" for j in range(1, 7))
    assert merged.labels == (None,) * 6 + tuple(_w(j) for j in range(1, 7))


@pytest.mark.parametrize("n", range(1, 33))
def test_block_generation_matches_closed_form(n):
    for l in [d for d in range(1, n + 1) if n % d == 0]:
        with_last = block_generation(n, l).merge()
        assert with_last.n == 2 * n
        np.testing.assert_array_equal(with_last.mask, np.asarray(block_two_stream_mask(n, l)))
        without = block_generation(n, l, keep_last_block=False).merge()
        assert without.n == 2 * n - l
        np.testing.assert_array_equal(without.mask, np.asarray(block_two_stream_mask(n, l, keep_last_block=False)))


@pytest.mark.parametrize("group", ["full", "causal", "diagonal"])
@pytest.mark.parametrize("content", ["causal", "block_causal"])
@pytest.mark.parametrize("n,l", [(6, 2), (8, 4), (9, 3), (5, 1)])
def test_block_generation_variants_match_closed_form_and_do_not_leak(group, content, n, l):
    merged = block_generation(n, l, group=group, content=content).merge()
    np.testing.assert_array_equal(merged.mask, np.asarray(block_two_stream_mask(n, l, group=group, content=content)))
    report = audit(merged)
    assert report.ok and report.token_density == 1.0


def test_block_generation_elementwise_against_spec_formula():
    # The spec's closed form written as a Python loop (0-based slots).
    for n, l in [(6, 2), (12, 3), (8, 8)]:
        m = np.asarray(block_two_stream_mask(n, l))
        for q in range(2 * n):
            for k in range(2 * n):
                if q < n:
                    want = k < n and k <= q
                else:
                    t = q - n + 1
                    b = (t - 1) // l
                    want = (k < n and k + 1 <= b * l) or (k >= n and (k - n) // l == b)
                assert m[q, k] == want, (n, l, q, k)


def test_butterfly_spec_matrix():
    merged = butterfly(4).merge()
    np.testing.assert_array_equal(merged.mask, _parse(SPEC_BUTTERFLY_4))
    assert merged.streams == ("F",) * 3 + ("B",) * 3 + ("C",) * 4


@pytest.mark.parametrize("n", range(2, 33))
def test_butterfly_matches_closed_form(n):
    merged = butterfly(n).merge()
    assert merged.n == 3 * n - 2
    dense = np.asarray(butterfly_mask(n))
    np.testing.assert_array_equal(merged.mask, dense)
    assert dense.sum() == 2 * n * n - n
    report = audit(merged)
    assert report.ok and report.token_density == 1.0
    for a in report.slots:
        k = a.target.position
        assert a.reached == frozenset({_w(j) for j in range(1, n + 1) if j != k}), k
    # The centre slot holds w'_k itself.
    centres = [p for p, s in enumerate(merged.streams) if s == "C"]
    assert [merged.inputs[p] for p in centres] == [Token("agg", k) for k in range(1, n + 1)]
    sp = sparsify(merged)
    np.testing.assert_array_equal(sp.mask, np.asarray(butterfly_mask(n, sparse=True)))
    assert sp.nonzeros == 7 * n - 8
    assert sp.depth == max(1, n - 1)


def test_errors_name_arguments():
    with pytest.raises(TaskError, match="`block_size` must divide `n`"):
        block_generation(6, 4)
    with pytest.raises(TaskError, match="`group` must be one of"):
        block_generation(6, 2, group="sideways")
    with pytest.raises(TaskError, match="`n` must be an int >= 2"):
        butterfly(1)
    with pytest.raises(TaskError, match=r"`boundary` must be one of \('neighbour',\); got 'wrap'"):
        butterfly(4, boundary="wrap")


def test_butterfly_refuses_the_pad_boundary_it_cannot_build():
    """boundary="pad" was accepted and silently built the neighbour family (same tasks, sources, merged mask and
    layout; no pad embedding exists): it is now refused, saying what is supported and why."""
    with pytest.raises(TaskError, match=r"`boundary` must be 'neighbour' .*got 'pad', which is not supported"):
        butterfly(4, boundary="pad")
    assert butterfly(4, boundary="neighbour").merge().n == butterfly(4).merge().n == 10
    with pytest.raises(TaskError, match="`n` must be an int >= 2"):
        autoregressive(1)
    with pytest.raises(TaskError, match="`block_size` must divide"):
        block_two_stream_mask(7, 2)
