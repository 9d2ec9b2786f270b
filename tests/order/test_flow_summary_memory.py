"""flow_summary's dense routes check the memory of the whole call before any work, naming `mask` (a fresh user:
``dilated(n=16384, window=8, dilation=2)`` in its interval form, bit-packed route, estimated 1.84 GiB for the
closure R alone and peaked at 3.1 GiB after the `order` stage; under ``ulimit -v`` it refused only after 16-31 s of
work, naming `reach`, with the quotient of 2 classes sized by n = 16384)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import hassejax._checks
import hassejax.masks._runs
import hassejax.order.hasse
import hassejax.order.poset
from hassejax.errors import MemoryBudgetError
from hassejax.masks import IntervalMask, from_spec
from hassejax.order import HasseDiagram, _summary_routes, flow_summary, reachability

DILATED = "dilated(n={n}, window=8, dilation=2)"


def _refuse_work(monkeypatch):
    """Make densifying the mask or starting a dense stage fail the test: the check must come first."""

    def started(*args, **kwargs):
        raise AssertionError("flow_summary started a dense stage before refusing")

    monkeypatch.setattr(IntervalMask, "to_dense", started)
    monkeypatch.setattr(_summary_routes._DenseFlow, "__init__", started)


def test_whole_call_refused_up_front_naming_mask(monkeypatch):
    """The user's case: the budget lets the first stage's own check pass (the only one before: then the closure R's,
    now the one search for R and L*, with the input's two copies), but not the whole call (the dense copy of the
    IntervalMask, held through every stage, on top): refused before densifying."""
    from hassejax.order._bitpacked_depth import depth_bitpacked_bytes

    n = 16384
    mask = from_spec(DILATED.format(n=n), form="intervals")
    first_stage = 2 * n * n + depth_bitpacked_bytes(n, mask.with_diagonal().nnz())
    budget = first_stage + n * n // 2  # fits R alone, not R with the dense mask held beside it
    monkeypatch.setattr(hassejax._checks, "available_memory_bytes", lambda: int(budget / 0.8))
    _refuse_work(monkeypatch)
    from hassejax.order import _product

    monkeypatch.setattr(_product, "kron_factors", lambda a: None)  # a dilated window is a product: the dense route's
    with pytest.raises(MemoryBudgetError) as info:  # rules are shown on it as on a mask that is none
        flow_summary(mask)
    msg = str(info.value)
    assert msg.startswith("`mask`: flow_summary on the bit-packed route (n = 16384"), msg
    assert "the classes and the quotient order" in msg, msg
    need = float(re.search(r"needs about ([0-9.]+) GiB", msg).group(1))
    assert need >= (first_stage + n * n) / 2**30 - 0.01, msg  # the whole call, not the first stage


def test_dense_zero_stride_mask_refused_from_its_shape(monkeypatch):
    """A dense mask on a forced dense route: the whole call's check from the shape first (no scan of a huge
    zero-stride view for its nonzeros), naming `mask`."""
    big = np.broadcast_to(np.array(True), (300_000, 300_000))  # 9e10 entries, no memory
    monkeypatch.setattr(hassejax._checks, "available_memory_bytes", lambda: 64 * 2**30)
    _refuse_work(monkeypatch)
    for method in ("bitpacked", "matmul"):
        with pytest.raises(MemoryBudgetError, match=r"^`mask`: flow_summary on the (bit-packed|matmul) route"):
            flow_summary(big, method=method)


def test_quotient_order_stage_needs_no_n_by_n_work(monkeypatch):
    """The `order` stage of the dense route takes the (C, C) quotient from R and the classes already found: no
    second search for the classes, no (n, n) check of their labels (14 s and 1 GiB for 2 classes at n = 16384)."""
    mask = from_spec(DILATED.format(n=2048), form="intervals")
    expected = HasseDiagram.from_reachability(reachability(mask.to_dense(), method="bitpacked"))  # the old way

    def refused(*args, **kwargs):
        raise AssertionError("(n, n) work in the quotient order stage")

    monkeypatch.setattr(hassejax.order.hasse.HasseDiagram, "from_reachability", refused)
    monkeypatch.setattr(hassejax.order.poset, "quotient_order", refused)
    calls = []
    core = hassejax.order.poset._row_classes
    monkeypatch.setattr(hassejax.order.poset, "_row_classes", lambda *a: calls.append(1) or core(*a))
    s = flow_summary(mask, method="bitpacked")
    assert len(calls) == 1  # the classes found once
    assert (s.num_classes, s.depth, s.width, s.num_hasse_edges) == (2, 1, 2, 0)  # two chains of parity classes
    assert (s.depth, s.width, s.diagram().edges, s.diagram().classes) == (
        expected.depth,
        expected.width,
        expected.edges,
        expected.classes,
    )
    np.testing.assert_array_equal(s.diagram().order_matrix(), expected.order_matrix())


def test_quotient_order_check_sized_by_classes_naming_mask(monkeypatch):
    """The `order` stage's own check sizes the (C, C) quotient by the number of classes, naming `mask`."""
    causal = np.tril(np.ones((2048, 2048), dtype=bool))  # 2048 classes, a chain
    monkeypatch.setattr(hassejax.masks._runs, "host_memory_bytes", lambda: 32 * 2**20)  # the host work's budget
    with pytest.raises(MemoryBudgetError, match=r"^`mask`: the quotient order of C = 2048 classes"):
        flow_summary(causal, method="bitpacked")


