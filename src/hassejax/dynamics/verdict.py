"""The long-time outcome of softmax Gaussian dynamics with `V = vI`, from the closed form, against a horizon.

With `V = vI` (β = 1) `Σ(t) = (Σ0⁻¹ − vt(A + Aᵀ))⁻¹` (Castin et al., arXiv:2501.18322; spec
dynamics.md §3): blow-up at `t* = 1/λ*` iff `λ* = λ_max(vΣ0^{1/2}(A + Aᵀ)Σ0^{1/2}) > 0`;
`Σ → 0` iff `v(A + Aᵀ) ≺ 0`; `Σ` constant iff `v = 0`; otherwise (`v(A + Aᵀ) ⪯ 0`,
singular) a low-rank limit. A solve stopped at a horizon `t1` sees only part of this:
:func:`closed_form_verdict` says which part, so a phase map can label a member that blows
up after `t1` or contracts too slowly to be seen as such.
"""

from __future__ import annotations

import enum

import numpy as np
from jaxtyping import ArrayLike, Float, Int

from ..errors import ParameterError

__all__ = ["Verdict", "closed_form_verdict"]


class Verdict(enum.IntEnum):
    """Closed-form long-time outcome relative to a horizon `t1` (codes of :func:`closed_form_verdict`)."""

    stationary = 0
    """`v = 0`: `Σ' = 0`, `Σ(t) = Σ0`."""
    contracts = 1
    """`v(A + Aᵀ) ≺ 0`: `Σ → 0` like `1/t`."""
    low_rank_limit = 2
    """`v(A + Aᵀ) ⪯ 0` singular, `v ≠ 0`: `Σ` converges to a rank-deficient limit."""
    blow_up_by_t1 = 3
    """`t* ≤ t1`."""
    blow_up_after_t1 = 4
    """`t1 < t* < ∞`."""


def closed_form_verdict(
    Sigma0: Float[ArrayLike, "2 2"] | Float[ArrayLike, "d d"],
    A: Float[ArrayLike, "*batch d d"],
    v: Float[ArrayLike, "*batch"],
    t1: float,
    *,
    rtol: float = 1e-12,
) -> Int[np.ndarray, "*batch"]:
    """:class:`Verdict` codes of softmax `V = vI`, `β = 1`, from the closed form (NumPy, host side).

    **Arguments:**

    - `Sigma0`: `(d, d)` float symmetric positive definite initial covariance (shared).
    - `A`: `(..., d, d)` float interactions; `v`: `(...)` float scalars of `V = vI`.
    - `t1`: the horizon (positive).
    - `rtol`: eigenvalues of `v(A + Aᵀ)` within `rtol · max(1, |λ|_max)` of 0 count as 0.

    **Returns:** int64 `(...)` :class:`Verdict` codes.

    **Raises:** :class:`~hassejax.errors.ParameterError` for a `Sigma0` that is not positive
    definite, shapes that do not match, or `t1 <= 0`.

    Source: Castin et al., arXiv:2501.18322 (the `V = vI` closed form); the split at `t1` (derived).

    **Example:** `A = [[a, 1], [0, −1]]` at `a = −1`: `A + Aᵀ ≺ 0`, so `v > 0` contracts, `v < 0`
    blows up, at `t* = 1/λ*`:

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.verdict import Verdict, closed_form_verdict
    >>> A = np.array([[-1.0, 1.0], [0.0, -1.0]])
    >>> codes = closed_form_verdict(np.eye(2) / 2, np.stack([A, A, A, A]), np.array([1.0, 0.0, -2.0, -0.01]), 20.0)
    >>> [Verdict(c).name for c in codes]
    ['contracts', 'stationary', 'blow_up_by_t1', 'blow_up_after_t1']

    ```
    """
    S = np.asarray(Sigma0, float)
    A = np.asarray(A, float)
    v = np.asarray(v, float)
    d = S.shape[-1]
    if S.shape != (d, d) or A.shape[-2:] != (d, d) or A.shape[:-2] != v.shape:
        raise ParameterError(
            f"`Sigma0` must be (d, d), `A` (..., d, d) and `v` (...) alike; got {S.shape}, {A.shape}, {v.shape}."
        )
    if not t1 > 0:
        raise ParameterError(f"`t1` must be positive; got {t1!r}.")
    w, q = np.linalg.eigh(0.5 * (S + S.T))
    if w[0] <= 0:
        raise ParameterError(f"`Sigma0` must be positive definite; got eigenvalues {w.tolist()}.")
    root = (q * np.sqrt(w)) @ q.T
    sym = v[..., None, None] * (A + np.swapaxes(A, -1, -2))
    lam = np.linalg.eigvalsh(root @ sym @ root)  # the spec's λ* is lam[..., -1]
    scale = np.maximum(1.0, np.abs(lam).max(-1))
    top, bottom = lam[..., -1], lam[..., 0]
    zero = rtol * scale
    out = np.full(v.shape, int(Verdict.low_rank_limit))
    out[top < -zero] = Verdict.contracts
    blow = top > zero
    t_star = np.where(blow, 1.0 / np.where(blow, top, 1.0), np.inf)
    out[blow & (t_star <= t1)] = Verdict.blow_up_by_t1
    out[blow & (t_star > t1)] = Verdict.blow_up_after_t1
    out[(v == 0) | ((np.abs(top) <= zero) & (np.abs(bottom) <= zero))] = Verdict.stationary
    return out.astype(np.int64)
