"""Classify a solve or a sampled covariance trajectory into an :class:`~hassejax.dynamics.diagnostics.Outcome` (spec §4).

:func:`classify` reads a solve of this library: the solver's status (its size event and
decade test) and the final state, through :func:`~hassejax.dynamics.diagnostics.outcome_of`.
:func:`classify_trajectory` reads covariance samples from any integrator and decides an
escape itself with :func:`~hassejax.dynamics.diagnostics.growth_law`.
"""

from __future__ import annotations

import functools
from typing import Literal

import jax
import jax.numpy as jnp
from jaxtyping import ArrayLike, Bool, Float, Real

from ...errors import ParameterError
from ..attention import AbstractAttention
from ..gaussian import _moment_derivatives_unchecked
from ..result import GaussianSolution, ParticleSolution, Status
from ._common import check_cov, check_threshold, eigvals_desc, final_cov
from .growth import GrowthTest, growth_fit
from .outcome import Diagnosis, Outcome, check_rules, decide

__all__ = ["classify", "classify_trajectory"]


def classify(
    solution: GaussianSolution | ParticleSolution,
    *,
    model: AbstractAttention | None = None,
    rate_tol: Real[ArrayLike, ""] = 1e-3,
    rank_rule: Literal["absolute", "relative"] = "absolute",
    rel_threshold: Real[ArrayLike, ""] = 1e-3,
    abs_threshold: Real[ArrayLike, ""] = 0.1,
    collapse_threshold: Real[ArrayLike, ""] | None = None,
    full_rank: int | None = None,
) -> Diagnosis:
    """Outcome of a solve: blow-up, divergence, collapse, low rank, bounded, … (spec dynamics.md §4).

    The outcome is derived from the solve's :class:`~hassejax.dynamics.Status` and its final
    `Σ` (empirical covariance for particles) by
    :func:`~hassejax.dynamics.diagnostics.outcome_of` (rules there): `blow_up` / `diverge`
    are the solver's verdicts at its size event (the decade test, `decade_ratio < 0.05`;
    reported as :attr:`GrowthTest.solver_event` with the solver's exponent `p = λλ''/λ'²`
    for information); `max_steps_reached`, `dt_min_reached`, `non_finite` give
    `undetermined` (the status says why); a normal stop is classified from the final
    spectrum. A rank read at a finite time reflects the `1/t` convergence; see
    :func:`~hassejax.dynamics.diagnostics.limit_rank`.

    With `model` (Gaussian solves only) the rate test of ``outcome_of`` runs too: `Σ'` at the
    final state from :func:`~hassejax.dynamics.moment_derivatives`, `rate = uᵀΣ'u` with `u`
    the top eigenvector, so a member still shrinking or growing at `t1` is `contracts` or
    `grows`, and one that ran out of steps on a stationary low-rank `Σ` is `stalled`. Without
    it, a trajectory still growing at `t1` below the size threshold is classified from its
    final spectrum (use a longer `t1`, or :func:`classify_trajectory`).

    **Arguments:**

    - `solution`: :class:`~hassejax.dynamics.GaussianSolution` or
      :class:`~hassejax.dynamics.ParticleSolution`, any batch axes (none with `model`:
      classify inside ``vmap`` / :func:`~hassejax.dynamics.sweep` for a batch).
    - `model`: the attention kernel of the solve, for the rate test (default None: no rate test).
    - `rate_tol`: threshold on the relative rate of `λ_max` (default `1e-3`).
    - `rank_rule`: ``"absolute"`` (default) or ``"relative"``; static.
    - `rel_threshold`, `abs_threshold`: rank thresholds (defaults `1e-3`, 0.1).
    - `collapse_threshold`: `λ_max` at or below which `Σ` has collapsed (default
      `abs_threshold`, so that under the paper's rule "rank 0" is collapse).
    - `full_rank`: the rank that counts as full (default `d`).

    **Returns:** a :class:`~hassejax.dynamics.diagnostics.Diagnosis`; render with
    :func:`~hassejax.dynamics.diagnostics.outcome_names`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for another solution type, an
    unknown `rank_rule`, bad thresholds, a `model` with a particle or batched solution.

    Source: spec dynamics.md §4.

    **Example:** softmax, `V = I`, `A = I` blows up at `t* = 1/λ_max(Σ0^{1/2}(A + Aᵀ)Σ0^{1/2}) = 1`:

    ```python
    >>> import jax
    >>> jax.config.update("jax_enable_x64", True)  # float64: the default rtol = atol = 1e-8
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Softmax, solve_gaussian
    >>> from hassejax.dynamics.diagnostics import classify, outcome_names
    >>> sol = solve_gaussian(Softmax(V=jnp.eye(2), A=jnp.eye(2)), jnp.zeros(2), 0.5 * jnp.eye(2), t1=2.0)
    >>> outcome_names(classify(sol), digits=4).tolist()
    'blow_up(t*=1)'

    ```
    """
    collapse_threshold = check_rules(rank_rule, rel_threshold, abs_threshold, collapse_threshold, rate_tol)
    cov = final_cov(solution)
    rate = None
    if model is not None:
        if not isinstance(solution, GaussianSolution) or jnp.ndim(solution.status) != 0:
            raise ParameterError(
                "`model` (the rate test) needs one GaussianSolution without batch axes (classify inside vmap for a "
                f"batch); got a {type(solution).__name__} with batch shape {jnp.shape(solution.status)}."
            )
        if not isinstance(model, AbstractAttention):
            raise ParameterError(
                f"`model` must be an attention kernel (AbstractAttention) or None; got {type(model).__name__}."
            )
        rate = _rate(model, solution)
    return _classify(
        solution, cov, rate, rank_rule, rel_threshold, abs_threshold, collapse_threshold, rate_tol, full_rank
    )


