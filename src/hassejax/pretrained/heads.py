"""Trained attention heads as dynamical systems: residual-space parameters and exact rank-`k` solves.

**Mapping (derived from the BERT forward pass, :mod:`.bert`).** Head `h` of layer `l`
has `W_{Q,h}, W_{K,h}, W_{V,h}` = rows `h·k … (h+1)·k − 1` of the query/key/value weights
(`k = d_head = d/H`, each `k×d`) and `W_{O,h}` = the same *columns* of the attention output
weight (`d×k`). Without biases the head's update of a token `x` is
`Σ_j softmax_j(⟨W_{Q,h}x, W_{K,h}x_j⟩/√k) W_{O,h}W_{V,h}x_j`, the softmax velocity field of
spec dynamics.md §1 (`β = 1`, queries scaled by `1/√k` as in the paper's multi-head
scaling) with

    `A_h = W_{K,h}ᵀ W_{Q,h} / √k`   (logit of query `x` against key `y`: `yᵀA_h x`),
    `V_h = W_{O,h} W_{V,h}`          (the value-output map `C_h` of spec §1),

both `d×d` of rank at most `k`. Below `Q = W_{Q,h}/√k` (scaled), `K = W_{K,h}`,
`W_V = W_{V,h}`, `W_O = W_{O,h}`. One layer of the model is one explicit Euler step of
length 1 of the sum of its heads' fields (plus biases), then LayerNorm and the FFN; here
every head is a dynamical system of its own in continuous depth `t` (`t = 1` ≈ one layer).
**Biases are left out** (`b_Q` adds a key-only logit term, which the softmax does not
cancel in general, `b_K` a per-query constant that it does cancel, `b_V` and `b_O` a
constant drift), and so are LayerNorm, the FFN and the sum over heads.

**Exact rank-`k` reduction of the Gaussian moment ODE (derived).** With `μ = N(α, Σ)`,
spec §2 gives `M = VΣA = W_O G Q` with the `k×k` matrix `G = W_V Σ Kᵀ`, and `Σ(t) =
Φ(t)Σ0Φ(t)ᵀ`, `Φ' = MΦ`, `Φ(0) = I`. Then

    `Φ(t) = I + W_O Ψ(t) Q`,   `Ψ' = G (I + QW_O Ψ)`,   `Ψ(0) = 0`   (`Ψ ∈ R^{k×k}`),
    `G = (W_V + VO Ψ Q) Σ0 (K + KO Ψ Q)ᵀ = S_VK + VO Ψ S_QK + S_VQ Ψᵀ KOᵀ + VO Ψ S_QQ Ψᵀ KOᵀ`,

with `VO = W_V W_O`, `KO = K W_O`, `S_XY = X Σ0 Yᵀ` (all `k×k`); the mean is
`α(t) = α0 + W_O b(t)`, `b' = G(Qα0 + QW_O b) + W_V α0 + VO b`. So the `d×d` moment ODE
of a rank-`k` head is a `k×k` ODE (`d = 384 → k = 32` for all-MiniLM-L6-v2), exactly:
every quantity the solver needs is a `k×k` product, e.g.
`tr Σ = tr Σ0 + 2⟨Ψ, W_OᵀΣ0Qᵀ⟩ + ⟨W_OᵀW_O Ψ, Ψ S_QQ⟩`. Since `Φ(t) − I` has rank `≤ k`,
`Σ(t)` differs from `Σ0` only on `range W_O` and its row space: at any finite time
`rank Σ(t) = rank Σ0`, and in the limit at most `k` directions can be lost.

**Exact reduction of the particle system (derived).** Every velocity lies in
`range W_O`, so `x_i(t) = x_i(0) + W_O z_i(t)` with `z_i ∈ R^k` and
`ż_i = Σ_j w_ij (W_V x_j(0) + VO z_j)`, `w_i = softmax_j((Qx_i(0) + QW_O z_i)·(Kx_j(0) + KO z_j))`
over the keys allowed by the mask: `O(n²k)` per evaluation instead of `O(n²d + nd²)`.

Both reduced systems are solved with the package's shared solve machinery (the events,
statuses and blow-up test of :func:`~hassejax.dynamics.solve_gaussian` /
:func:`~hassejax.dynamics.solve_particles`, spec §4); the tests check them against those
solvers run on the full `d×d` parameters.
"""

