"""Mean-field limit: particle moments against the Gaussian moment ODE as n grows (Castin et al., arXiv:2501.18322).

The `n` initial tokens are a moment-matched sample of `N(α0, Σ0)`
(:func:`hassejax.dynamics.sampling.antithetic_sample`: whitened draws and their mirror
images, so the empirical mean and covariance equal `α0` and `Σ0` to rounding and the odd
moments vanish). The error at `t = 0` is therefore zero, and the error at `t > 0` is the
error the dynamics itself creates from the higher moments of a finite sample (propagation
of chaos), not the Monte Carlo error of the sample. The softmax particle system
(:func:`hassejax.dynamics.solve_particles`) runs to `t = 2`; its empirical mean and
covariance (normalised by `n`) at `t = 0.25, 0.5, 1, 2` are compared with the Gaussian
moment ODE (:func:`hassejax.dynamics.solve_gaussian`, rtol 1e-10). Every `n` has the same
number of seeds. For each `t` the least-squares slope of `log RMS error` (over the seeds)
against `log n` is reported, with a 95 % bootstrap interval over seeds. For reference the
error of an i.i.d. sample of the same size at `t = 0` (the Monte Carlo error the matched
sample removes) is drawn too.

Parameters: the convergence-to-two-lines example (fig. 4 of the paper: `Q`, `K`, `V`, the
paper's scaling `A = KᵀQ/√2`; `V` and `A` not symmetric), `α0 = (0.3, −0.2)`,
`Σ0 = [[0.5, 0.1], [0.1, 0.3]]`.
"""

from __future__ import annotations

import jax

FLOAT64 = True  # JAX's float64 mode: on here, and again before main() when reproduce.py runs it
jax.config.update("jax_enable_x64", FLOAT64)

import time
from pathlib import Path

import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from _common import Output, cli
from matplotlib.ticker import FormatStrFormatter

from hassejax._xla_flags import DEFAULT_LEVEL, sweep_compiler_options
from hassejax.dynamics import Softmax, paper, solve_gaussian, solve_particles, status_names
from hassejax.dynamics.diagnostics import empirical_covariance
from hassejax.dynamics.powerlaw import bootstrap_slope, loglog_fit, rms
from hassejax.dynamics.sampling import antithetic_sample
from hassejax.dynamics.sweeps import sweep
from hassejax.plot.bounds import fmt_lower, fmt_upper
from hassejax.plot.style import TEXT_WIDTH, figsize

# Sums over up to 4,096 tokens a step: XLA's default level and fusion emitters for these sweeps. With jaxlib 0.10.2's
# reductions kept out of YNNPACK (hassejax._xla_flags.correctness_flags) the legacy emitters' reductions made this
# experiment 1.57x slower (71.4 -> 112.4 s in the full run); where the sweep takes no emitter option, the level alone.
PARTICLE_OPTIONS = DEFAULT_LEVEL | ({"xla_cpu_use_fusion_emitters": True} if sweep_compiler_options("cpu") else {})

NAME = "mean_field"
SEED = 0
MEAN0 = np.array([0.3, -0.2])
SIGMA0 = np.array([[0.5, 0.1], [0.1, 0.3]])
TIMES = np.array([0.0, 0.25, 0.5, 1.0, 2.0])
"""Saved depths; the first is the initial sample (error at rounding level by construction)."""
SIZES_FULL = [64, 128, 256, 512, 1024, 2048, 4096]
SIZES_QUICK = [64, 128, 256]
SEEDS_FULL, SEEDS_QUICK = 16, 4
"""Seeds per size, the same for every `n`."""
BOOTSTRAP = 2000
QUANTITIES = {"mean": r"$\|\bar x(t) - \alpha(t)\|_2$", "cov": r"$\|\hat\Sigma(t) - \Sigma(t)\|_F$"}


def minus(x: float, spec: str = ".2f") -> str:
    """`x` formatted with a typographic minus."""
    return format(x, spec).replace("-", "−")


def outward(lo: float, hi: float) -> tuple[float, float]:
    """An interval printed with two significant digits, rounded outwards (`lo` down, `hi` up)."""
    return float(fmt_lower(lo, 2)), float(fmt_upper(hi, 2))


