"""How much attention goes to the sink? The weight each query puts on a fixed attention-sink token.

For :class:`~hassejax.dynamics.Masked` with a ``sink`` (Castin, Ablin, Carrillo, Peyré,
arXiv:2501.18322, masked attention with a sink token at `s = 0`): query `i` attends to the
sink and to the keys its mask row allows, with the kernel's weights, so
`Γ(x_i) = V (w_i,sink · sink + Σ_j w_ij x_j)`. :func:`sink_weight` returns `w_i,sink`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, Real

from ...errors import ParameterError
from ..attention import Masked
from ._common import check_tokens

__all__ = ["sink_weight"]


def sink_weight(
    model: Masked, x: Float[ArrayLike, "*batch n d"], t: Real[ArrayLike, ""] = 0.0
) -> Float[Array, "*batch n"]:
    """The weight `w_i,sink` that each query `x_i` puts on the sink token at depth `t`.

    The keys of query `i` are the sink (always allowed) and the tokens `x_j` its mask row
    allows (mask convention: row = query, column = key, True = may attend); the weights are
    the kernel's own (:meth:`weights`, e.g. softmax of `β y_jᵀ A x_i`), so each row of
    weights, sink included, sums to 1 for softmax.

    **Arguments:**

    - `model`: a :class:`~hassejax.dynamics.Masked` model with a ``sink`` and a kernel that
      has a weight matrix (softmax, L2, sigmoid, linear; not multi-head).
    - `x`: `(*batch, n, d)` float tokens, `n` the mask size.
    - `t`: depth at which time-dependent parameters are read (default 0).

    **Returns:** `(*batch, n)` float weights on the sink.

    **Raises:** :class:`~hassejax.errors.ParameterError` if `model` is not a ``Masked`` model
    with a sink, or `x` is not `(*batch, n, d)`.

    Source: (derived) from the masked velocity field with a sink (arXiv:2501.18322).

    **Example:** one token at the origin sees itself and the sink with equal logits 0:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Masked, Softmax
    >>> from hassejax.dynamics.diagnostics.sink import sink_weight
    >>> m = Masked(Softmax(V=jnp.eye(2), A=jnp.eye(2)), jnp.ones((1, 1), bool), sink=jnp.array([1.0, 0.0]))
    >>> sink_weight(m, jnp.zeros((1, 2))).tolist()
    [0.5]

    ```
    """
    if not isinstance(model, Masked) or model.sink is None:
        raise ParameterError(f"`model` must be a Masked model with a sink; got {type(model).__name__} without one.")
    x = jnp.asarray(x)
    check_tokens(x)
    n, d = model.n, model.d
    if x.shape[-2:] != (n, d):
        raise ParameterError(f"`x` must have shape (*batch, n, d) = (..., {n}, {d}); got shape {x.shape}.")
    sink = jnp.asarray(model.sink, x.dtype)
    mask = jnp.concatenate([jnp.ones((n, 1), dtype=bool), jnp.asarray(model.mask, bool)], axis=1)

    def one(xi):
        keys = jnp.concatenate([sink[None, :], xi], axis=0)
        return model.kernel.weights(t, xi, keys, mask)[:, 0]

    flat = x.reshape((-1, n, d))
    return jax.vmap(one)(flat).reshape(x.shape[:-1])
