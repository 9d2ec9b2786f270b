"""Statuses and solution types of the dynamics solvers (spec dynamics.md §4).

One list of statuses is used everywhere (solves, sweeps, diagnostics). Inside ``jit`` a
status is an ``int32`` code (the value of :class:`Status`); on the host it converts back
with ``Status(int(code))`` or :func:`status_names`.

The solution types are frozen :class:`equinox.Module` s holding device arrays only, so
they pass through ``jax.vmap`` unchanged: under ``vmap`` every field gains the batch axes
in front (written ``*batch`` below).
"""

from __future__ import annotations

import enum

import equinox as eqx
import numpy as np
from jaxtyping import Array, Bool, Float, Int

__all__ = [
    "Status",
    "STATUS_NAMES",
    "status_names",
    "BlowupMethod",
    "SolverStats",
    "AbstractSolution",
    "GaussianSolution",
    "ParticleSolution",
]


class Status(enum.IntEnum):
    """Why a solve stopped (spec dynamics.md §4). Values are the ``int32`` codes used inside ``jit``.

    Not the long-time outcome: :class:`~hassejax.dynamics.diagnostics.Outcome` (blow-up,
    collapse, low rank, still growing, …) is derived from the status and the final state by
    :func:`~hassejax.dynamics.diagnostics.outcome_of` / :func:`~hassejax.dynamics.diagnostics.classify`.

    - `completed` (0): reached `t1`; the state is finite.
    - `converged` (1): the steady-state event fired (`‖Σ'‖_F < tol`, or the particle analogue).
    - `blow_up` (2): the size threshold was crossed *and* the growth law is that of a
      finite-time blow-up (`1/λ` falling to zero at a finite time; decade test, see
      `AbstractSolution.decade_ratio`); `t_blowup` is finite.
    - `diverge` (3): the size threshold was crossed, but the growth is not a finite-time
      blow-up (e.g. exponential growth: L2, Sinkhorn); `t_blowup` is `inf`. A kernel whose
      :meth:`~hassejax.dynamics.AbstractAttention.gaussian_growth_bound` is finite at every depth
      (L2 with `KᵀK` invertible, Sinkhorn, multi-head of those, with constant or piecewise-constant
      parameters: `d/dt tr Σ ≤ r tr Σ`) cannot blow up in finite time and always reads `diverge`,
      whatever the decade test measured (a burst of L2 growth read `blow_up` with ρ = 0.014; loose tolerances read an
      L2 member `blow_up` with ρ = 0.0496). Otherwise both verdicts are those of the computed
      trajectory: with loose tolerances (`rtol ≳ 1e-3`) it can differ from the true one: keep
      the defaults, or compare two tolerances, before trusting a verdict. The decade test reads a blow-up whose
      size grows like `(t* − t)^(−k)` as ``blow_up`` only for `k ≲ 1.8` (`ρ = (1/k)/(100^(1/k) − 1)`: 1/99 at
      `k = 1`, 0.056 at `k = 2`, tending to the exponential 0.217); the size is a second moment, so tokens or `Σ^(1/2)`
      growing like `(t* − t)^(−1)` (a kernel's own velocity of degree 2 in the tokens, e.g. `|x̄| x`, a fresh-user
      check) read ``diverge``, with `growth_exponent` near `1 + 1/k = 1.5` (exponential growth: 1). The Gaussian
      blow-ups of softmax and linear attention have `k = 1` (`λ ≈ c/(t* − t)`, spec dynamics.md §4).
      A crossing
      that the event's root find cannot locate inside its step (the step's dense output not
      finite, or the condition there more than a decade from zero, e.g. a constant step or a
      forced `dtmin` across a blow-up) stands at the end of that step, and is `undetermined` (8).
    - `max_steps_reached` (4): the step budget ran out. Not reported as a blow-up, though it
      may be one.
    - `dt_min_reached` (5): the integrator could not advance: a minimum step size, any other
      integrator failure, or steps at the rounding of `t` (a step of zero length, or a rejected
      step whose shorter retry rounds back to the same step; the solve stops at its last accepted
      step instead of repeating it until the step budget runs out, except within the last 100
      rounding units of `t1`, where diffrax shortens steps itself and the budget still ends it).
      Not reported as a blow-up, though it may be one: a threshold closer to a blow-up than the
      dtype resolves in time ends here (it ended ``max_steps_reached`` after the whole budget
      before). Near `c/(t* − t)`
      growth the threshold is reached at `t* − t_e ≈ (t* − t0) λ0 / threshold`, which must be
      well above the rounding of `t*`, `eps · |t*|`: from `t0 = 0` float64 resolves thresholds
      up to ~1e15 × the initial size, but from `t0 = 100` with `t* − t0 = 1e-6` not even the
      default 1e8 × (pass a lower `size_threshold`, or shift the time origin).
    - `non_finite` (6): the next step would make the state NaN/inf (a vector field that
      turns NaN, e.g. a parameter NaN from some depth on, an L2 map where a traced or callable
      `βc` is negative, a Sinkhorn kernel whose iteration stopped at `max_iter` above `tol` (with
      ``strict=True``, the default, its weights are NaN rather than unconverged: raise `max_iter`, or pass
      ``strict=False`` to go on with them; a fresh user's 5 tokens under ``Sinkhorn(V=I, A=I)`` stopped so at
      `t = 0.79` with every entry below 3.5), or a constant-step solve stepping
      past a blow-up, which diffrax itself reports as successful), or its size `λ` reach
      `1/finfo(dtype).tiny` (float32: 8.5e37; beyond it `1/λ` underflows and a vector field
      such as L2's is flushed to zero, freezing the state): the solve stops there and
      reports the last finite state, `t_final` the time it was reached. Steps that overflow
      from a finite state are retried shorter down to 64 rounding units of `t` (`64 eps |t|`)
      and, near `t = 0`, to `64 eps³ (t1 − t0)` (float32: `1e-19` of the interval): a blow-up
      sooner than that after `t0` ends here, at `t0` (float32 from `t0 = 1000`, where 64 units
      are 7.6e-3: a blow-up 5e-4 after `t0` ends ``non_finite`` at `t0`; a later `t0` costs
      resolution, `state="projective"` (softmax) steps in the size instead). A solve whose step budget runs
      out at a state where the vector field is NaN/inf is ``non_finite`` too, not ``max_steps_reached`` (a NaN
      parameter from `t0` on with `max_steps` below the ~63 retries the guard takes in float64).
    - `invalid_times` (7): the times were traced (under ``jit``/``vmap``, e.g. per-member
      `t1`/`ts` in a sweep) and are not finite with `ts` sorted within `[t0, t1]` and
      `t1 > t0`. Nothing is solved: the state is the initial one, no save point is valid, the step
      counts (`stats`) are 0.
      (Concrete times are checked before the solve and raise
      :class:`~hassejax.errors.ParameterError`; traced ones are checked in the program, so a
      bad member does not abort a sweep and the program holds no host callback.)
    - `undetermined` (8): the size threshold was crossed, but the computation cannot tell
      blow-up from divergence there; or a blow-up lies within the solve's time resolution
      (`1e3 · max(rtol, atol / |y0|, eps) · (e − t0)`, `|y0|` the largest entry of the initial state) of a layer edge `e` of a
      :class:`~hassejax.dynamics.PiecewiseConstant` parameter, so that the side of `e` it lies on, hence whether
      the solution ends there or goes on into the next layer, is not known (the solve stops just before `e`,
      or a threshold event before `e` extrapolates its `t*` to within the resolution of `e`; with the default
      controller, which steps to the edges, and in the projective state); or the solve reached `t1` within two
      decades below the threshold, growing like a blow-up (`λλ''/λ'² ≥ 1.5`), with the state's own remaining time
      `λ/λ'` within that resolution of `t1` (an adaptive controller; the blow-up may lie before `t1`: a fresh
      user's `t1 = t* − 1e-9` ended ``completed``), or below those two decades with `λ/λ'` within
      `50 · max(rtol, atol / |y0|) · (t1 − t0)`, at most `1e-3 · (t1 − t0)` (a review's `Σ0 = 1e-4 I` just past
      its `t*`). `t_blowup` is `inf`,
      `t_final` the crossing (resp. the stop before the edge, or `t1`). The causes of the first kind:
      the step that crossed did not resolve it (the event's root find could not locate the
      crossing inside it, e.g. a constant step or a forced `dtmin` across a blow-up, when
      `t_final` is the end of that step, where the state may be past the singularity and
      its growth rates are not the solution's, the factor state possibly stopping
      `non_finite` instead; or the step was longer than half the time the decade test
      times, or, for a constant step, than half the remaining time `λ/λ'`); the growth rates
      `λ'`, `λ''` at the crossing are not finite or `λ' = 0` (e.g. a float32 softmax threshold
      near the float range); the size is within a hundred times its rounding floor there
      (particles whose mean drifted so far, e.g. to ~1e20 in float64, that their spread
      `(1/n) Σ ‖x_i − x̄‖²` is rounding noise: the crossing may be rounding alone); or the
      initial size is not below `threshold/100` (no two decades for the decade test to time:
      keep the threshold ≥ 1e3 × the initial size). Not a blow-up (and never reported for a
      kernel with a finite growth bound at every depth, which is `diverge`, but for the size-floor cause);
      :func:`~hassejax.dynamics.diagnostics.outcome_of` reads it as ``undetermined``.
    - `invalid_threshold` (9): the `size_threshold` given was traced (or the initial state was,
      e.g. per-member thresholds or initial states in a sweep) and is NaN or at or below the
      initial size, to 512 rounding units (a size starting at or above it never grows through
      it: the event could never fire; one just above that fires at once and is `undetermined`). Nothing is solved
      (a stand-in solve runs in its place, e.g. a zero field; its steps are not counted), as for `invalid_times`
      (which wins when both apply); a concrete threshold and initial state are checked before
      the solve and raise :class:`~hassejax.errors.ParameterError`.
    - `indefinite` (10): :func:`~hassejax.dynamics.solve_gaussian` and
      :func:`~hassejax.dynamics.solve_low_rank_gaussian`: `Σ` was no covariance: a traced `Σ0` (a sweep member;
      every state) with an eigenvalue below `−max(1e-8, 10 d ε) max|Σ0|`, the rule that refuses a concrete one (the
      factor states solved its PSD part before), or, with ``state="covariance"``, `Σ` at a valid save point or at
      the end with an eigenvalue below `−δ`, `δ = 10 atol + max(10 rtol, 1e-4) tr Σ` (plus rounding). The symmetric
      state keeps `Σ` PSD only up to the tolerance; where a direction of `Σ` near zero is unstable,
      the error can push it below zero and the integration then follows a matrix that is no
      covariance (measured with L2, whose map depends on those directions and which the covariance
      state now refuses: float32, `tr Σ` 29.7 and ``diverge`` where the factor state gives 0.15 and
      ``completed``). No verdict: `t_blowup = inf`; the state is kept for inspection. Use
      ``state="factor"`` (`Σ = UUᵀ` is PSD by construction), or tighter tolerances. Not every
      failure of the symmetric state shows: an error that grows in a direction of `Σ` that should
      stay at zero, but stays positive, is not caught (see ``solve_gaussian``'s `state`).
    - `invalid_tolerance` (11): `rtol` or `atol` of the default step-size controller was traced (e.g. one
      per member in a sweep) and is not finite with `0 ≤ rtol < 1` and `atol > 0` (unchecked, the controller
      would take a negative one as its absolute value, and a NaN would end the solve ``non_finite``), or a traced
      `converge_tol` is not finite and > 0 (unchecked, a NaN, negative or zero one turned the steady-state event off
      and an infinite one read ``converged`` at once). Nothing is solved,
      as for `invalid_times` (which wins, then `invalid_threshold`); concrete tolerances are checked before
      the solve and raise :class:`~hassejax.errors.ParameterError`.

    **Example:** codes and names convert both ways on the host:

    ```python
    >>> from hassejax.dynamics import Status
    >>> Status.blow_up.value, Status(3).name, len(Status)
    (2, 'diverge', 12)

    ```
    """

    completed = 0
    converged = 1
    blow_up = 2
    diverge = 3
    max_steps_reached = 4
    dt_min_reached = 5
    non_finite = 6
    invalid_times = 7
    undetermined = 8
    invalid_threshold = 9
    indefinite = 10
    invalid_tolerance = 11


