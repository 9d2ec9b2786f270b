"""How far a velocity field is from affine on a sample: the test of "Gaussians stay Gaussian" (derived).

A kernel preserves Gaussians when its velocity on `μ = N(α, Σ)` is affine, `Γ_μ(x) = Mx + c`
(spec dynamics.md §2). On a sample `x_1..x_m` of `μ` the best affine fit (least squares) leaves
the relative residual

    `r = Σ_i ‖Γ(x_i) − M̂x_i − ĉ‖² / Σ_i ‖Γ(x_i) − Γ̄‖²`,

zero for an affine field; for softmax, linear and Sinkhorn attention with `μ` an empirical
measure of `n` keys it falls to zero as `n` grows (Monte Carlo error), for sigmoid attention it
does not (not affine on Gaussians: particles only).

- :func:`affine_fit_residual`: `r` and the fitted `(M̂, ĉ)`, host-side NumPy.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from jaxtyping import ArrayLike, Float

from ..errors import ParameterError

__all__ = ["AffineFit", "affine_fit_residual"]


class AffineFit(NamedTuple):
    """Least-squares affine fit `v ≈ Mx + c` of a sampled field.

    - `residual`: relative residual `r` (0 for an affine field).
    - `M`: `(d, d)` fitted linear part; `c`: `(d,)` fitted offset.
    """

    residual: float
    M: Float[np.ndarray, "d d"]
    c: Float[np.ndarray, " d"]


def affine_fit_residual(x: Float[ArrayLike, "m d"], v: Float[ArrayLike, "m d"]) -> AffineFit:
    """The best affine fit of the values `v_i = Γ(x_i)` and its relative residual.

    **Arguments:**

    - `x`: `(m, d)` sample points (queries), `m >= d + 2`, not all on one hyperplane.
    - `v`: `(m, d)` velocities at `x`.

    **Returns:** an :class:`AffineFit` (`r = Σ‖v − Mx − c‖² / Σ‖v − v̄‖²`; `r = 0` when `v` is constant).

    **Raises:** :class:`~hassejax.errors.ParameterError` for shapes other than `(m, d)` and
    `(m, d)`, `m < d + 2`, non-finite values, or points that do not span an affine `d`-space.

    Source: (derived) spec dynamics.md §2 (affine velocity ⇔ Gaussians stay Gaussian).

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.affine_fit import affine_fit_residual
    >>> x = np.random.default_rng(0).standard_normal((50, 2))
    >>> fit = affine_fit_residual(x, x @ np.array([[1.0, 2.0], [0.0, 3.0]]).T + 1.0)
    >>> round(fit.residual, 12), bool(np.allclose(fit.M, [[1.0, 2.0], [0.0, 3.0]])), fit.c.round(6).tolist()
    (0.0, True, [1.0, 1.0])

    ```
    """
    x = np.asarray(x, float)
    v = np.asarray(v, float)
    if x.ndim != 2 or v.shape != x.shape:
        raise ParameterError(f"`x` and `v` must both have shape (m, d); got {x.shape} and {v.shape}.")
    m, d = x.shape
    if m < d + 2:
        raise ParameterError(f"`x` needs at least d + 2 = {d + 2} points for a residual; got m = {m}.")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(v))):
        raise ParameterError("`x` and `v` must be finite; got NaN/inf entries.")
    design = np.concatenate([x, np.ones((m, 1))], axis=1)
    if np.linalg.matrix_rank(design) < d + 1:
        raise ParameterError(f"the points `x` must span an affine {d}-dimensional space; they lie on a hyperplane.")
    coef, *_ = np.linalg.lstsq(design, v, rcond=None)
    res = v - design @ coef
    spread = float(np.sum((v - v.mean(axis=0)) ** 2))
    r = 0.0 if spread == 0.0 else float(np.sum(res**2)) / spread
    return AffineFit(r, coef[:d].T, coef[d])
