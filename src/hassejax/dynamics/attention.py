"""Velocity fields `Γ_μ(x)` of attention dynamics (spec dynamics.md §1).

Every field has the same signature ``field(t, x, params, keys=None, mask=None)`` (the first
three are those of a diffrax vector field) and returns `Γ_μ(x_i)` for every query `x_i`,
where `μ = (1/n) Σ_j δ_{y_j}` is the empirical measure of the keys (the queries themselves
when `keys` is None; `j = i` included). The logit of query `x` against key `y` is
`β yᵀAx` with `A = KᵀQ` (spec §1):

========== ============================================================================
kind       `Γ_μ(x_i)`
========== ============================================================================
softmax    `Σ_j w_ij V y_j`, `w_i = softmax_j(β y_jᵀAx_i)`                     (paper)
l2         `Σ_j w_ij V y_j`, `w_i = softmax_j(−βc‖Qx_i − Ky_j‖²)`              (paper)
sinkhorn   `n Σ_j P_ij V y_j`, `P` the doubly stochastic scaling of
           `exp(β y_jᵀAy_i/ε)` (log domain, to a tolerance, capped)            (paper)
sigmoid    `(1/n) Σ_j σ(β y_jᵀAx_i + b) V y_j` (fixed bias `b`, no normalisation)
linear     `(1/n) Σ_j β(y_jᵀAx_i) V y_j`
multihead  `Σ_h Γ^h(x_i)`: each head any of the above kinds, its `V` = `C_h`   (paper)
masked     any of softmax, l2, sigmoid, linear, multihead restricted to the allowed keys
========== ============================================================================

Masks: `mask[i, j]` True = query `i` may attend to key `j` (row = query, column = key).
Softmax-type weights normalise over the allowed keys; sigmoid and linear divide by the
number of allowed keys (`n` without a mask). A query with no allowed key (possible only
for traced masks; concrete ones are rejected by :class:`MaskedParams`) gets `Γ = 0`.

Sinkhorn for queries other than the keys uses the keys' self-plan: `w_j(x) =
softmax_j(β y_jᵀAx/ε + g_j)` with `g` the column potential (derived); for `x = y_i` this is
exactly `n P_ij` after the last row normalisation.

Use :func:`velocity_field` (or :data:`VELOCITY_FIELDS`) to pick a field by name.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Bool, Float, Real

from ..errors import ParameterError
from .params import AttentionParams, MaskedParams, MultiHeadParams, Params

__all__ = [
    "attention_weights",
    "softmax",
    "l2",
    "sinkhorn",
    "sinkhorn_potential",
    "sigmoid",
    "linear",
    "multihead",
    "masked",
    "VELOCITY_FIELDS",
    "velocity_field",
]


def _require(params, cls, kind: str):
    if not isinstance(params, cls):
        raise ParameterError(f"`params` for kind {kind!r} must be a {cls.__name__}; got {type(params).__name__}.")


def _check_x(x, keys, mask, d: int):
    if x.ndim != 2 or x.shape[-1] != d:
        raise ParameterError(f"`x` must have shape (m, d) with d = {d}; got shape {x.shape}.")
    if keys is not None and (keys.ndim != 2 or keys.shape[-1] != d):
        raise ParameterError(f"`keys` must have shape (n, d) with d = {d}; got shape {keys.shape}.")
    n = x.shape[0] if keys is None else keys.shape[0]
    if mask is not None and mask.shape != (x.shape[0], n):
        raise ParameterError(f"`mask` must have shape (m, n) = ({x.shape[0]}, {n}) (queries, keys); got shape {mask.shape}.")


def _masked_softmax(logits, mask):
    if mask is None:
        return jax.nn.softmax(logits, axis=-1)
    neg = jnp.where(mask, logits, -jnp.inf)
    mx = jnp.max(neg, axis=-1, keepdims=True)
    mx = jnp.where(jnp.isfinite(mx), mx, 0.0)
    e = jnp.where(mask, jnp.exp(jnp.where(mask, logits, mx) - mx), 0.0)
    s = jnp.sum(e, axis=-1, keepdims=True)
    return e / jnp.where(s > 0, s, 1.0)


def _mean_weights(raw, mask):
    if mask is None:
        return raw / raw.shape[-1]
    count = jnp.sum(mask, axis=-1, keepdims=True)
    return jnp.where(mask, raw, 0.0) / jnp.maximum(count, 1)


def _bilinear_logits(x, y, p: AttentionParams):
    a = p.interaction()
    return p.beta * (x @ a.T @ y.T)  # [i, j] = β y_jᵀ A x_i


def sinkhorn_potential(
    keys: Float[Array, "n d"], params: AttentionParams
) -> tuple[Float[Array, " n"], Real[Array, ""], Real[Array, ""]]:
    """Column potential `g` of the entropic self-plan of the keys (log domain).

    Iterates `f_i = −log n − LSE_j(C_ij + g_j)`, `g_j = −log n − LSE_i(C_ij + f_i)` with
    `C_ij = β y_jᵀAy_i/ε`, from `g = 0`, until the largest log-marginal error of the rows is
    at most `params.sinkhorn_tol` or `params.sinkhorn_max_iter` iterations (``lax.while_loop``).

    **Returns:** `(g, error, iterations)`; the plan is `P_ij = exp(f_i + g_j + C_ij)` with `f`
    the row update of `g` (rows then sum to `1/n` exactly, columns to within `error`).
    """
    p = params
    n = keys.shape[0]
    logn = jnp.log(jnp.asarray(n, keys.dtype))
    c = _bilinear_logits(keys, keys, p) / p.eps
    tol = jnp.asarray(p.sinkhorn_tol, keys.dtype)

    def cond(state):
        _, _, err, it = state
        return (it == 0) | ((err > tol) & (it < p.sinkhorn_max_iter))

    def body(state):
        f, g, _, it = state
        lse_row = jax.nn.logsumexp(c + g[None, :], axis=1)
        err = jnp.max(jnp.abs(logn + f + lse_row))
        f = -logn - lse_row
        g = -logn - jax.nn.logsumexp(c + f[:, None], axis=0)
        return f, g, err, it + 1

    zeros = jnp.zeros((n,), keys.dtype)
    init = (zeros, zeros, jnp.asarray(jnp.inf, keys.dtype), jnp.asarray(0))
    _, g, err, it = jax.lax.while_loop(cond, body, init)
    return g, err, it


def attention_weights(
    kind: str,
    x: Float[Array, "m d"],
    keys: Float[Array, "n d"],
    params: AttentionParams,
    mask: Bool[Array, "m n"] | None = None,
) -> Float[Array, "m n"]:
    """Weights `W` with `Γ_μ(x_i) = V Σ_j W_ij y_j` for a single-head kind (spec §1).

    **Arguments:** `kind` one of ``softmax, l2, sinkhorn, sigmoid, linear``; `x` queries,
    `keys` keys, `params` time-independent parameters (use `params.at(t)`), `mask` optional
    `(m, n)` Boolean (not for Sinkhorn).

    **Returns:** `(m, n)`; rows sum to one for softmax, l2, sinkhorn (with the convention
    `n P` for Sinkhorn).

    **Raises:** :class:`~hassejax.errors.ParameterError` for an unknown kind, a mask with
    Sinkhorn, or L2 without `Q`, `K`.
    """
    p = params
    if kind == "softmax":
        return _masked_softmax(_bilinear_logits(x, keys, p), mask)
    if kind == "l2":
        if p.Q is None or p.K is None:
            raise ParameterError("kind 'l2' needs `Q` and `K` (the kernel is exp(−c‖Qx − Ky‖²)); got `A` only.")
        qx = x @ p.Q.T
        ky = keys @ p.K.T
        sq = jnp.sum(qx**2, -1)[:, None] + jnp.sum(ky**2, -1)[None, :] - 2.0 * qx @ ky.T
        return _masked_softmax(-p.beta * p.c * sq, mask)
    if kind == "sinkhorn":
        if mask is not None:
            raise ParameterError("kind 'sinkhorn' has no masked form (the plan is doubly stochastic over all tokens); got a mask.")
        g, _, _ = sinkhorn_potential(keys, p)
        return jax.nn.softmax(_bilinear_logits(x, keys, p) / p.eps + g[None, :], axis=-1)
    if kind == "sigmoid":
        return _mean_weights(jax.nn.sigmoid(_bilinear_logits(x, keys, p) + p.bias), mask)
    if kind == "linear":
        return _mean_weights(_bilinear_logits(x, keys, p), mask)
    raise ParameterError(f"`kind` must be one of ('softmax', 'l2', 'sinkhorn', 'sigmoid', 'linear'); got {kind!r}.")


def _single_head(kind, t, x, params, keys, mask):
    _require(params, AttentionParams, kind)
    p = params.at(t)
    _check_x(x, keys, mask, p.d)
    y = x if keys is None else keys
    w = attention_weights(kind, x, y, p, mask)
    return (w @ y) @ jnp.asarray(p.V).T


def softmax(
    t: Real[ArrayLike, ""],
    x: Float[Array, "m d"],
    params: Params,
    keys: Float[Array, "n d"] | None = None,
    mask: Bool[Array, "m n"] | None = None,
) -> Float[Array, "m d"]:
    """Softmax self-attention `Γ(x_i) = Σ_j softmax_j(β y_jᵀAx_i) V y_j` (paper, spec §1)."""
    return _single_head("softmax", t, x, params, keys, mask)


def l2(
    t: Real[ArrayLike, ""],
    x: Float[Array, "m d"],
    params: Params,
    keys: Float[Array, "n d"] | None = None,
    mask: Bool[Array, "m n"] | None = None,
) -> Float[Array, "m d"]:
    """L2 self-attention `Γ(x_i) = Σ_j softmax_j(−βc‖Qx_i − Ky_j‖²) V y_j` (paper, spec §1; needs `Q`, `K`)."""
    return _single_head("l2", t, x, params, keys, mask)


def sinkhorn(
    t: Real[ArrayLike, ""],
    x: Float[Array, "m d"],
    params: Params,
    keys: Float[Array, "n d"] | None = None,
    mask: Bool[Array, "m n"] | None = None,
) -> Float[Array, "m d"]:
    """Sinkhorn attention `Γ(x_i) = n Σ_j P_ij V x_j` (paper, spec §1).

    `P` is the doubly stochastic scaling (row and column sums `1/n`) of `exp(β x_jᵀAx_i/ε)`,
    computed in the log domain to `params.sinkhorn_tol` with at most
    `params.sinkhorn_max_iter` iterations (see :func:`sinkhorn_potential`). No mask.
    """
    return _single_head("sinkhorn", t, x, params, keys, mask)


def sigmoid(
    t: Real[ArrayLike, ""],
    x: Float[Array, "m d"],
    params: Params,
    keys: Float[Array, "n d"] | None = None,
    mask: Bool[Array, "m n"] | None = None,
) -> Float[Array, "m d"]:
    """Sigmoid attention `Γ(x_i) = (1/n) Σ_j σ(β y_jᵀAx_i + b) V y_j` with the fixed bias `b = params.bias`.

    No normalisation across keys (spec §1); under a mask, `1/n` becomes one over the number
    of allowed keys of row `i`. Does not preserve Gaussians (particles only).
    """
    return _single_head("sigmoid", t, x, params, keys, mask)


def linear(
    t: Real[ArrayLike, ""],
    x: Float[Array, "m d"],
    params: Params,
    keys: Float[Array, "n d"] | None = None,
    mask: Bool[Array, "m n"] | None = None,
) -> Float[Array, "m d"]:
    """Linear attention `Γ(x_i) = (1/n) Σ_j β(y_jᵀAx_i) V y_j` (spec §1)."""
    return _single_head("linear", t, x, params, keys, mask)


def multihead(
    t: Real[ArrayLike, ""],
    x: Float[Array, "m d"],
    params: Params,
    keys: Float[Array, "n d"] | None = None,
    mask: Bool[Array, "m n"] | None = None,
) -> Float[Array, "m d"]:
    """Multi-head attention `Γ(x) = Σ_h C_h E_{w_h}[y]` (paper, spec §1); head `h` of kind `params.kinds[h]`, `C_h = heads[h].V`."""
    _require(params, MultiHeadParams, "multihead")
    out = None
    for kind, head in zip(params.kinds, params.heads):
        term = _single_head(kind, t, x, head, keys, mask)
        out = term if out is None else out + term
    return out


def masked(
    t: Real[ArrayLike, ""],
    x: Float[Array, "n d"],
    params: Params,
    keys: Float[Array, "n d"] | None = None,
    mask: Bool[Array, "n n"] | None = None,
) -> Float[Array, "n d"]:
    """Masked self-attention (spec §1): token `i` sees the keys `j` with `params.mask[i, j]`.

    Positions `s_i = i/n`; with a causal mask the first token sees only itself. With
    `params.sink` set, a fixed attention-sink token at `s = 0` is prepended to the keys and
    every query may attend to it (it has no velocity of its own: it is not a token of `x`).
    `keys` and `mask` must be None (the mask is `params.mask`; queries are the keys).

    **Raises:** :class:`~hassejax.errors.ParameterError` if `keys` or `mask` is given, or
    `x` does not have `n = params.n` rows.
    """
    _require(params, MaskedParams, "masked")
    if keys is not None or mask is not None:
        raise ParameterError("kind 'masked' takes its mask from `params.mask` and uses the tokens as keys; pass keys=None, mask=None.")
    n = params.n
    if x.ndim != 2 or x.shape[0] != n:
        raise ParameterError(f"`x` must have shape (n, d) with n = {n} (the mask size); got shape {x.shape}.")
    m = params.mask
    y = x
    if params.sink is not None:
        sink = jnp.asarray(params.sink, x.dtype)
        y = jnp.concatenate([sink[None, :], x], axis=0)
        m = jnp.concatenate([jnp.ones((n, 1), dtype=bool), m], axis=1)
    if params.kind == "multihead":
        return multihead(t, x, params.base, y, m)
    return _single_head(params.kind, t, x, params.base, y, m)


VELOCITY_FIELDS: MappingProxyType[str, Callable] = MappingProxyType(
    {
        "softmax": softmax,
        "l2": l2,
        "sinkhorn": sinkhorn,
        "sigmoid": sigmoid,
        "linear": linear,
        "multihead": multihead,
        "masked": masked,
    }
)
"""Registry of velocity fields by name (read-only)."""


def velocity_field(kind: str) -> Callable:
    """The velocity field registered under `kind` (see :data:`VELOCITY_FIELDS`).

    **Raises:** :class:`~hassejax.errors.ParameterError` naming the known kinds.
    """
    try:
        return VELOCITY_FIELDS[kind]
    except (KeyError, TypeError):
        raise ParameterError(f"`kind` must be one of {tuple(VELOCITY_FIELDS)}; got {kind!r}.") from None
