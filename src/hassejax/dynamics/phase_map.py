"""The softmax phase-map sweep of spec dynamics.md §7b items 10–11: family, members, grids, closed form.

Softmax attention, `d = 2`, `β = 1`, mean 0, `Σ0 = I/2`, interaction `A(a) = [[a, 1], [0, −1]]`
with `a ∈ [−3, 3]`, and `V = vI` (map (a), closed form of spec §3) or `V = R(φ)`, a rotation
(map (b)). Every grid point is one member of one vmapped diffrax solve
(:func:`~hassejax.dynamics.sweep` over :func:`member`), each with its own status and its
:class:`~hassejax.dynamics.diagnostics.Outcome` from
:func:`~hassejax.dynamics.diagnostics.classify` with the rate test: `λ_max` still shrinking
(`contracts`), growing (`grows`) or settled (`low_rank` = settles on rank one, `bounded` =
settles, full rank) at `t1` (relative rate tolerance :data:`RATE_TOL`, ranks at
`RANK_RTOL · λ_max`), `stalled` for a step budget that ran out on a stationary rank-one `Σ`.

The member functions are module-level objects, so every experiment that sweeps them (the
phase maps, the event-time accuracy) compiles the vmapped program once per process.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Real

from .._xla_flags import DEFAULT_LEVEL, jit_takes_compiler_options
from .attention import Softmax
from .blowup_check import confirm_blowup
from .closed_form import blowup_time_closed_form
from .diagnostics import classify
from .gaussian import solve_gaussian
from .result import Status
from .sweeps import Sweep, sweep

__all__ = [
    "SIGMA0", "V_RANGE", "A_RANGE", "PHI_RANGE", "T1_A", "T1_B", "THRESHOLD", "RTOL", "ATOL", "MAX_STEPS",
    "MAX_STEPS_RETRY", "RATE_TOL", "RANK_RTOL", "CHUNK", "GRID_FULL", "GRID_QUICK",
    "family_A", "rotation", "grid", "column_major", "to_image", "closed_form_map",
    "solve_member", "member", "member_retry", "CONFIRM_RTOL", "CONFIRM_ATOL", "CONFIRM_MAX_STEPS", "CONFIRM_CHUNK",
    "confirm_member", "run_sweep", "sweep_with_retry", "batch_scalar_v", "batch_rotation",
]  # fmt: skip

SIGMA0 = 0.5 * np.eye(2)
"""Initial covariance `Σ0 = I/2`."""
V_RANGE, A_RANGE, PHI_RANGE = (-2.0, 2.0), (-3.0, 3.0), (0.0, np.pi)
"""Ranges of `v` (map (a)), `a` (both maps) and `φ` (map (b))."""
T1_A, T1_B = 20.0, 30.0
"""Horizons of maps (a) and (b)."""
THRESHOLD = 1e6 * float(np.trace(SIGMA0))
"""Size event on `tr Σ` (the decade test needs `>= 1e3 · tr Σ0`)."""
RTOL, ATOL = 1e-8, 1e-10
MAX_STEPS, MAX_STEPS_RETRY = 800, 2400
"""Every member first gets `MAX_STEPS`; those that ran out are solved again with `MAX_STEPS_RETRY`
(under vmap a chunk runs until its slowest member stops, and the slow, stiff members of map (b)
sit in every column)."""
RATE_TOL = 1e-3
"""Relative rate of `λ_max` below which a member counts as settled."""
RANK_RTOL = 1e-6
"""Ranks count eigenvalues above `RANK_RTOL · λ_max`."""
CHUNK = 2048
GRID_FULL, GRID_QUICK = 201, 41
"""Grid sizes: 201 × 201 = 40401 members per map (v = 0 and a = 0 on the grid)."""


def family_A(a: Real[ArrayLike, "*batch"]) -> Float[Array, "2 2 *batch"]:
    """`A = [[a, 1], [0, −1]]` (traceable; the matrix axes come first for an array `a`).

    **Example:**

    ```python
    >>> from hassejax.dynamics.phase_map import family_A
    >>> family_A(0.5).tolist()
    [[0.5, 1.0], [0.0, -1.0]]

    ```
    """
    a = jnp.asarray(a)
    one, zero = jnp.ones_like(a), jnp.zeros_like(a)
    return jnp.stack([jnp.stack([a, one]), jnp.stack([zero, -one])])


def rotation(phi: Real[ArrayLike, "*batch"]) -> Float[Array, "2 2 *batch"]:
    """`R(φ) = [[cos φ, −sin φ], [sin φ, cos φ]]` (traceable; matrix axes first for an array `φ`).

    **Example:**

    ```python
    >>> from hassejax.dynamics.phase_map import rotation
    >>> rotation(0.0).tolist()
    [[1.0, -0.0], [0.0, 1.0]]

    ```
    """
    c, s = jnp.cos(phi), jnp.sin(phi)
    return jnp.stack([jnp.stack([c, -s]), jnp.stack([s, c])])


def _matrices_last(m) -> np.ndarray:
    return np.moveaxis(np.asarray(m), (0, 1), (-2, -1))


def grid(n: int, x_range: tuple[float, float], a_range: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """`(X, A)` of an `n × n` grid, `X` varying along axis 1 (image columns), `a` along axis 0 (rows).

    **Example:**

    ```python
    >>> from hassejax.dynamics.phase_map import grid
    >>> x, a = grid(2, (0.0, 1.0), (-1.0, 1.0))
    >>> x.tolist(), a.tolist()
    ([[0.0, 1.0], [0.0, 1.0]], [[-1.0, -1.0], [1.0, 1.0]])

    ```
    """
    return np.meshgrid(np.linspace(*x_range, n), np.linspace(*a_range, n), indexing="xy")


def column_major(x: ArrayLike) -> np.ndarray:
    """Flatten an image column by column (x-major), the order in which members are swept.

    Under ``vmap`` a chunk runs until its slowest member stops; sweeping column by column keeps
    the slow (stiff) `φ` columns of map (b) together in a few chunks.

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.phase_map import column_major, to_image
    >>> column_major(np.array([[1, 2], [3, 4]])).tolist(), to_image(np.array([1, 3, 2, 4]), 2).tolist()
    ([1, 3, 2, 4], [[1, 2], [3, 4]])

    ```
    """
    return np.asarray(x).T.ravel()


def to_image(x: ArrayLike, n: int) -> np.ndarray:
    """Inverse of :func:`column_major` for an `n × n` image (example there)."""
    return np.asarray(x).reshape(n, n).T


def closed_form_map(v: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`(t*, λ_max(v(A + Aᵀ)))` of the closed form (spec §3) for `V = vI`, `A = A(a)`, `Σ0 = I/2`.

    **Example:** `a = 0`, `v = 1`: `λ_max(A + Aᵀ) = √2 − 1`, `t* = 2/λ_max`:

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.phase_map import closed_form_map
    >>> t_star, lam = closed_form_map(np.array([1.0]), np.array([0.0]))
    >>> round(float(lam[0]), 6), round(float(t_star[0] * lam[0]), 6)
    (0.414214, 2.0)

    ```
    """
    A = _matrices_last(family_A(jnp.asarray(a)))
    t_star = np.asarray(blowup_time_closed_form(np.broadcast_to(SIGMA0, A.shape), A, v))
    lam = np.linalg.eigvalsh(v[..., None, None] * (A + np.swapaxes(A, -1, -2)))[..., -1]
    return t_star, lam


def solve_member(V, A, t1, *, rtol: float = RTOL, atol: float = ATOL, threshold: float = THRESHOLD,
                 max_steps: int = MAX_STEPS) -> dict:  # fmt: skip
    """One member: the Gaussian softmax solve and its outcome (traceable, vmappable).

    Returns ``status``, ``t_blowup``, ``t_final``, ``decade_ratio``, ``steps`` of the solve and
    ``outcome`` (:class:`~hassejax.dynamics.diagnostics.Outcome` code of
    :func:`~hassejax.dynamics.diagnostics.classify` with the rate test, relative ranks at
    `RANK_RTOL`, no collapse threshold).
    """
    model = Softmax(V=V, A=A)
    sol = solve_gaussian(model, jnp.zeros(2), jnp.asarray(SIGMA0), t1=t1, rtol=rtol, atol=atol, max_steps=max_steps,
                         size_threshold=threshold)  # fmt: skip
    diag = classify(
        sol, model=model, rate_tol=RATE_TOL, rank_rule="relative", rel_threshold=RANK_RTOL, collapse_threshold=0.0
    )
    return {
        "status": sol.status,
        "outcome": diag.outcome,
        "t_blowup": sol.t_blowup,
        "t_final": sol.t_final,
        "decade_ratio": sol.decade_ratio,
        "steps": sol.stats.num_steps,
    }


def member(p: dict) -> dict:
    """One member of either map: `p = {"V": (2, 2), "a": (), "t1": ()}`, `A = A(a)` (:func:`solve_member`)."""
    return solve_member(p["V"], family_A(p["a"]), p["t1"])


def member_retry(p: dict) -> dict:
    """:func:`member` with the larger step budget `MAX_STEPS_RETRY`."""
    return solve_member(p["V"], family_A(p["a"]), p["t1"], max_steps=MAX_STEPS_RETRY)


CONFIRM_RTOL, CONFIRM_ATOL, CONFIRM_MAX_STEPS = 1e-10, 1e-12, 20_000
"""Solver settings of :func:`confirm_member` (tighter than the map's: the last gaps are ~1e-12 wide)."""
CONFIRM_CHUNK = 64
"""Members per compiled chunk of the confirmation sweeps (a few dozen to a few hundred members)."""


def confirm_member(p: dict) -> dict:
    """Multi-level blow-up check of one softmax member (:func:`~hassejax.dynamics.blowup_check.confirm_blowup`).

    `p = {"V": (2, 2), "A": (2, 2), "cov0": (2, 2), "t1": ()}`, mean 0; levels
    :data:`~hassejax.dynamics.blowup_check.LEVELS` × `tr Σ0`. Returns ``times`` `(L,)` and
    ``blow_up`` `()` (traceable, vmappable; sweep it with :func:`run_sweep`).
    """
    return confirm_blowup(Softmax(V=p["V"], A=p["A"]), jnp.zeros(2), p["cov0"], t1=p["t1"], rtol=CONFIRM_RTOL,
                          atol=CONFIRM_ATOL, max_steps=CONFIRM_MAX_STEPS)  # fmt: skip


_SWEEP_OPTIONS = DEFAULT_LEVEL if jit_takes_compiler_options() else None


def run_sweep(member_fn, batch: dict, desc: str, chunk_size: int = CHUNK, held: bool = False) -> dict:
    """:func:`~hassejax.dynamics.sweep` of `member_fn` over `batch`, as NumPy arrays (sharded over all devices).

    The chunk programs compile at XLA's default optimisation level (3) even where ``XLA_FLAGS``
    asks for level 0 (``reproduce.py --quick``, the tests): a phase map's thousands of members run
    far longer than their program compiles (phase_maps ``--quick`` alone: 72 s with them at level 0, 46 s
    at 3, the JSON identical). With ``held=True`` the sweep goes through one
    :class:`~hassejax.dynamics.sweeps.Sweep` kept per `(member_fn, chunk_size)` for the process, so later calls of
    the same member function and width are neither traced nor compiled again (``sweep`` traces at every call); the
    results are the same.
    """
    batch = {k: jnp.asarray(v) for k, v in batch.items()}
    shard = len(jax.devices()) > 1
    if held:
        key = (member_fn, chunk_size, shard)
        if key not in _HELD:
            _HELD[key] = Sweep(member_fn, chunk_size=chunk_size, shard=shard, compiler_options=_SWEEP_OPTIONS)
        out = _HELD[key](batch, progress=True, desc=desc)
    else:
        out = sweep(member_fn, batch, chunk_size=chunk_size, progress=True, shard=shard, desc=desc,
                    compiler_options=_SWEEP_OPTIONS)  # fmt: skip
    return {k: np.array(v) for k, v in out.items()}


_HELD: dict = {}
"""The held sweeps of :func:`run_sweep` (``held=True``), by `(member_fn, chunk_size, shard)`."""


def sweep_with_retry(batch: dict, desc: str) -> dict:
    """:func:`run_sweep` of :func:`member`, then :func:`member_retry` on the members that ran out of steps.

    Adds ``retried`` (Boolean per member).
    """
    out = run_sweep(member, batch, desc)
    again = np.nonzero(out["status"] == Status.max_steps_reached)[0]
    out["retried"] = np.zeros(out["status"].shape, bool)
    if again.size:
        # chunks no wider than the retried members need (a power of two from 64): a chunk steps until its slowest
        # member stops (--quick: 191 members padded to CHUNK = 2048 ran the retry's step budget 2048 wide); the
        # results do not depend on the width
        width = min(CHUNK, max(64, 1 << (int(again.size) - 1).bit_length()))
        redo = run_sweep(member_retry, {k: v[again] for k, v in batch.items()}, desc + " (retry)", chunk_size=width)
        for k, v in redo.items():
            out[k][again] = v
        out["retried"][again] = True
    return out


def batch_scalar_v(v: np.ndarray, a: np.ndarray, t1: float = T1_A) -> dict:
    """Members of map (a): `V = vI` (the grid flattened by :func:`column_major`)."""
    v, a = column_major(v), column_major(a)
    return {"V": v[:, None, None] * np.eye(2), "a": a, "t1": np.full(v.shape, t1)}


def batch_rotation(phi: np.ndarray, a: np.ndarray, t1: float = T1_B) -> dict:
    """Members of map (b): `V = R(φ)` (the grid flattened by :func:`column_major`)."""
    phi, a = column_major(phi), column_major(a)
    return {"V": _matrices_last(rotation(jnp.asarray(phi))), "a": a, "t1": np.full(phi.shape, t1)}
