"""Gaussian moment ODEs (spec dynamics.md §2) and the Gaussian solve (spec §4).

The right-hand sides are checked against an independent evaluation of the mean-field
velocity `Γ_μ(x) = E_{y~μ}[k(x, y) V y] / E_{y~μ}[k(x, y)]` with `μ = N(α, Σ)` computed by
tensor Gauss–Hermite quadrature in NumPy (no closed form used), then against Monte Carlo
estimates of `E[Γ(X)]` and `Cov(Γ(X), X) + transpose` from 10^5 samples of `X ~ μ`.
Because `Γ_μ` is evaluated exactly, the only randomness is the sampling of `X`, so the
standard error is that of the sample mean of `Γ(X_k)` (resp. of the per-sample cross
products `(Γ_k − Γ̄)(X_k − X̄)ᵀ + transpose`), estimated from the samples.
"""

from __future__ import annotations

import warnings

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

from hassejax._xla_flags import jit_at_default_level
from hassejax.dynamics import (
    L2,
    Linear,
    MultiHead,
    PiecewiseConstant,
    Sigmoid,
    Sinkhorn,
    Softmax,
    Status,
    clustering_limit,
    gaussian_affine,
    moment_derivatives,
    softmax_1d_closed_form,
    softmax_covariance_closed_form,
    solve_gaussian,
    status_names,
)
from hassejax.dynamics._linalg import psd_sqrt
from hassejax.errors import ParameterError

D = 2
R = np.random.default_rng(20260501)
ALPHA = np.array([0.4, -0.3])
SIGMA = np.array([[0.6, 0.2], [0.2, 0.4]])
Q = R.normal(size=(2, D)) / np.sqrt(2)
K = R.normal(size=(2, D)) / np.sqrt(2)
V = R.normal(size=(D, D))


# ----------------------------------------------------------------------------- quadrature
def _gh_nodes(mean, cov, n=60):
    z, w = np.polynomial.hermite_e.hermegauss(n)
    w = w / w.sum()
    zz = np.stack(np.meshgrid(*([z] * len(mean)), indexing="ij"), -1).reshape(-1, len(mean))
    ww = np.prod(np.stack(np.meshgrid(*([w] * len(mean)), indexing="ij"), -1).reshape(-1, len(mean)), axis=1)
    lower = np.linalg.cholesky(cov)
    return mean + zz @ lower.T, ww


def quad_field(kind, x, p, mean, cov, nodes=60):
    """Γ_μ(x) for μ = N(mean, cov), by Gauss–Hermite quadrature (independent of gaussian.py)."""
    y, w = (jnp.asarray(z) for z in _gh_nodes(mean, cov, nodes))
    return _quad_kernel(kind, jnp.asarray(x), p, y, w)


def _quad_logsoftmax_average(lw, y):
    lw = lw - lw.max(axis=1, keepdims=True)
    k = jnp.exp(lw)
    return (k / k.sum(axis=1, keepdims=True)) @ y


@jax.jit(static_argnums=0)
def _quad_kernel_jit(kind, x, p, y, w):
    return _quad_kernel_body(kind, x, p, y, w)


def _quad_kernel(kind, x, p, y, w):
    return np.asarray(_quad_kernel_jit(kind, x, p, y, w))


def _quad_kernel_body(kind, x, p, y, w):
    Vm, beta = jnp.asarray(p.V), p.beta
    if kind == "softmax":
        A = p.interaction(0.0)
        avg = _quad_logsoftmax_average(beta * (x @ A.T @ y.T) + jnp.log(w)[None, :], y)
    elif kind == "l2":
        qx, ky = x @ p.Q.T, y @ p.K.T
        sq = jnp.sum(qx**2, -1)[:, None] + jnp.sum(ky**2, -1)[None, :] - 2 * qx @ ky.T
        avg = _quad_logsoftmax_average(-beta * p.c * sq + jnp.log(w)[None, :], y)
    elif kind == "linear":
        A = p.interaction(0.0)
        avg = (beta * (x @ A.T @ y.T) * w[None, :]) @ y
    return avg @ Vm.T


def quad_multihead(mh, x, mean, cov, nodes=60):
    kinds = {Softmax: "softmax", L2: "l2", Linear: "linear"}
    return sum(quad_field(kinds[type(h)], x, h, mean, cov, nodes) for h in mh.heads)


CASES = {
    "softmax": (Softmax(V=V, Q=Q, K=K, beta=1.3), lambda p, x, n=60: quad_field("softmax", x, p, ALPHA, SIGMA, n)),
    "l2": (L2(V=V, Q=Q, K=K, c=0.8), lambda p, x, n=60: quad_field("l2", x, p, ALPHA, SIGMA, n)),
    "linear": (Linear(V=V, Q=Q, K=K, beta=0.7), lambda p, x, n=60: quad_field("linear", x, p, ALPHA, SIGMA, n)),
    "multihead": (
        MultiHead([Softmax(V=V, Q=Q[:1], K=K[:1], beta=0.9), L2(V=V.T, Q=Q[1:], K=K[1:])]),
        lambda p, x, n=60: quad_multihead(p, x, ALPHA, SIGMA, n),
    ),
}


@pytest.mark.parametrize("kind", list(CASES))
def test_affine_map_equals_quadrature_pointwise(kind):
    """Γ_μ(x) = Mx + c at 25 points, μ = N(α, Σ) integrated by quadrature (tight, deterministic)."""
    p, quad = CASES[kind]
    m, c = gaussian_affine(p, 0.0, jnp.asarray(ALPHA), jnp.asarray(SIGMA))
    x = R.normal(size=(25, D)) * 1.5
    np.testing.assert_allclose(quad(p, x), x @ np.asarray(m).T + np.asarray(c), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("kind", list(CASES))
def test_moment_derivatives_match_monte_carlo(kind):
    """(α', Σ') against MC of E[Γ(X)] and Cov(Γ(X), X) + transpose, 10^5 samples, within 4 SE."""
    p, quad = CASES[kind]
    n = 100_000
    x = np.random.default_rng(7).multivariate_normal(ALPHA, SIGMA, size=n)
    # 40 nodes a dimension: quadrature error < 1e-6, far below the MC standard error (~1e-3)
    g = np.concatenate([quad(p, chunk, 40) for chunk in np.array_split(x, 20)])
    dalpha, dsigma = moment_derivatives(p, 0.0, jnp.asarray(ALPHA), jnp.asarray(SIGMA))
    se_mean = g.std(axis=0, ddof=1) / np.sqrt(n)
    assert np.all(np.abs(g.mean(axis=0) - np.asarray(dalpha)) <= 4 * se_mean)
    gc, xc = g - g.mean(axis=0), x - x.mean(axis=0)
    z = gc[:, :, None] * xc[:, None, :]
    z = z + np.swapaxes(z, 1, 2)
    se_cov = z.std(axis=0, ddof=1) / np.sqrt(n)
    assert np.all(np.abs(z.mean(axis=0) - np.asarray(dsigma)) <= 4 * se_cov)
    # the test can fail: a 10% error in Σ' would be far outside 4 SE
    assert np.all(0.1 * np.abs(np.asarray(dsigma)) > 4 * se_cov)


# ----------------------------------------------------------------------------- Sinkhorn
def _sqrtm_psd(s):
    w, q = np.linalg.eigh(s)
    return (q * np.sqrt(np.clip(w, 0, None))) @ q.T


def _sinkhorn_slope_spec(sigma, a, eps=1.0):
    """Spec §2 form: S = Σ^{1/2} G Σ^{1/2} A/ε, G = 2(I + (I + 4BBᵀ)^{1/2})⁻¹, B = Σ^{1/2}AΣ^{1/2}/ε."""
    h = _sqrtm_psd(sigma)
    b = h @ a @ h / eps
    g = 2 * np.linalg.inv(np.eye(len(a)) + scipy.linalg.sqrtm(np.eye(len(a)) + 4 * b @ b.T).real)
    return h @ g @ h @ a / eps


def test_sinkhorn_factor_form_equals_spec_form_including_singular_cases():
    r = np.random.default_rng(1)
    a = r.normal(size=(3, 3))
    for u in [r.normal(size=(3, 3)), r.normal(size=(3, 1)), r.normal(size=(3, 5))]:
        sigma = u @ u.T
        for aa, eps in [(a, 1.0), (a, 0.3), (np.outer(a[0], a[1]), 1.0), (np.zeros((3, 3)), 1.0)]:
            p = Sinkhorn(V=np.eye(3), A=aa, eps=eps)
            got = np.asarray(p.slope(0.0, jnp.asarray(u)))
            np.testing.assert_allclose(got, _sinkhorn_slope_spec(sigma, aa, eps), rtol=1e-9, atol=1e-12)


def test_sinkhorn_slope_float32_stays_finite_at_large_ill_conditioned_covariances():
    """Float32, `Σ` with eigenvalues `1e-4 … 1e4`: ``eigh`` of the Gram matrix `CCᵀ` (norm ~1e9) returned
    eigenvalues below `−1/4`, and `g(w) = 2/(1 + √(1 + 4w))` was NaN (found by the growth-bound test); now
    clipped at zero: finite, and near the float64 slope of the same factor (`Σ`'s condition 1e8 is beyond
    float32: a few per cent)."""
    r = np.random.default_rng(0)
    for _ in range(8):
        v, a = r.normal(size=(2, 3, 3))
        q, _ = np.linalg.qr(r.normal(size=(3, 3)))
        sigma = (q * np.array([1e-4, 1e-2, 1e4])) @ q.T  # tr Σ 1e4, where the NaN appeared
        u32 = psd_sqrt(jnp.asarray(sigma, jnp.float32))
        got = np.asarray(Sinkhorn(V=v.astype(np.float32), A=a.astype(np.float32)).slope(0.0, u32))
        want = np.asarray(Sinkhorn(V=v, A=a).slope(0.0, jnp.asarray(u32, jnp.float64)))
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, want, atol=0.1 * np.abs(want).max())  # measured: up to 9e-2 of 4


