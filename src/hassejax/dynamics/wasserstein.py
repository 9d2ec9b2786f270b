"""Wasserstein-2 distances and geodesics: empirical measures and Gaussians (host-side NumPy/SciPy).

- :func:`empirical_w2`: `W2` between two uniform empirical measures with the same number of
  points, an assignment problem solved by :func:`scipy.optimize.linear_sum_assignment`.
- :func:`gaussian_w2`: the Bures–Wasserstein distance between two Gaussians (closed form).
- :func:`gaussian_geodesic`: the constant-speed `W2` geodesic between two Gaussians (closed form,
  McCann's displacement interpolation by the optimal affine map).

Used by the stability estimate and the convexity check of Castin, Ablin, Carrillo, Peyré,
"A Unified Perspective on the Dynamics of Deep Transformers", arXiv:2501.18322.
"""

from __future__ import annotations

import numpy as np
from jaxtyping import ArrayLike, Float, Int
from scipy.optimize import linear_sum_assignment

from ..errors import ParameterError

__all__ = ["empirical_w2", "gaussian_w2", "gaussian_geodesic"]


def _points(x, name: str) -> np.ndarray:
    x = np.asarray(x, float)
    if x.ndim != 2 or x.shape[0] < 1:
        raise ParameterError(f"`{name}` must have shape (n, d) with n >= 1 points; got shape {x.shape}.")
    if not np.all(np.isfinite(x)):
        raise ParameterError(f"`{name}` must be finite; got NaN/inf entries.")
    return x


def empirical_w2(x: Float[ArrayLike, "n d"], y: Float[ArrayLike, "n d"]) -> tuple[float, Int[np.ndarray, " n"]]:
    """`W2(μ, ν)` for `μ = (1/n) Σ_i δ_{x_i}`, `ν = (1/n) Σ_j δ_{y_j}` and an optimal assignment.

    Between two uniform empirical measures with the same number of points, an optimal plan is
    a permutation (Birkhoff–von Neumann), so `W2² = min_σ (1/n) Σ_i ‖x_i − y_{σ(i)}‖²`, solved
    exactly by :func:`scipy.optimize.linear_sum_assignment` on the squared-distance matrix.

    **Arguments:**

    - `x`: `(n, d)` float points of `μ` (rows are points).
    - `y`: `(n, d)` float points of `ν`, the same `n` and `d`.

    **Returns:** `(w2, sigma)`: the distance (float, `>= 0`) and an optimal assignment,
    `(n,)` int, `x_i ↦ y_{sigma[i]}`.

    **Raises:** :class:`~hassejax.errors.ParameterError` naming `x` or `y` for a shape that
    is not `(n, d)`, non-finite entries, or sizes that differ.

    Source: (derived) the standard reduction of discrete optimal transport with uniform
    weights to an assignment problem.

    **Example:** in 1-D the optimal assignment matches sorted points:

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.wasserstein import empirical_w2
    >>> w2, sigma = empirical_w2(np.array([[0.0], [1.0]]), np.array([[1.5], [0.5]]))
    >>> round(w2, 12), sigma.tolist()
    (0.5, [1, 0])

    ```
    """
    x, y = _points(x, "x"), _points(y, "y")
    if x.shape != y.shape:
        raise ParameterError(
            f"`x` and `y` must have the same shape (n, d) (uniform weights, equal sizes); got {x.shape} and {y.shape}."
        )
    cost = np.sum((x[:, None, :] - y[None, :, :]) ** 2, axis=-1)
    rows, cols = linear_sum_assignment(cost)
    sigma = np.empty(len(x), dtype=int)
    sigma[rows] = cols
    return float(np.sqrt(max(cost[rows, cols].mean(), 0.0))), sigma


def _gaussian(mean, cov, name: str) -> tuple[np.ndarray, np.ndarray]:
    mean, cov = np.asarray(mean, float), np.asarray(cov, float)
    d = mean.shape[-1] if mean.ndim == 1 else -1
    if mean.ndim != 1 or cov.shape != (d, d):
        raise ParameterError(
            f"`mean{name}` must be (d,) and `cov{name}` (d, d); got shapes {mean.shape} and {cov.shape}."
        )
    cov = 0.5 * (cov + cov.T)
    w = np.linalg.eigvalsh(cov)
    if not np.all(np.isfinite(cov)) or w[0] < -1e-10 * max(1.0, abs(w[-1])):
        raise ParameterError(f"`cov{name}` must be a finite symmetric PSD matrix; got eigenvalues {w.tolist()}.")
    return mean, cov


def _sqrt(s: np.ndarray) -> np.ndarray:
    w, q = np.linalg.eigh(0.5 * (s + s.T))
    return (q * np.sqrt(np.clip(w, 0.0, None))) @ q.T