from __future__ import annotations

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float, Int

from ...errors import ParameterError
from .. import _solve
from ..params import AttentionParams
from .loader import BertWeights

__all__ = [
    "HeadParameters",
    "head_parameters",
    "output_rank",
    "naive_spectrum",
    "naive_spectrum_low_rank",
    "naive_regime",
    "empirical_moments",
    "HeadSolution",
    "GaussianReduction",
    "gaussian_reduction",
    "solve_head_gaussian",
    "head_gaussian_moments",
    "solve_head_particles",
    "head_particle_tokens",
]


# --------------------------------------------------------------------------- parameters
class HeadParameters(eqx.Module):
    """Per-layer, per-head projections of a BERT encoder, in residual (token) space.

    Fields (`L` layers, `H` heads, `k = d/H`, `d` hidden size):

    - `Q`: `(L, H, k, d)` scaled query projections `W_{Q,h}/√k`;
    - `K`: `(L, H, k, d)` key projections `W_{K,h}`;
    - `W_V`: `(L, H, k, d)` value projections `W_{V,h}`;
    - `W_O`: `(L, H, d, k)` output projections `W_{O,h}` (columns of the output weight).

    Properties `A = KᵀQ` and `V = W_O W_V`, both `(L, H, d, d)`.
    """

    Q: Float[Array, "L H k d"]
    K: Float[Array, "L H k d"]
    W_V: Float[Array, "L H k d"]
    W_O: Float[Array, "L H d k"]

    @property
    def A(self) -> Float[Array, "L H d d"]:
        """`A_h = W_{K,h}ᵀ W_{Q,h}/√k` (logit of query `x` against key `y`: `yᵀA_h x`)."""
        return jnp.swapaxes(self.K, -1, -2) @ self.Q

    @property
    def V(self) -> Float[Array, "L H d d"]:
        """`V_h = W_{O,h} W_{V,h}` (value-output map)."""
        return self.W_O @ self.W_V

    @property
    def shape(self) -> tuple[int, int]:
        """`(L, H)`."""
        return tuple(self.Q.shape[:2])

    def params(self, layer: int, head: int) -> AttentionParams:
        """The head's :class:`~hassejax.dynamics.AttentionParams` in `R^d` (`V = V_h`, `Q`, `K`; `A = KᵀQ`, `β = 1`)."""
        return AttentionParams(V=self.V[layer, head], Q=self.Q[layer, head], K=self.K[layer, head])


def head_parameters(weights: BertWeights, dtype=jnp.float64) -> HeadParameters:
    """Split every layer's attention weights into heads (mapping in the module docstring).

    **Arguments:** `weights` from :func:`~hassejax.dynamics.real.loader.load_weights`;
    `dtype` of the result (float64 needs ``jax_enable_x64``; otherwise JAX uses float32).

    **Returns:** :class:`HeadParameters`.

    **Raises:** :class:`~hassejax.errors.ParameterError` if `weights` is not a ``BertWeights``.
    """
    if not isinstance(weights, BertWeights):
        raise ParameterError(f"`weights` must be a BertWeights (from load_weights); got {type(weights).__name__}.")
    c = weights.config
    n_l, h, k, d = c.num_hidden_layers, c.num_attention_heads, c.head_dim, c.hidden_size

    def rows(w):  # (L, d_out, d_in) -> (L, H, k, d_in)
        return np.asarray(w, np.float64).reshape(n_l, h, k, d)

    q = rows(weights.query_weight) / np.sqrt(k)
    kk = rows(weights.key_weight)
    wv = rows(weights.value_weight)
    wo = np.asarray(weights.output_weight, np.float64).reshape(n_l, d, h, k).transpose(0, 2, 1, 3)
    cv = lambda a: jnp.asarray(a, dtype)  # noqa: E731
    return HeadParameters(Q=cv(q), K=cv(kk), W_V=cv(wv), W_O=cv(wo))


