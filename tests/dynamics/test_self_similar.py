"""Self-similar collapse profiles (hassejax.dynamics.self_similar) against NumPy/SciPy.

The covariance velocity is re-typed in NumPy (no hassejax), its zero `S + F(S) = 0` found by
``scipy.optimize.fsolve`` and the log-time ODE `dS/ds = S + F(S)` integrated by
``scipy.integrate.solve_ivp``; the closed form `S* = I/2` of softmax with `V = I`, `A = −I`.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.optimize import fsolve

from hassejax.dynamics import L2, MultiHead, Softmax, paper
from hassejax.dynamics.self_similar import self_similar_profile
from hassejax.errors import ParameterError, SolveError


def _numpy_f(heads):
    """`F(S) = Σ_h (C_h S A_h S + S A_hᵀ S C_hᵀ)` (spec dynamics.md §2, multi-head, β = 1)."""

    def f(S):
        M = sum(C @ S @ A for C, A in heads)
        return M @ S + S @ M.T

    return f


def test_identity_closed_form():
    # softmax V = I, A = −I: Σ(t) = (Σ0⁻¹ + 2tI)⁻¹, so tΣ(t) → I/2 (spec §3)
    p = self_similar_profile(Softmax(V=jnp.eye(3), A=-jnp.eye(3)), np.diag([1.0, 2.0, 0.3]))
    np.testing.assert_allclose(np.asarray(p.profile), np.eye(3) / 2, atol=1e-12)
    np.testing.assert_allclose(np.asarray(p.exponents), -np.ones(6), atol=1e-10)


def test_figure6_multihead_against_scipy():
    model = paper.multihead_model(paper.FIG6_V, paper.FIG4_Q, paper.FIG4_K)
    heads = [(np.asarray(h.value(0.0)), np.asarray(h.interaction(0.0))) for h in model.heads]
    f = _numpy_f(heads)
    # the log-time flow from I/2 (independent of Newton): S(s) → S*
    sol = solve_ivp(lambda s, y: (y.reshape(2, 2) + f(y.reshape(2, 2))).ravel(), [0, 200], (np.eye(2) / 2).ravel(),
                    rtol=1e-11, atol=1e-13)  # fmt: skip
    s_flow = sol.y[:, -1].reshape(2, 2)
    z = fsolve(lambda v: (v.reshape(2, 2) + f(v.reshape(2, 2))).ravel(), s_flow.ravel(), xtol=1e-12)
    p = self_similar_profile(model, np.eye(2))
    np.testing.assert_allclose(np.asarray(p.profile), z.reshape(2, 2), rtol=1e-9)
    np.testing.assert_allclose(np.asarray(p.profile), s_flow, rtol=1e-7)
    assert np.all(np.asarray(p.exponents) < 0)
    assert np.min(np.abs(np.asarray(p.exponents) + 1.0)) < 1e-8  # the time shift τ
    # the exponents: a finite-difference Jacobian of S ↦ S + F(S) on (S11, S12, S22)
    basis = [np.array([[1.0, 0], [0, 0]]), np.array([[0, 1.0], [1.0, 0]]), np.array([[0, 0], [0, 1.0]])]
    S, h = np.asarray(p.profile), 1e-6
    cols = [((S + h * B + f(S + h * B)) - (S - h * B + f(S - h * B))) / (2 * h) for B in basis]
    J = np.array([[c[0, 0], c[0, 1], c[1, 1]] for c in cols]).T
    np.testing.assert_allclose(np.sort(np.linalg.eigvals(J).real), np.sort(np.asarray(p.exponents)), atol=1e-6)
    # the complex eigenvalues (a spiral in log t), against the finite-difference ones
    ev = np.asarray(p.eigenvalues)
    np.testing.assert_allclose(ev.real, np.asarray(p.exponents), atol=0)
    key = lambda z: np.lexsort((z.imag, z.real))
    ej = np.linalg.eigvals(J)
    np.testing.assert_allclose(ev[key(ev)], ej[key(ej)], atol=1e-6)
    assert np.max(np.abs(ev.imag)) > 0.1  # fig. 6 multi-head: −0.128 ± 0.543i


def test_errors():
    with pytest.raises(ParameterError, match="homogeneous"):
        self_similar_profile(L2(V=jnp.eye(2), Q=jnp.eye(2), K=jnp.eye(2)), np.eye(2))
    with pytest.raises(ParameterError, match="guess"):
        self_similar_profile(Softmax(V=jnp.eye(2), A=-jnp.eye(2)), np.ones((3, 3)))
    with pytest.raises(ParameterError, match="symmetric"):
        self_similar_profile(Softmax(V=jnp.eye(2), A=-jnp.eye(2)), np.array([[1.0, 2.0], [0.0, 1.0]]))
    with pytest.raises(SolveError, match="Newton"):
        self_similar_profile(MultiHead([Softmax(V=jnp.eye(2), A=jnp.eye(2))]), np.eye(2), max_iter=1)
