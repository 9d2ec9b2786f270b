"""Tests of hassejax.dynamics.energy (spec dynamics.md §6)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.scipy.special import logsumexp
from jaxtyping import config as jaxtyping_config

from hassejax._xla_flags import jit_at_default_level
from hassejax.dynamics import Sinkhorn, Softmax, Status, solve_gaussian, solve_particles
from hassejax.dynamics.energy import (
    GaussianEnergy,
    gaussian_interaction_energy,
    gaussian_sinkhorn_energy,
    interaction_energy,
)
from hassejax.errors import ParameterError

# Spec §6 check set-up.
A6 = -jnp.array([[1.0, 0.3, 0.0], [0.3, 0.8, 0.1], [0.0, 0.1, 0.5]])
ALPHA6 = jnp.array([0.3, -0.2, 0.5])
SIGMA6 = jnp.diag(jnp.array([0.3, 0.2, 0.4])) + 0.05 * jnp.ones((3, 3))
SPEC_VALUES = [0.50178, 0.42221, 0.34832, 0.24405, 0.10895, 0.01376, 4.4e-5]


@pytest.fixture
def no_typecheck():
    """Switch the runtime jaxtyping checks off, to reach the library's own validation."""
    jaxtyping_config.update("jaxtyping_disable", True)
    yield
    jaxtyping_config.update("jaxtyping_disable", False)


def _sqrtm(S):
    w, q = jnp.linalg.eigh(0.5 * (S + S.T))
    return (q * jnp.sqrt(jnp.clip(w, 0.0, None))) @ q.T


def _gaussian_flow(model, ts, mean0=ALPHA6, cov0=SIGMA6, atol=1e-10):
    # Save-time counts and tolerances as in test_gaussian (d = 3 softmax: 7 points, atol 1e-12; Sinkhorn:
    # 41 points, atol 1e-10), so that both files run the same compiled solves.
    sol = solve_gaussian(model, mean0, cov0, t1=float(ts[-1]), ts=ts, rtol=1e-10, atol=atol)
    assert int(sol.status) == Status.completed and bool(jnp.all(sol.valid))
    return sol.mean, sol.cov


# --------------------------------------------------------------------------- particle energy
def test_particle_energy_matches_double_sum():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 7, 3))
    A = rng.normal(size=(3, 3))
    want = np.array([np.exp(xb @ A @ xb.T).sum() / (2 * 49) for xb in x])
    np.testing.assert_allclose(interaction_energy(jnp.asarray(x), jnp.asarray(A)), want, rtol=1e-12)


def test_particle_energy_overflow_is_inf_not_nan():
    x = jnp.full((4, 2), 30.0)
    e = interaction_energy(x, jnp.eye(2))
    assert jnp.isinf(e) and e > 0


def test_particle_energy_decreases_along_softmax_flow_every_seed():
    """Spec §6: n = 200, d = 3, V = −A, E_n decreasing for every seed."""
    ts = jnp.linspace(0.0, 3.0, 31)
    L = jnp.linalg.cholesky(SIGMA6)
    for seed in range(5):
        z = jax.random.normal(jax.random.key(seed), (200, 3))
        x0 = ALPHA6 + z @ L.T
        sol = solve_particles(Softmax(V=-A6, A=A6), x0, t1=3.0, ts=ts, rtol=1e-9, atol=1e-9)
        assert int(sol.status) == Status.completed
        e = np.asarray(interaction_energy(sol.xs, A6))
        assert np.all(np.diff(e) < 0), (seed, e)
        assert e[-1] < 0.1 * e[0]


