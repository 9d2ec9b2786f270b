"""Regenerate every figure of hassejax into paper_figures/ (the main job).

Runs every experiment script in ``EXPERIMENTS`` (each also runnable on its own) with a
progress bar, then prints a summary table (experiment, status, seconds, key number).
Exits non-zero if any experiment fails. ``--quick`` is a fast smoke run (smaller sizes),
``--only NAME`` runs one (repeatable), ``--out DIR`` writes elsewhere.

Usage::

    python experiments/reproduce.py [--quick] [--only NAME ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import DEFAULT_OUT  # noqa: E402
from tqdm import tqdm  # noqa: E402

# In the order of the specs' figure lists (hasse.md §5, dynamics.md §7), then the rest.
EXPERIMENTS = [
    "layer_graph",
    "reachability_powers",
    "preorder_to_hasse",
    "node_equivalence",
    "causal_merge",
    "block_two_stream",
    "butterfly_attention",
    "mask_gallery",
    "butterfly_markov",
    "covariance_ellipses",
    "lambda_max_growth",
    "phase_maps",
    "event_time_accuracy",
    "mean_field",
    "energies",
    "masked_particles",
]


def run(names: list[str], out: Path, quick: bool) -> list[dict]:
    """Run the named experiments in order; return one result row each."""
    rows = []
    bar = tqdm(names, desc="experiments", unit="exp")
    for name in bar:
        bar.set_postfix_str(name)
        t0 = time.perf_counter()
        try:
            module = importlib.import_module(name)
            summary = module.main(out, quick)
            rows.append({"name": name, "status": "ok", "seconds": time.perf_counter() - t0, "key": summary.get("key", "")})
        except Exception as exc:  # noqa: BLE001 - report every failure, then exit non-zero
            traceback.print_exc()
            rows.append({"name": name, "status": f"FAILED: {type(exc).__name__}", "seconds": time.perf_counter() - t0, "key": str(exc)[:120]})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: paper_figures/)")
    parser.add_argument("--quick", action="store_true", help="fast smoke run with smaller sizes")
    parser.add_argument("--only", action="append", metavar="NAME", help=f"run only this experiment (repeatable); one of {', '.join(EXPERIMENTS)}")
    args = parser.parse_args(argv)
    names = EXPERIMENTS
    if args.only:
        unknown = [n for n in args.only if n not in EXPERIMENTS]
        if unknown:
            parser.error(f"--only: unknown experiment(s) {unknown}; known: {', '.join(EXPERIMENTS)}")
        names = [n for n in EXPERIMENTS if n in args.only]
    t0 = time.perf_counter()
    rows = run(names, args.out, args.quick)
    width = max(len(r["name"]) for r in rows)
    print(f"\n{'experiment'.ljust(width)}  status  seconds  key number")
    for r in rows:
        print(f"{r['name'].ljust(width)}  {r['status']:<6}  {r['seconds']:7.1f}  {r['key']}")
    failed = [r for r in rows if r["status"] != "ok"]
    print(f"\n{len(rows) - len(failed)} ok, {len(failed)} failed, {time.perf_counter() - t0:.0f} s in all -> {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
