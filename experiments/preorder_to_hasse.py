"""Figure 3 (spec hasse.md §5): from a mask to its closure, classes and Hasse diagram, and back.

The mask (n = 7, row = query, column = key; the residual diagonal A = M | I) is not closed:
0 and 1 see each other, 2 sees 1, 3 and 4 see each other and 3 sees 2, 5 sees 1, 6 sees 4
and 5. Its closure R (spec §1.3, L* = 4 layers) adds the pairs reached through chains of
attention; the classes of mutually reachable positions are {0, 1} and {3, 4} and three
singletons; the Hasse diagram (covering pairs of the quotient order) has two branches that
meet at 6; and the diagram determines R back: R[i, j] iff [j] ≤ [i] in the diagram
(Li & Guo, arXiv:2606.09951). Classes keep one colour in every panel.

The spec's own example (hasse.md §5.3), a block-causal mask of 3 blocks × 2, is drawn beside it
(``preorder_to_hasse_block_causal``): it is closed already (`L* = 1`), its classes are the blocks and
its diagram is a chain, so every step of the figure above is trivial there.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from _common import Output, cli
from matplotlib.patches import Rectangle

from hassejax.masks import block_causal
from hassejax.order import HasseDiagram, convergence_depth, reachability
from hassejax.plot import draw_hasse, draw_mask

FLOAT64 = False  # JAX's default precision, as when run on its own; reproduce.py sets it before main()

NAME = "preorder_to_hasse"
CITE = "Li & Guo, arXiv:2606.09951"
# Light fills (black node text stays readable), one per class.
CLASS_COLORS = ["#fbb4ae", "#b3cde3", "#ccebc5", "#decbe4", "#fed9a6", "#ffffcc", "#e5d8bd"]
ADDED = "#f4a340"  # pairs the closure adds to M | I
ONE_WAY = "#666666"
"""One-way pairs (R[i, j] without R[j, i]): a dark grey, L* 43 against the class colours' 80–99 (a light grey,
#cccccc, matched their lightness in greyscale)."""
# (query, key) pairs of the mask besides the diagonal.
PAIRS = [(0, 1), (1, 0), (2, 1), (3, 2), (3, 4), (4, 3), (5, 1), (6, 4), (6, 5)]


def _matrix_axes(ax, n: int) -> None:
    ax.set_xticks(range(n))
    ax.set_yticks(range(n))
    ax.set_xticks(np.arange(-0.5, n, 1.0), minor=True)
    ax.set_yticks(np.arange(-0.5, n, 1.0), minor=True)
    ax.grid(which="minor", color="#bbbbbb", linewidth=0.5)
    ax.tick_params(which="minor", length=0)
    ax.xaxis.set_ticks_position("top")
    ax.xaxis.set_label_position("top")
    ax.set_xlabel("key $j$")
    ax.set_ylabel("query $i$")