def output_rank(W_O: Float[ArrayLike, "*batch d k"], rtol: float = 1e-6) -> np.ndarray:
    """Numerical rank of `W_O` (singular values above `rtol · σ_max`), host side; `V_h` has this rank at most."""
    s = np.linalg.svd(np.asarray(W_O), compute_uv=False)
    return np.sum(s > rtol * s[..., :1], axis=-1)


def naive_spectrum(V: Float[ArrayLike, "*batch d d"], A: Float[ArrayLike, "*batch d d"]) -> Float[Array, "*batch d"]:
    """Eigenvalues of `VA + AᵀVᵀ`, decreasing (the naive spectral reading, spec dynamics.md §3).

    The rule "`VA + AᵀVᵀ ⪯ 0` ⇒ clustering, a positive eigenvalue ⇒ blow-up" is exact only
    when `V`, `A`, `Σ0` commute (spec §3) and false in general (spec §3 has a
    counterexample); it is shown beside the solved regime, never used as a verdict. For a
    rank-`k` head `VA = W_O(W_V Kᵀ)Q` has rank `≤ k`, and the symmetric part `S + Sᵀ` of a
    rank-`k` matrix `S = FGᵀ` is `[F G] [[0, I], [I, 0]] [F G]ᵀ`: it has `k` positive and `k`
    negative eigenvalues whenever `[F G]` has rank `2k` (derived), so the naive rule reads
    "blow-up" for every generic low-rank head.
    """
    V, A = jnp.asarray(V), jnp.asarray(A)
    s = V @ A
    s = s + jnp.swapaxes(s, -1, -2)
    return jnp.flip(jnp.linalg.eigvalsh(s), axis=-1)


def naive_spectrum_low_rank(
    Q: Float[ArrayLike, "*batch k d"], K: Float[ArrayLike, "*batch k d"], W_V: Float[ArrayLike, "*batch k d"], W_O: Float[ArrayLike, "*batch d k"]
) -> Float[Array, "*batch m"]:
    """The `m = 2k` eigenvalues of `VA + AᵀVᵀ` that can be non-zero, decreasing, from `2k×2k` matrices (derived).

    `VA = FGᵀ` with `F = W_O W_V Kᵀ` and `G = Qᵀ` (`d×k`), so `VA + AᵀVᵀ = BJBᵀ` with
    `B = [F G]` and `J = [[0, I], [I, 0]]`; its non-zero eigenvalues are those of `JBᵀB`,
    i.e. of the symmetric `RJR` with `R = (BᵀB)^{1/2}`. The remaining `d − 2k` eigenvalues
    are zero. Same values as :func:`naive_spectrum` at `O(dk²)` instead of `O(d³)`.
    """
    Q, K, W_V, W_O = (jnp.asarray(z) for z in (Q, K, W_V, W_O))
    f = W_O @ (W_V @ jnp.swapaxes(K, -1, -2))
    b = jnp.concatenate([f, jnp.swapaxes(Q, -1, -2)], axis=-1)
    k = Q.shape[-2]
    gram = jnp.swapaxes(b, -1, -2) @ b
    w, u = jnp.linalg.eigh(0.5 * (gram + jnp.swapaxes(gram, -1, -2)))
    r = (u * jnp.sqrt(jnp.clip(w, 0.0, None))[..., None, :]) @ jnp.swapaxes(u, -1, -2)
    j = jnp.roll(jnp.eye(2 * k, dtype=r.dtype), k, axis=-1)
    m = r @ j @ r
    return jnp.flip(jnp.linalg.eigvalsh(0.5 * (m + jnp.swapaxes(m, -1, -2))), axis=-1)


