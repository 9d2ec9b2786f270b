"""kernel_limit_rank against the eigenvalues of the closed-form limit, computed independently in NumPy."""

import numpy as np
import pytest

from hassejax.dynamics.kernel_limit_rank import kernel_limit_rank
from hassejax.errors import ParameterError


def _limit(S, A):
    """Σ∞ = U(UᵀΣ0⁻¹U)⁻¹Uᵀ with U from an SVD of A (not kernel_basis)."""
    _, s, vt = np.linalg.svd(A)
    U = vt[s < 1e-9 * max(1.0, s.max())].T
    return U @ np.linalg.inv(U.T @ np.linalg.inv(S) @ U) @ U.T


@pytest.mark.parametrize("d", [3, 4, 5])
def test_rank_and_floor_match_the_limit_spectrum(d):
    rng = np.random.default_rng(d)
    for _ in range(20):
        Q = rng.standard_normal((d // 2, d))
        A = -Q.T @ Q / np.sqrt(d)
        G = rng.standard_normal((d, d))
        S = G @ G.T + 1e-3 * np.eye(d)
        r = kernel_limit_rank(S, A)
        w = np.linalg.eigvalsh(_limit(S, A))
        assert r.rank == d - d // 2 == int(np.sum(w > 1e-10 * w[-1]))
        assert r.eigenvalue_floor == pytest.approx(np.linalg.eigvalsh(S)[0])
        assert w[-r.rank] >= r.eigenvalue_floor * (1 - 1e-9)


def test_nearly_singular_sigma0_keeps_the_full_kernel_rank():
    # λ_min(Σ0) = 1e-7 along a kernel direction: the limit still has rank 2, its small eigenvalue >= 1e-7
    S = np.diag([10.0, 1e-7, 3.0])
    A = np.diag([0.0, 0.0, -1.0])
    r = kernel_limit_rank(S, A)
    w = np.linalg.eigvalsh(_limit(S, A))
    assert r.rank == 2
    assert np.sum(w > 1e-6 * w[-1]) == 1  # a 1e-6 rule would count one
    assert w[1] >= r.eigenvalue_floor * (1 - 1e-9)


def test_rejects_a_singular_sigma0():
    with pytest.raises(ParameterError, match="positive definite"):
        kernel_limit_rank(np.diag([1.0, 0.0]), np.diag([0.0, -1.0]))
