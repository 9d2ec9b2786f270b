"""Regenerate every figure of hassejax into paper_figures/ (the main job).

Runs every experiment script in ``EXPERIMENTS`` (each also runnable on its own) with a
progress bar, then prints a summary table (experiment, status, seconds, seconds of tracing and
lowering, seconds of XLA compiling, key number).
Exits non-zero if any experiment fails. ``--quick`` is a fast smoke run (smaller sizes,
compiled by XLA for compile speed: LLVM level 0, no FMA; the numbers agree within the solvers'
tolerances),
``--only NAME`` runs one (repeatable), ``--out DIR`` writes elsewhere,
``--jobs N`` runs N experiments at a time in worker processes (default: the usable CPUs, at
most 4; ``--jobs 1`` runs them in this process, one after another), ``--no-progress`` hides the
progress bars (the experiments' own too: it sets ``HASSEJAX_PROGRESS=0`` for this process and its workers). Ctrl-C (SIGINT) or SIGTERM to the main process stops the run and its workers
(exit 130 or 143, no summary). Compiled programs go to
JAX's persistent compilation cache in ``~/.cache/hassejax/jax`` (``$HASSEJAX_CACHE_DIR``), so a
second run skips the backend compiles; ``--no-compile-cache`` or ``HASSEJAX_COMPILE_CACHE=0``
turns it off.

Usage::

    python experiments/reproduce.py [--quick] [--only NAME ...] [--out DIR] [--jobs N] [--no-compile-cache] [--no-progress]
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import multiprocessing
import os
import signal
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
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

from tqdm import tqdm

DEFAULT_OUT = HERE.parent / "paper_figures"  # as _common.DEFAULT_OUT, without importing JAX here

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


SECONDS = {
    "full": {"real_heads": 217, "butterfly_markov": 115, "mean_field": 93, "rank_histograms": 74, "phase_maps": 64,
             "convergence_or_blowup": 28, "sigmoid_linear": 22, "convergence_to_zero": 20, "event_time_accuracy": 18,
             "sinkhorn": 15, "blowup_or_divergence": 12, "energies": 10, "mask_gallery": 9, "stability_estimate": 8,
             "masked_particles": 8, "lambda_max_growth": 7, "convergence_to_two_lines": 7, "time_dependent": 7,
             "covariance_ellipses": 7, "jacobian_support": 5},
    "quick": {"real_heads": 29, "phase_maps": 24, "convergence_or_blowup": 13, "sigmoid_linear": 11,
              "convergence_to_zero": 11, "sinkhorn": 10, "mean_field": 10, "butterfly_markov": 9,
              "convergence_to_two_lines": 7, "rank_histograms": 7, "energies": 6, "lambda_max_growth": 5,
              "masked_particles": 5, "convergence_to_line": 5, "blowup_or_divergence": 5},
}  # fmt: skip
"""Seconds of the longer experiments in a cold run with 2 jobs (2026-12-06, session 41, the 2-vCPU VM of
`benchmarks/README.md`); the others took under 5 s (not listed: counted as 0). With several jobs the experiments start
longest first, so that no long experiment starts last and runs alone while the other workers idle (before, a few
started first and the rest in the order of :data:`EXPERIMENTS`: the full run's `mean_field`, 93 s, started 25th of
32); the table keeps :data:`EXPERIMENTS`' order."""


def start_order(names: list[str], quick: bool) -> list[str]:
    """`names` longest first by :data:`SECONDS` (ties in the order given)."""
    seconds = SECONDS["quick" if quick else "full"]
    return sorted(names, key=lambda n: -seconds.get(n, 0.0))


_CLOCK: CompileClock | None = None


_INTERRUPTED = 0
"""The signal (SIGINT: Ctrl-C, or SIGTERM) that stopped the run in the main process, 0 while none
has: Python may swallow the KeyboardInterrupt its handler raises (when it lands in a weakref
callback), so the run loops also check this flag between experiments."""


def _on_stop_signal(signum, frame) -> None:
    global _INTERRUPTED
    _INTERRUPTED = signum
    raise KeyboardInterrupt