def naive_regime(eigenvalues: Float[ArrayLike, "*batch d"], rtol: float = 1e-9) -> np.ndarray:
    """The naive reading of :func:`naive_spectrum`: ``"blow_up"`` where `λ_max > rtol · max|λ|`, else ``"cluster"`` (host side)."""
    e = np.asarray(eigenvalues)
    scale = np.max(np.abs(e), axis=-1)
    out = np.where(e[..., 0] > rtol * np.maximum(scale, np.finfo(float).tiny), "blow_up", "cluster")
    return out.astype(object)


def empirical_moments(
    x: Float[ArrayLike, "n d"], weights: Bool[ArrayLike, " n"] | None = None
) -> tuple[Float[Array, " d"], Float[Array, "d d"]]:
    """Mean and covariance (normalised by the count, not count − 1) of the selected tokens.

    **Arguments:** `x` `(n, d)`; `weights` `(n,)` Boolean selection (default all).

    **Returns:** `(mean (d,), cov (d, d))`, the moments of `μ = (1/n) Σ_i δ_{x_i}` over the selection.
    """
    x = jnp.asarray(x)
    w = jnp.ones(x.shape[0], x.dtype) if weights is None else jnp.asarray(weights, x.dtype)
    n = jnp.sum(w)
    mean = (w @ x) / n
    xc = (x - mean) * w[:, None]
    return mean, (xc.T @ (x - mean)) / n


# --------------------------------------------------------------------------- solutions
class HeadSolution(eqx.Module):
    """A solve of one head in its exact reduced coordinates (fields gain batch axes under ``vmap``).

    Status fields as in :class:`~hassejax.dynamics.result.AbstractSolution` (`status` is a
    :class:`~hassejax.dynamics.Status` code; `t_blowup` is `inf` unless `blow_up`;
    `decade_ratio` is the blow-up test of spec §4), plus the reduced state:

    - Gaussian (:func:`solve_head_gaussian`): `state = (b, Ψ)`, shapes `(T, k)` and `(T, k, k)`
      (`α = α0 + W_O b`, `Φ = I + W_O Ψ Q`, `Σ = ΦΣ0Φᵀ`; see :func:`head_gaussian_moments`);
    - particles (:func:`solve_head_particles`): `state = z`, shape `(T, S, N, k)`
      (`x = x0 + z W_Oᵀ`; see :func:`head_particle_tokens`).

    `state_final` is the state at `t_final`; `valid[i]` marks saved points at or before the stop.
    """

    ts: Float[Array, "*batch T"]
    valid: Bool[Array, "*batch T"]
    status: Int[Array, "*batch"]
    t_final: Float[Array, "*batch"]
    t_blowup: Float[Array, "*batch"]
    blowup_method: Int[Array, "*batch"]
    growth_exponent: Float[Array, "*batch"]
    decade_ratio: Float[Array, "*batch"]
    num_steps: Int[Array, "*batch"]
    state: object
    state_final: object


def _solution(out) -> HeadSolution:
    return HeadSolution(
        ts=out.ts,
        valid=out.valid,
        status=out.status,
        t_final=out.t_final,
        t_blowup=out.t_blowup,
        blowup_method=out.blowup_method,
        growth_exponent=out.growth_exponent,
        decade_ratio=out.decade_ratio,
        num_steps=out.num_steps,
        state=out.ys,
        state_final=out.y_final,
    )


def _check_head(Q, K, W_V, W_O):
    Q, K, W_V, W_O = (jnp.asarray(z) for z in (Q, K, W_V, W_O))
    if Q.ndim != 2 or K.shape != Q.shape or W_V.shape != Q.shape or W_O.shape != Q.shape[::-1]:
        raise ParameterError(
            "`Q`, `K`, `W_V` must have shape (k, d) and `W_O` shape (d, k); "
            f"got {Q.shape}, {K.shape}, {W_V.shape}, {W_O.shape}."
        )
    return Q, K, W_V, W_O


def _times(t1, ts, dtype):
    t0 = jnp.zeros((), dtype)
    t1 = jnp.asarray(t1, dtype)
    ts = jnp.stack([t0, t1]) if ts is None else jnp.asarray(ts, dtype)
    _solve.check_times(t0, t1, ts)
    return t0, t1, ts


