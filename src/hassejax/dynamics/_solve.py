"""Shared solve machinery: diffrax call, events, status and blow-up classification (private).

Spec dynamics.md §4. One function, :func:`integrate`, used by both the Gaussian moment
solver and the particle solver. It

1. runs ``diffrax.diffeqsolve`` with ``throw=False`` and an :class:`diffrax.Event` made of
   (a) the size threshold and (b) optionally the steady state, merged into one real-valued
   decreasing condition `min(log threshold − log λ(y), log speed − log tol)` located by an
   ``optimistix.Bisection`` root find on the dense output (one scalar condition keeps the
   root find cheap to compile and correct under ``vmap``; which part fired is read off the
   final state);
2. measures, at the stop, the size `λ`, its rate `λ'` and the growth exponent
   `p = λλ''/λ'²` (forward-mode derivatives along the flow);
3. maps the diffrax result, the event and the finiteness of the state to one
   :class:`~hassejax.dynamics.result.Status`;
4. replaces saved points after the stop or holding NaN/inf by the last finite state and
   marks them invalid, so no NaN/inf is ever returned as a state; the save times returned
   are the requested ones, whatever the status;
5. stops at the first step whose state would be NaN/inf (:class:`~._guard.FiniteGuard`
   around the step-size controller: a NaN vector field, or a constant step past a
   blow-up), reporting `non_finite` with the last finite state and its time. A state whose
   size `λ` reaches `1/finfo(dtype).tiny` (float32: 8.5e37; float64: 4.5e307) counts as out
   of range too: beyond it `1/λ` is no longer a normal float, so a vector field that divides
   by the state (L2's `(I + 2Σ)⁻¹`) is flushed to exactly zero and the solve would "complete"
   with a frozen state (derived).
6. under ``vmap``, reports for a member without an event its last accepted time and state, and
   for an event the root find cannot locate (its interpolated state not finite or not at the
   event) the end of the step that crossed, or ``non_finite`` when that state has not crossed
   (see :mod:`._guard`, ``record``).

Blow-up versus divergence (spec §4), the *decade test* (derived): the solve also integrates
the time spent below `L_a = threshold/100`, i.e. the time `t_a` at which the size entered its
last two decades before the event at `t_e`, and compares the extrapolated remaining time
`τ = λ/λ'` at the event with the time those two decades took:

    `ρ = τ / (t_e − t_a)`.

Finite-time blow-up `λ ≈ c/(t* − t)` (`1/λ` falling linearly to zero) gives `ρ ≈ 1/99`
(each decade takes a tenth of the previous one); exponential growth `λ ∝ e^{rt}` gives
`ρ = 1/(2 ln 10) ≈ 0.22`, polynomial growth more. The crossing is reported as `blow_up`
when `ρ < 0.05`, else `diverge`, and `undetermined` where the growth cannot be measured
at the crossing (the crossing not located inside its step, or in a step too long to resolve it:
longer than half the span `t_e − t_a` that the test times, or, for a constant step, than the
remaining time `λ/λ'`; a time `t_a` outside `[t0, t_e]`; rates `λ'`, `λ''` not finite; the size
rounding noise; or the initial size already within the last two decades below the threshold). The test needs the threshold at least ~1e3 times the
initial size (the default is 1e8 times) and, unlike a local derivative test, tolerates
oscillating growth (e.g. the counterexample of spec §3, whose `tr Σ` blows up in bursts).
Blow-up at a layer edge (derived): the vector field jumps at the edges `e` of
:class:`~hassejax.dynamics.PiecewiseConstant` parameters (the default controller's ``jump_ts``), and a
blow-up of the layer before `e` at `t* ≤ e` ends the solution there, while one at `t* > e` is crossed
(the next layer may turn it back). The computed `t*` carries the solve's error (softmax, default
tolerances: `+4e-7` at `t* = 1`), so within that error of `e` the side is not known: the solve reaching
`e` with the state's own estimate `t* ≈ t + λ/λ'` (left of `e`) within :func:`edge_resolution` of `e`
stops there (the guard's edge check, only where the kernel's growth is not bounded), and a threshold event
before `e` that the decade test calls a blow-up and whose extrapolated `t*` lies past
`e` minus that resolution is not reported as a blow-up either: both are ``undetermined`` with `t_final`
just before `e` (resp. the event), rather than the later blow-up, or none, of the next layers that a
silent crossing would report. Farther from an edge nothing changes. The end `t1` is such an edge too: a solve
that reaches it below the threshold but within its last two decades, growing like a blow-up (local exponent
`λλ''/λ'² ≥ 1.5`, :data:`END_EXPONENT`) with the state's own `λ/λ'` within the resolution (an adaptive
controller's `max(rtol, atol / |y0|)`), is ``undetermined``, not ``completed``: the blow-up may lie before `t1`;
below those two decades, the same with `λ/λ'` within :data:`END_CLOSE_TOLERANCES` tolerances (at most
:data:`END_CLOSE_MAX` of the span).

The local growth exponent `p = λλ''/λ'²` (2 for `c/(t* − t)`, 1 for exponential growth)
is reported as well, for information. The blow-up time is `t_e + λ/λ'` (extrapolated,
exact for `λ = c/(t* − t)`) or `t_e` (threshold), as requested.
"""

from __future__ import annotations

from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
import optimistix as optx

from .._tracing import is_traced
from ..errors import ParameterError
from ._arguments import (  # noqa: F401 - re-exported: the solvers and hassejax.pretrained call them as _solve.*
    THRESHOLD_MARGIN_ULPS,
    check_finite_params,
    check_positive,
    check_progress_meter,
    check_size_threshold,
    check_solver,
    check_solver_settings,
    check_state_precision,
    check_times,
    concrete,
    given_numbers,
    is_concrete,
    real_array,
    state_dtype,
    token_spread,
    warn_short_layers,
)
from ._checked_saveat import saveat_checks_skipped
from ._guard import STOP_ULPS, adapts, guard, tree_finite
from .result import BlowupMethod, Status

DECADES = 2.0
"""The decade test looks at the last `DECADES` decades of the size before the event."""

DECADE_RATIO_THRESHOLD = 0.05
"""`ρ < 0.05` at the threshold event ⇒ finite-time blow-up (see module docstring)."""

EDGE_RESOLUTION_TOLERANCES = 1e3
"""A blow-up within `1e3 · max(rtol, atol / |y0|, eps) · (e − t0)` (plus 64 rounding units of `e`) of a layer edge `e` is not
resolved by the solve: see :func:`edge_resolution`."""

