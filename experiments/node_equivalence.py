"""Figure 4 (spec hasse.md §5): node equivalence (Li & Guo, arXiv:2606.09951, Def. 3.5) and the merge.

(a) The autoregressive tasks T_1..T_4: task T_k holds w_1..w_k with a causal mask and predicts
w_{k+1}; its Hasse diagram is a chain. Node w_j has the same input and an equivalent covered
node in every task that holds it, so the merge identifies them: one chain of 4 nodes (the
causal mask on n − 1 slots). Labels carry over: a merged node carries the target of any of
the task nodes it identifies (w_1 is context in T_2..T_4 but predicts w_2 in T_1, so the merged
w_1 predicts w_2).

(b) Same input is not enough: in the butterfly family (n = 4), T_1's node w_2 (backward wing,
it covers w_3) and T_3's node w_2 (forward wing, it covers w_1) hold the same input (w, 2) but
cover inequivalent nodes, so they are not equivalent and the merge keeps both (B_2 and F_2);
w_4, with equal inputs and nothing below, is shared. Equivalences are computed by
:func:`hassejax.tasks.node_signatures`, not drawn by hand.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from _common import Output, cli
from _names import arrow_tex, slot_names, slot_tex, token_tex
from matplotlib.lines import Line2D
from matplotlib.patches import ConnectionPatch, Patch

from hassejax.order import HasseDiagram
from hassejax.plot import draw_hasse
from hassejax.plot.family import draw_task_family
from hassejax.tasks import autoregressive, butterfly, merge_tasks, node_signatures

FLOAT64 = False  # JAX's default precision, as when run on its own; reproduce.py sets it before main()

NAME = "node_equivalence"
CITE = "Li & Guo, arXiv:2606.09951"
# Node colours in (a): carries a target / context only. Yellow and white, so that no colour of (a)
# is one of the stream colours of (b) (causal_merge uses the same yellow for its target-carrying slots).
PREDICTING, CONTEXT = "#ffeb8a", "#ffffff"
JOIN = "#2ca02c"
APART = "#d62728"
STREAM_COLOR = {"F": "#c6dbef", "B": "#fdd0a2", "C": "#c7e9c0"}
STREAM_NAME = {"B": "backward wing $B$", "C": "centres $C$", "F": "forward wing $F$"}


def _math(token) -> str:
    """A token ("w", j) as mathtext $w_{j}$ (the token notation of every figure: :func:`_names.token_tex`)."""
    return token_tex(token)


def _node(ax, x, y, text, labelled):
    ax.text(
        x,
        y,
        text,
        ha="center",
        va="center",
        fontsize=8.5,
        family="monospace",
        zorder=3,
        bbox=dict(boxstyle="round,pad=0.3", facecolor=PREDICTING if labelled else CONTEXT, edgecolor="#333333"),
    )


def _autoregressive_panel(ax, n: int = 5) -> dict:
    family = autoregressive(n)
    tasks = family.tasks
    ids, table = node_signatures(tasks)
    merged = family.merge()
    gap = 1.6
    places: dict[int, list] = {}
    for t_idx, (task, sig) in enumerate(zip(tasks, ids)):
        x = t_idx * gap
        ax.text(x, -0.7, f"$T_{t_idx + 1}$\npredicts $w_{t_idx + 2}$", ha="center", va="top")
        for s in range(task.n):
            _node(ax, x, s, "{" + _math(task.inputs[s]) + "}", task.labels[s] is not None)
            places.setdefault(int(sig[s]), []).append((x, s))
            if s:
                ax.annotate("", xy=(x, s - 0.25), xytext=(x, s - 0.75), arrowprops=dict(arrowstyle="->", color="#333"))
    joins = 0
    for pts in places.values():
        for (x0, y0), (x1, y1) in itertools.pairwise(pts):
            ax.plot([x0 + 0.3, x1 - 0.3], [y0, y1], ls="--", color=JOIN, lw=1.0, zorder=1)
            joins += 1
    xm = len(tasks) * gap + 0.7
    ax.axvline(xm - 0.8, color="#bbbbbb", lw=0.8)
    carried = []
    for p in range(merged.n):
        lab = merged.labels[p]
        text = arrow_tex(merged.inputs[p], lab) if lab else _math(merged.inputs[p])
        _node(ax, xm, p, "{" + text + "}", lab is not None)
        if p:
            ax.annotate("", xy=(xm, p - 0.25), xytext=(xm, p - 0.75), arrowprops=dict(arrowstyle="->", color="#333"))
        # a label carried over: the merged slot is labelled, but some task node it identifies is not
        if lab is not None and any(
            t.labels[s] is None for t, sm in zip(tasks, merged.slot_map) for s in np.flatnonzero(sm == p)
        ):
            carried.append(merged.inputs[p])
    ax.text(xm, -0.7, f"merge\n{merged.n} nodes", ha="center", va="top")
    handles = [
        Patch(
            facecolor=PREDICTING,
            edgecolor="#333333",
            label="carries a target; a merged node carries the\ntarget of any task node it identifies "
            f"({', '.join(_math(c) for c in carried)}:\ncontext in later tasks, labelled in an earlier one)",
        ),
        Patch(facecolor=CONTEXT, edgecolor="#333333", label="context only (no target)"),
        Line2D([], [], ls="--", color=JOIN, label="equivalent nodes (same signature)"),
    ]
    ax.legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(-0.02, 1.02),
        frameon=False,
        title="(a) node colour",
        alignment="left",
    )
    ax.set_xlim(-0.6, xm + 0.9)
    ax.set_ylim(-1.6, 4.4)
    ax.set_axis_off()
    ax.set_title(
        f"(a) autoregressive tasks $T_1,\\dots,T_4$: $w_j$ is equivalent across tasks; "
        f"{sum(t.n for t in tasks)} nodes → one chain of {merged.n}"
    )
    return {
        "task_sizes": [t.n for t in tasks],
        "signature_ids": [s.tolist() for s in ids],
        "distinct_signatures": len(table),
        "nodes_before_merge": sum(t.n for t in tasks),
        "merged_slots": merged.n,
        "equivalence_joins_drawn": joins,
        "merged_mask": np.asarray(merged.mask).astype(int),
        "merged_labels": [None if y is None else str(y) for y in merged.labels],
        "labels_carried_over_to": [str(c) for c in carried],
    }


def _butterfly_panel(fig, axes, ax_merge, n: int = 4, pair: tuple[int, int] = (1, 3)) -> dict:
    family = butterfly(n)
    tasks = [family.tasks[k - 1] for k in pair]
    merged = merge_tasks(tasks, family.stream_order, name="butterfly_T1_T3")
    ids, table = node_signatures(tasks)
    # Levels: forward chain w_j at j - 1, backward chain w_j at n - j, centre on top.
    levels = [
        [{"F": x.position - 1, "B": n - x.position, "C": n - 1}[s] for x, s in zip(t.inputs, t.streams)] for t in tasks
    ]
    keys = [[{"F": 100.0, "B": -100.0, "C": 0.0}[s] for s in t.streams] for t in tasks]
    names = [[token_tex(x) for x in t.inputs] for t in tasks]
    drawn = draw_task_family(
        tasks,
        axes,
        names=names,
        levels=levels,
        order_key=keys,
        colors=[[STREAM_COLOR[s] for s in t.streams] for t in tasks],
        titles=[f"$T_{k}$: predicts $w_{k}$" for k in pair],
    )
    # The two w2 nodes: same input, different signatures.
    w2 = []
    for t, (task, ax) in enumerate(zip(tasks, axes)):
        slot = next(s for s, x in enumerate(task.inputs) if x == ("w", 2))
        d = task.diagram()
        c = int(np.asarray(d.labels)[slot])
        text = ax.texts[c]
        text.get_bbox_patch().set_edgecolor(APART)
        text.get_bbox_patch().set_linewidth(2.0)
        below = [d.classes[u] for u, v in d.edges if v == c]
        w2.append(
            {
                "task": task.name,
                "stream": task.streams[slot],
                "signature_id": int(ids[t][slot]),
                "covers": [str(task.inputs[m[0]]) for m in below],
                "text": text,
                "ax": ax,
            }
        )
    fig.add_artist(
        ConnectionPatch(
            xyA=w2[0]["text"].get_position(),
            coordsA=w2[0]["ax"].transData,
            xyB=w2[1]["text"].get_position(),
            coordsB=w2[1]["ax"].transData,
            connectionstyle="arc3,rad=-0.15",
            color=APART,
            linestyle=":",
            linewidth=1.4,
            shrinkA=12,
            shrinkB=12,
        )
    )
    mnames = slot_names(merged)  # the JSON's slot names
    mtex = slot_tex(merged)  # the drawn ones: mathtext, as the token labels beside them ($B_{2}$, $w_{2}$)
    md = HasseDiagram.from_mask(merged.mask)
    first = [m[0] for m in md.classes]
    draw_hasse(
        md,
        ax=ax_merge,
        names=mtex,  # slot names as in the butterfly figures (B2, C1, F2), in mathtext
        levels="top",
        order_key=[
            {"F": 100.0 - merged.inputs[s].position, "B": -100.0 - merged.inputs[s].position, "C": 0.0}[
                merged.streams[s]
            ]
            + (merged.inputs[s].position if merged.streams[s] == "C" else 0)
            for s in first
        ],
        class_colors=[STREAM_COLOR[merged.streams[s]] for s in first],
        min_fontsize=8,
        title=f"merge of $T_1$, $T_3$: {drawn.merged_nodes} nodes\n($w_2$ twice: "
        f"{', '.join(sorted(t for t, x in zip(mtex, merged.inputs) if x == ('w', 2)))})",  # B, F: left to right
    )
    for c, s in enumerate(first):
        if merged.inputs[s] == ("w", 2):
            ax_merge.texts[c].get_bbox_patch().set_edgecolor(APART)
            ax_merge.texts[c].get_bbox_patch().set_linewidth(2.0)
    # Panel (b) colours nodes by stream, not by target: its own legend (as in butterfly_merge).
    axes[0].figure.legend(
        handles=[Patch(facecolor=STREAM_COLOR[k], edgecolor="#333333", label=v) for k, v in STREAM_NAME.items()],
        loc="lower center",
        bbox_to_anchor=(0.5, 0.035),
        ncol=3,
        frameon=False,
        title="(b) node colour = stream",
    )
    sig_text = [
        f"${x['task'][0]}_{x['task'][1:]}$: $w_2$ covers ${x['covers'][0][0]}_{x['covers'][0][1:]}$" for x in w2
    ]
    axes[0].figure.text(
        0.5,
        0.01,
        f"red: same input $w_2$, not equivalent ({sig_text[0]}; {sig_text[1]})",
        ha="center",
        color=APART,
    )
    return {
        "n": n,
        "tasks": [t.name for t in tasks],
        "task_nodes": list(drawn.task_nodes),
        "merged_nodes": drawn.merged_nodes,
        "merged_slots": merged.n,
        "merged_slot_names": mnames,
        "joins": len(drawn.joins),
        "distinct_signatures": len(table),
        "w2_nodes": [{k: v for k, v in x.items() if k not in ("text", "ax")} for x in w2],
        "w2_equivalent": w2[0]["signature_id"] == w2[1]["signature_id"],
    }


def main(out: Path, quick: bool = False) -> dict:
    o = Output(out, NAME)
    fig = plt.figure(figsize=(7.0, 7.2))
    ax_a = fig.add_axes((0.02, 0.55, 0.96, 0.37))
    ar = _autoregressive_panel(ax_a)
    fig.text(
        0.5,
        0.485,
        "(b) butterfly tasks, $n = 4$: the same input is not enough (the covered nodes must be equivalent)",
        ha="center",
        fontsize=plt.rcParams["axes.titlesize"],
    )
    axes = [fig.add_axes((0.02 + 0.23 * k, 0.13, 0.2, 0.29)) for k in range(2)]
    ax_merge = fig.add_axes((0.52, 0.13, 0.46, 0.29))
    bf = _butterfly_panel(fig, axes, ax_merge)
    fig.suptitle(f"Node equivalence and the merge ({CITE}, Def. 3.5, Thm 3.7)", y=0.99)
    o.savefig(fig, "node_equivalence")
    o.write_json({**ar, "butterfly_same_input_pair": bf})
    return {
        "key": f"{ar['nodes_before_merge']} task nodes -> {ar['distinct_signatures']} merged nodes; "
        f"butterfly w2 pair equivalent: {bf['w2_equivalent']}"
    }


if __name__ == "__main__":
    cli(main, NAME, __doc__)
