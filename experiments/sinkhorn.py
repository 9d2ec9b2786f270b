"""Sinkhorn attention: the mean follows `α' = Vα` whatever `Σ` does, and `Σ` clusters to low rank.

Castin et al. (arXiv:2501.18322), Sinkhorn attention (doubly stochastic `P`, `ε = 1`, unscaled
`A`). Two figures:

- ``sinkhorn_mean``: the columns of `nP` sum to one, so the mean of the tokens moves as
  `x̄' = Vx̄` for any `A` and any configuration, and on Gaussians `α' = Vα` decoupled from `Σ`
  (derived, spec dynamics.md §2). One `V` (a spiral, `α(t) = e^{tV}α0`) with three `A` (from
  `tr Σ0` = 2 and 2.3, `tr Σ` at `t = 8` is 0.55, 0.46 for `A = −I`, 2.1, 2.8 for `A = diag(1, −1)`, 29, 43
  for `A = I`; the solves stop there), two `Σ0` each: the Gaussian moment ODE (diffrax) and `n = 64`
  particles (particle Sinkhorn, log domain) against `e^{tV}α0` from ``scipy.linalg.expm``.
- ``sinkhorn_low_rank``: figure 2's setting with Sinkhorn (`V = I`, `A = −qᵀq`, kernel `q⊥`):
  from 100 trace-one `Σ0` every `Σ(t)` converges to rank one on the `q⊥` line, `λ_min ~ 1/t`
  (long solve to `t = 1e8`, the exact rank: eigenvalues above `1e-6 λ_max`).
"""

from __future__ import annotations

import jax

FLOAT64 = True  # JAX's float64 mode: on here, and again before main() when reproduce.py runs it
jax.config.update("jax_enable_x64", FLOAT64)

from pathlib import Path

import _dynamics_common as dc
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import scipy.linalg
from _common import Output, cli, sci_tex

import hassejax.plot.dynamics as dplot
from hassejax._xla_flags import jit_at_default_level
from hassejax.dynamics import Sinkhorn, geometry, paper, powerlaw, solve_gaussian, solve_particles
from hassejax.dynamics.diagnostics import limit_rank
from hassejax.plot.bounds import fmt_upper
from hassejax.plot.style import TEXT_WIDTH, figsize

NAME = "sinkhorn"
V_SPIRAL = np.array([[0.2, -1.0], [1.0, 0.2]])
A_CASES = {"A = −I": -np.eye(2), "A = diag(1, −1)": np.diag([1.0, -1.0]), "A = I": np.eye(2)}
A_LABELS = {"A = −I": "$A = -I$", "A = diag(1, −1)": "$A = \\mathrm{diag}(1, {-1})$", "A = I": "$A = I$"}
A_COLORS = {
    "A = −I": "#08306B",
    "A = diag(1, −1)": "#0072B2",
    "A = I": "#6BAED6",
}  # shades of the Sinkhorn blue, apart in grey
SIGMA0S = [np.eye(2), np.array([[2.0, 0.6], [0.6, 0.3]])]
ALPHA0 = np.array([1.0, 0.0])
N_PARTICLES = 64
T1_MEAN = 8.0
TOL, THRESHOLD, T1, T_LONG = 1e-4, 1e3, 1e5, 1e8  # the low-rank figure: the authors' stops (fig. 2) and a long solve


