"""Closed forms of spec dynamics.md §3, checked against the ODE and against NumPy/SciPy forms."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, settings
from hypothesis import strategies as st

from hassejax.dynamics import (
    blowup_time_closed_form,
    clustering_limit,
    diagonal_blowup_time,
    diagonal_covariance_closed_form,
    softmax_1d_closed_form,
    softmax_covariance_closed_form,
)
from hassejax.errors import ParameterError


def _spd(r, d, scale=1.0):
    g = r.normal(size=(d, d))
    return scale * (g @ g.T / d + 0.1 * np.eye(d))


def test_closed_form_solves_the_softmax_ode():
    """dΣ/dt (forward-mode in t) equals βvΣ(A + Aᵀ)Σ, and Σ(0) = Σ0."""
    r = np.random.default_rng(0)
    s0, a = _spd(r, 3), r.normal(size=(3, 3))
    v, beta = -0.7, 1.3
    t_star = float(blowup_time_closed_form(s0, a, v, beta))
    for t in [0.0, 0.3 * min(t_star, 5.0), 0.9 * min(t_star, 5.0)]:
        sig, dsig = jax.jvp(
            lambda tt: softmax_covariance_closed_form(s0, a, v, tt, beta), (jnp.asarray(t),), (jnp.asarray(1.0),)
        )
        sig = np.asarray(sig)
        np.testing.assert_allclose(np.asarray(dsig), beta * v * sig @ (a + a.T) @ sig, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np.asarray(softmax_covariance_closed_form(s0, a, v, 0.0, beta)), s0, atol=1e-13)


def test_closed_form_equals_inverse_form_for_invertible_sigma0():
    r = np.random.default_rng(1)
    s0, a = _spd(r, 4), r.normal(size=(4, 4))
    t = 0.5 * float(blowup_time_closed_form(s0, a, 1.0))
    want = np.linalg.inv(np.linalg.inv(s0) - t * (a + a.T))
    np.testing.assert_allclose(np.asarray(softmax_covariance_closed_form(s0, a, 1.0, t)), want, rtol=1e-9)


def test_closed_form_singular_sigma0_keeps_rank_and_range():
    r = np.random.default_rng(2)
    u = r.normal(size=(3, 1))
    s0 = u @ u.T  # rank one
    a = r.normal(size=(3, 3))
    t_star = float(blowup_time_closed_form(s0, a, 1.0))
    t = 0.5 * t_star if np.isfinite(t_star) else 2.0
    sig = np.asarray(softmax_covariance_closed_form(s0, a, 1.0, t))
    # rank one, same range as u; the variance along u follows the d = 1 law
    np.testing.assert_allclose(np.linalg.matrix_rank(sig, tol=1e-10), 1)
    w = u[:, 0] / np.linalg.norm(u)
    np.testing.assert_allclose(sig, (w @ sig @ w) * np.outer(w, w), atol=1e-12)
    s = float(u[:, 0] @ u[:, 0])
    aa = float(w @ a @ w)
    np.testing.assert_allclose(w @ sig @ w, s / (1 - 2 * aa * s * t), rtol=1e-10)


def test_blowup_time_matches_eigenvalues_and_sign_rule():
    r = np.random.default_rng(3)
    for _ in range(20):
        s0, a, v = _spd(r, 3), r.normal(size=(3, 3)), r.choice([-1.5, 0.5, 2.0])
        half = scipy.linalg.sqrtm(s0).real
        lam = np.linalg.eigvalsh(v * half @ (a + a.T) @ half).max()
        got = float(blowup_time_closed_form(s0, a, v))
        if lam > 0:
            assert got == pytest.approx(1.0 / lam, rel=1e-10)
            # the closed form is finite before t* and reported inf after
            assert np.all(np.isfinite(np.asarray(softmax_covariance_closed_form(s0, a, v, 0.99 * got))))
            assert np.all(np.isinf(np.asarray(softmax_covariance_closed_form(s0, a, v, 1.01 * got))))
        else:
            assert got == np.inf
    # A + Aᵀ ≺ 0 with v > 0: never blows up (and never NaN)
    assert float(blowup_time_closed_form(np.eye(2), -np.eye(2), 1.0)) == np.inf


@settings(max_examples=25)
@given(seed=st.integers(0, 2**31 - 1), c=st.floats(0.1, 10.0))
def test_blowup_time_homogeneous_of_degree_minus_one(seed, c):
    """Softmax is homogeneous of degree 2 in Σ: t*(cΣ0) = t*(Σ0)/c (spec §3)."""
    r = np.random.default_rng(seed)
    s0, a = _spd(r, 3), r.normal(size=(3, 3))
    t1, tc = float(blowup_time_closed_form(s0, a, 1.0)), float(blowup_time_closed_form(c * s0, a, 1.0))
    if np.isfinite(t1):
        assert tc == pytest.approx(t1 / c, rel=1e-9)
    else:
        assert tc == np.inf


def test_batched_closed_forms():
    r = np.random.default_rng(4)
    s0 = np.stack([_spd(r, 2) for _ in range(5)])
    a = r.normal(size=(5, 2, 2))
    v = np.array([1.0, -1.0, 0.5, 2.0, -0.3])
    tb = np.asarray(blowup_time_closed_form(s0, a, v))
    for i in range(5):
        assert tb[i] == pytest.approx(float(blowup_time_closed_form(s0[i], a[i], v[i])), rel=1e-12)
    t = np.where(np.isfinite(tb), 0.5 * tb, 1.0)
    sb = np.asarray(softmax_covariance_closed_form(s0, a, v, t))
    for i in range(5):
        np.testing.assert_allclose(
            sb[i], np.asarray(softmax_covariance_closed_form(s0[i], a[i], v[i], t[i])), rtol=1e-12
        )


def test_diagonal_forms_match_general_form_and_each_other():
    sigma0 = np.array([0.5, 1.0, 2.0])
    a = np.array([0.3, -0.2, 0.1])
    v = 1.5
    t = 0.4
    got = np.asarray(diagonal_covariance_closed_form(sigma0, a=a, v=v * np.ones(3), t=t))
    full = np.asarray(softmax_covariance_closed_form(np.diag(sigma0), np.diag(a), v, t))
    np.testing.assert_allclose(got, np.diag(full), rtol=1e-12)
    np.testing.assert_allclose(full - np.diag(np.diag(full)), 0.0, atol=1e-15)  # stays diagonal
    tb = float(diagonal_blowup_time(sigma0, a=a, v=v * np.ones(3)))
    assert tb == pytest.approx(min(1 / (2 * v * a[i] * sigma0[i]) for i in range(3) if a[i] > 0), rel=1e-12)
    assert tb == pytest.approx(float(blowup_time_closed_form(np.diag(sigma0), np.diag(a), v)), rel=1e-12)
    assert float(diagonal_blowup_time(sigma0, a=np.abs(a), v=-np.ones(3))) == np.inf
    # per-coordinate V (not a multiple of I): each coordinate blows up on its own clock
    vv = np.array([1.0, -2.0, 0.5])
    out = np.asarray(diagonal_covariance_closed_form(sigma0, a=a, v=vv, t=0.3))
    np.testing.assert_allclose(out, sigma0 / (1 - 2 * vv * a * sigma0 * 0.3), rtol=1e-12)


def test_softmax_1d_closed_form_solves_moment_odes():
    """σ' = 2βvaσ², α' = v(1 + βaσ)α (spec §2 table, d = 1)."""
    a0, s0, a, v, beta = 0.7, 0.4, 0.9, -1.2, 0.8

    def both(t):
        return softmax_1d_closed_form(a0, s0, a, v, t, beta)

    for t in [0.0, 0.5, 2.0]:
        (al, sg), (dal, dsg) = jax.jvp(both, (jnp.asarray(t),), (jnp.asarray(1.0),))
        assert float(dsg) == pytest.approx(2 * beta * v * a * float(sg) ** 2, rel=1e-10)
        assert float(dal) == pytest.approx(v * (1 + beta * a * float(sg)) * float(al), rel=1e-10)
    al, sg = softmax_1d_closed_form(1.0, 0.5, 1.0, 1.0, 1.5)  # past t* = 1
    assert float(sg) == np.inf and float(al) == np.inf


def test_clustering_limit_matches_spec_form_and_long_time_limit():
    r = np.random.default_rng(5)
    g = r.normal(size=(1, 3))
    a = -g.T @ g  # A = Aᵀ ⪯ 0, ker(A + Aᵀ) of dimension 2
    s0 = _spd(r, 3)
    got = np.asarray(clustering_limit(s0, a))
    u = scipy.linalg.null_space(a + a.T)
    want = u @ np.linalg.inv(u.T @ np.linalg.inv(s0) @ u) @ u.T
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    assert np.linalg.matrix_rank(got, tol=1e-9) == 2
    far = np.asarray(softmax_covariance_closed_form(s0, a, 1.0, 1e9))
    np.testing.assert_allclose(far, got, atol=1e-7)


def test_clustering_limit_singular_sigma0():
    r = np.random.default_rng(6)
    a = -np.diag([1.0, 0.0, 2.0])
    b = r.normal(size=(3, 2))
    s0 = b @ b.T  # rank two
    got = np.asarray(clustering_limit(s0, a))
    far = np.asarray(softmax_covariance_closed_form(s0, a, 1.0, 1e9))
    np.testing.assert_allclose(got, far, atol=1e-7)
    assert np.all(np.isfinite(got))


def test_closed_form_errors():
    with pytest.raises(ParameterError, match=r"`Sigma0` must have shape \(\.\.\., d, d\); got shape \(2, 3\)"):
        blowup_time_closed_form(np.zeros((2, 3)), np.eye(2), 1.0)
    with pytest.raises(ParameterError, match=r"`A` must have the size of `Sigma0`, d = 2; got shape \(3, 3\)"):
        softmax_covariance_closed_form(np.eye(2), np.eye(3), 1.0, 0.1)
    with pytest.raises(ParameterError, match=r"needs βv\(A \+ Aᵀ\) ⪯ 0 .* positive eigenvalue"):
        clustering_limit(np.eye(2), np.eye(2), 1.0)


def test_closed_form_shapes_that_do_not_broadcast_are_named(no_typecheck):
    """Review: a raw "TypeError: mul got incompatible shapes" (the library's own check, reached without the suite's
    runtime type checks, which see the mismatch in the annotations first)."""
    with pytest.raises(ParameterError, match=r"`sigma0` \(2,\), `a` \(3,\), `v` \(2,\), .* do not broadcast"):
        diagonal_covariance_closed_form(np.array([0.5, 1.0]), np.array([1.0, -1.0, 2.0]), np.ones(2), 0.5)
    with pytest.raises(ParameterError, match=r"`t` \(2,\), .* do not broadcast .* leading \(batch\) axes only"):
        diagonal_covariance_closed_form(np.ones((3, 2)), np.ones(2), np.ones(2), np.ones(2))
    with pytest.raises(ParameterError, match=r"`alpha0` \(2,\), .* `t` \(3,\), `beta` \(\) do not broadcast"):
        softmax_1d_closed_form(np.array([1.0, 2.0]), 0.5, 1.0, 1.0, np.array([0.1, 0.2, 0.3]))
    with pytest.raises(ParameterError, match=r"`sigma0` \(2,\), `a` \(4,\)"):
        diagonal_blowup_time(np.ones(2), np.ones(4), np.ones(2))
    # the matrix forms (a fresh user: JAX's raw matmul ValueError and "mul got incompatible shapes" TypeError)
    eye = np.eye(2)
    with pytest.raises(ParameterError, match=r"batch shapes of `Sigma0` \(3,\), `A` \(2,\), .* do not broadcast"):
        blowup_time_closed_form(np.stack([eye] * 3) / 2, np.stack([eye, -eye]), 1.0)
    with pytest.raises(ParameterError, match=r"`Sigma0` \(2,\), `A` \(2,\), `v` \(3,\), `beta` \(\) do not"):
        blowup_time_closed_form(np.stack([eye] * 2) / 2, np.stack([eye, -eye]), np.ones(3))
    with pytest.raises(ParameterError, match=r"`t` \(3,\) do not broadcast"):
        softmax_covariance_closed_form(np.stack([eye] * 2) / 2, eye, 1.0, np.full(3, 0.1))
    times = blowup_time_closed_form(np.stack([eye] * 2) / 2, np.stack([eye, -eye]), np.ones(2))
    np.testing.assert_allclose(np.asarray(times), [1.0, np.inf])  # batches that broadcast still work
    # batch axes that do broadcast still work: three times t against a batch of three diagonals
    out = diagonal_covariance_closed_form(np.full((3, 2), 0.5), np.ones(2), np.ones(2), np.array([0.0, 0.25, 0.5]))
    np.testing.assert_allclose(np.asarray(out), [[0.5, 0.5], [2 / 3, 2 / 3], [1.0, 1.0]])


@settings(max_examples=100, deadline=None)
@given(
    angle=st.floats(0.0, np.pi),
    scale=st.floats(0.1, 10.0),
    dtype=st.sampled_from([np.float32, np.float64]),
)
def test_blowup_time_is_inf_when_lambda_star_is_zero_up_to_rounding(angle, scale, dtype):
    """`A + Aᵀ ⪯ 0` singular (λ* = 0 exactly): the computed λ* is rounding (±1e-17 in float64) and 1/λ* was a
    finite t* (3.6e16) where the solve converges; a rank-one Σ0 with A = −I likewise (a finite 3.6e5 in float32)."""
    q = np.array([[np.cos(angle), np.sin(angle)]])
    a = (-scale * q.T @ q).astype(dtype)
    sigma0 = np.array([[0.75, 1 / 12], [1 / 12, 0.25]], dtype)
    assert np.isposinf(float(blowup_time_closed_form(sigma0, a, 1.0)))
    u = np.arange(1.0, 6.0)
    rank_one = (scale * np.outer(u, u)).astype(dtype)
    assert np.isposinf(float(blowup_time_closed_form(rank_one, -np.eye(5, dtype=dtype), 1.0)))
    # a small but resolved λ* keeps its finite time: A = 1e-4 I, Σ0 = I/2 -> λ* = 1e-4, t* = 1e4
    t = float(blowup_time_closed_form(np.eye(2, dtype=dtype) / 2, 1e-4 * np.eye(2, dtype=dtype), 1.0))
    assert t == pytest.approx(1e4, rel=1e-5)
    # ... as does one beside a much larger stable direction (a floor of 10 d eps max|eig| made these inf in float32)
    half = np.eye(2, dtype=dtype) / 2
    assert float(blowup_time_closed_form(half, np.diag([-1e6, 1.0]).astype(dtype), 1.0)) == pytest.approx(1.0, rel=1e-5)
    assert float(blowup_time_closed_form(half, np.diag([-1.0, 1e-6]).astype(dtype), 1.0)) == pytest.approx(
        1e6, rel=1e-4
    )


def test_blowup_time_at_a_singular_sigma0_without_blowup_is_inf_or_beyond_its_rounding():
    """Rank-deficient `Σ0 = u uᵀ` with `A + Aᵀ` negative definite on its range (`λ* = 0`, no blow-up): the time is
    ill-conditioned (the docstring), and a finite one must be of the size that a change of `Σ0` by its rounding
    gives, `1/(ε ‖Σ0‖ λ_max(A + Aᵀ))` (measured down to 0.46 of it), not a time a user could mistake for a blow-up."""
    rng = np.random.default_rng(5)
    eps = np.finfo(np.float64).eps
    ratios = []
    for _ in range(60):
        d = int(rng.integers(2, 9))
        rank = int(rng.integers(1, d))
        u = rng.normal(size=(d, rank)) * 10 ** rng.uniform(-3, 3)
        q, _ = np.linalg.qr(np.hstack([u, rng.normal(size=(d, d - rank))]))
        eig = np.concatenate([-rng.uniform(1e-3, 1, rank), rng.uniform(1, 100, d - rank)]) * 10 ** rng.uniform(-3, 3)
        sym = q @ np.diag(eig) @ q.T  # A + Aᵀ, negative definite on the range of u
        sigma0 = u @ u.T
        t = float(blowup_time_closed_form(sigma0, sym / 2, 1.0))
        ratios.append(t * eps * np.linalg.norm(sigma0, 2) * eig.max())
    assert min(ratios) > 0.05  # inf, or a time beyond the rounding of Σ0


def test_traced_sigma0_that_is_no_covariance_gives_nan():
    """A fresh user's review: a traced `Σ0 = diag(1, −1)` (a sweep member) was taken as its PSD part `diag(1, 0)`,
    a confident blow-up time of 1/2 for another `Σ0`; it is NaN in the closed forms (a concrete one raises), while
    a singular `Σ0` and round-off below zero keep their answers (t* = 1/λ_max(Σ0^{1/2}(A + Aᵀ)Σ0^{1/2}) = 1/2)."""
    covs = jnp.stack([jnp.diag(jnp.array(d)) for d in ([1.0, -1.0], [1.0, 0.0], [1.0, -1e-14], [0.5, 0.5])])
    t_star = jax.vmap(lambda s: blowup_time_closed_form(s, jnp.eye(2), 1.0))(covs)
    np.testing.assert_allclose(np.asarray(t_star), [np.nan, 0.5, 0.5, 1.0])
    sigma = jax.vmap(lambda s: softmax_covariance_closed_form(s, jnp.eye(2), 1.0, 0.25))(covs)
    assert np.isnan(np.asarray(sigma[0])).all() and np.isfinite(np.asarray(sigma[1:])).all()
    np.testing.assert_allclose(np.asarray(sigma[1]), np.diag([2.0, 0.0]), atol=1e-12)  # σ/(1 − 2σt)
    limit = jax.vmap(lambda s: clustering_limit(s, -jnp.eye(2)))(covs)
    assert np.isnan(np.asarray(limit[0])).all() and np.isfinite(np.asarray(limit[1:])).all()
