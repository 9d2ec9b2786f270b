"""What happened to the trajectory? The one outcome list and the rule from a solve to it (spec dynamics.md §4).

Two lists, two questions:

- :class:`~hassejax.dynamics.Status` says *why a solve stopped* (reached `t1`, steady
  state, size event with the decade test's verdict, step budget, integrator failure,
  NaN/inf). The solvers produce it and nothing else.
- :class:`Outcome` says *what the trajectory does in the long run* as far as the solve
  shows it: blow-up, divergence, collapse, a low-rank or full-rank limit, still shrinking
  or still growing at the end, or undetermined. It is derived from the status and the
  final state by :func:`outcome_of` (used by
  :func:`~hassejax.dynamics.diagnostics.classify`, by the phase maps and by the real-heads
  experiment), never produced by a solver.

Everything here runs under ``jit`` and ``vmap``: outcomes are ``int32`` codes of
:class:`Outcome`, rendered to names on the host by :func:`outcome_names`.
"""

from __future__ import annotations

import enum
from typing import Literal

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Int, Real

from ..result import STATUS_NAMES, Status
from ._common import check_rule, check_threshold, rank_abs, rank_rel
from .growth import GrowthTest

__all__ = ["Outcome", "OUTCOME_NAMES", "Diagnosis", "outcome_of", "outcome_names"]


class Outcome(enum.IntEnum):
    """Long-time outcome of a trajectory (spec dynamics.md §4). Values are the ``int32`` codes.

    Derived from the solve's :class:`~hassejax.dynamics.Status` and its final state by
    :func:`outcome_of` (rules there). With a rate test (a rate of `λ_max` given), `bounded`
    and `low_rank` also mean "settled": `λ_max` no longer moves at relative rate `rate_tol`.

    - `bounded` (0): stopped normally, `Σ` full rank at the end.
    - `low_rank` (1): stopped normally, `Σ` has rank `r` with `0 < r < d` at the end (`r`
      in :class:`Diagnosis`).
    - `collapse` (2): `Σ → 0` reached (largest eigenvalue at most the collapse threshold).
    - `diverge` (3): the size event fired and the growth is not a finite-time blow-up.
    - `blow_up` (4): the size event fired and the growth is a finite-time blow-up; `t_blowup` holds `t*`.
    - `undetermined` (5): the solve stopped early (`max_steps_reached`, `dt_min_reached`,
      `non_finite`, `invalid_times`, `invalid_threshold`, `indefinite`, `invalid_tolerance`), an escape could not be tested (status `undetermined`),
      or the rate test got NaN.
    - `contracts` (6): stopped normally, `λ_max` still shrinking at the end (relative rate
      `< −rate_tol`): `Σ → 0` under way (rate test only).
    - `grows` (7): stopped normally without a size event, `λ_max` still growing at the end
      (relative rate `> rate_tol`): no blow-up by `t1`, not decided (rate test only).
    - `stalled` (8): the step budget ran out (`max_steps_reached`), or the steps fell to the
      rounding of `t` (`dt_min_reached`), on a stationary low-rank `Σ` (relative rate within
      `rate_tol`, `0 < r < d`): typically a stiff approach to a low-rank state; not decided
      (rate test only).

    **Example:**

    ```python
    >>> from hassejax.dynamics.diagnostics import Outcome
    >>> [(o.name, o.value) for o in Outcome][:6]
    [('bounded', 0), ('low_rank', 1), ('collapse', 2), ('diverge', 3), ('blow_up', 4), ('undetermined', 5)]
    >>> Outcome(8).name, len(Outcome)
    ('stalled', 9)

    ```
    """

    # codes 0..8 in the order of the list above
    bounded, low_rank, collapse, diverge, blow_up, undetermined, contracts, grows, stalled = range(9)


OUTCOME_NAMES: tuple[str, ...] = tuple(o.name for o in Outcome)
"""Outcome names indexed by code."""


