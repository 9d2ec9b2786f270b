"""Figure 3 of Castin et al. (arXiv:2501.18322): multi-head attention converges to a plane.

Multi-head softmax, `H = 2`, `V = I`, the `q` of figure 2: head 0 has `A_0 = −qᵀq` (scale 1)
and `C_0 = e_1e_1ᵀ`, head 1 has `A_1 = 0` (the authors' ``rhs_multihead`` with a one-row `Q`).
Then `Σ' = e_1e_1ᵀΣA_0Σ + transpose`, so `Σ_22` is conserved and the stationary points are
the plane `(Σq)_1 = Σ_11 q_1 + Σ_12 q_2 = 0` (in cone coordinates `q_1 x + q_2 y + q_1 z = 0`).
100 trace-one initial covariances (10 × 10 grid on [−0.5, 0.5]²), one vmapped diffrax solve,
stopped at the authors' `‖Σ'‖_F < 1e-4`; a longer solve (t = 1e3) gives the limits. The limits
have full rank 2, so the approach is exponential (not the 1/t of rank-deficient limits).
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

import hassejax.plot.dynamics as dplot
from hassejax.dynamics import MultiHead, Softmax, Status, geometry, paper
from hassejax.dynamics.diagnostics import limit_rank, rank_absolute
from hassejax.plot.bounds import fmt_upper

NAME = "convergence_to_plane"
TOL = 1e-4  # the authors' tol for figure 3
THRESHOLD = 1e3
T1 = 1e5
T_LONG = 1e3  # the limits have full rank: convergence is exponential, done by t ≈ 200 (and an explicit
# solver's step stays bounded by the stable mode, so a longer horizon only costs steps)
FLOOR = 1e-9  # a threshold, ten times the solver's rtol (the measured floor is lower: plane_residual_at_t_long)
q = paper.FIG2_Q_ROW


def _e(text: str) -> str:
    """'7.1e-04' as '7.1e-4': the figures' one e-format (no padded exponent)."""
    return text.replace("e-0", "e-").replace("e+0", "e+")


def model() -> MultiHead:
    """Head 0: `A_0 = K_0ᵀQ_0 = −qᵀq` (k = 1, scale 1), `C_0 = e_1e_1ᵀ`; head 1: `A_1 = 0`, `C_1 = e_2e_2ᵀ`."""
    e = np.eye(2)
    return MultiHead(
        [Softmax(V=np.outer(e[0], e[0]), A=-np.outer(q, q)), Softmax(V=np.outer(e[1], e[1]), A=np.zeros((2, 2)))]
    )


def plane_residual(cov: np.ndarray) -> np.ndarray:
    """`|Σ_11 q_1 + Σ_12 q_2|`."""
    return np.abs(cov[..., 0, 0] * q[0] + cov[..., 0, 1] * q[1])


def plane_chord() -> np.ndarray:
    """The ends of the plane's trace on the disk of `Σ/tr Σ`: the chord `q_1 x + q_2 y + q_1 = 0` of the unit circle."""
    nq = q / np.linalg.norm(q)
    mid = -q[0] / np.linalg.norm(q) * nq  # the chord's nearest point to the centre
    half = np.sqrt(1.0 - float(mid @ mid))
    d = np.array([-nq[1], nq[0]])
    return np.stack([mid - half * d, mid + half * d])


def draw_plane(ax, z_max: float) -> None:
    """The plane `q_1 x + q_2 y + q_1 z = 0` inside the cone `z ≥ √(x² + y²)`, `z ≤ z_max`, outlined in red."""
    y, z = np.meshgrid(np.linspace(-z_max, z_max, 80), np.linspace(0, z_max, 60))
    x = -(q[1] * y + q[0] * z) / q[0]
    inside = z >= np.sqrt(x**2 + y**2) - 1e-9
    ax.plot_surface(np.where(inside, x, np.nan), np.where(inside, y, np.nan), np.where(inside, z, np.nan),
                    color="crimson", alpha=0.3, linewidth=0)  # fmt: skip
    ax.computed_zorder = False  # the outline above the trajectories
    ends = plane_chord() * z_max  # the plane meets the cone in two rank-one rays and the top circle in a chord
    for e in ends:
        ax.plot([0, e[0]], [0, e[1]], [0, z_max], color="crimson", lw=1.6, zorder=10)
    ax.plot(ends[:, 0], ends[:, 1], [z_max, z_max], color="crimson", lw=1.6, zorder=10)


