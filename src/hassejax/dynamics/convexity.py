"""Convexity of the twisted softmax energy along `W2` geodesics of Gaussians (numerical second derivative).

The energy `E(μ) = ½ ∬ exp(xᵀAy) dμ dμ` (:func:`~hassejax.dynamics.energy.gaussian_interaction_energy`)
evaluated on the `W2` geodesic `s ↦ N(α_s, Σ_s)` between two Gaussians
(:func:`~hassejax.dynamics.wasserstein.gaussian_geodesic`), and its second derivative in `s` by a
central difference: a negative value means `E` is not geodesically convex in `W2` there
(Castin, Ablin, Carrillo, Peyré, arXiv:2501.18322, gradient-flow section; spec dynamics.md §6:
with `V = I`, `A = −I`, `E = ½ det(I − Σ²)^{-1/2} exp(−αᵀ(I + Σ)⁻¹α)` and `∂²E/∂α² < 0` at `α = 0`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float

from ..errors import ParameterError
from .energy import gaussian_interaction_energy
from .wasserstein import gaussian_geodesic

__all__ = ["GeodesicEnergy", "energy_along_geodesic", "negative_intervals"]


class GeodesicEnergy(NamedTuple):
    """The energy along a geodesic and its second derivative (all float64 NumPy, `(k,)`).

    - `s`: positions along the geodesic (0 = start, 1 = end).
    - `energy`: `E(N(α_s, Σ_s))`.
    - `second_derivative`: `d²E/ds²` by the central difference with step `step`.
    - `step`: the finite-difference step.
    """

    s: Float[np.ndarray, " k"]
    energy: Float[np.ndarray, " k"]
    second_derivative: Float[np.ndarray, " k"]
    step: float


def energy_along_geodesic(
    mean0: Float[ArrayLike, " d"], cov0: Float[ArrayLike, "d d"], mean1: Float[ArrayLike, " d"],
    cov1: Float[ArrayLike, "d d"], A: Float[ArrayLike, "d d"], s: Float[ArrayLike, " k"], *, step: float = 1e-3,
) -> GeodesicEnergy:  # fmt: skip
    """`E(γ_s)` and `d²E(γ_s)/ds²` along the `W2` geodesic `γ` from `N(α0, Σ0)` to `N(α1, Σ1)`.

    `d²E/ds² ≈ (E(γ_{s+h}) − 2E(γ_s) + E(γ_{s−h}))/h²` (error `O(h²)`; the geodesic's affine
    formula extends a little past `[0, 1]`, so the ends need no one-sided formula). The energy is
    JAX's closed form, evaluated in float64, which must be enabled
    (``jax.config.update("jax_enable_x64", True)``): in float32 the difference loses all digits.

    **Arguments:**

    - `mean0`, `cov0`, `mean1`, `cov1`: the end points (`cov0` positive definite), as
      :func:`~hassejax.dynamics.wasserstein.gaussian_geodesic`.
    - `A`: `(d, d)` float interaction matrix.
    - `s`: `(k,)` positions.
    - `step`: finite-difference step `h > 0`.

    **Returns:** a :class:`GeodesicEnergy`.

    **Raises:** :class:`~hassejax.errors.ParameterError` naming `step` for `h <= 0`, naming the
    geodesic if the energy is infinite somewhere on it (`‖Σ_s^{1/2} A Σ_s^{1/2}‖ >= 1`), and if
    float64 is not enabled; shapes as :func:`~hassejax.dynamics.wasserstein.gaussian_geodesic`.

    Source: the energy (derived, spec dynamics.md §6); the geodesic (classical); the difference
    quotient (standard).

    **Example:** `A = −I`, a translation of `N(·, Σ)` through 0: `E'' = −2E uᵀ(I + Σ)⁻¹u < 0`
    at the middle (`u` the displacement):

    ```python
    >>> import jax
    >>> jax.config.update("jax_enable_x64", True)
    >>> import numpy as np
    >>> from hassejax.dynamics.convexity import energy_along_geodesic
    >>> S = 0.5 * np.eye(1)
    >>> g = energy_along_geodesic(np.array([-1.0]), S, np.array([1.0]), S, -np.eye(1), np.array([0.5]))
    >>> e = 0.5 / np.sqrt(1 - 0.25)
    >>> round(float(g.energy[0]), 9), round(float(g.second_derivative[0]), 4), round(float(-2 * e * 4 / 1.5), 4)
    (0.577350269, -3.0792, -3.0792)

    ```
    """
    if not float(step) > 0.0:
        raise ParameterError(f"`step` must be a positive number; got {step!r}.")
    if jnp.zeros(()).astype(float).dtype != jnp.float64:
        raise ParameterError(
            "energy_along_geodesic needs float64: enable it with jax.config.update('jax_enable_x64', True)."
        )
    s = np.atleast_1d(np.asarray(s, float))
    h = float(step)
    grid = np.concatenate([s - h, s, s + h])
    means, covs = gaussian_geodesic(mean0, cov0, mean1, cov1, grid)
    out = gaussian_interaction_energy(jnp.asarray(means), jnp.asarray(covs), jnp.asarray(A, float))
    if not bool(np.all(np.asarray(out.finite))):
        raise ParameterError(
            "the geodesic leaves the energy's domain ‖Σ_s^{1/2} A Σ_s^{1/2}‖ < 1 (E is infinite there); "
            "choose end points with smaller covariances."
        )
    lo, mid, hi = np.split(np.asarray(out.value, float), 3)
    return GeodesicEnergy(s=s, energy=mid, second_derivative=(hi - 2.0 * mid + lo) / h**2, step=h)


def negative_intervals(s: Float[ArrayLike, " k"], values: Float[ArrayLike, " k"]) -> list[tuple[float, float]]:
    """Maximal runs of grid points where `values < 0`, as `(first s, last s)` pairs.

    **Arguments:** `s`: `(k,)` increasing positions; `values`: `(k,)` floats.

    **Returns:** a list of `(start, end)` floats (empty if no value is negative); the true
    sign changes lie within one grid step outside each pair.

    **Raises:** :class:`~hassejax.errors.ParameterError` for shapes that differ.

    **Example:**

    ```python
    >>> from hassejax.dynamics.convexity import negative_intervals
    >>> import numpy as np
    >>> negative_intervals(np.linspace(0.0, 1.0, 5), np.array([1.0, -1.0, -2.0, 3.0, -1.0]))
    [(0.25, 0.5), (1.0, 1.0)]

    ```
    """
    s, v = np.asarray(s, float), np.asarray(values, float)
    if s.ndim != 1 or s.shape != v.shape:
        raise ParameterError(f"`s` and `values` must be 1-D of the same length; got shapes {s.shape} and {v.shape}.")
    neg = np.concatenate([[False], v < 0, [False]])
    edges = np.flatnonzero(np.diff(neg.astype(int)))
    return [(float(s[a]), float(s[b - 1])) for a, b in zip(edges[::2], edges[1::2], strict=True)]
