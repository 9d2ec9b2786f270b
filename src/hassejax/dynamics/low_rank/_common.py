"""The shared part of the exact rank-`k` solves: reduced coordinates, settings, one call of the shared solve (private).

A reduction (:class:`AbstractReduction`) holds the `k`-dimensional constants of one solve
and gives its initial state, vector field, size `λ` (the trace of the covariance in `R^d`,
computed from `k×k` products) and the solution type built from the output of
:func:`hassejax.dynamics._solve.integrate` (events, statuses, decade test, spec §4).
"""

from __future__ import annotations

import abc

import diffrax
import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from .. import _solve

__all__ = ["AbstractReduction", "solve_settings", "solve_reduction"]


class AbstractReduction(eqx.Module):
    """Exact `k`-dimensional coordinates of the dynamics of a rank-`k` head (see the subclasses)."""

    trace0: eqx.AbstractVar[Float[Array, ""]]

    @abc.abstractmethod
    def initial_state(self):
        """The reduced state at `t0` (zeros: the tokens or moments at `t0`)."""

    @abc.abstractmethod
    def vector_field(self, t, y):
        """`y'` of the reduced state."""

    @abc.abstractmethod
    def size(self, y) -> Array:
        """The size `λ` of the event (trace of the covariance in `R^d`)."""

    @abc.abstractmethod
    def solution(self, out):
        """The solution type from the output of the shared solve."""


def solve_settings(
    dtype, *, t0, t1, ts, solver, rtol, atol, dt0, stepsize_controller, max_steps, size_threshold, blowup_estimate
) -> dict:
    """Check the solver arguments (:func:`hassejax.dynamics._solve.solve_settings`, shared with the ordinary
    solvers) and convert them for :func:`solve_reduction` (keyword arguments).

    The default controller is ``diffrax.PIDController(rtol, atol)`` (error norm over the whole
    solver state, the decade test's auxiliary scalar included, as these solves always had).
    """
    extrapolate = _solve.check_blowup_estimate(blowup_estimate)
    t0, t1, ts, threshold, _, solver, controller, dt0 = _solve.solve_settings(
        None, dtype, t0=t0, t1=t1, ts=ts, solver=solver, rtol=rtol, atol=atol, dt0=dt0,
        stepsize_controller=stepsize_controller, max_steps=max_steps, size_threshold=size_threshold, converge_tol=None,
    )  # fmt: skip
    if stepsize_controller is None:
        controller = diffrax.PIDController(rtol=rtol, atol=atol)
    return {
        "t0": t0,
        "t1": t1,
        "ts": ts,
        "threshold": threshold,
        "solver": solver,
        "controller": controller,
        "dt0": dt0,
        "max_steps": int(max_steps),
        "extrapolate": extrapolate,
    }


@eqx.filter_jit
def solve_reduction(
    reduction: AbstractReduction, *, t0, t1, ts, threshold, solver, controller, dt0, max_steps, extrapolate
):
    """Solve the reduced system with :func:`~hassejax.dynamics._solve.integrate` (size event at `threshold`,
    default `default_size_factor · λ(t0)`; no steady-state event) and build its solution type."""
    if threshold is None:
        tr0 = reduction.trace0
        threshold = _solve.default_size_factor(tr0.dtype) * jnp.where(tr0 > 0, tr0, 1.0)
    out = _solve.integrate(
        reduction.vector_field,
        reduction.initial_state(),
        t0=t0,
        t1=t1,
        ts=ts,
        size=reduction.size,
        speed=None,
        threshold=threshold,
        converge_tol=None,
        solver=solver,
        stepsize_controller=controller,
        dt0=dt0,
        max_steps=max_steps,
        extrapolate=extrapolate,
    )
    return reduction.solution(out)