def _rate(model, solution):
    """`dλ_max/dt = uᵀΣ'u` at the final state, `u` the top eigenvector of `Σ`."""
    _, dcov = _moment_derivatives_unchecked(model, solution.t_final, solution.mean_final, solution.cov_final)
    _, q = jnp.linalg.eigh(solution.cov_final)
    u = q[:, -1]
    return u @ dcov @ u


@functools.partial(jax.jit, static_argnums=(3,))
def _classify(
    solution, cov_final, rate, rank_rule, rel_threshold, abs_threshold, collapse_threshold, rate_tol, full_rank
):
    eig = eigvals_desc(cov_final)
    status = solution.status
    outcome, rank, r_rel, r_abs = decide(
        status, eig, rate, rank_rule, rel_threshold, abs_threshold, collapse_threshold, rate_tol, full_rank
    )
    escaped = (status == Status.blow_up) | (status == Status.diverge)
    dtype = solution.t_final.dtype
    return Diagnosis(
        outcome=outcome,
        rank=rank,
        rank_relative=r_rel,
        rank_absolute=r_abs,
        eigenvalues=eig,
        status=status,
        t_final=solution.t_final,
        t_blowup=jnp.where(status == Status.blow_up, solution.t_blowup, jnp.inf).astype(dtype),
        growth_exponent=jnp.where(escaped, solution.growth_exponent, 0.0).astype(dtype),
        growth_test=jnp.where(escaped, GrowthTest.solver_event, GrowthTest.none).astype(jnp.int32),
    )


def classify_trajectory(
    ts: Float[ArrayLike, "*batch T"],
    cov: Float[ArrayLike, "*batch T d d"],
    valid: Bool[ArrayLike, "*batch T"] | None = None,
    *,
    escape_ratio: Real[ArrayLike, ""] = 1e6,
    rank_rule: Literal["absolute", "relative"] = "absolute",
    rel_threshold: Real[ArrayLike, ""] = 1e-3,
    abs_threshold: Real[ArrayLike, ""] = 0.1,
    collapse_threshold: Real[ArrayLike, ""] | None = None,
) -> Diagnosis:
    """Outcome of a covariance trajectory given as arrays (any integrator, spec dynamics.md §4).

    Usable samples are those marked `valid` (default all) with finite entries. Then:

    1. if some valid sample is NaN/inf (e.g. a constant-step solve stepping past a
       blow-up): `undetermined`, status `non_finite`. The growth fit on the finite samples
       is still reported (`growth_exponent`, `growth_test`) but not turned into a verdict:
       an integrator stepping past a singularity produces its own growth law (explicit
       Euler on `σ' = σ²` grows doubly exponentially, never in finite time);
    2. *escape*: `λ_max` at the last usable sample is at least `escape_ratio` times its
       value at the first: :func:`~hassejax.dynamics.diagnostics.growth_law` on `λ_max(t)`
       decides `blow_up` (`p > BLOWUP_EXPONENT`, with the extrapolated `t*`) or `diverge`
       (:attr:`GrowthTest.sample_fit`); with fewer than three growing samples the outcome
       is `undetermined` (:attr:`GrowthTest.insufficient`);
    3. otherwise the final spectrum decides, as for a normal stop in :func:`classify`.

    The `status` field is `non_finite` in case 1, `blow_up` / `diverge` in case 2 (when
    decided), else `completed`.

    **Arguments:**

    - `ts`: `(*batch, T)` float times; `cov`: `(*batch, T, d, d)` float covariances.
    - `valid`: `(*batch, T)` Boolean usable samples (default all).
    - `escape_ratio`: growth of `λ_max` that counts as an escape (default `1e6`).
    - `rank_rule`, `rel_threshold`, `abs_threshold`, `collapse_threshold`: as in :func:`classify`.

    **Returns:** a :class:`~hassejax.dynamics.diagnostics.Diagnosis`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for mismatched shapes, an unknown
    `rank_rule` or bad thresholds.

    Source: spec dynamics.md §4; the sample fit is (derived).

    **Example:** samples of `Σ(t) = I/(1 − t)` blow up at `t* = 1`:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics.diagnostics import classify_trajectory, outcome_names
    >>> ts = 1.0 - jnp.logspace(0, -7, 8)
    >>> cov = jnp.eye(2) / (1.0 - ts)[:, None, None]
    >>> outcome_names(classify_trajectory(ts, cov), digits=4).tolist()
    'blow_up(t*=1)'

    ```
    """
    collapse_threshold = check_rules(rank_rule, rel_threshold, abs_threshold, collapse_threshold)
    check_threshold(escape_ratio, "escape_ratio")
    cov = check_cov(cov)
    ts = jnp.asarray(ts)
    if cov.ndim < 3 or ts.shape != cov.shape[:-2]:
        raise ParameterError(
            f"`ts` must have shape (..., T) = {cov.shape[:-2]} matching `cov` of shape {cov.shape}; got {ts.shape}."
        )
    valid = jnp.ones(ts.shape, bool) if valid is None else jnp.asarray(valid)
    if valid.shape != ts.shape:
        raise ParameterError(f"`valid` must have the shape of `ts`, {ts.shape}; got {valid.shape}.")
    return _classify_trajectory(
        ts, cov, valid, escape_ratio, rank_rule, rel_threshold, abs_threshold, collapse_threshold
    )


