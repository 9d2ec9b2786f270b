"""Benchmark: the reachability limit R of an attention mask, hassejax vs networkx vs NumPy.

Masks (row = query, column = key): causal (``k <= q``), causal sliding window with 64 previous
keys (``0 <= q - k <= 64``) and a random lower-triangular mask with 1 % density (seed 0), at
n in {256, 1024, 2048, 4096}. Columns:

- ``hassejax`` (auto, matmul, bitpacked): ``reachability(mask, method=...)`` end to end, from
  the NumPy Boolean mask to the bool ``jax.Array`` R (validation, SCC and topological order
  included), ``block_until_ready``. The matmul route's first call (compilation) is reported
  separately; the times are the median of repeats after it.
- ``numpy``: plain NumPy repeated squaring of ``A = M | I`` as float32 BLAS matmuls with
  threshold, until a square changes nothing.
- ``networkx``: ``nx.transitive_closure_dag(G)`` on a prebuilt DiGraph of the off-diagonal
  edges (graph construction and conversion back to a matrix NOT timed, which favours
  networkx). Once a size takes longer than ``--cap`` seconds, larger sizes of that mask are
  recorded as "timeout" (not run).

Every result is checked against the NumPy closure. Writes ``benchmarks/results/closure.json``
(machine, versions, load average) and prints a Markdown table.

``--large N`` (default 16384, 0 to skip) then times ``reachability(mask)`` (auto route) once
per mask at n = N for a chain, the window and causal, each in a fresh process so that its peak
resident memory is its own; each result is checked against the causal mask (the closure of
all three).

Usage: ``python benchmarks/closure.py [--sizes 256 1024 2048 4096] [--cap 60] [--large 16384] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import networkx as nx
import numpy as np
import scipy

import hassejax
from hassejax.order import _routes as _closure
from hassejax.order import reachability

WINDOW_LEFT = 64
DENSITY = 0.01


def make_mask(name: str, n: int) -> np.ndarray:
    q, k = np.indices((n, n))
    if name == "causal":
        return k <= q
    if name == "window64":
        return (k <= q) & (q - k <= WINDOW_LEFT)
    if name == "random1%":
        rng = np.random.default_rng(0)
        return np.tril(rng.random((n, n)) < DENSITY)
    raise ValueError(name)


def timed(fn, *, budget: float = 4.0, max_repeats: int = 7):
    """Median wall time of repeated calls (at least one, more while under `budget` seconds)."""
    times, out = [], None
    while True:
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= max_repeats or sum(times) + times[-1] > budget:
            break
    return statistics.median(times), len(times), out


def numpy_closure(mask: np.ndarray) -> np.ndarray:
    r = mask | np.eye(mask.shape[0], dtype=bool)
    while True:
        f = r.astype(np.float32)
        r2 = (f @ f) > 0.5
        if np.array_equal(r2, r):
            return r
        r = r2


def networkx_closure(mask: np.ndarray):
    g = nx.DiGraph()
    g.add_nodes_from(range(mask.shape[0]))
    off = mask & ~np.eye(mask.shape[0], dtype=bool)
    g.add_edges_from(zip(*np.nonzero(off)))  # edge q -> k: query q attends key k
    t0 = time.perf_counter()
    closure = nx.transitive_closure_dag(g)
    return time.perf_counter() - t0, closure.number_of_edges()


def ours(mask: np.ndarray, method: str):
    return lambda: jax.block_until_ready(reachability(mask, method=method))


def large_child(n: int, name: str) -> None:
    """One n = N measurement in this (fresh) process; prints one JSON line."""
    causal = np.tri(n, dtype=bool)
    if name == "chain":
        mask = np.eye(n, k=-1, dtype=bool)
    elif name == "window64":
        mask = causal & ~np.tri(n, k=-(WINDOW_LEFT + 1), dtype=bool)
    else:
        mask = causal.copy()
    nnz = int(np.count_nonzero(mask | np.eye(n, dtype=bool)))
    mm_cost, bp_cost = _closure._closure_costs(n, float(nnz))
    jax.block_until_ready(reachability(np.eye(3, k=-1, dtype=bool)))  # start the JAX runtime first
    t0 = time.perf_counter()
    r = jax.block_until_ready(reachability(mask))
    seconds = time.perf_counter() - t0
    if not np.array_equal(np.asarray(r), causal):
        raise AssertionError(f"closure of {name} at n = {n} is not the causal mask")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    route = "bitpacked" if bp_cost < mm_cost else "matmul"
    print(json.dumps({"mask": name, "n": n, "nnz": nnz, "auto_route": route, "seconds": seconds, "peak_rss_gib": peak}))


def large_rows(n: int) -> list[dict]:
    rows = []
    for name in ("chain", "window64", "causal"):
        out = subprocess.run(
            [sys.executable, __file__, "--large-child", str(n), name], capture_output=True, text=True, check=True
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        r = rows[-1]
        print(
            f"{name:>9} n={n}: {fmt(r['seconds'])} ({r['auto_route']}), peak RSS {r['peak_rss_gib']:.1f} GiB",
            flush=True,
        )
    return rows


def machine_info() -> dict:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "platform": platform.platform(),
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "jax_backend": jax.default_backend(),
        "python": sys.version.split()[0],
        "versions": {
            "hassejax": hassejax.__version__,
            "jax": jax.__version__,
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "networkx": nx.__version__,
        },
    }


def fmt(t) -> str:
    if isinstance(t, str):
        return t
    if t < 0.01:
        return f"{t * 1e3:.2f} ms"
    return f"{t * 1e3:.1f} ms" if t < 1 else f"{t:.2f} s"


def ratio(a, b) -> str:
    if isinstance(a, str) or isinstance(b, str):
        return "—"
    r = a / b
    return f"{r:,.0f}×" if r >= 10 else f"{r:.1f}×"


def markdown(rows: list[dict]) -> str:
    head = (
        "| n | mask | hassejax auto (route) | matmul | bitpacked | NumPy squaring | networkx `transitive_closure_dag` "
        "| vs networkx | vs NumPy |\n|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r['n']} | {r['mask']} | {fmt(r['auto_s'])} ({r['auto_route']}) | {fmt(r['matmul_s'])} "
        f"| {fmt(r['bitpacked_s'])} | {fmt(r['numpy_s'])} | {fmt(r['networkx_s'])} "
        f"| {ratio(r['networkx_s'], r['auto_s'])} | {ratio(r['numpy_s'], r['auto_s'])} |"
        for r in rows
    ]
    return head + "\n".join(lines)


def markdown_large(rows: list[dict]) -> str:
    head = "| n | mask | nonzeros | hassejax auto (route) | peak RSS |\n|---|---|---|---|---|\n"
    return head + "\n".join(
        f"| {r['n']} | {r['mask']} | {r['nnz']:,} | {fmt(r['seconds'])} ({r['auto_route']}) | {r['peak_rss_gib']:.1f} GiB |"
        for r in rows
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 2048, 4096])
    parser.add_argument("--masks", nargs="+", default=["causal", "window64", "random1%"])
    parser.add_argument("--cap", type=float, default=60.0, help="seconds after which larger networkx sizes are skipped")
    parser.add_argument("--large", type=int, default=16384, help="n of the large single-run check (0: skip)")
    parser.add_argument("--large-child", nargs=2, metavar=("N", "MASK"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "closure.json")
    args = parser.parse_args(argv)
    if args.large_child:
        large_child(int(args.large_child[0]), args.large_child[1])
        return

    started = time.strftime("%Y-%m-%dT%H:%M:%S")
    load_start = os.getloadavg()
    rows = []
    skip_networkx = set()
    for name in args.masks:
        for n in args.sizes:
            mask = make_mask(name, n)
            nnz = int(np.count_nonzero(mask | np.eye(n, dtype=bool)))
            row = {"mask": name, "n": n, "nnz": nnz}

            t0 = time.perf_counter()
            jax.block_until_ready(reachability(mask, method="matmul"))
            first = time.perf_counter() - t0
            row["matmul_s"], row["matmul_repeats"], r_mm = timed(ours(mask, "matmul"))
            row["matmul_compile_s"] = max(0.0, first - row["matmul_s"])
            row["bitpacked_s"], row["bitpacked_repeats"], r_bp = timed(ours(mask, "bitpacked"))
            mm_cost, bp_cost = _closure._closure_costs(n, float(nnz))
            row["auto_route"] = "bitpacked" if bp_cost < mm_cost else "matmul"
            row["auto_s"], row["auto_repeats"], r_auto = timed(ours(mask, "auto"))

            row["numpy_s"], row["numpy_repeats"], r_np = timed(lambda mask=mask: numpy_closure(mask), budget=10.0)
            for label, r in (("matmul", r_mm), ("bitpacked", r_bp), ("auto", r_auto)):
                if not np.array_equal(np.asarray(r), r_np):
                    raise AssertionError(f"{label} route disagrees with NumPy on {name}, n = {n}")

            if name in skip_networkx:
                row["networkx_s"] = "timeout"
            else:
                t, edges = networkx_closure(mask)
                if edges != int(np.count_nonzero(r_np)) - n:
                    raise AssertionError(f"networkx closure has {edges} edges, expected {np.count_nonzero(r_np) - n}")
                row["networkx_s"] = t
                if t > args.cap:
                    skip_networkx.add(name)
            rows.append(row)
            print(
                f"{name:>9} n={n:>5}: auto {fmt(row['auto_s'])} ({row['auto_route']}), matmul {fmt(row['matmul_s'])} "
                f"(+{fmt(row['matmul_compile_s'])} compile), bitpacked {fmt(row['bitpacked_s'])}, "
                f"numpy {fmt(row['numpy_s'])}, networkx {fmt(row['networkx_s'])}",
                flush=True,
            )

    large = large_rows(args.large) if args.large else []

    result = {
        "benchmark": "reachability limit R (hassejax.order.reachability) vs networkx.transitive_closure_dag and NumPy squaring",
        "started": started,
        "machine": machine_info(),
        "load_average_start_end": [list(load_start), list(os.getloadavg())],
        "networkx_cap_s": args.cap,
        "notes": (
            "Times are medians of repeats, end to end from the NumPy bool mask to R. networkx time excludes "
            "building the DiGraph. The CPU was shared with other jobs (see load averages)."
        ),
        "rows": rows,
        "large": large,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print()
    print(markdown(rows))
    if large:
        print()
        print(markdown_large(large))


if __name__ == "__main__":
    main()
