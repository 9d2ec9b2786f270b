"""Closed forms of softmax with V = v(t)I, v piecewise constant, against SciPy (quad, solve_ivp)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import quad, solve_ivp

from hassejax.dynamics import PiecewiseConstant
from hassejax.dynamics.time_dependent import scalar_schedule_blowup_time, scalar_schedule_covariance, schedule_integral
from hassejax.errors import ParameterError

A = np.array([[0.3, 0.8], [-0.2, -0.6]])
SIGMA0 = np.array([[0.7, 0.2], [0.2, 0.4]])
VALUES, EDGES = np.array([1.0, -0.5, 2.0, 0.25]), np.array([-1.0, 0.4, 1.1, 1.5, 3.0])
V = PiecewiseConstant(VALUES, EDGES)


def _v(t):
    """The schedule re-typed in NumPy: values[l] on [e_l, e_{l+1}), the first/last value outside."""
    return float(VALUES[np.clip(np.searchsorted(EDGES, t, side="right") - 1, 0, VALUES.size - 1)])


def _rhs(t, y):
    s = y.reshape(2, 2)
    return (_v(t) * (s @ A @ s + s @ A.T @ s)).ravel()  # Σ' = VΣAΣ + ΣAᵀΣVᵀ, V = v(t)I (spec §3)


def test_integral_against_quad():
    for t in (0.2, 0.4, 1.3, 2.0, 5.0):
        exact = sum(quad(_v, a, b)[0] for a, b in zip([0.0, 0.4, 1.1, 1.5], [0.4, 1.1, 1.5, np.inf]) if a < t
                    for b in [min(b, t)])  # fmt: skip
        assert schedule_integral(V, t) == pytest.approx(exact, abs=1e-12)


def test_covariance_and_blowup_against_solve_ivp():
    t_star = scalar_schedule_blowup_time(SIGMA0, A, V)
    assert 1.5 < t_star < np.inf  # the schedule is built to blow up in its last layer
    ts = np.array([0.3, 0.9, 1.3, 0.95 * t_star])
    sol = solve_ivp(_rhs, [0, ts[-1]], SIGMA0.ravel(), t_eval=ts, rtol=1e-12, atol=1e-13,
                    first_step=1e-4, max_step=0.05)  # fmt: skip
    np.testing.assert_allclose(scalar_schedule_covariance(SIGMA0, A, V, ts), sol.y.T.reshape(-1, 2, 2), rtol=1e-7)
    ev = lambda t, y: np.trace(y.reshape(2, 2)) - 1e8
    ev.terminal = True
    blow = solve_ivp(_rhs, [0, 10.0], SIGMA0.ravel(), events=ev, rtol=1e-12, atol=1e-12, max_step=0.05)
    assert blow.t_events[0][0] == pytest.approx(t_star, rel=1e-6)
    assert np.all(np.isinf(scalar_schedule_covariance(SIGMA0, A, V, [t_star * 1.01])))


def test_no_blowup_when_the_integral_stays_small():
    # v = +1, −1 alternating (period 1): w ∈ [0, 1/2] never reaches 1/λ_max
    alt = PiecewiseConstant(np.tile([1.0, -1.0], 6), np.arange(13) / 2)
    lam = np.linalg.eigvalsh(np.linalg.cholesky(SIGMA0).T @ (A + A.T) @ np.linalg.cholesky(SIGMA0))
    assert 0.5 * lam[-1] < 1 and 0.5 * lam[0] < 1
    # periodic while it alternates; the last value (−1) then holds for ever and w → −inf meets 1/λ_min < 0
    assert scalar_schedule_blowup_time(SIGMA0, A, alt) == pytest.approx(6.0 + (1.0 / lam[0]) / -1.0)
    np.testing.assert_allclose(scalar_schedule_covariance(SIGMA0, A, alt, [1.0, 2.0]), [SIGMA0, SIGMA0], atol=1e-12)


def test_errors(no_typecheck):
    with pytest.raises(ParameterError, match="scalar"):
        schedule_integral(PiecewiseConstant(np.ones((2, 2, 2))), 1.0)
    with pytest.raises(ParameterError, match=">= 0"):
        schedule_integral(V, -1.0)
    with pytest.raises(ParameterError, match="semidefinite"):
        scalar_schedule_blowup_time(-np.eye(2), A, V)
