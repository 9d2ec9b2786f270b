"""Mean-field limit: particle moments against the Gaussian moment ODE as n grows (spec dynamics.md §5, §7b item 12).

Sample `n` tokens i.i.d. from `N(α0, Σ0)`, run the softmax particle system
(:func:`hassejax.dynamics.solve_particles`) to depth `t = 1`, and compare the empirical mean
and covariance (normalised by `n`) with the solution of the Gaussian moment ODE
(:func:`hassejax.dynamics.solve_gaussian`, rtol 1e-10). The error is a sampling error, so
it falls like `n^{-1/2}`: the least-squares slope of `log RMS error` (over the seeds)
against `log n` is reported, at `t = 1` and, for reference, at `t = 0` (the sample itself).

Parameters: item 4 of spec §7a (`Q`, `K`, `V`, the paper's scaling `A = KᵀQ/√2`; `V` and `A`
not symmetric), `α0 = (0.3, −0.2)`, `Σ0 = [[0.5, 0.1], [0.1, 0.3]]`.
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

from hassejax.dynamics import Softmax, paper, solve_gaussian, solve_particles, status_names
from hassejax.dynamics.diagnostics import empirical_covariance
from hassejax.dynamics.powerlaw import bootstrap_slope, loglog_fit, rms
from hassejax.dynamics.sweeps import sweep

NAME = "mean_field"
SEED = 0
MEAN0 = np.array([0.3, -0.2])
SIGMA0 = np.array([[0.5, 0.1], [0.1, 0.3]])
T = 1.0
SIZES_FULL = [64, 128, 256, 512, 1024, 2048, 4096]
SIZES_QUICK = [64, 128]  # two sizes (one compiled solve each) still give a slope
BOOTSTRAP = 2000


def seeds_for(n: int, quick: bool = False) -> int:
    """Seeds at size `n`: at least 5, more for small `n` (cheap), so the RMS at every `n` is
    estimated about equally well (`16384/n`, capped at 64; quick: `4096/n`)."""
    return int(min(64, max(5, (4096 if quick else 16384) // n)))


def chunk_for(n: int) -> int:
    """Seeds solved together in one vmapped program (bounded memory: `4096/n`, at most 64)."""
    return int(max(1, min(64, 4096 // n)))


def model() -> Softmax:
    """Item 4 parameters with the paper's softmax scaling."""
    return paper.softmax_model(paper.FIG4_V, paper.FIG4_Q, paper.FIG4_K)


MODEL = model()


def particle_member(p):
    """One seed, `p = {"x0": (n, d)}`: the particle solve to `t = T` (module level: :func:`sweep` compiles once per `n`)."""
    sol = solve_particles(MODEL, p["x0"], t1=T, ts=jnp.array([0.0, T]))
    return {"xs": sol.xs, "status": sol.status}


