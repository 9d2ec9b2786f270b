"""Blow-up, divergence and the statuses of spec dynamics.md §3–§4, §7a item 5.

Blow-up times are reported by extrapolation (`t_e + λ/λ'`) from a threshold event at
`tr Σ = 1e8 · tr Σ0` (the default), in float64; the threshold time `t_final` itself is
checked too.
"""

from __future__ import annotations

from contextlib import nullcontext

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

from hassejax._xla_flags import jit_at_default_level
from hassejax.dynamics import (
    L2,
    BlowupMethod,
    MultiHead,
    Sinkhorn,
    Softmax,
    Status,
    blowup_time_closed_form,
    moment_derivatives,
    solve_gaussian,
    solve_particles,
    status_names,
)
from hassejax.errors import ParameterError

pytestmark = pytest.mark.slow  # several vmapped compiles (about a minute on a quiet CPU)


def _random_cases(n, d, seed):
    """(A, Σ0, v) with V = vI, both signs of v; about 20% with v(A + Aᵀ) ≺ 0 (no blow-up)."""
    r = np.random.default_rng(seed)
    a = r.normal(size=(n, d, d))
    b = r.normal(size=(n, d, d))
    s0 = b @ np.swapaxes(b, 1, 2) / d + 0.05 * np.eye(d)
    v = r.choice([-1.0, 1.0], size=n) * r.uniform(0.5, 2.0, size=n)
    stable = r.random(n) < 0.2
    g = r.normal(size=(n, d, d))
    skew = g - np.swapaxes(g, 1, 2)
    neg = -(g @ np.swapaxes(g, 1, 2) / d + 0.1 * np.eye(d)) * np.sign(v)[:, None, None]  # v·sym ≺ 0
    a = np.where(stable[:, None, None], neg + 0.5 * skew, a)
    # keep blow-up times in a moderate range (t* <= 20): rescale A where λ* is tiny
    t_star = np.asarray(blowup_time_closed_form(s0, a, v))
    scale = np.where(np.isfinite(t_star) & (t_star > 20.0), t_star / 5.0, 1.0)
    return a * scale[:, None, None], s0, v


# 1,000 members at rtol 1e-10: a program that runs far longer than it compiles, so at XLA's default level
# rather than the suite's level 0 (tests/conftest.py): compile 4.8 → 5.6 s, each run 8.2 → 1.6 s, equal results.
@jit_at_default_level
def _solve_batch(a, s0, v, threshold):
    def one(a_i, s_i, v_i, th_i):
        d = a_i.shape[-1]
        p = Softmax(V=v_i * jnp.eye(d), A=a_i)
        return solve_gaussian(
            p, jnp.zeros(d), s_i, t1=60.0, ts=jnp.array([0.0]), rtol=1e-10, atol=1e-12, size_threshold=th_i
        )

    return jax.vmap(one)(a, s0, v, threshold)


def test_thousand_random_blowup_times_one_vmapped_solve():
    a, s0, v = _random_cases(1000, 3, seed=0)
    t_star = np.asarray(blowup_time_closed_form(s0, a, v))
    blows = np.isfinite(t_star)
    assert 600 < blows.sum() < 950 and np.all(t_star[blows] <= 20.0)
    tr0 = np.trace(s0, axis1=1, axis2=2)
    sol = _solve_batch(jnp.asarray(a), jnp.asarray(s0), jnp.asarray(v), jnp.asarray(1e8 * tr0))
    status = np.asarray(sol.status)
    assert np.all(status[blows] == Status.blow_up)
    assert np.all(np.asarray(sol.blowup_method)[blows] == BlowupMethod.extrapolated)
    rel = np.abs(np.asarray(sol.t_blowup)[blows] / t_star[blows] - 1.0)
    assert rel.max() <= 1e-6, f"max relative error {rel.max():.3g}"
    # the threshold time itself: below t*, within tr Σ0 / threshold = 1e-8 relative
    rel_thr = 1.0 - np.asarray(sol.t_final)[blows] / t_star[blows]
    assert np.all(rel_thr > -1e-9) and rel_thr.max() <= 1e-6
    # growth law: the decade test ρ ≈ 1/99 (1/λ falls linearly to zero), and p = λλ''/λ'² ≈ 2
    np.testing.assert_allclose(np.asarray(sol.decade_ratio)[blows], 1 / 99, rtol=0.2)
    np.testing.assert_allclose(np.asarray(sol.growth_exponent)[blows], 2.0, atol=1e-3)
    # no positive eigenvalue: never a blow-up, t_blowup = inf (never NaN)
    assert np.all(status[~blows] == Status.completed)
    assert np.all(np.asarray(sol.t_blowup)[~blows] == np.inf)
    assert np.all(np.isfinite(np.asarray(sol.cov_final)))

    # a low threshold (1e4 · tr Σ0), same compiled solve: the threshold time is off by ~1e-4,
    # the extrapolated time still meets 1e-6
    low = _solve_batch(jnp.asarray(a), jnp.asarray(s0), jnp.asarray(v), jnp.asarray(1e4 * tr0))
    assert np.all(np.asarray(low.status)[blows] == Status.blow_up)
    rel_low_thr = 1.0 - np.asarray(low.t_final)[blows] / t_star[blows]
    rel_low_ext = np.abs(np.asarray(low.t_blowup)[blows] / t_star[blows] - 1.0)
    assert rel_low_thr.max() > 1e-5
    assert rel_low_ext.max() <= 1e-6, f"max relative error {rel_low_ext.max():.3g}"