def _mean_part(quick: bool) -> tuple[dict, dict]:
    keys = list(A_CASES)
    models = [Sinkhorn(V=V_SPIRAL, A=A_CASES[k]) for k in keys for _ in SIGMA0S]
    covs = np.stack([s for _ in keys for s in SIGMA0S])
    batched = dc.stack_models(models)
    ts = np.linspace(0.0, T1_MEAN, 41)
    g = jax.jit(jax.vmap(lambda m, c: solve_gaussian(m, jnp.asarray(ALPHA0), c, t1=T1_MEAN, ts=ts, rtol=1e-10,
                                                     atol=1e-12, size_threshold=1e12)))  # fmt: skip
    gs = g(batched, covs)
    exact = np.stack([scipy.linalg.expm(t * V_SPIRAL) @ ALPHA0 for t in ts])
    g_err = np.linalg.norm(np.asarray(gs.mean) - exact, axis=-1) / np.linalg.norm(exact, axis=-1)
    # particles: one cloud from N(α0, Σ0 = I), one solve for each of the three A
    rng = np.random.default_rng(0)
    n_p = 16 if quick else N_PARTICLES
    z = rng.standard_normal((n_p, 2))
    x0 = ALPHA0 + z - z.mean(axis=0)  # the cloud's mean is α0 exactly
    # strict=False: the figure shows what the 1000-iteration cap does to the mean (A = I); by default the
    # solve would stop as non_finite where the iteration first misses its tolerance
    # at XLA's default level even under --quick: up to 1,000 Sinkhorn iterations an evaluation run far
    # longer than they compile (--quick: 12.5 s at level 0). One compiled solve called per A, not one vmap over
    # the three: under vmap every evaluation iterated to A = I's cap of 1,000 for all three (11.2 s; one by one
    # 4.4 s, the same numbers to the last bit)
    solve_one = jit_at_default_level(lambda m: solve_particles(m, x0, t1=T1_MEAN, ts=ts, rtol=1e-10, atol=1e-10))
    runs = [solve_one(Sinkhorn(V=V_SPIRAL, A=A_CASES[k], strict=False)) for k in keys]
    p = jax.tree.map(lambda *leaves: np.stack([np.asarray(x) for x in leaves]), *runs)
    p_mean = np.asarray(p.xs).mean(axis=2)
    p_exact = np.stack([scipy.linalg.expm(t * V_SPIRAL) @ x0.mean(axis=0) for t in ts])
    p_err = np.linalg.norm(p_mean - p_exact, axis=-1) / np.linalg.norm(p_exact, axis=-1)
    # the Sinkhorn iteration at the final configuration: marginal error and iterations (cap 1000)
    fin = [Sinkhorn(V=V_SPIRAL, A=A_CASES[k]).potential(0.0, np.asarray(p.x_final)[i]) for i, k in enumerate(keys)]
    tr_g = np.trace(np.asarray(gs.cov), axis1=-2, axis2=-1)
    tr_p = np.trace(np.asarray([[np.cov(x.T, bias=True) for x in xs] for xs in np.asarray(p.xs)]), axis1=-2, axis2=-1)
    rec = {
        "V": V_SPIRAL,
        "A_cases": A_CASES,
        "alpha0": ALPHA0,
        "Sigma0s": SIGMA0S,
        "t1": T1_MEAN,
        "gaussian": {
            "members": [f"{k}, Σ0 #{i}" for k in keys for i in range(len(SIGMA0S))],
            "status": dc.status_counts(np.asarray(gs.status)),
            "rel_error_mean_vs_expm_max": float(g_err.max()),
            "trace_Sigma_at_t1": tr_g[:, -1],
            "trace_Sigma_at_0": tr_g[:, 0],
        },
        "particles": {
            "n": n_p,
            "seed": 0,
            "x0": "α0 + standard normal draws (Σ0 = I) minus their mean: the cloud's mean is α0",
            "status": dc.status_counts(np.asarray(p.status)),
            "rel_error_mean_vs_expm_max_per_A": dict(zip(keys, g_max := p_err.max(axis=1))),
            "rel_error_mean_vs_expm_max": float(g_max.max()),
            "trace_empirical_cov_at_t1": dict(zip(keys, tr_p[:, -1])),
            "sinkhorn_tol": 1e-10,
            "sinkhorn_max_iter": 1000,
            "sinkhorn_at_t1_marginal_error": dict(zip(keys, [float(f[1]) for f in fin])),
            "sinkhorn_at_t1_iterations": dict(zip(keys, [int(f[2]) for f in fin])),
            "note": "the particle mean follows e^{tV}x̄0 to the Sinkhorn marginal error: where the cloud spreads "
            "(A = I) the iteration stops at its cap before reaching tol",
        },
        "solver": "diffrax Tsit5 (hassejax default), Gaussian rtol 1e-10 atol 1e-12, particles rtol = atol = 1e-10",
    }
    extra = {"ts": ts, "gs_mean": np.asarray(gs.mean), "exact": exact, "p_mean": p_mean, "p_exact": p_exact,
             "g_err": g_err, "p_err": p_err, "tr_g": tr_g, "tr_p": tr_p, "keys": keys}  # fmt: skip
    return rec, extra


