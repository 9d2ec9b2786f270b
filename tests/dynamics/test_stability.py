"""Tests of hassejax.dynamics.stability: the Lipschitz constant against the library's velocity Jacobian
(jax.jacfwd) and velocity differences, the Grönwall constant's integration, the bound on a small
two-system solve, and the linearised estimate against a closed form."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.dynamics import Softmax, particle_velocity, solve_particles
from hassejax.dynamics.stability import log_linearised_growth, log_stability_constant, softmax_lipschitz
from hassejax.dynamics.wasserstein import empirical_w2
from hassejax.errors import ParameterError


def _in_ball(rng, n, d, R):
    x = rng.normal(size=(n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True) * R * rng.uniform(0.3, 1.0, size=(n, 1))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lipschitz_constant_bounds_jacobian_and_differences(seed):
    rng = np.random.default_rng(seed)
    n, d, R, beta = 6, 2, 1.3, 0.7
    V, A = rng.normal(size=(d, d)), rng.normal(size=(d, d))
    model = Softmax(V=jnp.asarray(V), A=jnp.asarray(A), beta=beta)
    L = float(softmax_lipschitz(V, A, R, beta))

    def f(z):
        return particle_velocity(model, 0.0, z.reshape(n, d)).reshape(-1)

    for _ in range(4):
        x, y = _in_ball(rng, n, d, R), _in_ball(rng, n, d, R)
        J = np.asarray(jax.jacfwd(f)(jnp.asarray(x.reshape(-1))))
        assert np.linalg.norm(J, 2) <= L
        assert np.linalg.norm(f(jnp.asarray(x.reshape(-1))) - f(jnp.asarray(y.reshape(-1)))) <= L * np.linalg.norm(
            x - y
        )


def test_log_stability_constant_integrates_with_the_radius_growth():
    V, A = np.diag([2.0, 1.0]), np.array([[0.0, 0.5], [0.5, 0.0]])
    ts, radii = np.array([0.0, 0.1, 0.3]), np.array([1.0, 1.0, 2.0])
    got = log_stability_constant(ts, radii, V, A)
    steps = [0.1 * softmax_lipschitz(V, A, np.exp(0.2)), 0.2 * softmax_lipschitz(V, A, np.exp(0.4))]
    np.testing.assert_allclose(got, [0.0, steps[0], steps[0] + steps[1]], rtol=1e-12)
    with pytest.raises(ParameterError, match="strictly increasing"):
        log_stability_constant(np.zeros(2), np.ones(2), V, A)


def test_bound_holds_on_a_small_case():
    rng = np.random.default_rng(4)
    model = Softmax(V=jnp.eye(2), A=-jnp.eye(2))
    x0 = 0.7 * rng.normal(size=(5, 2))
    y0 = x0 + 0.05 * rng.normal(size=(5, 2))
    ts = np.linspace(0.0, 1.0, 21)
    z0 = x0 + 1e-5 * rng.normal(size=(5, 2))
    X, Y, Z = (np.asarray(solve_particles(model, v, t1=1.0, ts=ts, rtol=1e-11, atol=1e-11).xs) for v in (x0, y0, z0))
    radii = np.maximum(np.linalg.norm(X, axis=-1).max(-1), np.linalg.norm(Y, axis=-1).max(-1))
    C = np.exp(log_stability_constant(ts, radii, np.eye(2), -np.eye(2)))
    w = np.array([empirical_w2(a, b)[0] for a, b in zip(X, Y, strict=True)])
    assert np.all(w <= C * w[0])
    # the first-order estimate bounds the coupling distance of a tiny perturbation
    D = np.linalg.norm(X - Z, axis=(1, 2))
    growth = np.exp(log_linearised_growth(model, X, ts))
    assert np.all(D / D[0] <= growth * (1 + 1e-3))


def test_linearised_growth_closed_form():
    # A = 0, V = vI: J = v (11ᵀ/n) ⊗ I, log norm v for v > 0, so the integral is v t.
    model = Softmax(V=1.5 * jnp.eye(2), A=jnp.zeros((2, 2)))
    xs = jnp.asarray(np.random.default_rng(5).normal(size=(3, 4, 2)))
    np.testing.assert_allclose(
        log_linearised_growth(model, xs, np.array([0.0, 0.5, 2.0])), [0.0, 0.75, 3.0], rtol=1e-10
    )
