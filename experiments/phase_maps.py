"""Phase maps of softmax covariance dynamics from vmap sweeps (spec dynamics.md §7b item 10).

Softmax attention, `d = 2`, `β = 1`, mean 0, `Σ0 = I/2`, interaction `A = [[a, 1], [0, −1]]`
with `a ∈ [−3, 3]`; every grid point is one member of ONE vmapped diffrax solve
(:func:`hassejax.dynamics.sweeps.sweep` over :func:`hassejax.dynamics.solve_gaussian`,
``throw=False``, each member with its own status).

(a) `V = vI`, `v ∈ [−2, 2]`: the solved outcome against the closed form (spec §3): blow-up
    iff `λ* = λ_max(v Σ0^{1/2}(A + Aᵀ)Σ0^{1/2}) > 0`, at `t* = 1/λ*`. The boundary
    `λ_max(v(A + Aᵀ)) = 0` and the `t*` contours are drawn from the closed form; a member
    counts as agreeing when "blow-up by `t1`" (solved) equals "`t* ≤ t1`" (closed form).
(b) `V = R(φ)`, a rotation by `φ ∈ [0, π]`, no closed form: the naive spectral rule
    "a positive eigenvalue of `VA + AᵀVᵀ` ⇒ blow-up, `VA + AᵀVᵀ ⪯ 0` ⇒ no blow-up" is
    marked (hatched) wherever the solved outcome contradicts it. At `φ = 0` (`V = I`) and
    `φ = π` (`V = −I`) the rule is exact (spec §3); in between it is not.

Outcome of a member (:func:`outcome_codes`): `blow_up` (size event `tr Σ = 1e6 · tr Σ0`,
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

import time  # noqa: E402
from pathlib import Path  # noqa: E402

import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from _common import Output, cli  # noqa: E402
from matplotlib import patheffects  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from hassejax.dynamics import AttentionParams, Status, blowup_time_closed_form, moment_derivatives, solve_gaussian  # noqa: E402
from hassejax.dynamics.sweeps import sweep  # noqa: E402

NAME = "phase_maps"
SIGMA0 = 0.5 * np.eye(2)
V_RANGE = (-2.0, 2.0)
A_RANGE = (-3.0, 3.0)
PHI_RANGE = (0.0, np.pi)
T1_A = 20.0
T1_B = 30.0
THRESHOLD = 1e6 * float(np.trace(SIGMA0))  # size event on tr Σ (the decade test needs >= 1e3 · tr Σ0)
RTOL, ATOL = 1e-8, 1e-10
MAX_STEPS = 800
MAX_STEPS_RETRY = 2400
# Under vmap a chunk runs until its slowest member stops, and slow (stiff) members of map (b)
# sit in every column: every member first gets MAX_STEPS, and only those that ran out are
# solved again with MAX_STEPS_RETRY (about 7% of map (b); none of map (a)).
RATE_TOL = 1e-3
RANK_RTOL = 1e-6
CHUNK = 2048
GRID_FULL = 201  # 201 × 201 = 40401 members per map (v = 0 and a = 0 on the grid)
GRID_QUICK = 41

OUTCOMES = (
    "blow-up by t1 (finite time)",
    "escape, no finite-time blow-up",
    "settles on rank one",
    "settles, full rank",
    "contracts (Σ → 0)",
    "grows, no blow-up by t1",
    "undetermined (solver stopped)",
    "step budget ran out on a stationary rank-one Σ (stiff)",
)
"""Outcome names indexed by the codes of :func:`outcome_codes`."""
NOT_DECIDED_NOTE = {
    5: "not decided: still growing at t1",
    6: "not decided: step budget ran out (or the solve failed) off a stationary rank-one Σ",
    7: "not decided",
}
"""Legend notes of the outcomes that the rule check of map (b) does not count."""
BLOW_UP, ESCAPE, SETTLES_RANK_ONE, SETTLES_FULL, CONTRACTS, GROWS, UNDETERMINED, STALLED_RANK_ONE = range(len(OUTCOMES))
COLORS = ("#d62728", "#ff9896", "#1f77b4", "#9edae5", "#2ca02c", "#ffbb78", "#7f7f7f", "#8c6bb1")


def family_A(a):
    """`A = [[a, 1], [0, −1]]` (traceable; `a` a scalar)."""
    a = jnp.asarray(a)
    one, zero = jnp.ones_like(a), jnp.zeros_like(a)
    return jnp.stack([jnp.stack([a, one]), jnp.stack([zero, -one])])


def rotation(phi):
    """`R(φ) = [[cos φ, −sin φ], [sin φ, cos φ]]` (traceable)."""
    c, s = jnp.cos(phi), jnp.sin(phi)
    return jnp.stack([jnp.stack([c, -s]), jnp.stack([s, c])])


def grid(n: int, x_range: tuple[float, float], a_range: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """`(X, A)` of an `n × n` grid, `X` varying along axis 1 (image columns), `a` along axis 0 (rows)."""
    x = np.linspace(*x_range, n)
    a = np.linspace(*a_range, n)
    return np.meshgrid(x, a, indexing="xy")


def naive_rule(V: np.ndarray, A: np.ndarray) -> np.ndarray:
    """`λ_max(VA + AᵀVᵀ)` per member (`(..., 2, 2)` inputs): `> 0` ⇒ the naive rule predicts blow-up."""
    M = V @ A
    return np.linalg.eigvalsh(M + np.swapaxes(M, -1, -2))[..., -1]


def outcome_codes(status, lam_max, rate, rank_rel, rate_tol: float = RATE_TOL) -> np.ndarray:
    """Outcome code per member (see :data:`OUTCOMES`) from the solve's status and its final state.

    **Arguments:** `status` (int codes of :class:`hassejax.dynamics.Status`), `lam_max` the
    largest eigenvalue of the final `Σ`, `rate` its time derivative there, `rank_rel` the
    relative rank (eigenvalues `> 1e-6 λ_max`) of the final `Σ`; `rate_tol` the threshold on
    the relative rate `rate / lam_max`.
    """
    status = np.asarray(status)
    lam = np.asarray(lam_max, float)
    rel = np.asarray(rate, float) / np.where(lam > 0, lam, 1.0)
    rank_rel = np.asarray(rank_rel)
    stopped = np.isin(status, [Status.completed, Status.converged])
    out = np.full(status.shape, UNDETERMINED, dtype=np.int64)
    out[status == Status.blow_up] = BLOW_UP
    out[status == Status.diverge] = ESCAPE
    settles = stopped & (np.abs(rel) <= rate_tol)
    out[settles & (rank_rel == 1)] = SETTLES_RANK_ONE
    out[settles & (rank_rel != 1)] = SETTLES_FULL
    out[stopped & (rel < -rate_tol)] = CONTRACTS
    out[stopped & (rel > rate_tol)] = GROWS
    # A solve that ran out of steps is not classified, except to say that its last state is a
    # stationary rank-one Σ (the explicit solver is stiff there: relaxation rate ∝ λ_max).
    budget = status == Status.max_steps_reached
    out[budget & (np.abs(rel) <= rate_tol) & (rank_rel == 1)] = STALLED_RANK_ONE
    return out


def solve_member(V, A, t1, *, rtol: float = RTOL, atol: float = ATOL, threshold: float = THRESHOLD, max_steps: int = MAX_STEPS):
    """One member: the Gaussian softmax solve and what the outcome needs (traceable, vmappable)."""
    params = AttentionParams(V=V, A=A)
    mean0 = jnp.zeros(2)
    sol = solve_gaussian(
        "softmax", params, mean0, jnp.asarray(SIGMA0), t1=t1, rtol=rtol, atol=atol, max_steps=max_steps, size_threshold=threshold
    )
    _, dcov = moment_derivatives("softmax", sol.t_final, sol.mean_final, sol.cov_final, params)
    w, q = jnp.linalg.eigh(sol.cov_final)
    u = q[:, -1]
    return {
        "status": sol.status,
        "t_blowup": sol.t_blowup,
        "t_final": sol.t_final,
        "decade_ratio": sol.decade_ratio,
        "lam_max": w[-1],
        "rate": u @ dcov @ u,
        "rank_rel": jnp.sum(w > RANK_RTOL * w[-1]),
        "steps": sol.stats.num_steps,
    }


def member(p):
    """One member of either map: `p = {"V": (2, 2), "a": (), "t1": ()}`, `A = [[a, 1], [0, −1]]`.

    Both maps (and :mod:`event_time_accuracy`) use this one function object, so the vmapped
    program compiles once per process.
    """
    return solve_member(p["V"], family_A(p["a"]), p["t1"])


def member_retry(p):
    """:func:`member` with the larger step budget `MAX_STEPS_RETRY`."""
    return solve_member(p["V"], family_A(p["a"]), p["t1"], max_steps=MAX_STEPS_RETRY)


def sweep_with_retry(batch: dict, desc: str) -> dict:
    """:func:`run_sweep` with :func:`member`, then :func:`member_retry` on the members that ran out of steps."""
    out = run_sweep(member, batch, desc)
    again = np.nonzero(out["status"] == Status.max_steps_reached)[0]
    out["retried"] = np.zeros(out["status"].shape, bool)
    if again.size:
        redo = run_sweep(member_retry, {k: v[again] for k, v in batch.items()}, desc + " (retry)")
        for k, v in redo.items():
            out[k][again] = v
        out["retried"][again] = True
    return out


def batch_scalar_v(v: np.ndarray, a: np.ndarray, t1: float = T1_A) -> dict:
    """Members of map (a): `V = vI` (the grid flattened by :func:`column_major`)."""
    v, a = column_major(v), column_major(a)
    return {"V": v[:, None, None] * np.eye(2), "a": a, "t1": np.full(v.shape, t1)}


def batch_rotation(phi: np.ndarray, a: np.ndarray, t1: float = T1_B) -> dict:
    """Members of map (b): `V = R(φ)` (the grid flattened by :func:`column_major`)."""
    phi, a = column_major(phi), column_major(a)
    V = np.moveaxis(np.asarray(rotation(jnp.asarray(phi))), (0, 1), (-2, -1))
    return {"V": V, "a": a, "t1": np.full(phi.shape, t1)}


def column_major(x: np.ndarray) -> np.ndarray:
    """Flatten an image column by column (x-major), the order in which members are swept.

    Under ``vmap`` a chunk runs until its slowest member stops; sweeping column by column keeps
    the slow (stiff) `φ` columns of map (b) together in a few chunks.
    """
    return np.asarray(x).T.ravel()


def to_image(x: np.ndarray, n: int) -> np.ndarray:
    """Inverse of :func:`column_major` for an `n × n` image."""
    return np.asarray(x).reshape(n, n).T


def run_sweep(member_fn, batch: dict, desc: str) -> dict:
    """The sweep as NumPy arrays (module-level member functions: one compile per process)."""
    out = sweep(member_fn, {k: jnp.asarray(v) for k, v in batch.items()}, chunk_size=CHUNK, progress=True, shard=len(jax.devices()) > 1, desc=desc)
    return {k: np.array(v) for k, v in out.items()}


def closed_form_map(v: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`(t*, λ_max(v(A + Aᵀ)))` of the closed form (spec §3) on arrays of `v`, `a`."""
    A = np.asarray(family_A(jnp.asarray(a)))  # (2, 2, ...) -> move axes
    A = np.moveaxis(A, (0, 1), (-2, -1))
    t_star = np.asarray(blowup_time_closed_form(np.broadcast_to(SIGMA0, A.shape), A, v))
    S = A + np.swapaxes(A, -1, -2)
    lam = np.linalg.eigvalsh(v[..., None, None] * S)[..., -1]
    return t_star, lam


