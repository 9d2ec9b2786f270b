"""Kronecker products of masks (``hassejax.order._product``) and ``flow_summary``'s product route.

Checked against NumPy's ``np.kron`` and against the dense bit-packed route on the product's own ``(n, n)`` mask:
every field of the summary (row counts of ``R`` and ``R^(L)``, ``L*``, class sizes in
:func:`hassejax.order.classes`' numbering, depth, width, covering pairs and the diagram's edges).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hassejax.masks import IntervalMask, structured
from hassejax.order import flow_summary
from hassejax.order._product import kron, kron_factors
from hassejax.order._summary_routes import _ProductFlow
from hassejax.order.summary import _summarize


def _reflexive(rng, size, density):
    m = rng.random((size, size)) < density
    np.fill_diagonal(m, True)
    return m


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), st.integers(1, 8), st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.integers(0, 2**31))
def test_kron_equals_numpy_and_is_factored(h, w, dp, dc, seed):
    rng = np.random.default_rng(seed)
    p, c = _reflexive(rng, h, dp), _reflexive(rng, w, dc)
    product = kron(IntervalMask.from_dense(p), IntervalMask.from_dense(c))
    np.testing.assert_array_equal(product.to_dense(), np.kron(p, c))
    factors = kron_factors(product)
    if h >= 2 and w >= 2:
        assert factors is not None  # a product on an h × w grid is found (perhaps on another grid)
    if factors is not None:
        np.testing.assert_array_equal(np.kron(factors[0].to_dense(), factors[1].to_dense()), np.kron(p, c))


@settings(max_examples=60, deadline=None)
@given(st.integers(4, 40), st.floats(0.05, 0.95), st.integers(0, 2**31))
def test_factors_found_are_exact(n, density, seed):
    """Any factorisation found multiplies back to the mask (random masks are almost never products)."""
    a = _reflexive(np.random.default_rng(seed), n, density)
    factors = kron_factors(IntervalMask.from_dense(a))
    if factors is not None:
        np.testing.assert_array_equal(np.kron(factors[0].to_dense(), factors[1].to_dense()), a)


def test_no_factors_for_masks_that_are_no_products():
    for m in (structured.sliding_window(4096, 64), structured.causal(1000), structured.sliding_window(4096, 64, 8)):
        assert kron_factors(m.with_diagonal()) is None
    assert kron_factors(IntervalMask.from_dense(np.ones((3, 3), bool))) is None  # n = 3 has no grid


def test_a_dilated_window_is_a_window_times_the_identity():
    """Keys at stride 4 stay in their residue class: ``dilated(4096, 8, 4) = W ⊗ I_4`` with W a window on 1024."""
    p, c = kron_factors(structured.dilated(4096, 8, 4).with_diagonal())
    assert (p.n, c.n) == (1024, 4)
    np.testing.assert_array_equal(c.to_dense(), np.eye(4, dtype=bool))
    np.testing.assert_array_equal(np.kron(p.to_dense(), c.to_dense()), structured.dilated(4096, 8, 4).to_dense())


def _product_summary(p, c, layers, quotient_limit=2048):
    flow = _ProductFlow(IntervalMask.from_dense(p), IntervalMask.from_dense(c), None, layers, quotient_limit)
    return _summarize(flow, "product", "", layers, quotient_limit)


def _assert_same_summary(got, want):
    assert got.n == want.n and got.convergence_depth == want.convergence_depth
    assert got.num_classes == want.num_classes
    np.testing.assert_array_equal(got.class_sizes, want.class_sizes)
    assert got.limit == want.limit and got.reach == want.reach
    assert (got.depth, got.width, got.num_hasse_edges) == (want.depth, want.width, want.num_hasse_edges)
    dg, dw = got.diagram(), want.diagram()
    np.testing.assert_array_equal(dg.labels, dw.labels)
    assert sorted(dg.edges) == sorted(dw.edges)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 7), st.integers(2, 7), st.floats(0.0, 0.6), st.floats(0.0, 0.6), st.integers(0, 2**31))
def test_product_route_equals_the_dense_route(h, w, dp, dc, seed):
    rng = np.random.default_rng(seed)
    p, c = _reflexive(rng, h, dp), _reflexive(rng, w, dc)
    layers = (1, 2, 3, 5)
    _assert_same_summary(_product_summary(p, c, layers), flow_summary(np.kron(p, c), layers, method="bitpacked"))


def test_product_route_on_a_2d_neighbourhood_equals_the_dense_route():
    m = structured.natten_2d(12, 10, 3, 5)
    p, c = kron_factors(m.with_diagonal())
    got = _product_summary(p.to_dense(), c.to_dense(), (1, 2, 4, 8))
    _assert_same_summary(got, flow_summary(m.to_dense(), (1, 2, 4, 8), method="bitpacked"))


def test_large_quotient_reports_what_it_could_not_compute():
    """Two chains of 30 and 40 classes (causal masks): 1200 classes over a limit of 100; depth, covering pairs and
    width from the factors (30 + 40 − 1, 29·40 + 30·39, min(30, 40)); a chain times an order that is neither a chain
    nor an antichain: the width not computed (said why)."""
    p, c = np.tril(np.ones((30, 30), bool)), np.tril(np.ones((40, 40), bool))
    got = _product_summary(p, c, (), quotient_limit=100)
    want = flow_summary(np.kron(p, c), method="bitpacked", quotient_limit=2048)
    assert (got.num_classes, got.depth, got.num_hasse_edges, got.width) == (1200, 69, 29 * 40 + 30 * 39, 30)
    assert (want.depth, want.num_hasse_edges, want.width) == (69, 29 * 40 + 30 * 39, 30)
    vee = np.eye(40, dtype=bool)
    vee[1:, 0] = True  # class 0 below 39 incomparable others: width 39, depth 2
    got = _product_summary(p, vee, (), quotient_limit=100)
    assert got.width is None and "Dilworth" in got.not_computed["width"]


def _order_of_kind(kind: str, size: int, rng) -> np.ndarray:
    """A reflexive mask whose reachability order is a chain, an antichain, or random."""
    if kind == "chain":
        perm = rng.permutation(size)  # a causal mask with its tokens relabelled: still a chain
        return np.tril(np.ones((size, size), bool))[np.ix_(perm, perm)]
    if kind == "antichain":
        return np.eye(size, dtype=bool)
    return _reflexive(rng, size, 0.3)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["chain", "antichain", "random"]), st.sampled_from(["chain", "antichain", "random"]),
    st.integers(1, 7), st.integers(1, 7), st.integers(0, 2**31),
)  # fmt: skip
def test_width_from_the_factors_equals_the_dense_route(kind_p, kind_c, h, w, seed):
    """The width of a product computed from its factors (a quotient limit that admits the factors' diagrams, not the
    product's) wherever it is reported equals Dilworth's width on the dense quotient of ``np.kron(P, C)``; it is
    reported for every product of chains and antichains."""
    rng = np.random.default_rng(seed)
    p, c = _order_of_kind(kind_p, h, rng), _order_of_kind(kind_c, w, rng)
    got = _product_summary(p, c, (), quotient_limit=max(h, w))
    want = flow_summary(np.kron(p, c), method="bitpacked", quotient_limit=4096)
    if got.width is not None:
        assert got.width == want.width
    if "random" not in (kind_p, kind_c):
        assert got.width == want.width


@pytest.mark.parametrize("grid, kernel", [((181, 181), (7, 7)), ((362, 362), (7, 7))])
def test_flow_summary_takes_the_product_route_for_large_2d_neighbourhoods(grid, kernel):
    """Where the structured route's squarings are refused (n = 32761: 45–79 s on the bit-packed route before; n =
    131044: refused), the product of the two clamped 1-D windows answers; its depth is the larger factor's, checked
    here against the dense route on each 1-D factor."""
    s = flow_summary(structured.natten_2d(*grid, *kernel), layers=(1, 8, 64))
    assert s.route == "product"
    rows = flow_summary(structured.natten_2d(grid[0], 1, kernel[0], 1).to_dense(), (1, 8, 64), method="bitpacked")
    cols = flow_summary(structured.natten_2d(1, grid[1], 1, kernel[1]).to_dense(), (1, 8, 64), method="bitpacked")
    assert s.convergence_depth == max(rows.convergence_depth, cols.convergence_depth)
    assert [r.max for r in s.reach] == [a.max * b.max for a, b in zip(rows.reach, cols.reach)]
    assert s.num_classes == rows.num_classes * cols.num_classes == 1 and (s.depth, s.width) == (1, 1)


@pytest.mark.parametrize("mask", [structured.natten_2d(12, 10, 3, 5), structured.dilated(96, 12, 4)])
def test_reachability_and_depth_of_products_equal_the_dense_route(mask, monkeypatch):
    """``reachability`` and ``convergence_depth`` of an interval mask that factors (several runs a row): the product
    of the factors' answers, equal to the bit-packed route on the dense mask. (``reachability`` takes the product
    route above ``_DENSE_FALLBACK_N`` only, lowered here; ``kron`` is called, counted.)"""
    from hassejax.order import _product, convergence_depth, reach, reachability

    calls = []
    kron_of = _product.kron
    monkeypatch.setattr(_product, "kron", lambda p, c, bar=None: calls.append(1) or kron_of(p, c, bar))
    monkeypatch.setattr(reach, "_DENSE_FALLBACK_N", 0)
    assert kron_factors(mask.with_diagonal()) is not None and mask.num_runs >= 2
    dense = mask.to_dense()
    for num_layers in (2, 3, 7, None):
        got = reachability(mask, num_layers)
        want = np.asarray(reachability(dense, num_layers, method="bitpacked"))
        np.testing.assert_array_equal(got.to_dense(), want)
    assert len(calls) == 4  # every R^(L) above from the factors
    assert convergence_depth(mask) == int(convergence_depth(dense, method="bitpacked"))
    assert flow_summary(mask).route == "product"


def test_reachability_of_a_long_2d_neighbourhood_is_the_product():
    """n = 32761 (above the dense fallback): ``R^(2)`` from the factors equals the structured route's one squaring,
    and ``R`` is every position (one class)."""
    from hassejax.order import reachability

    m = structured.natten_2d(181, 181, 7, 7)
    assert reachability(m, 2) == reachability(m, 2, method="structured")
    limit = reachability(m)
    assert limit.num_runs == 1 and limit.nnz() == m.n * m.n


def test_kron_of_factors_with_empty_rows():
    """A review: ``kron`` raised IndexError on a block without keys (factors with empty rows; not reachable from the
    reflexive masks the routes factor, but ``kron`` is the product of any two interval masks)."""
    p = IntervalMask.from_dense(np.array([[False, False], [True, False]]))
    c = IntervalMask.from_dense(np.eye(2, dtype=bool))
    np.testing.assert_array_equal(kron(p, c).to_dense(), np.kron(p.to_dense(), c.to_dense()))
    zero = IntervalMask.from_dense(np.zeros((2, 2), bool))
    assert kron(zero, c).nnz() == 0


def test_reachability_on_the_product_route_shows_its_build(capsys, monkeypatch):
    """A fresh user: the factors' bars ended at once, then the product's output was built for 25 s without one."""
    from hassejax.order import reachability

    monkeypatch.delenv("HASSEJAX_PROGRESS", raising=False)
    reachability(structured.natten_2d(181, 181, 7, 7), 2, progress=0)
    err = capsys.readouterr().err
    assert "R^(2) as the product of its factors'" in err and "32761/32761 rows" in err


def _unrecorded(m: IntervalMask) -> IntervalMask:
    """The same runs without the factors its constructor recorded."""
    return IntervalMask(m.starts, m.stops, m.n, _normal=True)


@settings(max_examples=80, deadline=None)
@given(st.integers(2, 12), st.integers(2, 6), st.integers(0, 30), st.integers(2, 9), st.integers(2, 9), st.data())
def test_recorded_factors_are_exact_and_the_summary_is_the_dense_routes(h, d, window, height, width, data):
    """``dilated`` (with `n` a multiple of the stride) and ``natten_2d`` record their factors: they multiply back to
    the mask (``np.kron``), are reflexive, and ``flow_summary`` from them equals the dense bit-packed route."""
    kh = data.draw(st.integers(0, (height - 1) // 2)) * 2 + 1
    kw = data.draw(st.integers(0, (width - 1) // 2)) * 2 + 1
    layers = (1, 2, 3)
    for m in (structured.dilated(h * d, window, d), structured.natten_2d(height, width, kh, kw)):
        p, c = m._factors
        taken = kron_factors(m.with_diagonal())
        assert taken[0] is p and taken[1] is c  # taken, not searched
        np.testing.assert_array_equal(np.kron(p.to_dense(), c.to_dense()), m.to_dense())
        assert np.all(np.diag(p.to_dense())) and np.all(np.diag(c.to_dense()))
        searched = kron_factors(_unrecorded(m).with_diagonal())
        if m.num_runs >= 2:  # the search finds a factorisation too (perhaps on another grid)
            assert searched is not None
        _assert_same_summary(flow_summary(m, layers), flow_summary(m.to_dense(), layers, method="bitpacked"))


def test_only_the_constructed_mask_carries_its_factors():
    """A dilated window whose length is no multiple of its stride records none; a mask derived from a recorded one
    (a union) carries none and is searched, with the dense route's answer."""
    assert structured.dilated(97, 12, 4)._factors is None
    assert structured.dilated(96, 12, 4)._factors is not None
    union = structured.dilated(96, 12, 4) | structured.causal(96)
    assert union._factors is None
    _assert_same_summary(flow_summary(union, (1, 2)), flow_summary(union.to_dense(), (1, 2), method="bitpacked"))
    both = structured.dilated(96, 12, 4) & structured.natten_2d(8, 12, 5, 5)  # two recorded masks: no record
    assert both._factors is None
    _assert_same_summary(flow_summary(both, (1, 2)), flow_summary(both.to_dense(), (1, 2), method="bitpacked"))
    p, c = structured.natten_2d(6, 5, 3, 3)._factors  # the runs' dtype, as a searched factor's
    assert p.starts.dtype == c.starts.dtype == structured.natten_2d(6, 5, 3, 3).starts.dtype


