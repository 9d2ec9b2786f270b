"""Inputs and outputs of the order API and its drawing (flow_summary's JSON, choose_route, HasseDiagram.from_json
and from_reachability, the relation checks, draw_hasse and hasse_layout): each case failed before its fix (a
histogram cut silently, checks skipped or naming the wrong argument, mask wording for a relation, JAX imported to
draw a Hasse diagram)."""

from __future__ import annotations

import json
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from hassejax.errors import MaskError, ParameterError
from hassejax.masks import IntervalMask, from_spec
from hassejax.order import HasseDiagram, classes, convergence_depth, flow_summary, reachability
from hassejax.order.summary import choose_route


def test_flow_summary_json_keeps_the_whole_class_size_histogram():
    s = flow_summary(from_spec(f"document(segments={list(range(1, 101))}, inner='full')", form="intervals"))
    sizes = s.to_dict()["class_sizes"]
    assert s.num_classes == 100
    assert len(sizes["histogram"]) == 100
    assert sum(sizes["histogram"].values()) == s.num_classes
    assert sum(int(v) * c for v, c in sizes["histogram"].items()) == s.n
    json.dumps(s.to_dict())


@pytest.mark.parametrize("mask", [[[True, False], [True, True]], None, np.ones((3, 3))])
@pytest.mark.parametrize("method", ["auto", "matmul", "bitpacked", "structured"])
def test_choose_route_checks_mask_on_every_route(mask, method, no_typecheck):
    if isinstance(mask, list):  # nested lists are taken, as flow_summary takes them
        route, _, _ = choose_route(mask, method)
        assert route in ("structured", "matmul", "bitpacked")
        return
    with pytest.raises(MaskError, match="`mask`"):
        choose_route(mask, method)


def test_from_json_refuses_a_non_string_by_name(no_typecheck):
    with pytest.raises(MaskError, match="`text` must be a JSON string"):
        HasseDiagram.from_json(None)
    d = HasseDiagram.from_mask(np.tril(np.ones((3, 3), bool)))
    assert HasseDiagram.from_json(d.to_json().encode()) == d  # bytes, as json.loads takes them


@pytest.fixture
def diagram():
    return HasseDiagram.from_mask(np.tril(np.ones((3, 3), bool)))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"fontsize": -3}, "`fontsize` must be a positive finite number"),
        ({"fontsize": float("nan")}, "`fontsize` must be a positive finite number"),
        ({"fontsize": 0}, "`fontsize` must be a positive finite number"),
        ({"fontsize": float("inf")}, "`fontsize` must be a positive finite number"),
        ({"class_colors": {0: "notacolor"}}, r"`class_colors`.*'notacolor'"),
        ({"class_colors": ["red", "notacolor", "blue"]}, r"`class_colors`.*'notacolor'"),
        ({"node_color": "notacolor"}, r"`node_color`.*'notacolor'"),
        ({"ax": "ax"}, "`ax` must be a matplotlib Axes"),
    ],
)
def test_draw_hasse_refuses_bad_arguments_by_name(diagram, kwargs, match, no_typecheck):
    from hassejax.plot import draw_hasse

    try:
        with pytest.raises(ParameterError, match=match):
            draw_hasse(diagram, **kwargs)
    finally:
        plt.close("all")


@pytest.mark.parametrize("value", [2, 3, 0, -1])
def test_max_label_chars_is_refused_alike_by_draw_hasse_and_hasse_layout(diagram, value):
    from hassejax.plot import draw_hasse, hasse_figsize, hasse_layout

    for f in (draw_hasse, hasse_layout, hasse_figsize):
        with pytest.raises(MaskError, match="`max_label_chars` must be an int >= 4"):
            f(diagram, max_label_chars=value)
    plt.close("all")


NON_TRANSITIVE = np.array([[1, 0, 0], [1, 1, 0], [0, 1, 1]], bool)


def test_from_reachability_without_check_names_reach():
    with pytest.raises(MaskError, match=r"`reach` must be a preorder.*reach\[2, 1\]") as err:
        HasseDiagram.from_reachability(NON_TRANSITIVE, check=False)
    assert "`order`" not in str(err.value)


def test_from_reachability_without_check_names_a_missing_diagonal_of_reach():
    """A strict order (no diagonal) failed in the quotient's label check: "`labels` ... positions 0 and 0" (a new user)."""
    strict = np.tril(np.ones((3, 3), bool), -1)
    with pytest.raises(MaskError, match=r"`reach` must be a preorder.*not reflexive: reach\[0, 0\] is False") as err:
        HasseDiagram.from_reachability(strict, check=False)
    assert "`labels`" not in str(err.value)


@pytest.mark.parametrize("f", [classes, HasseDiagram.from_reachability])
def test_a_relation_s_errors_use_relation_wording(f, no_typecheck):
    for bad in (np.ones((2, 3), bool), np.ones((2, 2), int)):
        with pytest.raises(MaskError, match="`reach`") as err:
            f(bad)
        text = str(err.value)
        assert "may attend" not in text and "self-attention" not in text, text
    with pytest.raises(MaskError, match="may attend"):  # a mask keeps the mask wording
        HasseDiagram.from_mask(np.ones((2, 2), int))