def test_sinkhorn_and_l2_one_dimensional_laws():
    """Spec §3: Sinkhorn σ' = 4vaσ²/(1 + √(1 + 4a²σ²)) (ε = 1); L2 σ' = 4vaσ²/(1 + 2k²σ) (c = 1, a = kq)."""
    for s, a, v in [(0.5, 1.3, 0.7), (2.0, -0.4, 1.1), (0.1, 2.0, -0.5)]:
        p = Sinkhorn(V=np.array([[v]]), A=np.array([[a]]))
        _, ds = moment_derivatives(p, 0.0, jnp.zeros(1), jnp.array([[s]]))
        assert float(ds[0, 0]) == pytest.approx(4 * v * a * s**2 / (1 + np.sqrt(1 + 4 * a**2 * s**2)), rel=1e-12)
        k, q = 0.8, a / 0.8
        pl = L2(V=np.array([[v]]), Q=np.array([[q]]), K=np.array([[k]]))
        _, ds = moment_derivatives(pl, 0.0, jnp.zeros(1), jnp.array([[s]]))
        assert float(ds[0, 0]) == pytest.approx(4 * v * a * s**2 / (1 + 2 * k**2 * s), rel=1e-12)


def test_sinkhorn_moments_match_particle_sinkhorn_plan():
    """Gaussian Sinkhorn (α', Σ') against particle Sinkhorn plans, n = 2000, 5 seeds (log domain).

    (a) the particle estimates of `E[Γ(X)]`, `Cov(Γ(X), X) + ᵀ` against the Gaussian moments of
    `N(α, Σ)`, within 4 standard errors of the 5-seed mean (SE from the spread over seeds);
    (b) sharper, with the sampling noise of the moments removed: each seed's estimate minus
    the Gaussian formula at that sample's own mean and covariance, within 4 SE of zero.
    """
    p = Sinkhorn(V=V, A=np.asarray(K).T @ np.asarray(Q), tol=1e-9, max_iter=2000)
    dalpha, dsigma = (np.asarray(z) for z in moment_derivatives(p, 0.0, jnp.asarray(ALPHA), jnp.asarray(SIGMA)))
    # up to 2000 log-domain Sinkhorn iterations on 2000 x 2000 weights: at XLA's default level, not the suite's level 0
    # (with jaxlib 0.10.2's reductions kept out of YNNPACK the level-0 program ran 3x longer; hassejax._xla_flags)
    field = jit_at_default_level(lambda x: p.velocity(0.0, x))
    est_a, est_s, resid = [], [], []
    for seed in range(5):
        x = np.random.default_rng(100 + seed).multivariate_normal(ALPHA, SIGMA, size=2000)
        g = np.asarray(field(jnp.asarray(x)))
        est_a.append(g.mean(axis=0))
        c = (g - g.mean(0)).T @ (x - x.mean(0)) / len(x)
        est_s.append(c + c.T)
        _, ds_emp = moment_derivatives(p, 0.0, jnp.asarray(x.mean(0)), jnp.asarray(np.cov(x.T, bias=True)))
        resid.append(est_s[-1] - np.asarray(ds_emp))
        # α' = V x̄ exactly for the particle plan (columns sum to 1/n)
        np.testing.assert_allclose(g.mean(axis=0), V @ x.mean(axis=0), atol=1e-7)
    est_a, est_s, resid = np.array(est_a), np.array(est_s), np.array(resid)
    se = lambda z: z.std(axis=0, ddof=1) / np.sqrt(len(z))
    assert np.all(np.abs(est_a.mean(0) - dalpha) <= 4 * se(est_a))
    assert np.all(np.abs(est_s.mean(0) - dsigma) <= 4 * se(est_s))
    assert np.all(np.abs(resid.mean(0)) <= 4 * se(resid))
    # informative: the tolerance (b) is far below the softmax/Sinkhorn difference
    _, ds_soft = moment_derivatives(Softmax(V=p.V, A=p.A), 0.0, jnp.asarray(ALPHA), jnp.asarray(SIGMA))
    assert np.max(np.abs(np.asarray(ds_soft) - dsigma)) > 100 * 4 * np.max(se(resid))


def test_sinkhorn_jvp_finite_at_repeated_eigenvalues():
    """The Daleckii–Krein JVP stays finite where eigh's own would divide by zero (Σ = I, A = I)."""
    p = Sinkhorn(V=np.eye(3), A=np.eye(3))
    u = jnp.eye(3)
    tangent = jnp.asarray(np.random.default_rng(0).normal(size=(3, 3)))
    val, dval = jax.jvp(lambda uu: p.slope(0.0, uu), (u,), (tangent,))
    h = 1e-6
    fd = (np.asarray(p.slope(0.0, u + h * tangent)) - np.asarray(p.slope(0.0, u - h * tangent))) / (2 * h)
    assert np.all(np.isfinite(np.asarray(dval)))
    np.testing.assert_allclose(np.asarray(dval), fd, rtol=1e-6, atol=1e-8)


# ----------------------------------------------------------------------------- solves
TS = jnp.linspace(0.0, 1.0, 6)


def test_softmax_1d_solve_matches_closed_form():
    a0, s0, a, v = 0.7, 0.4, 0.9, -1.2
    p = Softmax(V=np.array([[v]]), A=np.array([[a]]))
    sol = solve_gaussian(p, np.array([a0]), np.array([[s0]]), t1=1.0, ts=TS, rtol=1e-11, atol=1e-12)
    assert int(sol.status) == Status.completed and bool(jnp.all(sol.valid))
    al, sg = softmax_1d_closed_form(a0, s0, a, v, TS)
    np.testing.assert_allclose(np.asarray(sol.mean[:, 0]), np.asarray(al), rtol=1e-8)
    np.testing.assert_allclose(np.asarray(sol.cov[:, 0, 0]), np.asarray(sg), rtol=1e-8)


