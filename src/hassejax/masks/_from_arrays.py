"""Converters of arrays in foreign conventions to Boolean masks: additive biases, "blocked" masks.

Spec hasse.md §0: converted explicitly, never guessed (row = query, column = key, True = may
attend).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Shaped

from ..errors import MaskError
from ._args import checked, is_traced, require
from ._convert_args import _array_arg, _check_array_memory, _first_bad, _threshold_arg

__all__ = ["from_additive_bias", "from_blocked"]


@checked(bias=_array_arg, threshold=_threshold_arg)
def from_additive_bias(
    bias: Shaped[ArrayLike, "*batch n_q n_k"], threshold: float | None = None
) -> Bool[Array, "*batch n_q n_k"]:
    """Boolean mask from an additive attention bias: ``M = (bias == 0)``, blocked where ``bias == -inf``.

    Softmax attention adds the bias to the logits: `0` keeps a key, `-inf` removes it.
    Only a *binary* bias is a mask; every entry must be exactly `0` (True) or `-inf`
    (False). Libraries that block with a large finite negative number instead (HF
    transformers uses ``torch.finfo(dtype).min``, others `-1e9`) need `threshold`: then
    every entry ``<= threshold`` counts as blocked. Anything else (positive values,
    small negative values such as ALiBi distances, NaN) is not a mask and an error.

    **Arguments:**

    - `bias`: real array of shape `(..., n_q, n_k)` (any float or integer dtype).
    - `threshold`: ``None`` (default: only `-inf` blocks) or a negative number: entries
      ``<= threshold`` block.

    **Returns:** a Boolean array of the same shape (True = may attend).

    **Raises:** :class:`~hassejax.errors.MaskError` for a Boolean or complex dtype, a rank
    below 2, a non-negative `threshold`, or an entry that is neither `0` nor blocked
    (the message gives how many, the first index and its value). Traced inputs are
    checked with :func:`equinox.error_if`. :class:`~hassejax.errors.MemoryBudgetError`
    (naming `bias`) if its copy and the Boolean temporaries would not fit, estimated from
    its shape and dtype before anything is copied.

    **Example:** a causal bias with `-inf` above the diagonal; the same bias blocking with `-1e9`
    needs `threshold`, and without it is refused:

    ```python
    >>> import numpy as np
    >>> from hassejax.masks import from_additive_bias
    >>> bias = np.triu(np.full((3, 3), -np.inf, np.float32), k=1)
    >>> from_additive_bias(bias).astype(int).tolist()
    [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    >>> finite = np.where(bias == 0, 0, -1e9).astype(np.float32)
    >>> from_additive_bias(finite, threshold=-1e4).astype(int).tolist()
    [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    >>> from_additive_bias(finite)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hassejax.errors.MaskError: `bias` entries must be exactly 0 (may attend) or -inf (blocked); got 3 such entries, ...

    ```

    **References:** spec hasse.md §0 (foreign conventions converted explicitly, never guessed: additive biases `0` /
    `-inf`).
    """
    dtype = bias.dtype
    if dtype == np.bool_ or not (jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer)):
        raise MaskError(
            f"`bias` must have a real (float or integer) dtype; got dtype {dtype}. "
            "A Boolean array is already a mask (True = may attend); use it directly."
        )
    _check_array_memory(bias, "bias", "from_additive_bias")
    x = jnp.asarray(bias)
    allowed = x == 0
    blocked = (x == -jnp.inf) if threshold is None else (x <= threshold)
    bad = ~(allowed | blocked)
    rule = "exactly 0 (may attend) or -inf (blocked)" if threshold is None else f"exactly 0 or <= threshold={threshold}"
    if not is_traced(bad) and bool(jnp.any(bad)):
        hint = (
            "" if threshold is not None else " For a finite blocking value (e.g. finfo.min or -1e9) pass `threshold`."
        )
        raise MaskError(f"`bias` entries must be {rule}; got {_first_bad(bad, x)}.{hint}")
    return require(allowed, ~jnp.any(bad), f"`bias` entries must be {rule}.")


@checked(blocked=_array_arg)
def from_blocked(blocked: Shaped[ArrayLike, "*batch n_q n_k"]) -> Bool[Array, "*batch n_q n_k"]:
    """Boolean mask from a "1 = cannot attend" mask: ``M = (blocked == 0)``.

    The convention of XLNet's ``perm_mask`` (``perm_mask[i, j] = 1``: `i` cannot attend
    to `j`), of padding masks and of PyTorch ``nn.MultiheadAttention``'s Boolean
    ``attn_mask`` (True = not allowed). Values must be 0/1 only (bool, integer or float
    dtype), so that a 0/1 "may attend" mask or a bias is never taken for one silently.

    **Arguments:**

    - `blocked`: array of shape `(..., n_q, n_k)` holding only 0 and 1 (or False/True);
      1 = blocked.

    **Returns:** a Boolean array of the same shape, ``~blocked`` (True = may attend).

    **Raises:** :class:`~hassejax.errors.MaskError` for a rank below 2, a complex or
    non-numeric dtype, or a value other than 0/1 (the message gives the first one).
    Traced inputs are checked with :func:`equinox.error_if`.
    :class:`~hassejax.errors.MemoryBudgetError` (naming `blocked`) if its copy and the
    Boolean temporaries would not fit, estimated from its shape and dtype before anything
    is copied.

    **Example:** a 0/1 "cannot attend" mask (an XLNet-style ``perm_mask``) flipped into a mask;
    any value other than 0/1 is refused:

    ```python
    >>> import numpy as np
    >>> from hassejax.masks import from_blocked
    >>> perm_mask = np.triu(np.ones((3, 3), np.float32), k=1)     # 1 above the diagonal: causal
    >>> from_blocked(perm_mask).astype(int).tolist()
    [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    >>> perm_mask[0, 1] = 2
    >>> from_blocked(perm_mask)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hassejax.errors.MaskError: `blocked` must hold only 0 (may attend) and 1 (blocked); got 1 such entry, first at ...

    ```

    **References:** spec hasse.md §0 ("1 = blocked" integer masks: XLNet ``perm_mask``, padding masks); Yang et al.,
    "XLNet", arXiv:1906.08237.
    """
    dtype = blocked.dtype
    if not (dtype == np.bool_ or jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer)):
        raise MaskError(f"`blocked` must have a bool, integer or float dtype holding 0/1; got dtype {dtype}.")
    _check_array_memory(blocked, "blocked", "from_blocked")
    x = jnp.asarray(blocked)
    if dtype == np.bool_:
        return ~x
    bad = ~((x == 0) | (x == 1))
    if not is_traced(bad) and bool(jnp.any(bad)):
        raise MaskError(f"`blocked` must hold only 0 (may attend) and 1 (blocked); got {_first_bad(bad, x)}.")
    return require(x == 0, ~jnp.any(bad), "`blocked` must hold only 0 (may attend) and 1 (blocked).")
