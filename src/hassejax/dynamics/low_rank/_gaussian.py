"""Exact `k×k` form of the Gaussian moment ODE of a rank-`k` softmax head (derived; spec dynamics.md §2, §4).

With `μ = N(α, Σ)`, spec §2 gives `M = VΣA = W_O G Q` with the `k×k` matrix
`G = W_V Σ Kᵀ`, and `Σ(t) = Φ(t)Σ0Φ(t)ᵀ`, `Φ' = MΦ`, `Φ(0) = I`. Then

    `Φ(t) = I + W_O Ψ(t) Q`,   `Ψ' = G (I + QW_O Ψ)`,   `Ψ(0) = 0`   (`Ψ ∈ R^{k×k}`),
    `G = (W_V + VO Ψ Q) Σ0 (K + KO Ψ Q)ᵀ = S_VK + VO Ψ S_QK + S_VQ Ψᵀ KOᵀ + VO Ψ S_QQ Ψᵀ KOᵀ`,

with `VO = W_V W_O`, `KO = K W_O`, `S_XY = X Σ0 Yᵀ` (all `k×k`); the mean is
`α(t) = α0 + W_O b(t)`, `b' = G(Qα0 + QW_O b) + W_V α0 + VO b`. So the `d×d` moment ODE
of a rank-`k` head is a `k×k` ODE, exactly: every quantity the solver needs is a `k×k`
product, e.g. `tr Σ = tr Σ0 + 2⟨Ψ, W_OᵀΣ0Qᵀ⟩ + ⟨W_OᵀW_O Ψ, Ψ S_QQ⟩`. Since `Φ(t) − I` has
rank `≤ k`, `Σ(t)` differs from `Σ0` only on `range W_O` and its row space: at any finite
time `rank Σ(t) = rank Σ0`, and in the limit at most `k` directions can be lost.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ..._checks import check_memory
from ..._tracing import is_traced
from ...errors import ParameterError
from ...masks._runs import check_host_memory
from .. import _solve
from .._arguments import Controller, ProgressMeter, SaveTimes, Scalar, Solver
from .._linalg import below_psd, check_psd, symmetrize
from ..gaussian import HOST_CHECK_ARRAYS, MEMORY_UNCHECKED_BYTES
from ._common import AbstractReduction, head_products, solve_reduction, solve_settings
from ._kernel import LowRankSoftmax
from ._solution import LowRankGaussianSolution

__all__ = ["GaussianReduction", "solve_low_rank_gaussian"]


class GaussianReduction(AbstractReduction):
    """The `k×k` constants of the reduced moment ODE of one head on `N(α0, Σ0)` (module docstring).

    Build with :meth:`from_head`; the state is `(b, Ψ)`, shapes `(k,)`, `(k, k)`.

    Source: (derived) from spec dynamics.md §2 (`Σ(t) = Φ(t)Σ0Φ(t)ᵀ`, `Φ' = MΦ`, softmax `M = VΣA`) for a rank-`k`
    head.

    **Example:** the head `Q = K = W_V = e₁ᵀ`, `W_O = e₁` on `N(0, I/2)`: `Ψ' = G(1 + Ψ)`, `G = S_VK = 1/2` at
    `Ψ = 0`, and the mean stays put (`b' = 0`):

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import LowRankSoftmax
    >>> from hassejax.dynamics.low_rank import GaussianReduction
    >>> e = jnp.array([[1.0, 0.0]])
    >>> red = GaussianReduction.from_head(LowRankSoftmax(e, e, e, e.T), jnp.zeros(2), jnp.eye(2) / 2)
    >>> db, dpsi = red.vector_field(0.0, red.initial_state())
    >>> db.tolist(), dpsi.tolist(), red.S_VK.tolist()
    ([0.0], [[0.5]], [[0.5]])

    ```
    """

    S_VK: Float[Array, "k k"]
    S_VQ: Float[Array, "k k"]
    S_QK: Float[Array, "k k"]
    S_QQ: Float[Array, "k k"]
    C_OQ: Float[Array, "k k"]
    q_alpha: Float[Array, " k"]
    v_alpha: Float[Array, " k"]
    trace0: Float[Array, ""]

    @classmethod
    def from_head(
        cls, model: LowRankSoftmax, mean0: Float[ArrayLike, " d"], cov0: Float[ArrayLike, "d d"]
    ) -> GaussianReduction:
        """The constants for head `model` (unbatched) from `N(mean0, cov0)` (jittable; no value checks)."""
        Q, K, W_V, W_O = model.Q, model.K, model.W_V, model.W_O
        s0 = 0.5 * (jnp.asarray(cov0) + jnp.asarray(cov0).T)
        a0 = jnp.asarray(mean0)
        qs, vs = Q @ s0, W_V @ s0
        return cls(
            **head_products(model),
            S_VK=vs @ K.T,
            S_VQ=vs @ Q.T,
            S_QK=qs @ K.T,
            S_QQ=qs @ Q.T,
            C_OQ=(qs @ W_O).T,
            q_alpha=Q @ a0,
            v_alpha=W_V @ a0,
            trace0=jnp.trace(s0),
        )

    def initial_state(self):
        """`(b, Ψ) = (0, 0)`."""
        k = self.QO.shape[0]
        return jnp.zeros((k,), self.QO.dtype), jnp.zeros((k, k), self.QO.dtype)

    def vector_field(self, t, y):
        """`(b', Ψ')` (module docstring)."""
        b, psi = y
        vp = self.VO @ psi
        g = self.S_VK + vp @ self.S_QK + self.S_VQ @ psi.T @ self.KO.T + vp @ self.S_QQ @ psi.T @ self.KO.T
        dpsi = g + g @ self.QO @ psi
        db = g @ (self.q_alpha + self.QO @ b) + self.v_alpha + self.VO @ b
        return db, dpsi

    def size(self, y) -> Array:
        """`tr Σ` from `Ψ` (module docstring)."""
        _, psi = y
        return self.trace0 + 2.0 * jnp.sum(psi * self.C_OQ) + jnp.sum((self.OO @ psi) * (psi @ self.S_QQ))

    def size_floor(self, y) -> Array:
        """`eps` times the sum of the magnitudes of `size`'s terms: its rounding error where they cancel."""
        _, psi = y
        terms = jnp.abs(self.trace0) + 2.0 * jnp.sum(jnp.abs(psi * self.C_OQ))
        terms = terms + jnp.abs(jnp.sum((self.OO @ psi) * (psi @ self.S_QQ)))
        return jnp.finfo(psi.dtype).eps * terms

    def solution(self, out) -> LowRankGaussianSolution:
        """The solution type."""
        (b, psi), (b_f, psi_f) = out.ys, out.y_final
        return LowRankGaussianSolution.from_integrate(out, b=b, psi=psi, b_final=b_f, psi_final=psi_f)


def solve_low_rank_gaussian(
    model: LowRankSoftmax, mean0: Float[ArrayLike, " _d"], cov0: Float[ArrayLike, "_d _d"], *, t1: Scalar,
    t0: Scalar = 0.0, ts: SaveTimes | None = None, solver: Solver | None = None, rtol: Scalar = 1e-8, atol: Scalar = 1e-8,
    dt0: Scalar | None = None, stepsize_controller: Controller | None = None, max_steps: int = 100_000,
    size_threshold: Scalar | None = None, blowup_estimate: str = "extrapolated",
    progress_meter: ProgressMeter | None = None,
) -> LowRankGaussianSolution:  # fmt: skip
    """The Gaussian moment ODE (spec §2) of a rank-`k` softmax head from `N(mean0, cov0)`, solved in `k×k` form.

    Exactly the solve of :func:`~hassejax.dynamics.solve_gaussian` ``(model, mean0, cov0)``
    (same events: the size event on `tr Σ` at `size_threshold`, classified by the decade
    test as `blow_up` (with `t*`) or `diverge`; statuses of spec §4), but the state is
    `(b, Ψ)` (`k + k²` numbers, module docstring) instead of a `d×d` factor: `d = 384 → k = 32`
    for all-MiniLM-L6-v2. No steady-state event: converging solves run to `t1`. Jit-compiled,
    vmappable over heads and initial conditions; but a vmapped solve steps every member until the slowest stops, and
    trained heads' step counts differ widely (all-MiniLM-L6-v2's layer 3: 155 to 5,688), so for such heads call one
    jitted solve head by head (``experiments/real_heads.py``: 12.2 s vmapped, 3.3 s head by head).

    **Arguments:**

    - `model`: the head (:class:`~hassejax.dynamics.LowRankSoftmax`, unbatched: ``vmap`` over heads).
    - `mean0`: `(d,)` float; `cov0`: `(d, d)` symmetric PSD (may be singular).
    - `t1`, `t0` (default 0): time interval; `ts`: `(T,)` save times in `[t0, t1]` (default `[t0, t1]`).
    - `solver`: a diffrax solver (default ``Tsit5()``).
    - `rtol`, `atol`: tolerances of the default controller ``PIDController(rtol, atol)``.
    - `dt0`: initial (or constant) step; `stepsize_controller`: replaces the default controller.
    - `max_steps`: step budget.
    - `size_threshold`: the event threshold on `tr Σ` (default `1e8 · tr Σ0`, `1e4 ·` in float32;
      a concrete `inf`: no size event, as in
      :func:`~hassejax.dynamics.solve_gaussian`).
    - `blowup_estimate`: ``"extrapolated"`` (default) or ``"threshold"``.
    - `progress_meter`: a diffrax progress meter, e.g. ``diffrax.TqdmProgressMeter()`` (None:
      none). It adds a host callback, so the compiled program is not persistently cached.

    **Returns:** a :class:`~hassejax.dynamics.LowRankGaussianSolution` (state `b`, `psi`;
    :meth:`~hassejax.dynamics.LowRankGaussianSolution.moments` gives `α(t)`, `Σ(t)`).

    **Raises:** :class:`~hassejax.errors.ParameterError` for a model that is not a
    :class:`~hassejax.dynamics.LowRankSoftmax` or is batched, inconsistent shapes,
    non-finite (concrete) `mean0` or `cov0`, a concrete `cov0` that is not symmetric PSD (as
    :func:`~hassejax.dynamics.solve_gaussian`; a traced one, a sweep member, ends ``indefinite``), bad times, tolerances or thresholds (a concrete
    `size_threshold` at or below `tr Σ0`), an unknown `blowup_estimate`, a `mean0` or `cov0` in half precision
    (float16, bfloat16; they are not promoted to the model's dtype) or a model in half precision;
    :class:`~hassejax.errors.MemoryBudgetError` naming `cov0`, before it is copied, when the `(d, d)` copies of the
    set-up (about four on the device; on the host its copy and the PSD check's float64 ones for a concrete `cov0`)
    exceed 80 % of
    the free memory.

    Source: (derived), module docstring; spec dynamics.md §2, §4.

    **Example:** a head with `A = V = diag(1, 0)` blows up at `t* = 1/(2 Σ0[0, 0]) = 1` (spec §3):

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import LowRankSoftmax, solve_low_rank_gaussian, status_names
    >>> e = jnp.array([[1.0, 0.0]])
    >>> sol = solve_low_rank_gaussian(LowRankSoftmax(e, e, e, e.T), jnp.zeros(2), jnp.eye(2) / 2, t1=5.0, rtol=1e-6, atol=1e-6)
    >>> status_names(sol.status), round(float(sol.t_blowup), 3), sol.psi.shape
    ('blow_up', 1.0, (2, 1, 1))

    ```
    """
    model = _check_model(model)
    d = model.d
    if np.shape(mean0) != (d,) or np.shape(cov0) != (d, d):  # NumPy's: lists without a deprecation warning
        raise ParameterError(
            f"`mean0` must have shape ({d},) and `cov0` ({d}, {d}); got {np.shape(mean0)} and {np.shape(cov0)}."
        )
    dtype = model.Q.dtype
    _check_setup_memory(cov0, d, dtype)  # from the shapes, before `cov0` is copied
    concrete_inputs = {"mean0": _solve.concrete(mean0), "cov0": _solve.concrete(cov0)}
    for name, v in concrete_inputs.items():
        if v is not None and not np.all(np.isfinite(v)):
            raise ParameterError(f"`{name}` must be finite; got NaN/inf entries.")
    _solve.check_state_precision(
        dtype, {"mean0": jnp.asarray(mean0), "cov0": jnp.asarray(cov0)},
        f"{jnp.dtype(dtype).name} (eps {float(jnp.finfo(dtype).eps):.1e}) resolves neither a useful rtol nor the times "
        "near a blow-up", "model",
    )  # fmt: skip
    settings = solve_settings(
        dtype, t0=t0, t1=t1, ts=ts, solver=solver, rtol=rtol, atol=atol, dt0=dt0,
        stepsize_controller=stepsize_controller, max_steps=max_steps, size_threshold=size_threshold,
        blowup_estimate=blowup_estimate, progress_meter=progress_meter,
    )  # fmt: skip
    cov_c = concrete_inputs["cov0"]  # the input as given (concrete under jit too)
    indefinite = None
    if cov_c is not None:  # a fresh user: -I/2 ended `completed`, diag(.5, -.5) `blow_up` (solve_gaussian refuses both)
        check_psd(cov_c, "cov0")
    else:  # traced (a sweep member): flagged `indefinite` by check_psd's rule, as solve_gaussian flags it (a review)
        sym = symmetrize(jnp.asarray(cov0, dtype))
        indefinite = below_psd(sym, jnp.linalg.eigvalsh(sym)[..., 0], jnp.asarray(cov0).dtype)
    reduction = GaussianReduction.from_head(model, jnp.asarray(mean0, dtype), jnp.asarray(cov0, dtype))
    if size_threshold is not None and cov_c is not None:
        _solve.check_size_threshold(size_threshold, np.trace(cov_c.astype(np.float64)), "tr Σ0", dtype)
    return solve_reduction(reduction, settings, indefinite)


SETUP_ARRAYS = 4
"""`(d, d)` arrays of the model's dtype the set-up of the reduction holds on the device (`cov0` converted, its
transpose, the symmetrised `Σ0`), the `(k, k)` solve itself being small."""


def _check_setup_memory(cov0, d: int, dtype) -> None:
    """Raise :class:`~hassejax.errors.MemoryBudgetError` naming `cov0` when the `(d, d)` copies of the set-up
    (:data:`SETUP_ARRAYS` on the device; on the host, for a concrete `cov0`, its copy, the finite check's mask and the
    PSD check's float64 arrays, as :func:`~hassejax.dynamics.solve_gaussian`'s) cannot fit in the free memory (as :func:`~hassejax.dynamics.solve_gaussian`)."""
    need = SETUP_ARRAYS * d * d * jnp.dtype(dtype).itemsize
    hint = "Use a smaller d (the reduced solve itself is k×k: the set-up's (d, d) copies of cov0 are the cost)."
    if need >= MEMORY_UNCHECKED_BYTES:
        check_memory(
            need, f"the set-up of the rank-k solve (about {SETUP_ARRAYS} ({d}, {d}) arrays)", "cov0", hint=hint
        )
    if not is_traced(cov0):
        item = jnp.dtype(cov0.dtype).itemsize if hasattr(cov0, "dtype") else 8
        what = (
            f"the value checks of `cov0` (symmetric and PSD: its copy and about {HOST_CHECK_ARRAYS} float64 arrays, "
            f"({d}, {d}) each, on the host)"
        )
        check_host_memory((item + 1 + 8 * HOST_CHECK_ARRAYS) * d * d, what, "cov0", hint=hint)


def _check_model(model) -> LowRankSoftmax:
    if not isinstance(model, LowRankSoftmax):
        raise ParameterError(
            f"`model` must be a LowRankSoftmax (a rank-k head: Q, K, W_V, W_O); got {type(model).__name__}."
        )
    model.check_unbatched("model")
    return model
