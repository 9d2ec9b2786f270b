"""Line plots of angles that wrap around at ±180° (matplotlib-free NumPy helper)."""

from __future__ import annotations

import numpy as np
from jaxtyping import ArrayLike, Float

from ..errors import ParameterError

__all__ = ["break_wraps"]


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
