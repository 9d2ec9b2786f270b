"""Linear attention's second moment: the softmax Riccati equation with `P = Σ + ααᵀ` in place of `Σ` (derived).

Linear attention `Γ_μ(x) = (1/n) Σ_j β(y_jᵀAx) V y_j = βV P A x` with `P = E_μ[yyᵀ] = Σ + ααᵀ`
(spec dynamics.md §1, §2) is linear in `x` for any measure `μ`, so the mean and covariance of any
`μ` (Gaussian or empirical) follow `α' = Mα`, `Σ' = MΣ + ΣMᵀ`, `M = βVPA`, and the second
moment follows `P' = MP + PMᵀ = β(VPAP + PAᵀPVᵀ)`: the softmax covariance equation in `P`.
The mean enters the covariance through `P` (α and Σ coupled), and with `V = vI` the closed
forms of softmax (spec §3) apply to `P`:

- :func:`linear_second_moment_closed_form`: `P(t) = (P0⁻¹ − βvt(A + Aᵀ))⁻¹` (singular-safe form).
- :func:`linear_blowup_time`: `t* = 1/λ_max(βv P0^{1/2}(A + Aᵀ)P0^{1/2})`, `inf` if none; it
  depends on the mean through `P0 = Σ0 + α0α0ᵀ` (for softmax it does not).
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ..errors import ParameterError
from .closed_form import blowup_time_closed_form, softmax_covariance_closed_form

__all__ = ["linear_second_moment_closed_form", "linear_blowup_time"]


def _second_moment(mean0, cov0):
    mean0, cov0 = jnp.asarray(mean0), jnp.asarray(cov0)
    if mean0.shape[-1:] != cov0.shape[-1:] or cov0.shape[-2:] != (mean0.shape[-1],) * 2:
        raise ParameterError(f"`mean0` must be (…, d) and `cov0` (…, d, d); got {mean0.shape} and {cov0.shape}.")
    return cov0 + mean0[..., :, None] * mean0[..., None, :]


def linear_second_moment_closed_form(
    mean0: Float[ArrayLike, "*#batch d"], cov0: Float[ArrayLike, "*#batch d d"], A: Float[ArrayLike, "*#batch d d"],
    v: Float[ArrayLike, "*#batch"], t: Float[ArrayLike, "*#batch"], beta: Float[ArrayLike, "*#batch"] = 1.0,
) -> Float[Array, "*#batch d d"]:  # fmt: skip
    """`P(t) = Σ(t) + α(t)α(t)ᵀ` of linear attention with `V = vI` (derived).

    **Arguments:** `mean0` `(…, d)` and `cov0` `(…, d, d)` the initial mean and covariance (any
    measure: the moment equations are closed for linear attention); `A` `(…, d, d)`; `v`, `t`, `beta` scalars.

    **Returns:** `P(t)`, `(…, d, d)`; `+inf` entries for `t >= t*` (past the blow-up).

    **Raises:** :class:`~hassejax.errors.ParameterError` for mismatched shapes.

    Source: (derived) `P' = β(VPAP + PAᵀPVᵀ)` and the softmax closed form of spec §3 applied to `P`.

    **Example:** `α0 = e_1`, `Σ0 = I`, `A = −I`, `v = 1`: `P0 = diag(2, 1)`, `P(t) = (P0⁻¹ + 2t)⁻¹`:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics.linear_moments import linear_second_moment_closed_form
    >>> p = linear_second_moment_closed_form(jnp.array([1.0, 0.0]), jnp.eye(2), -jnp.eye(2), 1.0, 0.25)
    >>> jnp.round(p, 6).tolist()
    [[1.0, 0.0], [0.0, 0.666667]]

    ```
    """
    return softmax_covariance_closed_form(_second_moment(mean0, cov0), A, v, t, beta)


def linear_blowup_time(
    mean0: Float[ArrayLike, "*#batch d"], cov0: Float[ArrayLike, "*#batch d d"], A: Float[ArrayLike, "*#batch d d"],
    v: Float[ArrayLike, "*#batch"], beta: Float[ArrayLike, "*#batch"] = 1.0,
) -> Float[Array, "*#batch"]:  # fmt: skip
    """Blow-up time of linear attention with `V = vI`: `1/λ_max(βv P0^{1/2}(A + Aᵀ)P0^{1/2})`, `P0 = Σ0 + α0α0ᵀ`.

    **Arguments:** as :func:`linear_second_moment_closed_form` (no `t`).

    **Returns:** `t*`, `(…)`; `inf` when `λ_max <= 0` (no finite-time blow-up).

    **Raises:** :class:`~hassejax.errors.ParameterError` for mismatched shapes or a `cov0` that is
    not symmetric PSD (concrete inputs).

    Source: (derived) as :func:`linear_second_moment_closed_form`.

    **Example:** `A = I`, `v = 1`, `Σ0 = I/2`: `t* = 1` at mean 0, `1/3` at `α0 = e_1` (`P0 = diag(3/2, 1/2)`):

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics.linear_moments import linear_blowup_time
    >>> [round(float(linear_blowup_time(m, jnp.eye(2) / 2, jnp.eye(2), 1.0)), 6) for m in (jnp.zeros(2), jnp.eye(2)[0])]
    [1.0, 0.333333]

    ```
    """
    return blowup_time_closed_form(_second_moment(mean0, cov0), A, v, beta)
