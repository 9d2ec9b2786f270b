"""The one masked softmax of the package (private module; public as :func:`hassejax.nn.masked_softmax`).

Used by the Transformer layers (:mod:`hassejax.nn.attention`) and the attention dynamics
(:mod:`hassejax.dynamics.attention`); it imports neither, so ``import hassejax.dynamics``
does not load :mod:`hassejax.nn`. Mask convention: Boolean, row = query, column = key,
True = may attend.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from .errors import MaskError

__all__ = ["masked_softmax"]


def masked_softmax(logits: Float[Array, "*batch q k"], mask: Bool[Array, "*#batch q k"]) -> Float[Array, "*batch q k"]:
    """Softmax over the last axis restricted to the allowed keys; a fully masked row gives zeros.

    ``w[..., i, j] = mask[i, j] · exp(s_ij − m_i) / Σ_{j': mask[i, j']} exp(s_ij' − m_i)`` with
    ``m_i`` the largest allowed logit of row `i` (held constant under differentiation: the
    softmax does not depend on it). Masked entries are exactly 0 and so are their gradients
    (exact structural zeros, which :func:`hassejax.nn.jacobian_flow` relies on). A row with no
    allowed key is all zeros — not the uniform average that a large-negative fill gives; so is a row
    whose allowed logits are all `−inf` (e.g. an additive `−inf` bias beside the mask; the
    softmax of such a row is undefined, and `−inf − (−inf)` made it NaN).

    **Arguments:**

    - `logits`: float array `(*batch, q, k)`.
    - `mask`: bool array broadcastable to `logits`; True = may attend.

    **Returns:** float array of the shape of `logits`; each row sums to 1, or to 0 if empty.

    **Raises:** :class:`~hassejax.errors.MaskError` if `mask` is not Boolean or does not
    broadcast to the shape of `logits`.

    Source: spec hasse.md §4 (the empty-row rule, derived).

    **Example:** the second row allows no key:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.nn import masked_softmax
    >>> mask = jnp.array([[True, True, False], [False, False, False]])
    >>> masked_softmax(jnp.zeros((2, 3)), mask).tolist()
    [[0.5, 0.5, 0.0], [0.0, 0.0, 0.0]]

    ```
    """
    if jnp.result_type(mask) != jnp.bool_:
        raise MaskError(f"`mask` must be Boolean (True = may attend); got dtype {jnp.result_type(mask)}.")
    try:
        ok = jnp.broadcast_shapes(jnp.shape(mask), jnp.shape(logits)) == tuple(jnp.shape(logits))
    except ValueError:
        ok = False
    if not ok:
        raise MaskError(
            f"`mask` of shape {jnp.shape(mask)} does not broadcast to the logits' shape {jnp.shape(logits)}."
        )
    # an allowed key at logit −inf has weight 0 (a row of only those: empty); a NaN logit stays visible
    mask = mask & (logits != -jnp.inf)
    has_key = jnp.any(mask, axis=-1, keepdims=True)
    row_max = jnp.max(jnp.where(mask, logits, -jnp.inf), axis=-1, keepdims=True)
    row_max = jax.lax.stop_gradient(jnp.where(has_key, row_max, 0.0))
    shifted = jnp.where(mask, logits - row_max, 0.0)  # masked entries never reach exp's tail
    unnorm = jnp.where(mask, jnp.exp(shifted), 0.0)
    denom = jnp.sum(unnorm, axis=-1, keepdims=True)  # >= 1 on a non-empty row (its max gives exp(0))
    return unnorm / jnp.where(has_key, denom, 1.0)
