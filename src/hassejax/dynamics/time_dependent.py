"""Softmax with a depth-dependent scalar value matrix `V = v(t)I`: closed forms (derived).

With `V = v(t)I` the softmax covariance equation (spec dynamics.md §3) reads
`(Σ⁻¹)' = −βv(t)(A + Aᵀ)`, so `Σ(t)` depends on the schedule only through its integral
`w(t) = ∫_0^t v`: `Σ(t) = Σ0^{1/2}(I − βw(t)N)⁻¹Σ0^{1/2}`, `N = Σ0^{1/2}(A + Aᵀ)Σ0^{1/2}`, finite
while `βw(t)λ < 1` for every eigenvalue `λ` of `N`. For a schedule given per layer
(:class:`~hassejax.dynamics.PiecewiseConstant`) `w` is piecewise linear and the blow-up time
is the first root of `βw(t)λ_max = 1` (or `βw(t)λ_min = 1` when `w` goes negative and `λ_min < 0`).
A schedule whose integral stays below `1/(βλ_max)` never blows up, whatever `λ_max > 0`.

Host-side NumPy, for piecewise-constant `v`:

- :func:`schedule_integral`: `w(t)`.
- :func:`scalar_schedule_covariance`: `Σ(t)`.
- :func:`scalar_schedule_blowup_time`: `t*` (``inf`` if none).
"""

from __future__ import annotations

import numpy as np
from jaxtyping import ArrayLike, Float

from ..errors import ParameterError
from .params import PiecewiseConstant

__all__ = ["schedule_integral", "scalar_schedule_covariance", "scalar_schedule_blowup_time"]


def _segments(v: PiecewiseConstant) -> tuple[np.ndarray, np.ndarray]:
    """Breakpoints `0 = b_0 < b_1 < … < b_K` (then `+inf`) and the rate on each of the `K + 1` pieces, from `t = 0`."""
    if not isinstance(v, PiecewiseConstant) or v.shape != ():
        raise ParameterError(f"`v` must be a scalar PiecewiseConstant (values of shape (L,)); got {v!r}.")
    vals = np.asarray(v.values, float)
    edges = np.asarray(v.t_edges, float)
    # value on (-inf, e_1) is vals[0], on [e_l, e_{l+1}) vals[l], on [e_L-1, inf) vals[-1]
    inner = edges[1:-1]
    rates_all = vals
    keep = inner > 0
    breaks = np.concatenate([[0.0], inner[keep]])
    first = int(np.sum(inner <= 0))  # the layer containing t = 0
    rates = rates_all[first : first + breaks.size]
    return breaks, rates


def schedule_integral(v: PiecewiseConstant, t: Float[ArrayLike, "*batch"]) -> Float[np.ndarray, "*batch"]:
    """`w(t) = ∫_0^t v(s) ds` of a scalar piecewise-constant schedule (exact), `t >= 0`.

    **Arguments:** `v`: a :class:`~hassejax.dynamics.PiecewiseConstant` with scalar values;
    `t`: times `>= 0`.

    **Returns:** float64 `w(t)`, the shape of `t`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for a non-scalar schedule or a negative `t`.

    Source: (derived).

    **Example:** `v = 1` on `[0, 1)`, `−1` after:

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics import PiecewiseConstant
    >>> from hassejax.dynamics.time_dependent import schedule_integral
    >>> schedule_integral(PiecewiseConstant(np.array([1.0, -1.0])), np.array([0.5, 1.0, 3.0])).tolist()
    [0.5, 1.0, -1.0]

    ```
    """
    breaks, rates = _segments(v)
    t = np.asarray(t, float)
    if np.any(t < 0):
        raise ParameterError(f"`t` must be >= 0; got min {float(t.min())}.")
    ends = np.concatenate([breaks[1:], [np.inf]])
    overlap = np.clip(np.minimum(t[..., None], ends) - breaks, 0.0, None)
    return np.asarray(np.sum(overlap * rates, axis=-1))


