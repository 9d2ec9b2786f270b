"""Tests of hassejax.dynamics.diagnostics (spec dynamics.md §3, §4, §7)."""

import functools

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxtyping import config as jaxtyping_config

from hassejax.dynamics import (
    L2,
    Softmax,
    Status,
    blowup_time_closed_form,
    clustering_limit,
    softmax_covariance_closed_form,
    solve_gaussian,
    solve_particles,
)
from hassejax.dynamics.diagnostics import (
    OUTCOME_NAMES,
    GrowthTest,
    Outcome,
    classify,
    classify_trajectory,
    cluster_count,
    covariance_eigenvalues,
    empirical_covariance,
    growth_law,
    limit_rank,
    outcome_names,
    rank_absolute,
    rank_relative,
    spectrum,
)
from hassejax.dynamics.sweeps import sweep
from hassejax.errors import ParameterError

TS = 11  # every Gaussian solve saves 11 points, so the compiled solve is shared
SIGMA0 = jnp.array([[0.6, 0.1], [0.1, 0.4]])

# Spec §7a item 1 (collapse), item 2 (a line), item 5 (blow-up / divergence).
Q1 = jnp.array([[0.4580549482, 0.3083496070], [0.2314870450, 0.2774245518]])
V1 = jnp.array([[2.6693776103, -0.6915301722], [-0.6915301722, 2.6874461223]])
Q2 = jnp.array([[0.4063236467, 0.9137292236]])
Q5 = jnp.array([[-0.0967841583, 0.4222016605], [-0.2254615634, -0.6379430932]])
K5 = jnp.array([[-0.0162863037, 1.0442167784], [-1.0848803286, -2.2059248272]])


@pytest.fixture
def no_typecheck():
    """Switch the runtime jaxtyping checks off, to reach the library's own validation."""
    jaxtyping_config.update("jaxtyping_disable", True)
    yield
    jaxtyping_config.update("jaxtyping_disable", False)


def _solve(model, t1, cov0=SIGMA0, **kw):
    return solve_gaussian(model, jnp.zeros(2), cov0, t1=t1, ts=jnp.linspace(0.0, t1, TS), **kw)


def _field(m, name):
    return np.asarray(getattr(m, name))


# --------------------------------------------------------------------------- ranks
def _cov_with_spectrum(eigs, seed):
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(len(eigs), len(eigs))))
    return (q * np.asarray(eigs)) @ q.T


LEVELS = [0.0, 1e-9, 1e-5, 0.02, 0.3, 1.0, 4.0]  # well away from every threshold used below


@settings(max_examples=30)
@given(st.lists(st.sampled_from(LEVELS), min_size=1, max_size=5), st.integers(0, 10_000))
def test_ranks_count_generating_eigenvalues(eigs, seed):
    cov = jnp.asarray(_cov_with_spectrum(eigs, seed))
    e = np.asarray(eigs)
    top = e.max()
    np.testing.assert_allclose(covariance_eigenvalues(cov), np.sort(e)[::-1], atol=1e-12)
    assert int(rank_absolute(cov)) == int(np.sum(e > 0.1))
    assert int(rank_absolute(cov, 0.01)) == int(np.sum(e > 0.01))
    assert int(rank_relative(cov, 1e-3)) == (int(np.sum(e > 1e-3 * top)) if top > 0 else 0)
    assert int(limit_rank(cov)) == (int(np.sum(e > 1e-6 * top)) if top > 0 else 0)


def test_ranks_broadcast_over_batch_and_empirical_covariance():
    covs = jnp.asarray(np.stack([_cov_with_spectrum([1.0, 0.05, 0.0], s) for s in range(4)]))
    np.testing.assert_array_equal(rank_absolute(covs), [1, 1, 1, 1])
    np.testing.assert_array_equal(rank_relative(covs, 1e-3), [2, 2, 2, 2])
    x = np.random.default_rng(0).normal(size=(3, 50, 4))
    want = np.stack([np.cov(xb.T, bias=True) for xb in x])
    np.testing.assert_allclose(empirical_covariance(jnp.asarray(x)), want, rtol=1e-12)


