"""Distance between drawn curves (matplotlib-free NumPy helper): are two trajectories one path?"""

from __future__ import annotations

import numpy as np
from jaxtyping import ArrayLike, Float

from ..errors import ParameterError

__all__ = ["polyline_distance"]


def polyline_distance(points: Float[ArrayLike, "n 2"], line: Float[ArrayLike, "m 2"]) -> np.ndarray:
    """Euclidean distance from each point to the polyline through `line` (its segments, ends included).

    Two trajectories that trace one path at different speeds (e.g. one clock faster than the
    other) have all distances near zero, whatever their save times.

    **Arguments:** `points`: `(n, 2)` floats; `line`: `(m, 2)` floats, `m >= 1` vertices in order.

    **Returns:** float64 `(n,)` distances.

    **Raises:** :class:`~hassejax.errors.ParameterError` for shapes that are not `(n, 2)`, `(m, 2)`
    with `m >= 1`, or non-finite coordinates.

    Source: (derived).

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.plot.curves import polyline_distance
    >>> polyline_distance(np.array([[0.5, 1.0], [3.0, 0.0]]), np.array([[0.0, 0.0], [1.0, 0.0]])).tolist()
    [1.0, 2.0]

    ```
    """
    p = np.asarray(points, float)
    q = np.asarray(line, float)
    if p.ndim != 2 or p.shape[1] != 2 or q.ndim != 2 or q.shape[1] != 2 or q.shape[0] < 1:
        raise ParameterError(f"`points` must be (n, 2) and `line` (m, 2), m >= 1; got {p.shape} and {q.shape}.")
    if not (np.all(np.isfinite(p)) and np.all(np.isfinite(q))):
        raise ParameterError("`points` and `line` must be finite.")
    if q.shape[0] == 1:
        return np.linalg.norm(p - q[0], axis=-1)
    a, b = q[:-1], q[1:]  # segments (m - 1, 2)
    ab = b - a
    den = np.maximum(np.sum(ab * ab, -1), 1e-300)
    s = np.clip(np.sum((p[:, None, :] - a[None]) * ab[None], -1) / den[None], 0.0, 1.0)
    foot = a[None] + s[..., None] * ab[None]
    return np.min(np.linalg.norm(p[:, None, :] - foot, axis=-1), axis=1)
