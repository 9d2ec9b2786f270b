"""Figure 1 of Castin et al. (arXiv:2501.18322): every covariance converges to zero, like 1/t.

Softmax, L2, multi-head (H = 2) and Sinkhorn attention with `K = −Q` and an SPD value
matrix `V`; 100 trace-one initial covariances (10 × 10 grid on [−0.5, 0.5]²). Each kind is
one vmapped diffrax solve of the 2×2 covariance ODE, stopped by the authors' criterion
`‖Σ'‖_F < 1e-5` (a steady-state event). Figure ``convergence_to_zero``: the trajectories in
cone coordinates `(a − b, 2c, a + b)`, one panel per kind, coloured by the initial `2Σ₁₂`;
figure ``convergence_to_zero_trace``: `tr Σ(t)` of the median member against `t` (log-log)
with the `1/t` law. A long-horizon solve (t = 1e8) confirms the limit is `Σ = 0` (rank 0).
"""

from __future__ import annotations

import jax

FLOAT64 = True  # JAX's float64 mode: on here, and again before main() when reproduce.py runs it
jax.config.update("jax_enable_x64", FLOAT64)

import math
from pathlib import Path

import _dynamics_common as dc
import matplotlib.pyplot as plt
import numpy as np
from _common import Output, cli

import hassejax.plot.dynamics as dplot
from hassejax.dynamics import Status, geometry, paper, powerlaw
from hassejax.plot.bounds import fmt_lower, fmt_upper
from hassejax.plot.curves import polyline_distance
from hassejax.plot.style import KIND_COLORS, KIND_LINESTYLES

NAME = "convergence_to_zero"
TOL = 1e-5  # the authors' tol for figure 1
THRESHOLD = 1e3  # the authors' default tr Σ stop
T1 = 1e5
T_LONG = 1e8

KINDS = {
    "softmax": ("softmax", paper.softmax_model),
    "L2": ("l2", paper.l2_model),
    "multi-head (H = 2)": ("multihead", paper.multihead_model),
    "Sinkhorn (ε = 1)": ("sinkhorn", paper.sinkhorn_model),
}
SHOWN = {"softmax": "softmax", "L2": "L2", "multi-head (H = 2)": "multi-head ($H = 2$)",
         "Sinkhorn (ε = 1)": "Sinkhorn ($\\varepsilon = 1$)"}  # fmt: skip


