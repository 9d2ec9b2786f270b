"""Figure 2 of Castin et al. (arXiv:2501.18322): convergence to a line, rank one along q⊥.

Softmax and L2 attention with one query row `q`, `K = −q`, `V = I`: `A = −qᵀq/√2 ⪯ 0`
with kernel `q⊥`. From 100 trace-one initial covariances (10 × 10 grid on [−0.5, 0.5]²)
every trajectory converges to the rank-one `Σ∞ = q⊥q⊥ᵀ/(q⊥ᵀΣ0⁻¹q⊥)` (paper, softmax
closed form for `V = I`; for L2 the same `q⊥ᵀΣ⁻¹q⊥` is conserved because `Aq⊥ = 0`,
derived). One vmapped diffrax solve per kind, stopped at the authors' `‖Σ'‖_F < 1e-4`;
a long-horizon solve (t = 1e8) gives the exact limit and rank. Figure ``convergence_to_line``:
the trajectories in the cone, one panel per kind; figure ``convergence_to_line_error``: the
distance of the median member to `Σ∞` against `t`.
"""

from __future__ import annotations

import jax

FLOAT64 = True  # JAX's float64 mode: on here, and again before main() when reproduce.py runs it
jax.config.update("jax_enable_x64", FLOAT64)

from pathlib import Path

import _dynamics_common as dc
import matplotlib.pyplot as plt
import numpy as np
from _common import Output, cli
from matplotlib import patheffects

import hassejax.plot.dynamics as dplot
from hassejax.dynamics import Status, clustering_limit, geometry, paper, powerlaw
from hassejax.dynamics.diagnostics import limit_rank, rank_absolute
from hassejax.plot.bounds import fmt_upper
from hassejax.plot.style import KIND_COLORS, KIND_LINESTYLES

NAME = "convergence_to_line"
TOL = 1e-4  # the authors' tol for figure 2
THRESHOLD = 1e3
T1 = 1e5
T_LONG = 1e8

Q = paper.FIG2_Q_ROW[None, :]
K = -Q
V = np.eye(2)
Q_PERP = paper.FIG2_Q_PERP
KINDS = {"softmax": ("softmax", paper.softmax_model), "L2": ("l2", paper.l2_model)}
VIEW = (22, -58)
"""(elevation, azimuth) of both cones (the same view): oblique, so the axes' ticks do not line up."""


