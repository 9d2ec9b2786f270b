"""Shared composition of the paper's dynamics figures 1–7 (spec dynamics.md §7a).

The library holds the pieces: the parameter sets and the paper's scalings as kernel modules
(:mod:`hassejax.dynamics.paper`), the trace-one grid and the cone/disk coordinates
(:mod:`hassejax.dynamics.geometry`), the drawing (:mod:`hassejax.plot.dynamics`). Here:

- **One vmapped solve per model and size** (:func:`solve`): every batch runs through the
  held :class:`hassejax.dynamics.sweeps.Sweep` over
  :func:`hassejax.dynamics.solve_gaussian`, the kernel module itself batched (an Equinox
  module is a pytree: its array leaves get the member axis), in chunks of a fixed number of
  members (`capacity`: :data:`CAPACITY` in figures 1–6, figure 7 its own; the last chunk padded), so that each (kernel type, d) compiles once per
  process whatever the figure: figures 1–6 share the 2×2 programs. Dimensions are not embedded in a larger `d` (tried for figure 7: one program
  for d = 3, 4, 5, but a 5×5 step costs 4–20× a 3×3 or 2×2 one).
- **Events** meaning the same as the authors' stops (their projected explicit Euler stopped
  when `‖Σ'‖_F < tol`, "converged", or `tr Σ > 1e3` / `1e4`, "diverged"): the library's
  steady-state event `‖Σ'‖_F = tol` (status ``converged``) and size event `tr Σ = threshold`
  (status ``blow_up`` or ``diverge`` by the decade test of :mod:`hassejax.dynamics`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import numpy as np

from hassejax.dynamics import AbstractAttention, Status, solve_gaussian
from hassejax.dynamics.sweeps import Sweep
from hassejax.errors import ParameterError

# ----------------------------------------------------------------------------- solver settings
RTOL, ATOL = 1e-10, 1e-12
MAX_STEPS = 100_000
N_SAVE = 97
"""Saved points per trajectory (a static shape: one compile for every figure)."""
CAPACITY = 128
"""Members per compiled call of :func:`solve` (a larger batch runs in chunks of it, the last padded), in the full run
and ``--quick`` alike: one program per kind and save-time shape serves figures 1–6. Wider calls cost more than they
save on the CPU: padded to 1184, the 276 members of figure 4 ran 4 times the work, and even 1184 members ran 1.3–2.6
times slower in one call than in chunks of 128 (session 41; `benchmarks/README.md`)."""
NO_STOP_TOL = 1e-300
"""A steady-state tolerance that never fires (the long-horizon solves of the limit rank)."""

EVENTS_NOTE = (
    "The authors integrated with projected explicit Euler and stopped at ‖Σ'‖_F < tol ('converged') or "
    "tr Σ > threshold ('diverged'). Here: diffrax Tsit5 (rtol 1e-10, atol 1e-12, float64) with the same two "
    "stops as events: 'converged: ‖Σ'‖_F < tol' is the steady-state event (status converged); 'diverged: "
    "tr Σ > threshold' is the size event, classified blow_up (finite-time, 1/λ falls linearly to zero) or "
    "diverge (exponential growth) by the library's decade test."
)


# ----------------------------------------------------------------------------- the vmapped solve
def stack_models(models: Sequence[AbstractAttention]) -> AbstractAttention:
    """One kernel module whose array leaves stack those of `models` along a new leading member axis."""
    return jax.tree_util.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *models)


def take_members(model: AbstractAttention, index) -> AbstractAttention:
    """The members `index` (an index array or Boolean mask) of a batched kernel module."""
    return jax.tree_util.tree_map(lambda x: np.asarray(x)[index], model)


def _batched_model(model: AbstractAttention, n: int) -> AbstractAttention:
    """`model` with a leading member axis of length `n` (broadcast when it is one shared kernel)."""
    try:
        model.check_unbatched()
    except ParameterError:  # already batched: one kernel per member
        return jax.tree_util.tree_map(np.asarray, model)
    return jax.tree_util.tree_map(lambda x: np.broadcast_to(np.asarray(x), (n,) + np.shape(x)), model)


def _member(m: dict, max_steps: int = MAX_STEPS) -> dict:
    sol = solve_gaussian(
        m["model"],
        jnp.zeros(m["cov0"].shape[-1]),
        m["cov0"],
        t1=m["t1"],
        ts=m["ts"],
        rtol=RTOL,
        atol=ATOL,
        max_steps=max_steps,
        size_threshold=m["threshold"],
        converge_tol=m["tol"],
    )
    return {
        "status": sol.status,
        "t_final": sol.t_final,
        "t_blowup": sol.t_blowup,
        "decade_ratio": sol.decade_ratio,
        "growth_exponent": sol.growth_exponent,
        "ts": sol.ts,
        "valid": sol.valid,
        "cov": sol.cov,
        "cov_final": sol.cov_final,
        "num_steps": sol.stats.num_steps,
    }


_SWEEPS: dict[tuple[int, int, tuple], Sweep] = {}
"""One held :class:`~hassejax.dynamics.sweeps.Sweep` of :func:`_member` per chunk width, step budget and compiler
options: the figures' ~140 solves of a few shapes run through a few compiled programs, traced once per
process (a fresh :func:`~hassejax.dynamics.sweeps.sweep` per solve would trace ~140 times).
The programs hold no host callback (per-member `t1`/`ts` are checked in the program), so a
second run loads them from JAX's persistent compilation cache."""


