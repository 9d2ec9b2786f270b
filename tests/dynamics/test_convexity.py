"""Tests of hassejax.dynamics.convexity: the finite-difference second derivative of the twisted energy
along W2 geodesics against analytic second derivatives (translation, 1-D dilation) and a halved step."""

import numpy as np
import pytest

from hassejax.dynamics.convexity import energy_along_geodesic, negative_intervals
from hassejax.errors import ParameterError

S = np.array([[0.5, 0.1], [0.1, 0.3]])


def test_translation_matches_the_analytic_second_derivative():
    # A = −I, fixed Σ: E(α) = ½ det(I − Σ²)^{-1/2} exp(−αᵀPα), P = (I + Σ)⁻¹, α_s = α0 + s u.
    a0, a1 = np.array([-1.2, 0.4]), np.array([1.0, -0.2])
    u, P = a1 - a0, np.linalg.inv(np.eye(2) + S)
    s = np.linspace(0.0, 1.0, 11)
    g = energy_along_geodesic(a0, S, a1, S, -np.eye(2), s)
    alpha = a0 + s[:, None] * u
    e = 0.5 / np.sqrt(np.linalg.det(np.eye(2) - S @ S)) * np.exp(-np.einsum("ki,ij,kj->k", alpha, P, alpha))
    want = e * ((2 * alpha @ P @ u) ** 2 - 2 * u @ P @ u)
    np.testing.assert_allclose(g.energy, e, rtol=1e-12)
    np.testing.assert_allclose(g.second_derivative, want, rtol=1e-5, atol=2e-5)  # O(h²) = O(1e-6)
    assert g.second_derivative[5] < 0  # non-convex near α = 0 (spec dynamics.md §6)


def test_one_dimensional_dilation_matches_the_analytic_second_derivative():
    # α = 0, σ_s = r_s², r_s linear: E = f(σ) = ½(1 − σ²)^{-1/2}; E'' = f''(σ)(2 r r')² + 2 f'(σ) r'².
    r0, r1 = np.sqrt(0.05), np.sqrt(0.8)
    s = np.linspace(0.0, 1.0, 9)
    g = energy_along_geodesic(np.zeros(1), np.array([[r0**2]]), np.zeros(1), np.array([[r1**2]]), -np.eye(1), s)
    r, dr = (1 - s) * r0 + s * r1, r1 - r0
    sig = r**2
    f1 = 0.5 * sig * (1 - sig**2) ** -1.5
    f2 = 0.5 * ((1 - sig**2) ** -1.5 + 3 * sig**2 * (1 - sig**2) ** -2.5)
    np.testing.assert_allclose(g.second_derivative, f2 * (2 * r * dr) ** 2 + 2 * f1 * dr**2, rtol=1e-4)
    assert np.all(g.second_derivative > 0)


def test_general_geodesic_second_derivative_is_step_independent():
    s = np.linspace(0.0, 1.0, 7)
    args = (np.array([0.6, -0.3]), S, np.array([-0.5, 0.4]), np.array([[0.2, -0.05], [-0.05, 0.6]]), -np.eye(2), s)
    g1, g2 = energy_along_geodesic(*args, step=2e-3), energy_along_geodesic(*args, step=1e-3)
    np.testing.assert_allclose(g1.second_derivative, g2.second_derivative, rtol=1e-5, atol=1e-8)


def test_errors():
    z, half = np.zeros(1), np.array([0.5])
    with pytest.raises(ParameterError, match="`step`"):
        energy_along_geodesic(z, np.array([[0.5]]), z + 1, np.array([[0.5]]), -np.eye(1), half, step=0.0)
    with pytest.raises(ParameterError, match="domain"):
        energy_along_geodesic(z, np.array([[0.5]]), z, np.array([[1.5]]), -np.eye(1), np.ones(1))


def test_negative_intervals():
    s = np.arange(4.0)
    assert negative_intervals(s, np.array([-1.0, 1.0, -1.0, -1.0])) == [(0.0, 0.0), (2.0, 3.0)]
    assert negative_intervals(s, np.ones(4)) == []
