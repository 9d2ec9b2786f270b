"""Gaussian measures under attention dynamics: moment ODEs and their solve (spec dynamics.md §2, §4).

When the velocity field on `μ = N(α, Σ)` is affine, `Γ_μ(x) = Mx + c` (`M`, `c` depending
on `α`, `Σ` only), `N(α, Σ)` stays Gaussian with `α' = Mα + c`, `Σ' = MΣ + ΣMᵀ`; the
solver integrates a factor `U` (`Σ = UUᵀ`, `U' = MU`), which keeps `Σ` PSD and its rank
invariant at every finite time (spec §2). The affine maps (`A = KᵀQ`, `β` the inverse
temperature, all derived and checked by Monte Carlo in the tests):

========== ===================================================================== ============
kind       `M`, `c` on `N(α, Σ)`                                                  source
========== ===================================================================== ============
softmax    `M = βVΣA`, `c = Vα`                                                   (paper)
multihead  `M = Σ_h M_h`, `c = Σ_h c_h` with head `h`'s map for its kind, `V = C_h` (paper)
l2         `M = 2βcVΣ(I + 2βcKᵀKΣ)⁻¹A`, `c = V(I + 2βcΣKᵀK)⁻¹α`                (derived)
linear     `M = βV(Σ + ααᵀ)A`, `c = 0`                                            (derived)
sinkhorn   `M = VS`, `c = V(α − Sα)`, `S = Σ^{1/2}GΣ^{1/2}Ã`, `Ã = βA/ε`,         (derived)
           `G = 2(I + (I + 4BBᵀ)^{1/2})⁻¹`, `B = Σ^{1/2}ÃΣ^{1/2}`
========== ===================================================================== ============

Sinkhorn is evaluated from any factor `U` (`Σ = UUᵀ`, `U` any shape `d×r`) as
`S = U G(CCᵀ) UᵀÃ` with `C = UᵀÃU` (derived: equal to the `Σ^{1/2}` form by the polar
decomposition `U = Σ^{1/2}R`); it needs no inverse of `A` or `Σ`, so singular `A` and
rank-deficient `Σ` work. The matrix function uses ``eigh``. Sigmoid and masked attention
do not preserve Gaussians (use :func:`~hassejax.dynamics.solve_particles`).
"""

from __future__ import annotations

from types import MappingProxyType

import diffrax
import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Real

from ..errors import ParameterError
from . import _solve
from ._linalg import psd_sqrt, sym_funm, symmetrize
from .params import AttentionParams, MultiHeadParams
from .result import GaussianSolution, SolverStats

__all__ = [
    "GAUSSIAN_KINDS",
    "gaussian_affine",
    "moment_derivatives",
    "sinkhorn_slope",
    "solve_gaussian",
]

GAUSSIAN_KINDS: tuple[str, ...] = ("softmax", "l2", "linear", "sinkhorn", "multihead")
"""Kinds whose velocity field is affine on Gaussians (spec §2)."""


def _g(w):
    return 2.0 / (1.0 + jnp.sqrt(1.0 + 4.0 * w))


def _dg(w):
    r = jnp.sqrt(1.0 + 4.0 * w)
    return -4.0 / (r * (1.0 + r) ** 2)


def _affine_softmax(alpha, sigma, u, p: AttentionParams):
    a = p.interaction()
    return p.beta * p.V @ sigma @ a, p.V @ alpha


def _affine_l2(alpha, sigma, u, p: AttentionParams):
    if p.Q is None or p.K is None:
        raise ParameterError("kind 'l2' needs `Q` and `K` (the kernel is exp(−c‖Qx − Ky‖²)); got `A` only.")
    d = sigma.shape[-1]
    eye = jnp.eye(d, dtype=sigma.dtype)
    kk = p.K.T @ p.K
    s = 2.0 * p.beta * p.c
    a = p.interaction()
    m = s * p.V @ sigma @ jnp.linalg.solve(eye + s * kk @ sigma, a)
    c = p.V @ jnp.linalg.solve(eye + s * sigma @ kk, alpha)
    return m, c


