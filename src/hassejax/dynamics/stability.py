"""Stability of softmax particle dynamics in `W2`: an explicit Grönwall constant `C(t)` (derived).

For two empirical measures with `n` points each, `μ0 = (1/n) Σ δ_{x_i}`, `ν0 = (1/n) Σ δ_{y_i}`,
evolved by unmasked single-head softmax attention `ẋ_i = V Σ_j w_ij x_j`,
`w_ij = softmax_j(β x_jᵀ A x_i)`, the solutions satisfy `W2(μ_t, ν_t) <= C(t) W2(μ0, ν0)` with

    C(t) = exp(∫_0^t L(R(s)) ds),   L(R) = ‖V‖ (‖βA‖R² + (1 + 2‖βA‖R²) exp(‖βA‖R²)),

`R(s)` a bound on every `|x_i(s)|`, `|y_i(s)|` (derived; the paper proves a stability estimate of
this kind for compactly supported data; its constant is not reproduced here). Derivation:
relabel `y` by an optimal assignment at time 0, so `W2(μ0, ν0) = D(0)` with
`D² = (1/n) Σ ‖x_i − y_i‖²`, and `W2(μ_t, ν_t) <= D(t)`. The velocity map `F: R^{nd} → R^{nd}`
has Jacobian `J = diag(Q_i) + [K_ij]`, `Q_i = V Cov_{w_i}(x) βA` (`‖Q_i‖ <= ‖V‖‖βA‖R²`) and
`K_ij = V w_ij (I + (x_j − m_i)(βA x_i)ᵀ)` (`‖K_ij‖ <= ‖V‖ w_ij (1 + 2‖βA‖R²)`); rows of `w`
sum to 1 and, since logits lie in `[−‖βA‖R², ‖βA‖R²]`, `w_ij <= exp(2‖βA‖R²)/n`, so columns sum
to at most `exp(2‖βA‖R²)` and the Schur test gives `‖[K_ij]‖ <= ‖V‖(1 + 2‖βA‖R²)exp(‖βA‖R²)`.
The segment between `X` and `Y` stays in the ball of radius `R`, so `D' <= L(R) D`.

Between two save times the radius grows at most like `exp(‖V‖ h)` (`|ẋ_i| <= ‖V‖ max_j |x_j|`),
which :func:`log_stability_constant` uses to integrate `L` from radii measured at save times
only, so the constant is an upper bound (up to the solver's error), not a quadrature.

Reference: V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, "A Unified Perspective on the
Dynamics of Deep Transformers", arXiv:2501.18322 (well-posedness and stability for compactly
supported initial data).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float

from ..errors import ParameterError
from .attention import Softmax
from .particles import particle_velocity

__all__ = ["softmax_lipschitz", "log_stability_constant", "log_linearised_growth"]


def _matrix(x, name: str) -> np.ndarray:
    x = np.asarray(x, float)
    if x.ndim != 2 or x.shape[0] != x.shape[1] or not np.all(np.isfinite(x)):
        raise ParameterError(f"`{name}` must be a finite square matrix (d, d); got shape {x.shape}.")
    return x


def softmax_lipschitz(
    V: Float[ArrayLike, "d d"], A: Float[ArrayLike, "d d"], radius: Float[ArrayLike, "*k"], beta: float = 1.0
) -> Float[np.ndarray, "*k"]:
    """`L(R)`: a Lipschitz constant of softmax particle velocities on tokens with `|x_i| <= R` (derived).

    `‖F(X) − F(Y)‖ <= L(R) ‖X − Y‖` for all token sets `X, Y ∈ R^{n×d}` in the ball of radius
    `R` (any `n`, Frobenius norm), `F(X)_i = V Σ_j softmax_j(β x_jᵀ A x_i) x_j`:
    `L(R) = ‖V‖ (‖βA‖R² + (1 + 2‖βA‖R²) exp(‖βA‖R²))`, `‖·‖` the spectral norm (see the module
    docstring for the derivation).

    **Arguments:**

    - `V`: `(d, d)` float value matrix.
    - `A`: `(d, d)` float interaction matrix (logit of query `x` against key `y` is `β yᵀAx`).
    - `radius`: `(*k)` float radii `R >= 0`.
    - `beta`: inverse temperature.

    **Returns:** `(*k)` float64 NumPy array of constants (`inf` where `exp` overflows).

    **Raises:** :class:`~hassejax.errors.ParameterError` naming `V`, `A` or `radius` for a
    non-square or non-finite matrix or a negative or non-finite radius.

    Source: (derived), module docstring.

    **Example:** with `A = 0` the velocity is `V x̄` (Lipschitz constant `‖V‖`):

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.stability import softmax_lipschitz
    >>> float(softmax_lipschitz(2.0 * np.eye(2), np.zeros((2, 2)), 3.0))
    2.0

    ```
    """
    V, A = _matrix(V, "V"), _matrix(A, "A")
    r = np.asarray(radius, float)
    if not np.all(np.isfinite(r)) or np.any(r < 0):
        raise ParameterError(f"`radius` must be finite and >= 0; got {r!r}.")
    nv, na = np.linalg.norm(V, 2), abs(float(beta)) * np.linalg.norm(A, 2)
    with np.errstate(over="ignore"):
        return np.asarray(nv * (na * r**2 + (1.0 + 2.0 * na * r**2) * np.exp(na * r**2)))


def log_stability_constant(
    ts: Float[ArrayLike, " k"], radii: Float[ArrayLike, " k"], V: Float[ArrayLike, "d d"],
    A: Float[ArrayLike, "d d"], beta: float = 1.0,
) -> Float[np.ndarray, " k"]:  # fmt: skip
    """`log C(t_k)`, `C(t) = exp(∫_{t_0}^t L(R(s)) ds)`, from radii measured at save times (derived).

    On `[t_k, t_{k+1}]` (step `h`) the tokens' radius is at most `R_k exp(‖V‖h)`, so
    `log C(t_{k+1}) = log C(t_k) + h L(R_k exp(‖V‖h))` is an upper bound of the integral, and
    `W2(μ_t, ν_t) <= C(t) W2(μ_{t_0}, ν_{t_0})` for two `n`-point softmax particle systems
    whose tokens all have norm at most `radii` at the save times.

    **Arguments:**

    - `ts`: `(k,)` increasing save times.
    - `radii`: `(k,)` the largest token norm over both systems at each save time.
    - `V`, `A`, `beta`: the softmax parameters (as :class:`~hassejax.dynamics.Softmax`).

    **Returns:** `(k,)` float64 `log C(t_k)` (natural log, 0 at `t_0`, `inf` on overflow).

    **Raises:** :class:`~hassejax.errors.ParameterError` naming `ts` or `radii` for shapes that
    differ, times that do not increase, or bad radii; `V`, `A` as :func:`softmax_lipschitz`.

    Source: (derived), Grönwall's lemma on `D(t)`; module docstring.

    **Example:** `A = 0`, `V = I`: `L = 1`, so `C(t) = e^t`:

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.stability import log_stability_constant
    >>> ts, radii = np.array([0.0, 0.5, 1.0]), np.array([1.0, 2.0, 3.0])
    >>> np.round(log_stability_constant(ts, radii, np.eye(2), np.zeros((2, 2))), 12).tolist()
    [0.0, 0.5, 1.0]

    ```
    """
    ts, r = np.asarray(ts, float), np.asarray(radii, float)
    if ts.ndim != 1 or ts.shape != r.shape or len(ts) < 1:
        raise ParameterError(
            f"`ts` and `radii` must be 1-D of the same length >= 1; got shapes {ts.shape} and {r.shape}."
        )
    h = np.diff(ts)
    if not np.all(np.isfinite(ts)) or np.any(h <= 0):
        raise ParameterError("`ts` must be finite and strictly increasing.")
    nv = np.linalg.norm(_matrix(V, "V"), 2)
    with np.errstate(over="ignore"):
        steps = h * softmax_lipschitz(V, A, r[:-1] * np.exp(nv * h), beta)
    return np.concatenate([[0.0], np.cumsum(steps)])


def log_linearised_growth(
    model: Softmax, xs: Float[ArrayLike, "k n d"], ts: Float[ArrayLike, " k"]
) -> Float[np.ndarray, " k"]:
    """`∫ μ(J(X(s))) ds` (trapezoid), `μ` the logarithmic norm of the velocity Jacobian along a solution (derived).

    The tangent dynamics `δX' = J(X(t)) δX` satisfy `‖δX(t)‖ <= exp(∫ μ(J)) ‖δX(0)‖`,
    `μ(J) = λ_max((J + Jᵀ)/2)`: to first order in the perturbation, this bounds the growth of
    the coupling distance between a solution and a nearby one (an estimate, not a bound for a
    finite perturbation; the integral is a trapezoid over the save times).

    **Arguments:**

    - `model`: an unbatched :class:`~hassejax.dynamics.Softmax` (any kernel with a velocity works).
    - `xs`: `(k, n, d)` the solution at the save times.
    - `ts`: `(k,)` increasing save times.

    **Returns:** `(k,)` float64 NumPy array, 0 at `ts[0]`.

    **Raises:** :class:`~hassejax.errors.ParameterError` naming `xs` or `ts` for shapes that
    do not match.

    Source: (derived) the logarithmic-norm bound of linear ODEs (Dahlquist 1958).

    **Example:** `A = 0`, `V = −I`: `J` maps `δX ↦ −mean(δX)`, so `μ(J) = 0`:

    ```python
    >>> import jax.numpy as jnp, numpy as np
    >>> from hassejax.dynamics import Softmax
    >>> from hassejax.dynamics.stability import log_linearised_growth
    >>> xs = jnp.ones((2, 3, 2))
    >>> model = Softmax(V=-jnp.eye(2), A=jnp.zeros((2, 2)))
    >>> np.round(log_linearised_growth(model, xs, np.array([0.0, 1.0])), 12).tolist()
    [0.0, 0.0]

    ```
    """
    xs = jnp.asarray(xs)
    ts = np.asarray(ts, float)
    if xs.ndim != 3 or ts.shape != (xs.shape[0],):
        raise ParameterError(f"`xs` must be (k, n, d) and `ts` (k,); got shapes {xs.shape} and {ts.shape}.")
    if np.any(np.diff(ts) <= 0):
        raise ParameterError("`ts` must be strictly increasing.")
    J = np.asarray(_jacobians(model, ts, xs), float)
    rates = np.linalg.eigvalsh(0.5 * (J + np.swapaxes(J, -1, -2)))[:, -1]  # LAPACK: XLA's CPU eigh is slow here
    return np.concatenate([[0.0], np.cumsum(0.5 * (rates[1:] + rates[:-1]) * np.diff(ts))])


@eqx.filter_jit
def _jacobians(model, ts, xs):
    def one(t, x):
        n, d = x.shape
        return jax.jacfwd(lambda z: particle_velocity(model, t, z.reshape(n, d)).reshape(-1))(x.reshape(-1))

    return jax.vmap(one)(jnp.asarray(ts, xs.dtype), xs)
