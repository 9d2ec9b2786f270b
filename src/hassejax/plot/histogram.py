"""Histogram helpers for figures (matplotlib-free NumPy): common logarithmic bins."""

from __future__ import annotations

import numpy as np
from jaxtyping import ArrayLike, Float

from ..errors import ParameterError

__all__ = ["log_bins"]


def log_bins(*samples: Float[ArrayLike, " _n"], per_decade: int = 5, floor: float = 1e-17) -> np.ndarray:
    """Common logarithmic histogram bin edges covering every sample; values below `floor` count as `floor`.

    The edges run from the decade at or below the smallest sample to the decade at or above the
    largest (one decade at least), `per_decade` bins a decade. Draw zeros with
    ``np.maximum(x, edges[0])``.

    **Arguments:** `samples`: one or more non-empty 1-D float arrays (non-negative);
    `per_decade`: bins per decade; `floor`: the smallest value resolved.

    **Returns:** 1-D NumPy float64 increasing edges.

    **Raises:** :class:`~hassejax.errors.ParameterError` for no sample or an empty one.

    Source: (derived).

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.plot import log_bins
    >>> log_bins(np.array([2e-3, 0.5]), per_decade=1).tolist()
    [0.001, 0.01, 0.1, 1.0]

    ```
    """
    if not samples or any(np.size(s) == 0 for s in samples):
        raise ParameterError(
            f"`samples` must be one or more non-empty arrays; got sizes {[np.size(s) for s in samples]}."
        )
    lo = min(np.log10(max(np.min(s), floor)) for s in samples)
    hi = max(np.log10(max(np.max(s), floor)) for s in samples)
    lo, hi = np.floor(lo), np.ceil(hi) + (1 if np.ceil(hi) == np.floor(lo) else 0)
    return np.logspace(lo, hi, int((hi - lo) * per_decade) + 1)