def test_constant_step_past_blowup_reports_non_finite():
    """Diffrax alone says 'successful' with NaN/inf; the solve says non_finite and returns no NaN."""
    a = np.array([[1.0, 0.0], [0.0, -1.0]])
    s0 = np.diag([1.0, 0.5])  # t* = 1/(2·1·1) = 0.5
    p = Softmax(V=np.eye(2), A=a)
    ts = jnp.linspace(0.0, 3.0, 31)
    raw = diffrax.diffeqsolve(
        diffrax.ODETerm(lambda t, y, args: y @ (a + a.T) @ y),
        diffrax.Tsit5(),
        0.0,
        3.0,
        0.05,
        jnp.asarray(s0),
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.ConstantStepSize(),
        throw=False,
    )
    assert raw.result == diffrax.RESULTS.successful and not bool(jnp.all(jnp.isfinite(raw.ys)))
    sol = solve_gaussian(
        p, np.zeros(2), s0, t1=3.0, ts=ts, dt0=0.05,
        stepsize_controller=diffrax.ConstantStepSize(), size_threshold=np.inf,
    )  # fmt: skip
    assert status_names(sol.status) == "non_finite"
    for field in (sol.mean, sol.cov, sol.factor, sol.mean_final, sol.cov_final, sol.t_final, sol.t_blowup):
        assert not bool(jnp.any(jnp.isnan(field)))
    assert bool(jnp.all(jnp.isfinite(sol.cov))) and bool(jnp.all(jnp.isfinite(sol.cov_final)))
    valid = np.asarray(sol.valid)
    raw_ok = np.asarray(jnp.all(jnp.isfinite(raw.ys), axis=(1, 2)))
    first_bad = float(np.asarray(ts)[~raw_ok][0])  # the constant-step solution lags t* = 0.5 a little
    np.testing.assert_array_equal(valid, raw_ok)
    assert valid[0] and not valid[-1]
    assert float(sol.t_final) < first_bad and float(sol.t_blowup) == np.inf
    # saved points after the stop hold the last finite state
    last = np.flatnonzero(valid)[-1]
    np.testing.assert_array_equal(np.asarray(sol.cov[-1]), np.asarray(sol.cov[last]))


# ----------------------------------------------------------------------------- figure 5
Q5 = np.array([[-0.0967841583, 0.4222016605], [-0.2254615634, -0.6379430932]])
K5 = np.array([[-0.0162863037, 1.0442167784], [-1.0848803286, -2.2059248272]])


def _fig_grid(n, lo=-1.0, hi=1.0):
    u, w = np.meshgrid(np.linspace(lo, hi, n), np.linspace(lo, hi, n), indexing="ij")
    keep = u**2 + w**2 < 1
    u, w = u[keep], w[keep]
    return np.stack([np.stack([(1 + u) / 2, w / 2], -1), np.stack([w / 2, (1 - u) / 2], -1)], -2)


def _fig5_solve(model_fn, s0, t1, threshold, mean0):
    @jax.jit
    def run(s):
        return jax.vmap(
            lambda si: solve_gaussian(
                model_fn(),
                mean0,
                si,
                t1=t1,
                ts=jnp.linspace(0.0, t1, 41),
                rtol=1e-10,
                atol=1e-12,
                size_threshold=threshold,
            )
        )(s)

    return run(jnp.asarray(s0))


@pytest.mark.parametrize("dt", [0.03, 0.01, 0.001])
def test_constant_step_that_does_not_resolve_the_growth_is_undetermined(dt):
    """Softmax `V = A = I`, `Σ0 = I/4.1` blows up at `t* = 2.05`; constant steps, covariance state. With
    `dt = 0.01, 0.001` the crossing step jumps past the singularity, where the state (`tr Σ ~ 1e48`) and its
    rates are not the solution's: that was `blow_up` with `t_blowup = t* + dt` (the end of that step). With
    `dt = 0.03` the crossing was located, but the last two decades before it lie inside one step, so the
    decade test's span is noise: that was `diverge` (`ρ = 102`, although `p = 2`). Both `undetermined` now."""
    s0 = np.eye(2) / 4.1
    sol = solve_gaussian(
        Softmax(V=np.eye(2), A=np.eye(2)), np.zeros(2), s0, t1=5.0, dt0=dt,
        stepsize_controller=diffrax.ConstantStepSize(), state="covariance",
        size_threshold=1e8 * np.trace(s0),  # the default given: the program of the constant-step tests below
    )  # fmt: skip
    assert status_names(sol.status) == "undetermined"
    assert float(sol.t_blowup) == np.inf and float(sol.decade_ratio) == np.inf
    assert float(sol.growth_exponent) == 0.0


@pytest.mark.parametrize("state", ["factor", "covariance"])
@pytest.mark.parametrize("dt", [3e-3, 1.7e-3, 1.1e-3])
def test_constant_step_longer_than_the_remaining_time_is_undetermined(dt, state):
    """Softmax `V = A = I`, `Σ0 = I/2` (`t* = 1`), threshold `1e4` (`t* − t_e = 1e-4`), constant steps 11 to
    30 times that: the root find located the crossing on a poor interpolant (up to a decade below the
    threshold) and the decade test read it: `diverge` (ρ = 0.06–0.09) or `blow_up` at 0.9986–0.9996 (review).
    A constant step longer than the remaining time `λ/λ'` at the crossing is now `undetermined`; a step of
    `1e-4` resolves it: `blow_up` at `t* = 1`."""
    kw = dict(stepsize_controller=diffrax.ConstantStepSize(), size_threshold=1e4, max_steps=100_000, state=state)
    sol = solve_gaussian(Softmax(V=np.eye(2), A=np.eye(2)), np.zeros(2), np.eye(2) / 2, t1=2.0, dt0=dt, **kw)
    assert status_names(sol.status) == "undetermined"
    sol = solve_gaussian(Softmax(V=np.eye(2), A=np.eye(2)), np.zeros(2), np.eye(2) / 2, t1=2.0, dt0=1e-4, **kw)
    assert status_names(sol.status) == "blow_up" and float(sol.t_blowup) == pytest.approx(1.0, rel=1e-6)


