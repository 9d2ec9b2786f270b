"""Blow-up or divergence? The growth law of a size `λ(t)` from its samples (spec dynamics.md §4).

Fit `λ' = kλ^p` through the last three samples: `u^{p−1}` (`u = 1/λ`) is then affine in `t`
(`log u` for `p = 1`). `p = 2` is finite-time blow-up `λ ≈ c/(t* − t)` (`1/λ` falls linearly
to zero), `p = 1` exponential divergence (`1/λ` decays without reaching zero). The verdict
of :func:`growth_law` is `p > BLOWUP_EXPONENT` (1.5). This is the test behind
:func:`~hassejax.dynamics.diagnostics.classify_trajectory` (samples from any integrator);
it is *not* the solvers' test: a solve decides blow-up against divergence at its size event
with the decade test (`decade_ratio < 0.05`, see :mod:`hassejax.dynamics._solve` and
:class:`~hassejax.dynamics.AbstractSolution`), and reports its local exponent
`p = λλ''/λ'²` (``growth_exponent``) for information only.
"""

from __future__ import annotations

import enum

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Bool, Float

from ...errors import ParameterError

__all__ = ["BLOWUP_EXPONENT", "GrowthTest", "GrowthFit", "growth_law"]

BLOWUP_EXPONENT = 1.5
"""Exponent threshold of :func:`growth_law` (samples of `λ(t)`): `p > 1.5` ⇒ finite-time blow-up.

Used by :func:`growth_law` and :func:`~hassejax.dynamics.diagnostics.classify_trajectory`
only. The solvers do not use it: their verdict at the size event is the decade test
(`decade_ratio < 0.05`, :data:`hassejax.dynamics._solve.DECADE_RATIO_THRESHOLD`), and their
``growth_exponent`` is reported for information (derived).
"""


class GrowthTest(enum.IntEnum):
    """Which test told blow-up from divergence (spec §4 "report the test used").

    - `none` (0): no escape, nothing to test.
    - `solver_event` (1): the solve's own verdict at its size event, i.e. its status
      `blow_up` / `diverge`, decided by the decade test (`decade_ratio < 0.05` ⇒ blow-up;
      :class:`~hassejax.dynamics.AbstractSolution`). `event_exponent` is the former name
      of this member (an alias): the solver's exponent `p = λλ''/λ'²` is reported in
      `growth_exponent` but does not decide.
    - `sample_fit` (2): :func:`growth_law` on samples of `λ_max(t)` (`p > BLOWUP_EXPONENT` ⇒ blow-up).
    - `insufficient` (3): an escape with fewer than three usable growing samples: the
      outcome is `undetermined`.

    Source: spec dynamics.md §4 (tell `blow_up` from `diverge` by the growth law, "report the test used"); the tests
    themselves are (derived).

    **Example:** `event_exponent` is an alias, so iteration lists four members:

    ```python
    >>> from hassejax.dynamics.diagnostics import GrowthTest
    >>> [(g.name, g.value) for g in GrowthTest]
    [('none', 0), ('solver_event', 1), ('sample_fit', 2), ('insufficient', 3)]
    >>> GrowthTest.event_exponent is GrowthTest.solver_event
    True

    ```
    """

    none = 0
    solver_event = 1
    event_exponent = 1  # alias of solver_event (former name)
    sample_fit = 2
    insufficient = 3