@functools.partial(jax.jit, static_argnums=(4,))
def _classify_trajectory(ts, cov, valid, escape_ratio, rank_rule, rel_threshold, abs_threshold, collapse_threshold):
    dtype = jnp.result_type(cov, ts, float)
    cov, ts = cov.astype(dtype), ts.astype(dtype)
    finite = jnp.all(jnp.isfinite(cov), axis=(-2, -1)) & jnp.isfinite(ts)
    usable = valid & finite
    any_bad = jnp.any(valid & ~finite, axis=-1)
    # Eigenvalues with unusable samples replaced by zeros (never NaN into eigh).
    eig_t = eigvals_desc(jnp.where(usable[..., None, None], cov, 0.0))
    lam = eig_t[..., 0]
    T = ts.shape[-1]
    first = jnp.argmax(usable, axis=-1)
    last = T - 1 - jnp.argmax(jnp.flip(usable, axis=-1), axis=-1)
    has_any = jnp.any(usable, axis=-1)
    take = lambda a, i: jnp.take_along_axis(a, i[..., None], axis=-1)[..., 0]
    lam_first, lam_last = take(lam, first), take(lam, last)
    escaped = has_any & (lam_first > 0) & (lam_last >= escape_ratio * lam_first)
    fit = growth_fit(ts, lam, usable)

    eig_final = jnp.take_along_axis(eig_t, last[..., None, None], axis=-2)[..., 0, :]
    completed = jnp.full(first.shape, Status.completed, jnp.int32)
    outcome, rank, r_rel, r_abs = decide(
        completed, eig_final, None, rank_rule, rel_threshold, abs_threshold, collapse_threshold, 1.0, None
    )
    escape_outcome = jnp.where(fit.ok, jnp.where(fit.blow_up, Outcome.blow_up, Outcome.diverge), Outcome.undetermined)
    outcome = jnp.where(any_bad | ~has_any, Outcome.undetermined, jnp.where(escaped, escape_outcome, outcome))
    outcome = outcome.astype(jnp.int32)
    escape_status = jnp.where(fit.blow_up, Status.blow_up, Status.diverge)
    status = jnp.where(any_bad, Status.non_finite, jnp.where(escaped & fit.ok, escape_status, Status.completed))
    status = status.astype(jnp.int32)
    is_blow = outcome == Outcome.blow_up
    return Diagnosis(
        outcome=outcome,
        rank=rank,
        rank_relative=r_rel,
        rank_absolute=r_abs,
        eigenvalues=eig_final,
        status=status,
        t_final=take(ts, last),
        t_blowup=jnp.where(is_blow, fit.t_star, jnp.inf).astype(dtype),
        growth_exponent=jnp.where(escaped, fit.exponent, 0.0).astype(dtype),
        growth_test=jnp.where(
            escaped, jnp.where(fit.ok, GrowthTest.sample_fit, GrowthTest.insufficient), GrowthTest.none
        ).astype(jnp.int32),
    )
