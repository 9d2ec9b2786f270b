"""The stability estimate measured: `W2(μ_t, ν_t) <= C(t) W2(μ0, ν0)` for softmax particles (Castin et al., arXiv:2501.18322).

Two nearby initial empirical measures with `n` points each, a Gaussian sample `x0` and a
perturbation `y0 = x0 + δξ` (`ξ` standard normal), evolved by the softmax particle dynamics
(:func:`hassejax.dynamics.solve_particles`, `V = I`, `A = −I`, β = 1, d = 2: the twisted gradient
flow `V = −A` of spec dynamics.md §6). `W2` between the solutions at every save time is an
assignment problem (:func:`hassejax.dynamics.wasserstein.empirical_w2`, SciPy's
``linear_sum_assignment``). Against it:

- `C(t) = exp(∫ L(R(s)) ds)`, the Grönwall constant of :mod:`hassejax.dynamics.stability`
  (derived): `L(R)` a Lipschitz constant of the particle velocities on the ball of radius `R`,
  `R` the largest token norm of both solutions at the save times (grown by `e^{‖V‖h}` between
  them), so `C(t)` bounds the ratio for any perturbation whose solutions stay in that ball;
- the linearised estimate `exp(∫ μ(J(X(s))) ds)`, `μ` the logarithmic norm of the velocity
  Jacobian along the unperturbed solution (derived): the first-order growth of a tiny perturbation.
"""

from __future__ import annotations

import jax

FLOAT64 = True  # JAX's float64 mode: on here, and again before main() when reproduce.py runs it
jax.config.update("jax_enable_x64", FLOAT64)

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from _common import Output, cli
from matplotlib.ticker import FuncFormatter

from hassejax.dynamics import Softmax, solve_particles, status_names
from hassejax.dynamics.stability import log_linearised_growth, log_stability_constant
from hassejax.dynamics.wasserstein import empirical_w2
from hassejax.plot.style import TEXT_WIDTH, figsize

NAME = "stability_estimate"
SEED = 0
V = np.eye(2)
A = -np.eye(2)
SPREADS = (0.05, 0.2)  # Σ0 = spread · I
DELTAS = (1e-3, 1e-2, 1e-1)
T1 = 2.0
TOL = 1e-10
LIN_EVERY = 4  # the linearised estimate at every 4th save time (a Jacobian of size nd × nd each)


def _up(x: float, decimals: int) -> str:
    """``x`` rounded UP to ``decimals`` places (a printed maximum stays an upper bound)."""
    return f"{math.ceil(round(x * 10**decimals, 9)) / 10**decimals:.{decimals}f}"


def _down(x: float, decimals: int) -> str:
    """``x`` rounded DOWN to ``decimals`` places (a printed minimum stays a lower bound)."""
    return f"{math.floor(round(x * 10**decimals, 9)) / 10**decimals:.{decimals}f}"