def _run(batch: dict, capacity: int, max_steps: int = MAX_STEPS, compiler_options: dict | None = None) -> dict:
    """`_member` on every member of `batch`, `capacity` members per compiled call (the last chunk padded);
    `compiler_options`: per-program XLA options of the chunk program (e.g.
    :func:`hassejax._xla_flags.level0_compiler_options`), a program of its own."""
    options = dict(compiler_options or {})
    # the value's type in the key too (as hassejax.dynamics.sweeps does): 1, 1.0 and True are different options
    key = (capacity, max_steps, tuple(sorted((str(k), type(v).__name__, repr(v)) for k, v in options.items())))
    if key not in _SWEEPS:
        _SWEEPS[key] = Sweep(
            functools.partial(_member, max_steps=max_steps), chunk_size=capacity, shard=False,
            compiler_options=options or None,
        )  # fmt: skip
    return jax.tree_util.tree_map(np.asarray, _SWEEPS[key](batch, progress=False))


RERUN_WIDTH = 8
"""Members per compiled call of the second pass of :func:`solve` (``first_pass_steps``)."""


def _run_two_pass(batch: dict, capacity: int, first_pass_steps: int, compiler_options: dict | None = None) -> dict:
    """:func:`_run` with a step budget of `first_pass_steps`, then the members that ran out of it solved
    again from `t0` with the full budget, :data:`RERUN_WIDTH` at a time, the slowest first (sorted by the
    fraction of `t1` they reached in the first pass: a cost measured, where none can be estimated).

    Lockstep ``vmap`` steps every member of a chunk until its slowest one stops: in figure 7's stiff
    `V` random rows one member in a hundred takes 20,000 steps where the median takes 430, so the
    chunk of 100 ran 15 times the steps its members need. Each member's solve is the same as in one
    pass (the step budget changes no step), so the results are too, to rounding.
    """
    out = {k: np.array(v) for k, v in _run(batch, capacity, first_pass_steps, compiler_options).items()}  # writable
    redo = np.flatnonzero(out["status"] == Status.max_steps_reached)
    if redo.size:
        redo = redo[np.argsort(out["t_final"][redo] / batch["t1"][redo], kind="stable")]
        again = _run(
            jax.tree_util.tree_map(lambda x: np.asarray(x)[redo], batch), RERUN_WIDTH, MAX_STEPS, compiler_options
        )
        for key, value in again.items():
            out[key][redo] = value
    return out


