"""The structured route (interval rows) against independent dense computations.

References: NumPy integer matrix powers for ``R^(L)``, networkx for classes and the Hasse
diagram (condensation and transitive reduction), the dense matmul route of hassejax.
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hassejax.errors
from hassejax.errors import MaskError, ParameterError
from hassejax.masks import IntervalMask
from hassejax.masks import structured as S
from hassejax.order import HasseDiagram, _structured, convergence_depth, flow_summary, reachability
from hassejax.order._structured import PowerTable, compose


def dense_powers(a: np.ndarray) -> list[np.ndarray]:
    """[A, A^2, …] up to the first repeat, by integer matmul (independent of hassejax)."""
    out = [a]
    ai = a.astype(np.int64)
    while True:
        nxt = (out[-1].astype(np.int64) @ ai) > 0
        if (nxt == out[-1]).all():
            return out
        out.append(nxt)


@st.composite
def interval_masks(draw, max_n: int = 24):
    """Random masks with 1–3 key runs a row, with or without the diagonal, some runs cyclic; some with up to two
    global tokens (Longformer): rows that see every key, and whose keys every row sees, or the rows alone (a product
    answers the rows that reach a full row at once)."""
    n = draw(st.integers(1, max_n))
    runs = draw(st.integers(1, 3))
    diagonal = draw(st.booleans())
    cyclic = draw(st.booleans())
    global_rows = draw(st.lists(st.integers(0, n - 1), max_size=2, unique=True))
    global_keys = draw(st.booleans())
    dense = np.zeros((n, n), dtype=bool)
    starts, stops = [], []
    for q in range(n):
        row_s, row_e = [], []
        for _ in range(runs):
            s = draw(st.integers(0, n - 1))
            length = draw(st.integers(0, max(1, n // 3)))
            e = s + length
            if cyclic and e > n:  # wrap around: [s, n) and [0, e - n)
                row_s += [s, 0]
                row_e += [n, e - n]
            else:
                row_s.append(s)
                row_e.append(min(e, n))
        if diagonal:
            row_s.append(q)
            row_e.append(q + 1)
        if q in global_rows:
            row_s.append(0)
            row_e.append(n)
        if global_keys:
            row_s += global_rows
            row_e += [g + 1 for g in global_rows]
        for s, e in zip(row_s, row_e):
            dense[q, s:e] = True
        starts.append(row_s)
        stops.append(row_e)
    width = max(len(r) for r in starts)
    s_arr = np.full((n, width), 0)
    e_arr = np.full((n, width), 0)
    for q in range(n):
        s_arr[q, : len(starts[q])] = starts[q]
        e_arr[q, : len(stops[q])] = stops[q]
    return (s_arr, e_arr, n), dense


def build(case):
    """The IntervalMask of a drawn case (built in the test body, outside the strategy: runtime type
    checks sample with the `random` module, which hypothesis forbids inside strategies)."""
    (s_arr, e_arr, n), dense = case
    return IntervalMask.from_runs(s_arr, e_arr, n), dense


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(interval_masks())
def test_powers_limit_depth_classes_equal_dense(case):
    m, dense = build(case)
    assert (m.to_dense() == dense).all()
    a = dense | np.eye(m.n, dtype=bool)
    powers = dense_powers(a)
    lstar = len(powers)
    table = PowerTable(m.with_diagonal())
    assert table.depth() == lstar
    for num_layers in range(1, lstar + 2):
        expect = powers[min(num_layers, lstar) - 1]
        assert (table.power(num_layers).to_dense() == expect).all(), num_layers
    limit = table.limit()
    assert (limit.to_dense() == powers[-1]).all()
    # classes, quotient and Hasse diagram against networkx
    g = nx.DiGraph()
    g.add_nodes_from(range(m.n))
    g.add_edges_from(zip(*np.nonzero(a)))
    sccs = {frozenset(c) for c in nx.strongly_connected_components(g)}
    summary = flow_summary(m)
    assert summary.num_classes == len(sccs)
    diagram = summary.diagram()
    assert {frozenset(c) for c in diagram.classes} == sccs
    cond = nx.condensation(g)
    reduced = nx.transitive_reduction(cond)
    assert summary.num_hasse_edges == reduced.number_of_edges() == len(diagram.edges)
    assert summary.depth == nx.dag_longest_path_length(cond) + 1
    assert summary.convergence_depth == lstar


@settings(max_examples=200, deadline=None)
@given(interval_masks(max_n=40))
def test_large_quotient_paths_equal_dense_diagram(case):
    """The counts computed without the quotient order (as for long sequences) equal the diagram's."""
    m, dense = build(case)
    small = flow_summary(m)
    big = flow_summary(m, quotient_limit=1)
    assert big.num_classes == small.num_classes
    for name in ("depth", "width", "num_hasse_edges"):
        value = getattr(big, name)
        if small.num_classes == 1:  # one class: computed directly on the quotient of size 1
            assert value == getattr(small, name)
        elif value is None:
            assert big.not_computed.get(name)
        else:
            assert value == getattr(small, name), name


@settings(max_examples=200, deadline=None)
@given(st.lists(interval_masks(max_n=16), min_size=2, max_size=4))
def test_layer_stacks_equal_dense(cases):
    cases = [build(c) for c in cases]
    n = cases[0][0].n
    cases = [c for c in cases if c[0].n == n]
    layers = [c[0] for c in cases]
    expect = np.eye(n, dtype=bool)
    for _, d in cases:  # A_L ⊗ … ⊗ A_1, layer 1 first
        expect = ((d | np.eye(n, dtype=bool)).astype(np.int64) @ expect.astype(np.int64)) > 0
    got = reachability(None, layer_masks=layers)
    assert isinstance(got, IntervalMask)
    assert (got.to_dense() == expect).all()


def test_batched_dense_layer_masks_take_the_structured_route_member_by_member():
    """A fresh-user check: ``reachability(layer_masks=[...], method="structured")`` refused layers of shape
    `(*batch, n, n)` ("must have rank 2") that ``mask=`` and the dense routes accept. Each member's product now runs
    in turn: the answers of the matrix product `A_L ⊗ … ⊗ A_1` member by member, as a sequence or a stack."""
    rng = np.random.default_rng(1)
    masks = rng.random((3, 2, 5, 6, 6)) < 0.3  # L = 3 layers of a (2, 5) batch
    eye = np.eye(6, dtype=bool)
    expect = np.empty((2, 5, 6, 6), dtype=bool)
    for idx in np.ndindex(2, 5):
        r = eye
        for layer in masks:  # layer 1 first
            r = ((layer[idx] | eye).astype(np.int64) @ r.astype(np.int64)) > 0
        expect[idx] = r
    for layers in (list(masks), masks):
        got = np.asarray(reachability(layer_masks=layers, method="structured"))
        assert got.shape == (2, 5, 6, 6)
        np.testing.assert_array_equal(got, expect)
    np.testing.assert_array_equal(np.asarray(reachability(layer_masks=list(masks[:, :0]), method="structured")),
                                  expect[:0])  # fmt: skip


def test_routes_agree_on_random_masks():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(2, 40))
        dense = rng.random((n, n)) < 0.08
        im = IntervalMask.from_dense(dense)
        for num_layers in (None, 2, 5):
            ref = np.asarray(reachability(dense, num_layers, method="matmul"))
            assert (np.asarray(reachability(dense, num_layers, method="bitpacked")) == ref).all()
            assert (np.asarray(reachability(dense, num_layers, method="structured")) == ref).all()
            assert (reachability(im, num_layers).to_dense() == ref).all()
        assert convergence_depth(im) == int(convergence_depth(dense))
        s = flow_summary(dense, (1, 3), method="bitpacked")
        t = flow_summary(im, (1, 3), method="structured")
        assert s.route == "bitpacked" and t.route == "structured"
        assert flow_summary(im).route == ("structured" if im.num_runs <= 4 else "matmul")  # auto: few runs
        assert s.to_dict()["reach"] == t.to_dict()["reach"]
        assert s.diagram() == t.diagram() == HasseDiagram.from_mask(dense)


def test_compose_general_rows_without_diagonal():
    rng = np.random.default_rng(1)
    for _ in range(100):
        n = int(rng.integers(1, 30))
        p = rng.random((n, n)) < 0.2
        q = rng.random((n, n)) < 0.2
        got = compose(IntervalMask.from_dense(p), IntervalMask.from_dense(q)).to_dense()
        assert (got == ((p.astype(int) @ q.astype(int)) > 0)).all()


def test_many_runs_per_row_use_the_sort_path():
    """Rows with more than 16 runs (the column-network limit) are normalised by a per-row sort."""
    n = 64
    dense = np.zeros((n, n), bool)
    dense[:, ::2] = True  # 32 runs a row
    dense[5, :] = True
    m = IntervalMask.from_dense(dense)
    assert m.num_runs == 32
    assert ((m | m).to_dense() == dense).all()
    assert (reachability(m).to_dense() == np.asarray(reachability(dense))).all()


# ------------------------------------------------------------------ long sequences, closed forms


