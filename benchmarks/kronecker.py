"""Benchmark: the product and components routes of ``flow_summary``, against the bit-packed route.

A 2-D neighbourhood ``natten_2d(g, g, 7, 7)`` (n = g²) is the product of two clamped 1-D windows, and a dilated
window ``dilated(n, 64, 4)`` with `n` a multiple of 4 is ``window ⊗ I_4``; with `n` no multiple of its stride it is
the disjoint union of its residue classes (the components route, :mod:`hassejax.order._components`). Their powers' key
runs multiply, so before these routes ``flow_summary`` took the dense bit-packed route up to n = 32768 and refused
them beyond. Columns, each case in a fresh process (peak resident memory its own):

- ``product``: ``flow_summary(mask, layers=(1, 8, 64))`` under ``method="auto"`` from the ``IntervalMask`` as its
  constructor returns it (with the factors it recorded: no search), its route and seconds;
- ``searched``: the same call on the same runs without the record (``IntervalMask(starts, stops, n)``: the factor
  search of ``hassejax.order._product.kron_factors`` included, as for a mask built by other means; not run for the
  components route, whose components are not searched for);
- ``bitpacked``: the same call with ``method="bitpacked"`` (the route ``auto`` took before), up to n = 32768;

with ``L*``, the classes and the largest reach of each ``R^(L)`` compared between the two. Writes
``benchmarks/results/kronecker.json`` (machine, versions, load average before and after) and prints a Markdown table.

Usage: ``python benchmarks/kronecker.py [--out PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

CASES = [
    ("natten_2d", (64, 64, 7, 7)),
    ("natten_2d", (128, 128, 7, 7)),
    ("natten_2d", (181, 181, 7, 7)),
    ("natten_2d", (362, 362, 7, 7)),
    ("natten_2d", (1024, 1024, 3, 3)),
    ("dilated", (16384, 64, 4)),
    ("dilated", (16384, 4096, 4)),
    ("dilated", (16384, 16384, 4)),
    ("dilated", (131072, 64, 4)),
    ("dilated", (2**20, 64, 4)),
    ("dilated", (16383, 64, 4)),
    ("dilated", (32767, 64, 4)),
    ("dilated", (100000, 300, 3)),
    ("dilated", (2**20 - 1, 64, 4)),
]
COMPONENTS = {(16383, 64, 4), (32767, 64, 4), (100000, 300, 3), (2**20 - 1, 64, 4)}
"""Dilated windows whose `n` is no multiple of the stride: the components route (no factors to search for)."""
BITPACKED_MAX_N = 32768
SKIP_BITPACKED = {(16384, 4096, 4), (16384, 16384, 4)}
"""Cases whose bit-packed column is not run (its powers are dense: minutes, not what the table compares)."""
LAYERS = (1, 8, 64)


def child(kind: str, args: list[int], method: str) -> dict:
    """One call in this (fresh) process."""
    from hassejax.masks import IntervalMask, structured
    from hassejax.order import flow_summary

    t = time.perf_counter()
    mask = getattr(structured, kind)(*args)
    if method == "searched":  # the same runs without the factors the constructor recorded
        mask, method = IntervalMask(mask.starts, mask.stops, mask.n, _normal=True), "auto"
    s = flow_summary(mask, layers=LAYERS, method=method)
    seconds = time.perf_counter() - t
    return {
        "seconds": seconds,
        "route": s.route,
        "L*": s.convergence_depth,
        "classes": s.num_classes,
        "reach_max": [r.max for r in s.reach],
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    }


def run(kind: str, args: tuple[int, ...], method: str) -> dict:
    code = (
        "import json, sys; sys.path.insert(0, 'benchmarks'); from kronecker import child; "
        f"print(json.dumps(child({kind!r}, {list(args)!r}, {method!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/kronecker.json"))
    args = parser.parse_args()
    from importlib.metadata import version

    load_before = os.getloadavg()
    rows = []
    for kind, case in CASES:
        n = case[0] * case[1] if kind == "natten_2d" else case[0]
        row = {"mask": f"{kind}{case}", "n": n, "product": run(kind, case, "auto")}
        row["searched"] = None if case in COMPONENTS else run(kind, case, "searched")
        if row["searched"] is not None and any(
            row["product"][k] != row["searched"][k] for k in ("route", "L*", "classes", "reach_max")
        ):
            raise SystemExit(f"{row['mask']}: recorded and searched factors disagree: {row}")
        if n <= BITPACKED_MAX_N and case not in SKIP_BITPACKED:
            row["bitpacked"] = run(kind, case, "bitpacked")
            same = all(row["product"][k] == row["bitpacked"][k] for k in ("L*", "classes", "reach_max"))
            if not same:
                raise SystemExit(f"{row['mask']}: the routes disagree: {row}")
            row["same_answers"] = same
        rows.append(row)
        print(json.dumps(row), flush=True)
    result = {
        "machine": {"platform": platform.platform(), "processor": _cpu(), "cpus": os.cpu_count()},
        "versions": {"hassejax": version("hassejax"), "numpy": version("numpy"), "python": platform.python_version()},
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "layers": LAYERS,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(
        "\n| mask | n | product or components route (s) | route | factors searched (s) | bit-packed route (s) | L* | classes | "
        "max reach of R^(1), R^(8), R^(64) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        p, b = r["product"], r.get("bitpacked")
        bp = f"{b['seconds']:.2f} ({b['peak_rss_gb']:.2f} GB)" if b else "–"
        sr = r["searched"]
        searched = f"{sr['seconds']:.2f} ({sr['peak_rss_gb']:.2f} GB)" if sr else "–"
        print(
            f"| `{r['mask']}` | {r['n']} | {p['seconds']:.2f} ({p['peak_rss_gb']:.2f} GB) | {p['route']} | "
            f"{searched} | {bp} | "
            f"{p['L*']} | {p['classes']} | {p['reach_max']} |"
        )
    print(f"\nload average before {load_before}, after {result['load_average_after']}; {_cpu()}")


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


if __name__ == "__main__":
    main()
