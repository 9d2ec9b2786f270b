"""A step-size controller wrapper that stops a solve at its first non-finite step (private).

Diffrax replaces a NaN error estimate by `inf`, so an adaptive controller rejects the step
and shrinks it; when the vector field itself is NaN from some time on (e.g. a parameter
that turns NaN at `t = 0.3`), every step across that time fails and the solve spends its
whole step budget shrinking towards it (``max_steps_reached``). A constant-step controller
instead accepts the NaN state and runs on to `t1`.

:class:`FiniteGuard` wraps any controller (it is transparent while the candidate state is
finite) and, when the candidate of a step is not finite, rejects it; it ends the solve with
``RESULTS.nonfinite`` when the wrapped controller would not retry with a smaller step (a
constant step) or the step has already shrunk below `dt_stop` (an adaptive one closing in
on the time where the NaN starts). The solve then stops at the last finite state, at the
time the NaN appeared (to within `dt_stop`). `dt_stop` is local: :data:`STOP_ULPS` rounding
units of the step's own time `t` (the finest step that still moves `t`), and no less than
`STOP_ULPS · eps³` times the interval `[t0, t1]` near `t = 0` (float32: `1e-19`, float64:
`7e-46` of it): a state that is finite at `t` but overflows within the first step (a blow-up at
`t* = 1e-6` of `[0, 1]`, e.g. rates of `1e6`, where the first step guessed is far too long) is
retried with shorter steps until they resolve it, while a vector field that is NaN from the
start stops after a bounded number of rejected steps (measured with the default controller:
63 in float64, 26 in float32). A candidate that is finite but fails `finite`
(a size beyond the float range, see :mod:`._solve`) passes the wrapped controller's error
test; an adaptive controller is then made to retry with at most half the step, so the solve
still closes in on the first state that fails and an event below it is still located.

With ``record=True`` the controller state also carries the last accepted step, its start and end
times and its end state (the solve uses the step's length to tell whether the step that crossed
the size threshold resolved the growth before it): under
``vmap``, when one member's event fires, diffrax reports for the members *without* an event
the end of their last *attempted* step (its ``event_tnext`` and the dense output of that step),
which for a member stopped by this guard (or at its step budget) is a rejected step; the
solvers read the accepted one back with ``SaveAt(controller_state=True)``. (derived)

With `edge_stop = (gate, test)` (and ``record=True``) the guard also stops the solve at a layer edge whose crossing
the solver cannot resolve (a blow-up within the solve's time resolution of the edge, see :mod:`._solve`): on an
accepted step where the cheap `gate(t0, t1, y0, y1, made_jump)` holds (the step reaches an edge), `test(t0, t1, y0,
y1)` is asked (under ``lax.cond``: outside ``vmap`` it costs nothing on the other steps); where it is True the solve
ends there, with the step kept (`edge_keep`) or rejected, its
result ``RESULTS.nonfinite`` and the record's flag `edge_hit` set, which the solvers read as ``undetermined``.

A solve that cannot progress ends with ``RESULTS.dt_min_reached`` at its last accepted step (as at the step budget):
where the next step is the one just taken again (a rejected one, by the error test or a limit below, not for NaN/inf,
or one of zero length) from the same state, with the wrapped controller's state unchanged, the loop is at a fixed
point and would repeat that step until the step budget ran out. Steps within a few rounding units of `t` do that: the
controller's shorter retry rounds back to the same end time (a PID controller's state does not change on a rejected
step; one that clips its retry up to its `dtmin` does, and forces that step through; diffrax moves a step of zero
length next to a jump time on, past the jump). Such solves (float32: a blow-up faster than `t`'s rounding resolves,
e.g. the default threshold 1e4 × `tr Σ0` with `t* − t = 0.02` past a layer edge at `t = 10`; float64 from `t0 = 100`
with `t* − t0 = 1e-6`) spent their whole budget there (99,957 rejected steps of 100,000 at `t = 10.02`) and ended
``max_steps_reached``. Within the last 100 rounding units of the interval diffrax shortens a retry itself (its
`t1_clip_floor`), and the guard does not stop there. (derived)

With `edge_limit = (time, room)` a step may advance the state's time `time(y)` by at most `room(y)[0]`: a
solver whose steps are not in the time of the layer edges (the projective state steps in `τ`, the edges are in
`t`) cannot clip its steps to the edges as diffrax's ``jump_ts`` does, and a step across a whole short layer
never evaluates the vector field inside it (a review: a layer of width 0.001 with `V` 1e4 times larger, which
moves the blow-up from t* = 20 to 10.001, stepped over and reported 20). A step that advances further is
rejected and retried at the length that advances `room(y)[1]` at the step's mean rate; every next step is capped
the same way. With `room` = (to a little past the next edge, to the middle of that little), every layer holds the
start of a step, and the error control sees the jump at each edge as it does without ``jump_ts``. (derived)
"""

