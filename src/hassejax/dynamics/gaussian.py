"""Gaussian measures under attention dynamics: moment ODEs and their solve (spec dynamics.md §2, §4).

The affine map of each kernel lives in its module
(:meth:`AbstractAttention.gaussian_affine <hassejax.dynamics.AbstractAttention.gaussian_affine>`);
this module solves the moment ODE for any kernel that has one.

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

import warnings

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._checks import check_memory
from .._tracing import is_traced
from .._warn import user_stacklevel
from ..errors import ParameterError
from ..masks._runs import check_host_memory
from . import _solve
from ._arguments import Controller, ProgressMeter, SaveTimes, Scalar, Solver, concrete, input_shape, numeric_dtype
from ._linalg import below_psd, check_psd, psd_sqrt, refuse_indefinite, symmetrize
from ._projective import projective_integrate
from ._tsit5 import UnrolledTsit5
from .attention import L2, AbstractAttention, Sinkhorn, check_model
from .attention._base import check_output_shapes
from .attention._shapes import GaussianMap, Matrix, Mean
from .params import PiecewiseConstant
from .result import GaussianSolution, Status

__all__ = [
    "gaussian_affine",
    "moment_derivatives",
    "solve_gaussian",
]

# A state of any dimension (`_d` binds nothing: the returned shapes bind `d`).
AnyMean = Float[Array, " _d"]
AnyCov = Float[Array, "_d _d"]


def _gaussian_model(model) -> AbstractAttention:
    """`model`, checked to be a kernel with a Gaussian map."""
    check_model(model)
    model.check_gaussian("model")
    return model


def gaussian_affine(model: AbstractAttention, t: Scalar, mean: AnyMean, cov: AnyCov) -> GaussianMap:
    """The affine velocity `Γ_μ(x) = Mx + c` on `μ = N(mean, cov)` (spec §2; table in the module docstring).

    **Arguments:** `model` an attention kernel with a Gaussian map; `t` depth (for time-dependent
    parameters); `mean` `(d,)`; `cov` `(d, d)` symmetric PSD.

    **Returns:** `(M, c)`, shapes `(d, d)` and `(d,)`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for a kernel that does not
    preserve Gaussians, mismatched parameters or shapes, or a concrete finite `cov` that is not positive semidefinite
    (the rule of the solvers' `cov0` check; its symmetric part is taken). A traced `cov` that is no covariance by that
    rule gives NaN `M`, `c` (its PSD part's map before); one with NaN/inf entries is computed through.

    Source: spec dynamics.md §2, the table of `M`, `c` (softmax and multi-head: the paper, Castin, Ablin, Carrillo,
    Peyré, arXiv:2501.18322; L2, linear and Sinkhorn: derived, as the module docstring marks them).

    **Example:**

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Softmax, gaussian_affine
    >>> M, c = gaussian_affine(Softmax(V=jnp.eye(2), A=jnp.eye(2), beta=2.0), 0.0, jnp.ones(2), jnp.eye(2) / 2)
    >>> M.tolist(), c.tolist()
    ([[1.0, 0.0], [0.0, 1.0]], [1.0, 1.0])

    ```
    """
    model = _gaussian_model(model)
    _check_state(model, "model", mean, cov)
    refuse_indefinite(cov, "cov")
    return _gaussian_affine(model, t, mean, cov, mark=is_traced(cov))


def _gaussian_affine(model, t, mean, cov, mark: bool = False):
    """The map on `N(mean, cov)`, unchecked (the internal callers' path: a state past a blow-up or one the solve
    left indefinite goes through); with `mark`, NaN where `cov` is no covariance by :func:`._linalg.below_psd`."""
    cov = symmetrize(cov)
    root, w_min = psd_sqrt(cov, with_min=True)
    m, c = model.gaussian_affine(t, mean, cov, root)
    if mark:  # times NaN, not `where`: the derivative NaN too (a review: `where` gave NaN values with derivative 0)
        nan_or_one = jnp.where(below_psd(cov, w_min), jnp.nan, 1.0).astype(m.dtype)
        m, c = m * nan_or_one[..., None, None], c * nan_or_one[..., None]
    return m, c


def moment_derivatives(model: AbstractAttention, t: Scalar, mean: AnyMean, cov: AnyCov) -> tuple[Mean, Matrix]:
    """`(α', Σ') = (Mα + c, MΣ + ΣMᵀ)` on `N(mean, cov)` (spec §2).

    Equal to `(E[Γ(X)], Cov(Γ(X), X) + Cov(Γ(X), X)ᵀ)` for `X ~ N(mean, cov)`.
    Arguments and errors as in :func:`gaussian_affine`.

    **Raises:** :class:`~hassejax.errors.ParameterError` as :func:`gaussian_affine`: a `model` that is not an
    attention kernel or does not preserve Gaussians (sigmoid, masked), batched parameters, `mean`, `cov` not of
    shape `(d,)`, `(d, d)`, or a concrete finite `cov` that is not positive semidefinite (traced: NaN, as
    :func:`gaussian_affine`). NaN/inf entries are computed through.

    Source: spec dynamics.md §2 (`α' = Mα + c`, `Σ' = MΣ + ΣMᵀ`, and the identity `α' = E[Γ(X)]`,
    `Σ' = Cov(Γ(X), X) + transpose`).

    **Example:** softmax with `V = I`, `A = −I`: `Σ' = −2Σ²`:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Softmax, moment_derivatives
    >>> dmean, dcov = moment_derivatives(Softmax(V=jnp.eye(2), A=-jnp.eye(2)), 0.0, jnp.zeros(2), jnp.eye(2))
    >>> bool(jnp.allclose(dcov, -2.0 * jnp.eye(2))), bool(jnp.allclose(dmean, 0.0))
    (True, True)

    ```
    """
    m, c = gaussian_affine(model, t, mean, cov)
    cov = symmetrize(cov)
    return m @ mean + c, m @ cov + cov @ m.T


def _moment_derivatives_unchecked(model, t, mean, cov):
    """:func:`moment_derivatives` without the PSD check and mark of `cov` (the internal callers: a final state past
    a blow-up, or one a covariance-state solve left ``indefinite``, goes through as it comes)."""
    model = _gaussian_model(model)
    _check_state(model, "model", mean, cov)
    m, c = _gaussian_affine(model, t, mean, cov)
    cov = symmetrize(cov)
    return m @ mean + c, m @ cov + cov @ m.T


def _check_state(model, label, mean, cov=None, factor=None):
    d = model.d
    if jnp.ndim(mean) != 1 or jnp.shape(mean)[0] != d:
        raise ParameterError(
            f"`mean0`/`mean` must have shape (d,) = ({d},) (d from {label}); got shape {jnp.shape(mean)}."
        )
    if cov is not None and jnp.shape(cov) != (d, d):
        raise ParameterError(f"`cov0`/`cov` must have shape (d, d) = ({d}, {d}); got shape {jnp.shape(cov)}.")
    if factor is not None and (jnp.ndim(factor) != 2 or jnp.shape(factor)[0] != d or jnp.shape(factor)[1] == 0):
        raise ParameterError(
            f"`factor0` must have shape (d, r) with d = {d} and r >= 1 (Σ0 = 0 is jnp.zeros(({d}, 1))); got shape "
            f"{jnp.shape(factor)}."
        )


def _kernels(model):
    """`model` and, for a (nested) :class:`~hassejax.dynamics.MultiHead`, each of its heads."""
    yield model
    for head in getattr(model, "heads", ()):
        yield from _kernels(head)


def _half_precision_reason(model, dtype, cov_given: bool, state: str) -> str:
    """What fails when :func:`solve_gaussian` runs in the half-precision `dtype` (for
    :func:`._solve.check_state_precision`): the parts of this solve that call ``eigh``, which has no half
    precision, and what the dtype itself cannot hold."""
    uses = []
    if state == "covariance":
        uses.append("the covariance state's factor (the square root of Σ)")
    elif cov_given:
        uses.append("the square root of `cov0`")
    kernels = list(_kernels(model))
    if any(isinstance(k, Sinkhorn) for k in kernels):
        uses.append("the Sinkhorn map")
    if any(isinstance(k, L2) for k in kernels):
        uses.append("L2's size scale (λ_max(KᵀK))")
    why = (
        f"{jnp.dtype(dtype).name} (eps {float(jnp.finfo(dtype).eps):.1e}) resolves neither a useful rtol nor the "
        "times near a blow-up"
    )
    if jnp.dtype(dtype) == jnp.float16:
        why += (
            ", and its range ends at 65504, which a size on its way to a blow-up (or the default size threshold "
            "1e4 · tr Σ0, for tr Σ0 above 6.6) overflows"
        )
    if not uses:
        return why
    return f"{' and '.join(uses)} {'use' if len(uses) > 1 else 'uses'} eigh, which has no half precision; {why}"


def _default_size0(model, size, y0, t0):
    """The size the default threshold multiplies: `tr Σ0`, or the kernel's own scale when larger
    (:meth:`AbstractAttention.gaussian_size_scale <hassejax.dynamics.AbstractAttention.gaussian_size_scale>`)."""
    s0 = size(y0)
    return jnp.maximum(s0, jnp.asarray(model.gaussian_size_scale(t0), s0.dtype))


def _uniform_growth_bound(model):
    """The kernel's growth bound as the verdict may use it: one that holds at every depth (None: none).

    Grönwall needs the rate bounded on the whole interval, not finite at each depth: a parameter that is a
    callable of `t` may make it grow without bound (review: L2 with `V(t) = I/(2(1 − t))` blows up at `t = 1`,
    its bound finite at every `t < 1`), so such a kernel has none; with :class:`PiecewiseConstant` parameters
    it is the largest over their layers (read at every layer edge), else the bound itself.
    """
    leaves = jtu.tree_leaves(model, is_leaf=lambda x: isinstance(x, PiecewiseConstant))
    if any(callable(x) and not isinstance(x, PiecewiseConstant) for x in leaves):
        return None
    edges = _solve.collect_jump_ts(model)
    if edges is None:
        return model.gaussian_growth_bound
    bound = jnp.max(jax.vmap(model.gaussian_growth_bound)(edges))
    return lambda t: bound


def _integrate(model, f, y0, size, speed, settings):
    """The moment ODE `y' = f(t, y)` with the size and steady-state events, the default threshold from
    :func:`_default_size0` and the kernel's growth bound deciding a crossing (either state)."""
    size0 = _default_size0(model, size, y0, settings["t0"])
    bound = _uniform_growth_bound(model)
    return _solve.integrate_events(f, y0, size, speed, size0, growth_bound=bound, **settings)


def _factor_solution(out) -> GaussianSolution:
    """The solution from a solve whose states are `(α, U)` with `Σ = UUᵀ` (the factor and projective states)."""
    means, us = out.ys
    mean_f, u_f = out.y_final
    return GaussianSolution.from_integrate(
        out,
        mean=means,
        cov=us @ jnp.swapaxes(us, -1, -2),
        factor=us,
        mean_final=mean_f,
        cov_final=u_f @ u_f.T,
        factor_final=u_f,
    )


@eqx.filter_jit
def _solve_core(model, mean0, cov0, u0, settings, state="factor", tols=None, given=None):
    """`given`: the dtype `cov0` came in (its round-off bounds the `indefinite` check of the cast copy)."""
    if state == "covariance":
        return _solve_covariance_state(model, mean0, cov0 if u0 is None else u0 @ u0.T, settings, tols, given)
    indefinite = None
    if u0 is None:
        u0, lo0 = psd_sqrt(cov0, with_min=True)
        # a traced Σ0 that is no covariance (a sweep member): its PSD part would be solved, a confident answer for
        # another Σ0 (a fresh user: diag(1, -1) gave blow_up at 0.5); flagged `indefinite` by check_psd's rule, the
        # concrete check's and the closed forms' (a review: the solve's slack, 1e-4 tr Σ, passed 1e-7·diag(1, -1)
        # and diag(1, -1e-4), both refused when concrete)
        indefinite = below_psd(symmetrize(cov0), lo0, given)
    if state == "projective":
        return _solve_projective_state(model, mean0, u0, settings, tols, indefinite)

    def f(t, y):
        alpha, u = y
        sigma = u @ u.T
        m, c = model.gaussian_affine(t, alpha, sigma, u)
        return (m @ alpha + c, m @ u)

    def size(y):
        return _with_mean_size(model, y[0], jnp.sum(y[1] ** 2))

    def speed(t, y, dy):
        u, du = y[1], dy[1]
        g = du @ u.T
        return _moment_speed(model, y[0], dy[0], g + g.T)

    y0 = (mean0, u0)
    out = _integrate(model, f, y0, size, speed, settings)
    if indefinite is not None:
        out = _solve.flag_status(out, indefinite, Status.indefinite)
    return _factor_solution(out)


def _with_mean_size(model, alpha, trace):
    """The size the events watch: `tr Σ`, or `tr Σ + ‖α‖² = E‖x‖²` for a kernel whose map depends on the second
    moment (:meth:`~hassejax.dynamics.AbstractAttention.gaussian_second_moment`)."""
    return trace + jnp.sum(alpha**2) if model.gaussian_second_moment() else trace


def _moment_speed(model, alpha, dalpha, dcov):
    """`‖Σ'‖_F`, or `‖(Σ + ααᵀ)'‖_F` for a kernel whose map depends on the second moment (as :func:`_with_mean_size`)."""
    if model.gaussian_second_moment():
        a = jnp.outer(dalpha, alpha)
        dcov = dcov + a + a.T
    return jnp.sqrt(jnp.sum(dcov**2))


COND_WARN_TOLERANCES = 1e3
"""``state="covariance"`` warns for a concrete `Σ0` with `λ_min < 1e3 · rtol · λ_max` (see :func:`_warn_ill_conditioned`)."""


def _warn_ill_conditioned(cov, rtol) -> None:
    """Warn that the covariance state may go wrong from this concrete `Σ0`: its smallest directions lie within a
    thousand tolerances of zero, where the symmetric state's error (`~rtol · λ_max`, growing wherever the dynamics
    are unstable) is not small relative to them; the factor state keeps rank and small directions (review:
    softmax, d = 4, rank-one `Σ0`: `tr Σ(10)` 62.0 at `rtol = 1e-6`, 49.70 at `1e-8`, where the factor state
    gives 49.62; float32, d = 12: ``diverge`` at `t = 2` for ``completed``)."""
    w = np.linalg.eigvalsh(np.asarray(cov, np.float64))
    scale = COND_WARN_TOLERANCES * max(float(rtol), float(np.finfo(np.float64).eps))
    if w[-1] > 0 and w[0] < scale * w[-1]:
        warnings.warn(
            f"`cov0` is rank-deficient or ill-conditioned (λ_min/λ_max = {w[0] / w[-1]:.2g} < 1e3 · rtol): "
            "state='covariance' does not keep rank, and its error can grow in the small directions without "
            "making Σ indefinite (a wrong result, not flagged); use state='factor'.",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )


def _warn_below_atol(cov, factor, state: str, atol) -> None:
    """Warn that the default controller cannot hold the accuracy from this concrete `Σ0`: the covariance part of the
    state (the factor's entries, or `Σ`'s in the covariance state) lies wholly below `atol`, whose error control is
    absolute, so every step passes it (review, softmax `V = A = I`, `Σ0 = sI`, `t* = 1/(2s)`: float64, the
    factor state's `t*` 9.8 % off at `s = 1e-30` and ``completed`` at `1e-250`, the covariance state's 10 % off at
    `1e-15`; float32 at `rtol = atol = 1e-6`, ``completed`` from `s = 1e-26` on). The projective state is
    scale-free in `Σ` (its shape and log-size are of order one)."""
    if factor is not None:
        scale = float(np.max(np.abs(factor)))
    elif state == "covariance":
        scale = float(np.max(np.abs(cov)))
    else:  # the factor state's U0 = Σ0^{1/2}: entries up to the square root of the largest eigenvalue
        scale = float(np.sqrt(max(np.linalg.eigvalsh(np.asarray(cov, np.float64))[-1], 0.0)))
    if 0 < scale < float(atol):
        warnings.warn(
            f"The initial covariance lies below `atol` = {float(atol):g} (largest entry of the {state} state "
            f"{scale:.1e}): the default controller's error control is absolute, so it does not hold the accuracy "
            "there (a blow-up time may be off by percents, a solve may end completed too early). Give `atol` well "
            f"below that scale (e.g. atol = {1e-8 * scale:.0e}) or use state='projective' (softmax), which is "
            "scale-free in Σ.",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )


INDEFINITE_TOLERANCES = 10
"""How many tolerances below zero an eigenvalue of the covariance state may lie (its global error exceeds the
local tolerance)."""

INDEFINITE_FLOOR = 1e-4
"""... and at least this fraction of `tr Σ`: near a blow-up `Σ` is nearly rank one and its error scales with
`λ_max` (a softmax blow-up at `rtol = 1e-6`, d = 8, whose verdict and time the factor state confirms, ended with
`λ_min = −2.8e-5 tr Σ`, 28 tolerances)."""


def _psd_slack(cov, tols):
    """`δ = 10 atol + max(10 rtol, 1e-4) tr Σ + 64 eps tr Σ`: `Σ` counts as a covariance iff `λ_min ≥ −δ`."""
    rtol, atol = tols
    size = jnp.maximum(jnp.trace(cov, axis1=-2, axis2=-1), 0.0)
    rel = jnp.maximum(INDEFINITE_TOLERANCES * rtol, INDEFINITE_FLOOR) + 64 * jnp.finfo(cov.dtype).eps
    return INDEFINITE_TOLERANCES * atol + rel * size


def _solve_covariance_state(model, mean0, cov0, settings, tols, given=None):
    """The moment ODE on the symmetric state `(α, Σ)`: `Σ' = P + Pᵀ`, `P = MΣ` (one product fewer than `U' = MU`).

    A `Σ` that is not PSD beyond :func:`_psd_slack` initially, at a valid save point or at the end gives the
    status ``indefinite``: integrated on, its negative directions follow no Gaussian's dynamics.
    """

    def f(t, y):
        alpha, sigma = y
        m, c = model.gaussian_affine(t, alpha, sigma, None)
        p = m @ sigma
        return (m @ alpha + c, p + p.T)

    def size(y):
        return _with_mean_size(model, y[0], jnp.trace(y[1]))

    def speed(t, y, dy):
        return _moment_speed(model, y[0], dy[0], dy[1])

    y0 = (mean0, symmetrize(cov0))
    out = _integrate(model, f, y0, size, speed, settings)
    means, covs = out.ys
    mean_f, cov_f = out.y_final
    roots, lo = psd_sqrt(covs, with_min=True)
    root_f, lo_f = psd_sqrt(cov_f, with_min=True)
    lo_0 = jnp.linalg.eigvalsh(y0[1])[0]
    lost = (
        below_psd(y0[1], lo_0, given)  # Σ0 by check_psd's rule, as the other states; the solve's slack from then on
        | jnp.any(out.valid & (lo < -_psd_slack(covs, tols)))
        | (lo_f < -_psd_slack(cov_f, tols))
    )
    return GaussianSolution.from_integrate(
        _solve.flag_status(out, lost, Status.indefinite),
        mean=means,
        cov=covs,
        factor=roots,
        mean_final=mean_f,
        cov_final=cov_f,
        factor_final=root_f,
    )


def _solve_projective_state(model, mean0, u0, settings, tols, indefinite=None):
    """The moment ODE with scale and shape apart, in the time of the size (:mod:`._projective`)."""
    threshold = settings["threshold"]
    size0 = jnp.sum(u0**2)
    if threshold is None:
        s0 = _default_size0(model, lambda y: jnp.sum(y**2), u0, settings["t0"])
        threshold = _solve.default_size_factor(s0.dtype) * jnp.where(s0 > 0, s0, 1.0)
    t0, t1 = settings["t0"], settings["t1"]
    times_ok = jnp.isfinite(t0) & jnp.isfinite(t1) & (t1 > t0)  # traced times (concrete ones were checked)
    out = projective_integrate(
        model, mean0, u0, t0=t0, t1=jnp.where(times_ok, t1, t0 + 1), threshold=threshold, solver=settings["solver"],
        rtol=tols[0], atol=tols[1], max_steps=settings["max_steps"], extrapolate=settings["extrapolate"],
        edges=_solve.collect_layer_edges(model),
    )  # fmt: skip
    if not settings["ts_checked"]:
        out = _invalid_inputs(out, ~times_ok, Status.invalid_times, (mean0, u0), t0, jnp.stack([t0, t1]))
    if settings["threshold"] is not None:  # a traced threshold at or below tr Σ0 (concrete ones raised)
        margin = 1 + (_solve.THRESHOLD_MARGIN_ULPS // 2) * jnp.finfo(size0.dtype).eps
        bad = ~(threshold > size0 * margin)
        out = _invalid_inputs(out, bad, Status.invalid_threshold, (mean0, u0), t0, out.ts)
    if settings["tolerances_ok"] is not None:  # traced tolerances that are not valid (concrete ones raised)
        out = _invalid_inputs(out, ~settings["tolerances_ok"], Status.invalid_tolerance, (mean0, u0), t0, out.ts)
    if indefinite is not None:  # a traced Σ0 that is no covariance (see _solve_core)
        out = _solve.flag_status(out, indefinite, Status.indefinite)
    return _factor_solution(out)


def _invalid_inputs(out, bad, code, y0, t0, ts):
    """`out` with status `code` where `bad` (traced inputs the solve cannot take), reporting the initial state,
    nothing valid and no step counted, as :func:`._solve.integrate` does; `ts` the save times to report."""
    out = _solve.flag_status(out, bad, code)
    return eqx.tree_at(
        lambda o: (o.ts, o.ys, o.y_final, o.t_final, o.valid, o.num_steps, o.num_accepted_steps, o.num_rejected_steps),
        out,
        (
            ts,
            jtu.tree_map(lambda a, b: jnp.where(bad, jnp.broadcast_to(b, a.shape), a), out.ys, y0),
            jtu.tree_map(lambda a, b: jnp.where(bad, b, a), out.y_final, y0),
            jnp.where(bad, t0, out.t_final),
            out.valid & ~bad,
            jnp.where(bad, 0, out.num_steps),
            jnp.where(bad, 0, out.num_accepted_steps),
            jnp.where(bad, 0, out.num_rejected_steps),
        ),
    )


GAUSSIAN_WORK_ARRAYS = 20
"""`(d, d)` arrays of the state's dtype (`(d, r)` ones for a wider `factor0`) a Gaussian solve holds at once besides
the saved rows: the solver's stages, the state, `Σ` and `M` of an evaluation, the square root of `cov0`, the
kernel's parameters. Measured from XLA's memory analysis of the compiled solve (softmax, d = 200 and 400, float32
and float64): arguments 3, temporaries 16 (covariance state) to 19 (projective), with the default save times."""

GAUSSIAN_SAVE_ARRAYS = {"factor": 2, "projective": 2, "covariance": 5}
"""`(d, d)` arrays per saved time (the saved `Σ` and factor; the covariance state also takes the square root of each
saved `Σ`: measured temporaries `3 T + 4`), the final state counted as one more saved time."""

HOST_CHECK_ARRAYS = 4
"""`(d, d)` float64 arrays the value checks of a concrete `cov0` hold at once on the host (its float64 copy, its
symmetrised copy and ``eigvalsh``'s own copy: :func:`._linalg.check_psd`), besides the copy of `cov0` as given."""

MEMORY_UNCHECKED_BYTES = 16 * 2**20
"""Below this an estimate is not compared with the free memory (reading it costs more than it can save)."""


def _check_solve_memory(model, mean0, cov0, factor0, ts, state: str) -> None:
    """Raise :class:`~hassejax.errors.MemoryBudgetError` naming `cov0` or `factor0` (`ts` where the saved states are
    most of it) before a solve whose working
    memory (:data:`GAUSSIAN_WORK_ARRAYS`, :data:`GAUSSIAN_SAVE_ARRAYS` per saved time) cannot fit in the free memory of
    the default device, or whose value checks of a concrete `cov0` (:data:`HOST_CHECK_ARRAYS`) cannot fit in the
    host's: estimated from the shapes alone, before any input is converted or copied (a fresh-user review: d = 12,000
    in float32 met a raw RESOURCE_EXHAUSTED; at d = 20,000 the copy in the input checks ran out of memory).
    """
    name = "cov0" if cov0 is not None else "factor0"
    d = model.d
    shape = input_shape(factor0) if factor0 is not None else None
    width = max(d, shape[1]) if shape is not None and len(shape) == 2 else d  # a factor (d, r) wider than d
    ts_shape = input_shape(ts) if ts is not None else None
    saves = (ts_shape[0] if ts_shape and len(ts_shape) == 1 else 2) if state != "projective" else 2
    # numeric dtypes only (a string or object array is refused by name in the input checks after this), nothing converted
    given = [x for x in (mean0, cov0, factor0) if hasattr(x, "dtype") and numeric_dtype(x.dtype)]
    if any(x is not None and not (hasattr(x, "dtype") and numeric_dtype(x.dtype)) for x in (mean0, cov0, factor0)):
        given.append(np.zeros(0))  # a list or object array: float64 where JAX's float64 mode is on (as converted)
    dtype = _solve.state_dtype(model, *given)
    item = jnp.dtype(dtype).itemsize
    arrays = GAUSSIAN_WORK_ARRAYS + GAUSSIAN_SAVE_ARRAYS[state] * (saves + 1)
    need = arrays * d * width * item  # Python ints: no overflow
    if need >= MEMORY_UNCHECKED_BYTES:
        saved = GAUSSIAN_SAVE_ARRAYS[state] * saves * d * width * item
        check_memory(
            need,
            f"the Gaussian solve of d = {d} ({state} state, {jnp.dtype(dtype).name}, {saves} saved times: about "
            f"{arrays} ({d}, {width}) arrays, the solver's stages and the saved covariances and factors)",
            "ts" if 2 * saved > need else name,  # the saved states most of it: the save times (a fresh user)
            hint=(
                "Use a smaller d, fewer save times (ts), float32, or the low-rank solve of a rank-k head "
                "(solve_low_rank_gaussian, a k×k state)."
            ),
        )
    value = cov0 if cov0 is not None else factor0
    if not is_traced(value):  # the value checks copy a concrete input to the host
        given_item = jnp.dtype(value.dtype).itemsize if hasattr(value, "dtype") else 8
        if cov0 is not None:
            host = (HOST_CHECK_ARRAYS * 8 + given_item) * d * d
            what = f"symmetric and PSD: about {HOST_CHECK_ARRAYS} ({d}, {d}) float64 arrays and its copy"
            hint = "Use a smaller d, or pass factor0 (any U with Σ0 = UUᵀ: no eigenvalue check) instead of cov0."
        else:
            host = (2 * given_item + 1) * d * width  # its copy, the finite check's mask, the scale's |U|
            what = f"finite: its copy and about two more ({d}, {width}) arrays"
            hint = "Use a smaller d or rank."
        check_host_memory(host, f"the value checks of `{name}` ({what} on the host)", name, hint=hint)


_PROJECTIVE_REFUSED = {
    "ts": "saves at [t0, t1] only (its steps are in the time of the size, not in t)",
    "converge_tol": "has no steady-state event",
    "stepsize_controller": "runs its own PID controller (in the time of the size)",
    "dt0": "picks its first step itself (in the time of the size)",
    "progress_meter": "steps in the time of the size, whose end is not known in advance (a meter would not move)",
}


def solve_gaussian(
    model: AbstractAttention, mean0: Float[ArrayLike, " _d"], cov0: Float[ArrayLike, "_d _d"] | None = None, *,
    t1: Scalar, t0: Scalar = 0.0, factor0: Float[ArrayLike, "_d _r"] | None = None,
    ts: SaveTimes | None = None, solver: Solver | None = None, rtol: Scalar = 1e-8, atol: Scalar = 1e-8,
    dt0: Scalar | None = None, stepsize_controller: Controller | None = None, max_steps: int = 100_000,
    size_threshold: Scalar | None = None, converge_tol: Scalar | None = None, blowup_estimate: str = "extrapolated",
    progress_meter: ProgressMeter | None = None, state: str = "factor",
) -> GaussianSolution:  # fmt: skip
    """Solve the moment ODE of `N(α, Σ)` under an attention kernel (spec dynamics.md §2, §4).

    Call as ``solve_gaussian(model, mean0, cov0=None, *, t1, ...)`` with a kernel module that
    has a Gaussian map.

    Integrates `α' = Mα + c`, `U' = MU` (`Σ = UUᵀ`) with diffrax (``throw=False``: every
    outcome is a status, see :class:`~hassejax.dynamics.Status`), stopping at the first of

    - the **size event** `tr Σ = size_threshold` (real-valued condition `log threshold −
      log tr Σ`, located by ``optimistix.Bisection`` on the dense output). It is classified
      by the decade test on `λ = tr Σ` (see :attr:`AbstractSolution.decade_ratio`): the
      remaining time `τ = λ/λ'` at the event against the time the last two decades of `λ`
      took; `ρ < 0.05` ⇒ `blow_up` (finite-time, `1/λ` falling linearly to zero) with
      `t_blowup = t_e + λ/λ'` (``"extrapolated"``) or `t_e` (``"threshold"``); otherwise
      `diverge` (exponential growth), `t_blowup = inf`; always `diverge` for a kernel whose
      :meth:`~hassejax.dynamics.AbstractAttention.gaussian_growth_bound` is finite at the
      crossing and every other depth (L2 with invertible `KᵀK`, Sinkhorn, with parameters constant or
      piecewise constant: no finite-time blow-up; a callable parameter leaves it to the decade test);
    - the **steady-state event** `‖Σ'‖_F = converge_tol` (covariance only; same scalar
      condition, the smaller of the two log-margins) ⇒ `converged`; a solve that reaches
      `t1` with `‖Σ'‖_F < converge_tol` (e.g. already stationary at `t0`) is `converged` too;
    - for a kernel whose map depends on the mean through the second moment (linear attention,
      :meth:`~hassejax.dynamics.AbstractAttention.gaussian_second_moment`) both events watch
      `S = Σ + ααᵀ` in place of `Σ`: the size `tr S = tr Σ + ‖α‖²` and `‖S'‖_F` (a point mass,
      `Σ0 = 0`, blows up or contracts in its mean alone);
    - `t1` ⇒ `completed`; step budget ⇒ `max_steps_reached`; integrator failure, or steps at
      the rounding of `t` (a rejected step whose shorter retry rounds back to the same step;
      float32 near a fast blow-up) ⇒ `dt_min_reached` at the last accepted step; a step that
      would make the state NaN/inf (a NaN vector field, a constant step past a blow-up) or
      `tr Σ` reach `1/finfo(dtype).tiny` (float32: 8.5e37, where L2's vector field underflows
      to zero) ⇒ `non_finite`, stopped at the last finite state.

    Jit-compiled; works under ``jax.vmap`` over parameters and initial conditions (each
    member gets its own status; the loop runs until the slowest member stops).

    **Arguments:**

    - `model`: an attention kernel with a Gaussian map (:class:`~hassejax.dynamics.Softmax`,
      :class:`~hassejax.dynamics.L2`, :class:`~hassejax.dynamics.Linear`,
      :class:`~hassejax.dynamics.Sinkhorn`, a :class:`~hassejax.dynamics.MultiHead` of
      those, or any kernel overriding ``gaussian_affine``), unbatched (vmap over a batched
      one).
    - `mean0`: `(d,)` initial mean `α0`.
    - `cov0`: `(d, d)` initial covariance `Σ0` (positional after `mean0`, or by keyword),
      symmetric PSD, possibly singular (the factor is its PSD square root). Give `cov0` or
      `factor0`, not both.
    - `t1`, `t0`: time interval.
    - `factor0`: `(d, r)` initial factor `U0` with `Σ0 = U0U0ᵀ`.
    - `ts`: `(T,)` save times in `[t0, t1]` (default `[t0, t1]`). The values there (interpolated by the
      solver's dense output) carry the solve's global error, not `rtol`: near a blow-up it grows like
      `(t*/(t* − t))²` times the local tolerance (softmax `V = A = I`, `Σ0 = I/2`, `t* = 1`, default
      tolerances: `Σ` off by 5e-8 relative at `t = 0.09`, 4e-5 at `t = 0.99` in the factor state, 3e-6 in the
      covariance state; the same as plain ``diffrax.Tsit5()``, and as stepping onto each `ts`); pass a tighter
      `rtol` for values close to `t*`.
    - `solver`: a diffrax solver (default: Tsit5, diffrax's tableau and dense output with the
      stages written out, which runs faster under ``vmap``; equal to ``diffrax.Tsit5()`` to
      rounding).
    - `rtol`, `atol`: tolerances of the default PID controller; `atol` is absolute, so from a `Σ0` far below one
      give it below the state's scale or use ``state="projective"``. A concrete `Σ0` whose state lies wholly
      below `atol` warns (the factor state's entries, up to `√λ_max(Σ0)`; the covariance state's, `Σ0`'s);
      the accuracy falls well before that, in proportion to `atol` over that scale (review, softmax, default
      tolerances: `t*` off by 1.7e-4 relative at `√λ_max(Σ0) = 7e-7`, 6.7e-3 at `7e-8`, no warning).
    - `dt0`: initial (or constant) step; required with ``ConstantStepSize``.
    - `stepsize_controller`: overrides the PID controller (e.g. ``ConstantStepSize()``).
      With the default controller, layer boundaries of :class:`PiecewiseConstant`
      parameters are passed as ``jump_ts``; a blow-up within the solve's time resolution of one
      (`1e3 · rtol · (e − t0)`: `1e-5` at `e = 1` by default) is ``undetermined`` (it may lie on either side
      of the edge, where the next layer's parameters may turn it back; see :class:`Status`). The solver state is augmented by one scalar
      (time spent below `threshold/100`, for the decade test); the default controller
      leaves it out of its error norm, a user-supplied adaptive one does not.
    - `max_steps`: step budget. A member whose `Σ` grows large while its map contracts another direction at a
      rate of order `tr Σ` (softmax: an eigenvalue of `M = VΣA` far below zero) is stiff for the explicit
      default solver, whose step then falls like `1/tr Σ` (measured: a random softmax member, `d = 5`, `tr Σ`
      up to `6e5` at `t = 0.5` on its way to `t* = 0.666`, `M`'s eigenvalue `−3e5` there: 33,000 steps to
      the default threshold, more than 100,000 to a threshold of `1e13`); raise `max_steps` for such families.
    - `size_threshold`: the event threshold on `tr Σ` (`tr Σ + ‖α‖²` for linear attention, above)
      (default `1e8 · max(tr Σ0, s)`, `s` the
      kernel's :meth:`~hassejax.dynamics.AbstractAttention.gaussian_size_scale` at `t0` (L2:
      `1/(2βc λ_max(KᵀK))`, where its map saturates; 0 for the other kernels), or `1e8` when
      both are 0; `1e4` in place of `1e8` in float32, whose time resolution cannot follow a
      blow-up to `1e8`; keep it >= 1e3 · tr Σ0 for the decade test; a concrete one not above
      `tr Σ0` by more than rounding is refused, and one at or above `1/finfo(dtype).tiny` is never
      reached: the solve stops as ``non_finite`` there; one beyond the dtype's range is `inf`). A concrete `inf` builds
      the program without the size event (no root find, decade test or growth rates: it
      compiles in about half the time); a blow-up then ends as ``dt_min_reached`` (its steps at
      the rounding of `t`), ``max_steps_reached`` or ``non_finite`` at the last finite state
      (under ``vmap`` the rest of its batch or sweep chunk keeps stepping in lockstep until then:
      pass `inf` for families that stay bounded).
      Relative accuracy of a threshold-based
      `t_blowup` is about `tr Σ0 / threshold`; extrapolation is exact to `O(threshold⁻²)`
      for the softmax closed form.
    - `converge_tol`: steady-state tolerance on `‖Σ'‖_F` (None: no steady-state event). A concrete one must be
      finite and at least the state dtype's smallest normal number (float32: 1.2e-38; below it the value is 0 or
      subnormal there and the event could never fire); a traced one (e.g. one per member under ``vmap``) that is not gives the member status
      ``invalid_tolerance`` (nothing solved).
    - `blowup_estimate`: ``"extrapolated"`` (default) or ``"threshold"``.
    - `progress_meter`: a diffrax progress meter, e.g. ``diffrax.TqdmProgressMeter()`` (None:
      none). It adds a host callback, so the compiled program is not persistently cached.
    - `state`: the integrated state. ``"factor"`` (default): `(α, U)` with `U' = MU`, which keeps
      `Σ = UUᵀ` PSD and its rank invariant at every finite time (spec §2; use it for rank and
      low-rank limits). ``"covariance"``: the symmetric state `(α, Σ)` with the Riccati form
      `Σ' = MΣ + ΣMᵀ`, one `d×d` product fewer per evaluation for softmax and linear kernels
      (softmax: three instead of four), for sweeps of blow-up times and outcomes (see
      ``benchmarks/README.md``); `Σ` stays symmetric exactly, PSD only up to the tolerance, and
      `factor` is then the PSD square root of `Σ` (eigenvalues below zero clipped), shape
      `(d, d)`, at the saved times; a `Σ` that leaves the PSD cone (by more than ten tolerances and
      `1e-4 tr Σ`) at a save point or at the end ends as ``indefinite`` (an unstable direction near
      zero: use the factor state). An indefinite `cov0` is refused when
      concrete; a traced one (inside ``vmap``) ends ``indefinite`` in every state. Kernels the symmetric state
      cannot solve reliably are refused (:meth:`~hassejax.dynamics.AbstractAttention.check_covariance_state`):
      Sinkhorn (its map needs a factor) and L2 (its map depends on the small directions of `Σ`,
      which the symmetric state holds only to `rtol · λ_max`), or a multi-head holding one. The
      symmetric state does not keep rank: its error (`~rtol · λ_max`) can grow in a direction of `Σ`
      that should stay at or near zero, a wrong result that stays PSD and is not flagged (review:
      softmax, d = 4, rank-one `Σ0`, `tr Σ(10)` 62.0 at `rtol = 1e-6` for 49.62; float32, d = 12,
      ``diverge`` for ``completed``); a concrete `Σ0` within `1e3 · rtol` of singular warns. The two
      states agree to the tolerance from well-conditioned `Σ0` while `Σ` stays well-conditioned along the way
      (tests); a `Σ` that nearly collapses during the solve loses its small directions in the same way, from a
      well-conditioned `Σ0` too, unflagged (a fresh user: multi-head softmax, d = 3, `cond(Σ0)` = 3.7, an
      eigenvalue down to 1e-13 while `tr Σ` reached 800 at t ≈ 1.73: `tr Σ(2)` 1.2 % and its middle eigenvalue
      32 % off at the default tolerances, where the factor and projective states agree with a reference to
      4e-7; right at `rtol = 1e-11`). For rank-deficient or ill-conditioned `Σ0`, `Σ` that may collapse, and
      verdicts that matter, use the factor state (the default). ``"projective"``: for
      kernels whose map is homogeneous in `Σ` (softmax, multi-head softmax:
      :meth:`~hassejax.dynamics.AbstractAttention.gaussian_homogeneous`), the scale `ρ = log tr Σ` and the
      shape `Û` (`Σ = e^ρ ÛÛᵀ`, `Û` a factor, so PSD and rank are kept) integrated apart in the time `τ` of the
      size (`dt/dτ = e^{−ρ}`), in which a finite-time blow-up is smooth: the sweeps of blow-up times take a
      fifth of the steps and `t*` is more accurate (``benchmarks/README.md``: d = 32, 43 steps for 203,
      `t*` to 7e-7 for 1.9e-6). It saves `[t0, t1]` only and refuses `ts`, `converge_tol`,
      `stepsize_controller`, `dt0`, `progress_meter` and an infinite `size_threshold`; its decade test weights
      the last two decades by a logistic window (`ρ ≈ 0.0064` for `c/(t* − t)` instead of 1/99), its steps
      near the window growing the size by at most a factor `e` (so that the window is resolved at any
      threshold the solve reaches; a crossing whose last step grew it by more than two decades would read
      ``undetermined``); layer edges
      of :class:`PiecewiseConstant` parameters are not step boundaries there, a step ends at most a quarter
      into the layer after the next edge (so none steps over a short layer), and `t*` and the end state after
      an edge are less accurate than the factor state's (at `rtol = 1e-8`: `t*` 1.1e-6 against 1.3e-8; `Σ(t1)`
      after a short layer with `V` 1e3 times larger, up to 6e-5 against 4e-6, a review); in float32 a jump
      of the vector field by orders of magnitude at an edge can end ``dt_min_reached`` in either state
      (the controller rejects every step across it down to the rounding of the time, where the solve stops; it
      spent its whole step budget there and ended ``max_steps_reached`` before; a review: 4 of 14 such
      problems in this state, 8 in the factor state), and a layer only `W` rounding units of `t` long
      is integrated with a relative error of about `1/W` in every state (a new-user check: float32, a
      layer of 1e-4 at `t = 100`, 13 units, with `V` 2000 times the next layer's: `t*` 0.8 % of
      `t* − t0` late, reported ``blow_up``; a concrete solve crossing a layer shorter than 1000 units warns:
      use float64 for short layers late in time); its state at `t1` is read
      from the solver's dense output where `t = t1` (a time event), so a solver with a low-order interpolant
      ends less accurately there (``diffrax.Kvaerno5()``, `Σ(t1)` of a contracting solve at `rtol = 1e-8`:
      5.9e-6 relative, against 3.1e-8 with the default Tsit5).

    **Returns:** a :class:`~hassejax.dynamics.GaussianSolution`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for a kernel without a Gaussian
    map ("does not preserve Gaussians (spec §2)"), a batched kernel, a state in half precision (a float16 or
    bfloat16 `mean0`/`cov0`/`factor0`, also beside wider parameters: not promoted to their dtype; with half-precision
    parameters too, float16's range is below the default threshold, bfloat16's
    precision the default `rtol`, and ``eigh`` (the square root of `cov0`, Sinkhorn, L2) has none: cast to float32), shape mismatches, a non-finite concrete `mean0` or `factor0`, a non-symmetric / non-PSD / non-finite
    concrete `cov0`, both or neither of `cov0`, `factor0`, `t1 <= t0`, unsorted `ts` or
    `ts` outside `[t0, t1]`, a non-scalar or non-finite tolerance, an `rtol` outside `[0, 1)`, a non-positive `atol` or
    threshold (traced tolerances: status ``invalid_tolerance``), a concrete
    `size_threshold` at or below `tr Σ0` or a `converge_tol` that is `inf` or below the state dtype's smallest normal
    number (events that could never fire; traced ones: status ``invalid_threshold``, resp. ``invalid_tolerance`` for a `converge_tol` that is not
    finite and > 0), an unknown
    `blowup_estimate` or `state`, ``state="covariance"`` with a kernel it cannot solve (L2, Sinkhorn),
    ``state="projective"`` with a kernel whose map is not homogeneous (L2, linear, Sinkhorn) or with an
    argument it cannot honour (`ts`, `converge_tol`, `stepsize_controller`, `dt0`, `progress_meter`,
    `size_threshold=inf`), an L2 kernel with a concrete `βc < 0` (its map exists only on part of the
    covariances). An L2 `βc` that is traced (inside ``jit``/``vmap``) or a callable of `t` is checked in the
    program: where it is negative the map is NaN and the solve stops ``non_finite`` there (at `t0` for a
    constant one) with its last finite state. A kernel whose class changed the kernel of the class its Gaussian map
    comes from (a :class:`~hassejax.dynamics.Softmax` subclass with its own ``velocity`` or ``normalise``, and no
    ``gaussian_affine``) is refused as one without a map
    (:meth:`~hassejax.dynamics.AbstractAttention.check_gaussian`).
    :class:`~hassejax.errors.MemoryBudgetError` naming `cov0` or `factor0`, before anything is allocated or
    copied, when the solve's working memory, estimated from the shapes (about 20 `(d, d)` arrays, `(d, r)` ones for
    a wider `factor0`, and 2 per saved time, 5 in the covariance state, the final state counted as one; measured
    from XLA's memory analysis), exceeds 80 % of the free memory of the default device, or the value checks of a
    concrete `cov0` (about four `(d, d)` float64 arrays) 80 % of the host's (estimates below 16 MiB are not checked).

    **Differentiation:** ``jax.grad``/``jax.jvp`` go through the solve in every state (diffrax's default
    adjoint: reverse mode differentiates the stepping loop). `t_blowup` is differentiated through the located size
    event and the extrapolation (`t_e + λ/λ'`), so its derivative is as accurate as the tolerances allow (softmax
    from `Σ0 = s I`, `dt*/ds` against the closed form `−1/(s² λ_max(A + Aᵀ))`, default tolerances, two `A`:
    up to 3e-8 relative in the projective state, 1e-6 in the covariance state, 6e-5 in the factor state); a
    square root of `cov0` with repeated eigenvalues is differentiated by the Daleckii–Krein form (finite). At a singular
    `cov0` the factor and projective states, which start from `U0 = Σ0^{1/2}`, have no derivative in `cov0` (NaN):
    along the kernel of `Σ0` the factor moves like `√ε`, and the output's first-order change there is of second order
    in `U0`, so no derivative of the factor carries it; the covariance state integrates `Σ` itself and differentiates
    there (at `Σ0 = diag(1, 0)`, default tolerances, three random symmetric `A`: within 6e-6 relative of the closed
    form's `dt*/dΣ0`; a review measured 5.9e-6). Pass `factor0` for derivatives
    in a factor. The status, and which event fired, are piecewise constant: no
    derivative.

    **Example:** softmax with `V = I`, `A = I`, `Σ0 = I/2` blows up at `t* = 1/(β λ_max(Σ0^{1/2}(A + Aᵀ)Σ0^{1/2})) = 1`
    (spec §3):

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Softmax, solve_gaussian, status_names
    >>> sol = solve_gaussian(Softmax(V=jnp.eye(2), A=jnp.eye(2)), jnp.zeros(2), jnp.eye(2) / 2, t1=5.0, rtol=1e-6, atol=1e-6)
    >>> status_names(sol.status), round(float(sol.t_blowup), 3)
    ('blow_up', 1.0)

    ```
    """
    model = _gaussian_model(model)
    label = "model"
    model.check_unbatched(label)
    times = concrete(t0), concrete(t1)
    if all(x is not None and x.shape == () and x.dtype.kind in "iuf" and np.isfinite(x) for x in times):  # else later
        model._check_gaussian_interval(float(min(times)), float(max(times)), label)
    extrapolate = _solve.check_blowup_estimate(blowup_estimate)
    if not isinstance(state, str) or state not in ("factor", "covariance", "projective"):
        raise ParameterError(f"`state` must be 'factor', 'covariance' or 'projective'; got {state!r}.")
    state = str(state)  # a NumPy string is a str too, but not a static argument of the compiled solve
    if state == "covariance":
        model.check_covariance_state(label)
    if state == "projective":
        model.check_projective_state(label)
        given = {
            "ts": ts, "converge_tol": converge_tol, "stepsize_controller": stepsize_controller, "dt0": dt0,
            "progress_meter": progress_meter,
        }  # fmt: skip
        for name, value in given.items():
            if value is not None:
                raise ParameterError(
                    f"`{name}` is not supported with state='projective', which {_PROJECTIVE_REFUSED[name]}; "
                    "leave it None or use state='factor'."
                )
        if solver is not None and not isinstance(solver, diffrax.AbstractAdaptiveSolver):
            raise ParameterError(
                f"`solver` {type(solver).__name__}() gives no error estimate, and state='projective' runs its own "
                "adaptive controller: pass an adaptive solver (e.g. diffrax.Tsit5()), or use state='factor' with a "
                "constant step (stepsize_controller=diffrax.ConstantStepSize(), dt0=...)."
            )
    if (cov0 is None) == (factor0 is None):
        raise ParameterError(
            "Give exactly one of `cov0` (d, d) and `factor0` (d, r); got " + ("neither." if cov0 is None else "both.")
        )
    if model.d < 1:
        raise ParameterError(f"The token dimension d of {label} must be >= 1; got d = {model.d}.")
    _check_solve_memory(model, mean0, cov0, factor0, ts, state)  # from the shapes, before any input is copied
    mean_c = _solve.real_array(mean0, "mean0", "a real array, shape (d,)")
    cov_c = _solve.real_array(cov0, "cov0", "a real array, shape (d, d)")
    factor_c = _solve.real_array(factor0, "factor0", "a real array, shape (d, r)")
    if mean_c is not None and not np.all(np.isfinite(mean_c)):
        raise ParameterError("`mean0` must be finite; got NaN/inf entries.")
    if factor_c is not None and not np.all(np.isfinite(factor_c)):
        raise ParameterError("`factor0` must be finite; got NaN/inf entries.")
    mean0, cov0, factor0 = (
        _solve.given_numbers(x, c) for x, c in ((mean0, mean_c), (cov0, cov_c), (factor0, factor_c))
    )
    mean0 = jnp.asarray(mean0)
    dtype = _solve.state_dtype(
        model, mean0, None if cov0 is None else jnp.asarray(cov0), None if factor0 is None else jnp.asarray(factor0)
    )
    _solve.check_state_precision(
        dtype,
        {"mean0": mean0, "cov0": None if cov0 is None else jnp.asarray(cov0),
         "factor0": None if factor0 is None else jnp.asarray(factor0)},
        _half_precision_reason(model, dtype, cov0 is not None, state), label,
    )  # fmt: skip
    mean0 = mean0.astype(dtype)
    given = None
    if cov0 is not None:
        given = jnp.asarray(cov0).dtype  # a float32 Σ0 in a float64 solve keeps float32's round-off (a review)
        cov0 = jnp.asarray(cov0, dtype)
        _check_state(model, label, mean0, cov=cov0)
        if cov_c is not None:
            check_psd(cov_c, "cov0")
            rtol_c = _solve.real_array(rtol, "rtol", "a finite number in [0, 1)")  # None if traced (a sweep over rtol)
            if state == "covariance" and rtol_c is not None and rtol_c.ndim == 0 and 0 <= rtol_c < 1:  # else refused
                _warn_ill_conditioned(cov_c, rtol_c)
        u0 = None
    else:
        u0 = jnp.asarray(factor0, dtype)
        _check_state(model, label, mean0, factor=u0)
    d = model.d

    def map_of(part, t_state, mean, cov, u):  # the kernel's map on the initial state, for eval_shape (traced)
        cov_in = cov if cov is not None else u @ u.T
        return part.gaussian_affine(t_state, mean, cov_in, u if cov is None else psd_sqrt(cov))

    t_state = jnp.asarray(t0, dtype)  # as the solver calls the kernel (a float64 t0 in a float32 solve: float32)

    # each head of a MultiHead first, so that a message names the head (then the sum)
    for part, name in [
        *((h, f"{label}.heads[{i}]") for i, h in enumerate(getattr(model, "heads", ()))),
        (model, label),
    ]:
        check_output_shapes(
            map_of,
            ((d, d), (d,)),
            f"{name}.gaussian_affine(t, mean ({d},), cov ({d}, {d}), factor)",
            dtype=dtype,
            args=(part, t_state, mean0, cov0, u0),
        )
    settings = _solve.solve_settings(
        model, dtype, t0=t0, t1=t1, ts=ts, solver=UnrolledTsit5() if solver is None else solver, rtol=rtol, atol=atol,
        dt0=dt0, stepsize_controller=stepsize_controller, max_steps=max_steps, size_threshold=size_threshold,
        converge_tol=converge_tol, extrapolate=extrapolate, progress_meter=progress_meter,
    )  # fmt: skip
    if size_threshold is not None:  # concrete state (the inputs as given, also under jit): above tr Σ0
        size0 = (
            np.trace(cov_c.astype(np.float64)) if cov_c is not None
            else np.sum(factor_c.astype(np.float64) ** 2) if factor_c is not None
            else None
        )  # fmt: skip
        what = "tr Σ0"
        if model.gaussian_second_moment():  # the size is E‖x‖² (the in-program check covers a traced mean)
            size0 = None if size0 is None or mean_c is None else size0 + np.sum(mean_c.astype(np.float64) ** 2)
            what = "tr Σ0 + ‖α0‖²"
        _solve.check_size_threshold(size_threshold, size0, what, dtype)
        if state == "projective" and not settings["size_event"]:
            raise ParameterError(
                "`size_threshold` must be finite with state='projective' (its steps are in the time of the size, "
                f"which a blow-up without a threshold never leaves); got {size_threshold!r}."
            )
    atol_c = _solve.real_array(atol, "atol")
    concrete_state = (cov_c if factor_c is None else factor_c) is not None
    if stepsize_controller is None and state != "projective" and atol_c is not None and concrete_state:
        _warn_below_atol(cov_c, factor_c, state, atol_c)
    tols = _solve.checked_tolerances(rtol, atol, dtype)[:2]  # a traced invalid pair: the stand-in (flagged)
    return _solve_core(model, mean0, cov0, u0, settings, state, tols, given)