def main(out: Path, quick: bool = False) -> dict:
    o = Output(out, NAME)
    n = 16 if quick else 64
    n_seeds = 1 if quick else 3
    ts = np.linspace(0.0, T1, 41 if quick else 201)
    model = Softmax(V=V, A=A)
    rng = np.random.default_rng(SEED)

    def solve(x0):
        sol = solve_particles(model, x0, t1=T1, ts=ts, rtol=TOL, atol=TOL)
        status = status_names(sol.status)
        if status != "completed":
            raise RuntimeError(f"particle solve stopped: {status}")
        return np.asarray(sol.xs)

    pairs, bases = [], []
    for spread in SPREADS:
        for seed in range(n_seeds):
            x0 = rng.multivariate_normal(np.zeros(2), spread * np.eye(2), size=n)
            X = solve(x0)
            lin = log_linearised_growth(model, X[::LIN_EVERY], ts[::LIN_EVERY]) / np.log(10.0)
            bases.append(
                {"spread": spread, "seed": seed, "log10_linearised": lin, "radius0": np.linalg.norm(x0, axis=1).max()}
            )
            for delta in DELTAS:
                Y = solve(x0 + delta * rng.normal(size=x0.shape))
                w2 = np.array([empirical_w2(a, b)[0] for a, b in zip(X, Y, strict=True)])
                sigma0 = empirical_w2(X[0], Y[0])[1]
                coupling = np.sqrt(np.mean(np.sum((X - Y[:, sigma0]) ** 2, axis=-1), axis=-1))
                radii = np.maximum(np.linalg.norm(X, axis=-1).max(-1), np.linalg.norm(Y, axis=-1).max(-1))
                log10_c = log_stability_constant(ts, radii, V, A) / np.log(10.0)
                ratio = w2 / w2[0]
                pairs.append({
                    "spread": spread, "seed": seed, "delta": delta, "w2": w2, "ratio": ratio,
                    "coupling_time0": coupling, "radius": radii, "log10_C": log10_c,
                    "bound_holds": bool(np.all(np.log10(ratio) <= log10_c)),
                    "ratio_max": float(ratio.max()), "ratio_final": float(ratio[-1]),
                    "log10_C_final": float(log10_c[-1]),
                    "log10_slack_final": float(log10_c[-1] - np.log10(ratio[-1])),
                    "ratio_over_linearised_max": float(np.max(ratio[::LIN_EVERY][1:] / 10.0 ** lin[1:])),  # t > 0
                })  # fmt: skip

    holds = sum(p["bound_holds"] for p in pairs)
    per = {
        spread: {
            "ratio_max": max(p["ratio_max"] for p in pairs if p["spread"] == spread),
            "log10_C_final_min": min(p["log10_C_final"] for p in pairs if p["spread"] == spread),
            "log10_C_final_max": max(p["log10_C_final"] for p in pairs if p["spread"] == spread),
            "log10_slack_final_min": min(p["log10_slack_final"] for p in pairs if p["spread"] == spread),
            "linearised_final_min": min(10 ** b["log10_linearised"][-1] for b in bases if b["spread"] == spread),
            "linearised_final_max": max(10 ** b["log10_linearised"][-1] for b in bases if b["spread"] == spread),
            "ratio_over_linearised_max": max(p["ratio_over_linearised_max"] for p in pairs if p["spread"] == spread),
            "radius0_max": max(b["radius0"] for b in bases if b["spread"] == spread),
        }
        for spread in SPREADS
    }
    # orange, green, purple: apart in hue and lightness (purple and pink were alike), none the blue of C(t)
    delta_color = dict(zip(DELTAS, ("tab:orange", "tab:green", "tab:purple"), strict=True))
    dashes = dict(zip(SPREADS, ("-", "--"), strict=True))  # one convention in both panels: line style = Σ0

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=figsize(TEXT_WIDTH, 0.56), layout="constrained")
    for p in pairs:
        first = p["seed"] == 0 and p["delta"] == DELTAS[0]
        sp = f"$\\Sigma_0 = {p['spread']:g}I$"
        ax1.plot(ts, 10.0 ** p["log10_C"], color="C0", lw=1.4, ls=dashes[p["spread"]],
                 label="$C(t)$ (derived), " + sp if first else None)  # fmt: skip
        ax1.plot(  # one grey here (they lie along 10^0 on this scale); by δ in the right panel
            ts,
            p["ratio"],
            color="0.35",
            lw=0.9,
            ls=dashes[p["spread"]],
            label="measured ratios (grey, near $10^0$;\nby $\\delta$ on the right)"
            if first and p["spread"] == SPREADS[0]
            else None,
        )
        lab = (
            f"$\\delta = 10^{{{int(np.log10(p['delta']))}}}$" if p["seed"] == 0 and p["spread"] == SPREADS[0] else None
        )
        ax2.plot(ts, p["ratio"], color=delta_color[p["delta"]], lw=0.9, ls=dashes[p["spread"]], label=lab)
    for b in bases:
        first = b["seed"] == 0
        ax2.plot(ts[::LIN_EVERY], 10.0 ** b["log10_linearised"], color="k", lw=0.9, ls=dashes[b["spread"]], alpha=0.6,
                 label=f"linearised, $\\Sigma_0 = {b['spread']:g}I$" if first else None)  # fmt: skip
    ax1.set_xlabel("depth $t$")
    ax1.set_ylabel("$C(t)$ and $W_2(\\mu_t, \\nu_t) / W_2(\\mu_0, \\nu_0)$")
    ax1.set_yscale("log")
    c_txt = ", ".join(
        f"{_down(per[sp]['log10_C_final_min'], 1)}\u2013{_up(per[sp]['log10_C_final_max'], 1)} (${sp:g}I$)"
        for sp in SPREADS
    )
    ax1.set_title(f"bound holds at every $t$ for {holds}/{len(pairs)} pairs;\n$\\log_{{10}} C({T1:g})$: {c_txt}")
    ax1.grid(alpha=0.3, which="major")
    top = max(float(np.max(p["log10_C"])) for p in pairs)
    ax1.set_ylim(top=10.0 ** (1.1 * top))  # just above the largest C(t)
    h1, l1 = ax1.get_legend_handles_labels()
    order = sorted(range(len(l1)), key=lambda i: l1[i].startswith("measured"))  # C(t) entries first
    ax1.legend([h1[i] for i in order], [l1[i] for i in order], loc="upper center", bbox_to_anchor=(0.5, -0.2),
               ncol=1, frameon=False)  # fmt: skip
    ax2.set_xlabel("depth $t$")
    ax2.set_ylabel("$W_2(\\mu_t, \\nu_t) / W_2(\\mu_0, \\nu_0)$")
    ax2.set_yscale("log")
    r_txt = ", ".join(f"{_up(per[sp]['ratio_max'], 2)} (${sp:g}I$)" for sp in SPREADS)
    ax2.set_title(
        f"measured ratio at most {r_txt};\nsolid $\\Sigma_0 = {SPREADS[0]:g}I$, dashed ${SPREADS[1]:g}I$ (both panels)"
    )
    ax2.grid(alpha=0.3, which="both")
    ax2.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))  # "1" as "2" (not "1.0")
    ax2.yaxis.set_minor_formatter(FuncFormatter(lambda y, _: f"{y:g}" if round(y, 6) in (0.8, 2, 3, 4, 6) else ""))
    ax2.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)  # below: clear of the lines
    fig.suptitle(
        f"Stability in $W_2$ of softmax particles (Castin et al., arXiv:2501.18322):\n$V = I$, $A = -I$, $n = {n}$, "
        f"$\\nu_0 = \\mu_0 + \\delta\\xi$, {n_seeds} seed{'s' if n_seeds > 1 else ''} per $\\Sigma_0$ and $\\delta$;\n"
        f"at $t = {T1:g}$ the Gr\u00f6nwall constant $C(t)$ (derived) exceeds the ratio by at least "
        f"$10^{{{_down(min(per[sp]['log10_slack_final_min'] for sp in SPREADS), 1)}}}$"
    )
    o.savefig(fig, NAME)

    o.write_json(
        {
            "setup": {
                "kind": "softmax",
                "V": V,
                "A": A,
                "beta": 1.0,
                "d": 2,
                "n": n,
                "Sigma0": "spread * I",
                "spreads": SPREADS,
                "x0": "n i.i.d. samples of N(0, Sigma0)",
                "perturbation": "y0 = x0 + delta * xi, xi standard normal (n, d)",
                "deltas": DELTAS,
                "seeds_per_spread": n_seeds,
                "t1": T1,
                "rtol": TOL,
                "atol": TOL,
                "w2": "exact assignment (scipy.optimize.linear_sum_assignment), uniform weights",
            },
            "bound": {
                "C(t)": "exp(int_0^t L(R(s)) ds), L(R) = |V| (|A| R^2 + (1 + 2|A| R^2) exp(|A| R^2)) (derived; "
                "hassejax.dynamics.stability), R = largest token norm of both solutions at the save times, "
                "times exp(|V| h) between them",
                "linearised": "exp(int_0^t lambda_max((J + J^T)/2) ds) along the unperturbed solution, trapezoid "
                "(derived; first order in delta, not a bound for finite delta), at ts[::linearised_every]",
                "linearised_every": LIN_EVERY,
            },
            "ts": ts,
            "pairs": pairs,
            "unperturbed": bases,
            "summary": {"bound_holds": f"{holds}/{len(pairs)}", "per_spread": {f"{sp:g}": per[sp] for sp in SPREADS}},
        },
        seeds={"numpy_default_rng": SEED},
    )
    ratio_max = max(per[sp]["ratio_max"] for sp in SPREADS)
    return {"key": f"W2(t)/W2(0) <= C(t) (derived) for {holds}/{len(pairs)} pairs; max ratio {_up(ratio_max, 3)}, "
            f"log10 C({T1:g}) {c_txt.replace('$', '')}"}  # fmt: skip


if __name__ == "__main__":
    cli(main, NAME, __doc__)
