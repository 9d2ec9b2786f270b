"""Document (packed-sequence) masks: attention restricted to each document, an inner rule inside."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Int

from ..errors import MaskError
from ._args import check_mask_memory, checked, index_vector, is_traced, require
from ._mask_mod import evaluate_mask_mod
from ._validate import check_contiguous_ids, check_document_lengths, inner_arg, kind_arg

__all__ = ["document"]


def _segments_arg(value, name: str):
    return index_vector(value, name)


@jax.jit
def _runs(ids):
    """Run structure of an id vector (a run = maximal block of equal ids), in O(n log n).

    Returns the run label and the within-run offset of every position, and whether each
    id forms a single run (number of runs == number of distinct ids: no document split).
    """
    n = ids.shape[0]
    pos = jnp.arange(n, dtype=jnp.int32)
    change = jnp.concatenate([jnp.ones((1,), dtype=bool), ids[1:] != ids[:-1]])
    run = jnp.cumsum(change) - 1
    start = jax.lax.cummax(jnp.where(change, pos, 0))
    ordered = jnp.sort(ids)
    distinct = 1 + jnp.sum(ordered[1:] != ordered[:-1])
    return run, pos - start, run[-1] + 1 == distinct


@functools.partial(jax.jit, static_argnames=("inner",))
def _document_named(ids, inner):
    run, offset, contiguous = _runs(ids)
    same_run = run[:, None] == run[None, :]
    if inner == "full":
        return same_run, contiguous
    return same_run & (offset[None, :] <= offset[:, None]), contiguous


@checked(segments=_segments_arg, inner=inner_arg, kind=kind_arg)
def document(
    segments: Sequence[int] | Int[ArrayLike, " s"],
    inner: Callable | Literal["causal", "full"] | None = None,
    *,
    kind: Literal["lengths", "ids"] = "lengths",
) -> Bool[Array, "n n"]:
    """Document mask of packed sequences: ``M[q, k] = doc[q] == doc[k] and inner(q - start[q], k - start[k])``.

    Several documents are packed into one sequence; a query sees only keys of its own
    document, and inside a document the `inner` rule applies to the *within-document
    offsets* (``start[i]`` is the first position of the document of `i`). With the default
    causal inner rule this is attention-gym's ``generate_doc_mask_mod(causal_mask, offsets)``
    and xformers' ``BlockDiagonalCausalMask``; ``inner="full"`` gives a block-diagonal mask.

    **Arguments:**

    - `segments`: with ``kind="lengths"`` (default) the document lengths, integers >= 1
      (`n` = their sum); with ``kind="ids"`` one document id per position (`n` = its
      length), each document one contiguous run (``[0, 0, 1, 1, 1]``; ``[0, 1, 0]`` is an
      error: a document must not be split). Ids may be traced under ``jax.jit`` (ids beyond
      int32 then need ``jax_enable_x64``: JAX truncates int64 arguments to int32 without it;
      concrete ids are compared whole within int64, and ids beyond it, e.g. uint64 hashes
      from ``2**63`` on, are refused: relabel them first, ``np.unique(ids, return_inverse=True)[1]``);
      lengths fix the shape and must be concrete.
    - `inner`: the rule inside a document: ``None`` or ``"causal"`` (``k_off <= q_off``),
      ``"full"`` (every pair), or a FlexAttention-style callable
      ``inner(b, h, q_off, k_off) -> bool`` written with jnp (evaluated with ``b = h = 0``
      on int32 offsets under :func:`jax.vmap`).
    - `kind`: ``"lengths"`` or ``"ids"``: how to read `segments` (never guessed).

    **Returns:** a Boolean array of shape `(n, n)`.

    **Raises:** :class:`~hassejax.errors.MaskError` for non-integer segments, a length < 1,
    ids that split a document, a bad `kind`, or an `inner` that is not a Boolean mask_mod.

    **Example:** documents of lengths 2 and 3, causal inside each; the same two documents
    given as ids with full attention inside give a block-diagonal mask:

    ```python
    >>> from hassejax.masks import document
    >>> document([2, 3]).astype(int).tolist()
    [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 1, 1, 0], [0, 0, 1, 1, 1]]
    >>> document([7, 7, 3, 3, 3], "full", kind="ids").astype(int).tolist()
    [[1, 1, 0, 0, 0], [1, 1, 0, 0, 0], [0, 0, 1, 1, 1], [0, 0, 1, 1, 1], [0, 0, 1, 1, 1]]

    ```

    **References:** mask gallery "document / packed causal"; attention-gym
    ``document_mask.py``; xformers ``BlockDiagonalCausalMask``.
    """
    if kind == "lengths":
        if is_traced(segments):
            raise MaskError(
                "`segments` given as lengths fix the mask's shape and must be concrete (not traced under jit); "
                "pass per-position ids with kind='ids' to trace them."
            )
        check_document_lengths(segments)
        n = int(segments.sum())
        check_mask_memory(n, n, "document", argument="segments")
        ids = jnp.asarray(np.repeat(np.arange(segments.shape[0]), segments), dtype=jnp.int32)
    else:
        check_mask_memory(segments.shape[0], segments.shape[0], "document", argument="segments")
        # Concrete ids (int64) relabelled 0, 1, ... (equal ids stay equal, distinct ones distinct): a cast to
        # int32 would merge ids that agree in their low 32 bits (5 and 5 + 2**32). Traced ids keep their dtype.
        ids = segments if is_traced(segments) else jnp.asarray(np.unique(segments, return_inverse=True)[1], jnp.int32)
    if inner is None or isinstance(inner, str):
        mask, contiguous = _document_named(ids, inner="full" if inner == "full" else "causal")
    else:
        run, offset, contiguous = _runs(ids)
        mask = (run[:, None] == run[None, :]) & evaluate_mask_mod(inner, offset, offset, 0, 0, "inner")
    if kind == "ids":
        if not is_traced(contiguous) and not bool(contiguous):
            check_contiguous_ids(np.asarray(segments))  # raises, naming where the document comes back
        mask = require(
            mask, contiguous, "`segments` (document ids, kind='ids') must give each document one contiguous run."
        )
    return mask