def main(out: Path, quick: bool = False) -> dict:
    o = Output(out, NAME)
    dc.TIMER.reset()  # this experiment's solves only (a worker process runs several)
    n_side = 5 if quick else 10
    capacity = dc.CAPACITY
    grid = geometry.trace_one_grid(n_side, n_side, -0.5, 0.5)
    n = grid.shape[0]
    m = model()
    sol = dc.solve_for_plot(m, grid, t1=T1, threshold=THRESHOLD, tol=TOL, capacity=capacity)
    long = dc.solve(m, grid, t1=T_LONG, threshold=THRESHOLD, tol=dc.NO_STOP_TOL, capacity=capacity)
    conv = sol["status"] == Status.converged
    s22_drift = max(
        float(np.max(np.abs(np.where(s["valid"], s["cov"][..., 1, 1] - grid[:, None, 1, 1], 0.0)))) for s in (sol, long)
    )
    s22_drift = max(s22_drift, float(np.max(np.abs(long["cov_final"][:, 1, 1] - grid[:, 1, 1]))))
    res_stop = plane_residual(sol["cov_final"])
    res_long = plane_residual(long["cov_final"])
    # the residual falls exponentially until it meets the solver's tolerance, then stays there
    res_path = np.where(long["valid"], np.asarray(plane_residual(long["cov"])), np.inf)
    at_floor = res_path <= FLOOR
    t_floor = np.array([long["ts"][i][np.argmax(at_floor[i])] if at_floor[i].any() else np.inf for i in range(n)])
    ranks_long = np.asarray(limit_rank(long["cov_final"]))

    fig = plt.figure(figsize=(6.8, 6.6), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[1.2, 1.0])
    # an empty middle column: constrained layout does not see the cone's tr Σ label, which needs the gap
    gs = top.add_gridspec(1, 3, width_ratios=[1.1, 0.22, 1.0])
    ax, ax_d = top.add_subplot(gs[0, 0], projection="3d"), top.add_subplot(gs[0, 2])
    ax_res = bottom.add_subplot()
    colors, sm = dplot.colors_from(geometry.cone_coords(grid)[:, 1])
    trajs = dc.trajectories(sol)
    z_max = dplot.draw_cone(ax, trajs, colors)
    draw_plane(ax, z_max)
    ax.view_init(elev=20, azim=-45)
    ax.set_box_aspect(None, zoom=1.2)
    ax.zaxis.labelpad = -3  # tr Σ next to its ticks, not between the panels
    ax.set_facecolor("none")
    ax.set_title("cone: the plane (red) through the apex")
    # the same trajectories as Σ/tr Σ: the plane is a cone through the apex, so it is the chord below
    dplot.draw_disk(ax_d, trajs, colors)
    chord = plane_chord()
    ax_d.plot(chord[:, 0], chord[:, 1], color="w", lw=3.4, zorder=4, solid_capstyle="round")
    ax_d.plot(chord[:, 0], chord[:, 1], color="crimson", lw=1.8, zorder=5, label="the plane", solid_capstyle="round")
    ax_d.set_title(f"disk $\\Sigma/\\mathrm{{tr}}\\,\\Sigma$: {int(conv.sum())}/{n} end\non the plane (red chord)")
    cb = top.colorbar(sm, ax=ax_d, location="right", shrink=0.85, pad=0.02)
    cb.set_label("initial $2\\Sigma_{12}$ (trace-one $\\Sigma_0$)")
    for i in range(n):
        v = long["valid"][i]
        ax_res.semilogy(
            long["ts"][i][v], np.maximum(plane_residual(long["cov"][i][v]), 1e-18), color=colors[i], lw=0.6, alpha=0.7
        )
    t_median_stop = float(np.median(sol["t_final"]))  # the dotted line (JSON median_stop_time)
    ax_res.axvline(t_median_stop, color="0.3", ls=":", lw=1, label="median stop $\\|\\Sigma'\\|_F < 10^{-4}$")
    ax_res.set_xlim(0, T_LONG)
    ax_res.set_xlabel("depth $t$")
    ax_res.set_ylabel("$|\\Sigma_{11}q_1 + \\Sigma_{12}q_2|$")
    ax_res.set_title(
        f"distance to the plane: $\\leq$ {_e(fmt_upper(res_stop.max(), 2))} at the stop, under "
        f"$10^{{{int(np.log10(FLOOR))}}}$ by $t \\leq$ {np.ceil(np.max(t_floor)):.0f}, "
        f"$\\leq$ {_e(fmt_upper(res_long.max(), 2))} at $t = {T_LONG:g}$\n"
        "(exponential: limit rank 2); "
        f"$\\Sigma_{{22}}$ conserved: $|\\Sigma_{{22}}(t) - \\Sigma_{{22}}(0)| \\leq$ {_e(fmt_upper(s22_drift, 2))}"
    )
    ax_res.axhline(
        FLOOR,
        color="0.3",
        ls="--",
        lw=0.8,
        label=f"$10^{{{int(np.log10(FLOOR))}}}$ threshold (10 × rtol $10^{{{int(np.log10(dc.RTOL))}}}$)",
    )
    ax_res.grid(alpha=0.3, which="both")
    ax_res.legend(loc="upper right", framealpha=0.9)
    all_conv = bool(conv.all())
    fig.suptitle(
        "Convergence to a plane (Castin et al., arXiv:2501.18322, fig. 3), two-head softmax attention\n"
        "(head 0: $A_0 = -q^\\top q$, $C_0 = e_1e_1^\\top$; head 1: $A_1 = 0$, $C_1 = e_2e_2^\\top$): "
        f"{'all' if all_conv else 'NOT all'} {n} trajectories reach $\\Sigma_{{11}}q_1 + \\Sigma_{{12}}q_2 = 0$"
    )
    o.savefig(fig, NAME)

    o.write_json(
        {
            "figure": "dynamics.md §7a item 3 (convergence to a plane)",
            "claim": "Σ_22 is conserved; limits satisfy Σ_11 q_1 + Σ_12 q_2 = 0",
            "parameters": {
                "q": q,
                "A_heads": np.stack([h.A for h in m.heads]),
                "C_heads": np.stack([h.V for h in m.heads]),
                "V": np.eye(2),
            },
            "grid": {"n_u": n_side, "n_w": n_side, "limits": [-0.5, 0.5], "members": n},
            "events": {
                "converged": f"‖Σ'‖_F < {TOL:g}",
                "diverged": f"tr Σ > {THRESHOLD:g}",
                "t1": T1,
                "note": dc.EVENTS_NOTE,
            },
            "status": dc.status_counts(sol["status"]),
            "all_converged": all_conv,
            "sigma22_max_drift": s22_drift,
            "plane_residual_at_stop": dc.minmax(res_stop),
            "plane_residual_at_t_long": dc.minmax(res_long),
            "t_long": T_LONG,
            "solver_tolerances": {"rtol": dc.RTOL, "atol": dc.ATOL},
            "residual_threshold": FLOOR,
            "residual_threshold_note": "10 × rtol, a threshold drawn as the dashed line; not the measured floor, which "
            "is plane_residual_at_t_long",
            "t_first_under_threshold_range": dc.minmax(t_floor),
            "approach": "exponential (the limits have full rank 2; compare the 1/t of the rank-deficient limits of figures 1, 2, 4)",
            "rank_above_0.1_at_stop": dc.value_counts(np.asarray(rank_absolute(sol["cov_final"], 0.1))),
            "exact_limit_rank_(eigenvalues > 1e-6 λ_max at t_long)": dc.value_counts(ranks_long),
            "long_horizon_status": dc.status_counts(long["status"]),
            "solver": dc.solver_record(sol),
            "median_stop_time": t_median_stop,
            "median_stop_time_note": "median over the members of the stop time ‖Σ'‖_F < tol (the dotted line of the "
            "right panel; the range is solver.t_final_range)",
            "timing": dc.TIMER.as_dict(),
        },
        seeds={"none": "deterministic grid and parameters"},
    )
    return {
        "key": f"{int(conv.sum())}/{n} converge onto the plane; residual ≤ {fmt_upper(res_long.max(), 2)} at t = {T_LONG:g}; "
        f"Σ22 drift ≤ {fmt_upper(s22_drift, 2)}"
    }


if __name__ == "__main__":
    cli(main, NAME, __doc__)