# --------------------------------------------------------------------------- growth law
@settings(max_examples=40)
@given(
    st.floats(0.2, 5.0),  # t*
    st.floats(0.1, 10.0),  # c
    st.floats(0.4, 4.0),  # k: λ = c (t* − t)^(−k), so p = 1 + 1/k in [1.25, 3.5]
    st.lists(st.floats(0.05, 0.95), min_size=2, max_size=2, unique=True),
    st.floats(1e-9, 1e-2),  # last sample's distance to t*, relative
)
def test_growth_law_exact_on_power_blow_up(t_star, c, k, fractions, gap):
    f0, f1 = sorted(fractions)
    if f1 - f0 < 0.02:
        f1 = f0 + 0.02
    ts = jnp.array([f0 * t_star, f1 * t_star, (1 - gap) * t_star])
    if not float(ts[1]) < float(ts[2]):
        return
    lam = c * (t_star - ts) ** (-k)
    fit = growth_law(ts, lam)
    assert bool(fit.ok)
    np.testing.assert_allclose(fit.exponent, 1 + 1 / k, rtol=1e-6)
    np.testing.assert_allclose(fit.t_star, t_star, rtol=1e-6)
    if abs(k - 2.0) > 1e-3:  # p = 1.5 is the boundary of the rule
        assert bool(fit.blow_up) == (1 + 1 / k > 1.5)


@settings(max_examples=30)
@given(st.floats(0.1, 5.0), st.floats(1e-3, 10.0), st.lists(st.floats(0.0, 20.0), min_size=3, max_size=3, unique=True))
def test_growth_law_exact_on_exponential_divergence(rate, c, times):
    ts = jnp.asarray(sorted(times))
    if float(ts[1] - ts[0]) < 0.05 or float(ts[2] - ts[1]) < 0.05:
        return
    fit = growth_law(ts, c * jnp.exp(rate * ts))
    assert bool(fit.ok) and not bool(fit.blow_up)
    np.testing.assert_allclose(fit.exponent, 1.0, atol=1e-6)
    assert np.isinf(_field(fit, "t_star"))


def test_growth_law_uses_last_three_valid_samples_and_rejects_non_growth():
    ts = jnp.linspace(0.0, 0.99, 12)
    lam = 1.0 / (1.0 - ts)
    valid = jnp.ones(12, bool).at[-1].set(False).at[4].set(False)
    lam_bad = lam.at[-1].set(jnp.nan)
    fit = growth_law(ts, lam_bad, valid)
    assert bool(fit.ok) and bool(fit.blow_up)
    np.testing.assert_allclose(fit.t_star, 1.0, rtol=1e-9)
    # Batched, with a decreasing and a too-short member.
    ts_b = jnp.stack([ts, ts, ts])
    lam_b = jnp.stack([lam, 1.0 / lam, lam])
    valid_b = jnp.stack([jnp.ones(12, bool), jnp.ones(12, bool), jnp.arange(12) < 2])
    fit = growth_law(ts_b, lam_b, valid_b)
    np.testing.assert_array_equal(fit.ok, [True, False, False])
    np.testing.assert_array_equal(fit.blow_up, [True, False, False])


# --------------------------------------------------------------------------- classify solves
def test_classify_blow_up_item5_matches_closed_form_t_star():
    A = K5.T @ Q5 / jnp.sqrt(2.0)
    sol = _solve(Softmax(V=jnp.eye(2), A=A), 10.0, cov0=jnp.eye(2) / 2)
    dg = classify(sol)
    assert int(dg.outcome) == Outcome.blow_up and int(dg.status) == Status.blow_up
    assert int(dg.growth_test) == GrowthTest.solver_event == GrowthTest.event_exponent  # the former name is an alias
    np.testing.assert_allclose(dg.growth_exponent, 2.0, atol=0.05)
    t_star = float(blowup_time_closed_form(jnp.eye(2) / 2, A, 1.0))
    np.testing.assert_allclose(t_star, 0.70234, atol=1e-5)
    np.testing.assert_allclose(dg.t_blowup, t_star, rtol=1e-6)
    assert outcome_names(dg).item() == f"blow_up(t*={float(dg.t_blowup):.6g})"


