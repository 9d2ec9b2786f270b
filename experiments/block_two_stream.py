"""Figures 6–7 (spec hasse.md §5): Block Two-Stream attention derived from the block-generation family.

n = 6, block size l = 2: the merge of the block-generation tasks (plus the full content
task) has 2n = 12 slots [w_1..w_6 | m_1..m_6]. Its Hasse diagram: the content chain
w_1 < … < w_6, and one class per query group {m_{2b+1}, m_{2b+2}} covering w_{2b}. The
mask is drawn with its quadrants (content stream w, mask stream m) outlined; the audit finds no leak. The merge
figure draws the tasks T_0..T_2 and the content task before merging, joins the nodes the merge
identifies (Li & Guo, arXiv:2606.09951, Def. 3.5), the minimal merge (Thm 3.7) and a common
supergraph that is not minimal: the same family with the content task kept apart.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from _common import Output, cli
from _names import slot_names, slot_tex
from matplotlib.colors import to_rgb
from matplotlib.patches import Patch, Rectangle

from hassejax.order import HasseDiagram
from hassejax.plot import draw_hasse, draw_mask, hasse_layout
from hassejax.plot.family import draw_task_family, per_task_slots
from hassejax.tasks import Task, Token, audit, block_generation, block_two_stream_mask, merge_tasks

FLOAT64 = False  # JAX's default precision, as when run on its own; reproduce.py sets it before main()

NAME = "block_two_stream"
CITE = "Li & Guo, arXiv:2606.09951"
STREAM_COLOR = {"content": "#c6dbef", "query": "#fdd0a2"}
STREAM_TEXT = {"content": "#08519c", "query": "#a63603"}
"""Each stream's dark shade: tick labels and the mask's quadrant of that stream (the Hasse nodes' colours, darker)."""
STREAM_NAME = {"content": "content stream $w$", "query": "mask stream $m$ (mask tokens; XLNet's query stream)"}


def _key(stream: str, token: Token) -> float:
    """Order within a layer: content stream left (a copy kept apart further left), queries right."""
    if stream == "content":
        return -200.0 if isinstance(token.symbol, tuple) else -100.0
    return float(token.position)


def _class_attrs(task: Task, diagram: HasseDiagram):
    first = [mem[0] for mem in diagram.classes]
    streams = [task.streams[s] for s in first]
    return streams, [_key(task.streams[s], task.inputs[s]) for s in first]


def _legend(ax, **kw) -> None:
    handles = [Patch(facecolor=STREAM_COLOR[s], edgecolor="#333333", label=STREAM_NAME[s]) for s in STREAM_COLOR]
    ax.legend(handles=handles, frameon=False, **kw)


def _content_task_apart(family) -> list[Task]:
    """The family with the content task's tokens renamed (never identified with the prefixes)."""
    out = list(family.tasks[:-1])
    t = family.tasks[-1]
    out.append(Task([Token(("w", "c"), x.position) for x in t.inputs], t.mask, t.labels, t.streams, t.sources, t.name))
    return out


def main(out: Path, quick: bool = False) -> dict:
    n, l = 6, 2
    family = block_generation(n, l)
    merged = family.merge()
    names = slot_names(merged)  # the JSON's slot names
    tex = slot_tex(merged)  # the figures' labels: mathtext tokens, as in every merge figure
    diagram = HasseDiagram.from_mask(merged.mask)
    streams, keys = _class_attrs(merged, diagram)
    closed_form = bool(np.array_equal(merged.mask, np.asarray(block_two_stream_mask(n, l))))
    report = audit(merged)
    o = Output(out, NAME)

    fig, ax = plt.subplots(figsize=(3.6, 4.2))
    draw_hasse(
        diagram,
        ax=ax,
        names=tex,
        order_key=keys,
        class_colors=[STREAM_COLOR[s] for s in streams],
        min_fontsize=8,
        title=f"Block Two-Stream Hasse diagram ($n = {n}$,\n$\\ell = {l}$): {diagram.num_classes} classes ({CITE})",
    )
    _legend(ax, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=1)
    o.savefig(fig, "block_two_stream_hasse")

    fig, ax = plt.subplots(figsize=(4.6, 5.2))
    draw_mask(
        merged.mask,
        ax=ax,
        labels=tex,
        title=f"Block Two-Stream mask ($n = {n}$, $\\ell = {l}$), derived by\nthe merge (Thm 3.7, {CITE})",
    )
    for labels in (ax.get_xticklabels(), ax.get_yticklabels()):
        for text, s in zip(labels, merged.streams):
            text.set_color(STREAM_TEXT[s])
    # Quadrants as light tints over the cells (exactly on the block edges, no cell sticks out),
    # with a thin outline in the same colour.
    inset = 0.0
    quads = [
        ((0, 0), "$w$ rows × $w$ keys (content stream)", STREAM_TEXT["content"], "-"),
        ((0, n), "$m$ rows × $w$ keys", "#555555", "-"),
        ((n, n), "$m$ rows × $m$ keys (mask stream)", STREAM_TEXT["query"], "-"),
        ((n, 0), "$w$ rows × $m$ keys (empty)", "#999999", (0, (4, 2))),
    ]
    for (x, y), label, color, ls in quads:
        ax.add_patch(
            Rectangle(
                (x - 0.5 + inset, y - 0.5 + inset),
                n - 2 * inset,
                n - 2 * inset,
                fill=True,
                fc=(*to_rgb(color), 0.18),
                lw=1.4,
                ls=ls,
                ec=color,
                label=label,
                zorder=5,
                clip_on=False,
            )
        )
    ax.legend(
        loc="upper center",
        bbox_to_anchor=(0.5, -0.02),
        ncol=2,
        frameon=False,
        handlelength=1.5,
        title="dark: query slot (row) may attend to key slot (column);\n"
        "information flows key → query (stream $w$ → stream $m$, as in the Hasse diagram)",
    )
    o.savefig(fig, "block_two_stream_mask")

    # ---- The merge: tasks before merging, the minimal merge, a larger common supergraph.
    tasks = family.tasks
    pos = hasse_layout(diagram, tex, order_key=keys)
    level_of_class = {c: round(y) for c, (_, y) in pos.items()}
    slot_level = [level_of_class[int(c)] for c in np.asarray(diagram.labels)]
    slot_key = [_key(s, x) for s, x in zip(merged.streams, merged.inputs)]
    task_names = [[f"${'m' if x.symbol == 'mask' else 'w'}_{{{x.position}}}$" for x in t.inputs] for t in tasks]
    apart = merge_tasks(_content_task_apart(family), family.stream_order, name="content_task_apart")
    apart_names = [
        nm.replace("w_", "w'_") if isinstance(x.symbol, tuple) else nm for x, nm in zip(apart.inputs, slot_tex(apart))
    ]
    apart_diagram = HasseDiagram.from_mask(apart.mask)
    apart_streams, apart_keys = _class_attrs(apart, apart_diagram)

    fig = plt.figure(figsize=(7.0, 7.4))
    grid = fig.add_gridspec(2, 8, left=0.02, right=0.98, top=0.87, bottom=0.07, hspace=0.42, wspace=0.3)
    task_axes = [fig.add_subplot(grid[0, 2 * t : 2 * t + 2]) for t in range(len(tasks))]
    titles = [f"$T_{b}$: predicts block {b + 1}" for b in range(len(tasks) - 1)] + ["content task: no label"]
    drawn = draw_task_family(
        tasks,
        task_axes,
        names=task_names,
        levels=per_task_slots(slot_level, merged.slot_map),
        order_key=per_task_slots(slot_key, merged.slot_map),
        colors=[[STREAM_COLOR[s] for s in t.streams] for t in tasks],
        titles=titles,
    )
    task_nodes = sum(drawn.task_nodes)
    fig.text(
        0.5,
        0.925,
        f"(a) the {len(tasks)} tasks before merging: {task_nodes} nodes; dashed: equivalent nodes (Def. 3.5), "
        f"{len(drawn.joins)} joins",
        ha="center",
        fontsize=plt.rcParams["axes.titlesize"],
    )
    ax_m, ax_s = fig.add_subplot(grid[1, :4]), fig.add_subplot(grid[1, 4:])
    draw_hasse(
        diagram,
        ax=ax_m,
        names=tex,
        order_key=keys,
        class_colors=[STREAM_COLOR[s] for s in streams],
        min_fontsize=8,
        title=f"(b) minimal merge (Thm 3.7): {diagram.num_classes} nodes,\n{merged.n} slots ($2n$)",
    )
    draw_hasse(
        apart_diagram,
        ax=ax_s,
        names=apart_names,
        order_key=apart_keys,
        class_colors=[STREAM_COLOR[s] for s in apart_streams],
        min_fontsize=8,
        title=f"(c) a common supergraph, not minimal: content\ntask kept apart ($w'$), {apart_diagram.num_classes} nodes",
    )
    _legend(fig, loc="lower center", bbox_to_anchor=(0.5, 0.0), ncol=2)
    fig.suptitle(f"Merging the block-generation family, $n = {n}$, $\\ell = {l}$ ({CITE})", y=0.99)
    o.savefig(fig, "block_two_stream_merge")

    o.write_json(
        {
            "n": n,
            "block_size": l,
            "slots": merged.n,
            "slot_names": names,
            "mask": np.asarray(merged.mask).astype(int),
            "equals_closed_form": closed_form,
            "classes": [[names[p] for p in c] for c in diagram.classes],
            "hasse_edges": [[list(diagram.classes[u]), list(diagram.classes[v])] for u, v in diagram.edges],
            "leaks": len(report.leaks),
            "token_density": report.token_density,
            "slot_density": report.slot_density,
            "merge": {
                "tasks": [t.name for t in tasks],
                "task_nodes": list(drawn.task_nodes),
                "task_nodes_total": task_nodes,
                "merged_nodes": drawn.merged_nodes,
                "merged_diagram_classes": diagram.num_classes,
                "joins": len(drawn.joins),
                "not_minimal_supergraph": "content task kept apart",
                "not_minimal_nodes": apart_diagram.num_classes,
                "not_minimal_slots": apart.n,
            },
        }
    )
    return {
        "key": f"{merged.n} slots, closed form: {closed_form}, leaks: {len(report.leaks)}; "
        f"merge {task_nodes} -> {drawn.merged_nodes} nodes"
    }


if __name__ == "__main__":
    cli(main, NAME, __doc__)
