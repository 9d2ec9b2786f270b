"""The initial covariance rate of tokens under a head against the Gaussian closure at their own moments (host side)."""

from __future__ import annotations

import dataclasses

import numpy as np
from jaxtyping import ArrayLike, Float

from ...errors import ParameterError
from ._kernel import LowRankSoftmax

__all__ = ["InitialRates", "initial_rates"]


@dataclasses.dataclass(frozen=True)
class InitialRates:
    """`Σ'(0)` of the pooled particle system against the Gaussian closure (see :func:`initial_rates`).

    - `relative_error`: `‖Σ'_p − Σ'_G‖_F / ‖Σ'_G‖_F`;
    - `trace_rate_particles`, `trace_rate_gaussian`: `tr Σ'_p`, `tr Σ'_G`;
    - `logit_std`: root-mean over queries of the variance of the logits `(Qx_i)·(Kx_j)` over keys;
    - `median_effective_keys`: median over queries of `1/Σ_j w_ij²` (the Gaussian closure needs many);
    - `n`: the number of tokens.

    Source: (derived) from spec dynamics.md §1 (particles) and §2 (`Σ' = MΣ + ΣMᵀ`, `M = VΣA`), as
    :func:`initial_rates`.

    **Example:** the head `A = V = diag(1, 0)` on three tokens with `Σ₀₀ = 2/3`: the closure's rate is
    `tr Σ'_G = 2 Σ₀₀² = 8/9`; the three tokens' own rate differs by 14 %:

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics import LowRankSoftmax
    >>> from hassejax.dynamics.low_rank import initial_rates
    >>> e = np.array([[1.0, 0.0]])
    >>> r = initial_rates(LowRankSoftmax(e, e, e, e.T), np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]]))
    >>> r.n, round(r.trace_rate_gaussian, 6), round(r.relative_error, 3)
    (3, 0.888889, 0.137)

    ```
    """

    relative_error: float
    trace_rate_particles: float
    trace_rate_gaussian: float
    logit_std: float
    median_effective_keys: float
    n: int

    def as_dict(self) -> dict:
        """The fields as a ``dict`` (in field order)."""
        return dataclasses.asdict(self)


def initial_rates(model: LowRankSoftmax, x: Float[ArrayLike, "n d"]) -> InitialRates:
    """`Σ'(0)` of the pooled particle system on tokens `x` against the Gaussian closure at their own moments.

    Particles (exact for the empirical measure `μ = (1/n) Σ_i δ_{x_i}`): `Σ'_p = C + Cᵀ`,
    `C = Cov(Γ(x_i), x_i)`, `Γ(x_i) = V Σ_j softmax_j((Qx_i)·(Kx_j)) x_j`; Gaussian closure:
    `Σ'_G = MΣ + ΣMᵀ`, `M = VΣA` (spec dynamics.md §2) with the tokens' own covariance `Σ`.
    Host side, float64 NumPy, `O(n² k + n d k + d² k)`.

    **Arguments:** `model`: an unbatched :class:`~hassejax.dynamics.LowRankSoftmax`; `x`: `(n, d)` tokens.

    **Returns:** :class:`InitialRates`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for `x` not of shape `(n, d)` with `n >= 1`.

    Source: (derived) from spec dynamics.md §1, §2.

    **Example:** with `A = 0` the particle rate is the Gaussian one exactly:

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics import LowRankSoftmax
    >>> from hassejax.dynamics.low_rank import initial_rates
    >>> e = np.array([[1.0, 0.0]])
    >>> r = initial_rates(LowRankSoftmax(np.zeros((1, 2)), np.zeros((1, 2)), e, e.T), np.array([[1.0, 0.0], [0.0, 1.0]]))
    >>> r.relative_error, r.trace_rate_particles, r.median_effective_keys
    (0.0, 0.0, 2.0)

    ```
    """
    q, kk, wv, wo = (np.asarray(a) for a in (model.Q, model.K, model.W_V, model.W_O))
    x = np.asarray(x)
    if x.ndim != 2 or x.shape[1] != q.shape[-1] or x.shape[0] < 1:
        raise ParameterError(f"`x` must have shape (n, d) with n >= 1 and d = {q.shape[-1]}; got {x.shape}.")
    n = len(x)
    xc = x - x.mean(0)
    cov = xc.T @ xc / n
    logits = (x @ q.T) @ (x @ kk.T).T  # [i, j]: query i, key j
    w = np.exp(logits - logits.max(1, keepdims=True))
    w /= w.sum(1, keepdims=True)
    gamma = ((w @ x) @ wv.T) @ wo.T
    gc = gamma - gamma.mean(0)
    rate_p = gc.T @ xc / n
    rate_p = rate_p + rate_p.T
    m = wo @ ((wv @ cov @ kk.T) @ q)
    rate_g = m @ cov + cov @ m.T
    n_eff = 1.0 / np.sum(w**2, axis=1)
    den = np.linalg.norm(rate_g)
    return InitialRates(
        relative_error=float(np.linalg.norm(rate_p - rate_g) / den)
        if den > 0
        else float(np.linalg.norm(rate_p - rate_g)),
        trace_rate_particles=float(np.trace(rate_p)),
        trace_rate_gaussian=float(np.trace(rate_g)),
        logit_std=float(np.sqrt(np.mean(np.var(logits, axis=1)))),
        median_effective_keys=float(np.median(n_eff)),
        n=n,
    )