END_EXPONENT = 1.5
"""A solve that reaches `t1` below the threshold is ``undetermined`` only with the local growth exponent
`λλ''/λ'² ≥ 1.5` there (2 for a blow-up `c/(t* − t)`, 1 for exponential growth), the size in the last two decades
below the threshold and `λ/λ'` within the time resolution (see :func:`integrate`)."""

END_CLOSE_TOLERANCES = 50.0
"""Below the last two decades too, a solve that reaches `t1` growing like a blow-up (:data:`END_EXPONENT`) with
`λ/λ'` within `50 · max(rtol, atol / |y0|) · (t1 − t0)` (at most :data:`END_CLOSE_MAX` `· (t1 − t0)`) is
``undetermined``: the blow-up may lie before `t1`. Measured (a review, softmax `V = A = I`, `Σ0 = sI`, `s` from 1e-2
to 1e-8, factor, covariance and projective states): the computed `t*` erred by up to 29–31 of those tolerances
(factor state, `rtol = 1e-8`, a tiny `atol`), 0.01–0.03 at `rtol = 1e-4, 1e-3`; a margin of 1.7 at worst."""

END_CLOSE_MAX = 1e-3
"""The most of `t1 − t0` that :data:`END_CLOSE_TOLERANCES` reaches: loose tolerances (a review: `rtol = 1e-3` to
`0.5`) would read accurate solves that end percents before a blow-up ``undetermined``."""

SIZE_FLOOR_FACTOR = 1e2
"""A crossing with the size below `100 ×` its rounding floor (a spread within ten rounding units) is
``undetermined``: the growth may be rounding alone (see ``integrate``'s `size_floor`)."""


class IntegrateOut(eqx.Module):
    ts: jax.Array
    ys: object
    valid: jax.Array
    y_final: object
    t_final: jax.Array
    status: jax.Array
    t_blowup: jax.Array
    blowup_method: jax.Array
    growth_exponent: jax.Array
    decade_ratio: jax.Array
    num_steps: jax.Array
    num_accepted_steps: jax.Array
    num_rejected_steps: jax.Array


def growth_rates(f: Callable, size: Callable, t, y):
    """`(λ, λ', λ'')` of `λ = size(y(t))` along `y' = f(t, y)` (forward mode, total time derivative)."""

    def first(tt, yy):
        return jax.jvp(size, (yy,), (f(tt, yy),))

    lam, dlam = first(t, y)
    ones = jnp.ones_like(t)
    _, ddlam = jax.jvp(lambda tt, yy: first(tt, yy)[1], (t, y), (ones, f(t, y)))
    return lam, dlam, ddlam