STATUS_NAMES: tuple[str, ...] = tuple(s.name for s in Status)
"""Status names indexed by code: ``STATUS_NAMES[code]``."""


def status_names(codes) -> np.ndarray | str:
    """Host-side conversion of status codes to names.

    **Arguments:** `codes`: integer array-like of :class:`Status` values (any shape).

    **Returns:** the name (``str``, e.g. ``"blow_up"``) for a scalar code, else a NumPy array
    of the same shape holding the names (dtype object).

    **Raises:** :class:`~hassejax.errors.ParameterError` for non-integer codes or codes outside
    ``0 .. len(STATUS_NAMES) - 1``.

    Source: spec dynamics.md §4 ("Statuses of a solve (one list, used everywhere)"); the codes after `non_finite`
    (`invalid_times` ... `invalid_tolerance`) are this package's (derived).

    **Example:**

    ```python
    >>> from hassejax.dynamics import status_names
    >>> status_names(2), status_names([[0, 1], [3, 6]]).tolist()
    ('blow_up', [['completed', 'converged'], ['diverge', 'non_finite']])
    >>> status_names(12)
    Traceback (most recent call last):
    ...
    hassejax.errors.ParameterError: `codes` must lie in 0..11 (Status values); got 12..12.

    ```
    """
    from ..errors import ParameterError

    raw = np.asarray(codes)
    if not (
        np.issubdtype(raw.dtype, np.integer) or (np.issubdtype(raw.dtype, np.floating) and np.all(raw == np.round(raw)))
    ):
        raise ParameterError(f"`codes` must be integer Status codes; got {raw!r:.120}.")
    arr = raw.astype(np.int64)
    if arr.size and (arr.min() < 0 or arr.max() >= len(STATUS_NAMES)):
        raise ParameterError(
            f"`codes` must lie in 0..{len(STATUS_NAMES) - 1} (Status values); got {arr.min()}..{arr.max()}."
        )
    table = np.array(STATUS_NAMES, dtype=object)
    if arr.ndim == 0:
        return str(table[int(arr)])
    return table[arr]


