"""Residual-space parameters of trained attention heads, their exact low-rank reduction, and their solves.

**Mapping (derived from the BERT forward pass, :mod:`.bert`).** Head `h` of layer `l`
has `W_{Q,h}, W_{K,h}, W_{V,h}` = rows `h·k … (h+1)·k − 1` of the query/key/value weights
(`k = d_head = d/H`, shape `k×d`) and `W_{O,h}` = the same *columns* of the attention
output weight (`d×k`). Without biases its update of a token `x` is
`Σ_j softmax_j(⟨W_{Q,h}x, W_{K,h}x_j⟩/√k) W_{O,h}W_{V,h} x_j`, which is the softmax velocity
field of spec dynamics.md §1 (`β = 1`, the query scaled by `1/√k` as in the paper's
multi-head scaling) with

    `A_h = W_{K,h}ᵀ W_{Q,h} / √k`   (logit of query `x` against key `y`: `yᵀA_h x`),
    `V_h = W_{O,h} W_{V,h}`          (the value-output map `C_h` of spec §1),

both `d×d` of rank at most `k`. One layer of the model is one explicit Euler step of
length 1 of the multi-head field plus biases, then LayerNorm and the FFN; here each head
is a dynamical system on its own, in continuous depth `t` (`t = 1` ≈ one layer).
**Biases are left out** of the dynamics (`b_Q` adds a key-only term that cancels in the
softmax, `b_K` a query-dependent logit shift, `b_V`, `b_O` a constant drift); so are
LayerNorm, the FFN and the sum over heads.

**Exact reduction to `4k` dimensions (derived).** `V_h` has range `range W_{O,h}`
(dimension `r ≤ k`, orthonormal basis `B`, projector `P = BBᵀ`), so along the flow only
`u = Bᵀx` moves and `(I − P)x` is constant per token. The velocity depends on the tokens
only through `Tx`, with

    `T = [Bᵀ; Q_s(I − P); W_K(I − P); W_V(I − P)]`   (`(r + 3k) × d`, `Q_s = W_Q/√k`),

and `y = Tx` obeys the softmax system `ẏ_i = Ṽ Σ_j softmax_j((K̃y_j)ᵀ(Q̃y_i)) y_j` with

    `Q̃ = [Q_sB, I, 0, 0]`, `K̃ = [W_KB, 0, I, 0]`, `Ṽ = [[BᵀV_hB, 0, 0, BᵀW_O]; 0]`

(the zero rows keep the constant parts constant). Because `T Γ_μ(x) = Γ̃_{T#μ}(Tx)` for
every measure `μ`, the particle system *and* the Gaussian moment ODE (`Σ̃ = TΣTᵀ`,
`M̃T = TM`) of the lifted head are the exact images of those of the head in `R^d`;
`x(t) = x(0) + B(u(t) − u(0))` and the factor `U(t) = U(0) + B(Ũ_u(t) − BᵀU(0))`
(`Σ(t) = U(t)U(t)ᵀ`) recover the `d`-dimensional solution. For all-MiniLM-L6-v2 this turns
`d = 384` into `4k = 128` (`r = k = 32` for every head). The tests check the reduction
against the direct `d`-dimensional solves.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float

from ...errors import ParameterError
from ..params import AttentionParams
from ..result import GaussianSolution, ParticleSolution
from .loader import BertWeights

__all__ = [
    "HeadParameters",
    "head_parameters",
    "HeadLift",
    "lift_head",
    "output_rank",
    "empirical_moments",
    "naive_spectrum",
    "naive_regime",
    "lifted_gaussian_state",
    "unlift_gaussian",
    "unlift_particles",
]


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
        """The head's :class:`~hassejax.dynamics.AttentionParams` in `R^d` (`A` and `V`, `β = 1`)."""
        return AttentionParams(V=self.V[layer, head], A=self.A[layer, head])


