"""Linear attention's moment closed forms against SciPy's solve_ivp of the NumPy moment ODE."""

from __future__ import annotations

import jax.numpy as jnp
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


def test_sigmoid_linearisation():
    from hassejax.dynamics import Sigmoid
    from hassejax.dynamics.linear_moments import sigmoid_linearisation

    rng = np.random.default_rng(3)
    x = rng.standard_normal((7, 2))
    V = np.array([[1.0, 0.4], [-0.3, 0.8]])
    b, beta = -0.7, 1.3
    s = 1.0 / (1.0 + np.exp(-b))
    # NumPy: σ(b) V ȳ + σ'(b) (1/n) Σ_j β (y_jᵀ A x_i) V y_j (logit of query x_i, key y_j: y_jᵀAx_i = (xAᵀxᵀ)_ij)
    ref = s * (V @ x.mean(0))[None] + s * (1 - s) * beta * np.einsum("ij,jk->ik", x @ A.T @ x.T, x @ V.T) / len(x)
    lin = sigmoid_linearisation(V, A, beta=beta, bias=b)
    np.testing.assert_allclose(np.asarray(lin.velocity(0.0, jnp.asarray(x))), ref, rtol=1e-12, atol=1e-14)
    # the sigmoid approaches it as the tokens shrink (x -> hx): logits ∝ h², the remainder at b = 0 is cubic in
    # them (σ'' (0) = 0), so error / h falls like h⁶
    sig0, lin0 = Sigmoid(V=V, A=A, beta=beta), sigmoid_linearisation(V, A, beta=beta)
    errs = [np.abs(np.asarray(sig0.velocity(0.0, jnp.asarray(h * x))) - np.asarray(lin0.velocity(0.0, jnp.asarray(h * x)))).max() / h
            for h in (0.1, 0.01)]  # fmt: skip
    assert errs[1] / errs[0] == pytest.approx(1e-6, rel=0.05)


# ----------------------------------------------------------------------------- the solvers' events on E‖x‖²
from hassejax.dynamics import Linear, MultiHead, Softmax, Status, solve_gaussian  # noqa: E402


@pytest.mark.parametrize("state", ["factor", "covariance"])
@pytest.mark.parametrize("multihead", [False, True], ids=["linear", "multihead"])
def test_point_mass_blows_up_at_the_closed_form_time(state, multihead):
    """From `Σ0 = 0` linear attention moves the mean alone (`α' = (αᵀAα)Vα`) and blows up at the closed form's `t*`
    (here `A` of this file, `V = I`: `t* = 1/(2 α0ᵀAα0)` on the mean alone). The size event watched `tr Σ` (0
    throughout), and the solve ended ``max_steps_reached`` at `t*`."""
    a, v = A + A.T, np.eye(2)  # a symmetric A: αᵀAα as in the closed form
    lin = Linear(V=v, A=a)
    model = MultiHead([lin, Softmax(V=np.zeros((2, 2)), A=np.eye(2))]) if multihead else lin
    mean0 = np.array([0.9, -0.2])
    t_star = float(linear_blowup_time(mean0, np.zeros((2, 2)), a, 1.0))
    assert np.isfinite(t_star)
    sol = solve_gaussian(model, mean0, np.zeros((2, 2)), t1=2 * t_star, rtol=1e-11, atol=1e-13, state=state)
    assert int(sol.status) == Status.blow_up
    np.testing.assert_allclose(float(sol.t_blowup), t_star, rtol=1e-8)
    np.testing.assert_array_equal(np.asarray(sol.cov_final), 0.0)


def test_a_moving_mean_is_not_a_steady_state():
    """A contraction from a point mass (`V = −I`): `Σ` stays 0 while the mean still moves at `t1` (`α' = −‖α‖²α`),
    so the steady-state event on `‖(Σ + ααᵀ)'‖_F` does not fire; on `‖Σ'‖_F` alone the solve read ``converged``."""
    model = Linear(V=-np.eye(2), A=np.eye(2))
    sol = solve_gaussian(model, np.array([1.0, 0.0]), np.zeros((2, 2)), t1=2.0, converge_tol=1e-6)
    assert int(sol.status) == Status.completed
    np.testing.assert_allclose(float(sol.mean_final[0]), 1 / np.sqrt(5.0), rtol=1e-6)  # 1/‖α‖² = 1 + 2t
    at_rest = solve_gaussian(model, np.zeros(2), np.zeros((2, 2)), t1=2.0, converge_tol=1e-6)
    assert int(at_rest.status) == Status.converged


def test_threshold_is_checked_against_the_second_moment():
    with pytest.raises(
        ParameterError, match=r"tr Σ0 \+ ‖α0‖² = 4\.0 .* None for the default \(1e8 · \(tr Σ0 \+ ‖α0‖²\)"
    ):
        solve_gaussian(
            Linear(V=np.eye(2), A=np.eye(2)), np.array([2.0, 0.0]), np.zeros((2, 2)), t1=1.0, size_threshold=3.0
        )


@pytest.mark.parametrize("masked", [False, True])
def test_particles_that_blow_up_together_are_seen_by_their_second_moment(masked):
    """Tokens at one point (or nearly) under linear attention move together, `x' = ‖x‖² x` for `V = A = I`, and blow
    up at `t* = 1/(2‖x0‖²)`; the particle size was the spread (0, or 1e-6²), so the solve ran to `t*` unseen and
    ended ``max_steps_reached`` after 100,000 steps (a fresh-user review). The size is now `(1/n) Σ ‖x_i‖²`, as the
    Gaussian solve's `tr Σ + ‖α‖²`; a causal mask changes nothing here (both tokens see the first)."""
    from hassejax.dynamics import Masked, solve_particles

    lin = Linear(V=np.eye(2), A=np.eye(2))
    model = Masked(lin, np.tril(np.ones((2, 2), bool))) if masked else lin
    for x0 in (np.array([[3.0, 0.0], [3.0, 1e-3]]), np.array([[3.0, 0.0], [3.0, 0.0]])):
        sol = solve_particles(model, x0, t1=5.0, rtol=1e-10, atol=1e-10)
        assert int(sol.status) == Status.blow_up, x0
        np.testing.assert_allclose(float(sol.t_blowup), 1 / 18, rtol=1e-6)
    with pytest.raises(ParameterError, match=r"λ0 = \(1/n\) Σ_i ‖x_i‖²"):  # the threshold against that size
        solve_particles(model, np.array([[3.0, 0.0], [3.0, 0.0]]), t1=1.0, size_threshold=8.0)


def test_masked_linear_heads_of_a_multihead_are_seen_by_their_second_moment():
    """A second review: a masked linear head inside a MultiHead still ran to its blow-up unseen (the MultiHead asks
    its heads, and a Masked head answered False). Identical tokens `x0 = (1, 2)`: `t* = 1/(2·5)` for one head,
    `1/20` for two."""
    from hassejax.dynamics import Masked, solve_particles

    x0 = np.tile(np.array([1.0, 2.0]), (4, 1))
    head = Masked(Linear(V=np.eye(2), A=np.eye(2)), np.tril(np.ones((4, 4), bool)))
    for heads, t_star in (([head], 0.1), ([head, head], 0.05)):
        sol = solve_particles(MultiHead(heads), x0, t1=1.0, rtol=1e-10, atol=1e-10)
        assert int(sol.status) == Status.blow_up
        np.testing.assert_allclose(float(sol.t_blowup), t_star, rtol=1e-6)
