"""Figures 8–9 (spec hasse.md §5): Butterfly attention derived from the butterfly family, and its sparse variant.

n = 4: the merge has 3n − 2 = 10 slots [F_1..F_3 | B_2..B_4 | C_1..C_4] (forward wing,
backward wing, centre nodes holding w'_k). Every centre slot C_k reaches exactly
{w_j : j ≠ k} ∪ {w'_k}: 100 % of the tokens are targets and none leaks. The sparse variant
(same closure) has 7n − 8 nonzeros and needs L* = n − 1 layers.

The Hasse diagram is drawn with the backward wing rising on the left, the forward wing on
the right and the centres on one level (the top: they are the maximal classes), coloured by
stream. With the wings on opposite sides and the centres in slot order the layout has
1 crossing at n = 4 (JSON `crossings_by_n`: the count of this layout for n = 4 … 8, measured: 1, 3, 6,
10, 15 = (n − 2)(n − 3)/2). No drawing with the centres on one level avoids
crossings for n = 5 … 8 (checked: the diagram plus one vertex joined to every centre is not
planar, networkx; the JSON's `apex_planar`). At n = 4 crossing-free orders of the centres
exist (C1, C2, C4, C3 and three others, up to mirror images; JSON `n4_crossing_free_centre_orders`,
networkx); in C1, C2, C4, C3 (the order named in the note) the cycle
B4 → B3 → C2 … C4 … C3 ← B4 separates the forward wing from the vertex above the centres
(JSON `forward_wing_enclosed_by_B4_cycle`), so the edge B4 → C3 runs around the forward
wing. The figure keeps the wings apart and the 1 crossing.

The merge figure draws the n tasks T_1..T_n before merging (n² nodes), joins the nodes the
merge identifies (Li & Guo, arXiv:2606.09951, Def. 3.5), the minimal merge
(3n − 2 nodes, Thm 3.7) and a common supergraph that is not minimal: the same family with the
backward wing kept apart per task (n − 1 + n(n − 1)/2 + n nodes).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import matplotlib.pyplot as plt
import networkx as nx
import numpy as np
from _common import Output, cli
from _names import slot_names, token_tex
from matplotlib.lines import Line2D
from matplotlib.patches import ConnectionPatch, Patch

from hassejax.order import HasseDiagram, convergence_depth
from hassejax.plot import draw_hasse, draw_mask, hasse_crossings, hasse_layout
from hassejax.plot.family import draw_task_family, per_task_slots
from hassejax.tasks import Task, Token, audit, butterfly, butterfly_mask, merge_tasks, sparsify

FLOAT64 = False  # JAX's default precision, as when run on its own; reproduce.py sets it before main()

NAME = "butterfly_attention"
CITE = "Li & Guo, arXiv:2606.09951"
STREAM_COLOR = {"F": "#c6dbef", "B": "#fdd0a2", "C": "#c7e9c0"}  # fills (light: black text stays readable)
STREAM_TEXT = {"F": "#08519c", "B": "#a63603", "C": "#006d2c"}  # tick labels (dark shades of the same hues)
STREAM_NAME = {"F": "forward wing F", "B": "backward wing B", "C": "centres C"}


def _key(stream: str, token: Token) -> float:
    """Order within a layer: backward wing left, centres by position, forward wing right.

    A backward-wing token kept apart per task (symbol ``("w", "T<k>")``) goes left of the
    copies of later tasks, so each task's chain rises below its own centre."""
    if stream == "B" and isinstance(token.symbol, tuple):
        return -100.0 + 10 * int(token.symbol[1][1:])
    return {"B": -100.0 - token.position, "C": float(token.position), "F": 100.0 - token.position}[stream]


def _class_attrs(task: Task, diagram: HasseDiagram):
    first = [mem[0] for mem in diagram.classes]
    streams = [task.streams[s] for s in first]
    return streams, [_key(task.streams[s], task.inputs[s]) for s in first]


def _legend(ax, streams, **kw) -> None:
    handles = [Patch(facecolor=STREAM_COLOR[s], edgecolor="#333333", label=STREAM_NAME[s]) for s in streams]
    ax.legend(handles=handles, frameon=False, **kw)


def _colour_ticks(ax, streams) -> None:
    for labels in (ax.get_xticklabels(), ax.get_yticklabels()):
        for text, s in zip(labels, streams):
            text.set_color(STREAM_TEXT[s])