def test_sinkhorn_mean_is_exponential_whatever_sigma():
    """Sinkhorn: α' = Vα decoupled from Σ, so α(t) = e^{tV}α0 (spec §2, §3)."""
    r = np.random.default_rng(3)
    v3, a3 = r.normal(size=(3, 3)), r.normal(size=(3, 3))
    g = r.normal(size=(3, 3))
    p = Sinkhorn(V=v3, A=a3)
    alpha0 = r.normal(size=3)
    ts = jnp.linspace(0.0, 1.0, 41)  # 41 points and these tolerances: the solve test_energy's Sinkhorn flow compiles
    sol = solve_gaussian(p, alpha0, g @ g.T, t1=1.0, ts=ts, rtol=1e-10, atol=1e-10)
    assert int(sol.status) == Status.completed
    want = np.stack([scipy.linalg.expm(float(t) * v3) @ alpha0 for t in ts])
    np.testing.assert_allclose(np.asarray(sol.mean), want, rtol=1e-7, atol=1e-9)


def test_piecewise_constant_value_matrix_composes_closed_forms():
    """V = v_l I on layer l: Σ follows the closed form on each layer in turn (jump_ts at the boundary)."""
    r = np.random.default_rng(4)
    a = r.normal(size=(2, 2)) * 0.3
    s0 = np.array([[0.5, 0.1], [0.1, 0.3]])
    vpc = PiecewiseConstant(np.stack([np.eye(2), -2.0 * np.eye(2)]), t_edges=[0.0, 0.5, 1.0])
    sol = solve_gaussian(Softmax(V=vpc, A=a), np.zeros(2), s0, t1=1.0, ts=TS, rtol=1e-11, atol=1e-12)
    mid = softmax_covariance_closed_form(s0, a, 1.0, 0.5)
    want = softmax_covariance_closed_form(mid, a, -2.0, 0.5)
    np.testing.assert_allclose(np.asarray(sol.cov_final), np.asarray(want), rtol=1e-8)


def test_clustering_converges_to_projection_limit_and_keeps_rank():
    """V = I, A + Aᵀ ⪯ 0 with a kernel: Σ → U(UᵀΣ0⁻¹U)⁻¹Uᵀ; a rank-deficient Σ0 keeps its rank."""
    r = np.random.default_rng(5)
    g = r.normal(size=(1, 3))
    a = -g.T @ g + np.array([[0.0, 0.4, 0.0], [-0.4, 0.0, 0.0], [0.0, 0.0, 0.0]])  # sym part -gᵀg, kernel dim 2
    b = r.normal(size=(3, 3))
    s0 = b @ b.T / 3 + 0.1 * np.eye(3)
    p = Softmax(V=np.eye(3), A=a)
    # 7 save times, like the spec-energy solve below (and test_energy's): one compiled d = 3 solve for all
    ts = jnp.array([0.0, 1.0, 10.0, 100.0, 1000.0, 3000.0, 1e4])
    sol = solve_gaussian(p, np.zeros(3), s0, t1=1e4, ts=ts, rtol=1e-10, atol=1e-12)
    assert int(sol.status) == Status.completed
    want_t = np.stack([np.asarray(softmax_covariance_closed_form(s0, a, 1.0, t)) for t in ts])
    np.testing.assert_allclose(np.asarray(sol.cov), want_t, rtol=1e-6, atol=1e-9)
    limit = np.asarray(clustering_limit(s0, a))
    assert np.linalg.norm(np.asarray(sol.cov_final) - limit) < 1e-3  # O(1/t) at t = 1e4
    # steady-state event: stops on its own with status converged
    sol_c = solve_gaussian(p, np.zeros(3), s0, t1=1e9, ts=ts, converge_tol=1e-8)
    assert int(sol_c.status) == Status.converged and float(sol_c.t_final) < 1e9
    _, ds = moment_derivatives(p, 0.0, sol_c.mean_final, sol_c.cov_final)
    assert float(jnp.linalg.norm(ds)) == pytest.approx(1e-8, rel=1e-3)
    # rank-deficient Σ0 (rank one), given as a factor (d, 1): rank one at every time
    u = r.normal(size=(3, 1))
    sol_r = solve_gaussian(p, np.zeros(3), factor0=u, t1=1e4, ts=ts, rtol=1e-10, atol=1e-12)
    eig = np.linalg.eigvalsh(np.asarray(sol_r.cov))
    assert np.all(eig[:, :2] <= 1e-12 * eig[:, 2:])
    # the same from a singular cov0 (the PSD square root is computed inside)
    sol_s = solve_gaussian(p, np.zeros(3), u @ u.T, t1=1e4, ts=ts, rtol=1e-10, atol=1e-12)
    eig_s = np.linalg.eigvalsh(np.asarray(sol_s.cov))
    assert np.all(np.abs(eig_s[:, :2]) <= 1e-10 * eig_s[:, 2:])
    np.testing.assert_allclose(np.asarray(sol_s.cov), np.asarray(sol_r.cov), rtol=1e-7, atol=1e-12)


def test_max_steps_is_not_a_blow_up():
    p = Softmax(V=np.eye(2), A=-np.eye(2))
    sol = solve_gaussian(p, np.zeros(2), np.eye(2), t1=1e6, ts=TS, max_steps=3)  # as below: one compiled program
    assert status_names(sol.status) == "max_steps_reached"
    assert float(sol.t_blowup) == np.inf and bool(jnp.all(jnp.isfinite(sol.cov)))
    assert not bool(sol.valid[-1]) and bool(sol.valid[0])


def test_vmap_over_initial_conditions_gives_per_member_statuses():
    a = jnp.array([[1.0, 0.0], [0.0, -1.0]])
    covs = jnp.stack([jnp.diag(jnp.array([1.0, 0.1])), jnp.diag(jnp.array([0.0, 1.0]))])
    vs = jnp.stack([jnp.eye(2), jnp.eye(2)])  # V mapped too (both V = I), as in the save-times test: one program
    sols = jax.vmap(lambda v, c: solve_gaussian(Softmax(V=v, A=a), jnp.zeros(2), c, t1=5.0, ts=TS))(vs, covs)
    # first: blow-up at 1/(2·1·1) = 0.5; second: the unstable direction is empty, Σ → 0 along e2
    assert list(status_names(sols.status)) == ["blow_up", "completed"]
    assert float(sols.t_blowup[0]) == pytest.approx(0.5, rel=1e-6)
    assert float(sols.t_blowup[1]) == np.inf


