"""Particle solves (spec dynamics.md §1, §4) against closed forms and invariants."""

from __future__ import annotations

import functools
import re
import warnings

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

from hassejax._xla_flags import jit_at_default_level
from hassejax.dynamics import (
    Linear,
    Masked,
    PiecewiseConstant,
    Sinkhorn,
    Softmax,
    Status,
    particle_velocity,
    solve_gaussian,
    solve_particles,
    status_names,
)
from hassejax.errors import ParameterError

pytestmark = pytest.mark.slow  # ~8 distinct compiled solves
R = np.random.default_rng(11)
TS = jnp.linspace(0.0, 2.0, 9)


def test_single_token_with_layerwise_value_matrix_is_matrix_exponential():
    """n = 1: the softmax weight is 1, so ẋ = V(t)x; with V piecewise constant x(2) = e^{V_2}e^{V_1}x0."""
    v1, v2 = R.normal(size=(2, 2)), R.normal(size=(2, 2))
    p = Softmax(V=PiecewiseConstant(np.stack([v1, v2])), A=R.normal(size=(2, 2)))
    x0 = R.normal(size=(1, 2))
    sol = solve_particles(p, x0, t1=2.0, ts=TS, rtol=1e-10, atol=1e-12)
    assert int(sol.status) == Status.completed and bool(jnp.all(sol.valid))
    want = np.stack(
        [
            (scipy.linalg.expm(t * v1) if t <= 1 else scipy.linalg.expm((t - 1) * v2) @ scipy.linalg.expm(v1)) @ x0[0]
            for t in np.asarray(TS)
        ]
    )
    np.testing.assert_allclose(np.asarray(sol.xs[:, 0]), want, rtol=1e-8, atol=1e-10)


def test_causal_mask_first_token_autonomous_and_sink_fixed():
    """Spec §7b item 14 (small): causal softmax, Q = K = V = I; with a sink at e_1 the sink never moves."""
    n, d = 12, 2
    x0 = R.normal(size=(n, d))
    base = Softmax(V=np.eye(d), Q=np.eye(d), K=np.eye(d))
    causal = np.tril(np.ones((n, n), bool))
    sol = solve_particles(Masked(base, causal), x0, t1=2.0, ts=TS, rtol=1e-10, atol=1e-12)
    assert int(sol.status) == Status.completed
    # ẋ_1 = V x_1 = x_1
    np.testing.assert_allclose(np.asarray(sol.xs[:, 0]), np.exp(np.asarray(TS))[:, None] * x0[0], rtol=1e-8)
    # token i only sees j <= i: the first k tokens evolve as a causal system of k tokens
    sol3 = solve_particles(Masked(base, causal[:3, :3]), x0[:3], t1=2.0, ts=TS, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(sol.xs[:, :3]), np.asarray(sol3.xs), rtol=1e-7, atol=1e-9)
    # with the sink: the first token now sees the sink and is no longer autonomous; the sink
    # is a fixed key, so the velocities are those of the masked field with the sink prepended
    sink = np.array([1.0, 0.0])
    ps = Masked(base, causal, sink=sink)
    sol_s = solve_particles(ps, x0, t1=2.0, ts=TS, rtol=1e-10, atol=1e-12)
    assert int(sol_s.status) == Status.completed
    assert not np.allclose(np.asarray(sol_s.xs[-1, 0]), np.asarray(sol.xs[-1, 0]))
    np.testing.assert_array_equal(np.asarray(ps.sink), sink)  # not part of the state
    assert sol_s.xs.shape == (9, n, d)


def test_sphere_model_keeps_unit_norm():
    x0 = R.normal(size=(10, 3))
    x0 /= np.linalg.norm(x0, axis=1, keepdims=True)
    p = Softmax(V=np.eye(3), A=2.0 * np.eye(3))
    sol = solve_particles(p, x0, t1=2.0, ts=TS, sphere=True, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(np.asarray(sol.xs), axis=-1), 1.0, atol=1e-8)
    # and the tokens cluster (GLPR): the mean pairwise inner product increases
    g0 = x0 @ x0.T
    g1 = np.asarray(sol.x_final) @ np.asarray(sol.x_final).T
    assert g1.mean() > g0.mean()


@functools.partial(jit_at_default_level, static_argnames="strict")
def _sinkhorn_solve(v, a, x0, strict=True):
    """The Sinkhorn particle solve of the two tests below, one program for both (the kernel's fields and the tokens
    are arguments). Up to 1000 Sinkhorn iterations an evaluation at rtol 1e-10: a program that runs longer than it
    compiles, so at XLA's default level rather than the suite's level 0 (tests/conftest.py)."""
    return solve_particles(Sinkhorn(V=v, A=a, tol=1e-12, strict=strict), x0, t1=2.0, ts=TS, rtol=1e-10, atol=1e-12)


