"""Cost estimates for ordering sweeps (:func:`hassejax.dynamics.sweep`'s `cost`).

Under ``vmap`` a chunk of members steps until its slowest member stops, so a sweep runs
faster when members of similar cost share a chunk. The estimates here are cheap (host
NumPy: a Cholesky factor and the eigenvalues of one symmetric matrix per member) and only need the right order and rough ratios.
"""

from __future__ import annotations

import numpy as np
from jaxtyping import ArrayLike, Float

from ..errors import ParameterError

__all__ = ["softmax_gaussian_cost"]

# Shapes are checked here (ParameterError naming the argument), so the annotations leave them free.
# Least-squares fit of the step counts of the two covariance families of benchmarks/sweeps.py
# (d = 2, 8, 32; 4,600 members; Tsit5, rtol 1e-6, atol 1e-9, size event at 1e8 tr Σ0):
# steps ≈ 1 + 5.4 log(1 + |λ_min| T) + 54 log(1 + λ_max⁺ T) + 149 [t* < t1 − t0].
_COEF = (1.0, 5.4, 54.0, 149.0)


def softmax_gaussian_cost(
    cov0: Float[ArrayLike, "..."], A: Float[ArrayLike, "..."], *, t1: float, t0: float = 0.0,
    v: Float[ArrayLike, "..."] = 1.0, beta: float = 1.0,
) -> np.ndarray:  # fmt: skip
    """Estimated solver steps of the softmax Gaussian solve (`V = vI`), from the closed form of spec §3.

    With `S = βv Σ0^{1/2}(A + Aᵀ)Σ0^{1/2}` and its extreme eigenvalues `λ_min <= λ_max`, the
    covariance blows up at `t* = 1/λ_max` when `λ_max > 0` (spec §3); the solve runs over
    `T = min(t*, t1 − t0)`. The estimate

        `1 + 5.4 log(1 + |λ_min| T) + 54 log(1 + max(λ_max, 0) T) + 149 [t* < t1 − t0]`

    counts the steps of the contracting and growing directions and the climb of eight
    decades to the size event (fitted on the step counts of ``benchmarks/sweeps.py``: Tsit5,
    rtol 1e-6, the default threshold; another tolerance scales all members alike). For
    another `V` it is a rough guide only. (derived)

    **Arguments:**

    - `cov0`: `(B, d, d)` or `(d, d)` initial covariances `Σ0` (symmetric PSD).
    - `A`: `(B, d, d)` or `(d, d)` interaction matrices.
    - `t1`, `t0`: the solve's interval.
    - `v`: scalar or `(B,)` value scale (`V = vI`; a sweep over `v` alone with one `cov0` and `A`
      included); `beta` the inverse temperature.

    **Returns:** float64 NumPy array of shape `(B,)` (`()` broadcast to `(1,)`).

    **Raises:** :class:`~hassejax.errors.ParameterError` for non-square or mismatched
    shapes, non-finite entries (of `v`, `beta`, `t0`, `t1` too), a `cov0` that is not positive
    semidefinite, or `t1 <= t0`.

    Source: (derived) from the closed form of spec dynamics.md §3 (`t* = 1/λ_max`) and §4 "Sweeps" (under `vmap` the
    loop runs until the slowest member stops); coefficients fitted on ``benchmarks/sweeps.py``.

    **Example:** a member that blows up before `t1` costs more than one that decays:

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics import softmax_gaussian_cost
    >>> A = np.stack([np.eye(2), -np.eye(2)])
    >>> cost = softmax_gaussian_cost(np.eye(2) / 2, A, t1=10.0)
    >>> cost.shape, bool(cost[0] > cost[1])
    ((2,), True)

    ```
    """
    cov0 = np.asarray(cov0, dtype=np.float64)
    A = np.asarray(A, dtype=np.float64)
    for name, x in (("cov0", cov0), ("A", A)):
        if x.ndim not in (2, 3) or x.shape[-1] != x.shape[-2]:
            raise ParameterError(f"`{name}` must have shape (B, d, d) or (d, d); got shape {x.shape}.")
        if not np.all(np.isfinite(x)):
            raise ParameterError(f"`{name}` must be finite; got NaN/inf entries.")
    if cov0.shape[-1] != A.shape[-1]:
        raise ParameterError(f"`cov0` and `A` must have the same d; got shapes {cov0.shape} and {A.shape}.")
    if not float(t1) > float(t0):
        raise ParameterError(f"`t1` must be greater than `t0`; got t0 = {t0}, t1 = {t1}.")
    for name, x in (("v", v), ("beta", beta), ("t0", t0), ("t1", t1)):  # complex, strings, NaN: refused by name
        arr = np.asarray(x)
        if arr.dtype.kind not in "biuf" or not np.all(np.isfinite(arr)):
            raise ParameterError(f"`{name}` must be finite real numbers; got {x!r:.60}.")
    if np.ndim(beta) or np.ndim(t0) or np.ndim(t1):
        raise ParameterError("`beta`, `t0` and `t1` must be scalars (sweep `v`, `cov0` or `A` for one per member).")
    v = np.asarray(v, dtype=np.float64)
    if v.ndim > 1:
        raise ParameterError(f"`v` must be a scalar or have shape (B,); got shape {v.shape}.")
    # the batch size B of whichever arguments carry one (a sweep over `v` alone included: a fresh user)
    sizes = {
        name: x.shape[0] for name, x in (("cov0", cov0), ("A", A), ("v", v)) if x.ndim == (0 if name == "v" else 2) + 1
    }
    batch = max(sizes.values(), default=1)
    if any(s not in (1, batch) for s in sizes.values()):
        got = ", ".join(f"`{name}` {s}" for name, s in sizes.items())
        raise ParameterError(f"`cov0`, `A` and `v` must share the batch size B (or have none); got batch sizes {got}.")
    cov0 = np.broadcast_to(cov0.reshape((-1,) + cov0.shape[-2:]), (batch,) + cov0.shape[-2:])
    A = np.broadcast_to(A.reshape((-1,) + A.shape[-2:]), (batch,) + A.shape[-2:])
    scale = np.broadcast_to(beta * v.reshape(-1), (batch,))
    # Lᵀ(A + Aᵀ)L with Σ0 = LLᵀ has the eigenvalues of Σ0^{1/2}(A + Aᵀ)Σ0^{1/2} (L = Σ0^{1/2}Q, Q
    # orthogonal); a Cholesky factor of Σ0 + 1e-12 (tr Σ0/d) I is cheap (NumPy's batched eigh is not).
    sym = 0.5 * (cov0 + np.swapaxes(cov0, -1, -2))
    d = sym.shape[-1]
    jitter = 1e-12 * np.maximum(np.trace(sym, axis1=-2, axis2=-1) / d, np.finfo(np.float64).tiny)
    try:
        root = np.linalg.cholesky(sym + jitter[:, None, None] * np.eye(d))
    except np.linalg.LinAlgError:
        raise ParameterError(
            "`cov0` must be symmetric positive semidefinite; a member's Cholesky factor failed."
        ) from None
    lam = np.linalg.eigvalsh(scale[:, None, None] * (np.swapaxes(root, -1, -2) @ (A + np.swapaxes(A, -1, -2)) @ root))
    lam_min, lam_max = lam[:, 0], lam[:, -1]
    horizon = float(t1) - float(t0)
    t_star = np.where(lam_max > 0, 1.0 / np.where(lam_max > 0, lam_max, 1.0), np.inf)
    T = np.minimum(t_star, horizon)
    c0, c_contract, c_grow, c_blow = _COEF
    return (
        c0
        + c_contract * np.log1p(np.abs(lam_min) * T)
        + c_grow * np.log1p(np.maximum(lam_max, 0.0) * T)
        + c_blow * (t_star < horizon)
    )