@pytest.mark.parametrize("s0", [1e-8, 1e-10])
def test_l2_from_a_small_covariance_diverges_under_the_default_threshold(s0):
    """L2 with `K = I` grows at most exponentially (`M → V(KᵀK)⁻¹A`, spec §3), but below its saturation scale
    `tr Σ ~ 1/(2c) = 0.5` its map is softmax's and `Σ` grows like a Riccati blow-up. From `Σ0 = s0 I` the
    default threshold `1e8 tr Σ0` lay below that scale, and the decade test read `blow_up` (ρ = 0.010–0.029,
    review). The default is now `1e8 · max(tr Σ0, gaussian_size_scale)`: the crossing at `tr Σ = 5e7`, in the
    exponential regime (ρ ≈ 1/(2 ln 10)); a mixed multi-head kernel takes its L2 head's scale. (The covariance
    state, which read the same, now refuses L2.)"""
    model = L2(V=np.eye(2), Q=np.eye(2), K=np.eye(2))
    assert float(model.gaussian_size_scale(0.0)) == pytest.approx(0.5)
    assert float(MultiHead([Softmax(V=np.eye(2), A=np.eye(2)), model]).gaussian_size_scale(0.0)) == pytest.approx(0.5)
    batched = L2(V=np.stack([np.eye(2)] * 3), Q=np.stack([np.eye(2)] * 3), K=np.stack([np.eye(2)] * 3))
    with pytest.raises(ParameterError, match="vmap over batched parameters"):
        batched.gaussian_size_scale(0.0)  # one scale per kernel: vmap over a batch, as its other methods
    sol = solve_gaussian(model, np.zeros(2), s0 * np.eye(2), t1=1e12, atol=1e-8 * s0)
    assert status_names(sol.status) == "diverge"
    assert float(sol.decade_ratio) == pytest.approx(1 / (2 * np.log(10)), rel=0.05)
    assert float(np.trace(np.asarray(sol.cov_final))) == pytest.approx(5e7, rel=1e-4)


class _UnboundedL2(L2):
    """L2 without its growth bound: the decade test alone decides, as for a kernel that has none."""

    def gaussian_growth_bound(self, t):
        return jnp.asarray(jnp.inf)


@pytest.mark.parametrize("rtol", [0.2, 0.3])
def test_decade_time_outside_the_solve_from_long_steps_is_undetermined(rtol):
    """L2 with `K = I` grows at most exponentially (spec §3), but at `rtol = 0.2` its five long steps made the
    quadrature of the time below the last two decades negative (Tsit5's negative weight), the decade test
    read `ρ = 0.016` and the verdict was `blow_up` (review). A time below outside `[0, t_e − t0]`, or a step
    longer than half the decade span, is `undetermined` where the decade test decides (its growth bound set
    aside); at the default tolerances the verdict is `diverge`. With its bound, L2 is `diverge` either way."""
    s0 = 0.1 * np.eye(2)
    loose = dict(t1=100.0, rtol=rtol, atol=rtol * 1e-3)
    sol = solve_gaussian(_UnboundedL2(V=np.eye(2), Q=np.eye(2), K=np.eye(2)), np.zeros(2), s0, **loose)
    assert status_names(sol.status) == "undetermined"
    sol = solve_gaussian(_UnboundedL2(V=np.eye(2), Q=np.eye(2), K=np.eye(2)), np.zeros(2), s0, t1=100.0)
    assert status_names(sol.status) == "diverge"
    assert float(sol.decade_ratio) == pytest.approx(1 / (2 * np.log(10)), rel=0.05)
    sol = solve_gaussian(L2(V=np.eye(2), Q=np.eye(2), K=np.eye(2)), np.zeros(2), s0, **loose)
    assert status_names(sol.status) == "diverge"


@pytest.mark.parametrize("dt", [1e-3, 1e-4])
def test_constant_step_that_resolves_the_growth_is_measured(dt):
    """The same blow-up with the threshold at `1e3 tr Σ0` (crossed at `τ = t* − t_e = 2.05e-3`, the decade
    test's span `99τ = 0.2`): a constant step of `1e-3` or `1e-4` resolves it, and the verdict is `blow_up` at
    `t*` (closed form, spec §3: `Σ(t) = (Σ0⁻¹ − 2t I)⁻¹`); L2 with constant steps up to `0.3` (exponential
    growth at rate 2: span `ln 100 / 2 = 2.3`) stays `diverge`."""
    sol = solve_gaussian(
        Softmax(V=np.eye(2), A=np.eye(2)), np.zeros(2), np.eye(2) / 4.1, t1=5.0, dt0=dt,
        stepsize_controller=diffrax.ConstantStepSize(), state="covariance", size_threshold=1e3 * 2 / 4.1,
        max_steps=100_000,  # ample for 2.05/1e-4 steps; the budget of the test above: one compiled program
    )  # fmt: skip
    assert status_names(sol.status) == "blow_up"
    assert float(sol.t_blowup) == pytest.approx(2.05, rel=1e-6)
    assert float(sol.decade_ratio) == pytest.approx(1 / 99, rel=0.05)
    l2 = L2(V=np.eye(2), Q=np.eye(2), K=np.eye(2))
    sol = solve_gaussian(
        l2, np.zeros(2), np.eye(2) / 2, t1=50.0, dt0=300 * dt, stepsize_controller=diffrax.ConstantStepSize()
    )
    assert status_names(sol.status) == "diverge"
    assert float(sol.decade_ratio) == pytest.approx(1 / (2 * np.log(10)), rel=0.05)


