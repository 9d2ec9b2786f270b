"""Velocity fields `Γ_μ(x)` of attention dynamics by kind name: the legacy functional API (spec dynamics.md §1).

Each function here converts its `(kind, params)` with
:func:`~hassejax.dynamics.attention.from_params` and calls the kernel module
(:class:`~hassejax.dynamics.Softmax`, :class:`~hassejax.dynamics.L2`, …), which holds the
formulas; new code should use the modules directly.

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
for traced masks; concrete ones are rejected by :class:`MaskedParams`) gets `Γ = 0`
(:func:`hassejax.nn.masked_softmax`).

Sinkhorn for queries other than the keys uses the keys' self-plan: `w_j(x) =
softmax_j(β y_jᵀAx/ε + g_j)` with `g` the column potential (derived); for `x = y_i` this is
exactly `n P_ij` after the last row normalisation.

Use :func:`velocity_field` (or :data:`VELOCITY_FIELDS`) to pick a field by name.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType

from jaxtyping import Array, ArrayLike, Bool, Float, Int, Real

from ...errors import ParameterError
from ..params import AttentionParams, Params
from ._convert import from_params

__all__ = [
    "VELOCITY_FIELDS",
    "attention_weights",
    "l2",
    "linear",
    "masked",
    "multihead",
    "sigmoid",
    "sinkhorn",
    "sinkhorn_potential",
    "softmax",
    "velocity_field",
]

_HEAD_KINDS = ("softmax", "l2", "sinkhorn", "sigmoid", "linear")


def sinkhorn_potential(
    keys: Float[Array, "n d"], params: AttentionParams
) -> tuple[Float[Array, " n"], Real[Array, ""], Int[Array, ""]]:
    """Column potential `g` of the entropic self-plan of the keys: :meth:`Sinkhorn.potential <hassejax.dynamics.Sinkhorn.potential>` at `t = 0`.

    `params` time-independent (use `params.at(t)`); its `sinkhorn_tol` and
    `sinkhorn_max_iter` are the Sinkhorn module's `tol` and `max_iter`.

    **Returns:** `(g, error, iterations)`.
    """
    return from_params("sinkhorn", params).potential(0.0, keys)


def attention_weights(
    kind: str,
    x: Float[Array, "m d"],
    keys: Float[Array, "n d"],
    params: AttentionParams,
    mask: Bool[Array, "m n"] | None = None,
) -> Float[Array, "m n"]:
    """Weights `W` with `Γ_μ(x_i) = V Σ_j W_ij y_j` for a single-head kind (spec §1): the module's `weights` at `t = 0`.

    **Arguments:** `kind` one of ``softmax, l2, sinkhorn, sigmoid, linear``; `x` queries,
    `keys` keys, `params` time-independent parameters (use `params.at(t)`), `mask` optional
    `(m, n)` Boolean (not for Sinkhorn).

    **Returns:** `(m, n)`; rows sum to one for softmax, l2, sinkhorn (with the convention
    `n P` for Sinkhorn).

    **Raises:** :class:`~hassejax.errors.ParameterError` for an unknown kind, a mask with
    Sinkhorn, or L2 without `Q`, `K`.
    """
    if kind not in _HEAD_KINDS:
        raise ParameterError(f"`kind` must be one of {_HEAD_KINDS}; got {kind!r}.")
    return from_params(kind, params).weights(0.0, x, keys, mask)


def _field(kind, t, x, params, keys, mask):
    return from_params(kind, params).velocity(t, x, keys, mask)


def softmax(
    t: Real[ArrayLike, ""],
    x: Float[Array, "m d"],
    params: Params,
    keys: Float[Array, "n d"] | None = None,
    mask: Bool[Array, "m n"] | None = None,
) -> Float[Array, "m d"]:
    """Softmax self-attention `Γ(x_i) = Σ_j softmax_j(β y_jᵀAx_i) V y_j` (paper, spec §1); see :class:`~hassejax.dynamics.Softmax`."""
    return _field("softmax", t, x, params, keys, mask)


def l2(
    t: Real[ArrayLike, ""],
    x: Float[Array, "m d"],
    params: Params,
    keys: Float[Array, "n d"] | None = None,
    mask: Bool[Array, "m n"] | None = None,
) -> Float[Array, "m d"]:
    """L2 self-attention `Γ(x_i) = Σ_j softmax_j(−βc‖Qx_i − Ky_j‖²) V y_j` (paper, spec §1; needs `Q`, `K`); see :class:`~hassejax.dynamics.L2`."""
    return _field("l2", t, x, params, keys, mask)


def sinkhorn(
    t: Real[ArrayLike, ""],
    x: Float[Array, "m d"],
    params: Params,
    keys: Float[Array, "n d"] | None = None,
    mask: Bool[Array, "m n"] | None = None,
) -> Float[Array, "m d"]:
    """Sinkhorn attention `Γ(x_i) = n Σ_j P_ij V x_j` (paper, spec §1); see :class:`~hassejax.dynamics.Sinkhorn`.

    `P` is the doubly stochastic scaling (row and column sums `1/n`) of `exp(β x_jᵀAx_i/ε)`,
    computed in the log domain to `params.sinkhorn_tol` with at most
    `params.sinkhorn_max_iter` iterations (see :func:`sinkhorn_potential`). No mask.
    """
    return _field("sinkhorn", t, x, params, keys, mask)


def sigmoid(
    t: Real[ArrayLike, ""],
    x: Float[Array, "m d"],
    params: Params,
    keys: Float[Array, "n d"] | None = None,
    mask: Bool[Array, "m n"] | None = None,
) -> Float[Array, "m d"]:
    """Sigmoid attention `Γ(x_i) = (1/n) Σ_j σ(β y_jᵀAx_i + b) V y_j` with the fixed bias `b = params.bias`.

    No normalisation across keys (spec §1); under a mask, `1/n` becomes one over the number
    of allowed keys of row `i`. Does not preserve Gaussians (particles only). See
    :class:`~hassejax.dynamics.Sigmoid`.
    """
    return _field("sigmoid", t, x, params, keys, mask)


def linear(
    t: Real[ArrayLike, ""],
    x: Float[Array, "m d"],
    params: Params,
    keys: Float[Array, "n d"] | None = None,
    mask: Bool[Array, "m n"] | None = None,
) -> Float[Array, "m d"]:
    """Linear attention `Γ(x_i) = (1/n) Σ_j β(y_jᵀAx_i) V y_j` (spec §1); see :class:`~hassejax.dynamics.Linear`."""
    return _field("linear", t, x, params, keys, mask)


def multihead(
    t: Real[ArrayLike, ""],
    x: Float[Array, "m d"],
    params: Params,
    keys: Float[Array, "n d"] | None = None,
    mask: Bool[Array, "m n"] | None = None,
) -> Float[Array, "m d"]:
    """Multi-head attention `Γ(x) = Σ_h C_h E_{w_h}[y]` (paper, spec §1); head `h` of kind `params.kinds[h]`, `C_h = heads[h].V`; see :class:`~hassejax.dynamics.MultiHead`."""
    return _field("multihead", t, x, params, keys, mask)


def masked(
    t: Real[ArrayLike, ""],
    x: Float[Array, "n d"],
    params: Params,
    keys: Float[Array, "n d"] | None = None,
    mask: Bool[Array, "n n"] | None = None,
) -> Float[Array, "n d"]:
    """Masked self-attention (spec §1): token `i` sees the keys `j` with `params.mask[i, j]`; see :class:`~hassejax.dynamics.Masked`.

    Positions `s_i = i/n`; with a causal mask the first token sees only itself. With
    `params.sink` set, a fixed attention-sink token at `s = 0` is prepended to the keys and
    every query may attend to it (it has no velocity of its own: it is not a token of `x`).
    `keys` and `mask` must be None (the mask is `params.mask`; queries are the keys).

    **Raises:** :class:`~hassejax.errors.ParameterError` if `keys` or `mask` is given, or
    `x` does not have `n = params.n` rows.
    """
    return _field("masked", t, x, params, keys, mask)


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
