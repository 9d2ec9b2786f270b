"""Figure 4 of Castin et al., arXiv:2501.18322 (spec dynamics.md §7a item 4): convergence to two lines.

Softmax and L2 attention with a general `V` and an indefinite `A = KᵀQ/√2`: from 276
trace-one initial covariances (20 × 20 grid on [−1, 1]²) every trajectory converges to a
rank-one `s vvᵀ` on one of the two isotropic directions `vᵀAv = 0` (the stationary rank-one
covariances, spec §3), at −58.14° and −7.60°. On the cone and disk plots `s vvᵀ` has coordinates
`s (cos 2θ, sin 2θ)`, so these rays lie at twice those angles (−116.29°, −15.20°). Each
trajectory is coloured by the ray it reaches; every 4th grid member is drawn. One vmapped diffrax solve per kind, stopped at
the authors' `‖Σ'‖_F < 1e-7`; a longer solve (t = 1e4, past the exponential approach) gives the exact limit rank.
(The authors' script overwrote its softmax panel with the L2 result; both are drawn here.)
"""

from __future__ import annotations

import jax

FLOAT64 = True  # JAX's float64 mode: on here, and again before main() when reproduce.py runs it
jax.config.update("jax_enable_x64", FLOAT64)

from pathlib import Path

import _dynamics_common as dc
import matplotlib.ticker as mticker
import numpy as np
from _common import Output, cli

import hassejax.plot.dynamics as dplot
from hassejax.dynamics import Status, geometry, paper
from hassejax.dynamics.diagnostics import limit_rank, rank_absolute
from hassejax.plot.angles import cone_angle
from hassejax.plot.bounds import fmt_upper
from hassejax.plot.curves import polyline_distance
from hassejax.plot.style import OUTCOME_PALETTE, TEXT_WIDTH, figsize

NAME = "convergence_to_two_lines"
TOL = 1e-7  # the authors' tol for figure 4
THRESHOLD = 1e3
T1 = 1e6
T_LONG = 1e4  # rank-one limits off V's invariant lines are approached exponentially (derived: the
# vanishing eigenvalue has linear rate 2s(vᵀAw)(wᵀVv)), so an explicit solver's step stays bounded: a
# longer horizon costs steps linearly and gains nothing
SPEC_ANGLES = (-58.14, -7.60)
KINDS = {"softmax": ("softmax", paper.softmax_model), "L2": ("l2", paper.l2_model)}
VIEW = (22, -58)
"""(elevation, azimuth) of both cones: an oblique view, so the three axes' ticks do not line up."""


def angle_gap(a: np.ndarray, b: float) -> np.ndarray:
    """Distance between line angles (degrees, modulo 180°)."""
    d = np.mod(np.asarray(a) - b + 90.0, 180.0) - 90.0
    return np.abs(d)


RAY_COLORS = (
    OUTCOME_PALETTE["converge_other"],
    OUTCOME_PALETTE["converge"],
)  # indigo, teal: outcome colours, not kinds
"""Colour of each isotropic ray and of the trajectories that reach it."""
DRAW_EVERY = 4
"""Draw every 4th member of the grid (all members are solved and counted)."""


def _deg(x: float, digits: int = 2) -> str:
    """An angle in degrees with a true minus sign."""
    return f"{x:.{digits}f}°".replace("-", "−")


def _up(x: float, digits: int = 3) -> str:
    """A maximum rounded UP to `digits` significant figures, positional when at least 1e-3."""
    v = float(fmt_upper(x, digits))
    return f"{v:#.{digits}g}" if v >= 1e-3 else fmt_upper(x, digits).replace("e-0", "e-")


def _axis_labels(ax) -> None:
    """Mathtext axis labels and 8-pt ticks on a cone axis (drawn by :func:`hassejax.plot.dynamics.draw_cone`)."""
    ax.set_xlabel(r"$\Sigma_{11} - \Sigma_{22}$", labelpad=-4)
    ax.set_ylabel(r"$2\Sigma_{12}$", labelpad=-4)
    ax.set_zlabel(r"tr $\Sigma$", labelpad=-6)
    ax.tick_params(labelsize=8, pad=-2)
    # the floor's axes at −1, 0, 1: ticks at the ends (±1.5) put x's last label and y's first at the same corner
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(mticker.FixedLocator([-1.0, 0.0, 1.0]))
    ax.zaxis.set_major_locator(mticker.MaxNLocator(3))