def _affine_linear(alpha, sigma, u, p: AttentionParams):
    a = p.interaction()
    return p.beta * p.V @ (sigma + jnp.outer(alpha, alpha)) @ a, jnp.zeros_like(alpha)


def sinkhorn_slope(u: Float[Array, "d r"], p: AttentionParams) -> Float[Array, "d d"]:
    """Slope `S` of `E_π[y | x] = α + S(x − α)` for the entropic self-plan of `N(α, UUᵀ)` (derived, spec §2).

    `S = U g(CCᵀ) Uᵀ Ã` with `C = Uᵀ Ã U`, `Ã = βA/ε`, `g(w) = 2/(1 + √(1 + 4w))`, `U` `(d, r)`.
    Known limitation: `g(CCᵀ)` comes from `eigh` of the Gram matrix `CCᵀ`, whose condition
    number is that of `C` squared, so the relative accuracy of `S` degrades as `Σ` grows
    (measured: 1.6e-7 at `λ_max(Σ) = 3.4e5`, 2.7e-3 at `1.9e7`); long diverging Sinkhorn
    solves then need a tight `rtol` (figure 9 uses 1e-8). An SVD of `C` would avoid the squaring.
    """
    a_t = p.beta * p.interaction() / p.eps
    c = u.T @ a_t @ u
    g = sym_funm(c @ c.T, _g, _dg)
    return u @ g @ u.T @ a_t


def _affine_sinkhorn(alpha, sigma, u, p: AttentionParams):
    s = sinkhorn_slope(u, p)
    m = p.V @ s
    return m, p.V @ (alpha - s @ alpha)


_HEAD_AFFINE = MappingProxyType(
    {"softmax": _affine_softmax, "l2": _affine_l2, "linear": _affine_linear, "sinkhorn": _affine_sinkhorn}
)


def _affine(kind, t, alpha, sigma, u, params):
    if kind == "multihead":
        if not isinstance(params, MultiHeadParams):
            raise ParameterError(f"`params` for kind 'multihead' must be a MultiHeadParams; got {type(params).__name__}.")
        m = c = None
        for hk, head in zip(params.kinds, params.heads):
            if hk not in _HEAD_AFFINE:
                raise ParameterError(
                    f"head kind {hk!r} does not preserve Gaussians (spec §2); Gaussian heads may be {tuple(_HEAD_AFFINE)}."
                )
            mh, ch = _HEAD_AFFINE[hk](alpha, sigma, u, head.at(t))
            m = mh if m is None else m + mh
            c = ch if c is None else c + ch
        return m, c
    if kind not in _HEAD_AFFINE:
        raise ParameterError(
            f"`kind` must be one of {GAUSSIAN_KINDS} for Gaussian moments (sigmoid and masked attention do not "
            f"preserve Gaussians, spec §2: use solve_particles); got {kind!r}."
        )
    if not isinstance(params, AttentionParams):
        raise ParameterError(f"`params` for kind {kind!r} must be an AttentionParams; got {type(params).__name__}.")
    return _HEAD_AFFINE[kind](alpha, sigma, u, params.at(t))


def gaussian_affine(
    kind: str,
    t: Real[ArrayLike, ""],
    mean: Float[Array, " _d"],
    cov: Float[Array, "_d _d"],
    params: AttentionParams | MultiHeadParams,
) -> tuple[Float[Array, "d d"], Float[Array, " d"]]:
    """The affine velocity `Γ_μ(x) = Mx + c` on `μ = N(mean, cov)` (spec §2; table in the module docstring).

    **Arguments:** `kind` in :data:`GAUSSIAN_KINDS`; `t` depth (for time-dependent
    parameters); `mean` `(d,)`; `cov` `(d, d)` symmetric PSD; `params`.

    **Returns:** `(M, c)`, shapes `(d, d)` and `(d,)`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for a kind that does not preserve
    Gaussians, mismatched parameters or shapes.
    """
    _check_state(params, mean, cov)
    cov = symmetrize(cov)
    return _affine(kind, t, mean, cov, psd_sqrt(cov), params)