def scalar_schedule_covariance(
    Sigma0: Float[ArrayLike, "d d"], A: Float[ArrayLike, "d d"], v: PiecewiseConstant, t: Float[ArrayLike, " T"] | list[float],
    beta: float = 1.0,
) -> Float[np.ndarray, "T d d"]:  # fmt: skip
    """`Σ(t)` of softmax attention with `V = v(t)I` (derived; `+inf` entries past the blow-up).

    **Arguments:** `Sigma0` `(d, d)` symmetric PSD; `A` `(d, d)`; `v` a scalar
    :class:`~hassejax.dynamics.PiecewiseConstant`; `t` `(T,)` times `>= 0`; `beta` inverse temperature.

    **Returns:** float64 `(T, d, d)`.

    **Raises:** :class:`~hassejax.errors.ParameterError` as :func:`schedule_integral`, for
    non-square or mismatched matrices or a `Sigma0` that is not PSD.

    Source: (derived) spec dynamics.md §3 with `vt` replaced by `w(t) = ∫_0^t v`.

    **Example:** `Σ0 = I/2`, `A = I`, `v = 1` then `−1`: back to `Σ0` at `t = 2` (`w = 0`):

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics import PiecewiseConstant
    >>> from hassejax.dynamics.time_dependent import scalar_schedule_covariance
    >>> s = scalar_schedule_covariance(np.eye(2) / 2, np.eye(2), PiecewiseConstant(np.array([1.0, -1.0]) / 4), [1.0, 2.0])
    >>> np.round(s, 6).tolist()
    [[[0.666667, 0.0], [0.0, 0.666667]], [[0.5, 0.0], [0.0, 0.5]]]

    ```
    """
    w = schedule_integral(v, np.atleast_1d(np.asarray(t, float)))
    r, lam, vec = _scaled(Sigma0, A)
    d = r.shape[0]
    out = np.full((w.size, d, d), np.inf)
    for i, wi in enumerate(w):
        g = 1.0 - beta * wi * lam
        if np.all(g > 0):
            out[i] = r @ (vec / g) @ vec.T @ r
    return out


def _scaled(Sigma0, A):
    """`Σ0^{1/2}` and the eigen-decomposition of `N = Σ0^{1/2}(A + Aᵀ)Σ0^{1/2}`."""
    s0, a = np.asarray(Sigma0, float), np.asarray(A, float)
    if s0.ndim != 2 or a.shape != s0.shape or s0.shape[0] != s0.shape[1]:
        raise ParameterError(f"`Sigma0` and `A` must be (d, d) of one size; got {s0.shape} and {a.shape}.")
    ev, vec = np.linalg.eigh((s0 + s0.T) / 2)
    if ev[0] < -1e-12 * max(1.0, abs(ev[-1])):
        raise ParameterError(f"`Sigma0` must be positive semidefinite; got the eigenvalue {ev[0]:.3g}.")
    r = (vec * np.sqrt(np.clip(ev, 0.0, None))) @ vec.T
    lam, u = np.linalg.eigh(r @ (a + a.T) @ r)
    return r, lam, u


def scalar_schedule_blowup_time(
    Sigma0: Float[ArrayLike, "d d"], A: Float[ArrayLike, "d d"], v: PiecewiseConstant, beta: float = 1.0
) -> float:
    """First `t` with `βw(t)λ = 1` for an eigenvalue `λ` of `N = Σ0^{1/2}(A + Aᵀ)Σ0^{1/2}`; ``inf`` if none.

    **Arguments:** as :func:`scalar_schedule_covariance` (no `t`); the last layer's value holds for ever.

    **Returns:** `t*` (float, possibly ``inf``).

    **Raises:** :class:`~hassejax.errors.ParameterError` for a non-scalar schedule, non-square or
    mismatched matrices, a `Sigma0` that is not PSD.

    Source: (derived).

    **Example:** `Σ0 = I/2`, `A = I` (`λ = 1`): `v = 2` on `[0, 1)`, then `0`: `w = 2t` reaches 1 at `t = 1/2`;
    `v = 1/2` then `0`: `w` stops at `1/2`, no blow-up:

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics import PiecewiseConstant
    >>> from hassejax.dynamics.time_dependent import scalar_schedule_blowup_time
    >>> [round(scalar_schedule_blowup_time(np.eye(2) / 2, np.eye(2), PiecewiseConstant(np.array([a, 0.0]))), 9)
    ...  for a in (2.0, 0.5)]
    [0.5, inf]

    ```
    """
    _, lam, _ = _scaled(Sigma0, A)
    targets = [1.0 / (beta * x) for x in (lam[-1], lam[0]) if x != 0.0]
    breaks, rates = _segments(v)
    ends = np.concatenate([breaks[1:], [np.inf]])
    w0 = 0.0
    for b, e, rate in zip(breaks, ends, rates):
        hits = [b + (tg - w0) / rate for tg in targets if rate != 0.0 and (tg - w0) / rate >= 0.0]
        hits = [h for h in hits if h < e]
        if hits:
            return float(min(hits))
        if np.isfinite(e):
            w0 += rate * (e - b)
    return float("inf")