def test_figure5_softmax_blows_up_everywhere_l2_and_sinkhorn_diverge():
    grid = _fig_grid(40)
    assert grid.shape == (1184, 2, 2)
    a5 = K5.T @ Q5 / np.sqrt(2)
    t_star = np.asarray(blowup_time_closed_form(grid, a5, 1.0))
    assert np.all(np.isfinite(t_star))
    assert t_star.min() == pytest.approx(0.353, abs=5e-4) and t_star.max() == pytest.approx(8.94, abs=5e-3)
    assert float(blowup_time_closed_form(np.eye(2) / 2, a5, 1.0)) == pytest.approx(0.70234, abs=5e-6)
    sub = np.arange(0, 1184, 8)  # 148 of the 1184 initial conditions (the experiment runs all)
    s0 = grid[sub]

    soft = _fig5_solve(lambda: Softmax(V=jnp.eye(2), A=jnp.asarray(a5)), s0, 20.0, 1e8, jnp.zeros(2))
    assert np.all(np.asarray(soft.status) == Status.blow_up)
    assert np.max(np.abs(np.asarray(soft.t_blowup) / t_star[sub] - 1)) <= 1e-6

    alpha0 = jnp.array([0.3, -0.4])
    cases = {
        # L2 with the paper's scaling Q/√d, kernel constant c = 1; Sinkhorn unscaled, ε = 1
        "l2": (lambda: L2(V=jnp.eye(2), Q=jnp.asarray(Q5) / np.sqrt(2), K=jnp.asarray(K5)),
               2 * np.linalg.norm(K5.T @ Q5 / np.sqrt(2), 2) / np.linalg.eigvalsh(K5.T @ K5).min()),
        "sinkhorn": (lambda: Sinkhorn(V=jnp.eye(2), A=jnp.asarray(K5.T @ Q5)), 2.0),
    }  # fmt: skip
    for kind, (pf, rate_bound) in cases.items():
        sol = _fig5_solve(pf, s0, 200.0, 1e4, alpha0)
        status = np.asarray(sol.status)
        assert np.all(status == Status.diverge), (kind, np.unique(status_names(status)))
        assert np.all(np.asarray(sol.t_blowup) == np.inf)
        # decade test: ρ ≈ 1/(2 ln 10) ≈ 0.22 for exponential growth (1/99 for blow-up)
        rho = np.asarray(sol.decade_ratio)
        assert np.all((rho > 0.1) & (rho < 1.0)), (kind, rho.min(), rho.max())
        p_exp = np.asarray(sol.growth_exponent)  # ≈ 1: exponential growth (2 would be 1/(t* − t))
        assert np.all((p_exp > 0.9) & (p_exp < 1.5)), (kind, p_exp.min(), p_exp.max())
        # d log tr Σ/dt stays below a proven bound along the saved trajectory (no finite-time blow-up):
        # L2: 2‖M‖ ≤ 2‖V‖‖A‖/λ_min(KᵀK); Sinkhorn: 2‖V‖ (the plan's cross-covariance is a contraction)
        p = pf()
        # ... the kernel's own bound, which the verdict uses (computed there from the same derivation)
        assert float(p.gaussian_growth_bound(0.0)) == pytest.approx(rate_bound, rel=1e-12)
        # one compiled program (jit) rather than each operation of the doubly vmapped map dispatched on its own
        rates = jax.jit(
            jax.vmap(jax.vmap(lambda m, c, p=p: jnp.trace(moment_derivatives(p, 0.0, m, c)[1]) / jnp.trace(c)))
        )(sol.mean, sol.cov)
        rates = np.where(np.asarray(sol.valid), np.asarray(rates), 0.0)
        assert np.all(rates <= rate_bound + 1e-9), (kind, rates.max(), rate_bound)
        if kind == "sinkhorn":  # α' = Vα whatever Σ: α(t) = e^t α0 with V = I
            want = np.exp(np.asarray(sol.ts))[..., None] * np.asarray(alpha0)
            ok = np.asarray(sol.valid)
            np.testing.assert_allclose(np.asarray(sol.mean)[ok], want[ok], rtol=1e-8)


# ----------------------------------------------------------------------------- counterexample
V_CE = np.array([[-0.53206, -1.25140], [2.56361, 0.11094]])
A_CE = np.array([[-0.61541, -0.45655], [1.18257, -0.27585]])
S_CE = np.array([[0.21008, -0.34117], [-0.34117, 0.78992]])


def test_counterexample_negative_definite_yet_blows_up():
    """Spec §3: VA + AᵀVᵀ ≺ 0 and A + Aᵀ ≺ 0, yet softmax blows up at t ≈ 19.68."""
    assert np.linalg.eigvalsh(V_CE @ A_CE + A_CE.T @ V_CE.T).max() < 0
    assert np.linalg.eigvalsh(A_CE + A_CE.T).max() < 0
    # the default threshold 1e8 · tr Σ0 (tr Σ0 = 1) given, as the SciPy check below: the program of the threshold tests
    sol = solve_gaussian(
        Softmax(V=V_CE, A=A_CE), np.zeros(2), S_CE, t1=100.0, rtol=1e-10, atol=1e-12, size_threshold=1e8
    )
    assert status_names(sol.status) == "blow_up"
    # tr Σ grows in bursts (V rotates): a local exponent test is unreliable here, the decade test is not
    assert float(sol.decade_ratio) < 0.05
    t_b = float(sol.t_blowup)
    assert t_b == pytest.approx(19.68, abs=0.005)

    # independent check: SciPy (LSODA-free RK45 → DOP853) on Σ' = VΣAΣ + ΣAᵀΣVᵀ, same threshold
    def rhs(t, y):
        s = y.reshape(2, 2)
        return (V_CE @ s @ A_CE @ s + s @ A_CE.T @ s @ V_CE.T).ravel()

    def hit(t, y):
        return np.log(y[0] + y[3]) - np.log(1e8)

    hit.terminal = True
    ref = solve_ivp(rhs, (0.0, 100.0), S_CE.ravel(), method="DOP853", rtol=1e-12, atol=1e-14, events=hit)
    t_e = ref.t_events[0][0]
    s_e = ref.y_events[0][0]
    lam, dlam = s_e[0] + s_e[3], (lambda d: d[0] + d[3])(rhs(t_e, s_e))
    assert t_b == pytest.approx(t_e + lam / dlam, rel=1e-6)
    assert float(sol.t_final) == pytest.approx(t_e, rel=1e-6)