def _apex_planar(diagram: HasseDiagram, centres: list[int]) -> bool:
    """Planarity of the diagram plus one vertex joined to every centre (networkx)."""
    g = nx.Graph(list(diagram.edges))
    g.add_nodes_from(range(diagram.num_classes))
    g.add_edges_from(("apex", c) for c in centres)
    return bool(nx.check_planarity(g)[0])


def _crossing_free_centre_orders(diagram: HasseDiagram, names, streams) -> list[list[str]]:
    """Centre orders (one of each mirror pair) that admit a crossing-free drawing with the centres on one line.

    The centres, in the given order, are joined by a path closed by two vertices above them
    (the line's outside); the order is drawable without crossings iff that graph is planar."""
    cname = [names[mem[0]] for mem in diagram.classes]
    centres = [c for c, s in enumerate(streams) if s == "C"]
    out = []
    for order in itertools.permutations(centres):
        if order[0] > order[-1]:
            continue
        g = nx.Graph([(cname[u], cname[v]) for u, v in diagram.edges])
        g.add_edges_from((cname[a], cname[b]) for a, b in itertools.pairwise(order))
        g.add_edges_from(("apex", cname[c]) for c in centres)
        g.add_edges_from([("apex", "apex2"), ("apex2", cname[order[0]]), ("apex2", cname[order[-1]])])
        if nx.check_planarity(g)[0]:
            out.append([cname[c] for c in order])
    return out


def _forward_wing_enclosed(diagram: HasseDiagram, names, cycle: list[str]) -> bool:
    """True iff removing the nodes of `cycle` cuts every forward-wing node off the vertex above the centres."""
    cname = [names[mem[0]] for mem in diagram.classes]
    g = nx.Graph([(cname[u], cname[v]) for u, v in diagram.edges])
    g.add_edges_from(("apex", c) for c in cname if c.startswith("C"))
    g.remove_nodes_from(cycle)
    return not any(nx.has_path(g, "apex", c) for c in cname if c.startswith("F"))


def _interleaved_joins_dotted(fig) -> int:
    """Draw dotted the later of two joins between the same level whose spans interleave (they would cross)."""
    patches = [a for a in fig.artists if isinstance(a, ConnectionPatch)]
    spans = []
    for p in patches:
        (x0, y0), (x1, y1) = p.coords1.transform(p.xy1), p.coords2.transform(p.xy2)
        spans.append((min(x0, x1), max(x0, x1), round(y0), round(y1)))
    dotted = 0
    for i, (a0, a1, ya, yb) in enumerate(spans):
        for b0, b1, yc, yd in spans[:i]:
            if ya == yb == yc == yd and (a0 < b0 < a1 < b1 or b0 < a0 < b1 < a1):
                patches[i].set_linestyle((0, (1, 1.5)))
                dotted += 1
                break
    return dotted


def _wing_layout(merged):
    """Diagram, slot names, class streams, order keys and the crossing count of the wing layout."""
    names = slot_names(merged)
    diagram = HasseDiagram.from_mask(merged.mask)
    streams, keys = _class_attrs(merged, diagram)
    return names, diagram, streams, keys, hasse_crossings(diagram, levels="top", order_key=keys)


def _separate_backward_wings(family) -> list[Task]:
    """The family with every task's backward-wing tokens renamed per task (never identified)."""
    out = []
    for t in family.tasks:
        inputs = [Token(("w", t.name), x.position) if s == "B" else x for x, s in zip(t.inputs, t.streams)]
        out.append(Task(inputs, t.mask, t.labels, t.streams, t.sources, t.name))
    return out