class GrowthFit(eqx.Module):
    """Result of :func:`growth_law` (fields gain the batch axes in front under ``vmap``).

    - `exponent`: `p` of `λ' = kλ^p` through the last three samples (0 where not `ok`).
    - `t_star`: extrapolated zero of `1/λ` along the fitted law (`inf` for `p <= 1` or not `ok`).
    - `ok`: three valid samples with `λ` strictly increasing were available.
    - `blow_up`: `ok` and `p > BLOWUP_EXPONENT` (1.5).

    Source: (derived) from spec dynamics.md §4: finite-time blow-up has `1/λ_max` falling to zero at a finite time,
    divergence has it decaying without reaching zero; the three-sample fit of `λ' = kλ^p` is this package's.

    **Example:** three samples of `λ = 1/(3 − t)` give `p = 2`, `t* = 3`; decreasing samples are not `ok`:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics.diagnostics import growth_law
    >>> ts = jnp.array([1.0, 1.5, 1.9])
    >>> fit = growth_law(ts, 1.0 / (3.0 - ts))
    >>> round(fit.exponent.item(), 4), round(fit.t_star.item(), 4), fit.ok.item(), fit.blow_up.item()
    (2.0, 3.0, True, True)
    >>> fit = growth_law(ts, 1.0 / ts)
    >>> fit.exponent.item(), fit.t_star.item(), fit.ok.item()
    (0.0, inf, False)

    ```
    """

    exponent: Float[Array, "*batch"]
    t_star: Float[Array, "*batch"]
    ok: Bool[Array, "*batch"]
    blow_up: Bool[Array, "*batch"]


def _exprel(z):
    """`(e^z − 1)/z`, equal to 1 at `z = 0`."""
    small = jnp.abs(z) < 1e-6
    return jnp.where(small, 1.0 + 0.5 * z, jnp.expm1(jnp.where(small, 1.0, z)) / jnp.where(small, 1.0, z))


def _growth_fit_1(ts, lam, valid):
    """One trajectory: fit `λ' = kλ^p` through the last three valid samples (see :func:`growth_law`)."""
    dtype = lam.dtype
    ok_pt = valid & jnp.isfinite(lam) & jnp.isfinite(ts) & (lam > 0)
    count = jnp.cumsum(ok_pt)
    total = count[-1]
    idx = jnp.arange(ts.shape[0])

    def nth(k):  # index of the k-th usable sample (1-based), 0 if absent
        hit = ok_pt & (count == k)
        return jnp.max(jnp.where(hit, idx, 0))

    i0, i1, i2 = nth(total - 2), nth(total - 1), nth(total)
    t0, t1, t2 = ts[i0], ts[i1], ts[i2]
    l0, l1, l2 = lam[i0], lam[i1], lam[i2]
    ok = (total >= 3) & (t0 < t1) & (t1 < t2) & (l0 < l1) & (l1 < l2)
    # Scale-free: r_i = u_i / u_0 = λ_0 / λ_i in (0, 1]; log r_0 = 0.
    g1 = jnp.where(ok, jnp.log(l0 / l1), -1.0)
    g2 = jnp.where(ok, jnp.log(l0 / l2), -2.0)
    d1 = jnp.where(ok, t1 - t0, 1.0)
    d2 = jnp.where(ok, t2 - t1, 1.0)

    def box_cox(q, g):  # (r^q − 1)/q = g · exprel(q g), g = log r; → log r at q = 0
        return g * _exprel(q * g)

    def mismatch(q):  # slope on [t0, t1] minus slope on [t1, t2]; decreasing through the root
        h1, h2 = box_cox(q, g1), box_cox(q, g2)
        return h1 / d1 - (h2 - h1) / d2

    lo, hi = jnp.asarray(-1.0, dtype), jnp.asarray(3.0, dtype)  # p = 1 + q in [0, 4]

    def body(_, bounds):
        a, b = bounds
        mid = 0.5 * (a + b)
        up = mismatch(mid) > 0
        return jnp.where(up, mid, a), jnp.where(up, b, mid)

    a, b = jax.lax.fori_loop(0, 60, body, (lo, hi))
    q = 0.5 * (a + b)
    p = 1.0 + q
    # Zero of u^q (affine in t) beyond t2, for q > 0: t* = t2 + w2 (t2 − t1)/(w1 − w2), w = r^q.
    w1, w2 = jnp.exp(q * g1), jnp.exp(q * g2)
    denom = jnp.where(w1 > w2, w1 - w2, 1.0)
    t_star = jnp.where(ok & (q > 1e-8) & (w1 > w2), t2 + w2 * d2 / denom, jnp.inf)
    p = jnp.where(ok, p, 0.0)
    return p.astype(dtype), t_star.astype(dtype), ok, ok & (p > BLOWUP_EXPONENT)