class Diagnosis(eqx.Module):
    """Outcome of one trajectory (fields gain the batch axes in front under ``vmap``).

    - `outcome`: :class:`Outcome` code.
    - `rank`: the rank that `low_rank(r)` reports (per `rank_rule`), at the final state.
    - `rank_relative`, `rank_absolute`: both ranks of the final `Σ`.
    - `eigenvalues`: `(*batch, d)` eigenvalues of the final `Σ`, decreasing.
    - `status`: :class:`~hassejax.dynamics.Status` code of the solve (for a raw trajectory:
      derived from it, see :func:`~hassejax.dynamics.diagnostics.classify_trajectory`).
    - `t_final`: time of the final state.
    - `t_blowup`: `t*` for `blow_up`, else `inf`.
    - `growth_exponent`: from ``classify``: the solver's local exponent `p = λλ''/λ'²` at
      the size event, for information (the solver decided by the decade test); from
      ``classify_trajectory``: the fitted `p` of :func:`~hassejax.dynamics.diagnostics.growth_law`
      that decided. 0 if no escape.
    - `growth_test`: :class:`~hassejax.dynamics.diagnostics.GrowthTest` code.

    Source: spec dynamics.md §4 ("Outcomes": `low_rank(r)` counted above a threshold relative to the largest
    eigenvalue and, separately, above an absolute one such as 0.1, the paper's rule); the growth fields are
    (derived).

    **Example:** from :func:`~hassejax.dynamics.diagnostics.classify_trajectory` on samples of `Σ(t) = I/(1 − t)`,
    which blows up at `t* = 1` (decided by the fit of the samples, with exponent `p = 2`):

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics.diagnostics import GrowthTest, Outcome, classify_trajectory
    >>> ts = 1.0 - jnp.logspace(0, -7, 8)
    >>> diag = classify_trajectory(ts, jnp.eye(2) / (1.0 - ts)[:, None, None])
    >>> Outcome(int(diag.outcome)).name, GrowthTest(int(diag.growth_test)).name, diag.rank.item()
    ('blow_up', 'sample_fit', 2)
    >>> round(diag.t_blowup.item(), 4), round(diag.growth_exponent.item(), 4)
    (1.0, 2.0)

    ```
    """

    outcome: Int[Array, "*batch"]
    rank: Int[Array, "*batch"]
    rank_relative: Int[Array, "*batch"]
    rank_absolute: Int[Array, "*batch"]
    eigenvalues: Float[Array, "*batch d"]
    status: Int[Array, "*batch"]
    t_final: Float[Array, "*batch"]
    t_blowup: Float[Array, "*batch"]
    growth_exponent: Float[Array, "*batch"]
    growth_test: Int[Array, "*batch"]


def check_rules(rank_rule, rel_threshold, abs_threshold, collapse_threshold, rate_tol=1.0):
    """Validate the shared rule arguments; returns `collapse_threshold` (default `abs_threshold`)."""
    check_rule(rank_rule)
    check_threshold(rel_threshold, "rel_threshold")
    check_threshold(abs_threshold, "abs_threshold", allow_zero=True)
    if collapse_threshold is None:
        collapse_threshold = abs_threshold
    check_threshold(collapse_threshold, "collapse_threshold", allow_zero=True)
    check_threshold(rate_tol, "rate_tol")
    return collapse_threshold