# --------------------------------------------------------------------------- Gaussian energy
def test_gaussian_energy_spec_values_along_gaussian_flow():
    """Spec §6 deterministic values at t = 0, 0.5, …, 3 along the softmax Gaussian flow, V = −A."""
    ts = jnp.linspace(0.0, 3.0, 7)
    a, S = _gaussian_flow(Softmax(V=-A6, A=A6), ts, atol=1e-12)
    res = gaussian_interaction_energy(a, S, A6)
    assert isinstance(res, GaussianEnergy) and bool(jnp.all(res.finite))
    np.testing.assert_allclose(res.value[:-1], SPEC_VALUES[:-1], rtol=0, atol=5e-6)
    np.testing.assert_allclose(res.value[-1], SPEC_VALUES[-1], rtol=0.02)
    assert np.all(np.diff(np.asarray(res.value)) < 0)


def _energy_with_inverse(a, S, A):
    """The spec's formula verbatim, with Σ⁻¹ (independent of the library's Σ^{1/2} route)."""
    a, S, A = (np.asarray(v, float) for v in (a, S, A))
    Mq = A.T @ S @ A
    b = A.T @ a
    P = np.linalg.inv(S) - Mq
    w = b + Mq @ a
    det = np.linalg.det(np.eye(len(a)) - S @ Mq)
    return 0.5 * det**-0.5 * np.exp(b @ a + 0.5 * a @ Mq @ a + 0.5 * w @ np.linalg.solve(P, w))


def _random_case(rng, d, target_norm):
    G = rng.normal(size=(d, d))
    S = G @ G.T / d + 0.1 * np.eye(d)
    A = rng.normal(size=(d, d))
    R = np.asarray(_sqrtm(jnp.asarray(S)))
    A *= target_norm / np.linalg.norm(R @ A @ R, 2)
    return rng.normal(size=d) * 0.5, S, A


@settings(max_examples=25)
@given(st.integers(1, 5), st.floats(0.05, 0.95), st.integers(0, 2**31 - 1))
def test_gaussian_energy_matches_spec_formula_with_inverse(d, norm, seed):
    a, S, A = _random_case(np.random.default_rng(seed), d, norm)
    got = gaussian_interaction_energy(jnp.asarray(a), jnp.asarray(S), jnp.asarray(A))
    assert bool(got.finite)
    np.testing.assert_allclose(got.value, _energy_with_inverse(a, S, A), rtol=1e-8)


@pytest.mark.parametrize("singular", [False, True])
def test_gaussian_energy_against_monte_carlo(singular):
    rng = np.random.default_rng(1)
    d, m = 3, 400_000
    a, S, A = _random_case(rng, d, 0.3)
    if singular:  # rank-2 covariance: the closed form must not need Σ⁻¹
        U = rng.normal(size=(d, 2)) * 0.5
        S = U @ U.T
        R = np.asarray(_sqrtm(jnp.asarray(S)))
        A *= 0.3 / np.linalg.norm(R @ A @ R, 2)
    L = np.asarray(_sqrtm(jnp.asarray(S)))
    X = a + rng.normal(size=(m, d)) @ L
    Y = a + rng.normal(size=(m, d)) @ L
    samples = 0.5 * np.exp(np.einsum("mi,ij,mj->m", X, A, Y))
    mc, se = samples.mean(), samples.std() / np.sqrt(m)
    got = gaussian_interaction_energy(jnp.asarray(a), jnp.asarray(S), jnp.asarray(A))
    assert bool(got.finite)
    assert abs(float(got.value) - mc) < 5 * se + 1e-12, (float(got.value), mc, se)


def test_gaussian_energy_infinite_beyond_threshold_never_nan():
    rng = np.random.default_rng(2)
    a, S, A = _random_case(rng, 3, 1.0)
    means = jnp.asarray(np.stack([a, a, a]))
    covs = jnp.asarray(np.stack([S, S, S]))
    for scale, finite in [(0.99, True), (1.01, False), (3.0, False)]:
        res = gaussian_interaction_energy(means, covs, jnp.asarray(A * scale))
        assert bool(jnp.all(res.finite == finite))
        assert not bool(jnp.any(jnp.isnan(res.value)))
        if not finite:
            assert bool(jnp.all(jnp.isposinf(res.value)))


