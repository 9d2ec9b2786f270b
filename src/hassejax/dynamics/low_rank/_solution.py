"""Solution types of the exact rank-`k` solves: the ordinary status fields plus the reduced state."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float

from ..._tracing import is_traced
from ...errors import ParameterError
from .._linalg import below_psd, psd_sqrt, refuse_indefinite, symmetrize
from ..result import AbstractSolution, BlowupMethod, GaussianSolution, ParticleSolution, Status
from ._kernel import LowRankSoftmax

__all__ = ["LowRankGaussianSolution", "LowRankParticleSolution"]


class LowRankGaussianSolution(AbstractSolution):
    """A :func:`~hassejax.dynamics.solve_low_rank_gaussian` solve: the fields of
    :class:`~hassejax.dynamics.AbstractSolution` (status, `ts`, `valid`, `t_final`,
    `t_blowup`, ..., `stats`) and the reduced state (fields gain batch axes under ``vmap``):

    - `b`: `(*batch, T, k)` and `psi`: `(*batch, T, k, k)` at `ts`, with
      `α(t) = α0 + W_O b(t)`, `Φ(t) = I + W_O Ψ(t) Q`, `Σ(t) = Φ(t) Σ0 Φ(t)ᵀ` (derived);
    - `b_final`, `psi_final`: the state at `t_final`.

    :meth:`moments` gives `α`, `Σ` at `ts`; :meth:`to_gaussian` the ordinary
    :class:`~hassejax.dynamics.GaussianSolution` (`d×d` per saved time: small problems).

    Source: (derived) spec dynamics.md §2 (`Σ = ΦΣ0Φᵀ`) and §4 (the status fields); module
    :mod:`hassejax.dynamics.low_rank`.

    **Example:** a head with `A = V = diag(1, 0)` blows up at `t* = 1/(2 Σ0[0, 0]) = 1` (spec §3); only
    `range W_O` (the first axis) grows:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import LowRankSoftmax, solve_low_rank_gaussian, status_names
    >>> e = jnp.array([[1.0, 0.0]])
    >>> head = LowRankSoftmax(e, e, e, e.T)
    >>> sol = solve_low_rank_gaussian(head, jnp.zeros(2), jnp.eye(2) / 2, t1=5.0, rtol=1e-6, atol=1e-6)
    >>> status_names(sol.status), round(float(sol.t_blowup), 3), sol.b.shape, sol.psi.shape
    ('blow_up', 1.0, (2, 1), (2, 1, 1))
    >>> cov = sol.to_gaussian(head, jnp.zeros(2), jnp.eye(2) / 2).cov_final
    >>> float(cov[0, 0]) > 1e3, round(float(cov[1, 1]), 6)  # the size event: 1e8 tr Σ0 in float64, 1e4 in float32
    (True, 0.5)

    ```
    """

    b: Float[Array, "*batch T k"]
    psi: Float[Array, "*batch T k k"]
    b_final: Float[Array, "*batch k"]
    psi_final: Float[Array, "*batch k k"]

    def moments(
        self, model: LowRankSoftmax, mean0: Float[ArrayLike, " d"], cov0: Float[ArrayLike, "d d"]
    ) -> tuple[Float[Array, "T d"], Float[Array, "T d d"]]:
        """`(α, Σ)` at `ts`, shapes `(T, d)`, `(T, d, d)`, from the head and the initial moments of the solve (unbatched)."""
        return _moments(model, mean0, cov0, self.b, self.psi)

    def to_gaussian(
        self, model: LowRankSoftmax, mean0: Float[ArrayLike, " d"], cov0: Float[ArrayLike, "d d"]
    ) -> GaussianSolution:
        """The ordinary :class:`~hassejax.dynamics.GaussianSolution` (factor `U(t) = Φ(t) Σ0^{1/2}`, as
        :func:`~hassejax.dynamics.solve_gaussian` starts from `Σ0^{1/2}`); same status fields (unbatched).

        **Raises:** :class:`~hassejax.errors.ParameterError` for a concrete finite `cov0` that is not positive
        semidefinite (the rule of the solve's own `cov0` check, on its symmetric part). A traced one that is no
        covariance gives the status ``indefinite`` (no blow-up), as the solve does (its PSD part's moments before).
        """
        refuse_indefinite(cov0, "cov0")
        s0 = jnp.asarray(cov0, self.psi.dtype)
        u0, w_min = psd_sqrt(s0, with_min=True)
        eye = jnp.eye(model.d, dtype=self.psi.dtype)
        u = (eye + model.W_O @ self.psi @ model.Q) @ u0
        u_f = (eye + model.W_O @ self.psi_final @ model.Q) @ u0
        fields = {name: getattr(self, name) for name in AbstractSolution.__dataclass_fields__}
        if is_traced(cov0):  # a traced Σ0 that is no covariance: the solve's status (its `flag_status`)
            flag = below_psd(symmetrize(s0), w_min, jnp.asarray(cov0).dtype) & ~_invalid_inputs(fields["status"])
            fields["status"] = jnp.where(flag, int(Status.indefinite), fields["status"]).astype(fields["status"].dtype)
            fields["t_blowup"] = jnp.where(flag, jnp.inf, fields["t_blowup"]).astype(fields["t_blowup"].dtype)
            method = fields["blowup_method"]
            fields["blowup_method"] = jnp.where(flag, int(BlowupMethod.none), method).astype(method.dtype)
        return GaussianSolution(
            **fields,
            mean=jnp.asarray(mean0) + self.b @ model.W_O.T,
            cov=u @ jnp.swapaxes(u, -1, -2),
            factor=u,
            mean_final=jnp.asarray(mean0) + model.W_O @ self.b_final,
            cov_final=u_f @ u_f.T,
            factor_final=u_f,
        )


def _invalid_inputs(status):
    """The statuses that an ``indefinite`` flag leaves as they are (as :func:`.._solve.flag_status`)."""
    return (
        (status == Status.invalid_times) | (status == Status.invalid_threshold) | (status == Status.invalid_tolerance)
    )


def _moments(model, mean0, cov0, b, psi):
    s0 = jnp.asarray(cov0)
    phi = jnp.eye(s0.shape[-1], dtype=psi.dtype) + model.W_O @ psi @ model.Q
    cov = phi @ s0 @ jnp.swapaxes(phi, -1, -2)
    return jnp.asarray(mean0) + b @ model.W_O.T, 0.5 * (cov + jnp.swapaxes(cov, -1, -2))


class LowRankParticleSolution(AbstractSolution):
    """A :func:`~hassejax.dynamics.solve_low_rank_particles` solve: the fields of
    :class:`~hassejax.dynamics.AbstractSolution` and the reduced state (batch axes in front under ``vmap``):

    - `z`: `(*batch, T, S, N, k)` at `ts`, tokens `x = x0 + z W_Oᵀ` (:meth:`tokens`);
    - `z_final`: `(*batch, S, N, k)` at `t_final`.

    :meth:`to_particles` gives the ordinary :class:`~hassejax.dynamics.ParticleSolution` of
    the real tokens.

    Source: (derived) spec dynamics.md §1 (particles) and §4 (the status fields); module
    :mod:`hassejax.dynamics.low_rank`.

    **Example:** with `A = 0` each group moves to `V` times its mean: `z(1) = (e − 1) x̄₁` per group, padding fixed:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import LowRankSoftmax, solve_low_rank_particles
    >>> e = jnp.array([[1.0, 0.0]])
    >>> head = LowRankSoftmax(jnp.zeros((1, 2)), jnp.zeros((1, 2)), e, e.T)
    >>> x0 = jnp.array([[[1.0, 0.0], [3.0, 1.0]], [[5.0, 2.0], [0.0, 0.0]]])
    >>> mask = jnp.array([[True, True], [True, False]])
    >>> sol = solve_low_rank_particles(head, x0, mask, t1=1.0)
    >>> sol.z.shape, [[f"{v:.3f}" for v in row] for row in sol.z_final[:, :, 0].tolist()]
    ((2, 2, 2, 1), [['3.437', '3.437'], ['8.591', '0.000']])
    >>> sol.to_particles(head, x0, mask).x_final.shape  # the three real tokens
    (3, 2)

    ```
    """

    z: Float[Array, "*batch T S N k"]
    z_final: Float[Array, "*batch S N k"]

    def tokens(self, model: LowRankSoftmax, x0: Float[ArrayLike, "S N d"]) -> Float[Array, "T S N d"]:
        """Tokens `x = x0 + z W_Oᵀ` at `ts`, shape `(T, S, N, d)` (padding stays at `x0`; unbatched)."""
        return jnp.asarray(x0) + self.z @ model.W_O.T.astype(self.z.dtype)

    def to_particles(
        self, model: LowRankSoftmax, x0: Float[ArrayLike, "S N d"], mask: Bool[ArrayLike, "S N"]
    ) -> ParticleSolution:
        """The ordinary :class:`~hassejax.dynamics.ParticleSolution` of the real tokens `x0[mask]`
        (`n` = their number, in row-major order; unbatched, concrete `mask`).

        **Raises:** :class:`~hassejax.errors.ParameterError` for a mask of another shape than `x0`'s `(S, N)`.
        """
        m = np.asarray(mask)
        if m.shape != jnp.shape(x0)[:2]:
            raise ParameterError(f"`mask` must have shape (S, N) = {jnp.shape(x0)[:2]}; got {m.shape}.")
        fields = {name: getattr(self, name) for name in AbstractSolution.__dataclass_fields__}
        x_final = jnp.asarray(x0) + self.z_final @ model.W_O.T.astype(self.z.dtype)
        return ParticleSolution(**fields, xs=self.tokens(model, x0)[:, m], x_final=x_final[m])
