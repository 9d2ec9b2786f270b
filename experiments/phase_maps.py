"""Phase maps of softmax covariance dynamics from vmap sweeps (spec dynamics.md §7b item 10).

Softmax attention, `d = 2`, `β = 1`, mean 0, `Σ0 = I/2`, interaction `A = [[a, 1], [0, −1]]`
with `a ∈ [−3, 3]`; every grid point is one member of ONE vmapped diffrax solve
(:func:`hassejax.dynamics.sweeps.sweep` over :func:`hassejax.dynamics.solve_gaussian`,
``throw=False``, each member with its own status).

The family, the member solve and the sweep are :mod:`hassejax.dynamics.phase_map`; the drawing
is :func:`hassejax.plot.draw_outcome_map`. This script composes them and draws.

(a) `V = vI`, `v ∈ [−2, 2]`: the solved outcome against the closed form (spec §3): blow-up
    iff `λ* = λ_max(v Σ0^{1/2}(A + Aᵀ)Σ0^{1/2}) > 0`, at `t* = 1/λ*`. The boundary
    `λ_max(v(A + Aᵀ)) = 0` and the `t*` contours are drawn from the closed form; a member
    counts as agreeing when "blow-up by `t1`" (solved) equals "`t* ≤ t1`" (closed form).
(b) `V = R(φ)`, a rotation by `φ ∈ [0, π]`, no closed form: the naive spectral rule
    "a positive eigenvalue of `VA + AᵀVᵀ` ⇒ blow-up, `VA + AᵀVᵀ ⪯ 0` ⇒ no blow-up" is
    marked (hatched) wherever the solved outcome contradicts it. At `φ = 0` (`V = I`) and
    `φ = π` (`V = −I`) the rule is exact (spec §3); in between it is not.

Outcome of a member (:class:`hassejax.dynamics.diagnostics.Outcome`, from
:func:`hassejax.dynamics.diagnostics.classify` with the rate test, inside the sweep): `blow_up` (size event `tr Σ = 1e6 · tr Σ0`,
decade test of the library says finite-time), `escape without finite-time blow-up` (size
event, decade test says not finite-time), else from the final state at `t1` and the
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

jax.config.update("jax_enable_x64", True)

import time
from pathlib import Path

import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from _common import Output, cli
from matplotlib import patheffects

from hassejax.dynamics import Status
from hassejax.dynamics import phase_map as pm
from hassejax.dynamics.diagnostics import Outcome, naive_rule
from hassejax.plot import draw_hatched, draw_outcome_map

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
YLABEL = "a  (A = [[a, 1], [0, −1]])"
NO_BLOW_UP = [Outcome.diverge, Outcome.low_rank, Outcome.bounded, Outcome.contracts]
"""Outcomes decided as "no blow-up" for the rule check of map (b)."""


def naive_rule_map(phi: np.ndarray, a: np.ndarray) -> np.ndarray:
    """`λ_max(VA + AᵀVᵀ)` of map (b) on a grid (`V = R(φ)`, `A = A(a)`)."""
    V = np.moveaxis(np.asarray(pm.rotation(jnp.asarray(phi))), (0, 1), (-2, -1))
    A = np.moveaxis(np.asarray(pm.family_A(jnp.asarray(a))), (0, 1), (-2, -1))
    return np.asarray(naive_rule(V, A))


def counts(codes: np.ndarray) -> dict[str, int]:
    """Members per outcome label (outcomes present only, in :data:`LABELS` order)."""
    return {label: int(np.sum(codes == o)) for o, label in LABELS.items() if np.any(codes == o)}


def main(out: Path, quick: bool = False) -> dict:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    o = Output(out, NAME)
    n = pm.GRID_QUICK if quick else pm.GRID_FULL

    # ---------------------------------------------------------------- (a) V = vI
    V_, A_ = pm.grid(n, pm.V_RANGE, pm.A_RANGE)
    res_a = pm.sweep_with_retry(pm.batch_scalar_v(V_, A_), "phase map (a)")
    codes_a = pm.to_image(res_a["outcome"], n)
    t_star, _ = pm.closed_form_map(V_, A_)
    solved_blow = codes_a == Outcome.blow_up
    cf_blow = t_star <= pm.T1_A
    near_horizon = np.abs(t_star / pm.T1_A - 1.0) < 1e-6
    disagree_a = (solved_blow != cf_blow) & ~near_horizon
    tb = pm.to_image(res_a["t_blowup"], n)
    rel_err = np.abs(tb[solved_blow & cf_blow] / t_star[solved_blow & cf_blow] - 1.0)

    # ---------------------------------------------------------------- (b) V = R(φ)
    P_, B_ = pm.grid(n, pm.PHI_RANGE, pm.A_RANGE)
    res_b = pm.sweep_with_retry(pm.batch_rotation(P_, B_), "phase map (b)")
    codes_b = pm.to_image(res_b["outcome"], n)
    rule_blow = naive_rule_map(P_, B_) > 0
    solved_blow_b = codes_b == Outcome.blow_up
    # Decided: blow-up, or no blow-up (escape without finite-time blow-up, settles, contracts).
    # Members still growing at t1 or stopped by the step budget are not counted either way.
    no_blow_b = np.isin(codes_b, NO_BLOW_UP)
    decided = solved_blow_b | no_blow_b
    disagree_b = (rule_blow & no_blow_b) | (~rule_blow & solved_blow_b)
    # edges: φ = 0 (V = I) and φ = π (V = −I), where the rule is exact (spec §3)
    edge_cols = [0, n - 1]
    edge_disagree = int(np.sum(disagree_b[:, edge_cols]))

    # ---------------------------------------------------------------- figure
    fig, axes = plt.subplots(1, 2, figsize=(16.5, 9.0), layout="constrained")
    ax = axes[0]
    handles = draw_outcome_map(
        ax,
        codes_a,
        (*pm.V_RANGE, *pm.A_RANGE),
        LABELS,
        xlabel="v  (V = v I)",
        ylabel=YLABEL,
        title=f"(a) V = vI: solved outcome (t1 = {pm.T1_A:g}) against the closed form\n"
        f"black: closed-form boundary λ_max(v(A + Aᵀ)) = 0; white: closed-form t* contours; "
        f"disagreements: {int(disagree_a.sum())} of {n * n}",
    )
    fine_v, fine_a = pm.grid(401, pm.V_RANGE, pm.A_RANGE)
    t_fine, lam_fine = pm.closed_form_map(fine_v, fine_a)
    ax.contour(fine_v, fine_a, lam_fine, levels=[0.0], colors="k", linewidths=1.6)
    levels = [0.25, 0.5, 1.0, 2.0, 5.0, pm.T1_A]
    cs = ax.contour(
        fine_v, fine_a, np.where(np.isfinite(t_fine), t_fine, 1e9), levels=levels, colors="w", linewidths=0.9
    )
    labels = ax.clabel(cs, fmt=lambda x: f"t* = {x:g}", fontsize=7, inline_spacing=2)
    for text in labels:  # white on red, and readable on the light orange near t* = t1 too
        text.set_path_effects([patheffects.withStroke(linewidth=2.2, foreground="k")])
    if disagree_a.any():
        ax.scatter(V_[disagree_a], A_[disagree_a], marker="x", color="k", s=14, label="solve ≠ closed form")
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=2, fontsize=8,
              title=f"solved outcome: members of {n * n}", title_fontsize=8)  # fmt: skip

    ax = axes[1]
    n_not_decided = n * n - int(decided.sum())
    und = pm.to_image(res_b["status"], n)[codes_b == Outcome.undetermined]
    und_statuses = {Status(int(k)).name: int(v) for k, v in zip(*np.unique(und, return_counts=True))}
    notes_b = dict(NOT_DECIDED_NOTE)
    if und_statuses:
        notes_b[Outcome.undetermined] = "not decided; solver status " + ", ".join(
            f"{k} {v}" for k, v in und_statuses.items()
        )
    handles = draw_outcome_map(
        ax,
        codes_b,
        (*pm.PHI_RANGE, *pm.A_RANGE),
        LABELS,
        xlabel="φ  (V = R(φ), rotation by φ; radians)",
        ylabel=YLABEL,
        title=f"(b) V = R(φ): solved outcome (t1 = {pm.T1_B:g}). Naive rule (sign of λ_max(VA + AᵀVᵀ)): no blow-up only\n"
        "inside the black curve λ_max = 0 (lower left), blow-up everywhere else, all of a > 0 included.\n"
        f"Hatched: rule ≠ solve, {int(disagree_b.sum())} of {int(decided.sum())} decided members; "
        f"{n_not_decided} not decided (light orange, grey, purple)",
        notes=notes_b,
    )
    fine_p, fine_b = pm.grid(401, pm.PHI_RANGE, pm.A_RANGE)
    rule_fine = naive_rule_map(fine_p, fine_b)
    ax.contour(fine_p, fine_b, rule_fine, levels=[0.0], colors="k", linewidths=1.6)
    handles.append(draw_hatched(ax, P_, B_, disagree_b, "rule ≠ solved outcome"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=2, fontsize=7.5,
              title=f"solved outcome: members of {n * n}", title_fontsize=8)  # fmt: skip
    fig.suptitle(
        f"Softmax Gaussian dynamics, d = 2, Σ0 = I/2: {n}×{n} members per map, one vmapped diffrax solve each. "
        "V = vI follows the closed form; for rotations V = R(φ) the sign rule on VA + AᵀVᵀ fails",
        fontsize=11,
    )
    o.savefig(fig, "phase_maps")

    counts_a, counts_b = counts(codes_a), counts(codes_b)
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
                "members_within_1e-6_of_horizon_excluded": int(near_horizon.sum()),
                "blow_up_members": int(solved_blow.sum()),
                "closed_form_blow_up_members": int(cf_blow.sum()),
                "t_blowup_max_rel_error_vs_closed_form": float(rel_err.max()) if rel_err.size else 0.0,
                "steps_max": int(res_a["steps"].max()),
                "retried_with_larger_step_budget": int(res_a["retried"].sum()),
            },
            "map_b": {
                "outcome_counts": counts_b,
                "decided_members": int(decided.sum()),
                "rule_contradicted": int(disagree_b.sum()),
                "rule_predicts_blow_up_but_no_blow_up": int(np.sum(rule_blow & no_blow_b)),
                "rule_predicts_no_blow_up_but_blow_up": int(np.sum(~rule_blow & solved_blow_b)),
                "rule_contradicted_at_phi_0_or_pi": edge_disagree,
                "still_growing_at_t1_not_counted": int(np.sum(codes_b == Outcome.grows)),
                "step_budget_on_stationary_rank_one_not_counted": int(np.sum(codes_b == Outcome.stalled)),
                "undetermined_not_counted": int(np.sum(codes_b == Outcome.undetermined)),
                "undetermined_statuses": und_statuses,
                "not_decided_total": n_not_decided,
                "steps_max": int(res_b["steps"].max()),
                "retried_with_larger_step_budget": int(res_b["retried"].sum()),
            },
            "timing": {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)},
        },
        seeds={},
    )
    return {
        "key": f"(a) {int(disagree_a.sum())} of {n * n} members disagree with the closed form; "
        f"(b) naive rule contradicted on {int(disagree_b.sum())} of {int(decided.sum())} decided members "
        f"({edge_disagree} at φ = 0, π)",
    }


if __name__ == "__main__":
    cli(main, NAME, __doc__)