def outcome_of(
    status: Int[ArrayLike, "*batch"],
    eigenvalues: Float[ArrayLike, "*batch d"],
    rate: Float[ArrayLike, "*batch"] | None = None,
    *,
    rank_rule: Literal["absolute", "relative"] = "absolute",
    rel_threshold: Real[ArrayLike, ""] = 1e-3,
    abs_threshold: Real[ArrayLike, ""] = 0.1,
    collapse_threshold: Real[ArrayLike, ""] | None = None,
    rate_tol: Real[ArrayLike, ""] = 1e-3,
    full_rank: Int[ArrayLike, "*#batch"] | None = None,
) -> tuple[Int[Array, "*batch"], Int[Array, "*batch"]]:
    """The :class:`Outcome` of a solve from its status and its final state (the one rule; jit/vmap safe).

    Per batch member, with `r` the rank of the final `Σ` (eigenvalues above `abs_threshold`
    for ``rank_rule="absolute"``, the paper's rule, or above `rel_threshold · λ_max` for
    ``"relative"``) and `full` = `full_rank` (default `d`):

    1. status `blow_up` / `diverge` (the solver's size event and decade test): that outcome;
    2. status `completed` / `converged`: the *spectral outcome* `collapse` if
       `λ_max <= collapse_threshold` or `r = 0`, else `low_rank` for `0 < r < full`, else
       `bounded`. With `rate` (`dλ_max/dt` at the final state) the relative rate
       `ρ = rate/λ_max` (`rate` itself when `λ_max <= 0`) is tested first: `contracts` if
       `ρ < −rate_tol`, `grows` if `ρ > rate_tol`, the spectral outcome if `|ρ| <= rate_tol`,
       `undetermined` if `ρ` is NaN;
    3. status `max_steps_reached` or `dt_min_reached` with `rate`, `|ρ| <= rate_tol` and
       `0 < r < full`: `stalled`;
    4. anything else (`max_steps_reached`, `dt_min_reached`, `non_finite`, `undetermined`,
       `invalid_times`, `invalid_threshold`, `indefinite`, `invalid_tolerance`): `undetermined`.

    **Arguments:**

    - `status`: `(*batch,)` int :class:`~hassejax.dynamics.Status` codes.
    - `eigenvalues`: `(*batch, d)` eigenvalues of the final `Σ`, decreasing.
    - `rate`: `(*batch,)` `dλ_max/dt` at the final state (e.g. `uᵀΣ'u`, `u` the top
      eigenvector), or None for no rate test.
    - `rank_rule`: ``"absolute"`` (default) or ``"relative"``; static.
    - `rel_threshold`, `abs_threshold`: rank thresholds (defaults `1e-3`, `0.1`).
    - `collapse_threshold`: `λ_max` at or below which `Σ` has collapsed (default `abs_threshold`).
    - `rate_tol`: threshold on `|ρ|` (default `1e-3`).
    - `full_rank`: the rank that counts as full (default `d`; e.g. the initial rank of a
      rank-deficient `Σ0`, so that `low_rank` means "lost a direction").

    **Returns:** `(outcome, rank)`, both `(*batch,)` int32.

    **Raises:** :class:`~hassejax.errors.ParameterError` for an unknown `rank_rule` or a bad threshold.

    Source: spec dynamics.md §4 (statuses and outcomes); the rate test is (derived).

    **Example:**

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Status
    >>> from hassejax.dynamics.diagnostics import Outcome, outcome_of
    >>> status = jnp.array([Status.completed, Status.completed, Status.blow_up, Status.max_steps_reached])
    >>> eig = jnp.array([[2.0, 0.01], [2.0, 1.0], [1e6, 1e3], [2.0, 1.0]])
    >>> code, rank = outcome_of(status, eig)
    >>> [Outcome(c).name for c in code.tolist()], rank.tolist()
    (['low_rank', 'bounded', 'blow_up', 'undetermined'], [1, 2, 2, 2])
    >>> code, _ = outcome_of(status[:2], eig[:2], rate=jnp.array([1.0, -1.0]))
    >>> [Outcome(c).name for c in code.tolist()]
    ['grows', 'contracts']

    ```
    """
    collapse_threshold = check_rules(rank_rule, rel_threshold, abs_threshold, collapse_threshold, rate_tol)
    eig = jnp.asarray(eigenvalues)
    status = jnp.asarray(status)
    rate = None if rate is None else jnp.asarray(rate)
    outcome, rank, _, _ = decide(
        status, eig, rate, rank_rule, rel_threshold, abs_threshold, collapse_threshold, rate_tol, full_rank
    )
    return outcome, rank


def decide(status, eig, rate, rank_rule, rel_threshold, abs_threshold, collapse_threshold, rate_tol, full_rank):
    """:func:`outcome_of` without the checks; returns `(outcome, rank, rank_relative, rank_absolute)`."""
    r_rel, r_abs = rank_rel(eig, rel_threshold), rank_abs(eig, abs_threshold)
    rank = r_abs if rank_rule == "absolute" else r_rel
    full = eig.shape[-1] if full_rank is None else jnp.asarray(full_rank)
    lam = eig[..., 0]
    partial = (rank > 0) & (rank < full)
    spectral = jnp.where(
        (lam <= collapse_threshold) | (rank == 0),
        Outcome.collapse,
        jnp.where(partial, Outcome.low_rank, Outcome.bounded),
    )
    stopped = (status == Status.completed) | (status == Status.converged)
    stalled = jnp.zeros(jnp.shape(status), bool)
    if rate is None:
        normal = spectral
    else:
        rho = rate / jnp.where(lam > 0, lam, 1.0)
        settled = jnp.abs(rho) <= rate_tol
        trend = jnp.where(
            rho < -rate_tol, Outcome.contracts, jnp.where(rho > rate_tol, Outcome.grows, Outcome.undetermined)
        )
        normal = jnp.where(settled, spectral, trend)
        stuck = (status == Status.max_steps_reached) | (status == Status.dt_min_reached)
        stalled = stuck & settled & partial
    outcome = jnp.where(
        status == Status.blow_up,
        Outcome.blow_up,
        jnp.where(
            status == Status.diverge,
            Outcome.diverge,
            jnp.where(stopped, normal, jnp.where(stalled, Outcome.stalled, Outcome.undetermined)),
        ),
    )
    return outcome.astype(jnp.int32), rank, r_rel, r_abs


