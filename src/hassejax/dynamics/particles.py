"""Particle (token) systems `dx_i/dt = Γ_μ(x_i)` solved with diffrax (spec dynamics.md §1, §4).

The velocity field is that of an attention kernel module
(:class:`~hassejax.dynamics.AbstractAttention`).

Optional variants: the sphere model `ẋ_i = P⊥_{x_i} Γ(x_i)`, `P⊥_x y = y − ⟨x, y⟩x`
(GLPR comparison, arXiv:2312.10794), and an affine feed-forward term `Γ(x) + Wx + b`
(Alcalde, Ji, Zuazua, arXiv:2606.07600).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Real

from .._checks import check_memory
from .._warn import user_stacklevel
from ..errors import ParameterError
from . import _solve
from ._arguments import Controller, ProgressMeter, SaveTimes, Scalar, Solver, input_shape, numeric_dtype
from .attention import AbstractAttention, check_model
from .attention._base import check_output_shapes, check_velocity_field
from .attention._masked import masked_parts
from .result import ParticleSolution

__all__ = ["particle_velocity", "solve_particles"]


def _velocity(model, t, x, sphere, feedforward):
    v = model.velocity(t, x)
    if feedforward is not None:
        w, b = feedforward
        v = v + x @ jnp.asarray(w).T + jnp.asarray(b)
    # `sphere` may be traced (the solver's program: plane and sphere runs share one compiled program)
    return jnp.where(sphere, v - jnp.sum(v * x, axis=-1, keepdims=True) * x, v)


def particle_velocity(
    model: AbstractAttention,
    t: Real[ArrayLike, ""],
    x: Float[Array, "n d"],
    *,
    sphere: bool = False,
    feedforward: tuple[Float[Array, "d d"], Float[Array, " d"]] | None = None,
) -> Float[Array, "n d"]:
    """`ẋ_i` of the particle system: `Γ_μ(x_i)` (+ `Wx_i + b`), projected on the sphere's tangent space if `sphere`.

    **Arguments:**

    - `model`: an attention kernel (:class:`~hassejax.dynamics.AbstractAttention`).
    - `t`: depth; `x`: `(n, d)` tokens.
    - `sphere`: project on the tangent space of the unit sphere (GLPR).
    - `feedforward`: `(W, b)` adds `Wx_i + b` (Alcalde et al.), or None.

    **Returns:** `(n, d)` velocities.

    **Raises:** :class:`~hassejax.errors.ParameterError` for a `model` that is not a kernel or whose class
    defines no velocity field (neither `velocity` nor `weights` with `value`), or `x` of the wrong shape.

    Source: spec dynamics.md §1.

    **Example:**

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Softmax, particle_velocity
    >>> x = jnp.array([[1.0, 0.0], [0.0, 1.0]])
    >>> particle_velocity(Softmax(V=jnp.eye(2), A=jnp.zeros((2, 2))), 0.0, x, sphere=True).tolist()
    [[0.0, 0.5], [0.5, 0.0]]

    ```
    """
    check_model(model)
    check_velocity_field(model)
    return _velocity(model, t, x, sphere, feedforward)


def _watches_second_moment(model) -> bool:
    """Whether the size is the second moment `(1/n) Σ_i ‖x_i‖²` (a kernel whose Gaussian map depends on it, e.g.
    linear attention, also under a mask or as a head: :meth:`~hassejax.dynamics.AbstractAttention.gaussian_second_moment`)."""
    return bool(model.gaussian_second_moment())


@eqx.filter_jit
def _solve_core(model, x0, sphere, feedforward, settings):
    def f(t, x):
        return _velocity(model, t, x, sphere, feedforward)

    second_moment = _watches_second_moment(model)

    def size(x):
        xc = x if second_moment else x - jnp.mean(x, axis=0, keepdims=True)
        return jnp.sum(xc**2) / x.shape[0]

    def size_floor(x):  # the spread rounding alone gives: d (eps max |x_ij|)² (each centred coordinate off by ~eps)
        return x.shape[-1] * (jnp.finfo(x.dtype).eps * jnp.max(jnp.abs(x))) ** 2

    def speed(t, x, dx):
        return jnp.sqrt(jnp.sum(dx**2) / x.shape[0])

    # a second moment is a sum of squares (no cancellation): no rounding floor
    floor = None if second_moment else size_floor
    out = _solve.integrate_events(f, x0, size, speed, size_floor=floor, **settings)
    return ParticleSolution.from_integrate(out, xs=out.ys, x_final=out.y_final)


_PAIR_ARRAYS = 4
"""(n, n) arrays of the state's dtype that XLA holds at once in a velocity evaluation (measured: softmax, n = 300,000,
float64, asked for 2.88e12 bytes = 32 bytes a pair, a fresh-user review that met it as a raw RESOURCE_EXHAUSTED)."""

PARTICLE_WORK_ARRAYS = 14
"""`(n, d)` arrays of the state's dtype a particle solve holds at once besides its `(n, n)` weights
(:data:`_PAIR_ARRAYS` a head), one `(d, d)` copy of the parameters and the saved rows (:data:`PARTICLE_SAVE_ARRAYS`
`(n, d)` arrays per saved time, the final state counted as one more): the solver's stages, the state and an
evaluation's temporaries. Measured from XLA's memory analysis of the compiled solve returning the whole solution
(softmax with random `V`, `A`, float64; n = 64–256, d = 32–256, 200–2,000 saved times): 6–8 such arrays besides the
saved rows (14 with `A = 0`)."""

PARTICLE_SAVE_ARRAYS = 2
"""`(n, d)` arrays per saved time: the saved rows in XLA's temporaries and again in the returned solution (a review:
measured 2.0 per saved time at n = 128, d = 32, 2,000 saved times; 1 where only the final state is returned)."""


_UNCHECKED_BYTES = 16 * 2**20
"""Below this an estimate is not compared with the free memory (reading it costs more than it can save)."""


def _num_heads(model) -> int:
    """The attention kernels of `model` that each hold `(n, n)` weights: the heads of a
    :class:`~hassejax.dynamics.MultiHead`, nested or under a :class:`~hassejax.dynamics.Masked` (a review: a masked
    multi-head kernel of 6 heads was counted as one, 5.8x too low), else one."""
    from .attention import Masked, MultiHead

    if isinstance(model, Masked):
        return _num_heads(model.kernel)
    if isinstance(model, MultiHead):
        return sum(_num_heads(h) for h in model.heads)
    return 1


def _check_pair_memory(n: int, dtype, groups: int = 1, d: int = 0, saves: int = 0, heads: int = 1) -> None:
    """Raise :class:`~hassejax.errors.MemoryBudgetError` naming `x0` (`ts` where the saved states are most of it) before
    a solve whose `n × n` weights (of each of
    `groups` groups of `n` tokens: :func:`~hassejax.dynamics.solve_low_rank_particles`; of each of `heads` heads)
    cannot fit; with the token dimension `d`, also the state's arrays (:data:`PARTICLE_WORK_ARRAYS`, `saves` saved
    times; one group)."""
    item = jnp.dtype(dtype).itemsize
    # measured: 3 a head (24 for 8 softmax heads, float64, n = 2000), about 4 a masked head (34 for 8, float32)
    pair_arrays = _PAIR_ARRAYS * heads + (heads > 1)
    pairs = pair_arrays * groups * n * n * item  # Python ints: no overflow
    rows = PARTICLE_WORK_ARRAYS + PARTICLE_SAVE_ARRAYS * (saves + 1)
    states = (rows * n * d + d * d) * item if d else 0
    need = pairs + states
    if need >= _UNCHECKED_BYTES:
        system = f"n = {n} tokens" if groups == 1 else f"S = {groups} groups of N = {n} tokens"
        shape = "(n, n)" if groups == 1 else "(S, N, N)"
        of_heads = f" of {heads} heads" if heads > 1 else ""
        what = (
            f"the particle system of {system} (every token attends to every other{' of its group' * (groups > 1)}: "
            f"about {pair_arrays} {shape} arrays of {jnp.dtype(dtype).name}{of_heads} a velocity evaluation"
        )
        if d:
            what += f"; and {rows} ({n}, {d}) arrays, the solver's stages and {saves} saved states, and the ({d}, {d}) parameters"
        saved = PARTICLE_SAVE_ARRAYS * saves * n * d * item
        check_memory(
            need,
            what + ")",
            "ts" if 2 * saved > need else "x0",  # a fresh user: 10^8 save times of 10 tokens were blamed on `x0`
            hint=(
                "Use fewer tokens, fewer save times (ts), float32, or the Gaussian route (solve_gaussian) for the "
                "mean-field limit of many."
            ),
        )


def _check_solve_memory(model: AbstractAttention, x0, ts) -> None:
    """:func:`_check_pair_memory` for :func:`solve_particles` from the shapes of `x0` and `ts` alone, before any input
    is converted or copied (a review: 4,096 tokens in d = 64 saved at 10,000 times need 42 GB of saved rows, which the
    weights-only estimate did not count); a shape the input checks refuse is left to them. A list or object array is
    counted as float64 where JAX's float64 mode is on (what it converts to)."""
    shape = input_shape(x0)
    if shape is None or len(shape) != 2 or shape[1] != model.d:
        return
    n, d = shape
    ts_shape = input_shape(ts) if ts is not None else None
    saves = ts_shape[0] if ts_shape is not None and len(ts_shape) == 1 else 2
    # a numeric array by its dtype; a list or object array as float64 (a string one is refused by the input checks)
    given = x0 if hasattr(x0, "dtype") and numeric_dtype(x0.dtype) else np.zeros(0)
    _check_pair_memory(n, _solve.state_dtype(model, given), d=d, saves=saves, heads=_num_heads(model))


def _warn_below_atol(xn: np.ndarray, atol) -> None:
    """Warn that the default controller cannot hold the accuracy from these concrete tokens: every coordinate lies
    below `atol`, whose error control is absolute, so every step passes it (a fresh-user review: the same
    blow-up at token scales 1 and 1e-7, default tolerances, `t*` 5.8e-6 and 2.3e-2 off, no warning; the Gaussian
    solve's rule, :func:`hassejax.dynamics.gaussian._warn_below_atol`)."""
    scale = float(np.max(np.abs(xn))) if xn.size else 0.0
    if 0 < scale < float(atol):
        warnings.warn(
            f"The initial tokens lie below `atol` = {float(atol):g} (largest coordinate of `x0` {scale:.1e}): the "
            "default controller's error control is absolute, so it does not hold the accuracy there (a blow-up "
            f"time may be off by percents). Give `atol` well below that scale (e.g. atol = {1e-6 * scale:.0e}), "
            "or rescale the tokens.",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )


def solve_particles(
    model: AbstractAttention, x0: Float[ArrayLike, "n d"], *, t1: Scalar, t0: Scalar = 0.0,
    ts: SaveTimes | None = None, solver: Solver | None = None, rtol: Scalar = 1e-6, atol: Scalar = 1e-6,
    dt0: Scalar | None = None, stepsize_controller: Controller | None = None, max_steps: int = 100_000,
    size_threshold: Scalar | None = None, converge_tol: Scalar | None = None, blowup_estimate: str = "extrapolated",
    progress_meter: ProgressMeter | None = None, sphere: bool = False, feedforward: tuple[Float[ArrayLike, "_d _d"], Float[ArrayLike, " _d"]] | None = None,
) -> ParticleSolution:  # fmt: skip
    """Solve the token system `dx_i/dt = Γ_μ(x_i)`, `μ = (1/n) Σ_j δ_{x_j}` (spec dynamics.md §1, §4).

    Same events and statuses as :func:`~hassejax.dynamics.solve_gaussian`, with the size
    `λ = (1/n) Σ_i ‖x_i − x̄‖²` (trace of the empirical covariance; for a kernel whose Gaussian map depends on the
    second moment, :meth:`~hassejax.dynamics.AbstractAttention.gaussian_second_moment` (linear attention, also under
    a mask or as a head), `λ = (1/n) Σ_i ‖x_i‖²`, as the Gaussian solve's `tr Σ + ‖α‖²`: tokens that blow up
    together keep their spread near 0, which would never cross a threshold) and the steady state
    `((1/n) Σ_i ‖ẋ_i‖²)^{1/2} < converge_tol`. A finite particle system with a bounded
    attention kernel grows at most exponentially, so a threshold crossing is usually
    reported as `diverge`; the decade test (`decade_ratio < 0.05`, see
    :attr:`~hassejax.dynamics.AbstractSolution.decade_ratio`) decides. A velocity that turns
    NaN/inf, or a size `λ` grown to `1/finfo(dtype).tiny` (float32: 8.5e37), stops the solve as
    `non_finite` at the time it does. Jit-compiled, vmappable.

    **Arguments:**

    - `model`: an attention kernel (:class:`~hassejax.dynamics.AbstractAttention`: e.g.
      :class:`~hassejax.dynamics.Softmax`, :class:`~hassejax.dynamics.MultiHead`,
      :class:`~hassejax.dynamics.Masked`), unbatched (vmap over a batched one).
    - `x0`: `(n, d)` initial tokens (for ``sphere=True``, unit rows; for a
      :class:`~hassejax.dynamics.Masked` model, `n` is the mask size).
    - `rtol`, `atol`: tolerances of the default PID controller, default `1e-6` each (looser than
      :func:`~hassejax.dynamics.solve_gaussian`'s `1e-8`: a particle system is itself an approximation of
      the measure's flow; pass `1e-8` for solves compared with the Gaussian ODE to its tolerance). `atol` is
      absolute: tokens far below one need it below their scale. Concrete tokens whose coordinates all lie below
      `atol` warn (``RuntimeWarning``); the accuracy falls well before that, in proportion to `atol` over the
      tokens' scale (a review, a blow-up at scales 1, 1e-3, 1e-5, 1e-7 with the default tolerances: `t*` off by
      5.8e-6, 1.6e-5, 8.4e-4 and 2.3e-2 relative; only the last warns).
    - `t1`, `t0`, `ts`, `solver`, `dt0`, `stepsize_controller`, `max_steps`,
      `converge_tol`, `blowup_estimate`, `progress_meter`: as in :func:`~hassejax.dynamics.solve_gaussian`.
    - `size_threshold`: threshold on `λ` (default `1e8 · λ(x0)`, `1e8` if `λ(x0) = 0`; `1e4` in
      place of `1e8` in float32, see :func:`~hassejax.dynamics._solve.default_size_factor`;
      a concrete `inf`: no size event, as in
      :func:`~hassejax.dynamics.solve_gaussian`; the compile time it saves is small here, where the velocity's
      `n × n` program dominates: 2.8 s against 3.2 s for a first call in a review, not the Gaussian solve's half).
    - `sphere`: project the velocity on the tangent space of the unit sphere (GLPR).
    - `feedforward`: `(W, b)` adds `Wx + b` to the velocity (Alcalde et al.).

    **Returns:** a :class:`~hassejax.dynamics.ParticleSolution`.

    **Raises:** :class:`~hassejax.errors.MemoryBudgetError` naming `x0` when the `n × n` attention weights
    of a velocity evaluation, with the solver's `(n, d)` stages and the saved times, would not fit in memory
    (estimated from the shapes before any input is copied, as the library's kernels hold them: about 4 `(n, n)` arrays
    a head, :data:`PARTICLE_WORK_ARRAYS` `(n, d)` arrays and two per saved time; a kernel of your own that holds more is not covered by this estimate:
    :func:`~hassejax.dynamics.sweep` checks XLA's own estimate of its program, and a review's kernel of 8 such
    arrays passed here at n = 24,000 and met XLA's ``RESOURCE_EXHAUSTED``);
    :class:`~hassejax.errors.ParameterError` for a `model` that is not a
    kernel, whose class defines no velocity field, a batched kernel, `x0` of the wrong
    shape or non-finite (concrete), rows not of unit norm with ``sphere=True`` (concrete),
    bad times, tolerances or thresholds (a concrete `size_threshold` at or below `λ(x0)`, a
    `converge_tol` that is `inf` or below the state dtype's smallest normal number: events that could never fire), a state in half precision (a float16 or bfloat16
    `x0`, also beside wider parameters: not promoted to their dtype; or half-precision parameters too: float16 cannot
    hold the default threshold, bfloat16 not resolve the solve; cast to float32).

    **Example:** `V = −I`, `A = 0`: `ẋ_i = −x̄`, so the mean decays like `e^{−t}`:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Softmax, solve_particles, status_names
    >>> sol = solve_particles(Softmax(V=-jnp.eye(2), A=jnp.zeros((2, 2))), jnp.array([[2.0, 0.0], [0.0, 2.0]]), t1=1.0)
    >>> status_names(sol.status), round(float(sol.x_final.mean(axis=0)[0]), 5), round(float(jnp.exp(-1.0)), 5)
    ('completed', 0.36788, 0.36788)

    ```
    """
    check_model(model)
    check_velocity_field(model)
    label = "model"
    model.check_unbatched(label)
    extrapolate = _solve.check_blowup_estimate(blowup_estimate)
    _check_solve_memory(model, x0, ts)  # from the shapes, before any input is copied
    xn = _solve.real_array(x0, "x0", "a real array of tokens, shape (n, d)")
    x0 = jnp.asarray(_solve.given_numbers(x0, xn))
    dtype = _solve.state_dtype(model, x0)
    _solve.check_state_precision(
        dtype, {"x0": x0}, "float16 ends at 65504, so the default size threshold 1e4 · λ0 overflows from λ0 ≈ 6.6 and a "
        "blow-up is never reported; bfloat16 (eps 7.8e-3) resolves neither the default rtol nor the times near a "
        "blow-up", label,
    )  # fmt: skip
    x0 = x0.astype(dtype)
    d = model.d
    if d < 1:
        raise ParameterError(f"The token dimension d of {label} must be >= 1; got d = {d}.")
    if x0.ndim != 2 or x0.shape[1] != d:
        raise ParameterError(f"`x0` must have shape (n, d) with d = {d} (from {label}); got shape {x0.shape}.")
    if x0.shape[0] < 1:
        raise ParameterError(f"`x0` must hold at least one token (n >= 1); got shape {x0.shape}.")
    for part, name in masked_parts(model, label):  # a Masked model, or masked heads of a (nested) MultiHead
        if x0.shape[0] != part.n:
            raise ParameterError(f"`x0` must have n = {part.n} rows (the mask size of {name}); got shape {x0.shape}.")
    if xn is not None:
        if not np.all(np.isfinite(xn)):
            raise ParameterError("`x0` must be finite; got NaN/inf entries.")
        if sphere:
            norms = np.linalg.norm(xn, axis=1)
            if np.max(np.abs(norms - 1.0)) > 1e-6:
                raise ParameterError(
                    f"`x0` rows must have unit norm for sphere=True; got norms in [{norms.min():.6g}, {norms.max():.6g}]."
                )
    if feedforward is not None:
        if isinstance(feedforward, (str, bytes)) or not isinstance(feedforward, Sequence) or len(feedforward) != 2:
            got = (
                f"a {type(feedforward).__name__} of length {len(feedforward)}"
                if isinstance(feedforward, Sequence)
                else type(feedforward).__name__
            )
            raise ParameterError(f"`feedforward` must be a pair (W, b) of arrays or None; got {got}.")
        for name, z in zip(("feedforward[0] (W)", "feedforward[1] (b)"), feedforward):
            if z is None:
                raise ParameterError(f"`{name}` must be an array; got None (pass feedforward=None for no term).")
            zc = _solve.real_array(z, name, "a real array")
            if zc is not None and not np.all(np.isfinite(zc)):  # a NaN there ended the solve non_finite at t0
                raise ParameterError(f"`{name}` must be finite; got NaN/inf entries.")
        w, b = (jnp.asarray(z, dtype) for z in feedforward)
        if w.shape != (d, d) or b.shape != (d,):
            raise ParameterError(
                f"`feedforward` must be (W, b) with shapes ({d}, {d}) and ({d},); got {w.shape} and {b.shape}."
            )
        feedforward = (w, b)
    n = x0.shape[0]
    t_state = jnp.asarray(t0, dtype)  # as the solver calls the kernel (a float64 t0 in a float32 solve: float32)
    # each head of a MultiHead first, so that a message names the head (then the sum)
    for part, name in [
        *((h, f"{label}.heads[{i}]") for i, h in enumerate(getattr(model, "heads", ()))),
        (model, label),
    ]:
        # a kernel without `_ranks` (a user's) meets a batch axis of its fields as a shape error in its own code
        batch_hint = (
            ""
            if type(part)._ranks
            else " (if a field of the kernel carries a batch axis: a solve takes one kernel, jax.vmap the solve over the batch)"
        )
        try:
            check_output_shapes(
                lambda m, t, x: m.velocity(t, x),
                ((n, d),),
                f"{name}.velocity(t, x ({n}, {d}))",
                dtype=dtype,
                args=(part, t_state, x0),
                batch_hint=batch_hint,
            )
        except ParameterError:
            if type(part).velocity is AbstractAttention.velocity:  # the default (W y) Vᵀ: name the part that failed
                # (a fresh-user review: a `weights` of shape (n,) was reported as the velocity's shape, with the batch
                # hint), called as the default velocity calls them; traced only when the velocity failed
                check_output_shapes(
                    lambda m, t, x: m.weights(t, x, x, None),
                    ((n, n),),
                    f"{name}.weights(t, x ({n}, {d}), keys, mask)",
                    args=(part, t_state, x0),
                    batch_hint=batch_hint,
                )
                check_output_shapes(
                    lambda m, t: m.value(t), ((d, d),), f"{name}.value(t)", args=(part, t_state), batch_hint=batch_hint
                )
            raise
    settings = _solve.solve_settings(
        model, dtype, t0=t0, t1=t1, ts=ts, solver=solver, rtol=rtol, atol=atol, dt0=dt0,
        stepsize_controller=stepsize_controller, max_steps=max_steps, size_threshold=size_threshold,
        converge_tol=converge_tol, extrapolate=extrapolate, progress_meter=progress_meter,
    )  # fmt: skip
    if size_threshold is not None and xn is not None:  # the threshold must lie above the initial size
        if _watches_second_moment(model):
            size0, what = float(np.mean(np.sum(np.asarray(xn, np.float64) ** 2, axis=1))), "λ0 = (1/n) Σ_i ‖x_i‖²"
        else:
            size0, what = _solve.token_spread(xn), "λ0 = (1/n) Σ_i ‖x_i − x̄‖²"
        _solve.check_size_threshold(size_threshold, size0, what, dtype)
    atol_c = _solve.real_array(atol, "atol")
    if stepsize_controller is None and atol_c is not None and xn is not None:
        _warn_below_atol(np.asarray(xn), atol_c)
    # `sphere` as a traced Boolean: solves on the plane and on the sphere share one program
    return _solve_core(model, x0, jnp.asarray(bool(sphere)), feedforward, settings)
