"""Time-dependent parameters: softmax with a per-layer value scale `V = v(t)I` (Castin et al., arXiv:2501.18322).

Depth is time; a Transformer's layers give piecewise-constant parameters
(:class:`hassejax.dynamics.PiecewiseConstant`, layer boundaries passed to the solver as jump
times). With `V = v(t)I` the covariance depends on the schedule only through `w(t) = ∫_0^t v`
(derived, :mod:`hassejax.dynamics.time_dependent`): `Σ(t) = Σ0^{1/2}(I − w(t)N)⁻¹Σ0^{1/2}`,
blow-up when `w(t)λ_max(N) = 1`. Figure 5's `A`, `Σ0 = I/2`, 16 layers of depth 1/4, three
schedules, one vmapped diffrax solve against the closed form:

- constant `v = 1`: blow-up at `t* = 0.70234` (figure 5's value);
- alternating `v = +1, −1` (then 0): `w ∈ [0, 1/4]` never reaches `1/λ_max`, `Σ` is periodic and bounded;
- decaying `v_l = 1/(l + 1)`: `w` grows like `log t` and still blows up, later.
"""

from __future__ import annotations

import jax

FLOAT64 = True  # JAX's float64 mode: on here, and again before main() when reproduce.py runs it
jax.config.update("jax_enable_x64", FLOAT64)

from pathlib import Path

import equinox as eqx
import matplotlib.pyplot as plt
import numpy as np
from _common import Output, cli

from hassejax.dynamics import PiecewiseConstant, Softmax, paper, solve_gaussian, status_names
from hassejax.dynamics.time_dependent import scalar_schedule_blowup_time, scalar_schedule_covariance
from hassejax.plot.bounds import fmt_upper
from hassejax.plot.style import TEXT_WIDTH, figsize

