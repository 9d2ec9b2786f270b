"""Exact rank-`k` form of the softmax particle system of a trained head on padded groups of tokens (derived; spec §1, §4).

Every velocity of a :class:`~hassejax.dynamics.LowRankSoftmax` head lies in `range W_O`,
so `x_i(t) = x_i(0) + W_O z_i(t)` with `z_i ∈ R^k` and

    `ż_i = Σ_j w_ij (W_V x_j(0) + VO z_j)`,   `w_i = softmax_j((Qx_i(0) + QW_O z_i)·(Kx_j(0) + KO z_j))`

over the keys allowed by the mask (`VO = W_V W_O`, `KO = K W_O`): `O(n²k)` per evaluation
instead of `O(n²d + nd²)`.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float, Real

from ...errors import ParameterError
from .. import _solve
from .._arguments import Controller, ProgressMeter, SaveTimes, Scalar, Solver
from ..particles import _check_pair_memory
from ._common import AbstractReduction, head_products, solve_reduction, solve_settings
from ._gaussian import _check_model
from ._kernel import LowRankSoftmax
from ._solution import LowRankParticleSolution

__all__ = ["ParticleReduction", "solve_low_rank_particles", "solve_low_rank_particles_each"]

Tokens = Float[Array, "S N d"]
"""`S` sequences of `N` tokens (padding included) in `R^d`."""
TokenMask = Bool[Array, "S N"]
"""True on the real tokens, False on padding."""
Projected = Float[Array, "S N k"]
"""The tokens projected to the head's `k` dimensions."""


class ParticleReduction(AbstractReduction):
    """The constants of the reduced particle system of one head on groups of tokens (module docstring).

    Build with :meth:`from_tokens`; the state is `z` `(S, N, k)`. Fields: the projections of
    the initial tokens `q0 = x0Qᵀ`, `k0`, `v0` `(S, N, k)`; `QO`, `KO`, `VO`, `OO = W_OᵀW_O`
    `(k, k)`; `x0c_O` `(S, N, k)` the centred real tokens times `W_O` (0 on padding);
    `mask` `(S, N)`; `count` the number of real tokens; `trace0` their initial covariance trace.

    Source: (derived) from the softmax particle system of spec dynamics.md §1: every velocity of the head lies in
    `range W_O`, so `x_i(t) = x_i(0) + W_O z_i(t)`.

    **Example:** with `A = 0` every real token of a group moves at `V` times the group's mean (here its first
    coordinate: 2 and 5), padding stays; the three real tokens have covariance trace `10/3`:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import LowRankSoftmax
    >>> from hassejax.dynamics.low_rank import ParticleReduction
    >>> e = jnp.array([[1.0, 0.0]])
    >>> head = LowRankSoftmax(jnp.zeros((1, 2)), jnp.zeros((1, 2)), e, e.T)
    >>> x0 = jnp.array([[[1.0, 0.0], [3.0, 1.0]], [[5.0, 2.0], [0.0, 0.0]]])
    >>> red = ParticleReduction.from_tokens(head, x0, jnp.array([[True, True], [True, False]]))
    >>> red.vector_field(0.0, red.initial_state()).tolist(), float(red.count), round(float(red.trace0), 6)
    ([[[2.0], [2.0]], [[5.0], [0.0]]], 3.0, 3.333333)

    ```
    """

    q0: Projected
    k0: Projected
    v0: Projected
    x0c_O: Projected
    mask: TokenMask
    count: Float[Array, ""]
    trace0: Float[Array, ""]

    @classmethod
    def from_tokens(cls, model: LowRankSoftmax, x0: Tokens, mask: TokenMask) -> ParticleReduction:
        """The constants for head `model` (unbatched, in the dtype of `x0`) on tokens `x0` with `mask` (no value checks)."""
        m = mask.astype(x0.dtype)[..., None]
        count = jnp.sum(m)
        xbar = jnp.sum(x0 * m, axis=(0, 1)) / count
        x0c = (x0 - xbar) * m
        return cls(
            q0=x0 @ model.Q.T,
            k0=x0 @ model.K.T,
            v0=x0 @ model.W_V.T,
            **head_products(model),
            x0c_O=x0c @ model.W_O,
            mask=mask,
            count=count,
            trace0=jnp.sum(x0c**2) / count,
        )

    def initial_state(self):
        """`z = 0`."""
        return jnp.zeros(self.q0.shape, self.q0.dtype)

    def vector_field(self, t, z):
        """`ż` (module docstring); padded positions do not move."""
        # the three projections as one product (one (k, 3k) matrix: a per-sentence step 10 % faster on a CPU, where
        # three small products each pay their call; the same numbers up to rounding)
        k = z.shape[-1]
        p = jnp.concatenate([self.q0, self.k0, self.v0], -1) + z @ jnp.concatenate([self.QO, self.KO, self.VO]).T
        q, kk, v = p[..., :k], p[..., k : 2 * k], p[..., 2 * k :]
        logits = jnp.einsum("sik,sjk->sij", q, kk)
        logits = jnp.where(self.mask[:, None, :], logits, -jnp.inf)
        w = jax.nn.softmax(logits, axis=-1)
        dz = jnp.einsum("sij,sjk->sik", w, v)
        return jnp.where(self.mask[..., None], dz, 0.0)

    def size(self, z) -> Array:
        """Trace of the covariance of all real tokens `x0 + zW_Oᵀ`, from `k`-dimensional products."""
        m = self.mask[..., None].astype(z.dtype)
        zbar = jnp.sum(z * m, axis=(0, 1)) / self.count
        zc = (z - zbar) * m
        cross = jnp.sum(zc * self.x0c_O)
        quad = jnp.sum((zc @ self.OO) * zc)
        return self.trace0 + (2.0 * cross + quad) / self.count

    def size_floor(self, z) -> Array:
        """`k tr(W_OᵀW_O) (eps max |z|)²`: the spread rounding alone gives once the tokens' mean has drifted far
        (each centred coordinate of `z` off by ~eps max |z|)."""
        k = z.shape[-1]
        return k * jnp.trace(self.OO) * (jnp.finfo(z.dtype).eps * jnp.max(jnp.abs(z))) ** 2

    def solution(self, out) -> LowRankParticleSolution:
        """The solution type."""
        return LowRankParticleSolution.from_integrate(out, z=out.ys, z_final=out.y_final)