def gaussian_w2(
    mean0: Float[ArrayLike, " d"], cov0: Float[ArrayLike, "d d"], mean1: Float[ArrayLike, " d"],
    cov1: Float[ArrayLike, "d d"],
) -> float:  # fmt: skip
    """`W2(N(α0, Σ0), N(α1, Σ1))`, the Bures–Wasserstein distance (closed form).

    `W2² = ‖α0 − α1‖² + tr Σ0 + tr Σ1 − 2 tr (Σ0^{1/2} Σ1 Σ0^{1/2})^{1/2}`.

    **Arguments:** `mean0`, `mean1`: `(d,)` float means; `cov0`, `cov1`: `(d, d)` symmetric PSD
    float covariances.

    **Returns:** the distance (float, `>= 0`).

    **Raises:** :class:`~hassejax.errors.ParameterError` for shapes that do not match or a
    covariance that is not PSD.

    Source: the classical closed form (Dowson and Landau 1982; Olkin and Pukelsheim 1982).

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.wasserstein import gaussian_w2
    >>> round(gaussian_w2(np.zeros(2), np.eye(2), np.array([3.0, 4.0]), 4.0 * np.eye(2)), 12)
    5.196152422707

    ```
    """
    mean0, cov0 = _gaussian(mean0, cov0, "0")
    mean1, cov1 = _gaussian(mean1, cov1, "1")
    if mean0.shape != mean1.shape:
        raise ParameterError(f"`mean0` and `mean1` must have the same shape; got {mean0.shape} and {mean1.shape}.")
    r0 = _sqrt(cov0)
    cross = np.trace(_sqrt(r0 @ cov1 @ r0))
    sq = np.sum((mean0 - mean1) ** 2) + np.trace(cov0) + np.trace(cov1) - 2.0 * cross
    return float(np.sqrt(max(sq, 0.0)))


def gaussian_geodesic(
    mean0: Float[ArrayLike, " d"], cov0: Float[ArrayLike, "d d"], mean1: Float[ArrayLike, " d"],
    cov1: Float[ArrayLike, "d d"], s: Float[ArrayLike, " k"],
) -> tuple[Float[np.ndarray, "k d"], Float[np.ndarray, "k d d"]]:  # fmt: skip
    """Points `N(α_s, Σ_s)` of the constant-speed `W2` geodesic from `N(α0, Σ0)` (s = 0) to `N(α1, Σ1)` (s = 1).

    With the optimal map `x ↦ α1 + T(x − α0)`,
    `T = Σ0^{-1/2} (Σ0^{1/2} Σ1 Σ0^{1/2})^{1/2} Σ0^{-1/2}` (symmetric positive semi-definite):
    `α_s = (1 − s) α0 + s α1`, `Σ_s = ((1 − s)I + sT) Σ0 ((1 − s)I + sT)`.
    Values of `s` slightly outside `[0, 1]` extend the same affine interpolation (used by
    finite differences at the ends; it stays a geodesic while `(1 − s)I + sT ≻ 0`).

    **Arguments:**

    - `mean0`, `mean1`: `(d,)` float means.
    - `cov0`: `(d, d)` symmetric positive definite float (the map `T` needs `Σ0⁻¹`).
    - `cov1`: `(d, d)` symmetric PSD float.
    - `s`: `(k,)` float positions along the geodesic (a scalar is taken as `k = 1`).

    **Returns:** `(means, covs)`: `(k, d)` and `(k, d, d)` float64 NumPy arrays.

    **Raises:** :class:`~hassejax.errors.ParameterError` for mismatched shapes, a singular or
    non-PSD `cov0`, a non-PSD `cov1`, or non-finite `s`.

    Source: McCann's displacement interpolation with the Gaussian optimal map (classical);
    the constant speed `W2(γ_s, γ_u) = |s − u| W2(γ_0, γ_1)` is checked in the tests.

    **Example:** between `N(0, I)` and `N(0, 4I)` the standard deviation grows linearly:

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.wasserstein import gaussian_geodesic
    >>> means, covs = gaussian_geodesic(np.zeros(2), np.eye(2), np.ones(2), 4.0 * np.eye(2), np.array([0.5]))
    >>> means.tolist(), np.round(covs[0], 12).tolist()
    ([[0.5, 0.5]], [[2.25, 0.0], [0.0, 2.25]])

    ```
    """
    mean0, cov0 = _gaussian(mean0, cov0, "0")
    mean1, cov1 = _gaussian(mean1, cov1, "1")
    if mean0.shape != mean1.shape:
        raise ParameterError(f"`mean0` and `mean1` must have the same shape; got {mean0.shape} and {mean1.shape}.")
    w, q = np.linalg.eigh(cov0)
    if w[0] <= 1e-12 * max(1.0, w[-1]):
        raise ParameterError(
            f"`cov0` must be positive definite (the map T needs its inverse); got eigenvalues {w.tolist()}."
        )
    s = np.atleast_1d(np.asarray(s, float))
    if s.ndim != 1 or not np.all(np.isfinite(s)):
        raise ParameterError(f"`s` must be a finite 1-D array of positions; got shape {s.shape}.")
    r0 = (q * np.sqrt(w)) @ q.T
    r0_inv = (q / np.sqrt(w)) @ q.T
    T = r0_inv @ _sqrt(r0 @ cov1 @ r0) @ r0_inv
    T = 0.5 * (T + T.T)
    eye = np.eye(len(mean0))
    maps = (1.0 - s)[:, None, None] * eye + s[:, None, None] * T
    covs = maps @ cov0 @ maps
    means = (1.0 - s)[:, None] * mean0 + s[:, None] * mean1
    return means, 0.5 * (covs + np.swapaxes(covs, -1, -2))
