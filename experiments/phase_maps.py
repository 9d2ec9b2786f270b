"""Phase maps of softmax covariance dynamics from vmap sweeps (spec dynamics.md §7b item 10).

Softmax attention, `d = 2`, `β = 1`, mean 0, `Σ0 = I/2`, interaction `A = [[a, 1], [0, −1]]`
with `a ∈ [−3, 3]`; every grid point is one member of ONE vmapped diffrax solve
(:func:`hassejax.dynamics.sweeps.sweep` over :func:`hassejax.dynamics.solve_gaussian`,
``throw=False``, each member with its own status).

The family, the member solve and the sweep are :mod:`hassejax.dynamics.phase_map`; the drawing
is :func:`hassejax.plot.draw_outcome_map`. This script composes them and draws.

(a) `V = vI`, `v ∈ [−2, 2]`: the solved outcome against the closed form (Castin et al.,
    arXiv:2501.18322; spec §3): blow-up iff `λ* = λ_max(v Σ0^{1/2}(A + Aᵀ)Σ0^{1/2}) > 0`, at
    `t* = 1/λ*`. The boundary `λ_max(v(A + Aᵀ)) = 0` and the `t*` contours are drawn from the
    closed form; a member counts as agreeing when "blow-up by `t1`" (solved) equals "`t* ≤ t1`"
    (closed form). Beyond `t1` the closed form decides the rest
    (:func:`hassejax.dynamics.verdict.closed_form_verdict`): members the rate test calls
    settled at `t1` are relabelled "blow-up after `t1`" or "contracts slowly" (figure
    ``phase_maps_a``, with a zoomed inset).
(b) `V = R(φ)`, a rotation by `φ ∈ [0, π]`, no closed form: the naive spectral rule
    "a positive eigenvalue of `VA + AᵀVᵀ` ⇒ blow-up, `VA + AᵀVᵀ ⪯ 0` ⇒ no blow-up" is
    marked (hatched) wherever the solved outcome contradicts it. At `φ = 0` (`V = I`) and
    `φ = π` (`V = −I`) the rule is exact (spec §3); in between it is not, and in this family
    only in one direction: it predicts blow-up where none happens (figure ``phase_maps_b``).
(c) The other direction, the one that matters, from the spec's counterexample (`VA + AᵀVᵀ ≺ 0`,
    `A + Aᵀ ≺ 0`, blow-up at `t ≈ 19.68`): its trajectory, its growth law `λ_max ≈ c/(t* − t)`,
    every trace-one `Σ0` (the rule does not depend on `Σ0`) and a parameter neighbourhood
    `V = R(δ1)V`, `A + δ2 I` (figure ``phase_maps_counterexample``).

Outcome of a member (:class:`hassejax.dynamics.diagnostics.Outcome`, from
:func:`hassejax.dynamics.diagnostics.classify` with the rate test, inside the sweep): `blow_up` (size event `tr Σ = 1e6 · tr Σ0`,
decade test of the library says finite-time), `escape without finite-time blow-up` (size
event, decade test says not finite-time; every such member of map (b) and of the neighbourhood
is re-solved to several size levels, :mod:`hassejax.dynamics.blowup_check`, and counted as
`blow_up` when the gaps between the level crossings shrink geometrically: the decade test
misses log-periodic blow-ups), else from the final state at `t1` and the
relative rate `r = (dλ_max/dt)/λ_max` there (`dΣ/dt` from
:func:`hassejax.dynamics.moment_derivatives`): `contracts` (`r < −RATE_TOL`), `grows, no
blow-up by t1` (`r > RATE_TOL`), `settles` (`|r| ≤ RATE_TOL`) on rank one (eigenvalues
`> 1e-6 λ_max`) or full rank, and `undetermined` when the solve stopped for another reason.
Solves that ran out of steps on a stationary rank-one `Σ` get their own label: for
rotations with `a > −1/4` the covariance settles on a large rank-one state along an
isotropic direction of `A` (`vᵀAv = 0`, spec §3), where the relaxation rate grows with
`λ_max` and the explicit solver becomes stability-limited (stiff). They are not counted as
decided.
"""

from __future__ import annotations

import jax

FLOAT64 = True  # JAX's float64 mode: on here, and again before main() when reproduce.py runs it
jax.config.update("jax_enable_x64", FLOAT64)

import re
import time
from pathlib import Path

import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from _common import Output, cli
from matplotlib import patheffects
from matplotlib.colors import ListedColormap, LogNorm
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from hassejax.dynamics import Status, geometry, solve_gaussian
from hassejax.dynamics import phase_map as pm
from hassejax.dynamics.attention import Softmax
from hassejax.dynamics.blowup_check import LEVELS, MAX_GAP_RATIO, N_RATIOS
from hassejax.dynamics.diagnostics import Outcome, naive_rule
from hassejax.dynamics.verdict import Verdict, closed_form_verdict
from hassejax.plot import draw_hatched, draw_outcome_map
from hassejax.plot.bounds import fmt_lower, fmt_upper
from hassejax.plot.phase_map import OUTCOME_COLORS
from hassejax.plot.style import TEXT_WIDTH, figsize

NAME = "phase_maps"

LABELS = {
    Outcome.blow_up: "blow-up by t1 (finite time)",
    Outcome.diverge: "escape, no finite-time blow-up",
    Outcome.low_rank: "settles on rank one",
    Outcome.bounded: "settles, full rank",
    Outcome.contracts: "contracts (Σ → 0)",
    Outcome.grows: "grows, no blow-up by t1",
    Outcome.undetermined: "undetermined (solver stopped)",
    Outcome.stalled: "step budget ran out on a stationary rank-one Σ (stiff)",
}
"""The figure's label of each outcome (d = 2: `low_rank` is rank one), in legend and JSON order."""
NOT_DECIDED_NOTE = {
    Outcome.grows: "not decided: still growing at t1",
    Outcome.undetermined: "not decided: step budget ran out (or the solve failed) off a stationary rank-one Σ",
    Outcome.stalled: "not decided",
}
"""Legend notes of the outcomes that the rule check of map (b) does not count."""
YLABEL = (
    r"$a$  ($A = \left(\genfrac{}{}{0}{0}{a}{0}\;\;\genfrac{}{}{0}{0}{1}{-1}\right)$)"  # a 2 × 2 matrix in mathtext
)
RARE_MARKERS_B = {Outcome.diverge: "o", Outcome.bounded: "D"}
"""Map (b)'s outcomes of a few scattered cells: a black-outlined marker on each cell (the colour alone is lost)."""
NO_BLOW_UP = [Outcome.diverge, Outcome.low_rank, Outcome.bounded, Outcome.contracts]
"""Outcomes decided as "no blow-up" for the rule check of map (b)."""


