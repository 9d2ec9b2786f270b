"""Causal masked particles with and without an attention sink (Castin et al., arXiv:2501.18322, masked attention).

`n = 64` tokens in `d = 2`, softmax attention with `Q = K = V = I` (`A = I`, `β = 1`), a
causal mask (token `i` sees the keys `j ≤ i`, :func:`hassejax.masks.causal`), tokens i.i.d.
`N(0, I)`; optionally an attention sink: a key at `s = 0` that every query sees and that does
not move, held at its initial value `e_1` (:class:`hassejax.dynamics.Masked` with ``sink``).
Solved with :func:`hassejax.dynamics.solve_particles`, 5 seeds.

In `R²` (the setting of the paper's model): `V = I` makes every token grow like `e^t`, so the
fixed sink (norm 1) loses its weight (its logit `⟨e_1, x_i⟩` is `O(‖x‖)` against `O(‖x‖²)`
for the tokens). What it does before that is measured: the weight each query puts on the
sink over depth (:func:`hassejax.dynamics.diagnostics.sink.sink_weight`) and, per token, the
angle between its final direction with and without the sink. For comparison the same model
on the unit circle (the normalisation of Geshkovski, Letrouit, Polyanskiy, Rigollet (GLPR),
arXiv:2312.10794: tokens projected on the sphere, ``sphere=True``, initial tokens
normalised; sink at `e_1`): there the sink decides where the tokens go.

Clusters of directions are counted over depth as connected components (single linkage,
:func:`hassejax.dynamics.diagnostics.angular_clusters`) at `θ = 1°` and `θ = 5°`. The GLPR
count (:func:`hassejax.dynamics.diagnostics.cluster_count`: rank of the Gram matrix of the
normalised tokens thresholded at cosine 0.9999, `θ ≈ 0.81°`) is drawn for reference only: a
bundle of tokens a few degrees wide gives a banded 0/1 matrix of high rank, so the rank
climbs back while every token lies within a few degrees of the others.

Figures: ``masked_particles`` (`R²`: directions without and with the sink, the sink's
weight, the change of final direction), ``masked_particles_circle`` (unit circle:
directions without and with the sink), ``masked_particles_clusters`` (cluster counts).
"""

from __future__ import annotations

import jax

FLOAT64 = True  # JAX's float64 mode: on here, and again before main() when reproduce.py runs it
jax.config.update("jax_enable_x64", FLOAT64)

import math
import time
from pathlib import Path

import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from _common import Output, cli
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize

from hassejax import masks
from hassejax.dynamics import Masked, Softmax, solve_particles, status_names
from hassejax.dynamics.diagnostics import angular_clusters, angular_spread, cluster_count, token_angles
from hassejax.dynamics.diagnostics.sink import sink_weight
from hassejax.plot import break_wraps
from hassejax.plot.style import TEXT_WIDTH, figsize

NAME = "masked_particles"
SEED = 0
N, D = 64, 2
SINK = np.array([1.0, 0.0])
T1 = {"R²": 10.0, "unit circle": 30.0}
N_SAVE_FULL, N_SAVE_QUICK = 121, 61
SEEDS_FULL, SEEDS_QUICK = 5, 2
SINK_ANGLE_TOL_DEG = 1.0
CLUSTER_ANGLES_DEG = (1.0, 5.0)
"""Angular thresholds of the single-linkage cluster counts (degrees)."""
GLPR_THRESHOLD = 0.9999
"""Cosine threshold of the GLPR rank count (``cluster_count``'s default), about 0.81°."""
GLPR_ANGLE_DEG = float(np.degrees(np.arccos(GLPR_THRESHOLD)))
MOVED_DEG = 1.0
"""A token's final direction 'moved' by the sink when it differs by more than this (degrees)."""
SINK_WEIGHT_SMALL = 1e-3
"""Depth after which every query puts less than this weight on the sink is reported."""
CHANGE_FLOOR_DEG = 1e-6
"""Panel (d) draws changes of final direction smaller than this (degrees) at this value."""
CMAP = plt.get_cmap("viridis")
SPACE_LABEL = {"R²": r"$\mathbb{R}^2$", "unit circle": "unit circle"}


