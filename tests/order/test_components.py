"""Disjoint unions of interleaved components (``hassejax.order._components``) and the components route.

A dilated window whose `n` is no multiple of its stride records its residue classes (two bands of different lengths);
``flow_summary``, ``reachability`` and ``convergence_depth`` answer from them, checked here against the dense
bit-packed route on the mask's own ``(n, n)`` array: every field of the summary (row counts of ``R`` and ``R^(L)``,
``L*``, class sizes in :func:`hassejax.order.classes`' numbering, depth, width, covering pairs, the diagram's labels
and edges), and on unions of random components whose orders are not antichains.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_product import _assert_same_summary  # every field of two summaries equal

from hassejax.errors import MemoryBudgetError
from hassejax.masks import IntervalMask, structured
from hassejax.masks._intervals import with_components
from hassejax.order import _components, convergence_depth, flow_summary, reach, reachability


def _interleaved_dense(parts: list[np.ndarray], w: int, counts: list[int]) -> np.ndarray:
    """The union by its definition: ``A[c + jW, c + j'W] = B_c[j, j']``, nothing between components."""
    comps = [b for b, count in zip(parts, counts) for _ in range(count)]
    n = sum(b.shape[0] for b in comps)
    a = np.zeros((n, n), dtype=bool)
    for c, b in enumerate(comps):
        pos = c + w * np.arange(b.shape[0])
        a[np.ix_(pos, pos)] = b
    return a


@settings(max_examples=60, deadline=None)
@given(st.integers(3, 40), st.integers(0, 40), st.integers(2, 9))
def test_a_dilated_window_is_the_union_of_its_residue_classes(n, window, d):
    """The recorded components rebuild the mask (by the definition above) and the summary from them is the dense
    route's; a length that is a multiple of the stride records the Kronecker factors instead."""
    m = structured.dilated(n, window, d)
    if n % d == 0 or n <= d:
        assert m._components is None
        return
    w, groups = m._components
    assert w == d and sum(count for _, count in groups) == d
    dense = m.to_dense()
    rebuilt = _interleaved_dense([b.to_dense() for b, _ in groups], w, [count for _, count in groups])
    np.testing.assert_array_equal(rebuilt, dense)
    layers = (1, 2, 3, 5)
    got = flow_summary(m, layers)
    assert got.route == ("components" if m.num_runs >= 2 else "structured")
    _assert_same_summary(got, flow_summary(dense, layers, method="bitpacked"))


def _reflexive(rng, size, density):
    m = rng.random((size, size)) < density
    np.fill_diagonal(m, True)
    return m


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 6), st.integers(2, 5), st.floats(0.0, 0.7), st.integers(0, 2**31), st.data())
def test_union_of_random_components_equals_the_dense_route(h, w, density, seed, data):
    """Components that are random reflexive masks (orders with chains, several classes, covering pairs): the union
    built by ``interleave`` is the definition's, and its summary, ``reachability`` and ``convergence_depth`` equal
    the dense route's; a small ``quotient_limit`` leaves a value to ``not_computed`` (with its reason) or gives
    the dense route's."""
    rng = np.random.default_rng(seed)
    longer = data.draw(st.integers(1, w - 1))
    parts = [_reflexive(rng, h, density), _reflexive(rng, h - 1, density)]
    counts = [longer, w - longer]
    want_dense = _interleaved_dense(parts, w, counts)
    groups = tuple((IntervalMask.from_dense(b), count) for b, count in zip(parts, counts))
    m = _components.interleave([b for b, _ in groups], w, groups)
    np.testing.assert_array_equal(m.to_dense(), want_dense)
    with_components(m, w, groups)
    layers = (1, 2, 4)
    want = flow_summary(want_dense, layers, method="bitpacked")
    if m.num_runs >= 2:
        got = flow_summary(m, layers)
        assert got.route == "components"
        _assert_same_summary(got, want)
        small = flow_summary(m, layers, quotient_limit=1)
        for key in ("depth", "width", "num_hasse_edges"):
            value = getattr(small, key)
            assert value == getattr(want, key) if value is not None else "component" in small.not_computed[key]
    assert convergence_depth(m) == want.convergence_depth
    with pytest.MonkeyPatch.context() as patch:  # reachability takes the components route above this n only
        patch.setattr(reach, "_DENSE_FALLBACK_N", 0)
        for num_layers in (2, 3, None):
            got = reachability(m, num_layers)
            np.testing.assert_array_equal(
                got.to_dense(), np.asarray(reachability(want_dense, num_layers, method="bitpacked"))
            )


