"""Softmax attention of one rank-`k` head given by its factors (a trained head; spec dynamics.md §1, §2)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, Real

from ...errors import ParameterError
from ..attention import AbstractAttention
from ..attention._base import check_queries, softmax_weights
from ..attention._shapes import Factor, GaussianMap, KeyMask, Keys, Matrix, Mean, Queries, Time, Velocities, Weights

__all__ = ["LowRankSoftmax"]


class LowRankSoftmax(AbstractAttention):
    """Softmax attention `Γ_μ(x_i) = Σ_j w_ij W_O W_V y_j`, `w_i = softmax_j((Q x_i)·(K y_j))`, from rank-`k` factors.

    This is :class:`~hassejax.dynamics.Softmax` (`β = 1`) with `A = KᵀQ` and `V = W_O W_V`,
    both `d×d` of rank at most `k`, as a trained head has them (`W_{Q,h}/√k`, `W_{K,h}`,
    `W_{V,h}`, `W_{O,h}`; see :func:`hassejax.pretrained.head_parameters`): the velocity is
    computed in `O(n²k + ndk)` without forming a `d×d` matrix, and on `μ = N(α, Σ)` the map
    is `M = W_O (W_V Σ Kᵀ) Q`, `c = W_O W_V α` (paper; spec §2). Every velocity lies in
    `range W_O`, which the exact `k`-dimensional solves
    :func:`~hassejax.dynamics.solve_low_rank_gaussian` and
    :func:`~hassejax.dynamics.solve_low_rank_particles` use; the ordinary solvers
    :func:`~hassejax.dynamics.solve_gaussian` and :func:`~hassejax.dynamics.solve_particles`
    take it too (in `d` dimensions). Parameters are constant in depth.

    **Arguments:** (leading batch axes allowed outside a solve, e.g. one head per layer and head)

    - `Q`: `(k, d)` float, the (scaled) query projection;
    - `K`: `(k, d)` key projection;
    - `W_V`: `(k, d)` value projection;
    - `W_O`: `(d, k)` output projection.

    **Raises:** :class:`~hassejax.errors.ParameterError` naming the shapes when `Q`, `K`,
    `W_V` are not all `(k, d)` or `W_O` is not `(d, k)`.

    Source: (derived) from the BERT head (module :mod:`hassejax.pretrained.heads`) and spec §1.

    **Example:** the velocity equals that of :class:`~hassejax.dynamics.Softmax` at `A = KᵀQ`, `V = W_O W_V`:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import LowRankSoftmax, Softmax
    >>> q, k, wv, wo = jnp.array([[1.0, 0.0]]), jnp.array([[0.0, 1.0]]), jnp.array([[1.0, 1.0]]), jnp.array([[1.0], [0.0]])
    >>> head = LowRankSoftmax(q, k, wv, wo)
    >>> x = jnp.array([[1.0, 0.0], [0.0, 2.0]])
    >>> bool(jnp.allclose(head.velocity(0.0, x), Softmax(V=wo @ wv, A=k.T @ q).velocity(0.0, x)))
    True
    >>> head.d, head.k
    (2, 1)

    ```
    """

    Q: Float[Array, "... k d"]
    K: Float[Array, "... k d"]
    W_V: Float[Array, "... k d"]
    W_O: Float[Array, "... d k"]

    _ranks: ClassVar[Mapping[str, int]] = MappingProxyType({"Q": 2, "K": 2, "W_V": 2, "W_O": 2})

    def __init__(
        self,
        Q: Real[ArrayLike, "... k d"],
        K: Real[ArrayLike, "... k d"],
        W_V: Real[ArrayLike, "... k d"],
        W_O: Real[ArrayLike, "... d k"],
    ):
        Q, K, W_V, W_O = (jnp.asarray(z) for z in (Q, K, W_V, W_O))
        if Q.ndim < 2 or K.shape != Q.shape or W_V.shape != Q.shape or W_O.shape != Q.shape[:-2] + Q.shape[-2:][::-1]:
            raise ParameterError(
                "`Q`, `K`, `W_V` must have shape (k, d) and `W_O` shape (d, k) (same leading axes); "
                f"got {Q.shape}, {K.shape}, {W_V.shape}, {W_O.shape}."
            )
        dtype = jnp.result_type(Q, K, W_V, W_O, float)
        self.Q, self.K, self.W_V, self.W_O = (z.astype(dtype) for z in (Q, K, W_V, W_O))

    @property
    def d(self) -> int:
        """Token dimension `d`."""
        return self.Q.shape[-1]

    @property
    def k(self) -> int:
        """Head dimension `k` (the rank bound of `A` and `V`)."""
        return self.Q.shape[-2]

    def value(self, t: Time) -> Float[Array, "... d d"]:
        """`V = W_O W_V` (`d×d`, rank ≤ `k`)."""
        return self.W_O @ self.W_V

    def interaction(self, t: Time) -> Float[Array, "... d d"]:
        """`A = KᵀQ` (logit of query `x` against key `y`: `yᵀAx`)."""
        return jnp.swapaxes(self.K, -1, -2) @ self.Q

    def weights(self, t: Time, x: Queries, keys: Keys | None = None, mask: KeyMask | None = None) -> Weights:
        """`W_ij = softmax_j((Qx_i)·(Ky_j))` over the allowed keys (an empty row is 0)."""
        y = x if keys is None else keys
        return softmax_weights((x @ self.Q.T) @ (y @ self.K.T).T, mask)

    def velocity(self, t: Time, x: Queries, keys: Keys | None = None, mask: KeyMask | None = None) -> Velocities:
        """`Γ_μ(x_i) = W_O Σ_j W_ij W_V y_j` without forming `V` (`keys` None: `y = x`)."""
        check_queries(x, keys, mask, self.d)
        y = x if keys is None else keys
        return (self.weights(t, x, y, mask) @ (y @ self.W_V.T)) @ self.W_O.T

    def gaussian_affine(self, t: Time, mean: Mean, cov: Matrix, factor: Factor | None = None) -> GaussianMap:
        """`M = W_O (W_V Σ Kᵀ) Q = VΣA`, `c = W_O W_V α = Vα` (paper; spec dynamics.md §2)."""
        return self.W_O @ ((self.W_V @ cov @ self.K.T) @ self.Q), self.W_O @ (self.W_V @ mean)