def test_classify_l2_item5_diverges():
    dg = classify(_solve(L2(V=jnp.eye(2), Q=Q5 / jnp.sqrt(2.0), K=K5), 200.0, cov0=jnp.eye(2) / 2))
    assert outcome_names(dg).item() == "diverge"
    assert float(dg.growth_exponent) < 1.5 and np.isinf(float(dg.t_blowup))


# Softmax solves all take `A` (not Q, K), so they share one compiled solve.
ITEM1 = Softmax(V=V1, A=-Q1.T @ Q1 / jnp.sqrt(2.0))
ITEM2 = Softmax(V=jnp.eye(2), A=-Q2.T @ Q2)


def test_classify_collapse_low_rank_and_bounded_with_horizon():
    item1, item2 = ITEM1, ITEM2
    frozen = Softmax(V=jnp.eye(2), A=jnp.zeros((2, 2)))  # A = 0: Σ' = 0
    # Item 1 converges to 0 like 1/t: read at t = 100 the paper's 0.1 rule still sees one
    # direction; at t = 1e4 it has collapsed.
    assert outcome_names(classify(_solve(item1, 100.0))).item() == "low_rank(1)"
    dg = classify(_solve(item1, 1e4))
    assert outcome_names(dg).item() == "collapse" and int(dg.rank_absolute) == 0
    # Item 2 converges to rank one; the relative rank needs the long horizon.
    short, long_ = _solve(item2, 100.0), _solve(item2, 1e8)
    assert outcome_names(classify(short)).item() == "low_rank(1)"
    assert outcome_names(classify(short, rank_rule="relative")).item() == "bounded"
    assert outcome_names(classify(long_, rank_rule="relative")).item() == "low_rank(1)"
    # Exact limit rank against the closed-form limit Σ∞ (V = I, spec §3).
    limit = clustering_limit(SIGMA0, -Q2.T @ Q2)
    assert int(limit_rank(long_.cov_final)) == int(limit_rank(limit)) == 1
    np.testing.assert_allclose(long_.cov_final, limit, atol=1e-6)
    assert int(limit_rank(short.cov_final)) == 2
    dg = classify(_solve(frozen, 10.0))
    assert outcome_names(dg).item() == "bounded"
    np.testing.assert_allclose(dg.eigenvalues, np.linalg.eigvalsh(np.asarray(SIGMA0))[::-1], rtol=1e-10)


def test_classify_reports_early_stops_as_undetermined():
    sol = _solve(ITEM2, 1e4, max_steps=3)
    assert int(sol.status) == Status.max_steps_reached
    dg = classify(sol)
    assert int(dg.outcome) == Outcome.undetermined
    assert outcome_names(dg).item() == "undetermined(max_steps_reached)"


def _phase_member(p):
    """Spec §7b item 10(a): softmax, d = 2, Σ0 = sI/2 (s = 1), V = vI, A = [[a, 1], [0, −1]]."""
    A = jnp.array([[p["a"], 1.0], [0.0, -1.0]])
    model = Softmax(V=p["v"] * jnp.eye(2), A=A)
    sol = solve_gaussian(model, jnp.zeros(2), p["s"] * jnp.eye(2) / 2, t1=50.0, ts=jnp.linspace(0.0, 50.0, TS))
    return classify(sol)