def test_constant_step_non_finite_with_default_ts_reports_the_last_finite_state():
    """Default `ts`, constant step past t* = 1 (softmax, V = A = I, Σ0 = I/2): the solve reports the last
    finite state and its time (t ≈ 1), not t_final = 0 and cov_final = Σ0. The reference is the same
    constant-step Tsit5 solve of `U' = UUᵀU` in plain diffrax, read at its last finite step."""
    s0 = np.eye(2) / 2
    sol = solve_gaussian(
        Softmax(V=np.eye(2), A=np.eye(2)),
        np.zeros(2),
        s0,
        t1=2.0,
        dt0=0.01,
        stepsize_controller=diffrax.ConstantStepSize(),
        size_threshold=1e8,  # the default, 1e8 · tr Σ0, given: the program of the constant-step tests above
    )
    assert status_names(sol.status) == "non_finite"
    raw = diffrax.diffeqsolve(
        diffrax.ODETerm(lambda t, u, args: u @ u.T @ u), diffrax.Tsit5(), 0.0, 2.0, 0.01, jnp.sqrt(jnp.asarray(s0)),
        saveat=diffrax.SaveAt(steps=True), stepsize_controller=diffrax.ConstantStepSize(), throw=False,
    )  # fmt: skip
    us, ts = np.asarray(raw.ys), np.asarray(raw.ts)
    with np.errstate(over="ignore", invalid="ignore"):
        ok = np.isfinite(ts) & np.all(np.isfinite(us), axis=(1, 2)) & np.isfinite(np.sum(us**2, axis=(1, 2)))
    last = np.flatnonzero(ok)[-1]
    assert 0.95 <= ts[last] <= 1.0
    assert float(sol.t_final) == pytest.approx(ts[last], abs=1e-12)
    np.testing.assert_allclose(np.asarray(sol.cov_final), us[last] @ us[last].T, rtol=1e-9)
    assert np.trace(np.asarray(sol.cov_final)) > 100.0
    np.testing.assert_array_equal(np.asarray(sol.ts), [0.0, 2.0])
    np.testing.assert_array_equal(np.asarray(sol.valid), [True, False])


@pytest.mark.parametrize("threshold", [np.inf, 1e38])
def test_float32_state_beyond_the_float_range_is_non_finite_not_a_frozen_completion(threshold):
    """float32 L2 (V = Q = K = I, Σ0 = I/2) grows exponentially with no size event below `1/tiny` = 8.5e37:
    there `(I + 2Σ)⁻¹` underflows, the vector field is flushed to exactly zero and the solve used to
    report `completed` at t1 = 200 with `tr Σ` frozen at 8.5e37. It stops as `non_finite` at the time
    the size reaches `1/finfo(float32).tiny`, which a float64 solve with that threshold locates."""
    f32 = np.float32
    size_max = 1 / float(np.finfo(f32).tiny)
    eye = np.eye(2, dtype=f32)
    sol = solve_gaussian(
        L2(V=eye, Q=eye, K=eye), np.ones(2, f32), eye / 2, t1=200.0, rtol=1e-6, atol=1e-6,
        size_threshold=threshold, ts=np.linspace(0, 200, 21), max_steps=20_000,
    )  # fmt: skip
    assert sol.cov_final.dtype == jnp.float32
    assert status_names(sol.status) == "non_finite"
    trace_f = float(np.trace(np.asarray(sol.cov_final, np.float64)))
    assert 1e36 < trace_f < size_max
    ref = solve_gaussian(
        L2(V=np.eye(2), Q=np.eye(2), K=np.eye(2)), np.ones(2), np.eye(2) / 2, t1=200.0, rtol=1e-10, atol=1e-10,
        size_threshold=size_max, blowup_estimate="threshold",
    )  # fmt: skip
    assert status_names(ref.status) == "diverge"  # exponential growth crosses the threshold
    assert float(sol.t_final) < float(ref.t_final) + 1e-3 * float(ref.t_final)
    assert float(sol.t_final) > float(ref.t_final) - 2.0
    valid = np.asarray(sol.valid)
    assert valid[:5].all() and not valid[5:].any()  # saved points up to t = 40 only
    assert np.all(np.isfinite(np.asarray(sol.cov)))


