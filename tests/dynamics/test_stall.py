"""A solve whose steps fall to the rounding of `t` stops with ``dt_min_reached`` (hassejax.dynamics._guard).

Such a solve repeated one rejected step (its shorter retry rounds back to the same end time) until the step budget ran
out: 100,000 steps, ~4-7 s, then ``max_steps_reached``; under ``vmap`` its whole batch stepped in lockstep that long.
The closed form of softmax with `V = cI`, `A = I`, `Σ0 = sI` (spec dynamics.md §3: `Σ' = 2cΣ²` on `Σ = σI`) gives
`t* = t0 + 1/(2cs)`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.dynamics import PiecewiseConstant, Softmax, Status, solve_gaussian

I2 = np.eye(2)


@pytest.mark.parametrize("state", ["factor", "covariance"])
def test_a_blow_up_finer_than_the_time_resolution_stops_at_once(state):
    """float64 from `t0 = 100` with `t* − t0 = 1e-6` (result.py's own example: the default threshold 1e8 × tr Σ0
    needs steps below the rounding of `t`): ``dt_min_reached`` within a few hundred steps, at the last accepted
    step, at the closed-form `t*` to the time's resolution; no blow-up reported."""
    s = 5e5
    sol = solve_gaussian(Softmax(V=I2, A=I2), np.zeros(2), s * I2, t0=100.0, t1=101.0, state=state)
    assert int(sol.status) == Status.dt_min_reached
    assert float(sol.t_blowup) == np.inf
    assert int(sol.stats.num_steps) < 1000  # was 100,000 (the budget)
    t_star = 100.0 + 1 / (2 * s)
    # stopped where the time resolution ends: at t* to within rounding units of t (the solution's own time error)
    assert float(sol.t_final) > 100.0 and abs(float(sol.t_final) - t_star) < 1e-6 * (t_star - 100.0)
    # ... on the way up: the size grew by more than 1e3 (the decade test's reach) and stayed finite
    assert float(jnp.trace(sol.cov_final)) > 1e3 * 2 * s
    assert bool(jnp.all(jnp.isfinite(sol.cov_final)))


def test_a_float32_jump_at_a_layer_edge_stops_at_once():
    """float32, `V` from 1e-3 I to 100 I at `t = 10`: `t* = 10 + (4 − 0.02)/200 = 10.0199`, which float32 cannot
    resolve to the default threshold (1e4 × tr Σ0). It spent 99,957 rejected steps at 10.0199 (``max_steps_reached``,
    a review); now ``dt_min_reached`` there within a few hundred steps."""
    f = np.float32
    v = PiecewiseConstant(
        np.array([1e-3, 1e2, 1e2], f)[:, None, None] * np.eye(2, dtype=f), np.array([0, 10, 10.5, 40], f)
    )
    sol = solve_gaussian(Softmax(V=v, A=np.eye(2, dtype=f)), np.zeros(2, f), np.eye(2, dtype=f) / 4, t1=30.0,
                         rtol=1e-6, atol=1e-6)  # fmt: skip
    assert int(sol.status) == Status.dt_min_reached
    assert int(sol.stats.num_steps) < 1000
    t_star = 10 + (4 - 0.02) / 200
    assert 10.0 < float(sol.t_final) <= t_star and t_star - float(sol.t_final) < 1e-4


def test_a_stalled_member_does_not_hold_its_batch():
    """Under ``vmap`` the stalled member stops, and the others end as they do alone (the loop no longer steps the
    batch to the budget: the batch's step count stays small)."""
    scales = jnp.asarray([5e5, 0.25, 5e5])  # t* − t0 = 1e-6 (stalls), 2 (beyond t1 = 101: completed)

    def one(s):
        return solve_gaussian(Softmax(V=I2, A=I2), jnp.zeros(2), s * jnp.eye(2), t0=100.0, t1=101.0)

    batch = jax.vmap(one)(scales)
    assert [int(x) for x in batch.status] == [Status.dt_min_reached, Status.completed, Status.dt_min_reached]
    assert int(jnp.max(batch.stats.num_steps)) < 1000
    alone = one(0.25)
    assert int(alone.status) == Status.completed
    np.testing.assert_allclose(np.asarray(batch.cov_final[1]), np.asarray(alone.cov_final), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(batch.cov_final[1]), I2 / (4 - 2), rtol=1e-6)  # σ = s/(1 − 2s(t1 − t0))
    np.testing.assert_array_equal(np.asarray(batch.t_final[0]), np.asarray(batch.t_final[2]))


def test_a_controller_at_its_forced_dtmin_is_not_stopped():
    """A review: a PID controller with `dtmin` and ``force_dtmin=True`` clips its retry up to `dtmin` and forces that
    step through (its state changes on the rejection): the same end time is not a fixed point there, and the solve
    goes on to the blow-up (it was stopped ``dt_min_reached`` when only the step was compared)."""
    import diffrax

    s = 5e5
    pid = diffrax.PIDController(rtol=1e-8, atol=1e-8, dtmin=3e-14, force_dtmin=True)  # ~2 rounding units of t = 100
    sol = solve_gaussian(Softmax(V=I2, A=I2), np.zeros(2), s * I2, t0=100.0, t1=101.0, stepsize_controller=pid)
    assert int(sol.status) == Status.blow_up
    t_star = 100.0 + 1 / (2 * s)
    assert abs(float(sol.t_blowup) - t_star) < 1e-6 * (t_star - 100.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_steps_of_zero_length_at_layer_edges_are_moved_on(dtype):
    """A review: diffrax moves a step of zero length next to a jump time on, past the jump, so such a step is not a
    fixed point. From one rounding unit before a layer edge, and across two edges two units apart, the solves
    complete with the closed form (`1/σ(t) = 1/σ0 − 2 ∫ c`); they were stopped at once."""
    eye = np.eye(2, dtype=dtype)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == np.float32 else {}
    e = dtype(10.0)
    before = np.nextafter(e, dtype(0))
    v = PiecewiseConstant(np.array([0.01, 0.5, 0.02], dtype)[:, None, None] * eye, np.array([0, 5, e, 40], dtype))
    # the stretch [t0, e) is one rounding unit long: the short-layer warning names it (its contribution is off by
    # up to its own size, 0.5 · 1 unit here, far below the tolerance)
    with pytest.warns(RuntimeWarning, match=r"layer \[.*\) is only 1 rounding units of t long"):
        sol = solve_gaussian(Softmax(V=v, A=eye), np.zeros(2, dtype), eye / 4, t0=before, t1=dtype(20.0), **tol)
    assert int(sol.status) == Status.completed and float(sol.t_final) == 20.0
    rtol = 1e-5 if dtype == np.float32 else 1e-7
    np.testing.assert_allclose(np.asarray(sol.cov_final, np.float64), eye / (4 - 2 * 0.02 * 10), rtol=rtol)
    two = np.nextafter(np.nextafter(e, dtype(99)), dtype(99))
    v = PiecewiseConstant(np.array([0.01, 0.5, 0.02], dtype)[:, None, None] * eye, np.array([0, e, two, 40], dtype))
    for state in ("factor", "covariance"):
        with pytest.warns(RuntimeWarning, match=r"layer \[.*\) is only 2 rounding units of t long"):
            sol = solve_gaussian(Softmax(V=v, A=eye), np.zeros(2, dtype), eye / 4, t1=20.0, state=state, **tol)
        assert int(sol.status) == Status.completed, state
        np.testing.assert_allclose(np.asarray(sol.cov_final, np.float64), eye / (4 - 2 * (0.1 + 0.2)), rtol=rtol)