class Timer:
    """Accumulated wall and process-CPU seconds of the solves (CPU time: the figure without other load)."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        """Start counting from zero (each experiment's `main`: `reproduce.py`'s workers run several)."""
        self.wall = 0.0
        self.cpu = 0.0
        self.solves = 0

    def as_dict(self) -> dict:
        return {"solves": self.solves, "wall_s": round(self.wall, 2), "cpu_s": round(self.cpu, 2)}


TIMER = Timer()


def solve(
    model: AbstractAttention,
    cov0: np.ndarray,
    *,
    t1: float | np.ndarray,
    threshold: float | np.ndarray,
    tol: float | np.ndarray,
    capacity: int,
    ts: np.ndarray | None = None,
    first_pass_steps: int | None = None,
    compiler_options: dict | None = None,
) -> dict:
    """Solve the covariance ODE of `model` for every member: one vmapped solve per `capacity` members.

    **Arguments:**

    - `model`: a kernel module with a Gaussian map (see :mod:`hassejax.dynamics.paper`), one
      kernel shared by every member, or batched, its array leaves with a leading member axis
      (:func:`stack_models`).
    - `cov0`: `(N, d, d)` initial covariances.
    - `t1`: horizon; `threshold`: the `tr Σ` stop; `tol`: the `‖Σ'‖_F` stop (scalars, or one
      value per member).
    - `capacity`: members per compiled program (the last chunk, or a smaller batch, padded to
      it by repeating the last member; one program per shape, see :data:`_SWEEPS`).
    - `ts`: `(N, T)` save times per member (`T = N_SAVE`; default `linspace(0, t1, T)`).
    - `first_pass_steps`: solve in two passes (:func:`_run_two_pass`) when the members' step counts
      spread widely and no cost estimate orders them; None: one pass.
    - `compiler_options`: per-program XLA options of the compiled solves (their own programs; None: the process's
      settings), e.g. :func:`hassejax._xla_flags.level0_compiler_options` for programs that compile far longer
      than they run.

    **Returns:** NumPy arrays, member axis first: ``status, t_final, t_blowup, decade_ratio,
    growth_exponent, ts, valid, cov, cov_final, num_steps``.
    """
    cov0 = np.asarray(cov0, float)
    n = cov0.shape[0]
    t1s = np.broadcast_to(np.asarray(t1, float), (n,))
    batch = {
        "model": _batched_model(model, n),
        "cov0": cov0,
        "ts": np.linspace(0.0, t1s, N_SAVE, axis=1) if ts is None else np.asarray(ts, float),
        "t1": t1s,
        "threshold": np.broadcast_to(np.asarray(threshold, float), (n,)),
        "tol": np.broadcast_to(np.asarray(tol, float), (n,)),
    }
    t0w, t0c = time.perf_counter(), time.process_time()
    if first_pass_steps is None:
        out = _run(batch, capacity, MAX_STEPS, compiler_options)
    else:
        out = _run_two_pass(batch, capacity, first_pass_steps, compiler_options)
    TIMER.wall += time.perf_counter() - t0w
    TIMER.cpu += time.process_time() - t0c
    TIMER.solves += 1
    return out


def _template() -> np.ndarray:
    """Save-time fractions of `[0, t_stop]`: log-spaced at the start (1/t convergence), near the
    end (blow-up), and uniform; `N_SAVE` points, sorted, the last just below 1."""
    k = (N_SAVE - 1) // 3
    s = np.concatenate(
        [[0.0], np.geomspace(1e-6, 0.5, k), 1.0 - np.geomspace(0.5, 1e-7, k), np.linspace(0, 1, k)[1:-1]]
    )
    s = np.unique(np.clip(s, 0.0, 1.0 - 1e-9))
    return np.concatenate([s, np.full(N_SAVE - s.size, s[-1])])


SAVE_FRACTIONS = _template()


def log_times(t1: float, n: int) -> np.ndarray:
    """`(n, N_SAVE)` save times `0, geomspace(1e-2, t1)` for every member (long horizons)."""
    return np.broadcast_to(np.concatenate([[0.0], np.geomspace(1e-2, t1, N_SAVE - 1)]), (n, N_SAVE))


def solve_for_plot(model: AbstractAttention, cov0: np.ndarray, **kw) -> dict:
    """:func:`solve` twice with one compiled program: first for each member's stop time, then
    with save times placed in `[0, t_stop]` by :data:`SAVE_FRACTIONS` (where the trajectory moves).

    Step sizes do not depend on the save times, so both solves stop at the same time and with
    the same status (checked: ``replay_max_rel_dt``).
    """
    first = solve(model, cov0, **kw)
    ts = first["t_final"][:, None] * SAVE_FRACTIONS[None, :]
    second = solve(model, cov0, ts=ts, **kw)
    if not np.array_equal(first["status"], second["status"]):
        raise RuntimeError(f"{type(model).__name__}: the replay with dense save times changed a status")
    second["replay_max_rel_dt"] = float(np.max(np.abs(second["t_final"] / first["t_final"] - 1.0)))
    return second


def trajectories(sol: dict) -> list[np.ndarray]:
    """Per member, the valid saved covariances followed by the final state, `(T_i, d, d)`."""
    return [np.concatenate([c[v], cf[None]]) for c, v, cf in zip(sol["cov"], sol["valid"], sol["cov_final"])]


def status_counts(status: np.ndarray) -> dict[str, int]:
    """Counts of each status name present."""
    names, counts = np.unique([Status(int(s)).name for s in np.ravel(status)], return_counts=True)
    return {str(k): int(v) for k, v in zip(names, counts)}


def solver_record(sol: dict) -> dict:
    """Per-solve integrator facts for the JSON."""
    return {
        "steps_max": int(np.max(sol["num_steps"])),
        "t_final_range": [float(np.min(sol["t_final"])), float(np.max(sol["t_final"]))],
    }


def minmax(x) -> list[float]:
    """`[min, max]` of an array as floats."""
    x = np.asarray(x, float)
    return [float(np.min(x)), float(np.max(x))]


def value_counts(x) -> dict[str, int]:
    """Counts of each integer value of `x` (e.g. ranks), keyed by the value as a string."""
    vals, counts = np.unique(np.asarray(x).astype(int), return_counts=True)
    return {str(int(v)): int(c) for v, c in zip(vals, counts)}
