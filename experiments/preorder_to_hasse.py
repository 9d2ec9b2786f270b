"""Figure 3 (spec hasse.md §5): from a block-causal mask to its preorder, classes and Hasse chain.

Block-causal with 3 blocks of 2: positions in a block attend to each other (mutually
reachable: one class per block), and every block sees the earlier ones, so the quotient
order is a chain of 3 classes and L* = 1 (the mask is already closed).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from _common import Output, cli

from hassejax.masks import block_causal
from hassejax.order import HasseDiagram, convergence_depth, reachability
from hassejax.plot import draw_hasse, draw_mask

NAME = "preorder_to_hasse"


def main(out: Path, quick: bool = False) -> dict:
    n, block = 6, 2
    mask = block_causal(n, block)
    r = np.asarray(reachability(mask))
    diagram = HasseDiagram.from_mask(mask)
    labels = np.asarray(diagram.labels)
    o = Output(out, NAME)
    fig, axes = plt.subplots(
        1, 4, layout="constrained", figsize=(14, 3.8), gridspec_kw={"width_ratios": [1, 1, 1, 0.8]}
    )
    draw_mask(mask, ax=axes[0], title="mask M (block-causal, 3 × 2)")
    draw_mask(r, ax=axes[1], title="closure R: j ⪯ i iff R[i, j]")
    cmap = plt.get_cmap("tab10")
    img = np.ones((n, n, 3))
    mutual = r & r.T
    for i in range(n):
        for j in range(n):
            if mutual[i, j]:
                img[i, j] = cmap(labels[i])[:3]
            elif r[i, j]:
                img[i, j] = (0.8, 0.8, 0.8)
    axes[2].imshow(img, interpolation="nearest")
    axes[2].set_xticks(range(n))
    axes[2].set_yticks(range(n))
    axes[2].xaxis.set_ticks_position("top")
    axes[2].xaxis.set_label_position("top")  # the label beside its tick labels, as in draw_mask
    axes[2].set_xlabel("key j")
    axes[2].set_ylabel("query i")
    axes[2].set_title("classes: R[i, j] and R[j, i] (coloured),\none-way pairs grey")
    draw_hasse(diagram, ax=axes[3], title=f"Hasse diagram: a chain of {diagram.num_classes}")
    fig.suptitle("Preorder → classes → Hasse diagram (block-causal mask, L* = 1)", fontsize=11)
    o.savefig(fig, "preorder_to_hasse")
    depth = int(convergence_depth(mask))
    o.write_json(
        {
            "n": n,
            "block_size": block,
            "convergence_depth": depth,
            "classes": [list(c) for c in diagram.classes],
            "hasse_edges": [list(e) for e in diagram.edges],
            "is_chain": diagram.width == 1,
            "depth_longest_chain": diagram.depth,
        }
    )
    return {"key": f"{diagram.num_classes} classes, chain: {diagram.width == 1}, L* = {depth}"}


if __name__ == "__main__":
    cli(main, NAME, __doc__)