def chunk_for(n: int) -> int:
    """Seeds solved together in one vmapped program (bounded memory: `4096/n`, at most 16)."""
    return int(max(1, min(16, 4096 // n)))


def model() -> Softmax:
    """Fig. 4 parameters with the paper's softmax scaling."""
    return paper.softmax_model(paper.FIG4_V, paper.FIG4_Q, paper.FIG4_K)


MODEL = model()


def particle_member(p):
    """One seed, `p = {"x0": (n, d)}`: the particle solve saved at :data:`TIMES` (module level: compiled once per `n`)."""
    sol = solve_particles(MODEL, p["x0"], t1=float(TIMES[-1]), ts=jnp.asarray(TIMES))
    return {"xs": sol.xs, "status": sol.status}


def sample_key(n: int, seed: int):
    return jax.random.fold_in(jax.random.fold_in(jax.random.key(SEED), n), seed)


def main(out: Path, quick: bool = False) -> dict:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    o = Output(out, NAME)
    sizes = SIZES_QUICK if quick else SIZES_FULL
    n_seeds = SEEDS_QUICK if quick else SEEDS_FULL
    gauss = solve_gaussian(MODEL, MEAN0, SIGMA0, t1=float(TIMES[-1]), ts=jnp.asarray(TIMES), rtol=1e-10, atol=1e-12)
    mean_g, cov_g = np.asarray(gauss.mean), np.asarray(gauss.cov)  # (T, d), (T, d, d)
    err = {q: np.zeros((len(TIMES), len(sizes), n_seeds)) for q in QUANTITIES}
    iid0 = {q: np.zeros((len(sizes), n_seeds)) for q in QUANTITIES}
    statuses = set()
    for j, n in enumerate(sizes):
        x0 = np.stack([antithetic_sample(sample_key(n, s), MEAN0, SIGMA0, n) for s in range(n_seeds)])
        res = sweep(particle_member, {"x0": jnp.asarray(x0)}, chunk_size=chunk_for(n), progress=False,
                    shard=len(jax.devices()) > 1, compiler_options=PARTICLE_OPTIONS)  # fmt: skip
        statuses.update(status_names(np.asarray(res["status"])).tolist())
        xs = np.asarray(res["xs"])  # (seeds, T, n, d)
        cov = np.asarray(empirical_covariance(xs))
        err["mean"][:, j] = np.linalg.norm(xs.mean(2) - mean_g, axis=-1).T
        err["cov"][:, j] = np.linalg.norm(cov - cov_g, axis=(-2, -1)).T
        # the Monte Carlo error an i.i.d. sample of the same size would start with (same keys)
        xi = np.stack(
            [np.asarray(jax.random.multivariate_normal(sample_key(n, s), MEAN0, SIGMA0, (n,))) for s in range(n_seeds)]
        )
        iid0["mean"][j] = np.linalg.norm(xi.mean(1) - MEAN0, axis=-1)
        iid0["cov"][j] = np.linalg.norm(np.asarray(empirical_covariance(xi)) - SIGMA0, axis=(-2, -1))
    if statuses != {"completed"}:
        raise RuntimeError(f"a particle solve did not complete: statuses {sorted(statuses)}")
    sizes_a = np.asarray(sizes, float)
    rms_err = {q: rms(e) for q, e in err.items()}  # (T, sizes)
    rms_iid0 = {q: rms(e) for q, e in iid0.items()}
    rng = np.random.default_rng(SEED)
    slopes, intervals = {}, {}
    for q in QUANTITIES:
        slopes[q] = [loglog_fit(sizes_a, rms_err[q][i])[0] for i in range(1, len(TIMES))]
        intervals[q] = [bootstrap_slope(sizes_a, list(err[q][i]), rng, reps=BOOTSTRAP) for i in range(1, len(TIMES))]
    slope_iid0 = {q: loglog_fit(sizes_a, rms_iid0[q])[0] for q in QUANTITIES}
    max_err_t0 = {q: float(err[q][0].max()) for q in QUANTITIES}
    ratio_to_iid = {q: rms_err[q][1:] / rms_iid0[q] for q in QUANTITIES}  # (T−1, sizes)
    t0_bound = fmt_upper(max(max_err_t0.values()), 2)  # the printed "≤" bound, rounded up
    ivs = [iv for q in QUANTITIES for iv in intervals[q]]
    envelope = [min(lo for lo, _ in ivs), max(hi for _, hi in ivs)]
    n_slopes = sum(len(slopes[q]) for q in QUANTITIES)
    n_shallow = sum(sl > -0.5 for q in QUANTITIES for sl in slopes[q])  # fitted slopes shallower than −1/2
    contains_half = {q: {f"t={t:g}": bool(lo <= -0.5 <= hi) for t, (lo, hi) in zip(TIMES[1:], intervals[q])}
                     for q in QUANTITIES}  # fmt: skip

    all_contain_half = all(v for c in contains_half.values() for v in c.values())

    # --- figure 1: RMS error against n, one line per depth
    colors = plt.get_cmap("viridis")(np.linspace(0.0, 0.85, len(TIMES) - 1))
    fig, axes = plt.subplots(1, 2, figsize=figsize(TEXT_WIDTH, 0.78), layout="constrained")
    for ax, (q, label) in zip(axes, QUANTITIES.items()):
        ax.plot(
            sizes_a,
            rms_iid0[q],
            "s--",
            color="0.55",
            ms=3,
            label=f"i.i.d. sample, $t$ = 0 (slope {minus(slope_iid0[q])})",
        )
        for i in range(1, len(TIMES)):
            lo, hi = outward(*intervals[q][i - 1])
            series = f"$t$ = {TIMES[i]:g}: slope {minus(slopes[q][i - 1])} [{minus(lo)}, {minus(hi)}]"
            ax.plot(sizes_a, rms_err[q][i], "o-", color=colors[i - 1], ms=3, label=series)
        ref = rms_err[q][-1][0] * (sizes_a / sizes_a[0]) ** -0.5
        ax.plot(sizes_a, ref, ":", color="k", label=r"slope $-1/2$")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(r"number of tokens $n$")
        ax.set_ylabel(f"RMS over seeds of {label}")
        ax.grid(alpha=0.3, which="both")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), handlelength=1.6, frameon=False)
        ax.set_title(f"{'mean' if q == 'mean' else 'covariance'}: error at $t > 0$", loc="left")
    fig.suptitle(
        f"Moment-matched initial samples (error at $t$ = 0 ≤ {t0_bound}), {n_seeds} seeds per $n$: "
        "particles vs Gaussian ODE"
        "\nlog-log slopes with 95 % bootstrap intervals over seeds, rounded outwards"
        "\n(all four depths are read from the same runs)"
    )
    o.savefig(fig, "mean_field")

    # --- figure 2: √n × RMS error against depth, one line per n (the curves meet if the error is ∝ n^{-1/2})
    # one marker shape per n (the colours of neighbouring n are close), viridis for a monotone lightness
    ncol = plt.get_cmap("viridis")(np.linspace(0.0, 0.9, len(sizes)))
    nmark = ["o", "s", "^", "D", "v", "P", "X", "*", "h"]
    fig, axes = plt.subplots(1, 2, figsize=figsize(TEXT_WIDTH, 0.5), layout="constrained")  # room for the legend
    for ax, (q, label) in zip(axes, QUANTITIES.items()):
        for j, n in enumerate(sizes):
            ax.plot(TIMES, np.sqrt(n) * rms_err[q][:, j], "-", marker=nmark[j % len(nmark)], ms=4, mfc="none",
                    mew=0.9, lw=0.9, color=ncol[j], label=f"$n$ = {n}")  # fmt: skip
        ax.set_xlabel(r"depth $t$")
        ax.set_ylabel(r"$\sqrt{n}\,\times$ RMS of " + label)
        ax.set_xticks(TIMES)
        ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()  # below the panels: no point hidden at any n or depth
    fig.legend(handles, labels, loc="outside lower center", ncol=len(sizes), handlelength=1.2, columnspacing=0.8)
    fig.suptitle(
        r"Moment-matched starts: $\sqrt{n}\,\times$ RMS error against depth (≈ 0 at $t$ = 0: rounding error only):"
        "\nthe dynamics turn the sample's higher-moment differences from the Gaussian"
        "\ninto mean and covariance error (measured for moment-matched starts, not for i.i.d. ones)"
        + (
            f";\nthe 95 % bootstrap interval of each of the {n_slopes} log-log slopes in $n$ (first figure) "
            "contains $-1/2$"
            if all_contain_half
            else ""
        )
    )
    o.savefig(fig, "mean_field_time")

    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    o.write_json(
        {
            "setup": {
                "kind": "softmax",
                "V": paper.FIG4_V,
                "A": np.asarray(MODEL.A),
                "mean0": MEAN0,
                "Sigma0": SIGMA0,
                "times": TIMES,
                "sizes": sizes,
                "seeds_per_size": n_seeds,
                "initial_sample": "antithetic_sample: whitened N(0, I) draws and their mirror images mapped by a square "
                "root of Sigma0 (empirical mean and covariance equal mean0 and Sigma0; odd moments 0)",
                "iid_reference": "jax.random.multivariate_normal with the same keys, error at t = 0 only (no solve)",
                "particle_solver": "Tsit5 rtol 1e-6 (library default)",
                "gaussian_solver": "Tsit5 rtol 1e-10",
                "covariance": "empirical, normalised by n",
                "error": "Euclidean norm of the mean error, Frobenius norm of the covariance error; RMS over seeds",
            },
            "gaussian": {"mean": mean_g, "cov": cov_g, "status": status_names(gauss.status)},
            "max_error_at_t0_matched_sample": max_err_t0,
            "max_error_at_t0_printed_bound": t0_bound,
            "errors_per_seed": {q: {f"t={t:g}": e for t, e in zip(TIMES, err[q])} for q in QUANTITIES},
            "rms_errors": {q: {f"t={t:g}": e for t, e in zip(TIMES, rms_err[q])} for q in QUANTITIES},
            "iid_sample_error_t0_per_seed": iid0,
            "iid_sample_rms_error_t0": rms_iid0,
            "iid_sample_loglog_slope_t0": slope_iid0,
            "loglog_slopes": {q: {f"t={t:g}": s for t, s in zip(TIMES[1:], slopes[q])} for q in QUANTITIES},
            "loglog_slope_bootstrap_95": {
                q: {f"t={t:g}": iv for t, iv in zip(TIMES[1:], intervals[q])} for q in QUANTITIES
            },
            "loglog_slope_bootstrap_95_envelope": envelope,
            "loglog_slope_bootstrap_95_printed_outward": {
                q: {f"t={t:g}": outward(*iv) for t, iv in zip(TIMES[1:], intervals[q])} for q in QUANTITIES
            },
            "loglog_slope_bootstrap_95_envelope_printed_outward": outward(*envelope),
            "bootstrap_interval_contains_minus_half": contains_half,
            "all_bootstrap_intervals_contain_minus_half": all_contain_half,
            "loglog_slopes_shallower_than_minus_half": {"count": n_shallow, "of": n_slopes},
            "slopes_note": "the four depths are read from the same runs (same samples, one solve each), so their "
            "slopes and intervals are not independent",
            "sqrt_n_times_rms_error": {
                q: {f"t={t:g}": np.sqrt(sizes_a) * e for t, e in zip(TIMES, rms_err[q])} for q in QUANTITIES
            },
            "rms_error_over_iid_t0_error": {
                q: {f"t={t:g}": r for t, r in zip(TIMES[1:], ratio_to_iid[q])} for q in QUANTITIES
            },
            "timing": {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)},
        },
        seeds={"base": SEED, "per_run": "fold_in(fold_in(key(0), n), seed), seed = 0 … seeds_per_size − 1"},
    )
    s = {q: ", ".join(f"{x:.2f}" for x in slopes[q]) for q in QUANTITIES}
    return {
        "key": f"matched samples (t = 0 error ≤ {t0_bound}); log-log slopes at t = "
        f"{', '.join(f'{t:g}' for t in TIMES[1:])}: mean {s['mean']}; covariance {s['cov']} "
        f"(n = {sizes[0]}…{sizes[-1]}, {n_seeds} seeds per n)"
    }


if __name__ == "__main__":
    cli(main, NAME, __doc__)
