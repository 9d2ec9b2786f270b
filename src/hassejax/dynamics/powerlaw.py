"""Power-law fits on log-log axes: tail slopes of trajectories, rates in `n` with bootstrap intervals.

(spec dynamics.md §7a item 1: `Σ → 0` like `1/t`; §7b item 12: the mean-field error like `n^{-1/2}`.)
"""

from __future__ import annotations

import numpy as np
from jaxtyping import ArrayLike, Bool, Float, Real

from ..errors import ParameterError

__all__ = ["loglog_slope", "loglog_fit", "bootstrap_slope", "rms"]


def loglog_slope(
    ts: Float[ArrayLike, "N T"], y: Float[ArrayLike, "N T"], valid: Bool[ArrayLike, "N T"], last_decades: float = 1.0
) -> Float[np.ndarray, " N"]:
    """Per member, the least-squares slope of `log y` against `log t` over its last `last_decades` decades.

    The window is `[t_end·10^{−last_decades}, t_end]`, `t_end` the member's last valid time;
    points with `t <= 0` or `y <= 0` are left out (`−1` for a `1/t` law).

    **Arguments:** `ts`, `y`: `(N, T)` saved times and values; `valid`: `(N, T)` Boolean (which
    saved points were reached); `last_decades`: width of the window in decades (`> 0`).

    **Returns:** float64 `(N,)` slopes.

    **Raises:** :class:`~hassejax.errors.ParameterError` for shapes that differ, `last_decades <= 0`
    or a member with fewer than two points in its window.

    Source: (derived) the `1/t` law of spec §3 read off the figures' long-horizon solves.

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.powerlaw import loglog_slope
    >>> t = np.geomspace(1.0, 1e4, 9)[None]
    >>> np.round(loglog_slope(t, 3.0 / t, np.ones_like(t, bool)), 12).tolist()
    [-1.0]

    ```
    """
    ts, y, valid = np.asarray(ts, float), np.asarray(y, float), np.asarray(valid, bool)
    if ts.ndim != 2 or y.shape != ts.shape or valid.shape != ts.shape:
        raise ParameterError(
            f"`ts`, `y` and `valid` must all be (N, T); got shapes {ts.shape}, {y.shape}, {valid.shape}."
        )
    if not last_decades > 0:
        raise ParameterError(f"`last_decades` must be > 0; got {last_decades!r}.")
    out = np.empty(ts.shape[0])
    for i, (t, v, yy) in enumerate(zip(ts, valid, y)):
        t_end = t[v].max() if v.any() else np.nan
        sel = v & (t >= t_end * 10.0 ** (-last_decades)) & (t > 0) & (yy > 0)
        if sel.sum() < 2:
            raise ParameterError(
                f"`y`: member {i} has {int(sel.sum())} positive valid point(s) in its last {last_decades} decades; need 2."
            )
        out[i] = np.polyfit(np.log(t[sel]), np.log(yy[sel]), 1)[0]
    return out


def loglog_fit(n: Real[ArrayLike, " k"], err: Real[ArrayLike, " k"]) -> tuple[float, float]:
    """Least-squares `(slope, intercept)` of `log err` against `log n`.

    **Arguments:** `n`, `err`: `(k,)` positive values, `k >= 2`.

    **Returns:** `(slope, intercept)` as floats: `err ≈ exp(intercept) n^slope`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for shapes that differ, fewer than two
    points or a value `<= 0`.

    Source: (derived).

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.powerlaw import loglog_fit
    >>> n = np.array([64, 256, 1024])
    >>> s, c = loglog_fit(n, 3.0 * n ** -0.5)
    >>> round(s, 9), round(float(np.exp(c)), 9)
    (-0.5, 3.0)

    ```
    """
    n_a, e_a = np.asarray(n, float), np.asarray(err, float)
    if n_a.ndim != 1 or e_a.shape != n_a.shape or n_a.size < 2:
        raise ParameterError(f"`n` and `err` must be (k,) with k >= 2; got shapes {n_a.shape} and {e_a.shape}.")
    if np.any(n_a <= 0) or np.any(e_a <= 0):
        raise ParameterError("`n` and `err` must be positive (they are fitted on log-log axes).")
    slope, intercept = np.polyfit(np.log(n_a), np.log(e_a), 1)
    return float(slope), float(intercept)


def rms(x: Float[ArrayLike, ...], axis: int = -1) -> Float[np.ndarray, ...]:
    """Root mean square `√mean(x²)` along `axis`.

    **Arguments:** `x`: a float array; `axis`: the axis to reduce.

    **Returns:** float64 array with `axis` removed.

    **Raises:** nothing beyond NumPy's own axis errors.

    Source: (derived).

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.powerlaw import rms
    >>> rms(np.array([[3.0, 4.0], [1.0, 1.0]])).tolist()
    [3.5355339059327378, 1.0]

    ```
    """
    return np.asarray(np.sqrt(np.mean(np.square(x), axis=axis)))


def bootstrap_slope(
    sizes: Real[ArrayLike, " k"], errors: list[Float[ArrayLike, " _s"]], rng: np.random.Generator, reps: int = 2000
) -> tuple[float, float]:
    """2.5% and 97.5% quantiles of the log-log slope of the RMS error when the seeds at each size are resampled.

    Each replicate draws, at every size independently, as many seeds as there are with
    replacement, takes their :func:`rms` and fits :func:`loglog_fit` against `sizes`.

    **Arguments:** `sizes`: `(k,)` sizes `n`; `errors`: `k` arrays of per-seed errors (one per
    size, lengths may differ); `rng`: a NumPy generator (consumed in a fixed order);
    `reps`: replicates (`>= 1`).

    **Returns:** `(lo, hi)` floats.

    **Raises:** :class:`~hassejax.errors.ParameterError` when `errors` does not have one array
    per size or `reps < 1`.

    Source: (derived) a percentile bootstrap over seeds (spec §7b item 12).

    **Example:** without spread between seeds the interval is the slope itself:

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.powerlaw import bootstrap_slope
    >>> sizes = np.array([64, 256, 1024])
    >>> lo, hi = bootstrap_slope(sizes, [np.full(5, n ** -0.5) for n in sizes], np.random.default_rng(0), reps=20)
    >>> round(lo, 9), round(hi, 9)
    (-0.5, -0.5)

    ```
    """
    if len(errors) != len(np.asarray(sizes)):
        raise ParameterError(f"`errors` must hold one array per size ({len(np.asarray(sizes))}); got {len(errors)}.")
    if isinstance(reps, bool) or int(reps) != reps or reps < 1:
        raise ParameterError(f"`reps` must be an integer >= 1; got {reps!r}.")
    slopes = np.empty(int(reps))
    for r in range(int(reps)):
        boot = [rms(e[rng.integers(0, len(e), len(e))]) for e in map(np.asarray, errors)]
        slopes[r] = loglog_fit(sizes, np.array(boot))[0]
    return float(np.quantile(slopes, 0.025)), float(np.quantile(slopes, 0.975))
