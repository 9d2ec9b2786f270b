"""Softmax self-attention (paper arXiv:2501.18322; spec dynamics.md §1, §2)."""

from __future__ import annotations

from typing import ClassVar

from ._base import AbstractBilinearAttention, changed_kernel_methods, softmax_weights
from ._shapes import Factor, GaussianMap, KeyMask, Matrix, Mean, Time, Weights

__all__ = ["Softmax"]


class Softmax(AbstractBilinearAttention):
    """Softmax attention `Γ_μ(x_i) = Σ_j w_ij V y_j`, `w_i = softmax_j(β y_jᵀAx_i)` (paper; spec dynamics.md §1).

    On `μ = N(α, Σ)` the velocity is affine, `Γ_μ(x) = Mx + c` with `M = βVΣA`, `c = Vα`
    (paper; spec §2), so Gaussians stay Gaussian. A subclass that changes the kernel (overrides ``velocity``,
    ``weights``, ``normalise`` or ``logits``) loses this map: the Gaussian solvers refuse it unless it overrides
    :meth:`gaussian_affine` too (:meth:`~AbstractAttention.check_gaussian`; the same for :class:`L2`, :class:`Linear`,
    :class:`Sinkhorn` and :class:`MultiHead`). Under a mask the softmax runs over the
    allowed keys; a query with no allowed key gets `Γ = 0`
    (:func:`hassejax.nn.masked_softmax`). The paper's figures use `Q/√d` (per head
    `Q_h/√k`): nothing here rescales, pass the scaled matrices.

    **Arguments** (each array may instead be a callable `t ↦ array` or a
    :class:`~hassejax.dynamics.PiecewiseConstant`; leading batch axes allowed
    for ``vmap`` (a call or a solve takes one kernel)):

    - `V`: `(d, d)` float value matrix (for a head of :class:`MultiHead`, its value-output
      map `C_h = W_{O,h} V_h`).
    - `A`: `(d, d)` interaction matrix: the logit of query `x` against key `y` is `β yᵀAx`.
    - `Q`, `K`: `(k, d)` query and key matrices, `A = KᵀQ` (give `A` or both, not all three).
    - `beta`: scalar inverse temperature (default 1).

    **Raises:** :class:`~hassejax.errors.ParameterError` naming the field for a
    non-square `V`, neither or both of `A` and `(Q, K)`, only one of `Q`, `K`, shapes that
    disagree, or a non-real parameter.

    **Example:** with `A = 0` the weights are uniform, so `Γ(x_i) = V x̄`:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Softmax
    >>> model = Softmax(V=2.0 * jnp.eye(2), A=jnp.zeros((2, 2)))
    >>> model.velocity(0.0, jnp.array([[1.0, 0.0], [0.0, 3.0]])).tolist()
    [[1.0, 3.0], [1.0, 3.0]]
    >>> M, c = model.gaussian_affine(0.0, jnp.array([1.0, 2.0]), jnp.eye(2))
    >>> M.tolist(), c.tolist()
    ([[0.0, 0.0], [0.0, 0.0]], [2.0, 4.0])

    ```
    """

    _row_wise: ClassVar[bool] = True

    def normalise(self, t: Time, logits: Weights, mask: KeyMask | None) -> Weights:
        """`W_ij = softmax_j(β y_jᵀAx_i)` over the allowed keys (rows sum to 1; an empty row is 0)."""
        return softmax_weights(logits, mask)

    def gaussian_affine(self, t: Time, mean: Mean, cov: Matrix, factor: Factor | None = None) -> GaussianMap:
        """`M = βVΣA`, `c = Vα` (paper; spec dynamics.md §2)."""
        return self.bilinear_map(t, cov), self.value(t) @ mean

    def gaussian_homogeneous(self) -> bool:
        """True: `M = βVΣA` is linear in `Σ` and `c = Vα` free of it (see :class:`AbstractAttention`).

        False for a subclass that overrides :meth:`gaussian_affine` or :meth:`bilinear_map` (its map need not be
        homogeneous: a fresh-user review's damped softmax `M = βVΣA − γI` ran in the projective state and came
        back ``completed`` with `Σ` unchanged where it blows up at `ln 2`); such a subclass overrides this method
        too where its map is homogeneous. False also for a subclass that changes the kernel (``velocity``,
        ``weights``, ``normalise``, ``logits``) and not the map: it has no Gaussian map
        (:meth:`~AbstractAttention.check_gaussian` raises).
        """
        cls = type(self)
        same_map = cls.gaussian_affine is Softmax.gaussian_affine and cls.bilinear_map is Softmax.bilinear_map
        return same_map and not changed_kernel_methods(self)