def test_solve_errors():
    p = Softmax(V=np.eye(2), A=np.eye(2))
    z, i2 = np.zeros(2), np.eye(2)
    with pytest.raises(ParameterError, match=r"`model` \(Sigmoid\) does not preserve Gaussians \(spec §2\)"):
        solve_gaussian(Sigmoid(V=np.eye(2), A=np.eye(2)), z, i2, t1=1.0)
    with pytest.raises(ParameterError, match=r"Give exactly one of `cov0`.*got both"):
        solve_gaussian(p, z, i2, factor0=i2, t1=1.0)
    with pytest.raises(ParameterError, match=r"got neither"):
        solve_gaussian(p, z, t1=1.0)
    with pytest.raises(ParameterError, match=r"`mean0`/`mean` must have shape \(d,\) = \(2,\)"):
        solve_gaussian(p, np.zeros(3), i2, t1=1.0)
    with pytest.raises(ParameterError, match=r"`cov0`/`cov` must have shape \(d, d\) = \(2, 2\)"):
        solve_gaussian(p, z, np.eye(3), t1=1.0)
    with pytest.raises(ParameterError, match=r"`cov0` must be symmetric"):
        solve_gaussian(p, z, np.array([[1.0, 0.5], [0.0, 1.0]]), t1=1.0)
    with pytest.raises(
        ParameterError, match=r"`cov0` must be positive semidefinite \(a covariance\); got smallest eigenvalue -1"
    ):
        solve_gaussian(p, z, np.diag([1.0, -1.0]), t1=1.0)
    with pytest.raises(ParameterError, match=r"`t1` must be > `t0`"):
        solve_gaussian(p, z, i2, t1=0.0)
    with pytest.raises(ParameterError, match=r"`ts` must be non-decreasing within \[t0, t1\]"):
        solve_gaussian(p, z, i2, t1=1.0, ts=np.array([0.0, 2.0]))
    with pytest.raises(ParameterError, match=r"`size_threshold` must be > 0"):
        solve_gaussian(p, z, i2, t1=1.0, size_threshold=0.0)
    with pytest.raises(ParameterError, match=r"`converge_tol` must be > 0"):
        solve_gaussian(p, z, i2, t1=1.0, converge_tol=-1.0)
    with pytest.raises(ParameterError, match=r"`blowup_estimate` must be 'extrapolated' or 'threshold'"):
        solve_gaussian(p, z, i2, t1=1.0, blowup_estimate="guess")
    with pytest.raises(ParameterError, match=r"`model.V` must have rank 2 in a solve"):
        solve_gaussian(Softmax(V=np.stack([i2, i2]), A=i2), z, i2, t1=1.0)
    with pytest.raises(ParameterError, match=r"`mean0` must be finite"):
        solve_gaussian(p, np.array([np.nan, 0.0]), i2, t1=1.0)
    for state in ("factor", "projective"):  # as `cov0` (review: a NaN factor was integrated)
        with pytest.raises(ParameterError, match=r"`factor0` must be finite"):
            solve_gaussian(p, z, factor0=np.array([[np.nan], [0.0]]), t1=1.0, state=state)
        # a factor with no column (a fresh-user check: NumPy's "zero-size array to reduction operation maximum"
        # from the atol warning before any shape check); Σ0 = 0 is one zero column
        with pytest.raises(ParameterError, match=r"`factor0` must have shape \(d, r\) with d = 2 and r >= 1"):
            solve_gaussian(p, z, factor0=np.zeros((2, 0)), t1=1.0, state=state)


def test_softmax_solve_reproduces_spec_energy_values():
    """Spec §6: along the Gaussian softmax flow with A symmetric, V = −A, the twisted energy
    E = ½ det(I − ΣM_q)^{-1/2} exp(bᵀα + ½αᵀM_qα + ½(b + M_qα)ᵀP⁻¹(b + M_qα)) takes the values
    0.50178, 0.42221, 0.34832, 0.24405, 0.10895, 0.01376, 4.4e-5 at t = 0, 0.5, …, 3 (the energy
    module is tested elsewhere; here the closed form is written out to check the solve's accuracy)."""
    a = -np.array([[1.0, 0.3, 0.0], [0.3, 0.8, 0.1], [0.0, 0.1, 0.5]])
    alpha0 = np.array([0.3, -0.2, 0.5])
    sigma0 = np.diag([0.3, 0.2, 0.4]) + 0.05 * np.ones((3, 3))
    ts = jnp.linspace(0.0, 3.0, 7)
    sol = solve_gaussian(Softmax(V=-a, A=a), alpha0, sigma0, t1=3.0, ts=ts, rtol=1e-10, atol=1e-12)
    assert int(sol.status) == Status.completed

    def energy(al, s):
        mq, b = a.T @ s @ a, a.T @ al
        u = b + mq @ al
        p_mat = np.linalg.inv(s) - mq
        return (
            0.5
            * np.linalg.det(np.eye(3) - s @ mq) ** -0.5
            * np.exp(b @ al + 0.5 * al @ mq @ al + 0.5 * u @ np.linalg.solve(p_mat, u))
        )

    got = [energy(np.asarray(m), np.asarray(c)) for m, c in zip(sol.mean, sol.cov)]
    want = [0.50178, 0.42221, 0.34832, 0.24405, 0.10895, 0.01376, 4.4e-5]
    np.testing.assert_allclose(got[:6], want[:6], atol=5e-6)
    assert got[6] == pytest.approx(want[6], abs=5e-7)


def test_requested_save_times_and_validity_mask_for_every_status():
    """`ts` holds the requested times whatever the status (never inf after an event); `valid` marks the
    points at or before the stop. Softmax, A = I, Σ0 = I/2: V = I blows up at t* = 1, V = −I does not."""
    ts = jnp.linspace(0.0, 5.0, 6)
    covs = jnp.stack([jnp.eye(2) / 2, jnp.eye(2) / 2])  # Σ0 mapped too, as in the vmap test above: one program
    sols = jax.vmap(lambda v, c: solve_gaussian(Softmax(V=v, A=jnp.eye(2)), jnp.zeros(2), c, t1=5.0, ts=ts))(
        jnp.stack([jnp.eye(2), -jnp.eye(2)]), covs
    )
    assert list(status_names(sols.status)) == ["blow_up", "completed"]
    np.testing.assert_array_equal(np.asarray(sols.ts), np.broadcast_to(np.asarray(ts), (2, 6)))
    np.testing.assert_array_equal(np.asarray(sols.valid), [[True, True, False, False, False, False], [True] * 6])
    max_steps = solve_gaussian(
        Softmax(V=jnp.eye(2), A=-jnp.eye(2)), jnp.zeros(2), jnp.eye(2), t1=5.0, ts=ts, max_steps=3
    )
    assert status_names(max_steps.status) == "max_steps_reached"
    np.testing.assert_array_equal(np.asarray(max_steps.ts), np.asarray(ts))
    np.testing.assert_array_equal(np.asarray(max_steps.valid), np.asarray(ts) <= float(max_steps.t_final))


@pytest.mark.parametrize("state", ["factor", "projective"])
def test_solver_without_error_estimate_under_the_adaptive_controller_is_refused_by_name(state):
    """``diffrax.Euler()`` has no error estimate: under the default PID controller diffrax raised a RuntimeError
    from inside the solve (review); now a ParameterError names `solver` and the way out, which works."""
    from hassejax.dynamics import Softmax, solve_gaussian, solve_particles

    model = Softmax(V=-0.5 * jnp.eye(2), A=jnp.eye(2))
    advice = "state='factor' with a constant step" if state == "projective" else "pass a constant step"
    with pytest.raises(ParameterError, match=r"`solver` Euler\(\) gives no error estimate.*" + advice):
        solve_gaussian(model, jnp.zeros(2), jnp.eye(2), t1=1.0, solver=diffrax.Euler(), state=state)
    with pytest.raises(ParameterError, match=r"`solver` Euler\(\) gives no error estimate"):
        solve_particles(model, jnp.ones((3, 2)), t1=1.0, solver=diffrax.Euler())
    if state == "factor":  # the way out: a constant step (the projective state refuses a controller by name)
        sol = solve_gaussian(
            model, jnp.zeros(2), jnp.eye(2), t1=1.0, solver=diffrax.Euler(),
            stepsize_controller=diffrax.ConstantStepSize(), dt0=1e-3,
        )  # fmt: skip
        # V = −I/2, A = I: Σ' = VΣAΣ + ΣAᵀΣVᵀ = −Σ², so Σ(t) = Σ0 / (1 + t) = I/2 at t = 1 (Euler: O(dt) off)
        np.testing.assert_allclose(np.asarray(sol.cov_final), 0.5 * np.eye(2), atol=1e-3)