def integrate(
    f: Callable,
    y0,
    *,
    t0,
    t1,
    ts,
    size: Callable,
    speed: Callable | None,
    threshold,
    converge_tol,
    solver: diffrax.AbstractSolver,
    stepsize_controller: diffrax.AbstractStepSizeController,
    dt0,
    max_steps: int,
    extrapolate: bool,
    ts_checked: bool = False,
    ts_default: bool = False,
    size_event: bool = True,
    progress_meter: diffrax.AbstractProgressMeter | None = None,
    size_floor: Callable | None = None,
    threshold_given: bool = False,
    growth_bound: Callable | None = None,
    tolerances_ok=None,
    converge_tol_ok=None,
    layer_edges=None,
) -> IntegrateOut:
    """Solve `y' = f(t, y)` with the size-threshold (and steady-state) events; see module docstring.

    `size(y)` is the scalar size `λ` (e.g. `tr Σ`), `speed(t, y, dy)` the scalar whose falling
    below `converge_tol` means steady state (None: no steady-state event). `ts_checked`: `t0`,
    `t1`, `ts` were concrete and checked (:func:`check_times`); otherwise they are checked in
    the program and a member with times that are not finite and sorted within `[t0, t1]` gets
    status ``invalid_times`` (initial state, nothing valid). Diffrax's own save-time checks are
    skipped either way (:mod:`._checked_saveat`: no host callback, so the program is
    persistently cacheable). `ts_default`: `ts` is `[t0, t1]`, whose rows are the initial state and the
    end state when the solve reaches `t1` (saved without interpolating: one ``SaveAt(t1=True)``).
    `size_event`: False when `threshold` is `+inf` (known before tracing): the program then has no
    size event, no decade-test quadrature and no growth rates (with no `speed` either, no event
    and no root find at all), the smaller program of a solve that only integrates; a member that
    blows up stops as ``non_finite`` (or at the step budget) instead of ``blow_up``.
    `progress_meter`: a diffrax progress meter (None: ``NoProgressMeter()``).
    `size_floor(y)`: the size that rounding alone gives the state `y` (None: no such floor, e.g. a
    covariance, whose trace adds positive terms); a crossing with the size within
    `SIZE_FLOOR_FACTOR` of it is ``undetermined``, as is one whose growth rates are not finite and
    one with the initial size not below `threshold / 10^DECADES`.
    `threshold_given`: `threshold` is the caller's (not the default from the initial size); it is
    then checked in the program too (a concrete one was checked before, :func:`check_size_threshold`;
    a traced one, or one against a traced initial size, cannot be): a member whose finite initial
    size is not below it by `THRESHOLD_MARGIN_ULPS / 2` rounding units, or whose threshold is NaN, gets status
    ``invalid_threshold`` (initial state, nothing valid): its size event could never fire.
    `growth_bound(t)`: a rate `r` with `d/dt size ≤ r · size` for every state at time `t`, `inf` where
    there is none (None: none anywhere); a crossing at a time where it is finite is ``diverge`` whatever
    the decade test reads (no finite-time blow-up: Grönwall), ``undetermined`` only for the size-floor
    cause (a crossing that may be rounding alone).
    `tolerances_ok`: None, or a traced bool from :func:`checked_tolerances` (the controller then holds a stand-in
    pair where it is False): such a member gets status ``invalid_tolerance`` (initial state, nothing valid).
    `converge_tol_ok`: None, or a traced bool from :func:`checked_converge_tol` (`converge_tol` then holds a stand-in
    where it is False): such a member gets status ``invalid_tolerance`` as well, its stand-in solve integrating a zero
    vector field.
    `layer_edges`: None, or the edges where the vector field jumps (:func:`collect_layer_edges`): with a controller
    that steps to them (:func:`edge_setting`), a blow-up within :func:`edge_resolution` of one is ``undetermined``
    (module docstring).
    """
    dtype = jnp.result_type(*jtu.tree_leaves(y0))
    tiny = jnp.finfo(dtype).tiny
    log_threshold = jnp.log(jnp.asarray(threshold, dtype))
    log_tol = None if speed is None else jnp.log(jnp.asarray(converge_tol, dtype))

    log_level_a = log_threshold - DECADES * jnp.log(jnp.asarray(10.0, dtype))
    y0_user = y0
    # the state's size, against which `atol` is a relative tolerance (time_tolerance)
    state_scale = jnp.max(jnp.stack([jnp.max(jnp.abs(leaf)) for leaf in jtu.tree_leaves(y0)]))
    size_max = 1 / tiny  # beyond it `1/λ` is subnormal (float32: 8.5e37; module docstring, item 5)

    def in_range(y):  # the size finite and below size_max
        lam = size(y)
        return jnp.isfinite(lam) & (lam < size_max)

    # a caller's threshold that is NaN or at or below the initial size: the event could never fire (concrete
    # ones raised before; traced ones are flagged below). Such a member integrates a zero vector field, so it
    # ends in a few growing steps instead of spending its step budget on an event that cannot come
    check_threshold = threshold_given and size_event
    if check_threshold:
        # half the concrete check's margin: the size computed here (e.g. a factor's sum of squares) and the
        # check's `tr Σ0` differ by rounding, so a threshold the check accepted is never flagged here, and one
        # equal to `tr Σ0` but above the rounded size is (a threshold just above the margin fires at once:
        # `undetermined`)
        size0 = size(y0_user)
        margin = 1 + (THRESHOLD_MARGIN_ULPS // 2) * jnp.finfo(dtype).eps
        threshold_ok = ~jnp.isfinite(size0) | (jnp.asarray(threshold, dtype) > size0 * margin)  # NaN: not ok

    # a traced converge_tol that is not finite and > 0 (its event would be off, or fire at once): the member is
    # flagged below and its stand-in solve integrates a zero field, as for a bad threshold
    check_converge = converge_tol_ok is not None and speed is not None
    stand_in = None
    if check_threshold and check_converge:
        stand_in = threshold_ok & converge_tol_ok
    elif check_threshold:
        stand_in = threshold_ok
    elif check_converge:
        stand_in = converge_tol_ok

    def f_aug(t, z):  # the state carries the time spent below L_a (decade test)
        y = z[0]
        dy = f(t, y)
        if stand_in is not None:
            dy = jtu.tree_map(lambda a: jnp.where(stand_in, a, jnp.zeros_like(a)), dy)
        if not size_event:  # below `inf/100` all the time, as with any threshold the size never nears
            return (dy, jnp.ones((), dtype))
        below = jnp.log(jnp.maximum(size(y), tiny)) < log_level_a
        return (dy, below.astype(dtype))

    def c_blowup(y):  # positive below the threshold, crosses zero downwards at it
        return log_threshold - jnp.log(jnp.maximum(size(y), tiny))

    def c_steady(t, y):  # positive while moving, crosses zero downwards at steady state
        return jnp.log(jnp.maximum(speed(t, y, f(t, y)), tiny)) - log_tol

    def cond(t, y, args, **kwargs):  # diffrax passes t=, y= by keyword
        y = y[0]
        if not size_event:
            value = c_steady(t, y)
        elif speed is None:
            value = c_blowup(y)
        else:
            value = jnp.minimum(c_blowup(y), c_steady(t, y))
        # diffrax's event root-finding compares this value with a Python 0.0 inside lax.cond:
        # it must have the default float dtype (float64 under x64, even for a float32 state).
        return value.astype(jnp.result_type(float))

    # One scalar, decreasing condition: bisection with flip=True also handles diffrax's
    # fallback `t_next − t` for batch members without an event (under vmap).
    root_tol = max(1e-6, 1e4 * float(jnp.finfo(dtype).eps))
    event = diffrax.Event(cond, root_finder=optx.Bisection(rtol=root_tol, atol=root_tol, flip=True), direction=False)
    if not size_event and speed is None:
        event = None  # nothing to locate: the plain solve
    term = diffrax.ODETerm(lambda t, z, args: f_aug(t, z))
    # With an event, a vmapped member without one gets the end of its last *attempted* step from
    # diffrax (a rejected one when the guard or the step budget stopped it): the guard records the
    # last accepted time and state instead (:mod:`._guard`), read back below.
    record = event is not None
    jump_ts, edge_rtol = edge_setting(stepsize_controller, state_scale)
    edge_check = record and size_event and jump_ts is not None and layer_edges is not None
    edges = None if not edge_check else jnp.asarray(layer_edges, dtype)
    if edge_check:

        def resolution(t):
            return edge_resolution(t, t0, edge_rtol, dtype)

        def edge_tau(t, z):  # the state's remaining time λ/λ' to its blow-up (inf where the size does not grow)
            y = z[0]
            lam, dlam = jax.jvp(size, (y,), (f(t, y),))
            return jnp.where(dlam > 0, lam / jnp.where(dlam > 0, dlam, 1.0), jnp.inf)

        def edge_gate(t0_, t1_, z0, z1, made_jump):  # the step ends just before an edge where the field jumps
            # (`made_jump`: the controller steps to the float before a jump time, where the field is still the layer's
            # before it, and goes on from the float after it)
            return made_jump & jnp.any(jnp.nextafter(jnp.asarray(t1_, dtype), jnp.inf) == edges)

        def edge_test(t0_, t1_, z0, z1):  # a kernel whose growth is bounded there cannot blow up at the edge (a diff
            # review: L2 stopped at an edge and ended non_finite)
            could_blow_up = True if growth_bound is None else ~jnp.isfinite(growth_bound(t1_))
            return (edge_tau(t1_, z1) <= resolution(t1_)) & could_blow_up

        edge_stop = (edge_gate, edge_test)
    else:
        edge_stop = None
    with saveat_checks_skipped(True):  # ours: check_times (concrete) or times_ok below (traced)
        sol = diffrax.diffeqsolve(
            term,
            solver,
            t0=t0,
            t1=t1,
            dt0=dt0,
            y0=(y0_user, jnp.zeros((), dtype)),
            saveat=diffrax.SaveAt(t1=True, controller_state=record)
            if ts_default
            else diffrax.SaveAt(subs=[diffrax.SubSaveAt(ts=ts), diffrax.SubSaveAt(t1=True)], controller_state=record),
            stepsize_controller=guard(
                stepsize_controller,
                t0,
                t1,
                finite=lambda z: tree_finite(z) & in_range(z[0]),
                record=record,
                edge_stop=edge_stop,
            ),
            max_steps=max_steps,
            event=event,
            throw=False,
            progress_meter=diffrax.NoProgressMeter() if progress_meter is None else progress_meter,
        )
    n_save = ts.shape[0]
    (y_ends, time_below), t_end = (sol.ys, sol.ts) if ts_default else (sol.ys[1], sol.ts[1])
    y_end, time_below, t_end = jtu.tree_map(lambda a: a[0], y_ends), time_below[0], t_end[0]
    event_ev = jnp.asarray(False) if sol.event_mask is None else jnp.asarray(sol.event_mask)
    if record:  # the last accepted time and state (see `record` above): for a member without an event,
        # and for one whose event state, interpolated in the step that crossed, is not finite (a long
        # step across a blow-up); the event then stands at the end of that step, not located inside it
        _, t_start, t_acc, (y_acc, below_acc), edge_hit = sol.controller_state
        h_cross = t_acc - t_start  # with an event: the step that crossed (the last one accepted)
        located = event_ev & tree_finite(y_end) & in_range(y_end) & jnp.isfinite(t_end)
        # ... and at the event: its condition (log margins) within a decade of zero there (the root find
        # stops at its time tolerance, so the margin there is not 0; on the dense output of a step far too
        # long for it, e.g. a forced dtmin across a blow-up, it may end many decades away)
        located = located & (jnp.abs(cond(t_end, (y_end, time_below), None)) <= np.log(10.0))
        y_end = jtu.tree_map(lambda a, b: jnp.where(located, a, b), y_end, y_acc)
        time_below = jnp.where(located, time_below, below_acc)
        t_end = jnp.where(located, t_end, t_acc)
        # an event not located whose recorded state has not crossed the threshold: nothing shows the
        # crossing but a non-finite interpolation, so the solve reports non_finite there
        crossed = (c_blowup(y_acc) <= 0) if size_event else jnp.asarray(False)
        lost = event_ev & ~located & ~crossed
        event_ev = event_ev & ~lost
        # ... and one that has crossed at the end of that step: the crossing lies somewhere inside a step
        # too long to resolve it (a constant step across a blow-up lands past the singularity, where the
        # state and its rates are not the solution's), so its growth law is not measured
        unlocated = event_ev & ~located
    else:
        lost = jnp.asarray(False)
        unlocated = jnp.asarray(False)
        h_cross = jnp.zeros((), dtype)
    # rows at ts = [t0, t1]: the initial state and the end state (valid below when the solve reached t1)
    ys = jtu.tree_map(lambda a, b: jnp.stack([a, b]), y0, y_end) if ts_default else sol.ys[0][0]

    # Saved points: valid when finite and not after the stop.
    finite_rows = tree_finite(ys, batch_ndim=1)
    end_finite = tree_finite(y_end) & in_range(y_end) & jnp.isfinite(t_end)
    valid = finite_rows & (ts <= jnp.where(jnp.isfinite(t_end), t_end, t1))
    idx = jnp.arange(n_save)
    last = jax.lax.cummax(jnp.where(valid, idx, -1), axis=0)
    any_valid = last >= 0
    last_c = jnp.maximum(last, 0)
    ys_clean = jtu.tree_map(
        lambda a, a0: jnp.where(
            any_valid.reshape((-1,) + (1,) * (a.ndim - 1)), a[last_c], jnp.broadcast_to(a0, a.shape)
        ),
        ys,
        y0,
    )
    # Final state: the solver's end state when finite, else the last finite saved point.
    last_valid = last[-1]
    fallback_y = jtu.tree_map(lambda a, a0: jnp.where(last_valid >= 0, a[jnp.maximum(last_valid, 0)], a0), ys, y0)
    fallback_t = jnp.where(last_valid >= 0, ts[jnp.maximum(last_valid, 0)], t0)
    y_final = jtu.tree_map(lambda a, b: jnp.where(end_finite, a, b), y_end, fallback_y)
    t_final = jnp.where(end_finite, t_end, fallback_t)

    # Event classification: the component of the condition that reached zero fired (event_ev above).
    tf = jnp.asarray(t_final, dtype)
    if speed is None:
        blow_ev = event_ev
        steady_ev = jnp.asarray(False)
        steady_now = jnp.asarray(False)
    else:
        cs = c_steady(tf, y_final)
        cb = c_blowup(y_final) if size_event else jnp.inf
        blow_ev = event_ev & (cb <= cs)
        steady_ev = event_ev & ~(cb <= cs)
        steady_now = cs <= 0
    if size_event:
        lam, dlam, ddlam = growth_rates(f, size, tf, y_final)
        rates_ok = jnp.isfinite(lam) & jnp.isfinite(dlam) & jnp.isfinite(ddlam) & (dlam != 0)
        safe_dlam = jnp.where(rates_ok, dlam, 1.0)
        p = (lam / safe_dlam) * (ddlam / safe_dlam)  # not λλ''/λ'²: both overflow near the float range
        p_end = p
        p = jnp.where(blow_ev & rates_ok & jnp.isfinite(p), p, 0.0)
        # decade test: remaining time τ = λ/λ' against the time of the last DECADES decades
        tau = jnp.where(rates_ok & (dlam > 0), lam / safe_dlam, jnp.inf)
        span = tf - (jnp.asarray(t0, dtype) + time_below)
        rho = tau / jnp.maximum(span, tiny)
        rho = jnp.where(blow_ev & jnp.isfinite(rho), rho, jnp.where(blow_ev, jnp.inf, 0.0)).astype(dtype)
    else:  # no size event: nothing blows up by the event, no rates to measure
        blow_ev = jnp.asarray(False)
        p = jnp.zeros((), dtype)
        tau = jnp.asarray(jnp.inf, dtype)
        rho = jnp.zeros((), dtype)
    if size_event:  # a crossing whose growth cannot be measured: rates overflowed, the size rounding noise,
        # or no DECADES decades between the initial size and the threshold (the decade test has no span)
        # ... or a crossing step longer than half the decade test's span: `time_below` is integrated along the
        # steps, so the time the size entered its last two decades is known to within a step; with the span
        # at least two steps long, neither growth law can be read as the other (ρ: 1/99 against 0.22)
        # ... or, for steps not chosen by an error estimate (a constant step), longer than the remaining time
        # `τ = λ/λ'` that the rates at the crossing report: such a step has not resolved the growth there (across
        # a blow-up it lands the root find on a poor interpolant); an accepted adaptive step met the tolerances.
        # A `time_below` outside `[0, t_e − t0]` is quadrature error (long steps, Tsit5's negative weight), read
        # as unresolved as well. (The local exponent `p` is no test: the counterexample of spec §3 blows up in
        # bursts with `p = 0.43` at the crossing.)
        h = jnp.asarray(h_cross, dtype)
        unresolved = ~(2 * h <= span) | (time_below < 0) | (span < 0)
        if not adapts(stepsize_controller):
            unresolved = unresolved | ~(h <= tau)
        unmeasured = unlocated | unresolved | ~rates_ok | ~(jnp.log(jnp.maximum(size(y0_user), tiny)) < log_level_a)
        # a kernel whose growth rate is bounded at the crossing does not blow up there, whatever the growth
        # law measured (a burst of growth reads as a blow-up in the decade test; spec dynamics.md §3)
        bounded = jnp.asarray(False) if growth_bound is None else jnp.isfinite(growth_bound(tf))
        unmeasured = unmeasured & ~bounded
        if size_floor is not None:  # ... but a crossing by rounding alone is no crossing
            unmeasured = unmeasured | (lam <= SIZE_FLOOR_FACTOR * size_floor(y_final))
        undetermined = blow_ev & unmeasured
    else:
        bounded = jnp.asarray(False)
        undetermined = jnp.asarray(False)
    if edge_check:  # a blow-up within the solve's time resolution of a layer edge (module docstring)
        # the guard stopped the solve just before an edge (a located event in the same step wins) ...
        at_edge = edge_hit & ~event_ev
        # ... or the event came before an edge that its extrapolated t* reaches within the resolution
        t_star = tf + jnp.where(jnp.isfinite(tau), tau, 0.0)
        # only a blow-up by the decade test (ρ small): an exponential divergence's λ/λ' is its e-folding time, not
        # a time to a blow-up (a diff review: divergences with an edge within 1/rate were undetermined)
        across = (
            blow_ev
            & (rho < DECADE_RATIO_THRESHOLD)
            & jnp.any(jnp.isfinite(edges) & (edges > tf) & (edges <= t_star + resolution(edges)))
        )
        edge_undetermined = (at_edge | across) & ~bounded & end_finite
        undetermined = undetermined | edge_undetermined
    else:
        edge_undetermined = jnp.asarray(False)
    end_rtol = controller_rtol(stepsize_controller, state_scale)
    if size_event and end_rtol is not None:  # the solve reached t1 below the threshold, but growing so fast that
        # the state's own remaining time λ/λ' is within the time resolution: a blow-up may lie before t1 (the
        # computed t* carries the solve's error; a fresh user: t1 = t* − 1e-9 ended `completed`, tr Σ 2.6e6 where
        # the solution's is past the threshold 1e8) or just after it; neither `completed` nor `blow_up` is known
        # ... and only growth like a blow-up near the threshold: the size within the last DECADES decades below
        # it, and the local exponent λλ''/λ'² of a blow-up (2 for c/(t* − t), 1 for exponential growth; a review:
        # exponential growth, whose λ/λ' is its e-folding time, and loose tolerances, whose resolution spans t1,
        # read undetermined)
        in_window = jnp.log(jnp.maximum(lam, tiny)) >= log_level_a
        blowup_like = jnp.isfinite(p_end) & (p_end >= END_EXPONENT)
        near_end = ~event_ev & end_finite & rates_ok & (dlam > 0) & ~bounded & blowup_like
        # ... or, below the window, λ/λ' within END_CLOSE_TOLERANCES of the tolerance (the measured error of a
        # computed t*, not EDGE_RESOLUTION_TOLERANCES' margin: a fresh user's Σ0 = 1e-4 I, default tolerances,
        # t1 7e-7 relative past t* ended `completed`, tr Σ ~1e6 Σ0 short of the window)
        close = tau <= jnp.minimum(
            edge_resolution(tf, t0, end_rtol, dtype, END_CLOSE_TOLERANCES), END_CLOSE_MAX * (tf - t0)
        )
        if size_floor is not None:  # ... not a size at rounding level, whose rates are noise (a review)
            close = close & (lam > SIZE_FLOOR_FACTOR * size_floor(y_final))
        near_end = near_end & ((in_window & (tau <= edge_resolution(tf, t0, end_rtol, dtype))) | close)
    else:
        near_end = jnp.asarray(False)
    is_blowup = blow_ev & ~undetermined & ~bounded & (rho < DECADE_RATIO_THRESHOLD)
    p = jnp.where(undetermined, 0.0, p).astype(dtype)  # nothing measured: no exponent, no ratio
    rho = jnp.where(undetermined, jnp.inf, rho).astype(dtype)

    result = sol.result
    successful = result == diffrax.RESULTS.successful
    max_steps_hit = result == diffrax.RESULTS.max_steps_reached
    stopped_non_finite = result == diffrax.RESULTS.nonfinite  # FiniteGuard: the next step was NaN/inf
    # ... or the step budget ran out before the guard's bounded retries did, at a state where the vector field itself
    # is NaN/inf (a NaN parameter: every next step is NaN; a review: `max_steps_reached` with `max_steps` < 63)
    stopped_non_finite = stopped_non_finite | (max_steps_hit & ~tree_finite(f(tf, y_final)))
    status = jnp.where(
        edge_undetermined,
        Status.undetermined,
        jnp.where(
            ~end_finite | stopped_non_finite | lost,
            Status.non_finite,
            jnp.where(
                blow_ev,
                jnp.where(undetermined, Status.undetermined, jnp.where(is_blowup, Status.blow_up, Status.diverge)),
                jnp.where(
                    steady_ev,
                    Status.converged,
                    jnp.where(
                        successful,
                        jnp.where(
                            steady_now, Status.converged, jnp.where(near_end, Status.undetermined, Status.completed)
                        ),
                        jnp.where(max_steps_hit, Status.max_steps_reached, Status.dt_min_reached),
                    ),
                ),
            ),
        ),
    ).astype(jnp.int32)
    # traced inputs: checked here, in the program (no host callback); a bad member is flagged, nothing solved
    # (later checks win: invalid_times, then invalid_threshold, then invalid_tolerance)
    inputs_ok = jnp.asarray(True)
    if tolerances_ok is not None:  # traced tolerances (concrete ones raised)
        status = jnp.where(tolerances_ok, status, Status.invalid_tolerance).astype(jnp.int32)
        inputs_ok = tolerances_ok
    if check_converge:  # a traced converge_tol that is not finite and > 0 (concrete ones raised)
        status = jnp.where(converge_tol_ok, status, Status.invalid_tolerance).astype(jnp.int32)
        inputs_ok = inputs_ok & converge_tol_ok
    if check_threshold:  # a threshold at or below the initial size (see `threshold_ok` above)
        status = jnp.where(threshold_ok, status, Status.invalid_threshold).astype(jnp.int32)
        inputs_ok = inputs_ok & threshold_ok
    if not ts_checked:
        times_ok = jnp.all(jnp.isfinite(ts)) & jnp.all(ts[1:] >= ts[:-1]) & (ts[0] >= t0) & (ts[-1] <= t1) & (t1 > t0)
        status = jnp.where(times_ok, status, Status.invalid_times).astype(jnp.int32)
        inputs_ok = inputs_ok & times_ok
    if check_threshold or not ts_checked or tolerances_ok is not None or check_converge:
        valid = valid & inputs_ok
        ys_clean = jtu.tree_map(lambda a, a0: jnp.where(inputs_ok, a, jnp.broadcast_to(a0, a.shape)), ys_clean, y0)
        y_final = jtu.tree_map(lambda a, a0: jnp.where(inputs_ok, a, a0), y_final, y0)
        t_final = jnp.where(inputs_ok, t_final, t0)
    # a member with invalid inputs is not solved: the steps of the stand-in solve run in its place are not counted
    stats = {k: jnp.where(inputs_ok, jnp.asarray(sol.stats[k]), 0) for k in ("num_steps", "num_accepted_steps",
                                                                                 "num_rejected_steps")}  # fmt: skip
    blow = status == Status.blow_up
    if extrapolate:
        t_est = t_final + jnp.where(jnp.isfinite(tau), tau, 0.0)
        method = BlowupMethod.extrapolated
    else:
        t_est = t_final
        method = BlowupMethod.threshold
    t_blowup = jnp.where(blow, t_est, jnp.inf).astype(dtype)
    blowup_method = jnp.where(blow, int(method), int(BlowupMethod.none)).astype(jnp.int32)
    return IntegrateOut(
        ts=ts,
        ys=ys_clean,
        valid=valid,
        y_final=y_final,
        t_final=jnp.asarray(t_final, dtype),
        status=status,
        t_blowup=t_blowup,
        blowup_method=blowup_method,
        growth_exponent=jnp.asarray(p, dtype),
        decade_ratio=rho,
        num_steps=stats["num_steps"],
        num_accepted_steps=stats["num_accepted_steps"],
        num_rejected_steps=stats["num_rejected_steps"],
    )


def aux_free_rms_norm(tree) -> jax.Array:
    """RMS norm of the solution part of the augmented state `(y, time_below)`: the auxiliary
    step-function quadrature does not steer the step size."""
    return optx.rms_norm(tree[0])


def tolerance(value, dtype) -> jax.Array:
    """A tolerance as an array of `dtype`: a traced leaf of the controller, not a static float, so that
    solves differing only in their tolerances share one compiled program (in memory and in the
    persistent cache)."""
    return jnp.asarray(value, dtype)


def checked_tolerances(rtol, atol, dtype):
    """`(rtol, atol, ok)`: the tolerances as arrays of `dtype` (:func:`tolerance`) and, where either is traced,
    whether both are valid (finite, `0 ≤ rtol < 1`, `atol` at least the smallest normal number of `dtype`: a traced
    bool; None for concrete ones, which :func:`check_solver_settings` checked). An invalid pair is replaced by
    `(1, 1)`, so that the stand-in solve of a member that :func:`integrate` flags ``invalid_tolerance`` ends in a
    few steps."""
    r, a = tolerance(rtol, dtype), tolerance(atol, dtype)
    if not is_traced(rtol, atol):
        return r, a, None
    ok = jnp.isfinite(r) & (r >= 0) & (r < 1) & jnp.isfinite(a) & (a >= jnp.finfo(a.dtype).tiny)  # as checked
    return jnp.where(ok, r, 1.0).astype(r.dtype), jnp.where(ok, a, 1.0).astype(a.dtype), ok


def checked_converge_tol(converge_tol, dtype):
    """`(converge_tol, ok)`: a traced `converge_tol` with, as a traced bool, whether it is finite and > 0 in `dtype`,
    replaced by `1` where it is not (the stand-in of a member that :func:`integrate` flags ``invalid_tolerance``:
    unchecked, a NaN, negative or zero one turned the steady-state event off without a word and an infinite one
    reported ``converged`` at once); a concrete one (checked by :func:`solve_settings`) or None with `ok` None."""
    if converge_tol is None or not is_traced(converge_tol):
        return converge_tol, None
    v = jnp.asarray(converge_tol, dtype)
    ok = jnp.isfinite(v) & (v > 0)
    return jnp.where(ok, v, 1.0).astype(v.dtype), ok


def make_controller(stepsize_controller, rtol, atol, jump_ts):
    """The step-size controller: the user's, or a PID controller (with `jump_ts` at layer boundaries) with the
    tolerance arrays `rtol`, `atol` (:func:`checked_tolerances`)."""
    if stepsize_controller is not None:
        return stepsize_controller
    pid = diffrax.PIDController(rtol=rtol, atol=atol, norm=aux_free_rms_norm)
    if jump_ts is None:
        return pid
    return diffrax.ClipStepSizeController(pid, jump_ts=jump_ts)


def solve_settings(
    model, dtype, *, t0, t1, ts, solver, rtol, atol, dt0, stepsize_controller, max_steps, size_threshold, converge_tol,
    extrapolate: bool, progress_meter: diffrax.AbstractProgressMeter | None = None,
) -> dict:  # fmt: skip
    """Check the solver arguments shared by the solvers and convert them to `dtype`.

    **Returns:** the keyword arguments of :func:`integrate_events` (`t0`, `t1`, `ts`,
    `threshold`, `converge_tol`, `solver`, `stepsize_controller`, `dt0`, `max_steps`,
    `extrapolate`, `ts_checked`, `ts_default`, `size_event`, `progress_meter`, `tolerances_ok`, `converge_tol_ok`,
    `layer_edges`):
    `ts` defaults to `[t0, t1]`, `solver` to
    ``Tsit5()``, the controller to :func:`make_controller`'s (with the layer boundaries of
    `model`'s :class:`~hassejax.dynamics.PiecewiseConstant` parameters as ``jump_ts``);
    `ts_checked` is True when `t0`, `t1`, `ts` were concrete, so checked here; `size_event` is
    False when `size_threshold` is known (not traced) and `+inf` everywhere (see :func:`integrate`).

    **Raises:** :class:`~hassejax.errors.ParameterError` as :func:`check_finite_params` (on
    `model`, unless None), :func:`check_times`, :func:`check_solver_settings`,
    :func:`check_solver` and :func:`check_positive`, for a concrete `size_threshold` or `converge_tol` that is not a scalar, and
    for a concrete `converge_tol` that is `inf` in `dtype` or below its smallest normal number (0 or subnormal
    there, e.g. 1e-50 in float32: its event could never fire). Concrete
    thresholds are returned as `dtype` (a value beyond its range as `inf`: no size event). The threshold against the
    initial size is the caller's check (:func:`check_size_threshold`: the size is the solver's).
    """
    if model is not None:
        check_finite_params(model, "model")
    check_times(t0, t1, ts)
    layer_edges = None if model is None else collect_layer_edges(model)
    warn_short_layers(layer_edges, t0, t1, dtype)
    check_progress_meter(progress_meter)
    check_solver_settings(rtol, atol, max_steps, dt0, stepsize_controller, dtype)
    check_solver(solver, stepsize_controller, dt0)
    check_positive(size_threshold, "size_threshold")
    check_positive(converge_tol, "converge_tol")
    values = {
        "size_threshold": real_array(size_threshold, "size_threshold"),
        "converge_tol": real_array(converge_tol, "converge_tol"),
    }
    for name, v in values.items():
        if v is None:
            continue
        if v.ndim != 0:
            raise ParameterError(
                f"`{name}` must be a scalar (one value per solve; vmap for one per member); got shape {v.shape}."
            )
        with np.errstate(over="ignore"):  # a value beyond the state's dtype: inf there (no NumPy warning)
            values[name] = v = np.asarray(v, dtype=np.dtype(dtype))
    if values["converge_tol"] is not None and not np.isfinite(values["converge_tol"]):
        raise ParameterError(
            f"`converge_tol` must be finite in the state's dtype {np.dtype(dtype).name} (a speed below it is a "
            f"steady state; None for no steady-state event); got {converge_tol!r:.40}."
        )
    tiny = float(jnp.finfo(dtype).tiny)
    if values["converge_tol"] is not None and values["converge_tol"] < tiny:  # 0 or subnormal there: log(tol) = -inf
        raise ParameterError(
            f"`converge_tol` must be at least the smallest normal number of the state's dtype {jnp.dtype(dtype).name}, "
            f"{tiny!r} (below it the value is {'0' if values['converge_tol'] == 0 else 'subnormal'} there and the "
            f"steady-state event would never fire); got {converge_tol!r:.40}. Pass converge_tol >= {tiny!r} or "
            f"None for no steady-state event{'' if jnp.dtype(dtype) == jnp.float64 else ', or use a float64 state'}."
        )
    if values["size_threshold"] is not None:  # concrete: the value in the state's dtype (inf beyond its range)
        size_threshold = values["size_threshold"]
    ts_checked = not is_traced(t0, t1, ts)
    size_event = values["size_threshold"] is None or not bool(np.isposinf(values["size_threshold"]))
    t0 = jnp.asarray(t0, dtype)
    t1 = jnp.asarray(t1, dtype)
    rtol_a, atol_a, tolerances_ok = checked_tolerances(rtol, atol, dtype)
    converge_tol, converge_tol_ok = checked_converge_tol(converge_tol, dtype)
    return {
        "t0": t0,
        "t1": t1,
        "ts": jnp.stack([t0, t1]) if ts is None else jnp.asarray(ts, dtype),
        "threshold": None if size_threshold is None else jnp.asarray(size_threshold, dtype),
        "converge_tol": None if converge_tol is None else jnp.asarray(converge_tol, dtype),
        "solver": diffrax.Tsit5() if solver is None else solver,
        "stepsize_controller": make_controller(stepsize_controller, rtol_a, atol_a, collect_jump_ts(model)),
        "dt0": None if dt0 is None else jnp.asarray(dt0, dtype),
        "max_steps": int(max_steps),
        "extrapolate": extrapolate,
        "ts_checked": ts_checked,
        "ts_default": ts is None,
        "size_event": size_event,
        "progress_meter": progress_meter,
        "tolerances_ok": None if stepsize_controller is not None else tolerances_ok,
        "converge_tol_ok": converge_tol_ok,
        "layer_edges": layer_edges,
    }


def flag_status(out: IntegrateOut, flag, code: Status) -> IntegrateOut:
    """`out` with status `code` where `flag` holds, unless its inputs were invalid (``invalid_times``,
    ``invalid_threshold`` win); a flagged member reports no blow-up (`t_blowup = inf`, method ``none``)."""
    keep = (
        (out.status == Status.invalid_times)
        | (out.status == Status.invalid_threshold)
        | (out.status == Status.invalid_tolerance)
    )
    flag = flag & ~keep
    return eqx.tree_at(
        lambda o: (o.status, o.t_blowup, o.blowup_method),
        out,
        (
            jnp.where(flag, int(code), out.status).astype(out.status.dtype),
            jnp.where(flag, jnp.inf, out.t_blowup).astype(out.t_blowup.dtype),
            jnp.where(flag, int(BlowupMethod.none), out.blowup_method).astype(out.blowup_method.dtype),
        ),
    )


def integrate_events(f: Callable, y0, size: Callable, speed: Callable | None = None, size0=None, *, threshold,
                     converge_tol, **settings) -> IntegrateOut:  # fmt: skip
    """:func:`integrate` with the settings of :func:`solve_settings`: the size event at `threshold`
    (None: ``default_size_factor · λ0``, `λ0 = size0` or `size(y0)`, `1` in place of a zero
    `λ0`) and the steady-state event on `speed` when `converge_tol` is given."""
    given = threshold is not None
    if threshold is None:
        s0 = size(y0) if size0 is None else size0
        threshold = default_size_factor(s0.dtype) * jnp.where(s0 > 0, s0, 1.0)
    speed = None if converge_tol is None else speed
    return integrate(
        f, y0, size=size, speed=speed, threshold=threshold, converge_tol=converge_tol, threshold_given=given, **settings
    )


def check_blowup_estimate(blowup_estimate) -> bool:
    """Raise :class:`ParameterError` unless ``"extrapolated"`` or ``"threshold"``; True for ``"extrapolated"``."""
    if blowup_estimate not in ("extrapolated", "threshold"):
        raise ParameterError(f"`blowup_estimate` must be 'extrapolated' or 'threshold'; got {blowup_estimate!r}.")
    return blowup_estimate == "extrapolated"


def time_tolerance(rtol, atol, scale=1.0):
    """The relative tolerance a computed time carries, for :func:`edge_resolution`: ``max(rtol, atol / scale)``, with
    `scale` the largest entry of the initial state (1 where it is zero or not finite).

    `rtol` alone understated it where `atol` held the error (a fresh user: softmax with `t* = 1`, ``rtol = 1e-12``,
    ``atol = 1e-8``, `Σ0 = I/2`: the factor state's `t*` came out `2.6e-7` late, and `t1 = 1 + 1e-7` ended
    ``completed`` with a finite `Σ` past the blow-up, where the default tolerances read ``undetermined``); `atol` is an
    error relative to the state's size (a review: counted in full, `atol = 1e-4` beside `Σ0 = 1e4 I` read an accurate
    blow-up near a layer edge ``undetermined``).
    """
    if rtol is None or atol is None:
        return rtol
    scale = jnp.asarray(scale)
    scale = jnp.where(jnp.isfinite(scale) & (scale > 0), scale, 1.0)
    return jnp.maximum(jnp.asarray(rtol), jnp.asarray(atol) / scale)


def controller_rtol(controller, scale=1.0):
    """The time tolerance (:func:`time_tolerance` of its `rtol` and `atol`, the state's size `scale`) of an adaptive
    controller (inside a ``ClipStepSizeController`` too), or None (a constant step, or a controller without one): the
    end check of :func:`integrate` reads the time resolution from it."""
    inner = controller.controller if isinstance(controller, diffrax.ClipStepSizeController) else controller
    rtol = getattr(inner, "rtol", None)
    if not isinstance(inner, diffrax.AbstractAdaptiveStepSizeController):
        return None
    return time_tolerance(rtol, getattr(inner, "atol", None), scale)


def edge_setting(controller, scale=1.0):
    """`(jump_ts, tolerance)` (:func:`time_tolerance`, the state's size `scale`) of a controller that steps to layer
    edges (a ``ClipStepSizeController`` with ``jump_ts`` around an adaptive controller with an `rtol`, as
    :func:`make_controller` builds), else `(None, None)`: the edge check of :func:`integrate` needs both (with a
    constant step, or a controller of the caller's without ``jump_ts``, the edges are not step boundaries and the
    check does not apply)."""
    if not isinstance(controller, diffrax.ClipStepSizeController) or controller.jump_ts is None:
        return None, None
    inner = controller.controller
    rtol = getattr(inner, "rtol", None)
    if not isinstance(inner, diffrax.AbstractAdaptiveStepSizeController) or rtol is None:
        return None, None
    return controller.jump_ts, time_tolerance(rtol, getattr(inner, "atol", None), scale)


def edge_resolution(t, t0, rtol, dtype, tolerances: float = EDGE_RESOLUTION_TOLERANCES):
    """The time resolution of a solve from `t0` with tolerance `rtol` (:func:`time_tolerance`) at time `t`:
    `tolerances · max(rtol, eps) · (t − t0) + STOP_ULPS · eps · |t|` (`eps` of `dtype`; `tolerances`
    :data:`EDGE_RESOLUTION_TOLERANCES` by default).

    The error of a computed blow-up time grows with the time solved and the tolerance; measured for softmax
    (`V = 2I`, `A = I`, `Σ0 = sI`, `t* = 1/(4s)` from 0.1 to 10; factor, covariance and projective states, `rtol`
    from 1e-10 to 1e-5): at most `40 · rtol · t*` (factor state, `rtol = 1e-8`), so the factor `1e3` is a margin of
    25; the last term is the rounding of `t` itself.
    """
    eps = jnp.finfo(dtype).eps
    t = jnp.asarray(t, dtype)
    span = jnp.maximum(t - jnp.asarray(t0, dtype), 0.0)
    return tolerances * jnp.maximum(jnp.asarray(rtol, dtype), eps) * span + STOP_ULPS * eps * jnp.abs(t)


def collect_layer_edges(params):
    """The layer edges where a :class:`PiecewiseConstant` inside `params` changes value (sorted; `inf` in place of an
    interior edge whose two layers hold equal values, so that the shape is static and values may be traced; the
    outer edges, beyond which the first and last values go on, are left out), or None when there are none: where a
    blow-up may end the solution or be crossed (see :func:`integrate`'s edge check)."""
    from .params import PiecewiseConstant

    edges = []
    for leaf in jtu.tree_leaves(params, is_leaf=lambda x: isinstance(x, PiecewiseConstant)):
        if not isinstance(leaf, PiecewiseConstant) or leaf.values.shape[0] < 2:
            continue
        n = leaf.values.shape[0] - 1
        changes = jnp.any((leaf.values[1:] != leaf.values[:-1]).reshape(n, -1), axis=1)
        inner = jnp.asarray(leaf.t_edges[1:-1], jnp.result_type(leaf.t_edges, float))
        edges.append(jnp.where(changes, inner, jnp.inf))
    if not edges:
        return None
    return jnp.sort(jnp.concatenate(edges))


def collect_jump_ts(params):
    """Layer boundaries of every :class:`PiecewiseConstant` inside `params` (sorted), or None."""
    from .params import PiecewiseConstant

    edges = [
        leaf.t_edges
        for leaf in jtu.tree_leaves(params, is_leaf=lambda x: isinstance(x, PiecewiseConstant))
        if isinstance(leaf, PiecewiseConstant)
    ]
    if not edges:
        return None
    return jnp.sort(jnp.concatenate([jnp.ravel(e) for e in edges]))


def default_size_factor(dtype) -> float:
    """Default size threshold as a multiple of the initial size: `1e8` in float64, `1e4` below.

    Near a blow-up `λ ~ c/(t* − t)`, reaching `1e8 λ0` needs `t* − t ~ 1e-8 t*`, finer than
    float32 resolves in time (eps 1.2e-7): the step would shrink to the rounding of `t` and the solve
    end `dt_min_reached` there.
    `1e4` keeps the decade test (which needs >= 1e3) in reach.
    """
    return 1e8 if jnp.finfo(dtype).bits >= 64 else 1e4
