"""The projective state of the Gaussian moment ODE: scale and shape apart, in the time `τ` of the size (private).

For a kernel whose Gaussian map is homogeneous (:meth:`AbstractAttention.gaussian_homogeneous
<hassejax.dynamics.AbstractAttention.gaussian_homogeneous>`: `M(α, sΣ) = s M(α, Σ)` and `c` free of
`Σ`, as softmax's `M = βVΣA`, `c = Vα`), write `Σ = e^ρ ÛÛᵀ` and run the flow in the time `τ` with
`dt/dτ = e^{−ρ}`. Then `U = e^{ρ/2}Û` obeys `dU/dτ = M̂U` with `M̂ = M(α, ÛÛᵀ)`, and with
`dρ/dτ = 2⟨Û, M̂Û⟩/‖Û‖²` (the growth of `‖U‖²` put into `ρ`):

    dÛ/dτ = M̂Û − ½ ρ_τ Û,   dρ/dτ = 2⟨Û, M̂Û⟩/‖Û‖²,   dα/dτ = M̂α + e^{−ρ} c,   dt/dτ = e^{−ρ}

(derived; `‖Û‖` is constant on the exact flow). A finite-time blow-up `tr Σ ≈ c/(t* − t)`, which the
factor state in `t` follows with ever shorter steps (Tsit5 at `rtol = 1e-6`: ~200 steps to climb eight
decades), is here a shape `Û` settling on its limit direction while `ρ` grows linearly in `τ` and `t`
converges to `t*`: ~40 steps for the same climb (``benchmarks/README.md``), and `t*` extrapolated from
the event as `t_e + λ/λ'` with `λ/λ' = e^{−ρ}/(d log λ/dτ)`.

The solve stops at the first of the size event `log tr Σ = log threshold` and the time event `t = t1`
(one decreasing condition, their minimum, located by bisection as in :mod:`._solve`); one of them always comes
(below the threshold `dt/dτ = e^{−ρ} > 1/threshold`, so `t` reaches `t1` by `τ = (t1 − t0) · threshold`), so the
solve runs on `τ ∈ [0, ∞)`, stopped by an event, the finite-step guard or the step budget. Both the state as one
flat vector and the constant end `τ = ∞` keep the compiled program small (issue 13, item 2).
Statuses and the decade test are those of :mod:`._solve`, read in `t`, with the time the size spent in its
last two decades integrated as `∫ σ(k(log λ − log L_a)) e^{−ρ} dτ` (a logistic window, :data:`WINDOW_SLOPE`,
instead of a step function that steps this long do not resolve), the steps from a decade below the window on
growing the size by at most a factor `e` (:data:`WINDOW_STEP_LOG`, through the guard's `growth_limit`: the
window is outside the error norm); a crossing whose last step grew the size by more than two decades is
``undetermined`` all the same (:data:`WINDOW_STEP_DECADES`). Saved rows are `[t0, t1]` only: the steps are in `τ`, not in `t`. The state
holds time as `s = (t − t0)/T`, `T = min(t1 − t0, 1/(tr Σ0 ‖M̂0‖_F))` the time scale of the initial flow, so that
`atol` means the same on every time scale. Which stop condition fired is read by the `τ` distance to each at
the stop (they are in different units). The layer edges of :class:`~hassejax.dynamics.PiecewiseConstant`
parameters are not step boundaries here (their `τ` is not known in advance): a step may end at most a quarter
into the layer after the next edge (the guard's `edge_limit`; before it, a step could cross a whole short layer
without evaluating the vector field inside it, and reported t* = 20 for a blow-up at 10.001), the controller meets
the jump at the edge by rejecting steps, and `t*` after an edge is less accurate than the factor state's (review,
rtol = 1e-8: 1.1e-6 against 1.3e-8). A step that crosses an edge with the blow-up time extrapolated from its start
within the solve's time resolution of the edge ends the solve at that start, ``undetermined`` (the side of the edge
the blow-up lies on is not known; see :mod:`._solve`).
"""

