"""Self-similar collapse `Σ(t) = S*/(t + τ)` of a covariance ODE homogeneous of degree 2 (derived).

When the covariance velocity is homogeneous of degree 2 in `Σ`, `F(cΣ) = c²F(Σ)` (softmax,
multi-head of softmax heads and linear attention, all at mean 0; spec dynamics.md §2, §3),
`Σ(t) = S/(t + τ)` solves `Σ' = F(Σ)` exactly iff `S + F(S) = 0`. In the log-time variables
`s = log t`, `S(s) = tΣ(t)` the ODE reads `dS/ds = S + F(S)`, so a profile `S*` whose
Jacobian `J = I + DF(S*)` (on symmetric matrices) has eigenvalues of negative real part attracts
nearby trajectories: `tΣ(t) → S*`, a collapse to zero like `1/t` with a fixed shape. The
eigenvalue `−1` always occurs (direction `S*` itself: the time shift `τ`).

- :func:`self_similar_profile`: Newton's method on `S + F(S) = 0` from a guess, the eigenvalues
  of `J` and their real parts (the exponents).
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ..errors import ParameterError, SolveError
from .attention import AbstractAttention
from .gaussian import _moment_derivatives_unchecked

__all__ = ["SelfSimilarProfile", "self_similar_profile"]


class SelfSimilarProfile(NamedTuple):
    """A profile `S*` with `S* + F(S*) = 0`: `Σ(t) = S*/(t + τ)` solves the covariance ODE.

    - `profile`: `(d, d)` symmetric `S*`.
    - `exponents`: `(d(d+1)/2,)` real parts of the eigenvalues of `J = I + DF(S*)` on symmetric
      matrices, descending (all negative: `S*` attracts in log time `s = log t`).
    - `residual`: `‖S* + F(S*)‖_F / ‖S*‖_F`.
    - `iterations`: Newton steps taken.
    - `eigenvalues`: `(m,)` complex eigenvalues of `J`, in the order of `exponents` (their real
      parts); a pair `a ± bi` makes `tΣ(t)` spiral into `S*`, one turn per `2π/b` in `log t`.
    """

    profile: Float[Array, "d d"]
    exponents: Float[Array, " m"]
    residual: float
    iterations: int
    eigenvalues: Array | None = None


@eqx.filter_jit
def _velocity(model, cov):
    """`F(Σ)`: the covariance velocity of `model` at mean 0, `t = 0`."""
    return _moment_derivatives_unchecked(model, 0.0, jnp.zeros(model.d, cov.dtype), cov)[1]


def _pack(d: int):
    iu = np.triu_indices(d)

    def to_mat(v):
        m = jnp.zeros((d, d), v.dtype).at[iu].set(v)
        return m + m.T - jnp.diag(jnp.diag(m))

    return (lambda m: m[iu]), to_mat


def _residual_map(model):
    """`v ↦ S + F(S)` on the upper-triangle coordinates `v` of a symmetric `S`."""
    to_vec, to_mat = _pack(model.d)
    return (lambda v: to_vec(to_mat(v) + _velocity(model, to_mat(v)))), to_vec, to_mat


@eqx.filter_jit
def _jacobian(model, s):
    g, to_vec, _ = _residual_map(model)
    return jax.jacfwd(g)(to_vec(s))


@eqx.filter_jit
def _newton_step(model, s):
    g, to_vec, to_mat = _residual_map(model)
    v = to_vec(s)
    v = v - jnp.linalg.solve(jax.jacfwd(g)(v), g(v))
    m = to_mat(v)
    return m, jnp.linalg.norm(m + _velocity(model, m)) / jnp.linalg.norm(m)


def self_similar_profile(
    model: AbstractAttention, guess: Float[ArrayLike, "d d"], *, tol: float = 1e-12, max_iter: int = 50
) -> SelfSimilarProfile:
    """Solve `S + F(S) = 0` by Newton's method, `F(Σ)` the covariance velocity of `model` at mean 0.

    **Arguments:**

    - `model`: an attention kernel with a Gaussian map whose covariance velocity at mean 0 is
      homogeneous of degree 2 in `Σ` (softmax, a multi-head of softmax heads, linear;
      checked at `guess`: `F(2S) = 4F(S)`), time-independent (evaluated at `t = 0`).
    - `guess`: `(d, d)` symmetric starting point, e.g. `tΣ(t)` of a solve at a large `t`.
    - `tol`: stop when `‖S + F(S)‖_F ≤ tol · ‖S‖_F`.
    - `max_iter`: Newton step budget.

    **Returns:** a :class:`SelfSimilarProfile`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for a `guess` that is not a finite
    symmetric `(d, d)` matrix or a `model` whose `F` is not homogeneous of degree 2;
    :class:`~hassejax.errors.SolveError` when Newton's method does not reach `tol` within `max_iter`.

    Source: (derived); the exact solution `Σ(t) = (Σ0⁻¹ + 2t I)⁻¹ → I/(2t)` of softmax with `V = I`,
    `A = −I` (spec dynamics.md §3) gives `S* = I/2`.

    **Example:**

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Softmax
    >>> from hassejax.dynamics.self_similar import self_similar_profile
    >>> p = self_similar_profile(Softmax(V=jnp.eye(2), A=-jnp.eye(2)), jnp.eye(2))
    >>> p.profile.round(6).tolist(), p.exponents.round(6).tolist()
    ([[0.5, 0.0], [0.0, 0.5]], [-1.0, -1.0, -1.0])

    ```
    """
    s = np.asarray(guess, float)
    if s.ndim != 2 or s.shape[0] != s.shape[1] or s.shape[0] != model.d:
        raise ParameterError(f"`guess` must be a ({model.d}, {model.d}) matrix; got shape {s.shape}.")
    if not np.all(np.isfinite(s)) or not np.allclose(s, s.T):
        raise ParameterError("`guess` must be a finite symmetric matrix; got a non-symmetric or non-finite one.")
    s_j = jnp.asarray(s)
    f1, f2 = (np.asarray(_velocity(model, c)) for c in (s_j, 2.0 * s_j))
    if not np.allclose(f2, 4.0 * f1, rtol=1e-8, atol=1e-12 * max(1.0, float(np.abs(f1).max()))):
        raise ParameterError(
            "`model` must have a covariance velocity homogeneous of degree 2 (F(2S) = 4F(S), e.g. softmax); "
            f"got |F(2S) − 4F(S)| up to {float(np.abs(f2 - 4 * f1).max()):.3g} at `guess`."
        )
    residual, iterations = np.inf, 0
    while residual > tol:
        if iterations == max_iter:
            raise SolveError(f"Newton's method on S + F(S) = 0 did not reach tol = {tol:g} in {max_iter} steps "
                             f"(relative residual {residual:.3g}); try another `guess`.")  # fmt: skip
        s_j, res = _newton_step(model, s_j)
        residual, iterations = float(res), iterations + 1
    eig = np.linalg.eigvals(np.asarray(_jacobian(model, s_j)))
    eig = eig[np.lexsort((np.imag(eig), -np.real(eig)))]  # real part descending, then imaginary part
    return SelfSimilarProfile(s_j, jnp.asarray(np.real(eig)), residual, iterations, jnp.asarray(eig))
