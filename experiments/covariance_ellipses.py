"""Covariance ellipses over time with the particle cloud on top (Castin et al., arXiv:2501.18322).

Softmax attention, `V = I`, the paper's scaling `A = KᵀQ/√2`, mean 0:

- **contraction** (figure ``covariance_ellipses``; the set-up of the paper's figure 2, `Q = q`,
  `K = −q`, `q = [0.40632, 0.91373]`): `A + Aᵀ ⪯ 0` with kernel `q⊥`, so
  `Σ(t) → Σ∞ = q⊥q⊥ᵀ/(q⊥ᵀΣ0⁻¹q⊥)` like `1/t`, from a tilted trace-one `Σ0`;
- **blow-up** (figure ``covariance_ellipses_blowup``; the set-up of the paper's figure 5): from
  `Σ0 = I/2`, `Σ(t)` blows up at `t* = 0.70234` (closed form).

Each panel shows, at one time, the 2σ ellipse `{x : xᵀΣ(t)⁻¹x = 4}` of the Gaussian moment ODE
(:func:`hassejax.dynamics.solve_gaussian`, checked against the closed form), the particle
cloud (:func:`hassejax.dynamics.solve_particles`, `n` tokens sampled from the same Gaussian)
and the 2σ ellipse of the particles' empirical covariance. The sample is antithetic (pairs
`±x`) and whitened, so the cloud starts with exactly the mean 0 and covariance `Σ0`: the
symmetry `x ↦ −x` of softmax with `V = I` keeps the empirical mean at 0 (the Gaussian mean
`α = 0` is unstable, `α' = (I + ΣA)α`), and what separates the two ellipses later is the
finite-`n` (non-Gaussian) part of the cloud only.
"""

from __future__ import annotations

import jax

FLOAT64 = True  # JAX's float64 mode: on here, and again before main() when reproduce.py runs it
jax.config.update("jax_enable_x64", FLOAT64)

import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from _common import Output, cli
from matplotlib.ticker import MaxNLocator

from hassejax.dynamics import (
    blowup_time_closed_form,
    clustering_limit,
    paper,
    softmax_covariance_closed_form,
    solve_gaussian,
    solve_particles,
    status_names,
)
from hassejax.dynamics.diagnostics import empirical_covariance
from hassejax.dynamics.geometry import ellipse, rel_frobenius
from hassejax.dynamics.sampling import antithetic_sample
from hassejax.plot.bounds import fmt_upper

NAME = "covariance_ellipses"
SEED = 0
N_FULL, N_QUICK = 512, 128
SIGMA0_LINE = np.array([[0.6, 0.25], [0.25, 0.4]])  # trace one, u = 0.2, w = 0.5 on the paper's grid
SIGMA0_BLOWUP = 0.5 * np.eye(2)
TIMES_LINE = np.array([0.0, 1.0, 3.0, 10.0, 30.0])
TIMES_BLOWUP = np.array([0.0, 0.3, 0.5, 0.65, 0.69])
K_SIGMA = 2.0


def _up3(x: float) -> str:
    """`x` to 3 significant figures rounded UP (a printed error is an upper bound), positional in [1e-2, 1e3)
    (below, as 5.92e-3: one format for the small errors of a row)."""
    text = fmt_upper(x, 3)
    v = float(text)
    if 1e-2 <= abs(v) < 1e3:
        return f"{v:#.3g}".rstrip(".")
    mant, exp = text.split("e")
    return f"{mant}e{int(exp)}"


def cases() -> dict[str, dict]:
    """The two set-ups: softmax models (`V = I`, `A = KᵀQ/√2`), `Σ0` and the save times."""
    eye = np.eye(2)
    q = paper.FIG2_Q_ROW[None, :]
    return {
        "contraction (item 2)": {"model": paper.softmax_model(eye, q, -q), "cov0": SIGMA0_LINE, "times": TIMES_LINE},
        "blow-up (item 5)": {
            "model": paper.softmax_model(eye, paper.FIG5_Q, paper.FIG5_K),
            "cov0": SIGMA0_BLOWUP,
            "times": TIMES_BLOWUP,
        },
    }


