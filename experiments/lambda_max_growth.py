"""Largest eigenvalue `λ_max(Σ(t))` against depth for softmax, L2 and Sinkhorn (Castin et al., arXiv:2501.18322).

The parameters of the paper's figure 5 (`V = I`, `Q`, `K`; the paper's scalings: softmax and
L2 with `Q/√2`, Sinkhorn with the unscaled `A = KᵀQ`, `ε = 1`), from `Σ0 = I/2`, mean 0.
Softmax blows up in finite time at `t* = 1/λ_max(Σ0^{1/2}(A + Aᵀ)Σ0^{1/2}) = 0.70234`
(closed form): `1/λ_max(Σ(t)) = 2 − t λ_max(A + Aᵀ)` falls linearly to zero. L2
and Sinkhorn grow exponentially (`1/λ_max` decays without reaching zero). Each curve is one
:func:`hassejax.dynamics.solve_gaussian` solve (Tsit5, rtol 1e-10, Sinkhorn 1e-8, float64) that stops at
the size event `tr Σ = 1e8 · tr Σ0`, classified by the library's decade test (`ρ < 0.05` ⇒
finite-time blow-up; `ρ ≈ 0.22` for exponential growth).
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

from hassejax.dynamics import AbstractAttention, blowup_time_closed_form, paper, solve_gaussian, status_names
from hassejax.plot.bounds import fmt_upper
from hassejax.plot.style import KIND_COLORS, KIND_LINESTYLES

NAME = "lambda_max_growth"
SIGMA0 = 0.5 * np.eye(2)
T1 = 40.0
RTOL = {"softmax": 1e-10, "l2": 1e-10, "sinkhorn": 1e-8}
# Sinkhorn at rtol 1e-8: hassejax.dynamics.sinkhorn_slope loses relative accuracy like ~eps·λ_max(Σ)²
# (1.6e-12 at λ_max = 850, 1.6e-7 at 3.4e5, 2.7e-3 at 1.9e7 against a 60-digit evaluation of the same
# formula; reported to its owner), so below rtol ~1e-9 the step size collapses on the noise and the
# solve runs out of steps before the size event (t ≈ 9.9). The exponential growth is unaffected at 1e-8.
COLORS = {k: KIND_COLORS[k] for k in RTOL}
"""The paper's one colour per attention kind (:data:`hassejax.plot.style.KIND_COLORS`)."""
STYLES = {k: KIND_LINESTYLES[k] for k in RTOL}
"""Line styles: several of the kinds' colours have about the same lightness, so greyscale tells them apart by these."""
VERDICT = {"blow_up": "blow-up", "diverge": "divergence"}
"""The decade test's verdict at the size event, in words (another status is printed as its name)."""
LABELS = {"softmax": "softmax", "l2": "L2 ($c = 1$)", "sinkhorn": r"Sinkhorn ($\varepsilon = 1$)"}


def item5_models() -> dict[str, AbstractAttention]:
    """The three kernels on the item 5 parameters with the paper's scalings (spec §1, §7a)."""
    eye = np.eye(2)
    return {
        "softmax": paper.softmax_model(eye, paper.FIG5_Q, paper.FIG5_K),
        "l2": paper.l2_model(eye, paper.FIG5_Q, paper.FIG5_K),
        "sinkhorn": paper.sinkhorn_model(eye, paper.FIG5_Q, paper.FIG5_K),
    }


def save_times(t_star: float, t1: float, n_uniform: int, n_near: int) -> np.ndarray:
    """Uniform times on `[0, t1]` plus times `t*(1 − 10^{-k})` accumulating at `t*` (sorted, unique)."""
    near = t_star * (1.0 - np.geomspace(0.5, 1e-7, n_near))
    return np.unique(np.concatenate([np.linspace(0.0, t1, n_uniform), near]))


def softmax_inverse_lambda(t: np.ndarray, A: np.ndarray, sigma0_scale: float = 0.5) -> np.ndarray:
    """Closed form `1/λ_max(Σ(t)) = 1/s0 − t λ_max(A + Aᵀ)` for softmax, `V = I`, `Σ0 = s0 I` (spec §3)."""
    s = np.linalg.eigvalsh(A + A.T)[-1]
    return 1.0 / sigma0_scale - t * s


