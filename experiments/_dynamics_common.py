"""Shared helpers of the paper's dynamics figures 1–7 (spec dynamics.md §7a).

- **Parameter sets** of the spec (the authors' code, vcastin/2025-transformers-PDEs, with the
  paper's scalings: softmax, L2 and multi-head use `Q/√d` (per head `Q_h/√k`, `k = 1`: scale
  1), Sinkhorn the unscaled `A = KᵀQ` with `ε = 1`).
- **Initial grid** of trace-one covariances `Σ0 = [[(1 + u)/2, w/2], [w/2, (1 − u)/2]]`,
  `u² + w² < 1` (:func:`trace_one_grid`).
- **Cone and disk coordinates** `Σ = [[a, c], [c, b]] ↦ (a − b, 2c, a + b)` and
  `(a − b, 2c)/(a + b)`, and their drawing helpers.
- **One vmapped solve per attention kind and size** (:func:`solve`): every batch goes through
  :func:`hassejax.dynamics.sweeps.sweep` over :func:`hassejax.dynamics.solve_gaussian`,
  padded to a fixed number of members (`capacity`, by repeating the last member), so that
  each (kind, d) compiles once per process whatever the figure: figures 1–6 share the
  2×2 programs. A one-row `Q`, `K` is padded with a zero row to `K_ROWS` rows (exact:
  `KᵀK` and `KᵀQ` are unchanged). Dimensions are not embedded in a larger `d` (tried for
  figure 7: one program for d = 3, 4, 5, but a 5×5 step costs 4–20× a 3×3 or 2×2 one).
- **Events** meaning the same as the authors' stops (their projected explicit Euler stopped
  when `‖Σ'‖_F < tol`, "converged", or `tr Σ > 1e3` / `1e4`, "diverged"): the library's
  steady-state event `‖Σ'‖_F = tol` (status ``converged``) and size event `tr Σ = threshold`
  (status ``blow_up`` or ``diverge`` by the decade test of :mod:`hassejax.dynamics`).
"""

from __future__ import annotations

import functools
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib import colormaps  # noqa: E402

from hassejax.dynamics import AttentionParams, MultiHeadParams, Status, solve_gaussian  # noqa: E402
from hassejax.dynamics.sweeps import sweep  # noqa: E402

# ----------------------------------------------------------------------------- solver settings
K_ROWS = 2
"""Rows of the padded `Q`, `K` (L2 kernel)."""
HEADS = 2
"""Heads of the multi-head panels."""
RTOL, ATOL = 1e-10, 1e-12
MAX_STEPS = 100_000
N_SAVE = 97
"""Saved points per trajectory (a static shape: one compile for every figure)."""
CAPACITY_FULL = 1184
CAPACITY_QUICK = 128
NO_STOP_TOL = 1e-300
"""A steady-state tolerance that never fires (the long-horizon solves of the limit rank)."""

EVENTS_NOTE = (
    "The authors integrated with projected explicit Euler and stopped at ‖Σ'‖_F < tol ('converged') or "
    "tr Σ > threshold ('diverged'). Here: diffrax Tsit5 (rtol 1e-10, atol 1e-12, float64) with the same two "
    "stops as events: 'converged: ‖Σ'‖_F < tol' is the steady-state event (status converged); 'diverged: "
    "tr Σ > threshold' is the size event, classified blow_up (finite-time, 1/λ falls linearly to zero) or "
    "diverge (exponential growth) by the library's decade test."
)

# ----------------------------------------------------------------------------- parameter sets (spec §7a)
SQRT2 = np.sqrt(2.0)

FIG1_Q = np.array([[0.4580549482, 0.3083496070], [0.2314870450, 0.2774245518]])
FIG1_K = -FIG1_Q
FIG1_V = np.array([[2.6693776103, -0.6915301722], [-0.6915301722, 2.6874461223]])

FIG2_Q_ROW = np.array([0.4063236467, 0.9137292236])
FIG2_Q_PERP = np.array([-FIG2_Q_ROW[1], FIG2_Q_ROW[0]])

FIG4_Q = np.array([[0.6764132658, 1.5210991859], [-0.5118762450, 1.1501946354]])
FIG4_K = np.array([[-0.5907168066, -0.7687652516], [-0.3350091661, 0.0929994435]])
FIG4_V = np.array([[-0.3488944510, 0.9837034334], [0.5809228307, 0.0702844409]])