def test_gaussian_energy_special_case_v_identity_a_minus_identity():
    """Spec §6: A = −I gives E = ½ det(I − Σ²)^{-1/2} exp(−αᵀ(I + Σ)⁻¹α); not convex in α."""
    rng = np.random.default_rng(3)
    G = rng.normal(size=(3, 3))
    S = G @ G.T
    S = 0.8 * S / np.linalg.eigvalsh(S).max()
    a = rng.normal(size=3)
    eye = np.eye(3)
    want = 0.5 * np.linalg.det(eye - S @ S) ** -0.5 * np.exp(-a @ np.linalg.solve(eye + S, a))
    A = -jnp.eye(3)
    got = gaussian_interaction_energy(jnp.asarray(a), jnp.asarray(S), A)
    np.testing.assert_allclose(got.value, want, rtol=1e-10)
    # Hessian in the mean at α = 0 is −2E(0)(I + Σ)⁻¹: negative definite.
    hess = jax.hessian(lambda m: gaussian_interaction_energy(m, jnp.asarray(S), A).value)(jnp.zeros(3))
    e0 = 0.5 * np.linalg.det(eye - S @ S) ** -0.5
    np.testing.assert_allclose(hess, -2 * e0 * np.linalg.inv(eye + S), rtol=1e-8)
    assert np.linalg.eigvalsh(np.asarray(hess)).max() < 0


def test_gaussian_energy_is_jittable_and_vmappable():
    rng = np.random.default_rng(4)
    cases = [_random_case(rng, 2, 0.5) for _ in range(4)]
    a = jnp.asarray(np.stack([c[0] for c in cases]))
    S = jnp.asarray(np.stack([c[1] for c in cases]))
    A = jnp.asarray(cases[0][2])
    batched = jax.jit(jax.vmap(gaussian_interaction_energy, in_axes=(0, 0, None)))(a, S, A)
    direct = gaussian_interaction_energy(a, S, A)
    np.testing.assert_allclose(batched.value, direct.value, rtol=1e-12)


# --------------------------------------------------------------------------- Sinkhorn F
def _self_ot_program(x, w, A, eps, iters):
    C = -(x @ A @ x.T)
    logw = jnp.log(w)

    def body(_, fg):
        f, g = fg
        f = -eps * logsumexp((g[None, :] - C) / eps + logw[None, :], axis=1)
        g = -eps * logsumexp((f[:, None] - C) / eps + logw[:, None], axis=0)
        return f, g

    f, g = jax.lax.fori_loop(0, iters, body, (jnp.zeros_like(w), jnp.zeros_like(w)))
    logpi = (f[:, None] + g[None, :] - C) / eps + logw[:, None] + logw[None, :]
    pi = jnp.exp(logpi)
    kl = jnp.sum(pi * (logpi - logw[:, None] - logw[None, :]))
    return jnp.sum(pi * C) + eps * kl, jnp.abs(pi.sum(0) - w).max()


# Hundreds of Sinkhorn iterations over up to 625² pairs: a program that runs far longer than it compiles, so at
# XLA's default level rather than the suite's level 0 (tests/conftest.py; 3.5 against 5.9 CPU s for the three
# d = 1 cases, the same bits: no FMA in the suite). One program per shape and iteration count.
_self_ot_jit = jit_at_default_level(_self_ot_program, static_argnums=(4,))


def _discrete_self_ot(x, w, A, eps, iters):
    """Entropic OT of a discrete measure with itself, cost −xᵀAy, log-domain Sinkhorn."""
    value, marginal_error = _self_ot_jit(x, w, A, eps, iters)
    assert float(marginal_error) < 1e-12
    return float(value)


