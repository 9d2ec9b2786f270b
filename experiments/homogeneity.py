"""Homogeneity of softmax blow-up: `t*(cΣ0) = t*(Σ0)/c` (Castin et al., arXiv:2501.18322; spec dynamics.md §3).

The softmax covariance velocity `Σ' = β(VΣAΣ + ΣAᵀΣVᵀ)` is homogeneous of degree 2 in `Σ`, so
`Σ_c(t) = cΣ(ct)` solves the ODE from `cΣ0` and the blow-up time scales as `1/c`. Measured
(diffrax, float64, the size event at `tr Σ = 1e8 · tr Σ0`, `t*` extrapolated from the event
state) for `c` from 1/4 to 4 on two models, one vmapped solve:

- figure 5's parameters (`V = I`, `A = KᵀQ/√2`), `Σ0 = I/2`: against the closed form
  `t* = 1/(c λ_max(Σ0^{1/2}(A + Aᵀ)Σ0^{1/2}))`;
- the counterexample of the spec (§3: general `V`, `VA + AᵀVᵀ ≺ 0`, yet blow-up at `t ≈ 19.68`),
  where no closed form exists: against the measured `t*(Σ0)/c`.
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

from hassejax.dynamics import Softmax, Status, blowup_time_closed_form, paper
from hassejax.plot.bounds import fmt_upper
from hassejax.plot.style import TEXT_WIDTH, figsize

NAME = "homogeneity"
# spec dynamics.md §3: softmax, β = 1, d = 2; VA + AᵀVᵀ ≺ 0 and A + Aᵀ ≺ 0, yet blow-up at t ≈ 19.68
CE_V = np.array([[-0.53206, -1.25140], [2.56361, 0.11094]])
CE_A = np.array([[-0.61541, -0.45655], [1.18257, -0.27585]])
CE_SIGMA0 = np.array([[0.21008, -0.34117], [-0.34117, 0.78992]])
THRESHOLD_FACTOR = 1e8


def main(out: Path, quick: bool = False) -> dict:
    o = Output(out, NAME)
    dc.TIMER.reset()  # this experiment's solves only (a worker process runs several)
    cs = np.geomspace(0.25, 4.0, 5 if quick else 13)
    fig5 = paper.softmax_model(np.eye(2), paper.FIG5_Q, paper.FIG5_K)
    ce = Softmax(V=CE_V, A=CE_A)
    families = {"fig5": (fig5, np.eye(2) / 2), "counterexample": (ce, CE_SIGMA0)}
    models, cov0 = [], []
    for model, s0 in families.values():
        models += [model] * cs.size
        cov0 += [c * s0 for c in cs]
    cov0 = np.stack(cov0)
    model = dc.stack_models([Softmax(V=np.asarray(m.V), A=np.asarray(m.A)) for m in models])
    threshold = THRESHOLD_FACTOR * np.trace(cov0, axis1=1, axis2=2)
    sol = dc.solve(model, cov0, t1=1000.0, threshold=threshold, tol=dc.NO_STOP_TOL, capacity=dc.CAPACITY)
    status = sol["status"].reshape(2, cs.size)
    t_meas = sol["t_blowup"].reshape(2, cs.size)
    if not np.all(status == Status.blow_up):
        raise RuntimeError(f"expected every member to blow up; got {dc.status_counts(sol['status'])}")
    A5 = np.asarray(fig5.A)
    t_closed = np.asarray(blowup_time_closed_form(cov0[: cs.size], A5, 1.0))
    i1 = int(np.argmin(np.abs(cs - 1.0)))
    pred = {"fig5": t_closed, "counterexample": t_meas[1, i1] / cs}
    results = {}
    for k, key in enumerate(families):
        rel = np.abs(t_meas[k] / pred[key] - 1.0)
        if key == "counterexample":  # c = 1 is the reference itself
            rel = np.delete(rel, i1)
        results[key] = {
            "c": cs,
            "t_star_measured": t_meas[k],
            "t_star_predicted": pred[key],
            "predicted_by": "closed form 1/(c λ_max(Σ0^{1/2}(A + Aᵀ)Σ0^{1/2}))"
            if key == "fig5"
            else "measured t*(Σ0)/c (no closed form for general V)",
            "c_times_t_star_range": dc.minmax(cs * t_meas[k]),
            "rel_error": rel,
            "rel_error_c": cs if key == "fig5" else np.delete(cs, i1),
            "rel_error_max": float(rel.max()),
            "loglog_slope": float(np.polyfit(np.log(cs), np.log(t_meas[k]), 1)[0]),
        }
    results["fig5"]["t_star_at_c_1_closed_form"] = float(t_closed[i1])
    results["counterexample"]["rel_error_note"] = (
        f"c = {cs[i1]:g} omitted: the prediction t*(Σ0)/c uses the measured t* at c = {cs[i1]:g}, "
        "so the error there is 0 by construction"
    )

    fig, axes = plt.subplots(1, 2, figsize=figsize(TEXT_WIDTH, 0.42), layout="constrained")
    style = {
        "fig5": ("tab:blue", "o", "fig. 5, $V = I$"),
        "counterexample": ("tab:red", "s", "general $V$, $VA + A^\\top V^\\top \\prec 0$ (negative definite)"),
    }
    for k, key in enumerate(families):
        col, mk, lab = style[key]
        r = results[key]
        axes[0].loglog(cs, pred[key], "-", color=col, lw=1.0)
        axes[0].loglog(
            cs,
            t_meas[k],
            mk,
            color=col,
            mfc="none",
            label=f"{lab}: log-log slope "
            + f"{r['loglog_slope']:.6f}".replace("-", "−")
            + f", max rel. error {fmt_upper(r['rel_error_max'], 2)}",
        )
        axes[1].loglog(r["rel_error_c"], r["rel_error"], mk + "-", color=col, mfc="none", lw=0.8)
    axes[0].set_xlabel("$c$ (initial covariance $c\\Sigma_0$)")
    axes[0].set_ylabel("$t^*(c\\Sigma_0)$")
    axes[0].set_title("measured (markers), $t^*(\\Sigma_0)/c$ (lines)")
    fig.legend(loc="outside lower center", ncol=1)
    for ax in axes:
        ax.set_xticks(cs[:: max(1, (cs.size - 1) // 4)], [f"{c:g}" for c in cs[:: max(1, (cs.size - 1) // 4)]])
        ax.minorticks_off()
    axes[0].grid(alpha=0.3, which="major")
    axes[1].set_ylim(1e-16, 1e-8)
    axes[1].set_xlabel("$c$")
    axes[1].set_ylabel("$|t^*_{\\mathrm{meas}}/t^*_{\\mathrm{pred}} - 1|$")
    axes[1].set_title("relative error (general $V$: none at $c = 1$,\nits reference: the error is 0 there)")
    axes[1].grid(alpha=0.3, which="major")
    ce_t = results["counterexample"]["t_star_measured"][i1]
    fig.suptitle(
        "Castin et al. (arXiv:2501.18322): softmax is homogeneous of degree 2 in $\\Sigma$, "
        f"so $t^*(c\\Sigma_0) = t^*(\\Sigma_0)/c$\n$t^*(\\Sigma_0)$ = {t_closed[i1]:.5f} (fig. 5, $\\Sigma_0 = I/2$), "
        f"{ce_t:.2f} (general $V$); {cs.size} values of $c$ in [{cs[0]:g}, {cs[-1]:g}]"
    )
    o.savefig(fig, NAME)
    o.write_json(
        {
            "figure": "homogeneity of softmax blow-up, t*(cΣ0) = t*(Σ0)/c (Castin et al., arXiv:2501.18322)",
            "parameters": {
                "fig5": {"Q": paper.FIG5_Q, "K": paper.FIG5_K, "V": np.eye(2), "A": A5, "Sigma0": np.eye(2) / 2},
                "fig5_scaling": "A = KᵀQ/√2",
                "counterexample": {"V": CE_V, "A": CE_A, "Sigma0": CE_SIGMA0, "beta": 1.0},
                "counterexample_note": "(derived) VA + AᵀVᵀ and A + Aᵀ negative definite, yet finite-time blow-up",
                "counterexample_eigenvalues_VA_plus_transpose": np.linalg.eigvalsh(CE_V @ CE_A + (CE_V @ CE_A).T),
                "counterexample_eigenvalues_A_plus_transpose": np.linalg.eigvalsh(CE_A + CE_A.T),
            },
            "solver": {
                "method": "diffrax Tsit5, rtol 1e-10, atol 1e-12, float64; size event tr Σ = 1e8 · tr(cΣ0); "
                "t* extrapolated t_e + λ/λ' at the event (spec §4)",
                "status": dc.status_counts(sol["status"]),
                **dc.solver_record(sol),
            },
            "results": results,
            "timing": dc.TIMER.as_dict(),
        },
        seeds={"none": "deterministic parameters"},
    )
    return {
        "key": f"t*(cΣ0)·c constant: max rel. error {fmt_upper(results['fig5']['rel_error_max'], 2)} (fig. 5 vs closed form), "
        f"{fmt_upper(results['counterexample']['rel_error_max'], 2)} (counterexample, t*(Σ0) = {ce_t:.4f})"
    }


if __name__ == "__main__":
    cli(main, NAME, __doc__)