# --------------------------------------------------------------------------- Gaussian
class GaussianReduction(eqx.Module):
    """The `k×k` constants of the reduced moment ODE of one head on `N(α0, Σ0)` (module docstring)."""

    QO: Float[Array, "k k"]
    KO: Float[Array, "k k"]
    VO: Float[Array, "k k"]
    OO: Float[Array, "k k"]
    S_VK: Float[Array, "k k"]
    S_VQ: Float[Array, "k k"]
    S_QK: Float[Array, "k k"]
    S_QQ: Float[Array, "k k"]
    C_OQ: Float[Array, "k k"]
    q_alpha: Float[Array, " k"]
    v_alpha: Float[Array, " k"]
    trace0: Float[Array, ""]


def gaussian_reduction(
    Q: Float[ArrayLike, "k d"],
    K: Float[ArrayLike, "k d"],
    W_V: Float[ArrayLike, "k d"],
    W_O: Float[ArrayLike, "d k"],
    mean0: Float[ArrayLike, " d"],
    cov0: Float[ArrayLike, "d d"],
) -> GaussianReduction:
    """Precompute the `k×k` constants of the reduced moment ODE (jittable, vmappable; no value checks)."""
    Q, K, W_V, W_O = _check_head(Q, K, W_V, W_O)
    s0 = 0.5 * (jnp.asarray(cov0) + jnp.asarray(cov0).T)
    a0 = jnp.asarray(mean0)
    qs, ks, vs = Q @ s0, K @ s0, W_V @ s0
    return GaussianReduction(
        QO=Q @ W_O,
        KO=K @ W_O,
        VO=W_V @ W_O,
        OO=W_O.T @ W_O,
        S_VK=vs @ K.T,
        S_VQ=vs @ Q.T,
        S_QK=qs @ K.T,
        S_QQ=qs @ Q.T,
        C_OQ=(qs @ W_O).T,
        q_alpha=Q @ a0,
        v_alpha=W_V @ a0,
        trace0=jnp.trace(s0),
    )


def _gaussian_field(r: GaussianReduction, y):
    b, psi = y
    vp = r.VO @ psi
    g = r.S_VK + vp @ r.S_QK + r.S_VQ @ psi.T @ r.KO.T + vp @ r.S_QQ @ psi.T @ r.KO.T
    dpsi = g + g @ r.QO @ psi
    db = g @ (r.q_alpha + r.QO @ b) + r.v_alpha + r.VO @ b
    return db, dpsi


def _gaussian_trace(r: GaussianReduction, y):
    _, psi = y
    return r.trace0 + 2.0 * jnp.sum(psi * r.C_OQ) + jnp.sum((r.OO @ psi) * (psi @ r.S_QQ))


@eqx.filter_jit
def _solve_gaussian_core(r, t0, t1, ts, threshold, rtol, atol, max_steps, extrapolate):
    k = r.QO.shape[0]
    y0 = (jnp.zeros((k,), r.QO.dtype), jnp.zeros((k, k), r.QO.dtype))
    if threshold is None:
        threshold = _solve.default_size_factor(r.trace0.dtype) * jnp.where(r.trace0 > 0, r.trace0, 1.0)
    out = _solve.integrate(
        lambda t, y: _gaussian_field(r, y),
        y0,
        t0=t0,
        t1=t1,
        ts=ts,
        size=lambda y: _gaussian_trace(r, y),
        speed=None,
        threshold=threshold,
        converge_tol=None,
        solver=diffrax.Tsit5(),
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
        dt0=None,
        max_steps=max_steps,
        extrapolate=extrapolate,
    )
    return _solution(out)