def test_controller_that_is_not_one_and_a_constant_step_without_dt0_are_refused_by_name():
    """Review: `stepsize_controller="pid"` raised an AttributeError from diffrax (without runtime type checks),
    ``ConstantStepSize()`` without `dt0` diffrax's ValueError; both now a ParameterError naming the argument."""
    from hassejax.dynamics import Softmax, solve_gaussian, solve_particles

    model = Softmax(V=-0.5 * jnp.eye(2), A=jnp.eye(2))
    for solve in (lambda **kw: solve_gaussian(model, jnp.zeros(2), jnp.eye(2), t1=1.0, **kw),
                  lambda **kw: solve_particles(model, jnp.ones((3, 2)), t1=1.0, **kw)):  # fmt: skip
        with pytest.raises(ParameterError, match="`dt0` is required with a constant step"):
            solve(stepsize_controller=diffrax.ConstantStepSize())
        assert solve(stepsize_controller=diffrax.ConstantStepSize(), dt0=0.01).status == 0  # completed
    # the solvers' runtime type checks (on in the tests) catch a string first; without them `check_solver` does
    from hassejax.dynamics._arguments import check_solver

    with pytest.raises(ParameterError, match="`stepsize_controller` must be a diffrax step-size controller"):
        check_solver(None, "pid")


@pytest.mark.parametrize("state", ["factor", "covariance"])
def test_covariance_below_atol_warns_and_a_scaled_atol_is_accurate(state):
    """Review: `Σ0 = sI` far below the default `atol` (absolute) gave a blow-up time 10 % off without a word; now a
    concrete one warns, and `atol` scaled to it gives `t* = 1/(2s)` (softmax `V = A = I`, closed form) to 1e-6.
    The projective state, scale-free in `Σ`, neither warns nor needs it."""
    from hassejax.dynamics import Softmax, solve_gaussian

    s = 1e-30
    model = Softmax(V=jnp.eye(2), A=jnp.eye(2))
    t_star = 1 / (2 * s)
    with pytest.warns(RuntimeWarning, match="The initial covariance lies below `atol`"):
        solve_gaussian(model, jnp.zeros(2), s * jnp.eye(2), t1=3 * t_star, state=state)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for kw in ({"state": state, "atol": 1e-8 * s}, {"state": "projective"}):
            sol = solve_gaussian(model, jnp.zeros(2), s * jnp.eye(2), t1=3 * t_star, **kw)
            assert status_names(sol.status) == "blow_up"
            assert abs(float(sol.t_blowup) - t_star) < 1e-6 * t_star


@pytest.mark.parametrize("kw", [{"c": -1.0}, {"beta": -0.5}])
def test_l2_with_negative_beta_c_is_refused_by_the_gaussian_route(kw):
    """For βc < 0 the Gaussian map (an expectation of exp(−βc‖Qx − Ky‖²)) exists only on part of the covariances; a
    solve from outside it came back ``completed`` with Σ = 11.7 I (review). The particle system stays defined."""
    from hassejax.dynamics import L2, gaussian_affine, solve_particles

    model = L2(V=np.eye(2), Q=np.eye(2), K=np.eye(2), **kw)
    with pytest.raises(ParameterError, match=r"βc = -[0-9.]+ < 0: its Gaussian map"):
        solve_gaussian(model, np.zeros(2), np.eye(2), t1=1.0)
    with pytest.raises(ParameterError, match="βc"):
        gaussian_affine(model, 0.0, jnp.zeros(2), jnp.eye(2) / 2)
    with pytest.raises(ParameterError, match="βc"):  # the method too (it returned NaN outside the map's domain)
        model.gaussian_affine(0.0, jnp.zeros(2), jnp.eye(2))
    sol = solve_particles(model, np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]]), t1=0.1)
    assert status_names(sol.status) == "completed" and np.all(np.isfinite(np.asarray(sol.x_final)))


def _l2_map_exact(V, Q, K, cov, mean, beta=1.0, c=1.0):
    """`M = 2βcVΣ(I + 2βcKᵀKΣ)⁻¹KᵀQ` and `c = V(I + 2βcΣKᵀK)⁻¹α` for 2 × 2 in exact rational arithmetic."""
    from fractions import Fraction

    fr = lambda a: [[Fraction(float(x)) for x in row] for row in np.atleast_2d(a)]
    mul = lambda a, b: [
        [sum(a[i][k] * b[k][j] for k in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))
    ]
    add = lambda a, b: [[x + y for x, y in zip(ra, rb)] for ra, rb in zip(a, b)]
    scale = lambda s_, a: [[s_ * x for x in row] for row in a]
    tr = lambda a: [list(r) for r in zip(*a)]

    def inv(a):
        det = a[0][0] * a[1][1] - a[0][1] * a[1][0]
        return [[a[1][1] / det, -a[0][1] / det], [-a[1][0] / det, a[0][0] / det]]

    s = Fraction(2.0 * beta * c)
    eye = [[Fraction(1), Fraction(0)], [Fraction(0), Fraction(1)]]
    v, q, k, sig = fr(V), fr(Q), fr(K), fr(cov)
    kk = mul(tr(k), k)
    m = scale(s, mul(mul(v, sig), mul(inv(add(eye, scale(s, mul(kk, sig)))), mul(tr(k), q))))
    cm = mul(v, mul(inv(add(eye, scale(s, mul(sig, kk)))), [[Fraction(float(x))] for x in mean]))
    return np.array([[float(x) for x in r] for r in m]), np.array([float(r[0]) for r in cm])


@pytest.mark.parametrize("size", [1.0, 1e6, 1e15, 1e30])
def test_l2_gaussian_map_with_a_singular_key_matrix_is_accurate_at_any_size(size):
    """`K = [[1, 0]]` (`KᵀK` singular, a key that reads one coordinate): the map against exact rational arithmetic up to
    `tr Σ = 1e30`. A review of one solve with right-hand sides [BA | α] (the push-through identity) measured `M`
    wrong by 2e-2 at 1e15 and 1e13 at 1e30: that matrix has a singular value 1/τ along null(K), which BA carries."""
    V, Q, K = np.array([[1.0, 0.5], [0.3, 1.0]]), np.array([[1.0, 0.2]]), np.array([[1.0, 0.0]])
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 2))
    cov = size * (x @ x.T + 0.1 * np.eye(2)) / np.trace(x @ x.T + 0.1 * np.eye(2))
    mean = np.array([0.7, -1.3])
    got_m, got_c = (np.asarray(z) for z in L2(V=V, Q=Q, K=K).gaussian_affine(0.0, jnp.asarray(mean), jnp.asarray(cov)))
    want_m, want_c = _l2_map_exact(V, Q, K, cov, mean)
    np.testing.assert_allclose(got_m, want_m, rtol=1e-10, atol=1e-12 * np.abs(want_m).max())
    np.testing.assert_allclose(got_c, want_c, rtol=1e-10, atol=1e-12 * np.abs(want_c).max())


def test_l2_with_a_singular_key_matrix_diverges_as_its_map_says():
    """The solve of the review's case: with `K = [[1, 0]]` the map of one solve with [BA | α] went wrong as tr Σ grew
    and the solve spent its step budget (float64: ``max_steps_reached`` at t = 9.04 after 100,000 steps) where the
    formula as written diverges at t = 11.41 in 375 steps."""
    model = L2(V=np.array([[1.0, 0.5], [0.3, 1.0]]), Q=np.array([[1.0, 0.2]]), K=np.array([[1.0, 0.0]]))
    sol = solve_gaussian(model, np.zeros(2), np.eye(2), t1=200.0, rtol=1e-10, atol=1e-10, size_threshold=1e15,
                         max_steps=5000)  # fmt: skip
    assert status_names(sol.status) == "diverge"
    assert float(sol.t_final) == pytest.approx(11.408, abs=2e-3)
    assert int(sol.stats.num_steps) < 1000


