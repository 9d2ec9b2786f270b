"""The multi-level blow-up check of hassejax.dynamics.blowup_check (derived; spec dynamics.md §3, §4).

The library's decade test calls a log-periodic finite-time blow-up 'diverge' (the phase maps'
counterexample neighbourhood); the level check must call it a blow-up and keep exponential
divergence (L2, figure 5 of Castin et al.) a divergence.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.dynamics import L2, LowRankSoftmax, Softmax, Status, paper, solve_gaussian, solve_low_rank_gaussian
from hassejax.dynamics.blowup_check import LEVELS, confirm_blowup, geometric_blowup
from hassejax.errors import ParameterError

jax.config.update("jax_enable_x64", True)

CE_V = np.array([[-0.53206, -1.25140], [2.56361, 0.11094]])
CE_A = np.array([[-0.61541, -0.45655], [1.18257, -0.27585]])
CE_SIGMA0 = np.array([[0.21008, -0.34117], [-0.34117, 0.78992]])


def test_geometric_blowup_on_synthetic_crossing_times():
    t_star = 3.0
    blow = t_star - 1.0 / LEVELS  # tr Σ = 1/(t* − t)
    # log-periodic: tr Σ·(t* − t) = c(t) runs through [6, 20] once every ×2.13 in t* − t
    c = 13.0 + 7.0 * np.sin(2 * np.pi * np.log10(1.0 / LEVELS) / 0.33)
    logper = t_star - c / LEVELS
    expo = np.log(LEVELS) / 0.7  # e^{0.7 t}
    poly = LEVELS**0.5  # t²
    late = blow.copy()
    late[0] = late[1] - 1.4 * (late[2] - late[1])  # asymptotics only above the second level: first ratio 1/1.4
    missed = blow.copy()
    missed[-1] = np.inf  # the last level not reached
    got = np.asarray(geometric_blowup(np.stack([blow, logper, expo, poly, missed, late])))
    assert got.tolist() == [True, True, False, False, False, True]
    # the gap ratios of log-periodic growth stay well under the 0.2 margin
    g = np.diff(logper)
    assert np.max(g[1:] / g[:-1]) < 0.05
    with pytest.raises(ParameterError, match="n_ratios"):
        geometric_blowup(blow[:3])


def test_log_periodic_blow_up_called_diverge_by_the_decade_test_is_confirmed():
    # (δ1, δ2) = (0.30, −0.30) of the phase maps' neighbourhood: V = R(δ1) V_ce, A = A_ce + δ2 I
    c, s = np.cos(0.3), np.sin(0.3)
    model = Softmax(V=jnp.asarray(np.array([[c, -s], [s, c]]) @ CE_V), A=jnp.asarray(CE_A - 0.3 * np.eye(2)))
    sol = solve_gaussian(model, jnp.zeros(2), jnp.asarray(CE_SIGMA0), t1=200.0, rtol=1e-8, atol=1e-10,
                         size_threshold=1e8)  # fmt: skip
    assert int(sol.status) == Status.diverge  # the old verdict (decade test, ρ > 0.05)
    assert float(sol.decade_ratio) > 0.05
    out = confirm_blowup(model, jnp.zeros(2), jnp.asarray(CE_SIGMA0), t1=200.0, rtol=1e-10, atol=1e-12)
    assert bool(out["blow_up"])
    times = np.asarray(out["times"])
    # independent reference (SciPy DOP853, rtol 1e-11, Σ' = VΣAΣ + ΣAᵀΣVᵀ): tr Σ reaches 1e6, 1e8, 1e10, 1e12 at
    # t = 1.71744596, 1.717446729, 1.7174467403, 1.71744674035
    assert times[1:] == pytest.approx([1.71744596, 1.717446729, 1.7174467403, 1.71744674035], abs=2e-9)


def test_exponential_divergence_is_kept():
    # L2 on the figure-5 parameters (Q/√d, c = 1) grows exponentially: equal gaps per two decades
    q, k = paper.FIG5_Q, paper.FIG5_K
    model = L2(V=jnp.eye(2), Q=jnp.asarray(q) / np.sqrt(2), K=jnp.asarray(k))
    out = confirm_blowup(model, jnp.array([0.3, -0.4]), jnp.eye(2) / 2, t1=200.0, rtol=1e-10, atol=1e-12)
    times = np.asarray(out["times"])
    assert np.all(np.isfinite(times))
    g = np.diff(times)
    assert np.all((g[1:] / g[:-1] > 0.8) & (g[1:] / g[:-1] < 1.25))
    assert not bool(out["blow_up"])


def test_a_low_rank_head_is_checked_with_its_own_solver():
    """The same log-periodic blow-up as a trained model's head holds it (`LowRankSoftmax`, `A = KᵀQ`, `V = W_O W_V`,
    here in d = 3 with rank k = 2 and a third coordinate the head never moves): the `k × k` solve
    (``solve=solve_low_rank_gaussian``) gives the crossing times of the `d × d` one and of the reference above."""
    c, s = np.cos(0.3), np.sin(0.3)
    V = np.array([[c, -s], [s, c]]) @ CE_V
    A = CE_A - 0.3 * np.eye(2)
    embed = np.eye(3)[:, :2]  # (3, 2): the head acts on the first two coordinates
    head = LowRankSoftmax(
        jnp.asarray(embed.T), jnp.asarray(A.T @ embed.T), jnp.asarray(V @ embed.T), jnp.asarray(embed)
    )  # Q = Pᵀ, K = AᵀPᵀ: KᵀQ = P A Pᵀ; W_O W_V = P V Pᵀ
    cov0 = np.zeros((3, 3))
    cov0[:2, :2] = CE_SIGMA0  # tr Σ0 = 1 as above; the third coordinate stays at 0
    kw = dict(t1=200.0, rtol=1e-10, atol=1e-12)
    low = confirm_blowup(head, jnp.zeros(3), jnp.asarray(cov0), solve=solve_low_rank_gaussian, **kw)
    full = confirm_blowup(head, jnp.zeros(3), jnp.asarray(cov0), **kw)
    assert bool(low["blow_up"]) and bool(full["blow_up"])
    np.testing.assert_allclose(np.asarray(low["times"]), np.asarray(full["times"]), rtol=1e-8)
    assert np.asarray(low["times"])[1:] == pytest.approx(
        [1.71744596, 1.717446729, 1.7174467403, 1.71744674035], abs=2e-9
    )
