"""Benchmark: the width of a quotient order (Dilworth), a maximum flow against SciPy's and networkx's matchings.

The width of ``C`` classes is ``C`` minus a maximum matching of the bipartite graph of the strict pairs (Fulkerson).
Columns, each on the same strict part ``S`` (``(C, C)`` Boolean), each in a fresh process (peak resident memory its
own) with a time limit:

- ``hassejax``: :func:`hassejax.order._poset_host.dilworth_width`, a maximum flow of the unit network by SciPy's Dinic
  (what :attr:`HasseDiagram.width`, :func:`hassejax.order.width` and ``flow_summary`` use);
- ``scipy matching``: ``scipy.sparse.csgraph.maximum_bipartite_matching`` of ``S`` (what they used before: its
  Hopcroft–Karp never marks dead ends, exponential time on layered graphs, scipy issue 26147);
- ``networkx``: ``networkx.bipartite.hopcroft_karp_matching`` (pure Python; graph construction included).

Orders: the quotients of ``natten_2d(h, w, 5, 3) & causal(h·w)`` (a fresh user's; ``h·w`` classes), a chain, the
product of two chains, and the closure of a random DAG. Writes ``benchmarks/results/width.json`` (machine, versions,
load average before and after) and prints a Markdown table.

Usage: ``python benchmarks/width.py [--out PATH] [--limit SECONDS]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kronecker import _cpu  # the CPU's model name (benchmarks/ is on the path of a script run from it)

NATTEN = [(30, 40), (35, 50), (40, 40), (40, 50)]
METHODS = ("hassejax", "scipy matching", "networkx")


def orders() -> dict[str, object]:
    """The strict parts, built once in the parent (the natten quotients by ``flow_summary``)."""
    import numpy as np

    import hassejax.order.hasse as hasse
    from hassejax.masks import structured
    from hassejax.order import flow_summary

    out = {}
    for h, w in NATTEN:
        seen = []
        real = hasse.dilworth_width

        def keep(strict, *args, seen=seen, real=real, **kwargs):
            seen.append(strict.copy())
            return real(strict, *args, **kwargs)

        hasse.dilworth_width = keep  # the diagram's width is where the strict part is formed
        try:
            flow_summary(structured.natten_2d(h, w, 5, 3) & structured.causal(h * w))
        finally:
            hasse.dilworth_width = real
        out[f"natten_2d({h}, {w}, 5, 3) & causal({h * w})"] = seen[-1]
    for c in (2048, 6000):
        out[f"chain of {c}"] = np.tril(np.ones((c, c), bool), k=-1)
    i = np.arange(40 * 50)
    x, y = i // 50, i % 50
    out["product of chains 40 × 50"] = (
        (x[:, None] >= x[None, :]) & (y[:, None] >= y[None, :]) & ~np.eye(i.size, dtype=bool)
    )
    rng = np.random.default_rng(0)
    edges = np.tril(rng.random((2000, 2000)) < 0.002, k=-1).astype(np.float32)
    reach = edges > 0
    while True:  # closure by squaring
        more = reach | ((reach.astype(np.float32) @ reach.astype(np.float32)) > 0.5)
        if (more == reach).all():
            break
        reach = more
    out["random DAG, C = 2000, p = 0.002"] = reach
    return out


def save_orders(folder: str) -> None:
    """Write each order's strict part to ``folder/k.npy`` and their names and sizes to ``folder/orders.json``."""
    import numpy as np

    meta = []
    for k, (name, strict) in enumerate(orders().items()):
        np.save(Path(folder) / f"{k}.npy", strict)
        meta.append({"order": name, "classes": strict.shape[0], "strict_pairs": int(strict.sum())})
    (Path(folder) / "orders.json").write_text(json.dumps(meta))


def child(path: str, method: str) -> dict:
    """One width in this (fresh) process."""
    import networkx as nx
    import numpy as np
    import scipy.sparse
    import scipy.sparse.csgraph

    from hassejax.order._poset_host import dilworth_width

    strict = np.load(path)
    c = strict.shape[0]
    t = time.perf_counter()  # imports and loading outside the timing
    if method == "hassejax":
        width = dilworth_width(strict)
    elif method == "scipy matching":
        match = scipy.sparse.csgraph.maximum_bipartite_matching(
            scipy.sparse.csr_array(strict.astype(np.int8)), perm_type="column"
        )
        width = c - int(np.count_nonzero(match >= 0))
    else:
        graph = nx.Graph()
        graph.add_nodes_from(range(2 * c))
        upper, lower = np.nonzero(strict)
        graph.add_edges_from(zip(upper.tolist(), (lower + c).tolist()))
        width = c - len(nx.bipartite.hopcroft_karp_matching(graph, top_nodes=range(c))) // 2
    return {
        "seconds": time.perf_counter() - t,
        "width": width,
        "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    }


def run(path: str, method: str, limit: float) -> dict:
    code = (
        "import json, sys; sys.path.insert(0, 'benchmarks'); from width import child; "
        f"print(json.dumps(child({path!r}, {method!r})))"
    )
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return {"seconds": None, "width": None, "timed_out_after_s": limit}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/width.json"))
    parser.add_argument("--limit", type=float, default=120.0, help="seconds per call before it is stopped")
    args = parser.parse_args()
    from importlib.metadata import version

    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        # built in a child, so that this process stays small (a child's peak resident memory starts at its parent's)
        code = f"import sys; sys.path.insert(0, 'benchmarks'); from width import save_orders; save_orders({tmp!r})"
        subprocess.run([sys.executable, "-c", code], check=True)
        for k, meta in enumerate(json.loads((Path(tmp) / "orders.json").read_text())):
            path = str(Path(tmp) / f"{k}.npy")
            row = dict(meta)
            for method in METHODS:
                row[method] = run(path, method, args.limit)
            widths = {row[m]["width"] for m in METHODS} - {None}
            if len(widths) != 1:
                raise SystemExit(f"{row['order']}: the methods disagree: {row}")
            rows.append(row)
            print(json.dumps(row), flush=True)
    result = {
        "machine": {"platform": platform.platform(), "processor": _cpu(), "cpus": os.cpu_count()},
        "versions": {
            "hassejax": version("hassejax"),
            "scipy": version("scipy"),
            "networkx": version("networkx"),
            "python": platform.python_version(),
        },
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "limit_s": args.limit,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print("\n| order | classes | strict pairs | width | hassejax (s) | SciPy matching (s) | networkx (s) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        width = next(r[m]["width"] for m in METHODS if r[m]["width"] is not None)
        cells = [
            f"{r[m]['seconds']:.3f} ({r[m]['peak_rss_gib']:.2f} GiB)"
            if r[m]["seconds"] is not None
            else f"stopped after {args.limit:.0f}"
            for m in METHODS
        ]
        print(f"| `{r['order']}` | {r['classes']} | {r['strict_pairs']} | {width} | " + " | ".join(cells) + " |")
    print(f"\nload average before {load_before}, after {result['load_average_after']}; {_cpu()}")


if __name__ == "__main__":
    main()