def _outcome_image(ax, codes, extent, xlabel, title, notes: dict[int, str] | None = None):
    cmap = ListedColormap(COLORS)
    ax.imshow(codes, origin="lower", extent=extent, aspect="auto", cmap=cmap, vmin=-0.5, vmax=len(COLORS) - 0.5, interpolation="nearest")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("a  (A = [[a, 1], [0, −1]])")
    ax.set_title(title, fontsize=10)
    present = sorted(set(np.unique(codes).tolist()))
    notes = notes or {}
    return [
        Patch(color=COLORS[c], label=f"{OUTCOMES[c]}: {int(np.sum(codes == c))}" + (f" ({notes[c]})" if c in notes else ""))
        for c in present
    ]


def main(out: Path, quick: bool = False) -> dict:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    o = Output(out, NAME)
    n = GRID_QUICK if quick else GRID_FULL

    # ---------------------------------------------------------------- (a) V = vI
    V_, A_ = grid(n, V_RANGE, A_RANGE)
    res_a = sweep_with_retry(batch_scalar_v(V_, A_), "phase map (a)")
    codes_a = outcome_codes(res_a["status"], res_a["lam_max"], res_a["rate"], res_a["rank_rel"])
    codes_a = to_image(codes_a, n)
    t_star, _ = closed_form_map(V_, A_)
    solved_blow = codes_a == BLOW_UP
    cf_blow = t_star <= T1_A
    near_horizon = np.abs(t_star / T1_A - 1.0) < 1e-6
    disagree_a = (solved_blow != cf_blow) & ~near_horizon
    tb = to_image(res_a["t_blowup"], n)
    rel_err = np.abs(tb[solved_blow & cf_blow] / t_star[solved_blow & cf_blow] - 1.0)

    # ---------------------------------------------------------------- (b) V = R(φ)
    P_, B_ = grid(n, PHI_RANGE, A_RANGE)
    res_b = sweep_with_retry(batch_rotation(P_, B_), "phase map (b)")
    codes_b = outcome_codes(res_b["status"], res_b["lam_max"], res_b["rate"], res_b["rank_rel"])
    codes_b = to_image(codes_b, n)
    rule = naive_rule(
        np.moveaxis(np.asarray(rotation(jnp.asarray(P_))), (0, 1), (-2, -1)),
        np.moveaxis(np.asarray(family_A(jnp.asarray(B_))), (0, 1), (-2, -1)),
    )
    rule_blow = rule > 0
    solved_blow_b = codes_b == BLOW_UP
    # Decided: blow-up, or no blow-up (escape without finite-time blow-up, settles, contracts).
    # Members still growing at t1 or stopped by the step budget are not counted either way.
    no_blow_b = np.isin(codes_b, [ESCAPE, SETTLES_RANK_ONE, SETTLES_FULL, CONTRACTS])
    decided = solved_blow_b | no_blow_b
    disagree_b = (rule_blow & no_blow_b) | (~rule_blow & solved_blow_b)
    # edges: φ = 0 (V = I) and φ = π (V = −I), where the rule is exact (spec §3)
    edge_cols = [0, n - 1]
    edge_disagree = int(np.sum(disagree_b[:, edge_cols]))

    # ---------------------------------------------------------------- figure
    fig, axes = plt.subplots(1, 2, figsize=(16.5, 9.0), layout="constrained")
    ax = axes[0]
    handles = _outcome_image(
        ax, codes_a, [*V_RANGE, *A_RANGE], "v  (V = v I)",
        f"(a) V = vI: solved outcome (t1 = {T1_A:g}) against the closed form\n"
        f"black: closed-form boundary λ_max(v(A + Aᵀ)) = 0; white: closed-form t* contours; "
        f"disagreements: {int(disagree_a.sum())} of {n * n}",
    )
    fine_v, fine_a = grid(401, V_RANGE, A_RANGE)
    t_fine, lam_fine = closed_form_map(fine_v, fine_a)
    ax.contour(fine_v, fine_a, lam_fine, levels=[0.0], colors="k", linewidths=1.6)
    levels = [0.25, 0.5, 1.0, 2.0, 5.0, T1_A]
    cs = ax.contour(fine_v, fine_a, np.where(np.isfinite(t_fine), t_fine, 1e9), levels=levels, colors="w", linewidths=0.9)
    labels = ax.clabel(cs, fmt=lambda x: f"t* = {x:g}", fontsize=7, inline_spacing=2)
    for text in labels:  # white on red, and readable on the light orange near t* = t1 too
        text.set_path_effects([patheffects.withStroke(linewidth=2.2, foreground="k")])
    if disagree_a.any():
        ax.scatter(V_[disagree_a], A_[disagree_a], marker="x", color="k", s=14, label="solve ≠ closed form")
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=2, fontsize=8,
              title=f"solved outcome: members of {n * n}", title_fontsize=8)  # fmt: skip

    ax = axes[1]
    n_not_decided = n * n - int(decided.sum())
    und = to_image(res_b["status"], n)[codes_b == UNDETERMINED]
    und_statuses = {Status(int(k)).name: int(v) for k, v in zip(*np.unique(und, return_counts=True))}
    notes_b = dict(NOT_DECIDED_NOTE)
    if und_statuses:
        notes_b[UNDETERMINED] = "not decided; solver status " + ", ".join(f"{k} {v}" for k, v in und_statuses.items())
    handles = _outcome_image(
        ax, codes_b, [*PHI_RANGE, *A_RANGE], "φ  (V = R(φ), rotation by φ; radians)",
        f"(b) V = R(φ): solved outcome (t1 = {T1_B:g}). Naive rule (sign of λ_max(VA + AᵀVᵀ)): no blow-up only\n"
        "inside the black curve λ_max = 0 (lower left), blow-up everywhere else, all of a > 0 included.\n"
        f"Hatched: rule ≠ solve, {int(disagree_b.sum())} of {int(decided.sum())} decided members; "
        f"{n_not_decided} not decided (light orange, grey, purple)",
        notes=notes_b,
    )
    fine_p, fine_b = grid(401, PHI_RANGE, A_RANGE)
    rule_fine = naive_rule(
        np.moveaxis(np.asarray(rotation(jnp.asarray(fine_p))), (0, 1), (-2, -1)),
        np.moveaxis(np.asarray(family_A(jnp.asarray(fine_b))), (0, 1), (-2, -1)),
    )
    ax.contour(fine_p, fine_b, rule_fine, levels=[0.0], colors="k", linewidths=1.6)
    ax.contourf(P_, B_, disagree_b.astype(float), levels=[0.5, 1.5], colors="none", hatches=["///"])
    handles.append(Patch(facecolor="none", edgecolor="k", hatch="///", label="rule ≠ solved outcome"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=2, fontsize=7.5,
              title=f"solved outcome: members of {n * n}", title_fontsize=8)  # fmt: skip
    fig.suptitle(
        f"Softmax Gaussian dynamics, d = 2, Σ0 = I/2: {n}×{n} members per map, one vmapped diffrax solve each. "
        "V = vI follows the closed form; for rotations V = R(φ) the sign rule on VA + AᵀVᵀ fails",
        fontsize=11,
    )
    o.savefig(fig, "phase_maps")

    counts_a = {OUTCOMES[c]: int(np.sum(codes_a == c)) for c in range(len(OUTCOMES)) if np.any(codes_a == c)}
    counts_b = {OUTCOMES[c]: int(np.sum(codes_b == c)) for c in range(len(OUTCOMES)) if np.any(codes_b == c)}
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    o.write_json(
        {
            "setup": {
                "kind": "softmax", "beta": 1.0, "Sigma0": SIGMA0, "mean0": [0.0, 0.0], "A": "[[a, 1], [0, -1]]",
                "grid": [n, n], "v_range": V_RANGE, "phi_range": PHI_RANGE, "a_range": A_RANGE, "t1_a": T1_A, "t1_b": T1_B,
                "size_threshold_trace": THRESHOLD, "rtol": RTOL, "atol": ATOL, "max_steps": MAX_STEPS, "max_steps_retry": MAX_STEPS_RETRY,
                "rate_tol": RATE_TOL, "rank_rtol": RANK_RTOL, "solver": "diffrax Tsit5 + PID (library default), float64",
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
                "still_growing_at_t1_not_counted": int(np.sum(codes_b == GROWS)),
                "step_budget_on_stationary_rank_one_not_counted": int(np.sum(codes_b == STALLED_RANK_ONE)),
                "undetermined_not_counted": int(np.sum(codes_b == UNDETERMINED)),
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