def main(out: Path, quick: bool = False) -> dict:
    n = 7
    mask = np.eye(n, dtype=bool)
    for i, j in PAIRS:
        mask[i, j] = True
    r = np.asarray(reachability(mask))
    depth = int(convergence_depth(mask))
    diagram = HasseDiagram.from_mask(mask)
    labels = np.asarray(diagram.labels)
    rebuilt = np.asarray(diagram.reachability())
    added = r & ~mask
    colors = [CLASS_COLORS[c] for c in range(diagram.num_classes)]
    o = Output(out, NAME)

    fig = plt.figure(figsize=(6.6, 6.0))
    grid = fig.add_gridspec(2, 3, left=0.07, right=0.98, top=0.80, bottom=0.03, hspace=0.5, wspace=0.45)
    ax_m, ax_r, ax_c = (fig.add_subplot(grid[0, k]) for k in range(3))
    ax_h, ax_b = fig.add_subplot(grid[1, :2]), fig.add_subplot(grid[1, 2])

    draw_mask(mask, ax=ax_m, title=f"(a) mask $M$ with the diagonal:\n$A = M \\vee I$, {int(mask.sum())} pairs")
    draw_mask(
        r, ax=ax_r, title=f"(b) closure $R = A^{{{depth}}}$ ($L^* = {depth}$):\n+{int(added.sum())} pairs (orange)"
    )
    for i, j in zip(*np.nonzero(added)):
        ax_r.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor=ADDED, edgecolor="none", zorder=2))

    img = np.ones((n, n, 3))
    mutual = r & r.T
    for i in range(n):
        for j in range(n):
            if mutual[i, j]:
                img[i, j] = plt.matplotlib.colors.to_rgb(colors[labels[i]])
            elif r[i, j]:
                img[i, j] = plt.matplotlib.colors.to_rgb(ONE_WAY)
    ax_c.imshow(img, interpolation="nearest")
    _matrix_axes(ax_c, n)
    ax_c.set_title("(c) classes: $R[i,j]$ and $R[j,i]$\n(coloured), one-way pairs dark grey")

    draw_hasse(
        diagram,
        ax=ax_h,
        class_colors=colors,
        levels=None,
        min_fontsize=8,
        title=f"(d) Hasse diagram: {diagram.num_classes} classes, {len(diagram.edges)} covering pairs\n"
        "arrow $u \\to v$: $v$ covers $u$, information flows up",
    )

    img = np.ones((n, n, 3))
    for i, j in zip(*np.nonzero(rebuilt)):
        img[i, j] = plt.matplotlib.colors.to_rgb(colors[labels[j]])
    ax_b.imshow(img, interpolation="nearest")
    _matrix_axes(ax_b, n)
    closes = bool(np.array_equal(rebuilt, r))
    ax_b.set_title(
        "(e) read back from (d): $R[i,j]$ iff $[j] \\leq [i]$\n(cell: colour of $[j]$)"
        + (": equals (b)" if closes else ": differs from (b)")
    )
    fig.suptitle(
        f"Mask → preorder → classes → Hasse diagram → the same $R$ ({CITE})\n"
        f"$n = {n}$: the closure adds {int(added.sum())} pairs; $L^* = {depth}$ layers realise it",
    )
    o.savefig(fig, "preorder_to_hasse")
    block = _block_causal(o)
    o.write_json(
        {
            "n": n,
            "mask": mask.astype(int),
            "mask_pairs_with_diagonal": int(mask.sum()),
            "closure": r.astype(int),
            "closure_pairs": int(r.sum()),
            "closure_added_pairs": int(added.sum()),
            "convergence_depth": depth,
            "classes": [list(c) for c in diagram.classes],
            "class_colors": colors,
            "hasse_edges": [list(e) for e in diagram.edges],
            "is_chain": diagram.width == 1,
            "width": diagram.width,
            "depth_longest_chain": diagram.depth,
            "hasse_closes_back_to_closure": closes,
            "block_causal": block,
        }
    )
    return {
        "key": f"{diagram.num_classes} classes, +{int(added.sum())} pairs by closure, L* = {depth}, closes: {closes}; "
        f"block-causal 3 x 2: {block['num_classes']} classes, chain: {block['is_chain']}, L* = {block['convergence_depth']}"
    }


def _block_causal(o: Output) -> dict:
    """The spec's item (hasse.md §5.3): a block-causal mask (3 blocks × 2) is closed (`R = A`, `L* = 1`), its
    classes are the blocks and its Hasse diagram is a chain; figure ``preorder_to_hasse_block_causal``."""
    n, b = 6, 2
    mask = np.asarray(block_causal(n, b))
    r = np.asarray(reachability(mask))
    depth = int(convergence_depth(mask))
    diagram = HasseDiagram.from_mask(mask)
    labels = np.asarray(diagram.labels)
    colors = [CLASS_COLORS[c] for c in range(diagram.num_classes)]
    fig = plt.figure(figsize=(6.6, 3.4))
    grid = fig.add_gridspec(1, 3, left=0.07, right=0.98, top=0.62, bottom=0.03, wspace=0.45)
    ax_m, ax_c, ax_h = (fig.add_subplot(grid[0, k]) for k in range(3))
    closed = bool(np.array_equal(r, mask))
    draw_mask(mask, ax=ax_m, title=f"(a) $M$ = block-causal, {n // b} blocks × {b}\n$R = M$: closed, $L^* = {depth}$")
    img = np.ones((n, n, 3))
    for i, j in zip(*np.nonzero(r)):
        img[i, j] = (
            plt.matplotlib.colors.to_rgb(colors[labels[i]]) if r[j, i] else plt.matplotlib.colors.to_rgb(ONE_WAY)
        )
    ax_c.imshow(img, interpolation="nearest")
    _matrix_axes(ax_c, n)
    ax_c.set_title(f"(b) classes: the {diagram.num_classes} blocks\n(coloured), one-way pairs dark grey")
    draw_hasse(
        diagram, ax=ax_h, class_colors=colors, levels=None, min_fontsize=8,
        title=f"(c) Hasse diagram: a chain of {diagram.num_classes}\n({len(diagram.edges)} covering pairs)",
    )  # fmt: skip
    fig.align_titles([ax_m, ax_c, ax_h])  # (c) has no top tick labels: its title level with (a), (b)
    fig.suptitle(
        f"A block-causal mask is already a preorder ({CITE}):\n"
        f"its classes are the blocks, ordered in a chain{'' if diagram.width == 1 else ' (not here)'}"
    )
    o.savefig(fig, "preorder_to_hasse_block_causal")
    return {
        "n": n,
        "block_size": b,
        "mask": mask.astype(int),
        "closure_equals_mask": closed,
        "convergence_depth": depth,
        "num_classes": diagram.num_classes,
        "classes": [list(c) for c in diagram.classes],
        "hasse_edges": [list(e) for e in diagram.edges],
        "is_chain": diagram.width == 1,
    }


if __name__ == "__main__":
    cli(main, NAME, __doc__)