def head_parameters(weights: BertWeights, dtype=jnp.float64) -> HeadParameters:
    """Split every layer's attention weights into heads (see the module docstring for the mapping).

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


class HeadLift(eqx.Module):
    """The exact `(r + 3k)`-dimensional reduction of one rank-`k` head (module docstring).

    - `basis`: `(d, r)` orthonormal basis `B` of `range W_O` (the moving subspace);
    - `T`: `(r + 3k, d)` the lift `y = Tx`;
    - `params`: :class:`~hassejax.dynamics.AttentionParams` of the lifted head (`V = Ṽ`,
      `Q = Q̃`, `K = K̃`), a softmax head in `R^{r+3k}`.

    Batched (leading axes on every field) when built under ``vmap``.
    """

    basis: Float[Array, "*batch d r"]
    T: Float[Array, "*batch m d"]
    params: AttentionParams

    @property
    def rank(self) -> int:
        """`r`, the dimension of the moving subspace."""
        return int(self.basis.shape[-1])


def lift_head(
    Q: Float[ArrayLike, "k d"], K: Float[ArrayLike, "k d"], W_V: Float[ArrayLike, "k d"], W_O: Float[ArrayLike, "d k"]
) -> HeadLift:
    """Build the lifted head from `Q_s = W_Q/√k`, `W_K`, `W_V` (`k×d`) and `W_O` (`d×k`).

    The basis `B` is the Q factor of `W_O` (reduced QR), which spans `range W_O` when
    `W_O` has full column rank `k` (check with :func:`output_rank`; every head of
    all-MiniLM-L6-v2 does). Jittable and vmappable (no value checks).

    **Returns:** :class:`HeadLift` with `m = 4k`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for inconsistent shapes.
    """
    Q, K, W_V, W_O = (jnp.asarray(z) for z in (Q, K, W_V, W_O))
    if Q.ndim != 2 or K.shape != Q.shape or W_V.shape != Q.shape or W_O.shape != Q.shape[::-1]:
        raise ParameterError(
            f"`Q`, `K`, `W_V` must have shape (k, d) and `W_O` shape (d, k); got {Q.shape}, {K.shape}, {W_V.shape}, {W_O.shape}."
        )
    k, d = Q.shape
    b, _ = jnp.linalg.qr(W_O)  # (d, k)
    proj_perp = jnp.eye(d, dtype=b.dtype) - b @ b.T
    T = jnp.concatenate([b.T, Q @ proj_perp, K @ proj_perp, W_V @ proj_perp], axis=0)
    eye = jnp.eye(k, dtype=b.dtype)
    zero = jnp.zeros((k, k), b.dtype)
    q_t = jnp.concatenate([Q @ b, eye, zero, zero], axis=1)
    k_t = jnp.concatenate([K @ b, zero, eye, zero], axis=1)
    bo = b.T @ W_O
    top = jnp.concatenate([bo @ W_V @ b, zero, zero, bo], axis=1)
    v_t = jnp.concatenate([top, jnp.zeros((3 * k, 4 * k), b.dtype)], axis=0)
    return HeadLift(basis=b, T=T, params=AttentionParams(V=v_t, Q=q_t, K=k_t))


def output_rank(W_O: Float[ArrayLike, "*batch d k"], rtol: float = 1e-6) -> np.ndarray:
    """Numerical rank of `W_O` (singular values above `rtol · σ_max`), host side."""
    s = np.linalg.svd(np.asarray(W_O), compute_uv=False)
    return np.sum(s > rtol * s[..., :1], axis=-1)


def naive_spectrum(V: Float[ArrayLike, "*batch d d"], A: Float[ArrayLike, "*batch d d"]) -> Float[Array, "*batch d"]:
    """Eigenvalues of `VA + AᵀVᵀ`, decreasing (the naive spectral reading, spec dynamics.md §3).

    The rule "`VA + AᵀVᵀ ⪯ 0` ⇒ clustering, a positive eigenvalue ⇒ blow-up" is exact only
    when `V`, `A`, `Σ0` commute (spec §3); for general `V` it is false (spec §3 has a
    counterexample). Shown beside the solved regime, never used as a verdict.
    """
    V, A = jnp.asarray(V), jnp.asarray(A)
    s = V @ A
    s = s + jnp.swapaxes(s, -1, -2)
    return jnp.flip(jnp.linalg.eigvalsh(s), axis=-1)


def naive_regime(eigenvalues: Float[ArrayLike, "*batch d"], rtol: float = 1e-9) -> np.ndarray:
    """``"blow_up"`` where the largest eigenvalue exceeds `rtol · max|λ|`, else ``"cluster"`` (host side)."""
    e = np.asarray(eigenvalues)
    scale = np.max(np.abs(e), axis=-1)
    out = np.where(e[..., 0] > rtol * np.maximum(scale, np.finfo(float).tiny), "blow_up", "cluster")
    return out.astype(object)


def lifted_gaussian_state(
    lift: HeadLift, mean0: Float[ArrayLike, " d"], factor0: Float[ArrayLike, "d r"]
) -> tuple[Float[Array, " m"], Float[Array, "m r"]]:
    """Initial state of the lifted moment ODE: `(Tα0, TU0)` (for ``solve_gaussian(..., factor0=TU0)``)."""
    return lift.T @ jnp.asarray(mean0), lift.T @ jnp.asarray(factor0)


def unlift_gaussian(lift: HeadLift, solution: GaussianSolution, mean0: Float[ArrayLike, " d"], factor0: Float[ArrayLike, "d r"]) -> GaussianSolution:
    """The `d`-dimensional :class:`~hassejax.dynamics.GaussianSolution` from the lifted one (exact).

    `α(t) = α0 + B(α̃_u(t) − Bᵀα0)`, `U(t) = U0 + B(Ũ_u(t) − BᵀU0)`, `Σ = UUᵀ`, where the
    subscript `u` takes the first `r` lifted coordinates. Status, times and blow-up
    estimate are those of the lifted solve (the lifted trace differs from `tr Σ` by a
    constant, so the threshold event fires at a slightly different size; `t*` agrees
    to `O(1/threshold)`). Unbatched (``vmap`` it for a batch).
    """
    b = lift.basis
    r = b.shape[-1]
    mean0 = jnp.asarray(mean0)
    factor0 = jnp.asarray(factor0)

    def mean_of(m):
        return mean0 + (m[..., :r] - mean0 @ b) @ b.T

    def factor_of(u):
        return factor0 + b @ (u[..., :r, :] - b.T @ factor0)

    us = factor_of(solution.factor)
    uf = factor_of(solution.factor_final)
    return GaussianSolution(
        ts=solution.ts,
        valid=solution.valid,
        status=solution.status,
        t_final=solution.t_final,
        t_blowup=solution.t_blowup,
        blowup_method=solution.blowup_method,
        growth_exponent=solution.growth_exponent,
        stats=solution.stats,
        mean=mean_of(solution.mean),
        cov=us @ jnp.swapaxes(us, -1, -2),
        factor=us,
        mean_final=mean_of(solution.mean_final),
        cov_final=uf @ uf.T,
        factor_final=uf,
    )


def unlift_particles(lift: HeadLift, solution: ParticleSolution, x0: Float[ArrayLike, "n d"]) -> ParticleSolution:
    """The `d`-dimensional :class:`~hassejax.dynamics.ParticleSolution` from the lifted one: `x(t) = x0 + B(u(t) − Bᵀx0)` (exact)."""
    b = lift.basis
    r = b.shape[-1]
    x0 = jnp.asarray(x0)

    def of(y):
        return x0 + (y[..., :r] - x0 @ b) @ b.T

    return ParticleSolution(
        ts=solution.ts,
        valid=solution.valid,
        status=solution.status,
        t_final=solution.t_final,
        t_blowup=solution.t_blowup,
        blowup_method=solution.blowup_method,
        growth_exponent=solution.growth_exponent,
        stats=solution.stats,
        xs=of(solution.xs),
        x_final=of(solution.x_final),
    )


def empirical_moments(x: Float[ArrayLike, "n d"], weights: Bool[ArrayLike, " n"] | None = None) -> tuple[Float[Array, " d"], Float[Array, "d d"]]:
    """Mean and covariance (normalised by the count, not count − 1) of the selected tokens."""
    x = jnp.asarray(x)
    w = jnp.ones(x.shape[0], x.dtype) if weights is None else jnp.asarray(weights, x.dtype)
    n = jnp.sum(w)
    mean = (w @ x) / n
    xc = (x - mean) * w[:, None]
    return mean, (xc.T @ (x - mean)) / n
