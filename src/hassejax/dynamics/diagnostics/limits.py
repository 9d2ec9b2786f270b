"""Where does `Σ` go when `A ⪯ 0`? The limit covariance and its structure along `ker A` (spec dynamics.md §3, §7a item 7).

Host-side NumPy (the kernel's dimension is data-dependent). For `V = I` the limit is the
closed form :func:`kernel_limit`; for other SPD `V` the limit lies in `ker A` (derived, see
:func:`limit_structure`), so its rank is at most `dim ker A`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from jaxtyping import ArrayLike, Float

from ...errors import ParameterError

__all__ = ["kernel_basis", "kernel_limit", "limit_structure", "LimitStructure"]


def _square(a, name: str) -> np.ndarray:
    a = np.asarray(a, float)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] == 0:
        raise ParameterError(f"`{name}` must have shape (d, d) with d >= 1; got shape {a.shape}.")
    return a


class LimitStructure(NamedTuple):
    """Result of :func:`limit_structure` (a tuple: `rank, kernel_rank, off_block_residual, kernel_min_ratio`).

    Source: (derived), as :func:`limit_structure`, for the limits of spec dynamics.md §3 (`Σ∞` in `ker(A + Aᵀ)`) and
    §7a item 7 (`A = −QᵀQ/√d ⪯ 0`).

    **Example:** `Σ = I` with `ker A` the first axis: half of `‖Σ‖_F²` lies off the block,
    `‖diag(0, 1)‖_F / ‖I‖_F = 1/√2`:

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.diagnostics import limit_structure
    >>> rank, kernel_rank, residual, ratio = limit_structure(np.eye(2), np.diag([0.0, -1.0]))
    >>> rank, kernel_rank, round(residual, 6), ratio
    (2, 1, 0.707107, 1.0)

    ```
    """

    rank: int
    """Rank of `Σ` (eigenvalues above `rtol · λ_max(Σ)`)."""
    kernel_rank: int
    """Rank of the `ker A` block `P = U_KᵀΣU_K` (same threshold)."""
    off_block_residual: float
    """`‖Σ − U_K P U_Kᵀ‖_F / ‖Σ‖_F`: how far `Σ` still is from `ker A`."""
    kernel_min_ratio: float
    """Smallest eigenvalue of `P` over `λ_max(Σ)`."""


def kernel_basis(A: Float[ArrayLike, "d d"]) -> np.ndarray:
    """Orthonormal basis `(d, k)` of `ker A` for symmetric `A` (eigenvalues `|λ| <= 1e-10 · max(1, max|λ|)`).

    `A` is symmetrised first; the basis is the eigenvectors of the (near-)zero eigenvalues.

    **Arguments:** `A`: `(d, d)` float (symmetric, e.g. `−QᵀQ/√d`).

    **Returns:** `(d, k)` NumPy float64, orthonormal columns, `k = dim ker A` (possibly 0).

    **Raises:** :class:`~hassejax.errors.ParameterError` if `A` is not square.

    Source: (derived).

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.diagnostics import kernel_basis
    >>> np.abs(kernel_basis(np.diag([-1.0, 0.0, -2.0]))).round(12).tolist()
    [[0.0], [1.0], [0.0]]

    ```
    """
    A = _square(A, "A")
    w, q = np.linalg.eigh(0.5 * (A + A.T))
    return q[:, np.abs(w) <= 1e-10 * max(1.0, np.abs(w).max())]


def kernel_limit(Sigma0: Float[ArrayLike, "d d"], A: Float[ArrayLike, "d d"]) -> np.ndarray:
    """`Σ∞ = U_K(U_KᵀΣ0⁻¹U_K)⁻¹U_Kᵀ`, `U_K` a basis of `ker A`: the `V = I` limit for `A ⪯ 0` symmetric.

    Softmax: the paper's limit (spec §3; :func:`~hassejax.dynamics.clustering_limit` computes
    it in a singular-safe form for `V = vI`). L2 (derived): `(Σ⁻¹)' = −2[(I + 2KᵀKΣ)⁻¹A +
    Aᵀ(I + 2ΣKᵀK)⁻¹]` vanishes between vectors of `ker A`, so `U_KᵀΣ⁻¹U_K` is conserved, and
    the limit lies in `ker A`.

    **Arguments:** `Sigma0`: `(d, d)` SPD; `A`: `(d, d)` symmetric `⪯ 0`.

    **Returns:** `(d, d)` NumPy float64, rank `dim ker A`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for shapes that are not `(d, d)` alike.

    Source: arXiv:2501.18322 (softmax, spec §3); L2 (derived).

    **Example:** `ker A` is the first axis, and `Σ0 = I`:

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.diagnostics import kernel_limit
    >>> kernel_limit(np.eye(2), np.diag([0.0, -1.0])).round(12).tolist()
    [[1.0, 0.0], [0.0, 0.0]]

    ```
    """
    Sigma0, A = _square(Sigma0, "Sigma0"), _square(A, "A")
    if Sigma0.shape != A.shape:
        raise ParameterError(f"`Sigma0` and `A` must have the same shape (d, d); got {Sigma0.shape} and {A.shape}.")
    U = kernel_basis(A)
    return U @ np.linalg.inv(U.T @ np.linalg.solve(Sigma0, U)) @ U.T


def limit_structure(cov: Float[ArrayLike, "d d"], A: Float[ArrayLike, "d d"], rtol: float = 1e-6) -> LimitStructure:
    """How close `Σ` is to a limit in `ker A`: ranks of `Σ` and of its `ker A` block, residual, smallest block eigenvalue.

    The limit of the covariance lies in `ker A` (derived, softmax: with `V` SPD, `Σ' = VY + YV`,
    `Y = ΣAΣ`, vanishes iff `Y = 0` since `Y ↦ VY + YV` is invertible, and `ΣAΣ = 0` with
    `A ⪯ 0` means range `Σ ⊆ ker A`; L2: the spec's stationarity `ΣAΣ = 0`), so the limit's
    rank is `rank lim P <= dim ker A`, `P = U_KᵀΣU_K`, equal to it when `P` stays well away
    from singular. For `Σ ≻ 0`, `P ≻ 0` at every finite time: the block's rank alone is not
    a measurement, its smallest relative eigenvalue and the off-block residual are.

    **Arguments:** `cov`: `(d, d)` float PSD `Σ`; `A`: `(d, d)` symmetric; `rtol`: ranks
    count eigenvalues above `rtol · λ_max(Σ)`.

    **Returns:** a :class:`LimitStructure` `(rank, kernel_rank, off_block_residual, kernel_min_ratio)`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for shapes that are not `(d, d)` alike
    or a `ker A` of dimension 0.

    Source: (derived).

    **Example:** `Σ` inside `ker A` up to `1e-9` along its complement:

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.diagnostics import limit_structure
    >>> s = limit_structure(np.diag([2.0, 0.5, 1e-9]), np.diag([0.0, 0.0, -1.0]))
    >>> s.rank, s.kernel_rank, round(s.kernel_min_ratio, 6)
    (2, 2, 0.25)

    ```
    """
    cov, A = _square(cov, "cov"), _square(A, "A")
    if cov.shape != A.shape:
        raise ParameterError(f"`cov` and `A` must have the same shape (d, d); got {cov.shape} and {A.shape}.")
    U = kernel_basis(A)
    if U.shape[1] == 0:
        raise ParameterError(
            "`A` must have a non-trivial kernel (dim ker A >= 1) for limit_structure; got dim ker A = 0."
        )
    lam_max = np.linalg.eigvalsh(cov)[-1]
    block = U.T @ cov @ U
    w_block = np.linalg.eigvalsh(block)
    full = int(np.sum(np.linalg.eigvalsh(cov) > rtol * lam_max))
    ker = int(np.sum(w_block > rtol * lam_max))
    off = float(np.linalg.norm(cov - U @ block @ U.T) / np.linalg.norm(cov))
    return LimitStructure(full, ker, off, float(w_block[0] / lam_max))
