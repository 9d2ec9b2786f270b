"""The authors' projected explicit Euler for the `2 × 2` L2 covariance ODE (a reference integrator, not a solver).

Castin et al.'s code (vcastin/2025-transformers-PDEs, ``evolution``) integrates `Σ' = F(Σ)` with
explicit Euler steps, projects each iterate onto the PSD cone (negative eigenvalues set to
`1e-14`) and stops a trajectory at `‖F(Σ)‖_F < tol_low` ("converged") or `tr Σ > tol_high`
("diverged"). Re-running it explains their counts where an accurate solve differs (spec
dynamics.md §7a item 6: 642 / 6 for L2). Everything is batched over `(N, 2, 2)` with the `2 × 2`
inverse and eigen-decomposition in closed form, in one jitted ``while_loop``.

- :func:`l2_rhs_2x2`: the authors' ``rhs_L2``.
- :func:`psd_projection_2x2`: the authors' ``psd_projection``.
- :func:`projected_euler_l2`: the loop, an :class:`EulerOutcome` per member.
"""

from __future__ import annotations

from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, Int

from ..errors import ParameterError

__all__ = ["EulerOutcome", "l2_rhs_2x2", "psd_projection_2x2", "projected_euler_l2"]


class EulerOutcome(eqx.Module):
    """Per member: `outcome` (int32: 1 converged, 2 diverged, 0 neither within `max_iter`), `stop`
    (the iteration it stopped at, −1 if it did not) and `peak` (the largest trace seen), each `(N,)`."""

    outcome: Int[Array, " N"]
    stop: Int[Array, " N"]
    peak: Float[Array, " N"]


def l2_rhs_2x2(
    S: Float[ArrayLike, "N 2 2"], V: Float[ArrayLike, "2 2"], A: Float[ArrayLike, "2 2"], KK: Float[ArrayLike, "2 2"]
) -> Float[Array, "N 2 2"]:
    """The authors' ``rhs_L2``: `2VS(I + 2KᵀKS)⁻¹AS` + transpose, batched, `2 × 2` inverse in closed form.

    **Arguments:** `S`: `(N, 2, 2)` covariances; `V`: value matrix; `A`: `KᵀQ` (with the paper's
    `Q/√d`); `KK`: `KᵀK`.

    **Returns:** `(N, 2, 2)` float `Σ'`.

    **Raises:** nothing of its own (shapes are checked by the jaxtyping annotations).

    Source: the authors' ``utils.py`` (``rhs_L2``); spec dynamics.md §2 (L2 Gaussian map).

    **Example:** with `V = I`, `A = −I` and `K = 0`, `Σ' = −4Σ²`:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics.projected_euler import l2_rhs_2x2
    >>> rhs = l2_rhs_2x2(jnp.eye(2)[None] * 0.5, jnp.eye(2), -jnp.eye(2), jnp.zeros((2, 2)))
    >>> rhs.shape, bool(jnp.allclose(rhs, -jnp.eye(2)))
    ((1, 2, 2), True)

    ```
    """
    S = jnp.asarray(S)
    B = jnp.eye(2) + 2.0 * KK @ S
    det = B[:, 0, 0] * B[:, 1, 1] - B[:, 0, 1] * B[:, 1, 0]
    inv = (
        jnp.stack([jnp.stack([B[:, 1, 1], -B[:, 0, 1]], -1), jnp.stack([-B[:, 1, 0], B[:, 0, 0]], -1)], -2)
        / det[:, None, None]
    )
    r = 2.0 * V @ S @ inv @ A @ S
    return r + jnp.swapaxes(r, -1, -2)


def psd_projection_2x2(S: Float[ArrayLike, "N 2 2"], floor: float = 1e-14) -> Float[Array, "N 2 2"]:
    """The authors' ``psd_projection``: negative eigenvalues of symmetric `2 × 2` matrices set to `floor`.

    Matrices with no negative eigenvalue are returned unchanged (bit for bit).

    **Arguments:** `S`: `(N, 2, 2)` symmetric; `floor`: the replacement eigenvalue.

    **Returns:** `(N, 2, 2)` float.

    **Raises:** nothing of its own.

    Source: the authors' ``utils.py`` (``psd_projection``), eigenvalues in closed form (derived).

    **Example:**

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics.projected_euler import psd_projection_2x2
    >>> psd_projection_2x2(jnp.array([[[1.0, 0.0], [0.0, -2.0]]]), floor=0.0).tolist()
    [[[1.0, 0.0], [0.0, 0.0]]]

    ```
    """
    S = jnp.asarray(S)
    a, b, c = S[:, 0, 0], S[:, 1, 1], S[:, 0, 1]
    m = 0.5 * (a + b)
    r = jnp.sqrt((0.5 * (a - b)) ** 2 + c**2)
    lo, hi = m - r, m + r
    safe_r = jnp.where(r > 0, r, 1.0)
    N = (S - m[:, None, None] * jnp.eye(2)) / safe_r[:, None, None]
    P_hi, P_lo = 0.5 * (jnp.eye(2) + N), 0.5 * (jnp.eye(2) - N)
    lo2, hi2 = jnp.where(lo < 0, floor, lo), jnp.where(hi < 0, floor, hi)
    rebuilt = jnp.where(
        (r > 0)[:, None, None],
        hi2[:, None, None] * P_hi + lo2[:, None, None] * P_lo,
        jnp.where(m < 0, floor, m)[:, None, None] * jnp.eye(2),
    )
    return jnp.where((lo < 0)[:, None, None], rebuilt, S)


