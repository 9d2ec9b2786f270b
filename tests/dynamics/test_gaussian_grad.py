"""Derivatives through ``solve_gaussian`` in every state, and save times given as lists without warnings.

A fresh-user review: ``jax.grad`` of `t_blowup` through ``state="projective"`` failed ("Differentiation rule for
'nextafter' not implemented", the step control's clip near the end of its `τ` interval, a function of `Σ0`), and
from `cov0 = s I` the factor and projective states' derivatives were NaN (``eigh``'s derivative of the square root
of `cov0` divides by the gaps of its repeated eigenvalues). ``ts=[0.0, 0.5]`` emitted two JAX DeprecationWarnings
("ndim/shape requires ndarray") from the input checks.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.dynamics import (
    LowRankSoftmax,
    Softmax,
    solve_gaussian,
    solve_low_rank_gaussian,
    solve_low_rank_particles_each,
    solve_particles,
)
from hassejax.dynamics._linalg import psd_sqrt

A = jnp.array([[1.0, 0.5], [0.0, -1.0]])


def _t_star(s, state):
    model = Softmax(V=jnp.eye(2), A=A)
    return solve_gaussian(model, jnp.zeros(2), s * jnp.eye(2), t1=5.0, state=state).t_blowup


@pytest.mark.parametrize(("state", "rel"), [("projective", 1e-7), ("covariance", 1e-5), ("factor", 1e-4)])
def test_grad_of_the_blowup_time_matches_the_closed_form(state, rel):
    """`t* = 1/(s λ_max(A + Aᵀ))` from `Σ0 = s I` (`V = I`, spec §3): `dt*/ds = −1/(s² λ_max)` = −1.94028500
    at `s = 1/2`. Measured: projective −1.94028498, covariance −1.94028716, factor −1.94023869."""
    lam = float(np.linalg.eigvalsh(np.asarray(A + A.T))[-1])
    s = 0.5
    assert float(_t_star(s, state)) == pytest.approx(1 / (s * lam), rel=1e-6)
    assert float(jax.grad(_t_star)(s, state)) == pytest.approx(-1 / (s**2 * lam), rel=rel)


def test_psd_sqrt_derivative_is_finite_at_repeated_eigenvalues():
    """`d/ds (sI)^{1/2} = I/(2√s)`; and the Daleckii–Krein form against finite differences at distinct ones."""
    d_root = jax.jacfwd(lambda s: psd_sqrt(s * jnp.eye(3)))(4.0)
    np.testing.assert_allclose(np.asarray(d_root), np.eye(3) / 4.0, rtol=1e-12)
    rng = np.random.default_rng(0)
    b = rng.standard_normal((3, 3))
    sigma, tangent = jnp.asarray(b @ b.T + np.eye(3)), jnp.asarray(rng.standard_normal((3, 3)))
    tangent = tangent + tangent.T
    _, jvp = jax.jvp(psd_sqrt, (sigma,), (tangent,))
    h = 1e-6
    fd = (psd_sqrt(sigma + h * tangent) - psd_sqrt(sigma - h * tangent)) / (2 * h)
    np.testing.assert_allclose(np.asarray(jvp), np.asarray(fd), rtol=1e-6, atol=1e-8)
    (_, w_min), (_, dw_min) = jax.jvp(lambda x: psd_sqrt(x, with_min=True), (sigma,), (tangent,))
    fd_min = (np.linalg.eigvalsh(sigma + h * tangent)[0] - np.linalg.eigvalsh(sigma - h * tangent)[0]) / (2 * h)
    assert float(w_min) == pytest.approx(np.linalg.eigvalsh(np.asarray(sigma))[0])
    assert float(dw_min) == pytest.approx(fd_min, rel=1e-6)


def test_save_times_as_lists_warn_nothing(no_typecheck):
    """Lists are converted by the library: no JAX DeprecationWarning from its input checks (warnings are errors)."""
    model = Softmax(V=jnp.eye(2), A=-jnp.eye(2))
    e = jnp.array([[1.0, 0.0]])
    head = LowRankSoftmax(e, e, e, e.T)
    heads = LowRankSoftmax(e[None], e[None], e[None], e.T[None])
    x0 = jnp.array([[[1.0, 0.0], [0.0, 1.0]]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sol = solve_gaussian(model, jnp.zeros(2), jnp.eye(2), t1=1.0, ts=[0.0, 0.5])
        np.testing.assert_allclose(np.asarray(sol.ts), [0.0, 0.5])
        sol = solve_particles(model, jnp.array([[1.0, 0.0], [0.0, 1.0]]), t1=1.0, ts=[0.0, 0.5])
        np.testing.assert_allclose(np.asarray(sol.ts), [0.0, 0.5])
        solve_low_rank_gaussian(head, [0.0, 0.0], [[1.0, 0.0], [0.0, 1.0]], t1=1.0, ts=[0.0, 0.5])
        solve_low_rank_particles_each(heads, x0, jnp.ones((1, 2), bool), t1=[1.0], ts=[[0.0, 1.0]])