def _window_with_sinks(n: int, left: int, sinks: int) -> IntervalMask:
    q = np.arange(n)
    starts = np.stack([np.maximum(q - left, 0), np.zeros(n, int)], axis=1)
    stops = np.stack([q + 1, np.minimum(q + 1, sinks)], axis=1)
    return IntervalMask.from_runs(starts, stops, n)


@pytest.mark.parametrize(("n", "left", "sinks"), [(131072, 4096, 4), (100_003, 777, 0), (50_000, 999, 17), (9, 2, 0)])
def test_window_with_sinks_closed_form(n, left, sinks):
    """Each query sees itself, its `left` previous keys and the first `sinks` keys:
    L* = max(1, ceil((n - 1 - s) / W)) with W = left and s = sinks (the last query walks down to
    the first non-sink position, W keys a layer; the sinks are one hop from anywhere)."""
    m = _window_with_sinks(n, left, sinks)
    expect = max(1, math.ceil((n - 1 - sinks) / left))
    s = flow_summary(m, layers=(1, 2, expect - 1 if expect > 1 else 1))
    assert s.convergence_depth == expect == convergence_depth(m)
    assert s.num_classes == n and s.depth == n and s.width == 1 and s.num_hasse_edges == n - 1
    assert s.reach[0].max == min(n, left + 1 + sinks)
    assert s.reach[1].max == min(n, 2 * left + 1 + sinks)
    assert (expect == 1) == s.reach[-1].limit_reached