def main(out: Path, quick: bool = False) -> dict:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    o = Output(out, NAME)
    sizes = SIZES_QUICK if quick else SIZES_FULL
    p = MODEL
    gauss = solve_gaussian(p, MEAN0, SIGMA0, t1=T, rtol=1e-10, atol=1e-12)
    mean_t, cov_t = np.asarray(gauss.mean_final), np.asarray(gauss.cov_final)
    err = {k: [] for k in ("mean_t0", "cov_t0", "mean_t1", "cov_t1")}
    statuses = set()
    key = jax.random.key(SEED)
    for n in sizes:
        n_seeds = seeds_for(n, quick)
        x0 = jnp.stack(
            [
                jax.random.multivariate_normal(jax.random.fold_in(jax.random.fold_in(key, n), s), MEAN0, SIGMA0, (n,))
                for s in range(n_seeds)
            ]
        )
        out = sweep(particle_member, {"x0": x0}, chunk_size=chunk_for(n), progress=False, shard=len(jax.devices()) > 1)
        statuses.update(status_names(np.asarray(out["status"])).tolist())
        xs = np.asarray(out["xs"])  # (seeds, 2, n, d)
        cov = np.asarray(empirical_covariance(xs))
        err["mean_t0"].append(np.linalg.norm(xs[:, 0].mean(1) - MEAN0, axis=-1))
        err["cov_t0"].append(np.linalg.norm(cov[:, 0] - SIGMA0, axis=(-2, -1)))
        err["mean_t1"].append(np.linalg.norm(xs[:, 1].mean(1) - mean_t, axis=-1))
        err["cov_t1"].append(np.linalg.norm(cov[:, 1] - cov_t, axis=(-2, -1)))
    if statuses != {"completed"}:
        raise RuntimeError(f"a particle solve did not complete: statuses {sorted(statuses)}")
    sizes_a = np.asarray(sizes)
    rms_err = {k: np.array([rms(e) for e in v]) for k, v in err.items()}
    fits = {k: loglog_fit(sizes_a, v) for k, v in rms_err.items()}
    rng = np.random.default_rng(SEED)
    intervals = {k: bootstrap_slope(sizes_a, v, rng, reps=BOOTSTRAP) for k, v in err.items()}
    n_seeds_list = [seeds_for(n, quick) for n in sizes]

    fig, axes = plt.subplots(1, 2, figsize=(13, 6.6), layout="constrained")
    for ax, (what, label) in zip(
        axes, [("mean", "‖mean of particles − α(t)‖₂"), ("cov", "‖covariance of particles − Σ(t)‖_F")]
    ):
        s1, c1 = fits[f"{what}_t1"]
        s0, _ = fits[f"{what}_t0"]
        lo, hi = intervals[f"{what}_t1"]
        for i, n in enumerate(sizes):
            e = err[f"{what}_t1"][i]
            jitter = np.exp(np.linspace(-0.08, 0.08, len(e)))
            ax.scatter(n * jitter, e, s=6, color="C0", alpha=0.3, lw=0, label="t = 1, one seed" if i == 0 else None)
        ax.plot(
            sizes_a,
            rms_err[f"{what}_t1"],
            "o-",
            color="C0",
            lw=1.8,
            label=f"t = {T:g}, RMS over seeds: slope {s1:.3f} (95% bootstrap {lo:.2f} … {hi:.2f})",
        )
        ax.plot(
            sizes_a,
            rms_err[f"{what}_t0"],
            "s--",
            color="C1",
            lw=1.2,
            ms=4,
            label=f"t = 0 (the sample), RMS: slope {s0:.3f}",
        )
        ax.plot(sizes_a, np.exp(c1) * sizes_a**-0.5, ":", color="k", lw=1.2, label="reference slope −1/2")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(f"number of tokens n  (seeds per n: {', '.join(map(str, n_seeds_list))})")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3, which="both")
        # limits fitted to everything drawn (seeds, RMS at t = 0 and 1, reference); legend below the axes
        pts = np.concatenate(
            [*err[f"{what}_t1"], rms_err[f"{what}_t0"], rms_err[f"{what}_t1"], np.exp(c1) * sizes_a**-0.5]
        )
        ax.set_ylim(pts.min() / 1.4, pts.max() * 1.4)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=1)
        ax.set_title(f"{'Mean' if what == 'mean' else 'Covariance'} error at t = {T:g}", fontsize=10)
    fig.suptitle(
        f"Mean field: softmax particles (item 4 parameters, n i.i.d. from N(α0, Σ0)) vs the Gaussian moment ODE at t = {T:g}: "
        f"log-log slopes {fits['mean_t1'][0]:.2f} (mean), {fits['cov_t1'][0]:.2f} (covariance), expected −1/2",
        fontsize=11,
    )
    o.savefig(fig, "mean_field")
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    o.write_json(
        {
            "setup": {
                "kind": "softmax",
                "V": paper.FIG4_V,
                "A": np.asarray(p.A),
                "mean0": MEAN0,
                "Sigma0": SIGMA0,
                "t": T,
                "sizes": sizes,
                "seeds_per_size": n_seeds_list,
                "particle_solver": "Tsit5 rtol 1e-6 (library default)",
                "gaussian_solver": "Tsit5 rtol 1e-10",
                "covariance": "empirical, normalised by n",
            },
            "gaussian_at_t": {"mean": mean_t, "cov": cov_t, "status": status_names(gauss.status)},
            "errors": err,
            "rms_errors": rms_err,
            "loglog_slopes": {k: v[0] for k, v in fits.items()},
            "loglog_slope_bootstrap_95": intervals,
            "timing": {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)},
        },
        seeds={"base": SEED, "per_run": "fold_in(fold_in(key(0), n), seed)"},
    )
    return {
        "key": f"log-log slope at t = {T:g}: {fits['mean_t1'][0]:.3f} (mean), {fits['cov_t1'][0]:.3f} (covariance) over n = {sizes[0]}…{sizes[-1]}, {min(n_seeds_list)}–{max(n_seeds_list)} seeds per n"
    }


if __name__ == "__main__":
    cli(main, NAME, __doc__)
