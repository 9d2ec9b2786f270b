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
from jaxtyping import Array, Float

from .. import _solve
from ..result import Status

__all__ = ["AbstractReduction", "head_products", "solve_settings", "solve_reduction"]


def head_products(model) -> dict:
    """The `k×k` products of a head's factors that every reduction needs (keyword arguments of its fields):
    `QO = QW_O`, `KO = KW_O`, `VO = W_VW_O`, `OO = W_OᵀW_O`."""
    W_O = model.W_O
    return {"QO": model.Q @ W_O, "KO": model.K @ W_O, "VO": model.W_V @ W_O, "OO": W_O.T @ W_O}


class AbstractReduction(eqx.Module):
    """Exact `k`-dimensional coordinates of the dynamics of a rank-`k` head (see the subclasses).

    Fields shared by the subclasses: the head's products `QO`, `KO`, `VO`, `OO` `(k, k)`
    (:func:`head_products`); each subclass adds its constants and `trace0`, `tr Σ` at `t0`.

    Source: (derived), module :mod:`hassejax.dynamics.low_rank`: a head with `A = KᵀQ`, `V = W_O W_V` of rank `≤ k`
    (spec dynamics.md §1, §2), solved with the size event of spec §4.

    **Example:** a :class:`~hassejax.dynamics.low_rank.GaussianReduction` of the head `Q = K = W_V = e₁ᵀ`,
    `W_O = e₁` on `N(0, I/2)`: `QO = QW_O = 1`, and the size of the initial state is `tr Σ0 = 1`:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import LowRankSoftmax
    >>> from hassejax.dynamics.low_rank import AbstractReduction, GaussianReduction
    >>> e = jnp.array([[1.0, 0.0]])
    >>> red = GaussianReduction.from_head(LowRankSoftmax(e, e, e, e.T), jnp.zeros(2), jnp.eye(2) / 2)
    >>> isinstance(red, AbstractReduction), red.QO.tolist(), float(red.size(red.initial_state()))
    (True, [[1.0]], 1.0)

    ```
    """

    QO: Float[Array, "k k"]
    KO: Float[Array, "k k"]
    VO: Float[Array, "k k"]
    OO: Float[Array, "k k"]
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
    def size_floor(self, y) -> Array:
        """The size that rounding alone gives the state `y`: a crossing within `SIZE_FLOOR_FACTOR` (100) × of it is
        ``undetermined`` (:func:`~hassejax.dynamics._solve.integrate`)."""

    @abc.abstractmethod
    def solution(self, out):
        """The solution type from the output of the shared solve."""


def solve_settings(dtype, *, rtol, atol, stepsize_controller, blowup_estimate, **kwargs) -> dict:
    """Check the solver arguments (:func:`hassejax.dynamics._solve.solve_settings`, shared with the ordinary
    solvers; no steady-state event) and convert them for :func:`solve_reduction` (keyword arguments).

    The default controller is ``diffrax.PIDController(rtol, atol)`` (error norm over the whole
    solver state, the decade test's auxiliary scalar included, as these solves always had).
    """
    extrapolate = _solve.check_blowup_estimate(blowup_estimate)
    settings = _solve.solve_settings(
        None, dtype, rtol=rtol, atol=atol, stepsize_controller=stepsize_controller, converge_tol=None,
        extrapolate=extrapolate, **kwargs,
    )  # fmt: skip
    if stepsize_controller is None:  # a traced invalid pair: the stand-in, flagged `invalid_tolerance`
        r, a, _ = _solve.checked_tolerances(rtol, atol, dtype)
        settings["stepsize_controller"] = diffrax.PIDController(rtol=r, atol=a)
    return settings


@eqx.filter_jit
def solve_reduction(reduction: AbstractReduction, settings: dict, indefinite=None):
    """Solve the reduced system with :func:`~hassejax.dynamics._solve.integrate_events` (size event at
    `threshold`, default `default_size_factor · λ(t0)`; no steady-state event) and build its solution type; status
    ``indefinite`` where the (traced) flag `indefinite` holds (an initial covariance that is no covariance)."""
    out = _solve.integrate_events(
        reduction.vector_field,
        reduction.initial_state(),
        reduction.size,
        size0=reduction.trace0,
        size_floor=reduction.size_floor,
        **settings,
    )
    if indefinite is not None:
        out = _solve.flag_status(out, indefinite, Status.indefinite)
    return reduction.solution(out)
