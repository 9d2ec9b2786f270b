"""closed_form_verdict against Σ(t) = (Σ0⁻¹ − vt(A + Aᵀ))⁻¹ evaluated directly (NumPy)."""

import numpy as np
import pytest

from hassejax.dynamics.verdict import Verdict, closed_form_verdict
from hassejax.errors import ParameterError


def _direct(S, A, v, t1):
    """Outcome from the matrix P(t) = Σ0⁻¹ − vt(A + Aᵀ): blow-up when P loses positive definiteness."""
    if v == 0:
        return Verdict.stationary
    P0, D = np.linalg.inv(S), v * (A + A.T)
    ts = np.concatenate([np.linspace(0, t1, 4001)[1:], np.geomspace(t1, 1e9, 4000)[1:]])
    mins = np.linalg.eigvalsh(P0 - ts[:, None, None] * D)[:, 0]
    if np.any(mins <= 0):
        return Verdict.blow_up_by_t1 if ts[np.argmax(mins <= 0)] <= t1 else Verdict.blow_up_after_t1
    tr = [np.trace(np.linalg.inv(P0 - t * D)) for t in (1e9, 1e12)]
    return Verdict.contracts if tr[1] < 0.01 * tr[0] else Verdict.low_rank_limit  # 1/t decay, or a limit


def test_verdict_matches_direct_evaluation_on_the_phase_map_family():
    rng = np.random.default_rng(1)
    S = np.eye(2) / 2
    for _ in range(60):
        a, v = rng.uniform(-3, 3), rng.choice([0.0, rng.uniform(-2, 2), rng.uniform(-0.05, 0.05)])
        A = np.array([[a, 1.0], [0.0, -1.0]])
        got = Verdict(int(closed_form_verdict(S, A[None], np.array([v]), 20.0)[0]))
        assert got == _direct(S, A, v, 20.0), (a, v)


def test_singular_negative_semidefinite_gives_a_low_rank_limit():
    A = np.array([[-0.25, 1.0], [0.0, -1.0]])  # A + Aᵀ = [[-0.5, 1], [1, -2]]: det 0
    S = np.array([[0.6, 0.1], [0.1, 0.4]])
    assert closed_form_verdict(S, A[None], np.array([1.0]), 20.0)[0] == Verdict.low_rank_limit
    assert _direct(S, A, 1.0, 20.0) == Verdict.low_rank_limit


def test_rejects_singular_sigma0_and_bad_t1():
    A = np.eye(2)[None]
    with pytest.raises(ParameterError, match="positive definite"):
        closed_form_verdict(np.diag([1.0, 0.0]), A, np.array([1.0]), 1.0)
    with pytest.raises(ParameterError, match="t1"):
        closed_form_verdict(np.eye(2), A, np.array([1.0]), 0.0)