@pytest.mark.parametrize("call", ["reachability", "reachability_3", "layers", "depth_bitpacked", "depth_matmul"])
def test_interval_input_on_a_dense_route_is_refused_from_its_shape(monkeypatch, call):
    """reachability and convergence_depth take an IntervalMask on a dense route (converted, as in flow_summary); a
    fresh user found the refusal came after the dense copy (50 s at n = 100000): the route's memory is checked from
    the shape first, naming the argument."""
    from hassejax.order import convergence_depth

    mask = from_spec("sliding_window(n=100000, left=64)", form="intervals")
    monkeypatch.setattr(hassejax._checks, "available_memory_bytes", lambda: 8 * 2**30)
    _refuse_work(monkeypatch)
    runs = {
        "reachability": lambda: reachability(mask, method="bitpacked"),
        "reachability_3": lambda: reachability(mask, 3, method="matmul"),
        "layers": lambda: reachability(layer_masks=[mask, mask], method="bitpacked"),
        "depth_bitpacked": lambda: convergence_depth(mask, method="bitpacked"),
        "depth_matmul": lambda: convergence_depth(mask, method="matmul"),
    }
    with pytest.raises(MemoryBudgetError, match=r"^`(mask|layer_masks)`: .*n = 100000 positions.* GiB"):
        runs[call]()


def test_a_raised_quotient_limit_does_not_inflate_the_up_front_estimate():
    """The up-front estimate sized the quotient by min(n, quotient_limit): a raised limit refused calls that fit (a
    review: 2048 classes of n = 8192 with quotient_limit=8192 refused at 1.2 GiB free, ran in 0.75 GiB before). Above
    the default limit the quotient is checked by its own stage, sized by the classes found."""
    from hassejax.order._routes import _flow_summary_bytes
    from hassejax.order.summary_types import QUOTIENT_LIMIT

    n = 8192
    default = _flow_summary_bytes(n, n * 4, "bitpacked", (), QUOTIENT_LIMIT, False)
    assert _flow_summary_bytes(n, n * 4, "bitpacked", (), n, False) == default
    assert _flow_summary_bytes(n, n * 4, "bitpacked", (), 16, False)[0] <= default[0]


def test_the_bit_packed_estimate_counts_one_search_for_r_l_star_and_layers():
    """On the bit-packed route one level search gives ``R``, ``L*`` and every ``R^(L)`` of `layers`: the up-front
    estimate no longer adds a stage of its own for ``R^(L)`` (a review: n = 8192 with ``layers=(2,)`` refused at an
    estimate of 0.55 GiB where ``layers=()`` passed; the call peaked at 137 MiB)."""
    from hassejax.order._routes import _flow_summary_bytes
    from hassejax.order.summary_types import QUOTIENT_LIMIT

    n = 8192
    plain = _flow_summary_bytes(n, n * 4, "bitpacked", (), QUOTIENT_LIMIT, False)
    assert _flow_summary_bytes(n, n * 4, "bitpacked", (2, 8, 64), QUOTIENT_LIMIT, False) == plain
    assert plain[1] != "the closure R"  # no stage of its own: the closure is the search's first step


def test_a_stack_of_head_masks_is_told_about_head_axis():
    """A fresh user: ``flow_summary`` of a ``(heads, n, n)`` array said "must have rank 2" alone; now it names
    ``head_axis=0``, which analyses the heads' union."""
    from hassejax.errors import MaskError
    from hassejax.order import HasseDiagram

    heads = np.stack([np.tril(np.ones((4, 4), bool)), np.eye(4, dtype=bool)])
    for call in (lambda: flow_summary(heads), lambda: HasseDiagram.from_mask(heads)):
        with pytest.raises(
            MaskError, match=r"got shape \(2, 4, 4\) \(rank 3\) \(the masks of one layer's heads.*head_axis=0"
        ):
            call()
    assert flow_summary(heads, head_axis=0).num_classes == 4