def test_documents_and_chunks_are_closed_at_long_n():
    n = 131072
    q = np.arange(n)
    rng = np.random.default_rng(7)
    bounds = np.unique(np.concatenate([[0], rng.integers(1, n, 40), [n]]))
    doc = np.searchsorted(bounds, q, side="right") - 1
    documents = IntervalMask.from_runs(bounds[doc], q + 1, n)
    chunked = IntervalMask.from_runs(q // 8192 * 8192, q + 1, n)
    for m in (documents, chunked):
        s = flow_summary(m, layers=(1, 4))
        assert s.convergence_depth == 1 and all(r.limit_reached for r in s.reach)
        assert s.num_classes == n
    lengths = np.diff(bounds)
    s = flow_summary(documents)
    assert s.depth == lengths.max() and s.width == lengths.size
    assert s.num_hasse_edges == n - lengths.size


def test_flow_summary_takes_numpy_integers_as_layers():
    """``flow_summary(m, np.array([1, 2]))`` was refused ("must be a sequence of positive ints") although
    ``[1, 2]`` works: a 1-D integer array, a NumPy integer (and a 0-d integer array) are layer counts too, in
    ``hassejax.cli.analyze`` as well; bools and floats are refused by name as before, in an array too."""
    from hassejax.cli import analyze

    m = _window_with_sinks(64, 2, 1)
    want = flow_summary(m, layers=[1, 2])
    for layers in (np.array([1, 2]), np.array([1, 2], dtype=np.int32), np.arange(1, 3, dtype=np.uint8)):
        s = flow_summary(m, layers)
        assert s.layers == (1, 2) and all(type(v) is int for v in s.layers)
        assert s.reach == want.reach
    assert analyze(m, np.array([1, 2]))["layers"] == [1, 2]
    for one in (np.int64(2), np.array(2)):
        assert flow_summary(m, one).layers == (2,)
    assert flow_summary(m, [np.int64(1), np.int32(2)]).layers == (1, 2)


def test_flow_summary_refuses_numpy_bools_and_floats_as_layers(no_typecheck):
    """The refusals that stay with NumPy inputs (the integer ones are taken: the test above)."""
    m = _window_with_sinks(64, 2, 1)
    bad = [
        (np.array([True, False]), r"`layers` must hold positive ints .*got np\.(True|False)_"),
        (np.array([1.0, 2.0]), r"`layers` must hold positive ints .*got np\.float64\(1\.0\)"),
        (np.array([0, 1]), r"`layers` must hold positive ints .*got np\.int64\(0\)"),
        (np.bool_(True), r"`layers` must be a sequence"),
        (np.float64(2.0), r"`layers` must be a sequence"),
        (np.array([[1, 2]]), r"`layers` must be .* 1-D integer array; got an array of shape \(1, 2\)"),
    ]
    for layers, match in bad:
        with pytest.raises(ParameterError, match=match):
            flow_summary(m, layers)


def test_flow_summary_errors_name_the_argument():
    m = _window_with_sinks(16, 2, 1)
    with pytest.raises(ParameterError, match="`layers`"):
        flow_summary(m, layers=(0,))
    with pytest.raises(ParameterError, match="`method`"):
        flow_summary(m, method="fast")
    with pytest.raises(ParameterError, match="`quotient_limit`"):
        flow_summary(m, quotient_limit=0)
    with pytest.raises(MaskError, match="`mask`"):
        flow_summary(np.zeros((3, 4), bool))
    big = flow_summary(_window_with_sinks(5000, 7, 2))
    with pytest.raises(MaskError, match="QUOTIENT_LIMIT"):
        big.diagram()
    # an IntervalMask on a dense route: converted, as flow_summary does (a fresh user: reachability and
    # convergence_depth refused it with "is a dense route"), the same answers as the structured route's
    dense = np.asarray(m)
    for method in ("matmul", "bitpacked"):
        for layers in (None, 3):
            r = reachability(m, layers, method=method)
            assert isinstance(r, IntervalMask)
            np.testing.assert_array_equal(np.asarray(r), np.asarray(reachability(dense, layers, method=method)))
            np.testing.assert_array_equal(np.asarray(r), np.asarray(reachability(m, layers, method="structured")))
        assert convergence_depth(m, method=method) == convergence_depth(m, method="structured")
        r = reachability(layer_masks=[m, dense], method=method)
        np.testing.assert_array_equal(np.asarray(r), np.asarray(reachability(layer_masks=[dense, dense])))
        with pytest.raises(MaskError, match="not both"):  # it recursed without end (a review)
            reachability(m, layer_masks=[m, m], method=method)


def test_flow_summary_takes_nested_lists_as_reachability_does(no_typecheck):
    """flow_summary refused nested lists ("got list (nested lists: pass np.asarray(mask, bool))") while reachability,
    convergence_depth and HasseDiagram.from_mask take them (a fresh user). It now runs their checks (as_mask's, without
    JAX): nested lists give the array's summary, and the same inputs are refused with the same messages. (Runtime type
    checks off: like the others' annotations, flow_summary's name arrays; the library itself accepts lists.)"""
    untimed = lambda s: {k: v for k, v in s.to_dict().items() if k != "seconds"}
    nested = [[True, False], [True, True]]
    assert untimed(flow_summary(nested, (1,))) == untimed(flow_summary(np.asarray(nested), (1,)))
    rows = np.tril(np.ones((5, 5), bool)) & ~np.eye(5, k=-2, dtype=bool)
    got, want = flow_summary(rows.tolist(), (1, 2)), flow_summary(rows, (1, 2))
    assert untimed(got) == untimed(want) and got.diagram() == want.diagram() == HasseDiagram.from_mask(rows.tolist())
    assert got.convergence_depth == int(convergence_depth(rows.tolist()))
    others = {"int": reachability, "ragged": convergence_depth, "not square": HasseDiagram.from_mask}
    bad = {"int": [[1, 0], [1, 1]], "ragged": [[True], [True, False]], "not square": [[True, False]]}
    for what, other in others.items():  # refused as the others refuse them (ragged: NumPy's ValueError before)
        with pytest.raises(MaskError) as ours:
            flow_summary(bad[what])
        with pytest.raises(MaskError) as theirs:
            other(bad[what])
        assert str(ours.value) == str(theirs.value), what
    heads = (IntervalMask.from_dense(rows), IntervalMask.from_dense(rows))
    with pytest.raises(MaskError, match="pass head_axis=0"):  # a tuple of IntervalMask: heads, not densified
        flow_summary(heads)
    assert untimed(flow_summary(heads, (1, 2), head_axis=0)) == untimed(want)


def test_hasse_diagram_from_interval_mask():
    m = IntervalMask.from_dense(np.eye(9, k=-2, dtype=bool))  # two chains, L* = 4
    assert HasseDiagram.from_mask(m) == HasseDiagram.from_mask(np.eye(9, k=-2, dtype=bool))
    assert HasseDiagram.from_mask(m, num_layers=4) == HasseDiagram.from_mask(m)
    with pytest.raises(MaskError, match="L\\* = 4"):
        HasseDiagram.from_mask(m, num_layers=3)
    with pytest.raises(MaskError, match="QUOTIENT_LIMIT"):
        HasseDiagram.from_mask(_window_with_sinks(5000, 7, 2))


@pytest.fixture
def no_product_route(monkeypatch):
    """The rules for masks that are no Kronecker product, shown on 2-D neighbourhoods and dilated windows that are
    (their product route is tested in test_product.py): the factor search finds none."""
    from hassejax.order import _product

    monkeypatch.setattr(_product, "kron_factors", lambda a: None)


def test_fresh_user_findings():
    """Faults a fresh user found: wrap-around of int64 runs, negative rows, routes of many-run masks,
    batches and traces on the structured route, the quotient limit in the message, huge dense scans."""
    import jax

    from hassejax.masks import structured

    assert IntervalMask.from_runs(np.array([0, 0]), np.array([2**41, 2]), 2).row(0) == [(0, 2)]
    assert IntervalMask.from_runs(np.array([2**32, 0]), np.array([2**32 + 2, 2]), 2).row(0) == []
    m = structured.causal(5)
    with pytest.raises(MaskError, match="`q`"):
        m.row(-1)
    with pytest.raises(MaskError, match="`q`"):
        m.contains(np.array([5]), np.array([0]))
    with pytest.raises(ValueError):
        m.starts[0, 0] = 3  # read-only: the mask is immutable
    # many runs a row at moderate n: a dilated window with n a multiple of its stride is a window ⊗ I_4 (the product
    # route), same answers as the dense routes
    dilated = structured.dilated(1024, 16, 4)
    s = flow_summary(dilated)
    assert s.route == "product"
    dense = np.asarray(dilated.to_dense())
    assert s.convergence_depth == convergence_depth(dilated) == int(convergence_depth(dense, method="bitpacked"))
    assert (reachability(dilated).to_dense() == np.asarray(reachability(dense, method="bitpacked"))).all()
    # the structured route on dense batches, and under a trace
    batch = np.stack([np.eye(6, k=-1, dtype=bool), np.eye(6, k=-2, dtype=bool)])
    assert (np.asarray(reachability(batch, method="structured")) == np.asarray(reachability(batch))).all()
    assert np.asarray(reachability(np.zeros((0, 4, 4), bool), method="structured")).shape == (0, 4, 4)
    with pytest.raises(ParameterError, match="concrete"):
        jax.jit(lambda x: reachability(x, method="structured"))(batch[0])
    with pytest.raises(MaskError, match="quotient_limit = 3"):
        flow_summary(structured.sliding_window(10, 2), quotient_limit=3).diagram()
    with pytest.raises(MaskError, match="IntervalMask"):
        flow_summary(np.broadcast_to(np.array(True), (70000, 70000)))
    assert "median 524289 " in "\n".join(flow_summary(structured.causal(2**20 + 1)).lines())  # no exponent


@pytest.mark.parametrize("seed", [0, 1])
def test_products_in_small_row_blocks_equal_dense_powers(seed, monkeypatch):
    """`compose` answers rows in blocks sized by their candidate runs (a block's temporaries within `_TEMP_BYTES`);
    here blocks of 64 rows, several a product, on masks of 2–4 runs a row whose powers gain runs."""
    from hassejax.order import _structured

    rng = np.random.default_rng(seed)
    n = 300
    q = np.arange(n)
    strides = rng.integers(5, 40, size=n)
    starts = np.stack([np.maximum(q - 1, 0), np.maximum(q - strides, 0), rng.integers(0, n, size=n)], 1)
    stops = np.stack([q + 1, np.maximum(q - strides + 2, 0), np.minimum(starts[:, 2] + 2, n)], 1)
    m = IntervalMask.from_runs(starts, stops, n=n)
    dense = m.to_dense() | np.eye(n, dtype=bool)
    powers = dense_powers(dense)
    monkeypatch.setattr(_structured, "_TEMP_BYTES", 1)  # the minimum: 64 rows a block
    assert _structured._row_block(10_000) == 64
    table = PowerTable(m.with_diagonal())
    assert table.depth() == len(powers)
    for num_layers in (1, 2, 3, len(powers)):
        np.testing.assert_array_equal(table.power(num_layers).to_dense(), powers[num_layers - 1])


def test_a_product_beyond_the_candidate_limit_is_refused_by_name():
    """A product whose candidate runs (n · 4 · runs · runs) exceed `_MAX_CANDIDATES` raises before it runs for
    minutes, and names the dense bit-packed route (a dilated window at n = 32768 ran 59 s to 18 GB, then was
    refused without the way out)."""
    from hassejax.errors import MemoryBudgetError
    from hassejax.order import _structured

    q = np.arange(8)
    m = IntervalMask.from_runs(np.maximum(q - 1, 0)[:, None], (q + 1)[:, None], n=8)  # a window of two
    with (
        _structured.candidate_limit(10.0),
        pytest.raises(MemoryBudgetError, match=r"`mask`: a product of interval masks .* method='bitpacked'"),
    ):
        compose(m, m)
    assert compose(m, m) == compose(m, m)  # the default limit again outside the block


@pytest.mark.parametrize("n", [8, 12_000])
def test_the_refusal_quotes_the_dense_route_s_own_estimate_and_no_dead_end(n, monkeypatch):
    """The refusal's way out states the memory the dense bit-packed route's own check will ask for (it said "n²/8
    bytes a power: 512 MiB" for a 2-D neighbourhood mask at n = 65,536, whose dense route then needed 29 GiB, a
    fresh-user review); when that does not fit the free memory, it says so instead of naming a route that will
    refuse too."""
    from hassejax.order import _routes, _structured

    # causal rows [0, i + 1): a full row (every key) would be answered at once, with no candidate run
    m = IntervalMask.from_runs(np.zeros((n, 1), np.int64), np.arange(1, n + 1)[:, None], n=n)
    need = _routes._dense_bytes(n, 1, "bitpacked", 0, 2)  # the interval form's dense route (order._prepare)
    want = f"{need / 2**30:.3g} GiB" if need >= 2**30 else f"{need / 2**20:.3g} MiB"
    monkeypatch.setattr(_structured, "host_memory_bytes", lambda: 2 * need)
    with _structured.candidate_limit(1.0), pytest.raises(_structured.CandidateLimitError) as err:
        compose(m, m)
    assert f"dense bit-packed route (about {want} for this n)" in str(err.value)
    assert "method='bitpacked'" in str(err.value)
    monkeypatch.setattr(_structured, "host_memory_bytes", lambda: need)  # over the 80 % budget
    with _structured.candidate_limit(1.0), pytest.raises(_structured.CandidateLimitError) as err:
        compose(m, m)
    assert f"needs about {want} of host memory for this n" in str(err.value) and "smaller n" in str(err.value)
    assert "method='bitpacked'" not in str(err.value)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # forced structured where "auto" would switch
def test_a_structured_refusal_quotes_the_dense_estimate_of_the_call_it_refuses(monkeypatch):
    """A fresh user: ``--method structured`` quoted 67.6 GiB for the dense route (the reachability's), and
    ``--method bitpacked`` then asked for 48.7 GiB (``flow_summary``'s own check). Each function's refusal quotes
    the estimate its own bit-packed route checks."""
    import re

    import hassejax._checks
    from hassejax.errors import MemoryBudgetError

    n = 12_000
    # causal rows [0, i + 1): a full row (every key) would be answered at once, with no candidate run to refuse
    m = IntervalMask.from_runs(np.zeros((n, 1), np.int64), np.arange(1, n + 1)[:, None], n=n)
    dense = m.to_dense()  # a dense input: no densified copy (a review: flow_summary quoted one, convergence_depth
    # the reachability's estimate)
    quoted = {}
    monkeypatch.setattr(_structured, "host_memory_bytes", lambda: 2**50)  # the advice: "use the dense route"
    for mask, f in [(m, reachability), (m, convergence_depth), (m, flow_summary), (dense, convergence_depth)] + [
        (dense, flow_summary)
    ]:
        monkeypatch.setattr(hassejax._checks, "available_memory_bytes", lambda: 2**50)
        with _structured.candidate_limit(1.0), pytest.raises(_structured.CandidateLimitError) as err:
            f(mask, method="structured")
        size, unit = re.search(
            r"dense bit-packed route \(about ([0-9.]+) (GiB|MiB) for this n\)", str(err.value)
        ).groups()
        quote = float(size) * (2**30 if unit == "GiB" else 2**20)
        # a budget under which the quoted need is refused and the checks before it (from the shape: the fewest
        # nonzeros) pass: the refusal then states what the call asks for
        budget = int(quote)
        monkeypatch.setattr(hassejax._checks, "available_memory_bytes", lambda budget=budget: budget)
        with pytest.raises(MemoryBudgetError) as refused:
            f(mask, method="bitpacked")
        wanted = float(re.search(r"needs about ([0-9.]+) GiB", str(refused.value)).group(1)) * 2**30
        assert quote == pytest.approx(wanted, rel=0.01), (f.__name__, type(mask).__name__)
        quoted[f.__name__, type(mask).__name__] = quote
    assert len({round(v / 2**28) for k, v in quoted.items() if k[1] == "IntervalMask"}) == 3  # three estimates
    assert quoted["flow_summary", "ndarray"] < quoted["flow_summary", "IntervalMask"]  # no densified copy


@pytest.mark.parametrize("build", [lambda: S.dilated(30_001, 600, 3), lambda: S.dilated(30_000, 600, 3)])
def test_a_forced_structured_refusal_of_a_recorded_mask_points_to_auto(build):
    """A fresh user: ``--method structured`` on a dilated window that ``auto`` answers (its constructor records its
    components or factors) was refused with advice on the dense route only."""
    m = build()
    route = "components" if m.n % 3 else "product"
    with _structured.candidate_limit(1e6), pytest.raises(_structured.CandidateLimitError) as err:
        flow_summary(m, method="structured")
    claim = f"method='auto' (the default; hassejax analyze without --method) takes the {route} route for this mask"
    assert claim in str(err.value) and "dense bit-packed route" not in str(err.value)
    with _structured.candidate_limit(1e6), pytest.raises(_structured.CandidateLimitError) as err:
        convergence_depth(m, method="structured")
    assert claim in str(err.value)
    # reachability's output is n × n whatever the route (its "auto" may refuse or go dense): no claim (a review)
    with _structured.candidate_limit(1e6), pytest.raises(_structured.CandidateLimitError) as err:
        reachability(m, method="structured")
    assert "method='auto'" not in str(err.value)
    assert flow_summary(m).route == route and convergence_depth(m) == flow_summary(m).convergence_depth
    # a derived mask has no record: no claim
    with _structured.candidate_limit(1e6), pytest.raises(_structured.CandidateLimitError) as err:
        flow_summary(m & S.causal(m.n), method="structured")
    assert "method='auto'" not in str(err.value)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=interval_masks(max_n=40))