from __future__ import annotations

import diffrax
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
import optimistix as optx
from jax.flatten_util import ravel_pytree

from ._guard import guard, tree_finite
from ._solve import DECADE_RATIO_THRESHOLD, DECADES, END_EXPONENT, IntegrateOut, edge_resolution, time_tolerance
from .result import BlowupMethod, Status

WINDOW_SLOPE = 2.0
"""The decade test's time in the last two decades, `∫ σ(k(log λ − log L_a)) dt` with the logistic `σ` and
`k = 2`: a step in `τ` covers a good part of a decade near a blow-up, which a step function's quadrature does not
resolve. For `λ = c/(t* − t)` the ratio remaining time / that span is `(1/100) sin(π/k)/(π/k) = 0.0064` (not
1/99), for exponential growth it stays ~0.22: the threshold 0.05 of :mod:`._solve` separates them as before."""

WINDOW_STEP_LOG = 1.0
"""From a decade below the decade test's window on, a step grows `log tr Σ` by at most this much (a factor `e`):
the window (outside the error norm) is then a quadrature over steps that resolve its integrand, which decays like
`e^{−ρ}`; the controller alone, with a settled shape, took one step across twelve decades (see below). Measured:
`V = A = I` 24–25 → 29–31 steps; random d = 8 blow-ups unchanged (65, 45 → 46, 58, 1,170)."""

WINDOW_STEP_DECADES = DECADES
"""A crossing whose last accepted step grew the size by more than this many decades (`Δρ = h ρ_τ > DECADES ln 10`)
is ``undetermined``: such a step does not resolve the window. A safety net: :data:`WINDOW_STEP_LOG` keeps the steps
near the window shorter. (Before it, for `V = A = I`, the shape settled and `ρ` linear in `τ`, one accepted step
crossed 12 decades and with a threshold of `10^20` the ratio read 0.14, ``diverge``, for a blow-up at `t* = 1`.)"""


