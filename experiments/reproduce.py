"""Regenerate every figure of hassejax into paper_figures/ (the main job).

Runs every experiment script in ``EXPERIMENTS`` (each also runnable on its own) with a
progress bar, then prints a summary table (experiment, status, seconds, seconds of tracing and
lowering, seconds of XLA compiling, key number).
Exits non-zero if any experiment fails. ``--quick`` is a fast smoke run (smaller sizes),
``--only NAME`` runs one (repeatable), ``--out DIR`` writes elsewhere. Compiled programs go to
JAX's persistent compilation cache in ``~/.cache/hassejax/jax`` (``$HASSEJAX_CACHE_DIR``), so a
second run skips the backend compiles; ``--no-compile-cache`` or ``HASSEJAX_COMPILE_CACHE=0``
turns it off.

Usage::

    python experiments/reproduce.py [--quick] [--only NAME ...] [--out DIR] [--no-compile-cache]
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# One BLAS thread (set before NumPy loads; a value the user set wins). The experiments' host
# linear algebra is many small problems (e.g. real_heads: ~1,200 eigenvalue problems of size 384),
# where OpenBLAS's threads gain nothing and, beside XLA's own threads, spin-wait: real_heads --quick
# took 188 s with OpenBLAS's default threads and 39 s with one on a 2-core machine (load 2), the
# whole --quick run 577 s → 449 s wall.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from _common import DEFAULT_OUT
from tqdm import tqdm

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
    "butterfly_depth",
    "jacobian_support",
    "convergence_to_zero",
    "convergence_to_line",
    "convergence_to_plane",
    "convergence_to_two_lines",
    "blowup_or_divergence",
    "convergence_or_blowup",
    "rank_histograms",
    "covariance_ellipses",
    "lambda_max_growth",
    "phase_maps",
    "event_time_accuracy",
    "mean_field",
    "energies",
    "masked_particles",
    "homogeneity",
    "stability_estimate",
    "energy_convexity",
    "sinkhorn",
    "sigmoid_linear",
    "time_dependent",
    "real_heads",
]
"""Run in this order. An experiment whose module has ``skip_reason()`` returning a string
(a missing optional extra) is reported as skipped with that reason, not as a failure."""


class CompileClock:
    """Seconds JAX spends tracing and lowering (`trace`) and compiling with XLA (`compile`).

    From ``jax.monitoring``'s compile events. The persistent compilation cache removes the
    XLA compile of a program seen before (a cache hit costs its load); tracing and lowering
    run in every process.
    """

    TRACE = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration")
    COMPILE = ("/jax/core/compile/backend_compile_duration",)

    def __init__(self) -> None:
        self.trace = 0.0
        self.compile = 0.0
        import jax.monitoring

        jax.monitoring.register_event_duration_secs_listener(self._listen)

    def _listen(self, event: str, duration: float, **_) -> None:
        if event in self.TRACE:
            self.trace += duration
        elif event in self.COMPILE:
            self.compile += duration


def run(names: list[str], out: Path, quick: bool) -> list[dict]:
    """Run the named experiments in order; return one result row each."""
    rows = []
    clock = CompileClock()
    bar = tqdm(names, desc="experiments", unit="exp")
    for name in bar:
        bar.set_postfix_str(name)
        t0, c0, r0 = time.perf_counter(), clock.compile, clock.trace
        row = {"name": name}
        try:
            module = importlib.import_module(name)
            reason = module.skip_reason() if hasattr(module, "skip_reason") else None
            if reason is not None:
                row.update(status="skipped", key=reason)
            else:
                summary = module.main(out, quick)
                row.update(status="ok", key=summary.get("key", ""))
        except Exception as exc:
            traceback.print_exc()
            row.update(status=f"FAILED: {type(exc).__name__}", key=str(exc)[:120])
        row.update(seconds=time.perf_counter() - t0, trace=clock.trace - r0, compile=clock.compile - c0)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: paper_figures/)")
    parser.add_argument("--quick", action="store_true", help="fast smoke run with smaller sizes")
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help=f"run only this experiment (repeatable); one of {', '.join(EXPERIMENTS)}",
    )
    parser.add_argument(
        "--no-compile-cache",
        action="store_true",
        help="do not use JAX's persistent compilation cache (default: on, in ~/.cache/hassejax/jax or "
        "$HASSEJAX_CACHE_DIR; HASSEJAX_COMPILE_CACHE=0 also turns it off)",
    )
    args = parser.parse_args(argv)
    if not args.no_compile_cache:
        from hassejax._cache import enable_compilation_cache

        enable_compilation_cache()
    names = EXPERIMENTS
    if args.only:
        unknown = [n for n in args.only if n not in EXPERIMENTS]
        if unknown:
            parser.error(f"--only: unknown experiment(s) {unknown}; known: {', '.join(EXPERIMENTS)}")
        names = [n for n in EXPERIMENTS if n in args.only]
    try:  # one check before any experiment runs, not one traceback per experiment
        args.out.mkdir(parents=True, exist_ok=True)
        probe = args.out / ".write_test"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        parser.error(f"--out {str(args.out)!r} is not a writable folder: {err.strerror or err}")
    t0 = time.perf_counter()
    rows = run(names, args.out, args.quick)
    total = time.perf_counter() - t0
    width = max(len(r["name"]) for r in rows)
    sw = max(7, *(len(r["status"]) for r in rows))
    print(f"\n{'experiment'.ljust(width)}  {'status'.ljust(sw)}  seconds  trace s  compile s  key number")
    for r in rows:
        print(
            f"{r['name'].ljust(width)}  {r['status'].ljust(sw)}  {r['seconds']:7.1f}  {r['trace']:7.1f}  "
            f"{r['compile']:9.1f}  {r['key']}"
        )
    failed = [r for r in rows if r["status"] not in ("ok", "skipped")]
    skipped = [r for r in rows if r["status"] == "skipped"]
    compile_s = sum(r["compile"] for r in rows)
    trace_s = sum(r["trace"] for r in rows)
    share = 100 / max(total, 1e-9)
    print(
        f"\n{len(rows) - len(failed) - len(skipped)} ok, {len(skipped)} skipped, {len(failed)} failed, "
        f"{total:.0f} s in all, of which {compile_s:.0f} s ({share * compile_s:.0f} %) compiling (XLA) and "
        f"{trace_s:.0f} s ({share * trace_s:.0f} %) tracing and lowering -> {args.out}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
