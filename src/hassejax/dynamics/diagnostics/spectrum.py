"""How many directions does `Σ` keep? Eigenvalues and ranks of a covariance (spec dynamics.md §4, §7).

The rank counts eigenvalues above a threshold relative to the largest one
(:func:`rank_relative`), or above an absolute threshold (:func:`rank_absolute`, 0.1 by
default: the rule of the paper's rank histograms, spec §7 item 7). Convergence is like
`1/t`, so a rank read at a finite time depends on the horizon; the *exact limit rank* is the
relative count with `1e-6 · λ_max` after a long horizon (:func:`limit_rank`, spec §7a), or
the closed form (:func:`~hassejax.dynamics.clustering_limit`,
:func:`~hassejax.dynamics.diagnostics.kernel_limit`).
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Bool, Float, Int, Real

from ..result import GaussianSolution, ParticleSolution
from ._common import check_cov, check_threshold, check_tokens, eigvals_desc, empirical_cov, rank_abs, rank_rel
from ._common import trajectory_cov as _trajectory_cov

__all__ = [
    "Spectrum",
    "covariance_eigenvalues",
    "empirical_covariance",
    "rank_relative",
    "rank_absolute",
    "limit_rank",
    "spectrum",
]


class Spectrum(eqx.Module):
    """Eigenvalues and ranks of `Σ(t)` at the saved times (see :func:`spectrum`).

    - `ts`: `(*batch, T)` save times; `valid`: `(*batch, T)` as in the solution.
    - `eigenvalues`: `(*batch, T, d)` in decreasing order.
    - `rank_relative`: `(*batch, T)` eigenvalues `> rel_threshold · λ_max`.
    - `rank_absolute`: `(*batch, T)` eigenvalues `> abs_threshold`.

    Source: spec dynamics.md §4 (`low_rank(r)`: eigenvalues above a relative and, separately, an absolute threshold)
    and §7a item 7 (rank = number of eigenvalues > 0.1).

    **Example:** from :func:`spectrum`; `V = 0` keeps `Σ = diag(2, 0.01)` fixed:

    ```python
    >>> import jax
    >>> jax.config.update("jax_enable_x64", True)  # float64: the default rtol = atol = 1e-8
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Softmax, solve_gaussian
    >>> from hassejax.dynamics.diagnostics import spectrum
    >>> model = Softmax(V=jnp.zeros((2, 2)), A=jnp.eye(2))
    >>> sol = solve_gaussian(model, jnp.zeros(2), jnp.diag(jnp.array([2.0, 0.01])), t1=1.0, ts=jnp.array([0.0, 1.0]))
    >>> s = spectrum(sol)
    >>> s.ts.tolist(), s.eigenvalues.round(6).tolist()
    ([0.0, 1.0], [[2.0, 0.01], [2.0, 0.01]])

    ```
    """

    ts: Float[Array, "*batch T"]
    valid: Bool[Array, "*batch T"]
    eigenvalues: Float[Array, "*batch T d"]
    rank_relative: Int[Array, "*batch T"]
    rank_absolute: Int[Array, "*batch T"]


def covariance_eigenvalues(cov: Float[ArrayLike, "*batch d d"]) -> Float[Array, "*batch d"]:
    """Eigenvalues of a symmetric `Σ` (symmetrised first), in decreasing order.

    **Arguments:** `cov`: `(*batch, d, d)` float.

    **Returns:** `(*batch, d)`, `λ_1 >= … >= λ_d`.

    **Raises:** :class:`~hassejax.errors.ParameterError` if `cov` is not `(..., d, d)` with `d >= 1`.

    Source: (derived).

    **Example:**

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics.diagnostics import covariance_eigenvalues
    >>> covariance_eigenvalues(jnp.array([[1.0, 0.0], [0.0, 3.0]])).tolist()
    [3.0, 1.0]

    ```
    """
    return eigvals_desc(check_cov(cov))


def empirical_covariance(x: Float[ArrayLike, "*batch n d"]) -> Float[Array, "*batch d d"]:
    """Covariance of the empirical measure `μ = (1/n) Σ_i δ_{x_i}` (normalised by `n`, not `n − 1`).

    **Arguments:** `x`: `(*batch, n, d)` float tokens.

    **Returns:** `(*batch, d, d)` `(1/n) Σ_i (x_i − x̄)(x_i − x̄)ᵀ`.

    **Raises:** :class:`~hassejax.errors.ParameterError` if `x` is not `(..., n, d)` with `n >= 1`.

    Source: spec dynamics.md §1 (the empirical measure of the tokens).

    **Example:**

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics.diagnostics import empirical_covariance
    >>> empirical_covariance(jnp.array([[1.0, 0.0], [-1.0, 0.0]])).tolist()
    [[1.0, 0.0], [0.0, 0.0]]

    ```
    """
    check_tokens(x)
    return empirical_cov(jnp.asarray(x))


def rank_relative(cov: Float[ArrayLike, "*batch d d"], rtol: Real[ArrayLike, ""] = 1e-3) -> Int[Array, "*batch"]:
    """Number of eigenvalues of `Σ` above `rtol · λ_max(Σ)` (0 for `Σ = 0`).

    **Arguments:** `cov`: `(*batch, d, d)` symmetric PSD; `rtol`: relative threshold `> 0`.

    **Returns:** `(*batch,)` int32.

    **Raises:** :class:`~hassejax.errors.ParameterError` for a bad shape or `rtol <= 0`.

    Source: spec dynamics.md §4.

    **Example:**

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics.diagnostics import rank_relative
    >>> rank_relative(jnp.diag(jnp.array([1.0, 1e-2, 1e-5]))).item()
    2

    ```
    """
    check_threshold(rtol, "rtol")
    return rank_rel(eigvals_desc(check_cov(cov)), rtol)


def rank_absolute(cov: Float[ArrayLike, "*batch d d"], threshold: Real[ArrayLike, ""] = 0.1) -> Int[Array, "*batch"]:
    """Number of eigenvalues of `Σ` above an absolute `threshold` (0.1: the paper's rule).

    **Arguments:** `cov`: `(*batch, d, d)`; `threshold >= 0`.

    **Returns:** `(*batch,)` int32.

    **Raises:** :class:`~hassejax.errors.ParameterError` for a bad shape or a negative threshold.

    Source: spec dynamics.md §7 item 7 (the paper's rank histograms count eigenvalues above 0.1).

    **Example:**

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics.diagnostics import rank_absolute
    >>> rank_absolute(jnp.diag(jnp.array([5.0, 0.2, 0.05]))).item()
    2

    ```
    """
    check_threshold(threshold, "threshold", allow_zero=True)
    return rank_abs(eigvals_desc(check_cov(cov)), threshold)


def limit_rank(cov: Float[ArrayLike, "*batch d d"], rtol: Real[ArrayLike, ""] = 1e-6) -> Int[Array, "*batch"]:
    """Exact limit rank: eigenvalues above `1e-6 · λ_max` of `Σ` after a long horizon (spec §7a).

    Convergence is like `1/t`, so a vanishing direction has relative size about
    `1/(λ t)`: pass the final covariance of a solve over a horizon long enough for it to
    fall below `rtol` (e.g. `t1 = 1e8` for order-one rates; adaptive steps make that
    cheap), or a closed-form limit (:func:`~hassejax.dynamics.clustering_limit` when
    `V = vI`, :func:`~hassejax.dynamics.diagnostics.kernel_limit`).

    **Arguments:** `cov`: `(*batch, d, d)`; `rtol`: relative threshold (default `1e-6`).

    **Returns:** `(*batch,)` int32.

    **Raises:** as :func:`rank_relative`.

    Source: spec dynamics.md §7a.

    **Example:** a direction at `1e-8 · λ_max` has vanished, one at `1e-5` has not:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics.diagnostics import limit_rank
    >>> sigma = jnp.diag(jnp.array([1.0, 1e-5, 1e-8]))
    >>> limit_rank(sigma).item(), limit_rank(sigma, rtol=1e-4).item()
    (2, 1)

    ```
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

    Source: spec dynamics.md §4.

    **Example:** `V = 0` keeps `Σ` fixed:

    ```python
    >>> import jax
    >>> jax.config.update("jax_enable_x64", True)  # float64: the default rtol = atol = 1e-8
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Softmax, solve_gaussian
    >>> from hassejax.dynamics.diagnostics import spectrum
    >>> model = Softmax(V=jnp.zeros((2, 2)), A=jnp.eye(2))
    >>> sol = solve_gaussian(model, jnp.zeros(2), jnp.diag(jnp.array([2.0, 0.01])), t1=1.0, ts=jnp.array([0.0, 1.0]))
    >>> s = spectrum(sol)
    >>> s.rank_absolute.tolist(), s.rank_relative.tolist()
    ([1, 1], [2, 2])

    ```
    """
    check_threshold(rel_threshold, "rel_threshold")
    check_threshold(abs_threshold, "abs_threshold", allow_zero=True)
    eig = eigvals_desc(_trajectory_cov(solution))
    return Spectrum(
        ts=solution.ts,
        valid=solution.valid,
        eigenvalues=eig,
        rank_relative=rank_rel(eig, rel_threshold),
        rank_absolute=rank_abs(eig, abs_threshold),
    )
