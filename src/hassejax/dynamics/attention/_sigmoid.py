"""Sigmoid self-attention: unnormalised weights with a fixed bias (spec dynamics.md §1)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

import jax
from jaxtyping import Array, Float

from ..params import MatrixParam, ProjParam, ScalarParam, TimeParam, resolve
from ._base import AbstractBilinearAttention, bilinear_params, mean_weights, scalar_param
from ._shapes import KeyMask, Time, Weights

__all__ = ["Sigmoid"]


class Sigmoid(AbstractBilinearAttention):
    """Sigmoid attention `Γ_μ(x_i) = (1/n) Σ_j σ(β y_jᵀAx_i + b) V y_j` (spec dynamics.md §1).

    No normalisation across keys; under a mask `1/n` becomes one over the number of allowed
    keys of row `i` (an empty row gets `Γ = 0`). Not affine on Gaussians: particles only
    (spec §2).

    **Arguments** (arrays, callables of `t` or
    :class:`~hassejax.dynamics.PiecewiseConstant`; leading batch axes allowed
    for ``vmap`` (a call or a solve takes one kernel)):

    - `V`: `(d, d)` value matrix.
    - `A`: `(d, d)` interaction matrix, or `Q`, `K`: `(k, d)` with `A = KᵀQ`.
    - `beta`: scalar inverse temperature (default 1).
    - `bias`: scalar fixed bias `b` (default 0).

    **Raises:** :class:`~hassejax.errors.ParameterError` naming the field for bad shapes
    (as :class:`Softmax`).

    **Example:** with `A = 0`, `b = 0` every weight is `σ(0)/n = 1/(2n)`:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Sigmoid
    >>> model = Sigmoid(V=jnp.eye(2), A=jnp.zeros((2, 2)))
    >>> model.velocity(0.0, jnp.array([[2.0, 0.0], [0.0, 4.0]])).tolist()
    [[0.5, 1.0], [0.5, 1.0]]

    ```
    """

    _row_wise: ClassVar[bool] = True

    bias: Float[Array, "*_batch"] | TimeParam

    _ranks: ClassVar[Mapping[str, int]] = MappingProxyType({**AbstractBilinearAttention._ranks, "bias": 0})

    def __init__(self, V: MatrixParam, A: MatrixParam | None = None, Q: ProjParam | None = None,
                 K: ProjParam | None = None, beta: ScalarParam = 1.0, bias: ScalarParam = 0.0):  # fmt: skip
        self.V, self.A, self.Q, self.K, self.beta = bilinear_params(V, A, Q, K, beta, "Sigmoid")
        self.bias = scalar_param(bias, "bias", "Sigmoid")

    def normalise(self, t: Time, logits: Weights, mask: KeyMask | None) -> Weights:
        """`W_ij = σ(β y_jᵀAx_i + b) / n_i` on the allowed keys (`n_i` their number), 0 elsewhere."""
        return mean_weights(jax.nn.sigmoid(logits + resolve(self.bias, t)), mask)
