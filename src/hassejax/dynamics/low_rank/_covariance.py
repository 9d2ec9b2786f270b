"""Covariances in `R^d` from the reduced states of the rank-`k` solves, host side (NumPy, float64), for many saved times."""

from __future__ import annotations

import numpy as np
from jaxtyping import ArrayLike, Bool, Float

from ._kernel import LowRankSoftmax

__all__ = ["gaussian_covariances", "particle_covariances"]


def gaussian_covariances(
    model: LowRankSoftmax, cov0: Float[ArrayLike, "d d"], psi: Float[ArrayLike, "*T k k"]
) -> np.ndarray:
    """`Σ = ΦΣ0Φᵀ`, `Φ = I + W_O Ψ Q`, for reduced Gaussian states `psi` `(..., k, k)`, as `(..., d, d)` float64 NumPy.

    Expanded as `Σ0 + PQΣ0 + (PQΣ0)ᵀ + P(QΣ0Qᵀ)Pᵀ` with `P = W_OΨ`, then symmetrised (derived;
    :mod:`hassejax.dynamics.low_rank`). `model` unbatched; `psi` from
    :class:`~hassejax.dynamics.LowRankGaussianSolution`.

    **Raises:** nothing of its own (no checks; host NumPy): shapes that do not fit (`cov0` not `(d, d)`, `psi` not
    `(..., k, k)`, a batched `model`) reach NumPy's ``ValueError`` from ``matmul``, a `model` that is not a
    :class:`~hassejax.dynamics.LowRankSoftmax` an ``AttributeError``.

    Source: (derived) spec dynamics.md §2 (`Σ(t) = Φ(t)Σ0Φ(t)ᵀ`) with `Φ = I + W_OΨQ` (module
    :mod:`hassejax.dynamics.low_rank`).

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics import LowRankSoftmax
    >>> from hassejax.dynamics.low_rank import gaussian_covariances
    >>> e = np.array([[1.0, 0.0]])
    >>> gaussian_covariances(LowRankSoftmax(e, e, e, e.T), np.eye(2), np.array([[[1.0]]])).tolist()  # Φ = diag(2, 1)
    [[[4.0, 0.0], [0.0, 1.0]]]

    ```
    """
    q, wo = np.asarray(model.Q), np.asarray(model.W_O)
    cov0, psi = np.asarray(cov0), np.asarray(psi)
    p = wo @ psi  # (…, d, k)
    qs = q @ cov0  # (k, d)
    cov = cov0 + p @ qs + np.swapaxes(p @ qs, -1, -2) + p @ (qs @ q.T) @ np.swapaxes(p, -1, -2)
    return 0.5 * (cov + np.swapaxes(cov, -1, -2))


def particle_covariances(
    model: LowRankSoftmax, x0: Float[ArrayLike, "S N d"], mask: Bool[ArrayLike, "S N"], z: Float[ArrayLike, "T S N k"]
) -> tuple[np.ndarray, np.ndarray]:
    """Covariance of all real tokens `x = x0 + z W_Oᵀ` for reduced particle states `z` `(T, S, N, k)`, and its within-group trace.

    **Returns:** `(cov (T, d, d), within (T,))`, float64 NumPy: `cov` is the covariance of the
    real tokens pooled (normalised by their number `n`); `within` the trace of the pooled
    within-group covariance `(1/n) Σ_s Σ_{i∈s} ‖x_i − x̄_s‖²` (the rest of the trace is
    between groups). `model` unbatched; `mask` concrete (True at real tokens).

    **Raises:** nothing of its own (no checks; host NumPy): a `mask` not of shape `(S, N)` reaches NumPy's
    ``IndexError``, other shapes that do not fit its ``ValueError``; a `mask` with no True entry (`n = 0`) gives NaN
    with NumPy's ``RuntimeWarning``.

    Source: (derived) the covariance of the empirical measure of spec dynamics.md §1 for the tokens `x = x0 + zW_Oᵀ`
    (module :mod:`hassejax.dynamics.low_rank`).

    **Example:** two groups of one token each: nothing within groups:

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics import LowRankSoftmax
    >>> from hassejax.dynamics.low_rank import particle_covariances
    >>> e = np.array([[1.0, 0.0]])
    >>> cov, within = particle_covariances(LowRankSoftmax(e, e, e, e.T), np.array([[[1.0, 0.0]], [[-1.0, 0.0]]]),
    ...                                    np.ones((2, 1), bool), np.zeros((1, 2, 1, 1)))
    >>> cov.tolist(), within.tolist()
    ([[[1.0, 0.0], [0.0, 0.0]]], [0.0])

    ```
    """
    wo = np.asarray(model.W_O)
    x0, mask, z = np.asarray(x0), np.asarray(mask, bool), np.asarray(z)
    x0r = x0[mask]
    x0c = x0r - x0r.mean(0)
    n = len(x0r)
    c0 = x0c.T @ x0c / n
    zr = z[:, mask]  # (T, n, k)
    zc = zr - zr.mean(1, keepdims=True)
    czx = np.swapaxes(zc, -1, -2) @ x0c / n  # (T, k, d)
    czz = np.swapaxes(zc, -1, -2) @ zc / n
    cross = wo @ czx
    cov = c0 + cross + np.swapaxes(cross, -1, -2) + wo @ czz @ wo.T
    x = x0[None] + z @ wo.T  # (T, S, N, d)
    m = mask[None, ..., None]
    xbar = np.sum(x * m, axis=2, keepdims=True) / mask.sum(1)[None, :, None, None]
    within = np.sum(((x - xbar) * m) ** 2, axis=(1, 2, 3)) / n
    return 0.5 * (cov + np.swapaxes(cov, -1, -2)), within
