"""Masks in and out of JAX splash attention (``jax.experimental.pallas.ops.tpu.splash_attention``).

Splash attention describes its mask with lazy ``Mask`` objects (``CausalMask``,
``LocalMask``, ``ChunkedCausalMask``, ``FullMask``, ``NumpyMask``, their ``&`` / ``|`` and
``MultiHeadMask``), read through slicing: ``mask[q0:q1, k0:k1]`` is a NumPy Boolean block.
:func:`from_splash` reads one into this package's form (a dense Boolean array, or the
compressed exact :class:`~hassejax.masks.IntervalMask` at long contexts); :func:`to_splash`
writes any mask as the structured splash mask where one exists, else a ``NumpyMask`` (or a
lazy splash mask evaluated per tile).

Splash's convention is this package's: row = query, column = key, True = may attend.

Splash is imported only inside the functions here, so importing this module does not
import Pallas.
"""

from __future__ import annotations

from typing import Literal

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool

from .._checks import check_memory
from ..errors import MaskError
from ..masks._convert_args import _form_arg, _Unstructured
from ..masks._intervals import IntervalMask
from ..masks._runs import _runs_of_rows as _block_runs  # the change marks read 8 at a time
from ..masks._runs import check_host_memory, runs_bytes, stack_row_blocks
from ..masks._validate import checked, describe
from ._splash_write import _lazy_mask_class, to_splash

__all__ = ["from_splash", "to_splash"]


_AUTO_DENSE_ENTRIES = 1 << 26
"""``form="auto"`` returns a dense array up to this many entries a head (n = 8192 square), intervals above."""

_BLOCK_ENTRIES = 1 << 23
"""Entries of one block of rows read through the mask's slicing at a time (8 Mi: 8 MiB of bool)."""


def _splash_masks():
    """The splash mask module (imported here, on first use: it loads Pallas)."""
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask

    return splash_attention_mask


# ---------------------------------------------------------------------------------- reading


def _splash_arg(value, name: str):
    lib = _splash_masks()
    if not isinstance(value, lib.Mask):
        raise MaskError(
            f"`{name}` must be a splash attention Mask (CausalMask, LocalMask, ChunkedCausalMask, FullMask, "
            f"NumpyMask, their & / |, or MultiHeadMask, from jax.experimental.pallas.ops.tpu.splash_attention); "
            f"got {describe(value)}. A Boolean array is already a mask here: use it directly."
        )
    try:
        shape = tuple(value.shape)
    except Exception as exc:  # a user subclass without a usable shape
        raise MaskError(f"`{name}`: the splash mask has no usable `shape` ({exc!r}).") from exc
    rank = 3 if isinstance(value, lib.MultiHeadMask) else 2
    if len(shape) != rank or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1 for d in shape):
        want = "(heads, n_q, n_kv)" if rank == 3 else "(n_q, n_kv)"
        raise MaskError(f"`{name}` must have a shape {want} of positive ints; got shape {shape}.")
    return value


def _heads(mask) -> tuple[list, list[int]]:
    """The distinct head masks of a splash mask (read each once) and each head's index into them.

    Splash masks are hashable (``_process_mask`` dedupes heads the same way); a mask that is
    not falls back to identity.
    """
    lib = _splash_masks()
    masks = list(mask.masks) if isinstance(mask, lib.MultiHeadMask) else [mask]
    unique: list = []
    seen: dict = {}
    index = []
    for m in masks:
        try:
            key = ("eq", m)
            hash(key)
        except (TypeError, NotImplementedError):  # unhashable; a bare _ComputableMask raises NotImplementedError
            key = ("id", id(m))
        if key not in seen:
            seen[key] = len(unique)
            unique.append(m)
        index.append(seen[key])
    return unique, index