@partial(jax.jit, static_argnames=("max_iter",))
def _projected_euler_l2(S0, V, A, KK, step, tol_low, tol_high, max_iter):
    def cond(state):
        i, _, outcome, _, _ = state
        return (i < max_iter) & jnp.any(outcome == 0)

    def body(state):
        i, S, outcome, stop, peak = state
        rhs = l2_rhs_2x2(S, V, A, KK)
        norm = jnp.sqrt(jnp.sum(rhs**2, axis=(-2, -1)))
        S_new = psd_projection_2x2(S + step * rhs)
        tr = S_new[:, 0, 0] + S_new[:, 1, 1]
        running = outcome == 0
        conv = running & (norm < tol_low)
        div = running & ~conv & (tr > tol_high)
        outcome = jnp.where(conv, 1, jnp.where(div, 2, outcome))
        stop = jnp.where(conv | div, i, stop)
        S = jnp.where(running[:, None, None], S_new, S)
        peak = jnp.where(running, jnp.maximum(peak, tr), peak)
        return i + 1, S, outcome, stop, peak

    n = S0.shape[0]
    init = (0, S0, jnp.zeros(n, jnp.int32), jnp.full(n, -1), jnp.trace(S0, axis1=-2, axis2=-1))
    _, _, outcome, stop, peak = jax.lax.while_loop(cond, body, init)
    return outcome, stop, peak


def projected_euler_l2(
    cov0: Float[ArrayLike, "N 2 2"],
    V: Float[ArrayLike, "2 2"],
    A: Float[ArrayLike, "2 2"],
    KK: Float[ArrayLike, "2 2"],
    *,
    step: float,
    tol_low: float,
    tol_high: float,
    max_iter: int = 50_000,
) -> EulerOutcome:
    """The authors' ``evolution`` (projected explicit Euler) for the L2 covariance ODE, all members at once.

    Each step: `F = rhs(Σ)`; a running member converges if `‖F‖_F < tol_low`, else takes
    `Σ ← proj_PSD(Σ + step·F)` and diverges if then `tr Σ > tol_high`. The loop ends when no
    member is running or after `max_iter` steps.

    **Arguments:** `cov0`: `(N, 2, 2)` initial covariances; `V`, `A` (`= KᵀQ`), `KK` (`= KᵀK`):
    the L2 parameters as in :func:`l2_rhs_2x2`; `step`: the Euler step; `tol_low`, `tol_high`:
    the two stops; `max_iter`: the iteration cap (the authors' default 50 000).

    **Returns:** an :class:`EulerOutcome`.

    **Raises:** :class:`~hassejax.errors.ParameterError` naming the argument for a non-positive
    `step` or `max_iter`.

    Source: the authors' ``utils.py`` (``evolution``); spec dynamics.md §7a item 6.

    **Example:** `Σ' = −4Σ²` from `Σ0 = I/2` creeps towards 0 and stops when `‖Σ'‖_F < 0.5`:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics.projected_euler import projected_euler_l2
    >>> out = projected_euler_l2(jnp.eye(2)[None] * 0.5, jnp.eye(2), -jnp.eye(2), jnp.zeros((2, 2)),
    ...                          step=0.01, tol_low=0.5, tol_high=1e3)
    >>> int(out.outcome[0]), int(out.stop[0]) > 0
    (1, True)

    ```
    """
    if not step > 0:
        raise ParameterError(f"`step` must be > 0; got {step!r}.")
    if isinstance(max_iter, bool) or int(max_iter) != max_iter or max_iter < 1:
        raise ParameterError(f"`max_iter` must be an integer >= 1; got {max_iter!r}.")
    outcome, stop, peak = _projected_euler_l2(
        jnp.asarray(cov0), jnp.asarray(V), jnp.asarray(A), jnp.asarray(KK), step, tol_low, tol_high, int(max_iter)
    )
    return EulerOutcome(outcome=outcome, stop=stop, peak=peak)