def test_float32_l2_with_a_large_value_matrix_reaches_the_float_range():
    """L2 with `V = 1e4 I` (float32, no size event): its Gaussian map `2βcVΣ(I + 2βcKᵀKΣ)⁻¹A` stays
    bounded as `Σ` grows, but formed as written the product `2βcVΣ` overflowed at `tr Σ ≈ 2.7e34`, so the
    solve stopped as `non_finite` three decades before the documented `1/finfo.tiny` (8.5e37). Formed from
    `Σ/tr Σ` it reaches the float range, and the growth rate agrees with float64. (The factor state: the
    covariance state's own derivative `Σ' = MΣ + ΣMᵀ ≈ 2e4 Σ` leaves the float range at `tr Σ ≈ 1.7e34`.)"""
    eye = np.eye(2, dtype=np.float32)
    kw = {"t1": 1.0, "size_threshold": np.inf, "max_steps": 20_000}
    # 21 save times (read nowhere): the float32 solve of the float-range test above, one compiled program
    sol = solve_gaussian(
        L2(V=1e4 * eye, Q=eye, K=eye), np.ones(2, np.float32), eye / 2, rtol=1e-6, atol=1e-6,
        ts=np.linspace(0, 1, 21), **kw,
    )  # fmt: skip
    assert status_names(sol.status) == "non_finite"
    assert float(np.trace(np.asarray(sol.cov_final, np.float64))) > 1e37
    # float64 at the float32 stop time: the same size within the float32 tolerance's drift over ~1e3 e-folds
    ref = solve_gaussian(
        L2(V=1e4 * np.eye(2), Q=np.eye(2), K=np.eye(2)), np.ones(2), np.eye(2) / 2, rtol=1e-10, atol=1e-10,
        ts=np.array([0.0, float(sol.t_final)]), **kw,
    )  # fmt: skip
    np.testing.assert_allclose(
        np.log(np.trace(np.asarray(ref.cov[-1]))), np.log(float(np.trace(sol.cov_final))), rtol=1e-3
    )


def test_vmapped_member_without_event_keeps_its_last_accepted_state():
    """Under vmap, when one member's size event fires, diffrax gives the members *without* an event the
    end of their last attempted step: for a member the finite-step guard stopped (a rejected step) that
    was out of range, so it came back as its initial state (`t_final = 0`, `cov_final = Σ0`), and a
    member stopped by its step budget whose last step was rejected got that step's time and state. Each
    member must equal its own solve (float32 for the range case, which fails on the old code; float64 for
    the budget case, whose 60 steps in float32 at rtol 1e-6 follow rounding noise that differs between
    the batched and the single program; its last step is accepted, so it checks the record, not the bug)."""

    def one(dtype, scale, threshold, max_steps):
        eye = np.eye(2, dtype=dtype)
        return solve_gaussian(
            L2(V=10 * eye, Q=eye, K=eye),
            np.zeros(2, dtype),
            scale * eye,
            t1=100.0,
            ts=np.linspace(0, 100, 21),
            rtol=1e-6,
            atol=1e-6,
            size_threshold=threshold,
            max_steps=max_steps,
        )  # fmt: skip  (exponential growth: tr Σ reaches 2e4 in 15 steps)

    # 21 save times and a budget of 20,000 (the float32 member needs far fewer): the float32 single solve is the
    # program of the float-range tests (one compile); the save times also widen the `valid` comparison
    cases = [  # (dtype, scales, thresholds, step budget, statuses)
        # member 1 starts at 1e34 and leaves the float range before its threshold (non_finite)
        (np.float32, [1.0, 1e34], [2e4, 1e38], 20_000, ["diverge", "non_finite"]),
        # member 1 needs ~100 steps to reach 1e30: its budget of 60 ends it first
        (np.float64, [1.0, 1.0], [2e4, 1e30], 60, ["diverge", "max_steps_reached"]),
    ]
    for dtype, scales, thresholds, budget, statuses in cases:
        sols = jax.vmap(lambda s, th: one(dtype, s, th, budget))(  # noqa: B023
            jnp.asarray(scales, dtype), jnp.asarray(thresholds, dtype)
        )
        assert [status_names(s) for s in sols.status] == statuses
        for i in range(2):
            solo = one(dtype, scales[i], thresholds[i], budget)
            assert status_names(solo.status) == statuses[i]
            # the event member to the root find's tolerance (1.2e-3 in float32, 1e-6 in float64); the float32
            # member stopped at the float range to its last accepted step there, whose length the step pattern
            # (batched or not) sets: within 2 % of `1/tiny` in size (the size grows like e^{20t}: 20× the
            # relative error of t in cov); the float64 member at its budget to rounding
            f32 = dtype == np.float32
            rtol = (2e-3 if f32 else 2e-6) if i == 0 else (1e-3 if f32 else 1e-9)
            if f32 and i == 1:
                for tr in (
                    np.trace(np.asarray(sols.cov_final[i], np.float64)),
                    np.trace(np.asarray(solo.cov_final, np.float64)),
                ):
                    assert 0.98 / np.finfo(np.float32).tiny < tr < 1 / np.finfo(np.float32).tiny
            np.testing.assert_allclose(float(sols.t_final[i]), float(solo.t_final), rtol=rtol)
            np.testing.assert_allclose(np.asarray(sols.cov_final[i]), np.asarray(solo.cov_final), rtol=20 * rtol)
            np.testing.assert_array_equal(np.asarray(sols.valid[i]), np.asarray(solo.valid))


class _L2AnyState(L2):
    """L2 with the covariance state allowed (the library refuses it: not reliable once `Σ` is ill-conditioned):
    here `Σ = s I` stays isotropic, and it is the kernel whose exponential growth reaches the float range."""

    def check_covariance_state(self, name="model"):
        return None


