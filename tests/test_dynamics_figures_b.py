"""Fast checks of the helpers behind the "beyond the paper" dynamics figures 8–14 (spec dynamics.md §7b).

The full runs check their own numbers into their JSON (closed forms, spec check values);
here: the helper logic of each script against independent computations (NumPy/SciPy
eigenvalues, explicit formulas, the library's closed forms), and one tiny vmapped sweep of
the phase-map member against the closed-form blow-up time.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))

import covariance_ellipses as fig8  # noqa: E402
import energies as fig13  # noqa: E402
import event_time_accuracy as fig11  # noqa: E402
import lambda_max_growth as fig9  # noqa: E402
import masked_particles as fig14  # noqa: E402
import mean_field as fig12  # noqa: E402
import phase_maps as fig10  # noqa: E402

from hassejax.dynamics import Status, blowup_time_closed_form, softmax_covariance_closed_form  # noqa: E402


# ----------------------------------------------------------------------------- figure 10: phase maps
def test_family_and_rotation():
    A = np.asarray(fig10.family_A(0.7))
    np.testing.assert_array_equal(A, [[0.7, 1.0], [0.0, -1.0]])
    for phi in [0.0, 0.3, np.pi / 2, np.pi]:
        R = np.asarray(fig10.rotation(phi))
        np.testing.assert_allclose(R.T @ R, np.eye(2), atol=1e-15)
        np.testing.assert_allclose(np.linalg.det(R), 1.0)
        np.testing.assert_allclose(R @ [1.0, 0.0], [np.cos(phi), np.sin(phi)], atol=1e-15)


def test_naive_rule_matches_scipy_and_is_exact_for_scalar_v():
    rng = np.random.default_rng(0)
    V, A = rng.normal(size=(20, 2, 2)), rng.normal(size=(20, 2, 2))
    want = [scipy.linalg.eigvalsh(v @ a + a.T @ v.T)[-1] for v, a in zip(V, A)]
    np.testing.assert_allclose(fig10.naive_rule(V, A), want, rtol=1e-12, atol=1e-14)
    # V = vI: the rule's sign is the closed form's blow-up criterion (spec §3)
    for v, a in [(1.0, 0.0), (1.0, -1.0), (-0.5, 2.0), (0.3, -0.2), (0.3, -0.3)]:
        A1 = np.asarray(fig10.family_A(a))
        rule = fig10.naive_rule(v * np.eye(2), A1)
        t_star = float(blowup_time_closed_form(fig10.SIGMA0, A1, v))
        assert (rule > 0) == np.isfinite(t_star)


def test_closed_form_map_against_explicit_formula():
    # A + Aᵀ = [[2a, 1], [1, −2]]: λ_max = (a − 1) + √((a + 1)² + 1); Σ0 = I/2 ⇒ t* = 2/(v λ_max) when positive.
    v = np.array([[1.0, 2.0, -1.0], [0.5, 0.0, 1.5]])
    a = np.array([[0.0, 1.0, -2.0], [-3.0, 0.5, -0.1]])
    t_star, lam = fig10.closed_form_map(v, a)
    s_max = (a - 1) + np.sqrt((a + 1) ** 2 + 1)
    s_min = (a - 1) - np.sqrt((a + 1) ** 2 + 1)
    lam_want = np.where(v >= 0, v * s_max, v * s_min)
    np.testing.assert_allclose(lam, lam_want, rtol=1e-12, atol=1e-14)
    t_want = np.where(lam_want > 0, 2.0 / np.where(lam_want > 0, lam_want, 1.0), np.inf)
    np.testing.assert_allclose(t_star, t_want, rtol=1e-12)


def test_outcome_codes_each_category():
    S = Status
    status = np.array([S.blow_up, S.diverge, S.completed, S.completed, S.completed, S.completed, S.max_steps_reached,
                       S.max_steps_reached, S.non_finite, S.converged])
    lam = np.array([1e6, 1e6, 10.0, 1.0, 0.1, 2.0, 5e3, 5e3, 1.0, 3.0])
    rate = np.array([0.0, 0.0, 1e-6, 0.0, -0.01, 1.0, 1e-7, 100.0, 0.0, 1e-9])
    rank = np.array([2, 2, 1, 2, 2, 2, 1, 1, 2, 1])
    got = fig10.outcome_codes(status, lam, rate, rank)
    want = [fig10.BLOW_UP, fig10.ESCAPE, fig10.SETTLES_RANK_ONE, fig10.SETTLES_FULL, fig10.CONTRACTS, fig10.GROWS,
            fig10.STALLED_RANK_ONE, fig10.UNDETERMINED, fig10.UNDETERMINED, fig10.SETTLES_RANK_ONE]
    np.testing.assert_array_equal(got, want)
    assert len(fig10.OUTCOMES) == len(fig10.COLORS)


def test_column_major_round_trip_and_order():
    x, a = fig10.grid(4, (0.0, 3.0), (-1.0, 1.0))
    assert np.all(np.diff(x, axis=1) > 0) and np.all(np.diff(a, axis=0) > 0)
    flat = fig10.column_major(x)
    np.testing.assert_array_equal(flat[:4], x[0, 0])  # one column (one x value) first
    np.testing.assert_array_equal(fig10.to_image(flat, 4), x)
    np.testing.assert_array_equal(fig10.to_image(fig10.column_major(a), 4), a)


def test_member_sweep_matches_closed_form_blowup_time():
    """Five members of map (a) and one of map (b) at φ = 0 (V = I) in one vmapped sweep, against the closed form."""
    v = np.array([1.0, -1.0, 0.5, 1.0, 2.0])
    a = np.array([1.0, 0.0, -2.0, 2.5, -0.1])
    batch = fig10.batch_scalar_v(v, a)
    rot = fig10.batch_rotation(np.array([0.0]), np.array([1.0]), t1=fig10.T1_A)
    out = fig10.sweep_with_retry({k: np.concatenate([batch[k], rot[k]]) for k in batch}, "test")
    assert not out["retried"].any()
    t_star = fig10.column_major(fig10.closed_form_map(v, a)[0])
    blow = np.isfinite(t_star) & (t_star <= fig10.T1_A)
    np.testing.assert_array_equal(out["status"][:5] == Status.blow_up, blow)
    np.testing.assert_allclose(out["t_blowup"][:5][blow], t_star[blow], rtol=1e-6)
    codes = fig10.outcome_codes(out["status"], out["lam_max"], out["rate"], out["rank_rel"])
    assert codes[2] == fig10.CONTRACTS  # v > 0, a < −1/4: A + Aᵀ ≺ 0, Σ → 0
    # the rotation member at φ = 0 is V = I, a = 1: the first member
    np.testing.assert_allclose(out["t_blowup"][5], out["t_blowup"][0], rtol=1e-12)


# ----------------------------------------------------------------------------- figure 8: ellipses
@settings(max_examples=25)
@given(seed=st.integers(0, 2**31 - 1), n_half=st.sampled_from([2, 5, 16]), c=st.floats(-0.9, 0.9), s1=st.floats(0.05, 3.0), s2=st.floats(0.05, 3.0))
def test_antithetic_sample_has_exact_moments(seed, n_half, c, s1, s2):
    cov = np.array([[s1, c * np.sqrt(s1 * s2)], [c * np.sqrt(s1 * s2), s2]])
    mean = np.array([0.3, -1.0])
    x = fig8.antithetic_sample(jax.random.key(seed), mean, cov, 2 * n_half)
    assert x.shape == (2 * n_half, 2)
    np.testing.assert_allclose(x.mean(0), mean, atol=1e-12)
    xc = x - mean
    np.testing.assert_allclose(xc.T @ xc / len(x), cov, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(xc[:n_half], -xc[n_half:], atol=1e-12)  # pairs ±z


def test_antithetic_sample_rejects_odd_n():
    with pytest.raises(ValueError, match="even"):
        fig8.antithetic_sample(jax.random.key(0), np.zeros(2), np.eye(2), 5)


@settings(max_examples=25)
@given(c=st.floats(-0.95, 0.95), s1=st.floats(0.01, 5.0), s2=st.floats(0.01, 5.0), k=st.floats(0.5, 3.0))
def test_ellipse_points_lie_on_the_quadric(c, s1, s2, k):
    cov = np.array([[s1, c * np.sqrt(s1 * s2)], [c * np.sqrt(s1 * s2), s2]])
    mean = np.array([1.0, -2.0])
    pts = fig8.ellipse(mean, cov, k=k, m=50) - mean
    q = np.einsum("ni,ij,nj->n", pts, np.linalg.inv(cov), pts)
    np.testing.assert_allclose(q, k**2, rtol=1e-7)


def test_ellipse_of_rank_one_is_a_segment_and_rel_frobenius():
    u = np.array([0.6, 0.8])
    pts = fig8.ellipse(np.zeros(2), 4.0 * np.outer(u, u), k=1.0)
    # on the line through u, up to the width sqrt(eps·‖Σ‖) of the round-off eigenvalue of 4uuᵀ
    np.testing.assert_allclose(pts[:, 0] * u[1] - pts[:, 1] * u[0], 0.0, atol=1e-7)
    assert 2.0 * np.cos(np.pi / 199) <= np.max(pts @ u) <= 2.0 + 1e-12  # 200 points: the extreme up to the grid spacing
    b = np.array([[3.0, 0.0], [0.0, 4.0]])
    assert fig8.rel_frobenius(b + np.array([[0.0, 0.5], [0.0, 0.0]]), b) == pytest.approx(0.1)


def test_cases_use_the_paper_scaling():
    cases = fig8.cases()
    q = fig8.dc.FIG2_Q_ROW
    np.testing.assert_allclose(cases["contraction (item 2)"]["params"]["A"], -np.outer(q, q) / np.sqrt(2))
    A5 = cases["blow-up (item 5)"]["params"]["A"]
    assert float(blowup_time_closed_form(fig8.SIGMA0_BLOWUP, A5, 1.0)) == pytest.approx(0.70234, abs=5e-6)  # spec §7a item 5


# ----------------------------------------------------------------------------- figure 9: λ_max growth
def test_inverse_lambda_is_the_closed_form():
    A = np.asarray(fig9.item5_params()["softmax"].A)
    t_star = float(blowup_time_closed_form(fig9.SIGMA0, A, 1.0))
    t = np.linspace(0.0, 0.99 * t_star, 7)
    cov = np.asarray(softmax_covariance_closed_form(np.broadcast_to(fig9.SIGMA0, (7, 2, 2)), A, 1.0, t))
    np.testing.assert_allclose(fig9.softmax_inverse_lambda(t, A), 1.0 / np.linalg.eigvalsh(cov)[:, -1], rtol=1e-9)
    assert fig9.softmax_inverse_lambda(np.array([t_star]), A)[0] == pytest.approx(0.0, abs=1e-12)


def test_save_times():
    ts = fig9.save_times(0.7, 40.0, 11, 8)
    assert ts[0] == 0.0 and ts[-1] == 40.0 and np.all(np.diff(ts) > 0)
    assert np.max(ts[ts < 0.7]) == pytest.approx(0.7 * (1 - 1e-7))


def test_item5_params_scalings():
    p = fig9.item5_params()
    Q, K = fig9.dc.FIG5_Q, fig9.dc.FIG5_K
    np.testing.assert_allclose(p["softmax"].A, K.T @ Q / np.sqrt(2))
    np.testing.assert_allclose(p["l2"].interaction(), K.T @ Q / np.sqrt(2))
    np.testing.assert_allclose(p["sinkhorn"].A, K.T @ Q)


# ----------------------------------------------------------------------------- figure 11: event times
def test_relative_errors_and_log_bins():
    np.testing.assert_allclose(fig11.relative_errors([1.1, 2.0], [1.0, 2.0]), [0.1, 0.0], atol=1e-15)
    samples = [np.array([3e-11, 2e-9]), np.array([0.0, 5e-7])]
    bins = fig11.log_bins(*samples)
    assert bins[0] <= 1e-17 and bins[-1] >= 5e-7 and np.all(np.diff(bins) > 0)
    one = fig11.log_bins(np.array([2e-9]))
    assert one[0] <= 2e-9 <= one[-1] and len(one) >= 2


# ----------------------------------------------------------------------------- figure 12: mean field
@given(slope=st.floats(-2.0, 1.0), scale=st.floats(1e-3, 1e3))
def test_loglog_fit_recovers_a_power_law(slope, scale):
    n = np.array([64, 128, 256, 512, 1024])
    s, c = fig12.loglog_fit(n, scale * n**slope)
    assert s == pytest.approx(slope, abs=1e-9)
    assert np.exp(c) == pytest.approx(scale, rel=1e-8)


def test_bootstrap_slope_and_seed_counts():
    sizes = np.array([64, 256, 1024])
    exact = [np.full(7, 3.0 * n**-0.5) for n in sizes]  # no spread between seeds: the interval is the slope
    lo, hi = fig12.bootstrap_slope(sizes, exact, np.random.default_rng(0), reps=50)
    assert lo == pytest.approx(-0.5) and hi == pytest.approx(-0.5)
    rng = np.random.default_rng(1)
    noisy = [n**-0.5 * np.abs(rng.normal(size=40)) for n in sizes]
    lo, hi = fig12.bootstrap_slope(sizes, noisy, rng, reps=200)
    assert lo < fig12.loglog_fit(sizes, [fig12.rms(e) for e in noisy])[0] < hi
    for n in fig12.SIZES_FULL:
        assert fig12.seeds_for(n) >= 5 and fig12.chunk_for(n) >= 1  # the spec asks >= 5 seeds per n
    assert fig12.seeds_for(64) == 64 and fig12.seeds_for(4096) == 5


def test_rms():
    np.testing.assert_allclose(fig12.rms(np.array([[3.0, 4.0], [1.0, 1.0]])), [np.sqrt(12.5), 1.0])


# ----------------------------------------------------------------------------- figure 13: energies
def test_max_increase_and_spec_check():
    assert fig13.max_increase(np.array([3.0, 2.0, 2.5, 1.0])) == pytest.approx(0.5)
    assert fig13.max_increase(np.array([3.0, 2.0, 1.0])) == pytest.approx(-1.0)
    ts = np.linspace(0.0, 3.0, 61)
    values = np.interp(ts, fig13.SPEC_TIMES, fig13.SPEC_VALUES)
    diff, ok = fig13.spec_check(ts, values)
    np.testing.assert_allclose(diff, 0.0, atol=1e-15)
    assert ok.all()
    # the Gaussian values to 9 digits (0.501783904, ..., 4.35068e-5) round to the printed ones; one digit off does not
    full = np.array([0.501783904, 0.422211231, 0.348323549, 0.244050170, 0.108951709, 0.0137615388, 4.35068431e-05])
    vals = values.copy()
    vals[::10] = full
    assert fig13.spec_check(ts, vals)[1].all()
    vals[0] += 1e-5
    assert not fig13.spec_check(ts, vals)[1][0]
    with pytest.raises(ValueError, match="save times"):
        fig13.spec_check(np.linspace(0.0, 3.0, 7) * 0.9, values[:7])


# ----------------------------------------------------------------------------- figure 14: masked particles
def test_angles_and_break_wraps():
    x = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 1e-12], [-1.0, -1e-12]])
    np.testing.assert_allclose(fig14.angles_deg(x), [0.0, 90.0, 180.0, -180.0], atol=1e-9)
    t = np.arange(5.0)
    th = np.array([170.0, 178.0, -179.0, -170.0, -160.0])
    tt, hh = fig14.break_wraps(t, th)
    assert np.isnan(tt).sum() == 1 and np.isnan(hh[2]) and np.isnan(tt[2])  # between 178° and −179°
    np.testing.assert_array_equal(hh[[0, 1, 3, 4, 5]], th)
    tt2, hh2 = fig14.break_wraps(t, np.array([0.0, 10.0, 20.0, 10.0, 0.0]))
    assert not np.isnan(hh2).any() and len(tt2) == 5


def test_masked_model():
    p = fig14.model(True)
    assert p.n == fig14.N and p.kind == "softmax"
    mask = np.asarray(p.mask)
    np.testing.assert_array_equal(mask, np.tril(np.ones((fig14.N, fig14.N), bool)))
    np.testing.assert_array_equal(np.asarray(p.sink), [1.0, 0.0])
    assert fig14.model(False).sink is None
    np.testing.assert_array_equal(np.asarray(p.base.interaction()), np.eye(2))
