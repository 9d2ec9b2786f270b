"""Time-dependent parameters of the attention kernels (spec dynamics.md §1).

Any array parameter of a kernel (:mod:`hassejax.dynamics.attention`) may depend on depth `t`:
give a callable `t ↦ array` (e.g. a small :class:`equinox.Module`) or a
:class:`PiecewiseConstant` (one value per layer); :func:`resolve` evaluates one at `t`.
A plain function or lambda is a static part of the compiled solve (its identity, not its values): a new one
compiles the solve again (seconds each), so to vary a time-dependent parameter over many solves, keep its numbers
in the arrays of an :class:`equinox.Module` (or a :class:`PiecewiseConstant`), which are traced and share one
program (and batch under ``vmap``).
:func:`positions` gives the token positions of masked attention. The private helpers
``_as_param`` and ``_shape_of`` convert and shape-check a parameter (statically, so they work
on tracers) for the kernel constructors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Real

from .._tracing import is_traced
from ..errors import ParameterError

__all__ = ["PiecewiseConstant", "resolve", "positions"]

TimeParam = Callable[[Real[ArrayLike, ""]], Array]
"""A parameter given as a function of depth `t`: any callable, e.g. a
:class:`~hassejax.dynamics.PiecewiseConstant` or a small :class:`equinox.Module`."""

# What the kernel constructors take (leading batch axes allowed outside a solve).
MatrixParam = Real[ArrayLike, "... d d"] | TimeParam
ProjParam = Real[ArrayLike, "... k d"] | TimeParam
ScalarParam = Real[ArrayLike, "*_batch"] | TimeParam


class PiecewiseConstant(eqx.Module):
    """A parameter constant on each layer: `values[l]` on `t_edges[l] <= t < t_edges[l + 1]`.

    Outside `[t_edges[0], t_edges[-1])` the first / last value is used.

    **Arguments:**

    - `values`: `(L, *shape)` one value per layer.
    - `t_edges`: `(L + 1,)` increasing layer boundaries. Default `0, 1, …, L` (one unit of
      depth per layer).

    **Raises:** :class:`~hassejax.errors.ParameterError` if `t_edges` does not have length
    `L + 1` or is not strictly increasing (checked when concrete), or `values` has no layer axis.

    Source: spec dynamics.md §1 (parameters "optionally time dependent (callable of `t`, or piecewise constant per
    layer)").

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

    values: Float[Array, " L *shape"]
    t_edges: Float[Array, " L1"]

    def __init__(
        self, values: Float[ArrayLike, " L *shape"], t_edges: Float[ArrayLike, " L1"] | Sequence[float] | None = None
    ):
        values = jnp.asarray(values)
        if values.ndim < 1 or values.shape[0] < 1:
            raise ParameterError(f"`values` must have a leading layer axis of length L >= 1; got shape {values.shape}.")
        n_layers = values.shape[0]
        if t_edges is None:
            t_edges = jnp.arange(
                n_layers + 1, dtype=values.dtype if jnp.issubdtype(values.dtype, jnp.floating) else float
            )
        t_edges = jnp.asarray(t_edges)
        if t_edges.shape != (n_layers + 1,):
            raise ParameterError(
                f"`t_edges` must have shape (L + 1,) = ({n_layers + 1},) for {n_layers} layers; got shape {t_edges.shape}."
            )
        if not is_traced(t_edges) and not bool(jnp.all(jnp.diff(t_edges) > 0)):
            raise ParameterError(f"`t_edges` must be strictly increasing layer boundaries; got {t_edges.tolist()}.")
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


def _concrete_layers(*params: Any) -> tuple[np.ndarray | None, tuple[np.ndarray, ...]] | None:
    """The values `params` take together on every layer: ``(starts, values)``, or None.

    :class:`PiecewiseConstant` parameters are read at every boundary of all of them together (the
    value on each layer of their common refinement): `starts` holds the `K` layer starts (layer `k`
    runs from ``starts[k]`` to ``starts[k + 1]``, the first from `-inf`, the last to `+inf`), None
    when no parameter is piecewise constant (`K = 1`). Each of `values` has shape
    ``(K, 1, …, 1, *shape)``, its own shape after a layer axis and enough axes of 1 that the
    values of all `params` broadcast against each other with their layers paired up (a batched
    array `(B,)` beside a scalar :class:`PiecewiseConstant`: `(1, B)` and `(K, 1)`). None when any
    parameter is traced or a callable other than a :class:`PiecewiseConstant` (not checked: its
    values are known only inside a solve).
    """
    pieces = [p for p in params if isinstance(p, PiecewiseConstant)]
    if any(is_traced(p.values, p.t_edges) for p in pieces):
        return None
    if any((callable(p) and not isinstance(p, PiecewiseConstant)) or is_traced(p) for p in params):
        return None
    starts = np.unique(np.concatenate([np.asarray(p.t_edges)[:-1] for p in pieces])) if pieces else None
    raw = []
    for p in params:
        if isinstance(p, PiecewiseConstant):
            idx = np.clip(np.searchsorted(np.asarray(p.t_edges), starts, side="right") - 1, 0, p.values.shape[0] - 1)
            raw.append(np.asarray(p.values)[idx])
        else:
            raw.append(np.asarray(p)[None])
    width = max(v.ndim - 1 for v in raw)
    return starts, tuple(v.reshape(v.shape[:1] + (1,) * (width - v.ndim + 1) + v.shape[1:]) for v in raw)


def _shape_of(value: Any, name: str) -> tuple[int, ...]:
    if isinstance(value, PiecewiseConstant):
        return value.shape
    if callable(value):
        try:
            out = jax.eval_shape(value, jnp.zeros(()))
        except Exception as err:
            raise ParameterError(f"`{name}` is callable but calling it at t = 0.0 failed: {err!r}.") from err
        return tuple(out.shape)
    return tuple(jnp.shape(value))


def _as_param(value: Any, name: str) -> Any:
    if value is None or callable(value):
        return value
    if isinstance(value, (str, bytes)):
        raise ParameterError(
            f"`{name}` must be a real array, a callable of t or a PiecewiseConstant; got the string {value!r}."
        )
    try:
        arr = jnp.asarray(value)
    except (TypeError, ValueError) as err:
        raise ParameterError(
            f"`{name}` must be an array, a callable of t or a PiecewiseConstant; got {type(value).__name__}."
        ) from err
    if not jnp.issubdtype(arr.dtype, jnp.number) or jnp.issubdtype(arr.dtype, jnp.complexfloating):
        raise ParameterError(f"`{name}` must be a real array; got dtype {arr.dtype}.")
    if not jnp.issubdtype(arr.dtype, jnp.floating):
        arr = arr.astype(float)
    return arr


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
