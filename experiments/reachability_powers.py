"""Figure 2 (Li & Guo, arXiv:2606.09951, Def. 3.8): R^(1) … R^(L*) of a sliding window with left = 1 (n = 6) converge to causal.

Each query sees itself and one previous key (left = 1), so information moves one position
per layer: R^(L)[i, j] iff 0 <= i − j <= L, and the flow stops changing at
L* = ceil((n − 1) / 1) = 5, where it equals the causal mask.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from _common import Output, cli

from hassejax.masks import causal, sliding_window
from hassejax.order import convergence_depth, reachability
from hassejax.plot import draw_mask

FLOAT64 = False  # JAX's default precision, as when run on its own; reproduce.py sets it before main()

NAME = "reachability_powers"


def main(out: Path, quick: bool = False) -> dict:
    n = 6
    mask = sliding_window(n, left=1)
    depth = int(convergence_depth(mask))
    powers = [np.asarray(reachability(mask, L)) for L in range(1, depth + 1)]
    limit = np.asarray(reachability(mask))
    equals_causal = bool(np.array_equal(limit, np.asarray(causal(n))))
    o = Output(out, NAME)
    fig, axes = plt.subplots(1, depth, layout="constrained", figsize=(6.8, 2.65))
    for L, (ax, r) in enumerate(zip(axes, powers), start=1):
        draw_mask(r, ax=ax, title=f"$R^{{({L})}}$: {int(r.sum())} pairs")
        ax.set_xlabel("key $j$")
        ax.set_ylabel("query $i$" if L == 1 else "")
    fig.suptitle(
        f"Window with left = 1 (each query sees itself and the previous key), $n = {n}$\n"
        f"dark: output $i$ depends on input $j$; $R^{{(L)}}$ grows by one diagonal per layer\n"
        f"and {'equals' if equals_causal else 'differs from'} the causal mask at $L^* = {depth}$"
    )
    o.savefig(fig, "reachability_powers")
    o.write_json(
        {
            "n": n,
            "left": 1,
            "convergence_depth": depth,
            "closed_form_depth": int(np.ceil((n - 1) / 1)),
            "pairs_per_depth": [int(r.sum()) for r in powers],
            "limit_equals_causal": equals_causal,
            "changes_at_each_depth": [bool(not np.array_equal(powers[i], powers[i + 1])) for i in range(depth - 1)],
        }
    )
    return {"key": f"L* = {depth} (closed form {int(np.ceil((n - 1) / 1))}); limit == causal: {equals_causal}"}


if __name__ == "__main__":
    cli(main, NAME, __doc__)