class _DepthFunction(eqx.Module):
    """A parameter written as a plain callable of depth (not a :class:`PiecewiseConstant`): `a_i + b_i t` on the
    pieces `[-inf, e_0), [e_0, e_1), [e_1, inf)`. An equinox Module, so its numbers are traced in the solve: the
    callables of the two tests below share one compiled program (each lambda compiled its own)."""

    edges: jax.Array
    a: jax.Array
    b: jax.Array

    def __init__(self, edges, a, b=(0.0, 0.0, 0.0)):
        self.edges, self.a, self.b = (jnp.asarray(x, jnp.float64) for x in (edges, a, b))

    def __call__(self, t):
        i = jnp.searchsorted(self.edges, t, side="right")
        return self.a[i] + self.b[i] * t


def test_l2_piecewise_constant_beta_c_negative_on_a_layer_the_solve_reaches_is_refused():
    """A `PiecewiseConstant` βc with a negative layer was let through (taken for a callable) and the solve stopped
    ``non_finite`` at that layer's edge; its layers are concrete, so a negative one that meets `[t0, t1]` is refused
    by name. A negative layer after `t1` is no error (a diff review: refusing it broke a solve that never gets
    there). The layers of `β` and `c` are paired over their common boundaries: `β = (1, −1)` on `[0, 1), [1, 2)`
    times `c = (1, −1)` on `[0, 2), [2, 3)` is negative only on `[1, 2)` (on `[2, 3)` both are −1)."""
    from hassejax.dynamics import L2, PiecewiseConstant

    def model(beta, c):
        return L2(V=np.eye(2), Q=np.eye(2), K=np.eye(2), beta=beta, c=c)

    def solve(m, t1, t0=0.0):
        return solve_gaussian(m, np.zeros(2), 0.1 * np.eye(2), t0=t0, t1=t1)

    c = PiecewiseConstant(np.array([1.0, -1.0]), t_edges=[0.0, 2.0, 3.0])
    pos_neg = PiecewiseConstant(np.array([1.0, -1.0]))
    with pytest.raises(ParameterError, match=r"βc = -1 < 0 on its layer \[1, inf\) .* \[t0, t1\] = \[0, 3\]"):
        solve(model(pos_neg, 1.0), 3.0)
    with pytest.raises(ParameterError, match=r"βc = -1 < 0 on its layer \[1, 2\)"):
        solve(model(pos_neg, c), 3.0)
    with pytest.raises(ParameterError, match=r"βc = -1 < 0 on its layer \[2, inf\)"):  # β = 1, c = −1 from 2 on
        solve(model(PiecewiseConstant(np.array([1.0, 1.0])), c), 3.0)
    with pytest.raises(ParameterError, match=r"model.heads\[1\] \(L2\) has βc = -1"):  # a head is named
        solve(MultiHead([model(1.0, 1.0), model(pos_neg, 1.0)]), 3.0)
    # the negative layer not reached: solved, as the same βc written as a callable (and the first layer's value
    # holds before its start: t0 = -1 meets no negative layer either)
    step = _DepthFunction([1.0, 1.5], [1.0, -1.0, -1.0])  # 1 for t < 1, then -1
    for t0 in (0.0, -1.0):
        sol = solve(model(pos_neg, 1.0), 0.9, t0)
        ref = solve(model(step, 1.0), 0.9, t0)
        assert status_names(sol.status) == status_names(ref.status) == "completed"
        np.testing.assert_allclose(np.asarray(sol.cov_final), np.asarray(ref.cov_final), rtol=1e-7)  # steps differ
    # positive on every layer: solved, and equal to the solve with the layers' product as a callable
    ok = model(
        PiecewiseConstant(np.array([1.0, 2.0])), PiecewiseConstant(np.array([0.5, 1.0]), t_edges=[0.0, 1.5, 3.0])
    )
    sol = solve(ok, 3.0)
    ref = solve(model(_DepthFunction([1.0, 1.5], [0.5, 1.0, 2.0]), 1.0), 3.0)  # (1, 2 from t = 1) × (0.5, 1 from 1.5)
    assert status_names(sol.status) == status_names(ref.status) == "completed"
    # (the callable's jumps are not known to the solver: it steps over them, 4e-6 off at the default tolerances)
    np.testing.assert_allclose(np.asarray(sol.cov_final), np.asarray(ref.cov_final), rtol=1e-4)


def test_layers_of_piecewise_constant_parameters_pair_with_batched_arrays():
    """Diff review: a batched `(B,)` array beside a scalar `PiecewiseConstant` was broadcast against its layer axis
    (a raw ValueError, or wrong pairs when `B` equalled the number of boundaries); the layer axis now comes first
    in every value, with axes of 1 between."""
    from hassejax.dynamics import PiecewiseConstant
    from hassejax.dynamics.params import _concrete_layers

    starts, (b, c) = _concrete_layers(np.array([-1.0, 1.0, 1.0]), PiecewiseConstant(np.array([-1.0, 1.0])))
    assert starts.tolist() == [0.0, 1.0] and b.shape == (1, 3) and c.shape == (2, 1)
    np.testing.assert_array_equal(b * c, [[1.0, -1.0, -1.0], [-1.0, 1.0, 1.0]])  # layer × member
    assert _concrete_layers(1.0, 2.0) == (None, (np.array([1.0]), np.array([2.0])))
    assert _concrete_layers(lambda t: t, 1.0) is None


def test_l2_traced_or_callable_negative_beta_c_stops_non_finite_where_it_turns_negative():
    """A traced `βc < 0` (a sweep's member) or a callable one cannot be refused before the solve; it came back with a
    verdict without meaning (``diverge``). Now the map is NaN where `βc < 0`: the member stops ``non_finite`` at
    `t0`, the others of the sweep are untouched, and `β(t) = 1 − t` stops where it crosses zero."""
    from hassejax.dynamics import L2

    def run(beta):
        model = L2(V=jnp.eye(2), Q=jnp.eye(2), K=jnp.eye(2), beta=beta)
        return solve_gaussian(model, jnp.zeros(2), 0.1 * jnp.eye(2), t1=10.0)

    sols = jax.jit(jax.vmap(run))(jnp.array([-1.0, 0.5, 1.0]))
    assert list(status_names(sols.status)) == ["non_finite", "completed", "completed"]
    assert float(sols.t_final[0]) == 0.0 and np.all(np.asarray(sols.t_final[1:]) == 10.0)
    assert np.all(np.isfinite(np.asarray(sols.cov_final)))  # the last finite state, no NaN passed on
    one = run(0.5)
    np.testing.assert_allclose(np.asarray(sols.cov_final[1]), np.asarray(one.cov_final), rtol=1e-10)

    sol = run(_DepthFunction([1.0, 1.5], [1.0] * 3, [-1.0] * 3))  # β(t) = 1 − t, the callable of the test above
    assert status_names(sol.status) == "non_finite"
    assert abs(float(sol.t_final) - 1.0) < 1e-6 and np.all(np.isfinite(np.asarray(sol.cov_final)))