def solve_head_gaussian(
    Q: Float[ArrayLike, "k d"],
    K: Float[ArrayLike, "k d"],
    W_V: Float[ArrayLike, "k d"],
    W_O: Float[ArrayLike, "d k"],
    mean0: Float[ArrayLike, " d"],
    cov0: Float[ArrayLike, "d d"],
    *,
    t1: float | Float[ArrayLike, ""],
    ts: Float[ArrayLike, " T"] | None = None,
    rtol: float = 1e-8,
    atol: float = 1e-8,
    max_steps: int = 100_000,
    size_threshold: float | Float[ArrayLike, ""] | None = None,
    blowup_estimate: str = "extrapolated",
) -> HeadSolution:
    """Gaussian moment ODE (softmax, spec §2) of the head `A = KᵀQ`, `V = W_O W_V` from `N(mean0, cov0)`, in `k×k` form.

    Exactly the solve of :func:`~hassejax.dynamics.solve_gaussian` ``("softmax",
    AttentionParams(V=W_O W_V, Q=Q, K=K), mean0, cov0)`` (same events: the size event on
    `tr Σ` at `size_threshold`, default `1e8 · tr Σ0` (`1e4 ·` in float32), classified by the decade test as
    `blow_up` (with `t*`) or `diverge`; statuses of spec §4), but the state is `(b, Ψ)`
    (`k` + `k²` numbers, module docstring) instead of a `d×d` factor. No steady-state
    event: converging solves run to `t1` (read limit ranks after a long horizon).
    Jit-compiled, vmappable over heads and initial conditions.

    **Arguments:** `Q` (scaled query) `K`, `W_V` `(k, d)`; `W_O` `(d, k)`; `mean0` `(d,)`;
    `cov0` `(d, d)` symmetric PSD (may be singular); `t1 > 0`; `ts` `(T,)` save times in
    `[0, t1]` (default `[0, t1]`); `rtol`, `atol` of the PID controller; `max_steps`;
    `size_threshold`; `blowup_estimate` ``"extrapolated"`` or ``"threshold"``.

    **Returns:** a :class:`HeadSolution` with `state = (b, Ψ)`; recover `α(t)`, `Σ(t)` with
    :func:`head_gaussian_moments`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for inconsistent shapes, bad times,
    a non-positive threshold or an unknown `blowup_estimate`.
    """
    Q, K, W_V, W_O = _check_head(Q, K, W_V, W_O)
    d = Q.shape[1]
    if jnp.shape(mean0) != (d,) or jnp.shape(cov0) != (d, d):
        raise ParameterError(f"`mean0` must have shape ({d},) and `cov0` ({d}, {d}); got {jnp.shape(mean0)} and {jnp.shape(cov0)}.")
    if blowup_estimate not in ("extrapolated", "threshold"):
        raise ParameterError(f"`blowup_estimate` must be 'extrapolated' or 'threshold'; got {blowup_estimate!r}.")
    dtype = jnp.result_type(Q.dtype, float)
    _solve.check_solver_settings(rtol, atol, max_steps, None)
    t0, t1, ts = _times(t1, ts, dtype)
    threshold = None
    if size_threshold is not None:
        threshold = jnp.asarray(size_threshold, dtype)
        if _solve.is_concrete(threshold) and not bool(threshold > 0):
            raise ParameterError(f"`size_threshold` must be > 0; got {size_threshold}.")
    r = gaussian_reduction(Q, K, W_V, W_O, jnp.asarray(mean0, dtype), jnp.asarray(cov0, dtype))
    return _solve_gaussian_core(r, t0, t1, ts, threshold, float(rtol), float(atol), int(max_steps), blowup_estimate == "extrapolated")


def head_gaussian_moments(
    Q: Float[ArrayLike, "k d"],
    W_O: Float[ArrayLike, "d k"],
    mean0: Float[ArrayLike, " d"],
    cov0: Float[ArrayLike, "d d"],
    state,
) -> tuple[Float[Array, "*T d"], Float[Array, "*T d d"]]:
    """`α = α0 + W_O b` and `Σ = ΦΣ0Φᵀ`, `Φ = I + W_O Ψ Q`, from a reduced Gaussian state `(b, Ψ)` (any leading axes)."""
    Q, W_O = jnp.asarray(Q), jnp.asarray(W_O)
    b, psi = state
    s0 = jnp.asarray(cov0)
    d = s0.shape[-1]
    phi = jnp.eye(d, dtype=psi.dtype) + W_O @ psi @ Q
    cov = phi @ s0 @ jnp.swapaxes(phi, -1, -2)
    return jnp.asarray(mean0) + b @ W_O.T, 0.5 * (cov + jnp.swapaxes(cov, -1, -2))


