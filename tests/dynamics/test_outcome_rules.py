"""The one outcome list and its rule (outcome_of, classify with the rate test), the naive spectral rule,
the limit structure along ker A and the cluster counts of hassejax.dynamics.diagnostics (spec dynamics.md §3, §4)."""

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, settings
from hypothesis import strategies as st

from hassejax.dynamics import Softmax, Status, blowup_time_closed_form, clustering_limit, solve_gaussian
from hassejax.dynamics.diagnostics import (
    Outcome,
    angular_clusters,
    angular_spread,
    classify,
    kernel_basis,
    kernel_limit,
    limit_structure,
    naive_regime,
    naive_rule,
    naive_spectrum,
    naive_spectrum_low_rank,
    outcome_names,
    outcome_of,
    token_angles,
)
from hassejax.errors import ParameterError

S = Status
O = Outcome


def reference_rule(status, lam, rate, rank, d, rate_tol=1e-3):
    """The phase maps' former host-side rule (experiments/phase_maps.py outcome_codes), written independently."""
    out = []
    for s, l_, r, k in zip(status, lam, rate, rank):
        rel = r / (l_ if l_ > 0 else 1.0)
        if s == S.blow_up:
            out.append(O.blow_up)
        elif s == S.diverge:
            out.append(O.diverge)
        elif s in (S.completed, S.converged):
            if abs(rel) <= rate_tol:
                out.append(O.low_rank if 0 < k < d else (O.collapse if k == 0 else O.bounded))
            elif rel < -rate_tol:
                out.append(O.contracts)
            elif rel > rate_tol:
                out.append(O.grows)
            else:
                out.append(O.undetermined)  # NaN rate
        elif s in (S.max_steps_reached, S.dt_min_reached) and abs(rel) <= rate_tol and 0 < k < d:
            out.append(O.stalled)
        else:
            out.append(O.undetermined)
    return np.array(out)


def _eigs(lam, rank, d):
    """Decreasing eigenvalues with top `lam` and relative rank (1e-6) `rank`."""
    return np.array([[l_] + [0.5 * l_ if j < k else 1e-9 * l_ for j in range(1, d)] for l_, k in zip(lam, rank)])


def test_outcome_of_each_category_of_the_phase_maps():
    # the last two: steps at the rounding of t (dt_min_reached) on a stationary low-rank Σ are stalled as a spent
    # step budget is (such solves ended max_steps_reached before the guard's stall stop), and undetermined otherwise
    status = np.array([S.blow_up, S.diverge, S.completed, S.completed, S.completed, S.completed, S.max_steps_reached,
                       S.max_steps_reached, S.non_finite, S.converged, S.dt_min_reached, S.dt_min_reached])  # fmt: skip
    lam = np.array([1e6, 1e6, 10.0, 1.0, 0.1, 2.0, 5e3, 5e3, 1.0, 3.0, 5e3, 5e3])
    rate = np.array([0.0, 0.0, 1e-6, 0.0, -0.01, 1.0, 1e-7, 100.0, 0.0, 1e-9, 1e-7, 100.0])
    rank = np.array([2, 2, 1, 2, 2, 2, 1, 1, 2, 1, 1, 1])
    code, got_rank = outcome_of(status, _eigs(lam, rank, 2), rate, rank_rule="relative", rel_threshold=1e-6,
                                collapse_threshold=0.0)  # fmt: skip
    want = [O.blow_up, O.diverge, O.low_rank, O.bounded, O.contracts, O.grows, O.stalled, O.undetermined,
            O.undetermined, O.low_rank, O.stalled, O.undetermined]  # fmt: skip
    np.testing.assert_array_equal(code, want)
    np.testing.assert_array_equal(got_rank, rank)
    # Without a rate: the spectral outcome only; a NaN rate is undetermined.
    code, _ = outcome_of(status[2:4], _eigs(lam[2:4], rank[2:4], 2), rank_rule="relative")
    np.testing.assert_array_equal(code, [O.low_rank, O.bounded])
    code, _ = outcome_of(status[2:3], _eigs(lam[2:3], rank[2:3], 2), jnp.array([jnp.nan]))
    assert int(code[0]) == O.undetermined


