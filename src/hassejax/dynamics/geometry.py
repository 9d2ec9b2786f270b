"""Geometry of `2 × 2` covariances: trace-one grids, cone and disk coordinates, rank-one rays, ellipses.

Host-side NumPy helpers of the covariance figures (spec dynamics.md §7a, §7b):

- :func:`trace_one_grid`: the authors' grid of trace-one initial covariances.
- :func:`cone_coords`, :func:`disk_coords`: `Σ = [[a, c], [c, b]] ↦ (a − b, 2c, a + b)` (the PSD
  cone is `z ≥ √(x² + y²)`) and `(a − b, 2c)/(a + b)` (the unit disk, rank one on the circle).
- :func:`rank_one_direction_angle`, :func:`rank_one_ray`, :func:`isotropic_angles`: directions of
  rank-one covariances `s vvᵀ`, `v = (cos θ, sin θ)`.
- :func:`rank_one_limit`: `vvᵀ/(vᵀΣ0⁻¹v)`, the limit of a covariance that keeps `vᵀΣ⁻¹v`.
- :func:`psd_factor`, :func:`ellipse`, :func:`rel_frobenius`: a square-root factor, the
  `k`-sigma ellipse and the relative Frobenius distance.

Angles are in degrees, in `(−90°, 90°]` (a line, not a vector).
"""

from __future__ import annotations

import numpy as np
from jaxtyping import ArrayLike, Float

from ..errors import ParameterError

__all__ = [
    "trace_one_grid",
    "cone_coords",
    "disk_coords",
    "rank_one_direction_angle",
    "rank_one_ray",
    "isotropic_angles",
    "rank_one_limit",
    "psd_factor",
    "ellipse",
    "rel_frobenius",
]


def _two_by_two(x, name: str) -> np.ndarray:
    x = np.asarray(x, float)
    if x.ndim < 2 or x.shape[-2:] != (2, 2):
        raise ParameterError(f"`{name}` must have shape (..., 2, 2); got shape {x.shape}.")
    return x


def trace_one_grid(n_u: int, n_w: int, lo: float | int, hi: float | int) -> Float[np.ndarray, "N 2 2"]:
    """The authors' ``init_grid``: trace-one covariances on a grid, kept where they are positive definite.

    `u, w` run over an `n_u × n_w` grid of `[lo, hi]²` (u major, w minor: the authors' order);
    the points with `u² + w² < 1` give `Σ0 = [[(1 + u)/2, w/2], [w/2, (1 − u)/2]]` (trace 1,
    `Σ11 − Σ22 = u`, `2Σ12 = w`).

    **Arguments:**

    - `n_u`, `n_w`: grid points along `u` and `w` (integers `>= 1`).
    - `lo`, `hi`: the grid's range on both axes.

    **Returns:** float64 `(N, 2, 2)` covariances, `N` the number of grid points inside the unit disk.

    **Raises:** :class:`~hassejax.errors.ParameterError` for a grid size below 1.

    Source: the authors' code (vcastin/2025-transformers-PDEs, ``init_grid``; spec §7a).

    **Example:** the 10 × 10 grid on `[−0.5, 0.5]²` of figures 1–3 keeps all 100 points:

    ```python
    >>> from hassejax.dynamics.geometry import trace_one_grid
    >>> g = trace_one_grid(10, 10, -0.5, 0.5)
    >>> g.shape, float(g[0].trace())
    ((100, 2, 2), 1.0)
    >>> trace_one_grid(40, 40, -1.0, 1.0).shape[0]
    1184

    ```
    """
    for name, value in (("n_u", n_u), ("n_w", n_w)):
        if isinstance(value, bool) or int(value) != value or int(value) < 1:
            raise ParameterError(f"`{name}` must be an integer >= 1; got {value!r}.")
    u, w = np.meshgrid(np.linspace(lo, hi, int(n_u)), np.linspace(lo, hi, int(n_w)), indexing="ij")
    keep = u**2 + w**2 < 1.0
    u, w = u[keep], w[keep]
    return np.stack([np.stack([(1 + u) / 2, w / 2], -1), np.stack([w / 2, (1 - u) / 2], -1)], -2)


