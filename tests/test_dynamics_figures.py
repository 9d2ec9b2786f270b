"""Fast checks of the helpers behind the paper's dynamics figures 1–7 (experiments/, spec dynamics.md §7a).

The full runs check their own numbers into their JSON; here: the grids, the coordinates,
the parameter conventions against the authors' right-hand sides (re-typed from their
``utils.py``), the exact zero-padding of the batched solve, the authors' random draws and
their projected Euler step, and one small vmapped solve of the wrapper against the softmax
closed form.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))

import _dynamics_common as dc  # noqa: E402
import convergence_or_blowup as fig6  # noqa: E402
import convergence_to_line as fig2  # noqa: E402
import convergence_to_plane as fig3  # noqa: E402
import rank_histograms as fig7  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from hassejax.dynamics import blowup_time_closed_form, clustering_limit, moment_derivatives, softmax_covariance_closed_form  # noqa: E402
from hassejax.dynamics import AttentionParams, MultiHeadParams  # noqa: E402


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
    C_S = 0.5 * (S_sqrt @ scipy.linalg.sqrtm(4 * prod @ S @ prod.T + np.eye(d)).real @ np.linalg.pinv(S_sqrt) - np.eye(d))
    r = V @ np.linalg.pinv(A.T) @ np.linalg.pinv(S) @ C_S @ S
    return r + r.T


def authors_psd_projection(S, tol=1e-14):
    w, q = np.linalg.eigh(S)
    w[w < 0] = tol
    return q @ np.diag(w) @ q.T


def _library_rhs(kind, params, S):
    if kind == "multihead":
        p = MultiHeadParams([AttentionParams(V=params["C"][h], A=params["A"][h]) for h in range(len(params["A"]))])
    elif kind == "l2":
        p = AttentionParams(V=params["V"], Q=params["Q"], K=params["K"])
    else:
        p = AttentionParams(V=params["V"], A=params["A"])
    d = S.shape[0]
    return np.asarray(moment_derivatives(kind, 0.0, jnp.zeros(d), jnp.asarray(S), p)[1])


def _random_spd(rng, d):
    g = rng.normal(size=(d, d))
    return g @ g.T / d + 0.1 * np.eye(d)


# ----------------------------------------------------------------------------- grids and coordinates
@pytest.mark.parametrize(("n", "lo", "count"), [(10, -0.5, 100), (20, -1.0, 276), (30, -1.0, 648), (40, -1.0, 1184)])
def test_trace_one_grid_sizes_of_the_spec(n, lo, count):
    g = dc.trace_one_grid(n, n, lo, -lo)
    assert g.shape == (count, 2, 2)
    np.testing.assert_allclose(np.trace(g, axis1=1, axis2=2), 1.0)
    np.testing.assert_array_equal(g, np.swapaxes(g, 1, 2))
    assert np.all(np.linalg.eigvalsh(g)[:, 0] > 0)
    # the authors' order: u (Σ11 − Σ22) major, w (2Σ12) minor
    x = dc.cone_coords(g)
    assert np.all(np.diff(x[:, 0]) >= 0)


@settings(max_examples=50)
@given(arrays(np.float64, (2, 2), elements=st.floats(-3, 3)))
def test_cone_and_disk_coordinates(m):
    S = m @ m.T
    x, y, z = dc.cone_coords(S)
    assert z >= np.hypot(x, y) - 1e-12  # PSD ⇒ inside the cone
    if z > 1e-6:
        assert np.hypot(*dc.disk_coords(S)) <= 1 + 1e-9


@settings(max_examples=50)
@given(st.floats(-89.9, 89.9), st.floats(0.1, 10.0))
def test_rank_one_lies_on_cone_boundary_and_unit_circle(theta, s):
    v = np.array([np.cos(np.radians(theta)), np.sin(np.radians(theta))])
    S = s * np.outer(v, v)
    x, y, z = dc.cone_coords(S)
    assert z == pytest.approx(np.hypot(x, y), abs=1e-12)
    assert np.hypot(*dc.disk_coords(S)) == pytest.approx(1.0, abs=1e-12)
    assert dc.rank_one_direction_angle(S) == pytest.approx(theta, abs=1e-9)
    np.testing.assert_allclose(dc.rank_one_ray(theta, s)[-1], [x, y, z], atol=1e-12)


def test_isotropic_angles_of_figure_4():
    A = dc.softmax_params(dc.FIG4_V, dc.FIG4_Q, dc.FIG4_K)["A"]
    angles = dc.isotropic_angles(A)
    np.testing.assert_allclose(angles, [-58.14, -7.60], atol=5e-3)
    for th in np.radians(angles):
        v = np.array([np.cos(th), np.sin(th)])
        assert abs(v @ A @ v) < 1e-12


def test_figure_5_closed_form_blowup_times():
    g = dc.trace_one_grid(40, 40, -1, 1)
    A = dc.softmax_params(np.eye(2), dc.FIG5_Q, dc.FIG5_K)["A"]
    t = np.asarray(blowup_time_closed_form(g, A, 1.0))
    assert t.min() == pytest.approx(0.353, abs=5e-4) and t.max() == pytest.approx(8.94, abs=5e-3)
    assert float(blowup_time_closed_form(np.eye(2) / 2, A, 1.0)) == pytest.approx(0.70234, abs=5e-6)


def test_save_fractions_and_log_slope():
    s = dc.SAVE_FRACTIONS
    assert s.shape == (dc.N_SAVE,) and s[0] == 0 and s[-1] < 1 and np.all(np.diff(s) >= 0)
    ts = np.geomspace(1, 1e6, 50)[None]
    assert dc.loglog_slope(ts, 3.0 / ts, np.ones_like(ts, bool))[0] == pytest.approx(-1.0, abs=1e-12)


# ----------------------------------------------------------------------------- parameter conventions
@pytest.mark.parametrize(
    ("kind", "make", "authors"),
    [
        ("softmax", dc.softmax_params, authors_rhs_trad),
        ("l2", dc.l2_params, authors_rhs_l2),
        ("sinkhorn", dc.sinkhorn_params, authors_rhs_sinkhorn),
        ("multihead", dc.multihead_params, lambda S, Q, K, V: authors_rhs_multihead(S, Q, K, V, 2)),
    ],
)
@pytest.mark.parametrize("figure", ["1", "4", "5", "6"])
def test_parameters_reproduce_the_authors_right_hand_side(kind, make, authors, figure):
    Q, K, V = {
        "1": (dc.FIG1_Q, dc.FIG1_K, dc.FIG1_V),
        "4": (dc.FIG4_Q, dc.FIG4_K, dc.FIG4_V),
        "5": (dc.FIG5_Q, dc.FIG5_K, np.eye(2)),
        "6": (dc.FIG4_Q, dc.FIG4_K, dc.FIG6_V),
    }[figure]
    rng = np.random.default_rng(int(figure))
    for _ in range(3):
        S = _random_spd(rng, 2)
        np.testing.assert_allclose(_library_rhs(kind, make(V, Q, K), S), authors(S, Q, K, V), rtol=1e-9, atol=1e-12)


def test_figure_2_limit_and_figure_3_plane():
    g = dc.trace_one_grid(10, 10, -0.5, 0.5)
    p = dc.softmax_params(np.eye(2), fig2.Q, fig2.K)
    np.testing.assert_allclose(np.asarray(clustering_limit(g, p["A"], 1.0)), fig2.sigma_inf(g), rtol=1e-9, atol=1e-12)
    # figure 3: Σ22' = 0 everywhere; Σ' = 0 on the plane (Σq)_1 = 0; equals the authors' one-row multi-head rhs
    rng = np.random.default_rng(3)
    q = fig3.q
    for _ in range(5):
        S = _random_spd(rng, 2)
        dS = _library_rhs("multihead", fig3.params(), S)
        assert abs(dS[1, 1]) < 1e-14
        np.testing.assert_allclose(dS, authors_rhs_multihead(S, q[None], -q[None], np.eye(2), 2), atol=1e-14)
        s11, s22 = S[0, 0], S[1, 1]
        s12 = -s11 * q[0] / q[1]  # on the plane
        on = np.array([[s11, s12], [s12, s22 + s12**2 / s11]])
        assert fig3.plane_residual(on) < 1e-14
        np.testing.assert_allclose(_library_rhs("multihead", fig3.params(), on), 0.0, atol=1e-13)


def test_one_row_query_padded_with_a_zero_row_is_exact():
    """`Q`, `K` with one row (figures 2, 3 and d = 3 of figure 7) are padded to `K_ROWS` rows for one program shape."""
    rng = np.random.default_rng(7)
    for d in (2, 3):
        Q = rng.normal(size=(1, d))
        V = _random_spd(rng, d)
        p = dc.l2_params(V, Q, -Q)
        shapes = dc.param_shapes("l2", d)
        padded = {k: dc.embed(v, shapes[k]) for k, v in p.items()}
        assert padded["Q"].shape == (dc.K_ROWS, d) and np.all(padded["Q"][1:] == 0)
        S = _random_spd(rng, d)
        np.testing.assert_allclose(_library_rhs("l2", padded, S), _library_rhs("l2", p, S), rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(_library_rhs("l2", padded, S), authors_rhs_l2(S, Q, -Q, V), rtol=1e-9, atol=1e-14)


# ----------------------------------------------------------------------------- figure 7 draws
def test_figure_7_parameter_sets_are_the_authors_draws():
    members = fig7.parameter_sets("softmax", 3)
    np.random.seed(40)  # the authors' code, verbatim order
    dims = np.repeat([3, 4, 5], 100)
    Q_list = [np.random.randn(d // 2, d) for d in dims]
    np.random.seed(26)
    V_list = [np.random.randn(d, d) for d in dims]
    first = {}
    for j, d in enumerate([3, 4, 5]):
        np.random.seed(41)
        first[d] = [np.random.randn(d, d) for _ in range(3)]
    by = {(m["row"], m["d"], m["index"]): m for m in members}
    assert len(members) == 2 * 3 * 3
    for j, d in enumerate([3, 4, 5]):
        for i in range(3):
            m = by[("V random SPD", d, i)]
            np.testing.assert_array_equal(m["Q"], Q_list[100 * j + i])
            np.testing.assert_array_equal(m["V"], V_list[100 * j + i].T @ V_list[100 * j + i])
            np.testing.assert_array_equal(m["Sigma0"], first[d][i] @ first[d][i].T)
            np.testing.assert_array_equal(by[("V = I", d, i)]["V"], np.eye(d))


# ----------------------------------------------------------------------------- the authors' Euler step (figure 6)
@settings(max_examples=40)
@given(arrays(np.float64, (2, 2), elements=st.floats(-2, 2)))
def test_closed_form_psd_projection_matches_the_authors(m):
    S = 0.5 * (m + m.T)
    got = np.asarray(fig6._psd_projection_2x2(jnp.asarray(S)[None]))[0]
    np.testing.assert_allclose(got, authors_psd_projection(S.copy()), atol=1e-12)


def test_closed_form_l2_rhs_matches_the_authors():
    p = dc.l2_params(dc.FIG6_V, dc.FIG4_Q, dc.FIG4_K)
    rng = np.random.default_rng(6)
    S = np.stack([_random_spd(rng, 2) for _ in range(4)])
    got = np.asarray(fig6._l2_rhs_2x2(jnp.asarray(S), p["V"], p["K"].T @ p["Q"], p["K"].T @ p["K"]))
    want = np.stack([authors_rhs_l2(s, dc.FIG4_Q, dc.FIG4_K, dc.FIG6_V) for s in S])
    np.testing.assert_allclose(got, want, rtol=1e-12)


# ----------------------------------------------------------------------------- the batched solve
def test_batched_solve_matches_softmax_closed_form_with_padding_and_chunks():
    """Six d = 3 members in chunks of four (the last chunk padded by repeating a member): order kept,
    padding stripped, saved Σ(t) equal to the closed form for V = I."""
    rng = np.random.default_rng(0)
    d, n = 3, 6
    cov0 = np.stack([_random_spd(rng, d) for _ in range(n)])
    Q = rng.normal(size=(1, d))
    params = dc.softmax_params(np.eye(d), Q, -Q)  # A ⪯ 0: converges, no blow-up
    ts = np.broadcast_to(np.linspace(0.0, 5.0, dc.N_SAVE), (n, dc.N_SAVE))
    sol = dc.solve("softmax", params, cov0, t1=5.0, threshold=1e8, tol=1e-300, capacity=4, ts=ts)
    assert sol["cov"].shape == (n, dc.N_SAVE, d, d)
    assert np.all(sol["valid"])
    want = np.asarray(softmax_covariance_closed_form(cov0[:, None], params["A"], 1.0, ts))
    np.testing.assert_allclose(sol["cov"], want, rtol=1e-7, atol=1e-9)
    assert dc.status_counts(sol["status"]) == {"completed": n}


def test_limit_structure_separates_ker_block_and_residual():
    rng = np.random.default_rng(11)
    Q = rng.normal(size=(1, 3))
    A = -Q.T @ Q / np.sqrt(3)
    U = fig7.kernel_basis(A)
    assert U.shape == (3, 2)
    np.testing.assert_allclose(A @ U, 0.0, atol=1e-12)
    P = np.array([[2.0, 0.3], [0.3, 0.5]])
    r = Q[0] / np.linalg.norm(Q[0])
    for eps, full in ((1e-3, 3), (1e-9, 2)):
        S = U @ P @ U.T + eps * np.outer(r, r)
        got_full, got_ker, off, ker_min = fig7.limit_structure(S, A)
        assert (got_full, got_ker) == (full, 2)
        assert off == pytest.approx(eps / np.linalg.norm(S), rel=1e-6)
        assert ker_min == pytest.approx(np.linalg.eigvalsh(P)[0] / np.linalg.eigvalsh(S)[-1], rel=1e-9)
