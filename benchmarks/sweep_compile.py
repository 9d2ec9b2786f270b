"""Benchmark: compile time of hassejax's sweep programs against plain diffrax's (issue 13, item 2).

The programs of ``benchmarks/sweeps.py`` (softmax covariance ODE, ``V = I``, β = 1, float64,
1,000 members, the ``stable`` and ``blowup`` families at d = 2, 8, 32; see that file's docstring),
compiled only, not run:

- ``plain``: ``jax.jit(jax.vmap(solve_one))`` of one plain ``diffrax.diffeqsolve`` with the size
  ``Event`` (Tsit5, PID controller, ``optimistix.Newton`` root find), ``.lower(batch).compile()``;
- ``plain no event`` (stable family): the same without the event;
- ``default``, ``projective``: ``sweep_program(member, batch).compile()`` of
  ``solve_gaussian(...)`` with the factor state and ``state="projective"``;
- ``threshold inf`` (stable family): ``solve_gaussian(..., size_threshold=inf)``, the peer of
  ``plain no event``;
- ``default, XLA emitters`` and ``projective, XLA emitters``: the same two hassejax programs with
  ``compiler_options={"xla_cpu_use_fusion_emitters": True}``, i.e. without the legacy loop
  emitters hassejax's sweeps use by default on the CPU (``hassejax._xla_flags.sweep_compiler_options``).

Each compile starts from ``jax.clear_caches()`` (no program reuses another's traces) and includes
tracing and lowering. A single compile time moves by up to ±20 % between runs minutes apart on a
small machine, so the columns are compiled in turn, ``--repeats`` rounds, and each reports its
least time (and the median); ratios are to ``plain`` (``threshold inf``: to ``plain no event``).
XLA_FLAGS is recorded; run it without any for XLA's defaults.

Writes ``benchmarks/results/sweep_compile.json`` (machine, versions, load averages before and
after) and prints a Markdown table.

Usage: ``python benchmarks/sweep_compile.py [--members 1000] [--dims 2 8 32] [--repeats 5] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import jax
import jax.numpy as jnp
from sweeps import T1, family, loads, machine_info, make_member, make_plain  # turns float64 on

from hassejax.dynamics.sweeps import sweep_program

XLA_EMITTERS = {"xla_cpu_use_fusion_emitters": True}


def compile_seconds(fn) -> float:
    """Wall seconds of `fn()` (a trace, lower and compile) after ``jax.clear_caches()``."""
    jax.clear_caches()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def programs(d: int, fam: str, batch: dict) -> dict:
    """Column name -> a function that traces, lowers and compiles that column's program."""
    t1 = T1[fam]
    plain, member, proj = make_plain(d, t1), make_member(d, t1), make_member(d, t1, "projective")
    cols = {
        "plain": lambda: jax.jit(jax.vmap(plain)).lower(batch).compile(),
        "default": lambda: sweep_program(member, batch).compile(),
        "projective": lambda: sweep_program(proj, batch).compile(),
        "default, XLA emitters": lambda: sweep_program(member, batch, compiler_options=XLA_EMITTERS).compile(),
        "projective, XLA emitters": lambda: sweep_program(proj, batch, compiler_options=XLA_EMITTERS).compile(),
    }
    if fam == "stable":
        plain_ne, inf_member = make_plain(d, t1, with_event=False), make_member(d, t1, size_threshold=float("inf"))
        cols["plain no event"] = lambda: jax.jit(jax.vmap(plain_ne)).lower(batch).compile()
        cols["threshold inf"] = lambda: sweep_program(inf_member, batch).compile()
    return cols


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--members", type=int, default=1000, help="members of each sweep")
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 8, 32], help="dimensions d")
    parser.add_argument("--repeats", type=int, default=5, help="rounds; each column reports its least")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "sweep_compile.json", help="JSON path"
    )
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.members < 1:
        parser.error("--repeats and --members must be at least 1")

    # one-off process costs (first traces of JAX, diffrax, hassejax) on a d that is not measured
    A, cov0 = family("stable", 3, 2)
    for fn in programs(3, "stable", {"A": jnp.asarray(A), "cov0": jnp.asarray(cov0)}).values():
        fn()

    rows = []
    for d in args.dims:
        for fam in ("stable", "blowup"):
            A, cov0 = family(fam, d, args.members)
            cols = programs(d, fam, {"A": jnp.asarray(A), "cov0": jnp.asarray(cov0)})
            load0, times = loads(), {name: [] for name in cols}
            for _ in range(args.repeats):
                for name, fn in cols.items():
                    times[name].append(compile_seconds(fn))
            best = {name: min(v) for name, v in times.items()}
            ratio = {
                name: best[name] / best["plain no event" if name == "threshold inf" else "plain"]
                for name in cols
                if not name.startswith("plain")
            }
            rows.append(
                {
                    "d": d,
                    "family": fam,
                    "seconds": times,
                    "least_s": best,
                    "median_s": {name: statistics.median(v) for name, v in times.items()},
                    "ratio_least": ratio,
                    "load_before_after": [load0, loads()],
                }
            )
            print(f"d = {d:2d} {fam:6s} " + ", ".join(f"{k} {v:.2f}×" for k, v in ratio.items()), flush=True)

    result = {
        "benchmark": "sweep_compile",
        "members": args.members,
        "repeats": args.repeats,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "machine": machine_info(),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(table(result))
    return result


def table(result: dict) -> str:
    """Markdown table: the plain program's least compile time and each column's ratio to it."""
    names = ["default", "projective", "threshold inf", "default, XLA emitters", "projective, XLA emitters"]
    lines = [
        "| d | family | plain (s) | " + " | ".join(names) + " |",
        "|---|---|---|" + "---|" * len(names),
    ]
    for r in result["rows"]:
        cells = [f"{r['ratio_least'][n]:.2f}×" if n in r["ratio_least"] else "–" for n in names]
        lines.append(f"| {r['d']} | {r['family']} | {r['least_s']['plain']:.2f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