# --------------------------------------------------------------------------- particles
class _ParticleReduction(eqx.Module):
    q0: Array  # (S, N, k)
    k0: Array
    v0: Array
    QO: Array
    KO: Array
    VO: Array
    OO: Array
    x0c_O: Array  # (S, N, k): (x0 − x̄0) W_O on real tokens, 0 on padding
    mask: Array  # (S, N) bool
    count: Array  # scalar: number of real tokens
    trace0: Array


def _particle_field(r: _ParticleReduction, z):
    q = r.q0 + z @ r.QO.T
    kk = r.k0 + z @ r.KO.T
    v = r.v0 + z @ r.VO.T
    logits = jnp.einsum("sik,sjk->sij", q, kk)
    logits = jnp.where(r.mask[:, None, :], logits, -jnp.inf)
    w = jax.nn.softmax(logits, axis=-1)
    dz = jnp.einsum("sij,sjk->sik", w, v)
    return jnp.where(r.mask[..., None], dz, 0.0)


def _particle_trace(r: _ParticleReduction, z):
    m = r.mask[..., None].astype(z.dtype)
    zbar = jnp.sum(z * m, axis=(0, 1)) / r.count
    zc = (z - zbar) * m
    cross = jnp.sum(zc * r.x0c_O)
    quad = jnp.sum((zc @ r.OO) * zc)
    return r.trace0 + (2.0 * cross + quad) / r.count


@eqx.filter_jit
def _solve_particles_core(r, t0, t1, ts, threshold, rtol, atol, max_steps, extrapolate):
    z0 = jnp.zeros(r.q0.shape, r.q0.dtype)
    if threshold is None:
        threshold = _solve.default_size_factor(r.trace0.dtype) * jnp.where(r.trace0 > 0, r.trace0, 1.0)
    out = _solve.integrate(
        lambda t, z: _particle_field(r, z),
        z0,
        t0=t0,
        t1=t1,
        ts=ts,
        size=lambda z: _particle_trace(r, z),
        speed=None,
        threshold=threshold,
        converge_tol=None,
        solver=diffrax.Tsit5(),
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
        dt0=None,
        max_steps=max_steps,
        extrapolate=extrapolate,
    )
    return _solution(out)


