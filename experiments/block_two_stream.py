"""Figures 6–7 (spec hasse.md §5): Block Two-Stream attention derived from the block-generation family.

n = 6, block size l = 2: the merge of the block-generation tasks (plus the full content
task) has 2n = 12 slots [w_1..w_6 | m_1..m_6]. Its Hasse diagram: the content chain
w_1 < … < w_6, and one class per query group {m_{2b+1}, m_{2b+2}} covering w_{2b}. The
mask is drawn with its content/query quadrants outlined; the audit finds no leak.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from _common import Output, cli
from _names import slot_names
from matplotlib.patches import Rectangle

from hassejax.order import HasseDiagram
from hassejax.plot import draw_hasse, draw_mask
from hassejax.tasks import audit, block_generation, block_two_stream_mask

NAME = "block_two_stream"


def main(out: Path, quick: bool = False) -> dict:
    n, l = 6, 2
    merged = block_generation(n, l).merge()
    names = slot_names(merged)
    diagram = HasseDiagram.from_mask(merged.mask)
    closed_form = bool(np.array_equal(merged.mask, np.asarray(block_two_stream_mask(n, l))))
    report = audit(merged)
    o = Output(out, NAME)

    fig, ax = plt.subplots(figsize=(6.5, 6.5))
    draw_hasse(
        diagram,
        ax=ax,
        names=names,
        title=f"Block Two-Stream Hasse diagram (n = {n}, l = {l}): {diagram.num_classes} classes",
    )
    o.savefig(fig, "block_two_stream_hasse")

    fig, ax = plt.subplots(figsize=(6.2, 6.2))
    draw_mask(merged.mask, ax=ax, labels=names, title=f"Block Two-Stream mask (n = {n}, l = {l}), derived by the merge")
    # Quadrant outlines on top of the cells and the grid, inset so neighbouring outlines do
    # not overlap, in colours that stand out on both the dark (True) and white cells.
    inset = 0.12
    quads = [
        ((0, 0), "content → content", "#ff7f0e", "-"),
        ((0, n), "query → content", "#2ca02c", "-"),
        ((n, n), "query → query", "#d62728", "-"),
        ((n, 0), "content → query (empty)", "#7f7f7f", (0, (4, 2))),
    ]
    for (x, y), label, color, ls in quads:
        ax.add_patch(
            Rectangle(
                (x - 0.5 + inset, y - 0.5 + inset),
                n - 2 * inset,
                n - 2 * inset,
                fill=False,
                lw=2.6,
                ls=ls,
                ec=color,
                label=label,
                zorder=5,
                clip_on=False,
            )
        )
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.04), ncol=2, fontsize=8, frameon=False)
    o.savefig(fig, "block_two_stream_mask")
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
        }
    )
    return {"key": f"{merged.n} slots, closed form: {closed_form}, leaks: {len(report.leaks)}"}


if __name__ == "__main__":
    cli(main, NAME, __doc__)