from __future__ import annotations

from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu

STOP_ULPS = 64.0
"""A step from `t` shorter than `STOP_ULPS · eps · max(|t|, |t + dt|, eps² (t1 − t0))` that fails on
NaN/inf stops the solve (`t0`, `t1` the interval; module docstring)."""


def tree_finite(tree, batch_ndim: int = 0) -> jax.Array:
    """True where every leaf of `tree` is finite (one Boolean per index of the first `batch_ndim` axes)."""
    out = jnp.asarray(True)
    for leaf in jtu.tree_leaves(tree):
        out = out & jnp.all(jnp.isfinite(leaf), axis=tuple(range(batch_ndim, jnp.ndim(leaf))))
    return out


class FiniteGuard(diffrax.AbstractStepSizeController):
    """Wrap `inner`; stop at the first step whose candidate state is NaN/inf (see module docstring).

    `dt_stop` is the floor of the step length below which a failing step stops the solve (an
    array, so it may be traced; the step's own time raises it, see the module docstring);
    `finite(y)` says whether a state counts as finite (default: every leaf finite; the solvers
    also ask for a finite size, e.g. `tr Σ` that does not overflow).
    """

    inner: diffrax.AbstractStepSizeController
    dt_stop: jax.Array
    finite: Callable = eqx.field(static=True, default=tree_finite)
    shrink: bool = eqx.field(static=True, default=False)
    record: bool = eqx.field(static=True, default=False)
    growth_limit: tuple[Callable, Callable] | None = eqx.field(static=True, default=None)
    edge_stop: tuple[Callable, Callable] | None = eqx.field(static=True, default=None)
    edge_keep: bool = eqx.field(static=True, default=True)
    edge_limit: tuple[Callable, Callable] | None = eqx.field(static=True, default=None)
    t_clip: jax.Array | None = None

    def wrap(self, direction):
        return type(self)(
            self.inner.wrap(direction), self.dt_stop, self.finite, self.shrink, self.record, self.growth_limit,
            self.edge_stop, self.edge_keep, self.edge_limit, self.t_clip,
        )  # fmt: skip

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        tnext, state = self.inner.init(terms, t0, t1, y0, dt0, args, func, error_order)
        return tnext, ((state, jnp.asarray(t0), jnp.asarray(t0), y0, jnp.asarray(False)) if self.record else state)

    def adapt_step_size(self, t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state):
        inner_state = controller_state[0] if self.record else controller_state
        keep, next_t0, next_t1, made_jump, state, result = self.inner.adapt_step_size(
            t0, t1, y0, y1_candidate, args, y_error, error_order, inner_state
        )
        bad = ~self.finite(y1_candidate)
        dt = t1 - t0
        step = next_t1 - next_t0  # the inner controller's next step
        if self.shrink:  # retry with at most dt/2: a finite candidate out of range passed the error test,
            # and an overflowing one can make the controller propose a NaN step
            ok = jnp.isfinite(step) & (step > 0)
            step = jnp.where(bad, jnp.where(ok, jnp.minimum(step, dt / 2), dt / 2), step)
        retry = step < dt  # the step shrinks
        eps = jnp.finfo(jnp.result_type(t0, t1)).eps
        dt_stop = jnp.maximum(STOP_ULPS * eps * jnp.maximum(jnp.abs(t0), jnp.abs(t1)), self.dt_stop)
        stop = bad & ~(retry & (dt > dt_stop))
        keep = keep & ~bad
        if self.growth_limit is not None:  # steps that grow a quantity g by at most allowed(y) from their start y
            growth, allowed = self.growth_limit
            grew = jnp.abs(growth(y1_candidate) - growth(y0))
            rate = jnp.where(dt > 0, grew / jnp.where(dt > 0, dt, 1.0), 0.0)  # dg/dt over this step
            too_long = ~bad & (grew > 1.5 * allowed(y0))  # rejected, retried at the allowed length
            keep = keep & ~too_long
            start = jtu.tree_map(lambda a, b: jnp.where(keep, a, b), y1_candidate, y0)
            cap = jnp.where(rate > 0, allowed(start) / jnp.where(rate > 0, rate, 1.0), jnp.inf)
            next_t0 = jnp.where(keep, next_t0, t0)
            base = jnp.where(too_long, dt, step)
            next_t1 = jnp.where(bad, next_t1, next_t0 + jnp.minimum(base, cap))
        if self.edge_limit is not None:  # steps end at most a little past the next layer edge (module docstring)
            time_of, room = self.edge_limit
            moved = time_of(y1_candidate) - time_of(y0)
            allowed, _ = room(y0)
            over = ~bad & (moved > allowed)  # rejected, retried at the length that reaches the target
            keep = keep & ~over
            speed = jnp.where(dt > 0, moved / jnp.where(dt > 0, dt, 1.0), 0.0)  # the time's mean rate over this step
            start = jtu.tree_map(lambda a, b: jnp.where(keep, a, b), y1_candidate, y0)
            _, target = room(start)
            cap = jnp.where((speed > 0) & jnp.isfinite(target), target / jnp.where(speed > 0, speed, 1.0), jnp.inf)
            proposal = next_t1 - next_t0  # the inner controller's (and the growth limit's) next step
            next_t0 = jnp.where(keep, next_t0, t0)
            base = jnp.where(over, jnp.minimum(dt, proposal), proposal)
            next_t1 = jnp.where(bad, next_t1, next_t0 + jnp.minimum(base, cap))
        edge_hit = jnp.asarray(False)
        if self.edge_stop is not None and self.record:  # a layer edge the solve cannot cross (module docstring)
            gate, test = self.edge_stop
            args_ = (t0, t1, y0, y1_candidate)
            at_edge = keep & jnp.asarray(gate(*args_, made_jump), bool)
            edge_hit = at_edge & jax.lax.cond(
                at_edge, lambda: jnp.asarray(test(*args_), bool), lambda: jnp.asarray(False)
            )
            if not self.edge_keep:
                keep = keep & ~edge_hit
            stop = stop | edge_hit
        # no progress (module docstring): the next step is this one again, from the same state (rejected, or of zero
        # length) and with the inner controller's state unchanged (a PID at `dtmin` forces its next step through);
        # not within the last 100 rounding units of the interval, where diffrax itself shortens a retry
        fixed = (next_t0 == t0) & (next_t1 == t1) & jnp.asarray(eqx.tree_equal(state, inner_state))
        if self.t_clip is not None:
            fixed = fixed & (next_t1 <= self.t_clip)
        stall = fixed & ~bad & ~stop & (result == diffrax.RESULTS.successful)
        next_t1 = jnp.where(stop | stall, t1, jnp.where(bad, t0 + step, next_t1))
        next_t0 = jnp.where(bad, t0, next_t0)
        result = diffrax.RESULTS.where(stop, diffrax.RESULTS.nonfinite, result)
        result = diffrax.RESULTS.where(stall, diffrax.RESULTS.dt_min_reached, result)
        if self.record:  # the last accepted step: its start, its end and the state there, as the loop holds them
            t_start = jnp.where(keep, t0, controller_state[1])
            t_acc = jnp.where(keep, t1, t0)
            y_acc = jtu.tree_map(lambda a, b: jnp.where(keep, a, b), y1_candidate, y0)
            state = (state, t_start, t_acc, y_acc, controller_state[4] | edge_hit)
        return keep, next_t0, next_t1, made_jump, state, result