def cone_coords(cov: Float[ArrayLike, "*batch 2 2"]) -> Float[np.ndarray, "*batch 3"]:
    """Cone coordinates `Σ = [[a, c], [c, b]] ↦ (a − b, 2c, a + b)` over the last two axes.

    The PSD `2 × 2` matrices are the cone `z ≥ √(x² + y²)`; rank one is its boundary.

    **Arguments:** `cov`: `(..., 2, 2)` symmetric matrices.

    **Returns:** float64 `(..., 3)`.

    **Raises:** :class:`~hassejax.errors.ParameterError` unless the last two axes are `2 × 2`.

    Source: (derived) the figures of Castin et al. (spec §7a).

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.geometry import cone_coords
    >>> cone_coords(np.array([[2.0, 0.5], [0.5, 1.0]])).tolist()
    [1.0, 1.0, 3.0]

    ```
    """
    cov = _two_by_two(cov, "cov")
    a, b, c = cov[..., 0, 0], cov[..., 1, 1], cov[..., 0, 1]
    return np.stack([a - b, 2 * c, a + b], -1)


def disk_coords(cov: Float[ArrayLike, "*batch 2 2"]) -> Float[np.ndarray, "*batch 2"]:
    """Disk coordinates `(a − b, 2c)/(a + b)` of `Σ/tr Σ`: the unit disk, its boundary the rank-one matrices.

    **Arguments:** `cov`: `(..., 2, 2)` PSD matrices with a positive trace.

    **Returns:** float64 `(..., 2)`.

    **Raises:** :class:`~hassejax.errors.ParameterError` unless the last two axes are `2 × 2`, or when a trace is
    not a positive finite number (`Σ/tr Σ` is undefined at `Σ = 0`: a zero covariance gave NaN coordinates, which
    :func:`hassejax.plot.dynamics.draw_disk` drew as nothing, a review).

    Source: (derived) the disk panels of Castin et al. (spec §7a items 5, 6).

    **Example:** a rank-one `vvᵀ` lands on the unit circle at angle `2θ`:

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.geometry import disk_coords
    >>> disk_coords(np.array([[0.0, 0.0], [0.0, 3.0]])).tolist()
    [-1.0, 0.0]

    ```
    """
    x = cone_coords(cov)
    trace = x[..., 2]
    bad = ~(np.isfinite(trace) & (trace > 0))
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(np.atleast_1d(bad))[0])
        raise ParameterError(
            f"`cov` must have a positive finite trace (Σ/tr Σ is undefined at Σ = 0); got tr Σ = "
            f"{float(np.atleast_1d(trace)[where]):g} at index {where if trace.ndim else '()'}."
        )
    return x[..., :2] / x[..., 2:3]


def rank_one_direction_angle(cov: Float[ArrayLike, "*batch 2 2"]) -> Float[np.ndarray, "*batch"]:
    """Angle in degrees, in `(−90°, 90°]`, of the top eigenvector of each `2 × 2` `Σ`.

    **Arguments:** `cov`: `(..., 2, 2)` symmetric matrices.

    **Returns:** float64 `(...)` angles (for rank one `s vvᵀ`, the angle of `v`).

    **Raises:** :class:`~hassejax.errors.ParameterError` unless the last two axes are `2 × 2`.

    Source: (derived) half the polar angle of the cone coordinates `(a − b, 2c)`.

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.geometry import rank_one_direction_angle
    >>> v = np.array([np.cos(np.radians(30.0)), np.sin(np.radians(30.0))])
    >>> round(float(rank_one_direction_angle(2.0 * np.outer(v, v))), 9)
    30.0

    ```
    """
    x = cone_coords(cov)
    return np.asarray(np.degrees(0.5 * np.arctan2(x[..., 1], x[..., 0])))