def test_classify_under_sweep_matches_closed_form_phase_map():
    """classify inside a sweep (jit + vmap) against the closed forms of spec §3."""
    v, a = np.meshgrid(np.linspace(-1.5, 1.5, 5), np.linspace(-2.5, 1.5, 5))
    v, a = v.ravel(), a.ravel()
    dg = sweep(_phase_member, {"v": jnp.asarray(v), "a": jnp.asarray(a), "s": jnp.ones(25)}, progress=False)
    A = np.stack([[[ai, 1.0], [0.0, -1.0]] for ai in a])
    t_star = np.asarray(blowup_time_closed_form(jnp.full((25, 2, 2), 0.5) * jnp.eye(2), jnp.asarray(A), jnp.asarray(v)))
    blows = np.isfinite(t_star) & (t_star < 50.0)
    out = np.asarray(dg.outcome)
    np.testing.assert_array_equal(out == Outcome.blow_up, blows)
    np.testing.assert_allclose(np.asarray(dg.t_blowup)[blows], t_star[blows], rtol=1e-6)
    # The others: the same rule applied to the closed-form Σ(50) (spec §3, V = vI).
    checked = 0
    for i in np.flatnonzero(~blows):
        sig = np.asarray(softmax_covariance_closed_form(jnp.eye(2) / 2, jnp.asarray(A[i]), float(v[i]), 50.0))
        e = np.linalg.eigvalsh(sig)[::-1]
        if np.any(np.abs(e - 0.1) < 0.01):
            continue  # too close to the 0.1 rule to be a fair test
        want = Outcome.collapse if e[0] <= 0.1 else (Outcome.low_rank if e[1] <= 0.1 else Outcome.bounded)
        assert out[i] == want, (v[i], a[i], e, OUTCOME_NAMES[out[i]])
        np.testing.assert_allclose(np.asarray(dg.eigenvalues)[i], e, atol=1e-6)
        checked += 1
    assert checked >= 8 and blows.sum() >= 8


def test_classify_jit_matches_eager_and_homogeneity_under_sweep():
    sol = _solve(ITEM2, 100.0)
    for rule in ["absolute", "relative"]:
        eager = classify(sol, rank_rule=rule)
        jitted = jax.jit(functools.partial(classify, rank_rule=rule))(sol)
        for name in eager.__dataclass_fields__:
            np.testing.assert_array_equal(_field(jitted, name), _field(eager, name))
    # Softmax is homogeneous of degree 2 in Σ: t*(sΣ0) = t*(Σ0)/s (spec §3); 25 members
    # again, so the sweep reuses the compiled program of the phase-map test.
    s = jnp.asarray(np.linspace(0.5, 3.0, 25))
    dg = sweep(_phase_member, {"v": jnp.ones(25), "a": jnp.ones(25), "s": s}, progress=False)
    np.testing.assert_array_equal(dg.outcome, [Outcome.blow_up] * 25)
    t = np.asarray(dg.t_blowup)
    np.testing.assert_allclose(t * np.asarray(s), t[0] * float(s[0]), rtol=1e-6)
    assert list(outcome_names(dg)) == [f"blow_up(t*={x:.6g})" for x in t]


# --------------------------------------------------------------------------- raw trajectories
def _closed_form_path(A, v, ts):
    return jnp.stack([softmax_covariance_closed_form(SIGMA0, A, v, float(t)) for t in ts])


def test_classify_trajectory_blow_up_from_samples():
    A = jnp.array([[0.4, 0.3], [-0.2, 0.1]])
    t_star = float(blowup_time_closed_form(SIGMA0, A, 1.0))
    ts = np.concatenate([np.linspace(0.0, 0.9 * t_star, 10), [(1 - 1e-9) * t_star]])
    dg = classify_trajectory(jnp.asarray(ts), _closed_form_path(A, 1.0, ts))
    assert int(dg.outcome) == Outcome.blow_up and int(dg.growth_test) == GrowthTest.sample_fit
    assert abs(float(dg.growth_exponent) - 2.0) < 0.05
    np.testing.assert_allclose(dg.t_blowup, t_star, rtol=1e-6)
    assert int(dg.status) == Status.blow_up