def _draw_mean(o: Output, rec: dict, e: dict) -> None:
    # 0.42: the panel titles' superscripts (10^{k}) took their height from the axes at 0.40
    fig, axes = plt.subplots(1, 3, figsize=figsize(TEXT_WIDTH, 0.42), layout="constrained")
    ax = axes[0]
    ax.plot(e["exact"][:, 0], e["exact"][:, 1], "k-", lw=3.0, alpha=0.3)
    for i, m in enumerate(e["gs_mean"]):
        k = e["keys"][i // len(SIGMA0S)]
        ax.plot(m[:, 0], m[:, 1], "-", color=A_COLORS[k], lw=0.8)
    ax.plot(e["p_mean"][:, :, 0].T, e["p_mean"][:, :, 1].T, ":", color="k", lw=0.8)
    ax.set_aspect("equal")
    ax.set_xlabel("$\\alpha_1$")
    ax.set_ylabel("$\\alpha_2$")
    ax.set_title(f"mean $\\alpha(t)$, $t \\leq {T1_MEAN:g}$\n(grey: $e^{{tV}}\\alpha_0$)")
    ax = axes[1]
    for i, err in enumerate(e["g_err"]):
        ax.semilogy(e["ts"][1:], np.maximum(err[1:], 1e-17), "-", color=A_COLORS[e["keys"][i // len(SIGMA0S)]], lw=0.8)
    for i, err in enumerate(e["p_err"]):
        ax.semilogy(e["ts"][1:], np.maximum(err[1:], 1e-17), ":", color=A_COLORS[e["keys"][i]], lw=1.0)
    ax.set_xlabel("$t$")
    ax.set_ylabel("relative error of the mean")
    cap = rec["particles"]["sinkhorn_max_iter"]
    ax.set_ylim(top=1e-1)
    ax.text(0.03, 0.97, f"$A = I$, dotted: Sinkhorn\nat its {cap}-iteration cap", transform=ax.transAxes, va="top")
    pe = rec["particles"]["rel_error_mean_vs_expm_max_per_A"]
    ax.set_title(f"max {sci_tex(fmt_upper(rec['gaussian']['rel_error_mean_vs_expm_max'], 2))} (Gaussian);\nparticles "
                 f"{sci_tex(fmt_upper(max(pe['A = −I'], pe['A = diag(1, −1)']), 2))}, {sci_tex(fmt_upper(pe['A = I'], 2))} "
                 "($A = I$)")  # fmt: skip
    ax.grid(alpha=0.3)
    ax = axes[2]
    at_t1 = _trace_at(rec["gaussian"], "trace_Sigma_at_t1")
    starts = set(_trace_at(rec["gaussian"], "trace_Sigma_at_0").values())  # every A starts from the same Σ0s
    for i, tr in enumerate(e["tr_g"]):
        k = e["keys"][i // len(SIGMA0S)]
        ax.semilogy(e["ts"], tr, "-", color=A_COLORS[k], lw=1.0,
                    label=f"{A_LABELS[k]}: {at_t1[k]}" if i % len(SIGMA0S) == 0 else None)  # fmt: skip
    for i, tr in enumerate(e["tr_p"]):
        ax.semilogy(e["ts"], tr, ":", color=A_COLORS[e["keys"][i]], lw=1.0)
    ax.set_xlabel("$t$")
    ax.set_ylabel("$\\mathrm{tr}\\,\\Sigma(t)$")
    ax.set_title(
        f"$\\mathrm{{tr}}\\,\\Sigma(t)$ from {' / '.join(sorted(starts))} at $t = 0$\n"
        f"(its values at $t = {T1_MEAN:g}$: legend)"
    )
    fig.legend(loc="outside lower center", ncol=3, title=f"$A$: $\\mathrm{{tr}}\\,\\Sigma$ at $t = {T1_MEAN:g}$ "
               f"(Gaussian ODE, one value per $\\Sigma_0$)")  # fmt: skip
    ax.grid(alpha=0.3)
    fig.suptitle(
        "Castin et al. (arXiv:2501.18322), Sinkhorn attention: the mean follows $\\alpha' = V\\alpha$ whatever "
        f"$\\Sigma$ does\n(spiral $V$, three $A$, two $\\Sigma_0$ each: Gaussian ODE solid; "
        f"{rec['particles']['n']} particles dotted)"
    )
    o.savefig(fig, f"{NAME}_mean")


def _trace_at(g: dict, key: str) -> dict[str, str]:
    """The Gaussian solves' `tr Σ` at 0 or `t1` (`key`), per `A`: one value per `Σ0`, two digits. The endpoints
    only: the panel claims no limit (the solves stop at `t1`)."""
    n = len(SIGMA0S)
    return {k: ", ".join(f"{x:.2g}" for x in g[key][i * n : (i + 1) * n]) for i, k in enumerate(A_CASES)}


def _low_rank_part(quick: bool) -> tuple[dict, dict]:
    q = paper.FIG2_Q_ROW[None, :]
    model = paper.sinkhorn_model(np.eye(2), q, -q)
    grid = geometry.trace_one_grid(10, 10, -0.5, 0.5)
    n = grid.shape[0]
    capacity = dc.CAPACITY
    sol = dc.solve_for_plot(model, grid, t1=T1, threshold=THRESHOLD, tol=TOL, capacity=capacity)
    long = dc.solve(model, grid, t1=T_LONG, threshold=THRESHOLD, tol=dc.NO_STOP_TOL, capacity=capacity,
                    ts=dc.log_times(T_LONG, n))  # fmt: skip
    ev = np.linalg.eigvalsh(long["cov"])  # (N, T, 2), ascending
    t = long["ts"][0]
    slopes = powerlaw.loglog_slope(long["ts"], ev[:, :, 0], long["valid"], last_decades=2.0)
    angle_perp = float(geometry.rank_one_direction_angle(np.outer(paper.FIG2_Q_PERP, paper.FIG2_Q_PERP)))
    ang = geometry.rank_one_direction_angle(long["cov_final"])
    rec = {
        "Q": q,
        "K": -q,
        "V": np.eye(2),
        "A": np.asarray(model.A),
        "grid": {"n_u": 10, "n_w": 10, "limits": [-0.5, 0.5], "members": n},
        "authors_stop": {"t1": T1, "tol": TOL, "threshold": THRESHOLD, "status": dc.status_counts(sol["status"])},
        "long_horizon": {
            "t1": T_LONG,
            "status": dc.status_counts(long["status"]),
            "exact_limit_rank_(eigenvalues > 1e-6 λ_max)": dc.value_counts(np.asarray(limit_rank(long["cov_final"]))),
            "lambda_max_at_t1_range": dc.minmax(ev[:, -1, 1]),
            "lambda_min_at_t1_range": dc.minmax(ev[:, -1, 0]),
            "t_lambda_min_at_t1_range": dc.minmax(T_LONG * ev[:, -1, 0]),
            "loglog_slope_lambda_min_last_2_decades_range": dc.minmax(slopes),
            "top_direction_deg_range": dc.minmax(ang),
            "q_perp_direction_deg": angle_perp,
            "q_perp_disk_angle_deg": 2 * angle_perp,  # where the disk places q⊥q⊥ᵀ: (cos 2θ, sin 2θ)
        },
        "solver": dc.solver_record(sol),
    }
    return rec, {"sol": sol, "ev": ev, "t": t, "angle_perp": angle_perp}


def _draw_low_rank(o: Output, rec: dict, e: dict) -> None:
    fig, axes = plt.subplots(1, 2, figsize=figsize(TEXT_WIDTH, 0.45), layout="constrained")
    n = rec["grid"]["members"]
    lr = rec["long_horizon"]
    dplot.draw_disk(axes[0], dc.trajectories(e["sol"]), ["tab:blue"] * n)
    th = np.radians(2 * e["angle_perp"])
    disk_deg = rec["long_horizon"]["q_perp_disk_angle_deg"]
    star = f"$q^\\perp$ ({e['angle_perp']:.2f}°), drawn at twice that angle ({disk_deg:.2f}°)".replace("-", "−")
    axes[0].plot(np.cos(th), np.sin(th), "*", color="tab:red", ms=10, mec="k", mew=0.5, zorder=5, label=star)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower left")
    axes[0].set_title(
        f"$\\Sigma/\\mathrm{{tr}}\\,\\Sigma$ to the authors' stop ({rec['authors_stop']['status'].get('converged', 0)}/{n} converge)"
    )
    ax = axes[1]
    for k in range(e["ev"].shape[0]):
        ax.loglog(e["t"][1:], e["ev"][k, 1:, 1], "-", color="tab:orange", lw=0.5, alpha=0.5)
        ax.loglog(e["t"][1:], e["ev"][k, 1:, 0], "-", color="tab:blue", lw=0.5, alpha=0.5)
    ax.plot([], [], color="tab:orange", label="$\\lambda_{\\max}(\\Sigma(t))$")
    ax.plot([], [], color="tab:blue", label="$\\lambda_{\\min}(\\Sigma(t))$")
    lo, hi = lr["loglog_slope_lambda_min_last_2_decades_range"]
    ax.set_title(f"slope of $\\lambda_{{\\min}}$ on $[10^6, 10^8]$: {_span(lo, hi, '.4f')}".replace("-", "−"))
    ax.set_xlabel("$t$")
    ax.set_ylabel("eigenvalues of $\\Sigma(t)$")
    ax.legend(loc="lower left")
    ax.grid(alpha=0.3)
    ranks = lr["exact_limit_rank_(eigenvalues > 1e-6 λ_max)"]
    a_lo, a_hi = lr["top_direction_deg_range"]
    fig.suptitle(
        "Castin et al. (arXiv:2501.18322) fig. 2 with Sinkhorn ($V = I$, $A = -q^\\top q$): clustering to rank one\n"
        f"rank at $t = 10^8$: {', '.join(f'{v} of {n} rank {r}' for r, v in ranks.items())}; "
        f"top direction {_span(a_lo, a_hi, '.2f', '°')} ($q^\\perp$: {e['angle_perp']:.2f}°)".replace("-", "−")
    )
    o.savefig(fig, f"{NAME}_low_rank")


def _span(lo: float, hi: float, spec: str, unit: str = "") -> str:
    """`lo to hi` in format `spec`; one value where both print alike (a referee: "−23.97° to −23.97°")."""
    a, b = format(lo, spec), format(hi, spec)
    return f"{a}{unit}" + ("" if a == b else f" to {b}{unit}") + (" (all members)" if a == b else "")


def main(out: Path, quick: bool = False) -> dict:
    o = Output(out, NAME)
    dc.TIMER.reset()  # this experiment's solves only (a worker process runs several)
    mean_rec, mean_extra = _mean_part(quick)
    _draw_mean(o, mean_rec, mean_extra)
    lr_rec, lr_extra = _low_rank_part(quick)
    _draw_low_rank(o, lr_rec, lr_extra)
    o.write_json(
        {
            "figure": "Sinkhorn attention (Castin et al., arXiv:2501.18322): the mean follows α' = Vα whatever Σ does "
            "(sinkhorn_mean); clustering to rank one in figure 2's setting (sinkhorn_low_rank)",
            "mean": mean_rec,
            "low_rank": lr_rec,
            "events_note": dc.EVENTS_NOTE,
            "timing": dc.TIMER.as_dict(),
        },
        seeds={"particles": 0},
    )
    return {
        "key": f"mean vs e^(tV)α0: max rel. {fmt_upper(mean_rec['gaussian']['rel_error_mean_vs_expm_max'], 2)} (Gaussian), "
        f"{fmt_upper(mean_rec['particles']['rel_error_mean_vs_expm_max'], 2)} (particles); low rank: "
        f"{lr_rec['long_horizon']['exact_limit_rank_(eigenvalues > 1e-6 λ_max)']}"
    }


if __name__ == "__main__":
    cli(main, NAME, __doc__)
