"""Derivatives of the softmax blow-up time in `Σ0` at a singular `Σ0`.

`t* = 1/λ_max(βv Σ0^{1/2}(A + Aᵀ)Σ0^{1/2})` is smooth in `Σ0` where that eigenvalue is simple and nonzero, also at
a singular `Σ0` (it is `1/λ_max(βv (A + Aᵀ)Σ0)`), but its derivative went through that of `Σ0^{1/2}`, which is
infinite at a zero eigenvalue: ``jax.grad`` of :func:`blowup_time_closed_form` was NaN at `Σ0 = diag(1, 0)` and at a
rank-one `Σ0` in `d = 3` (a review). The eigenvalue's derivative `dλ = wᵀdΣ0 w/λ` (`w = βv(A + Aᵀ)Σ0^{1/2}u`) needs
no derivative of the square root. Checked here against central finite differences in float64 of the smooth form
`1/λ_max(βv(A + Aᵀ)Σ0)` (NumPy, two-sided, also along the kernel of `Σ0`) and of the function itself along curves of
covariances.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.dynamics import blowup_time_closed_form

A2 = np.array([[1.0, 0.3], [-0.2, 0.5]])


def _smooth_blowup(sigma0, a, c):
    """`1/λ_max(c (A + Aᵀ) Σ0)` in float64 NumPy: the blow-up time, defined beyond the PSD cone too."""
    lam = np.max(np.linalg.eigvals(c * (a + a.T) @ sigma0).real)
    return 1.0 / lam


def _fd_grad(f, sigma0, h=1e-6):
    """Central differences of `f` in each symmetric direction `E_ij + E_ji` (halved off the diagonal: the gradient
    of a function of a symmetric matrix, as ``jax.grad`` of one that symmetrises its argument gives it)."""
    d = sigma0.shape[0]
    g = np.zeros((d, d))
    for i in range(d):
        for j in range(i, d):
            e = np.zeros((d, d))
            e[i, j] = e[j, i] = 1.0
            g[i, j] = g[j, i] = (f(sigma0 + h * e) - f(sigma0 - h * e)) / (2 * h) / (1.0 if i == j else 2.0)
    return g


def test_closed_form_grad_at_diag_1_0():
    sigma0 = np.diag([1.0, 0.0])
    c = 1.5
    g = np.asarray(jax.grad(lambda s: blowup_time_closed_form(s, A2, c))(jnp.asarray(sigma0)))
    assert np.all(np.isfinite(g))
    # the formula: t* = 1/λ, λ = c s00 with s = A + Aᵀ, dλ/dΣ0 = w wᵀ/λ, w = c s e0
    s = A2 + A2.T
    w = c * s[:, 0]
    lam = c * s[0, 0]
    np.testing.assert_allclose(g, -np.outer(w, w) / lam / lam**2, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(g, _fd_grad(lambda x: _smooth_blowup(x, A2, c), sigma0), rtol=1e-6, atol=1e-9)
    assert g[1, 1] != 0.0  # along the kernel of Σ0: the term a derivative of Σ0^{1/2} cannot give


def test_closed_form_grad_rank_one_d3():
    rng = np.random.default_rng(3)
    b = rng.normal(size=3)
    a = rng.normal(size=(3, 3)) + np.eye(3)
    sigma0 = np.outer(b, b)
    s = a + a.T
    if b @ s @ b <= 0:  # the blow-up direction: λ = bᵀSb > 0
        a, s = -a, -s
    g = np.asarray(jax.grad(lambda x: blowup_time_closed_form(x, a, 1.0))(jnp.asarray(sigma0)))
    assert np.all(np.isfinite(g))
    lam = b @ s @ b
    np.testing.assert_allclose(g, -np.outer(s @ b, s @ b) / lam**3, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(g, _fd_grad(lambda x: _smooth_blowup(x, a, 1.0), sigma0), rtol=1e-5, atol=1e-8)
    # the function itself (not its smooth form) along a curve of covariances through Σ0, both sides
    x = rng.normal(size=(3, 2))
    u0 = np.concatenate([b[:, None], np.zeros((3, 1))], axis=1)

    def along(h):
        u = u0 + h * x
        return float(blowup_time_closed_form(jnp.asarray(u @ u.T), a, 1.0))

    h = 1e-6
    fd = (along(h) - along(-h)) / (2 * h)
    d_sigma = x @ u0.T + u0 @ x.T
    np.testing.assert_allclose(np.sum(g * d_sigma), fd, rtol=1e-6)


def test_closed_form_grad_full_rank_and_forward_mode():
    """A regular `Σ0` keeps its derivative (finite differences), and ``jax.jvp`` agrees with ``jax.grad``."""
    sigma0 = np.array([[1.0, 0.2], [0.2, 0.5]])
    f = lambda x: blowup_time_closed_form(x, A2, 1.0, 2.0)
    g = np.asarray(jax.grad(f)(jnp.asarray(sigma0)))
    np.testing.assert_allclose(g, _fd_grad(lambda x: float(f(jnp.asarray(x))), sigma0), rtol=1e-6)
    e = jnp.asarray([[0.0, 0.0], [0.0, 1.0]])
    _, dt = jax.jvp(f, (jnp.diag(jnp.array([1.0, 0.0])),), (e,))
    g0 = jax.grad(f)(jnp.diag(jnp.array([1.0, 0.0])))
    assert np.isfinite(float(dt))
    np.testing.assert_allclose(float(dt), float(g0[1, 1]), rtol=1e-12)


def test_closed_form_grad_in_a_and_v_at_singular_sigma0():
    sigma0 = jnp.diag(jnp.array([1.0, 0.0]))
    ga, gv = jax.grad(lambda a, v: blowup_time_closed_form(sigma0, a, v), argnums=(0, 1))(jnp.asarray(A2), 1.0)
    # t* = 1/(2 v a00): dt*/da00 = −1/(2 v a00²), dt*/dv = −1/(2 v² a00), nothing from the other entries
    np.testing.assert_allclose(np.asarray(ga), [[-0.5, 0.0], [0.0, 0.0]], atol=1e-15)
    np.testing.assert_allclose(float(gv), -0.5, rtol=1e-12)


@pytest.mark.parametrize("rank", [0, 1])
def test_closed_form_no_blowup_has_zero_grad(rank):
    """No blow-up (`A + Aᵀ ⪯ 0`): `t* = inf`, derivative 0 (not NaN), singular or not."""
    sigma0 = jnp.diag(jnp.array([1.0, float(rank)]))
    g = jax.grad(lambda s: blowup_time_closed_form(s, -jnp.eye(2), 1.0))(sigma0)
    np.testing.assert_array_equal(np.asarray(g), 0.0)