FIG5_Q = np.array([[-0.0967841583, 0.4222016605], [-0.2254615634, -0.6379430932]])
FIG5_K = np.array([[-0.0162863037, 1.0442167784], [-1.0848803286, -2.2059248272]])

FIG6_V = np.array([[1.831753006, -0.3768878439], [0.3481123416, -0.1162815566]])


def softmax_params(V, Q, K):
    """Softmax (and Sinkhorn-shaped) parameters with the paper's scaling `A = KᵀQ/√d`."""
    d = np.shape(V)[-1]
    return {"V": np.asarray(V, float), "A": np.asarray(K).T @ np.asarray(Q) / np.sqrt(d)}


def l2_params(V, Q, K):
    """L2 parameters as in the authors' code: `Q/√d` (so `A = KᵀQ/√d`), `K` unscaled, `c = 1`."""
    d = np.shape(V)[-1]
    return {"V": np.asarray(V, float), "Q": np.asarray(Q, float) / np.sqrt(d), "K": np.asarray(K, float)}


def sinkhorn_params(V, Q, K):
    """Sinkhorn parameters as in the authors' code: unscaled `A = KᵀQ`, `ε = 1`."""
    return {"V": np.asarray(V, float), "A": np.asarray(K).T @ np.asarray(Q)}


def multihead_params(V, Q, K):
    """Multi-head softmax as in the authors' ``rhs_multihead`` with `H = d = 2` (`k = 1`, scale 1).

    Head `h` takes row `h` of `Q` and `K`, `A_h = K_hᵀQ_h`, and `C_h = e_h (row h of V)`.
    """
    V, Q, K = (np.asarray(x, float) for x in (V, Q, K))
    d = V.shape[-1]
    eye = np.eye(d)
    A = np.stack([np.outer(K[h], Q[h]) for h in range(HEADS)])
    C = np.stack([np.outer(eye[h], V[h]) for h in range(HEADS)])
    return {"C": C, "A": A}


# ----------------------------------------------------------------------------- grids and coordinates
def trace_one_grid(n_u: int, n_w: int, lo: float, hi: float) -> np.ndarray:
    """The authors' ``init_grid``: `u, w` on an `n_u × n_w` grid of `[lo, hi]²`, kept where `u² + w² < 1`.

    Returns `(N, 2, 2)` covariances `[[(1 + u)/2, w/2], [w/2, (1 − u)/2]]` (trace 1, positive
    definite), in the authors' order (u major, w minor).
    """
    u, w = np.meshgrid(np.linspace(lo, hi, n_u), np.linspace(lo, hi, n_w), indexing="ij")
    keep = u**2 + w**2 < 1.0
    u, w = u[keep], w[keep]
    return np.stack([np.stack([(1 + u) / 2, w / 2], -1), np.stack([w / 2, (1 - u) / 2], -1)], -2)


def cone_coords(cov: np.ndarray) -> np.ndarray:
    """`Σ = [[a, c], [c, b]] ↦ (a − b, 2c, a + b)` over the last two axes; the PSD cone is `z ≥ √(x² + y²)`."""
    cov = np.asarray(cov)
    a, b, c = cov[..., 0, 0], cov[..., 1, 1], cov[..., 0, 1]
    return np.stack([a - b, 2 * c, a + b], -1)


def disk_coords(cov: np.ndarray) -> np.ndarray:
    """`(a − b, 2c)/(a + b)` of `Σ/tr Σ`: the unit disk, its boundary the rank-one matrices."""
    x = cone_coords(cov)
    return x[..., :2] / x[..., 2:3]


def rank_one_direction_angle(cov: np.ndarray) -> np.ndarray:
    """Angle in degrees, in `(−90°, 90°]`, of the top eigenvector of each `2 × 2` `Σ`."""
    x = cone_coords(cov)
    return np.degrees(0.5 * np.arctan2(x[..., 1], x[..., 0]))


def isotropic_angles(A: np.ndarray) -> np.ndarray:
    """Angles (degrees, `(−90°, 90°]`) of the directions `v = (cos θ, sin θ)` with `vᵀAv = 0` (2×2 `A`)."""
    S = 0.5 * (A + A.T)
    roots = np.roots([S[1, 1], 2 * S[0, 1], S[0, 0]])
    roots = roots[np.isreal(roots)].real
    return np.sort(np.degrees(np.arctan(roots)))