def moment_derivatives(
    kind: str,
    t: Real[ArrayLike, ""],
    mean: Float[Array, " _d"],
    cov: Float[Array, "_d _d"],
    params: AttentionParams | MultiHeadParams,
) -> tuple[Float[Array, " d"], Float[Array, "d d"]]:
    """`(α', Σ') = (Mα + c, MΣ + ΣMᵀ)` on `N(mean, cov)` (spec §2).

    Equal to `(E[Γ(X)], Cov(Γ(X), X) + Cov(Γ(X), X)ᵀ)` for `X ~ N(mean, cov)`.
    Arguments and errors as in :func:`gaussian_affine`.
    """
    m, c = gaussian_affine(kind, t, mean, cov, params)
    cov = symmetrize(cov)
    return m @ mean + c, m @ cov + cov @ m.T


def _check_state(params, mean, cov=None, factor=None):
    if not isinstance(params, (AttentionParams, MultiHeadParams)):
        raise ParameterError(f"`params` must be an AttentionParams or MultiHeadParams; got {type(params).__name__}.")
    params.check_unbatched()
    d = params.d
    if jnp.ndim(mean) != 1 or jnp.shape(mean)[0] != d:
        raise ParameterError(f"`mean0`/`mean` must have shape (d,) = ({d},) (d from params); got shape {jnp.shape(mean)}.")
    if cov is not None and jnp.shape(cov) != (d, d):
        raise ParameterError(f"`cov0`/`cov` must have shape (d, d) = ({d}, {d}); got shape {jnp.shape(cov)}.")
    if factor is not None and (jnp.ndim(factor) != 2 or jnp.shape(factor)[0] != d):
        raise ParameterError(f"`factor0` must have shape (d, r) with d = {d}; got shape {jnp.shape(factor)}.")


def _check_psd(cov, name="cov0"):
    c = np.asarray(cov, dtype=float)
    if not np.all(np.isfinite(c)):
        raise ParameterError(f"`{name}` must be finite; got NaN/inf entries.")
    scale = max(1.0, float(np.max(np.abs(c))))
    if np.max(np.abs(c - c.T)) > 1e-8 * scale:
        raise ParameterError(f"`{name}` must be symmetric; got max |C − Cᵀ| = {np.max(np.abs(c - c.T)):.3g}.")
    w = np.linalg.eigvalsh(0.5 * (c + c.T))
    if w[0] < -1e-8 * scale:
        raise ParameterError(f"`{name}` must be positive semidefinite; got smallest eigenvalue {w[0]:.3g}.")


@eqx.filter_jit
def _solve_core(kind, params, mean0, cov0, u0, t0, t1, ts, threshold, converge_tol, solver, controller, dt0, max_steps, extrapolate):
    if u0 is None:
        u0 = psd_sqrt(cov0)
    if threshold is None:
        tr0 = jnp.sum(u0**2)
        threshold = _solve.default_size_factor(tr0.dtype) * jnp.where(tr0 > 0, tr0, 1.0)

    def f(t, y):
        alpha, u = y
        sigma = u @ u.T
        m, c = _affine(kind, t, alpha, sigma, u, params)
        return (m @ alpha + c, m @ u)

    def size(y):
        return jnp.sum(y[1] ** 2)

    def speed(t, y, dy):
        u, du = y[1], dy[1]
        g = du @ u.T
        return jnp.sqrt(jnp.sum((g + g.T) ** 2))

    out = _solve.integrate(
        f,
        (mean0, u0),
        t0=t0,
        t1=t1,
        ts=ts,
        size=size,
        speed=None if converge_tol is None else speed,
        threshold=threshold,
        converge_tol=converge_tol,
        solver=solver,
        stepsize_controller=controller,
        dt0=dt0,
        max_steps=max_steps,
        extrapolate=extrapolate,
    )
    means, us = out.ys
    mean_f, u_f = out.y_final
    return GaussianSolution(
        ts=out.ts,
        valid=out.valid,
        status=out.status,
        t_final=out.t_final,
        t_blowup=out.t_blowup,
        blowup_method=out.blowup_method,
        growth_exponent=out.growth_exponent,
        decade_ratio=out.decade_ratio,
        stats=SolverStats(out.num_steps, out.num_accepted_steps, out.num_rejected_steps),
        mean=means,
        cov=us @ jnp.swapaxes(us, -1, -2),
        factor=us,
        mean_final=mean_f,
        cov_final=u_f @ u_f.T,
        factor_final=u_f,
    )


