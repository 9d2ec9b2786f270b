"""L2 self-attention (paper arXiv:2501.18322; spec dynamics.md §1, §2)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..._tracing import is_traced
from ...errors import ParameterError
from ..params import MatrixParam, ProjParam, ScalarParam, TimeParam, _concrete_layers, resolve
from ._base import AbstractBilinearAttention, bilinear_params, scalar_param, softmax_weights
from ._shapes import Factor, GaussianMap, GrowthBound, KeyMask, Keys, Matrix, Mean, Queries, SizeScale, Time, Weights

__all__ = ["L2"]


class L2(AbstractBilinearAttention):
    """L2 attention `Γ_μ(x_i) = Σ_j w_ij V y_j`, `w_i = softmax_j(−βc‖Qx_i − Ky_j‖²)` (paper; spec dynamics.md §1).

    On `μ = N(α, Σ)` the velocity is affine (derived, spec §2):
    `M = 2βcVΣ(I + 2βcKᵀKΣ)⁻¹A`, `c = V(I + 2βcΣKᵀK)⁻¹α` with `A = KᵀQ`. Under a mask the
    softmax runs over the allowed keys (an empty row gets `Γ = 0`). The logits are not a
    function of `A` alone, so `Q` and `K` are required (the field `A` is always None).

    **Arguments** (arrays, callables of `t` or
    :class:`~hassejax.dynamics.PiecewiseConstant`; leading batch axes allowed
    for ``vmap`` (a call or a solve takes one kernel)):

    - `V`: `(d, d)` value matrix.
    - `Q`, `K`: `(k, d)` query and key matrices.
    - `beta`: scalar inverse temperature (default 1).
    - `c`: scalar kernel constant (default 1, the authors' code).

    **Raises:** :class:`~hassejax.errors.ParameterError` naming the field when `Q` or `K`
    is missing or `A` is given (L2 takes `Q` and `K`), `V` is not square or shapes disagree; from the Gaussian route
    (:func:`~hassejax.dynamics.solve_gaussian`, :func:`~hassejax.dynamics.gaussian_affine`) for a concrete
    `βc < 0` (:meth:`check_gaussian`), and from :func:`~hassejax.dynamics.solve_gaussian` for a layer of
    :class:`~hassejax.dynamics.PiecewiseConstant` `β`, `c` with `βc < 0` that meets `[t0, t1]`.

    **Example:** one token attends only to itself, so `Γ(x) = Vx`:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import L2
    >>> model = L2(V=-jnp.eye(2), Q=jnp.eye(2), K=jnp.eye(2), c=0.5)
    >>> model.velocity(0.0, jnp.array([[1.0, 2.0]])).tolist()
    [[-1.0, -2.0]]
    >>> M, c = model.gaussian_affine(0.0, jnp.zeros(2), jnp.zeros((2, 2)))  # Σ = 0: M = 0
    >>> M.tolist()
    [[0.0, 0.0], [0.0, 0.0]]

    ```
    """

    _row_wise: ClassVar[bool] = True

    c: Float[Array, "*_batch"] | TimeParam

    _ranks: ClassVar[Mapping[str, int]] = MappingProxyType({**AbstractBilinearAttention._ranks, "c": 0})
    # the map is built from `interaction` (KᵀQ), the weights from Q and K directly: an `interaction` of a subclass
    # changes the map alone (see AbstractAttention.check_gaussian)
    _gaussian_map_methods: ClassVar[tuple[str, ...]] = ("gaussian_affine",)
    _gaussian_kernel_methods: ClassVar[tuple[str, ...]] = ("velocity", "weights", "interaction")

    def __init__(
        self, V: MatrixParam, Q: ProjParam | None = None, K: ProjParam | None = None, beta: ScalarParam = 1.0,
        c: ScalarParam = 1.0, *, A: MatrixParam | None = None,
    ):  # fmt: skip
        # `Q`, `K` default to None and `A` is accepted only to be refused by name (a ParameterError, not a TypeError)
        self.V, self.A, self.Q, self.K, self.beta = bilinear_params(V, A, Q, K, beta, "L2", need_qk=True)
        self.c = scalar_param(c, "c", "L2")

    def check_gaussian(self, name: str = "model") -> None:
        """Raise :class:`~hassejax.errors.ParameterError` for a concrete constant `βc < 0` (arrays; callables of `t`
        and traced values are not checked here; a :class:`~hassejax.dynamics.PiecewiseConstant` is checked per
        layer over a solve's interval, :meth:`_check_gaussian_interval`).

        The Gaussian map (spec §2) is the expectation of `exp(−βc‖Qx − Ky‖²)` under `N(α, Σ)`; for `βc < 0` it is
        finite only while `1 + 2βc λ_max(KΣKᵀ) > 0`, a domain the solvers do not track (review: `c = −1`, `Σ0 = I`
        outside it, a ``completed`` solve with `Σ = 11.7 I`). The particle system is defined for any `βc`.
        """
        super().check_gaussian(name)
        beta, c = self.beta, self.c
        if callable(beta) or callable(c) or is_traced(beta, c):
            return
        bc = np.asarray(beta) * np.asarray(c)
        if np.any(bc < 0):
            raise ParameterError(
                f"{name} (L2) has βc = {float(np.min(bc)):.4g} < 0: its Gaussian map E[exp(−βc‖Qx − Ky‖²)] exists only "
                "while 1 + 2βc λ_max(KΣKᵀ) > 0, which the Gaussian solvers do not track; solve the particles "
                "(solve_particles) or use βc >= 0."
            )

    def _check_gaussian_interval(self, t0: float, t1: float, name: str = "model") -> None:
        """Raise :class:`~hassejax.errors.ParameterError` for a layer of :class:`~hassejax.dynamics.PiecewiseConstant`
        `β`, `c` (their layers paired over the common boundaries) with `βc < 0` that meets `[t0, t1]`, naming it (it
        stopped the solve ``non_finite`` at its edge; a negative layer the solve never reaches is no error)."""
        layers = _concrete_layers(self.beta, self.c)
        if layers is None or layers[0] is None:  # not piecewise constant: check_gaussian
            return
        starts, (beta, c) = layers
        ends = np.append(starts[1:], np.inf)
        begins = np.concatenate([[-np.inf], starts[1:]])  # the first layer's value holds before its start too
        bc = np.broadcast_to(beta * c, (len(starts),) + np.broadcast_shapes(beta.shape[1:], c.shape[1:]))
        negative = np.any((bc < 0).reshape(len(starts), -1), axis=1) & (begins <= t1) & (ends > t0)
        if np.any(negative):
            k = int(np.argmax(negative))
            bc = float(np.min(bc[k]))
            raise ParameterError(
                f"{name} (L2) has βc = {bc:.4g} < 0 on its layer [{begins[k]:g}, {ends[k]:g}) (PiecewiseConstant "
                f"parameters), within the solve's [t0, t1] = [{t0:g}, {t1:g}]: its Gaussian map "
                "E[exp(−βc‖Qx − Ky‖²)] exists only while 1 + 2βc λ_max(KΣKᵀ) > 0, which the Gaussian solvers do not "
                "track; solve the particles (solve_particles), use βc >= 0, or end the solve before that layer."
            )

    def weights(self, t: Time, x: Queries, keys: Keys | None = None, mask: KeyMask | None = None) -> Weights:
        """`W_ij = softmax_j(−βc‖Qx_i − Ky_j‖²)` over the allowed keys."""
        y = x if keys is None else keys
        qx = x @ resolve(self.Q, t).T
        ky = y @ resolve(self.K, t).T
        sq = jnp.sum(qx**2, -1)[:, None] + jnp.sum(ky**2, -1)[None, :] - 2.0 * qx @ ky.T
        return softmax_weights(-resolve(self.beta, t) * resolve(self.c, t) * sq, mask)

    def gaussian_size_scale(self, t: Time) -> SizeScale:
        """`1/(2βc λ_max(KᵀK))`, where `2βcKᵀKΣ` reaches order one (see :class:`AbstractAttention`).

        0 when `2βc λ_max(KᵀK) ≤ 0` (`K = 0`, or `βc ≤ 0`: the map has no saturation). Read at `t`
        only: for a `K` that shrinks with depth the scale grows later, which the default threshold
        (taken at `t0`) does not follow; pass `size_threshold` then.

        **Raises:** :class:`~hassejax.errors.ParameterError` for a kernel built with batched
        parameters (``vmap`` over it instead), as :meth:`value`.
        """
        self.check_unbatched("model")
        k = resolve(self.K, t)
        s = 2.0 * resolve(self.beta, t) * resolve(self.c, t) * jnp.linalg.eigvalsh(k.T @ k)[-1]
        return jnp.where(s > 0, 1.0 / jnp.where(s > 0, s, 1.0), 0.0)

    def gaussian_growth_bound(self, t: Time) -> GrowthBound:
        """`2‖V‖₂‖A‖₂/λ_min(KᵀK)` for `βc > 0` and `KᵀK` invertible, else `inf` (see :class:`AbstractAttention`).

        "Invertible" to rounding: `λ_min(KᵀK) > d · eps · λ_max(KᵀK)` (below that the bound would be
        rounding noise). Read at `t` only.

        **Raises:** :class:`~hassejax.errors.ParameterError` for a kernel built with batched
        parameters (``vmap`` over it instead), as :meth:`value`.
        """
        self.check_unbatched("model")
        k = resolve(self.K, t)
        ev = jnp.linalg.eigvalsh(k.T @ k)
        s = resolve(self.beta, t) * resolve(self.c, t)
        norm_v = jnp.linalg.norm(self.value(t), 2)
        norm_a = jnp.linalg.norm(self.interaction(t), 2)
        ok = (s > 0) & (ev[0] > ev.shape[0] * jnp.finfo(ev.dtype).eps * ev[-1])
        r = 2.0 * norm_v * norm_a / jnp.where(ok, ev[0], 1.0)
        return jnp.where(ok & jnp.isfinite(r), r, jnp.inf)

    def check_covariance_state(self, name: str = "model") -> None:
        """Raise :class:`~hassejax.errors.ParameterError`: the covariance state cannot solve L2 reliably.

        The map `M = V(Σ⁻¹/(2βc) + KᵀK)⁻¹A` depends on the directions of `Σ` below the scale `1/(2βc‖KᵀK‖)`
        relative to their size, which the symmetric state holds only to its absolute error `~rtol · λ_max`:
        once `Σ` is ill-conditioned its solves go wrong (measured, float64, `rtol = 1e-6`: `tr Σ = 1551` at
        `t = 1e4` where the factor state gives 5693, or `max_steps_reached` where it completes; float32:
        wrong verdicts). The factor state `U' = MU` keeps them to relative accuracy.
        """
        raise ParameterError(
            f"`state='covariance'` cannot solve {name} (L2) reliably: its map V(Σ⁻¹/(2βc) + KᵀK)⁻¹A depends on "
            "the small directions of Σ, which the symmetric state holds only to rtol · λ_max (measured: tr Σ off "
            "by 3.7× at rtol 1e-6); use `state='factor'`."
        )

    def gaussian_affine(self, t: Time, mean: Mean, cov: Matrix, factor: Factor | None = None) -> GaussianMap:
        """`M = 2βcVΣ(I + 2βcKᵀKΣ)⁻¹A`, `c = V(I + 2βcΣKᵀK)⁻¹α` (derived; spec dynamics.md §2).

        Formed from `B = Σ/τ`, `τ = max(tr Σ, 1)`: `M = 2βcVB(I/τ + 2βcKᵀKB)⁻¹A` and
        `c = V(I/τ + 2βcBKᵀK)⁻¹α/τ`, the same numbers without products of the size of `Σ` (bounded
        as `Σ` grows: `M → V(KᵀK)⁻¹A`), so a float32 state reaches `1/finfo.tiny` before they
        overflow; for `tr Σ ≤ 1` this is the formula as written. The solves carry the conditioning of
        `I + 2βcKᵀKΣ`: in float32 a condition number of 1e7 (a wide `Σ` against a nearly singular `KᵀK`) leaves
        `M` and `c` with no correct digit (a fresh user: 59 % off at `Σ` scaled by 1e6, a plain float32 NumPy solve
        284 %); solve such cases in float64.

        **Raises:** :class:`~hassejax.errors.ParameterError` for a concrete `βc < 0` (:meth:`check_gaussian`:
        the map exists only on part of the covariances, and outside it the formula returned NaN). A traced `βc < 0`
        (under ``jit``/``vmap``) or a callable one where it is negative gives NaN `M` and `c`, so that a solve
        stops ``non_finite`` there (at `t0` for a constant one) with its last finite state.
        """
        self.check_gaussian("model")
        eye = jnp.eye(cov.shape[-1], dtype=cov.dtype)
        k = resolve(self.K, t)
        kk = k.T @ k
        s = 2.0 * resolve(self.beta, t) * resolve(self.c, t)
        a = self.interaction(t)
        v = self.value(t)
        # a scale only (M does not depend on it): no derivative through it, whose `Σ dτ/τ²` overflows near
        # the float range in the growth rates' JVPs
        tau = jax.lax.stop_gradient(jnp.maximum(jnp.trace(cov), 1.0))
        b = cov / tau
        # Two solves as written: the first's right-hand side A = KᵀQ lies in range(Kᵀ). Not one solve with [BA | α]
        # by the push-through identity B(I/τ + sKᵀKB)⁻¹ = (I/τ + sBKᵀK)⁻¹B: for a singular KᵀK that matrix has a
        # singular value 1/τ along null(K), where rounding puts a part of BA (A = KᵀQ has none): M wrong by 1e13 at
        # tr Σ = 1e30 (a review; one LU factorisation with a transposed solve for `c` was accurate, 5 % faster)
        m = s * (v @ (b @ jnp.linalg.solve(eye / tau + s * kk @ b, a)))
        c = v @ (jnp.linalg.solve(eye / tau + s * b @ kk, mean) / tau)
        # a traced or callable βc < 0 (a concrete one raised above): no map the solvers can follow, NaN, so
        # that a solve stops `non_finite` where βc turns negative instead of returning a verdict without meaning
        nan = jnp.where(s < 0, jnp.nan, 0.0).astype(m.dtype)
        return m + nan, c + nan