def model(sink: bool) -> Masked:
    """Causal softmax with `Q = K = V = I`, with or without the fixed sink at `e_1`."""
    eye = jnp.eye(D)
    return Masked(Softmax(V=eye, Q=eye, K=eye), masks.causal(N), sink=jnp.asarray(SINK) if sink else None)


def wrapped_difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`|a − b|` in degrees on the circle, in `[0, 180]`."""
    return np.abs((np.asarray(a) - np.asarray(b) + 180.0) % 360.0 - 180.0)


def depth_below(ts: np.ndarray, values: np.ndarray, level: float) -> float | None:
    """First saved depth after which `values` stays below `level` (None if it never does)."""
    above = np.flatnonzero(values >= level)
    if above.size == 0:
        return float(ts[0])
    return float(ts[above[-1] + 1]) if above[-1] + 1 < len(ts) else None


def draw_directions(ax, r: dict, with_sink: bool, title: str) -> None:
    """Token directions of seed 0 over depth, coloured by position."""
    for i in range(N):
        t_line, th_line = break_wraps(r["ts"], r["angles_seed0"][:, i])
        ax.plot(t_line, th_line, color=CMAP(i / (N - 1)), lw=0.6)
    if with_sink:
        ax.axhline(0.0, color="C3", ls="--", lw=1.0)
    ax.set_ylim(-180, 180)
    ax.set_yticks(np.arange(-180, 181, 90))
    # the dashed line explained in the x label, not in a legend over the token lines
    ax.set_xlabel(r"depth $t$" + (r" (red dashed: sink direction $e_1$)" if with_sink else ""))
    ax.set_ylabel("direction (degrees)")
    ax.set_title(title, loc="left")


def position_colorbar(fig, axes) -> None:
    sm = ScalarMappable(norm=Normalize(0, N - 1), cmap=CMAP)
    fig.colorbar(sm, ax=axes, label=r"token position $i$", ticks=[0, 16, 32, 48, 63], fraction=0.05, pad=0.02)


def main(out: Path, quick: bool = False) -> dict:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    o = Output(out, NAME)
    n_seeds = SEEDS_QUICK if quick else SEEDS_FULL
    n_save = N_SAVE_QUICK if quick else N_SAVE_FULL
    key = jax.random.key(SEED)
    x0s = [np.asarray(jax.random.normal(jax.random.fold_in(key, s), (N, D))) for s in range(n_seeds)]
    runs = {}
    for space, t1 in T1.items():
        sphere = space == "unit circle"
        ts = np.linspace(0.0, t1, n_save)
        for with_sink in (False, True):
            kernel = model(with_sink)
            counts, statuses, finals, sink_w, norms = [], [], [], [], []
            links = {th: [] for th in CLUSTER_ANGLES_DEG}
            first = None
            for x0 in x0s:
                if sphere:
                    x0 = x0 / np.linalg.norm(x0, axis=1, keepdims=True)
                # size_threshold=inf: in R² the tokens grow like e^t by design; no size event.
                sol = solve_particles(kernel, x0, t1=t1, ts=ts, size_threshold=np.inf, sphere=sphere)
                statuses.append(status_names(sol.status))
                xs = np.asarray(sol.xs)
                counts.append(np.asarray(cluster_count(xs, GLPR_THRESHOLD)))
                for th in CLUSTER_ANGLES_DEG:
                    links[th].append(angular_clusters(xs, th))
                finals.append(token_angles(xs[-1]))
                norms.append(np.median(np.linalg.norm(xs, axis=-1), axis=-1))  # (T,): median token norm
                if with_sink:
                    sink_w.append(np.asarray(sink_weight(kernel, xs)))  # (T, n)
                if first is None:
                    first = xs
            counts = np.array(counts)
            links = {th: np.array(v) for th, v in links.items()}
            finals = np.array(finals)
            near_sink = np.mean(np.abs(finals) < SINK_ANGLE_TOL_DEG, axis=1)
            near_first = np.mean(wrapped_difference(finals, finals[:, :1]) < SINK_ANGLE_TOL_DEG, axis=1)
            runs[(space, with_sink)] = {
                "ts": ts,
                "counts": counts,
                "links": links,
                "statuses": statuses,
                "angles_seed0": token_angles(first),
                "final_angles": finals,
                "final_clusters": links[CLUSTER_ANGLES_DEG[0]][:, -1],
                "final_glpr_rank": counts[:, -1],
                "fraction_within_1deg_of_sink_direction": near_sink,
                "fraction_within_1deg_of_first_token": near_first,
                "angular_spread_seed0": np.array([angular_spread(a) for a in token_angles(first)]),
                "norm_range_final_seed0": [
                    float(np.min(np.linalg.norm(first[-1], axis=1))),
                    float(np.max(np.linalg.norm(first[-1], axis=1))),
                ],
                "sink_weight": np.array(sink_w) if with_sink else None,  # (seeds, T, n)
                "norm_median": np.array(norms),  # (seeds, T)
            }
    bad = {k: v["statuses"] for k, v in runs.items() if set(v["statuses"]) != {"completed"}}
    if bad:
        raise RuntimeError(f"solves that did not complete: {bad}")

    # what the sink does: the change of each token's final direction, and the sink's weight over depth
    effect = {}
    for space in T1:
        r0, r1 = runs[(space, False)], runs[(space, True)]
        moved = wrapped_difference(r1["final_angles"], r0["final_angles"])  # (seeds, n)
        w = r1["sink_weight"]
        w_max = w.max(axis=2)  # (seeds, T): the largest weight any query puts on the sink
        small = [depth_below(r1["ts"], wm, SINK_WEIGHT_SMALL) for wm in w_max]
        effect[space] = {
            "final_direction_change_deg_per_seed": moved,
            "tokens_moved_over_1deg_per_seed": (moved > MOVED_DEG).sum(axis=1),
            "changes_below_drawing_floor_per_seed": (moved < CHANGE_FLOOR_DEG).sum(axis=1),
            "drawing_floor_deg": CHANGE_FLOOR_DEG,
            "positions_moved_over_1deg_per_seed": [np.flatnonzero(m > MOVED_DEG) for m in moved],
            "max_final_direction_change_deg_per_seed": moved.max(axis=1),
            "sink_weight_max_over_queries": w_max,
            "sink_weight_median_over_queries": np.median(w, axis=2),
            "depth_after_which_every_sink_weight_below_1e-3_per_seed": small,
        }
    eff = effect["R²"]

    # --- figure 1: R² (the paper's setting)
    r2n, r2s = runs[("R²", False)], runs[("R²", True)]
    fig, axes = plt.subplots(2, 2, figsize=figsize(TEXT_WIDTH, 0.78), layout="constrained")
    draw_directions(
        axes[0, 0], r2n, False, f"(a) no sink, seed 0: {int(r2n['final_clusters'][0])} clusters at $t$ = 10"
    )
    draw_directions(
        axes[0, 1],
        r2s,
        True,
        f"(b) with sink, seed 0: {int(r2s['final_clusters'][0])} clusters at $t$ = 10",
    )
    position_colorbar(fig, axes[0, :])
    ax = axes[1, 0]
    for s in range(n_seeds):
        ax.semilogy(r2s["ts"], np.maximum(eff["sink_weight_max_over_queries"][s], 1e-30), color=f"C{s}", lw=0.9,
                    label=f"seed {s}")  # fmt: skip
    ax.axhline(SINK_WEIGHT_SMALL, color="k", ls=":", lw=0.8, label=f"$10^{{{round(np.log10(SINK_WEIGHT_SMALL))}}}$")
    ax.set_ylim(1e-24, 1.5)  # room under the curves for the legend, which leaves the 1e-3 line whole
    ax.set_xlim(0, 4)
    ax.set_xlabel(r"depth $t$")
    ax.set_ylabel("largest weight on the sink")
    ax.set_title("(c) sink weight, max over queries", loc="left")
    ax.legend(
        loc="lower left", ncol=1, handlelength=1.2, borderaxespad=0.2
    )  # the empty corner: every weight > 1e-2 at t < 1
    ax.grid(alpha=0.3)
    ax = axes[1, 1]
    for s in range(n_seeds):
        m = eff["final_direction_change_deg_per_seed"][s]
        ax.scatter(np.arange(N), np.maximum(m, CHANGE_FLOOR_DEG), s=6, color=f"C{s}", lw=0)
    ax.axhline(MOVED_DEG, color="k", ls=":", lw=0.8)
    ax.set_yscale("log")
    ax.set_ylim(CHANGE_FLOOR_DEG, 500.0)  # a change of direction is at most 180°: a little room above it
    n_floor = int(eff["changes_below_drawing_floor_per_seed"].sum())
    ax.set_xlabel(
        f"token position $i$ (colours: seeds as in (c));\n{n_floor} values < $10^{{-6}}$° drawn at the bottom edge"
    )
    ax.set_ylabel("|change of direction| (°)")
    ax.set_title("(d) with vs without sink, $t$ = 10", loc="left")
    ax.grid(alpha=0.3)
    moved_counts = eff["tokens_moved_over_1deg_per_seed"]
    # largest fraction over the seeds, rounded up (a maximum), with the sink and without it
    near_s, near_n = (math.ceil(round(100 * r["fraction_within_1deg_of_sink_direction"].max(), 9)) for r in (r2s, r2n))
    near_e1 = (f"{near_s} % of tokens end within 1° of $e_1$, with the sink and without it" if near_s == near_n
               else f"at most {near_s} % (with the sink) and {near_n} % (without it) of tokens end within 1° of $e_1$")  # fmt: skip
    fig.suptitle(
        r"Causal softmax particles in $\mathbb{R}^2$, $n$ = 64, $Q = K = V = I$, sink fixed at $e_1$:"
        f"\n{near_e1} (all {n_seeds} seeds).\nThe sink changes the final direction"
        f" of {moved_counts.min()}–{moved_counts.max()} of 64 tokens by more than 1° (dotted),"
        "\nand its weight falls while the tokens grow"
    )
    o.savefig(fig, "masked_particles")

    # --- figure 2: unit circle (GLPR normalisation)
    cn, cs = runs[("unit circle", False)], runs[("unit circle", True)]
    fig, axes = plt.subplots(1, 2, figsize=figsize(TEXT_WIDTH, 0.4), layout="constrained")
    draw_directions(axes[0], cn, False, f"(a) no sink, seed 0: {int(cn['final_clusters'][0])} cluster at $t$ = 30")
    draw_directions(
        axes[1],
        cs,
        True,
        f"(b) with sink, seed 0: {100 * cs['fraction_within_1deg_of_sink_direction'][0]:.0f} % within 1° of $e_1$",
    )
    position_colorbar(fig, axes)
    fig.suptitle(
        "The same model on the unit circle (GLPR normalisation), all "
        f"{n_seeds} seeds: with the sink {100 * cs['fraction_within_1deg_of_sink_direction'].min():.0f} %"
        f"\nof tokens end within 1° of $e_1$; without it "
        f"{100 * cn['fraction_within_1deg_of_sink_direction'].max():.0f} % do, and "
        f"{100 * cn['fraction_within_1deg_of_first_token'].min():.0f} % end within 1° of the first token"
    )
    o.savefig(fig, "masked_particles_circle")

    # --- figure 3: cluster counts
    fig, axes = plt.subplots(1, 2, figsize=figsize(TEXT_WIDTH, 0.5), layout="constrained")
    th1, th5 = CLUSTER_ANGLES_DEG
    for ax, space in zip(axes, T1):
        for with_sink, color in ((False, "C0"), (True, "C3")):
            r = runs[(space, with_sink)]
            which = "with" if with_sink else "no"
            c1 = r["links"][th1]
            ax.fill_between(r["ts"], c1.min(0), c1.max(0), color=color, alpha=0.2, lw=0)
            ax.plot(r["ts"], np.median(c1, axis=0), color=color, lw=1.4, label=f"{which} sink: linkage < {th1:g}°")
            ax.plot(r["ts"], np.median(r["links"][th5], axis=0), color=color, lw=1.0, ls="--",
                    label=f"{which} sink: linkage < {th5:g}°")  # fmt: skip
            ax.plot(r["ts"], np.median(r["counts"], axis=0), color=color, lw=0.8, ls=":",
                    label=f"{which} sink: GLPR rank")  # fmt: skip
        ax.set_ylim(0, N + 2)
        ax.set_xlabel(r"depth $t$")
        ax.set_ylabel("clusters of directions")
        ax.set_title(f"{SPACE_LABEL[space]}: median over {n_seeds} seeds", loc="left")
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, handlelength=1.8)
    fig.suptitle(
        f"Clusters of token directions: single linkage at {th1:g}° (solid, band min–max) and {th5:g}° (dashed);"
        f"\ndotted: GLPR rank of the Gram matrix at cos > {GLPR_THRESHOLD:g} (≈ {GLPR_ANGLE_DEG:.2f}°),"
        f" not a count once a bundle is wider"
    )
    o.savefig(fig, "masked_particles_clusters")

    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    record = {}
    for (space, with_sink), r in runs.items():
        record[f"{space}, {'with' if with_sink else 'no'} sink"] = {
            "t1": float(r["ts"][-1]),
            "ts": r["ts"],
            "final_clusters_1deg_linkage_per_seed": r["final_clusters"],
            "cluster_counts_median_over_seeds": {
                f"linkage_{th:g}deg": np.median(r["links"][th], axis=0) for th in CLUSTER_ANGLES_DEG
            },
            "cluster_counts_min_over_seeds_1deg": r["links"][th1].min(0),
            "cluster_counts_max_over_seeds_1deg": r["links"][th1].max(0),
            "final_glpr_rank_count_per_seed": r["final_glpr_rank"],
            "glpr_rank_count_median_over_seeds": np.median(r["counts"], axis=0),
            "angular_spread_deg_seed0": r["angular_spread_seed0"],
            "fraction_within_1deg_of_sink_direction_per_seed": r["fraction_within_1deg_of_sink_direction"],
            "fraction_within_1deg_of_first_token_direction_per_seed": r["fraction_within_1deg_of_first_token"],
            "final_norm_range_seed0": r["norm_range_final_seed0"],
            "token_norm_median_per_seed": r["norm_median"],
            "statuses": r["statuses"],
        }
    o.write_json(
        {
            "setup": {
                "n": N,
                "d": D,
                "kind": "softmax under a causal mask",
                "Q": "I",
                "K": "I",
                "V": "I",
                "beta": 1.0,
                "sink": SINK,
                "tokens": "iid N(0, I) (normalised on the unit circle for the sphere runs)",
                "seeds": n_seeds,
                "cluster_count": "connected components of the graph 'angle between token directions < θ' (single linkage), "
                f"θ = {', '.join(f'{th:g}°' for th in CLUSTER_ANGLES_DEG)}; final counts and titles use θ = 1°",
                "glpr_rank_count": "diagnostics.cluster_count: rank of the Gram matrix of normalised tokens thresholded at "
                f"cos > {GLPR_THRESHOLD:g} (≈ {GLPR_ANGLE_DEG:.3f}°), drawn for reference only",
                "why_not_the_glpr_rank": "the rank counts clusters only when every cluster is tighter than 0.81° and the clusters are "
                "far apart; on the unit circle the tokens first gather into one bundle a few degrees wide, "
                "whose banded 0/1 similarity matrix has a high rank, so the rank climbs back "
                "while the 1° linkage count is small; both reach 1 once the bundle is narrower than 0.81°",
                "sink_effect": "final_direction_change_deg: |angle with sink − angle without sink| at t1 per token "
                f"(same initial tokens; drawn at 1e-6° when smaller); 'moved' means > {MOVED_DEG:g}°; sink weight: diagnostics.sink.sink_weight at "
                "the saved depths (softmax weight of each query on the sink)",
                "sink_weight_reference_line": SINK_WEIGHT_SMALL,
                "size_threshold": "inf (no size event)",
                "solver": "Tsit5 rtol 1e-6 (library default)",
            },
            "runs": record,
            "sink_effect": effect,
            "timing": {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)},
        },
        seeds={"tokens": SEED, "per_run": "fold_in(key(0), seed)"},
    )
    return {
        "key": f"R²: 0 % within 1° of e₁ with the sink in {int(np.sum(r2s['fraction_within_1deg_of_sink_direction'] == 0))}/"
        f"{n_seeds} seeds, the sink moves {moved_counts.min()}–{moved_counts.max()} of 64 final directions by > 1°; "
        f"unit circle: {100 * np.median(cs['fraction_within_1deg_of_sink_direction']):.0f} % within 1° of e₁ (median)",
    }


if __name__ == "__main__":
    cli(main, NAME, __doc__)