def main(out: Path, quick: bool = False) -> dict:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    o = Output(out, NAME)
    models = item5_models()
    A_sm = np.asarray(models["softmax"].A)
    t_star = float(blowup_time_closed_form(SIGMA0, A_sm, 1.0))
    ts = save_times(t_star, T1, 201 if quick else 801, 20 if quick else 60)
    results, curves = {}, {}
    for kind, model in models.items():
        sol = solve_gaussian(model, np.zeros(2), SIGMA0, t1=T1, ts=ts, rtol=RTOL[kind], atol=1e-2 * RTOL[kind])
        valid = np.asarray(sol.valid)
        lam = np.linalg.eigvalsh(np.asarray(sol.cov))[:, -1]
        lam_f = float(np.linalg.eigvalsh(np.asarray(sol.cov_final))[-1])
        curves[kind] = (np.append(ts[valid], float(sol.t_final)), np.append(lam[valid], lam_f))
        results[kind] = {
            "status": status_names(sol.status),
            "t_final": float(sol.t_final),
            "decade_ratio": float(sol.decade_ratio),
            "growth_exponent_at_event": float(sol.growth_exponent),
            "t_blowup": float(sol.t_blowup) if np.isfinite(float(sol.t_blowup)) else None,
            "lambda_max_final": lam_f,
            "steps": int(sol.stats.num_steps),
        }
    sm = results["softmax"]
    sm["t_star_closed_form"] = t_star
    sm["t_blowup_rel_error"] = abs(sm["t_blowup"] / t_star - 1.0) if sm["t_blowup"] is not None else None
    t_sm, lam_sm = curves["softmax"]
    sm["inverse_lambda_max_abs_error_vs_closed_form"] = float(
        np.max(np.abs(1.0 / lam_sm - softmax_inverse_lambda(t_sm, A_sm)))
    )

    fig, axes = plt.subplots(1, 2, figsize=(6.6, 3.9), layout="constrained")
    ax = axes[0]
    for kind, (t, lam) in curves.items():
        r = results[kind]
        verdict = VERDICT.get(r["status"], r["status"].replace("_", " "))
        ax.plot(
            t,
            lam,
            color=COLORS[kind],
            ls=STYLES[kind],
            lw=1.4,
            label=f"{LABELS[kind]}: $t$ = {r['t_final']:.5g}, $\\rho$ = {r['decade_ratio']:.3f} ⇒ {verdict}",
        )
        ax.plot(t[-1], lam[-1], "o", color=COLORS[kind], ms=4)
    ax.axvline(t_star, color="0.55", ls="--", lw=0.8, zorder=0, label=f"closed-form $t^*$ = {t_star:.5f}")  # behind
    ax.set_yscale("log")
    ax.set_xlabel("depth $t$")
    ax.set_ylabel("$\\lambda_{\\max}(\\Sigma(t))$")
    ax.set_title(
        "$\\lambda_{\\max}(\\Sigma(t))$ up to the size event\n"
        "$\\mathrm{tr}\\,\\Sigma = 10^8\\,\\mathrm{tr}\\,\\Sigma_0$ (dots)"
    )
    ax.grid(alpha=0.3)

    ax = axes[1]
    t_zoom = 3.0
    for kind, (t, lam) in curves.items():
        sel = t <= t_zoom
        # softmax wide, under the closed form's thin line: both stay visible where they agree
        ax.plot(t[sel], 1.0 / lam[sel], color=COLORS[kind], ls=STYLES[kind], lw=3.0 if kind == "softmax" else 1.4)
    tt = np.linspace(0, t_star, 50)
    ax.plot(
        tt,
        softmax_inverse_lambda(tt, A_sm),
        color="k",
        ls=(0, (3, 2)),
        lw=0.8,
        zorder=3,
        label="softmax closed form\n$2 - t\\,\\lambda_{\\max}(A + A^\\top)$",
    )
    ax.axvline(t_star, color="0.55", ls="--", lw=0.8, zorder=0)
    ax.axhline(0.0, color="0.5", lw=0.8)
    ax.set_xlim(0, t_zoom)
    ax.set_xlabel("depth $t$")
    ax.set_ylabel("$1\\,/\\,\\lambda_{\\max}(\\Sigma(t))$")
    ax.set_title("$1/\\lambda_{\\max}$: a line reaching zero at $t^*$ (blow-up)\nvs exponential decay (divergence)")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right")
    fig.legend(
        *axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=2, frameon=False,
        title="each solve stops at its size event: its time $t$, $\\rho$ (the decade ratio of the blow-up test) ⇒ verdict",
    )  # fmt: skip
    fig.suptitle(
        f"Figure-5 parameters of Castin et al. (arXiv:2501.18322), $V = I$, $\\Sigma_0 = I/2$: softmax blows up at\n"
        f"$t^*$ = {t_star:.5f} (solve {sm['t_blowup']:.8f}, rel. error {fmt_upper(sm['t_blowup_rel_error'], 2)}); "
        "L2 and Sinkhorn grow exponentially"
    )
    o.savefig(fig, "lambda_max_growth")
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    o.write_json(
        {
            "setup": {
                "Sigma0": SIGMA0,
                "mean0": [0.0, 0.0],
                "V": "I",
                "Q": paper.FIG5_Q,
                "K": paper.FIG5_K,
                "scalings": "softmax, L2: Q/sqrt(2); Sinkhorn: A = K^T Q unscaled, eps = 1",
                "t1": T1,
                "rtol": RTOL,
                "atol": "1e-2 rtol",
                "size_threshold": "1e8 tr Sigma0 (library default)",
                "blow_up_test": "library decade test: rho < 0.05 => blow_up",
            },
            "results": results,
            "timing": {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)},
        },
        seeds={},
    )
    return {
        "key": f"softmax {sm['status']} at {sm['t_blowup']:.8f} vs closed form {t_star:.8f} (rel. {sm['t_blowup_rel_error']:.1e}); "
        f"L2 {results['l2']['status']} (ρ = {results['l2']['decade_ratio']:.2f}), Sinkhorn {results['sinkhorn']['status']} (ρ = {results['sinkhorn']['decade_ratio']:.2f})",
    }


if __name__ == "__main__":
    cli(main, NAME, __doc__)
