"""Parameter containers of the attention dynamics (spec dynamics.md §1).

Conventions (spec §1): tokens `x ∈ R^d`; `Q, K ∈ R^{k×d}`, `V ∈ R^{d×d}`; `A = KᵀQ`, so the
logit of query `x` against key `y` is `⟨Qx, Ky⟩ = yᵀAx`, multiplied by the inverse
temperature `β`. Any parameter may depend on depth `t`: give a callable `t ↦ array`
(e.g. a small :class:`equinox.Module`) or a :class:`PiecewiseConstant` (one value per
layer). :meth:`AttentionParams.at` resolves every parameter at a time `t`.

The paper's figures use scaled queries (`Q/√d`, per head `Q_h/√k`); nothing here rescales:
pass the scaled matrices.

Construction checks shapes only (statically, so it works on tracers); leading batch axes
are accepted, so a batch of parameters can be built once and ``vmap`` ped over. The solvers
check that the parameters they receive are unbatched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Bool, Float, Real

from .._tracing import is_traced
from ..errors import ParameterError

__all__ = [
    "PiecewiseConstant",
    "AttentionParams",
    "MultiHeadParams",
    "MaskedParams",
    "HEAD_KINDS",
    "resolve",
    "positions",
]

HEAD_KINDS: tuple[str, ...] = ("softmax", "l2", "sinkhorn", "sigmoid", "linear")
"""Kinds that a single head (of :class:`MultiHeadParams`) or a masked model may use."""


class PiecewiseConstant(eqx.Module):
    """A parameter constant on each layer: `values[l]` on `t_edges[l] <= t < t_edges[l + 1]`.

    Outside `[t_edges[0], t_edges[-1])` the first / last value is used.

    **Arguments:**

    - `values`: `(L, *shape)` one value per layer.
    - `t_edges`: `(L + 1,)` increasing layer boundaries. Default `0, 1, …, L` (one unit of
      depth per layer).

    **Raises:** :class:`~hassejax.errors.ParameterError` if `t_edges` does not have length
    `L + 1` or `values` has no layer axis.

    **Example:** a value matrix `I` on layer 0 (`0 <= t < 1`), `−I` on layer 1:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import PiecewiseConstant, Softmax
    >>> v = PiecewiseConstant(jnp.stack([jnp.eye(2), -jnp.eye(2)]))
    >>> v(0.5)[0, 0].item(), v(1.5)[0, 0].item(), v(7.0)[0, 0].item()
    (1.0, -1.0, -1.0)
    >>> Softmax(V=v, A=jnp.zeros((2, 2))).velocity(1.5, jnp.ones((1, 2))).tolist()
    [[-1.0, -1.0]]

    ```
    """

    values: Float[Array, "L *shape"]
    t_edges: Float[Array, " L1"]

    def __init__(self, values: Float[ArrayLike, "L *shape"], t_edges: Float[ArrayLike, " L1"] | Sequence[float] | None = None):
        values = jnp.asarray(values)
        if values.ndim < 1 or values.shape[0] < 1:
            raise ParameterError(
                f"`values` must have a leading layer axis of length L >= 1; got shape {values.shape}."
            )
        n_layers = values.shape[0]
        if t_edges is None:
            t_edges = jnp.arange(n_layers + 1, dtype=values.dtype if jnp.issubdtype(values.dtype, jnp.floating) else float)
        t_edges = jnp.asarray(t_edges)
        if t_edges.shape != (n_layers + 1,):
            raise ParameterError(
                f"`t_edges` must have shape (L + 1,) = ({n_layers + 1},) for {n_layers} layers; got shape {t_edges.shape}."
            )
        self.values = values
        self.t_edges = t_edges

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of one layer's value."""
        return tuple(self.values.shape[1:])

    def __call__(self, t: Real[ArrayLike, ""]) -> Array:
        """The value of the layer containing depth `t`."""
        idx = jnp.searchsorted(self.t_edges, t, side="right") - 1
        idx = jnp.clip(idx, 0, self.values.shape[0] - 1)
        return self.values[idx]


def resolve(value: Any, t: Real[ArrayLike, ""]) -> Any:
    """Evaluate a parameter at depth `t`: call it if callable, else return it unchanged.

    **Example:**

    ```python
    >>> from hassejax.dynamics.params import resolve
    >>> resolve(lambda t: 2.0 * t, 3.0).item(), resolve(5.0, 3.0)
    (6.0, 5.0)

    ```
    """
    if value is None:
        return None
    if callable(value):
        return jnp.asarray(value(t))
    return value


def _shape_of(value: Any, name: str) -> tuple[int, ...]:
    if isinstance(value, PiecewiseConstant):
        return value.shape
    if callable(value):
        try:
            out = jax.eval_shape(value, jnp.zeros(()))
        except Exception as err:  # noqa: BLE001 - report any failure of the user's callable
            raise ParameterError(f"`{name}` is callable but calling it at t = 0.0 failed: {err!r}.") from err
        return tuple(out.shape)
    return tuple(jnp.shape(value))


def _as_param(value: Any, name: str) -> Any:
    if value is None or callable(value):
        return value
    if isinstance(value, (str, bytes)):
        raise ParameterError(f"`{name}` must be a real array, a callable of t or a PiecewiseConstant; got the string {value!r}.")
    try:
        arr = jnp.asarray(value)
    except (TypeError, ValueError) as err:
        raise ParameterError(f"`{name}` must be an array, a callable of t or a PiecewiseConstant; got {type(value).__name__}.") from err
    if not jnp.issubdtype(arr.dtype, jnp.number) or jnp.issubdtype(arr.dtype, jnp.complexfloating):
        raise ParameterError(f"`{name}` must be a real array; got dtype {arr.dtype}.")
    if not jnp.issubdtype(arr.dtype, jnp.floating):
        arr = arr.astype(float)
    return arr


class AttentionParams(eqx.Module):
    """Parameters of one attention head (spec dynamics.md §1).

    Give either `A` (`d×d`) or both `Q` and `K` (`k×d`, then `A = KᵀQ`); the L2 kernel needs
    `Q` and `K`. For a head of a multi-head model, `V` is the value-output map
    `C_h = W_{O,h} V_h`.

    **Arguments** (each array-valued one may instead be a callable of `t` or a
    :class:`PiecewiseConstant`; leading batch axes are allowed):

    - `V`: `(d, d)` value matrix.
    - `Q`, `K`: `(k, d)` query and key matrices.
    - `A`: `(d, d)` interaction matrix (logit of query `x` against key `y` is `β yᵀAx`).
    - `beta`: inverse temperature multiplying every logit (default 1).
    - `c`: L2 kernel constant: logits `−βc‖Qx − Ky‖²` (default 1, the authors' code).
    - `eps`: Sinkhorn entropic regularisation `ε`: kernel `exp(β yᵀAx/ε)` (default 1).
    - `bias`: sigmoid bias `b`: weights `σ(β yᵀAx + b)` (default 0).
    - `sinkhorn_tol`: Sinkhorn stops when the column marginals are within `tol/n` (max
      norm) of `1/n` (default 1e-10; use ~1e-6 in float32). Static.
    - `sinkhorn_max_iter`: Sinkhorn iteration cap (default 1000). Static.

    **Raises:** :class:`~hassejax.errors.ParameterError` when neither or both of `A` and
    `(Q, K)` are given, when only one of `Q`, `K` is given, or when shapes disagree.
    """

    V: Any
    Q: Any
    K: Any
    A: Any
    beta: Any
    c: Any
    eps: Any
    bias: Any
    sinkhorn_tol: float = eqx.field(static=True)
    sinkhorn_max_iter: int = eqx.field(static=True)

    def __init__(
        self,
        V: Any,
        Q: Any = None,
        K: Any = None,
        A: Any = None,
        beta: Any = 1.0,
        c: Any = 1.0,
        eps: Any = 1.0,
        bias: Any = 0.0,
        sinkhorn_tol: float = 1e-10,
        sinkhorn_max_iter: int = 1000,
    ):
        self.V = _as_param(V, "V")
        self.Q = _as_param(Q, "Q")
        self.K = _as_param(K, "K")
        self.A = _as_param(A, "A")
        self.beta = _as_param(beta, "beta")
        self.c = _as_param(c, "c")
        self.eps = _as_param(eps, "eps")
        self.bias = _as_param(bias, "bias")
        if not (float(sinkhorn_tol) > 0):
            raise ParameterError(f"`sinkhorn_tol` must be > 0; got {sinkhorn_tol}.")
        if int(sinkhorn_max_iter) < 1:
            raise ParameterError(f"`sinkhorn_max_iter` must be >= 1; got {sinkhorn_max_iter}.")
        self.sinkhorn_tol = float(sinkhorn_tol)
        self.sinkhorn_max_iter = int(sinkhorn_max_iter)
        self._check_shapes()

    def _check_shapes(self) -> None:
        v = _shape_of(self.V, "V")
        if len(v) < 2 or v[-1] != v[-2]:
            raise ParameterError(f"`V` must have shape (d, d) (square); got shape {v}.")
        d = v[-1]
        has_qk = self.Q is not None or self.K is not None
        if self.A is None and not has_qk:
            raise ParameterError("Give the interaction matrix `A` (d, d) or both `Q` and `K` (k, d); got neither.")
        if self.A is not None and has_qk:
            raise ParameterError(
                "Give either `A` or (`Q`, `K`), not both (A = KᵀQ would be ambiguous); got A and "
                f"{'Q' if self.Q is not None else ''}{' and ' if self.Q is not None and self.K is not None else ''}{'K' if self.K is not None else ''}."
            )
        if has_qk:
            if self.Q is None or self.K is None:
                missing = "K" if self.K is None else "Q"
                raise ParameterError(f"`Q` and `K` must be given together; `{missing}` is missing.")
            q = _shape_of(self.Q, "Q")
            k = _shape_of(self.K, "K")
            if len(q) < 2 or q[-1] != d:
                raise ParameterError(f"`Q` must have shape (k, d) with d = {d} (from V); got shape {q}.")
            if len(k) < 2 or k[-2:] != q[-2:]:
                raise ParameterError(f"`K` must have the shape of `Q`, (k, d) = {q[-2:]}; got shape {k}.")
        else:
            a = _shape_of(self.A, "A")
            if len(a) < 2 or a[-2:] != (d, d):
                raise ParameterError(f"`A` must have shape (d, d) = ({d}, {d}) (d from V); got shape {a}.")

    @property
    def d(self) -> int:
        """Token dimension."""
        return _shape_of(self.V, "V")[-1]

    def at(self, t: Real[ArrayLike, ""]) -> AttentionParams:
        """All parameters evaluated at depth `t` (time-independent result)."""
        return AttentionParams(
            V=resolve(self.V, t),
            Q=resolve(self.Q, t),
            K=resolve(self.K, t),
            A=resolve(self.A, t),
            beta=resolve(self.beta, t),
            c=resolve(self.c, t),
            eps=resolve(self.eps, t),
            bias=resolve(self.bias, t),
            sinkhorn_tol=self.sinkhorn_tol,
            sinkhorn_max_iter=self.sinkhorn_max_iter,
        )

    def interaction(self, t: Real[ArrayLike, ""] = 0.0) -> Float[Array, "d d"]:
        """`A(t)`, or `K(t)ᵀQ(t)` when `A` was not given."""
        if self.A is not None:
            return jnp.asarray(resolve(self.A, t))
        return jnp.swapaxes(resolve(self.K, t), -1, -2) @ resolve(self.Q, t)

    def check_unbatched(self, name: str = "params") -> None:
        """Raise :class:`ParameterError` if any array parameter has leading batch axes."""
        shapes = {"V": 2, "Q": 2, "K": 2, "A": 2, "beta": 0, "c": 0, "eps": 0, "bias": 0}
        for field, rank in shapes.items():
            value = getattr(self, field)
            if value is None:
                continue
            shp = _shape_of(value, field)
            if len(shp) != rank:
                raise ParameterError(
                    f"`{name}.{field}` must have rank {rank} inside a solve (vmap over batched parameters "
                    f"instead of passing them batched); got shape {shp}."
                )


class MultiHeadParams(eqx.Module):
    """Multi-head attention: `Γ(x) = Σ_h C_h E_{w_h}[y]` (spec dynamics.md §1).

    **Arguments:**

    - `heads`: sequence of :class:`AttentionParams`, one per head; head `h`'s `V` is its
      value-output map `C_h = W_{O,h} V_h` (`d×d`), its `beta` its own inverse temperature.
    - `kinds`: one kind per head (from :data:`HEAD_KINDS`), or a single kind for all heads.

    **Raises:** :class:`~hassejax.errors.ParameterError` for no heads, heads of different
    `d`, a kind not in :data:`HEAD_KINDS`, or `kinds` of the wrong length.
    """

    heads: tuple[AttentionParams, ...]
    kinds: tuple[str, ...] = eqx.field(static=True)

    def __init__(self, heads, kinds: str | tuple[str, ...] | list[str] = "softmax"):
        heads = tuple(heads)
        if len(heads) == 0:
            raise ParameterError("`heads` must contain at least one AttentionParams; got an empty sequence.")
        for h, head in enumerate(heads):
            if not isinstance(head, AttentionParams):
                raise ParameterError(f"`heads[{h}]` must be an AttentionParams; got {type(head).__name__}.")
        ds = [head.d for head in heads]
        if len(set(ds)) != 1:
            raise ParameterError(f"All heads must share the token dimension d; got d = {ds}.")
        if isinstance(kinds, str):
            kinds = (kinds,) * len(heads)
        kinds = tuple(kinds)
        if len(kinds) != len(heads):
            raise ParameterError(f"`kinds` must have one entry per head ({len(heads)}); got {len(kinds)}.")
        for h, kind in enumerate(kinds):
            if kind not in HEAD_KINDS:
                raise ParameterError(f"`kinds[{h}]` must be one of {HEAD_KINDS}; got {kind!r}.")
        self.heads = heads
        self.kinds = kinds

    @property
    def d(self) -> int:
        """Token dimension."""
        return self.heads[0].d

    def at(self, t: Real[ArrayLike, ""]) -> MultiHeadParams:
        """All heads evaluated at depth `t`."""
        return MultiHeadParams(tuple(h.at(t) for h in self.heads), self.kinds)

    def check_unbatched(self, name: str = "params") -> None:
        """Raise :class:`ParameterError` if any head has batched parameters."""
        for h, head in enumerate(self.heads):
            head.check_unbatched(f"{name}.heads[{h}]")


class MaskedParams(eqx.Module):
    """Masked attention (spec dynamics.md §1): token `i` sees only the keys `j` with `mask[i, j]`.

    Positions are `s_i = i/n` (see :func:`positions`); with a causal mask the first token
    sees only itself, so it is autonomous (`ẋ_1 = V x_1` for softmax). An optional
    attention-sink token at `s = 0` is a fixed key (it does not move) that every query sees.

    **Arguments:**

    - `base`: :class:`AttentionParams` (or :class:`MultiHeadParams` with `kind="multihead"`).
    - `mask`: `(n, n)` Boolean, row = query, column = key, True = may attend; a mask from
      :mod:`hassejax.masks` or any Boolean array.
    - `kind`: the attention kind applied under the mask: one of ``softmax, l2, sigmoid,
      linear, multihead`` (Sinkhorn has no masked form here). Static.
    - `sink`: `(d,)` position of the attention-sink token, or None for no sink.

    **Raises:** :class:`~hassejax.errors.ParameterError` for an unsupported kind, a sink of
    the wrong shape; :class:`~hassejax.errors.MaskError` for a non-Boolean or non-square mask;
    :class:`~hassejax.errors.EmptyRowError` if (without a sink) some concrete row is empty.
    """

    base: AttentionParams | MultiHeadParams
    mask: Bool[Array, "n n"]
    sink: Float[Array, " d"] | None
    kind: str = eqx.field(static=True)

    def __init__(self, base, mask, kind: str = "softmax", sink=None):
        from .._checks import as_mask, check_rows_nonempty

        allowed = ("softmax", "l2", "sigmoid", "linear", "multihead")
        if kind not in allowed:
            raise ParameterError(f"`kind` of a masked model must be one of {allowed}; got {kind!r}.")
        want = MultiHeadParams if kind == "multihead" else AttentionParams
        if not isinstance(base, want):
            raise ParameterError(f"`base` must be a {want.__name__} for kind {kind!r}; got {type(base).__name__}.")
        mask = as_mask(mask, "mask", square=True, batched=True)
        d = base.d
        if sink is not None:
            sink = _as_param(sink, "sink")
            if jnp.shape(sink)[-1:] != (d,):
                raise ParameterError(f"`sink` must have shape (d,) = ({d},); got shape {jnp.shape(sink)}.")
        elif not is_traced(mask):  # value check only on concrete masks
            check_rows_nonempty(mask, "mask")
        self.base = base
        self.mask = mask
        self.sink = sink
        self.kind = kind

    @property
    def d(self) -> int:
        """Token dimension."""
        return self.base.d

    @property
    def n(self) -> int:
        """Number of tokens (the mask's size)."""
        return self.mask.shape[-1]

    def at(self, t: Real[ArrayLike, ""]) -> MaskedParams:
        """The base parameters evaluated at depth `t`."""
        return MaskedParams(self.base.at(t), self.mask, self.kind, self.sink)

    def check_unbatched(self, name: str = "params") -> None:
        """Raise :class:`ParameterError` if the base parameters, mask or sink are batched."""
        self.base.check_unbatched(f"{name}.base")
        if self.mask.ndim != 2:
            raise ParameterError(f"`{name}.mask` must have shape (n, n) inside a solve; got shape {self.mask.shape}.")
        if self.sink is not None and jnp.ndim(self.sink) != 1:
            raise ParameterError(f"`{name}.sink` must have shape (d,) inside a solve; got shape {jnp.shape(self.sink)}.")


def positions(n: int, dtype=float) -> Float[Array, " n"]:
    """Token positions `s_i = i/n`, `i = 0, …, n−1` (spec dynamics.md §1, masked attention).

    The attention sink, when present, sits at `s = 0` before token 0.

    **Raises:** :class:`~hassejax.errors.ParameterError` for `n < 1`.

    **Example:**

    ```python
    >>> from hassejax.dynamics import positions
    >>> positions(4).tolist()
    [0.0, 0.25, 0.5, 0.75]

    ```
    """
    if n < 1:
        raise ParameterError(f"`n` must be >= 1; got {n}.")
    return jnp.arange(n, dtype=dtype) / n


Params = AttentionParams | MultiHeadParams | MaskedParams
"""Any parameter container accepted by the velocity fields."""
