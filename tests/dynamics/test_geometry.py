"""Covariance geometry (hassejax.dynamics.geometry) and the antithetic sample (hassejax.dynamics.sampling).

Against independent computations: eigen-decompositions (NumPy/SciPy), the quadric of an ellipse,
the library's clustering limit for the rank-one limit, explicit moments for the sample.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from hassejax.dynamics import clustering_limit
from hassejax.dynamics.geometry import (
    cone_coords,
    disk_coords,
    ellipse,
    isotropic_angles,
    psd_factor,
    rank_one_direction_angle,
    rank_one_limit,
    rank_one_ray,
    rel_frobenius,
    trace_one_grid,
)
from hassejax.dynamics.sampling import antithetic_sample
from hassejax.errors import ParameterError


# ----------------------------------------------------------------------------- grids and coordinates
@pytest.mark.parametrize(("n", "lo", "count"), [(10, -0.5, 100), (20, -1.0, 276), (30, -1.0, 648), (40, -1.0, 1184)])
def test_trace_one_grid_sizes_of_the_spec(n, lo, count):
    g = trace_one_grid(n, n, lo, -lo)
    assert g.shape == (count, 2, 2)
    np.testing.assert_allclose(np.trace(g, axis1=1, axis2=2), 1.0)
    np.testing.assert_array_equal(g, np.swapaxes(g, 1, 2))
    assert np.all(np.linalg.eigvalsh(g)[:, 0] > 0)
    # the authors' order: u (Σ11 − Σ22) major, w (2Σ12) minor; every kept point inside the unit disk
    x = cone_coords(g)
    assert np.all(np.diff(x[:, 0]) >= 0)
    assert np.all(np.hypot(x[:, 0], x[:, 1]) < 1.0)


def test_trace_one_grid_counts_against_a_loop():
    u = np.linspace(-1.0, 1.0, 7)
    want = [(a, b) for a in u for b in u if a * a + b * b < 1.0]
    g = trace_one_grid(7, 7, -1.0, 1.0)
    np.testing.assert_allclose(cone_coords(g)[:, :2], want, atol=1e-15)


@settings(max_examples=50)
@given(arrays(np.float64, (2, 2), elements=st.floats(-3, 3)))
def test_cone_and_disk_coordinates(m):
    S = m @ m.T
    x, y, z = cone_coords(S)
    assert z >= np.hypot(x, y) - 1e-12  # PSD ⇒ inside the cone
    w = np.linalg.eigvalsh(S)
    assert np.hypot(x, y) == pytest.approx(w[1] - w[0], abs=1e-9)  # the cone's radius is the eigenvalue gap
    if z > 1e-6:
        assert np.hypot(*disk_coords(S)) <= 1 + 1e-9


@settings(max_examples=50)
@given(st.floats(-89.9, 89.9), st.floats(0.1, 10.0))
def test_rank_one_lies_on_cone_boundary_and_unit_circle(theta, s):
    v = np.array([np.cos(np.radians(theta)), np.sin(np.radians(theta))])
    S = s * np.outer(v, v)
    x, y, z = cone_coords(S)
    assert z == pytest.approx(np.hypot(x, y), abs=1e-12)
    assert np.hypot(*disk_coords(S)) == pytest.approx(1.0, abs=1e-12)
    assert rank_one_direction_angle(S) == pytest.approx(theta, abs=1e-9)
    np.testing.assert_allclose(rank_one_ray(theta, s)[-1], [x, y, z], atol=1e-12)


@settings(max_examples=30)
@given(arrays(np.float64, (2, 2), elements=st.floats(-3, 3)))
def test_direction_angle_is_the_top_eigenvector(m):
    S = m @ m.T
    w, q = scipy.linalg.eigh(S)
    if w[1] - w[0] < 1e-6:
        return
    th = np.radians(rank_one_direction_angle(S))
    assert abs(abs(np.array([np.cos(th), np.sin(th)]) @ q[:, 1]) - 1.0) < 1e-9


def test_isotropic_angles_of_figure_4():
    from hassejax.dynamics import paper

    A = np.asarray(paper.softmax_model(paper.FIG4_V, paper.FIG4_Q, paper.FIG4_K).A)
    angles = isotropic_angles(A)
    np.testing.assert_allclose(angles, [-58.14, -7.60], atol=5e-3)
    for th in np.radians(angles):
        v = np.array([np.cos(th), np.sin(th)])
        assert abs(v @ A @ v) < 1e-12
    assert isotropic_angles(np.eye(2)).size == 0  # definite: no isotropic direction


def test_rank_one_limit_equals_the_library_clustering_limit():
    """`q⊥q⊥ᵀ/(q⊥ᵀΣ0⁻¹q⊥)` (figure 2) against :func:`clustering_limit` (an eigen-decomposition route)."""
    from hassejax.dynamics import paper

    g = trace_one_grid(10, 10, -0.5, 0.5)
    q = paper.FIG2_Q_ROW[None]
    A = np.asarray(paper.softmax_model(np.eye(2), q, -q).A)
    np.testing.assert_allclose(
        np.asarray(clustering_limit(g, A, 1.0)), rank_one_limit(g, paper.FIG2_Q_PERP), rtol=1e-9, atol=1e-12
    )


# ----------------------------------------------------------------------------- ellipses and factors
@settings(max_examples=25)
@given(c=st.floats(-0.95, 0.95), s1=st.floats(0.01, 5.0), s2=st.floats(0.01, 5.0), k=st.floats(0.5, 3.0))
def test_ellipse_points_lie_on_the_quadric(c, s1, s2, k):
    cov = np.array([[s1, c * np.sqrt(s1 * s2)], [c * np.sqrt(s1 * s2), s2]])
    mean = np.array([1.0, -2.0])
    pts = ellipse(mean, cov, k=k, m=50) - mean
    q = np.einsum("ni,ij,nj->n", pts, np.linalg.inv(cov), pts)
    np.testing.assert_allclose(q, k**2, rtol=1e-7)
    R = psd_factor(cov)
    np.testing.assert_allclose(R @ R.T, cov, rtol=1e-12, atol=1e-14)


def test_ellipse_of_rank_one_is_a_segment_and_rel_frobenius():
    u = np.array([0.6, 0.8])
    pts = ellipse(np.zeros(2), 4.0 * np.outer(u, u), k=1.0)
    # on the line through u, up to the width sqrt(eps·‖Σ‖) of the round-off eigenvalue of 4uuᵀ
    np.testing.assert_allclose(pts[:, 0] * u[1] - pts[:, 1] * u[0], 0.0, atol=1e-7)
    assert 2.0 * np.cos(np.pi / 199) <= np.max(pts @ u) <= 2.0 + 1e-12  # 200 points: the extreme up to the grid spacing
    b = np.array([[3.0, 0.0], [0.0, 4.0]])
    assert rel_frobenius(b + np.array([[0.0, 0.5], [0.0, 0.0]]), b) == pytest.approx(0.1)


def test_errors_name_the_argument(no_typecheck):
    with pytest.raises(ParameterError, match="`cov`"):
        cone_coords(np.eye(3))
    with pytest.raises(ParameterError, match="`n_u`"):
        trace_one_grid(0, 3, -1.0, 1.0)
    with pytest.raises(ParameterError, match="`A`"):
        isotropic_angles(np.eye(3))
    with pytest.raises(ParameterError, match="`direction`"):
        rank_one_limit(np.eye(2), np.ones(3))
    with pytest.raises(ParameterError, match="`num`"):
        rank_one_ray(0.0, 1.0, num=1)


def test_disk_coordinates_refuse_a_covariance_without_a_positive_trace():
    """A review: a zero covariance gave NaN disk coordinates (a NumPy warning), which draw_disk drew as nothing;
    `Σ/tr Σ` needs `tr Σ > 0`, so a zero, negative or NaN trace is refused with its index."""
    path = np.stack([np.eye(2), np.diag([1.0, 0.0]), np.zeros((2, 2))])
    np.testing.assert_allclose(disk_coords(path[:2]), [[0.0, 0.0], [1.0, 0.0]])
    with pytest.raises(ParameterError, match=r"^`cov` must have a positive finite trace .* tr Σ = 0 at index \(2,\)"):
        disk_coords(path)
    with pytest.raises(ParameterError, match=r"tr Σ = nan at index \(\)"):
        disk_coords(np.full((2, 2), np.nan))
    with pytest.raises(ParameterError, match=r"tr Σ = -2 at index \(\)"):
        disk_coords(-np.eye(2))


# ----------------------------------------------------------------------------- antithetic sample
@settings(max_examples=25)
@given(
    seed=st.integers(0, 2**31 - 1),
    n_half=st.sampled_from([2, 5, 16]),
    c=st.floats(-0.9, 0.9),
    s1=st.floats(0.05, 3.0),
    s2=st.floats(0.05, 3.0),
)
def test_antithetic_sample_has_exact_moments(seed, n_half, c, s1, s2):
    cov = np.array([[s1, c * np.sqrt(s1 * s2)], [c * np.sqrt(s1 * s2), s2]])
    mean = np.array([0.3, -1.0])
    x = antithetic_sample(jax.random.key(seed), mean, cov, 2 * n_half)
    assert x.shape == (2 * n_half, 2)
    np.testing.assert_allclose(x.mean(0), mean, atol=1e-12)
    xc = x - mean
    np.testing.assert_allclose(xc.T @ xc / len(x), cov, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(xc[:n_half], -xc[n_half:], atol=1e-12)  # pairs ±z


def test_antithetic_sample_of_a_singular_covariance():
    u = np.array([0.6, 0.8])
    x = antithetic_sample(jax.random.key(1), np.zeros(2), np.outer(u, u), 10)
    np.testing.assert_allclose(x[:, 0] * u[1] - x[:, 1] * u[0], 0.0, atol=1e-7)  # on the line through u
    np.testing.assert_allclose(x.T @ x / 10, np.outer(u, u), atol=1e-12)


def test_antithetic_sample_rejects_odd_or_small_n(no_typecheck):
    with pytest.raises(ParameterError, match=r"`n`.*even"):
        antithetic_sample(jax.random.key(0), np.zeros(2), np.eye(2), 5)
    with pytest.raises(ParameterError, match="`n`"):
        antithetic_sample(jax.random.key(0), np.zeros(3), np.eye(3), 4)
    with pytest.raises(ParameterError, match="`mean`"):
        antithetic_sample(jax.random.key(0), np.zeros(2), np.eye(3), 8)