def solve_low_rank_particles(
    model: LowRankSoftmax, x0: Float[ArrayLike, "S N _d"], mask: Bool[ArrayLike, "S N"], *,
    t1: Scalar, t0: Scalar = 0.0, ts: SaveTimes | None = None, solver: Solver | None = None,
    rtol: Scalar = 1e-6, atol: Scalar = 1e-6, dt0: Scalar | None = None, stepsize_controller: Controller | None = None,
    max_steps: int = 100_000, size_threshold: Scalar | None = None, blowup_estimate: str = "extrapolated",
    progress_meter: ProgressMeter | None = None,
) -> LowRankParticleSolution:  # fmt: skip
    """The softmax particle system (spec §1) of a rank-`k` head on padded groups of tokens, solved in rank-`k` form.

    Tokens come in `S` groups of up to `N` (the padded batch layout of a tokenizer): token
    `(s, i)` with `mask[s, i]` attends to the tokens `(s, j)` with `mask[s, j]` (the model's
    padding mask: one empirical measure per sentence); padded positions do not move and
    count nowhere. One group holding every token (`S = 1`) is the pooled measure. This is
    exactly :func:`~hassejax.dynamics.solve_particles` on the real tokens (`model` for one
    group; ``Masked(model, block-diagonal mask of the groups)`` otherwise), with the size
    `λ` = trace of the covariance of all real tokens together (events and statuses of spec
    §4; a finite particle system cannot blow up in finite time, so a threshold crossing is
    reported as `diverge` by the decade test), but the state is `z`, `x = x0 + zW_Oᵀ`
    (module docstring). Jit-compiled, vmappable over heads.

    **Arguments:**

    - `model`: the head (:class:`~hassejax.dynamics.LowRankSoftmax`, unbatched), cast to the dtype of `x0`.
    - `x0`: `(S, N, d)` float tokens; its dtype sets the precision (float32 is adequate:
      particles cannot blow up).
    - `mask`: `(S, N)` Boolean, True at real tokens, at least one per group.
    - `t1`, `t0`, `ts`, `solver`, `rtol`, `atol` (default 1e-6), `dt0`, `stepsize_controller`,
      `max_steps`, `blowup_estimate`, `progress_meter`: as in
      :func:`~hassejax.dynamics.solve_low_rank_gaussian`.
    - `size_threshold`: threshold on `λ` (default `1e8 · λ(x0)`, `1e4 ·` in float32;
      a concrete `inf`: no size event, as in
      :func:`~hassejax.dynamics.solve_gaussian`).

    **Returns:** a :class:`~hassejax.dynamics.LowRankParticleSolution` (state `z`
    `(T, S, N, k)`; :meth:`~hassejax.dynamics.LowRankParticleSolution.tokens` gives `x`).

    **Raises:** :class:`~hassejax.errors.ParameterError` for a model that is not an unbatched
    :class:`~hassejax.dynamics.LowRankSoftmax`, inconsistent shapes, a non-Boolean mask, a
    group without tokens (concrete masks), non-finite (concrete) `x0`, an `x0` in half precision (float16,
    bfloat16; not promoted to float32), bad times,
    tolerances or thresholds (a concrete `size_threshold` at or below the initial size);
    :class:`~hassejax.errors.MemoryBudgetError` naming `x0` when the `(S, N, N)` attention weights of a velocity
    evaluation (about four such arrays) would not fit in 80 % of the free memory (as
    :func:`~hassejax.dynamics.solve_particles`).

    Source: (derived), module docstring; spec dynamics.md §1, §4.

    **Example:** with `A = 0` each group moves to `V` times its mean: here `ẋ = x̄₁e₁` per group:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import LowRankSoftmax, solve_low_rank_particles
    >>> e = jnp.array([[1.0, 0.0]])
    >>> head = LowRankSoftmax(jnp.zeros((1, 2)), jnp.zeros((1, 2)), e, e.T)
    >>> x0 = jnp.array([[[1.0, 0.0], [3.0, 1.0]], [[5.0, 2.0], [0.0, 0.0]]])
    >>> mask = jnp.array([[True, True], [True, False]])
    >>> sol = solve_low_rank_particles(head, x0, mask, t1=1.0)
    >>> [[f"{v:.3f}" for v in row] for row in sol.tokens(head, x0)[-1, :, :, 0].tolist()]  # + 2(e − 1), + 5(e − 1), padding fixed
    [['4.437', '6.437'], ['13.591', '0.000']]

    ```
    """
    model = _check_model(model)
    d = model.d
    x0_raw, mask_raw = _solve.concrete(x0), _solve.concrete(mask)  # as given: concrete under jit too
    x0 = jnp.asarray(x0)
    mask = jnp.asarray(mask)
    if x0.ndim != 3 or x0.shape[-1] != d:
        raise ParameterError(f"`x0` must have shape (S, N, d) with d = {d}; got {x0.shape}.")
    if mask.shape != x0.shape[:2] or mask.dtype != jnp.bool_:
        raise ParameterError(f"`mask` must be Boolean of shape (S, N) = {x0.shape[:2]}; got {mask.dtype} {mask.shape}.")
    mask_c, x0_c = _solve.concrete(mask), _solve.concrete(x0)
    if mask_c is not None and not bool(np.all(mask_c.any(axis=1))):
        raise ParameterError(
            f"`mask`: every group needs at least one real token; groups {np.flatnonzero(~mask_c.any(axis=1)).tolist()} are empty."
        )
    if x0_c is not None and not np.all(np.isfinite(x0_c)):
        raise ParameterError("`x0` must be finite; got NaN/inf entries.")
    dtype = jnp.result_type(x0.dtype, jnp.float32)
    _solve.check_state_precision(dtype, {"x0": x0}, "", "model")  # a half-precision x0 (`dtype` is never half)
    _check_pair_memory(x0.shape[1], dtype, groups=x0.shape[0])  # the (S, N, N) weights of an evaluation
    x0 = x0.astype(dtype)
    model = jax.tree.map(lambda a: a.astype(dtype), model)
    settings = solve_settings(
        dtype, t0=t0, t1=t1, ts=ts, solver=solver, rtol=rtol, atol=atol, dt0=dt0,
        stepsize_controller=stepsize_controller, max_steps=max_steps, size_threshold=size_threshold,
        blowup_estimate=blowup_estimate, progress_meter=progress_meter,
    )  # fmt: skip
    if size_threshold is not None and x0_raw is not None and mask_raw is not None:
        trace0 = _solve.token_spread(x0_raw, mask_raw)  # as ParticleReduction.trace0
        _solve.check_size_threshold(size_threshold, trace0, "the initial trace of the real tokens' covariance", dtype)
    return solve_reduction(ParticleReduction.from_tokens(model, x0, mask), settings)