@pytest.mark.parametrize("state", ["factor", "covariance"])
@pytest.mark.parametrize("threshold", [8e37, 8.4e37])
def test_float32_threshold_just_below_the_float_range_fires_with_finite_rates(threshold, state):
    """A threshold just below `1/tiny` (8.5e37): the step that crosses it also left the range; the guard
    makes the adaptive controller retry with smaller steps, so the event is located (`diverge`, the L2
    growth being exponential) rather than `non_finite`; `λλ''/λ'²` overflowed to NaN there and is now
    formed as `(λ/λ')(λ''/λ')`: 1 for exponential growth."""
    eye = np.eye(2, dtype=np.float32)
    # the factor state takes L2 itself (the subclass only lets the covariance state through), with the save times
    # of the float-range test above (read nowhere): that test's compiled program
    kernel = L2 if state == "factor" else _L2AnyState
    sol = solve_gaussian(
        kernel(V=eye, Q=eye, K=eye), np.ones(2, np.float32), eye / 2, t1=200.0, rtol=1e-6, atol=1e-6,
        ts=np.linspace(0, 200, 21), size_threshold=threshold, max_steps=20_000, state=state,
    )  # fmt: skip
    # the covariance state used to overflow at 3e37: the Tsit5 stages were summed (coefficients up to
    # ~13) before the multiplication by dt
    assert status_names(sol.status) == "diverge"
    # at the threshold to the event root find's tolerance: 1.2e-3 relative in time, 0.05 at t ≈ 44, where
    # the size grows like e^{1.9 t}: up to ~10 % in size
    np.testing.assert_allclose(float(np.trace(np.asarray(sol.cov_final, np.float64))), threshold, rtol=0.1)
    assert float(sol.growth_exponent) == pytest.approx(1.0, abs=0.05)
    assert 0.1 < float(sol.decade_ratio) < 0.3  # 1/(2 ln 10) = 0.22 for exponential growth


def test_overflowing_trial_step_is_retried_not_a_stop():
    """Softmax with `V = 1e4 I` blows up at `t* = 1e-4`: the default first step overflows, the PID controller
    then proposed a NaN step and the guard stopped the solve as `non_finite` at `t = 0` with `Σ0`. The guard
    now retries with half the step. Also float32 with loose tolerances (`V = 2I`, `t* = 1/2`)."""
    # the default thresholds given (1e8 · tr Σ0, 1e4 · tr Σ0 in float32; tr Σ0 = 1): one compiled program for each
    # width with the threshold tests (float64) and the first-step tests below
    sol = solve_gaussian(
        Softmax(V=1e4 * np.eye(2), A=np.eye(2)), np.zeros(2), np.eye(2) / 2, t1=5.0, size_threshold=1e8
    )
    assert status_names(sol.status) == "blow_up"
    assert float(sol.t_blowup) == pytest.approx(1e-4, rel=1e-6)
    eye = np.eye(2, dtype=np.float32)
    sol = solve_gaussian(
        Softmax(V=2 * eye, A=eye), np.zeros(2, np.float32), eye / 2, t1=5.0, rtol=1e-2, atol=1e-2, size_threshold=1e4
    )
    assert status_names(sol.status) == "blow_up"
    assert float(sol.t_blowup) == pytest.approx(0.5, rel=1e-3)


@pytest.mark.parametrize(
    "dtype, v",
    [(np.float32, 1e6), (np.float32, 1e8), (np.float32, 1e13), (np.float64, 1e18)],
    ids=["f32-1e6", "f32-1e8", "f32-1e13", "f64-1e18"],
)
def test_blowup_within_the_first_step_guessed_is_resolved_by_halving(dtype, v):
    """Softmax `V = vI`, `A = I`, `Σ0 = I/2` on `[0, 1]` blows up at `t* = 1/v`. The first step guessed
    overflows; the guard's stop length was `64 eps` of the interval (float32: `7.6e-6`, above `t* = 1e-6`),
    so the halvings stopped there and the solve ended `non_finite` at `t = 0`. It is now `64 eps` of the
    step's own time (floored at `64 eps³` of the interval; at `64 eps²`, float32's `t* = 1e-13` still ended
    `non_finite` at `t = 0` with `t1 = 1`): shorter steps are tried until they resolve `t*`."""
    eye = np.eye(2, dtype=dtype)
    threshold = 1e8 if dtype == np.float64 else 1e4  # the default, 1e8 · tr Σ0 (1e4 in float32), given: as above
    sol = solve_gaussian(
        Softmax(V=v * eye, A=eye), np.zeros(2, dtype), eye / 2, t1=1.0, rtol=1e-5, atol=1e-6, size_threshold=threshold
    )
    assert status_names(sol.status) == "blow_up"
    assert float(sol.t_blowup) == pytest.approx(1.0 / v, rel=1e-4)
    assert float(sol.t_final) == pytest.approx(1.0 / v, rel=1e-4)  # the threshold crossing, just before t*
    assert float(sol.t_final) < float(sol.t_blowup)


def test_vector_field_nan_from_the_start_stops_after_a_bounded_number_of_halvings():
    """The lower floor of the guard's stop length must not make a vector field that is NaN at `t = 0` (a traced
    NaN parameter) spend its step budget: it stops `non_finite` at `t0` with the initial state, in far fewer
    steps than `max_steps`, in both float widths."""
    for dtype in (np.float32, np.float64):
        eye = jnp.eye(2, dtype=dtype)

        @jax.jit
        def run(a, eye=eye, dtype=dtype):
            return solve_gaussian(Softmax(V=eye, A=a * eye), jnp.zeros(2, dtype), eye / 2, t1=1.0, max_steps=1000)

        # float32 keeps the default rtol (1e-8), which solve_gaussian warns float32 cannot resolve
        warns = pytest.warns(RuntimeWarning, match="below what float32") if dtype == np.float32 else nullcontext()
        with warns:
            sol = run(jnp.asarray(np.nan, dtype))
        assert status_names(sol.status) == "non_finite"
        assert float(sol.t_final) == 0.0 and np.allclose(np.asarray(sol.cov_final), np.eye(2) / 2)
        assert int(sol.stats.num_steps) < 200