# ----------------------------------------------------------------------------- the vmapped solve
def embed(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Zero-pad the trailing axes of `x` to `shape` (leading axes kept)."""
    x = np.asarray(x, float)
    lead = x.shape[: x.ndim - len(shape)]
    out = np.zeros(lead + tuple(shape))
    out[(...,) + tuple(slice(0, s) for s in x.shape[x.ndim - len(shape) :])] = x
    return out


KINDS = ("softmax", "l2", "sinkhorn", "multihead")


def param_shapes(kind: str, d: int) -> dict[str, tuple[int, ...]]:
    """Shapes of the parameter arrays of `kind` in dimension `d` (`Q`, `K` padded to `K_ROWS` rows)."""
    if kind in ("softmax", "sinkhorn"):
        return {"V": (d, d), "A": (d, d)}
    if kind == "l2":
        return {"V": (d, d), "Q": (K_ROWS, d), "K": (K_ROWS, d)}
    if kind == "multihead":
        return {"C": (HEADS, d, d), "A": (HEADS, d, d)}
    raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")


def _build(kind: str, p: dict):
    if kind == "multihead":
        return MultiHeadParams([AttentionParams(V=p["C"][h], A=p["A"][h]) for h in range(HEADS)], "softmax")
    if kind == "l2":
        return AttentionParams(V=p["V"], Q=p["Q"], K=p["K"])
    return AttentionParams(V=p["V"], A=p["A"])


def _member(kind: str, m: dict):
    sol = solve_gaussian(
        kind,
        _build(kind, m["p"]),
        jnp.zeros(m["cov0"].shape[-1]),
        m["cov0"],
        t1=m["t1"],
        ts=m["ts"],
        rtol=RTOL,
        atol=ATOL,
        max_steps=MAX_STEPS,
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


# One function object per kind: sweep caches its compiled program on the function (and jit on
# the shapes), and every call pads to the same shapes, so each (kind, size) compiles once.
MEMBERS = {kind: functools.partial(_member, kind) for kind in KINDS}


def _broadcast(x, n: int, trailing: int) -> np.ndarray:
    x = np.asarray(x, float)
    if x.ndim == trailing:
        x = np.broadcast_to(x, (n,) + x.shape)
    return x


class Timer:
    """Accumulated wall and process-CPU seconds of the solves (CPU time: the figure without other load)."""

    def __init__(self):
        self.wall = 0.0
        self.cpu = 0.0
        self.solves = 0

    def as_dict(self) -> dict:
        return {"solves": self.solves, "wall_s": round(self.wall, 2), "cpu_s": round(self.cpu, 2)}


TIMER = Timer()


def solve(
    kind: str,
    params: dict,
    cov0: np.ndarray,
    *,
    t1: float | np.ndarray,
    threshold: float | np.ndarray,
    tol: float | np.ndarray,
    capacity: int,
    ts: np.ndarray | None = None,
) -> dict:
    """Solve the covariance ODE of `kind` for every member: one vmapped solve per `capacity` members.

    **Arguments:**

    - `kind`: ``softmax``, ``l2``, ``sinkhorn`` or ``multihead`` (two softmax heads).
    - `params`: dict of arrays (see the ``*_params`` builders), unbatched (shared by every
      member) or with a leading member axis.
    - `cov0`: `(N, d, d)` initial covariances.
    - `t1`: horizon; `threshold`: the `tr Σ` stop; `tol`: the `‖Σ'‖_F` stop (scalars, or one
      value per member).
    - `capacity`: members per compiled program (the batch is padded to a multiple of it by
      repeating its last member; padding stripped).
    - `ts`: `(N, T)` save times per member (`T = N_SAVE`; default `linspace(0, t1, T)`).

    **Returns:** NumPy arrays, member axis first, covariances cut back to `d × d`:
    ``status, t_final, t_blowup, decade_ratio, growth_exponent, ts, valid, cov, cov_final,
    num_steps``.
    """
    cov0 = np.asarray(cov0, float)
    n, d = cov0.shape[0], cov0.shape[-1]
    shapes = param_shapes(kind, d)
    batch = {
        "p": {k: embed(_broadcast(v, n, len(shapes[k])), shapes[k]) for k, v in params.items()},
        "cov0": cov0,
        "ts": np.linspace(0.0, np.broadcast_to(np.asarray(t1, float), (n,)), N_SAVE, axis=1) if ts is None else np.asarray(ts, float),
        "t1": np.broadcast_to(np.asarray(t1, float), (n,)),
        "threshold": np.broadcast_to(np.asarray(threshold, float), (n,)),
        "tol": np.broadcast_to(np.asarray(tol, float), (n,)),
    }
    if set(batch["p"]) != set(shapes):
        raise ValueError(f"params for {kind!r} must have keys {sorted(shapes)}; got {sorted(batch['p'])}")
    total = -(-n // capacity) * capacity
    batch = jax.tree_util.tree_map(lambda x: np.concatenate([x, np.repeat(x[-1:], total - n, axis=0)]), batch)
    t0w, t0c = time.perf_counter(), time.process_time()
    # Shard only over several devices: on one device the sharding annotations only add compile time.
    out = sweep(MEMBERS[kind], batch, chunk_size=capacity, progress=False, shard=len(jax.devices()) > 1, desc=kind)
    out = jax.tree_util.tree_map(lambda x: np.asarray(x)[:n], out)
    TIMER.wall += time.perf_counter() - t0w
    TIMER.cpu += time.process_time() - t0c
    TIMER.solves += 1
    return out


def _template() -> np.ndarray:
    """Save-time fractions of `[0, t_stop]`: log-spaced at the start (1/t convergence), near the
    end (blow-up), and uniform; `N_SAVE` points, sorted, the last just below 1."""
    k = (N_SAVE - 1) // 3
    s = np.concatenate([[0.0], np.geomspace(1e-6, 0.5, k), 1.0 - np.geomspace(0.5, 1e-7, k), np.linspace(0, 1, k)[1:-1]])
    s = np.unique(np.clip(s, 0.0, 1.0 - 1e-9))
    return np.concatenate([s, np.full(N_SAVE - s.size, s[-1])])


SAVE_FRACTIONS = _template()


def log_times(t1: float, n: int) -> np.ndarray:
    """`(n, N_SAVE)` save times `0, geomspace(1e-2, t1)` for every member (long horizons)."""
    return np.broadcast_to(np.concatenate([[0.0], np.geomspace(1e-2, t1, N_SAVE - 1)]), (n, N_SAVE))


def solve_for_plot(kind: str, params: dict, cov0: np.ndarray, **kw) -> dict:
    """:func:`solve` twice with one compiled program: first for each member's stop time, then
    with save times placed in `[0, t_stop]` by :data:`SAVE_FRACTIONS` (where the trajectory moves).

    Step sizes do not depend on the save times, so both solves stop at the same time and with
    the same status (checked: ``replay_max_rel_dt``).
    """
    first = solve(kind, params, cov0, **kw)
    ts = first["t_final"][:, None] * SAVE_FRACTIONS[None, :]
    second = solve(kind, params, cov0, ts=ts, **kw)
    if not np.array_equal(first["status"], second["status"]):
        raise RuntimeError(f"{kind}: the replay with dense save times changed a status")
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


# ----------------------------------------------------------------------------- drawing
CMAP = colormaps["viridis"]


def colors_from(values: np.ndarray):
    """Viridis colours of `values` scaled to their range, and the matching ScalarMappable."""
    values = np.asarray(values, float)
    norm = plt.Normalize(float(values.min()), float(values.max()) if values.max() > values.min() else float(values.min()) + 1.0)
    sm = plt.cm.ScalarMappable(norm=norm, cmap=CMAP)
    return [CMAP(norm(v)) for v in values], sm


def draw_cone(ax, trajs: list[np.ndarray], colors, *, z_max: float | None = None, end_markers: bool = True) -> float:
    """Trajectories in cone coordinates `(a − b, 2c, a + b)` on a 3-D axis, with the PSD cone.

    Returns the height of the drawn cone.
    """
    pts = [cone_coords(t) for t in trajs]
    if z_max is None:
        z_max = 1.05 * max(float(np.max(p[:, 2])) for p in pts)
    for p, col in zip(pts, colors):
        ax.plot(p[:, 0], p[:, 1], p[:, 2], color=col, lw=0.8, alpha=0.7)
        if end_markers:
            ax.scatter(p[-1, 0], p[-1, 1], p[-1, 2], color=col, s=6, depthshade=False)
    th, r = np.meshgrid(np.linspace(0, 2 * np.pi, 60), np.linspace(0, z_max, 12))
    ax.plot_surface(r * np.cos(th), r * np.sin(th), r, color="0.5", alpha=0.08, linewidth=0)
    th1 = np.linspace(0, 2 * np.pi, 120)
    ax.plot(z_max * np.cos(th1), z_max * np.sin(th1), z_max + 0 * th1, color="0.4", lw=0.6)
    ax.set_xlabel("Σ₁₁ − Σ₂₂", labelpad=0)
    ax.set_ylabel("2 Σ₁₂", labelpad=0)
    ax.set_zlabel("tr Σ", labelpad=4)
    ax.tick_params(labelsize=7, pad=0)
    return z_max


def rank_one_ray(angle_deg: float, z_max: float) -> np.ndarray:
    """Cone coordinates of `s vvᵀ`, `v = (cos θ, sin θ)`, `s ∈ [0, z_max]`: `(cos 2θ, sin 2θ, 1)·s`."""
    th = np.radians(angle_deg)
    s = np.linspace(0.0, z_max, 50)
    return np.stack([np.cos(2 * th) * s, np.sin(2 * th) * s, s], -1)


def draw_ray(ax, angle_deg: float, z_max: float, color, label: str, *, lw: float = 2.4, text: str | None = None) -> None:
    """The rank-one ray `s vvᵀ` at `angle_deg` (see :func:`rank_one_ray`) on a 3-D cone axis, on top
    of everything drawn before it (turns off the axis' depth sort: later artists are drawn
    above earlier ones), from the apex to `z_max`, with `text` (default: the angle) at its end."""
    ax.computed_zorder = False
    line = rank_one_ray(angle_deg, z_max)
    ax.plot(line[:, 0], line[:, 1], line[:, 2], color="w", lw=lw + 2.0, zorder=10, solid_capstyle="round")
    ax.plot(line[:, 0], line[:, 1], line[:, 2], color=color, lw=lw, zorder=11, label=label, solid_capstyle="round")
    end = line[-1] * 1.06
    ax.text(end[0], end[1], end[2], f"{angle_deg:.2f}°" if text is None else text, color=color, fontsize=9,
            fontweight="bold", ha="center", va="bottom", zorder=12)  # fmt: skip


def draw_disk(ax, trajs: list[np.ndarray], colors, *, end_markers: bool = True) -> None:
    """Trajectories of `Σ/tr Σ` in disk coordinates `(a − b, 2c)/(a + b)`, with the unit circle (rank one)."""
    for t, col in zip(trajs, colors):
        p = disk_coords(t)
        ax.plot(p[:, 0], p[:, 1], color=col, lw=0.7, alpha=0.7)
        if end_markers:
            ax.scatter(p[-1, 0], p[-1, 1], color=col, s=6, zorder=3)
    th = np.linspace(0, 2 * np.pi, 200)
    ax.plot(np.cos(th), np.sin(th), color="k", lw=0.8, alpha=0.6)
    ax.set_aspect("equal")
    ax.set_xlim(-1.08, 1.08)
    ax.set_ylim(-1.08, 1.08)
    ax.set_xlabel("(Σ₁₁ − Σ₂₂) / tr Σ")
    ax.set_ylabel("2 Σ₁₂ / tr Σ")


def loglog_slope(ts: np.ndarray, y: np.ndarray, valid: np.ndarray, last_decades: float = 1.0) -> np.ndarray:
    """Per member, the least-squares slope of `log y` against `log t` over the saved points in the
    last `last_decades` decades before each member's last valid time (`-1` for a `1/t` law)."""
    out = np.empty(ts.shape[0])
    for i, (t, v, yy) in enumerate(zip(ts, valid, y)):
        t_end = t[v].max()
        sel = v & (t >= t_end * 10.0 ** (-last_decades)) & (t > 0) & (yy > 0)
        out[i] = np.polyfit(np.log(t[sel]), np.log(yy[sel]), 1)[0]
    return out


def minmax(x) -> list[float]:
    """`[min, max]` of an array as floats."""
    x = np.asarray(x, float)
    return [float(np.min(x)), float(np.max(x))]


def new_figure(nrows: int, ncols: int, size: tuple[float, float], projections: list[list[str | None]]):
    """A constrained-layout figure with a grid of axes, 3-D where `projections` says ``"3d"``."""
    fig = plt.figure(figsize=size, layout="constrained")
    axes = np.empty((nrows, ncols), dtype=object)
    for r in range(nrows):
        for c in range(ncols):
            proj = projections[r][c]
            if proj == "skip":
                axes[r, c] = None
                continue
            axes[r, c] = fig.add_subplot(nrows, ncols, r * ncols + c + 1, projection=proj)
    return fig, axes


def value_counts(x) -> dict[str, int]:
    """Counts of each integer value of `x` (e.g. ranks), keyed by the value as a string."""
    vals, counts = np.unique(np.asarray(x).astype(int), return_counts=True)
    return {str(int(v)): int(c) for v, c in zip(vals, counts)}
