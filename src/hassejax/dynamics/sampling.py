"""Samples with prescribed moments: the antithetic, whitened sample of a Gaussian (spec dynamics.md §7b item 8)."""

from __future__ import annotations

import jax
import numpy as np
from jaxtyping import ArrayLike, Float, Key

from ..errors import ParameterError
from .geometry import psd_factor

__all__ = ["antithetic_sample"]


def antithetic_sample(
    key: Key[ArrayLike, ""], mean: Float[ArrayLike, " d"], cov: Float[ArrayLike, "d d"], n: int
) -> Float[np.ndarray, "n d"]:
    """`n` points (`n` even) whose empirical mean is exactly `mean` and covariance exactly `cov`.

    Draws `n/2` standard normal points `z`, whitens them so that `(2/n) Σ zzᵀ = I`, takes the
    pairs `±z` (empirical mean 0, covariance `I` with the `1/n` normalisation of
    :func:`hassejax.dynamics.empirical_covariance`) and maps them by a square root of `cov`
    (Cholesky when it succeeds, else :func:`~hassejax.dynamics.geometry.psd_factor`).
    The set is symmetric about `mean`: the first `n/2` points minus `mean` are minus the last `n/2`.

    **Arguments:**

    - `key`: a JAX PRNG key.
    - `mean`: `(d,)` float.
    - `cov`: `(d, d)` symmetric PSD float.
    - `n`: an even number of points, `n >= 2d` (so that the `n/2` draws span `d` dimensions).

    **Returns:** float64 `(n, d)` NumPy array.

    **Raises:** :class:`~hassejax.errors.ParameterError` naming `n` for an odd `n` or `n < 2d`,
    naming `mean`/`cov` for shapes that do not match.

    Source: (derived) antithetic variates with whitening, so the particle cloud starts on the
    Gaussian's moments (spec §7b item 8).

    **Example:**

    ```python
    >>> import jax
    >>> import numpy as np
    >>> from hassejax.dynamics.sampling import antithetic_sample
    >>> x = antithetic_sample(jax.random.key(0), np.array([1.0, 0.0]), np.diag([2.0, 0.5]), 8)
    >>> x.shape, np.round(x.mean(0), 12).tolist()
    ((8, 2), [1.0, 0.0])
    >>> np.round((x - [1.0, 0.0]).T @ (x - [1.0, 0.0]) / 8, 12).tolist()
    [[2.0, 0.0], [0.0, 0.5]]

    ```
    """
    mean = np.asarray(mean, float)
    cov = np.asarray(cov, float)
    if mean.ndim != 1 or cov.shape != (mean.size, mean.size):
        raise ParameterError(f"`mean` must be (d,) and `cov` (d, d); got shapes {mean.shape} and {cov.shape}.")
    d = len(mean)
    if isinstance(n, bool) or int(n) != n or n % 2 or n < 2 * d:
        raise ParameterError(f"`n` must be an even integer >= 2d = {2 * d} for an antithetic sample; got {n!r}.")
    n = int(n)
    z = np.asarray(jax.random.normal(key, (n // 2, d)), float)
    c = z.T @ z / (n // 2)
    z = z @ np.linalg.inv(np.linalg.cholesky(c)).T
    x = np.concatenate([z, -z])
    try:
        root = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:  # singular (or round-off indefinite): an eigen-decomposition factor
        root = psd_factor(cov)
    return mean + x @ root.T