@settings(max_examples=40)
@given(st.integers(0, 2**31 - 1), st.integers(2, 4))
def test_outcome_of_matches_the_reference_rule(seed, d):
    rng = np.random.default_rng(seed)
    n = 64
    status = rng.integers(0, len(Status), n)
    lam = 10.0 ** rng.uniform(-3, 3, n)
    rate = lam * rng.choice([0.0, 1e-5, -1e-5, 0.5, -0.5, 1e-2, np.nan], n)
    rank = rng.integers(1, d + 1, n)
    code, _ = outcome_of(
        status, _eigs(lam, rank, d), rate, rank_rule="relative", rel_threshold=1e-6, collapse_threshold=0.0
    )
    np.testing.assert_array_equal(code, reference_rule(status, lam, rate, rank, d))
    # jit and vmap give the same codes
    f = jax.jit(
        jax.vmap(
            lambda s, e, r: outcome_of(s, e, r, rank_rule="relative", rel_threshold=1e-6, collapse_threshold=0.0)[0]
        )
    )
    np.testing.assert_array_equal(f(status, _eigs(lam, rank, d), rate), code)


def test_outcome_of_full_rank_and_collapse():
    eig = np.array([[1.0, 0.5, 0.0], [1.0, 0.5, 0.2], [0.05, 0.01, 0.0]])
    status = np.full(3, S.completed)
    code, rank = outcome_of(status, eig, full_rank=2)  # a rank-two Σ0 in d = 3: rank two is "full"
    np.testing.assert_array_equal(code, [O.bounded, O.bounded, O.collapse])
    np.testing.assert_array_equal(rank, [2, 3, 0])
    code, _ = outcome_of(status, eig)
    np.testing.assert_array_equal(code, [O.low_rank, O.bounded, O.collapse])


def _numpy_rate(V, A, cov):
    """dλ_max/dt of softmax at Σ: Σ' = MΣ + ΣMᵀ, M = VΣA (spec §2), projected on the top eigenvector."""
    M = V @ cov @ A
    dcov = M @ cov + cov @ M.T
    w, q = np.linalg.eigh(cov)
    return w[-1], q[:, -1] @ dcov @ q[:, -1]


@pytest.mark.parametrize(("v", "a", "t1"), [(1.0, 1.0, 20.0), (1.0, -2.0, 20.0), (1.0, -2.0, 0.5), (0.0, 0.0, 1.0)])
def test_classify_rate_test_against_numpy(v, a, t1):
    A = jnp.array([[a, 1.0], [0.0, -1.0]])
    model = Softmax(V=v * jnp.eye(2), A=A)
    sol = solve_gaussian(model, jnp.zeros(2), 0.5 * jnp.eye(2), t1=t1, ts=jnp.array([0.0, t1]), size_threshold=1e6)
    dg = classify(sol, model=model, rank_rule="relative", rel_threshold=1e-6, collapse_threshold=0.0)
    cov = np.asarray(sol.cov_final)
    lam, rate = _numpy_rate(v * np.eye(2), np.asarray(A), cov)
    rank = int(np.sum(np.linalg.eigvalsh(cov) > 1e-6 * lam))
    want = reference_rule([int(sol.status)], [lam], [rate], [rank], 2)[0]
    assert int(dg.outcome) == want
    expected = {
        (1.0, 1.0, 20.0): O.blow_up,
        (1.0, -2.0, 20.0): O.contracts,
        (1.0, -2.0, 0.5): O.contracts,
        (0.0, 0.0, 1.0): O.bounded,
    }
    assert int(dg.outcome) == expected[(v, a, t1)]


def test_classify_rate_test_needs_one_gaussian_solve(no_typecheck):
    model = Softmax(V=jnp.eye(2), A=-jnp.eye(2))
    # size_threshold as in the rate tests above: their compiled solve serves this one (the default threshold,
    # computed from Σ0 in the program, is another program; no threshold is reached here)
    sol = solve_gaussian(model, jnp.zeros(2), jnp.eye(2), t1=1.0, ts=jnp.array([0.0, 1.0]), size_threshold=1e6)
    batched = jax.tree_util.tree_map(lambda x: jnp.stack([x, x]), sol)
    with pytest.raises(
        ParameterError, match="`model` \\(the rate test\\) needs one GaussianSolution without batch axes"
    ):
        classify(batched, model=model)
    with pytest.raises(ParameterError, match="`model` must be an attention kernel"):
        classify(sol, model="softmax")
    with pytest.raises(ParameterError, match="`rate_tol` must be a finite number > 0; got 0"):
        outcome_of(jnp.zeros(1, int), jnp.ones((1, 2)), rate_tol=0)