def main(out: Path, quick: bool = False) -> dict:
    import matplotlib.pyplot as plt

    o = Output(out, NAME)
    dc.TIMER.reset()  # this experiment's solves only (a worker process runs several)
    n_side = 8 if quick else 20
    capacity = dc.CAPACITY
    grid = geometry.trace_one_grid(n_side, n_side, -1.0, 1.0)
    n = grid.shape[0]
    A = np.asarray(paper.softmax_model(paper.FIG4_V, paper.FIG4_Q, paper.FIG4_K).A)
    rays = geometry.isotropic_angles(A)
    doubled = cone_angle(rays)
    drawn = np.arange(0, n, DRAW_EVERY)

    fig = plt.figure(figsize=figsize(TEXT_WIDTH, 1.02), layout="constrained")
    gs = fig.add_gridspec(2, 2, width_ratios=[1.25, 1.0])
    results = {}
    paths: dict[str, list] = {}  # every member's path of Σ/tr Σ in the disk, per kind
    for r, (label, (kind, make)) in enumerate(KINDS.items()):
        ax_c = fig.add_subplot(gs[r, 0], projection="3d")
        ax_d = fig.add_subplot(gs[r, 1])
        model = make(paper.FIG4_V, paper.FIG4_Q, paper.FIG4_K)
        sol = dc.solve_for_plot(model, grid, t1=T1, threshold=THRESHOLD, tol=TOL, capacity=capacity)
        long = dc.solve(model, grid, t1=T_LONG, threshold=THRESHOLD, tol=dc.NO_STOP_TOL, capacity=capacity)
        conv = sol["status"] == Status.converged
        ang_stop = geometry.rank_one_direction_angle(sol["cov_final"])
        ang_long = geometry.rank_one_direction_angle(long["cov_final"])
        gaps_long = np.stack([angle_gap(ang_long, r_) for r_ in rays], -1)
        nearest = np.argmin(gaps_long, -1)
        gaps_stop = np.take_along_axis(np.stack([angle_gap(ang_stop, r_) for r_ in rays], -1), nearest[:, None], -1)[
            :, 0
        ]
        per_ray = {f"{rays[k]:.2f}°": int(np.sum(conv & (nearest == k))) for k in range(2)}
        drawn_per_ray = {f"{rays[k]:.2f}°": int(np.sum(nearest[drawn] == k)) for k in range(2)}
        results[label] = {
            "kind": kind,
            "status": dc.status_counts(sol["status"]),
            "converged": int(conv.sum()),
            "limits_per_ray": per_ray,
            "drawn_members_per_ray": drawn_per_ray,
            "max_angle_gap_to_ray_at_stop_deg": float(gaps_stop[conv].max()) if conv.any() else None,
            "max_angle_gap_to_ray_at_t_long_deg": float(np.min(gaps_long, -1).max()),
            "rank_above_0.1_at_stop": dc.value_counts(np.asarray(rank_absolute(sol["cov_final"], 0.1))),
            "long_horizon": {
                "t1": T_LONG,
                "status": dc.status_counts(long["status"]),
                "exact_limit_rank_(eigenvalues > 1e-6 λ_max)": dc.value_counts(
                    np.asarray(limit_rank(long["cov_final"]))
                ),
                "trace_range": dc.minmax(np.trace(long["cov_final"], axis1=-2, axis2=-1)),
            },
            "solver": dc.solver_record(sol),
        }
        trajs = dc.trajectories(sol)
        paths[label] = [geometry.disk_coords(t) for t in trajs]
        sub = [trajs[i] for i in drawn]
        colors = [RAY_COLORS[k] for k in nearest[drawn]]
        z_max = dplot.draw_cone(ax_c, sub, colors)
        for k, (r_, col) in enumerate(zip(rays, RAY_COLORS)):
            dplot.draw_ray(ax_c, r_, z_max, col, "_", lw=1.8, text=_deg(doubled[k], 1))
        ax_c.view_init(elev=VIEW[0], azim=VIEW[1])
        _axis_labels(ax_c)
        t_lo, t_hi = results[label]["solver"]["t_final_range"]
        ax_c.set_title(
            f"{label}: cone, {int(conv.sum())}/{n} converge,\nstops at $t \\in$ [{t_lo:.1f}, {t_hi:.0f}]", pad=0
        )
        dplot.draw_disk(ax_d, sub, colors)
        for k, col in enumerate(RAY_COLORS):
            ph = np.radians(doubled[k])
            ax_d.plot([0, np.cos(ph)], [0, np.sin(ph)], color=col, lw=1.0, ls="--")
            ax_d.text(0.5 * np.cos(ph), 0.5 * np.sin(ph) + 0.12, _deg(doubled[k], 1), color=col, ha="center",
                      va="center", fontweight="bold", bbox=dict(fc="w", ec="none", alpha=0.8, pad=0.5))  # fmt: skip
        ax_d.set_xlabel(r"$(\Sigma_{11} - \Sigma_{22})\,/\,\mathrm{tr}\,\Sigma$")
        ax_d.set_ylabel(r"$2\Sigma_{12}\,/\,\mathrm{tr}\,\Sigma$")
        gap_txt = _up(results[label]["max_angle_gap_to_ray_at_stop_deg"]) if conv.any() else "n/a"
        ax_d.set_title(
            f"{label}: disk " + r"$\Sigma/\mathrm{tr}\,\Sigma$" + f", {len(drawn)} of {n} drawn;\n"
            f"angle to the ray at the stop $\\leq$ {gap_txt}°"
        )
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], color=col, lw=1.8, label=rf"$v$ at $\theta$ = {_deg(rays[k])}, drawn at 2$\theta$ = {_deg(doubled[k])}: "
               + ", ".join(f"{lab} {res['limits_per_ray'][f'{rays[k]:.2f}°']}" for lab, res in results.items()) + " limits")
        for k, col in enumerate(RAY_COLORS)
    ]  # fmt: skip
    fig.legend(handles=handles, loc="outside lower center", ncol=1, title="trajectory colour = the isotropic ray "
               r"$v^\top A v = 0$ it reaches (rank one $s\,vv^\top$)")  # fmt: skip
    all_conv = all(r_["converged"] == n for r_ in results.values())
    # the two rows look alike: how far L2's paths of Σ/tr Σ lie from softmax's (two solves, not one drawn twice)
    path_gap = max(float(polyline_distance(p, q).max()) for p, q in zip(paths["L2"], paths["softmax"]))
    results["L2"]["disk_path_max_distance_to_softmax"] = path_gap
    fig.suptitle(
        "Convergence to two lines ($V$ general, $A$ indefinite; Castin et al., arXiv:2501.18322, fig. 4):\n"
        f"{'all' if all_conv else 'NOT all'} {n} trajectories of each kind converge to rank one on $v^\\top A v = 0$ "
        "($v$ at $\\theta$ lies at 2$\\theta$);\n"
        f"L2's paths of $\\Sigma/\\mathrm{{tr}}\\,\\Sigma$ lie up to {_up(path_gap, 2)} from softmax's "
        "(largest distance in the disk, all members)"
    )
    o.savefig(fig, NAME)

    o.write_json(
        {
            "figure": "Castin et al., arXiv:2501.18322, fig. 4 (convergence to two lines); spec dynamics.md §7a item 4",
            "claim": "limits are rank one on the isotropic directions vᵀAv = 0 of v at −58.14° and −7.60°; on the cone "
            "and disk plots, whose coordinates (Σ11 − Σ22, 2Σ12) of s vvᵀ are s(cos 2θ, sin 2θ), they appear at 2θ",
            "parameters": {
                "Q": paper.FIG4_Q,
                "K": paper.FIG4_K,
                "V": paper.FIG4_V,
                "A": A,
                "scalings": "softmax: A = KᵀQ/√2; L2: Q/√2, K unscaled, c = 1",
            },
            "isotropic_angles_deg": rays,
            "isotropic_angles_on_cone_and_disk_deg_(2θ)": doubled,
            "spec_angles_deg": SPEC_ANGLES,
            "angles_match_spec_to_0.005deg": bool(np.all(np.abs(rays - np.array(SPEC_ANGLES)) < 0.005)),
            "grid": {"n_u": n_side, "n_w": n_side, "limits": [-1.0, 1.0], "members": n},
            "disk_path_distance_note": "kinds.L2.disk_path_max_distance_to_softmax: the largest Euclidean distance in "
            "the disk from a point of a member's L2 path of Σ/tr Σ (save times up to its stop) to the same member's "
            "softmax path (as a polyline), over all members",
            "drawing": {
                "members_drawn": len(drawn),
                "rule": f"every {DRAW_EVERY}th grid member drawn; every member solved and counted",
                "colour": "the isotropic ray nearest the member's direction at t = T_LONG (the ray it reaches)",
            },
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
    split = "; ".join(f"{k}: {r_['limits_per_ray']}" for k, r_ in results.items())
    return {"key": f"rays {rays[0]:.2f}°, {rays[1]:.2f}° (at {doubled[0]:.2f}°, {doubled[1]:.2f}° on the cone); "
            f"converged limits per ray: {split}"}  # fmt: skip


if __name__ == "__main__":
    cli(main, NAME, __doc__)