def test_classify_trajectory_exponential_divergence_and_low_rank():
    W = jnp.array([[0.8, 0.5], [0.0, -0.3]])
    ts = jnp.linspace(0.0, 12.0, 25)
    phi = jax.vmap(lambda t: jax.scipy.linalg.expm(t * W))(ts)
    covs = phi @ SIGMA0 @ jnp.swapaxes(phi, -1, -2)  # Σ' = WΣ + ΣWᵀ: exponential growth
    dg = classify_trajectory(ts, covs)
    assert outcome_names(dg).item() == "diverge" and int(dg.status) == Status.diverge
    assert abs(float(dg.growth_exponent) - 1.0) < 1e-3
    # Without enough growth for the escape ratio: classified by the final spectrum.
    dg = classify_trajectory(ts[:3], covs[:3])
    assert int(dg.growth_test) == GrowthTest.none and int(dg.outcome) in (Outcome.bounded, Outcome.low_rank)
    # Convergence to a line along the closed form (item 2).
    A2 = -(Q2.T @ Q2)
    ts = jnp.array([0.0, 10.0, 1e3, 1e5])
    dg = classify_trajectory(ts, _closed_form_path(A2, 1.0, ts), rank_rule="relative")
    assert outcome_names(dg).item() == "low_rank(1)"


def test_classify_trajectory_non_finite_samples():
    ts = jnp.linspace(0.0, 1.0, 6)
    covs = jnp.broadcast_to(SIGMA0, (6, 2, 2)).at[4].set(jnp.nan)
    dg = classify_trajectory(ts, covs)
    assert outcome_names(dg).item() == "undetermined(non_finite)"
    assert np.all(np.isfinite(_field(dg, "eigenvalues")))
    # Masked out as invalid, the same NaN is ignored.
    dg = classify_trajectory(ts, covs, jnp.arange(6) != 4)
    assert outcome_names(dg).item() == "bounded"
    # An escape followed by inf/NaN (explicit Euler stepping past a blow-up): reported as
    # non_finite, not judged (the discrete map grows doubly exponentially: p ≈ 1).
    A = jnp.array([[0.5, 0.0], [0.0, 0.2]])
    cov, path = SIGMA0, []
    for _ in range(40):
        path.append(cov)
        cov = cov + 0.1 * (cov @ A @ cov + cov @ A.T @ cov)
    dg = classify_trajectory(jnp.arange(40) * 0.1, jnp.stack(path))
    assert bool(jnp.any(~jnp.isfinite(jnp.stack(path))))
    assert outcome_names(dg).item() == "undetermined(non_finite)"
    assert int(dg.growth_test) == GrowthTest.sample_fit and np.isinf(float(dg.t_blowup))


# --------------------------------------------------------------------------- spectrum
def test_spectrum_over_time_gaussian_and_particles():
    item2 = ITEM2
    sol = _solve(item2, 1e3)
    sp = spectrum(sol)
    want = np.linalg.eigvalsh(np.asarray(sol.cov))[:, ::-1]
    np.testing.assert_allclose(sp.eigenvalues, want, atol=1e-12)
    r = np.asarray(sp.rank_absolute)
    assert r[0] == 2 and r[-1] == 1 and np.all(np.diff(r) <= 0)
    np.testing.assert_array_equal(sp.rank_relative, np.sum(want > 1e-3 * want[:, :1], axis=1))
    x0 = jax.random.normal(jax.random.key(0), (64, 2)) @ jnp.linalg.cholesky(SIGMA0).T
    psol = solve_particles(item2, x0, t1=10.0, ts=jnp.linspace(0.0, 10.0, 5))
    psp = spectrum(psol)
    emp = np.stack([np.cov(np.asarray(x).T, bias=True) for x in psol.xs])
    np.testing.assert_allclose(psp.eigenvalues, np.linalg.eigvalsh(emp)[:, ::-1], atol=1e-10)
    assert outcome_names(classify(psol)).item() == "low_rank(1)"