def test_event_not_located_in_a_long_step_reports_the_end_of_that_step():
    """A constant step across the blow-up of softmax `V = 2I` (`t* = 1/2`, float32): the size event fires on
    the step that crosses, but the dense output inside that step is not finite, so the root find has no
    state: the solve returned the initial state at `t = 0` (with rates measured at `Σ0`). It now reports
    the end of the crossing step (finite, past the threshold), never `t = 0`."""
    eye = np.eye(2, dtype=np.float32)
    sol = solve_gaussian(
        Softmax(V=2 * eye, A=eye), np.zeros(2, np.float32), eye / 2, t1=1.0,
        stepsize_controller=diffrax.ConstantStepSize(), dt0=0.00129097, max_steps=20_000,
    )  # fmt: skip
    t_f = float(sol.t_final)
    assert 0.4 < t_f < 0.51
    cov = np.asarray(sol.cov_final, np.float64)
    assert np.all(np.isfinite(cov)) and np.trace(cov) >= 1e4  # the float32 default threshold, 1e4 · tr Σ0
    assert np.isfinite(float(sol.growth_exponent)) and not np.isnan(float(sol.decade_ratio))
    # the end of that step (tr Σ ≈ 8e25, just past t* = 1/2) has growth rates beyond float32: the crossing's
    # growth law cannot be measured there, so it is undetermined (was `diverge`, a verdict nothing measured)
    assert status_names(sol.status) == "undetermined" and float(sol.t_blowup) == np.inf


def test_particles_whose_mean_drifts_past_their_spread_are_undetermined():
    """`V = I`, `A = 0`: uniform attention, `x_i' = x̄`, so the mean grows like `e^t` and the deviations
    `x_i − x̄` stay constant (spread `λ = λ0`). Once `|x̄| ~ 1e20` (float64, t ≈ 46) the computed spread is
    rounding noise `~(eps |x̄|)²`, which crossed the size threshold `1e8 λ0` and was reported as `diverge`;
    it is now `undetermined`. Before that the spread is exact (closed form), and the rank-`k` particle solve
    (`W_O W_V = I`, `Q = 0`) of the same system agrees."""
    from hassejax.dynamics import LowRankSoftmax, solve_low_rank_particles

    x0 = np.array([[1.0, 0.0], [-1.0, 0.5], [0.0, -0.5]]) + 3.0  # spread λ0 = 7/6 about a mean (3, 3)
    lam0 = np.mean(np.sum((x0 - x0.mean(0)) ** 2, axis=1))
    drift = Softmax(V=jnp.eye(2), A=jnp.zeros((2, 2)))
    head = LowRankSoftmax(np.zeros((2, 2)), np.zeros((2, 2)), np.eye(2), np.eye(2))
    mask = np.ones((1, 3), bool)
    early = solve_particles(drift, x0, t1=20.0)
    assert status_names(early.status) == "completed"
    xf = np.asarray(early.x_final)
    np.testing.assert_allclose(np.mean(np.sum((xf - xf.mean(0)) ** 2, axis=1)), lam0, rtol=1e-6)
    np.testing.assert_allclose(xf.mean(0), x0.mean(0) * np.exp(20.0), rtol=1e-6)
    late = solve_particles(drift, x0, t1=500.0)
    low = solve_low_rank_particles(head, x0[None], mask, t1=500.0)
    for sol in (late, low):
        assert status_names(sol.status) == "undetermined", status_names(sol.status)
        assert 40.0 < float(sol.t_final) < 60.0 and float(sol.t_blowup) == np.inf
        assert float(sol.growth_exponent) == 0.0 and float(sol.decade_ratio) == np.inf  # nothing measured


def test_genuine_particle_divergence_far_from_the_origin_is_measured_not_undetermined():
    """Found by a fresh-user review: float32 tokens of unit spread offset by 1e4, `x_i' = 2x_i + x̄`
    (feedforward `2I`, uniform attention): the deviations grow like `e^{2t}`, the mean like `e^{3t}`;
    at the crossing (`1e4 λ0`) the spread is ~100 rounding units, measured well enough (ρ ≈ 0.22 = the
    exponential value 1/(2 ln 10), p ≈ 1), but a floor factor of 1e4 called it `undetermined`. Offset 1e5
    leaves ten rounding units or fewer: `undetermined` there."""
    eye = np.eye(2, dtype=np.float32)
    x0 = np.random.default_rng(0).normal(size=(8, 2)).astype(np.float32)
    kw = {"t1": 50.0, "rtol": 1e-6, "atol": 1e-6, "feedforward": (2 * eye, np.zeros(2, np.float32))}
    drift = Softmax(V=eye, A=0 * eye)
    sol = solve_particles(drift, x0 + np.float32(1e4), **kw)
    assert status_names(sol.status) == "diverge"
    assert float(sol.decade_ratio) == pytest.approx(1 / (2 * np.log(10)), rel=0.05)
    assert float(sol.growth_exponent) == pytest.approx(1.0, abs=0.01)
    far = solve_particles(drift, x0 + np.float32(1e5), **kw)
    assert status_names(far.status) == "undetermined"


@pytest.mark.parametrize("threshold", [1.5, 3.0])
def test_threshold_within_two_decades_of_the_initial_size_is_undetermined(threshold):
    """Softmax `V = A = I`, `Σ0 = I/2` blows up at `t* = 1`; a threshold of 1.5 or 3 × `tr Σ0` leaves the decade
    test no two decades to time (it measured from `t0`: `diverge` with ρ = 0.5, p = 2, found by a fresh-user
    review): `undetermined`; from 200 × on it is `blow_up` at `t*`."""
    eye = np.eye(2)
    model = Softmax(V=eye, A=eye)
    sol = solve_gaussian(model, np.zeros(2), eye / 2, t1=5.0, size_threshold=threshold)
    assert status_names(sol.status) == "undetermined" and float(sol.t_blowup) == np.inf
    assert float(sol.t_final) < 1.0
    ok = solve_gaussian(model, np.zeros(2), eye / 2, t1=5.0, size_threshold=200.0)
    assert status_names(ok.status) == "blow_up" and float(ok.t_blowup) == pytest.approx(1.0, rel=1e-6)