def main(out: Path, quick: bool = False) -> dict:
    o = Output(out, NAME)
    dc.TIMER.reset()  # this experiment's solves only (a worker process runs several)
    n_side = 5 if quick else 10
    capacity = dc.CAPACITY
    grid = geometry.trace_one_grid(n_side, n_side, -0.5, 0.5)
    n = grid.shape[0]
    color_by = geometry.cone_coords(grid)[:, 1]
    colors, sm = dplot.colors_from(color_by)

    fig, cone_grid = dplot.new_figure(2, 2, (6.5, 6.8), [["3d", "3d"], ["3d", "3d"]])
    cone_axes = list(cone_grid.ravel())
    fig_law, ax_law = plt.subplots(figsize=(6.0, 3.6), layout="constrained")
    results = {}
    paths: dict[str, list] = {}
    all_converged = True
    for ax, (label, (kind, make)) in zip(cone_axes, KINDS.items()):
        model = make(paper.FIG1_V, paper.FIG1_Q, paper.FIG1_K)
        sol = dc.solve_for_plot(model, grid, t1=T1, threshold=THRESHOLD, tol=TOL, capacity=capacity)
        long = dc.solve(
            model,
            grid,
            t1=T_LONG,
            threshold=THRESHOLD,
            tol=dc.NO_STOP_TOL,
            capacity=capacity,
            ts=dc.log_times(T_LONG, n),
        )
        conv = sol["status"] == Status.converged
        all_converged &= bool(conv.all())
        tr_long = np.trace(long["cov"], axis1=-2, axis2=-1)
        slope = powerlaw.loglog_slope(long["ts"], tr_long, long["valid"], last_decades=2.0)
        lam_long = np.linalg.eigvalsh(long["cov_final"])[:, -1]
        results[label] = {
            "kind": kind,
            "status": dc.status_counts(sol["status"]),
            "converged": int(conv.sum()),
            "trace_at_stop": dc.minmax(np.trace(sol["cov_final"], axis1=-2, axis2=-1)),
            "loglog_slope_t_1e6_to_1e8": dc.minmax(slope),
            "long_horizon": {
                "t1": T_LONG,
                "status": dc.status_counts(long["status"]),
                "lambda_max": dc.minmax(lam_long),
                "t_times_lambda_max": dc.minmax(T_LONG * lam_long),
            },
            "solver": dc.solver_record(sol),
            "replay_max_rel_dt": sol["replay_max_rel_dt"],
        }
        trajs = dc.trajectories(sol)
        paths[label] = [geometry.disk_coords(t) for t in trajs]
        dplot.draw_cone(ax, trajs, colors, end_markers=False)
        # stop points in one colour in every panel (per-member colours all meet at the apex, and
        # which one shows on top depends on the 3-D depth sort)
        ends = geometry.cone_coords(np.stack([t[-1] for t in trajs]))
        ax.scatter(ends[:, 0], ends[:, 1], ends[:, 2], color="k", s=6, depthshade=False)
        # seen from the side of convergence_to_line, _two_lines (the same elev, azim) and _plane: the
        # paths fan out across the panel by their colour 2Σ12
        ax.view_init(elev=22, azim=-58)
        ax.xaxis.labelpad = ax.yaxis.labelpad = 5  # the axis labels clear of their tick labels
        # the 3-D box leaves a wide margin inside its axes: zoom in (less empty space under the
        # titles) and keep the axes transparent so that no neighbour hides an axis label
        ax.set_box_aspect(None, zoom=0.9)
        ax.set_facecolor("none")
        ax.set_title(
            f"{SHOWN[label]}: {int(conv.sum())}/{n} converge to $\\Sigma = 0$\n"
            f"stop at $\\|\\Sigma'\\|_F < 10^{{{int(np.log10(TOL))}}}$: "
            f"$\\mathrm{{tr}}\\,\\Sigma \\leq$ {fmt_upper(results[label]['trace_at_stop'][1], 2).replace('e-0', 'e-')}",
            y=0.97,
        )
        med = np.argsort(slope)[len(slope) // 2]
        results[label]["median_member_loglog_slope"] = float(slope[med])
        results[label]["median_member_index"] = int(med)
        results[label]["median_member_definition"] = (
            "the member of rank n // 2 (0-based; the upper median for even n) when the members are sorted by "
            "their log-log slope of tr Σ on [1e6, 1e8] (drawn in the trace figure)"
        )
        results[label]["median_stop_time"] = float(np.median(sol["t_final"]))  # the dotted line of the trace figure
        v = long["valid"][med] & (long["ts"][med] > 0)
        kind = KINDS[label][0]
        ax_law.loglog(
            long["ts"][med][v],
            tr_long[med][v],
            lw=1.3,
            color=KIND_COLORS[kind],
            ls=KIND_LINESTYLES[kind],
            label=f"{SHOWN[label]}: slope " + f"{slope[med]:.4f}".replace("-", "−"),
        )
        ax_law.axvline(results[label]["median_stop_time"], color=KIND_COLORS[kind], lw=0.6, ls=":")

    t_ref = np.geomspace(1e2, 1e8, 10)
    ax_law.loglog(t_ref, 10.0 / t_ref, color="0.55", lw=3.0, alpha=0.5, zorder=0, label="reference $10/t$")
    ax_law.set_xlabel("depth $t$ (dotted: each kind's median stop $\\|\\Sigma'\\|_F < 10^{-5}$)")
    ax_law.set_ylabel("$\\mathrm{tr}\\,\\Sigma(t)$ of the median member")
    ax_law.set_title(
        "$\\Sigma \\to 0$ like $1/t$: log-log slope of $\\mathrm{tr}\\,\\Sigma(t)$ on $[10^6, 10^8]$ "
        "(Castin et al., arXiv:2501.18322, fig. 1)"
    )
    ax_law.legend(loc="lower left")
    ax_law.grid(alpha=0.3, which="both")
    o.savefig(fig_law, "convergence_to_zero_trace")
    cb = fig.colorbar(sm, ax=cone_axes, location="bottom", shrink=0.5, aspect=30, pad=0.05)
    cb.set_label("initial $2\\Sigma_{12}$ (trace-one $\\Sigma_0$); black dots: stop points")
    # the panels look alike: the shape Σ/tr Σ follows nearly one path for every kind
    for label in KINDS:
        if label != "softmax":
            gap = max(float(polyline_distance(p, q).max()) for p, q in zip(paths[label], paths["softmax"]))
            results[label]["disk_path_max_distance_to_softmax"] = gap

    def _gap(k: str) -> str:  # an upper bound: rounded up
        x = results[k]["disk_path_max_distance_to_softmax"]
        return f"{math.ceil(x * 100 - 1e-9) / 100:.2f}" if x >= 0.01 else fmt_upper(x, 2).replace("e-0", "e-")

    gap_txt = (
        f"L2 and Sinkhorn retrace softmax's paths of $\\Sigma/\\mathrm{{tr}}\\,\\Sigma$ "
        f"($\\leq$ {_gap('L2')}, $\\leq$ {_gap('Sinkhorn (ε = 1)')}),\n"
        f"multi-head's differ by up to {_gap('multi-head (H = 2)')} (largest distance in the disk)"
    )
    fig.suptitle(
        f"Convergence to zero ($K = -Q$, $V$ SPD; Castin et al., arXiv:2501.18322, fig. 1):\n"
        f"{'all' if all_converged else 'NOT all'} {n} trajectories of each kind converge to $\\Sigma = 0$ "
        f"(trace-one $\\Sigma_0$ on a {n_side}×{n_side} grid);\n{gap_txt}"
    )
    o.savefig(fig, "convergence_to_zero")

    slopes = [r["loglog_slope_t_1e6_to_1e8"] for r in results.values()]
    lam_lo = min(r["long_horizon"]["lambda_max"][0] for r in results.values())
    lam_hi = max(r["long_horizon"]["lambda_max"][1] for r in results.values())
    tl_lo = min(r["long_horizon"]["t_times_lambda_max"][0] for r in results.values())
    tl_hi = max(r["long_horizon"]["t_times_lambda_max"][1] for r in results.values())
    o.write_json(
        {
            "figure": "dynamics.md §7a item 1 (convergence to zero)",
            "claim": "all trajectories converge to Σ = 0, slowly, like 1/t",
            "parameters": {
                "Q": paper.FIG1_Q,
                "K": paper.FIG1_K,
                "V": paper.FIG1_V,
                "scalings": "softmax, L2: A = KᵀQ/√2 (L2: KᵀK unscaled, c = 1); multi-head: head h = row h of Q, K, "
                "scale 1, C_h = e_h (row h of V); Sinkhorn: A = KᵀQ unscaled, ε = 1",
            },
            "grid": {"n_u": n_side, "n_w": n_side, "limits": [-0.5, 0.5], "members": n},
            "events": {
                "converged": f"‖Σ'‖_F < {TOL:g}",
                "diverged": f"tr Σ > {THRESHOLD:g}",
                "t1": T1,
                "note": dc.EVENTS_NOTE,
            },
            "all_converged": all_converged,
            "exact_limit_rank": 0,
            "exact_limit_rank_evidence": f"Σ → 0: λ_max(t = 1e8) within [{fmt_lower(lam_lo, 3)}, {fmt_upper(lam_hi, 3)}] "
            f"(t·λ_max within [{math.floor(tl_lo * 10) / 10:.1f}, {math.ceil(tl_hi * 10) / 10:.1f}]; long_horizon, all "
            "kinds): t·λ_max(t) bounded, slope of log tr Σ against log t ≈ −1",
            "kinds": results,
            "timing": dc.TIMER.as_dict(),
        },
        seeds={"none": "deterministic grid and parameters"},
    )
    worst = max(s[1] for s in slopes)
    counts = ", ".join(f"{k.split()[0]} {r['converged']}/{n}" for k, r in results.items())
    return {"key": f"converged to 0: {counts}; log-log slope of tr Σ ≤ {np.ceil(worst * 1e3) / 1e3:.3f}"}


if __name__ == "__main__":
    cli(main, NAME, __doc__)