def rank_one_ray(angle_deg: float, z_max: float, num: int = 50) -> Float[np.ndarray, "num 3"]:
    """Cone coordinates of `s vvᵀ`, `v = (cos θ, sin θ)`, `s ∈ [0, z_max]`: `(cos 2θ, sin 2θ, 1)·s`.

    **Arguments:** `angle_deg`: `θ` in degrees; `z_max`: the largest trace `s`; `num`: points.

    **Returns:** float64 `(num, 3)` points from the apex to trace `z_max`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for `num < 2`.

    Source: (derived) :func:`cone_coords` of `s vvᵀ`.

    **Example:**

    ```python
    >>> from hassejax.dynamics.geometry import rank_one_ray
    >>> [round(float(c), 12) for c in rank_one_ray(45.0, 2.0)[-1]]
    [0.0, 2.0, 2.0]

    ```
    """
    if isinstance(num, bool) or int(num) != num or int(num) < 2:
        raise ParameterError(f"`num` must be an integer >= 2; got {num!r}.")
    th = np.radians(angle_deg)
    s = np.linspace(0.0, z_max, int(num))
    return np.stack([np.cos(2 * th) * s, np.sin(2 * th) * s, s], -1)


def isotropic_angles(A: Float[ArrayLike, "2 2"]) -> Float[np.ndarray, " k"]:
    """Angles (degrees, `(−90°, 90°]`, sorted) of the isotropic directions `v = (cos θ, sin θ)`, `vᵀAv = 0`.

    For indefinite `A + Aᵀ` these are the two rank-one stationary lines of softmax attention
    (spec §3; figure 4: −58.14° and −7.60°). The direction `θ = 90°` is not reported (it is
    the root at infinity of `tan θ`).

    **Arguments:** `A`: a `2 × 2` real matrix (only its symmetric part matters).

    **Returns:** float64 `(k,)`, `k ∈ {0, 1, 2}` real roots.

    **Raises:** :class:`~hassejax.errors.ParameterError` unless `A` is `2 × 2`.

    Source: (derived) `vᵀAv = S11 cos²θ + 2 S12 sinθ cosθ + S22 sin²θ`, a quadratic in `tan θ`.

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.geometry import isotropic_angles
    >>> isotropic_angles(np.diag([1.0, -1.0])).tolist()
    [-45.0, 45.0]

    ```
    """
    A = np.asarray(A, float)
    if A.shape != (2, 2):
        raise ParameterError(f"`A` must have shape (2, 2); got shape {A.shape}.")
    S = 0.5 * (A + A.T)
    roots = np.roots([S[1, 1], 2 * S[0, 1], S[0, 0]])
    roots = roots[np.isreal(roots)].real
    return np.sort(np.degrees(np.arctan(roots)))


def rank_one_limit(
    cov0: Float[ArrayLike, "*batch d d"], direction: Float[ArrayLike, " d"]
) -> Float[np.ndarray, "*batch d d"]:
    """`Σ∞ = vvᵀ/(vᵀΣ0⁻¹v)`: the rank-one limit on `v` of a flow that conserves `vᵀΣ⁻¹v`.

    Softmax attention with `V = I` and `A ⪯ 0` of kernel `span(v)` converges to it (paper,
    spec §7a item 2); so does L2 attention, which conserves `vᵀΣ⁻¹v` when `Av = 0` (derived).

    **Arguments:** `cov0`: `(..., d, d)` positive definite; `direction`: `v`, `(d,)`.

    **Returns:** float64 `(..., d, d)`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for shapes that do not match.

    Source: Castin et al., arXiv:2501.18322 (the softmax closed form, `V = I`); spec §7a item 2.

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.geometry import rank_one_limit
    >>> rank_one_limit(np.diag([2.0, 1.0]), np.array([1.0, 0.0])).tolist()
    [[2.0, 0.0], [0.0, 0.0]]

    ```
    """
    cov0 = np.asarray(cov0, float)
    v = np.asarray(direction, float)
    if v.ndim != 1 or cov0.ndim < 2 or cov0.shape[-2:] != (v.size, v.size):
        raise ParameterError(f"`cov0` must be (..., d, d) and `direction` (d,); got shapes {cov0.shape} and {v.shape}.")
    w = np.linalg.solve(cov0, np.broadcast_to(v, cov0.shape[:-1])[..., None])[..., 0]
    return np.outer(v, v) / (w @ v)[..., None, None]