def _die_with_parent() -> None:
    """Linux: this worker gets SIGTERM when the main process ends, however it ends (``kill -9``
    included), instead of waiting on its task pipe for ever."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the main process ended before the call above
        os._exit(1)


def _check_interrupt() -> None:
    if _INTERRUPTED:
        raise KeyboardInterrupt


def _start(compile_cache: bool, worker: bool = False) -> None:
    """Start JAX in this process: the persistent compilation cache, the compile clock.

    A worker ignores Ctrl-C: the main process stops the run and ends the workers; it ends with
    the main process however that ends.
    """
    global _CLOCK
    if worker:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _die_with_parent()
        global _WORKER
        _WORKER = True
    if compile_cache:
        from hassejax._cache import enable_compilation_cache

        enable_compilation_cache()
    if _CLOCK is None:
        _CLOCK = CompileClock()


def run_one(name: str, out: Path, quick: bool) -> dict:
    """Run one experiment in this process; its result row (status, seconds, trace, compile, key)."""
    clock = _CLOCK if _CLOCK is not None else CompileClock()
    t0, c0, r0 = time.perf_counter(), clock.compile, clock.trace
    row = {"name": name}
    try:
        module = importlib.import_module(name)
        reason = module.skip_reason() if hasattr(module, "skip_reason") else None
        if reason is not None:
            row.update(status="skipped", key=reason)
        else:
            import jax

            # The precision the experiment declares (``FLOAT64``; float32 if it declares none, whatever
            # JAX_ENABLE_X64 says, so that a figure does not depend on the environment): a worker runs
            # several experiments, and the float64 ones turn float64 on when imported, for every
            # experiment the worker runs after them.
            jax.config.update("jax_enable_x64", bool(getattr(module, "FLOAT64", False)))
            summary = module.main(out, quick)
            row.update(status="ok", key=summary.get("key", ""))
    except Exception as exc:
        traceback.print_exc()
        row.update(status=f"FAILED: {type(exc).__name__}", key=str(exc)[:120])
    row.update(seconds=time.perf_counter() - t0, trace=clock.trace - r0, compile=clock.compile - c0)
    from hassejax._map_limit import release_compiled_programs

    release_compiled_programs()  # a worker runs several experiments: stay below the kernel's mapping limit
    if _WORKER:  # the last handler registered runs first at exit: after every experiment's own (JAX's included)
        atexit.unregister(_exit_now)
        atexit.register(_exit_now)
    return row


_WORKER = False
"""True in a worker process of the pool (:func:`_start` with ``worker=True``)."""


def _exit_now() -> None:
    """A worker's exit, once the pool ends it: its output flushed, then ``os._exit`` without the interpreter's
    teardown. Every experiment it ran has written its files (atomically) and returned its row; the teardown of JAX
    and the experiments' modules took 3.5 s after the quick run (the main process waits for it in
    ``pool.shutdown``; 0.13 s without it)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing left to keep
            stream.flush()
    os._exit(0)


def run(
    names: list[str], out: Path, quick: bool, jobs: int = 1, compile_cache: bool = True, progress: bool = True
) -> list[dict]:
    """Run the named experiments, `jobs` at a time; one result row each, in the order of `names`.

    ``jobs == 1`` runs them here, one after another. Otherwise each runs in one of `jobs` worker
    processes (started with ``spawn``; each starts JAX once and runs several experiments). If a
    worker dies (out of memory, a crash in XLA), the pool stops; the experiments it had not
    finished run again, each in a process of its own, and the one that dies again is reported as
    ``FAILED: worker died``. `progress`: False hides the progress bar (logs, CI).
    """
    if jobs <= 1:
        _start(compile_cache)
        rows = []
        bar = tqdm(names, desc="experiments", unit="exp", disable=not progress)
        for name in bar:
            bar.set_postfix_str(name)
            rows.append(run_one(name, out, quick))
            _check_interrupt()
        return rows
    order = start_order(names, quick)
    with tqdm(total=len(names), desc=f"experiments ({jobs} jobs)", unit="exp", disable=not progress) as bar:
        rows = _run_pool(order, out, quick, jobs, compile_cache, bar)
        rerun = [n for n in order if n not in rows]
        if rerun:
            tqdm.write(f"a worker process died; running {', '.join(rerun)} again, each in a process of its own")
        for name in rerun:
            again = _run_pool([name], out, quick, 1, compile_cache, bar)  # counts it on the bar if it ends
            rows[name] = again.get(name) or _died(name)
            if name not in again:
                bar.update()
    return [rows[n] for n in names]


def _died(name: str) -> dict:
    return {"name": name, "status": "FAILED: worker died", "key": "its process ended (out of memory? a crash?)",
            "seconds": 0.0, "trace": 0.0, "compile": 0.0}  # fmt: skip


def _run_pool(names: list[str], out: Path, quick: bool, jobs: int, compile_cache: bool, bar) -> dict[str, dict]:
    """Run `names` in a pool of `jobs` spawned workers; the rows of those that finished (all but a dead pool's)."""
    rows: dict[str, dict] = {}
    pool = ProcessPoolExecutor(
        jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_start, initargs=(compile_cache, True)
    )
    try:
        futures = {pool.submit(run_one, name, out, quick): name for name in names}
        for future in as_completed(futures):
            _check_interrupt()
            try:
                rows[futures[future]] = future.result()
            except BrokenProcessPool:
                continue  # every unfinished experiment of this pool lands here
            bar.set_postfix_str(f"finished {futures[future]}")
            bar.update()
    except BaseException:  # Ctrl-C (or any error here): end the workers now, not after the queue
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return rows


