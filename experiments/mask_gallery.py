"""The mask gallery (shared/cases/mask_gallery.md) through the analysis: depth, classes, Hasse shape, leaks.

Every mask people use, at n ∈ {16, 64, 1024} with window/block parameters that scale with n,
goes through the closure: convergence depth L* (checked against the closed form where one
exists), number of classes, Hasse depth (longest chain) and width (Dilworth), empty rows,
and the reachability after 1, 2, 4, 8 layers as a fraction of the limit. The XLNet
two-stream and BD3-LM masks go through the leak audit (with the leaky XLNet variant as the
negative control). Writes a Markdown table and a figure of receptive-field growth with depth.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from _common import Output, cli

from hassejax import masks
from hassejax.order import HasseDiagram, convergence_depth, reachability
from hassejax.tasks import audit, block_diffusion_task, xlnet_two_stream_task

FLOAT64 = False  # JAX's default precision, as when run on its own; reproduce.py sets it before main()

NAME = "mask_gallery"
SEED = 0


def _binary_tree(num_nodes: int) -> list[int]:
    return [-1] + [(i - 1) // 2 for i in range(1, num_nodes)]


def gallery(n: int, rng: np.random.Generator) -> list[dict]:
    """The gallery's masks at size n: name, convention note, mask, closed-form L* (or None)."""
    w = max(2, n // 16)  # window parameter
    c = max(2, n // 8)  # chunk / block / prefix size
    side = math.isqrt(n)
    k = 3 if side < 16 else 7
    perm = rng.permutation(n)
    xl = masks.xlnet_two_stream(perm)
    two_stream = np.zeros((2 * n, 2 * n), bool)
    two_stream[:n, :n] = np.asarray(xl.content)
    two_stream[n:, :n] = np.asarray(xl.query)
    two_stream[n:, n:] = np.eye(n, dtype=bool)
    doc_lengths = [n // 2, n // 4, n - n // 2 - n // 4]
    ceil = lambda a, b: -(-a // b)
    rows = [
        ("causal", "everywhere: k <= q", masks.causal(n), 1),
        (
            "causal, bottom-right (square case)",
            "FlashAttention >= 2.1: k <= q + (n_k − n_q); n_q = n_k here",
            masks.causal_bottom_right(n, n),
            1,
        ),
        (
            f"sliding window W={w}",
            f"attention-gym generate_sliding_window({w}): W+1 keys -> left={w}",
            masks.sliding_window(n, left=w),
            ceil(n - 1, w),
        ),
        (
            f"causal local W={w}",
            f"xformers BlockDiagonalCausalLocalAttentionMask({w}) / HF: W keys -> left={w - 1}",
            masks.sliding_window(n, left=w - 1),
            ceil(n - 1, w - 1),
        ),
        (
            f"local ({w}, {w})",
            f"JAX local_window_size=({w}, {w}): left={w}, right={w}",
            masks.sliding_window(n, left=w, right=w),
            ceil(n - 1, w),
        ),
        (
            f"dilated W={2 * w}, d=2",
            "attention-gym generate_dilated_sliding_window: |q−k| <= W, |q−k| % d == 0",
            masks.dilated(n, 2 * w, 2),
            None,
        ),
        (
            f"global + sliding W={w}",
            "attention-gym generate_global_sliding_window, global token 0",
            masks.global_sliding(n, w, [0]),
            None,
        ),
        (f"prefix LM P={c}", f"attention-gym generate_prefix_lm_mask({c}): k < P or k <= q", masks.prefix_lm(n, c), 1),
        (
            f"document {doc_lengths}",
            "attention-gym generate_doc_mask_mod(causal) / xformers BlockDiagonalCausalMask",
            masks.document(doc_lengths),
            1,
        ),
        (f"chunked causal c={c}", f"JAX ChunkedCausalMask({c}) / Llama-4", masks.chunked_causal(n, c), 1),
        (f"block causal b={c}", "q // b >= k // b", masks.block_causal(n, c), 1),
        (
            f"block diffusion B={c} (2n slots)",
            "attention-gym generate_block_diffusion_mask / bd3lms, over [x_t ; x_0]",
            masks.block_diffusion(n, c),
            None,
        ),
        (
            "XLNet two-stream (2n slots)",
            "zihangdai/xlnet perm_mask (1 = cannot attend); content | query, random z",
            two_stream,
            None,
        ),
        (
            f"NATTEN {side}×{side}, kernel {k}×{k}",
            "attention-gym generate_natten: clamped centre, |centre − k| <= K//2 per axis",
            masks.natten_2d(side, side, k, k),
            None,
        ),
        (
            f"tree (P={n // 2}, binary tree of {n - n // 2})",
            "attention-gym jetspec squared: prefix rows causal, tree rows k < P or ancestor",
            masks.tree_prefix(_binary_tree(n - n // 2), n // 2),
            None,
        ),
    ]
    return [dict(name=a, convention=b, mask=np.asarray(m), closed_form=d) for a, b, m, d in rows]


def analyse(entry: dict) -> dict:
    mask = entry["mask"]
    depth = int(convergence_depth(mask))
    limit = np.asarray(reachability(mask))
    diagram = HasseDiagram.from_reachability(limit)
    total = int(limit.sum())
    fractions = {L: float(np.asarray(reachability(mask, L)).sum() / total) for L in (1, 2, 4, 8)}
    # Receptive-field growth curve up to L* (capped).
    curve_depths = sorted({int(x) for x in np.unique(np.round(np.geomspace(1, max(depth, 1), num=min(depth, 24))))})
    curve = [float(np.asarray(reachability(mask, L)).sum() / total) for L in curve_depths]
    closed = entry["closed_form"]
    return {
        "name": entry["name"],
        "convention": entry["convention"],
        "n_slots": int(mask.shape[0]),
        "convergence_depth": depth,
        "closed_form_depth": closed,
        "closed_form_ok": None if closed is None else closed == depth,
        "classes": diagram.num_classes,
        "hasse_depth": diagram.depth,
        "hasse_width": diagram.width,
        "empty_rows": int((~mask.any(axis=1)).sum()),
        "reach_fraction": fractions,
        "curve_depths": curve_depths,
        "curve": curve,
    }


def depth_list(depths: list[int]) -> str:
    """Sorted whole-number depths as text, runs of three or more joined: [1, 2, 3, 4, 8, 9] -> "1–4, 8, 9"."""
    runs: list[list[int]] = []
    for d in depths:
        if runs and d == runs[-1][-1] + 1:
            runs[-1].append(d)
        else:
            runs.append([d])
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def main(out: Path, quick: bool = False) -> dict:
    rng = np.random.default_rng(SEED)
    sizes = [16, 64] if quick else [16, 64, 1024]
    o = Output(out, NAME)
    results = {}
    for n in sizes:
        results[n] = [analyse(e) for e in gallery(n, rng)]
        # XLNet's raw query stream: the first token of z has an empty row (flagged in the table).
        xl = masks.xlnet_two_stream(rng.permutation(n))
        for r in results[n]:
            if r["name"].startswith("XLNet"):
                r["empty_rows"] = int((~np.asarray(xl.query).any(axis=1)).sum())
                r["note"] = "query stream: first token of z has an empty row"

    # Leak audits (n <= 64: the audit expands token sets in Python).
    audits = {}
    for n in [s for s in sizes if s <= 64]:
        perm = rng.permutation(n)
        good = audit(xlnet_two_stream_task(perm))
        leaky = audit(xlnet_two_stream_task(perm, leaky=True))
        bd3 = audit(block_diffusion_task(n, max(2, n // 8)))
        audits[n] = {
            "xlnet_two_stream": {"labelled": len(good.slots), "leaks": len(good.leaks)},
            "xlnet_leaky_query_uses_content_mask": {"labelled": len(leaky.slots), "leaks": len(leaky.leaks)},
            "block_diffusion": {"labelled": len(bd3.slots), "leaks": len(bd3.leaks)},
        }

    # Markdown table.
    lines = [
        "# Mask gallery through the closure",
        "",
        "Row = query, column = key, True = may attend. "
        "`L*` = convergence depth (closed form in brackets where one exists); reach@L = |R^(L)| / |R|.",
        "",
    ]
    head = "| n | mask | convention | slots | L* | classes | Hasse depth | width | empty rows | reach@1 | reach@2 | reach@4 | reach@8 |"
    for n in sizes:
        lines += [f"## n = {n}", "", head, "|" + "---|" * 13]
        for r in results[n]:
            lstar = f"{r['convergence_depth']}" + (
                ""
                if r["closed_form_depth"] is None
                else f" ({r['closed_form_depth']} ✓)"
                if r["closed_form_ok"]
                else f" ({r['closed_form_depth']} ✗)"
            )
            empty = f"**{r['empty_rows']}** ⚠ ({r['note']})" if r.get("note") else str(r["empty_rows"])
            fr = r["reach_fraction"]
            cell = lambda text: str(text).replace("|", "\\|")
            lines.append(
                f"| {n} | {cell(r['name'])} | {cell(r['convention'])} | {r['n_slots']} | {lstar} | {r['classes']} | {r['hasse_depth']} | "
                f"{r['hasse_width']} | {empty} | {fr[1]:.3f} | {fr[2]:.3f} | {fr[4]:.3f} | {fr[8]:.3f} |"
            )
        lines.append("")
    lines += [
        "## Leak audit",
        "",
        "| n | task | labelled slots | slots that see their own target |",
        "|---|---|---|---|",
    ]
    for n, a in audits.items():
        for task, v in a.items():
            flag = " ⚠ leaky" if v["leaks"] else ""
            lines.append(f"| {n} | {task} | {v['labelled']} | {v['leaks']}{flag} |")
    o.write_text("mask_gallery.md", "\n".join(lines) + "\n")

    # Receptive-field growth at the largest n.
    n = sizes[-1]
    fig, ax = plt.subplots(figsize=(5.6, 5.0), layout="constrained")
    # Distinct marker per curve, no lines (the depths are whole numbers); a curve that (nearly) coincides with one
    # drawn before gets large hollow markers on top and says so in the legend.
    markers = ["o", "s", "^", "D", "v", "P", "X", "*"]
    drawn: list[dict] = []
    near: list[dict] = []
    max_depth = 1
    for r in results[n]:
        if r["convergence_depth"] <= 1:
            continue
        max_depth = max(max_depth, max(r["curve_depths"]))
        label = f"{r['name']} ($L^* = {r['convergence_depth']}$)"
        marker = markers[len(drawn) % len(markers)]
        close = None
        for q in drawn:
            common = sorted(set(q["curve_depths"]) & set(r["curve_depths"]))
            gap = max(
                (abs(q["curve"][q["curve_depths"].index(L)] - r["curve"][r["curve_depths"].index(L)]) for L in common),
                default=1.0,
            )
            if gap < 0.01:
                close = (q, gap, common)
                break
        shares_a_point = any(
            abs(q["curve"][q["curve_depths"].index(L)] - r["curve"][r["curve_depths"].index(L)]) < 0.01
            for q in drawn
            for L in set(q["curve_depths"]) & set(r["curve_depths"])
        )
        if close is None and shares_a_point:
            # a curve of its own that meets one drawn before at some depth (global + sliding at L = 1): large,
            # hollow, on top of the others, so that its marker there is not hidden
            ax.plot(r["curve_depths"], r["curve"], marker=marker, ms=9, mfc="none", mew=1.3, ls="none", zorder=4,
                    label=label)  # fmt: skip
        elif close is None:
            ax.plot(r["curve_depths"], r["curve"], marker=marker, ms=4, ls="none", label=label)
        else:
            q, gap, common = close
            near.append(
                {"curve": r["name"], "like": q["name"], "max_gap_at_common_depths": gap, "common_depths": common}
            )
            gap_txt = f"{math.ceil(max(gap, 1e-3) * 1000) / 1000:.3f}"  # a bound: rounded up
            span = f"$L$ = {depth_list(common)}"
            note = (
                f"identical to {q['name']}"
                if gap < 1e-9
                else f"≈ {q['name']} (gap ≤ {gap_txt} at the depths both sample, {span})"
            )
            ax.plot(
                r["curve_depths"],
                r["curve"],
                marker=marker,
                ms=7,
                mfc="none",
                mew=1.1,
                ls="none",
                zorder=3,
                label=f"{label},\n{note}",
            )
        drawn.append(r)
    # whole-number depths only: a marker per sampled depth, no lines between them, a tick at every depth
    ax.set_xticks(range(1, max_depth + 1))
    ax.set_xlim(0.5, max_depth + 0.5)
    ax.set_xlabel("number of layers $L$ (markers: the depths sampled)")
    ax.set_ylabel("$|R^{(L)}|\\,/\\,|R|$ (fraction of the limit flow)")
    ax.set_ylim(0, 1.07)  # the markers at 1.0 whole
    ax.grid(alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=1, frameon=False)
    ax.set_title(
        f"Receptive-field growth with depth, $n = {n}$: windowed masks reach their closure $R$\n"
        "after $L^*$ layers (masks already closed, $L^* = 1$, not shown)"
    )
    o.savefig(fig, "receptive_field_growth")
    mismatches = [r["name"] for rs in results.values() for r in rs if r["closed_form_ok"] is False]
    checked = sum(r["closed_form_ok"] is not None for rs in results.values() for r in rs)  # rows with a closed form
    o.write_json(
        {
            "sizes": sizes,
            "results": {str(k): [dict(r.items()) for r in v] for k, v in results.items()},
            "audits": audits,
            "closed_form_mismatches": mismatches,
            "masks_per_size": {str(k): len(v) for k, v in results.items()},
            "closed_form_rows": checked,
            "audit_sizes": [int(k) for k in audits],
            "receptive_field_near_identical_curves": near,
        },
        seeds={"permutations": SEED},
    )
    per_size = sorted({len(v) for v in results.values()})
    return {
        "key": f"{'/'.join(map(str, per_size))} masks × {len(results)} sizes analysed, closed-form L* mismatches: "
        f"{len(mismatches)} of {checked}; leak audits at n = {', '.join(map(str, audits))}; leaky XLNet flagged: {all(a['xlnet_leaky_query_uses_content_mask']['leaks'] == a['xlnet_leaky_query_uses_content_mask']['labelled'] for a in audits.values())}"
    }


if __name__ == "__main__":
    cli(main, NAME, __doc__)