def psd_factor(cov: Float[ArrayLike, "*batch d d"]) -> Float[np.ndarray, "*batch d d"]:
    """A factor `R = Q diag(√max(λ, 0))` with `RRᵀ = Σ` for symmetric PSD `Σ = Q diag(λ) Qᵀ`.

    Works for singular and slightly indefinite (round-off) `Σ`: negative eigenvalues count as 0.

    **Arguments:** `cov`: `(..., d, d)` symmetric.

    **Returns:** float64 `(..., d, d)`.

    **Raises:** :class:`~hassejax.errors.ParameterError` unless the last two axes are square.

    Source: (derived).

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.geometry import psd_factor
    >>> R = psd_factor(np.array([[4.0, 0.0], [0.0, 0.0]]))
    >>> (R @ R.T).tolist()
    [[4.0, 0.0], [0.0, 0.0]]

    ```
    """
    cov = np.asarray(cov, float)
    if cov.ndim < 2 or cov.shape[-1] != cov.shape[-2]:
        raise ParameterError(f"`cov` must have shape (..., d, d); got shape {cov.shape}.")
    w, q = np.linalg.eigh(cov)
    return q * np.sqrt(np.clip(w, 0, None))[..., None, :]


def ellipse(
    mean: Float[ArrayLike, 2], cov: Float[ArrayLike, "2 2"], k: float = 2.0, m: int = 200
) -> Float[np.ndarray, "m 2"]:
    """`m` points of the ellipse `{x : (x − mean)ᵀ Σ⁻¹ (x − mean) = k²}` (a segment for rank one).

    **Arguments:** `mean`: `(2,)`; `cov`: `(2, 2)` PSD; `k`: the number of standard deviations;
    `m`: points (the first and last coincide).

    **Returns:** float64 `(m, 2)`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for shapes other than `(2,)`, `(2, 2)`.

    Source: (derived) the image of the circle of radius `k` under :func:`psd_factor`.

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.geometry import ellipse
    >>> pts = ellipse(np.zeros(2), np.diag([4.0, 1.0]), k=1.0, m=5)
    >>> np.round(pts, 12).tolist()[:2]
    [[0.0, 1.0], [2.0, 0.0]]

    ```
    """
    mean = np.asarray(mean, float)
    cov = _two_by_two(cov, "cov")
    if mean.shape != (2,) or cov.shape != (2, 2):
        raise ParameterError(f"`mean` must be (2,) and `cov` (2, 2); got shapes {mean.shape} and {cov.shape}.")
    th = np.linspace(0.0, 2.0 * np.pi, m)
    circle = np.stack([np.cos(th), np.sin(th)], -1)
    return mean + k * circle @ psd_factor(cov).T


def rel_frobenius(a: Float[ArrayLike, "*batch d d"], b: Float[ArrayLike, "*batch d d"]) -> Float[np.ndarray, "*batch"]:
    """`‖a − b‖_F / ‖b‖_F` over the last two axes.

    **Arguments:** `a`, `b`: `(..., d, d)` broadcastable arrays (`b` the reference).

    **Returns:** float64 `(...)`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for rank below 2.

    Source: (derived).

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.geometry import rel_frobenius
    >>> float(rel_frobenius(np.array([[3.0, 0.5], [0.0, 4.0]]), np.diag([3.0, 4.0])))
    0.1

    ```
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.ndim < 2 or b.ndim < 2:
        raise ParameterError(f"`a` and `b` must have rank >= 2; got shapes {a.shape} and {b.shape}.")
    return np.asarray(np.linalg.norm(a - b, axis=(-2, -1)) / np.linalg.norm(b, axis=(-2, -1)))
