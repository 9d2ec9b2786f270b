"""The one adapter from the legacy `(kind, params)` form to attention kernel modules (private helpers besides).

The solvers and the functional API of :mod:`hassejax.dynamics.attention` still accept
``(kind, AttentionParams | MultiHeadParams | MaskedParams)``; they convert it here, once, with
:func:`from_params`, and then run the module.
"""

from __future__ import annotations

from typing import Any

from ...errors import ParameterError
from ..params import AttentionParams, MaskedParams, MultiHeadParams
from ._base import AbstractAttention
from ._l2 import L2
from ._linear import Linear
from ._masked import Masked
from ._multihead import MultiHead
from ._sigmoid import Sigmoid
from ._sinkhorn import Sinkhorn
from ._softmax import Softmax

__all__ = ["KINDS", "from_params"]

KINDS: tuple[str, ...] = ("softmax", "l2", "sinkhorn", "sigmoid", "linear", "multihead", "masked")
"""The legacy kind names (:func:`from_params`)."""


def _single(kind: str, p: AttentionParams) -> AbstractAttention:
    if kind == "softmax":
        return Softmax(p.V, A=p.A, Q=p.Q, K=p.K, beta=p.beta)
    if kind == "l2":
        if p.Q is None or p.K is None:
            raise ParameterError("kind 'l2' needs `Q` and `K` (the kernel is exp(−c‖Qx − Ky‖²)); got `A` only.")
        return L2(p.V, p.Q, p.K, beta=p.beta, c=p.c)
    if kind == "sinkhorn":
        return Sinkhorn(p.V, A=p.A, Q=p.Q, K=p.K, beta=p.beta, eps=p.eps, tol=p.sinkhorn_tol, max_iter=p.sinkhorn_max_iter)
    if kind == "sigmoid":
        return Sigmoid(p.V, A=p.A, Q=p.Q, K=p.K, beta=p.beta, bias=p.bias)
    return Linear(p.V, A=p.A, Q=p.Q, K=p.K, beta=p.beta)


def from_params(kind: str, params: AttentionParams | MultiHeadParams | MaskedParams) -> AbstractAttention:
    """The kernel module of a legacy `(kind, params)` pair (same parameters, same arrays, same field).

    ================================== ===========================================================
    `kind`, `params`                   module
    ================================== ===========================================================
    softmax, AttentionParams           ``Softmax(V, A=A, Q=Q, K=K, beta=beta)``
    l2, AttentionParams (`Q`, `K`)     ``L2(V, Q, K, beta=beta, c=c)``
    sinkhorn, AttentionParams          ``Sinkhorn(V, A, Q, K, beta, eps, tol=sinkhorn_tol, max_iter=sinkhorn_max_iter)``
    sigmoid, AttentionParams           ``Sigmoid(V, A=A, Q=Q, K=K, beta=beta, bias=bias)``
    linear, AttentionParams            ``Linear(V, A=A, Q=Q, K=K, beta=beta)``
    multihead, MultiHeadParams         ``MultiHead([from_params(kinds[h], heads[h]) ...])``
    masked, MaskedParams               ``Masked(from_params(kind, base), mask, sink=sink)``
    ================================== ===========================================================

    Time-dependent parameters (callables, :class:`~hassejax.dynamics.PiecewiseConstant`) are
    passed on unchanged.

    **Arguments:** `kind` one of :data:`KINDS`; `params` the matching container.

    **Returns:** an :class:`AbstractAttention` kernel.

    **Raises:** :class:`~hassejax.errors.ParameterError` for an unknown kind, a container of
    the wrong type for the kind, or L2 without `Q`, `K`.

    Source: (derived) the legacy API of spec dynamics.md §1.

    **Example:**

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import AttentionParams
    >>> from hassejax.dynamics.attention import from_params
    >>> type(from_params("softmax", AttentionParams(V=jnp.eye(2), A=jnp.eye(2)))).__name__
    'Softmax'

    ```
    """
    if not isinstance(kind, str) or kind not in KINDS:
        raise ParameterError(f"`kind` must be one of {KINDS}; got {kind!r}.")
    want = {"multihead": MultiHeadParams, "masked": MaskedParams}.get(kind, AttentionParams)
    if not isinstance(params, want):
        raise ParameterError(f"`params` for kind {kind!r} must be a {want.__name__}; got {type(params).__name__}.")
    if kind == "multihead":
        return MultiHead([from_params(k, head) for k, head in zip(params.kinds, params.heads)])
    if kind == "masked":
        return Masked(from_params(params.kind, params.base), params.mask, sink=params.sink)
    return _single(kind, params)


def as_model(model: AbstractAttention | str, params: Any = None) -> tuple[AbstractAttention, Any, str]:
    """`(kernel, object to check, its name)` from a kernel, or from a legacy kind string and its params."""
    if isinstance(model, str):
        if params is None:
            raise ParameterError(f"The legacy form (kind {model!r}) needs the `params` container after the kind; got none.")
        return from_params(model, params), params, "params"
    if not isinstance(model, AbstractAttention):
        raise ParameterError(
            "`model` must be an attention kernel (an AbstractAttention such as Softmax(...)) or, in the legacy form, "
            f"a kind string followed by its params; got {type(model).__name__}."
        )
    if params is not None:
        raise ParameterError(f"`params` goes only with a kind string (legacy form); got a {type(model).__name__} model and params.")
    return model, model, "model"


def split_call(model: AbstractAttention | str, args: tuple, names: tuple[str, ...], n_required: int, fn: str):
    """Parse ``fn(model, *names)`` or the legacy ``fn(kind, params, *names)``: `(kernel, checked, label, values)`.

    `values` has one entry per name (None for optional ones not given).
    """
    params = None
    if isinstance(model, str):
        if not args:
            raise ParameterError(f"{fn}({model!r}, ...): the legacy form is {fn}(kind, params, {', '.join(names)}, ...); got no params.")
        params, args = args[0], args[1:]
    if not n_required <= len(args) <= len(names):
        form = ", ".join(names[:n_required]) + "".join(f"[, {n}]" for n in names[n_required:])
        raise ParameterError(f"{fn} takes (model, {form}) positionally (legacy: (kind, params, {form})); got {len(args)} after the model.")
    kernel, checked, label = as_model(model, params)
    return kernel, checked, label, tuple(args) + (None,) * (len(names) - len(args))