def main(out: Path, quick: bool = False) -> dict:
    o = Output(out, NAME)
    dc.TIMER.reset()  # this experiment's solves only (a worker process runs several)
    n_side = 5 if quick else 10
    capacity = dc.CAPACITY
    grid = geometry.trace_one_grid(n_side, n_side, -0.5, 0.5)
    n = grid.shape[0]
    target = geometry.rank_one_limit(grid, Q_PERP)  # Σ∞ = q⊥q⊥ᵀ/(q⊥ᵀΣ0⁻¹q⊥), spec §7a item 2
    a_soft = np.asarray(paper.softmax_model(V, Q, K).A)
    library_limit = np.asarray(clustering_limit(grid, a_soft, 1.0))
    closed_vs_library = float(np.max(geometry.rel_frobenius(library_limit, target)))
    colors, sm = dplot.colors_from(geometry.cone_coords(grid)[:, 1])
    # the direction of q⊥ modulo 180°, in (−90°, 90°] (the sinkhorn and two-lines figures' convention)
    perp_angle = float(geometry.rank_one_direction_angle(np.outer(Q_PERP, Q_PERP)))
    cone_angle = 2.0 * perp_angle  # s vvᵀ has cone coordinates s(cos 2θ, sin 2θ, 1)

    fig, axes = dplot.new_figure(1, 2, (6.6, 4.2), [["3d", "3d"]])
    fig_err, ax_err = plt.subplots(figsize=(5.0, 3.4), layout="constrained")
    results = {}
    for ax, (label, (kind, make)) in zip(axes[0, :2], KINDS.items()):
        model = make(V, Q, K)
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
        err_stop = geometry.rel_frobenius(sol["cov_final"], target)
        err_long = geometry.rel_frobenius(long["cov_final"], target)
        results[label] = {
            "kind": kind,
            "status": dc.status_counts(sol["status"]),
            "converged": int(conv.sum()),
            "rel_error_to_sigma_inf_at_stop": dc.minmax(err_stop),
            "rank_above_0.1_at_stop": dc.value_counts(np.asarray(rank_absolute(sol["cov_final"], 0.1))),
            "top_eigenvector_angle_at_stop_deg": dc.minmax(geometry.rank_one_direction_angle(sol["cov_final"])),
            "long_horizon": {
                "t1": T_LONG,
                "status": dc.status_counts(long["status"]),
                "rel_error_to_sigma_inf": dc.minmax(err_long),
                "exact_limit_rank_(eigenvalues > 1e-6 λ_max)": dc.value_counts(
                    np.asarray(limit_rank(long["cov_final"]))
                ),
            },
            "solver": dc.solver_record(sol),
        }
        trajs = dc.trajectories(sol)
        z_max = dplot.draw_cone(ax, trajs, colors)
        tgt = geometry.cone_coords(target)
        dplot.draw_ray(
            ax,
            perp_angle,
            z_max,
            "crimson",
            "rank one along $q^\\perp$",
            lw=1.8,
            text="$q^\\perp$",
        )
        # the end label above the trajectories, readable over them (white halo)
        ax.texts[-1].set_path_effects([patheffects.withStroke(linewidth=3, foreground="w")])
        ax.texts[-1].set_zorder(14)
        ax.scatter(
            tgt[:, 0], tgt[:, 1], tgt[:, 2], marker="x", color="k", s=12, zorder=13,
            label="$\\Sigma_\\infty$ (closed form)",
        )  # fmt: skip
        ax.view_init(elev=VIEW[0], azim=VIEW[1])
        ax.set_box_aspect(None, zoom=1.1)
        ax.zaxis.labelpad = -3  # tr Σ next to its ticks
        ax.set_facecolor("none")
        ax.set_title(
            f"{label}: {int(conv.sum())}/{n} reach rank one on $q^\\perp$\n"
            f"$\\|\\Sigma - \\Sigma_\\infty\\|_F / \\|\\Sigma_\\infty\\|_F \\leq$ {fmt_upper(err_stop.max(), 2)} at the stop,\n"
            f"$\\leq$ {fmt_upper(err_long.max(), 2)} at $t = 10^8$"
        )
        tr = geometry.rel_frobenius(long["cov"], target[:, None])
        slope = powerlaw.loglog_slope(long["ts"], tr, long["valid"], last_decades=2.0)
        med = np.argsort(err_stop)[n // 2]
        v = long["valid"][med] & (long["ts"][med] > 0)
        kind = KINDS[label][0]
        ax_err.loglog(
            long["ts"][med][v], tr[med][v], lw=1.3, color=KIND_COLORS[kind], ls=KIND_LINESTYLES[kind],
            label=f"{label}: slope " + f"{slope[med]:.3f}".replace("-", "−"),
        )  # fmt: skip
        results[label]["long_horizon"]["loglog_slope_of_error_t_1e6_to_1e8"] = dc.minmax(slope)
        results[label]["long_horizon"]["median_member_loglog_slope_of_error"] = float(slope[med])
    t_ref = np.geomspace(1e2, 1e8, 10)
    ax_err.loglog(t_ref, 10.0 / t_ref, color="0.55", lw=3.0, alpha=0.5, zorder=0, label="reference $10/t$")
    ax_err.set_xlabel("depth $t$")
    ax_err.set_ylabel("$\\|\\Sigma(t) - \\Sigma_\\infty\\|_F\\,/\\,\\|\\Sigma_\\infty\\|_F$ (median member)")
    ax_err.set_title("Distance to the closed-form limit falls like $1/t$\n(log-log slope on $[10^6, 10^8]$)")
    ax_err.grid(alpha=0.3, which="both")
    ax_err.legend(loc="lower left")
    o.savefig(fig_err, "convergence_to_line_error")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    cb = fig.colorbar(sm, ax=list(axes[0, :2]), location="bottom", shrink=0.45, aspect=25, pad=0.1)
    cb.set_label("initial $2\\Sigma_{12}$ (trace-one $\\Sigma_0$)")
    fig.legend(handles, labels, loc="lower left", frameon=False)
    all_conv = all(r["converged"] == n for r in results.values())
    fig.suptitle(
        "Convergence to a line ($Q = q$, $K = -q$, $V = I$; Castin et al., arXiv:2501.18322, fig. 2):\n"
        f"{'all' if all_conv else 'NOT all'} {n} trajectories reach "
        f"$\\Sigma_\\infty = q^\\perp q^{{\\perp\\top}} / (q^{{\\perp\\top}} \\Sigma_0^{{-1}} q^\\perp)$,\n"
        f"$q^\\perp$ at {perp_angle:.2f}° (on the cone at twice that angle, {cone_angle:.2f}°)".replace("-", "−")
    )
    o.savefig(fig, NAME)

    o.write_json(
        {
            "figure": "dynamics.md §7a item 2 (convergence to a line)",
            "claim": "all trajectories converge to rank one along q⊥, Σ∞ = q⊥q⊥ᵀ/(q⊥ᵀΣ0⁻¹q⊥)",
            "parameters": {
                "q": paper.FIG2_Q_ROW,
                "q_perp": Q_PERP,
                "V": V,
                "scalings": "softmax: A = KᵀQ/√2; L2: Q/√2, K unscaled, c = 1",
            },
            "sigma_inf_source": "softmax, V = I: closed form (paper); L2: q⊥ᵀΣ⁻¹q⊥ is conserved since Aq⊥ = 0 (derived)",
            "closed_form_vs_library_clustering_limit_max_rel": closed_vs_library,
            "q_perp_angle_deg": perp_angle,
            "q_perp_angle_convention": "the direction of q⊥ modulo 180°, in (−90°, 90°] (as sinkhorn's q_perp_direction_deg)",
            "q_perp_cone_angle_deg": cone_angle,
            "grid": {"n_u": n_side, "n_w": n_side, "limits": [-0.5, 0.5], "members": n},
            "events": {
                "converged": f"‖Σ'‖_F < {TOL:g}",
                "diverged": f"tr Σ > {THRESHOLD:g}",
                "t1": T1,
                "note": dc.EVENTS_NOTE,
            },
            "all_converged": all_conv,
            "kinds": results,
            "timing": dc.TIMER.as_dict(),
        },
        seeds={"none": "deterministic grid and parameters"},
    )
    errs = ", ".join(f"{k} {fmt_upper(r['long_horizon']['rel_error_to_sigma_inf'][1], 2)}" for k, r in results.items())
    counts = ", ".join(f"{k} {r['converged']}/{n}" for k, r in results.items())
    return {"key": f"rank one on q⊥: {counts}; max rel. error to Σ∞ at t = 1e8: {errs}"}


if __name__ == "__main__":
    cli(main, NAME, __doc__)