@pytest.mark.parametrize("state", ["factor", "covariance", "projective"])
def test_traced_invalid_tolerances_flag_their_member(state):
    """A concrete `rtol = -1` is refused, but a traced one (one per member of a sweep) was taken as its absolute value
    (`t* = 1.117` for the exact 1, as with `rtol = +1`) and a NaN ended the solve `non_finite` (a fresh-user review).
    Now each such member is ``invalid_tolerance`` (nothing solved), and the valid ones (`rtol = 0` included) are the
    solves one by one."""
    eye = jnp.eye(2)
    rtol = jnp.array([-1.0, 1e-8, jnp.nan, 1e-8, 10.0, 1e-8, 0.0])
    atol = jnp.array([1e-8, -1e-8, 1e-8, 0.0, 1e-8, 1e-8, 1e-8])

    def run(r, a):
        return solve_gaussian(Softmax(V=eye, A=eye), jnp.zeros(2), eye / 2, t1=5.0, rtol=r, atol=a, state=state)

    sols = jax.jit(jax.vmap(run))(rtol, atol)
    assert list(status_names(sols.status)) == ["invalid_tolerance"] * 5 + ["blow_up"] * 2
    assert np.all(np.asarray(sols.stats.num_steps[:5]) == 0) and np.all(np.asarray(sols.t_final[:5]) == 0.0)
    np.testing.assert_allclose(np.asarray(sols.cov_final[:5]), np.broadcast_to(np.eye(2) / 2, (5, 2, 2)))
    for i in (5, 6):
        one = run(float(rtol[i]), float(atol[i]))
        np.testing.assert_allclose(float(sols.t_blowup[i]), float(one.t_blowup), rtol=1e-12)
        assert abs(float(one.t_blowup) - 1.0) < 1e-5
    # the default solve (concrete tolerances) is not flagged, and a concrete invalid one is refused as before
    with pytest.raises(ParameterError, match=r"`rtol` must be a finite number in \[0, 1\)"):
        run(-1.0, 1e-8)
    # rtol >= 1 (a fresh user: rtol = 10 read `diverge` for the blow-up at t* = 1, rtol = 1 a blow-up 12 % late)
    for bad in (1.0, 10.0):
        with pytest.raises(ParameterError, match=r"`rtol` must be a finite number in \[0, 1\).*admits steps"):
            run(bad, 1e-8)
    # a concrete Σ0 with traced tolerances (a sweep over rtol): the covariance state's conditioning warning read
    # float(rtol), a raw ConcretizationTypeError (a fresh-user review)
    concrete = jax.jit(
        jax.vmap(
            lambda r: solve_gaussian(Softmax(V=eye, A=eye), np.zeros(2), np.eye(2) / 2, t1=5.0, rtol=r, state=state)
        )
    )(jnp.array([1e-8, -1.0]))
    assert list(status_names(concrete.status)) == ["blow_up", "invalid_tolerance"]


def test_traced_invalid_tolerances_in_particle_and_low_rank_solves():
    from hassejax.dynamics import LowRankSoftmax, solve_low_rank_gaussian, solve_particles

    eye = jnp.eye(2)
    x0 = jnp.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]])
    sols = jax.jit(jax.vmap(lambda r: solve_particles(Softmax(V=eye, A=eye), x0, t1=1.0, rtol=r)))(
        jnp.array([-1.0, 1e-6])
    )
    assert list(status_names(sols.status)) == ["invalid_tolerance", "completed"]
    np.testing.assert_array_equal(np.asarray(sols.x_final[0]), np.asarray(x0))
    head = LowRankSoftmax(
        jnp.array([[1.0, 0.0]]), jnp.array([[1.0, 0.0]]), jnp.array([[1.0, 0.0]]), jnp.array([[1.0], [0.0]])
    )
    low = jax.jit(jax.vmap(lambda a: solve_low_rank_gaussian(head, jnp.zeros(2), eye, t1=5.0, atol=a)))(
        jnp.array([0.0, 1e-8])
    )
    assert status_names(low.status)[0] == "invalid_tolerance" and status_names(low.status)[1] != "invalid_tolerance"


def test_closed_forms_refuse_or_propagate_invalid_inputs():
    """A fresh-user review: a NaN `t` gave `+inf` ("past the blow-up"), a NaN or negative variance was ignored or
    accepted (`diagonal_blowup_time` 0.5 from the other coordinate), a negative `σ0` gave `σ = −0.333`, and under
    ``jit`` a NaN `Σ0` or `v` gave `t* = inf` ("never blows up"). Concrete inputs are refused by name; traced ones
    come out NaN."""
    from hassejax.dynamics import blowup_time_closed_form, diagonal_blowup_time, diagonal_covariance_closed_form

    eye = jnp.eye(2)
    cases = [
        (lambda: softmax_covariance_closed_form(eye / 2, eye, 1.0, float("nan")), "`t` must be finite"),
        (lambda: softmax_covariance_closed_form(eye / 2, eye, -1.0, float("inf")), "`t` must be finite"),
        (lambda: softmax_covariance_closed_form(eye / 2, eye, 1.0, -0.5), "`t` must be >= 0"),
        (lambda: diagonal_blowup_time(jnp.array([jnp.nan, 1.0]), jnp.ones(2), jnp.ones(2)), "`sigma0` must be finite"),
        (lambda: diagonal_blowup_time(jnp.array([-1.0, 0.0]), -jnp.ones(2), jnp.ones(2)), "`sigma0` must be >= 0"),
        (lambda: diagonal_covariance_closed_form(jnp.ones(2), jnp.ones(2), jnp.ones(2), -1.0), "`t` must be >= 0"),
        (lambda: softmax_1d_closed_form(0.0, -0.5, 1.0, 1.0, 0.5), "`sigma0` must be >= 0"),
        (lambda: softmax_1d_closed_form(0.0, float("nan"), 1.0, 1.0, 0.5), "`sigma0` must be finite"),
    ]
    for call, message in cases:
        with pytest.raises(ParameterError, match=message):
            call()
    traced = [
        jax.jit(lambda s: blowup_time_closed_form(s * eye, eye, 1.0))(jnp.nan),
        jax.jit(lambda v: blowup_time_closed_form(eye / 2, eye, v))(jnp.nan),
        jax.jit(lambda t: softmax_covariance_closed_form(eye / 2, eye, 1.0, t))(jnp.nan),
        jax.jit(lambda s: diagonal_blowup_time(jnp.array([s, 1.0]), jnp.ones(2), jnp.ones(2)))(jnp.nan),
        jax.jit(lambda s: diagonal_blowup_time(jnp.array([s, 1.0]), jnp.ones(2), jnp.ones(2)))(-1.0),
        *jax.jit(lambda s: softmax_1d_closed_form(0.0, s, 1.0, 1.0, 0.5))(-0.5),
    ]
    inf = jnp.inf  # a traced inf input is invalid too (a blow-up time of 0, or an inf read as "past t*")
    traced += [
        jax.jit(lambda a: diagonal_blowup_time(jnp.ones(2), jnp.array([a, -1.0]), jnp.ones(2)))(inf),
        jax.jit(lambda b: diagonal_blowup_time(jnp.ones(2), jnp.ones(2), jnp.ones(2), b))(inf),
        jax.jit(lambda t: diagonal_covariance_closed_form(jnp.ones(2), jnp.array([1.0, -1.0]), jnp.ones(2), t))(inf),
        *jax.jit(lambda v: softmax_1d_closed_form(0.5, 0.5, 1.0, v, 0.2))(inf),
        jax.jit(lambda t: softmax_covariance_closed_form(eye / 2, eye, 1.0, t))(inf),
        jax.jit(lambda s: blowup_time_closed_form(s * eye, eye, 1.0))(inf),
    ]
    assert all(np.all(np.isnan(np.asarray(x))) for x in traced)
    # α0 = 0 at or past the blow-up: α = 0, σ = inf (sign(0)·inf gave NaN)
    for t in (1.0, 2.0):
        alpha, sigma = softmax_1d_closed_form(0.0, 0.5, 1.0, 1.0, t)
        assert float(alpha) == 0.0 and np.isposinf(float(sigma))
    # valid inputs keep their closed forms: t* = 1, Σ(1/2) = I, +inf past the blow-up
    assert abs(float(blowup_time_closed_form(eye / 2, eye, 1.0)) - 1.0) < 1e-12
    np.testing.assert_allclose(
        np.asarray(softmax_covariance_closed_form(eye / 2, eye, 1.0, 0.5)), np.eye(2), atol=1e-12
    )
    assert np.all(np.isposinf(np.asarray(softmax_covariance_closed_form(eye / 2, eye, 1.0, 2.0))))


