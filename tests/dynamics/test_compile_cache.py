"""The solvers' compiled programs hold no host callback, so JAX's persistent cache keeps them.

(Issue 13 item 2.) diffrax checks ``SaveAt(ts=...)`` with equinox's ``error_if``, which
compiles to a ``pure_callback``, and JAX never writes a program holding a host callback to
its persistent compilation cache. The solvers check concrete save times themselves and
skip those two checks (``hassejax.dynamics._checked_saveat``); with traced save times the
checks are made in the program instead (status `invalid_times`).
"""

from __future__ import annotations

import contextlib
import os

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.dynamics import L2, Softmax, solve_gaussian, solve_particles, status_names
from hassejax.errors import ParameterError

MODEL = Softmax(V=jnp.eye(2), A=jnp.eye(2))


def _gaussian(beta):
    model = Softmax(V=jnp.eye(2), A=jnp.eye(2), beta=beta)
    return solve_gaussian(model, jnp.zeros(2), jnp.eye(2) / 2, t1=5.0, ts=np.linspace(0, 5, 6), rtol=1e-6, atol=1e-6)


def _particles(scale):
    x0 = scale * jnp.arange(8.0).reshape(4, 2) / 8
    return solve_particles(L2(V=-jnp.eye(2), Q=jnp.eye(2), K=jnp.eye(2)), x0, t1=1.0, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fn", [_gaussian, _particles], ids=["gaussian", "particles"])
def test_solve_program_has_no_host_callback(fn):
    text = jax.jit(lambda s: fn(s).t_final).lower(1.0).as_text()
    assert "callback" not in text
    # the skipped checks are only skipped: the proxy is gone after the solve
    import diffrax._integrate as integrate_module

    assert type(integrate_module.eqxi).__name__ != "_EqxiProxy"


def test_results_equal_with_and_without_the_checks():
    """The same solve with traced save times (diffrax checks on) gives the same numbers."""
    ts = np.linspace(0, 5, 6)
    model = Softmax(V=jnp.eye(2), A=jnp.eye(2), beta=1.0)
    fixed = solve_gaussian(model, jnp.zeros(2), jnp.eye(2) / 2, t1=5.0, ts=ts, rtol=1e-6, atol=1e-6)
    traced = jax.jit(lambda t: solve_gaussian(model, jnp.zeros(2), jnp.eye(2) / 2, t1=5.0, ts=t, rtol=1e-6, atol=1e-6))(
        jnp.asarray(ts)
    )
    assert int(fixed.status) == int(traced.status)
    np.testing.assert_array_equal(np.asarray(fixed.cov), np.asarray(traced.cov))
    assert float(fixed.t_blowup) == float(traced.t_blowup)


def test_traced_bad_save_times_flag_the_member_without_a_callback():
    """Save times unknown at trace time are checked in the program: a bad member gets
    `invalid_times` (initial state, nothing valid), a good one solves as usual, and the program
    holds no host callback (diffrax's check would be one)."""
    from hassejax.dynamics import Status

    f = jax.jit(jax.vmap(_gaussian_at))
    # six save times a member, as the solves of the test above: the single solve `good` is their compiled program
    batch = jnp.array(
        [
            [0.0, 0.2, 0.4, 0.5, 0.8, 1.0],  # good
            [0.0, 0.5, 0.2, 0.6, 0.8, 1.0],  # not sorted
            [0.0, 1.0, 2.0, 3.0, 4.0, 6.0],  # past t1 = 5
            [0.2, 0.4, 1.0, 2.0, 3.0, 5.0],  # good, from 0.2
        ]
    )
    assert "callback" not in f.lower(batch).as_text()
    sol = f(batch)
    good = _gaussian_at(np.asarray(batch[0]))
    status = np.asarray(sol.status)
    assert status.tolist()[1:3] == [Status.invalid_times, Status.invalid_times]
    assert status[0] == int(good.status) and status[3] == Status.blow_up
    for i in (1, 2):
        assert not np.asarray(sol.valid[i]).any() and float(sol.t_final[i]) == 0.0
        np.testing.assert_allclose(np.asarray(sol.cov_final[i]), np.eye(2) / 2, rtol=1e-6)  # U0 U0ᵀ
        assert float(sol.t_blowup[i]) == np.inf
        assert int(sol.stats.num_steps[i]) == int(sol.stats.num_accepted_steps[i]) == 0  # nothing solved
    assert int(sol.stats.num_steps[0]) == int(good.stats.num_steps) > 0
    np.testing.assert_allclose(np.asarray(sol.cov[0]), np.asarray(good.cov), rtol=1e-6)


def test_traced_size_threshold_not_above_the_initial_size_flags_the_member():
    """A per-member `size_threshold` (traced under `vmap`) at or below `tr Σ0`, or NaN, could never fire
    (a concrete one raises `ParameterError`): the member gets `invalid_threshold` (initial state, nothing
    valid), the others solve as alone. Was: the event silently off, `completed` (or the step budget spent
    on a blow-up). Also a concrete threshold against traced initial states, and solve_particles."""
    from hassejax.dynamics import Status, status_names

    # a budget of 2,000 steps (the blow-up member needs 134): under vmap the `inf` member, whose blow-up ends at the
    # budget, kept the whole batch stepping in lockstep through the default 100,000 (5 s of the test's run time)
    def one(threshold):
        return solve_gaussian(
            MODEL, jnp.zeros(2), jnp.eye(2) / 2, t1=5.0, rtol=1e-6, atol=1e-6, size_threshold=threshold, max_steps=2000
        )

    f = jax.jit(jax.vmap(one))
    thresholds = jnp.array([1e6, 1.0, 0.5, jnp.nan, 1.001, jnp.inf])  # tr Σ0 = 1
    assert "callback" not in f.lower(thresholds).as_text()
    sol = f(thresholds)
    names = status_names(np.asarray(sol.status)).tolist()
    assert names[:5] == [status_names(one(1e6).status), "invalid_threshold", "invalid_threshold", "invalid_threshold",
                         "undetermined"]  # fmt: skip
    # `inf`: no event, not an invalid threshold (the blow-up at t* = 1 then ends the solve without one: its steps at
    # the rounding of t, dt_min_reached, or the float range, non_finite; was the step budget, max_steps_reached)
    assert names[5] in ("non_finite", "dt_min_reached")
    assert names[0] == "blow_up" and float(sol.t_blowup[0]) == pytest.approx(float(one(1e6).t_blowup), rel=1e-9)
    for i in (1, 2, 3):  # nothing solved: a zero field's few steps, not counted (was: the whole step budget)
        assert int(sol.stats.num_steps[i]) == 0
        assert not np.asarray(sol.valid[i]).any() and float(sol.t_final[i]) == 0.0
        np.testing.assert_allclose(np.asarray(sol.cov_final[i]), np.eye(2) / 2, rtol=1e-6)
        assert float(sol.t_blowup[i]) == np.inf
    with pytest.raises(ParameterError, match="size_threshold"):
        one(1.0)
    # a concrete threshold, traced initial covariances: checked in the program as well
    covs = jnp.stack([jnp.eye(2) / 2, 500 * jnp.eye(2)])  # tr Σ0 = 1 and 1000, threshold 500
    g = jax.jit(jax.vmap(lambda c: solve_gaussian(MODEL, jnp.zeros(2), c, t1=5.0, size_threshold=500.0).status))
    assert g(covs).tolist() == [Status.blow_up, Status.invalid_threshold]
    # float32, factor state: `tr Σ0` equal to the threshold, the size a sum of squares that rounds just below
    # it: flagged (the check's margin), not a crossing at once read `undetermined` (review)
    eye32 = jnp.eye(2, dtype=jnp.float32)
    g32 = jax.vmap(
        lambda c: (
            solve_gaussian(MODEL, jnp.zeros(2, jnp.float32), c, t1=5.0, size_threshold=1.0, rtol=1e-6, atol=1e-6).status
        )
    )
    assert status_names(g32(jnp.stack([0.5 * eye32, 2 * eye32]))).tolist() == ["invalid_threshold"] * 2
    x0 = jnp.asarray(np.random.default_rng(0).normal(size=(2, 6, 2)))
    x0 = x0.at[1].multiply(10.0)  # spreads ~1 and ~100, threshold 20
    h = jax.jit(jax.vmap(lambda x: solve_particles(MODEL, x, t1=0.1, size_threshold=20.0).status))
    assert status_names(h(x0)).tolist() == ["completed", "invalid_threshold"]


def _gaussian_at(ts):
    return solve_gaussian(MODEL, jnp.zeros(2), jnp.eye(2) / 2, t1=5.0, ts=ts, rtol=1e-6, atol=1e-6)


def test_progress_meter_is_passed_to_diffrax(capfd):
    sol = solve_gaussian(
        MODEL, jnp.zeros(2), jnp.eye(2) / 2, t1=0.5, rtol=1e-6, atol=1e-6, progress_meter=diffrax.TextProgressMeter()
    )
    assert int(sol.status) == 0 and float(sol.t_final) == 0.5
    assert "100.00%" in capfd.readouterr().out


def test_persistent_cache_writes_the_solve_program():
    folder = jax.config.jax_compilation_cache_dir
    if not folder:
        pytest.skip("persistent compilation cache turned off (HASSEJAX_COMPILE_CACHE=0)")

    def cache_probe_gaussian_solve(beta):
        return _gaussian(beta).t_final

    jax.jit(cache_probe_gaussian_solve).lower(1.0).compile()
    names = os.listdir(folder)
    assert any(name.startswith("jit_cache_probe_gaussian_solve") for name in names)


def test_progress_meter_of_the_wrong_type_is_named(no_typecheck):
    from hassejax.errors import ParameterError

    with pytest.raises(ParameterError, match="`progress_meter` must be a diffrax progress meter"):
        solve_gaussian(MODEL, jnp.zeros(2), jnp.eye(2), t1=1.0, progress_meter="tqdm")


@contextlib.contextmanager
def _backend_compiles():
    """The durations of the backend compiles while the block runs (``jax.monitoring``'s events)."""
    compiles = []
    listening = [True]

    def listener(event, duration, **kwargs):
        if listening[0] and event == "/jax/core/compile/backend_compile_duration":
            compiles.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield compiles
    finally:
        listening[0] = False


def test_solves_differing_only_in_tolerances_share_one_program():
    """The PID controller's `rtol`, `atol` are traced arrays, not static floats: a second and third
    tolerance compile nothing (counted with ``jax.monitoring``'s backend-compile events)."""
    cov0 = jnp.eye(2) / 2
    with _backend_compiles() as compiles:
        steps = []
        for i, tol in enumerate((1e-5, 1e-7, 1e-9)):
            sol = solve_gaussian(MODEL, jnp.zeros(2), cov0, t1=0.95, rtol=tol, atol=tol)  # t* = 1
            steps.append(int(sol.stats.num_steps))
            if i == 0:
                compiles.clear()  # the first solve compiles (or loads) its program
    assert compiles == []
    assert steps[0] < steps[1] < steps[2]  # the tolerances did reach the controller


def test_plane_and_sphere_particle_solves_share_one_program():
    """``sphere`` is a traced Boolean in the solver's program: a sphere solve after a plane one of the
    same shapes compiles nothing, and each still solves its own system (unit rows on the sphere)."""
    angles = jnp.linspace(0.3, 2.8, 5)
    x0 = jnp.stack([jnp.cos(angles), jnp.sin(angles)], axis=1)
    model = Softmax(V=jnp.eye(2), A=jnp.eye(2))
    with _backend_compiles() as compiles:
        plane = solve_particles(model, x0, t1=1.0, ts=np.linspace(0, 1, 5), rtol=1e-8, atol=1e-8)
        compiles.clear()
        sphere = solve_particles(model, x0, t1=1.0, ts=np.linspace(0, 1, 5), rtol=1e-8, atol=1e-8, sphere=True)
    assert compiles == []
    np.testing.assert_allclose(np.linalg.norm(np.asarray(sphere.x_final), axis=1), 1.0, atol=1e-6)
    assert np.max(np.abs(np.linalg.norm(np.asarray(plane.x_final), axis=1) - 1.0)) > 1e-2


@pytest.mark.parametrize("solver", ["gaussian", "particles"])
def test_infinite_size_threshold_builds_the_program_without_the_event(solver):
    """``size_threshold=inf`` (known before tracing): no size event is built, so the program loses the
    event's root find (one ``while`` loop fewer) and the decade test; a finite threshold keeps it. The
    solve itself is unchanged: same status, steps and states as with the default event, which does
    not fire here."""
    stable = Softmax(V=jnp.eye(2), A=-jnp.eye(2))
    # the shapes of the file's other solves (six save times and a 2x2 covariance; five save times and five
    # particles), whose compiled programs the solves with the default event share
    ts = np.linspace(0.0, 3.0, 6 if solver == "gaussian" else 5)

    def solve(x, threshold):
        if solver == "gaussian":
            return solve_gaussian(stable, jnp.zeros(2), x, t1=3.0, ts=ts, size_threshold=threshold)
        return solve_particles(stable, x, t1=3.0, ts=ts, size_threshold=threshold)

    particles = jnp.array([[1.0, 0.2], [-0.3, 0.5], [0.1, -1.0], [0.6, -0.4], [-0.8, 0.3]])
    x = jnp.eye(2) / 2 if solver == "gaussian" else particles
    loops = {
        th: jax.jit(lambda x, th=th: solve(x, th).status).lower(x).as_text().count("stablehlo.while")
        for th in (None, 1e6, np.inf)
    }
    assert loops[None] == loops[1e6] == loops[np.inf] + 1
    with_event, without = solve(x, None), solve(x, np.inf)
    assert int(with_event.status) == int(without.status) == 0  # completed
    assert int(with_event.stats.num_steps) == int(without.stats.num_steps)
    for a, b in zip(jax.tree_util.tree_leaves(with_event), jax.tree_util.tree_leaves(without)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_infinite_size_threshold_reports_a_blow_up_as_the_step_budget_not_as_blow_up():
    """Without the size event a blow-up is not located: the solve ends at the step budget (``max_steps_reached``),
    where its steps reach the rounding of `t` (``dt_min_reached``) or as ``non_finite``, at the last finite state, with
    `t_blowup = inf`; never NaN."""
    blowing = Softmax(V=jnp.eye(2), A=jnp.eye(2))  # t* = 1 from Σ0 = I/2
    sol = solve_gaussian(blowing, jnp.zeros(2), jnp.eye(2) / 2, t1=5.0, size_threshold=np.inf, max_steps=500)
    assert status_names(sol.status) in ("max_steps_reached", "dt_min_reached", "non_finite")
    assert float(sol.t_blowup) == np.inf and 0.9 < float(sol.t_final) < 1.0 + 1e-5  # the numerical solution lags t*
    assert bool(jnp.all(jnp.isfinite(sol.cov_final)))
    located = solve_gaussian(blowing, jnp.zeros(2), jnp.eye(2) / 2, t1=5.0)
    assert status_names(located.status) == "blow_up" and abs(float(located.t_blowup) - 1.0) < 1e-6


def test_infinite_size_threshold_keeps_a_user_controllers_steps():
    """With a user-supplied adaptive controller (whose error norm sees the decade-test scalar) `inf` takes the
    same steps as a finite threshold the size never nears (1e30). Not a before/after test: in float64 the
    scalar's value did not change the steps here; the fresh-user review saw it do so in float32."""
    model = Softmax(V=jnp.eye(2), A=jnp.zeros((2, 2)))
    x0 = jnp.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.5]])
    kw = dict(
        t1=8.0, feedforward=(jnp.eye(2), jnp.zeros(2)), stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-6)
    )
    a, b = (
        solve_particles(model, x0, size_threshold=1e30, **kw),
        solve_particles(model, x0, size_threshold=np.inf, **kw),
    )
    assert int(a.stats.num_steps) == int(b.stats.num_steps)
    np.testing.assert_array_equal(np.asarray(a.x_final), np.asarray(b.x_final))


@pytest.mark.parametrize("name", ["size_threshold", "converge_tol"])
def test_non_scalar_event_settings_are_refused(name, no_typecheck):
    with pytest.raises(ParameterError, match=f"`{name}` must be a scalar"):
        solve_gaussian(MODEL, jnp.zeros(2), jnp.eye(2) / 2, t1=1.0, **{name: np.array([1e6, 1e6])})
