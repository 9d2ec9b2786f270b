"""Diagnostics of solved dynamics: spectra, ranks, growth law, outcomes, clusters (spec dynamics.md §4).

Everything here is a pure function of arrays with fixed output shapes, so it runs under
``jit`` and ``vmap`` (and inside :func:`~hassejax.dynamics.sweeps.sweep`): outcomes are
``int32`` codes of :class:`Outcome`, rendered to names on the host by
:func:`outcome_names`.

- **Spectrum and rank of Σ** (:func:`covariance_eigenvalues`, :func:`rank_relative`,
  :func:`rank_absolute`, :func:`limit_rank`, :func:`spectrum`): the rank counts eigenvalues
  above a threshold relative to the largest one, and, separately, above an absolute
  threshold (0.1 by default: the rule of the paper's rank histograms, spec §7 item 7).
  Convergence is like `1/t`, so a rank read at a finite time depends on the horizon; the
  *exact limit rank* is the relative count with `1e-6 · λ_max` after a long horizon (spec
  §7a), or the closed form (:func:`~hassejax.dynamics.clustering_limit`) for `V = vI`.
- **Growth law** (:func:`growth_law`): blow-up against divergence from samples of
  `λ_max(t)`. Fit `λ' = kλ^p` through the last three samples: `u^{p−1}` (`u = 1/λ`) is then
  affine in `t` (`log u` for `p = 1`). `p = 2` is finite-time blow-up `λ ≈ c/(t* − t)`
  (`1/λ` falls linearly to zero, spec §4), `p = 1` exponential divergence (`1/λ` decays
  without reaching zero); `p > 1.5` counts as blow-up, the same rule as the solvers'
  event exponent `λλ''/λ'²` (derived).
- **Outcome** (:func:`classify`, :func:`classify_trajectory`): `blow_up(t*)`, `diverge`,
  `collapse` (Σ → 0), `low_rank(r)`, `bounded`, or `undetermined` when the solve stopped
  for another reason (`max_steps_reached`, `dt_min_reached`, `non_finite`), which is
  reported as such, never as a classification. The test behind a blow-up/diverge verdict
  is recorded in :class:`GrowthTest`.
- **Clusters of particles** (:func:`cluster_count`): the rank of the thresholded Gram
  matrix of the normalised tokens, `rank[1{⟨x_i, x_j⟩/(‖x_i‖‖x_j‖) > 1 − δ}]`, the count
  used in the figures of Geshkovski, Letrouit, Polyanskiy, Rigollet, "A mathematical
  perspective on Transformers", arXiv:2312.10794 (their code thresholds the Gram matrix of
  tokens on the sphere at 0.9999 and takes ``matrix_rank``).
"""

from __future__ import annotations

import enum
import functools
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float, Int, Real

from ..errors import ParameterError
from .result import STATUS_NAMES, GaussianSolution, ParticleSolution, Status

__all__ = [
    "Outcome",
    "OUTCOME_NAMES",
    "GrowthTest",
    "GrowthFit",
    "Spectrum",
    "Diagnosis",
    "BLOWUP_EXPONENT",
    "covariance_eigenvalues",
    "empirical_covariance",
    "rank_relative",
    "rank_absolute",
    "limit_rank",
    "spectrum",
    "growth_law",
    "classify",
    "classify_trajectory",
    "outcome_names",
    "cluster_count",
]

BLOWUP_EXPONENT = 1.5
"""Growth exponent above which growth counts as finite-time blow-up (`λ' ∝ λ^p`, `p > 1.5`)."""


class Outcome(enum.IntEnum):
    """Long-time outcome of a trajectory (spec dynamics.md §4). Values are the ``int32`` codes.

    - `bounded` (0): stayed bounded, `Σ` full rank at the end.
    - `low_rank` (1): `Σ` has rank `r` with `0 < r < d` at the end (`r` in :class:`Diagnosis`).
    - `collapse` (2): `Σ → 0` (largest eigenvalue at most the collapse threshold).
    - `diverge` (3): grew past the size threshold without finite-time blow-up.
    - `blow_up` (4): finite-time blow-up; `t_blowup` holds `t*`.
    - `undetermined` (5): the solve stopped early (`max_steps_reached`, `dt_min_reached`,
      `non_finite`) or an escape could not be tested; see `status` and `growth_test`.
    """

    bounded = 0
    low_rank = 1
    collapse = 2
    diverge = 3
    blow_up = 4
    undetermined = 5