def test_sinkhorn_particles_mean_is_exponential():
    """Columns of the plan sum to 1/n, so x̄' = V x̄ exactly: x̄(t) = e^{tV} x̄0 (spec §2).

    Its own generator: drawn from the module's shared one, the draw depended on which tests ran
    before in the same worker. Some draws leave the Sinkhorn iteration at its cap above `tol` as the
    tokens spread: those now stop as `non_finite` (next test)."""
    rng = np.random.default_rng(0)
    v = rng.normal(size=(2, 2)) * 0.5
    a = rng.normal(size=(2, 2))
    x0 = rng.normal(size=(16, 2))
    sol = _sinkhorn_solve(v, a, x0)
    assert status_names(sol.status) == "completed"
    want = np.stack([scipy.linalg.expm(t * v) @ x0.mean(0) for t in np.asarray(TS)])
    np.testing.assert_allclose(np.asarray(sol.xs.mean(axis=1)), want, rtol=1e-7, atol=1e-9)


def test_linear_attention_two_particle_blowup_and_constant_step():
    """d = 1, x2 = −x1: ẋ1 = (a v) x1³, so x1² = x0²/(1 − 2avx0²t), t* = 1/(2avx0²) (derived)."""
    a, v, x = 0.8, 1.5, 0.7
    p = Linear(V=np.array([[v]]), A=np.array([[a]]))
    x0 = np.array([[x], [-x]])
    t_star = 1 / (2 * a * v * x**2)
    sol = solve_particles(p, x0, t1=5.0, ts=TS, rtol=1e-10, atol=1e-12)
    assert status_names(sol.status) == "blow_up"
    assert float(sol.t_blowup) == pytest.approx(t_star, rel=1e-6)
    assert float(sol.decade_ratio) < 0.05
    ok = np.asarray(sol.valid)
    tt = np.asarray(TS)[ok]
    np.testing.assert_allclose(np.asarray(sol.xs[ok, 0, 0]) ** 2, x**2 / (1 - 2 * a * v * x**2 * tt), rtol=1e-7)
    assert not ok[-1] and bool(jnp.all(jnp.isfinite(sol.xs)))
    # constant step past t*, no event: non_finite, never a NaN trajectory
    sol_c = solve_particles(
        p, x0, t1=5.0, ts=TS, dt0=0.05, stepsize_controller=diffrax.ConstantStepSize(), size_threshold=np.inf
    )
    assert status_names(sol_c.status) == "non_finite"
    assert bool(jnp.all(jnp.isfinite(sol_c.xs))) and bool(jnp.all(jnp.isfinite(sol_c.x_final)))
    assert float(sol_c.t_blowup) == np.inf