def _tex(label: str) -> str:
    """A JSON label ("blow-up by t1 (closed form: t* ≤ t1)") with its symbols in mathtext, for drawing only."""
    for plain, tex in (
        ("t* ≤ t1", r"$t^* \leq t_1$"),
        ("t* > t1", r"$t^* > t_1$"),
        ("Σ → 0", r"$\Sigma \to 0$"),
        ("v = 0: Σ constant", r"$v = 0$: $\Sigma$ constant"),
    ):
        label = label.replace(plain, tex)
    return re.sub(r"\bt1\b", r"$t_1$", label)


def naive_rule_map(phi: np.ndarray, a: np.ndarray) -> np.ndarray:
    """`λ_max(VA + AᵀVᵀ)` of map (b) on a grid (`V = R(φ)`, `A = A(a)`)."""
    V = np.moveaxis(np.asarray(pm.rotation(jnp.asarray(phi))), (0, 1), (-2, -1))
    A = np.moveaxis(np.asarray(pm.family_A(jnp.asarray(a))), (0, 1), (-2, -1))
    return np.asarray(naive_rule(V, A))


def counts_codes(codes: np.ndarray, labels: dict) -> dict[str, int]:
    """Members per label (codes present only, in the order of `labels`)."""
    return {label: int(np.sum(codes == o)) for o, label in labels.items() if np.any(codes == o)}


T_LEVELS = (0.5, 2.0, 20.0)
"""Closed-form t* contours of map (a) (few, so their labels do not collide)."""


INSET = (-0.06, 0.16, -0.42, -0.12)
"""Zoom of map (a) where the late blow-ups and slow contractions sit (v, a limits)."""


def _inset(ax, codes, v, a, late, slow) -> None:
    """A zoomed inset of map (a) around :data:`INSET`, with the late blow-ups and slow contractions marked."""
    ins = ax.inset_axes([0.6, 0.1, 0.37, 0.26])
    ins.imshow(codes, origin="lower", extent=(*pm.V_RANGE, *pm.A_RANGE), aspect="auto", interpolation="nearest",
               cmap=ListedColormap([COLORS_A.get(k, "white") for k in range(max(COLORS_A) + 1)]), vmin=-0.5,
               vmax=max(COLORS_A) + 0.5)  # fmt: skip
    ins.scatter(v[late], a[late], marker="x", color="w", s=30, lw=1.2, zorder=5)
    ins.scatter(v[slow], a[slow], marker="+", color="w", s=40, lw=1.2, zorder=5)
    ins.set_xlim(INSET[0], INSET[1])
    ins.set_ylim(INSET[2], INSET[3])
    ins.tick_params(labelsize=8)
    ins.yaxis.set_major_locator(MaxNLocator(3))
    ins.xaxis.set_major_locator(MaxNLocator(3))
    ins.set_title("zoom", fontsize=8, pad=2)
    ax.indicate_inset_zoom(ins, edgecolor="k")