# --------------------------------------------------------------------------- clusters
def _clusters_on_sphere(k, per, d, noise, seed):
    rng = np.random.default_rng(seed)
    centers = np.linalg.qr(rng.normal(size=(d, d)))[0][:, :k].T  # orthonormal: well separated
    x = np.repeat(centers, per, axis=0) + noise * rng.normal(size=(k * per, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@settings(max_examples=15)
@given(st.integers(1, 5), st.integers(1, 6), st.integers(0, 10_000))
def test_cluster_count_separated_clusters(k, per, seed):
    x = _clusters_on_sphere(k, per, 6, 1e-4, seed)
    got = int(cluster_count(jnp.asarray(x)))
    gram = x @ x.T > 0.9999
    assert got == k == nx.number_connected_components(nx.from_numpy_array(gram.astype(int)))


@settings(max_examples=15)
@given(st.integers(2, 30), st.sampled_from([0.0, 0.3, 0.8]), st.integers(0, 10_000))
def test_cluster_count_is_rank_of_thresholded_gram(n, threshold, seed):
    x = np.random.default_rng(seed).normal(size=(n, 3)) * np.random.default_rng(seed + 1).uniform(0.1, 5, size=(n, 1))
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    want = np.linalg.matrix_rank((unit @ unit.T > threshold).astype(float))
    assert int(cluster_count(jnp.asarray(x), threshold)) == want


def test_cluster_count_glpr_sphere_dynamics_single_cluster():
    """GLPR: on S^{d−1}, d >= 3, Q = K = V = I, tokens cluster to one point."""
    x0 = jax.random.normal(jax.random.key(1), (24, 3))
    x0 = x0 / jnp.linalg.norm(x0, axis=1, keepdims=True)
    sol = solve_particles(Softmax(V=jnp.eye(3), A=jnp.eye(3)), x0, t1=60.0, ts=jnp.array([0.0, 60.0]), sphere=True)
    assert int(sol.status) == Status.completed
    counts = cluster_count(sol.xs)
    assert int(counts[0]) == 24 and int(counts[-1]) == 1
    # Batched over time and vmappable.
    np.testing.assert_array_equal(jax.vmap(cluster_count)(sol.xs), counts)


# --------------------------------------------------------------------------- errors
def test_errors_name_argument(no_typecheck):
    with pytest.raises(ParameterError, match=r"`cov` must have shape \(\.\.\., d, d\) with d >= 1; got shape \(2, 3\)"):
        rank_relative(jnp.ones((2, 3)))
    with pytest.raises(ParameterError, match=r"`rtol` must be a finite number > 0; got -1"):
        rank_relative(jnp.eye(2), -1)
    with pytest.raises(ParameterError, match=r"`threshold` must be a finite number >= 0; got -0.1"):
        rank_absolute(jnp.eye(2), -0.1)
    with pytest.raises(ParameterError, match=r"`rank_rule` must be 'absolute'.*got 'median'"):
        classify(None, rank_rule="median")
    with pytest.raises(ParameterError, match=r"`solution` must be a GaussianSolution or ParticleSolution; got dict"):
        classify({})
    with pytest.raises(ParameterError, match=r"`ts` and `lam` must have the same shape"):
        growth_law(jnp.ones(3), jnp.ones(4))
    with pytest.raises(ParameterError, match=r"`valid` must have the shape of `ts`"):
        growth_law(jnp.ones(3), jnp.ones(3), jnp.ones(4, bool))
    with pytest.raises(ParameterError, match=r"`ts` must have shape \(\.\.\., T\) = \(5,\)"):
        classify_trajectory(jnp.ones(4), jnp.ones((5, 2, 2)))
    with pytest.raises(ParameterError, match=r"`escape_ratio` must be a finite number > 0; got 0"):
        classify_trajectory(jnp.ones(5), jnp.ones((5, 2, 2)), escape_ratio=0)
    with pytest.raises(
        ParameterError, match=r"`x` must have shape \(\.\.\., n, d\) with n >= 1 tokens; got shape \(3,\)"
    ):
        cluster_count(jnp.ones(3))
    with pytest.raises(ParameterError, match=r"`threshold` must be a cosine similarity in \(-1, 1\); got 1.5"):
        cluster_count(jnp.ones((3, 2)), 1.5)
    with pytest.raises(ParameterError, match=r"`x` must have shape \(\.\.\., n, d\)"):
        empirical_covariance(jnp.ones((0, 2)))