def main(out: Path, quick: bool = False) -> dict:
    n = 4
    family = butterfly(n)
    merged = family.merge()
    names, diagram, streams, keys, crossings = _wing_layout(merged)
    sparse = sparsify(merged)
    report = audit(merged)
    o = Output(out, NAME)

    # ---- Figure 8: the merged Hasse diagram, wings on their sides, centres on one level.
    pos = hasse_layout(diagram, names, levels="top", order_key=keys)
    centre_levels = sorted({pos[c][1] for c, s in enumerate(streams) if s == "C"})
    fig, ax = plt.subplots(figsize=(4.6, 3.4))
    draw_hasse(
        diagram,
        ax=ax,
        names=names,
        levels="top",
        order_key=keys,
        class_colors=[STREAM_COLOR[s] for s in streams],
        min_fontsize=8,
        title=f"Butterfly Hasse diagram, $n = {n}$ ({CITE}):\n"
        f"{diagram.num_classes} classes; wings on opposite sides, centres in slot order: {crossings} crossing",
    )
    _legend(ax, ["B", "C", "F"], loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3, handlelength=1.2)
    free_orders = _crossing_free_centre_orders(diagram, names, streams)
    enclosed = _forward_wing_enclosed(diagram, names, ["B4", "B3", "C2", "C4", "C3"])
    checked_n = range(4, 9)  # apex planarity: n = 4 … 8
    ax.text(
        0.5,
        -0.16,
        f"crossing-free at $n = {n}$ with the centres reordered (e.g. {', '.join(free_orders[0])}),\n"
        "but then the edge B4 → C3 runs around the forward wing;\n"
        "with the centres on one level, crossings are unavoidable for $n$ = 5–8 (checked)",
        transform=ax.transAxes,
        ha="center",
        va="top",
    )
    o.savefig(fig, "butterfly_hasse")

    # ---- Figure 9: dense mask and its sparse variant, tick labels coloured by stream.
    slot_streams = list(merged.streams)
    fig, axes = plt.subplots(1, 2, layout="constrained", figsize=(6.5, 3.6))
    dense_depth = int(convergence_depth(merged.mask))
    draw_mask(
        merged.mask,
        ax=axes[0],
        labels=names,
        title=f"dense: {int(merged.mask.sum())} nonzeros ($2n^2-n$), $L^* = {dense_depth}$",
    )
    draw_mask(
        sparse.mask,
        ax=axes[1],
        labels=names,
        title=f"sparse: {sparse.nonzeros} nonzeros ($7n-8$), $L^* = {sparse.depth}$ ($n-1$)",
    )
    for a in axes:
        _colour_ticks(a, slot_streams)
    fig.suptitle(
        f"Butterfly attention, $n = {n}$, and its sparse variant (Def. 3.8): the same closure\n"
        f"({CITE}; slot names coloured by stream: F, B, C)"
    )
    o.savefig(fig, "butterfly_masks")

    # ---- The merge: tasks before merging, the minimal merge, a larger common supergraph.
    tasks = family.tasks
    level_of_class = {c: round(y) for c, (_, y) in pos.items()}
    slot_level = [level_of_class[int(c)] for c in np.asarray(diagram.labels)]
    slot_key = [_key(s, x) for s, x in zip(merged.streams, merged.inputs)]
    task_names = [[token_tex(x) for x in t.inputs] for t in tasks]  # mathtext, as in every figure
    split = merge_tasks(_separate_backward_wings(family), family.stream_order, name="butterfly_split_B")
    split_names = [
        f"B{x.position}/{x.symbol[1]}" if s == "B" else nm
        for s, x, nm in zip(split.streams, split.inputs, slot_names(split))
    ]
    split_diagram = HasseDiagram.from_mask(split.mask)
    split_streams, split_keys = _class_attrs(split, split_diagram)

    # Fixed axes (no layout engine): draw_hasse fits its font to the axes' size when called.
    fig = plt.figure(figsize=(7.0, 6.6))
    grid = fig.add_gridspec(2, 8, left=0.02, right=0.98, top=0.86, bottom=0.08, hspace=0.45, wspace=0.3)
    task_axes = [fig.add_subplot(grid[0, 2 * t : 2 * t + 2]) for t in range(len(tasks))]
    drawn = draw_task_family(
        tasks,
        task_axes,
        names=task_names,
        levels=per_task_slots(slot_level, merged.slot_map),
        order_key=per_task_slots(slot_key, merged.slot_map),
        colors=[[STREAM_COLOR[s] for s in t.streams] for t in tasks],
        titles=[f"$T_{k}$: predicts $w_{k}$" for k in range(1, n + 1)],
    )
    task_nodes = sum(drawn.task_nodes)
    dotted_joins = _interleaved_joins_dotted(fig)
    fig.text(
        0.5,
        0.915,
        f"(a) the {n} tasks before merging: {task_nodes} nodes ($n^2$); dashed"
        + (" or dotted" if dotted_joins else "")
        + f": equivalent nodes (Def. 3.5), {len(drawn.joins)} joins",
        ha="center",
        fontsize=plt.rcParams["axes.titlesize"],
    )
    ax_m, ax_s = fig.add_subplot(grid[1, :3]), fig.add_subplot(grid[1, 3:])
    draw_hasse(
        diagram,
        ax=ax_m,
        names=names,
        levels="top",
        order_key=keys,
        class_colors=[STREAM_COLOR[s] for s in streams],
        min_fontsize=8,
        title=f"(b) minimal merge (Thm 3.7):\n{diagram.num_classes} nodes ($3n-2$)",
    )
    draw_hasse(
        split_diagram,
        ax=ax_s,
        names=split_names,
        levels="top",
        order_key=split_keys,
        class_colors=[STREAM_COLOR[s] for s in split_streams],
        min_fontsize=8,
        title=f"(c) a common supergraph, not minimal:\nB wing kept per task, {split_diagram.num_classes} nodes",
    )
    # (b) and (c) titled from their own left edges, and a rule between them: (c)'s first chain sits left
    # of the centre of its axes and read as part of (b) under centred titles
    for ax_ in (ax_m, ax_s):
        ax_.set_title(ax_.get_title(), loc="left")
        ax_.set_title("")
    x_rule = (ax_m.get_position().x1 + ax_s.get_position().x0) / 2
    y0, y1 = ax_s.get_position().y0, ax_s.get_position().y1
    fig.add_artist(Line2D([x_rule, x_rule], [y0, y1 + 0.04], transform=fig.transFigure, color="0.7", lw=0.8))
    _legend(fig, ["B", "C", "F"], loc="lower center", bbox_to_anchor=(0.5, 0.0), ncol=3, handlelength=1.2)
    fig.suptitle(f"Merging the butterfly family, $n = {n}$ ({CITE})", y=0.99)
    o.savefig(fig, "butterfly_merge")

    o.write_json(
        {
            "n": n,
            "slots": merged.n,
            "slot_names": names,
            "slot_streams": slot_streams,
            "dense_mask": np.asarray(merged.mask).astype(int),
            "sparse_mask": sparse.mask.astype(int),
            "dense_nonzeros": int(merged.mask.sum()),
            "dense_depth": dense_depth,
            "sparse_nonzeros": sparse.nonzeros,
            "sparse_depth": sparse.depth,
            "equals_closed_form": bool(np.array_equal(merged.mask, np.asarray(butterfly_mask(n)))),
            "sparse_equals_closed_form": bool(np.array_equal(sparse.mask, np.asarray(butterfly_mask(n, sparse=True)))),
            "centre_reach": {str(a.target): sorted(str(t) for t in a.reached) for a in report.slots},
            "leaks": len(report.leaks),
            "token_density": report.token_density,
            "hasse_layout": {
                "classes": [[names[p] for p in c] for c in diagram.classes],
                "edges": [list(e) for e in diagram.edges],
                "positions": {names[diagram.classes[c][0]]: list(xy) for c, xy in pos.items()},
                "centre_levels": centre_levels,
                "crossings": crossings,
                "crossings_by_n": {  # the same layout (wings apart, centres in slot order), measured
                    str(m): c_m for m in checked_n for *_, c_m in [_wing_layout(butterfly(m).merge())]
                },
                "apex_planar": {
                    str(m): _apex_planar(d, [c for c, s in enumerate(st) if s == "C"])
                    for m in checked_n
                    for _, d, st, _, _ in [_wing_layout(butterfly(m).merge())]
                },
                "n4_crossing_free_centre_orders": free_orders,
                "forward_wing_enclosed_by_B4_cycle": enclosed,
            },
            "merge": {
                "task_nodes": list(drawn.task_nodes),
                "task_nodes_total": task_nodes,
                "merged_nodes": drawn.merged_nodes,
                "merged_diagram_classes": diagram.num_classes,
                "joins": len(drawn.joins),
                "joins_drawn_dotted_where_two_would_cross": dotted_joins,
                "not_minimal_supergraph": "backward wing kept apart per task",
                "not_minimal_nodes": split_diagram.num_classes,
                "not_minimal_slots": split.n,
            },
        }
    )
    return {
        "key": f"{merged.n} slots, sparse {sparse.nonzeros} nonzeros at L* = {sparse.depth}, leaks: {len(report.leaks)}; "
        f"merge {task_nodes} -> {drawn.merged_nodes} nodes"
    }


if __name__ == "__main__":
    cli(main, NAME, __doc__)