def _block_rows(n_kv: int) -> int:
    return max(1, _BLOCK_ENTRIES // n_kv)


def _read_rows(m, q0: int, q1: int, n_kv: int, name: str) -> np.ndarray:
    """Rows ``q0 .. q1 - 1`` of a 2-D splash mask, through its own slicing, checked."""
    try:
        block = np.asarray(m[q0:q1, 0:n_kv])
    except Exception as exc:
        raise MaskError(f"`{name}`: reading rows {q0}:{q1} through the mask's slicing failed: {exc!r}.") from exc
    if block.shape != (q1 - q0, n_kv) or block.dtype != np.bool_:
        raise MaskError(
            f"`{name}`: the mask's slicing [{q0}:{q1}, 0:{n_kv}] must give a Boolean block of shape "
            f"({q1 - q0}, {n_kv}); got shape {block.shape} and dtype {block.dtype}."
        )
    return block


def _known_leaves(m) -> int | None:
    """The built-in structured masks that :func:`_known_intervals` builds from their parameters in `m` (0 for a lazy
    mask of to_splash that carries its interval form), else ``None``."""
    lib = _splash_masks()
    kind = type(m)
    if kind in (lib.LogicalAnd, lib.LogicalOr):
        left, right = _known_leaves(m.left), _known_leaves(m.right)
        return None if left is None or right is None else left + right
    if kind is _lazy_mask_class() and getattr(m, "rule", None) is not None and m.rule.intervals is not None:
        return 0
    return 1 if kind in (lib.FullMask, lib.CausalMask, lib.LocalMask, lib.ChunkedCausalMask) else None


def _known_intervals(m, n: int, name: str = "mask") -> IntervalMask | None:
    """The IntervalMask of a built-in structured splash mask from its parameters, else ``None``.

    ``CausalMask``, ``LocalMask``, ``ChunkedCausalMask``, ``FullMask`` (exact types, with
    the default ``q_sequence``) and their ``&`` / ``|`` are one run a row given by their
    rules (splash_attention_mask.py): ``O(n)`` instead of reading ``n²`` entries.

    **Raises:** :class:`~hassejax.errors.MemoryBudgetError` (naming `name`) before the ``O(n)`` arrays are made
    when they would not fit (a fresh user: ``CausalMask((10**9, 10**9))`` was killed at 24 GB): about 40 bytes a
    position for the first mask read from its parameters, 16 for each further one, and the runs of their
    ``&`` / ``|`` (a review measured 657 MiB at ``n = 2**24`` for one mask, 785 MiB for two or three).
    """
    leaves = _known_leaves(m)
    if leaves:
        check_host_memory(
            (40.0 + 16.0 * (leaves - 1)) * n + runs_bytes(n, leaves),
            f"the interval form of the splash mask read from its parameters (n = {n}, {leaves} built-in "
            f"mask{'' if leaves == 1 else 's'}: their positions, key runs and work arrays)",
            name,
        )
    return _known_intervals_unchecked(m, n)


def _known_intervals_unchecked(m, n: int) -> IntervalMask | None:
    lib = _splash_masks()
    kind = type(m)
    if kind in (lib.LogicalAnd, lib.LogicalOr):
        left, right = _known_intervals_unchecked(m.left, n), _known_intervals_unchecked(m.right, n)
        if left is None or right is None:
            return None
        return left & right if kind is lib.LogicalAnd else left | right
    rule = getattr(m, "rule", None)
    if kind is _lazy_mask_class() and rule.intervals is not None:
        return rule.intervals  # a lazy mask of to_splash carries its exact interval form
    if kind is lib.FullMask:
        return IntervalMask.from_runs(np.zeros((n, 1), np.int64), np.full((n, 1), n, np.int64), n)
    if kind not in (lib.CausalMask, lib.LocalMask, lib.ChunkedCausalMask):
        return None
    q = np.arange(n, dtype=np.int64)
    if not np.array_equal(m.q_sequence, q):
        return None
    if kind is lib.CausalMask:  # q + offset >= k
        start, stop = np.zeros(n, np.int64), q + m.offset + 1
    elif kind is lib.ChunkedCausalMask:  # same chunk and q >= k
        start, stop = (q // m.chunk_size) * m.chunk_size, q + 1
    else:  # q + offset - left <= k <= q + offset + right, None = unbounded
        left, right = m.window_size
        start = np.zeros(n, np.int64) if left is None else q + m.offset - left
        stop = np.full(n, n, np.int64) if right is None else q + m.offset + right + 1
    start, stop = np.clip(start, 0, n), np.clip(stop, 0, n)
    return IntervalMask.from_runs(start[:, None], stop[:, None], n)


def _read_intervals(m, n: int, name: str, max_runs: int | None) -> IntervalMask:
    """The IntervalMask of a square 2-D splash mask, read a block of rows at a time.

    Built-in structured masks (:func:`_known_intervals`) are read from their parameters.

    **Raises:** ``_Unstructured`` when a row needs more than `max_runs` runs;
    :class:`~hassejax.errors.MemoryBudgetError` before the runs outgrow memory.
    """
    known = _known_intervals(m, n, name)
    if known is not None:
        return known
    rows = _block_rows(n)
    check_host_memory(runs_bytes(n, 1) + 48 * rows * n, f"the interval form of the splash mask (n = {n})", name)
    parts = []
    widest = 1
    buffer = np.zeros((min(rows, n), 8 * (n // 8 + 1)), dtype=np.bool_)
    for q0 in range(0, n, rows):
        q1 = min(n, q0 + rows)
        s, e = _block_runs(_read_rows(m, q0, q1, n, name), buffer)
        k = s.shape[1]
        if max_runs is not None and k > max_runs:
            raise _Unstructured(k)
        if k > widest:
            widest = k
            check_host_memory(
                2 * runs_bytes(n, widest),
                f"the interval form of the splash mask with {widest} runs a row (n = {n})",
                name,
            )
        parts.append((s, e))
    starts, stops = stack_row_blocks(parts, n, widest)
    return IntervalMask(starts, stops, n, _normal=True)


def _read_dense(unique: list, index: list[int], n_q: int, n_kv: int, heads: bool, name: str):
    """The dense Boolean mask (JAX array), each distinct head read once, a block of rows at a time."""
    h = len(index)
    nbytes = float(h) * n_q * n_kv
    shape = (h, n_q, n_kv) if heads else (n_q, n_kv)
    hint = "Use form='intervals' (an IntervalMask a head: no dense (n, n) array)."
    # the NumPy mask, its JAX copy (on the host for the CPU backend) and one block's temporaries
    check_host_memory(2 * nbytes + 8 * _BLOCK_ENTRIES, f"a dense Boolean mask of shape {shape}", name)
    check_memory(int(nbytes), f"from_splash: a dense Boolean mask of shape {shape}", name, hint=hint)
    out = np.empty((h, n_q, n_kv), dtype=np.bool_)
    rows = _block_rows(n_kv)
    first: dict[int, int] = {}
    for head, u in enumerate(index):
        if u in first:
            out[head] = out[first[u]]
            continue
        first[u] = head
        for q0 in range(0, n_q, rows):
            q1 = min(n_q, q0 + rows)
            out[head, q0:q1] = _read_rows(unique[u], q0, q1, n_kv, name)
    return jnp.asarray(out if heads else out[0])


# ---------------------------------------------------------------------------------- public


@checked(mask=_splash_arg, form=_form_arg)
def from_splash(
    mask: object, *, form: Literal["dense", "intervals", "auto"] = "auto"
) -> Bool[Array, "n_q n_kv"] | Bool[Array, "heads n_q n_kv"] | IntervalMask | tuple[IntervalMask, ...]:
    """Read a splash attention ``Mask`` (any kind, ``MultiHeadMask`` included) into this package's form.

    The mask is read through its own slicing, ``mask[q0:q1, 0:n_kv]``, a block of rows at a
    time (about 8 Mi entries: 64 rows at n = 131,072), so every splash mask (combined with
    ``&`` / ``|``, ``NumpyMask`` or a user subclass) gives exactly the entries the kernel
    sees, and the interval form never makes an ``(n, n)`` array: memory
    ``O(block + n · runs)``. Time is one evaluation of every entry (the mask is a black
    box): 25–70 s at n = 131,072 on a shared CPU core, most of it in the mask's own
    slicing. For the interval form, the built-in structured masks (``CausalMask``,
    ``LocalMask``, ``ChunkedCausalMask``, ``FullMask`` with their default ``q_sequence``, and
    their ``&`` / ``|``, and the lazy masks of :func:`to_splash`, which carry their key runs)
    are read from their parameters by their documented rules instead:
    ``O(n)``, milliseconds at n = 131,072 (tested equal to the slicing route). Splash's convention is this
    package's: row = query, column = key, True = may attend; ``LocalMask((n, n), (l, r),
    offset=0)`` is ``sliding_window(n, left=l, right=r)`` (``None``: unbounded).

    A ``MultiHeadMask`` gives a leading head axis; heads with equal masks (splash masks
    compare and hash by value, as splash's own ``_process_mask`` dedupes them) are read
    once.

    **Arguments:**

    - `mask`: a ``jax.experimental.pallas.ops.tpu.splash_attention`` ``Mask`` of shape
      ``(n_q, n_kv)``, or a ``MultiHeadMask`` of shape ``(heads, n_q, n_kv)``.
    - `form`: ``"dense"`` (a JAX Boolean array), ``"intervals"`` (an
      :class:`~hassejax.masks.IntervalMask`, or a tuple of them one per head, equal heads
      sharing one object; square masks only) or ``"auto"`` (default: dense up to ``2**26``
      entries a head, n = 8192, or for a rectangular mask; intervals above, falling back to
      dense after a memory estimate if the rows turn out unstructured, more than ``n / 8``
      runs a row).

    **Returns:** a Boolean array of shape ``(n_q, n_kv)`` or ``(heads, n_q, n_kv)``; or an
    :class:`~hassejax.masks.IntervalMask`, or a tuple of ``heads`` of them.

    **Raises:** :class:`~hassejax.errors.MaskError` naming `mask` for anything that is not a
    splash ``Mask``, a bad shape, or slicing that fails or gives a non-Boolean block of the
    wrong shape; naming `form` for a bad `form`, or ``form="intervals"`` with
    ``n_q != n_kv``. :class:`~hassejax.errors.MemoryBudgetError` (naming `mask`) before a
    result that would not fit is allocated.

    **Example:**

    ```python
    >>> import numpy as np
    >>> from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as sm
    >>> from hassejax.kernels import from_splash
    >>> from_splash(sm.LocalMask((8, 8), window_size=(2, 0), offset=0), form="intervals").row(5)
    [(3, 6)]
    >>> np.asarray(from_splash(sm.CausalMask((3, 3)) | sm.LocalMask((3, 3), (0, 1), 0))).astype(int)
    array([[1, 1, 0],
           [1, 1, 1],
           [1, 1, 1]])
    >>> heads = from_splash(sm.MultiHeadMask([sm.CausalMask((4, 4)), sm.FullMask((4, 4))]), form="intervals")
    >>> [h.row(1) for h in heads]
    [[(0, 2)], [(0, 4)]]

    ```

    Source: (derived); splash attention ``splash_attention_mask.py`` (the ``Mask`` slicing
    protocol).
    """
    lib = _splash_masks()
    is_heads = isinstance(mask, lib.MultiHeadMask)
    n_q, n_kv = (int(d) for d in mask.shape[-2:])
    unique, index = _heads(mask)
    if form == "intervals" and n_q != n_kv:
        raise MaskError(
            f"`form` must be 'dense' or 'auto' for a rectangular mask: the interval form is square "
            f"(self-attention); got form='intervals' for a mask of shape {tuple(mask.shape)}."
        )
    if form == "intervals" or (form == "auto" and n_q == n_kv and n_q * n_kv > _AUTO_DENSE_ENTRIES):
        try:
            read = [_read_intervals(m, n_q, "mask", None if form == "intervals" else max(1, n_q // 8)) for m in unique]
        except _Unstructured:
            pass  # auto: runs would outweigh the dense mask; fall through to the dense array
        else:
            return tuple(read[u] for u in index) if is_heads else read[0]
    return _read_dense(unique, index, n_q, n_kv, is_heads, "mask")