class BlowupMethod(enum.IntEnum):
    """How `t_blowup` was obtained (spec dynamics.md §4).

    - `none` (0): no blow-up reported (`t_blowup = inf`).
    - `threshold` (1): the time at which the size threshold was crossed (a lower bound on
      `t*`, too early by about `size(0)/threshold` relative).
    - `extrapolated` (2): `t_e + λ/λ'` at the threshold event, with `λ` the size
      (`tr Σ`); exact for `λ = c/(t* − t)`, error `O(threshold⁻²)` relative for the
      softmax closed form.

    **Example:**

    ```python
    >>> from hassejax.dynamics import BlowupMethod
    >>> [(m.name, m.value) for m in BlowupMethod]
    [('none', 0), ('threshold', 1), ('extrapolated', 2)]

    ```
    """

    none = 0
    threshold = 1
    extrapolated = 2


class SolverStats(eqx.Module):
    """Integrator statistics from diffrax (per batch member under ``vmap``).

    Source: (derived), no paper: the step counts of diffrax's ``Solution.stats`` (spec dynamics.md §4: diffrax
    solves every ODE).

    **Example:** every step of a solve (softmax blowing up at `t* = 1`, spec §3) is accepted or rejected:

    ```python
    >>> import jax
    >>> jax.config.update("jax_enable_x64", True)  # float64: the default rtol = atol = 1e-8
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Softmax, solve_gaussian
    >>> stats = solve_gaussian(Softmax(V=jnp.eye(2), A=jnp.eye(2)), jnp.zeros(2), jnp.eye(2) / 2, t1=5.0).stats
    >>> int(stats.num_steps) == int(stats.num_accepted_steps) + int(stats.num_rejected_steps)
    True
    >>> int(stats.num_accepted_steps) > 0
    True

    ```
    """

    num_steps: Int[Array, "*batch"]
    num_accepted_steps: Int[Array, "*batch"]
    num_rejected_steps: Int[Array, "*batch"]


