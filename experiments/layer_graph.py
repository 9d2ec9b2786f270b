"""Figure 1 (Li & Guo, arXiv:2606.09951, layer graph): the layer graph of a 3-layer causal Transformer on 4 positions.

Each layer with mask M and residual connections has adjacency A = M | I: position i at
layer l receives from position j at layer l−1 iff A[i, j]. Residual edges (j = i) and
attention edges (j ≠ i) are drawn differently; the top row's receptive field is R^(3) = A^3.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from _common import Output, cli

from hassejax.masks import causal
from hassejax.order import layer_adjacency, reachability

FLOAT64 = False  # JAX's default precision, as when run on its own; reproduce.py sets it before main()

NAME = "layer_graph"


def main(out: Path, quick: bool = False) -> dict:
    n, num_layers = 4, 3
    mask = causal(n)
    a = np.asarray(layer_adjacency(mask))
    r = np.asarray(reachability(mask, num_layers))
    o = Output(out, NAME)

    fig, ax = plt.subplots(figsize=(4.6, 3.9))
    residual = attention = 0
    for layer in range(1, num_layers + 1):
        for i in range(n):
            for j in range(n):
                if not a[i, j]:
                    continue
                style = dict(color="#999999", lw=2.2, zorder=1) if i == j else dict(color="#1f77b4", lw=1.2, zorder=2)
                ax.annotate(
                    "", xy=(i, layer - 0.12), xytext=(j, layer - 0.88), arrowprops=dict(arrowstyle="->", **style)
                )
                residual += i == j
                attention += i != j
    for layer in range(num_layers + 1):
        for i in range(n):
            ax.scatter([i], [layer], s=380, color="white", edgecolor="black", zorder=3)
            ax.text(i, layer, f"{i}", ha="center", va="center", zorder=4)
    ax.plot([], [], color="#999999", lw=2.2, label=f"residual $i \\leftarrow i$ ({residual} edges)")
    ax.plot([], [], color="#1f77b4", lw=1.2, label=f"attention $i \\leftarrow j$, $j < i$ ({attention} edges)")
    ax.set_yticks(range(num_layers + 1), ["input"] + [f"layer {l}" for l in range(1, num_layers + 1)])
    ax.set_xticks(range(n), [f"position {i}" for i in range(n)])
    ax.set_xlim(-0.5, n - 0.5)
    ax.set_ylim(-0.4, num_layers + 0.4)
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    ax.tick_params(length=0)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=1, frameon=False)
    rec = {
        "n": n,
        "num_layers": num_layers,
        "residual_edges": residual,
        "attention_edges": attention,
        "layer_adjacency": a.astype(int),
        "reachability_after_layers": r.astype(int),
        "reachability_equals_causal": bool(np.array_equal(r, np.tril(np.ones((n, n), bool)))),
        # A² = A in the Boolean semiring (A ∨ A·A = A): the flow stops growing after one layer
        "adjacency_boolean_square_equals_adjacency": bool(np.array_equal((a.astype(int) @ a.astype(int)) > 0, a)),
    }
    same = "=" if rec["reachability_equals_causal"] else "≠"
    ax.set_title(
        f"Causal mask, {num_layers} layers × {n} positions: $A = M \\vee I$ per layer;\n"
        f"the flow after {num_layers} layers is $R^{{({num_layers})}} = A^{num_layers}$ {same} causal mask"
        + (
            ";\nthe mask is closed ($A^2 = A$): the same flow already after one layer"
            if rec["adjacency_boolean_square_equals_adjacency"]
            else ""
        )
    )
    o.savefig(fig, "layer_graph")
    o.write_json(rec)
    return {
        "key": f"{residual} residual + {attention} attention edges; A^3 == causal: {np.array_equal(r, np.tril(np.ones((n, n), bool)))}"
    }


if __name__ == "__main__":
    cli(main, NAME, __doc__)