def _code_names(codes) -> np.ndarray:
    """The names of bare :class:`Outcome` codes (an array of ``str``, dtype object, the shape of `codes`)."""
    from ...errors import ParameterError

    raw = np.asarray(codes)
    values = {int(o) for o in Outcome}
    if not np.issubdtype(raw.dtype, np.integer) or not set(np.unique(raw).tolist()) <= values:
        raise ParameterError(
            f"`diagnosis` must be a Diagnosis or integer Outcome codes ({sorted(values)}); got {raw!r:.120}."
        )
    out = np.empty(raw.shape, dtype=object)
    for i in np.ndindex(raw.shape):
        out[i] = Outcome(int(raw[i])).name
    return out


def outcome_names(diagnosis: Diagnosis | Int[ArrayLike, "*batch"], *, digits: int = 6) -> np.ndarray:
    """Host-side rendering of a :class:`Diagnosis` as names (NumPy array of ``str``, dtype object, shape `*batch`).

    ``"bounded"``, ``"low_rank(1)"``, ``"collapse"``, ``"diverge"``, ``"blow_up(t*=0.702341)"``,
    ``"undetermined(max_steps_reached)"`` (the solve status in brackets), ``"contracts"``,
    ``"grows"``, ``"stalled(rank 1)"``.

    **Arguments:** `diagnosis`: from :func:`~hassejax.dynamics.diagnostics.classify` or
    :func:`~hassejax.dynamics.diagnostics.classify_trajectory`, or bare :class:`Outcome` codes (an
    integer array-like, e.g. ``diagnosis.outcome``: the names alone, ``"low_rank"``, ``"blow_up"``,
    without the rank, `t*` or status a :class:`Diagnosis` adds); `digits`: significant digits of `t*`.

    **Returns:** a NumPy array of strings.

    **Raises:** :class:`~hassejax.errors.ParameterError` for codes that are not integer
    :class:`Outcome` values; otherwise nothing beyond NumPy's errors for a malformed diagnosis.

    Source: (derived).

    **Example:**

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Status
    >>> from hassejax.dynamics.diagnostics import Diagnosis, Outcome, outcome_names
    >>> z, i = jnp.zeros(3), jnp.zeros(3, int)
    >>> diag = Diagnosis(outcome=jnp.array([Outcome.low_rank, Outcome.blow_up, Outcome.undetermined]),
    ...                  rank=jnp.array([1, 2, 2]), rank_relative=i, rank_absolute=i, eigenvalues=jnp.zeros((3, 2)),
    ...                  status=jnp.array([Status.completed, Status.blow_up, Status.max_steps_reached]),
    ...                  t_final=z, t_blowup=jnp.array([jnp.inf, 0.5, jnp.inf]), growth_exponent=z, growth_test=i)
    >>> outcome_names(diag).tolist()
    ['low_rank(1)', 'blow_up(t*=0.5)', 'undetermined(max_steps_reached)']
    >>> outcome_names(diag.outcome).tolist()
    ['low_rank', 'blow_up', 'undetermined']

    ```
    """
    if not hasattr(diagnosis, "outcome"):  # bare codes (a review: AttributeError 'ndarray' has no 'outcome')
        return _code_names(diagnosis)
    outcome = np.asarray(diagnosis.outcome)
    rank = np.broadcast_to(np.asarray(diagnosis.rank), outcome.shape)
    t_star = np.broadcast_to(np.asarray(diagnosis.t_blowup), outcome.shape)
    status = np.broadcast_to(np.asarray(diagnosis.status), outcome.shape)
    test = np.broadcast_to(np.asarray(diagnosis.growth_test), outcome.shape)
    out = np.empty(outcome.shape, dtype=object)
    for i in np.ndindex(outcome.shape):
        o = Outcome(int(outcome[i]))
        if o is Outcome.low_rank:
            out[i] = f"low_rank({int(rank[i])})"
        elif o is Outcome.stalled:
            out[i] = f"stalled(rank {int(rank[i])})"
        elif o is Outcome.blow_up:
            out[i] = f"blow_up(t*={float(t_star[i]):.{digits}g})"
        elif o is Outcome.undetermined:
            why = STATUS_NAMES[int(status[i])]
            if int(test[i]) == GrowthTest.insufficient:
                why = "escape with too few samples"
            out[i] = f"undetermined({why})"
        else:
            out[i] = o.name
    return out
