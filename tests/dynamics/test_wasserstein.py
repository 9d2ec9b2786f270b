"""Tests of hassejax.dynamics.wasserstein: empirical W2 against brute force and the 1-D sorted formula,
Gaussian W2 and geodesics against SciPy's sqrtm."""

import itertools

import numpy as np
import pytest
import scipy.linalg

from hassejax.dynamics.wasserstein import empirical_w2, gaussian_geodesic, gaussian_w2
from hassejax.errors import ParameterError


@pytest.mark.parametrize("n", [1, 2, 4, 6])
def test_empirical_w2_equals_brute_force_over_permutations(n):
    rng = np.random.default_rng(n)
    x, y = rng.normal(size=(n, 2)), rng.normal(size=(n, 2))
    best = min(np.mean(np.sum((x - y[list(p)]) ** 2, axis=1)) for p in itertools.permutations(range(n)))
    w2, sigma = empirical_w2(x, y)
    assert w2 == pytest.approx(np.sqrt(best), rel=1e-12)
    assert sorted(sigma.tolist()) == list(range(n))
    assert np.mean(np.sum((x - y[sigma]) ** 2, axis=1)) == pytest.approx(best, rel=1e-12)


def test_empirical_w2_one_dimension_is_the_sorted_matching():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(50, 1)), rng.exponential(size=(50, 1))
    want = np.sqrt(np.mean((np.sort(x[:, 0]) - np.sort(y[:, 0])) ** 2))
    assert empirical_w2(x, y)[0] == pytest.approx(want, rel=1e-12)


def test_empirical_w2_rejects_unequal_sizes_and_nan(no_typecheck):
    with pytest.raises(ParameterError, match="same shape"):
        empirical_w2(np.zeros((3, 2)), np.zeros((4, 2)))
    with pytest.raises(ParameterError, match="`x` must be finite"):
        empirical_w2(np.full((2, 2), np.nan), np.zeros((2, 2)))


def _spd(rng, d):
    g = rng.normal(size=(d, d))
    return g @ g.T / d + 0.1 * np.eye(d)


def _w2_scipy(m0, s0, m1, s1):
    r0 = np.real(scipy.linalg.sqrtm(s0))
    cross = np.real(np.trace(scipy.linalg.sqrtm(r0 @ s1 @ r0)))
    return np.sqrt(max(np.sum((m0 - m1) ** 2) + np.trace(s0) + np.trace(s1) - 2 * cross, 0.0))


def test_gaussian_w2_matches_scipy_sqrtm():
    rng = np.random.default_rng(2)
    m0, m1, s0, s1 = rng.normal(size=3), rng.normal(size=3), _spd(rng, 3), _spd(rng, 3)
    assert gaussian_w2(m0, s0, m1, s1) == pytest.approx(_w2_scipy(m0, s0, m1, s1), rel=1e-10)


def test_gaussian_geodesic_ends_and_constant_speed():
    rng = np.random.default_rng(3)
    m0, m1, s0, s1 = rng.normal(size=3), rng.normal(size=3), _spd(rng, 3), _spd(rng, 3)
    s = np.array([0.0, 0.3, 0.7, 1.0])
    means, covs = gaussian_geodesic(m0, s0, m1, s1, s)
    np.testing.assert_allclose(means[[0, -1]], [m0, m1], atol=1e-12)
    np.testing.assert_allclose(covs[0], s0, atol=1e-12)
    np.testing.assert_allclose(covs[-1], s1, atol=1e-10)
    total = _w2_scipy(m0, s0, m1, s1)
    for i, j in [(0, 1), (1, 2), (2, 3), (0, 2)]:
        assert _w2_scipy(means[i], covs[i], means[j], covs[j]) == pytest.approx((s[j] - s[i]) * total, rel=1e-7)


def test_gaussian_geodesic_commuting_interpolates_standard_deviations():
    means, covs = gaussian_geodesic(
        np.zeros(2), np.diag([0.04, 1.0]), np.zeros(2), np.diag([0.64, 0.25]), np.array([0.25])
    )
    want = (0.75 * np.sqrt([0.04, 1.0]) + 0.25 * np.sqrt([0.64, 0.25])) ** 2
    np.testing.assert_allclose(np.diag(covs[0]), want, rtol=1e-12)


def test_gaussian_geodesic_rejects_singular_start():
    with pytest.raises(ParameterError, match="`cov0` must be positive definite"):
        gaussian_geodesic(np.zeros(2), np.diag([1.0, 0.0]), np.zeros(2), np.eye(2), np.array([0.5]))
