"""Masks into JAX splash attention: :func:`to_splash` (re-exported by :mod:`hassejax.kernels.splash`).

Writes the exact structured splash mask where one exists (``CausalMask``, ``LocalMask``,
``ChunkedCausalMask``, ``FullMask`` and their ``&`` / ``|``), a ``NumpyMask`` (or a lazy mask)
otherwise. Convention: row = query, column = key, True = may attend.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Literal

import numpy as np

from .._warn import user_stacklevel
from ..errors import MaskError
from ..masks._intervals import DENSE_BLOCK_BYTES, check_host_memory
from ..masks._validate import checked, describe

__all__ = ["to_splash"]


# ----------------------------------------------------------------------------------- out


def _fallback_arg(value, name: str) -> str:
    if value in ("numpy", "lazy"):
        return value
    raise MaskError(
        f"`{name}` must be 'numpy' (a dense NumpyMask) or 'lazy' (evaluated per tile); got {describe(value)}."
    )


_NUMPY_HINT = "Use to_splash(mask, fallback='lazy') (a splash mask evaluated per tile: no (n, n) array) or a smaller n."


def _check_numpy_masks(count: int, n: int) -> None:
    """Raise :class:`MemoryBudgetError` (naming `mask`) unless `count` dense ``(n, n)`` NumpyMasks and one block of
    temporaries fit (the heads' arrays are all held by the splash ``MultiHeadMask``)."""
    if count:
        what = f"{count} NumpyMask(s) of shape ({n}, {n}) (one byte an entry) and one block of temporaries"
        check_host_memory(float(count) * n * n + DENSE_BLOCK_BYTES, what, "mask", hint=_NUMPY_HINT)


def _dense_rule(rule, head: int, n: int) -> np.ndarray:
    """The rule of one head as a dense NumPy bool `(n, n)`, row block by row block (memory checked by the caller,
    :func:`_check_numpy_masks`)."""
    if rule.intervals is not None and rule.heads is None:
        return rule.intervals.to_dense()
    out = np.empty((n, n), dtype=bool)
    rows = max(1, DENSE_BLOCK_BYTES // (32 * n))  # the rule's int64 and Boolean temporaries of a block
    k = np.arange(n, dtype=np.int64)[None, :]
    for q0 in range(0, n, rows):
        q = np.arange(q0, min(n, q0 + rows), dtype=np.int64)[:, None]
        out[q0 : q0 + q.shape[0]] = rule.evaluate(q, k, head)
    return out


@functools.cache
def _lazy_mask_class():
    """A splash ``Mask`` that evaluates a rule on each slice it is asked for (no ``(n, n)`` array)."""
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mask_lib

    class RuleMask(mask_lib.Mask):
        """Splash mask of a hassejax rule, evaluated with NumPy on each requested ``[q_slice, kv_slice]``."""

        def __init__(self, rule):
            self.rule = rule

        @property
        def shape(self) -> tuple[int, int]:
            return (self.rule.n, self.rule.n)

        def __getitem__(self, idx) -> np.ndarray:
            if not (isinstance(idx, tuple) and len(idx) == 2 and all(isinstance(s, slice) for s in idx)):
                raise NotImplementedError(f"Unsupported slice: {idx}")
            q = np.arange(self.rule.n)[idx[0]][:, None]
            k = np.arange(self.rule.n)[idx[1]][None, :]
            return np.ascontiguousarray(self.rule.evaluate(q, k))

        def _key(self):
            return (self.rule.n, self.rule.expr, tuple((t, a.tobytes()) for t, a in self.rule.tables))

        def __eq__(self, other):
            return isinstance(other, RuleMask) and self._key() == other._key()

        def __hash__(self):
            return hash(self._key())

    return RuleMask


def _structured(recipe, n: int, mask_lib):
    kind = recipe[0]
    shape = (n, n)
    if kind == "causal":
        return mask_lib.CausalMask(shape)
    if kind == "full":
        return mask_lib.FullMask(shape)
    if kind == "local":
        return mask_lib.LocalMask(shape, window_size=(recipe[1], recipe[2]), offset=0)
    if kind == "chunked":
        return mask_lib.ChunkedCausalMask(shape, chunk_size=recipe[1])
    left, right = _structured(recipe[1], n, mask_lib), _structured(recipe[2], n, mask_lib)
    return left & right if kind == "and" else left | right


@checked(fallback=_fallback_arg)
def to_splash(mask: Any, *, fallback: Literal["numpy", "lazy"] = "numpy"):
    """The splash attention mask of a hassejax mask: structured where splash has the structure.

    The rule of :func:`~hassejax.kernels.mask_rule` becomes, where it is one of splash's
    structured masks, that mask: causal ``kv_idx <= q_idx`` is ``CausalMask``;
    ``sliding_window(n, left, right)`` (``q - left <= k <= q + right``) is
    ``LocalMask(window_size=(left, right), offset=0)``; ``chunked_causal(n, chunk)`` is
    ``ChunkedCausalMask(chunk_size=chunk)``; ``full`` is ``FullMask``; unions and
    intersections of those (from a spec with ``|`` / ``&``) become splash's ``|`` / ``&``.
    Interval masks, arrays and the parts of a spec whose rows are such a window, causal,
    chunked or full rule are recognised too (``document`` of equal lengths is
    ``ChunkedCausalMask``, ``prefix_lm`` over the whole sequence ``FullMask``). Any other mask
    (sinks, prefix-LM, documents of unequal lengths, Block Two-Stream, ...) is
    one ``NumpyMask`` of the whole rule (``fallback="numpy"``, ``n²`` bytes, memory checked
    first) or, with ``fallback="lazy"``, a splash ``Mask`` subclass that evaluates the rule
    on each tile splash slices (no ``(n, n)`` array: any ``n``; splash builds its
    ``MaskInfo`` by slicing, so the kernel sees the same partial blocks). Per-head input
    gives a ``MultiHeadMask`` with one mask per head.

    **Arguments:**

    - `mask`: anything :func:`~hassejax.kernels.mask_rule` takes: a spec string (also
      ``block_two_stream_mask(...)``, ``butterfly_mask(...)``), an IntervalMask, a Boolean
      ``(n, n)`` or per-head ``(heads, n, n)`` array, a list of per-head masks, a Task; or a rectangular Boolean
      ``(n_q, n_k)`` array (a KV cache, cross-attention): ``CausalMask((n_q, n_k), offset=n_k - n_q)`` when it is
      bottom-right causal, else a ``NumpyMask`` of it.
    - `fallback`: ``"numpy"`` (default) or ``"lazy"``, for masks splash has no structure for.

    **Returns:** a ``jax.experimental.pallas.ops.tpu.splash_attention`` mask of shape
    ``(n, n)``, or a ``MultiHeadMask`` of shape ``(heads, n, n)``; pass a 2-D one to
    ``make_splash_mha`` as ``MultiHeadMask([m] * heads)``.

    **Raises:** :class:`~hassejax.errors.MaskError` as :func:`~hassejax.kernels.mask_rule` or
    for a bad `fallback`; :class:`~hassejax.errors.MemoryBudgetError` (naming `mask`) if a
    ``NumpyMask`` would not fit (the message points to ``fallback="lazy"``).

    **Warns:** ``UserWarning`` when a query row has no allowed key: hassejax's masked attention gives such a
    row zero; splash gives it an average over the keys of the tiles it visits, or NaN where it skips every tile
    of the row (both measured with the real kernel in ``interpret=True`` mode).

    **Example:**

    ```python
    >>> from hassejax.kernels import to_splash
    >>> type(to_splash("sliding_window(n=256, left=64)")).__name__
    'LocalMask'
    >>> type(to_splash("causal(n=256) & chunked_causal(n=256, chunk=64)")).__name__
    'LogicalAnd'
    >>> type(to_splash("attention_sinks(n=256, num=4)")).__name__
    'NumpyMask'

    ```

    Source: splash attention's mask library (``splash_attention_mask.py``, JAX); the rules
    as in :func:`~hassejax.kernels.mask_rule`.
    """
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mask_lib

    from .mask_mod import mask_rule

    shape = getattr(mask, "shape", None)
    # nested lists of a rectangular mask (a fresh user: refused as "must be square" where the array was taken); rows
    # of scalars only, so that a list of per-head masks is not converted here
    if (
        isinstance(mask, (list, tuple))
        and mask
        and all(isinstance(row, (list, tuple)) for row in mask)
        and all(np.ndim(x) == 0 for row in mask for x in row)
        and len({len(row) for row in mask}) == 1
    ):
        shape = (len(mask), len(mask[0]))
    if not isinstance(mask, str) and shape is not None and len(shape) == 2 and shape[0] != shape[1]:
        return _rectangular(mask, mask_lib)
    rule = mask_rule(mask)
    n = rule.n
    heads = rule.parts if rule.heads is not None else (rule,)
    for h, part in enumerate(heads):
        _warn_empty_rows(part, h if rule.heads is not None else None)

    if fallback == "numpy":
        _check_numpy_masks(sum(part.splash is None for part in heads), n)

    def one(part):
        if part.splash is not None:
            return _structured(part.splash, n, mask_lib)
        if fallback == "lazy":
            return _lazy_mask_class()(part)
        return mask_lib.NumpyMask(_dense_rule(part, 0, n))

    if rule.heads is None:
        return one(rule)
    return mask_lib.MultiHeadMask(tuple(one(part) for part in heads))


def _rectangular(mask, mask_lib):
    """A rectangular Boolean ``(n_q, n_k)`` array (a KV cache, cross-attention) as splash's ``CausalMask`` with
    ``offset = n_k - n_q`` when it is bottom-right causal (``k <= q + n_k - n_q``, as
    :func:`~hassejax.kernels.from_splash` reads ``CausalMask((n_q, n_k), offset)``), else a ``NumpyMask`` (a fresh
    user: rectangular masks, which ``from_splash`` and ``tile_stats`` take, were refused as "must be square")."""
    from .._checks import as_mask

    dense = np.asarray(as_mask(mask, "mask", square=False, batched=False, concrete="to_splash"))
    n_q, n_k = dense.shape
    empty = np.flatnonzero(~dense.any(axis=1))
    if empty.size:
        warnings.warn(
            f"`mask` has {empty.size} query row(s) with no allowed key (first: row {int(empty[0])}). Splash "
            "attention does not give such rows zero as hassejax.nn does: it averages the keys of the tiles it visits, "
            "or gives NaN where it skips every tile of the row; give every query a key before training with splash.",
            stacklevel=user_stacklevel(),
        )
    offset = n_k - n_q
    # any offset: more queries than keys (n_q > n_k, offset < 0) is splash's CausalMask too, its first rows empty
    # (warned above; a review found it written as a NumpyMask)
    if np.array_equal(dense, np.tri(n_q, n_k, offset, dtype=bool)):
        return mask_lib.CausalMask(shape=(n_q, n_k), offset=offset)
    return mask_lib.NumpyMask(dense)


def _warn_empty_rows(rule, head: int | None) -> None:
    """Warn when a query row attends to nothing: splash averages over the visited tiles there (NaN where it visits
    none), not zero."""
    im = rule.intervals
    if im is None:
        return
    empty = np.flatnonzero(im.row_counts() == 0)
    if empty.size:
        where = "" if head is None else f" of head {head}"
        warnings.warn(
            f"`mask`{where} has {empty.size} query row(s) with no allowed key (first: row {int(empty[0])}). Splash "
            "attention does not give such rows zero as hassejax.nn does: it averages the keys of the tiles it visits, "
            "or gives NaN where it skips every tile of the row; give every query a key (e.g. its own diagonal) "
            "before training with splash.",
            stacklevel=user_stacklevel(),
        )