@pytest.mark.parametrize("n, window, d", [(97, 12, 4), (50, 7, 3), (61, 30, 6)])
def test_reachability_and_depth_from_the_components(n, window, d, monkeypatch):
    """``reachability`` (above ``_DENSE_FALLBACK_N``, lowered here) builds ``R^(L)`` from the components'
    (``interleave`` called, counted) equal to the bit-packed route on the dense mask; ``convergence_depth`` too."""
    calls = []
    build = _components.interleave
    monkeypatch.setattr(_components, "interleave", lambda *a, **k: calls.append(1) or build(*a, **k))
    monkeypatch.setattr(reach, "_DENSE_FALLBACK_N", 0)
    m = structured.dilated(n, window, d)
    assert m._components is not None and m.num_runs >= 2
    dense = m.to_dense()
    for num_layers in (2, 3, 7, None):
        got = reachability(m, num_layers)
        np.testing.assert_array_equal(got.to_dense(), np.asarray(reachability(dense, num_layers, method="bitpacked")))
    assert len(calls) == 4
    assert convergence_depth(m) == int(convergence_depth(dense, method="bitpacked"))


def test_a_long_dilated_window_from_its_components_matches_the_closed_form():
    """``dilated(100000, 300, 3)`` (201 runs a row; refused before: the structured route's squarings, 68 GiB on the
    bit-packed route): residue `c` is a band of radius 100 over 33,334 or 33,333 positions, so
    ``L* = ceil(33333 / 100) = 334``, three classes (one a residue), an antichain; a row of ``R^(1)`` holds
    ``2 · 100 + 1`` keys away from the ends and of ``R^(L)`` ``min(2 · 100 L + 1, ...)``."""
    n, d, m_ = 100000, 3, 100
    s = flow_summary(structured.dilated(n, 300, d), layers=(1, 10))
    assert s.route == "components"
    assert s.convergence_depth == 334
    assert s.num_classes == 3 and sorted(s.class_sizes.tolist()) == [33333, 33333, 33334]
    assert (s.depth, s.width, s.num_hasse_edges) == (1, 3, 0)
    assert s.reach[0].max == 2 * m_ + 1 and s.reach[1].max == 2 * m_ * 10 + 1
    assert s.limit.min == 33333 and s.limit.max == 33334
    assert s.limit.pairs == 33334**2 + 2 * 33333**2


def test_a_huge_closure_is_refused_before_it_is_built(monkeypatch):
    """``R`` of ``dilated(100000, 300, 3)`` holds 3.3e9 keys, each a run of its own (about 27 GB as int32 runs):
    refused naming `mask`, on a host with 32 GiB free (set here: on a larger machine it would be built)."""
    from hassejax.masks import _runs

    monkeypatch.setattr(_runs, "host_memory_bytes", lambda: 32 * 2**30)
    with pytest.raises(MemoryBudgetError, match="`mask`.*interleaved components"):
        reachability(structured.dilated(100000, 300, 3))


def test_derived_masks_carry_no_components_and_bad_records_are_refused():
    m = structured.dilated(97, 12, 4)
    assert m._components is not None
    union = m | structured.causal(97)
    assert union._components is None
    _assert_same_summary(flow_summary(union, (1, 2)), flow_summary(union.to_dense(), (1, 2), method="bitpacked"))
    short, long_ = structured.sliding_window(24, 3, 3), structured.sliding_window(25, 3, 3)
    with pytest.raises(ValueError, match="internal error"):  # the longer component must come first (24, 25, 25, 25)
        with_components(structured.dilated(97, 12, 4), 4, ((short, 1), (long_, 3)))
    with pytest.raises(ValueError, match="internal error"):  # a group of no component
        with_components(structured.dilated(97, 12, 4), 4, ((long_, 1), (short, 3), (structured.full(5), 0)))
