"""Sinkhorn attention: the doubly stochastic scaling of the softmax kernel (paper arXiv:2501.18322; spec dynamics.md §1, §2)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, Real

from ...errors import ParameterError
from .._linalg import below_psd, psd_sqrt, refuse_indefinite, sym_funm, symmetrize
from ..params import MatrixParam, ProjParam, ScalarParam, TimeParam, resolve
from ._base import AbstractBilinearAttention, bilinear_params, scalar_param
from ._shapes import Factor, GaussianMap, GrowthBound, KeyMask, Keys, Matrix, Mean, Queries, Time, Weights

__all__ = ["Sinkhorn"]


def _g(w):
    # `w`: eigenvalues of the Gram matrix `CCᵀ ⪰ 0`; ``eigh`` returns them to `~eps ‖CCᵀ‖`, so a zero one can come
    # out below `−1/4` once `‖CCᵀ‖` passes `1/(4 eps)` (float32: `tr Σ` of a few thousand), where the square root
    # is NaN: clipped at zero
    return 2.0 / (1.0 + jnp.sqrt(1.0 + 4.0 * jnp.maximum(w, 0.0)))


def _dg(w):
    r = jnp.sqrt(1.0 + 4.0 * jnp.maximum(w, 0.0))
    return -4.0 / (r * (1.0 + r) ** 2)


def _no_mask(name: str) -> ParameterError:
    return ParameterError(
        f"`{name}`: kind 'sinkhorn' has no masked form (the plan is doubly stochastic over all tokens); got a mask."
    )


class Sinkhorn(AbstractBilinearAttention):
    """Sinkhorn attention `Γ_μ(x_i) = n Σ_j P_ij V y_j` (paper; spec dynamics.md §1).

    `P` is the doubly stochastic scaling (row and column sums `1/n`) of the kernel
    `exp(β y_jᵀAy_i/ε)` of the keys, computed in the log domain (:meth:`potential`) to
    `tol` with at most `max_iter` iterations. For queries other than the keys the weights
    use the keys' self-plan, `W_ij = softmax_j(β y_jᵀAx_i/ε + g_j)` with `g` the column
    potential (derived); for `x = y_i` this is `n P_ij`. No masked form.

    On `μ = N(α, Σ)` (derived, spec §2): `M = VS`, `c = V(α − Sα)`, `S` the slope of
    `E_π[y | x] = α + S(x − α)` for the entropic self-plan π of `N(α, Σ)` (:meth:`slope`).

    **Arguments** (arrays, callables of `t` or
    :class:`~hassejax.dynamics.PiecewiseConstant`; leading batch axes allowed
    for ``vmap`` (a call or a solve takes one kernel)):

    - `V`: `(d, d)` value matrix.
    - `A`: `(d, d)` interaction matrix, or `Q`, `K`: `(k, d)` with `A = KᵀQ`.
    - `beta`: scalar inverse temperature (default 1).
    - `eps`: scalar entropic regularisation `ε > 0` (default 1; the paper's figures use
      unscaled `A` with `ε = 1`).
    - `tol`: the iteration stops when the rows' log-marginal error is at most `tol`
      (default 1e-10), or at most the rounding floor of the keys' dtype if that is larger,
      `16 ε (1 + log n + max |C|)` (:meth:`potential`; float32: about 1e-5, where 1e-10 is never
      reached and every weight would be NaN). Static.
    - `max_iter`: iteration cap (default 1000). Static.
    - `strict`: True (default): weights from an iteration that stopped at `max_iter` above `tol`
      are NaN, so a particle solve stops there as ``non_finite`` instead of moving the tokens by
      an unconverged plan (see :meth:`weights`); False: use the plan as it stands (to show the
      effect of the cap, as ``experiments/sinkhorn.py`` does). Static.

    **Raises:** :class:`~hassejax.errors.ParameterError` naming the field for bad shapes
    (as :class:`Softmax`), a concrete `eps <= 0`, `tol <= 0` or `max_iter < 1`.

    **Example:** the columns of `nP` sum to one, so the mean moves as `x̄' = V x̄`:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Sinkhorn
    >>> model = Sinkhorn(V=jnp.eye(2), A=jnp.array([[0.5, 0.2], [0.0, -0.3]]))
    >>> x = jnp.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 2.0]])
    >>> bool(jnp.allclose(model.velocity(0.0, x).mean(axis=0), x.mean(axis=0)))
    True

    ```
    """

    eps: Float[Array, "*_batch"] | TimeParam
    tol: float = eqx.field(static=True)
    max_iter: int = eqx.field(static=True)
    strict: bool = eqx.field(static=True)

    _ranks: ClassVar[Mapping[str, int]] = MappingProxyType({**AbstractBilinearAttention._ranks, "eps": 0})
    _gaussian_map_methods: ClassVar[tuple[str, ...]] = ("gaussian_affine", "slope")
    _gaussian_kernel_methods: ClassVar[tuple[str, ...]] = ("velocity", "weights", "logits", "_potential")

    def __init__(self, V: MatrixParam, A: MatrixParam | None = None, Q: ProjParam | None = None,
                 K: ProjParam | None = None, beta: ScalarParam = 1.0, eps: ScalarParam = 1.0,
                 tol: float = 1e-10, max_iter: int = 1000, strict: bool = True):  # fmt: skip
        self.V, self.A, self.Q, self.K, self.beta = bilinear_params(V, A, Q, K, beta, "Sinkhorn")
        self.eps = scalar_param(eps, "eps", "Sinkhorn", positive=True)
        if not (float(tol) > 0):
            raise ParameterError(f"`tol` of Sinkhorn must be > 0; got {tol}.")
        if isinstance(max_iter, bool) or int(max_iter) != max_iter or int(max_iter) < 1:
            raise ParameterError(f"`max_iter` of Sinkhorn must be an integer >= 1; got {max_iter!r}.")
        self.tol = float(tol)
        self.max_iter = int(max_iter)
        self.strict = bool(strict)

    def check_maskable(self, name: str = "kernel") -> None:
        """Always raises: the plan is doubly stochastic over all tokens, there is no masked form."""
        raise _no_mask(name)

    def potential(self, t: Time, keys: Keys) -> tuple[Float[Array, " n"], Real[Array, ""], Int[Array, ""]]:
        """Column potential `g` of the entropic self-plan of the keys (log domain).

        Iterates `f_i = −log n − LSE_j(C_ij + g_j)`, `g_j = −log n − LSE_i(C_ij + f_i)` with
        `C_ij = β y_jᵀAy_i/ε`, from `g = 0`, until the largest log-marginal error of the rows
        is at most `tol` or `max_iter` iterations (``lax.while_loop``).

        **Returns:** `(g, error, iterations)`; the plan is `P_ij = exp(f_i + g_j + C_ij)` with
        `f` the row update of `g` (rows then sum to `1/n` exactly, columns to within `error`). The
        iteration stops at `max(tol, 16 ε (1 + log n + max |C|))`, `ε` of the keys' dtype: the error is a
        sum of terms of that size, so rounding alone leaves it there (float32, 3 tokens: 6e-8).
        """
        g, err, it, _ = self._potential(t, keys)
        return g, err, it

    def _potential(self, t: Time, keys: Keys):
        """:meth:`potential` and the tolerance it stopped at."""
        n = keys.shape[0]
        c = self.logits(t, keys, keys) / resolve(self.eps, t)
        # the logits' dtype (keys promoted with the parameters): float32 keys with float64 parameters, called
        # directly, failed in the loop ("carry input and carry output must have equal types")
        dtype = c.dtype
        logn = jnp.log(jnp.asarray(n, dtype))
        floor = 16 * jnp.finfo(dtype).eps * (1 + logn + jnp.max(jnp.abs(c)))
        tol = jnp.maximum(jnp.asarray(self.tol, dtype), floor)
        max_iter = self.max_iter

        def cond(state):
            _, _, err, it = state
            return (it == 0) | ((err > tol) & (it < max_iter))

        def body(state):
            f, g, _, it = state
            lse_row = jax.nn.logsumexp(c + g[None, :], axis=1)
            err = jnp.max(jnp.abs(logn + f + lse_row))
            f = -logn - lse_row
            g = -logn - jax.nn.logsumexp(c + f[:, None], axis=0)
            return f, g, err, it + 1

        zeros = jnp.zeros((n,), dtype)
        init = (zeros, zeros, jnp.asarray(jnp.inf, dtype), jnp.asarray(0))
        _, g, err, it = jax.lax.while_loop(cond, body, init)
        return g, err, it, tol

    def weights(self, t: Time, x: Queries, keys: Keys | None = None, mask: KeyMask | None = None) -> Weights:
        """`W_ij = softmax_j(β y_jᵀAx_i/ε + g_j)`, `g` from :meth:`potential` (`n P` on the keys).

        With `strict`, NaN when the iteration stopped at `max_iter` above `tol` (or the dtype's floor, see
        :meth:`potential`): the plan is then not doubly stochastic to it, and a solve stops there as
        ``non_finite`` instead of moving the tokens by an unconverged plan (the mean, exactly `e^{tV} x̄0` for a converged one, was off
        by up to 6e-3 at t = 2 for some random kernels at `tol = 1e-12`).

        **Raises:** :class:`~hassejax.errors.ParameterError` if a mask is given.
        """
        if mask is not None:
            raise _no_mask("mask")
        y = x if keys is None else keys
        g, err, _, tol = self._potential(t, y)
        w = jax.nn.softmax(self.logits(t, x, y) / resolve(self.eps, t) + g[None, :], axis=-1)
        if not self.strict:
            return w
        return jnp.where(err <= tol, w, jnp.nan)

    def slope(self, t: Time, factor: Factor) -> Matrix:
        """Slope `S` of `E_π[y | x] = α + S(x − α)` for the entropic self-plan of `N(α, UUᵀ)` (derived, spec §2).

        `S = U g(CCᵀ) Uᵀ Ã` with `C = Uᵀ Ã U`, `Ã = βA/ε`, `g(w) = 2/(1 + √(1 + 4w))`, `U` the
        `(d, r)` `factor` (any `U` with `Σ = UUᵀ`; equal to the spec's `Σ^{1/2}GΣ^{1/2}Ã` by
        the polar decomposition `U = Σ^{1/2}R`). Needs no inverse of `A` or `Σ`.
        Known limitation: `g(CCᵀ)` comes from ``eigh`` of the Gram matrix `CCᵀ`, whose
        condition number is that of `C` squared, so the relative accuracy of `S` degrades as
        `Σ` grows (measured: 1.6e-7 at `λ_max(Σ) = 3.4e5`, 2.7e-3 at `1.9e7`); long diverging
        Sinkhorn solves then need a tight `rtol` (figure 9 uses 1e-8). In float32 this bites early: at a
        rank-one `Σ` with `λ = 1e6`, `ε = 0.01`, `tr Σ'` came out negative (review), and float32 solves
        that float64 reads ``diverge`` ran out of steps (`max_steps_reached`): use float64 for Sinkhorn
        beyond `tr Σ ~ 1e4`.
        """
        a_t = resolve(self.beta, t) * self.interaction(t) / resolve(self.eps, t)
        c = factor.T @ a_t @ factor
        g = sym_funm(c @ c.T, _g, _dg)
        return factor @ g @ factor.T @ a_t

    def gaussian_growth_bound(self, t: Time) -> GrowthBound:
        """`2‖V‖₂` (derived: `2 tr(MΣ) = 2 tr(UᵀVU g(CCᵀ)C) ≤ 2‖V‖₂ tr Σ`; see :class:`AbstractAttention`).

        **Raises:** :class:`~hassejax.errors.ParameterError` for a kernel built with batched
        parameters (``vmap`` over it instead), as :meth:`value`.
        """
        self.check_unbatched("model")
        return 2.0 * jnp.linalg.norm(self.value(t), 2)

    def gaussian_uses_factor(self) -> bool:
        """True: the map is evaluated from a factor `U` of `Σ` (see the class docstring)."""
        return True

    def gaussian_affine(self, t: Time, mean: Mean, cov: Matrix, factor: Factor | None = None) -> GaussianMap:
        """`M = VS`, `c = V(α − Sα)` with `S` from :meth:`slope` (derived; spec dynamics.md §2).

        Without a `factor`, `S` is taken from `Σ^{1/2}` of `cov` (symmetric PSD).

        **Raises:** :class:`~hassejax.errors.ParameterError` without a `factor`, for a concrete finite `cov` that is
        not positive semidefinite (the rule of the solvers' `cov0` check, on its symmetric part; a traced one that is
        no covariance gives NaN `M`, `c`; its PSD part's map before).
        """
        if factor is not None:
            s = self.slope(t, factor)
        else:
            refuse_indefinite(cov, "cov")
            root, w_min = psd_sqrt(cov, with_min=True)
            s = self.slope(t, root)
            s = jnp.where(below_psd(symmetrize(cov), w_min), jnp.nan, s)  # a traced `cov` that is no covariance
        v = self.value(t)
        return v @ s, v @ (mean - s @ mean)