def test_tokens_below_atol_warn_and_the_advised_atol_restores_the_blow_up_time():
    """The system of the test above at token scale `s` (`x → s x`, `β → β/s²`: the same `t*`); a fresh-user review
    found `t*` 2.3e-2 off at `s = 1e-7` with the default tolerances and no warning (the Gaussian solve warns)."""
    a, v, x = 0.8, 1.5, 0.7
    t_star = 1 / (2 * a * v * x**2)

    def solve(s, **kw):
        # beta a Python float (a weakly typed array, as the default) and the save times of the test above: its
        # compiled solve serves these three (neither changes a step or the blow-up time)
        p = Linear(V=np.array([[v]]), A=np.array([[a]]), beta=1.0 / s**2)
        return solve_particles(p, np.array([[x * s], [-x * s]]), t1=5.0, ts=TS, **kw)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scale one: no warning
        assert float(solve(1.0).t_blowup) == pytest.approx(t_star, rel=1e-4)
    s = 1e-7
    with pytest.warns(RuntimeWarning, match=r"below `atol` = 1e-06 \(largest coordinate of `x0` 7.0e-08\)") as rec:
        off = solve(s)
    assert rec[0].filename == __file__  # points at the caller's line
    assert abs(float(off.t_blowup) / t_star - 1) > 1e-3  # the inaccuracy the warning is about
    advised = float(re.search(r"atol = ([0-9.e+-]+)\)", str(rec[0].message)).group(1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(solve(s, atol=advised).t_blowup) == pytest.approx(t_star, rel=1e-4)


def test_vmap_over_seeds_converges_with_per_member_status():
    """V = −I, A = 0 (uniform attention): ẋ_i = −x̄, so x̄ decays like e^{−t} and the tokens stop
    (the spread is conserved); the steady-state event stops each member on its own clock."""
    p = Softmax(V=-np.eye(2), A=np.zeros((2, 2)))
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    x0s = jax.vmap(lambda k: jax.random.normal(k, (8, 2)))(keys)
    scale = jnp.array([1.0, 2.0, 0.5, 1.0])[:, None, None]

    def run(x0, t1):
        return solve_particles(p, x0, t1=t1, ts=jnp.linspace(0.0, 1.0, 9), converge_tol=1e-6, rtol=1e-10, atol=1e-12)

    sols = jax.vmap(run)(x0s * scale, jnp.array([100.0, 100.0, 100.0, 1.0]))
    assert list(status_names(sols.status)) == ["converged", "converged", "converged", "completed"]
    speeds = jax.vmap(lambda x: jnp.sqrt(jnp.mean(jnp.sum(particle_velocity(p, 0.0, x) ** 2, -1))))(sols.x_final)
    np.testing.assert_allclose(np.asarray(speeds[:3]), 1e-6, rtol=1e-3)
    # speed = |x̄0| e^{−t}: the event time is log(|x̄0| / 1e-6)
    xbar = np.linalg.norm(np.asarray((x0s * scale).mean(axis=1)), axis=-1)
    np.testing.assert_allclose(np.asarray(sols.t_final[:3]), np.log(xbar[:3] / 1e-6), rtol=1e-5)
    assert float(sols.t_final[3]) == 1.0


def test_feedforward_term():
    """V = 0: ẋ = Wx + b, so x(t) = e^{tW}x0 + W⁻¹(e^{tW} − I)b (Alcalde et al. affine term)."""
    w = R.normal(size=(2, 2))
    b = R.normal(size=2)
    p = Softmax(V=np.zeros((2, 2)), A=np.eye(2))
    x0 = R.normal(size=(3, 2))
    sol = solve_particles(p, x0, t1=2.0, ts=TS, feedforward=(w, b), rtol=1e-10, atol=1e-12)
    e = scipy.linalg.expm(2.0 * w)
    want = x0 @ e.T + np.linalg.solve(w, (e - np.eye(2)) @ b)
    np.testing.assert_allclose(np.asarray(sol.x_final), want, rtol=1e-8)


def test_particle_errors(no_typecheck):
    p = Softmax(V=np.eye(2), A=np.eye(2))
    x0 = np.zeros((4, 2))
    with pytest.raises(ParameterError, match=r"`model` must be an attention kernel .*got dict"):
        solve_particles({"V": np.eye(2)}, x0, t1=1.0)
    with pytest.raises(
        ParameterError, match=r"`x0` must have shape \(n, d\) with d = 2 \(from model\); got shape \(4, 3\)"
    ):
        solve_particles(p, np.zeros((4, 3)), t1=1.0)
    with pytest.raises(ParameterError, match=r"`x0` must have n = 3 rows \(the mask size of model\)"):
        solve_particles(Masked(p, np.tril(np.ones((3, 3), bool))), x0, t1=1.0)
    with pytest.raises(ParameterError, match=r"unit norm for sphere=True"):
        solve_particles(p, np.ones((4, 2)), t1=1.0, sphere=True)
    with pytest.raises(ParameterError, match=r"`x0` must be finite"):
        solve_particles(p, np.full((4, 2), np.inf), t1=1.0)
    with pytest.raises(ParameterError, match=r"`feedforward` must be \(W, b\)"):
        solve_particles(p, x0, t1=1.0, feedforward=(np.eye(3), np.zeros(2)))
    with pytest.raises(ParameterError, match=r"`t1` must be > `t0`"):
        solve_particles(p, x0, t1=-1.0)
    with pytest.raises(ParameterError, match=r"`converge_tol` must be > 0"):
        solve_particles(p, x0, t1=1.0, converge_tol=0.0)


@pytest.mark.parametrize(
    "feedforward, message",
    [
        ((np.full((2, 2), np.nan), np.zeros(2)), r"`feedforward\[0\] \(W\)` must be finite"),
        ((np.eye(2), np.array([np.inf, 0.0])), r"`feedforward\[1\] \(b\)` must be finite"),
        ((np.eye(2),), r"`feedforward` must be a pair \(W, b\) of arrays or None; got a tuple of length 1"),
        ((np.eye(2), "b"), r"`feedforward\[1\] \(b\)` must be a real array; got the string 'b'"),
        ((np.eye(2), None), r"`feedforward\[1\] \(b\)` must be an array; got None"),
    ],
    ids=["nan-W", "inf-b", "one-entry", "string-b", "none-b"],
)
def test_bad_feedforward_is_refused_before_the_solve(feedforward, message, no_typecheck):
    """A NaN in `W` ended the solve ``non_finite`` at `t0` (a result to read, not an error); a 1-tuple raised a raw
    ValueError from unpacking."""
    with pytest.raises(ParameterError, match=message):
        solve_particles(Softmax(V=np.eye(2), A=np.eye(2)), np.zeros((4, 2)), t1=1.0, feedforward=feedforward)


@pytest.mark.parametrize("form", ["callable", "piecewise"])
def test_nan_vector_field_is_non_finite_at_the_time_it_appears(form):
    """V(t) = I until t = 0.3, then NaN (a callable) or an overflowing 1e300·I (a layer): `non_finite` at
    t_final ≈ 0.3 within a few hundred steps (was: 100,000 rejected steps and max_steps_reached).

    Before 0.3, V = I, A = 0 gives ẋ_i = x̄, so x̄(t) = x̄0 e^t and x_i − x̄ is constant (derived).
    """
    if form == "callable":
        v = lambda t: jnp.where(t < 0.3, 1.0, jnp.nan) * jnp.eye(2)
    else:
        v = PiecewiseConstant(np.stack([np.eye(2), 1e300 * np.eye(2)]), t_edges=np.array([0.0, 0.3, 1.0]))
    x0 = R.normal(size=(4, 2))
    ts = jnp.linspace(0.0, 1.0, 11)
    sol = solve_particles(Softmax(V=v, A=np.zeros((2, 2))), x0, t1=1.0, ts=ts)
    assert status_names(sol.status) == "non_finite"
    assert float(sol.t_final) == pytest.approx(0.3, abs=1e-9)
    assert int(sol.stats.num_steps) < 1000
    mean0 = x0.mean(axis=0)
    want = x0 - mean0 + mean0 * np.exp(float(sol.t_final))
    np.testing.assert_allclose(np.asarray(sol.x_final), want, rtol=1e-5)
    # the requested save times, valid up to the stop
    np.testing.assert_array_equal(np.asarray(sol.ts), np.asarray(ts))
    np.testing.assert_array_equal(np.asarray(sol.valid), np.asarray(ts) < 0.3 - 1e-9)
    assert float(sol.t_blowup) == np.inf and bool(jnp.all(jnp.isfinite(sol.xs)))


@pytest.mark.parametrize("state", ["particles", "covariance", "factor", "projective"])
def test_a_nan_parameter_is_non_finite_within_a_small_step_budget(state):
    """A traced NaN `A` makes every step NaN; the guard stops such a solve after ~63 rejected steps (float64), so with
    `max_steps=20` it ended `max_steps_reached` (a review), as if the budget were the problem."""
    bad = jnp.full((2, 2), jnp.nan)
    if state == "particles":
        solve = jax.jit(lambda a: solve_particles(Softmax(V=np.eye(2), A=a), np.ones((3, 2)), t1=1.0, max_steps=20))
    else:
        cov0 = np.eye(2) / 4
        solve = jax.jit(
            lambda a: solve_gaussian(Softmax(V=np.eye(2), A=a), np.zeros(2), cov0, t1=1.0, max_steps=20, state=state)
        )
    sol = solve(bad)
    assert status_names(sol.status) == "non_finite"
    assert float(sol.t_final) == 0.0 and int(sol.stats.num_steps) == 20


def test_unconverged_sinkhorn_stops_the_solve_not_a_silent_drift():
    """Draw 8 of `default_rng(seed)` (the mean test's recipe): the Sinkhorn iteration stops at its
    1000-iteration cap above `tol = 1e-12` as the tokens spread, and the mean drifted off `e^{tV} x̄0`
    by 6e-3 without a word. Strict (default): `non_finite` where it first misses `tol`, every saved
    point before that on `e^{tV} x̄0`; `strict=False` keeps the old behaviour."""
    rng = np.random.default_rng(8)
    v = rng.normal(size=(2, 2)) * 0.5
    a = rng.normal(size=(2, 2))
    x0 = rng.normal(size=(16, 2))
    sol = _sinkhorn_solve(v, a, x0)
    assert status_names(sol.status) == "non_finite" and 0.0 < float(sol.t_final) < 2.0
    ok = np.asarray(sol.valid)
    want = np.stack([scipy.linalg.expm(t * v) @ x0.mean(0) for t in np.asarray(TS)[ok]])
    np.testing.assert_allclose(np.asarray(sol.xs.mean(axis=1))[ok], want, rtol=1e-7, atol=1e-9)
    loose = _sinkhorn_solve(v, a, x0, strict=False)
    assert status_names(loose.status) == "completed"