@pytest.mark.parametrize("a, s, alpha, eps", [(0.7, 0.5, 0.3, 1.0), (-1.2, 0.8, -0.4, 0.5), (0.0, 0.6, 1.0, 1.0)])
def test_sinkhorn_energy_d1_against_discretised_sinkhorn(a, s, alpha, eps):
    x = jnp.linspace(alpha - 9 * np.sqrt(s), alpha + 9 * np.sqrt(s), 600)[:, None]
    w = jnp.exp(-((x[:, 0] - alpha) ** 2) / (2 * s))
    w = w / w.sum()
    A = jnp.array([[a]])
    want = 0.5 * _discrete_self_ot(x, w, A, eps, 400)
    got = gaussian_sinkhorn_energy(jnp.array([alpha]), jnp.array([[s]]), A, eps)
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("A", [[[0.5, 0.2], [0.2, -0.3]], [[0.5, 0.6], [-0.2, -0.3]]])
def test_sinkhorn_energy_d2_against_discretised_sinkhorn(A):
    A = jnp.asarray(A)
    S = jnp.array([[0.6, 0.2], [0.2, 0.4]])
    alpha = jnp.array([0.2, -0.1])
    L = np.linalg.cholesky(np.asarray(S))
    g = np.linspace(-6, 6, 25)
    Z = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    x = jnp.asarray(Z @ L.T + np.asarray(alpha))
    w = np.exp(-0.5 * (Z**2).sum(1))
    want = 0.5 * _discrete_self_ot(x, jnp.asarray(w / w.sum()), A, 1.0, 300)
    np.testing.assert_allclose(gaussian_sinkhorn_energy(alpha, S, A, 1.0), want, rtol=1e-6)


def test_sinkhorn_energy_non_increasing_along_sinkhorn_gaussian_ode():
    """Spec §6: V = A = Aᵀ, F = ½ OT_ε(μ, μ) does not increase along the Sinkhorn moment ODE."""
    rng = np.random.default_rng(5)
    ts = jnp.linspace(0.0, 2.0, 41)
    for A in [A6, -A6, jnp.asarray(np.diag([0.8, -0.5, 0.3]))]:
        G = rng.normal(size=(3, 3))
        S0 = jnp.asarray(G @ G.T / 3 + 0.1 * np.eye(3))
        a0 = jnp.asarray(rng.normal(size=3))
        for eps in [1.0, 0.5]:
            a, S = _gaussian_flow(Sinkhorn(V=A, A=A, eps=eps), ts, a0, S0)
            F = np.asarray(gaussian_sinkhorn_energy(a, S, A, eps))
            assert np.all(np.isfinite(F))
            assert np.all(np.diff(F) <= 1e-10 * np.abs(F[:-1]).max()), F
            assert F[-1] < F[0]


# --------------------------------------------------------------------------- errors
def test_errors_name_argument(no_typecheck):
    with pytest.raises(ParameterError, match=r"`x` must have shape \(\.\.\., n, d\)"):
        interaction_energy(jnp.ones(3), jnp.eye(3))
    with pytest.raises(ParameterError, match=r"`A` must have shape \(3, 3\).*got shape \(2, 2\)"):
        interaction_energy(jnp.ones((4, 3)), jnp.eye(2))
    with pytest.raises(ParameterError, match=r"`A` must be a square matrix"):
        gaussian_interaction_energy(jnp.ones(2), jnp.eye(2), jnp.ones((2, 3)))
    with pytest.raises(ParameterError, match=r"`cov` must have shape \(5, 2, 2\).*got shape \(2, 2\)"):
        gaussian_interaction_energy(jnp.ones((5, 2)), jnp.eye(2), jnp.eye(2))
    with pytest.raises(ParameterError, match=r"`epsilon` must be a positive number; got 0.0"):
        gaussian_sinkhorn_energy(jnp.ones(2), jnp.eye(2), jnp.eye(2), 0.0)


def test_shape_errors_also_caught_by_runtime_type_checks():
    from jaxtyping import TypeCheckError

    with pytest.raises((TypeCheckError, ParameterError)):
        interaction_energy(jnp.ones((4, 3)), jnp.eye(2))
