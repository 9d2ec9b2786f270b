"""The paper's parameter sets and scalings (hassejax.dynamics.paper) and the authors' Euler (projected_euler).

The authors' right-hand sides are re-typed from their ``utils.py`` (NumPy/SciPy) and compared
with the library's Gaussian maps of the modules the builders return; the projected Euler step
against an eigen-decomposition; one vmapped sweep over a stacked kernel module against the
softmax closed form.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from hassejax.dynamics import (
    MultiHead,
    Softmax,
    blowup_time_closed_form,
    moment_derivatives,
    paper,
    projected_euler,
    softmax_covariance_closed_form,
    solve_gaussian,
    status_names,
)
from hassejax.dynamics.geometry import trace_one_grid
from hassejax.dynamics.sweeps import sweep
from hassejax.errors import ParameterError


# ----------------------------------------------------------------------------- the authors' right-hand sides
def authors_rhs_trad(S, Q, K, V):
    d = S.shape[0]
    A = K.T @ Q / np.sqrt(d)
    r = V @ S @ A @ S
    return r + r.T


def authors_rhs_l2(S, Q, K, V):
    d = S.shape[0]
    A = K.T @ Q / np.sqrt(d)
    inv = np.linalg.inv(np.eye(d) + 2 * K.T @ K @ S)
    r = 2 * V @ S @ inv @ A @ S
    return r + r.T


def authors_rhs_multihead(S, Q, K, V, H):
    d = S.shape[0]
    W = np.eye(d)
    k = d // H
    r = 0
    for h in range(H):
        A_h = K[k * h : k * (h + 1)].T @ Q[k * h : k * (h + 1)] / np.sqrt(k)
        C_h = W[k * h : k * (h + 1)].T @ V[k * h : k * (h + 1)]
        r = r + C_h @ S @ A_h @ S
    return r + r.T


def authors_rhs_sinkhorn(S, Q, K, V):
    d = S.shape[0]
    S_sqrt = scipy.linalg.sqrtm(S).real
    A = K.T @ Q
    prod = S_sqrt @ A.T
    C_S = 0.5 * (
        S_sqrt @ scipy.linalg.sqrtm(4 * prod @ S @ prod.T + np.eye(d)).real @ np.linalg.pinv(S_sqrt) - np.eye(d)
    )
    r = V @ np.linalg.pinv(A.T) @ np.linalg.pinv(S) @ C_S @ S
    return r + r.T


def authors_psd_projection(S, tol=1e-14):
    w, q = np.linalg.eigh(S)
    w[w < 0] = tol
    return q @ np.diag(w) @ q.T


def _rhs(model, S):
    d = S.shape[0]
    return np.asarray(moment_derivatives(model, 0.0, jnp.zeros(d), jnp.asarray(S))[1])


def _random_spd(rng, d):
    g = rng.normal(size=(d, d))
    return g @ g.T / d + 0.1 * np.eye(d)


FIGURES = {
    "1": (paper.FIG1_Q, paper.FIG1_K, paper.FIG1_V),
    "4": (paper.FIG4_Q, paper.FIG4_K, paper.FIG4_V),
    "5": (paper.FIG5_Q, paper.FIG5_K, np.eye(2)),
    "6": (paper.FIG4_Q, paper.FIG4_K, paper.FIG6_V),
}


@pytest.mark.parametrize(
    ("make", "authors"),
    [
        (paper.softmax_model, authors_rhs_trad),
        (paper.l2_model, authors_rhs_l2),
        (paper.sinkhorn_model, authors_rhs_sinkhorn),
        (paper.multihead_model, lambda S, Q, K, V: authors_rhs_multihead(S, Q, K, V, 2)),
    ],
    ids=["softmax", "l2", "sinkhorn", "multihead"],
)
@pytest.mark.parametrize("figure", sorted(FIGURES))
def test_models_reproduce_the_authors_right_hand_side(make, authors, figure):
    Q, K, V = FIGURES[figure]
    rng = np.random.default_rng(int(figure))
    model = make(V, Q, K)
    for _ in range(3):
        S = _random_spd(rng, 2)
        np.testing.assert_allclose(_rhs(model, S), authors(S, Q, K, V), rtol=1e-9, atol=1e-12)


def test_one_row_query_padded_with_a_zero_row_is_exact():
    """`Q`, `K` with one row (figures 2, 3 and d = 3 of figure 7) are padded to two rows for one program shape."""
    rng = np.random.default_rng(7)
    for d in (2, 3):
        Q = rng.normal(size=(1, d))
        V = _random_spd(rng, d)
        padded = paper.l2_model(V, Q, -Q)
        plain = paper.l2_model(V, Q, -Q, rows=1)
        assert padded.Q.shape == (2, d) and np.all(np.asarray(padded.Q)[1:] == 0) and plain.Q.shape == (1, d)
        S = _random_spd(rng, d)
        np.testing.assert_allclose(_rhs(padded, S), _rhs(plain, S), rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(_rhs(padded, S), authors_rhs_l2(S, Q, -Q, V), rtol=1e-9, atol=1e-14)


def test_figure_3_plane():
    """Two heads, head 0 `A_0 = −qqᵀ`, `C_0 = e_1e_1ᵀ`, head 1 `A_1 = 0`, `C_1 = e_2e_2ᵀ`: `Σ22' = 0`, `Σ' = 0` on
    the plane `(Σq)_1 = 0`."""
    q = paper.FIG2_Q_ROW
    model = paper.multihead_model(np.eye(2), np.stack([q, np.zeros(2)]), np.stack([-q, np.zeros(2)]))
    e = np.eye(2)
    explicit = MultiHead(
        [Softmax(V=np.outer(e[0], e[0]), A=-np.outer(q, q)), Softmax(V=np.outer(e[1], e[1]), A=np.zeros((2, 2)))]
    )
    rng = np.random.default_rng(3)
    for _ in range(5):
        S = _random_spd(rng, 2)
        dS = _rhs(model, S)
        assert abs(dS[1, 1]) < 1e-14
        np.testing.assert_allclose(dS, _rhs(explicit, S), atol=1e-15)
        np.testing.assert_allclose(dS, authors_rhs_multihead(S, q[None], -q[None], np.eye(2), 2), atol=1e-14)
        s11, s22 = S[0, 0], S[1, 1]
        s12 = -s11 * q[0] / q[1]  # on the plane
        on = np.array([[s11, s12], [s12, s22 + s12**2 / s11]])
        np.testing.assert_allclose(_rhs(model, on), 0.0, atol=1e-13)


def test_figure_5_closed_form_blowup_times():
    g = trace_one_grid(40, 40, -1, 1)
    A = np.asarray(paper.softmax_model(np.eye(2), paper.FIG5_Q, paper.FIG5_K).A)
    t = np.asarray(blowup_time_closed_form(g, A, 1.0))
    assert t.min() == pytest.approx(0.353, abs=5e-4) and t.max() == pytest.approx(8.94, abs=5e-3)
    assert float(blowup_time_closed_form(np.eye(2) / 2, A, 1.0)) == pytest.approx(0.70234, abs=5e-6)


def test_builders_name_the_argument(no_typecheck):
    with pytest.raises(ParameterError, match="`V`"):
        paper.softmax_model(np.ones((2, 3)), np.ones((1, 3)), np.ones((1, 3)))
    with pytest.raises(ParameterError, match="`Q` and `K`"):
        paper.sinkhorn_model(np.eye(2), np.ones((1, 2)), np.ones((2, 2)))
    with pytest.raises(ParameterError, match="`rows`"):
        paper.l2_model(np.eye(3), np.ones((3, 3)), np.ones((3, 3)))
    with pytest.raises(ParameterError, match="`Q` has 3 rows"):
        paper.multihead_model(np.eye(2), np.ones((3, 2)), np.ones((3, 2)))


# ----------------------------------------------------------------------------- the authors' Euler step (figure 6)
@settings(max_examples=40)
@given(arrays(np.float64, (2, 2), elements=st.floats(-2, 2)))
def test_closed_form_psd_projection_matches_the_authors(m):
    S = 0.5 * (m + m.T)
    got = np.asarray(projected_euler.psd_projection_2x2(jnp.asarray(S)[None]))[0]
    np.testing.assert_allclose(got, authors_psd_projection(S.copy()), atol=1e-12)


def test_closed_form_l2_rhs_matches_the_authors():
    model = paper.l2_model(paper.FIG6_V, paper.FIG4_Q, paper.FIG4_K)
    V, Q, K = (np.asarray(x) for x in (model.V, model.Q, model.K))
    rng = np.random.default_rng(6)
    S = np.stack([_random_spd(rng, 2) for _ in range(4)])
    got = np.asarray(projected_euler.l2_rhs_2x2(jnp.asarray(S), V, K.T @ Q, K.T @ K))
    want = np.stack([authors_rhs_l2(s, paper.FIG4_Q, paper.FIG4_K, paper.FIG6_V) for s in S])
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_projected_euler_against_a_numpy_loop():
    """Three members of figure 6's L2 set-up, 300 steps of the loop against a plain NumPy re-run."""
    model = paper.l2_model(paper.FIG6_V, paper.FIG4_Q, paper.FIG4_K)
    V, Q, K = (np.asarray(x) for x in (model.V, model.Q, model.K))
    S0 = trace_one_grid(3, 3, -0.6, 0.6)[[0, 4, 7]]
    step, lo, hi = 0.002, 1e-1, 1.3
    out = projected_euler.projected_euler_l2(S0, V, K.T @ Q, K.T @ K, step=step, tol_low=lo, tol_high=hi, max_iter=300)
    for j, S in enumerate(S0):
        outcome, stop, peak = 0, -1, np.trace(S)
        for i in range(300):
            rhs = authors_rhs_l2(S, paper.FIG4_Q, paper.FIG4_K, paper.FIG6_V)
            S_new = authors_psd_projection(S + step * rhs)
            peak = max(peak, np.trace(S_new))  # the step's trace counts even when the member stops converged
            if np.linalg.norm(rhs) < lo:
                outcome, stop = 1, i
                break
            S = S_new
            if np.trace(S) > hi:
                outcome, stop = 2, i
                break
        assert (int(out.outcome[j]), int(out.stop[j])) == (outcome, stop)
        assert float(out.peak[j]) == pytest.approx(peak, rel=1e-9)