def test_outcome_names_of_the_new_outcomes():
    z = jnp.zeros(3)
    i = jnp.zeros(3, int)
    from hassejax.dynamics.diagnostics import Diagnosis

    dg = Diagnosis(outcome=jnp.array([O.contracts, O.grows, O.stalled]), rank=jnp.array([2, 2, 1]), rank_relative=i,
                   rank_absolute=i, eigenvalues=jnp.zeros((3, 2)), status=i, t_final=z, t_blowup=z + jnp.inf,
                   growth_exponent=z, growth_test=i)  # fmt: skip
    assert outcome_names(dg).tolist() == ["contracts", "grows", "stalled(rank 1)"]
    # bare codes give the bare names (review: AttributeError 'ndarray' object has no attribute 'outcome')
    assert outcome_names(np.asarray(dg.outcome)).tolist() == ["contracts", "grows", "stalled"]
    assert outcome_names(np.array([[int(O.blow_up)]])).tolist() == [["blow_up"]]
    with pytest.raises(ParameterError, match="`diagnosis` must be a Diagnosis or integer Outcome codes"):
        outcome_names(np.array([99]))


def test_outcome_names_of_non_integer_codes_are_refused(no_typecheck):
    with pytest.raises(ParameterError, match="`diagnosis` must be a Diagnosis or integer Outcome codes"):
        outcome_names(np.array([1.5]))


# --------------------------------------------------------------------------- naive rule
def test_naive_rule_matches_scipy_and_is_exact_for_scalar_v():
    rng = np.random.default_rng(0)
    V, A = rng.normal(size=(20, 2, 2)), rng.normal(size=(20, 2, 2))
    want = [scipy.linalg.eigvalsh(v @ a + a.T @ v.T)[-1] for v, a in zip(V, A)]
    np.testing.assert_allclose(naive_rule(V, A), want, rtol=1e-12, atol=1e-14)
    # V = vI: the rule's sign is the closed form's blow-up criterion (spec §3)
    for v, a in [(1.0, 0.0), (1.0, -1.0), (-0.5, 2.0), (0.3, -0.2), (0.3, -0.3)]:
        A1 = np.array([[a, 1.0], [0.0, -1.0]])
        t_star = float(blowup_time_closed_form(0.5 * np.eye(2), A1, v))
        assert (float(naive_rule(v * np.eye(2), A1)) > 0) == np.isfinite(t_star)


@settings(max_examples=25)
@given(st.integers(0, 2**31 - 1), st.integers(1, 3), st.integers(7, 9))
def test_naive_spectrum_low_rank_equals_the_full_spectrum(seed, k, d):
    rng = np.random.default_rng(seed)
    Q, K, W_V = (rng.normal(size=(k, d)) for _ in range(3))
    W_O = rng.normal(size=(d, k))
    full = np.asarray(naive_spectrum(W_O @ W_V, K.T @ Q))
    low = np.asarray(naive_spectrum_low_rank(Q, K, W_V, W_O))
    want = scipy.linalg.eigvalsh(W_O @ W_V @ K.T @ Q + (W_O @ W_V @ K.T @ Q).T)[::-1]
    np.testing.assert_allclose(full, want, rtol=1e-9, atol=1e-9 * np.abs(want).max())
    np.testing.assert_allclose(
        low, np.concatenate([want[:k], want[d - k :]]), rtol=1e-8, atol=1e-8 * np.abs(want).max()
    )
    assert np.sum(low > 0) == k and np.sum(low < 0) == k  # generic low rank: k positive, k negative (derived)
    assert naive_regime(low[None]).tolist() == ["blow_up"]


def test_naive_regime_and_errors(no_typecheck):
    assert naive_regime(np.array([[0.0, -1.0], [1e-12, -1.0], [0.1, 0.0]])).tolist() == [
        "cluster",
        "cluster",
        "blow_up",
    ]
    with pytest.raises(ParameterError, match=r"`V` and `A` must both have shape \(\.\.\., d, d\)"):
        naive_rule(np.eye(2), np.eye(3))


