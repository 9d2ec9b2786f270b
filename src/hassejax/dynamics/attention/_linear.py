"""Linear self-attention (spec dynamics.md §1, §2)."""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp

from ._base import AbstractBilinearAttention, mean_weights
from ._shapes import Factor, GaussianMap, KeyMask, Matrix, Mean, Time, Weights

__all__ = ["Linear"]


class Linear(AbstractBilinearAttention):
    """Linear attention `Γ_μ(x_i) = (1/n) Σ_j β(y_jᵀAx_i) V y_j` (spec dynamics.md §1).

    Under a mask `1/n` becomes one over the number of allowed keys of row `i` (an empty row
    gets `Γ = 0`). On `μ = N(α, Σ)`: `Γ_μ(x) = Mx` with `M = βV(Σ + ααᵀ)A`, `c = 0`
    (derived, spec §2; α and Σ are coupled).

    **Arguments** (arrays, callables of `t` or
    :class:`~hassejax.dynamics.PiecewiseConstant`; leading batch axes allowed
    for ``vmap`` (a call or a solve takes one kernel)):

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

    _row_wise: ClassVar[bool] = True

    def gaussian_affine(self, t: Time, mean: Mean, cov: Matrix, factor: Factor | None = None) -> GaussianMap:
        """`M = βV(Σ + ααᵀ)A`, `c = 0` (derived; spec dynamics.md §2)."""
        return self.bilinear_map(t, cov + jnp.outer(mean, mean)), jnp.zeros_like(mean)

    def gaussian_second_moment(self) -> bool:
        """True: `M` depends on `Σ + ααᵀ` (see :meth:`AbstractAttention.gaussian_second_moment`)."""
        return True

    def normalise(self, t: Time, logits: Weights, mask: KeyMask | None) -> Weights:
        """`W_ij = β(y_jᵀAx_i) / n_i` on the allowed keys (`n_i` their number), 0 elsewhere."""
        return mean_weights(logits, mask)