OUTCOME_NAMES: tuple[str, ...] = tuple(o.name for o in Outcome)
"""Outcome names indexed by code."""


class GrowthTest(enum.IntEnum):
    """Which test told blow-up from divergence (spec §4 "report the test used").

    - `none` (0): no escape, nothing to test.
    - `event_exponent` (1): the solver's exponent `p = λλ''/λ'²` of `λ = tr Σ` at the size
      event (forward-mode derivatives; `p > 1.5` ⇒ blow-up).
    - `sample_fit` (2): :func:`growth_law` on samples of `λ_max(t)` (`p > 1.5` ⇒ blow-up).
    - `insufficient` (3): an escape with fewer than three usable growing samples: the
      outcome is `undetermined`.
    """

    none = 0
    event_exponent = 1
    sample_fit = 2
    insufficient = 3


class GrowthFit(eqx.Module):
    """Result of :func:`growth_law` (fields gain the batch axes in front under ``vmap``).

    - `exponent`: `p` of `λ' = kλ^p` through the last three samples (0 where not `ok`).
    - `t_star`: extrapolated zero of `1/λ` along the fitted law (`inf` for `p <= 1` or not `ok`).
    - `ok`: three valid samples with `λ` strictly increasing were available.
    - `blow_up`: `ok` and `p > 1.5`.
    """

    exponent: Float[Array, "*batch"]
    t_star: Float[Array, "*batch"]
    ok: Bool[Array, "*batch"]
    blow_up: Bool[Array, "*batch"]


class Spectrum(eqx.Module):
    """Eigenvalues and ranks of `Σ(t)` at the saved times (see :func:`spectrum`).

    - `ts`: `(*batch, T)` save times; `valid`: `(*batch, T)` as in the solution.
    - `eigenvalues`: `(*batch, T, d)` in decreasing order.
    - `rank_relative`: `(*batch, T)` eigenvalues `> rel_threshold · λ_max`.
    - `rank_absolute`: `(*batch, T)` eigenvalues `> abs_threshold`.
    """

    ts: Float[Array, "*batch T"]
    valid: Bool[Array, "*batch T"]
    eigenvalues: Float[Array, "*batch T d"]
    rank_relative: Int[Array, "*batch T"]
    rank_absolute: Int[Array, "*batch T"]