def _out_folder(value: str) -> Path:
    """``--out``: a non-empty path (an empty one would silently mean the current folder)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("an empty path; give a folder, e.g. --out figures")
    return Path(value)


def default_jobs() -> int:
    """The usable CPUs of this process, at most 4 (each worker holds its own JAX and compiled programs)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 4))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--out", type=_out_folder, default=DEFAULT_OUT, help="output folder (default: paper_figures/)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="fast smoke run: smaller sizes, compiled for compile speed (XLA level 0, no FMA)",
    )
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
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="experiments run at a time, each in a worker process (default: the usable CPUs, at most 4; never "
        "more than the experiments to run; 1 runs them in this process)",
    )
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bars, the experiments' own included (for logs and CI; the summary table still prints)",
    )
    args = parser.parse_args(argv)
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs must be a positive integer; got {args.jobs}")
    names = EXPERIMENTS
    if args.only:
        unknown = [n for n in args.only if n not in EXPERIMENTS]
        if unknown:
            parser.error(f"--only: unknown experiment(s) {unknown}; known: {', '.join(EXPERIMENTS)}")
        names = [n for n in EXPERIMENTS if n in args.only]
    jobs = min(args.jobs or default_jobs(), len(names))
    try:  # one check before any experiment runs, not one traceback per experiment
        args.out.mkdir(parents=True, exist_ok=True)
        probe = args.out / ".write_test"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        parser.error(f"--out {str(args.out)!r} is not a writable folder: {err.strerror or err}")
    taken = [
        n for n in names if ((args.out / n).exists() or (args.out / n).is_symlink()) and not (args.out / n).is_dir()
    ]
    if taken:  # each experiment writes into the folder out/NAME
        parser.error(f"--out {str(args.out)!r} holds a file where an experiment's folder goes: {', '.join(taken)}")
    # XLA flags for compile speed, set before JAX starts so the worker processes inherit them (a
    # flag the user set in XLA_FLAGS wins; hassejax._xla_flags): XLA's legacy elemental emitters
    # (--quick cold 198 s against 240 s, the same statuses and counts, floats equal up to rounding);
    # with --quick also LLVM level 0 without FMA, since its small programs compile far longer than
    # they run (169 s against 198 s: 23 of 32 experiments faster; the same statuses and key numbers,
    # step counts and blow-up times changed within the tolerances). The phase maps' long sweeps keep
    # XLA's level 3 through their own compiler_options (hassejax.dynamics.phase_map.run_sweep); in the full
    # run rank_histograms' sweeps, which compile far longer than they run, take level 0 through theirs
    # (hassejax._xla_flags.level0_compiler_options; none where XLA_FLAGS sets the level).
    from hassejax._xla_flags import add_xla_flags, fast_compile_flags  # standard library only

    add_xla_flags(fast_compile_flags(level0=args.quick))
    t0 = time.perf_counter()
    handlers = {stop: signal.getsignal(stop) for stop in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, _on_stop_signal)
    signal.signal(signal.SIGTERM, _on_stop_signal)  # e.g. a plain `kill`: the workers are ended too
    previous = os.environ.get("HASSEJAX_PROGRESS")
    if args.no_progress:  # the experiments' own bars too (sweeps' chunks), here and in the workers spawned now
        os.environ["HASSEJAX_PROGRESS"] = "0"
    try:
        rows = run(
            names,
            args.out,
            args.quick,
            jobs=jobs,
            compile_cache=not args.no_compile_cache,
            progress=not args.no_progress,
        )
    except KeyboardInterrupt:
        stop = signal.Signals(_INTERRUPTED or signal.SIGINT)
        print(f"\ninterrupted ({stop.name}) after {time.perf_counter() - t0:.0f} s; no summary", file=sys.stderr)
        return 128 + stop.value  # the shell's convention: 130 for Ctrl-C, 143 for SIGTERM
    finally:  # the caller's environment and signal handlers as they were (main() is called in-process by the
        # tests, too: left installed, a later SIGTERM to that process raised KeyboardInterrupt wherever it landed)
        for stop, handler in handlers.items():
            signal.signal(stop, handler)
        if previous is None:
            os.environ.pop("HASSEJAX_PROGRESS", None)
        else:
            os.environ["HASSEJAX_PROGRESS"] = previous
    try:
        return _summary(rows, time.perf_counter() - t0, jobs, args.out)
    except BrokenPipeError:  # stdout piped into a reader that stopped (`| head`): the run itself is done
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _secs(seconds: float) -> str:
    """Seconds for the summary line: one decimal below 10 s (a short run's 0.12 s of compiling is not "0 s (6 %)")."""
    return f"{seconds:.1f}" if seconds < 9.95 else f"{seconds:.0f}"


def _summary(rows: list[dict], total: float, jobs: int, out: Path) -> int:
    """Print the summary table and line; the exit code (1 if an experiment failed)."""
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
    busy = sum(r["seconds"] for r in rows)  # the experiments' own seconds (several at a time with --jobs)
    share = 100 / max(busy, 1e-9)
    print(
        f"\n{len(rows) - len(failed) - len(skipped)} ok, {len(skipped)} skipped, {len(failed)} failed, "
        f"{_secs(total)} s wall with {jobs} job{'s' if jobs > 1 else ''}; of the experiments' {_secs(busy)} s, "
        f"{_secs(compile_s)} s ({share * compile_s:.0f} %) compiling (XLA) and "
        f"{_secs(trace_s)} s ({share * trace_s:.0f} %) tracing and lowering -> {out}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