@pytest.mark.parametrize("state", ["factor", "covariance", "projective"])
def test_t1_within_the_time_resolution_of_a_blow_up_is_undetermined(state):
    """Σ0 = I/2, V = A = I: t* = 1 exactly. A fresh user: `t1 = 1 − 1e-9` ended ``completed`` with tr Σ(t1) = 2.6e6,
    where the solution's is past the default threshold 1e8 (the computed t* carries the solve's error, +4e-7 in the
    factor state). Within the time resolution (1e3 · rtol · t1 = 1e-5 here) of the blow-up the end is
    ``undetermined``; farther before it ``completed``, farther after it ``blow_up`` at t* = 1."""
    eye = jnp.eye(2)

    def status(t1):
        return status_names(solve_gaussian(Softmax(V=eye, A=eye), jnp.zeros(2), eye / 2, t1=t1, state=state).status)

    assert [status(t1) for t1 in (1 - 1e-3, 1 - 2e-5)] == ["completed"] * 2
    assert [status(t1) for t1 in (1 - 1e-9, 1.0, 1 + 1e-8)] == ["undetermined"] * 3
    sol = solve_gaussian(Softmax(V=eye, A=eye), jnp.zeros(2), eye / 2, t1=1.5, state=state)
    assert status_names(sol.status) == "blow_up" and abs(float(sol.t_blowup) - 1.0) < 1e-5
    # a fresh user: a tighter `rtol` with `atol = 1e-8`, whose error holds the computed t* (factor state: 2.6e-7
    # late), ended `completed` at t1 = 1 + 1e-7 with a finite Σ past the blow-up; the resolution reads max(rtol, atol)
    for rtol in (1e-12, 0.0):
        tight = [solve_gaussian(Softmax(V=eye, A=eye), jnp.zeros(2), eye / 2, t1=t1, rtol=rtol, atol=1e-8, state=state)
                 for t1 in (1 - 1e-7, 1 + 1e-7)]  # fmt: skip
        assert status_names(tight[0].status) == "undetermined", rtol
        assert status_names(tight[1].status) in ("undetermined", "blow_up"), rtol
    # a review: loose tolerances, whose resolution spans t1 (here up to 25 t1), read accurate solves far from the
    # threshold undetermined (V = 2I, Σ0 = I/4: t* = 1, tr Σ(t1) = 1/(2(1 − t1)))
    import warnings

    for rtol in (1e-3, 1e-2, 0.5):
        for t1 in (0.3, 0.6, 0.99):
            with warnings.catch_warnings():  # the covariance state's conditioning warning at rtol >= 1e-3 (Σ0 ∝ I)
                warnings.simplefilter("ignore", RuntimeWarning)
                sol = solve_gaussian(Softmax(V=2 * eye, A=eye), jnp.zeros(2), eye / 4, t1=t1, rtol=rtol, state=state)
            assert status_names(sol.status) == "completed", (rtol, t1)


@pytest.mark.parametrize("state", ["factor", "covariance", "projective"])
def test_a_small_initial_covariance_past_its_blow_up_is_not_completed(state):
    """A review: `Σ0 = 1e-4 I` (V = A = I: t* = 5000) with the default tolerances, `t1` just past t*, ended ``completed``
    with a finite Σ: the time resolution is `atol / |y0|` (1e-6, resp. 1e-4), and the size at `t1` lay below the end
    check's two-decade window. Within 50 tolerances (at most 1e-3 of the span) of the state's own λ/λ' the end is
    ``undetermined`` below the window too; 0.2 % before t* it is ``completed``."""
    eye = jnp.eye(2)

    def status(t1):
        sol = solve_gaussian(Softmax(V=eye, A=eye), jnp.zeros(2), 1e-4 * eye, t1=t1, state=state)
        return status_names(sol.status)

    assert (
        status(5000.0 * (1 - 2e-3)) == "completed"
    )  # λ/λ' ≈ 10, twice the cap 1e-3 · t1 (a review: 1e-3 was 0.1 % off it)
    for past in (1e-7, 5e-7):  # the factor state's computed t* is 4.5e-7 late, the covariance state's 7e-6
        assert status(5000.0 * (1 + past)) in ("undetermined", "blow_up"), past


@pytest.mark.parametrize("state", ["factor", "covariance"])
def test_atol_counts_against_the_size_of_the_state(state):
    """A review: with the resolution read as max(rtol, atol), `Σ0 = 1e4 I` (t* = 5e-5) solved at rtol = 1e-10,
    atol = 1e-4 read its accurate blow-up (t* within 6e-9, resp. 5e-7, of itself) ``undetermined`` beside a layer edge
    at 1.1 t*; `atol` is relative to the state's largest entry (`1e-4 / 1e4`, resp. `/ 1e2`)."""
    from hassejax.dynamics import PiecewiseConstant

    eye, s = jnp.eye(2), 1e4
    t_star = 1 / (2 * s)
    V = PiecewiseConstant(jnp.stack([eye, -eye]), t_edges=jnp.array([0.0, 1.1 * t_star, 100 * t_star]))
    sol = solve_gaussian(Softmax(V=V, A=eye), jnp.zeros(2), s * eye, t1=3 * t_star, rtol=1e-10, atol=1e-4, state=state)
    assert status_names(sol.status) == "blow_up" and abs(float(sol.t_blowup) / t_star - 1) < 1e-6


def test_exponential_growth_at_t1_is_completed():
    """A review: a linear flow (V = 0, feed-forward `x' = x`), which grows exponentially and cannot blow up, read
    ``undetermined`` at t1 = 6 and 8 with rtol = 1e-4 (its λ/λ' is the e-folding time, within the resolution); the
    local exponent λλ''/λ'² = 1 is not a blow-up's 2."""
    from hassejax.dynamics import solve_particles

    x0 = jnp.asarray(np.random.default_rng(0).normal(size=(8, 2)))
    model = Softmax(V=jnp.zeros((2, 2)), A=jnp.eye(2))
    for rtol in (1e-6, 1e-4):
        for t1 in (2.0, 6.0, 8.0):
            sol = solve_particles(model, x0, t1=t1, rtol=rtol, atol=1e-6, feedforward=(jnp.eye(2), jnp.zeros(2)))
            assert status_names(sol.status) == "completed", (rtol, t1)


def test_closed_forms_warn_of_a_matrix_v():
    """The closed forms are for `V = v I`: a fresh user's `v = 2 I` (a matrix, beside unbatched `Σ0`, `A`) gave
    `[[0.5, inf], [inf, 0.5]]` (a batch of four scalars) without a word; now with a warning (a review: a (d, d) grid
    of numbers is a legitimate batch, so not refused). A batch of numbers beside batched `Σ0` is read as before."""
    from hassejax.dynamics import blowup_time_closed_form

    eye = np.eye(2)
    with pytest.warns(RuntimeWarning, match=r"`v` has shape \(2, 2\), that of a \(d, d\) matrix.*solve_gaussian"):
        got = blowup_time_closed_form(eye / 2, eye, 2 * eye)
    np.testing.assert_allclose(np.asarray(got), [[0.5, np.inf], [np.inf, 0.5]], rtol=1e-12)
    with pytest.warns(RuntimeWarning, match=r"`v` has shape \(2, 2\), that of a \(d, d\) matrix"):
        softmax_covariance_closed_form(eye / 2, eye, 2 * eye, 0.1)
    batched = blowup_time_closed_form(np.broadcast_to(eye / 2, (2, 2, 2, 2)), eye, np.array([[1.0, 2.0], [4.0, 1.0]]))
    np.testing.assert_allclose(np.asarray(batched), [[1.0, 0.5], [0.25, 1.0]], rtol=1e-12)
