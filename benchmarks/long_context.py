"""Benchmark: information flow of long-context masks, structured route vs dense routes vs a NumPy bit-set loop.

Masks (row = query, column = key, True = may attend), at n in {8192, 32768, 131072, 1048576}:

- ``window+sinks``: causal sliding window reaching 4096 previous keys plus 4 attention sinks,
  ``sliding_window(n, left=4096) | attention_sinks(n, num=4)``;
- ``documents``: packed documents of random lengths (uniform in [1, 16384], seed 0), causal inside;
- ``chunked``: chunked causal, chunk 8192 (``q // 8192 == k // 8192 and k <= q``);
- ``prefix_lm``: prefix-LM with a 1024-token prefix (``k < 1024 or k <= q``);
- ``longformer``: Longformer's global + sliding window, radius 256, 64 global tokens every ``n / 64`` positions
  (``|q - k| <= 256 or g[q] or g[k]``; 65 key runs a row).

Columns, each mask and size in a fresh process (so that peak resident memory is its own):

- ``structured``: ``flow_summary(mask, layers=(1, 2, 4, 8, 16, 32))`` end to end from the
  ``IntervalMask`` (built from the spec, time included): R, L*, the six R^(L) reach statistics,
  classes, depth, width, Hasse edge count. ``R`` and ``R + L*`` are its stage times: the cost of
  ``L*`` relative to ``R`` is ``(R + L*) / R`` (L* needs R first).
- ``dense``: hassejax's dense routes on the Boolean ``(n, n)`` array (``reachability`` auto
  route for R and for each R^(L), ``convergence_depth``), only where the memory estimate fits
  and n <= 8192; the dense mask construction is not timed.
- ``numpy``: a plain NumPy packed-bit loop, ``R^(L+1)[i] = OR of R^(L)[j] over j in A[i]``
  (rows as uint64 words, one ``np.bitwise_or.reduceat`` a round over the key runs), until a
  round changes nothing: every R^(L), R and L* in one pass; only at n <= 8192.

A second table times R (``reachability``, auto route) against L* (``convergence_depth``) on
dense input at n = 8192 for a random 1 % lower-triangular mask (seed 0) and the window with
sinks.

Every structured result is checked against the closed forms (L* = ceil((n - 1 - 4) / 4096) for
the window with sinks, 1 for documents and chunks, 1 for prefix-LM, 2 for Longformer) and, where a peer ran,
against the peer. Writes ``benchmarks/results/long_context.json`` (machine, versions, load
average before and after) and prints Markdown tables.

Usage: ``python benchmarks/long_context.py [--sizes 8192 32768 131072 1048576] [--masks NAME ...] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

LAYERS = (1, 2, 4, 8, 16, 32)
MASKS = ("window+sinks", "documents", "chunked", "prefix_lm", "longformer")
WINDOW, SINKS, CHUNK, PREFIX, DOC_MAX = 4096, 4, 8192, 1024, 16384
RADIUS, GLOBALS = 256, 64
PEER_MAX_N = 8192


def doc_lengths(n: int) -> list[int]:
    rng = np.random.default_rng(0)
    lengths = []
    while sum(lengths) < n:
        lengths.append(int(rng.integers(1, DOC_MAX + 1)))
    lengths[-1] -= sum(lengths) - n
    return [x for x in lengths if x > 0]


def spec(name: str, n: int) -> str:
    if name == "window+sinks":
        return f"sliding_window(n={n}, left={WINDOW}) | attention_sinks(n={n}, num={SINKS})"
    if name == "documents":
        return f"document(segments={doc_lengths(n)})"
    if name == "chunked":
        return f"chunked_causal(n={n}, chunk={CHUNK})"
    if name == "prefix_lm":
        return f"prefix_lm(n={n}, prefix={PREFIX})"
    if name == "longformer":
        return f"global_sliding(n={n}, window={RADIUS}, global_positions={list(range(0, n, n // GLOBALS))})"
    raise ValueError(name)


def expected_depth(name: str, n: int) -> int:
    if name == "window+sinks":
        return max(1, math.ceil((n - 1 - SINKS) / WINDOW))
    if name == "longformer":
        return 2  # every row holds a global token's key, whose row is full: A^2 is full, A is not
    return 1


def numpy_bitset_loop(mask: np.ndarray) -> tuple[int, list[int], np.ndarray]:
    """Plain NumPy: R^(L) rounds on packed rows until a fixed point; (L*, reach per L, R row counts)."""
    n = mask.shape[0]
    a = mask | np.eye(n, dtype=bool)
    packed = np.packbits(a, axis=1, bitorder="little")
    pad = (-packed.shape[1]) % 8
    words = np.concatenate([packed, np.zeros((n, pad), np.uint8)], axis=1).view(np.uint64)
    reach = np.concatenate([words, np.zeros((1, words.shape[1]), np.uint64)])  # row n: empty, ends runs at n
    edges = np.diff(a.astype(np.int8), axis=1, prepend=0, append=0)
    rows_s, cols_s = np.nonzero(edges == 1)
    _, cols_e = np.nonzero(edges == -1)
    bounds = np.stack([cols_s, cols_e], axis=1).reshape(-1)  # OR over [s, e) at even slots
    row_first = np.searchsorted(rows_s, np.arange(n))  # every row has a run (the diagonal)
    counts = []
    depth = 1
    while True:
        counts.append(int(np.unpackbits(reach.view(np.uint8), bitorder="little").sum()))
        runs = np.bitwise_or.reduceat(reach, bounds, axis=0)[::2]
        nxt = np.zeros_like(reach)
        nxt[:n] = np.bitwise_or.reduceat(runs, row_first, axis=0)
        if np.array_equal(nxt, reach):
            row_counts = np.unpackbits(reach[:n].view(np.uint8), axis=1, bitorder="little")[:, :n].sum(axis=1)
            return depth, counts, row_counts
        reach = nxt
        depth += 1


def run_one(name: str, n: int) -> dict:
    """One mask at one size, in this process."""
    import jax

    jax.config.update("jax_platforms", "cpu")
    from hassejax.masks import from_spec
    from hassejax.order import flow_summary

    out: dict = {"mask": name, "n": n}
    t0 = time.perf_counter()
    m = from_spec(spec(name, n), form="intervals")
    out["build_s"] = time.perf_counter() - t0
    s = flow_summary(m, layers=LAYERS)
    out["structured_s"] = time.perf_counter() - t0
    out["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    out["stage_s"] = s.seconds
    out["r_s"] = s.seconds["limit"]
    out["r_and_lstar_s"] = s.seconds["limit"] + s.seconds["convergence_depth"]
    out["lstar_over_r"] = out["r_and_lstar_s"] / out["r_s"] if out["r_s"] > 0 else 1.0
    out["summary"] = s.to_dict()
    out["lstar"] = s.convergence_depth
    assert s.convergence_depth == expected_depth(name, n), (name, n, s.convergence_depth)
    if n <= PEER_MAX_N:
        dense = np.asarray(m.to_dense())
        from hassejax.order import convergence_depth, reachability

        t = time.perf_counter()
        r = np.asarray(reachability(dense))
        lstar = int(convergence_depth(dense))
        reach = [int(np.asarray(reachability(dense, L)).sum()) for L in LAYERS]
        out["dense_s"] = time.perf_counter() - t
        assert lstar == s.convergence_depth and reach == [x.pairs for x in s.reach]
        assert int(r.sum()) == s.limit.pairs
        t = time.perf_counter()
        lstar_np, counts, _ = numpy_bitset_loop(dense)
        out["numpy_s"] = time.perf_counter() - t
        assert lstar_np == s.convergence_depth
        assert [counts[min(L, len(counts)) - 1] for L in LAYERS] == [x.pairs for x in s.reach]
    return out


def run_depth_vs_closure() -> list[dict]:
    """R (reachability, auto route) vs L* (convergence_depth) on dense input at n = 8192."""
    import jax

    jax.config.update("jax_platforms", "cpu")
    from hassejax.masks import from_spec
    from hassejax.order import convergence_depth, reachability

    n = 8192
    rng = np.random.default_rng(0)
    masks = {
        "random 1% lower-triangular": np.tril(rng.random((n, n)) < 0.01),
        "window+sinks": np.asarray(from_spec(spec("window+sinks", n), form="intervals").to_dense()),
    }
    rows = []
    for name, mask in masks.items():
        t = time.perf_counter()
        np.asarray(reachability(mask))
        r_s = time.perf_counter() - t
        t = time.perf_counter()
        lstar = int(convergence_depth(mask))
        d_s = time.perf_counter() - t
        rows.append({"mask": name, "n": n, "r_s": r_s, "lstar_s": d_s, "ratio": d_s / r_s, "lstar": lstar})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8192, 32768, 131072, 1048576])
    parser.add_argument("--masks", nargs="+", choices=MASKS, default=list(MASKS))
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "long_context.json"))
    parser.add_argument("--one", nargs=2, metavar=("MASK", "N"), help=argparse.SUPPRESS)
    parser.add_argument("--depth-vs-closure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one[0], int(args.one[1]))))
        return
    if args.depth_vs_closure:
        print(json.dumps(run_depth_vs_closure()))
        return

    import jax

    import hassejax

    load_before = os.getloadavg()
    results = []
    for name in args.masks:
        for n in args.sizes:
            proc = subprocess.run(
                [sys.executable, __file__, "--one", name, str(n)], capture_output=True, text=True, check=False
            )
            if proc.returncode != 0:
                raise SystemExit(f"{name} n={n} failed:\n{proc.stderr[-3000:]}")
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            results.append(row)
            print(f"{name:>13} n={n:>8}: {row['structured_s']:.2f} s, peak {row['peak_rss_gib']:.2f} GiB", flush=True)
    proc = subprocess.run([sys.executable, __file__, "--depth-vs-closure"], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"depth vs closure failed:\n{proc.stderr[-3000:]}")
    depth_rows = json.loads(proc.stdout.strip().splitlines()[-1])
    load_after = os.getloadavg()

    growth = {}
    for name in args.masks:
        by_n = {r["n"]: r["structured_s"] for r in results if r["mask"] == name}
        if 131072 in by_n and 1048576 in by_n:
            growth[name] = (by_n[1048576] / by_n[131072]) ** (1 / 3)
    report = {
        "machine": {"platform": platform.platform(), "processor": platform.processor(), "cpus": os.cpu_count()},
        "versions": {
            "python": sys.version.split()[0],
            "numpy": np.__version__,
            "jax": jax.__version__,
            "hassejax": hassejax.__version__,
        },
        "load_average": {"before": load_before, "after": load_after},
        "layers": LAYERS,
        "results": results,
        "growth_per_doubling_131072_to_1048576": growth,
        "depth_vs_closure_dense_8192": depth_rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")

    print(f"\nload average before {load_before}, after {load_after}\n")
    print(
        "| mask | n | L* | structured (s) | peak (GiB) | R (s) | (R + L*) / R | dense routes (s) | NumPy bit-set loop (s) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        dense = f"{r['dense_s']:.2f}" if "dense_s" in r else "—"
        numpy_s = f"{r['numpy_s']:.2f}" if "numpy_s" in r else "—"
        print(
            f"| {r['mask']} | {r['n']} | {r['lstar']} | {r['structured_s']:.2f} | {r['peak_rss_gib']:.2f} | "
            f"{r['r_s']:.2f} | {r['lstar_over_r']:.2f} | {dense} | {numpy_s} |"
        )
    print(
        "\ngrowth of the structured time per doubling of n, 131072 -> 1048576:",
        ", ".join(f"{k} {v:.2f}x" for k, v in growth.items()),
    )
    print("\n| dense mask, n = 8192 | R: reachability (s) | L*: convergence_depth (s) | L* / R | L* |")
    print("|---|---|---|---|---|")
    for r in depth_rows:
        print(f"| {r['mask']} | {r['r_s']:.2f} | {r['lstar_s']:.2f} | {r['ratio']:.2f} | {r['lstar']} |")


if __name__ == "__main__":
    main()
