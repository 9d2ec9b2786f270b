"""Interaction energies along trajectories: twisted softmax energy and Sinkhorn F (Castin et al., arXiv:2501.18322).

- **Softmax with `A` symmetric and `V = −A`** is the gradient flow of
  `E(μ) = ½ ∬ exp(xᵀAy) dμ dμ` for the twisted Wasserstein metric (derived): the particle
  energy `E_n = (1/2n²) Σ_ij exp(x_iᵀAx_j)` (:func:`hassejax.dynamics.energy.interaction_energy`)
  decreases along :func:`hassejax.dynamics.solve_particles`, and the closed-form Gaussian
  energy (:func:`~hassejax.dynamics.energy.gaussian_interaction_energy`) along
  :func:`hassejax.dynamics.solve_gaussian`. The spec's check (n = 200, d = 3,
  `A = −[[1, .3, 0], [.3, .8, .1], [0, .1, .5]]`, `α0 = (.3, −.2, .5)`,
  `Σ0 = diag(.3, .2, .4) + 0.05·11ᵀ`): Gaussian values 0.50178, 0.42221, 0.34832, 0.24405,
  0.10895, 0.01376, 4.4e-5 at t = 0, 0.5, …, 3.
- **Sinkhorn with `V = A = Aᵀ`** (`ε = 1`) is the Bures–Wasserstein gradient flow of
  `F = ½ OT_ε(μ, μ)` (derived): `F` (:func:`~hassejax.dynamics.energy.gaussian_sinkhorn_energy`)
  does not increase along the Sinkhorn Gaussian ODE; shown for the `A` above (negative
  definite) and for an indefinite symmetric `A`.
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

from hassejax.dynamics import Sinkhorn, Softmax, solve_gaussian, solve_particles, status_names
from hassejax.dynamics.energy import gaussian_interaction_energy, gaussian_sinkhorn_energy, interaction_energy
from hassejax.plot.bounds import fmt_upper
from hassejax.plot.style import KIND_COLORS, KIND_LINESTYLES

NAME = "energies"
SEED = 0
A_SPEC = -np.array([[1.0, 0.3, 0.0], [0.3, 0.8, 0.1], [0.0, 0.1, 0.5]])
A_INDEFINITE = np.array([[0.5, 0.2, 0.0], [0.2, -0.6, 0.1], [0.0, 0.1, 0.3]])
MEAN0 = np.array([0.3, -0.2, 0.5])
SIGMA0 = np.diag([0.3, 0.2, 0.4]) + 0.05 * np.ones((3, 3))
SPEC_TIMES = np.arange(7) * 0.5
SPEC_VALUES = np.array([0.50178, 0.42221, 0.34832, 0.24405, 0.10895, 0.01376, 4.4e-5])
CHECK_VALUES_PRINTED = "printed to 5 decimals, the last to 1e-6"
SPEC_HALF_UNITS = np.array([5e-6] * 6 + [5e-7])  # half a unit in the last printed digit
T1 = 3.0
N_FULL, N_QUICK = 200, 200
SEEDS_FULL, SEEDS_QUICK = 5, 2
N_SAVE = 61  # every 0.05; the spec times are every 10th point


def max_increase(values: np.ndarray) -> float:
    """Largest step-to-step increase `max_k (v_{k+1} − v_k)` along the last axis (negative: strictly decreasing)."""
    return float(np.max(np.diff(np.asarray(values), axis=-1)))


def spec_check(ts: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`(|value − spec value|, agrees)` at the spec times `0, 0.5, …, 3`.

    The spec prints its check values rounded (0.50178, …, 4.4e-5), so a value agrees when it
    rounds to the printed digits: `|value − spec| <= half a unit in the last printed digit`.

    **Raises:** ValueError if `ts` does not contain the spec times.
    """
    idx = [int(np.argmin(np.abs(ts - t))) for t in SPEC_TIMES]
    if not np.allclose(np.asarray(ts)[idx], SPEC_TIMES):
        raise ValueError("the save times must contain 0, 0.5, ..., 3")
    diff = np.abs(np.asarray(values)[idx] - SPEC_VALUES)
    return diff, diff <= SPEC_HALF_UNITS * (1 + 1e-9)


