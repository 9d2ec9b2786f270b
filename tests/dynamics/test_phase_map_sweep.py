"""The softmax phase-map sweep (hassejax.dynamics.phase_map), the figure-7 draws (hassejax.dynamics.figure7)
and the figure helpers of hassejax.plot used by the phase maps, event times and masked particles (spec §7)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from hassejax.dynamics import Status
from hassejax.dynamics import phase_map as pm
from hassejax.dynamics.diagnostics import Outcome
from hassejax.dynamics.figure7 import parameter_sets
from hassejax.errors import ParameterError
from hassejax.plot import break_wraps, draw_hatched, draw_outcome_map, log_bins


def test_family_and_rotation():
    np.testing.assert_array_equal(np.asarray(pm.family_A(0.7)), [[0.7, 1.0], [0.0, -1.0]])
    for phi in [0.0, 0.3, np.pi / 2, np.pi]:
        R = np.asarray(pm.rotation(phi))
        np.testing.assert_allclose(R.T @ R, np.eye(2), atol=1e-15)
        np.testing.assert_allclose(np.linalg.det(R), 1.0)
        np.testing.assert_allclose(R @ [1.0, 0.0], [np.cos(phi), np.sin(phi)], atol=1e-15)


def test_closed_form_map_against_explicit_formula():
    # A + Aᵀ = [[2a, 1], [1, −2]]: λ_max = (a − 1) + √((a + 1)² + 1); Σ0 = I/2 ⇒ t* = 2/(v λ_max) when positive.
    v = np.array([[1.0, 2.0, -1.0], [0.5, 0.0, 1.5]])
    a = np.array([[0.0, 1.0, -2.0], [-3.0, 0.5, -0.1]])
    t_star, lam = pm.closed_form_map(v, a)
    s_max = (a - 1) + np.sqrt((a + 1) ** 2 + 1)
    s_min = (a - 1) - np.sqrt((a + 1) ** 2 + 1)
    lam_want = np.where(v >= 0, v * s_max, v * s_min)
    np.testing.assert_allclose(lam, lam_want, rtol=1e-12, atol=1e-14)
    t_want = np.where(lam_want > 0, 2.0 / np.where(lam_want > 0, lam_want, 1.0), np.inf)
    np.testing.assert_allclose(t_star, t_want, rtol=1e-12)


def test_column_major_round_trip_and_order():
    x, a = pm.grid(4, (0.0, 3.0), (-1.0, 1.0))
    assert np.all(np.diff(x, axis=1) > 0) and np.all(np.diff(a, axis=0) > 0)
    flat = pm.column_major(x)
    np.testing.assert_array_equal(flat[:4], x[0, 0])  # one column (one x value) first
    np.testing.assert_array_equal(pm.to_image(flat, 4), x)
    np.testing.assert_array_equal(pm.to_image(pm.column_major(a), 4), a)


def test_member_sweep_matches_closed_form_blowup_time():
    """Five members of map (a) and one of map (b) at φ = 0 (V = I) in one vmapped sweep, against the closed form."""
    v = np.array([1.0, -1.0, 0.5, 1.0, 2.0])
    a = np.array([1.0, 0.0, -2.0, 2.5, -0.1])
    batch = pm.batch_scalar_v(v, a)
    rot = pm.batch_rotation(np.array([0.0]), np.array([1.0]), t1=pm.T1_A)
    out = pm.sweep_with_retry({k: np.concatenate([batch[k], rot[k]]) for k in batch}, "test")
    assert not out["retried"].any()
    t_star = pm.column_major(pm.closed_form_map(v, a)[0])
    blow = np.isfinite(t_star) & (t_star <= pm.T1_A)
    np.testing.assert_array_equal(out["status"][:5] == Status.blow_up, blow)
    np.testing.assert_array_equal(out["outcome"][:5] == Outcome.blow_up, blow)
    np.testing.assert_allclose(out["t_blowup"][:5][blow], t_star[blow], rtol=1e-6)
    assert out["outcome"][2] == Outcome.contracts  # v > 0, a < −1/4: A + Aᵀ ≺ 0, Σ → 0
    # the rotation member at φ = 0 is V = I, a = 1: the first member
    np.testing.assert_allclose(out["t_blowup"][5], out["t_blowup"][0], rtol=1e-12)


def test_held_run_sweep_traces_once_and_equals_the_plain_sweep():
    """``run_sweep(..., held=True)``: one Sweep per member function and width, traced at its first call only, with the
    results of the plain (per-call) sweep."""
    traces = []

    def member(p):
        traces.append(1)
        return pm.member(p)

    batch = pm.batch_scalar_v(np.array([1.0, -1.0, 0.5, 2.0]), np.array([1.0, 0.0, -2.0, -0.1]))
    plain = pm.run_sweep(member, batch, "test", chunk_size=8)
    traces.clear()
    first = pm.run_sweep(member, batch, "test", chunk_size=8, held=True)
    second = pm.run_sweep(member, {k: v[::-1] for k, v in batch.items()}, "test", chunk_size=8, held=True)
    assert len(traces) == 1  # the second call ran the held program
    for k in plain:
        np.testing.assert_array_equal(first[k], plain[k], err_msg=k)
        np.testing.assert_array_equal(second[k], plain[k][::-1], err_msg=k)


def test_figure_7_parameter_sets_are_the_authors_draws(no_typecheck):
    members = parameter_sets("softmax", 3)
    np.random.seed(40)  # the authors' code, verbatim order  # noqa: NPY002 (the authors' legacy global stream, verbatim)
    dims = np.repeat([3, 4, 5], 100)
    Q_list = [np.random.randn(d // 2, d) for d in dims]  # noqa: NPY002 (the authors' legacy global stream, verbatim)
    np.random.seed(26)  # noqa: NPY002 (the authors' legacy global stream, verbatim)
    V_list = [np.random.randn(d, d) for d in dims]  # noqa: NPY002 (the authors' legacy global stream, verbatim)
    first = {}
    for d in [3, 4, 5]:
        np.random.seed(41)  # noqa: NPY002 (the authors' legacy global stream, verbatim)
        first[d] = [np.random.randn(d, d) for _ in range(3)]  # noqa: NPY002 (the authors' legacy global stream, verbatim)
    by = {(m["row"], m["d"], m["index"]): m for m in members}
    assert len(members) == 2 * 3 * 3
    for j, d in enumerate([3, 4, 5]):
        for i in range(3):
            m = by[("V random SPD", d, i)]
            np.testing.assert_array_equal(m["Q"], Q_list[100 * j + i])
            np.testing.assert_array_equal(m["V"], V_list[100 * j + i].T @ V_list[100 * j + i])
            np.testing.assert_array_equal(m["Sigma0"], first[d][i] @ first[d][i].T)
            np.testing.assert_array_equal(by[("V = I", d, i)]["V"], np.eye(d))
    with pytest.raises(ParameterError, match=r"`per_dim` must be an integer in 1\.\.100"):
        parameter_sets("softmax", 101)
    with pytest.raises(ParameterError, match="`kind` must be 'softmax' or 'l2'"):
        parameter_sets("sigmoid", 3)


def test_log_bins():
    samples = [np.array([3e-11, 2e-9]), np.array([0.0, 5e-7])]
    bins = log_bins(*samples)
    assert bins[0] <= 1e-17 and bins[-1] >= 5e-7 and np.all(np.diff(bins) > 0)
    one = log_bins(np.array([2e-9]))
    assert one[0] <= 2e-9 <= one[-1] and len(one) >= 2
    np.testing.assert_allclose(log_bins(np.array([2e-3, 0.5]), per_decade=2), np.logspace(-3, 0, 7))


def test_break_wraps():
    t = np.arange(5.0)
    th = np.array([170.0, 178.0, -179.0, -170.0, -160.0])
    tt, hh = break_wraps(t, th)
    assert np.isnan(tt).sum() == 1 and np.isnan(hh[2]) and np.isnan(tt[2])  # between 178° and −179°
    np.testing.assert_array_equal(hh[[0, 1, 3, 4, 5]], th)
    tt2, hh2 = break_wraps(t, np.array([0.0, 10.0, 20.0, 10.0, 0.0]))
    assert not np.isnan(hh2).any() and len(tt2) == 5


def test_draw_outcome_map_colours_counts_and_errors(no_typecheck):
    fig, ax = plt.subplots()
    codes = np.array([[Outcome.blow_up, Outcome.stalled], [Outcome.contracts, Outcome.blow_up]])
    labels = {
        Outcome.blow_up: "blow-up",
        Outcome.contracts: "contracts",
        Outcome.stalled: "stalled",
        Outcome.grows: "grows",
    }
    handles = draw_outcome_map(ax, codes, (0, 1, 0, 1), labels, notes={Outcome.stalled: "not decided"})
    assert [h.get_label() for h in handles] == ["blow-up: 2", "contracts: 1", "stalled: 1 (not decided)"]
    image = ax.get_images()[0]
    rgba = image.cmap(image.norm(codes))
    from hassejax.plot.style import OUTCOME_PALETTE

    # blow-up in the outcome palette's colour, whatever the code
    np.testing.assert_allclose(rgba[0, 0], matplotlib.colors.to_rgba(OUTCOME_PALETTE["blow_up"]))
    x, y = np.meshgrid(np.arange(2.0), np.arange(2.0))
    assert draw_hatched(ax, x, y, codes == Outcome.blow_up, "rule ≠ solve").get_hatch() == "///"
    with pytest.raises(ParameterError, match=r"`labels` must name every outcome in `codes`; missing \['stalled'\]"):
        draw_outcome_map(ax, codes, (0, 1, 0, 1), {Outcome.blow_up: "b", Outcome.contracts: "c"})
    plt.close(fig)
