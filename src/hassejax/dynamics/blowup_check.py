"""Finite-time blow-up confirmed from the times of successive size levels (derived).

The solvers' decade test (:mod:`hassejax.dynamics._solve`, spec dynamics.md §4) decides
blow-up versus divergence at ONE size event, from `ρ = (λ/λ')/(t_e − t_a)`. Near a
log-periodic blow-up, where `λ_max(Σ)·(t* − t)` oscillates between two positive values (the
counterexample of spec §3: between ~6 and ~20), the local rate `λ'` at the event can be far
from `λ/(t* − t)`; the decade test then reports `diverge` (ρ up to ~1.9 in the phase maps of the experiments) for a
member that does blow up in finite time.

This module re-checks such a member with several levels instead: it solves on to the first
times `t_0 < t_1 < … < t_{L−1}` at which `tr Σ` reaches `levels × tr Σ0` (levels growing by
one fixed factor, default :data:`LEVELS` = `1e4, 1e6, …, 1e12`, i.e. two decades a step) and
compares the gaps `g_k = t_{k+1} − t_k`:

- finite-time blow-up `tr Σ ≈ c/(t* − t)`: `g_{k+1}/g_k ≈ 1/100` per two decades, and for a
  log-periodic `c(t)` with `c_max/c_min = m` at most about `m/100`;
- exponential growth `tr Σ ∝ e^{rt}`: every gap is `ln(100)/r`, ratio 1; polynomial growth:
  ratio above 1.

The rule (:func:`geometric_blowup`): finite-time blow-up iff every level is reached and the
last :data:`N_RATIOS` = 2 gap ratios (the last three gaps, `1e6 → 1e8 → 1e10 → 1e12` for the
default levels) are each below :data:`MAX_GAP_RATIO` = 0.2 (a margin of ×20 over 1/100, ×5
under exponential growth). The first gap is left out: some blow-ups reach their asymptotic
regime only above `1e6 · tr Σ0` (ratios 1.4, 0.001, 0.01 were measured in the phase maps). A
level not reached (horizon, step budget, non-finite state) gives no confirmation.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float

from .gaussian import solve_gaussian
from .result import Status

__all__ = ["LEVELS", "MAX_GAP_RATIO", "N_RATIOS", "geometric_blowup", "crossing_times", "confirm_blowup"]

LEVELS = 10.0 ** np.arange(4.0, 13.0, 2.0)
"""Size levels `tr Σ / tr Σ0` of the check: `1e4, 1e6, 1e8, 1e10, 1e12` (two decades a step)."""
MAX_GAP_RATIO = 0.2
"""A gap ratio `g_{k+1}/g_k` below this (per level step) counts as shrinking geometrically."""
N_RATIOS = 2
"""How many of the last gap ratios must be below :data:`MAX_GAP_RATIO`."""


def geometric_blowup(
    times: Float[ArrayLike, "*batch L"], *, max_ratio: float = MAX_GAP_RATIO, n_ratios: int = N_RATIOS
) -> Bool[Array, "*batch"]:
    """Finite-time blow-up from the crossing times of size levels growing by one fixed factor.

    **Arguments:**

    - `times`: `(*batch, L)` first times at which the size reaches each level (levels in
      increasing order, one fixed factor apart, e.g. :data:`LEVELS`); ``inf`` or NaN where a
      level was not reached. Needs `L >= n_ratios + 2`.
    - `max_ratio`: the largest gap ratio `g_{k+1}/g_k` (`g_k = t_{k+1} − t_k`) that counts
      as shrinking (default :data:`MAX_GAP_RATIO`).
    - `n_ratios`: how many of the last gap ratios must be below `max_ratio` (default
      :data:`N_RATIOS`).

    **Returns:** `(*batch,)` Boolean: every time finite and non-decreasing, and each of the
    last `n_ratios` ratios `< max_ratio` (a zero gap after a zero gap, two levels within the
    time resolution, counts as ratio 0). Traceable (runs under ``jit``/``vmap``).

    **Raises:** :class:`~hassejax.errors.ParameterError` when `L < n_ratios + 2`.

    Source: (derived; module docstring).

    **Example:** `c/(t* − t)` crossings (ratio 1/100) against exponential ones (ratio 1):

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.blowup_check import geometric_blowup
    >>> levels = 10.0 ** np.arange(4, 13, 2)
    >>> blow = 2.0 - 1.0 / levels            # tr Σ = 1/(2 − t)
    >>> expo = np.log(levels) / 3.0          # tr Σ = e^{3t}
    >>> geometric_blowup(np.stack([blow, expo])).tolist()
    [True, False]

    ```
    """
    from ..errors import ParameterError

    t = jnp.asarray(times)
    if t.ndim < 1 or t.shape[-1] < n_ratios + 2:
        raise ParameterError(
            f"`times` must have at least n_ratios + 2 = {n_ratios + 2} levels on its last axis; got shape {t.shape}."
        )
    gaps = jnp.diff(t, axis=-1)
    prev, nxt = gaps[..., :-1], gaps[..., 1:]
    ratio = jnp.where(prev > 0, nxt / jnp.where(prev > 0, prev, 1.0), jnp.where(nxt == 0, 0.0, jnp.inf))
    ok = jnp.all(jnp.isfinite(t), axis=-1) & jnp.all(gaps >= 0, axis=-1)
    return ok & jnp.all(ratio[..., -n_ratios:] < max_ratio, axis=-1)


def crossing_times(
    model, mean0: Float[ArrayLike, " d"], cov0: Float[ArrayLike, "d d"], *, t1: float,
    levels: Float[ArrayLike, " L"] = LEVELS, solve: Callable = solve_gaussian, **solver_kw,
) -> Float[Array, " L"]:  # fmt: skip
    """First times at which `tr Σ` reaches `levels × tr Σ0`, one :func:`solve_gaussian` per level.

    **Arguments:** `model`, `mean0` `(d,)`, `cov0` `(d, d)` and `t1` as for
    :func:`~hassejax.dynamics.solve_gaussian`; `levels` `(L,)` relative size levels;
    `solve`: the Gaussian solver, :func:`~hassejax.dynamics.solve_gaussian` (default) or one with its
    arguments, size event and statuses (:func:`~hassejax.dynamics.solve_low_rank_gaussian` for a
    :class:`~hassejax.dynamics.LowRankSoftmax` head of a trained model);
    `solver_kw`: further keywords of `solve` (``rtol``,
    ``atol``, ``max_steps``, …; not ``size_threshold`` nor ``blowup_estimate``).

    **Returns:** `(L,)` event times `t_e` (``blowup_estimate="threshold"``: the crossing
    itself, whether the decade test says ``blow_up`` or ``diverge``); ``inf`` where the level
    was not reached (any other status). The solves are vmapped over the levels; each runs
    the same steps up to its own event, so the gaps between the times carry no shift of the
    whole trajectory. Traceable (vmap it over members).

    Source: (derived; module docstring).

    **Example:** `V = A = I`, `Σ0 = I/2`: `tr Σ(t) = 1/(1 − t)`, so level `L` is reached at `1 − 1/L`:

    ```python
    >>> import jax
    >>> jax.config.update("jax_enable_x64", True)
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Softmax
    >>> from hassejax.dynamics.blowup_check import crossing_times
    >>> ts = crossing_times(Softmax(V=jnp.eye(2), A=jnp.eye(2)), jnp.zeros(2), jnp.eye(2) / 2, t1=2.0,
    ...                     levels=10.0 ** jnp.arange(1, 6), rtol=1e-10, atol=1e-12)
    >>> [round(float(x), 6) for x in ts]
    [0.9, 0.99, 0.999, 0.9999, 0.99999]

    ```
    """
    cov0 = jnp.asarray(cov0)
    tr0 = jnp.trace(cov0)

    def one(level):
        sol = solve(model, mean0, cov0, t1=t1, size_threshold=level * tr0, blowup_estimate="threshold", **solver_kw)
        # a crossing, whatever its growth law (undetermined: the rates at it are not finite)
        hit = (sol.status == Status.blow_up) | (sol.status == Status.diverge) | (sol.status == Status.undetermined)
        return jnp.where(hit, sol.t_final, jnp.inf)

    return jax.vmap(one)(jnp.asarray(levels, dtype=cov0.dtype))


def confirm_blowup(
    model, mean0: Float[ArrayLike, " d"], cov0: Float[ArrayLike, "d d"], *, t1: float,
    levels: Float[ArrayLike, " L"] = LEVELS, max_ratio: float = MAX_GAP_RATIO, n_ratios: int = N_RATIOS,
    solve: Callable = solve_gaussian, **solver_kw,
) -> dict[str, Array]:  # fmt: skip
    """:func:`crossing_times` and :func:`geometric_blowup` of one member: ``{"times": (L,), "blow_up": ()}``.

    Arguments as for :func:`crossing_times` (`solve`: the Gaussian solver) and :func:`geometric_blowup`. Traceable.

    **Returns:** ``times`` `(L,)` float (``inf`` where a level was not reached) and
    ``blow_up`` `()` bool.

    **Raises:** what :func:`~hassejax.dynamics.solve_gaussian` raises for bad arguments;
    :class:`~hassejax.errors.ParameterError` when fewer than `n_ratios + 2` levels are given.

    Source: (derived; module docstring).

    **Example:** the counterexample neighbour `V = R(0.3) V_ce`, `A = A_ce − 0.3 I` of the phase
    maps: the decade test says ``diverge`` (ρ ≈ 0.08), the levels show a finite-time blow-up:

    ```python
    >>> import jax
    >>> jax.config.update("jax_enable_x64", True)
    >>> import numpy as np, jax.numpy as jnp
    >>> from hassejax.dynamics import Softmax
    >>> from hassejax.dynamics.blowup_check import confirm_blowup
    >>> V = np.array([[-0.53206, -1.25140], [2.56361, 0.11094]])
    >>> A = np.array([[-0.61541, -0.45655], [1.18257, -0.27585]])
    >>> c, s = np.cos(0.3), np.sin(0.3)
    >>> m = Softmax(V=jnp.asarray(np.array([[c, -s], [s, c]]) @ V), A=jnp.asarray(A - 0.3 * np.eye(2)))
    >>> S0 = jnp.array([[0.21008, -0.34117], [-0.34117, 0.78992]])
    >>> out = confirm_blowup(m, jnp.zeros(2), S0, t1=200.0, rtol=1e-10, atol=1e-12)
    >>> bool(out["blow_up"]), round(float(out["times"][-1]), 6)
    (True, 1.717447)

    ```
    """
    times = crossing_times(model, mean0, cov0, t1=t1, levels=levels, solve=solve, **solver_kw)
    return {"times": times, "blow_up": geometric_blowup(times, max_ratio=max_ratio, n_ratios=n_ratios)}
