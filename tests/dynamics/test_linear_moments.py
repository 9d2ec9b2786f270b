"""Linear attention's moment closed forms against SciPy's solve_ivp of the NumPy moment ODE."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from hassejax.dynamics.linear_moments import linear_blowup_time, linear_second_moment_closed_form
from hassejax.errors import ParameterError

A = np.array([[0.4, 0.7], [-0.3, -0.9]])
ALPHA0 = np.array([0.8, -0.5])
SIGMA0 = np.array([[0.6, 0.2], [0.2, 0.3]])


def _rhs(v):
    """α' = Mα, Σ' = MΣ + ΣMᵀ with M = vI(Σ + ααᵀ)A (spec dynamics.md §2, linear; β = 1)."""

    def f(t, y):
        a, s = y[:2], y[2:].reshape(2, 2)
        m = v * (s + np.outer(a, a)) @ A
        return np.concatenate([m @ a, (m @ s + s @ m.T).ravel()])

    return f


@pytest.mark.parametrize("v", [1.0, -0.7])
def test_second_moment_against_solve_ivp(v):
    t_star = float(linear_blowup_time(ALPHA0, SIGMA0, A, v))
    t = 0.8 * t_star if np.isfinite(t_star) else 3.0
    sol = solve_ivp(_rhs(v), [0, t], np.concatenate([ALPHA0, SIGMA0.ravel()]), rtol=1e-12, atol=1e-13)
    a, s = sol.y[:2, -1], sol.y[2:, -1].reshape(2, 2)
    np.testing.assert_allclose(linear_second_moment_closed_form(ALPHA0, SIGMA0, A, v, t), s + np.outer(a, a), rtol=1e-8)


def test_blowup_time_depends_on_the_mean():
    # solve_ivp with a blow-up event at tr P = 1e8: the event time approaches t*
    t_star = float(linear_blowup_time(ALPHA0, SIGMA0, A, 1.0))
    ev = lambda t, y: np.trace(y[2:].reshape(2, 2)) + y[0] ** 2 + y[1] ** 2 - 1e8
    ev.terminal = True
    sol = solve_ivp(_rhs(1.0), [0, 10 * t_star], np.concatenate([ALPHA0, SIGMA0.ravel()]), rtol=1e-12, atol=1e-12,
                    events=ev)  # fmt: skip
    assert sol.t_events[0][0] == pytest.approx(t_star, rel=1e-6)
    assert float(linear_blowup_time(np.zeros(2), SIGMA0, A, 1.0)) > t_star  # the mean shortens it here


def test_errors(no_typecheck):
    with pytest.raises(ParameterError, match="mean0"):
        linear_second_moment_closed_form(np.zeros(3), SIGMA0, A, 1.0, 0.1)