def main(out: Path, quick: bool = False) -> dict:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    o = Output(out, NAME)
    n = N_QUICK if quick else N_FULL
    key = jax.random.key(SEED)
    results = {}
    stems = {"contraction (item 2)": "covariance_ellipses", "blow-up (item 5)": "covariance_ellipses_blowup"}
    for row, (label, case) in enumerate(cases().items()):
        model, cov0, times = case["model"], case["cov0"], case["times"]
        A = np.asarray(model.A)
        mean0 = np.zeros(2)
        t1 = float(times[-1])
        gauss = solve_gaussian(model, mean0, cov0, t1=t1, ts=times, rtol=1e-10, atol=1e-12)
        cov_g = np.asarray(gauss.cov)
        closed = np.asarray(softmax_covariance_closed_form(np.broadcast_to(cov0, (len(times), 2, 2)), A, 1.0, times))
        key, sub = jax.random.split(key)
        x0 = antithetic_sample(sub, mean0, cov0, n)
        part = solve_particles(model, x0, t1=t1, ts=times, rtol=1e-8, atol=1e-8)
        xs = np.asarray(part.xs)
        cov_p = np.asarray(empirical_covariance(xs))
        mean_p = xs.mean(axis=1)
        if not (bool(np.all(gauss.valid)) and bool(np.all(part.valid))):
            raise RuntimeError(f"{label}: a save time lies after the stop of a solve")
        err = rel_frobenius(cov_p, cov_g)
        lam_g = np.linalg.eigvalsh(cov_g)[:, -1]
        lam_p = np.linalg.eigvalsh(cov_p)[:, -1]
        rec = {
            "Sigma0": cov0,
            "A": A,
            "times": times,
            "gaussian_status": status_names(gauss.status),
            "particle_status": status_names(part.status),
            "gaussian_vs_closed_form_max_rel_error": float(np.max(rel_frobenius(cov_g, closed))),
            "particle_vs_gaussian_rel_frobenius": err,
            "lambda_max_gaussian": lam_g,
            "lambda_max_particles": lam_p,
            "particle_mean_max_abs": float(np.max(np.abs(mean_p))),
        }
        if row == 0:
            limit = np.asarray(clustering_limit(cov0, A, 1.0))
            rec["Sigma_inf_closed_form"] = limit
            angle = float(np.degrees(np.arctan2(paper.FIG2_Q_PERP[1], paper.FIG2_Q_PERP[0])))
            rec["Sigma_inf_direction_deg"] = (
                angle - 180.0 if angle > 90.0 else angle + 180.0 if angle <= -90.0 else angle
            )
            rec["Sigma_inf_direction_convention"] = (
                "the direction of q⊥ modulo 180°, in (−90°, 90°] (as convergence_to_line's q_perp_angle_deg)"
            )
        else:
            rec["t_star_closed_form"] = float(blowup_time_closed_form(cov0, A, 1.0))
        results[label] = rec

        # shared limits in the contraction row; per-panel limits for the growing blow-up row
        # 2 × 3 panels, the legend in the sixth; shared limits in the contraction figure, per-panel
        # limits for the growing blow-up
        fig, axes = plt.subplots(2, 3, figsize=(6.5, 4.9), layout="constrained")
        # limits hold the ellipses and every particle (none cut off, none on the frame)
        span_row = 1.12 * max(max(np.max(np.abs(ellipse(mean0, c, K_SIGMA))) for c in cov_g), np.max(np.abs(xs)))
        for j, t in enumerate(times):
            ax = axes.flat[j]
            ax.scatter(xs[j, :, 0], xs[j, :, 1], s=2, color="0.45", alpha=0.55, lw=0, label=f"particles ($n = {n}$)")
            ge = ellipse(mean0, cov_g[j], K_SIGMA)
            pe = ellipse(mean_p[j], cov_p[j], K_SIGMA)
            ax.plot(ge[:, 0], ge[:, 1], color="C0", lw=1.6, label="Gaussian moment ODE, $2\\sigma$")
            ax.plot(
                pe[:, 0],
                pe[:, 1],
                color="C1",
                lw=1.3,
                ls="--",
                label="particles' covariance $\\hat\\Sigma$, $2\\sigma$",
            )
            if row == 0:
                le = ellipse(mean0, rec["Sigma_inf_closed_form"], K_SIGMA)
                ax.plot(
                    le[:, 0],
                    le[:, 1],
                    color="k",
                    lw=1.0,
                    ls=":",
                    label="limit $\\Sigma_\\infty$ (closed form), $2\\sigma$",
                )
                span = span_row
            else:
                span = 1.12 * max(np.max(np.abs(ge)), np.max(np.abs(pe)), np.max(np.abs(xs[j])))
            ax.set_xlim(-span, span)
            ax.set_ylim(-span, span)
            ax.set_aspect("equal")
            ax.xaxis.set_major_locator(MaxNLocator(5, symmetric=True))
            ax.yaxis.set_major_locator(MaxNLocator(5, symmetric=True))
            ax.set_xlabel("$x_1$")
            ax.set_ylabel("$x_2$")
            extra = f", $t^*/t$ = {rec['t_star_closed_form'] / t:#.3g}" if row == 1 and t > 0 else ""
            ax.set_title(f"$t$ = {t:g}{extra}\nrel. error {_up3(err[j])}")
        axes.flat[-1].axis("off")
        axes.flat[-1].legend(
            *axes.flat[0].get_legend_handles_labels(), loc="center", markerscale=4, frameon=False,
            title="rel. error $= \\|\\hat\\Sigma - \\Sigma\\|_F / \\|\\Sigma\\|_F$",
        )  # fmt: skip
        if row == 0:
            title = (
                "Softmax, $V = I$, $Q = q$, $K = -q$ (Castin et al., arXiv:2501.18322, fig. 2): the Gaussian\n"
                "moment ODE and $n$ particles from the same $\\Sigma_0$ both contract towards the line $q^\\perp$"
            )
        else:
            title = (
                "Softmax, $V = I$ (Castin et al., arXiv:2501.18322, fig. 5): the Gaussian moment ODE blows up at\n"
                f"$t^*$ = {rec['t_star_closed_form']:.5f}; the covariance of $n$ particles from the same $\\Sigma_0$ does not\n"
                f"follow the blow-up ($\\lambda_{{\\max}}$ at $t$ = {times[-1]:g}: {lam_p[-1]:#.3g} particles, "
                f"{lam_g[-1]:#.3g} Gaussian; axes rescaled per panel)"
            )
        fig.suptitle(title)
        o.savefig(fig, stems[label])
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    o.write_json(
        {
            "setup": {
                "kind": "softmax",
                "V": "I",
                "scaling": "A = K^T Q / sqrt(2)",
                "n_particles": n,
                "ellipse": "2 sigma",
                "sample": "antithetic (+-z), whitened: exact mean 0 and covariance Sigma0 at t = 0",
                "gaussian_solver": "Tsit5, rtol 1e-10, atol 1e-12",
                "particle_solver": "Tsit5, rtol 1e-8, atol 1e-8",
            },
            "cases": results,
            "timing": {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)},
        },
        seeds={"particles": SEED},
    )
    c, b = results["contraction (item 2)"], results["blow-up (item 5)"]
    return {
        "key": f"particle vs Gaussian covariance: {_up3(c['particle_vs_gaussian_rel_frobenius'][-1])} rel. at t = {TIMES_LINE[-1]:g} (contraction), "
        f"{_up3(b['particle_vs_gaussian_rel_frobenius'][-1])} at t = {TIMES_BLOWUP[-1]:g} (t* = {b['t_star_closed_form']:.5f}); "
        f"Gaussian ODE vs closed form {fmt_upper(max(c['gaussian_vs_closed_form_max_rel_error'], b['gaussian_vs_closed_form_max_rel_error']), 2)}",
    }


if __name__ == "__main__":
    cli(main, NAME, __doc__)
