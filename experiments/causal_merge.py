"""Figure 5 (spec hasse.md §5): the causal case — the merged autoregressive chain and its mask with labels.

The minimal merged task of the autoregressive family on n = 6 tokens has n − 1 = 5 slots
w_1..w_5, each labelled with the next token; its dense mask is exactly the causal mask.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from _common import Output, cli
from _names import arrow_tex
from matplotlib.patches import Patch

from hassejax.masks import causal
from hassejax.order import HasseDiagram
from hassejax.plot import draw_hasse, draw_mask
from hassejax.tasks import audit, autoregressive, node_signatures

FLOAT64 = False  # JAX's default precision, as when run on its own; reproduce.py sets it before main()

NAME = "causal_merge"
TARGET = "#ffeb8a"  # "carries a target", as in node_equivalence (a)


def _centre_suptitle(fig, title) -> None:
    """Move the suptitle `title` to the horizontal centre of what is drawn (labels included).

    The saved figure is cropped to its content (bbox_inches="tight"), and the Hasse panel
    leaves blank margins, so the figure's own centre is off-centre in the saved image."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [ax.get_tightbbox(renderer) for ax in fig.axes]
    x0, x1 = min(b.x0 for b in boxes), max(b.x1 for b in boxes)
    x_centre = fig.transFigure.inverted().transform(((x0 + x1) / 2, 0))[0]
    title.set_x(x_centre)


def main(out: Path, quick: bool = False) -> dict:
    n = 6
    family = autoregressive(n)
    merged = family.merge()
    nodes_before = sum(t.n for t in family.tasks)
    ids, _ = node_signatures(family.tasks)
    sig = np.concatenate([np.asarray(s) for s in ids])
    joins = int(sum(np.count_nonzero(sig == v) - 1 for v in np.unique(sig)))  # identifications of equal signatures
    names = [f"w{t.position}→w{y.position}" for t, y in zip(merged.inputs, merged.labels)]
    is_causal = bool(np.array_equal(merged.mask, np.asarray(causal(n - 1))))
    report = audit(merged)
    o = Output(out, NAME)
    fig, axes = plt.subplots(1, 2, layout="constrained", figsize=(6.5, 3.7), gridspec_kw={"width_ratios": [0.6, 1]})
    shown = [arrow_tex(t, y) for t, y in zip(merged.inputs, merged.labels)]  # mathtext, as in every figure
    draw_hasse(
        HasseDiagram.from_mask(merged.mask),
        ax=axes[0],
        names=shown,
        title="merged Hasse diagram:\na chain",
        fontsize=8.5,
        min_fontsize=8,
        node_color=TARGET,
    )
    axes[0].legend(
        handles=[Patch(facecolor=TARGET, edgecolor="#333333", label="carries a target\n(every slot: next token)")],
        loc="lower center",
        bbox_to_anchor=(0.5, -0.16),
        frameon=False,
    )
    draw_mask(merged.mask, ax=axes[1], labels=shown, title="merged mask (slot: input $\\to$ target)")
    title = fig.suptitle(
        f"Causal attention is the minimal merge of the autoregressive family (Thm 3.7,\n"
        f"Li & Guo, arXiv:2606.09951), $n = {n}$: {n - 1} tasks, {nodes_before} task nodes, "
        f"{joins} joins → {merged.n} slots"
    )
    _centre_suptitle(fig, title)
    o.savefig(fig, "causal_merge")
    o.write_json(
        {
            "n": n,
            "slots": merged.n,
            "slot_names": names,
            "mask": np.asarray(merged.mask).astype(int),
            "equals_causal": is_causal,
            "tasks": len(family.tasks),
            "nodes_before_merge": nodes_before,
            "joins": joins,
            "leaks": len(report.leaks),
            "token_density": report.token_density,
            "slot_density": report.slot_density,
        }
    )
    return {
        "key": f"{nodes_before} task nodes, {joins} joins -> {merged.n} slots, equals causal: {is_causal}, leaks: {len(report.leaks)}"
    }


if __name__ == "__main__":
    cli(main, NAME, __doc__)