def projective_integrate(model, mean0, u0, *, t0, t1, threshold, solver, rtol, atol, max_steps,
                         extrapolate, edges=None) -> IntegrateOut:  # fmt: skip
    """Solve from `N(mean0, u0 u0ᵀ)` on `[t0, t1]` in the projective state; the result in `t` (module docstring).

    `threshold`: the size threshold on `tr Σ` (finite, above `tr Σ0`; traced allowed). Saved rows are the
    initial state and the end state (valid when the solve reached `t1`), as :func:`._solve.integrate` with
    the default save times. `edges`: the layer edges of the model's :class:`~hassejax.dynamics.PiecewiseConstant`
    parameters (None: none): a step that crosses one with the blow-up time extrapolated from its start within
    :func:`._solve.edge_resolution` of it ends the solve there, at that start, ``undetermined``, as does a size
    event whose extrapolated blow-up time reaches past an edge within that resolution (see :mod:`._solve`).
    """
    dtype = jnp.result_type(mean0, u0)
    tiny = jnp.finfo(dtype).tiny
    time_tol = time_tolerance(rtol, atol)  # the time resolution's tolerance (the state's entries are of order one)
    t0 = jnp.asarray(t0, dtype)
    t1 = jnp.asarray(t1, dtype)
    threshold = jnp.asarray(threshold, dtype)
    log_threshold = jnp.log(threshold)
    log_level_a = log_threshold - DECADES * jnp.log(jnp.asarray(10.0, dtype))

    size0 = jnp.sum(u0**2)
    scale0 = jnp.where(size0 > 0, size0, 1.0)  # a zero Σ0 stays zero (M̂ = 0): ρ = 0, Û = 0, t runs at unit speed
    u_hat0 = u0 / jnp.sqrt(scale0)
    # the time in the state is `s = (t − t0)/T`, `T` the time scale of the initial flow, `1/(tr Σ0 ‖M̂0‖_F)`, at most
    # `t1 − t0`: held to `atol + rtol |s|`, `t` is then as accurate on every time scale (review: with `t` itself, a
    # blow-up at t* = 1e-6 was 52 % off at atol = 1e-9, and t* = 1e-7 ended `completed`)
    m0, _ = model.gaussian_affine(t0, mean0, u_hat0 @ u_hat0.T, u_hat0)
    rate0 = scale0 * jnp.sqrt(jnp.sum(m0**2))
    span = t1 - t0
    scale_t = jnp.where(rate0 * span > 1, 1 / jnp.where(rate0 > 0, rate0, 1.0), span)
    y0 = (mean0, u_hat0, jnp.log(scale0), jnp.zeros((), dtype))

    def time_of(y):
        return t0 + scale_t * y[3]

    def parts(y):
        alpha, u, rho, _ = y
        n2 = jnp.sum(u**2)
        m, c = model.gaussian_affine(time_of(y), alpha, u @ u.T, u)
        mu = m @ u
        drho = 2 * jnp.sum(u * mu) / jnp.maximum(n2, tiny)
        speed = jnp.exp(-rho)  # dt/dτ
        return (m @ alpha + speed * c, mu - 0.5 * drho * u, drho, speed / scale_t)

    def log_size(y):  # log tr Σ = ρ + log ‖Û‖²
        return y[2] + jnp.log(jnp.maximum(jnp.sum(y[1] ** 2), tiny))

    # the τ by which an event comes: below the threshold dt/dτ = e^{−ρ} > 1/max(threshold, scale0); the size counts
    # as out of range from 1/tiny on (the guard stops there); in log space, as it may exceed the float range. Only
    # the guard's floor of the step length uses it (its `dt_stop`, relative to the interval).
    bound = jnp.maximum(jnp.minimum(threshold, 1 / tiny), scale0)
    tau1 = jnp.exp(jnp.minimum(jnp.log(2 * span) + jnp.log(bound), jnp.log(jnp.finfo(dtype).max) - 1))

    # the solver's state is one flat vector `((α, Û, ρ, s), time below)`: each leaf of a tree costs its own
    # copy of every stage sum, interpolation, error norm and loop select (at d = 8 the optimized program had
    # 12,237 HLO lines with five leaves, 9,203 with one and the constant end below)
    flat0, unflatten = ravel_pytree((y0, jnp.zeros((), dtype)))

    def _unpack(v):
        return unflatten(v)[0]

    def f(tau, v, args):
        y = _unpack(v)
        dy = parts(y)
        above = jax.nn.sigmoid(WINDOW_SLOPE * (log_size(y) - log_level_a))
        return ravel_pytree((dy, above * jnp.exp(-y[2])))[0]  # the window in t

    def c_size(y):
        return log_threshold - log_size(y)

    s1 = span / scale_t

    def c_time(y):
        return s1 - y[3]

    def tau_to(y):
        """The `τ` distances to the size threshold and to `t1` at the state's rates (inf when not approached)."""
        dy = parts(y)
        rate = dy[2] + 2 * jnp.sum(y[1] * dy[1]) / jnp.maximum(jnp.sum(y[1] ** 2), tiny)  # d log λ/dτ
        to_size = jnp.where(rate > 0, jnp.abs(c_size(y)) / jnp.where(rate > 0, rate, 1.0), jnp.inf)
        return to_size, jnp.abs(c_time(y)) / dy[3]

    def cond(t, y, args, **kwargs):  # diffrax passes t=, y= by keyword (here `τ` and the state)
        y = _unpack(y)
        return jnp.minimum(c_size(y), c_time(y)).astype(jnp.result_type(float))

    def in_range(y):
        return jnp.isfinite(log_size(y)) & (log_size(y) < -jnp.log(tiny))

    def window_step(v):  # the growth of log tr Σ a step from `v` may take (WINDOW_STEP_LOG near the window)
        below = (log_level_a - float(np.log(10.0))) - log_size(_unpack(v))  # to a decade below the window
        return jnp.where(below > 0, below, 0.0) + WINDOW_STEP_LOG

    def remaining_time(y):  # λ/λ' in t at the state's rates (inf where the size does not grow)
        dy = parts(y)
        rate = dy[2] + 2 * jnp.sum(y[1] * dy[1]) / jnp.maximum(jnp.sum(y[1] ** 2), tiny)  # d log λ/dτ
        return jnp.where(rate > 0, jnp.exp(-y[2]) / jnp.where(rate > 0, rate, 1.0), jnp.inf)

    if edges is not None:  # a layer edge crossed within the time resolution of the blow-up extrapolated before it
        edges = jnp.asarray(edges, dtype)

        def next_edge(v):
            t = time_of(_unpack(v))
            return jnp.min(jnp.where(edges > t, edges, jnp.inf))

        def edge_gate(tau0, tau1, v0, v1, made_jump):
            return time_of(_unpack(v1)) >= next_edge(v0)

        def edge_test(tau0, tau1, v0, v1):
            y = _unpack(v0)
            e = next_edge(v0)
            return jnp.abs(time_of(y) + remaining_time(y) - e) <= edge_resolution(e, t0, time_tol, dtype)

        edge_stop = (edge_gate, edge_test)

        def room(v):  # how far in `t` a step from `v` may go: to a quarter into the layer after the next edge
            t = time_of(_unpack(v))
            e = next_edge(v)
            after = jnp.min(jnp.where(edges > e, edges, jnp.inf))
            into = jnp.where(jnp.isfinite(after), 0.25 * (after - jnp.where(jnp.isfinite(e), e, 0.0)), jnp.inf)
            gap = jnp.where(jnp.isfinite(e), e - t, jnp.inf)
            return gap + into, gap + 0.5 * into

        edge_limit = (lambda v: time_of(_unpack(v)), room)
    else:
        edge_stop = edge_limit = None

    root_tol = max(1e-6, 1e4 * float(jnp.finfo(dtype).eps))
    event = diffrax.Event(cond, root_finder=optx.Bisection(rtol=root_tol, atol=root_tol, flip=True), direction=False)
    pid = diffrax.PIDController(rtol=rtol, atol=atol, norm=lambda v: optx.rms_norm(v[:-1]))  # not the window
    # the end of the interval a constant, ∞, not a per-member τ1: diffrax computes `t1` less 100 ULPs as 100 chained
    # `nextafter`s, which XLA folds for a constant `t1` but compiles as a 1,700-instruction fusion (0.4 s) for a
    # batched one. (Rescaling τ to [0, 1] instead changed the first step, and lost the step's precision to
    # subnormal numbers for a threshold far above the initial size.)
    zero = jnp.zeros((), dtype)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(f),
        solver,
        t0=zero,
        t1=jnp.asarray(jnp.inf, dtype),
        dt0=None,
        y0=flat0,
        saveat=diffrax.SaveAt(t1=True, controller_state=True),
        stepsize_controller=guard(
            pid,
            zero,
            tau1,
            finite=lambda v: tree_finite(v) & in_range(_unpack(v)),
            record=True,
            growth_limit=(lambda v: log_size(_unpack(v)), window_step),
            edge_stop=edge_stop,
            edge_keep=False,
            edge_limit=edge_limit,
        ),
        max_steps=max_steps,
        event=event,
        throw=False,
    )
    (y_end, above_end) = unflatten(sol.ys[0])
    fired = jnp.asarray(False) if sol.event_mask is None else jnp.asarray(sol.event_mask)
    # under vmap a member without an event reports its last attempted step: read the accepted one (see _solve)
    _, _, _, v_acc, edge_hit = sol.controller_state
    y_acc, above_acc = unflatten(v_acc)
    located = fired & tree_finite(y_end) & in_range(y_end)
    located = located & (jnp.abs(jnp.minimum(c_size(y_end), c_time(y_end))) <= np.log(10.0))
    y_end = jtu.tree_map(lambda a, b: jnp.where(located, a, b), y_end, y_acc)
    above_end = jnp.where(located, above_end, above_acc)
    crossed = (c_size(y_acc) <= 0) | (c_time(y_acc) <= 0)
    lost = fired & ~located & ~crossed
    fired = fired & ~lost
    end_finite = tree_finite(y_end) & in_range(y_end)
    start_finite = tree_finite(y0) & in_range(y0)
    y_final = jtu.tree_map(lambda a, b: jnp.where(end_finite, a, b), y_end, y0)
    t_final = jnp.where(end_finite, time_of(y_final), t0)
    # which condition fired: the one nearer in τ, the variable the root find located the event in (the two
    # margins are in different units; review: a blow-up 3e-7 before t1 read as the time event)
    to_size, to_time = tau_to(y_final)
    blow_ev = fired & end_finite & (to_size <= to_time)
    time_ev = fired & end_finite & ~blow_ev
    # the time event's root find leaves `t` within its tolerance (~1e-6 relative in τ) of t1: one Euler step
    # of `Δτ = (s1 − s) T e^ρ` lands on t1 with an error O(Δτ²) (the mean grows like e^{t}: 4e-7 relative otherwise)
    dtau = jnp.where(time_ev, c_time(y_final) * scale_t * jnp.exp(y_final[2]), 0.0)
    step = parts(y_final)
    y_final = jtu.tree_map(lambda a, b: jnp.where(time_ev, a + dtau * b, a), y_final, step)

    # growth of λ = tr Σ at the stop, in t: λ_t = λ_τ e^ρ, λ_tt = e^{2ρ}(λ_ττ + λ_τ ρ_τ)
    def lam_of(y):
        return jnp.exp(log_size(y))

    def first(y):
        return jax.jvp(lam_of, (y,), (parts(y),))

    y_f = y_final
    lam, lam_tau = first(y_f)
    _, lam_tautau = jax.jvp(lambda y: first(y)[1], (y_f,), (parts(y_f),))
    rho_tau = parts(y_f)[2]
    rates_ok = jnp.isfinite(lam) & jnp.isfinite(lam_tau) & jnp.isfinite(lam_tautau) & (lam_tau > 0)
    safe = jnp.where(rates_ok, lam_tau, 1.0)
    remaining = jnp.where(rates_ok, lam * jnp.exp(-y_f[2]) / safe, jnp.inf)  # λ/λ_t
    p = lam * (lam_tautau + lam_tau * rho_tau) / safe / safe
    p_end = p
    p = jnp.where(blow_ev & rates_ok & jnp.isfinite(p), p, 0.0)
    window = above_end  # the time spent in the last two decades (logistic window, WINDOW_SLOPE)
    ratio = remaining / jnp.maximum(window, tiny)
    ratio = jnp.where(blow_ev & jnp.isfinite(ratio), ratio, jnp.where(blow_ev, jnp.inf, 0.0)).astype(dtype)
    # the last accepted step across the window: longer than it (in decades of the size), the window is not resolved
    _, tau_start, tau_acc, _, _ = sol.controller_state
    step_decades = (tau_acc - tau_start) * jnp.abs(rho_tau) / float(np.log(10.0))
    unresolved = ~(step_decades <= WINDOW_STEP_DECADES)
    unmeasured = unresolved | ~rates_ok | ~(window > 0) | ~(jnp.log(jnp.maximum(size0, tiny)) < log_level_a)
    undetermined = blow_ev & unmeasured
    if edges is not None:  # the solve stopped before an edge, or its event extrapolates past one (see `edge_stop`)
        t_star = t_final + jnp.where(jnp.isfinite(remaining), remaining, 0.0)
        # only a blow-up by the decade test (ρ small): an exponential divergence's λ/λ' is its e-folding time, not
        # a time to a blow-up (a diff review: divergences with an edge within 1/rate were undetermined)
        across = (
            blow_ev
            & (ratio < DECADE_RATIO_THRESHOLD)
            & jnp.any(
                jnp.isfinite(edges)
                & (edges > t_final)
                & (edges <= t_star + edge_resolution(edges, t0, time_tol, dtype))
            )
        )
        edge_undetermined = (edge_hit & ~fired) | across
        undetermined = undetermined | edge_undetermined
    else:
        edge_undetermined = jnp.asarray(False)
    is_blowup = blow_ev & ~undetermined & (ratio < DECADE_RATIO_THRESHOLD)
    p = jnp.where(undetermined, 0.0, p).astype(dtype)
    ratio = jnp.where(undetermined, jnp.inf, ratio).astype(dtype)

    # as _solve's end check: in the last two decades below the threshold, growing as a blow-up (exponent >= 1.5)
    in_window = log_size(y_f) >= log_level_a
    blowup_like = in_window & jnp.isfinite(p_end) & (p_end >= END_EXPONENT)
    near_end = time_ev & rates_ok & blowup_like & (remaining <= edge_resolution(t_final, t0, time_tol, dtype))
    result = sol.result
    status = jnp.where(
        edge_undetermined & end_finite,
        Status.undetermined,
        jnp.where(
            # ... or the step budget ran out before the guard's retries did, at a state whose vector field is NaN/inf
            # (as in _solve.integrate)
            ~end_finite
            | (result == diffrax.RESULTS.nonfinite)
            | lost
            | ((result == diffrax.RESULTS.max_steps_reached) & ~tree_finite(parts(y_f))),
            Status.non_finite,
            jnp.where(
                blow_ev,
                jnp.where(undetermined, Status.undetermined, jnp.where(is_blowup, Status.blow_up, Status.diverge)),
                jnp.where(
                    time_ev,
                    # t1 reached with the state's remaining time within the resolution: a blow-up may lie before t1
                    jnp.where(near_end, Status.undetermined, Status.completed),
                    jnp.where(
                        result == diffrax.RESULTS.max_steps_reached, Status.max_steps_reached, Status.dt_min_reached
                    ),
                ),
            ),
        ),
    ).astype(jnp.int32)
    blow = status == Status.blow_up
    t_est = t_final + jnp.where(jnp.isfinite(remaining), remaining, 0.0) if extrapolate else t_final
    method = BlowupMethod.extrapolated if extrapolate else BlowupMethod.threshold

    def unscale(y):  # (α, U) with U = e^{ρ/2} Û
        return y[0], jnp.exp(0.5 * y[2]) * y[1]

    completed = status == Status.completed
    t_final = jnp.where(completed, t1, t_final)  # the time event's root find leaves `t` within its tolerance of t1
    # rows at [t0, t1]: the end state counts at t1 only when the solve got there (else the initial state, not valid)
    row1 = jtu.tree_map(lambda a, b: jnp.where(completed, a, b), unscale(y_final), unscale(y0))
    ys = jtu.tree_map(lambda a, b: jnp.stack([a, b]), unscale(y0), row1)
    ts = jnp.stack([t0, t1])
    valid = jnp.stack([start_finite, completed])
    return IntegrateOut(
        ts=ts,
        ys=ys,
        valid=valid,
        y_final=unscale(y_final),
        t_final=jnp.asarray(t_final, dtype),
        status=status,
        t_blowup=jnp.where(blow, t_est, jnp.inf).astype(dtype),
        blowup_method=jnp.where(blow, int(method), int(BlowupMethod.none)).astype(jnp.int32),
        growth_exponent=jnp.asarray(p, dtype),
        decade_ratio=ratio,
        num_steps=jnp.asarray(sol.stats["num_steps"]),
        num_accepted_steps=jnp.asarray(sol.stats["num_accepted_steps"]),
        num_rejected_steps=jnp.asarray(sol.stats["num_rejected_steps"]),
    )