class AbstractSolution(eqx.Module):
    """Fields shared by every solution type.

    - `ts`: `(*batch, T)` the requested save times, whatever the status (never `inf`).
    - `valid`: `(*batch, T)` True where the saved point lies at or before the stop
      (`ts <= t_final`) and is finite, the same rule for every status. Saved points after
      the stop (or not finite) hold the last valid saved point before them (the initial state
      if none), never NaN/inf, and are marked invalid; the state at the stop itself is the
      `*_final` field. The one exception: a member whose initial state is itself NaN/inf (traced,
      inside ``vmap`` or a sweep; a concrete one is refused) has no finite state to hold: its
      saved points and `*_final` hold NaN/inf (the initial state, or the Gaussian route's NaN factor of it),
      every `valid` is False and the status is ``non_finite``.
    - `status`: `(*batch,)` int32 code of :class:`Status`.
    - `t_final`: `(*batch,)` time at which the solve stopped (event time, `t1`, or the
      last time reached).
    - `t_blowup`: `(*batch,)` blow-up time estimate; `inf` when no blow-up (never NaN).
    - `blowup_method`: `(*batch,)` int32 code of :class:`BlowupMethod`.
    - `growth_exponent`: `(*batch,)` the local growth exponent `p = λλ''/λ'²` of the size
      `λ` at the threshold event (`λ' ∝ λ^p`: `p = 2` for `λ ≈ c/(t* − t)`, `p = 1` for
      exponential growth), for information: it is unreliable for oscillating growth. Zero
      where the threshold event did not fire, and for an ``undetermined`` crossing (e.g. the
      rates `λ'`, `λ''` at the event not finite in the state's dtype, a threshold near its
      overflow; `decade_ratio` is then `inf`).
    - `decade_ratio`: `(*batch,)` the blow-up test actually used (derived): `ρ = τ/(t_e − t_a)`
      with `τ = λ/λ'` at the event time `t_e` and `t_a` the time the size entered its last two
      decades (`threshold/100`). `ρ ≈ 1/99` for `λ ≈ c/(t* − t)`, `ρ ≈ 0.22` for exponential
      growth; `blow_up` iff `ρ < 0.05`. Zero where the threshold event did not fire, `inf` for
      an ``undetermined`` crossing.
    - `stats`: :class:`SolverStats`.

    Source: spec dynamics.md §4 (the blow-up event and `t_blowup`, threshold or extrapolated `t* ≈ t_e + λ/λ'`; the
    statuses; tell `blow_up` from `diverge` by the growth law); the decade test `ρ` and the rule for saved points
    after the stop are (derived).

    **Example:** softmax with `V = A = I`, `Σ0 = I/2` blows up at `t* = 1` (spec §3): the save point at `t1 = 5`
    lies after the stop, and the size grows like `c/(t* − t)` (`p = 2`, `ρ ≈ 1/99`):

    ```python
    >>> import jax
    >>> jax.config.update("jax_enable_x64", True)  # float64: the default rtol = atol = 1e-8
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import BlowupMethod, Softmax, solve_gaussian, status_names
    >>> sol = solve_gaussian(Softmax(V=jnp.eye(2), A=jnp.eye(2)), jnp.zeros(2), jnp.eye(2) / 2, t1=5.0)
    >>> status_names(sol.status), sol.ts.tolist(), sol.valid.tolist(), BlowupMethod(int(sol.blowup_method)).name
    ('blow_up', [0.0, 5.0], [True, False], 'extrapolated')
    >>> round(float(sol.t_blowup), 4), round(float(sol.growth_exponent), 2), round(float(sol.decade_ratio), 2)
    (1.0, 2.0, 0.01)

    ```
    """

    ts: Float[Array, "*batch T"]
    valid: Bool[Array, "*batch T"]
    status: Int[Array, "*batch"]
    t_final: Float[Array, "*batch"]
    t_blowup: Float[Array, "*batch"]
    blowup_method: Int[Array, "*batch"]
    growth_exponent: Float[Array, "*batch"]
    decade_ratio: Float[Array, "*batch"]
    stats: SolverStats

    @classmethod
    def from_integrate(cls, out, **fields):
        """The solution from the shared solve's output `out` (status, times, blow-up estimate and
        statistics copied) and the type's own `fields` (e.g. ``xs=..., x_final=...``)."""
        return cls(
            ts=out.ts,
            valid=out.valid,
            status=out.status,
            t_final=out.t_final,
            t_blowup=out.t_blowup,
            blowup_method=out.blowup_method,
            growth_exponent=out.growth_exponent,
            decade_ratio=out.decade_ratio,
            stats=SolverStats(out.num_steps, out.num_accepted_steps, out.num_rejected_steps),
            **fields,
        )


