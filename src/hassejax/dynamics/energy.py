"""Interaction energies along trajectories (spec dynamics.md §6).

Three functionals, each a pure jittable function that broadcasts over leading axes
(so a whole trajectory `(T, n, d)` or a sweep `(B, T, d, d)` goes in at once):

- :func:`interaction_energy`: the particle energy `E_n = (1/2n²) Σ_ij exp(x_iᵀ A x_j)`
  (the twisted softmax energy of the empirical measure).
- :func:`gaussian_interaction_energy`: the same energy `E(μ) = ½ ∬ exp(xᵀAy) dμ dμ` of
  a Gaussian `μ = N(α, Σ)` in closed form, finite iff `‖Σ^{1/2} A Σ^{1/2}‖₂ < 1`.
- :func:`gaussian_sinkhorn_energy`: `F = ½ OT_ε(μ, μ)` for a Gaussian, the functional of
  which Sinkhorn attention with `V = A = Aᵀ` is the Bures–Wasserstein gradient flow.

Softmax attention with `A` symmetric and `V = −A` is the gradient flow of `E` for a
twisted Wasserstein metric whose kinetic energy is weighted by
`Z_μ(x) = ∫ exp(xᵀAy) dμ(y)`, so `E_n` decreases along the particle flow and `E`
along the Gaussian moment ODE (derived; the paper's statements are formal). All
formulas here are (derived) in the sense of spec dynamics.md: obtained by Gaussian
integration and checked against Monte Carlo and discretised Sinkhorn in the tests.

References: V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, "A Unified Perspective on
the Dynamics of Deep Transformers", arXiv:2501.18322 (2025), the gradient-flow section.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Bool, Float, Real

from .._tracing import is_traced
from ..errors import ParameterError
from ._linalg import below_psd, psd_sqrt, refuse_indefinite, symmetrize

__all__ = [
    "interaction_energy",
    "GaussianEnergy",
    "gaussian_interaction_energy",
    "gaussian_sinkhorn_energy",
]


# --------------------------------------------------------------------------- checks
def _check_square(a, name: str, d: int | None = None) -> None:
    shape = tuple(getattr(a, "shape", ()))
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ParameterError(f"`{name}` must be a square matrix of shape (d, d); got shape {shape}.")
    if d is not None and shape[0] != d:
        raise ParameterError(
            f"`{name}` must have shape ({d}, {d}) to match the token dimension d = {d}; got shape {shape}."
        )


def _check_gaussian(mean, cov) -> int:
    ms, cs = tuple(getattr(mean, "shape", ())), tuple(getattr(cov, "shape", ()))
    if len(ms) < 1:
        raise ParameterError(f"`mean` must have shape (..., d); got shape {ms}.")
    d = ms[-1]
    if len(cs) < 2 or cs[-2:] != (d, d) or cs[:-2] != ms[:-1]:
        raise ParameterError(
            f"`cov` must have shape {ms[:-1] + (d, d)} to match `mean` of shape {ms} "
            f"(same leading axes, then (d, d)); got shape {cs}."
        )
    return d


# --------------------------------------------------------------------------- particles
def interaction_energy(x: Float[ArrayLike, "*batch n d"], A: Float[ArrayLike, "d d"]) -> Float[Array, "*batch"]:
    """Particle interaction energy `E_n = (1/2n²) Σ_ij exp(x_iᵀ A x_j)` (spec dynamics.md §6).

    The energy of the empirical measure `μ = (1/n) Σ_j δ_{x_j}` (the diagonal `i = j` is
    included) for the twisted softmax gradient flow: with `A` symmetric and `V = −A`,
    softmax attention `ẋ_i = V Σ_j softmax_j(x_jᵀ A x_i) x_j` decreases `E_n` (derived).
    An inverse temperature `β` is absorbed into `A` (pass `β A`).

    Computed as `exp(logsumexp(x A xᵀ) − log 2n²)`, so large logits give `inf` (the true
    value overflowing), never NaN.

    **Arguments:**

    - `x`: `(*batch, n, d)` token positions (rows are tokens).
    - `A`: `(d, d)` the interaction matrix `A = Kᵀ Q` (logit of query `x` against key
      `y` is `yᵀ A x`; the double sum is symmetric, so `A` and `Aᵀ` give the same energy).

    **Returns:** `(*batch,)` the energy, positive (or `inf` on overflow).

    **Raises:** :class:`~hassejax.errors.ParameterError` if `x` has rank < 2 or `A` is
    not `(d, d)`.

    **Example:** two tokens `±1` on the line with `A = 1`: `E_2 = (2e + 2e⁻¹)/8 = cosh(1)/2`:

    ```python
    >>> import math
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import interaction_energy
    >>> round(float(interaction_energy(jnp.array([[1.0], [-1.0]]), jnp.array([[1.0]]))), 6), round(math.cosh(1.0) / 2, 6)
    (0.77154, 0.77154)

    ```
    """
    xs = tuple(getattr(x, "shape", ()))
    if len(xs) < 2 or xs[-2] == 0:
        raise ParameterError(f"`x` must have shape (..., n, d) with n >= 1 tokens; got shape {xs}.")
    _check_square(A, "A", xs[-1])
    dtype = jnp.result_type(x, A, jnp.float32)
    return _interaction_energy(jnp.asarray(x, dtype), jnp.asarray(A, dtype))


@jax.jit
def _interaction_energy(x, A):
    n = x.shape[-2]
    logits = jnp.einsum("...id,de,...je->...ij", x, A, x)
    lse = jax.scipy.special.logsumexp(logits, axis=(-2, -1))
    return jnp.exp(lse - jnp.log(2.0 * n * n).astype(lse.dtype))


# --------------------------------------------------------------------------- Gaussians
class GaussianEnergy(NamedTuple):
    """Value of a Gaussian energy and whether it is finite.

    - `value`: `(*batch,)` the energy; `inf` exactly where `finite` is False (never NaN).
    - `finite`: `(*batch,)` bool, the finiteness condition of the closed form.

    Source: spec dynamics.md §6 (the Gaussian closed form of `E`, finite iff `‖Σ^{1/2}AΣ^{1/2}‖ < 1`; derived), for
    the gradient-flow structure of Castin, Ablin, Carrillo, Peyré, arXiv:2501.18322.

    **Example:** from :func:`gaussian_interaction_energy` with `α = 0`, `A = I`: `Σ = I/2` gives
    `½ det(I − Σ²)^{-1/2} = 2/3`; `Σ = 2I` has `‖Σ^{1/2} A Σ^{1/2}‖₂ = 2 ≥ 1`, an infinite energy:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import gaussian_interaction_energy
    >>> e = gaussian_interaction_energy(jnp.zeros(2), jnp.eye(2) / 2, jnp.eye(2))
    >>> float(e.value), bool(e.finite)  # doctest: +ELLIPSIS
    (0.666..., True)
    >>> e = gaussian_interaction_energy(jnp.zeros(2), 2 * jnp.eye(2), jnp.eye(2))
    >>> float(e.value), bool(e.finite)
    (inf, False)

    ```
    """

    value: Float[Array, "*batch"]
    finite: Bool[Array, "*batch"]


def gaussian_interaction_energy(
    mean: Float[ArrayLike, "*batch d"], cov: Float[ArrayLike, "*batch d d"], A: Float[ArrayLike, "d d"]
) -> GaussianEnergy:
    """Closed-form energy `E = ½ ∬ exp(xᵀAy) dμ(x) dμ(y)` of `μ = N(α, Σ)` (spec dynamics.md §6).

    With `M_q = AᵀΣA`, `b = Aᵀα`, `P = Σ⁻¹ − M_q` (derived, Gaussian integration first
    over `x`, then over `y`):

        E = ½ det(I − Σ M_q)^{-1/2} exp(bᵀα + ½ αᵀM_qα + ½ (b + M_qα)ᵀ P⁻¹ (b + M_qα)),

    finite iff `‖B‖₂ < 1` with `B = Σ^{1/2} A Σ^{1/2}` (otherwise the integral diverges).
    It is evaluated without `Σ⁻¹`, so a singular (rank-deficient) `Σ` works:
    `det(I − ΣM_q) = det(I − BᵀB)` and `P⁻¹ = Σ^{1/2}(I − BᵀB)⁻¹Σ^{1/2}`. Special case
    `A = −I`: `E = ½ det(I − Σ²)^{-1/2} exp(−αᵀ(I + Σ)⁻¹α)`.

    **Arguments:**

    - `mean`: `(*batch, d)` the mean `α`.
    - `cov`: `(*batch, d, d)` the covariance `Σ`, symmetric PSD (symmetrised here).
    - `A`: `(d, d)` the interaction matrix (`β` absorbed: pass `β A`).

    **Returns:** a :class:`GaussianEnergy` `(value, finite)`; `value = inf` where
    `finite` is False, never NaN for a covariance (a traced `cov` that is none by the rule below: `value` NaN,
    `finite` False; its PSD part's energy before).

    **Raises:** :class:`~hassejax.errors.ParameterError` for mismatched shapes, or a concrete finite `cov` that is not
    positive semidefinite (the rule of the solvers' `cov0` check, on its symmetric part).

    **Example:** the special case `A = −I` at `α = (1, 0)`, `Σ = I/2`: `E = ½ (3/4)⁻¹ e^{−2/3}`:

    ```python
    >>> import math
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import gaussian_interaction_energy
    >>> e = gaussian_interaction_energy(jnp.array([1.0, 0.0]), jnp.eye(2) / 2, -jnp.eye(2))
    >>> round(float(e.value), 6), round(2 / 3 * math.exp(-2 / 3), 6), bool(e.finite)
    (0.342278, 0.342278, True)

    ```
    """
    d = _check_gaussian(mean, cov)
    _check_square(A, "A", d)
    refuse_indefinite(cov, "cov")
    dtype = jnp.result_type(mean, cov, A, jnp.float32)
    given = jnp.asarray(cov).dtype  # the round-off `cov` was given with (a float32 cov under a float64 mean)
    value, finite = _gaussian_interaction_energy(*(jnp.asarray(v, dtype) for v in (mean, cov, A)), given=given)
    return GaussianEnergy(value=value, finite=finite)


@partial(jax.jit, static_argnames="given")
def _gaussian_interaction_energy(mean, cov, A, given=None):
    d, dtype = mean.shape[-1], mean.dtype
    eye = jnp.eye(d, dtype=dtype)
    root, w_min = psd_sqrt(cov, with_min=True)
    indefinite = below_psd(symmetrize(cov), w_min, given)  # a traced `cov` that is no covariance (concrete: raised)
    B = root @ A @ root
    smax = jnp.linalg.svd(B, compute_uv=False)[..., 0]  # spectral norm ‖B‖₂
    finite = (smax < 1.0) & ~indefinite
    # I − BᵀB is positive definite where finite; elsewhere substitute I so nothing is NaN.
    K = eye - jnp.swapaxes(B, -1, -2) @ B
    K = jnp.where(finite[..., None, None], K, eye)
    chol = jnp.linalg.cholesky(K)
    logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
    Mq = jnp.swapaxes(A, -1, -2) @ cov @ A
    b = jnp.einsum("ji,...j->...i", A, mean)  # Aᵀα
    w = b + jnp.einsum("...ij,...j->...i", Mq, mean)
    z = jnp.einsum("...ij,...j->...i", root, w)  # Σ^{1/2} w
    sol = jax.scipy.linalg.cho_solve((chol, True), z[..., None])[..., 0]
    quad = jnp.sum(z * sol, axis=-1)
    expo = jnp.sum(b * mean, axis=-1) + 0.5 * jnp.einsum("...i,...ij,...j->...", mean, Mq, mean) + 0.5 * quad
    log_e = jnp.log(jnp.asarray(0.5, dtype)) - 0.5 * logdet + expo
    return jnp.where(indefinite, jnp.nan, jnp.where(finite, jnp.exp(log_e), jnp.inf)), finite


def gaussian_sinkhorn_energy(
    mean: Float[ArrayLike, "*batch d"],
    cov: Float[ArrayLike, "*batch d d"],
    A: Float[ArrayLike, "d d"],
    epsilon: Real[ArrayLike, ""] = 1.0,
) -> Float[Array, "*batch"]:
    """`F = ½ OT_ε(μ, μ)` for `μ = N(α, Σ)`, the Sinkhorn energy (spec dynamics.md §6).

    `OT_ε` is entropic optimal transport with cost `c(x, y) = −xᵀAy` and entropy weight
    `ε` (`min_π ∫ c dπ + ε KL(π | μ⊗μ)`, whose Gibbs kernel `exp(xᵀAy/ε)` is the
    Sinkhorn attention kernel). On a Gaussian (derived):

        OT_ε(μ, μ) = −αᵀAα − (ε/2) Σ_i [√(1 + 4λ_i) − 1 + log(2 / (1 + √(1 + 4λ_i)))],

    `λ_i` the eigenvalues of `BBᵀ`, `B = Σ^{1/2} A Σ^{1/2} / ε`. No inverse of `A` or `Σ` is
    needed, so singular `A` and rank-deficient `Σ` work. Sinkhorn attention with
    `V = A = Aᵀ` is the Bures–Wasserstein gradient flow of `F` (derived), so `F` does not
    increase along the Sinkhorn Gaussian ODE `α' = Vα`, `Σ' = VSΣ + ΣSᵀVᵀ`.

    **Arguments:**

    - `mean`: `(*batch, d)` the mean `α`.
    - `cov`: `(*batch, d, d)` the covariance `Σ`, symmetric PSD.
    - `A`: `(d, d)` the interaction matrix (unscaled, as in the paper's Sinkhorn figures).
    - `epsilon`: entropic regularisation `ε > 0` (default 1).

    **Returns:** `(*batch,)` the value of `F` (always finite for finite inputs that are a covariance; NaN for a traced
    `cov` that is none by the rule below, its PSD part's energy before).

    **Raises:** :class:`~hassejax.errors.ParameterError` for mismatched shapes, `ε <= 0`, or a concrete finite `cov`
    that is not positive semidefinite (the rule of the solvers' `cov0` check, on its symmetric part).

    **Example:** `d = 1`, `α = Σ = A = ε = 1`: `λ = 1`, `F = ½ (−1 − ½ (√5 − 1 + log(2/(1 + √5))))`:

    ```python
    >>> import math
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import gaussian_sinkhorn_energy
    >>> s5 = math.sqrt(5.0)
    >>> F = gaussian_sinkhorn_energy(jnp.ones(1), jnp.eye(1), jnp.eye(1))
    >>> round(float(F), 6), round(-0.5 - (s5 - 1 + math.log(2 / (1 + s5))) / 4, 6)
    (-0.688714, -0.688714)

    ```
    """
    d = _check_gaussian(mean, cov)
    _check_square(A, "A", d)
    if not is_traced(epsilon) and not float(epsilon) > 0.0:
        raise ParameterError(f"`epsilon` must be a positive number; got {epsilon!r}.")
    refuse_indefinite(cov, "cov")
    dtype = jnp.result_type(mean, cov, A, jnp.float32)
    given = jnp.asarray(cov).dtype  # the round-off `cov` was given with
    mean, cov, A = (jnp.asarray(v, dtype) for v in (mean, cov, A))
    return _gaussian_sinkhorn_energy(mean, cov, A, jnp.asarray(epsilon, dtype), given=given)


@partial(jax.jit, static_argnames="given")
def _gaussian_sinkhorn_energy(mean, cov, A, epsilon, given=None):
    root, w_min = psd_sqrt(cov, with_min=True)
    B = root @ A @ root / epsilon
    lam = jnp.clip(jnp.linalg.eigvalsh(B @ jnp.swapaxes(B, -1, -2)), 0.0, None)
    s = jnp.sqrt(1.0 + 4.0 * lam)
    entropic = jnp.sum(s - 1.0 + jnp.log(2.0 / (1.0 + s)), axis=-1)
    ot = -jnp.einsum("...i,ij,...j->...", mean, A, mean) - 0.5 * epsilon * entropic
    return jnp.where(
        below_psd(symmetrize(cov), w_min, given), jnp.nan, 0.5 * ot
    )  # a traced `cov` that is no covariance