def test_a_mask_said_to_square_to_full_has_a_full_square(case):
    """:func:`_squares_to_full` (a mask of many runs a row stays on the structured route under ``"auto"`` when every
    row of ``A`` is full or holds the key of a full row) only says so when ``A²`` is full, by integer matmul."""
    from hassejax.order._route_rules import _squares_to_full

    m, _ = build(case)
    a = np.asarray(m.with_diagonal().to_dense()).astype(np.int64)
    full_square = bool(((a @ a) > 0).all())
    if _squares_to_full(m):
        assert full_square
    if (a.all(axis=1) | (a @ a.all(axis=1).astype(np.int64) > 0)).all():  # every row full or with a full row's key
        assert _squares_to_full(m)


def test_global_tokens_stay_on_the_structured_route_with_many_runs_a_row():
    """A review: ``global_sliding(16384, 64, ...)`` with 17 isolated global positions (18 runs a row) took the dense
    bit-packed route under ``"auto"`` (5.5 s, 1.4 GB), where every row holds a global token's key, whose row is full,
    so the structured route answers from its first product (0.02 s, measured, not asserted). Here at n = 2000: the
    route, and the summary equal to the bit-packed route's; a dilated window (no full row) still goes dense."""
    n = 2000
    m = S.global_sliding(n, 8, np.linspace(0, n - 1, 17).round().astype(int))
    assert m.num_runs == 18
    got, want = flow_summary(m), flow_summary(m, method="bitpacked")
    assert got.route == "structured" and want.route == "bitpacked"
    for name in ("convergence_depth", "num_classes", "depth", "width", "num_hasse_edges"):
        assert getattr(got, name) == getattr(want, name), name
    assert convergence_depth(m) == want.convergence_depth == 2
    np.testing.assert_array_equal(np.asarray(reachability(m, 1)), np.asarray(m.with_diagonal().to_dense()))
    d = S.dilated(2001, 12, 2)  # 13 runs a row, no full row; without its recorded components
    assert flow_summary(IntervalMask.from_runs(d.starts, d.stops, d.n)).route == "bitpacked"


def test_auto_route_falls_back_to_bitpacked_when_the_runs_of_the_powers_multiply(monkeypatch, no_product_route):
    """A dilated window (3 runs a row) has powers of hundreds of runs: under ``method="auto"`` a product beyond the
    dense bit-packed cost moves the whole analysis to the bit-packed route (n = 3000 was refused after 17 s, a
    fresh-user review), with the same answers as the structured route and dense powers."""
    from hassejax.masks import from_spec
    from hassejax.order import _route_rules

    m = from_spec("dilated(n=200, window=6, dilation=4)", form="intervals")
    assert m.num_runs <= 4
    powers = dense_powers(m.to_dense() | np.eye(m.n, dtype=bool))
    structured = flow_summary(m, (1, 2, 4), method="structured")
    assert structured.route == "structured" and structured.convergence_depth == len(powers)
    monkeypatch.setattr(_route_rules, "_FALLBACK_FLOOR", 1.0)  # the limit n³/64/64 ≈ 1,950 candidate runs
    auto = flow_summary(m, (1, 2, 4))
    assert auto.route == "bitpacked" and "powers' runs multiply" in auto.route_reason
    for name in ("convergence_depth", "num_classes", "depth", "width", "num_hasse_edges", "reach"):
        assert getattr(auto, name) == getattr(structured, name), name
    assert convergence_depth(m) == len(powers)
    np.testing.assert_array_equal(reachability(m, 4).to_dense(), powers[3])
    np.testing.assert_array_equal(reachability(m).to_dense(), powers[-1])
    # Above _DENSE_FALLBACK_N (here lowered to 100; up to _DENSE_RESCUE_N) the structured route runs at its own
    # limit, and a product beyond it goes bit-packed too (review: a dilated window at n = 20000 was refused after
    # 23 s, where the bit-packed route answers); beyond _DENSE_RESCUE_N the refusal stands.
    import contextvars

    from hassejax.order import _structured

    monkeypatch.setattr(_route_rules, "_DENSE_FALLBACK_N", 100)
    monkeypatch.setattr(_structured, "_MAX_CANDIDATES", 125_000.0)
    monkeypatch.setattr(_structured, "_CANDIDATE_LIMIT", contextvars.ContextVar("limit", default=125_000.0))
    rescued = flow_summary(m, (1, 2, 4))
    assert rescued.route == "bitpacked" and "beyond the structured route's limit" in rescued.route_reason
    for name in ("convergence_depth", "num_classes", "depth", "width", "num_hasse_edges", "reach"):
        assert getattr(rescued, name) == getattr(structured, name), name
    assert convergence_depth(m) == len(powers)
    np.testing.assert_array_equal(reachability(m).to_dense(), powers[-1])
    # the dense mask does not fit either: both routes are said, not the one just tried (diff review)
    import hassejax.masks._intervals as intervals_module
    from hassejax.errors import MemoryBudgetError

    real_check = intervals_module.check_host_memory

    def no_room_for_dense(required, what, name, fraction=0.8, hint=None):
        if what.startswith("a dense"):
            raise MemoryBudgetError(f"`{name}`: {what} does not fit.")
        return real_check(required, what, name, fraction, hint)

    with monkeypatch.context() as patch:
        patch.setattr(intervals_module, "check_host_memory", no_room_for_dense)
        with pytest.raises(
            MemoryBudgetError, match=r"multiply\. The dense bit-packed route, tried next, does not fit"
        ) as err:
            flow_summary(m)
        assert "method='bitpacked'" not in str(err.value)
    monkeypatch.setattr(_route_rules, "_DENSE_RESCUE_N", 150)
    with pytest.raises(_structured.CandidateLimitError, match="method='bitpacked'") as err:
        flow_summary(m)
    # the refusal a user sees is a public class of hassejax.errors (a MemoryBudgetError), not a private one
    assert type(err.value) is hassejax.errors.CandidateLimitError and isinstance(err.value, MemoryBudgetError)
    assert "CandidateLimitError" in hassejax.errors.__all__


def test_forced_structured_route_warns_once_where_auto_would_switch(monkeypatch):
    """A fresh-user review: ``method="structured"`` on a mask whose powers' runs multiply (a random sparse mask,
    n = 1024-1500) took 62-73 s without a word, against 0.03 s bit-packed. The route stays (the caller chose it)
    and answers the same; the first product beyond the dense bit-packed cost warns, once a call; a mask whose runs
    do not multiply, or ``method="auto"``, does not warn."""
    import warnings

    from hassejax.masks import from_spec
    from hassejax.order import _route_rules

    m = from_spec("dilated(n=200, window=6, dilation=4)", form="intervals")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = flow_summary(m, (1, 2, 4), method="structured")  # at the real floor (2**22 candidate runs)
    monkeypatch.setattr(_route_rules, "_FALLBACK_FLOOR", 1.0)  # the limit n³/64/64 ≈ 1,950 candidate runs
    with pytest.warns(RuntimeWarning, match="method='structured' forced .* method='bitpacked'") as record:
        forced = flow_summary(m, (1, 2, 4), method="structured")
    assert sum("method='structured' forced" in str(w.message) for w in record) == 1
    assert forced.route == "structured"
    for name in ("convergence_depth", "num_classes", "depth", "width", "num_hasse_edges", "reach"):
        assert getattr(forced, name) == getattr(quiet, name), name
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        flow_summary(m, (1, 2, 4))  # auto: switches, no warning
        flow_summary(from_spec("sliding_window(n=200, left=3)", form="intervals"), method="structured")