class GaussianSolution(AbstractSolution):
    """Solution of the mean/covariance ODE of a Gaussian `N(α, Σ)` (spec dynamics.md §2).

    Extra fields (beyond :class:`AbstractSolution`):

    - `mean`: `(*batch, T, d)` the mean `α(t)` at `ts`.
    - `cov`: `(*batch, T, d, d)` the covariance `Σ(t)` at `ts`: `U Uᵀ` in the default factor
      state (symmetric PSD by construction); the integrated `Σ` with ``state="covariance"``
      (exactly symmetric, PSD up to the tolerance).
    - `factor`: `(*batch, T, d, r)` the factor `U(t)` (`U' = M U`, `r` columns as `factor0`, `d`
      from `cov0`), whose column space, hence rank, is invariant at every finite time; with
      ``state="covariance"`` the PSD square root of `Σ(t)` (eigenvalues below zero clipped),
      `r = d`.
    - `mean_final`, `cov_final`, `factor_final`: the state at `t_final`.

    **Example:** softmax with `V = A = I`, `Σ0 = I/2` blows up at `t* = 1` (spec §3); the solve stops where `tr Σ`
    crosses its default threshold `1e8 · tr Σ0`, and the mean stays at 0:

    ```python
    >>> import jax
    >>> jax.config.update("jax_enable_x64", True)  # float64: the default rtol = atol = 1e-8
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Softmax, solve_gaussian
    >>> sol = solve_gaussian(Softmax(V=jnp.eye(2), A=jnp.eye(2)), jnp.zeros(2), jnp.eye(2) / 2, t1=5.0)
    >>> sol.cov.shape, sol.factor.shape, sol.mean_final.tolist()
    ((2, 2, 2), (2, 2, 2), [0.0, 0.0])
    >>> round(float(jnp.trace(sol.cov_final)) / 1e8, 3)
    1.0

    ```
    """

    mean: Float[Array, "*batch T d"]
    cov: Float[Array, "*batch T d d"]
    factor: Float[Array, "*batch T d r"]
    mean_final: Float[Array, "*batch d"]
    cov_final: Float[Array, "*batch d d"]
    factor_final: Float[Array, "*batch d r"]


class ParticleSolution(AbstractSolution):
    """Solution of the particle system `dx_i/dt = Γ_μ(x_i)` (spec dynamics.md §1).

    Extra fields (beyond :class:`AbstractSolution`):

    - `xs`: `(*batch, T, n, d)` token positions at `ts`.
    - `x_final`: `(*batch, n, d)` positions at `t_final`.

    **Example:** `V = −I`, `A = 0`: `ẋ_i = −x̄`, so every token moves by `−(1 − e^{−t}) x̄(0)`, here `x̄(0) = (1, 1)`:

    ```python
    >>> import jax
    >>> jax.config.update("jax_enable_x64", True)  # float64: the default rtol = atol = 1e-8
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Softmax, solve_particles
    >>> x0 = jnp.array([[2.0, 0.0], [0.0, 2.0]])
    >>> sol = solve_particles(Softmax(V=-jnp.eye(2), A=jnp.zeros((2, 2))), x0, t1=1.0)
    >>> sol.xs.shape, sol.x_final.round(3).tolist()
    ((2, 2, 2), [[1.368, -0.632], [-0.632, 1.368]])

    ```
    """

    xs: Float[Array, "*batch T n d"]
    x_final: Float[Array, "*batch n d"]