def _run(models: LowRankSoftmax, i: int) -> LowRankSoftmax:
    return jax.tree.map(lambda a: a[i], models)


@eqx.filter_jit
def _solve_jit(model, x0, mask, **options):
    return solve_low_rank_particles(model, x0, mask, **options)


def solve_low_rank_particles_each(
    models: LowRankSoftmax,
    x0: Float[ArrayLike, "*runs S N _d"],
    mask: Bool[ArrayLike, "S N"],
    *,
    t1: Real[ArrayLike, " R"],
    ts: Float[ArrayLike, "R T"],
    **options,
) -> LowRankParticleSolution:
    """:func:`solve_low_rank_particles` for `R` runs, one after another, stacked on a leading axis.

    One compiled solve (shapes are shared; `t1` and `ts` are traced) is called run by run,
    not one ``vmap`` over runs: a vmapped ``while_loop`` steps every member until the
    slowest is done, and the step counts of trained heads differ ~240-fold (48 to 11,320 on
    layer 3 of all-MiniLM-L6-v2, where a head near its Gaussian blow-up time is stiff):
    there the vmapped solve had not finished after 6 min; run by run it takes 12–26 s.

    **Arguments:** `models`: a :class:`~hassejax.dynamics.LowRankSoftmax` with a leading run
    axis `R`; `x0`: `(S, N, d)` shared by every run, or `(R, S, N, d)` one per run; `mask`
    `(S, N)` shared; `t1` `(R,)`, `ts` `(R, T)`; `options`: the keyword options of
    :func:`solve_low_rank_particles` (`rtol`, `atol`, `max_steps`, ...; static).

    **Returns:** a :class:`~hassejax.dynamics.LowRankParticleSolution` with a leading axis `R`.

    **Raises:** :class:`~hassejax.errors.ParameterError` as :func:`solve_low_rank_particles`,
    and for a `models` without a run axis or run counts that disagree.

    Source: (derived), as :func:`solve_low_rank_particles` (spec dynamics.md §1, §4); run by run because under
    `vmap` the loop runs until the slowest member stops (spec §4 "Sweeps").

    **Example:**

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import LowRankSoftmax, solve_low_rank_particles_each
    >>> e = jnp.array([[[1.0, 0.0]], [[0.5, 0.0]]])  # two heads
    >>> heads = LowRankSoftmax(jnp.zeros((2, 1, 2)), jnp.zeros((2, 1, 2)), e, jnp.swapaxes(e, 1, 2))
    >>> x0, mask = jnp.array([[[1.0, 0.0], [3.0, 1.0]]]), jnp.ones((1, 2), bool)
    >>> sol = solve_low_rank_particles_each(heads, x0, mask, t1=jnp.ones(2), ts=jnp.array([[0.0, 1.0]] * 2))
    >>> sol.z.shape, sol.status.tolist()
    ((2, 2, 1, 2, 1), [0, 0])

    ```
    """
    if not isinstance(models, LowRankSoftmax) or models.Q.ndim != 3:
        raise ParameterError(
            f"`models` must be a LowRankSoftmax with one leading run axis (R, k, d); got {type(models).__name__}."
        )
    runs = models.Q.shape[0]
    per_run = np.ndim(x0) == 4  # NumPy's shapes: lists without a deprecation warning
    if np.shape(t1) != (runs,) or np.ndim(ts) != 2 or np.shape(ts)[0] != runs or (per_run and np.shape(x0)[0] != runs):
        raise ParameterError(
            f"`t1` must have shape (R,), `ts` (R, T) and a per-run `x0` (R, S, N, d) with R = {runs} (from `models`); "
            f"got {np.shape(t1)}, {np.shape(ts)}, {np.shape(x0)}."
        )
    x0, mask, t1, ts = jnp.asarray(x0), jnp.asarray(mask), jnp.asarray(t1), jnp.asarray(ts)
    sols = [
        _solve_jit(_run(models, i), x0[i] if per_run else x0, mask, t1=t1[i], ts=ts[i], **options) for i in range(runs)
    ]
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *sols)