def solve_gaussian(
    kind: str,
    params: AttentionParams | MultiHeadParams,
    mean0: Float[ArrayLike, " _d"],
    cov0: Float[ArrayLike, "_d _d"] | None = None,
    *,
    t1: Real[ArrayLike, ""],
    t0: Real[ArrayLike, ""] = 0.0,
    factor0: Float[ArrayLike, "_d _r"] | None = None,
    ts: Float[ArrayLike, " T"] | None = None,
    solver: diffrax.AbstractSolver | None = None,
    rtol: float = 1e-8,
    atol: float = 1e-8,
    dt0: Real[ArrayLike, ""] | None = None,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    max_steps: int = 100_000,
    size_threshold: Real[ArrayLike, ""] | None = None,
    converge_tol: Real[ArrayLike, ""] | None = None,
    blowup_estimate: str = "extrapolated",
) -> GaussianSolution:
    """Solve the moment ODE of `N(α, Σ)` under attention kind `kind` (spec dynamics.md §2, §4).

    Integrates `α' = Mα + c`, `U' = MU` (`Σ = UUᵀ`) with diffrax (``throw=False``: every
    outcome is a status, see :class:`~hassejax.dynamics.Status`), stopping at the first of

    - the **size event** `tr Σ = size_threshold` (real-valued condition `log threshold −
      log tr Σ`, located by ``optimistix.Bisection`` on the dense output). It is classified
      by the decade test on `λ = tr Σ` (see :attr:`AbstractSolution.decade_ratio`): the
      remaining time `τ = λ/λ'` at the event against the time the last two decades of `λ`
      took; `ρ < 0.05` ⇒ `blow_up` (finite-time, `1/λ` falling linearly to zero) with
      `t_blowup = t_e + λ/λ'` (``"extrapolated"``) or `t_e` (``"threshold"``); otherwise
      `diverge` (exponential growth), `t_blowup = inf`;
    - the **steady-state event** `‖Σ'‖_F = converge_tol` (covariance only; same scalar
      condition, the smaller of the two log-margins) ⇒ `converged`; a solve that reaches
      `t1` with `‖Σ'‖_F < converge_tol` (e.g. already stationary at `t0`) is `converged` too;
    - `t1` ⇒ `completed`; step budget ⇒ `max_steps_reached`; integrator failure ⇒
      `dt_min_reached`; NaN/inf state (e.g. a constant step past a blow-up) ⇒ `non_finite`.

    Jit-compiled; works under ``jax.vmap`` over parameters and initial conditions (each
    member gets its own status; the loop runs until the slowest member stops).

    **Arguments:**

    - `kind`: one of :data:`GAUSSIAN_KINDS`.
    - `params`: :class:`AttentionParams` (or :class:`MultiHeadParams` for ``"multihead"``),
      unbatched (vmap over batched ones).
    - `mean0`: `(d,)` initial mean `α0`.
    - `cov0`: `(d, d)` initial covariance `Σ0`, symmetric PSD, possibly singular (the factor
      is its PSD square root). Give `cov0` or `factor0`, not both.
    - `t1`, `t0`: time interval.
    - `factor0`: `(d, r)` initial factor `U0` with `Σ0 = U0U0ᵀ`.
    - `ts`: `(T,)` save times in `[t0, t1]` (default `[t0, t1]`).
    - `solver`: a diffrax solver (default ``Tsit5()``).
    - `rtol`, `atol`: tolerances of the default PID controller.
    - `dt0`: initial (or constant) step; required with ``ConstantStepSize``.
    - `stepsize_controller`: overrides the PID controller (e.g. ``ConstantStepSize()``).
      With the default controller, layer boundaries of :class:`PiecewiseConstant`
      parameters are passed as ``jump_ts``. The solver state is augmented by one scalar
      (time spent below `threshold/100`, for the decade test); the default controller
      leaves it out of its error norm, a user-supplied adaptive one does not.
    - `max_steps`: step budget.
    - `size_threshold`: the event threshold on `tr Σ` (default `1e8 · tr Σ0`, or `1e8` when
      `tr Σ0 = 0`; `1e4` in place of `1e8` in float32, whose time resolution cannot follow a
      blow-up to `1e8`; `inf` disables the event; keep it >= 1e3 · tr Σ0 for the decade test).
      Relative accuracy of a threshold-based
      `t_blowup` is about `tr Σ0 / threshold`; extrapolation is exact to `O(threshold⁻²)`
      for the softmax closed form.
    - `converge_tol`: steady-state tolerance on `‖Σ'‖_F` (None: no steady-state event).
    - `blowup_estimate`: ``"extrapolated"`` (default) or ``"threshold"``.

    **Returns:** a :class:`~hassejax.dynamics.GaussianSolution`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for an unknown kind, parameters of
    the wrong type or batched, shape mismatches, a non-symmetric / non-PSD / non-finite
    concrete `cov0`, both or neither of `cov0`, `factor0`, `t1 <= t0`, unsorted `ts` or
    `ts` outside `[t0, t1]`, a non-positive tolerance or threshold, an unknown
    `blowup_estimate`.
    """
    if kind not in GAUSSIAN_KINDS:
        raise ParameterError(
            f"`kind` must be one of {GAUSSIAN_KINDS} for Gaussian moments (sigmoid and masked attention do not "
            f"preserve Gaussians, spec §2: use solve_particles); got {kind!r}."
        )
    if blowup_estimate not in ("extrapolated", "threshold"):
        raise ParameterError(f"`blowup_estimate` must be 'extrapolated' or 'threshold'; got {blowup_estimate!r}.")
    if (cov0 is None) == (factor0 is None):
        raise ParameterError("Give exactly one of `cov0` (d, d) and `factor0` (d, r); got " + ("neither." if cov0 is None else "both."))
    mean_c, cov_c = _solve.concrete(mean0), _solve.concrete(cov0)
    if mean_c is not None and not np.all(np.isfinite(mean_c)):
        raise ParameterError("`mean0` must be finite; got NaN/inf entries.")
    mean0 = jnp.asarray(mean0)
    dtype = _solve.state_dtype(params, mean0, None if cov0 is None else jnp.asarray(cov0), None if factor0 is None else jnp.asarray(factor0))
    mean0 = mean0.astype(dtype)
    if cov0 is not None:
        cov0 = jnp.asarray(cov0, dtype)
        _check_state(params, mean0, cov=cov0)
        if cov_c is not None:
            _check_psd(cov_c)
        u0 = None
    else:
        u0 = jnp.asarray(factor0, dtype)
        _check_state(params, mean0, factor=u0)
    _solve.check_times(t0, t1, ts)
    _solve.check_solver_settings(rtol, atol, max_steps, dt0, stepsize_controller, dtype)
    _solve.check_finite_params(params)
    _solve.check_positive(size_threshold, "size_threshold")
    _solve.check_positive(converge_tol, "converge_tol")
    t0 = jnp.asarray(t0, dtype)
    t1 = jnp.asarray(t1, dtype)
    ts = jnp.stack([t0, t1]) if ts is None else jnp.asarray(ts, dtype)
    threshold = None if size_threshold is None else jnp.asarray(size_threshold, dtype)
    if converge_tol is not None:
        converge_tol = jnp.asarray(converge_tol, dtype)
    solver = diffrax.Tsit5() if solver is None else solver
    controller = _solve.make_controller(stepsize_controller, rtol, atol, _solve.collect_jump_ts(params))
    if dt0 is not None:
        dt0 = jnp.asarray(dt0, dtype)
    return _solve_core(
        kind, params, mean0, cov0, u0, t0, t1, ts, threshold, converge_tol, solver, controller, dt0, int(max_steps),
        blowup_estimate == "extrapolated",
    )