def test_projected_euler_names_the_argument():
    with pytest.raises(ParameterError, match="`step`"):
        projected_euler.projected_euler_l2(
            np.eye(2)[None], np.eye(2), np.eye(2), np.eye(2), step=0.0, tol_low=1.0, tol_high=2.0
        )


# ----------------------------------------------------------------------------- a sweep over a stacked module
def test_sweep_over_stacked_softmax_modules_matches_the_closed_form():
    """Five d = 3 members, each its own Softmax (stacked leaves: an Equinox module is a pytree), in
    chunks of two: order kept, saved Σ(t) equal to the closed form for V = I."""
    rng = np.random.default_rng(0)
    d, n = 3, 5
    cov0 = np.stack([_random_spd(rng, d) for _ in range(n)])
    Qs = rng.normal(size=(n, 1, d))
    models = [paper.softmax_model(np.eye(d), q, -q) for q in Qs]  # A ⪯ 0: converges, no blow-up
    stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *models)
    ts = np.linspace(0.0, 5.0, 6)

    def member(m):
        sol = solve_gaussian(m["model"], jnp.zeros(d), m["cov0"], t1=5.0, ts=ts, rtol=1e-10, atol=1e-12)
        return {"cov": sol.cov, "status": sol.status}

    out = sweep(member, {"model": stacked, "cov0": cov0}, chunk_size=2, progress=False, shard=False)
    assert out["cov"].shape == (n, len(ts), d, d)
    assert set(status_names(np.asarray(out["status"])).tolist()) == {"completed"}
    for j, m in enumerate(models):
        want = np.asarray(
            softmax_covariance_closed_form(np.broadcast_to(cov0[j], (len(ts), d, d)), np.asarray(m.A), 1.0, ts)
        )
        np.testing.assert_allclose(out["cov"][j], want, rtol=1e-7, atol=1e-9)