class Diagnosis(eqx.Module):
    """Outcome of one trajectory (fields gain the batch axes in front under ``vmap``).

    - `outcome`: :class:`Outcome` code.
    - `rank`: the rank that `low_rank(r)` reports (per `rank_rule`), at the final state.
    - `rank_relative`, `rank_absolute`: both ranks of the final `Σ`.
    - `eigenvalues`: `(*batch, d)` eigenvalues of the final `Σ`, decreasing.
    - `status`: :class:`~hassejax.dynamics.Status` code of the solve (for a raw trajectory:
      derived from it, see :func:`classify_trajectory`).
    - `t_final`: time of the final state.
    - `t_blowup`: `t*` for `blow_up`, else `inf`.
    - `growth_exponent`: the `p` behind a blow-up/diverge verdict (0 if none).
    - `growth_test`: :class:`GrowthTest` code.
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


# --------------------------------------------------------------------------- checks
def _check_cov(cov, name: str = "cov") -> jax.Array:
    shape = tuple(getattr(cov, "shape", ()))
    if len(shape) < 2 or shape[-1] != shape[-2] or shape[-1] == 0:
        raise ParameterError(f"`{name}` must have shape (..., d, d) with d >= 1; got shape {shape}.")
    cov = jnp.asarray(cov)
    if not jnp.issubdtype(cov.dtype, jnp.floating):
        cov = cov.astype(float)
    return cov


def _check_threshold(value, name: str, allow_zero: bool = False) -> None:
    if isinstance(value, jax.core.Tracer):
        return
    v = np.asarray(value)
    if v.shape != () or not np.isfinite(v) or (v < 0 if allow_zero else v <= 0):
        want = "a finite number >= 0" if allow_zero else "a finite number > 0"
        raise ParameterError(f"`{name}` must be {want}; got {value!r}.")


def _check_rule(rank_rule) -> None:
    if rank_rule not in ("absolute", "relative"):
        raise ParameterError(f"`rank_rule` must be 'absolute' (the paper's 0.1 rule) or 'relative'; got {rank_rule!r}.")


# --------------------------------------------------------------------------- spectra and ranks
def covariance_eigenvalues(cov: Float[ArrayLike, "*batch d d"]) -> Float[Array, "*batch d"]:
    """Eigenvalues of symmetric `Σ` (symmetrised first), in decreasing order.

    **Arguments:** `cov`: `(*batch, d, d)`.

    **Returns:** `(*batch, d)`, `λ_1 >= … >= λ_d`.

    **Raises:** :class:`~hassejax.errors.ParameterError` if `cov` is not `(..., d, d)`.
    """
    cov = _check_cov(cov)
    return _eigvals_desc(cov)


def _eigvals_desc(cov):
    cov = 0.5 * (cov + jnp.swapaxes(cov, -1, -2))
    return jnp.flip(jnp.linalg.eigvalsh(cov), axis=-1)


def empirical_covariance(x: Float[ArrayLike, "*batch n d"]) -> Float[Array, "*batch d d"]:
    """Covariance of the empirical measure `μ = (1/n) Σ_i δ_{x_i}` (normalised by `n`, not `n − 1`).

    **Arguments:** `x`: `(*batch, n, d)` tokens.

    **Returns:** `(*batch, d, d)` `(1/n) Σ_i (x_i − x̄)(x_i − x̄)ᵀ`.

    **Raises:** :class:`~hassejax.errors.ParameterError` if `x` is not `(..., n, d)` with `n >= 1`.
    """
    shape = tuple(getattr(x, "shape", ()))
    if len(shape) < 2 or shape[-2] == 0:
        raise ParameterError(f"`x` must have shape (..., n, d) with n >= 1 tokens; got shape {shape}.")
    x = jnp.asarray(x)
    xc = x - jnp.mean(x, axis=-2, keepdims=True)
    return jnp.einsum("...ni,...nj->...ij", xc, xc) / shape[-2]


def _rank_rel(eig, rtol):
    top = eig[..., :1]
    return jnp.sum((eig > rtol * top) & (top > 0), axis=-1).astype(jnp.int32)


def _rank_abs(eig, threshold):
    return jnp.sum(eig > threshold, axis=-1).astype(jnp.int32)


def rank_relative(cov: Float[ArrayLike, "*batch d d"], rtol: Real[ArrayLike, ""] = 1e-3) -> Int[Array, "*batch"]:
    """Number of eigenvalues of `Σ` above `rtol · λ_max(Σ)` (0 for `Σ = 0`).

    **Arguments:** `cov`: `(*batch, d, d)` symmetric PSD; `rtol`: relative threshold in `(0, 1)`.

    **Returns:** `(*batch,)` int32.

    **Raises:** :class:`~hassejax.errors.ParameterError` for a bad shape or `rtol <= 0`.
    """
    _check_threshold(rtol, "rtol")
    return _rank_rel(_eigvals_desc(_check_cov(cov)), rtol)


def rank_absolute(cov: Float[ArrayLike, "*batch d d"], threshold: Real[ArrayLike, ""] = 0.1) -> Int[Array, "*batch"]:
    """Number of eigenvalues of `Σ` above an absolute `threshold` (0.1: the paper's rule, spec §7 item 7).

    **Arguments:** `cov`: `(*batch, d, d)`; `threshold >= 0`.

    **Returns:** `(*batch,)` int32.

    **Raises:** :class:`~hassejax.errors.ParameterError` for a bad shape or a negative threshold.
    """
    _check_threshold(threshold, "threshold", allow_zero=True)
    return _rank_abs(_eigvals_desc(_check_cov(cov)), threshold)


def limit_rank(cov: Float[ArrayLike, "*batch d d"], rtol: Real[ArrayLike, ""] = 1e-6) -> Int[Array, "*batch"]:
    """Exact limit rank: eigenvalues above `1e-6 · λ_max` of `Σ` after a long horizon (spec §7a).

    Convergence is like `1/t`, so a vanishing direction has relative size about
    `1/(λ t)`: pass the final covariance of a solve over a horizon long enough for it to
    fall below `rtol` (e.g. `t1 = 1e8` for order-one rates; adaptive steps make that
    cheap), or use :func:`~hassejax.dynamics.clustering_limit` when `V = vI`.

    **Arguments:** `cov`: `(*batch, d, d)`; `rtol`: relative threshold (default `1e-6`).

    **Returns:** `(*batch,)` int32.

    **Raises:** as :func:`rank_relative`.
    """
    return rank_relative(cov, rtol)


def spectrum(
    solution: GaussianSolution | ParticleSolution,
    *,
    rel_threshold: Real[ArrayLike, ""] = 1e-3,
    abs_threshold: Real[ArrayLike, ""] = 0.1,
) -> Spectrum:
    """Eigenvalues and both ranks of `Σ(t)` at the saved times of a solve.

    For particles `Σ(t)` is the empirical covariance (:func:`empirical_covariance`).
    Saved points after the stop (`valid = False`) repeat the final state, as in the solution.

    **Arguments:**

    - `solution`: a :class:`~hassejax.dynamics.GaussianSolution` or
      :class:`~hassejax.dynamics.ParticleSolution` (any batch axes).
    - `rel_threshold`: relative rank threshold (fraction of `λ_max`).
    - `abs_threshold`: absolute rank threshold (0.1: the paper's rule).

    **Returns:** a :class:`Spectrum`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for another type or bad thresholds.
    """
    _check_threshold(rel_threshold, "rel_threshold")
    _check_threshold(abs_threshold, "abs_threshold", allow_zero=True)
    cov = _trajectory_cov(solution)
    eig = _eigvals_desc(cov)
    return Spectrum(
        ts=solution.ts,
        valid=solution.valid,
        eigenvalues=eig,
        rank_relative=_rank_rel(eig, rel_threshold),
        rank_absolute=_rank_abs(eig, abs_threshold),
    )


def _trajectory_cov(solution):
    if isinstance(solution, GaussianSolution):
        return solution.cov
    if isinstance(solution, ParticleSolution):
        return empirical_covariance(solution.xs)
    raise ParameterError(
        f"`solution` must be a GaussianSolution or ParticleSolution; got {type(solution).__name__}."
    )


def _final_cov(solution):
    if isinstance(solution, GaussianSolution):
        return solution.cov_final
    if isinstance(solution, ParticleSolution):
        return empirical_covariance(solution.x_final)
    raise ParameterError(
        f"`solution` must be a GaussianSolution or ParticleSolution; got {type(solution).__name__}."
    )


# --------------------------------------------------------------------------- growth law
def _exprel(z):
    """`(e^z − 1)/z`, equal to 1 at `z = 0`."""
    small = jnp.abs(z) < 1e-6
    return jnp.where(small, 1.0 + 0.5 * z, jnp.expm1(jnp.where(small, 1.0, z)) / jnp.where(small, 1.0, z))


def _growth_fit_1(ts, lam, valid):
    """One trajectory: fit `λ' = kλ^p` through the last three valid samples (see :func:`growth_law`)."""
    dtype = lam.dtype
    ok_pt = valid & jnp.isfinite(lam) & jnp.isfinite(ts) & (lam > 0)
    count = jnp.cumsum(ok_pt)
    total = count[-1]
    idx = jnp.arange(ts.shape[0])

    def nth(k):  # index of the k-th usable sample (1-based), 0 if absent
        hit = ok_pt & (count == k)
        return jnp.max(jnp.where(hit, idx, 0))

    i0, i1, i2 = nth(total - 2), nth(total - 1), nth(total)
    t0, t1, t2 = ts[i0], ts[i1], ts[i2]
    l0, l1, l2 = lam[i0], lam[i1], lam[i2]
    ok = (total >= 3) & (t0 < t1) & (t1 < t2) & (l0 < l1) & (l1 < l2)
    # Scale-free: r_i = u_i / u_0 = λ_0 / λ_i in (0, 1]; log r_0 = 0.
    g1 = jnp.where(ok, jnp.log(l0 / l1), -1.0)
    g2 = jnp.where(ok, jnp.log(l0 / l2), -2.0)
    d1 = jnp.where(ok, t1 - t0, 1.0)
    d2 = jnp.where(ok, t2 - t1, 1.0)

    def box_cox(q, g):  # (r^q − 1)/q = g · exprel(q g), g = log r; → log r at q = 0
        return g * _exprel(q * g)

    def mismatch(q):  # slope on [t0, t1] minus slope on [t1, t2]; decreasing through the root
        h1, h2 = box_cox(q, g1), box_cox(q, g2)
        return h1 / d1 - (h2 - h1) / d2

    lo, hi = jnp.asarray(-1.0, dtype), jnp.asarray(3.0, dtype)  # p = 1 + q in [0, 4]

    def body(_, bounds):
        a, b = bounds
        mid = 0.5 * (a + b)
        up = mismatch(mid) > 0
        return jnp.where(up, mid, a), jnp.where(up, b, mid)

    a, b = jax.lax.fori_loop(0, 60, body, (lo, hi))
    q = 0.5 * (a + b)
    p = 1.0 + q
    # Zero of u^q (affine in t) beyond t2, for q > 0: t* = t2 + w2 (t2 − t1)/(w1 − w2), w = r^q.
    w1, w2 = jnp.exp(q * g1), jnp.exp(q * g2)
    denom = jnp.where(w1 > w2, w1 - w2, 1.0)
    t_star = jnp.where(ok & (q > 1e-8) & (w1 > w2), t2 + w2 * d2 / denom, jnp.inf)
    p = jnp.where(ok, p, 0.0)
    return p.astype(dtype), t_star.astype(dtype), ok, ok & (p > BLOWUP_EXPONENT)


def growth_law(
    ts: Float[ArrayLike, "*batch T"],
    lam: Float[ArrayLike, "*batch T"],
    valid: Bool[ArrayLike, "*batch T"] | None = None,
) -> GrowthFit:
    """Blow-up or divergence from samples of a growing size `λ(t)` (e.g. `λ_max(Σ(t))`, spec §4).

    Fits the growth law `λ' = kλ^p` through the last three valid samples `(t_i, λ_i)`:
    along it `u^q`, `u = 1/λ`, `q = p − 1`, is affine in `t` (`log u` when `q = 0`), so `q`
    is the root of "the Box–Cox transform `(r^q − 1)/q` of `r_i = λ_0/λ_i` has equal
    slopes on `[t_0, t_1]` and `[t_1, t_2]`", found by bisection on `p ∈ [0, 4]` (60 steps;
    the mismatch is monotone in `q` because the transforms are ordered by convexity).
    Exact on three samples of either model: `λ = c/(t* − t)` gives `p = 2` (`1/λ` falls
    linearly to zero at `t*`: finite-time blow-up) and `λ = ce^{rt}` gives `p = 1`
    (`1/λ` decays exponentially, never reaching zero: divergence); `λ ∝ (t* − t)^{−k}` gives
    `p = 1 + 1/k`. Verdict: blow-up iff `p > 1.5` (the solvers' rule for their event
    exponent). With samples close to the escape (the last one at a size threshold) the
    verdict is robust to coarse sampling; a transient not yet in its asymptotic regime
    (e.g. L2 attention below its saturation) can look like a blow-up, so use a
    threshold well above the initial size (derived).

    **Arguments:**

    - `ts`: `(*batch, T)` sample times, increasing over the valid samples.
    - `lam`: `(*batch, T)` sizes `λ(t) > 0`.
    - `valid`: `(*batch, T)` which samples to use (default: all finite ones).

    **Returns:** a :class:`GrowthFit` `(exponent, t_star, ok, blow_up)`; `t_star` is the
    zero of `1/λ` extrapolated along the fitted law (finite for `p > 1`).

    **Raises:** :class:`~hassejax.errors.ParameterError` for mismatched shapes.
    """
    ts, lam = jnp.asarray(ts), jnp.asarray(lam)
    if ts.shape != lam.shape or ts.ndim < 1:
        raise ParameterError(f"`ts` and `lam` must have the same shape (..., T); got {ts.shape} and {lam.shape}.")
    valid = jnp.ones(ts.shape, bool) if valid is None else jnp.asarray(valid)
    if valid.shape != ts.shape:
        raise ParameterError(f"`valid` must have the shape of `ts`, {ts.shape}; got {valid.shape}.")
    dtype = jnp.result_type(ts, lam, float)
    return _growth_law(ts.astype(dtype), lam.astype(dtype), valid)


@jax.jit
def _growth_law(ts, lam, valid):
    fit = jnp.vectorize(_growth_fit_1, signature="(t),(t),(t)->(),(),(),()")
    p, t_star, ok, blow = fit(ts, lam, valid)
    return GrowthFit(exponent=p, t_star=t_star, ok=ok, blow_up=blow)


# --------------------------------------------------------------------------- outcomes
def _spectral_outcome(eig, rank_rule, rel_threshold, abs_threshold, collapse_threshold):
    d = eig.shape[-1]
    r_rel = _rank_rel(eig, rel_threshold)
    r_abs = _rank_abs(eig, abs_threshold)
    rank = r_abs if rank_rule == "absolute" else r_rel
    collapsed = eig[..., 0] <= collapse_threshold
    outcome = jnp.where(
        collapsed, Outcome.collapse, jnp.where((rank > 0) & (rank < d), Outcome.low_rank, Outcome.bounded)
    )
    # Under the relative rule a non-collapsed Σ has rank >= 1; under the absolute rule,
    # rank 0 means λ_max <= abs_threshold: collapse whenever collapse_threshold >= abs_threshold.
    outcome = jnp.where(~collapsed & (rank == 0), Outcome.collapse, outcome)
    return outcome.astype(jnp.int32), rank, r_rel, r_abs


def classify(
    solution: GaussianSolution | ParticleSolution,
    *,
    rank_rule: Literal["absolute", "relative"] = "absolute",
    rel_threshold: Real[ArrayLike, ""] = 1e-3,
    abs_threshold: Real[ArrayLike, ""] = 0.1,
    collapse_threshold: Real[ArrayLike, ""] | None = None,
) -> Diagnosis:
    """Outcome of a solve: blow-up, divergence, collapse, low rank or bounded (spec dynamics.md §4).

    Decision, per batch member:

    1. status `blow_up` / `diverge` (the size event fired): that outcome, with the solver's
       `t_blowup` and event exponent (:attr:`GrowthTest.event_exponent`);
    2. status `max_steps_reached`, `dt_min_reached` or `non_finite`: `undetermined` (the
       status says why; no classification of a truncated trajectory);
    3. otherwise (`completed`, `converged`), from the eigenvalues of the final `Σ` (empirical
       covariance for particles): `collapse` if `λ_max <= collapse_threshold`, else
       `low_rank(r)` for `0 < r < d`, else `bounded`, where `r` counts eigenvalues above
       `abs_threshold` (``rank_rule="absolute"``, the paper's rule) or above
       `rel_threshold · λ_max` (``"relative"``). A rank read at a finite time reflects the
       `1/t` convergence; see :func:`limit_rank`.

    Escapes are only detected by the solve's size event: a trajectory still growing at
    `t1` without reaching the threshold is classified from its final spectrum (use a
    longer `t1`, or :func:`classify_trajectory` with an escape ratio).

    **Arguments:**

    - `solution`: :class:`~hassejax.dynamics.GaussianSolution` or
      :class:`~hassejax.dynamics.ParticleSolution`, any batch axes.
    - `rank_rule`: ``"absolute"`` (default) or ``"relative"``; static.
    - `rel_threshold`: relative rank threshold (default `1e-3`).
    - `abs_threshold`: absolute rank threshold (default 0.1).
    - `collapse_threshold`: `λ_max` at or below which `Σ` has collapsed (default
      `abs_threshold`, so that under the paper's rule "rank 0" is collapse).

    **Returns:** a :class:`Diagnosis`; render with :func:`outcome_names`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for another solution type, an
    unknown `rank_rule` or bad thresholds.
    """
    _check_rule(rank_rule)
    _check_threshold(rel_threshold, "rel_threshold")
    _check_threshold(abs_threshold, "abs_threshold", allow_zero=True)
    if collapse_threshold is None:
        collapse_threshold = abs_threshold
    _check_threshold(collapse_threshold, "collapse_threshold", allow_zero=True)
    return _classify(solution, _final_cov(solution), rank_rule, rel_threshold, abs_threshold, collapse_threshold)


@functools.partial(jax.jit, static_argnums=(2,))
def _classify(solution, cov_final, rank_rule, rel_threshold, abs_threshold, collapse_threshold):
    eig = _eigvals_desc(cov_final)
    outcome, rank, r_rel, r_abs = _spectral_outcome(eig, rank_rule, rel_threshold, abs_threshold, collapse_threshold)
    status = solution.status
    escaped = (status == Status.blow_up) | (status == Status.diverge)
    failed = (status == Status.max_steps_reached) | (status == Status.dt_min_reached) | (status == Status.non_finite)
    outcome = jnp.where(
        status == Status.blow_up,
        Outcome.blow_up,
        jnp.where(status == Status.diverge, Outcome.diverge, jnp.where(failed, Outcome.undetermined, outcome)),
    ).astype(jnp.int32)
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
        growth_test=jnp.where(escaped, GrowthTest.event_exponent, GrowthTest.none).astype(jnp.int32),
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
       value at the first: :func:`growth_law` on `λ_max(t)` decides `blow_up` (with the
       extrapolated `t*`) or `diverge` (:attr:`GrowthTest.sample_fit`); with fewer than
       three growing samples the outcome is `undetermined` (:attr:`GrowthTest.insufficient`);
    3. otherwise the final spectrum decides, as in :func:`classify`.

    The `status` field is `non_finite` in case 1, `blow_up` / `diverge` in case 2 (when
    decided), else `completed`.

    **Arguments:**

    - `ts`: `(*batch, T)` times; `cov`: `(*batch, T, d, d)` covariances.
    - `valid`: `(*batch, T)` usable samples (default all).
    - `escape_ratio`: growth of `λ_max` that counts as an escape (default `1e6`).
    - `rank_rule`, `rel_threshold`, `abs_threshold`, `collapse_threshold`: as in :func:`classify`.

    **Returns:** a :class:`Diagnosis`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for mismatched shapes, an unknown
    `rank_rule` or bad thresholds.
    """
    _check_rule(rank_rule)
    _check_threshold(escape_ratio, "escape_ratio")
    _check_threshold(rel_threshold, "rel_threshold")
    _check_threshold(abs_threshold, "abs_threshold", allow_zero=True)
    if collapse_threshold is None:
        collapse_threshold = abs_threshold
    _check_threshold(collapse_threshold, "collapse_threshold", allow_zero=True)
    cov = _check_cov(cov)
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
    eig_t = _eigvals_desc(jnp.where(usable[..., None, None], cov, 0.0))
    lam = eig_t[..., 0]
    T = ts.shape[-1]
    first = jnp.argmax(usable, axis=-1)
    last = T - 1 - jnp.argmax(jnp.flip(usable, axis=-1), axis=-1)
    has_any = jnp.any(usable, axis=-1)
    take = lambda a, i: jnp.take_along_axis(a, i[..., None], axis=-1)[..., 0]  # noqa: E731
    lam_first, lam_last = take(lam, first), take(lam, last)
    escaped = has_any & (lam_first > 0) & (lam_last >= escape_ratio * lam_first)
    fit = _growth_law(ts, lam, usable)

    eig_final = jnp.take_along_axis(eig_t, last[..., None, None], axis=-2)[..., 0, :]
    outcome, rank, r_rel, r_abs = _spectral_outcome(eig_final, rank_rule, rel_threshold, abs_threshold, collapse_threshold)
    escape_outcome = jnp.where(fit.ok, jnp.where(fit.blow_up, Outcome.blow_up, Outcome.diverge), Outcome.undetermined)
    outcome = jnp.where(
        any_bad | ~has_any, Outcome.undetermined, jnp.where(escaped, escape_outcome, outcome)
    ).astype(jnp.int32)
    status = jnp.where(
        any_bad,
        Status.non_finite,
        jnp.where(escaped & fit.ok, jnp.where(fit.blow_up, Status.blow_up, Status.diverge), Status.completed),
    ).astype(jnp.int32)
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


def outcome_names(diagnosis: Diagnosis, *, digits: int = 6) -> np.ndarray:
    """Host-side rendering of a :class:`Diagnosis` as names (dtype object, shape `*batch`).

    ``"bounded"``, ``"low_rank(1)"``, ``"collapse"``, ``"diverge"``, ``"blow_up(t*=0.702341)"``,
    ``"undetermined(max_steps_reached)"`` (the solve status in brackets).

    **Arguments:** `diagnosis`: from :func:`classify` or :func:`classify_trajectory`;
    `digits`: significant digits of `t*`.

    **Returns:** a NumPy array of strings.
    """
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


# --------------------------------------------------------------------------- clusters
def cluster_count(
    x: Float[ArrayLike, "*batch n d"], threshold: Real[ArrayLike, ""] = 0.9999
) -> Int[Array, "*batch"]:
    """Number of clusters of tokens: rank of the thresholded Gram matrix (GLPR, arXiv:2312.10794).

    `T_ij = 1{⟨x_i, x_j⟩ / (‖x_i‖‖x_j‖) > threshold}` and the count is `rank T`
    (``eigvalsh`` of the symmetric 0/1 matrix, tolerance `n · eps · max|eigenvalue|`, as
    ``matrix_rank``). For tokens on the unit sphere (``solve_particles(..., sphere=True)``)
    this is exactly the count in the figures of Geshkovski, Letrouit, Polyanskiy and
    Rigollet (their code: Gram matrix of the tokens thresholded at 0.9999,
    ``torch.linalg.matrix_rank``). In `R^d` the tokens are normalised first, so it counts
    clusters of *directions* (tokens escaping along a few rays count one cluster per ray).
    When the relation "similar" is transitive (well-separated clusters) `T` is, up to
    permutation, block diagonal with all-ones blocks, and its rank is the number of
    clusters. A zero token has no direction and joins no cluster.

    **Arguments:**

    - `x`: `(*batch, n, d)` tokens.
    - `threshold`: cosine-similarity threshold `1 − δ` in `(−1, 1)` (default 0.9999).

    **Returns:** `(*batch,)` int32 cluster counts.

    **Raises:** :class:`~hassejax.errors.ParameterError` if `x` is not `(..., n, d)` with
    `n >= 1`, or `threshold` is not in `(−1, 1)`.
    """
    shape = tuple(getattr(x, "shape", ()))
    if len(shape) < 2 or shape[-2] == 0:
        raise ParameterError(f"`x` must have shape (..., n, d) with n >= 1 tokens; got shape {shape}.")
    if not isinstance(threshold, jax.core.Tracer):
        th = np.asarray(threshold)
        if th.shape != () or not (-1.0 < float(th) < 1.0):
            raise ParameterError(f"`threshold` must be a cosine similarity in (-1, 1); got {threshold!r}.")
    return _cluster_count(jnp.asarray(x), threshold)


@jax.jit
def _cluster_count(x, threshold):
    norms = jnp.linalg.norm(x, axis=-1, keepdims=True)
    unit = x / jnp.where(norms > 0, norms, 1.0)
    gram = jnp.einsum("...id,...jd->...ij", unit, unit)
    t = (gram > threshold).astype(jnp.float32)
    w = jnp.abs(jnp.linalg.eigvalsh(t))
    n = x.shape[-2]
    tol = jnp.max(w, axis=-1, keepdims=True) * n * jnp.finfo(jnp.float32).eps
    return jnp.sum(w > tol, axis=-1).astype(jnp.int32)