def _short_e(x: str) -> str:
    """`-1.03e-02` as `−1.03e−2` (no padded exponent, a minus sign)."""
    mantissa, exponent = x.split("e")
    return f"{mantissa}e{int(exponent)}".replace("-", "−")


def _sign_word(x: float) -> str:
    """The sign of a largest change: "< 0" (F decreased at every step), "= 0" or "> 0: F INCREASES"."""
    return "< 0" if x < 0 else "= 0" if x == 0 else "> 0: $F$ INCREASES"


def main(out: Path, quick: bool = False) -> dict:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    o = Output(out, NAME)
    n = N_QUICK if quick else N_FULL
    n_seeds = SEEDS_QUICK if quick else SEEDS_FULL
    ts = np.linspace(0.0, T1, N_SAVE)

    # twisted softmax energy: V = −A
    softmax = Softmax(V=-A_SPEC, A=A_SPEC)
    gauss = solve_gaussian(softmax, MEAN0, SIGMA0, t1=T1, ts=ts, rtol=1e-10, atol=1e-12)
    e_gauss = gaussian_interaction_energy(gauss.mean, gauss.cov, A_SPEC)
    if not bool(np.all(e_gauss.finite)):
        raise RuntimeError("the Gaussian energy left its domain ‖Σ^½AΣ^½‖ < 1")
    e_gauss = np.asarray(e_gauss.value)
    spec_diff, spec_ok = spec_check(ts, e_gauss)
    key = jax.random.key(SEED)
    e_part, part_status = [], []
    for s in range(n_seeds):
        x0 = jax.random.multivariate_normal(jax.random.fold_in(key, s), MEAN0, SIGMA0, (n,))
        sol = solve_particles(softmax, x0, t1=T1, ts=ts, rtol=1e-8, atol=1e-8)
        part_status.append(status_names(sol.status))
        e_part.append(np.asarray(interaction_energy(sol.xs, A_SPEC)))
    e_part = np.array(e_part)
    part_increase = [max_increase(e) for e in e_part]

    # Sinkhorn F: V = A = Aᵀ
    sink = {}
    for label, A in [("A of §6 (negative definite)", A_SPEC), ("indefinite A", A_INDEFINITE)]:
        sol = solve_gaussian(Sinkhorn(V=A, A=A, eps=1.0), MEAN0, SIGMA0, t1=T1, ts=ts, rtol=1e-8, atol=1e-10)
        F = np.asarray(gaussian_sinkhorn_energy(sol.mean, sol.cov, A, 1.0))
        sink[label] = {
            "A": A,
            "status": status_names(sol.status),
            "F": F,
            "max_increase": max_increase(F),
            "lambda_max_final": float(np.linalg.eigvalsh(np.asarray(sol.cov_final))[-1]),
        }

    e_end = [float(np.min(np.asarray(e_part)[:, -1])), float(np.max(np.asarray(e_part)[:, -1]))]
    e_end_printed = [f"{e:.1e}" for e in e_end]  # a measured range: rounded to nearest
    fig = plt.figure(figsize=(6.5, 6.6), layout="constrained")
    gs = fig.add_gridspec(2, 2, height_ratios=[1.15, 1.0])
    ax = fig.add_subplot(gs[0, :])
    for s, e in enumerate(e_part):
        ax.plot(
            ts, e, color=KIND_COLORS["softmax"], lw=0.9, alpha=0.7,
            label=f"particles $E_n$, $n = {n}$ ({n_seeds} seeds)" if s == 0 else None,
        )  # fmt: skip
    ax.plot(
        ts, e_gauss, color="k", lw=1.0, ls="--", zorder=3,
        label="Gaussian closed form $E(\\mathcal{N}(\\alpha(t), \\Sigma(t)))$\n(dashed, drawn on top)",
    )  # fmt: skip
    ax.plot(
        SPEC_TIMES,
        SPEC_VALUES,
        "x",
        color="k",
        ms=7,
        mew=1.6,
        label=f"check values (the project's spec, not the paper's;\n{CHECK_VALUES_PRINTED})",
        zorder=4,
    )
    ax.set_yscale("log")
    ax.set_xlabel("depth $t$")
    ax.set_ylabel("$E = \\frac{1}{2}\\iint \\exp(x^\\top A y)\\,d\\mu\\,d\\mu$")
    ax.set_title(
        f"Twisted softmax energy, $V = -A$: decreasing for {sum(i < 0 for i in part_increase)}/{n_seeds} particle runs;\n"
        f"the Gaussian closed form matches {int(spec_ok.sum())}/{len(spec_ok)} check values to their printed digits;\n"
        f"at $t = {ts[-1]:g}$ the particle $E_n$ spread over {e_end_printed[0]} to {e_end_printed[1]} against the Gaussian's "
        f"{e_gauss[-1]:.1e}\n(a finite sample of $\\mu_0$ is not Gaussian: no match expected)"
    )
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="lower left")
    shown = {"A of §6 (negative definite)": "$A$ negative definite", "indefinite A": "$A$ indefinite"}
    for col, (label, r) in enumerate(sink.items()):
        ax = fig.add_subplot(gs[1, col])
        ax.plot(ts, r["F"], color=KIND_COLORS["sinkhorn"], ls=KIND_LINESTYLES["sinkhorn"], lw=1.5)
        ax.set_xlabel("depth $t$")
        ax.set_ylabel("$F = \\frac{1}{2}\\mathrm{OT}_\\varepsilon(\\mu, \\mu)$, $\\varepsilon = 1$")
        ax.set_title(
            f"Sinkhorn $F$ on the Gaussian ODE, $V = A = A^\\top$,\n{shown.get(label, label)}: largest (least "
            f"negative)\nstep-to-step change {_short_e(fmt_upper(r['max_increase'], 3))} {_sign_word(r['max_increase'])}"
        )
        ax.grid(alpha=0.3)
    fig.suptitle(
        "Gradient-flow structure (Castin et al., arXiv:2501.18322): the twisted softmax energy $E$\n"
        "and the Sinkhorn functional $F$ decrease along the dynamics"
    )
    o.savefig(fig, "energies")
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    o.write_json(
        {
            "setup": {
                "A": A_SPEC,
                "V_softmax": "-A",
                "mean0": MEAN0,
                "Sigma0": SIGMA0,
                "n": n,
                "seeds": n_seeds,
                "ts": ts,
                "A_indefinite": A_INDEFINITE,
                "sinkhorn": "V = A, eps = 1",
                "sinkhorn_measure": "mu(t) = N(alpha(t), Sigma(t)) from the Sinkhorn Gaussian ODE (solve_gaussian, "
                "rtol 1e-8), F in closed form (gaussian_sinkhorn_energy); no particles",
            },
            "softmax": {
                "gaussian_energy_at_spec_times": e_gauss[[round(t / (T1 / (N_SAVE - 1))) for t in SPEC_TIMES]],
                "spec_values": SPEC_VALUES,
                "spec_abs_diff": spec_diff,
                "spec_agrees_to_printed_digits": spec_ok,
                "gaussian_status": status_names(gauss.status),
                "gaussian_max_increase": max_increase(e_gauss),
                "particle_status": part_status,
                "particle_energy": e_part,
                "particle_max_increase_per_seed": part_increase,
                "particle_energy_at_t1_range": e_end,
                "particle_energy_at_t1_range_printed_nearest": e_end_printed,
                "gaussian_energy_at_t1": float(e_gauss[-1]),
                "check_values_source": "the project's spec (dynamics.md), not the paper",
                "check_values_printed_to": CHECK_VALUES_PRINTED,
            },
            "sinkhorn": sink,
            "timing": {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)},
        },
        seeds={"particles": SEED, "per_run": "fold_in(key(0), seed)"},
    )
    dec = sum(i < 0 for i in part_increase)
    f_inc = max(r["max_increase"] for r in sink.values())
    return {
        "key": f"E_n decreasing for {dec}/{n_seeds} seeds; Gaussian E agrees with {int(spec_ok.sum())}/{len(spec_ok)} spec check values to the printed digits; "
        f"Sinkhorn F {'non-increasing' if f_inc <= 0 else 'INCREASES'} (largest step change {fmt_upper(f_inc, 2)})"
    }


if __name__ == "__main__":
    cli(main, NAME, __doc__)
