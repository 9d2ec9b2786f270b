"""Blow-up event time against the closed form over the phase-map sweep (Castin et al., arXiv:2501.18322).

The sweep of figure 10a (:mod:`hassejax.dynamics.phase_map`, as in :mod:`phase_maps`: softmax, `d = 2`, `Σ0 = I/2`, `V = vI`,
`A = [[a, 1], [0, −1]]`, `v ∈ [−2, 2]`, `a ∈ [−3, 3]`, one vmapped solve) against
`t* = 1/λ_max(v Σ0^{1/2}(A + Aᵀ)Σ0^{1/2})` (closed form), for every member whose closed-form
`t*` lies before the horizon. Three estimates of `t*`:

- **extrapolated**, `t_e + λ/λ'` at the size event (the library's default), with rtol 1e-10
  and the size threshold `tr Σ = 1e8 · tr Σ0`;
- **threshold time** `t_e` of the same solves (a lower bound, too early by about
  `λ_max(Σ0)/threshold` relative);
- **extrapolated** with the settings of the phase map itself (rtol 1e-8, threshold `1e6 · tr Σ0`).

It also checks the library's blow-up/divergence verdict (decade test) member by member
against the closed form.
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

from hassejax.dynamics import Status
from hassejax.dynamics import phase_map as pm
from hassejax.plot import log_bins
from hassejax.plot.bounds import fmt_upper

NAME = "event_time_accuracy"
TIGHT_RTOL, TIGHT_ATOL = 1e-10, 1e-12
TIGHT_THRESHOLD = 1e8 * float(np.trace(pm.SIGMA0))
TIGHT_MAX_STEPS = 4000


def member_tight(p):
    """A member of map (a) solved with rtol 1e-10 and the size event at `1e8 · tr Σ0`."""
    return pm.solve_member(
        p["V"],
        pm.family_A(p["a"]),
        p["t1"],
        rtol=TIGHT_RTOL,
        atol=TIGHT_ATOL,
        threshold=TIGHT_THRESHOLD,
        max_steps=TIGHT_MAX_STEPS,
    )


def member_settings(p):
    """--quick: a member of map (a) with its solver settings in the batch (``rtol``, ``atol``, ``threshold``, traced),
    so that the tight solve and the phase-map-settings solve run one compiled program instead of two; the step budget
    is :data:`TIGHT_MAX_STEPS` for both (a budget changes no step; map (a)'s members need at most ~170 steps with the
    phase map's settings, under its budget of ``MAX_STEPS = 800``)."""
    return pm.solve_member(
        p["V"], pm.family_A(p["a"]), p["t1"], rtol=p["rtol"], atol=p["atol"], threshold=p["threshold"],
        max_steps=TIGHT_MAX_STEPS,
    )  # fmt: skip


def _sweeps(batch: dict, quick: bool) -> tuple[dict, dict]:
    """The tight and the phase-map-settings sweeps of map (a): two programs, or with ``quick`` one
    (:func:`member_settings`, held: traced and compiled once)."""
    if not quick:
        tight = pm.run_sweep(member_tight, batch, "event times (rtol 1e-10)")
        return tight, pm.run_sweep(pm.member, batch, "event times (phase-map settings)")
    n = len(batch["a"])
    out = []
    for settings, desc in (
        ((TIGHT_RTOL, TIGHT_ATOL, TIGHT_THRESHOLD), "event times (rtol 1e-10)"),
        ((pm.RTOL, pm.ATOL, pm.THRESHOLD), "event times (phase-map settings)"),
    ):
        b = batch | {k: np.full(n, v) for k, v in zip(("rtol", "atol", "threshold"), settings)}
        out.append(pm.run_sweep(member_settings, b, desc, held=True))
    return out[0], out[1]


def relative_errors(t_est: np.ndarray, t_star: np.ndarray) -> np.ndarray:
    """`|t_est/t* − 1|`."""
    return np.abs(np.asarray(t_est) / np.asarray(t_star) - 1.0)


def main(out: Path, quick: bool = False) -> dict:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    o = Output(out, NAME)
    n = pm.GRID_QUICK if quick else pm.GRID_FULL
    V_, A_ = pm.grid(n, pm.V_RANGE, pm.A_RANGE)
    batch = pm.batch_scalar_v(V_, A_)
    t_star = pm.column_major(pm.closed_form_map(V_, A_)[0])
    tight, loose = _sweeps(batch, quick)

    cf_blow = t_star <= pm.T1_A
    checks = {}
    for label, res in [("tight", tight), ("phase_map_settings", loose)]:
        blow = res["status"] == Status.blow_up
        checks[label] = {
            "closed_form_blow_up_members": int(cf_blow.sum()),
            "reported_blow_up": int(blow.sum()),
            "closed_form_blow_up_not_reported": int(np.sum(cf_blow & ~blow)),
            "reported_blow_up_without_closed_form": int(np.sum(~cf_blow & blow)),
            "reported_diverge": int(np.sum(res["status"] == Status.diverge)),
            "steps_max": int(res["steps"].max()),
        }
    both = cf_blow & (tight["status"] == Status.blow_up) & (loose["status"] == Status.blow_up)
    ts = t_star[both]
    errs = {
        "extrapolated t_e + λ/λ' (rtol 1e-10, threshold 1e8·tr Σ0)": relative_errors(tight["t_blowup"][both], ts),
        "threshold time t_e (rtol 1e-10, threshold 1e8·tr Σ0)": relative_errors(tight["t_final"][both], ts),
        "extrapolated (phase-map settings: rtol 1e-8, threshold 1e6·tr Σ0)": relative_errors(
            loose["t_blowup"][both], ts
        ),
    }
    colors = ["C0", "C1", "C2"]
    summary = {
        k: {"max": float(v.max()), "median": float(np.median(v)), "p99": float(np.percentile(v, 99))}
        for k, v in errs.items()
    }
    key_err = next(iter(errs.values()))
    n_members = int(both.sum())

    shown = [  # the legend's words for the three keys of `errs` (the JSON's keys)
        "extrapolated $t_e + \\lambda/\\lambda'$ (rtol $10^{-10}$, threshold $10^8\\,\\mathrm{tr}\\,\\Sigma_0$)",
        "threshold time $t_e$ (rtol $10^{-10}$, threshold $10^8\\,\\mathrm{tr}\\,\\Sigma_0$)",
        "extrapolated, phase-map settings (rtol $10^{-8}$, threshold $10^6\\,\\mathrm{tr}\\,\\Sigma_0$)",
    ]
    fig, axes = plt.subplots(1, 2, figsize=(6.6, 3.9), layout="constrained")
    ax = axes[0]
    bins = log_bins(*errs.values())
    for label, e, c in zip(shown, errs.values(), colors):
        ax.hist(np.maximum(e, bins[0]), bins=bins, color=c, alpha=0.55, label=f"{label}: max {fmt_upper(e.max(), 2)}")
    ax.set_xscale("log")
    ax.set_xlabel("relative error $|t_{\\mathrm{est}}/t^* - 1|$")
    ax.set_ylabel("members")
    ax.set_title(f"{n_members} members that blow up\nbefore $t_1$ = {pm.T1_A:g}")
    ax = axes[1]
    for label, e, c in zip(shown, errs.values(), colors):
        ax.scatter(ts, np.maximum(e, 1e-17), s=1.5, color=c, alpha=0.4, lw=0, label=label, rasterized=True)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("closed-form blow-up time $t^*$")
    ax.set_ylabel("relative error $|t_{\\mathrm{est}}/t^* - 1|$")
    sigma0 = np.asarray(pm.SIGMA0, float)
    lag = float(np.linalg.eigvalsh(sigma0)[-1] / TIGHT_THRESHOLD)  # relative lag of t_e (threshold 1e8·tr Σ0)
    ax.set_title(
        "the threshold time lags by a relative\n"
        f"$\\approx\\lambda_{{\\max}}(\\Sigma_0)/(10^8\\,\\mathrm{{tr}}\\,\\Sigma_0)$ = {lag:.0e}; ".replace("e-0", "e-")
        + "the extrapolation\n$t_e + \\lambda/\\lambda'$ removes the lag"
    )  # fmt: skip
    ax.grid(alpha=0.3, which="both")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=1, frameon=False)
    wrong = (
        checks["tight"]["closed_form_blow_up_not_reported"] + checks["tight"]["reported_blow_up_without_closed_form"]
    )
    fig.suptitle(
        "Blow-up time of the Gaussian solves of phase map (a) (softmax, $V = vI$, $\\Sigma_0 = I/2$)\n"
        "against $t^* = 1/\\lambda_{\\max}(v\\,\\Sigma_0^{1/2}(A + A^\\top)\\Sigma_0^{1/2})$ "
        "(closed form; Castin et al., arXiv:2501.18322):\n"
        f"max relative error {fmt_upper(key_err.max(), 2)} over {n_members} members (extrapolated); "
        f"{wrong} blow-up verdicts wrong"
    )
    o.savefig(fig, "event_time_accuracy")
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    o.write_json(
        {
            "setup": {
                "sweep": "phase_maps map (a)",
                "grid": [n, n],
                "t1": pm.T1_A,
                "tight": {
                    "rtol": TIGHT_RTOL,
                    "atol": TIGHT_ATOL,
                    "size_threshold_trace": TIGHT_THRESHOLD,
                    "max_steps": TIGHT_MAX_STEPS,
                },
                "phase_map_settings": {"rtol": pm.RTOL, "atol": pm.ATOL, "size_threshold_trace": pm.THRESHOLD},
            },
            "members_compared": n_members,
            "relative_error": summary,
            "verdicts": checks,
            "t_star_range": [float(ts.min()), float(ts.max())] if n_members else [],
            "threshold_time_relative_lag_estimate": {
                "value": lag,
                "formula": "λ_max(Σ0)/(size_threshold_trace·tr Σ0): near t* Σ is nearly rank one with "
                "λ_max ≈ λ_max(Σ0)/(1 − t/t*) (Σ0 = I/2), so tr Σ reaches the threshold at 1 − t_e/t* ≈ this value; "
                "compare relative_error's threshold-time median",
            },
            "timing": {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)},
        },
        seeds={},
    )
    return {
        "key": f"max relative error {fmt_upper(key_err.max(), 2)} over {n_members} members (extrapolated, rtol 1e-10); "
        f"threshold time {fmt_upper(errs[list(errs)[1]].max(), 2)}; phase-map settings {fmt_upper(errs[list(errs)[2]].max(), 2)}"
    }


if __name__ == "__main__":
    cli(main, NAME, __doc__)
