"""Benchmark: vmapped diffrax sweeps (hassejax) against a SciPy ``solve_ivp`` loop.

Softmax covariance ODE (spec dynamics.md §2, β = 1, ``V = I``), 1,000 members per family,
d in {2, 8, 32}, float64 on both sides, both integrating the same state: the mean `α` and a
factor `U` (`Σ = UUᵀ`, `U' = VΣA U`, `α' = V(I + ΣA)α`):

- ``stable`` family: `A = −(GᵀG/d + 0.1 I)` (`A + Aᵀ ≺ 0`, so `Σ → 0`), `t1 = 20`;
- ``blowup`` family: `A = G/√d` (indefinite: every member blows up, at the closed-form
  `t* = 1/λ_max(Σ0^{1/2}(A + Aᵀ)Σ0^{1/2})`), `t1 = 100`, stopped by the size event
  `tr Σ = 1e8 · tr Σ0`.

`G` standard normal, `Σ0 = WWᵀ/d + 0.1 I`, `α0 = 0` (seed 0 for everything).

Columns (all in one process, one after the other, for each family and d):

- ``hassejax``: a held :class:`hassejax.dynamics.sweeps.Sweep` of
  ``solve_gaussian(Softmax(...), ..., rtol=1e-6, atol=1e-9)`` (Tsit5, PID controller, the
  size event root-found, ``throw=False``), all members in one vmapped chunk on all local
  devices. Compile time is measured on its own, ahead of time
  (``sweep_program(...).compile()``, tracing and lowering included, after ``jax.clear_caches()``
  so that no column reuses another's traces); the run time is the median of ``--repeats`` calls
  after a warm-up call, ``block_until_ready``.
- ``plain``: plain diffrax, ``jax.jit(jax.vmap(solve_one))`` where ``solve_one`` is one
  ``diffrax.diffeqsolve`` of the same state and right-hand side written out by hand for
  ``V = I``, ``β = 1`` (`M = (UUᵀ)A`, `α' = Mα + α`, `U' = MU`: three `d×d` products per
  evaluation), ``Tsit5()``, ``PIDController(rtol=1e-6, atol=1e-9)``, ``SaveAt(t1=True)``,
  ``throw=False``, `U0 = Σ0^{1/2}` (``eigh``) and, in both families, a ``diffrax.Event`` on the
  real-valued condition `log(1e8 tr Σ0) − log tr Σ` located by
  ``optimistix.Newton(rtol=1e-8, atol=1e-8)`` (issue 13 defines the peer so: a sweep does not know
  beforehand which members blow up; in the stable family it never fires). Compile:
  ``.lower(batch).compile()``; run: the median of ``--repeats`` calls of the compiled program after a
  warm-up call.
- ``plain no event`` (stable family only): the same plain program without the event (before
  2026-12-03 this was the stable family's ``plain`` column), the peer of ``hassejax
  size_threshold=inf``.
- ``hassejax ordered``: the same held sweep given per-member cost estimates,
  ``cost=lambda p: softmax_gaussian_cost(p["cov0"], p["A"], t1=t1)`` (closed form of spec
  §3): the members run sorted by cost in chunks of the automatic width (the fewest equal
  chunks whose estimated lockstep efficiency reaches 90 %), results in the caller's order
  (checked equal to the unordered sweep's). "Lockstep steps" is `Σ_chunks width × max steps`
  over the member-steps actually needed (1.00: no member waits for a slower one).
- ``hassejax covariance state``: the held sweep of ``solve_gaussian(..., state="covariance")``,
  the symmetric Riccati state `(α, Σ)` with `Σ' = MΣ + ΣMᵀ` (three `d×d` products per
  evaluation, as plain diffrax, instead of the factor state's four); its statuses are checked
  against the factor state's and its `t*` against the closed form.
- ``hassejax projective state``: the held sweep of ``solve_gaussian(..., state="projective")``:
  the scale `ρ = log tr Σ` and the shape `Û` (`Σ = e^ρ ÛÛᵀ`) integrated apart in the time `τ` of
  the size (`dt/dτ = e^{−ρ}`; softmax's map is homogeneous in `Σ`), in which a blow-up is smooth;
  statuses checked against the factor state's, `t*` against the closed form.
- ``hassejax size_threshold=inf`` (stable family only): the held sweep of
  ``solve_gaussian(..., size_threshold=inf)``, the same problem as ``plain no event``: the program
  then has no size event, root find, decade-test quadrature or growth rates; its statuses and step
  counts are checked equal to the default sweep's, its times compared with ``plain no event``'s.
- ratios ``hassejax / plain`` of the compile and run times, wall clock and process CPU time
  (``time.process_time``, all threads: less sensitive to other jobs on a shared machine than
  the wall clock).
- ``scipy``: a Python loop of ``scipy.integrate.solve_ivp(method="RK45", rtol=1e-6,
  atol=1e-9)`` with the same right-hand side in NumPy and a terminal event
  `log tr Σ − log(1e8 tr Σ0)` (direction +1). With ``--scipy-members m < members`` the loop
  runs on the first `m` members and its time is scaled by `members / m` (marked); so does
  ``--scipy-cap S``, which stops a loop after `S` seconds (at least 20 members).

All are checked: same outcome (event or not) per member; for the blow-up family the
relative error of `t_blowup` against the closed form (hassejax reports `t_e + λ/λ'`
extrapolated from the event; plain diffrax's and SciPy's event time is the threshold
crossing, a lower bound too early by about `tr Σ0 / threshold`).

Particles: one softmax solve, n = 1024 tokens, d = 16, `A = I/√d`, `V = −I/2`, `t1 = 2`,
``solve_particles`` (Tsit5) against ``solve_ivp`` RK45 with a NumPy right-hand side, same
tolerances; the final states are compared. (Compile time here: first call minus the
median run.)

Writes ``benchmarks/results/sweeps.json`` (machine, versions, load averages) and prints a
Markdown table. Other processes share the CPUs: the load averages (1, 5, 15 min) before and
after each measurement are recorded; rerun when they are above the core count.

Usage: ``python benchmarks/sweeps.py [--members 1000] [--dims 2 8 32] [--scipy-members M]
[--scipy-cap S] [--repeats 3] [--skip-particles] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax

jax.config.update("jax_enable_x64", True)

import diffrax  # noqa: E402
import equinox  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optimistix as optx  # noqa: E402
import scipy  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

import hassejax  # noqa: E402
from hassejax.dynamics import Softmax, Status, softmax_gaussian_cost, solve_gaussian, solve_particles  # noqa: E402
from hassejax.dynamics.sweeps import Sweep, sweep_program  # noqa: E402

RTOL, ATOL = 1e-6, 1e-9
THRESHOLD_FACTOR = 1e8
T1 = {"stable": 20.0, "blowup": 100.0}


# --------------------------------------------------------------------------- problem set
def psd_sqrt(s: np.ndarray) -> np.ndarray:
    w, q = np.linalg.eigh(0.5 * (s + s.T))
    return (q * np.sqrt(np.clip(w, 0.0, None))) @ q.T


def family(name: str, d: int, members: int, seed: int = 0):
    rng = np.random.default_rng([seed, d, 0 if name == "stable" else 1])
    G = rng.normal(size=(members, d, d))
    W = rng.normal(size=(members, d, d))
    cov0 = W @ np.swapaxes(W, -1, -2) / d + 0.1 * np.eye(d)
    if name == "stable":
        A = -(np.swapaxes(G, -1, -2) @ G / d + 0.1 * np.eye(d))
    else:
        A = G / np.sqrt(d)
    return A, cov0


def closed_form_t_star(A, cov0):
    out = np.empty(len(A))
    for i, (a, s) in enumerate(zip(A, cov0)):
        r = psd_sqrt(s)
        lam = np.linalg.eigvalsh(r @ (a + a.T) @ r)[-1]
        out[i] = 1.0 / lam if lam > 0 else np.inf
    return out


# --------------------------------------------------------------------------- hassejax
def make_member(d: int, t1: float, state: str = "factor", size_threshold=None):
    def member(p):
        model = Softmax(V=jnp.eye(d), A=p["A"])
        sol = solve_gaussian(
            model, jnp.zeros(d), p["cov0"], t1=t1, rtol=RTOL, atol=ATOL, state=state, size_threshold=size_threshold
        )
        return {"status": sol.status, "t_final": sol.t_final, "t_blowup": sol.t_blowup, "steps": sol.stats.num_steps}

    return member


def loads() -> list[float]:
    """The 1, 5 and 15 minute load averages."""
    return [round(x, 2) for x in os.getloadavg()]


def timed(fn):
    """`(result, wall seconds, process CPU seconds)` of `fn()` (``block_until_ready``)."""
    w, c = time.perf_counter(), time.process_time()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - w, time.process_time() - c


def measure(compile_fn, run_fn, repeats: int):
    """Compile time (ahead of time) and the median run time of `repeats` calls after a warm-up call.

    `compile_fn()` returns the compiled program; `run_fn(compiled)` runs it on the batch.
    """
    load0 = loads()
    # every program traced afresh: JAX keeps the traces of jitted functions it has seen, so a program whose
    # inner functions an earlier column traced (hassejax's solve core, at the same shapes) would lower in a
    # tenth of the time, while plain diffrax's fresh closures always retrace
    jax.clear_caches()
    compiled, compile_s, compile_cpu_s = timed(compile_fn)
    out, first_s, _ = timed(lambda: run_fn(compiled))  # warm-up
    runs, cpus = [], []
    for _ in range(repeats):
        out, w, c = timed(lambda: run_fn(compiled))
        runs.append(w)
        cpus.append(c)
    return out, {
        "run_s": statistics.median(runs) if runs else first_s,
        "run_cpu_s": statistics.median(cpus) if cpus else None,
        "runs_s": runs,
        "runs_cpu_s": cpus,
        "compile_s": compile_s,
        "compile_cpu_s": compile_cpu_s,
        "first_call_s": first_s,
        "load_before_after": [load0, loads()],
    }


def time_hassejax(member, batch, repeats: int, cost=None):
    """A held :class:`Sweep` (one compiled program, reused by every call) and its AOT compile time.

    With `cost` (a callable on the batch) the members run sorted by cost in chunks of the
    automatic width; the compile time is that of the chunk program.
    """
    held = Sweep(member, cost=cost)
    out, stats = measure(
        lambda: sweep_program(member, batch, cost=cost).compile(),  # the compile time on its own (ahead of time)
        lambda _: held(batch, progress=False),  # the first call compiles the held program (warm-up)
        repeats,
    )
    steps = np.asarray(out["steps"])
    width = steps.size
    order = np.arange(steps.size)
    if cost is not None:
        costs = np.asarray(cost(batch))
        order = np.argsort(costs, kind="stable")
        width = sweep_program(lambda p: p["A"][0, 0], batch, cost=cost).out_info.shape[0]
    stats["chunk_width"] = int(width)
    # member-steps run in lockstep: each chunk steps until its slowest member stops
    stats["lockstep_member_steps"] = int(
        width * np.maximum.reduceat(steps[order], np.arange(0, steps.size, width)).sum()
    )
    stats["member_steps"] = int(steps.sum())
    return out, stats


# --------------------------------------------------------------------------- plain diffrax
def make_plain(d: int, t1: float, with_event: bool = True):
    """`solve_one(p)`: one plain ``diffrax.diffeqsolve`` of the same ODE (V = I, β = 1), with or without the size
    event (see the module docstring)."""
    del d

    def rhs(t, y, A):
        alpha, U = y
        M = (U @ U.T) @ A  # V = I, β = 1
        return (M @ alpha + alpha, M @ U)

    def solve_one(p):
        A, cov0 = p["A"], p["cov0"]
        w, q = jnp.linalg.eigh(cov0)
        U0 = (q * jnp.sqrt(jnp.clip(w, 0.0, None))) @ q.T
        event = None
        if with_event:
            log_threshold = jnp.log(THRESHOLD_FACTOR * jnp.trace(cov0))

            def cond(t, y, args, **kwargs):
                return log_threshold - jnp.log(jnp.sum(y[1] ** 2))

            event = diffrax.Event(cond, root_finder=optx.Newton(rtol=1e-8, atol=1e-8))
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(rhs),
            diffrax.Tsit5(),
            t0=0.0,
            t1=t1,
            dt0=None,
            y0=(jnp.zeros_like(cov0[0]), U0),
            args=A,
            saveat=diffrax.SaveAt(t1=True),
            stepsize_controller=diffrax.PIDController(rtol=RTOL, atol=ATOL),
            event=event,
            max_steps=100_000,
            throw=False,
        )
        fired = jnp.asarray(False) if sol.event_mask is None else jnp.asarray(sol.event_mask)
        return {"fired": fired, "t_final": sol.ts[-1], "steps": sol.stats["num_steps"], "result": sol.result._value}

    return solve_one


def time_plain(solve_one, batch, repeats: int):
    program = jax.jit(jax.vmap(solve_one))
    return measure(lambda: program.lower(batch).compile(), lambda compiled: compiled(batch), repeats)


# --------------------------------------------------------------------------- SciPy
def scipy_member(A, cov0, t1):
    d = A.shape[0]
    threshold = THRESHOLD_FACTOR * np.trace(cov0)
    log_thr = np.log(threshold)

    def rhs(t, y):
        alpha, U = y[:d], y[d:].reshape(d, d)
        M = (U @ U.T) @ A  # V = I
        return np.concatenate([M @ alpha + alpha, (M @ U).ravel()])

    def event(t, y):
        U = y[d:]
        return np.log(np.dot(U, U)) - log_thr

    event.terminal = True
    event.direction = 1.0
    y0 = np.concatenate([np.zeros(d), psd_sqrt(cov0).ravel()])
    sol = solve_ivp(rhs, (0.0, t1), y0, method="RK45", rtol=RTOL, atol=ATOL, events=event)
    fired = sol.status == 1
    if sol.status == -1:
        raise RuntimeError(f"solve_ivp failed: {sol.message}")
    return fired, float(sol.t[-1]), sol.nfev


def time_scipy(A, cov0, t1, m: int, desc: str, cap_s: float):
    """Loop over the first `m` members; stop early (after at least 20) once `cap_s` seconds have passed."""
    load0 = loads()
    fired = np.zeros(m, bool)
    t_end = np.zeros(m)
    nfev = 0
    done = 0
    t = time.perf_counter()
    for i in tqdm(range(m), desc=desc, leave=False):
        fired[i], t_end[i], nf = scipy_member(A[i], cov0[i], t1)
        nfev += nf
        done = i + 1
        if done >= 20 and time.perf_counter() - t > cap_s:
            break
    elapsed = time.perf_counter() - t
    return (
        fired[:done],
        t_end[:done],
        {
            "seconds_measured": elapsed,
            "members_run": done,
            "nfev": int(nfev),
            "load_before_after": [load0, loads()],
        },
    )


# --------------------------------------------------------------------------- particles
def particles(repeats: int):
    n, d, t1 = 1024, 16, 2.0
    rng = np.random.default_rng(0)
    x0 = rng.normal(size=(n, d))
    A = np.eye(d) / np.sqrt(d)
    V = -0.5 * np.eye(d)
    model = Softmax(V=jnp.asarray(V), A=jnp.asarray(A))
    ts = jnp.array([0.0, t1])

    def run():
        sol = solve_particles(model, jnp.asarray(x0), t1=t1, ts=ts, rtol=RTOL, atol=ATOL)
        return jax.block_until_ready(sol)

    load0 = loads()
    t = time.perf_counter()
    sol = run()  # first call: compile + run
    first = time.perf_counter() - t
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        sol = run()
        runs.append(time.perf_counter() - t)
    jax_run = statistics.median(runs)
    load1 = loads()

    def rhs(t, y):
        x = y.reshape(n, d)
        logits = x @ A.T @ x.T  # logits[i, j] = x_jᵀ A x_i
        logits -= logits.max(axis=1, keepdims=True)
        w = np.exp(logits)
        w /= w.sum(axis=1, keepdims=True)
        return (w @ x @ V.T).ravel()

    t = time.perf_counter()
    ref = solve_ivp(rhs, (0.0, t1), x0.ravel(), method="RK45", rtol=RTOL, atol=ATOL)
    scipy_s = time.perf_counter() - t
    x_ref = ref.y[:, -1].reshape(n, d)
    x_jax = np.asarray(sol.x_final)
    return {
        "n": n,
        "d": d,
        "t1": t1,
        "hassejax": {
            "run_s": jax_run,
            "runs_s": runs,
            "compile_s": max(first - jax_run, 0.0),
            "first_call_s": first,
            "steps": int(sol.stats.num_steps),
            "status": Status(int(sol.status)).name,
        },
        "scipy_numpy_rhs": {"seconds": scipy_s, "nfev": int(ref.nfev), "status": int(ref.status)},
        "max_abs_diff_final": float(np.max(np.abs(x_jax - x_ref))),
        "max_abs_final": float(np.max(np.abs(x_ref))),
        "speedup": scipy_s / jax_run,
        "load_before_between_after": [load0, load1, loads()],
    }


# --------------------------------------------------------------------------- main
def git_commit() -> str | None:
    """The repository's HEAD commit (None outside a git checkout)."""
    import subprocess

    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True)
    except OSError:
        return None
    return out.stdout.strip() or None


