"""Packed sequences as Hugging Face and flash-attn describe them: document ids from ``position_ids`` or ``cu_seqlens``."""

from __future__ import annotations

from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Int

from .._checks import check_memory
from ..errors import MaskError
from ._args import checked, describe, index_vector, is_traced, require
from ._validate import _is_integer_dtype

__all__ = ["packed_document_ids"]


def _position_ids_arg(value, name: str):
    """Normalise `position_ids`: an integer array of shape (n,) or (batch, n), n >= 1.

    Concrete input becomes a NumPy ``int64`` array (for exact messages), traced input stays.
    """
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        try:
            arr = np.asarray(value)
        except ValueError:  # ragged nested lists
            raise MaskError(
                f"`{name}` must be a rectangular (n,) or (batch, n) array of integers; got ragged lists."
            ) from None
        if arr.size == 0:
            raise MaskError(f"`{name}` must hold at least one position; got an empty {type(value).__name__}.")
        if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
            raise MaskError(f"`{name}` must hold integers; got {describe(arr)} from a {type(value).__name__}.")
        value = arr
    if not (hasattr(value, "shape") and hasattr(value, "dtype")):
        raise MaskError(f"`{name}` must be an integer array of shape (n,) or (batch, n); got {describe(value)}.")
    if value.dtype == np.bool_ or not _is_integer_dtype(value.dtype):
        raise MaskError(f"`{name}` must have an integer dtype (positions 0, 1, 2, ...); got dtype {value.dtype}.")
    if value.ndim not in (1, 2):
        raise MaskError(
            f"`{name}` must have shape (n,) or (batch, n); got shape {tuple(value.shape)} (rank {value.ndim})."
        )
    if value.shape[-1] == 0:
        raise MaskError(f"`{name}` must hold at least one position a row; got shape {tuple(value.shape)}.")
    return value if is_traced(value) else np.asarray(value).astype(np.int64)


def _cu_seqlens_arg(value, name: str):
    """Normalise `cu_seqlens`: a concrete 1-D integer vector ``[0, l1, l1 + l2, ..., n]``, strictly increasing."""
    if value is None:
        return None
    cu = index_vector(value, name)
    if is_traced(cu):
        raise MaskError(
            f"`{name}` fixes the number of positions n = cu_seqlens[-1] (the shape of the result) and must be "
            "concrete (not traced under jax.jit); under jit pass `position_ids` instead, or build the ids outside."
        )
    if cu.shape[0] < 2:
        raise MaskError(f"`{name}` must hold at least two entries [0, l1, ...] (one document); got {cu.tolist()}.")
    if cu[0] != 0:
        raise MaskError(f"`{name}` must start at 0 (cumulative lengths [0, l1, l1 + l2, ..., n]); got {cu.tolist()}.")
    bad = np.flatnonzero(np.diff(cu) < 1)
    if bad.size:
        i = int(bad[0])
        raise MaskError(
            f"`{name}` must be strictly increasing (every document at least one position); got "
            f"cu_seqlens[{i}] = {int(cu[i])} and cu_seqlens[{i + 1}] = {int(cu[i + 1])} in {cu.tolist()}."
        )
    return cu