def _label_spots(cs) -> list[tuple[float, float]]:
    """One label position per contour level: the middle point of its longest path."""
    spots = []
    for level_paths in cs.allsegs:
        if not level_paths:
            continue
        seg = max(level_paths, key=len)
        spots.append(tuple(seg[len(seg) // 2]))
    return spots


LATE_BLOW_UP, SLOW_CONTRACTION = 9, 10
"""Map (a) codes beyond :class:`Outcome`: members the solve saw as settled at `t1` that the closed
form says blow up after `t1` or contract (too slowly for the rate test at `t1`)."""
LABELS_A = {
    Outcome.blow_up: "blow-up by t1 (closed form: t* ≤ t1)",
    Outcome.grows: "grows, no blow-up by t1 (closed form: t* > t1)",
    LATE_BLOW_UP: "settled at t1 by the rate test; closed form: blow-up after t1 (✕)",
    Outcome.contracts: "contracts (closed form: Σ → 0)",
    SLOW_CONTRACTION: "settled at t1 by the rate test; closed form: Σ → 0, slowly (+)",
    Outcome.bounded: "v = 0: Σ constant",
}
COLORS_A = {**OUTCOME_COLORS, LATE_BLOW_UP: "#4A1230", SLOW_CONTRACTION: "#336B87"}  # darker wine, a blue teal
VERDICT_OF = {
    Outcome.blow_up: Verdict.blow_up_by_t1,
    Outcome.grows: Verdict.blow_up_after_t1,
    LATE_BLOW_UP: Verdict.blow_up_after_t1,
    Outcome.contracts: Verdict.contracts,
    SLOW_CONTRACTION: Verdict.contracts,
    Outcome.bounded: Verdict.stationary,
}
"""The closed-form verdict each map (a) label claims."""

# the counterexample of the sign rule (spec dynamics.md §3, derived there): VA + AᵀVᵀ ≺ 0, A + Aᵀ ≺ 0, blow-up
CE_V = np.array([[-0.53206, -1.25140], [2.56361, 0.11094]])
CE_A = np.array([[-0.61541, -0.45655], [1.18257, -0.27585]])
CE_SIGMA0 = np.array([[0.21008, -0.34117], [-0.34117, 0.78992]])
CE_SPEC_T = 19.68
CE_T1 = 200.0
CE_THRESHOLD = 1e8
CE_T1_LONGER = 400.0
"""The trace-one Σ0 with no blow-up by `CE_T1` are solved on to this time."""
FLOOR_RATIO = 1e-13
"""`λ_min/λ_max` below this: float64 round-off of a nearly rank-one Σ (~450 eps), not a measurement."""
CE_COLORS = {
    0: OUTCOME_COLORS[Outcome.contracts],
    1: OUTCOME_COLORS[Outcome.diverge],
    2: OUTCOME_COLORS[Outcome.blow_up],
}
"""Neighbourhood map colours: no escape by `CE_T1`, escape without finite-time blow-up, blow-up."""
CE_FIT_WINDOW = (1e-6, 1e-2)
"""`t* − t` range of the log-log fit of `λ_max` (slope −1 for `c/(t* − t)`), drawn in panel (b)."""
CE_PER_DECADE = 100
"""Save times per decade of `t* − t` in the fit window (geometric): the growth law resolved, not aliased."""
CE_DELTA = 0.6
"""Neighbourhood of the counterexample: `V = R(δ1) V_ce`, `A = A_ce + δ2 I`, `|δ1|, |δ2| ≤ CE_DELTA`."""


LEVEL_CHECK_NOTE = (
    "every member the library's decade test calls 'diverge' (escape, no finite-time blow-up) is solved again to the "
    "first times t_k at which tr Σ reaches levels × tr Σ0 (hassejax.dynamics.blowup_check, levels "
    + ", ".join(f"{x:.0e}" for x in LEVELS)
    + f"; rtol {pm.CONFIRM_RTOL:g}, atol {pm.CONFIRM_ATOL:g}, horizon 2 t1) and counted as a finite-time blow-up "
    f"when each of the last {N_RATIOS} gap ratios (t_(k+2) − t_(k+1))/(t_(k+1) − t_k) is below {MAX_GAP_RATIO:g} "
    f"(the last {N_RATIOS + 1} gaps; c/(t* − t): 0.01 per two decades, exponential growth: 1). The decade test (one "
    "event, ρ < 0.05) is fooled by log-periodic growth near t*: there λ/λ' at the event is not t* − t. The "
    "library's 'diverge' status can therefore be a finite-time blow-up"
)
"""JSON note of the multi-level blow-up check (the library's ``diverge`` status can be a log-periodic blow-up)."""


def map_sweep(batch: dict, desc: str, quick: bool) -> dict:
    """A map's sweep: :func:`~hassejax.dynamics.phase_map.sweep_with_retry`; ``quick``: every member with the retry's
    budget at once (one program, :func:`~hassejax.dynamics.phase_map.member_retry`, for both maps instead of two, the
    first budget's and the retry's; the step budget changes no step, so each member's solve is the one it gets
    there), ``retried`` = the members that needed more than the first budget (those the retry would solve again)."""
    if not quick:
        return pm.sweep_with_retry(batch, desc)
    out = pm.run_sweep(pm.member_retry, batch, desc, held=True)
    out["retried"] = out["steps"] > pm.MAX_STEPS
    return out


def level_check(V: np.ndarray, A: np.ndarray, cov0: np.ndarray, t1: float, desc: str, quick: bool = False) -> dict:
    """:func:`hassejax.dynamics.phase_map.confirm_member` on members `(V, A)` `(n, 2, 2)` with one `Σ0`, horizon `t1`."""
    n = len(V)
    if n == 0:
        return {"times": np.zeros((0, len(LEVELS))), "blow_up": np.zeros(0, bool)}
    batch = {"V": V, "A": A, "cov0": np.broadcast_to(cov0, (n, 2, 2)), "t1": np.full(n, float(t1))}
    # chunks no wider than the members need (a power of two from 8: at most four programs): a chunk steps until its
    # slowest member stops, and the members left here are the stiff ones (--quick: 5 members padded to 64 ran
    # 20,000 steps, 64 wide); the results do not depend on the width (checked bit for bit, 64 against 8)
    width = min(pm.CONFIRM_CHUNK, max(8, 1 << (n - 1).bit_length()))
    if quick:  # the two level checks (map (b), the neighbourhood) share one traced program where their widths agree
        return pm.run_sweep(pm.confirm_member, batch, desc, chunk_size=width, held=True)
    return pm.run_sweep(pm.confirm_member, batch, desc, chunk_size=width)


def level_check_record(chk: dict, t1: float) -> dict:
    """JSON record of a :func:`level_check`: counts, settings, the gap ratios seen."""
    times = np.asarray(chk["times"])
    # A level a member did not reach has time inf: its gaps are nan (inf − inf) and its ratios are
    # read only through `all_reached` below.
    with np.errstate(invalid="ignore", divide="ignore"):
        gaps = np.diff(times, axis=-1) if times.size else np.zeros((0, len(LEVELS) - 1))
        ratios = gaps[:, 1:] / gaps[:, :-1]
    last = ratios[:, -N_RATIOS:]
    blow = np.asarray(chk["blow_up"], bool)
    all_reached = np.all(np.isfinite(times), axis=-1)
    return {
        "members_checked": int(blow.size),
        "confirmed_finite_time_blow_up": int(blow.sum()),
        "not_confirmed": int((~blow).sum()),
        "not_confirmed_with_every_level_reached": int((~blow & all_reached).sum()),
        "not_confirmed_highest_level_reached": {
            f"{lv:.0e}": int(np.sum(~blow & (np.isfinite(times).sum(axis=-1) == k + 1))) for k, lv in enumerate(LEVELS)
        }
        | {"none": int(np.sum(~blow & ~np.isfinite(times).any(axis=-1)))},
        "not_confirmed_note": "a level not reached: the solve stopped first (step budget on a stiff, large state; "
        "horizon), so the member keeps the decade test's 'diverge'",
        "levels_times_trace_Sigma0": LEVELS,
        "max_gap_ratio": MAX_GAP_RATIO,
        "ratios_checked": N_RATIOS,
        "rtol": pm.CONFIRM_RTOL,
        "atol": pm.CONFIRM_ATOL,
        "max_steps": pm.CONFIRM_MAX_STEPS,
        "t1": t1,
        "confirmed_largest_gap_ratio": float(np.max(last[blow])) if blow.any() else None,
        "not_confirmed_smallest_largest_gap_ratio": float(np.min(np.max(last[~blow & all_reached], axis=-1)))
        if (~blow & all_reached).any()
        else None,
        "confirmed_time_at_last_level_max": float(np.max(times[blow, -1])) if blow.any() else None,
        "criterion": LEVEL_CHECK_NOTE,
    }


def _ce_models(d1: np.ndarray, d2: np.ndarray) -> list:
    """Kernel modules of the neighbourhood `V = R(δ1) V_ce`, `A = A_ce + δ2 I`."""
    out = []
    for x, y in zip(d1, d2):
        c, s = np.cos(x), np.sin(x)
        out.append(Softmax(V=np.array([[c, -s], [s, c]]) @ CE_V, A=CE_A + y * np.eye(2)))
    return out


def counterexample(o: Output, quick: bool) -> dict:
    """The sign rule's failure in the paper's direction: no blow-up predicted, blow-up at t ≈ 19.68."""
    import _dynamics_common as dc

    cap = dc.CAPACITY
    model = Softmax(V=CE_V, A=CE_A)
    rule = np.linalg.eigvalsh(CE_V @ CE_A + CE_A.T @ CE_V.T)
    sym = np.linalg.eigvalsh(CE_A + CE_A.T)
    sol = dc.solve_for_plot(model, CE_SIGMA0[None], t1=CE_T1, threshold=CE_THRESHOLD, tol=dc.NO_STOP_TOL, capacity=cap)
    t_b = float(sol["t_blowup"][0])
    ts = sol["ts"][0][sol["valid"][0]]
    covs = sol["cov"][0][sol["valid"][0]]
    lam = np.linalg.eigvalsh(covs)
    # near t*: the same solve saved at times geometric in t* − t over the fit window, at two tolerances
    gaps = np.geomspace(
        CE_FIT_WINDOW[1], CE_FIT_WINDOW[0], int(CE_PER_DECADE * np.log10(CE_FIT_WINDOW[1] / CE_FIT_WINDOW[0])) + 1
    )
    near = {}
    for rtol, atol in ((dc.RTOL, dc.ATOL), (1e-13, 1e-15)):
        s_ = solve_gaussian(
            model,
            jnp.zeros(2),
            CE_SIGMA0,
            t1=CE_T1,
            ts=t_b - gaps,
            rtol=rtol,
            atol=atol,
            max_steps=dc.MAX_STEPS,
            size_threshold=CE_THRESHOLD,
            converge_tol=dc.NO_STOP_TOL,
        )
        if not bool(np.all(np.asarray(s_.valid))):
            raise RuntimeError("counterexample: a save time near t* lies past the solve's stop")
        near[rtol] = np.asarray(s_.cov)
    lam_near, vec_near = np.linalg.eigh(near[dc.RTOL])
    lam_tight = np.linalg.eigvalsh(near[1e-13])[:, 1]
    scaled = lam_near[:, 1] * gaps  # λ_max (t* − t): constant for a plain c/(t* − t) law
    # the principal axis turns through 180° once per period of the log-periodic growth
    axis_deg = np.degrees(np.unwrap(2.0 * np.arctan2(vec_near[:, 1, 1], vec_near[:, 0, 1])) / 2.0)
    turn_per_decade = float(np.polyfit(np.log10(gaps), axis_deg, 1)[0])
    period_decades = 180.0 / abs(turn_per_decade)
    # neighbourhood 1: every trace-one Σ0 (the rule does not depend on Σ0)
    n_side = 12 if quick else 30
    grid = geometry.trace_one_grid(n_side, n_side, -1.0, 1.0)
    disk = dc.solve(model, grid, t1=CE_T1, threshold=CE_THRESHOLD, tol=dc.NO_STOP_TOL, capacity=cap)
    disk_blow = disk["status"] == Status.blow_up
    # the Σ0 with no blow-up by CE_T1, solved on to CE_T1_LONGER
    calm_long = (
        dc.solve(model, grid[~disk_blow], t1=CE_T1_LONGER, threshold=CE_THRESHOLD, tol=dc.NO_STOP_TOL, capacity=cap)
        if (~disk_blow).any()
        else None
    )
    calm_t = (
        [float(x) if s == Status.blow_up else None for x, s in zip(calm_long["t_blowup"], calm_long["status"])]
        if calm_long is not None
        else []
    )
    # λ_min at the rounding floor: λ_min/λ_max below FLOOR_RATIO from then on
    tiny = lam[:, 0] / lam[:, 1] < FLOOR_RATIO
    after = np.flatnonzero(~tiny)
    first_floor = after[-1] + 1 if after.size else 0
    floor_from_t = float(ts[first_floor]) if first_floor < ts.size and ts[first_floor] < t_b else None
    # neighbourhood 2: parameters
    m = 9 if quick else 25
    g = np.linspace(-CE_DELTA, CE_DELTA, m)
    D1, D2 = np.meshgrid(g, g)
    models = _ce_models(D1.ravel(), D2.ravel())
    nb = dc.solve(dc.stack_models(models), np.broadcast_to(CE_SIGMA0, (m * m, 2, 2)), t1=CE_T1,
                  threshold=CE_THRESHOLD, tol=dc.NO_STOP_TOL, capacity=cap)  # fmt: skip
    nb_rule = np.array([np.linalg.eigvalsh(np.asarray(k.V) @ np.asarray(k.A) + (np.asarray(k.V) @ np.asarray(k.A)).T)[-1]
                        for k in models]).reshape(m, m)  # fmt: skip
    # the decade test's verdicts, kept for the record
    dec_blow = (nb["status"] == Status.blow_up).reshape(m, m)
    dec_escape = (nb["status"] == Status.diverge).reshape(m, m)
    decade_counts = {
        "blow_up": int(dec_blow.sum()), "escape_without_finite_time_blow_up": int(dec_escape.sum()),
        "rule_no_blow_up_but_blow_up": int((dec_blow & (nb_rule < 0)).sum()),
        "rule_blow_up_but_no_blow_up_by_t1": int((~dec_blow & (nb_rule > 0)).sum()),
        "rule_blow_up_but_no_blow_up_by_t1_of_which_escape_without_finite_time_blow_up": int(
            (~dec_blow & (nb_rule > 0) & dec_escape).sum()),
    }  # fmt: skip
    # every decade-test escape re-checked at several size levels (log-periodic blow-ups fool the decade test)
    esc = np.flatnonzero(nb["status"] == Status.diverge)
    nb_V = np.stack([np.asarray(k.V) for k in models])
    nb_A = np.stack([np.asarray(k.A) for k in models])
    chk_nb = level_check(nb_V[esc], nb_A[esc], CE_SIGMA0, 2 * CE_T1, "neighbourhood: level check", quick)
    confirmed = np.zeros(m * m, bool)
    confirmed[esc] = np.asarray(chk_nb["blow_up"], bool)
    confirmed = confirmed.reshape(m, m)
    nb_blow = dec_blow | confirmed
    nb_escape = dec_escape & ~confirmed
    paper_dir = nb_blow & (nb_rule < 0)  # rule: no blow-up; solve: blow-up (the failure that matters)
    other_dir = ~nb_blow & (nb_rule > 0)
    other_escape = other_dir & nb_escape

    fig, axes = plt.subplots(2, 2, figsize=figsize(TEXT_WIDTH, 0.95), layout="constrained")
    ax = axes[0, 0]
    ax.semilogy(ts, lam[:, 1], color="tab:red", label=r"$\lambda_{\max}(\Sigma)$")
    pos = lam[:, 0] > 1e-15  # below: round-off of a nearly rank-one Σ
    if floor_from_t is not None:  # from there on λ_min is the rounding floor, not a measurement: not drawn
        pos &= ts < floor_from_t
    ax.semilogy(ts[pos], lam[pos, 0], color="tab:blue", label=r"$\lambda_{\min}(\Sigma)$")
    ax.axvline(t_b, color="k", ls="--", lw=0.8, label="$t^*$")
    ax.set_xlabel("$t$")
    ax.set_ylabel(r"$\lambda(\Sigma)$")
    ax.set_title(f"the counterexample: blow-up at $t^*$ = {t_b:.2f}")
    if floor_from_t is not None:
        ax.set_title(
            f"the counterexample: blow-up at $t^*$ = {t_b:.2f}\n"
            f"($\\lambda_{{\\min}}$ not drawn from $t \\approx {floor_from_t:.0f}$ on)"
        )
    # below the axes: inside, the legend covered the dashed line at t*
    ax.legend(
        loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3, handlelength=1.5, columnspacing=1.0, frameon=False
    )
    ax = axes[0, 1]
    slope = float(np.polyfit(np.log(gaps), np.log(lam_near[:, 1]), 1)[0])
    c_lo, c_hi = float(scaled.min()), float(scaled.max())
    ax.loglog(gaps, lam_near[:, 1], color="tab:red", lw=1.0, label=r"$\lambda_{\max}(\Sigma)$")
    ax.loglog(gaps, c_hi / gaps, color="k", ls=":", lw=0.8, label=r"$c/(t^* - t)$, $c$ = min, max")
    ax.loglog(gaps, c_lo / gaps, color="k", ls=":", lw=0.8)
    ax.set_xlabel(r"$t^* - t$")
    ax.set_ylabel(r"$\lambda_{\max}(\Sigma)$")
    ax.set_title(
        "finite-time blow-up: log-log slope " + f"{slope:.3f}".replace("-", "−") + ";\n"
        f"$\\lambda_{{\\max}}(t^* - t)$ in [{float(fmt_lower(c_lo, 2)):g}, {float(fmt_upper(c_hi, 3)):g}], repeating\n"
        f"every ×{10**period_decades:.2f} in $t^* - t$ (the major axis\nturns by 180° each time)"
    )
    ax.set_ylim(top=30 * c_hi / gaps.min())  # room for the legend above the curve
    ax.legend(loc="upper right")
    ax = axes[1, 0]
    xy = geometry.disk_coords(grid)
    tb_disk = np.where(disk_blow, disk["t_blowup"], np.nan)
    sc = ax.scatter(xy[:, 0], xy[:, 1], c=tb_disk, s=9 if quick else 5, cmap="viridis", norm=LogNorm())
    calm = ~disk_blow  # no t* to colour: marked apart so that they do not vanish from the disk
    ax.scatter(xy[calm, 0], xy[calm, 1], marker="x", s=28, color="k", lw=1.2, zorder=4,
               label=f"no blow-up by $t = {CE_T1:g}$ ({int(calm.sum())})")  # fmt: skip
    ce_xy = geometry.disk_coords(CE_SIGMA0)
    ax.plot(ce_xy[0], ce_xy[1], marker="*", ms=10, color="w", mec="k", mew=0.6)
    th = np.linspace(0, 2 * np.pi, 200)
    ax.plot(np.cos(th), np.sin(th), color="k", lw=0.6)
    ax.set_aspect("equal")
    ax.set_xlabel(r"$(\Sigma_{0,11} - \Sigma_{0,22})$")
    ax.set_ylabel(r"$2\Sigma_{0,12}$")
    ax.set_title(f"trace-one $\\Sigma_0$ grid: {int(disk_blow.sum())}/{len(grid)} blow up by $t = {CE_T1:g}$")

    cb = fig.colorbar(sc, ax=ax, shrink=0.8)
    cb.set_label("$t^*$")
    ax = axes[1, 1]
    ax.imshow(nb_blow * 2 + nb_escape, origin="lower", extent=(-CE_DELTA, CE_DELTA, -CE_DELTA, CE_DELTA),
              aspect="auto", cmap=ListedColormap([CE_COLORS[k] for k in range(3)]), vmin=-0.5, vmax=2.5,
              interpolation="nearest")  # fmt: skip
    ax.contour(D1, D2, nb_rule, levels=[0.0], colors="k", linewidths=1.2)
    draw_hatched(ax, D1, D2, paper_dir, "_")
    ax.plot(0, 0, marker="*", ms=10, color="w", mec="k", mew=0.6)
    ax.set_xlabel(r"$\delta_1$ ($V = R(\delta_1) V_{ce}$)")
    ax.set_ylabel(r"$\delta_2$ ($A = A_{ce} + \delta_2 I$)")
    other = f"{int(other_dir.sum())} the other way" + (
        ":\nescape without finite-time blow-up" if other_dir.any() and other_escape.sum() == other_dir.sum() else ""
    )
    ax.set_title(
        f"hatched: rule says no blow-up, yet blow-up\n({int(paper_dir.sum())} of {m * m} parameter sets); {other}"
        + (f";\n{int(confirmed.sum())} decade-test 'escapes' blow up (level check)" if confirmed.any() else "")
    )
    legend = [
        Patch(
            color=CE_COLORS[2],
            label=f"finite-time blow-up by $t = {CE_T1:g}$ ({int(nb_blow.sum())})",
        ),
        Patch(color=CE_COLORS[0], label=f"no escape by $t = {CE_T1:g}$ ({int((~nb_blow & ~nb_escape).sum())})"),
        Line2D([], [], color="k", lw=1.2, label=r"$\lambda_{\max}(VA + A^\top V^\top) = 0$ (rule's boundary)"),
        Line2D([], [], marker="*", ls="", ms=10, color="w", mec="k", label="the counterexample"),
    ]
    if nb_escape.any():
        legend.insert(1, Patch(color=CE_COLORS[1], label=f"escape, no finite-time blow-up ({int(nb_escape.sum())})"))
    if calm.any():  # the Σ0 without a blow-up time (no colour on the t* scale)
        legend.append(Line2D([], [], marker="x", ls="", ms=6, mew=1.2, color="k",
                             label=f"$\\Sigma_0$ with no blow-up by $t = {CE_T1:g}$ ({int(calm.sum())}"
                             + "".join(f"; blows up at $t \\approx {t_:.0f}$" for t_ in calm_t if t_ is not None) + ")"))  # fmt: skip
    fig.legend(handles=legend, loc="outside lower center", ncol=2)
    fig.suptitle(
        "Softmax Gaussian dynamics (Castin et al., arXiv:2501.18322): the sign rule fails where it matters.\n"
        f"$VA + A^\\top V^\\top \\prec 0$ (eigenvalues {rule[0]:.2f}, {rule[1]:.2f}) and $A + A^\\top \\prec 0$ ".replace(
            "-", "−"
        )
        + f"({sym[0]:.2f}, {sym[1]:.2f}), yet $\\Sigma$ blows up".replace("-", "−")
    )
    o.savefig(fig, "phase_maps_counterexample")
    return {
        "V": CE_V,
        "A": CE_A,
        "Sigma0": CE_SIGMA0,
        "eigenvalues_VA_plus_AtVt": rule,
        "eigenvalues_A_plus_At": sym,
        "status": Status(int(sol["status"][0])).name,
        "t_blowup": t_b,
        "spec_t_blowup": CE_SPEC_T,
        "event": f"tr Σ = {CE_THRESHOLD:g}, t* extrapolated t_e + λ/λ' (library)",
        "decade_ratio": float(sol["decade_ratio"][0]),
        "inverse_lambda_max_at_last_saved_time": float(1.0 / lam[-1, 1]),
        "lambda_max_loglog_slope_vs_t_star_minus_t": slope,
        "lambda_max_points": f"the same solve (Tsit5, rtol {dc.RTOL:g}, atol {dc.ATOL:g}) saved at {gaps.size} times "
        f"geometric in t* − t over the fit window ({CE_PER_DECADE} per decade, t* the extrapolated t_blowup); drawn "
        "in the top-right panel and used for every number below",
        "slope_fit_window_t_star_minus_t": CE_FIT_WINDOW,
        "lambda_max_times_t_star_minus_t_range": [c_lo, c_hi],
        "major_axis_turn_deg_per_decade_of_t_star_minus_t": turn_per_decade,
        "period_decades_of_t_star_minus_t": period_decades,
        "period_factor_of_t_star_minus_t": float(10**period_decades),
        "lambda_max_times_t_star_minus_t_local_maxima": int(np.sum((scaled[1:-1] > scaled[:-2]) & (scaled[1:-1] > scaled[2:]))),
        "periods_in_fit_window": float(np.log10(CE_FIT_WINDOW[1] / CE_FIT_WINDOW[0]) / period_decades),
        "lambda_max_rel_diff_rtol_1e-13_vs_1e-10": float(np.max(np.abs(lam_tight / lam_near[:, 1] - 1.0))),
        "growth_note": "λ_max(t* − t) is log-periodic: the major axis of Σ turns by 180° once per period, and "
        "λ_max(t* − t) runs through [min, max] each time (the same at rtol 1e-13); the log-log slope is −1 only "
        "on average",
        "lambda_min_at_last_saved_time_over_lambda_max": float(lam[-1, 0] / lam[-1, 1]),
        "lambda_min_rounding_floor_from_t": floor_from_t,
        "lambda_min_rounding_floor_definition": f"first saved time from which λ_min/λ_max < {FLOOR_RATIO:g} up to the "
        "last saved time (float64 round-off of a nearly rank-one Σ; the drawn λ_min there is not a measurement)",
        "sigma0_disk": {"members": len(grid), "blow_up": int(disk_blow.sum()), "status": dc.status_counts(disk["status"]),
                        "t_blowup_range": dc.minmax(disk["t_blowup"][disk_blow]) if disk_blow.any() else None,
                        "no_blow_up_Sigma0": grid[~disk_blow], "no_blow_up_status": [Status(int(x)).name for x in disk["status"][~disk_blow]],
                        "no_blow_up_drawn_as": "black x (no t* to colour)",
                        "no_blow_up_solved_longer": {"t1": CE_T1_LONGER, "status": [Status(int(x)).name for x in calm_long["status"]] if calm_long is not None else [],
                                                     "t_blowup": calm_t},
                        "t1": CE_T1, "note": "the rule λ_max(VA + AᵀVᵀ) < 0 does not depend on Σ0: it says no blow-up for all"},
        "parameter_neighbourhood": {
            "family": "V = R(δ1) V_ce, A = A_ce + δ2 I", "delta_range": [-CE_DELTA, CE_DELTA], "grid": [m, m],
            "blow_up": int(nb_blow.sum()), "escape_without_finite_time_blow_up": int(nb_escape.sum()),
            "no_escape_by_t1": int(m * m - nb_blow.sum() - nb_escape.sum()), "status": dc.status_counts(nb["status"]), "t1": CE_T1,
            "rule_no_blow_up_but_blow_up": int(paper_dir.sum()),
            "rule_blow_up_but_no_blow_up_by_t1": int(other_dir.sum()),
            "rule_blow_up_but_no_blow_up_by_t1_of_which_escape_without_finite_time_blow_up": int(other_escape.sum()),
            "blow_up_by": "decade test of the solve (status blow_up) or, for its 'diverge' members, the multi-level check",
            "blow_up_confirmed_by_level_check": int(confirmed.sum()),
            "level_check": level_check_record(chk_nb, 2 * CE_T1),
            "decade_test_counts": decade_counts,
        },
    }  # fmt: skip


def _disagreement_b(rule_blow_solve_not: int, unsettled: int, rule_safe_solve_blow: int) -> str:
    """Map (b)'s disagreements in words, exact for every member counted: the rule says blow-up and the solve
    'none by t1' or (`unsettled` of them) an escape the level check could not settle; then the reverse."""
    none = rule_blow_solve_not - unsettled
    solve = f"solve 'none by $t_1$' on {none}" + (f", an unsettled escape (○) on {unsettled}" if unsettled else "")
    if not rule_safe_solve_blow:
        return f"all rule 'blow-up' (hatched):\n{solve}"
    return (
        f"rule 'blow-up' on {rule_blow_solve_not} (hatched: {solve}),\n"
        f"rule 'no blow-up', solve 'blow-up' on {rule_safe_solve_blow}"
    )


def main(out: Path, quick: bool = False) -> dict:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    o = Output(out, NAME)
    n = pm.GRID_QUICK if quick else pm.GRID_FULL

    # ---------------------------------------------------------------- (a) V = vI
    V_, A_ = pm.grid(n, pm.V_RANGE, pm.A_RANGE)
    res_a = map_sweep(pm.batch_scalar_v(V_, A_), "phase map (a)", quick)
    codes_a = pm.to_image(res_a["outcome"], n)
    t_star, _ = pm.closed_form_map(V_, A_)
    solved_blow = codes_a == Outcome.blow_up
    cf_blow = t_star <= pm.T1_A
    near_horizon = np.abs(t_star / pm.T1_A - 1.0) < 1e-6
    disagree_a = (solved_blow != cf_blow) & ~near_horizon
    tb = pm.to_image(res_a["t_blowup"], n)
    rel_err = np.abs(tb[solved_blow & cf_blow] / t_star[solved_blow & cf_blow] - 1.0)
    fam = np.moveaxis(np.asarray(pm.family_A(jnp.asarray(A_))), (0, 1), (-2, -1))
    verdict = closed_form_verdict(pm.SIGMA0, fam, V_, pm.T1_A)
    settled = codes_a == Outcome.bounded
    late = settled & (verdict == Verdict.blow_up_after_t1)
    slow = settled & (verdict == Verdict.contracts)
    codes_a = np.where(late, LATE_BLOW_UP, np.where(slow, SLOW_CONTRACTION, codes_a))
    claimed = np.vectorize(lambda c: int(VERDICT_OF.get(c, -1)))(codes_a)
    long_disagree = int(np.sum(claimed != verdict))
    cross = {
        LABELS_A.get(int(c), str(int(c))): {Verdict(int(k)).name: int(np.sum((codes_a == c) & (verdict == k)))
                                            for k in np.unique(verdict[codes_a == c])}
        for c in np.unique(codes_a)
    }  # fmt: skip

    # ---------------------------------------------------------------- (b) V = R(φ)
    P_, B_ = pm.grid(n, pm.PHI_RANGE, pm.A_RANGE)
    batch_b = pm.batch_rotation(P_, B_)
    res_b = map_sweep(batch_b, "phase map (b)", quick)
    rule_blow = naive_rule_map(P_, B_) > 0
    # the decade test's escapes re-checked at several size levels (log-periodic blow-ups fool the decade test)
    codes_b_decade = pm.to_image(res_b["outcome"], n)
    esc_b = np.flatnonzero(res_b["outcome"] == Outcome.diverge)
    A_esc = np.moveaxis(np.asarray(pm.family_A(jnp.asarray(batch_b["a"][esc_b]))), (0, 1), (-2, -1))
    chk_b = level_check(batch_b["V"][esc_b], A_esc, pm.SIGMA0, 2 * pm.T1_B, "phase map (b): level check", quick)
    outcome_b = np.array(res_b["outcome"])
    outcome_b[esc_b[np.asarray(chk_b["blow_up"], bool)]] = Outcome.blow_up
    codes_b = pm.to_image(outcome_b, n)
    n_confirmed_b = int(np.sum(chk_b["blow_up"]))
    solved_blow_b = codes_b == Outcome.blow_up
    # Decided: blow-up, or no blow-up (escape without finite-time blow-up, settles, contracts).
    # Members still growing at t1 or stopped by the step budget are not counted either way.
    no_blow_b = np.isin(codes_b, NO_BLOW_UP)
    decided = solved_blow_b | no_blow_b
    rule_wrong_blow = rule_blow & no_blow_b
    rule_wrong_safe = ~rule_blow & solved_blow_b
    disagree_b = rule_wrong_blow | rule_wrong_safe
    # edges: φ = 0 (V = I) and φ = π (V = −I), where the rule is exact (spec §3)
    edge_cols = [0, n - 1]
    edge_disagree = int(np.sum(disagree_b[:, edge_cols]))
    dec_blow_b, dec_no_b = codes_b_decade == Outcome.blow_up, np.isin(codes_b_decade, NO_BLOW_UP)
    decade_counts_b = {
        "outcome_counts": counts_codes(codes_b_decade, LABELS),
        "decided_members": int((dec_blow_b | dec_no_b).sum()),
        "rule_contradicted": int((rule_blow & dec_no_b).sum() + (~rule_blow & dec_blow_b).sum()),
        "rule_predicts_blow_up_but_no_blow_up": int((rule_blow & dec_no_b).sum()),
        "rule_predicts_no_blow_up_but_blow_up": int((~rule_blow & dec_blow_b).sum()),
    }

    # ---------------------------------------------------------------- figure (a)
    fig, ax = plt.subplots(figsize=figsize(TEXT_WIDTH, 0.9), layout="constrained")
    handles = draw_outcome_map(
        ax, codes_a, (*pm.V_RANGE, *pm.A_RANGE), {k: _tex(v) for k, v in LABELS_A.items()}, colors=COLORS_A, xlabel=r"$v$  ($V = vI$)", ylabel=YLABEL,
        title=f"(a) softmax, $V = vI$, $\\Sigma_0 = I/2$: solve to $t_1$ = {pm.T1_A:g} against the closed form "
        f"(Castin et al., arXiv:2501.18322)\nblow-up by $t_1$: solve = closed form for {n * n - int(disagree_a.sum())} of {n * n}. After "
        f"$t_1$ (closed form): {int((verdict == Verdict.blow_up_after_t1).sum())} blow up later,\n{int(late.sum())} of "
        f"them look settled at $t_1$ (✕), and {int(slow.sum())} contract too slowly to be seen by $t_1$ (+); see the inset",
    )  # fmt: skip
    fine_v, fine_a = pm.grid(401, pm.V_RANGE, pm.A_RANGE)
    t_fine, lam_fine = pm.closed_form_map(fine_v, fine_a)
    ax.contour(fine_v, fine_a, lam_fine, levels=[0.0], colors="k", linewidths=1.4)
    cs = ax.contour(fine_v, fine_a, np.where(np.isfinite(t_fine), t_fine, 1e9), levels=list(T_LEVELS), colors="w",
                    linewidths=0.8)  # fmt: skip
    labels = ax.clabel(cs, fmt=lambda x: f"{x:g}", fontsize=8, inline_spacing=1, manual=_label_spots(cs))
    for text in labels:
        text.set_path_effects([patheffects.withStroke(linewidth=2.0, foreground="k")])
    ax.scatter(V_[late], A_[late], marker="x", color="w", s=22, lw=1.0, zorder=5)
    ax.scatter(V_[slow], A_[slow], marker="+", color="w", s=28, lw=1.0, zorder=5)
    _inset(ax, codes_a, V_, A_, late, slow)
    handles.append(Line2D([], [], color="k", lw=1.4, label=r"closed form: $\lambda_{\max}(v(A + A^\top)) = 0$"))
    handles.append(Line2D([], [], color="w", lw=0.8, path_effects=[patheffects.withStroke(linewidth=2.0, foreground="k")],
                          label="closed-form $t^*$ contours: " + ", ".join(f"{x:g}" for x in T_LEVELS)))  # fmt: skip
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=1,
              title=f"solved outcome at $t_1$ (members of {n * n})")  # fmt: skip
    o.savefig(fig, "phase_maps_a")

    # ---------------------------------------------------------------- figure (b)
    fig, ax = plt.subplots(figsize=figsize(TEXT_WIDTH, 0.95), layout="constrained")
    n_not_decided = n * n - int(decided.sum())
    und = pm.to_image(res_b["status"], n)[codes_b == Outcome.undetermined]
    und_statuses = {Status(int(k)).name: int(v) for k, v in zip(*np.unique(und, return_counts=True))}
    notes_b = dict(NOT_DECIDED_NOTE)
    if und_statuses:
        words = {"max_steps_reached": "hit the step limit"}
        if len(und_statuses) == 1:  # one status: its count is the entry's count, said once
            (status,) = und_statuses
            notes_b[Outcome.undetermined] = "not decided; all " + words.get(status, status.replace("_", " "))
        else:
            notes_b[Outcome.undetermined] = "not decided; " + ", ".join(
                f"{v} {words.get(k, k.replace('_', ' '))}" for k, v in und_statuses.items()
            )
    # decade-test escapes the level check could not settle, among the members counted as contradicting the rule
    n_unsettled_b = int(np.sum(disagree_b & (codes_b == Outcome.diverge)))
    n_unsettled_all_b = int(np.sum(decided & (codes_b == Outcome.diverge)))  # whether or not the rule disagrees
    notes_b[Outcome.diverge] = "level check inconclusive"
    labels_b = {**LABELS, Outcome.diverge: "escape (decade test), blow-up not settled"}  # see the level check
    handles = draw_outcome_map(
        ax, codes_b, (*pm.PHI_RANGE, *pm.A_RANGE), {k: _tex(v) for k, v in labels_b.items()},
        xlabel=r"$\varphi$  ($V = R(\varphi)$, rotation; radians)", ylabel=YLABEL, notes={k: _tex(v) for k, v in notes_b.items()},
        title=f"(b) softmax, $V = R(\\varphi)$, $\\Sigma_0 = I/2$, $t_1$ = {pm.T1_B:g}: the sign rule on "
        f"$VA + A^\\top V^\\top$ and the solve\ndisagree on {int(disagree_b.sum())} of {int(decided.sum())} decided members, "
        + _disagreement_b(int(rule_wrong_blow.sum()), n_unsettled_b, int(rule_wrong_safe.sum())),
    )  # fmt: skip
    fine_p, fine_b = pm.grid(401, pm.PHI_RANGE, pm.A_RANGE)
    rule_fine = naive_rule_map(fine_p, fine_b)
    ax.contour(fine_p, fine_b, rule_fine, levels=[0.0], colors="k", linewidths=1.4)
    handles.append(Line2D([], [], color="k", lw=1.4, label=r"rule's boundary $\lambda_{\max}(VA + A^\top V^\top) = 0$ "
                          "(rule: no blow-up at lower left)"))  # fmt: skip
    hatch_label = "rule: blow-up; solve: none by t1" + (" or an unsettled escape (○)" if n_unsettled_b else "")
    handles.append(draw_hatched(ax, P_, B_, rule_wrong_blow, _tex(hatch_label)))
    # rare outcomes (a few cells each) are found at print size by a marker on each cell, outlined in black
    for rare, marker in RARE_MARKERS_B.items():
        cells = codes_b == rare
        if not cells.any():
            continue
        ax.scatter(P_[cells], B_[cells], marker=marker, s=14, c=OUTCOME_COLORS[rare], edgecolors="k", linewidths=0.6,
                   zorder=4)  # fmt: skip
        k = next(i for i, h in enumerate(handles) if h.get_label().startswith(_tex(labels_b[rare]) + ":"))
        handles[k] = Line2D([], [], ls="", marker=marker, ms=6, mfc=OUTCOME_COLORS[rare], mec="k", mew=0.6,
                            label=handles[k].get_label())  # fmt: skip
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=1,
              title=f"solved outcome (members of {n * n})")  # fmt: skip
    o.savefig(fig, "phase_maps_b")

    ce = counterexample(o, quick)

    counts_a, counts_b = counts_codes(codes_a, LABELS_A), counts_codes(codes_b, LABELS)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    o.write_json(
        {
            "setup": {
                "kind": "softmax",
                "beta": 1.0,
                "Sigma0": pm.SIGMA0,
                "mean0": [0.0, 0.0],
                "A": "[[a, 1], [0, -1]]",
                "grid": [n, n],
                "v_range": pm.V_RANGE,
                "phi_range": pm.PHI_RANGE,
                "a_range": pm.A_RANGE,
                "t1_a": pm.T1_A,
                "t1_b": pm.T1_B,
                "size_threshold_trace": pm.THRESHOLD,
                "rtol": pm.RTOL,
                "atol": pm.ATOL,
                "max_steps": pm.MAX_STEPS,
                "max_steps_retry": pm.MAX_STEPS_RETRY,
                "rate_tol": pm.RATE_TOL,
                "rank_rtol": pm.RANK_RTOL,
                "solver": "diffrax Tsit5 + PID (library default), float64",
            },
            "map_a": {
                "outcome_counts": counts_a,
                "disagreements_with_closed_form": int(disagree_a.sum()),
                "comparison": "blow-up by t1 (solved) against t* <= t1 (closed form)",
                "members_within_1e-6_of_horizon_excluded": int(near_horizon.sum()),
                "blow_up_members": int(solved_blow.sum()),
                "closed_form_blow_up_members": int(cf_blow.sum()),
                "closed_form_verdicts": {Verdict(int(k)).name: int(np.sum(verdict == k)) for k in np.unique(verdict)},
                "solved_label_vs_closed_form_verdict": cross,
                "late_blow_ups_settled_at_t1": int(late.sum()),
                "slow_contractions_settled_at_t1": int(slow.sum()),
                "labels_contradicting_the_closed_form_long_time_verdict": long_disagree,
                "t_star_contour_levels": T_LEVELS,
                "t_blowup_max_rel_error_vs_closed_form": float(rel_err.max()) if rel_err.size else 0.0,
                "steps_max": int(res_a["steps"].max()),
                "retried_with_larger_step_budget": int(res_a["retried"].sum()),
            },
            "map_b": {
                "outcome_counts": counts_b,
                "decided_members": int(decided.sum()),
                "rule_contradicted": int(disagree_b.sum()),
                "rule_predicts_blow_up_but_no_blow_up": int(rule_wrong_blow.sum()),
                "rule_predicts_no_blow_up_but_blow_up": int(rule_wrong_safe.sum()),
                "rule_contradicted_at_phi_0_or_pi": edge_disagree,
                "still_growing_at_t1_not_counted": int(np.sum(codes_b == Outcome.grows)),
                "step_budget_on_stationary_rank_one_not_counted": int(np.sum(codes_b == Outcome.stalled)),
                "undetermined_not_counted": int(np.sum(codes_b == Outcome.undetermined)),
                "undetermined_statuses": und_statuses,
                "not_decided_total": n_not_decided,
                "steps_max": int(res_b["steps"].max()),
                "retried_with_larger_step_budget": int(res_b["retried"].sum()),
                "blow_up_by": "decade test of the solve (status blow_up) or, for its 'diverge' members, the "
                "multi-level check",
                "blow_up_confirmed_by_level_check": n_confirmed_b,
                "rule_contradicted_of_which_unsettled_escapes": n_unsettled_b,
                "rule_contradicted_without_unsettled_escapes": int(disagree_b.sum()) - n_unsettled_b,
                "decided_members_without_unsettled_escapes": int(decided.sum()) - n_unsettled_all_b,
                "unsettled_escapes_note": "decade-test escapes (status diverge) that the level check could not "
                "settle (a level not reached); counted as 'no blow-up by t1', so inside rule_contradicted",
                "level_check": level_check_record(chk_b, 2 * pm.T1_B),
                "decade_test_counts": decade_counts_b,
            },
            "counterexample": ce,
            "timing": {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)},
        },
        seeds={},
    )
    return {
        "key": f"(a) {int(disagree_a.sum())} of {n * n} disagree with the closed form on blow-up by t1; "
        f"{int(late.sum())} late blow-ups and {int(slow.sum())} slow contractions settled at t1; "
        f"(b) rule contradicted on {int(disagree_b.sum())} of {int(decided.sum())} decided members, "
        f"{int(disagree_b.sum()) - n_unsettled_b} of {int(decided.sum()) - n_unsettled_all_b} without the "
        f"{n_unsettled_all_b} escapes the level check could not settle, "
        f"{int(rule_wrong_safe.sum())} in the direction 'no blow-up predicted'; counterexample blows up at "
        f"{ce['t_blowup']:.2f}",
    }


if __name__ == "__main__":
    cli(main, NAME, __doc__)