def machine_info():
    cpu = platform.processor()
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
        "devices": [str(dv) for dv in jax.devices()],
        "python": sys.version.split()[0],
        "git_commit": git_commit(),
        "versions": {
            "hassejax": hassejax.__version__,
            "jax": jax.__version__,
            "jaxlib": importlib.metadata.version("jaxlib"),
            "diffrax": diffrax.__version__,
            "equinox": equinox.__version__,
            "optimistix": optx.__version__,
            "numpy": np.__version__,
            "scipy": scipy.__version__,
        },
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 8, 32])
    parser.add_argument("--families", nargs="+", default=["stable", "blowup"])
    parser.add_argument(
        "--scipy-members", type=int, default=None, help="run the SciPy loop on this many members and scale"
    )
    parser.add_argument(
        "--scipy-cap",
        type=float,
        default=float("inf"),
        help="stop a SciPy loop after this many seconds (>= 20 members) and scale its time",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-scipy", action="store_true", help="only the hassejax and plain-diffrax columns")
    parser.add_argument("--skip-particles", action="store_true")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "sweeps.json")
    args = parser.parse_args(argv)

    # One-off process costs (JAX's, diffrax's and hassejax's first traces) before any measurement:
    # a throw-away run of both columns on a d that is not measured.
    for fam in args.families:
        A, cov0 = family(fam, 3, 2)
        warm = {"A": jnp.asarray(A), "cov0": jnp.asarray(cov0)}
        time_hassejax(make_member(3, T1[fam]), warm, 0)
        time_plain(make_plain(3, T1[fam]), warm, 0)
        time_plain(make_plain(3, T1[fam], with_event=False), warm, 0)

    rows = []
    for d in args.dims:
        for fam in args.families:
            A, cov0 = family(fam, d, args.members)
            t1 = T1[fam]
            batch = {"A": jnp.asarray(A), "cov0": jnp.asarray(cov0)}
            out, hj = time_hassejax(make_member(d, t1), batch, args.repeats)
            out_ordered, hjo = time_hassejax(
                make_member(d, t1),
                batch,
                args.repeats,
                cost=lambda p, t1=t1: softmax_gaussian_cost(p["cov0"], p["A"], t1=t1),
            )
            for k in ("status", "steps"):  # the ordered sweep returns the same results in the caller's order
                np.testing.assert_array_equal(np.asarray(out_ordered[k]), np.asarray(out[k]))
            out_cov, hjc = time_hassejax(make_member(d, t1, "covariance"), batch, args.repeats)
            out_proj, hjp = time_hassejax(make_member(d, t1, "projective"), batch, args.repeats)
            pout, pl = time_plain(make_plain(d, t1), batch, args.repeats)
            if fam == "stable":  # without the event, on both sides: size_threshold=inf against plain no event
                out_ne, hjn = time_hassejax(make_member(d, t1, size_threshold=np.inf), batch, args.repeats)
                pout_ne, pln = time_plain(make_plain(d, t1, with_event=False), batch, args.repeats)
                np.testing.assert_array_equal(np.asarray(pout_ne["steps"]), np.asarray(pout["steps"]))
            status = np.asarray(out["status"])
            hj_fired = (status == Status.blow_up) | (status == Status.diverge)
            p_fired = np.asarray(pout["fired"])
            row = {
                "d": d,
                "family": fam,
                "members": args.members,
                "t1": t1,
                "hassejax": {
                    **hj,
                    "max_steps": int(np.max(out["steps"])),
                    "mean_steps": float(np.mean(out["steps"])),
                    "statuses": {Status(s).name: int(np.sum(status == s)) for s in np.unique(status)},
                },
                "plain_diffrax": {
                    **pl,
                    "max_steps": int(np.max(pout["steps"])),
                    "mean_steps": float(np.mean(pout["steps"])),
                    "events": int(p_fired.sum()),
                    "same_outcome_as_hassejax": int(np.sum(p_fired == hj_fired)),
                },
                "hassejax_cost_ordered": hjo,
                "hassejax_covariance_state": {
                    **hjc,
                    "max_steps": int(np.max(out_cov["steps"])),
                    "mean_steps": float(np.mean(out_cov["steps"])),
                    "same_status_as_factor_state": int(np.sum(np.asarray(out_cov["status"]) == status)),
                },
                "hassejax_projective_state": {
                    **hjp,
                    "max_steps": int(np.max(out_proj["steps"])),
                    "mean_steps": float(np.mean(out_proj["steps"])),
                    "same_status_as_factor_state": int(np.sum(np.asarray(out_proj["status"]) == status)),
                },
                "ratio_hassejax_projective_state_over_plain": {
                    k: hjp[k] / pl[k] for k in ("run_s", "run_cpu_s", "compile_s", "compile_cpu_s")
                },
                "ratio_hassejax_covariance_state_over_plain": {
                    k: hjc[k] / pl[k] for k in ("run_s", "run_cpu_s", "compile_s", "compile_cpu_s")
                },
                "ratio_hassejax_over_plain": {
                    k: hj[k] / pl[k] for k in ("run_s", "run_cpu_s", "compile_s", "compile_cpu_s")
                },
                "ratio_hassejax_cost_ordered_over_plain": {
                    k: hjo[k] / pl[k] for k in ("run_s", "run_cpu_s", "compile_s", "compile_cpu_s")
                },
            }
            if fam == "stable":
                row["hassejax_no_size_event"] = {
                    **hjn,
                    "same_status_and_steps_as_default": int(
                        np.sum(
                            (np.asarray(out_ne["status"]) == status)
                            & (np.asarray(out_ne["steps"]) == np.asarray(out["steps"]))
                        )
                    ),
                }
                row["plain_diffrax_no_event"] = {**pln, "mean_steps": float(np.mean(pout_ne["steps"]))}
                row["ratio_hassejax_no_size_event_over_plain"] = {
                    k: hjn[k] / pln[k] for k in ("run_s", "run_cpu_s", "compile_s", "compile_cpu_s")
                }
            if not args.skip_scipy:
                m = min(args.members, args.scipy_members or args.members)
                fired, t_end, sc = time_scipy(A, cov0, t1, m, f"scipy d={d} {fam}", args.scipy_cap)
                m = sc["members_run"]
                sc["seconds"] = sc["seconds_measured"] * args.members / m
                sc["extrapolated"] = m < args.members
                row["scipy"] = {**sc, "events": int(fired.sum())}
                row["same_outcome"] = int(np.sum(hj_fired[:m] == fired))
                row["speedup"] = sc["seconds"] / hj["run_s"]
            if fam == "blowup":
                ts_cf = closed_form_t_star(A, cov0)
                ok = np.isfinite(ts_cf) & (ts_cf < t1)
                hb = np.asarray(out["t_blowup"])
                row["closed_form_blowups"] = int(ok.sum())
                row["hassejax"]["t_blowup_max_rel_err"] = float(np.max(np.abs(hb[ok] - ts_cf[ok]) / ts_cf[ok]))
                hc = np.asarray(out_cov["t_blowup"])
                row["hassejax_covariance_state"]["t_blowup_max_rel_err"] = float(
                    np.max(np.abs(hc[ok] - ts_cf[ok]) / ts_cf[ok])
                )
                hp = np.asarray(out_proj["t_blowup"])
                row["hassejax_projective_state"]["t_blowup_max_rel_err"] = float(
                    np.max(np.abs(hp[ok] - ts_cf[ok]) / ts_cf[ok])
                )
                okp = ok & p_fired
                pt = np.asarray(pout["t_final"])
                row["plain_diffrax"]["t_event_max_rel_err"] = float(np.max(np.abs(pt[okp] - ts_cf[okp]) / ts_cf[okp]))
                if not args.skip_scipy:
                    okm = ok[:m] & fired
                    row["scipy"]["t_event_max_rel_err"] = float(
                        np.max(np.abs(t_end[okm] - ts_cf[:m][okm]) / ts_cf[:m][okm])
                    )
            rows.append(row)
            ratio = row["ratio_hassejax_over_plain"]
            print(
                json.dumps(
                    {"d": d, "family": fam}
                    | {f"hassejax_{k}": round(hj[k], 3) for k in ("run_s", "run_cpu_s", "compile_s")}
                    | {f"ordered_{k}": round(hjo[k], 3) for k in ("run_s", "run_cpu_s", "compile_s", "chunk_width")}
                    | {f"covariance_state_{k}": round(hjc[k], 3) for k in ("run_s", "run_cpu_s", "compile_s")}
                    | {f"projective_state_{k}": round(hjp[k], 3) for k in ("run_s", "run_cpu_s", "compile_s")}
                    | {f"plain_{k}": round(pl[k], 3) for k in ("run_s", "run_cpu_s", "compile_s")}
                    | {f"ratio_{k}": round(v, 3) for k, v in ratio.items()}
                    | ({"scipy_s": round(row["scipy"]["seconds"], 2)} if "scipy" in row else {})
                    | {"load": hj["load_before_after"] + pl["load_before_after"]}
                ),
                flush=True,
            )

    result = {
        "machine": machine_info(),
        "settings": {
            "rtol": RTOL,
            "atol": ATOL,
            "threshold_factor": THRESHOLD_FACTOR,
            "t1": T1,
            "dtype": "float64",
            "seed": 0,
        },
        "covariance_sweeps": rows,
    }
    if not args.skip_particles:
        result["particles"] = particles(args.repeats)
        print(json.dumps({"particles_speedup": result["particles"]["speedup"]}), flush=True)
    result["table"] = table(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(result["table"])


def _section(rows: list, header: str, row_line, keys: tuple[str, str]) -> list[str]:
    """A Markdown table after an empty line: `header`, its rule, `row_line(r, r[keys[0]], r[keys[1]])` per row."""
    if not rows:
        return []
    return ["", header, "|" + "---|" * header.count(" | ") + "---|"] + [
        row_line(r, r[keys[0]], r[keys[1]]) for r in rows
    ]


def table(result) -> str:
    """Markdown tables: hassejax against plain diffrax (ratios), and against the SciPy loop."""
    lines = [
        "| d | family | members | plain diffrax run (s) | hassejax run (s) | ratio wall / CPU "
        "| hassejax ordered run (s) | ratio wall / CPU | chunks | plain compile (s) | hassejax compile (s) "
        "| ratio wall / CPU | ordered compile ratio wall / CPU | lockstep steps / member-steps (hassejax → ordered) "
        "| load avg before → after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["covariance_sweeps"]:
        h, o, p = r["hassejax"], r["hassejax_cost_ordered"], r["plain_diffrax"]
        q, qo = r["ratio_hassejax_over_plain"], r["ratio_hassejax_cost_ordered_over_plain"]
        cells = [h, o, p]
        load0 = max(c["load_before_after"][0][0] for c in cells)
        load1 = max(c["load_before_after"][1][0] for c in cells)
        chunks = -(-r["members"] // o["chunk_width"])
        lines.append(
            f"| {r['d']} | {r['family']} | {r['members']} | {p['run_s']:.3f} | {h['run_s']:.3f} "
            f"| {q['run_s']:.2f} / {q['run_cpu_s']:.2f} | {o['run_s']:.3f} | {qo['run_s']:.2f} / {qo['run_cpu_s']:.2f} "
            f"| {chunks} × {o['chunk_width']} | {p['compile_s']:.1f} | {h['compile_s']:.1f} "
            f"| {q['compile_s']:.2f} / {q['compile_cpu_s']:.2f} | {qo['compile_s']:.2f} / {qo['compile_cpu_s']:.2f} "
            f"| {h['lockstep_member_steps'] / h['member_steps']:.2f} → {o['lockstep_member_steps'] / o['member_steps']:.2f} "
            f"| {load0:.1f} → {load1:.1f} |"
        )
    lines += [
        "",
        '| d | family | hassejax `state="covariance"` run (s) | ratio to plain wall / CPU | mean steps (factor → covariance) '
        "| compile (s) | compile ratio wall / CPU | same status as the factor state | t* max rel. err |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["covariance_sweeps"]:
        c, h = r["hassejax_covariance_state"], r["hassejax"]
        qc = r["ratio_hassejax_covariance_state_over_plain"]
        err = f"{c['t_blowup_max_rel_err']:.1e}" if "t_blowup_max_rel_err" in c else "–"
        lines.append(
            f"| {r['d']} | {r['family']} | {c['run_s']:.3f} | {qc['run_s']:.2f} / {qc['run_cpu_s']:.2f} "
            f"| {h['mean_steps']:.0f} → {c['mean_steps']:.0f} | {c['compile_s']:.1f} "
            f"| {qc['compile_s']:.2f} / {qc['compile_cpu_s']:.2f} | {c['same_status_as_factor_state']}/{r['members']} | {err} |"
        )
    lines += _section(
        [r for r in result["covariance_sweeps"] if "hassejax_projective_state" in r],
        '| d | family | hassejax `state="projective"` run (s) | ratio to plain wall / CPU | mean steps (factor → projective) '
        "| compile (s) | compile ratio wall / CPU | same status as the factor state | t* max rel. err |",
        lambda r, c, qc: (
            f"| {r['d']} | {r['family']} | {c['run_s']:.3f} | {qc['run_s']:.2f} / {qc['run_cpu_s']:.2f} "
            f"| {r['hassejax']['mean_steps']:.0f} → {c['mean_steps']:.0f} | {c['compile_s']:.1f} "
            f"| {qc['compile_s']:.2f} / {qc['compile_cpu_s']:.2f} | {c['same_status_as_factor_state']}/{r['members']} "
            + (f"| {c['t_blowup_max_rel_err']:.1e} |" if "t_blowup_max_rel_err" in c else "| – |")
        ),
        ("hassejax_projective_state", "ratio_hassejax_projective_state_over_plain"),
    )
    lines += _section(
        [r for r in result["covariance_sweeps"] if "hassejax_no_size_event" in r],
        "| d | family | plain diffrax no event run (s) | hassejax `size_threshold=inf` run (s) | ratio wall / CPU "
        "| plain no event compile (s) | hassejax compile (s) | compile ratio wall / CPU | same status and steps as with the event |",
        lambda r, n, qn: (
            f"| {r['d']} | {r['family']} | {r['plain_diffrax_no_event']['run_s']:.3f} | {n['run_s']:.3f} "
            f"| {qn['run_s']:.2f} / {qn['run_cpu_s']:.2f} "
            f"| {r['plain_diffrax_no_event']['compile_s']:.1f} | {n['compile_s']:.1f} | {qn['compile_s']:.2f} / {qn['compile_cpu_s']:.2f} "
            f"| {n['same_status_and_steps_as_default']}/{r['members']} |"
        ),
        ("hassejax_no_size_event", "ratio_hassejax_no_size_event_over_plain"),
    )
    if any("scipy" in r for r in result["covariance_sweeps"]):
        lines += [
            "",
            "| d | family | members | hassejax run (s) | SciPy RK45 loop (s) | speed-up | same outcome "
            "| t* max rel. err (hassejax / plain / SciPy) | load avg |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
    for r in result["covariance_sweeps"]:
        if "scipy" not in r:
            continue
        sc = r["scipy"]
        scipy_s = f"{sc['seconds']:.2f}" + (
            f" (×{r['members'] / sc['members_run']:.0f} of {sc['members_run']})" if sc["extrapolated"] else ""
        )
        err = "–"
        if r["family"] == "blowup":
            err = (
                f"{r['hassejax']['t_blowup_max_rel_err']:.1e} / {r['plain_diffrax']['t_event_max_rel_err']:.1e} "
                f"/ {sc['t_event_max_rel_err']:.1e}"
            )
        load = max(x[0] for x in r["hassejax"]["load_before_after"] + sc["load_before_after"])
        lines.append(
            f"| {r['d']} | {r['family']} | {r['members']} | {r['hassejax']['run_s']:.3f} | {scipy_s} "
            f"| {r['speedup']:.{0 if r['speedup'] >= 10 else 1}f}× | {r['same_outcome']}/{sc['members_run']} "
            f"| {err} | {load:.1f} |"
        )
    p = result.get("particles")
    if p:
        lines += [
            "",
            "| particles | hassejax `solve_particles` (s) | compile (s) | SciPy RK45 + NumPy RHS (s) | speed-up | max abs diff of final state | load avg |",
            "|---|---|---|---|---|---|---|",
            f"| n = {p['n']}, d = {p['d']}, t1 = {p['t1']} | {p['hassejax']['run_s']:.2f} | {p['hassejax']['compile_s']:.1f} | "
            f"{p['scipy_numpy_rhs']['seconds']:.2f} | {p['speedup']:.1f}× | {p['max_abs_diff_final']:.1e} (of {p['max_abs_final']:.1f}) | {max(max(x) for x in p['load_before_between_after']):.1f} |",
        ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
