"""The sparse Butterfly mask's R^(L) grows to the dense closure with depth (Li & Guo, arXiv:2606.09951, Def. 3.8).

n = 5: the merged Butterfly task has 3n − 2 = 13 slots [F_1..F_4 | B_2..B_5 | C_1..C_5]; the
dense mask (2n² − n = 45 entries) is closed, L* = 1. Its sparsest variant (7n − 8 = 27
entries, same closure) needs L* = n − 1 = 4 layers: with L < L* layers, R^(L) = (M ∨ I)^L is a
subset of the dense closure (entries missing, none outside it: no leak), and R^(L*) equals it.
The counts come from :func:`hassejax.order.growth.flow_growth` (tested against NumPy integer
matrix powers); the token-level leak audit (:func:`hassejax.tasks.audit`) runs at every depth.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from _common import Output, cli
from _names import slot_names
from matplotlib.colors import ListedColormap

from hassejax.order.growth import flow_growth
from hassejax.plot import draw_mask
from hassejax.plot.style import figsize
from hassejax.tasks import Task, audit, butterfly, butterfly_mask, sparsify

FLOAT64 = False  # JAX's default precision, as when run on its own; reproduce.py sets it before main()

STREAM_TEXT = {"F": "#08519c", "B": "#a63603", "C": "#006d2c"}  # as in butterfly_attention's masks
NAME = "butterfly_depth"
MISSING = "#c8c8c8"  # entries of the dense closure not yet reached at depth L


def _missing_overlay(ax, missing: np.ndarray) -> None:
    ax.imshow(
        np.ma.masked_where(~missing, missing.astype(float)),
        cmap=ListedColormap([MISSING]),
        vmin=0,
        vmax=1,
        interpolation="nearest",
        aspect="equal",
    )


def main(out: Path, quick: bool = False) -> dict:
    n = 5
    merged = butterfly(n).merge()
    names = slot_names(merged)
    dense = np.asarray(merged.mask)
    sparse = sparsify(merged)
    g = flow_growth(sparse.mask, reference=dense, max_layers=sparse.depth + 1)
    sparse_task = Task(merged.inputs, sparse.mask, merged.labels, merged.streams, merged.sources, name="sparse")
    audits = []
    for layers in g.layers:
        rep = audit(sparse_task, int(layers))
        audits.append(
            {
                "layers": int(layers),
                "labelled_slots": len(rep.slots),
                "leaks": len(rep.leaks),
                "tokens_reached_per_labelled_slot": [len(a.reached) for a in rep.slots],
            }
        )
    dense_audit = audit(merged)
    o = Output(out, NAME)

    shown = [int(layers) for layers in g.layers[: g.depth]]
    fig, axes = plt.subplots(2, 3, layout="constrained", figsize=figsize(6.5, 0.92))
    flat = axes.ravel()
    for ax, layers in zip(flat, shown):
        i = layers - 1
        power = g.powers[i]
        draw_mask(power, ax=ax, labels=names)
        _missing_overlay(ax, dense & ~power)
        head = "$R^{(1)} = M \\vee I$" if layers == 1 else f"$R^{{({layers})}}$"
        ax.set_title(f"{head}: {int(g.entries[i])} entries\nmissing {int(g.missing[i])}, outside {int(g.outside[i])}")
    ax = flat[len(shown)]
    draw_mask(dense, ax=ax, labels=names, color="#7a1f1f")
    ax.set_title(f"dense Butterfly = its closure\n{g.reference_entries} entries ($2n^2-n$)")
    for ax in flat[: len(shown) + 1]:
        ax.tick_params(labelsize=8, length=2, pad=1)
        for labels in (ax.get_xticklabels(), ax.get_yticklabels()):
            for text, s in zip(labels, merged.streams):
                text.set_color(STREAM_TEXT[s])
        ax.set_xlabel("")
        ax.set_ylabel("")
    ax = flat[len(shown) + 1]
    ax.plot(g.layers, g.entries, "o-", color="#1f4e79", label="$R^{(L)}$ entries")
    ax.axhline(g.reference_entries, color="#7a1f1f", ls="--", label=f"dense closure ({g.reference_entries})")
    ax.plot(g.layers, g.outside, "s-", color="tab:red", label="outside the closure")
    ax.axvline(g.depth, color="0.5", ls=":", lw=1)
    ax.text(g.depth, g.reference_entries / 2, f" $L^* = {g.depth}$", color="0.3", va="center")
    ax.set_xticks(g.layers)
    ax.set_xlabel("layers $L$")
    ax.set_ylabel("entries")
    ax.set_ylim(-3, g.reference_entries + 32)
    ax.legend(loc="upper left", frameon=False)
    ax.set_title("counts by depth")
    fig.suptitle(
        f"Sparse Butterfly, $n = {n}$ ({sparse.nonzeros} entries, $7n-8$): $R^{{(L)}}$ inside the dense closure "
        f"at every $L$,\nequal at $L^* = n-1 = {g.depth}$; grey: closure entries not yet reached "
        "(Li & Guo, arXiv:2606.09951, Def. 3.8)\nmasks: row = query, column = key; slot names coloured by stream: F, B, C"
    )
    o.savefig(fig, "butterfly_depth")
    o.write_json(
        {
            "n": n,
            "slots": merged.n,
            "slot_names": names,
            "dense_entries": int(dense.sum()),
            "dense_entries_closed_form_2n2_minus_n": 2 * n * n - n,
            "dense_equals_closed_form": bool(np.array_equal(dense, np.asarray(butterfly_mask(n)))),
            "sparse_entries": sparse.nonzeros,
            "sparse_entries_closed_form_7n_minus_8": 7 * n - 8,
            "sparse_equals_closed_form": bool(np.array_equal(sparse.mask, np.asarray(butterfly_mask(n, sparse=True)))),
            "sparse_depth": g.depth,
            "sparse_depth_closed_form_n_minus_1": n - 1,
            "growth": g.to_dict(),
            "powers": g.powers.astype(int),
            "token_audit_by_depth": audits,
            "dense_token_audit": {
                "labelled_slots": len(dense_audit.slots),
                "leaks": len(dense_audit.leaks),
                "tokens_reached_per_labelled_slot": [len(a.reached) for a in dense_audit.slots],
            },
            "shown_layers": shown,
            "missing_colour": MISSING,
        }
    )
    return {
        "key": f"L* = {g.depth} (n - 1 = {n - 1}); entries {g.entries.tolist()} of {g.reference_entries}, "
        f"outside {int(g.outside.sum())}"
    }


if __name__ == "__main__":
    cli(main, NAME, __doc__)