@checked(position_ids=_position_ids_arg, cu_seqlens=_cu_seqlens_arg)
def packed_document_ids(
    *,
    position_ids: Int[ArrayLike, "*batch n"] | Sequence | None = None,
    cu_seqlens: Int[ArrayLike, " m"] | Sequence[int] | None = None,
) -> Int[Array, "*batch n"]:
    """Document id of every position of a packed sequence, from ``position_ids`` or ``cu_seqlens``.

    Packing puts several documents into one row; the two usual descriptions are

    - Hugging Face ``position_ids`` (the position of every token inside its document,
      ``concat(arange(l_1), arange(l_2), ...)``): a new document starts at `i` where
      ``position_ids[i] != position_ids[i - 1] + 1`` (and at 0), the rule of
      ``transformers.masking_utils.find_packed_sequence_indices``; with shape
      ``(batch, n)`` every row is read on its own;
    - flash-attn varlen ``cu_seqlens`` (cumulative lengths ``[0, l_1, l_1 + l_2, ..., n]``):
      document `i` spans positions ``[cu_seqlens[i], cu_seqlens[i + 1])``.

    The ids count documents from 0 in order (``[0, 0, 0, 1, 1]``), each document one
    contiguous run: exactly the per-position ids that
    :func:`hassejax.masks.document` and :func:`hassejax.masks.structured.document` take
    with ``kind="ids"``. ``document(ids, kind="ids")`` is the packed causal mask
    ``(ids[q] == ids[k]) & (k <= q)`` (``inner="full"``: block diagonal, or any mask_mod
    over within-document offsets); ``structured.document(ids, kind="ids")`` is the same as
    an :class:`~hassejax.masks.IntervalMask` (no ``n × n`` array). The lengths
    ``np.diff(cu_seqlens)`` are `document`'s default ``kind="lengths"``.

    `position_ids` may be traced under :func:`jax.jit` (negative positions are then a
    run-time error through :func:`equinox.error_if`) and the result composes with the
    traced ``document(ids, kind="ids")``; `cu_seqlens` fixes `n` and must be concrete.

    **Arguments:** exactly one of

    - `position_ids`: integer array of shape `(n,)` or `(batch, n)`, entries >= 0.
    - `cu_seqlens`: integer vector of shape `(m,)`, ``m >= 2``: 0, then strictly
      increasing cumulative lengths; ``n = cu_seqlens[-1]``.

    **Returns:** int32 ids of shape `(n,)`, or `(batch, n)` for 2-D `position_ids`
    (each row's ids start at 0).

    **Raises:** :class:`~hassejax.errors.MaskError` naming the argument: neither or both
    given; `position_ids` not integer, not of rank 1 or 2, empty, or with a negative
    entry (the message gives the first); `cu_seqlens` not a 1-D integer vector, traced,
    shorter than 2, not starting at 0 or not strictly increasing (the message gives
    where). :class:`~hassejax.errors.MemoryBudgetError` (naming `cu_seqlens`) if the
    `n` ids would not fit.

    Source: (derived); Hugging Face ``transformers.masking_utils.find_packed_sequence_indices``,
    flash-attn ``flash_attn_varlen_func`` (``cu_seqlens``).

    **Example:**

    ```python
    >>> import jax, numpy as np
    >>> from hassejax.masks import document, packed_document_ids, structured
    >>> ids = packed_document_ids(position_ids=[0, 1, 2, 0, 1])
    >>> ids.tolist()
    [0, 0, 0, 1, 1]
    >>> packed_document_ids(cu_seqlens=[0, 3, 5]).tolist()
    [0, 0, 0, 1, 1]
    >>> np.asarray(document(ids, kind="ids")).astype(int)  # causal inside each document
    array([[1, 0, 0, 0, 0],
           [1, 1, 0, 0, 0],
           [1, 1, 1, 0, 0],
           [0, 0, 0, 1, 0],
           [0, 0, 0, 1, 1]])
    >>> structured.document(ids, kind="ids").row(4)  # the same as key runs
    [(3, 5)]
    >>> batch = packed_document_ids(position_ids=[[0, 1, 0, 1], [0, 1, 2, 3]])
    >>> batch.tolist()
    [[0, 0, 1, 1], [0, 0, 0, 0]]
    >>> jax.vmap(lambda row: document(row, "full", kind="ids"))(batch).shape
    (2, 4, 4)

    ```
    """
    if (position_ids is None) == (cu_seqlens is None):
        given = "both" if position_ids is not None else "neither"
        raise MaskError(f"pass exactly one of `position_ids` and `cu_seqlens` (as keywords); got {given}.")
    if cu_seqlens is not None:
        n = int(cu_seqlens[-1])
        check_memory(12 * n, f"packed_document_ids: {n} document ids (cu_seqlens[-1] = {n})", "cu_seqlens")
        lengths = np.diff(cu_seqlens)
        return jnp.asarray(np.repeat(np.arange(lengths.shape[0], dtype=np.int32), lengths))
    pos = position_ids
    if not is_traced(pos):
        negative = np.argwhere(pos < 0)
        if negative.size:
            where = tuple(int(i) for i in negative[0])
            raise MaskError(
                f"`position_ids` must be >= 0 (positions inside each document); got {int(pos[where])} at index "
                f"{where[0] if len(where) == 1 else where}."
            )
        start = np.ones(pos.shape, dtype=bool)
        start[..., 1:] = pos[..., 1:] != pos[..., :-1] + 1
        return jnp.asarray(np.cumsum(start, axis=-1, dtype=np.int32) - 1)
    start = jnp.concatenate([jnp.ones(pos.shape[:-1] + (1,), dtype=bool), pos[..., 1:] != pos[..., :-1] + 1], axis=-1)
    ids = jnp.cumsum(start, axis=-1, dtype=jnp.int32) - 1
    return require(ids, ~jnp.any(pos < 0), "`position_ids` must be >= 0 (positions inside each document).")
