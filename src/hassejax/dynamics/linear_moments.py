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
- :func:`sigmoid_linearisation`: sigmoid attention to first order in the logits,
  `σ(z + b) ≈ σ(b) + σ'(b)z`: `Γ(x) ≈ σ(b)Vȳ + σ'(b)·(linear attention)`, a kernel that preserves
  Gaussians (a :class:`~hassejax.dynamics.MultiHead` of a uniform-weight head and a linear head).
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ..errors import ParameterError
from .attention import Linear, MultiHead, Softmax
from .closed_form import blowup_time_closed_form, softmax_covariance_closed_form

__all__ = ["linear_second_moment_closed_form", "linear_blowup_time", "sigmoid_linearisation"]


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
    >>> import numpy as np
    >>> from hassejax.dynamics.linear_moments import linear_second_moment_closed_form
    >>> p = linear_second_moment_closed_form(jnp.array([1.0, 0.0]), jnp.eye(2), -jnp.eye(2), 1.0, 0.25)
    >>> np.asarray(p, dtype=float).round(6).tolist()  # rounded in float64: the same print in float32
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


def sigmoid_linearisation(
    V: Float[ArrayLike, "d d"], A: Float[ArrayLike, "d d"], beta: float = 1.0, bias: float = 0.0
) -> MultiHead:
    """Sigmoid attention `(1/n) Σ_j σ(βy_jᵀAx + b) V y_j` to first order in the logits (derived).

    `σ(z + b) ≈ σ(b) + σ'(b)z` gives `Γ(x) ≈ σ(b)Vȳ + σ'(b)(1/n) Σ_j β(y_jᵀAx)Vy_j`: a uniform-weight
    head (softmax with `A = 0`, value `σ(b)V`) plus linear attention with value `σ'(b)V`. Both are
    affine on Gaussians, so the sum has a Gaussian map (`M = σ'(b)βV(Σ + ααᵀ)A`, `c = σ(b)Vα`), and
    its moment equations are exact for any measure.

    **Arguments:** `V`, `A`: `(d, d)`; `beta`: inverse temperature; `bias`: the sigmoid's bias `b`.

    **Returns:** a :class:`~hassejax.dynamics.MultiHead` of the two heads.

    **Raises:** :class:`~hassejax.errors.ParameterError` for matrices that are not `(d, d)` of one size.

    Source: (derived) Taylor expansion of the sigmoid in spec dynamics.md §1.

    **Example:** at `b = 0`, `σ = 1/2`, `σ' = 1/4`:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics.linear_moments import sigmoid_linearisation
    >>> m = sigmoid_linearisation(jnp.eye(2), jnp.eye(2))
    >>> m.velocity(0.0, jnp.array([[1.0, 0.0], [-1.0, 0.0]])).tolist()
    [[0.25, 0.0], [-0.25, 0.0]]

    ```
    """
    v, a = jnp.asarray(V), jnp.asarray(A)
    if v.ndim != 2 or v.shape[0] != v.shape[1] or a.shape != v.shape:
        raise ParameterError(f"`V` and `A` must be (d, d) of one size; got {v.shape} and {a.shape}.")
    s = 1.0 / (1.0 + jnp.exp(-jnp.asarray(bias, v.dtype)))
    return MultiHead([Softmax(V=s * v, A=jnp.zeros_like(a)), Linear(V=s * (1.0 - s) * v, A=a, beta=beta)])