def growth_law(
    ts: Float[ArrayLike, "*batch T"],
    lam: Float[ArrayLike, "*batch T"],
    valid: Bool[ArrayLike, "*batch T"] | None = None,
) -> GrowthFit:
    """Blow-up or divergence from samples of a growing size `λ(t)` (e.g. `λ_max(Σ(t))`, spec §4).

    Fits the growth law `λ' = kλ^p` through the last three valid samples `(t_i, λ_i)`:
    along it `u^q`, `u = 1/λ`, `q = p − 1`, is affine in `t` (`log u` when `q = 0`), so `q`
    is the root of "the Box–Cox transform `(r^q − 1)/q` of `r_i = λ_0/λ_i` has equal
    slopes on `[t_0, t_1]` and `[t_1, t_2]`", found by bisection on `p ∈ [0, 4]` (60 steps;
    the mismatch is monotone in `q` because the transforms are ordered by convexity).
    Exact on three samples of either model: `λ = c/(t* − t)` gives `p = 2` (`1/λ` falls
    linearly to zero at `t*`: finite-time blow-up) and `λ = ce^{rt}` gives `p = 1`
    (`1/λ` decays exponentially, never reaching zero: divergence); `λ ∝ (t* − t)^{−k}` gives
    `p = 1 + 1/k`. Verdict: blow-up iff `p > BLOWUP_EXPONENT` (1.5), the midpoint of the two
    models. (The solvers decide differently, by the decade test at their size event; see
    the module docstring.) With samples close to the escape (the last one at a size
    threshold) the verdict is robust to coarse sampling; a transient not yet in its
    asymptotic regime (e.g. L2 attention below its saturation) can look like a blow-up, so
    use a threshold well above the initial size (derived).

    **Arguments:**

    - `ts`: `(*batch, T)` float sample times, increasing over the valid samples.
    - `lam`: `(*batch, T)` float sizes `λ(t) > 0`.
    - `valid`: `(*batch, T)` Boolean, which samples to use (default: all finite ones).

    **Returns:** a :class:`GrowthFit` `(exponent, t_star, ok, blow_up)`; `t_star` is the
    zero of `1/λ` extrapolated along the fitted law (finite for `p > 1`).

    **Raises:** :class:`~hassejax.errors.ParameterError` for mismatched shapes.

    Source: (derived); the two growth models are those of spec dynamics.md §4.

    **Example:** three samples of `λ = 1/(2 − t)` blow up at `t* = 2`; of `e^t`, diverge:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics.diagnostics import growth_law
    >>> ts = jnp.array([1.0, 1.5, 1.9])
    >>> fit = growth_law(ts, 1.0 / (2.0 - ts))
    >>> round(fit.exponent.item(), 4), round(fit.t_star.item(), 4), fit.blow_up.item()  # 4 digits: float32 too
    (2.0, 2.0, True)
    >>> fit = growth_law(ts, jnp.exp(ts))
    >>> round(fit.exponent.item(), 4), fit.blow_up.item()
    (1.0, False)

    ```
    """
    ts, lam = jnp.asarray(ts), jnp.asarray(lam)
    if ts.shape != lam.shape or ts.ndim < 1:
        raise ParameterError(f"`ts` and `lam` must have the same shape (..., T); got {ts.shape} and {lam.shape}.")
    valid = jnp.ones(ts.shape, bool) if valid is None else jnp.asarray(valid)
    if valid.shape != ts.shape:
        raise ParameterError(f"`valid` must have the shape of `ts`, {ts.shape}; got {valid.shape}.")
    dtype = jnp.result_type(ts, lam, float)
    return growth_fit(ts.astype(dtype), lam.astype(dtype), valid)


@jax.jit
def growth_fit(ts, lam, valid) -> GrowthFit:
    """:func:`growth_law` without the argument checks (private to the package)."""
    fit = jnp.vectorize(_growth_fit_1, signature="(t),(t),(t)->(),(),(),()")
    p, t_star, ok, blow = fit(ts, lam, valid)
    return GrowthFit(exponent=p, t_star=t_star, ok=ok, blow_up=blow)
