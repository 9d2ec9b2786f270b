"""Angles in the dynamics figures (matplotlib-free NumPy helpers).

- :func:`break_wraps`: line plots of angles that wrap around at ±180°.
- :func:`cone_angle`: where the rank-one line of a direction `v` at angle `θ` lies on the
  cone and disk plots (at `2θ`).
"""

from __future__ import annotations

import numpy as np
from jaxtyping import ArrayLike, Float

from ..errors import ParameterError

__all__ = ["break_wraps", "cone_angle"]


def break_wraps(t: Float[ArrayLike, " T"], theta: Float[ArrayLike, " T"]) -> tuple[np.ndarray, np.ndarray]:
    """Insert NaN between consecutive samples whose angle jumps by more than 180° (a wrap at ±180°).

    A line plot of `(t, θ)` then breaks at the wrap instead of drawing a vertical line across
    the axes.

    **Arguments:** `t`, `theta`: `(T,)` float times and angles in degrees.

    **Returns:** `(t, theta)` NumPy float64 of length `T + (number of wraps)`, NaN at the breaks.

    **Raises:** :class:`~hassejax.errors.ParameterError` for inputs that are not 1-D of one length.

    Source: (derived).

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.plot import break_wraps
    >>> t, th = break_wraps(np.arange(3.0), np.array([175.0, -178.0, -170.0]))
    >>> t.tolist()[1], th.tolist()[2]
    (nan, -178.0)

    ```
    """
    t, theta = np.asarray(t, float), np.asarray(theta, float)
    if t.ndim != 1 or t.shape != theta.shape:
        raise ParameterError(f"`t` and `theta` must be 1-D of one length; got shapes {t.shape} and {theta.shape}.")
    jumps = np.nonzero(np.abs(np.diff(theta)) > 180.0)[0] + 1
    return np.insert(t, jumps, np.nan), np.insert(theta, jumps, np.nan)


def cone_angle(theta_deg: Float[ArrayLike, "*batch"]) -> np.ndarray:
    """Polar angle, in degrees in `(−180°, 180°]`, of `s vvᵀ`, `v = (cos θ, sin θ)`, on the cone and disk plots.

    The cone coordinates `(Σ11 − Σ22, 2Σ12)` of `s vvᵀ` are `s (cos 2θ, sin 2θ)`, so a direction
    `v` at `θ` appears at `2θ` (wrapped): the lines `θ` and `θ + 180°` are one ray.

    **Arguments:** `theta_deg`: float angles `θ` of `v` in degrees, any shape.

    **Returns:** float64 NumPy array of the same shape, `2θ` wrapped to `(−180°, 180°]`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for non-finite angles.

    Source: (derived) :func:`hassejax.dynamics.geometry.cone_coords` of `s vvᵀ`.

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.plot.angles import cone_angle
    >>> cone_angle(np.array([-58.14, -7.60, 100.0])).round(2).tolist()
    [-116.28, -15.2, -160.0]

    ```
    """
    theta = np.asarray(theta_deg, float)
    if not np.all(np.isfinite(theta)):
        raise ParameterError(f"`theta_deg` must be finite angles in degrees; got {theta_deg!r}.")
    return np.asarray(180.0 - np.mod(180.0 - 2.0 * theta, 360.0))