def test_drawing_a_hasse_diagram_imports_no_jax():
    code = (
        "import sys, matplotlib; matplotlib.use('Agg')\n"
        "from hassejax.plot import draw_hasse, hasse_crossings, hasse_figsize, hasse_layout, figsize, paper_style\n"
        "import hassejax.plot\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib', 'equinox', 'diffrax'))[:5])\n"
        "names = [n for n in hassejax.plot.__all__ if not hasattr(hassejax.plot, n)]\n"
        "print(names, 'dynamics' in dir(hassejax.plot))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["[]", "[] True"], proc.stdout


def _sparse_and_masked():
    import scipy.sparse as sp

    causal = np.tril(np.ones((4, 4), bool))
    masked = np.ma.masked_array(np.ones((4, 4), bool), mask=~causal)  # reads as full attention through .data
    return [sp.csr_matrix(causal), sp.csr_array(causal), sp.coo_matrix(causal), masked]


@pytest.mark.parametrize("mask", _sparse_and_masked(), ids=["csr_matrix", "csr_array", "coo_matrix", "masked"])
@pytest.mark.parametrize(
    "call",
    [
        reachability,
        convergence_depth,
        flow_summary,
        HasseDiagram.from_mask,
        IntervalMask.from_dense,
        lambda m: flow_summary([m, m], head_axis=0),
    ],
    ids=["reachability", "convergence_depth", "flow_summary", "from_mask", "from_dense", "heads"],
)
def test_sparse_and_masked_arrays_are_refused_by_name(mask, call, no_typecheck):
    """A fresh user: a SciPy sparse mask raised NumPy's ValueError or IndexError (``np.asarray`` reads it as a 0-d
    object array), and ``flow_summary`` of a NumPy masked causal mask answered for full attention (9 pairs at n = 3)
    reading ``.data``; now one MaskError naming the argument and the conversion."""
    with pytest.raises(MaskError, match=r"`mask(\[0\])?` must be a Boolean array of shape \(n, n\); got a "):
        call(mask)
    want = "toarray()" if not isinstance(mask, np.ma.MaskedArray) else "filled(False)"
    with pytest.raises(MaskError) as err:
        call(mask)
    assert want in str(err.value)


@pytest.mark.parametrize("members", [[1.9, 3.2], [0.5], ["1", 2], [-3, -2], [True], np.array([1.0])])
def test_format_class_refuses_positions_that_are_not_integers_at_least_zero(members, no_typecheck):
    """A fresh user: ``format_class([1.9, 3.2, 2.0])`` wrote ``{1..3}`` (``int`` truncated), strings and negative
    positions were written as positions."""
    from hassejax.order import format_class

    with pytest.raises(MaskError, match=r"`members` must be positions, integers >= 0; got "):
        format_class(members)


def test_format_class_takes_numpy_and_jax_integers():
    import jax.numpy as jnp

    from hassejax.order import format_class

    assert format_class(jnp.array([3, 1, 2, 0])) == "{0..3}"
    assert format_class(np.array([9, 5, 6], np.int16)) == "{5, 6, 9}"


@pytest.mark.parametrize("check", ["no", None, 1, 0.0])
def test_the_check_flag_must_be_a_bool(check, no_typecheck):
    """A fresh user: ``classes(r, check="no")`` ran the check (a truthy string) and ``check=None`` skipped it."""
    reach = np.eye(3, dtype=bool)
    with pytest.raises(ParameterError, match=r"`check` must be True or False; got "):
        classes(reach, check=check)
    with pytest.raises(ParameterError, match=r"`check` must be True or False; got "):
        HasseDiagram.from_reachability(reach, check=check)
    assert classes(reach, check=np.bool_(False))[1] == 3


def test_lists_of_masked_arrays_are_refused_at_any_depth(no_typecheck):
    """A review: ``np.asarray`` of a list of masked arrays drops their masks, so ``convergence_depth([ma, ma])`` gave
    ``[1 1]`` (full attention) for a band of depth 3, and ``heads_union([[ma, ma]], head_axis=1)`` was all True."""
    from hassejax.order import heads_union

    band = np.tri(4, dtype=bool) & ~np.tri(4, k=-2, dtype=bool)
    ma = np.ma.masked_array(np.ones((4, 4), bool), mask=~band)
    assert int(convergence_depth(band)) == 3
    for call, where in (
        (lambda: convergence_depth([ma, ma]), r"`mask\[0\]`"),
        (lambda: reachability([ma, ma], num_layers=1), r"`mask\[0\]`"),
        (lambda: heads_union([[ma, ma]], head_axis=1), r"`mask\[0\]\[0\]`"),
        (lambda: flow_summary([[band.tolist(), ma]], head_axis=0), r"`mask\[0\]\[1\]`"),
    ):
        with pytest.raises(MaskError, match=where + r" must be a Boolean array of shape \(n, n\); got a NumPy masked"):
            call()
    # nested lists of bools are still read (one scalar a row is looked at)
    assert int(convergence_depth([band.tolist(), band.tolist()])[1]) == 3


def test_rows_of_zero_dimensional_arrays_are_read_and_a_masked_one_in_front_is_named(no_typecheck):
    """A review: rows of 0-d arrays were scanned element by element (1.85 s at 512 x 512); a level whose first
    element is a 0-d array is a row of scalars, unless that element is a masked array."""
    from hassejax._mask_checks import check_mask

    rows = [[np.array(q >= k) for k in range(6)] for q in range(6)]
    np.testing.assert_array_equal(check_mask(rows), np.tri(6, dtype=bool))
    hidden = np.ma.masked_array(True, mask=True)
    with pytest.raises(MaskError, match=r"`mask\[0\]\[0\]` must be a Boolean array of shape \(n, n\); got a NumPy"):
        check_mask([[hidden, True], [True, True]])