def test_auto_route_of_a_dense_array_falls_back_to_bitpacked_as_an_interval_mask(monkeypatch):
    """A dense array of few key runs a row (n >= 1024) took the structured route under ``method="auto"`` in
    `reachability` and `convergence_depth` without the bit-packed fallback an IntervalMask gets where the powers'
    runs multiply (a random sparse mask of at most 4 keys a row is such a mask). Now each mask of a stack switches
    on its own, with the answers of dense powers and no warning; a mask whose runs stay few keeps the structured
    route."""
    import warnings

    from hassejax.masks import from_spec
    from hassejax.order import _route_rules, depth, reach

    a = from_spec("dilated(n=200, window=6, dilation=4)", form="intervals").to_dense()
    causal = np.tril(np.ones((200, 200), dtype=bool))
    powers = dense_powers(a | np.eye(200, dtype=bool))
    monkeypatch.setattr(reach, "_STRUCTURED_MIN_N", 100)  # the structured route for dense input from n = 100
    monkeypatch.setattr(depth, "_STRUCTURED_MIN_N", 100)
    real_floor = _route_rules._FALLBACK_FLOOR
    monkeypatch.setattr(_route_rules, "_FALLBACK_FLOOR", 1.0)  # the limit n³/64/64 ≈ 1,950 candidate runs
    calls = []

    def spy(name, fn):
        def wrapped(*args, **kwargs):
            calls.append(name)
            return fn(*args, **kwargs)

        return wrapped

    for module, name in ((reach, "_host_closure"), (reach, "_host_power"), (depth, "_host_depth")):
        monkeypatch.setattr(module, name, spy(name, getattr(module, name)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        limit = np.asarray(reachability(np.stack([a, causal])))
        late = np.asarray(reachability(a, len(powers) - 1))
        depths = np.asarray(convergence_depth(np.stack([causal, a])))
    np.testing.assert_array_equal(limit[0], powers[-1])
    np.testing.assert_array_equal(limit[1], causal)
    np.testing.assert_array_equal(late, powers[-2])
    assert depths.tolist() == [1, len(powers)]
    assert calls == ["_host_closure", "_host_power", "_host_depth"]  # once each: the dilated mask only
    calls.clear()
    monkeypatch.setattr(_route_rules, "_FALLBACK_FLOOR", real_floor)  # the real floor: the structured route
    np.testing.assert_array_equal(np.asarray(reachability(a)), powers[-1])
    assert int(convergence_depth(a)) == len(powers) and calls == []


def test_auto_route_switches_before_a_structured_product_costlier_than_the_dense_closure(monkeypatch):
    """A random mask of 3 keys a row, n = 2048 (a dense array, so ``method="auto"`` tries the structured route):
    its third power's product merges 1.2e8 candidate runs (5.1 s at 40–60 ns a candidate) where the whole
    bit-packed closure takes 0.03 s. The switch limit was `n³/64` candidates (1.3e8), so that product ran before
    the switch; now a candidate counts as :data:`~hassejax.order._route_rules._CANDIDATE_COST` packed words and
    the structured attempt stops before it. The answers are the bit-packed route's."""
    from hassejax.order import _structured

    rng = np.random.default_rng(0)
    n = 2048
    a = np.zeros((n, n), dtype=bool)
    a[np.arange(n)[:, None], rng.integers(0, n, (n, 3))] = True
    merged = []
    real_compose = _structured.compose

    def counting(p, q, **kwargs):
        out = real_compose(p, q, **kwargs)
        merged.append(float(p.n) * 4 * p.num_runs * q.num_runs)  # counted once the product ran
        return out

    monkeypatch.setattr(_structured, "compose", counting)
    r = np.asarray(reachability(a))
    assert merged and max(merged) < 1e7, merged  # not the 1.2e8-candidate product
    np.testing.assert_array_equal(r, np.asarray(reachability(a, method="bitpacked")))
    merged.clear()
    assert int(convergence_depth(a)) == int(convergence_depth(a, method="bitpacked"))
    assert merged and max(merged) < 1e7, merged


def test_forced_structured_route_of_a_dense_array_warns_as_an_interval_mask(monkeypatch):
    """`reachability` and `convergence_depth` of a dense array with ``method="structured"`` forced took the
    structured route without the warning that an IntervalMask (and `flow_summary`) gets where ``"auto"`` would
    switch; a stack of two warns once a call as well."""
    from hassejax.masks import from_spec
    from hassejax.order import _route_rules

    m = from_spec("dilated(n=200, window=6, dilation=4)", form="intervals")
    a = m.to_dense()
    monkeypatch.setattr(_route_rules, "_FALLBACK_FLOOR", 1.0)  # the limit n³/64/64 ≈ 1,950 candidate runs
    for call in (
        lambda: reachability(np.stack([a, a]), method="structured"),
        lambda: convergence_depth(np.stack([a, a]), method="structured"),
    ):
        with pytest.warns(RuntimeWarning, match="method='structured' forced .* method='bitpacked'") as record:
            call()
        assert sum("method='structured' forced" in str(w.message) for w in record) == 1


def test_auto_route_leaves_a_2d_neighbourhood_once_its_runs_grow(monkeypatch):
    """``natten_2d(100, 100, 3, 3)`` (n = 10,000, 3 key runs a row): the runs a row of its squarings grow 3, 5, 9,
    17, 33, 65, 100, each squaring about 4x the candidate runs of the one before. Under ``method="auto"`` the
    structured route squared up to 65 runs a row (8-15 s) before a product passed the dense limit `n³/64/64`, where
    the bit-packed closure takes 0.3-0.6 s. A squaring after one that grew the runs is now held to the whole
    bit-packed closure's estimated cost (``_route_rules.growth_limit``): the attempt stops before the 17 x 17
    squaring. The route is read from the products tried and the bit-packed closures called, not from the clock;
    the answers are the bit-packed route's. Masks whose runs do not grow keep the structured route at that n."""
    from hassejax.masks import natten_2d
    from hassejax.masks import structured as smasks
    from hassejax.order import _structured, reach

    squarings, closures = [], []
    real_compose, real_closure = _structured.compose, reach._host_closure

    def counting(p, q, **kwargs):
        out = real_compose(p, q, **kwargs)
        squarings.append((p.num_runs, q.num_runs, out.num_runs))
        return out

    def closure(*args, **kwargs):
        closures.append(args[0].shape)
        return real_closure(*args, **kwargs)

    monkeypatch.setattr(_structured, "compose", counting)
    monkeypatch.setattr(reach, "_host_closure", closure)
    a = np.asarray(natten_2d(100, 100, 3, 3))
    r = np.asarray(reachability(a))
    assert closures == [(10_000, 10_000)], closures  # the bit-packed closure, once
    assert squarings[0] == (3, 3, 5) and len(squarings) <= 3 and max(p * q for p, q, _ in squarings) <= 81, squarings
    np.testing.assert_array_equal(r, np.asarray(reachability(a, method="bitpacked")))
    closures.clear()
    n = 10_000
    for kept in (
        smasks.sliding_window(n, 64) | smasks.attention_sinks(n, 4),
        smasks.global_sliding(n, 64, [0, n // 2]),
        smasks.block_diffusion(n, 64),
    ):
        squarings.clear()
        reachability(kept)
        assert closures == [] and squarings, (kept.num_runs, squarings)  # structured: products, no dense closure


def test_the_growth_limit_holds_only_squarings_whose_runs_grew():
    """``candidate_limit(limit, growing=...)`` refuses a squaring of :class:`PowerTable` beyond `growing` only when
    the squaring before grew the runs a row (the runs of the powers multiply); a mask whose runs stay as they are is
    held to `limit` alone, and without `growing` nothing changes. ``warn_when_slower_than_dense`` warns at the same
    squaring under ``method="structured"`` (once), and the route goes on with the same answer."""
    import warnings

    from hassejax.masks import structured as smasks
    from hassejax.order import _structured

    grows = smasks.natten_2d(16, 16, 3, 3).with_diagonal()  # 3 runs a row, then 5, 9, ...
    stays = smasks.block_diffusion(256, 8).with_diagonal()  # 2 runs a row in every power
    reference = PowerTable(grows).limit()
    with _structured.candidate_limit(1e30, growing=1.0), pytest.raises(_structured.CandidateLimitError) as err:
        PowerTable(grows).limit()  # the first squaring (3 x 3) runs; the second (5 x 5, grown from 3) is refused
    assert "grew the runs a row from 3 to 5" in str(err.value)
    with _structured.candidate_limit(1e30, growing=1.0):
        table = PowerTable(stays)
        table.limit()
        assert table.products >= 1 and {p.num_runs for p in table.powers} == {2}
    with _structured.candidate_limit(1e30):
        assert PowerTable(grows).limit() == reference
    with (
        pytest.warns(RuntimeWarning, match="method='structured' forced") as record,
        _structured.warn_when_slower_than_dense(1e30, growing=1.0),
    ):
        assert PowerTable(grows).limit() == reference
    assert len(record) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with _structured.warn_when_slower_than_dense(1e30, growing=1.0):
            PowerTable(stays).limit()


def _middle_range(monkeypatch):
    """Thresholds lowered so that n = 576 lies above ``_DENSE_FALLBACK_N`` and up to ``_DENSE_RESCUE_N``, with a
    growing limit small enough for a 24 x 24 neighbourhood (``_FALLBACK_FLOOR`` 1: about 4.7e4 candidate runs)."""
    from hassejax.order import _route_rules

    monkeypatch.setattr(_route_rules, "_DENSE_FALLBACK_N", 100)
    monkeypatch.setattr(_route_rules, "_DENSE_RESCUE_N", 1000)
    monkeypatch.setattr(_route_rules, "_FALLBACK_FLOOR", 1.0)


def _counting_compose(monkeypatch) -> list[tuple[int, int]]:
    from hassejax.order import _structured

    products, real_compose = [], _structured.compose

    def counting(p, q, **kwargs):  # the products that ran (a refused one raises before it is counted)
        out = real_compose(p, q, **kwargs)
        products.append((p.num_runs, q.num_runs))
        return out

    monkeypatch.setattr(_structured, "compose", counting)
    return products


def test_middle_range_auto_route_leaves_a_2d_neighbourhood_at_the_growing_limit(monkeypatch, no_product_route):
    """Above ``_DENSE_FALLBACK_N`` (up to ``_DENSE_RESCUE_N``) the structured route used to run at its own limit
    only: ``flow_summary(natten_2d(181, 181, 7, 7))`` (n = 32761) squared for 99 s before that refused and the
    bit-packed route answered (277 s in all). The growing limit now holds there too: the attempt stops at the first
    squaring after one that grew the runs (5 x 5), with the bit-packed route's answer. Masks whose runs do not
    grow stay structured."""
    from hassejax.masks import structured as smasks

    m = smasks.natten_2d(24, 24, 3, 3)
    bitpacked = flow_summary(m, (1, 2, 4), method="bitpacked")
    _middle_range(monkeypatch)
    products = _counting_compose(monkeypatch)
    auto = flow_summary(m, (1, 2, 4))
    assert auto.route == "bitpacked" and "grew the runs a row" in auto.route_reason, auto.route_reason
    assert products == [(3, 3)], products  # the 5 x 5 squaring (grown from 3) refused before it ran
    for name in ("convergence_depth", "num_classes", "depth", "width", "num_hasse_edges", "reach"):
        assert getattr(auto, name) == getattr(bitpacked, name), name
    n = m.n
    for kept in (smasks.sliding_window(n, 16) | smasks.attention_sinks(n, 4), smasks.block_diffusion(n, 8)):
        products.clear()
        assert flow_summary(kept).route == "structured" and products, kept.num_runs


def test_middle_range_goes_back_to_the_structured_route_when_the_dense_one_does_not_fit(monkeypatch, no_product_route):
    """The early switch must not turn a mask the structured route can finish into a refusal: where the dense mask
    does not fit in memory, a refusal at the growing limit is retried at the structured route's own limit and its
    answer returned; only a refusal there too raises the error naming both routes."""
    import contextvars

    import hassejax.masks._intervals as intervals_module
    from hassejax.errors import MemoryBudgetError
    from hassejax.masks import structured as smasks
    from hassejax.order import _structured

    m = smasks.natten_2d(24, 24, 3, 3)
    expected = flow_summary(m, (1, 2, 4), method="structured")
    _middle_range(monkeypatch)
    real_check = intervals_module.check_host_memory

    def no_room_for_dense(required, what, name, fraction=0.8, hint=None):
        if what.startswith("a dense"):
            raise MemoryBudgetError(f"`{name}`: {what} does not fit.")
        return real_check(required, what, name, fraction, hint)

    monkeypatch.setattr(intervals_module, "check_host_memory", no_room_for_dense)
    products = _counting_compose(monkeypatch)
    got = flow_summary(m, (1, 2, 4))
    assert got.route == "structured"
    assert products[0] == (3, 3) and products[1] == (3, 3) and (5, 5) in products, products  # refused, then retried
    for name in ("convergence_depth", "num_classes", "depth", "width", "num_hasse_edges", "reach"):
        assert getattr(got, name) == getattr(expected, name), name
    # the structured route's own limit refuses too: both routes are named
    monkeypatch.setattr(_structured, "_MAX_CANDIDATES", 30_000.0)
    monkeypatch.setattr(_structured, "_CANDIDATE_LIMIT", contextvars.ContextVar("limit", default=30_000.0))
    with pytest.raises(MemoryBudgetError, match=r"multiply\. The dense bit-packed route, tried next, does not fit"):
        flow_summary(m)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=interval_masks(max_n=60),
    limit=st.sampled_from([200.0, 1e3, 5e3, 2e4]),
    layers=st.sampled_from([None, 2, 3, 8]),
)
def test_a_predicted_refusal_is_certain(case, limit, layers):
    """:func:`predicted_refusal` (a search from sampled rows, before any product) only predicts a refusal that the
    structured route then makes: with the same candidate limit, ``PowerTable.limit()`` (``R``; ``L*`` squares as far)
    or ``PowerTable.power(L)`` raises :class:`CandidateLimitError`. Random masks of 1–3 runs a row, cyclic or not."""
    from hassejax.errors import CandidateLimitError
    from hassejax.order._route_rules import predicted_refusal
    from hassejax.order._structured import candidate_limit

    m, _ = build(case)
    why = predicted_refusal(m, limit, layers)
    if why is None:
        return
    assert why.startswith("`mask`: the structured route would square A^") and "found before any product" in why
    table = PowerTable(m.with_diagonal(), name="mask")
    with candidate_limit(limit), pytest.raises(CandidateLimitError):
        table.limit() if layers is None else table.power(layers)


def test_a_predicted_refusal_skips_the_structured_route(monkeypatch, no_product_route):
    """Above ``_DENSE_FALLBACK_N`` under ``method="auto"``, a refusal found by :func:`predicted_refusal` skips the
    structured route's products: beyond ``_DENSE_RESCUE_N`` the refusal comes at once (``natten_2d(362, 362, 7, 7)``:
    after 73 s of squarings before, a fresh-user review), below it the dense route answers at once. Thresholds
    lowered (n = 576 between them, or above both) and a candidate limit of 3e4 (4 · 576 · 5² runs at ``A^2``)."""
    import contextvars

    from hassejax.errors import CandidateLimitError
    from hassejax.masks import structured as smasks
    from hassejax.order import _route_rules, _structured
    from hassejax.order._route_rules import predicted_refusal

    m = smasks.natten_2d(24, 24, 3, 3)
    dense = np.asarray(m.to_dense())
    expected = dense_powers(dense | np.eye(m.n, dtype=bool))
    assert predicted_refusal(m, 3e4) is not None and predicted_refusal(m, 1e7) is None  # 4 · 576 · 24² at A^16
    assert predicted_refusal(m, 3e4, num_layers=2) is None  # R^(2) squares A only: 4 · 576 · 3² runs
    monkeypatch.setattr(_structured, "_CANDIDATE_LIMIT", contextvars.ContextVar("limit", default=3e4))
    products = _counting_compose(monkeypatch)
    _middle_range(monkeypatch)  # 100 < n = 576 <= 1000: the dense route at once
    np.testing.assert_array_equal(np.asarray(reachability(m)), expected[-1])
    assert convergence_depth(m) == len(expected)
    got = flow_summary(m, (1, 2, 4))
    assert got.route == "bitpacked" and got.convergence_depth == len(expected)
    np.testing.assert_array_equal(np.asarray(reachability(m, 2)), expected[1])  # not predicted: structured
    assert products == [(3, 3)], products  # the one squaring of R^(2); none for R, L* or the summary
    monkeypatch.setattr(_route_rules, "_DENSE_RESCUE_N", 500)  # n = 576 beyond: the refusal at once
    products.clear()
    for call in (lambda: reachability(m), lambda: convergence_depth(m), lambda: flow_summary(m)):
        with pytest.raises(CandidateLimitError, match=r"^`mask`: the structured route would square A\^2 .* before any"):
            call()
    assert products == []


def test_the_predicting_search_costs_at_most_a_share_of_the_route_s_own_work(monkeypatch):
    """The search of :func:`predicted_refusal` stops once it would spend more than half the candidate runs the
    structured route is sure to merge first, or a level would gather more than its cap of runs (a review: with a fixed
    budget a window with sink tokens, whose 2 runs a row never grow, was searched for 0.45 s at n = 40000; one row of
    1000 runs in a causal mask of 40000 took 8 s and 1 GB more; here 100 runs in 4000 against a cap of 2e5). Levels counted by the search's ``np.bincount`` calls (two a level);
    the 2-D neighbourhood is still predicted at ``A^16``."""
    from hassejax.masks import structured as smasks
    from hassejax.order import _route_rules
    from hassejax.order._route_rules import predicted_refusal

    calls = []
    real = np.bincount

    def counting(x, *args, **kwargs):
        calls.append(len(x))
        return real(x, *args, **kwargs)

    monkeypatch.setattr(_route_rules.np, "bincount", counting)
    n = 40000
    sinks = smasks.sliding_window(n, 64) | smasks.attention_sinks(n, 4)
    assert predicted_refusal(sinks, 2.0**31) is None
    assert len(calls) // 2 <= 12, len(calls)  # levels searched (it ran to a budget of 250 levels before)
    calls.clear()
    m = smasks.natten_2d(200, 200, 7, 7)  # n = 40000: 7, 13, 25, 49, 97 runs at A, A^2, ..., A^16
    assert predicted_refusal(m, 4.0 * m.n * 97 * 97 - 1) is not None and len(calls) // 2 == 16
    calls.clear()
    monkeypatch.setattr(_route_rules, "_PREDICT_LEVEL_CAP", 2e5)  # 2e7 at 100 times the size: the same decision
    h = 4000
    starts = np.stack([np.zeros(h, np.int64)] + [np.full(h, h)] * 99, axis=1)  # causal rows [0, i + 1) ...
    stops = np.stack([np.arange(1, h + 1)] + [np.full(h, h)] * 99, axis=1)
    starts[-1], stops[-1] = np.arange(0, 200, 2), np.arange(1, 201, 2)  # ... and a last row of 100 runs
    heavy = IntervalMask.from_runs(starts, stops, h)
    assert heavy.num_runs >= 100 and predicted_refusal(heavy, 2.0**31) is None
    assert len(calls) // 2 <= 1, len(calls)  # the second level would gather the runs of ~1e4 rows: not searched


def test_rows_that_reach_a_full_row_are_answered_without_merging_runs():
    """A fresh user: ``global_sliding`` with 64 global tokens at n = 131072 (65 runs a row) was refused at ``A ⊗ A``,
    though ``A²`` is one full run a row (``L* = 2``): every row holds a global token's key, whose row is full, so
    :func:`compose` answers it at once, and :func:`predicted_refusal` counts the first product as compose does. Here at
    n = 512 (17 runs a row) under a limit that the old count (n x 4 x 17 x 17 = 5.9e5) exceeds, against the dense
    powers; a mask whose rows hold as many runs and reach no full row (key-only global tokens) is still refused at
    the first product, saying A's own rows are too many (not that the runs multiply)."""
    from hassejax.order._route_rules import predicted_refusal

    n, globals_ = 512, list(range(0, 512, 32))  # 16 global tokens: 17 runs a row
    m = S.global_sliding(n, 8, globals_)
    assert m.num_runs == 17
    dense = np.asarray(m.to_dense())
    expected = dense_powers(dense | np.eye(n, dtype=bool))
    assert len(expected) == 2 and expected[-1].all()
    with _structured.candidate_limit(1e5):
        assert predicted_refusal(m, 1e5) is None
        table = PowerTable(m.with_diagonal())
        assert table.depth() == 2 and table.limit().num_runs == 1
        np.testing.assert_array_equal(table.power(1).to_dense(), expected[0])
        summary = flow_summary(m, method="structured")
    assert summary.convergence_depth == 2 and summary.num_classes == 1
    # only the rows that reach no full row are merged, and counted: the global keys seen by half the rows
    g = np.asarray(globals_)
    window_s, window_e = np.maximum(np.arange(n) - 8, 0)[:, None], np.minimum(np.arange(n) + 9, n)[:, None]
    seen = np.where(np.arange(n)[:, None] < n // 2, g[None, :], g[None, :] + 1)  # the other half: the next keys
    starts = np.concatenate([seen, window_s], 1)
    stops = np.concatenate([seen + 1, window_e], 1)
    starts[g], stops[g] = 0, n  # the global tokens' rows: every key
    half = IntervalMask.from_runs(starts, stops, n).with_diagonal()
    a = np.asarray(half.to_dense())
    merged = int((~(a & a.all(axis=1)[None, :]).any(axis=1)).sum())  # rows holding no key of a full row
    assert n // 8 < merged < n // 2
    with (
        _structured.candidate_limit(1e5),
        pytest.raises(_structured.CandidateLimitError, match=f"{merged} rows without"),
    ):
        compose(half, half)
    np.testing.assert_array_equal(compose(half, half).to_dense(), (a.astype(np.float32) @ a.astype(np.float32)) > 0)
    # key-only global tokens: the same 33 runs a row, no full row to reach
    starts = np.concatenate([np.asarray(globals_)[None, :].repeat(n, 0), np.maximum(np.arange(n) - 8, 0)[:, None]], 1)
    stops = np.concatenate([starts[:, :-1] + 1, np.minimum(np.arange(n) + 9, n)[:, None]], 1)
    keys_only = IntervalMask.from_runs(starts, stops, n)
    assert keys_only.num_runs >= 16 and not ((keys_only.starts[:, 0] == 0) & (keys_only.stops[:, 0] == n)).any()
    with _structured.candidate_limit(1e5), pytest.raises(_structured.CandidateLimitError) as err:
        flow_summary(keys_only, method="structured")
    text = str(err.value)
    assert "hold too many runs for a structured" in text and "multiply" not in text, text
    why = predicted_refusal(keys_only, 1e5)  # the refusal found before any product, at A^1: its own rows
    assert why is not None and "would square A^1" in why and "own rows hold too many runs for the first product" in why
    assert "multiply" not in why, why


def test_a_predicted_refusal_counts_only_the_rows_a_squaring_merges():
    """:func:`predicted_refusal` beyond ``A ⊗ A`` counts only the rows that no full row of the squared power reaches
    (bounded through the hull mask ``E ⊇ A``): a hub token ``h`` whose key every row holds, and whose own keys, one in
    ten, each see a block of ten, so that ``h``'s row of ``A²`` is full. ``A²``'s sampled rows hold 8 runs
    (n x 4 x 8 x 8 candidate runs, above the limit; ``A``'s 7 are within it), yet every row holds ``h``, so the
    squaring of ``A²`` merges none and the structured route answers within the limit."""
    from hassejax.order._route_rules import predicted_refusal

    n, h, limit = 60, 31, 1.3e4
    idx = np.arange(n)
    starts = np.full((n, 8), n)
    stops = np.full((n, 8), n)
    starts[:, 0], stops[:, 0] = np.maximum(idx - 1, 0), np.minimum(idx + 2, n)  # a window of radius 1 ...
    starts[:, 1], stops[:, 1] = h, h + 1  # ... and the hub's key
    keys = np.arange(8, n, 10)
    starts[keys, 0], stops[keys, 0] = keys - 8, keys + 2  # the hub's keys see a block of ten
    starts[h, :6], stops[h, :6] = keys, keys + 1  # the hub: one key in ten
    m = IntervalMask.from_runs(starts, stops, n)
    a = np.asarray(m.to_dense()) | np.eye(n, dtype=bool)
    powers = dense_powers(a)
    assert powers[1][h].all() and not a.all(axis=1).any() and len(powers) == 3
    runs = [int((np.diff(np.concatenate([[0], row.astype(np.int8)])) == 1).sum()) for row in powers[1]]
    assert m.with_diagonal().num_runs == 7 and max(runs) == 8
    assert float(n) * 4 * 7**2 < limit < float(n) * 4 * 8**2  # A ⊗ A within the limit; A² ⊗ A² if every row merged
    assert predicted_refusal(m, limit) is None
    with _structured.candidate_limit(limit):  # the squarings, as predicted (L*'s search composes A² with A: 8 x 7)
        table = PowerTable(m.with_diagonal())
        np.testing.assert_array_equal(table.limit().to_dense(), powers[-1])
    assert table.depth() == len(powers)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=interval_masks(max_n=60), depths=st.lists(st.integers(1, 12), min_size=1, max_size=3))
def test_the_column_search_finds_the_rows_of_a_power_that_miss_a_column(case, depths):
    """:class:`_ColumnReach` (the backward search from a few evenly spaced columns that :func:`predicted_refusal` uses
    to find rows a squaring certainly merges) against integer matrix powers: row ``i`` is reported at depth ``t``
    exactly when ``A^t[i, c]`` is False for one of its columns ``c``; depths asked for in any order up to 12 (past
    ``L*`` the powers stay ``R``)."""
    from hassejax.order._route_rules import _ColumnReach

    m, _ = build(case)
    a = m.with_diagonal()
    dense = np.asarray(a.to_dense())
    search = _ColumnReach(a)
    assert search.columns[0] == 0 and search.columns[-1] == a.n - 1
    power = np.eye(a.n, dtype=np.int64)
    powers = [power]
    for _ in range(12):
        powers.append(((powers[-1] @ dense.astype(np.int64)) > 0).astype(np.int64))
    asked = 0
    for t in sorted(depths):  # the search only goes deeper
        want = ~powers[t][:, search.columns].astype(bool).all(axis=1)
        np.testing.assert_array_equal(search.missed(t), want)
        asked = t
    assert search.depth <= asked


def test_a_sink_does_not_hide_a_certain_refusal_from_the_prediction(monkeypatch):
    """A review: ``natten_2d(200, 200, 7, 7) | attention_sinks(40000, 1)`` was refused only after four squarings
    (53 s), since every row holds the sink's key 0 and so every row's hull (:class:`_HullPowers`) starts at 0 and
    soon covers ``[0, n)``: the hull found no row certainly merged. The backward search from a few columns
    (:class:`_ColumnReach`) finds the rows that miss a column. Here at n = 576 with a limit of 5e5 candidate runs: the
    structured route refuses (the prediction is certain), the prediction says so before any product, and without the
    column search it did not (the full-size case is refused in about 1 s now, measured, not asserted)."""
    from hassejax.errors import CandidateLimitError
    from hassejax.order import _route_rules
    from hassejax.order._route_rules import predicted_refusal
    from hassejax.order._structured import candidate_limit

    m = S.natten_2d(24, 24, 3, 3) | S.attention_sinks(576, 1)
    limit = 5e5
    with candidate_limit(limit), pytest.raises(CandidateLimitError):
        PowerTable(m.with_diagonal(), name="mask").limit()
    why = predicted_refusal(m, limit)
    assert why is not None and "found before any product" in why and "multiply" in why, why
    monkeypatch.setattr(_route_rules._ColumnReach, "missed", lambda self, depth: np.zeros(self.n, dtype=bool))
    assert predicted_refusal(m, limit) is None  # the hull alone: no certain refusal


def _hub_and_random_keys(n: int, k: int) -> IntervalMask:
    """Row 0 sees every key, rows 1 .. n-2 see key 0 and `k` random keys, the last row one long run ``[n/2, n)``
    (a review's mask: the rows left after the short-circuit are few, the union table over all rows wide)."""
    rng = np.random.default_rng(0)
    s = np.concatenate([np.zeros((n, 1), np.int64), rng.integers(1, n, (n, k))], 1)
    e = s + 1
    s[0], e[0] = n, n
    s[0, 0], e[0, 0] = 0, n
    s[-1], e[-1] = n, n
    s[-1, 0], e[-1, 0] = n // 2, n
    return IntervalMask.from_runs(s, e, n)


def test_few_rows_left_are_answered_row_by_row_and_a_wide_table_is_refused_as_it_grows(monkeypatch):
    """A review: every row but the last reaches row 0, which is full; the last row, one run over n/2 rows of random
    keys, was counted as 264 candidate runs (n = 8192) while the union table over all rows of the second factor grew
    to 2.9 GB (13.5 s; at n = 20000 a raw MemoryError). The rows left (at most ``_DIRECT_ROWS``) are now answered
    row by row, equal to the dense product; where the table is built, its width counts against the limits level by
    level, and it is refused as it grows."""
    n = 1024
    m = _hub_and_random_keys(n, 16).with_diagonal()
    dense = np.asarray(m.to_dense()).astype(np.float32)
    want = (dense @ dense) > 0
    built = []
    real_table = _structured._union_table
    monkeypatch.setattr(_structured, "_union_table", lambda *a, **k: built.append(1) or real_table(*a, **k))
    with _structured.candidate_limit(2e5):  # the old count: n x 4 x 18 x 18 = 1.3e6
        got = compose(m, m)
    np.testing.assert_array_equal(got.to_dense(), want)
    assert built == []  # row by row, no table
    # a second review: two such rows took the table route again (its first level said nothing of its growth)
    s, e = m.starts.copy(), m.stops.copy()
    s[-3:-1], e[-3:-1] = n, n
    s[-3:-1, 0], e[-3:-1, 0] = 1, n - 8
    two = IntervalMask.from_runs(s, e, n).with_diagonal()
    dense_two = np.asarray(two.to_dense()).astype(np.float32)
    np.testing.assert_array_equal(compose(two, two).to_dense(), (dense_two @ dense_two) > 0)
    assert built == []
    monkeypatch.setattr(_structured, "_DIRECT_ROWS", 0)  # the table route: the same product ...
    np.testing.assert_array_equal(compose(m, m).to_dense(), want)
    assert built == [1]
    import hassejax.masks._runs as runs_module
    from hassejax.errors import MemoryBudgetError

    with monkeypatch.context() as patch:  # ... refused as its levels widen
        patch.setattr(runs_module, "host_memory_bytes", lambda: 64 * 2**20)
        with pytest.raises(MemoryBudgetError, match=r"its union table \(\d+ runs a row at level \d+\)"):
            compose(m, m)
    rows_left = n // 2  # many rows left, each over a wide union: the table's width counts against the limit
    s, e = m.starts.copy(), m.stops.copy()
    s[-rows_left:], e[-rows_left:] = n, n
    s[-rows_left:, 0], e[-rows_left:, 0] = n // 2, n
    many = IntervalMask.from_runs(s, e, n)
    with (
        _structured.candidate_limit(3e5),  # 512 x 4 x 1 x 18 = 3.7e4 at the width of q; the table reaches 270
        pytest.raises(_structured.CandidateLimitError, match="whose union table over .* rows of the second factor"),
    ):
        compose(many, many)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(interval_masks(max_n=40), st.data())
def test_rows_answered_one_by_one_equal_the_dense_product(case, data):
    """The rows left after the short-circuit, answered one by one (:func:`~._structured._union_rows`; at this size
    only with ``_DIRECT_MIN_TABLE`` lowered), in chunks of one or more rows of the second factor, equal the dense
    product."""
    import unittest.mock

    m, dense = build(case)
    other, other_dense = build(data.draw(interval_masks(max_n=40)))
    if other.n != m.n:
        other, other_dense = m, dense
    chunk_bytes = data.draw(st.sampled_from([1, 10_000, _structured._TEMP_BYTES]))  # 1: a row of q at a time
    with (
        unittest.mock.patch.object(_structured, "_DIRECT_MIN_TABLE", 0.0),
        unittest.mock.patch.object(_structured, "_TEMP_BYTES", chunk_bytes),
    ):
        got = compose(m, other)
    want = (dense.astype(np.float32) @ other_dense.astype(np.float32)) > 0
    np.testing.assert_array_equal(got.to_dense(), want)


def test_rows_left_take_the_range_minima_where_those_cost_less(monkeypatch):
    """A review: 256 rows of one run over n/2 rows of a reflexive second factor (its other runs the same key in
    every row) went row by row (9.2 s at n = 2^20) where range minima answer them (0.11 s); they take the minima."""
    n = 4096
    i = np.arange(n)
    s = np.stack([i, np.full(n, n - 1)], 1)
    e = np.stack([i + 1, np.full(n, n)], 1)
    s[:256], e[:256] = (
        np.stack([np.zeros(256), np.full(256, n)], 1),
        np.stack([np.full(256, n // 2), np.full(256, n)], 1),
    )
    s[n // 2 :], e[n // 2 :] = np.stack([np.zeros(n // 2), np.full(n // 2, n)], 1), n  # full rows
    m = IntervalMask.from_runs(s, e, n)
    row_by_row = []
    real = _structured._union_rows
    monkeypatch.setattr(_structured, "_union_rows", lambda *a, **k: row_by_row.append(1) or real(*a, **k))
    monkeypatch.setattr(_structured, "_DIRECT_MIN_TABLE", 0.0)
    dense = np.asarray(m.to_dense()).astype(np.float32)
    np.testing.assert_array_equal(compose(m, m).to_dense(), (dense @ dense) > 0)
    assert row_by_row == []


def test_rows_left_take_a_union_table_that_keeps_the_width_of_q_and_leave_one_that_grows(monkeypatch):
    """A fourth review: 4,096 rows of one run over n/2 rows of a second factor whose other runs differ row by row but
    stay together (``[j + 3, j + 4)``) went row by row (7.6 s at n = 2^16) where the union table keeps q's width
    (0.05 s): the table is built, and left for the rows one by one only once a level grows past twice q's width
    (rows of random keys)."""
    n, rows = 2048, 300
    i = np.arange(n)
    qs, qe = np.stack([i, np.minimum(i + 3, n)], 1), np.stack([i + 1, np.minimum(i + 4, n)], 1)
    qs[0], qe[0] = [0, n], [n, n]  # row 0 full
    q = IntervalMask.from_runs(qs, qe, n)
    ps, pe = np.stack([np.zeros(n, np.int64), np.full(n, n)], 1), np.stack([i + 1, np.full(n, n)], 1)  # reach row 0
    starts = 1 + (np.arange(rows) * 7) % (n // 2 - 1)
    ps[n // 8 : n // 8 + rows, 0], pe[n // 8 : n // 8 + rows, 0] = starts, starts + n // 2  # ... these rows do not
    p = IntervalMask.from_runs(ps, pe, n)
    row_by_row = []
    real = _structured._union_rows
    monkeypatch.setattr(_structured, "_union_rows", lambda *a, **k: row_by_row.append(1) or real(*a, **k))
    want = (np.asarray(p.to_dense()).astype(np.float32) @ np.asarray(q.to_dense()).astype(np.float32)) > 0
    np.testing.assert_array_equal(compose(p, q).to_dense(), want)
    assert row_by_row == []  # the table, at q's width
    rng = np.random.default_rng(0)  # the same rows over a factor of scattered keys: the table grows, rows one by one
    qs = np.concatenate([i[:, None], rng.integers(0, n, (n, 8))], 1)
    qs[0] = 0
    qe = np.where(np.arange(9)[None, :] == 0, i[:, None] + 1, qs + 1)
    qe[0] = n
    q = IntervalMask.from_runs(qs, qe, n)
    want = (np.asarray(p.to_dense()).astype(np.float32) @ np.asarray(q.to_dense()).astype(np.float32)) > 0
    np.testing.assert_array_equal(compose(p, q).to_dense(), want)
    assert row_by_row == [1]