NAME = "time_dependent"
LAYERS, DEPTH = 16, 0.25
T1 = LAYERS * DEPTH
SIGMA0 = np.eye(2) / 2
EDGES = np.arange(LAYERS + 1) * DEPTH
SCHEDULES = {
    "constant v = 1": np.ones(LAYERS),
    "alternating v = ±1, then 0": np.concatenate([np.tile([1.0, -1.0], (LAYERS - 1) // 2), [0.0] * (2 - LAYERS % 2)]),
    "decaying v = 1/(l + 1)": 1.0 / np.arange(1, LAYERS + 1),
}
LABELS = {"constant v = 1": "constant $v = 1$", "alternating v = ±1, then 0": "alternating $v = \\pm 1$, then 0",
          "decaying v = 1/(l + 1)": "decaying $v_l = 1/(l + 1)$"}  # fmt: skip
COLORS = {"constant v = 1": "tab:red", "alternating v = ±1, then 0": "tab:blue", "decaying v = 1/(l + 1)": "tab:orange"}


@eqx.filter_jit
@jax.vmap
def _solve(model, ts):
    return solve_gaussian(model, np.zeros(2), SIGMA0, t1=T1, ts=ts, rtol=1e-10, atol=1e-12, size_threshold=1e8)


def main(out: Path, quick: bool = False) -> dict:
    o = Output(out, NAME)
    A = np.asarray(paper.softmax_model(np.eye(2), paper.FIG5_Q, paper.FIG5_K).A)
    keys = list(SCHEDULES)
    scheds = {k: PiecewiseConstant(SCHEDULES[k], EDGES) for k in keys}
    t_closed = np.array([scalar_schedule_blowup_time(SIGMA0, A, scheds[k]) for k in keys])
    n_save = 41 if quick else 161
    ts = np.stack([np.linspace(0.0, min(T1, 0.999 * tc) if np.isfinite(tc) else T1, n_save) for tc in t_closed])
    models = [Softmax(V=PiecewiseConstant(SCHEDULES[k][:, None, None] * np.eye(2), EDGES), A=A) for k in keys]
    batched = jax.tree_util.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *models)
    sol = _solve(batched, ts)
    status = [str(s) for s in status_names(sol.status)]
    t_meas = np.asarray(sol.t_blowup)
    cov = np.asarray(sol.cov)
    valid = np.asarray(sol.valid)
    results = {}
    lam_solve, lam_closed = [], []
    for i, k in enumerate(keys):
        closed = scalar_schedule_covariance(SIGMA0, A, scheds[k], ts[i])
        ok = valid[i] & np.all(np.isfinite(closed), axis=(-2, -1))
        rel = np.linalg.norm(cov[i][ok] - closed[ok], axis=(-2, -1)) / np.linalg.norm(closed[ok], axis=(-2, -1))
        lam_solve.append(np.where(valid[i], np.linalg.eigvalsh(cov[i])[:, -1], np.nan))
        lam_closed.append(np.linalg.eigvalsh(np.where(np.isfinite(closed), closed, 0.0))[:, -1])
        r = {
            "v_per_layer": SCHEDULES[k],
            "status": status[i],
            "t_star_closed_form": float(t_closed[i])
            if np.isfinite(t_closed[i])
            else "none (w(t) never reaches 1/λ_max)",
            "rel_error_Sigma_vs_closed_form_max": float(rel.max()),
            "lambda_max_range": [float(np.nanmin(lam_solve[-1])), float(np.nanmax(lam_solve[-1]))],
        }
        if status[i] == "blow_up":
            r["t_star_measured"] = float(t_meas[i])
            r["t_star_rel_error"] = float(abs(t_meas[i] / t_closed[i] - 1.0))
        else:
            even = np.isclose(ts[i] % (2 * DEPTH), 0.0) & (ts[i] <= (LAYERS - 2) * DEPTH)
            r["Sigma_at_even_layer_boundaries_vs_Sigma0_max_rel"] = float(
                np.max(np.linalg.norm(cov[i][even] - SIGMA0, axis=(-2, -1)) / np.linalg.norm(SIGMA0))
            )
        results[k] = r

    fig, axes = plt.subplots(1, 2, figsize=figsize(TEXT_WIDTH, 0.42), layout="constrained")
    ax = axes[0]
    for k in keys:
        ax.step(EDGES, np.append(SCHEDULES[k], SCHEDULES[k][-1]), where="post", color=COLORS[k], label=LABELS[k])
    ax.set_xlabel("depth $t$ (16 layers of 1/4)")
    ax.set_ylabel("$v(t)$, $V = v(t)I$")
    ax.set_title("(a) the schedules")
    ax.grid(alpha=0.3)
    ax = axes[1]
    for i, k in enumerate(keys):
        ax.semilogy(ts[i], lam_solve[i], "-", color=COLORS[k], lw=1.2)
        ax.semilogy(
            ts[i][:: max(1, n_save // 20)],
            lam_closed[i][:: max(1, n_save // 20)],
            "o",
            color=COLORS[k],
            mfc="none",
            ms=3,
        )
        if status[i] == "blow_up":
            ax.axvline(t_meas[i], color=COLORS[k], ls=":", lw=0.8)
    ax.set_xlabel("$t$")
    ax.set_ylabel("$\\lambda_{\\max}(\\Sigma(t))$")
    ax.set_title("(b) diffrax (lines), closed form (circles);\n$t^*$ dotted")
    ax.grid(alpha=0.3)
    fig.legend(loc="outside lower center", ncol=3)
    c, d = results[keys[0]], results[keys[2]]
    err = max(r["rel_error_Sigma_vs_closed_form_max"] for r in results.values())
    fig.suptitle(
        "Castin et al. (arXiv:2501.18322), depth-dependent $V = v(t)I$ (softmax, fig. 5's $A$, $\\Sigma_0 = I/2$):\n"
        "$\\Sigma$ depends on $\\int_0^t v$ only; "
        f"$t^*$ = {c['t_star_measured']:.5f} (constant), {d['t_star_measured']:.5f} (decaying), none (alternating);\n"
        f"relative error against the closed form: $t^*$ $\\leq$ {fmt_upper(max(c['t_star_rel_error'], d['t_star_rel_error']), 2)}, "
        f"$\\Sigma(t)$ $\\leq$ {fmt_upper(err, 2)}"
    )
    o.savefig(fig, NAME)
    o.write_json(
        {
            "figure": "time-dependent parameters, V = v(t)I per layer (Castin et al., arXiv:2501.18322)",
            "parameters": {"A": A, "A_source": "figure 5's A = KᵀQ/√2", "Sigma0": SIGMA0, "layer_edges": EDGES},
            "solver": "diffrax Tsit5 (hassejax default), rtol 1e-10, atol 1e-12, layer boundaries as jump times; size "
            "event tr Σ = 1e8, t* extrapolated",
            "results": results,
        },
        seeds={"none": "deterministic"},
    )
    return {
        "key": f"t* constant {c['t_star_measured']:.5f}, decaying {d['t_star_measured']:.5f}, alternating none; "
        f"max rel. error vs closed form {fmt_upper(err, 2)}"
    }


if __name__ == "__main__":
    cli(main, NAME, __doc__)