class AdaptiveFiniteGuard(FiniteGuard, diffrax.AbstractAdaptiveStepSizeController):
    """:class:`FiniteGuard` of an adaptive controller: diffrax still sees its tolerances (implicit solvers use them)."""

    @property
    def rtol(self):
        return self.inner.rtol

    @property
    def atol(self):
        return self.inner.atol

    @property
    def norm(self):
        return self.inner.norm


def adapts(controller) -> bool:
    """Whether `controller` chooses its steps from the error (a clipping wrapper: its inner controller)."""
    while isinstance(controller, diffrax.ClipStepSizeController):
        controller = controller.controller
    return isinstance(controller, diffrax.AbstractAdaptiveStepSizeController)


def guard(
    controller: diffrax.AbstractStepSizeController, t0, t1, finite: Callable = tree_finite, record: bool = False,
    growth_limit: tuple[Callable, Callable] | None = None, edge_stop: tuple[Callable, Callable] | None = None,
    edge_keep: bool = True, edge_limit: tuple[Callable, Callable] | None = None,
) -> FiniteGuard:  # fmt: skip
    """`controller` wrapped in the guard, with the floor of `dt_stop` from the interval `[t0, t1]` (see :data:`STOP_ULPS`);
    `record`: carry the last accepted step (start, end, end state) in the controller state (module docstring);
    `growth_limit`: `(g, allowed)`, functions of the state: a step from `y` may change `g` by at most `allowed(y)`
    (`inf`: no limit); a step that changed it by more than 1.5 times that is rejected and retried at the length the
    rate of `g` over it allows, and every next step is capped the same way (the projective state's decade window);
    `edge_stop`: `(gate, test)`: stop at an accepted step where both hold, keeping the step when
    `edge_keep` (else ending at its start), with the record's flag set (needs `record`; module docstring);
    `edge_limit`: `(time, room)`: a step from `y` advances `time` by at most `room(y)[0]`, retried and capped to
    advance `room(y)[1]` (module docstring)."""
    # bounds of the step control only (the floor of a step, the clip near the end), no part of the solution: no
    # derivative through them (`nextafter` has none; ``jax.grad`` of the projective state's `t_blowup` through its
    # `τ1`, a function of `Σ0`, failed with "Differentiation rule for 'nextafter' not implemented")
    t0, t1 = jax.lax.stop_gradient(jnp.asarray(t0)), jax.lax.stop_gradient(jnp.asarray(t1))
    scale = jnp.maximum(jnp.maximum(jnp.abs(t0), jnp.abs(t1)), t1 - t0)
    eps = jnp.finfo(jnp.result_type(t0, t1)).eps
    dt_stop = STOP_ULPS * eps**3 * scale
    cls = AdaptiveFiniteGuard if isinstance(controller, diffrax.AbstractAdaptiveStepSizeController) else FiniteGuard
    # at or below diffrax's `t1_clip_floor` (100 rounding units below t1, beyond which it shortens a retry itself):
    # 100 units above t1, which are at least as long as those below it (a loop of 100 `nextafter` was as exact and
    # made every solve's program 100 operations longer)
    t_clip = t1 - 100 * (jnp.nextafter(t1, jnp.asarray(jnp.inf, t1.dtype)) - t1)
    return cls(
        controller, dt_stop, finite, adapts(controller), record, growth_limit, edge_stop, edge_keep, edge_limit, t_clip
    )