def solve_head_particles(
    Q: Float[ArrayLike, "k d"],
    K: Float[ArrayLike, "k d"],
    W_V: Float[ArrayLike, "k d"],
    W_O: Float[ArrayLike, "d k"],
    x0: Float[ArrayLike, "S N d"],
    mask: Bool[ArrayLike, "S N"],
    *,
    t1: float | Float[ArrayLike, ""],
    ts: Float[ArrayLike, " T"] | None = None,
    rtol: float = 1e-6,
    atol: float = 1e-6,
    max_steps: int = 100_000,
    size_threshold: float | Float[ArrayLike, ""] | None = None,
    blowup_estimate: str = "extrapolated",
) -> HeadSolution:
    """Softmax particle system (spec §1) of the head `A = KᵀQ`, `V = W_O W_V` on groups of tokens, in rank-`k` form.

    Tokens come in `S` groups of up to `N` (the padded batch layout of a tokenizer):
    token `(s, i)` with `mask[s, i]` attends to the tokens `(s, j)` with `mask[s, j]` (the
    model's padding mask: one empirical measure per sentence); padded positions do not
    move and count nowhere. One group holding every token (``S = 1``) is the pooled
    measure `μ = (1/n) Σ_i δ_{x_i}`. This is exactly :func:`~hassejax.dynamics.solve_particles`
    (``"softmax"`` for one group, ``"masked"`` with the block-diagonal mask of the groups
    otherwise) on the real tokens, with the size `λ` = trace of the covariance of all real
    tokens together (events and statuses of spec §4; a finite particle system cannot blow
    up in finite time, so a threshold crossing is reported as `diverge` by the decade
    test), but the state is `z` with `x = x0 + z W_Oᵀ` (module docstring).
    Jit-compiled, vmappable over heads.

    **Arguments:** `Q`, `K`, `W_V` `(k, d)`; `W_O` `(d, k)`; `x0` `(S, N, d)` tokens;
    `mask` `(S, N)` Boolean, True at real tokens, at least one per group; `t1`, `ts`,
    `rtol`, `atol`, `max_steps`, `size_threshold` (default `1e8 ·` initial size, `1e4 ·` in float32),
    `blowup_estimate` as in :func:`solve_head_gaussian`. The dtype of `x0` sets the
    precision (float32 is adequate for particles: they cannot blow up).

    **Returns:** a :class:`HeadSolution` with `state = z` `(T, S, N, k)`; tokens with
    :func:`head_particle_tokens`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for inconsistent shapes, a
    non-Boolean mask, a group without tokens (concrete masks), bad times or thresholds.
    """
    Q, K, W_V, W_O = _check_head(Q, K, W_V, W_O)
    d = Q.shape[1]
    x0 = jnp.asarray(x0)
    mask = jnp.asarray(mask)
    if x0.ndim != 3 or x0.shape[-1] != d:
        raise ParameterError(f"`x0` must have shape (S, N, d) with d = {d}; got {x0.shape}.")
    if mask.shape != x0.shape[:2] or mask.dtype != jnp.bool_:
        raise ParameterError(f"`mask` must be Boolean of shape (S, N) = {x0.shape[:2]}; got {mask.dtype} {mask.shape}.")
    if _solve.is_concrete(mask) and not bool(jnp.all(jnp.any(mask, axis=1))):
        empty = np.flatnonzero(~np.asarray(mask).any(axis=1)).tolist()
        raise ParameterError(f"`mask`: every group needs at least one real token; groups {empty} are empty.")
    if blowup_estimate not in ("extrapolated", "threshold"):
        raise ParameterError(f"`blowup_estimate` must be 'extrapolated' or 'threshold'; got {blowup_estimate!r}.")
    dtype = jnp.result_type(x0.dtype, jnp.float32)
    x0 = x0.astype(dtype)
    Q, K, W_V, W_O = (z.astype(dtype) for z in (Q, K, W_V, W_O))
    _solve.check_solver_settings(rtol, atol, max_steps, None)
    t0, t1, ts = _times(t1, ts, dtype)
    threshold = None
    if size_threshold is not None:
        threshold = jnp.asarray(size_threshold, dtype)
        if _solve.is_concrete(threshold) and not bool(threshold > 0):
            raise ParameterError(f"`size_threshold` must be > 0; got {size_threshold}.")
    m = mask.astype(dtype)[..., None]
    count = jnp.sum(m)
    xbar = jnp.sum(x0 * m, axis=(0, 1)) / count
    x0c = (x0 - xbar) * m
    r = _ParticleReduction(
        q0=x0 @ Q.T,
        k0=x0 @ K.T,
        v0=x0 @ W_V.T,
        QO=Q @ W_O,
        KO=K @ W_O,
        VO=W_V @ W_O,
        OO=W_O.T @ W_O,
        x0c_O=x0c @ W_O,
        mask=mask,
        count=count,
        trace0=jnp.sum(x0c**2) / count,
    )
    return _solve_particles_core(r, t0, t1, ts, threshold, float(rtol), float(atol), int(max_steps), blowup_estimate == "extrapolated")


def head_particle_tokens(W_O: Float[ArrayLike, "d k"], x0: Float[ArrayLike, "S N d"], z: Float[ArrayLike, "*T S N k"]) -> Float[Array, "*T S N d"]:
    """Tokens `x = x0 + z W_Oᵀ` from the reduced particle state `z` (any leading axes)."""
    W_O = jnp.asarray(W_O)
    return jnp.asarray(x0) + jnp.asarray(z) @ W_O.T.astype(jnp.asarray(z).dtype)