def test_recorded_factors_answer_what_a_small_quotient_limit_leaves_to_the_grid():
    """``dilated(256, 128, 64)`` is a band of 4 times the identity of 64: with ``quotient_limit=1`` the recorded grid
    (4 × 64) still gives depth, width and covering pairs, equal to the dense route's with a large limit."""
    m = structured.dilated(256, 128, 64)
    got = flow_summary(m, (1,), quotient_limit=1)
    want = flow_summary(m.to_dense(), (1,), method="bitpacked")
    assert (got.depth, got.width, got.num_hasse_edges) == (want.depth, want.width, want.num_hasse_edges) == (1, 64, 0)


def test_recorded_factors_of_a_long_dilated_window_give_the_searched_answer():
    """``dilated(4096, 1024, 4)`` (257 runs a row): the recorded factors and the search give the same summary."""
    m = structured.dilated(4096, 1024, 4)
    got, searched = flow_summary(m, (1, 2)), flow_summary(_unrecorded(m), (1, 2))
    assert got.route == searched.route == "product"
    _assert_same_summary(got, searched)


def test_a_factor_search_that_finds_none_is_counted_in_the_seconds(monkeypatch):
    """A fresh user: the Kronecker factor search (~3 s at n = 2^20) was in no stage of ``FlowSummary.seconds`` when
    it found no factors; it is now under ``"route"``, and the stages add up to the call (a search made slow here)."""
    import time

    import hassejax.order._product as product

    search = product.kron_factors

    def slow_search(mask):
        time.sleep(0.3)
        return search(mask)

    monkeypatch.setattr(product, "kron_factors", slow_search)
    mask = structured.global_sliding(4096, 64, [0, 100])  # several runs a row: searched, no product
    start = time.perf_counter()
    s = flow_summary(mask)
    wall = time.perf_counter() - start
    assert s.route == "structured" and s.seconds["route"] >= 0.3
    assert sum(s.seconds.values()) <= wall
    assert set(s.seconds) == {"route", "limit", "convergence_depth", "layers", "classes", "order"}


def test_the_heads_union_is_counted_in_the_seconds(monkeypatch):
    """A review: with ``head_axis=0`` the heads' union (14 s of a 14.4 s call at n = 2^20) was in no stage of
    ``FlowSummary.seconds``; it is under ``"route"`` (a union made slow here)."""
    import time

    import hassejax.order.heads as heads_module

    union = heads_module._heads_union

    def slow_union(*args, **kwargs):
        time.sleep(0.3)
        return union(*args, **kwargs)

    monkeypatch.setattr(heads_module, "_heads_union", slow_union)
    heads = (structured.causal(64), structured.sliding_window(64, 4))
    s = flow_summary(heads, head_axis=0)
    assert s.seconds["route"] >= 0.3 and s.convergence_depth == 1  # the union is causal
