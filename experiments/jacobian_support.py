"""A Transformer's Jacobian support equals R^(L) = (M ∨ I)^L (Li & Guo, arXiv:2606.09951; spec hasse.md §4).

Mask M: the sparse Butterfly mask, n = 4 (3n − 2 = 10 slots, 7n − 8 = 20 entries, L* = n − 1 = 3),
whose flow grows with depth. For L = 1, 2, 3 an Equinox :class:`hassejax.nn.Transformer` with L
pre-norm blocks (random weights) is differentiated at random embeddings:
``support[i, j] = True`` iff ``∂ out_i / ∂ in_j`` has a nonzero entry
(:func:`hassejax.nn.jacobian_flow`, threshold exactly 0). The support is compared entry by entry
with ``R^(L)`` (:func:`hassejax.order.reachability`) for several draws of weights and inputs.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from _common import Output, cli
from _names import slot_names

from hassejax.nn import Transformer, jacobian_flow
from hassejax.order import reachability
from hassejax.plot import draw_mask
from hassejax.plot.style import figsize
from hassejax.tasks import butterfly, sparsify

FLOAT64 = False  # JAX's default precision, as when run on its own; reproduce.py sets it before main()

NAME = "jacobian_support"


def main(out: Path, quick: bool = False) -> dict:
    n = 4
    merged = butterfly(n).merge()
    names = slot_names(merged)
    sparse = sparsify(merged)
    mask = jnp.asarray(sparse.mask)
    model_cfg = {"d_model": 8, "num_heads": 2, "mlp_ratio": 1, "dtype": "float32", "vocab_size": 3}
    draws = 1 if quick else 5
    seeds = {"model": list(range(draws)), "inputs": [100 + s for s in range(draws)]}
    depths = list(range(1, sparse.depth + 1))
    rows = []
    supports = {}
    for layers in depths:
        reach = np.asarray(reachability(mask, layers))
        mismatches, entries = [], []
        for s_model, s_in in zip(seeds["model"], seeds["inputs"]):
            model = Transformer(
                layers,
                model_cfg["d_model"],
                model_cfg["num_heads"],
                vocab_size=model_cfg["vocab_size"],
                num_positions=n + 1,
                key=jax.random.key(s_model),
                mlp_ratio=model_cfg["mlp_ratio"],
                dtype=jnp.float32,
            )
            x = jax.random.normal(jax.random.key(s_in), (merged.n, model_cfg["d_model"]), jnp.float32)
            support = np.asarray(jacobian_flow(model, x, mask))
            mismatches.append(int((support != reach).sum()))
            entries.append(int(support.sum()))
            supports.setdefault(layers, support)
        rows.append(
            {
                "layers": layers,
                "reachability_entries": int(reach.sum()),
                "support_entries_per_draw": entries,
                "mismatches_per_draw": mismatches,
                "mismatches_total": int(sum(mismatches)),
                "support_first_draw": supports[layers].astype(int),
                "reachability": reach.astype(int),
            }
        )
    o = Output(out, NAME)
    fig, axes = plt.subplots(2, len(depths), layout="constrained", figsize=figsize(6.5, 0.78))
    for col, row in enumerate(rows):
        layers = row["layers"]
        draw_mask(supports[layers], ax=axes[0, col], labels=names, color="#2d6a4f")
        axes[0, col].set_title(
            f"Jacobian support, $L = {layers}$\n(draw 1 of {draws}): {row['support_entries_per_draw'][0]} entries",
            fontsize=9,
        )
        draw_mask(np.asarray(row["reachability"], bool), ax=axes[1, col], labels=names)
        axes[1, col].set_title(
            f"$R^{{({layers})}} = (M \\vee I)^{{{layers}}}$: {row['reachability_entries']} entries\n"
            f"mismatches: {row['mismatches_total']} ({draws} draw{'s' if draws > 1 else ''})"
        )
        for ax in axes[:, col]:
            ax.tick_params(labelsize=8, length=2, pad=1)
            ax.set_xlabel("")
            ax.set_ylabel("")
    total = sum(r["mismatches_total"] for r in rows)
    fig.suptitle(
        f"Sparse Butterfly mask $M$ ($n = {n}$): the support of $\\partial\\,\\mathrm{{out}}_i/\\partial\\,\\mathrm{{in}}_j$ "
        f"of an $L$-layer Transformer\n(entries $\\neq 0$ exactly, float32) equals $R^{{(L)}}$: {total} mismatching entries "
        "(Li & Guo, arXiv:2606.09951)\ntop: model, bottom: mask power; row = query $i$ (output), column = key $j$ (input)"
    )
    o.savefig(fig, "jacobian_support")
    o.write_json(
        {
            "n": n,
            "slots": merged.n,
            "slot_names": names,
            "mask": sparse.mask.astype(int),
            "mask_entries": sparse.nonzeros,
            "convergence_depth": sparse.depth,
            "model": model_cfg,
            "draws": draws,
            "threshold": "exactly 0",
            "by_depth": rows,
            "mismatches_total": total,
        },
        seeds=seeds,
    )
    return {
        "key": f"mismatches {total} over L = 1..{sparse.depth} x {draws} draws; entries "
        + str([r["reachability_entries"] for r in rows])
    }


if __name__ == "__main__":
    cli(main, NAME, __doc__)
