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
time the NaN appeared (to within `dt_stop`). (derived)
"""

from __future__ import annotations

from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu

STOP_ULPS = 64.0
"""A step shorter than `STOP_ULPS · eps · max(|t0|, |t1|, t1 − t0)` that fails on NaN/inf stops the solve."""


def tree_finite(tree, batch_ndim: int = 0) -> jax.Array:
    """True where every leaf of `tree` is finite (one Boolean per index of the first `batch_ndim` axes)."""
    out = jnp.asarray(True)
    for leaf in jtu.tree_leaves(tree):
        out = out & jnp.all(jnp.isfinite(leaf), axis=tuple(range(batch_ndim, jnp.ndim(leaf))))
    return out


class FiniteGuard(diffrax.AbstractStepSizeController):
    """Wrap `inner`; stop at the first step whose candidate state is NaN/inf (see module docstring).

    `dt_stop` is the step length below which a failing step stops the solve (an array, so
    it may be traced); `finite(y)` says whether a state counts as finite (default: every
    leaf finite; the solvers also ask for a finite size, e.g. `tr Σ` that does not overflow).
    """

    inner: diffrax.AbstractStepSizeController
    dt_stop: jax.Array
    finite: Callable = eqx.field(static=True, default=tree_finite)

    def wrap(self, direction):
        return type(self)(self.inner.wrap(direction), self.dt_stop, self.finite)

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        return self.inner.init(terms, t0, t1, y0, dt0, args, func, error_order)

    def adapt_step_size(self, t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state):
        keep, next_t0, next_t1, made_jump, state, result = self.inner.adapt_step_size(
            t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state
        )
        bad = ~self.finite(y1_candidate)
        dt = t1 - t0
        retry = (next_t1 - next_t0) < dt  # the inner controller shrinks the step
        stop = bad & ~(retry & (dt > self.dt_stop))
        keep = keep & ~bad
        next_t0 = jnp.where(bad, t0, next_t0)
        next_t1 = jnp.where(stop, t1, next_t1)
        result = diffrax.RESULTS.where(stop, diffrax.RESULTS.nonfinite, result)
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


def guard(controller: diffrax.AbstractStepSizeController, t0, t1, finite: Callable = tree_finite) -> FiniteGuard:
    """`controller` wrapped in the guard, with `dt_stop` from the interval `[t0, t1]` (see :data:`STOP_ULPS`)."""
    t0, t1 = jnp.asarray(t0), jnp.asarray(t1)
    scale = jnp.maximum(jnp.maximum(jnp.abs(t0), jnp.abs(t1)), t1 - t0)
    dt_stop = STOP_ULPS * jnp.finfo(jnp.result_type(t0, t1)).eps * scale
    cls = AdaptiveFiniteGuard if isinstance(controller, diffrax.AbstractAdaptiveStepSizeController) else FiniteGuard
    return cls(controller, dt_stop, finite)
