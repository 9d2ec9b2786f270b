"""Linear self-attention (spec dynamics.md §1, §2)."""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Bool, Float, Real

from ..params import resolve
from ._base import AbstractBilinearAttention, TimeParam, bilinear_params, mean_weights

__all__ = ["Linear"]


class Linear(AbstractBilinearAttention):
    """Linear attention `Γ_μ(x_i) = (1/n) Σ_j β(y_jᵀAx_i) V y_j` (spec dynamics.md §1).

    Under a mask `1/n` becomes one over the number of allowed keys of row `i` (an empty row
    gets `Γ = 0`). On `μ = N(α, Σ)`: `Γ_μ(x) = Mx` with `M = βV(Σ + ααᵀ)A`, `c = 0`
    (derived, spec §2; α and Σ are coupled).

    **Arguments** (arrays, callables of `t` or
    :class:`~hassejax.dynamics.PiecewiseConstant`; leading batch axes allowed outside a
    solve):

    - `V`: `(d, d)` value matrix.
    - `A`: `(d, d)` interaction matrix, or `Q`, `K`: `(k, d)` with `A = KᵀQ`.
    - `beta`: scalar factor of the logits (default 1).

    **Raises:** :class:`~hassejax.errors.ParameterError` naming the field for bad shapes
    (as :class:`Softmax`).

    **Example:** two tokens `±e_1` with `A = V = I`: `Γ(x_i) = ½ Σ_j (y_j·x_i) y_j = x_i`:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Linear
    >>> model = Linear(V=jnp.eye(2), A=jnp.eye(2))
    >>> model.velocity(0.0, jnp.array([[1.0, 0.0], [-1.0, 0.0]])).tolist()
    [[1.0, 0.0], [-1.0, 0.0]]
    >>> M, c = model.gaussian_affine(0.0, jnp.array([1.0, 0.0]), jnp.eye(2))
    >>> M.tolist(), c.tolist()
    ([[2.0, 0.0], [0.0, 1.0]], [0.0, 0.0])

    ```
    """

    def __init__(
        self,
        V: Real[ArrayLike, "... d d"] | TimeParam,
        A: Real[ArrayLike, "... d d"] | TimeParam | None = None,
        Q: Real[ArrayLike, "... k d"] | TimeParam | None = None,
        K: Real[ArrayLike, "... k d"] | TimeParam | None = None,
        beta: Real[ArrayLike, "*_batch"] | TimeParam = 1.0,
    ):
        self.V, self.A, self.Q, self.K, self.beta = bilinear_params(V, A, Q, K, beta, "Linear")

    def weights(
        self,
        t: Real[ArrayLike, ""],
        x: Float[Array, "m d"],
        keys: Float[Array, "n d"] | None = None,
        mask: Bool[Array, "m n"] | None = None,
    ) -> Float[Array, "m n"]:
        """`W_ij = β(y_jᵀAx_i) / n_i` on the allowed keys (`n_i` their number), 0 elsewhere."""
        y = x if keys is None else keys
        return mean_weights(self.logits(t, x, y), mask)

    def gaussian_affine(
        self,
        t: Real[ArrayLike, ""],
        mean: Float[Array, " d"],
        cov: Float[Array, "d d"],
        factor: Float[Array, "d r"] | None = None,
    ) -> tuple[Float[Array, "d d"], Float[Array, " d"]]:
        """`M = βV(Σ + ααᵀ)A`, `c = 0` (derived; spec dynamics.md §2)."""
        a = self.interaction(t)
        return resolve(self.beta, t) * self.value(t) @ (cov + jnp.outer(mean, mean)) @ a, jnp.zeros_like(mean)