# --------------------------------------------------------------------------- limits along ker A
def test_limit_structure_separates_ker_block_and_residual():
    rng = np.random.default_rng(11)
    Q = rng.normal(size=(1, 3))
    A = -Q.T @ Q / np.sqrt(3)
    U = kernel_basis(A)
    assert U.shape == (3, 2)
    np.testing.assert_allclose(A @ U, 0.0, atol=1e-12)
    P = np.array([[2.0, 0.3], [0.3, 0.5]])
    r = Q[0] / np.linalg.norm(Q[0])
    for eps, full in ((1e-3, 3), (1e-9, 2)):
        S_ = U @ P @ U.T + eps * np.outer(r, r)
        got_full, got_ker, off, ker_min = limit_structure(S_, A)
        assert (got_full, got_ker) == (full, 2)
        assert off == pytest.approx(eps / np.linalg.norm(S_), rel=1e-6)
        assert ker_min == pytest.approx(np.linalg.eigvalsh(P)[0] / np.linalg.eigvalsh(S_)[-1], rel=1e-9)


@settings(max_examples=20)
@given(st.integers(0, 2**31 - 1), st.integers(3, 5))
def test_kernel_limit_is_the_library_clustering_limit(seed, d):
    rng = np.random.default_rng(seed)
    Q = rng.normal(size=(d // 2, d))
    A = -Q.T @ Q / np.sqrt(d)
    S0 = rng.normal(size=(d, d))
    sigma0 = S0 @ S0.T + 0.1 * np.eye(d)
    lim = kernel_limit(sigma0, A)
    np.testing.assert_allclose(
        lim, np.asarray(clustering_limit(sigma0, A, 1.0)), rtol=1e-7, atol=1e-9 * np.abs(lim).max()
    )
    assert np.linalg.matrix_rank(lim, tol=1e-8 * np.abs(lim).max()) == d - d // 2


# --------------------------------------------------------------------------- clusters of directions
@settings(max_examples=25)
@given(st.integers(0, 2**31 - 1), st.integers(1, 40), st.sampled_from([0.5, 1.0, 5.0, 30.0]))
def test_angular_clusters_are_connected_components(seed, n, theta):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2, n, 3)) * rng.uniform(0.1, 3.0, size=(2, n, 1))
    x[:, 0] = 0.0  # a zero token is its own cluster
    got = angular_clusters(x, theta)
    for b in range(2):
        unit = x[b] / np.maximum(np.linalg.norm(x[b], axis=1, keepdims=True), 1e-300)
        angle = np.degrees(np.arccos(np.clip(unit @ unit.T, -1, 1)))
        g = nx.Graph()
        g.add_nodes_from(range(n))
        g.add_edges_from((i, j) for i in range(n) for j in range(i + 1, n) if angle[i, j] < theta and i and j)
        assert got[b] == nx.number_connected_components(g)


def test_angular_clusters_counts_a_wide_bundle_once():
    a = np.radians(np.arange(0.0, 4.0, 0.5))  # one bundle 3.5° wide, gaps 0.5°
    x = np.stack([np.cos(a), np.sin(a)], axis=-1)
    assert int(angular_clusters(x, 1.0)) == 1
    assert int(angular_clusters(x, 0.4)) == len(a)


def test_token_angles_and_spread(no_typecheck):
    x = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 1e-12], [-1.0, -1e-12]])
    np.testing.assert_allclose(token_angles(x), [0.0, 90.0, 180.0, -180.0], atol=1e-9)
    assert angular_spread(np.array([10.0, 20.0, 15.0])) == pytest.approx(10.0)
    assert angular_spread(np.array([179.0, -179.0])) == pytest.approx(2.0)
    assert angular_spread(np.array([0.0, 120.0, 240.0])) == pytest.approx(240.0)
    with pytest.raises(ParameterError, match=r"`x` must have shape \(\.\.\., 2\)"):
        token_angles(np.ones((3, 3)))
    with pytest.raises(ParameterError, match="`theta_deg` must be an angle in degrees in \\(0, 180\\]; got 0"):
        angular_clusters(np.ones((3, 2)), 0)


# --------------------------------------------------------------------------- doctests
