"""The exact rank of the `V = I` limit `Σ∞ = U_K(U_KᵀΣ0⁻¹U_K)⁻¹U_Kᵀ`, decided without a rank threshold.

Figure 7 of Castin et al., arXiv:2501.18322 (spec dynamics.md §7a item 7) counts ranks of limit
covariances. A threshold rule (eigenvalues above `1e-6 · λ_max`) applied to the computed
`Σ∞` miscounts when `Σ0` is nearly singular; the exact rank needs no threshold: for `Σ0 ≻ 0`
the `ker A` block `(U_KᵀΣ0⁻¹U_K)⁻¹` of `Σ∞` is positive definite, with every eigenvalue at
least `λ_min(Σ0)` (since `U_KᵀΣ0⁻¹U_K ⪯ I/λ_min(Σ0)`), so `rank Σ∞ = dim ker A`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from jaxtyping import ArrayLike, Float

from ..errors import ParameterError
from .diagnostics import kernel_basis

__all__ = ["KernelLimitRank", "kernel_limit_rank"]


class KernelLimitRank(NamedTuple):
    """Result of :func:`kernel_limit_rank` (a tuple: `rank, eigenvalue_floor`)."""

    rank: int
    """`rank Σ∞ = dim ker A` (exact for `Σ0 ≻ 0`)."""
    eigenvalue_floor: float
    """`λ_min(Σ0)`: every non-zero eigenvalue of `Σ∞` is at least this."""


def kernel_limit_rank(Sigma0: Float[ArrayLike, "d d"], A: Float[ArrayLike, "d d"]) -> KernelLimitRank:
    """Exact rank of `Σ∞ = U_K(U_KᵀΣ0⁻¹U_K)⁻¹U_Kᵀ` (`U_K` a basis of `ker A`) and a floor on its non-zero eigenvalues.

    **Arguments:**

    - `Sigma0`: `(d, d)` float symmetric positive definite initial covariance.
    - `A`: `(d, d)` float; only its symmetric part is used (its kernel by
      :func:`~hassejax.dynamics.diagnostics.kernel_basis`).

    **Returns:** a :class:`KernelLimitRank` `(rank, eigenvalue_floor)`: `rank = dim ker A`,
    `eigenvalue_floor = λ_min(Σ0) > 0`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for shapes that are not `(d, d)`
    alike, or a `Sigma0` that is not positive definite (Cholesky fails): then the rank is not
    decided by this argument.

    Source: (derived) from the closed-form limit of Castin et al., arXiv:2501.18322 (`V = I`,
    `A ⪯ 0`; spec dynamics.md §3).

    **Example:** `λ_min(Σ0) = 1e-7`, where a `1e-6 · λ_max` rule would count one rank too few:

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.kernel_limit_rank import kernel_limit_rank
    >>> r = kernel_limit_rank(np.diag([10.0, 1e-7, 3.0]), np.diag([0.0, 0.0, -1.0]))
    >>> r.rank, float(r.eigenvalue_floor)
    (2, 1e-07)

    ```
    """
    S = np.asarray(Sigma0, float)
    Am = np.asarray(A, float)
    if S.ndim != 2 or S.shape[0] != S.shape[1] or S.shape != Am.shape or S.shape[0] == 0:
        raise ParameterError(f"`Sigma0` and `A` must both have shape (d, d), d >= 1; got {S.shape} and {Am.shape}.")
    S = 0.5 * (S + S.T)
    try:
        np.linalg.cholesky(S)
    except np.linalg.LinAlgError:
        raise ParameterError(
            f"`Sigma0` must be positive definite (Cholesky failed); got eigenvalues {np.linalg.eigvalsh(S).tolist()}."
        ) from None
    return KernelLimitRank(int(kernel_basis(Am).shape[1]), float(np.linalg.eigvalsh(S)[0]))
