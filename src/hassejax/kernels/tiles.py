"""Tile statistics of a mask: which ``(block_q, block_kv)`` tiles a block-sparse kernel computes.

Block-sparse attention kernels cut the ``(n_q, n_k)`` score matrix into tiles and skip the
tiles their mask leaves empty: JAX splash attention's ``MaskInfo.block_mask`` marks each
tile 0 (empty: skipped), 1 (partial: computed, the mask applied inside) or 2 (full:
computed, no mask needed), and PyTorch FlexAttention's ``BlockMask`` keeps the same split
(``kv_num_blocks`` / ``full_kv_num_blocks``). :func:`tile_stats` gives these codes and
their counts for a dense mask, an :class:`~hassejax.masks.IntervalMask` (no ``n × n``
array: ``O(n · runs + tiles)``) or one interval mask per head, without either library.

Convention: row = query, column = key, True = may attend.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Int8

from .._checks import check_memory
from .._mask_checks import as_bool_advice, refuse_unread_arrays, refuse_unread_nested
from ..errors import MaskError, ParameterError
from ..masks._intervals import IntervalMask, check_host_memory
from ..masks._validate import checked, describe, is_traced

__all__ = ["EMPTY", "FULL", "PARTIAL", "TileStats", "tile_stats"]

#: Tile codes of :attr:`TileStats.kind` (those of splash attention's ``MaskInfo.block_mask``).
EMPTY, PARTIAL, FULL = 0, 1, 2


@dataclass(frozen=True)
class TileStats:
    """Empty, partial and full tiles of a mask, as computed by :func:`tile_stats`.

    **Fields:**

    - `kind`: ``Int8[np.ndarray, "*heads q_tiles kv_tiles"]`` (read-only), one code a tile:
      0 empty (no True entry: a kernel skips it), 1 partial (some True entries: computed with
      the mask applied), 2 full (every entry True: computed without the mask). The codes of
      splash attention's ``MaskInfo.block_mask``. Leading axes are the mask's (heads).
    - `block_size`: ``(block_q, block_kv)``.
    - `shape`: the shape of the mask, ``(*heads, n_q, n_k)``.
    - `empty`, `partial`, `full`: number of tiles of each kind (over all heads).
    - `computed_fraction`: ``(partial + full) / tiles``, the fraction of tiles a block-sparse
      kernel computes; `sparsity`: ``1 - computed_fraction`` (FlexAttention's
      ``BlockMask.sparsity()`` / 100 over the ceil-divided tile grid; never negative).

    Properties: `grid` ``(q_tiles, kv_tiles)``, `num_tiles`; :meth:`summary` (also ``str``)
    and :meth:`to_dict`.

    **Example:** a causal window of one previous key in 2 × 2 tiles: the diagonal tiles and the
    tiles just below them are partial (7 of 16), none is full:

    ```python
    >>> from hassejax.kernels import tile_stats
    >>> from hassejax.masks import structured
    >>> s = tile_stats(structured.sliding_window(8, left=1), block_size=2)
    >>> s.grid, s.num_tiles, (s.empty, s.partial, s.full)
    ((4, 4), 16, (9, 7, 0))
    >>> s.computed_fraction, s.sparsity
    (0.4375, 0.5625)

    ```

    Source: (derived); splash attention ``splash_attention_mask_info.MaskInfo``, PyTorch
    FlexAttention ``BlockMask``.
    """

    kind: Int8[np.ndarray, "*heads q_tiles kv_tiles"] = field(repr=False)
    block_size: tuple[int, int]
    shape: tuple[int, ...]
    empty: int
    partial: int
    full: int
    computed_fraction: float
    sparsity: float

    @property
    def grid(self) -> tuple[int, int]:
        """``(q_tiles, kv_tiles)``: ``(ceil(n_q / block_q), ceil(n_k / block_kv))``."""
        return (int(self.kind.shape[-2]), int(self.kind.shape[-1]))

    @property
    def num_tiles(self) -> int:
        """Tiles over all heads: ``empty + partial + full``."""
        return int(self.kind.size)

    def summary(self) -> str:
        """One readable line: heads (if any), grid, counts and fractions, e.g. ``TileStats: 4 heads x 2 x 2 tiles of
        16 x 16 over a mask of shape (4, 32, 32): ...`` (the leading axes first, as in the mask's shape)."""
        bq, bk = self.block_size
        tq, tk = self.grid
        heads = self.kind.shape[:-2]
        count = int(np.prod(heads, dtype=np.int64))
        per = f"{' x '.join(str(h) for h in heads)} head{'' if count == 1 else 's'} x " if heads else ""
        return (
            f"TileStats: {per}{tq} x {tk} tiles of {bq} x {bk} over a mask of shape {self.shape}: "
            f"{self.empty} empty, {self.partial} partial, {self.full} full; "
            f"computed {100 * self.computed_fraction:.2f}%, sparsity {100 * self.sparsity:.2f}%"
        )

    def __str__(self) -> str:
        return self.summary()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the fields (without `kind`) and the grid."""
        return {
            "block_size": list(self.block_size),
            "shape": list(self.shape),
            "grid": list(self.grid),
            "empty": self.empty,
            "partial": self.partial,
            "full": self.full,
            "computed_fraction": self.computed_fraction,
            "sparsity": self.sparsity,
        }


# ---------------------------------------------------------------------------------- arguments


def _is_splash_mask(value) -> bool:
    """A splash attention ``Mask``: a built-in one, a lazy one of to_splash, or a user's subclass of ``Mask`` (a
    fresh user: ``tile_stats`` refused a subclass that ``from_splash`` reads); splash's module is imported only for
    an object that none of the other forms is."""
    if type(value).__module__.startswith("jax.experimental.pallas") or hasattr(value, "rule"):
        return True
    if isinstance(value, (str, IntervalMask, list, tuple, np.ndarray, jax.Array)) or not hasattr(
        type(value), "__getitem__"
    ):
        return False
    from .splash import _splash_masks

    return isinstance(value, _splash_masks().Mask)


def _mask_arg(value, name: str):
    """An IntervalMask, a tuple of IntervalMasks of one n, or a concrete Boolean array of rank >= 2.

    A mask spec string is built in its interval form; a splash attention ``Mask`` is read
    with :func:`~hassejax.kernels.from_splash` (interval form where square).
    """
    if isinstance(value, str):
        from .mask_mod import mask_rule

        try:
            return mask_rule(value).intervals
        except MaskError as err:
            raise MaskError(f"`{name}` as a mask spec: {err}") from None
    refuse_unread_arrays(value, name)  # a masked array read as its data, a sparse one as a 0-d object array
    if isinstance(value, (list, tuple)):
        refuse_unread_nested(value, name)
    if _is_splash_mask(value):
        from .splash import from_splash

        try:
            square = len(value.shape) >= 2 and value.shape[-1] == value.shape[-2]
        except Exception:  # no usable shape (a subclass of Mask without one): from_splash names it
            square = False
        return _mask_arg(from_splash(value, form="intervals" if square else "dense"), name)
    if isinstance(value, IntervalMask):
        return value
    nested = False
    if isinstance(value, (list, tuple)) and value and any(isinstance(v, str) for v in value):  # one spec a head
        value = [_mask_arg(v, f"{name}[{i}]") if isinstance(v, str) else v for i, v in enumerate(value)]
    if isinstance(value, (list, tuple)) and value and any(isinstance(v, IntervalMask) for v in value):
        for i, v in enumerate(value):
            if not isinstance(v, IntervalMask):
                raise MaskError(
                    f"`{name}` as a sequence must hold one IntervalMask per head; entry {i} is {describe(v)}."
                )
            if v.n != value[0].n:
                raise MaskError(
                    f"`{name}`: every head's IntervalMask must have the same n; entry 0 has n = {value[0].n}, "
                    f"entry {i} has n = {v.n}."
                )
        return tuple(value)
    if isinstance(value, (list, tuple)):
        if not value:
            raise MaskError(
                f"`{name}` must be a Boolean array, an IntervalMask or a sequence of IntervalMasks; "
                f"got an empty {type(value).__name__}."
            )
        nested = True
        try:
            shapes = [tuple(np.shape(v)) for v in value]
        except ValueError:  # a ragged entry (NumPy's "inhomogeneous shape"; a review)
            raise MaskError(f"`{name}`: got nested lists that are not rectangular.") from None
        if any(sh != shapes[0] for sh in shapes[1:]):
            bad = next(i for i, sh in enumerate(shapes) if sh != shapes[0])
            what = "row" if len(shapes[0]) <= 1 else "head"  # entries of rank 1 are one mask's rows
            raise MaskError(
                f"`{name}`: every {what} must have the same shape; entry 0 has shape {shapes[0]}, entry {bad} has "
                f"shape {shapes[bad]}."
            )
        value = np.asarray(value)
    if not (hasattr(value, "shape") and hasattr(value, "dtype")):
        raise MaskError(
            f"`{name}` must be a Boolean array of shape (..., n_q, n_k), an IntervalMask or a sequence of "
            f"IntervalMasks (one per head); got {describe(value)}."
        )
    if is_traced(value):
        raise MaskError(f"`{name}` must be concrete: tile_stats counts tiles on the host; call it outside jax.jit.")
    shape = tuple(int(d) for d in value.shape)
    if len(shape) < 2 or 0 in shape:
        raise MaskError(
            f"`{name}` must have rank >= 2, shape (..., n_q, n_k), and no empty axis (a tile grid to count); "
            f"got shape {shape}."
        )
    if value.dtype != np.bool_:
        raise MaskError(
            f"`{name}` must have dtype bool (True = may attend); got dtype {value.dtype}. Convert explicitly "
            f"(`{as_bool_advice(name, nested)}` for 0/1 'may attend' masks, hassejax.masks.from_blocked, "
            "from_additive_bias)."
        )
    if not isinstance(value, (np.ndarray, jax.Array)):
        check_host_memory(math.prod(shape), f"a NumPy copy of a {type(value).__name__} of shape {shape}", name)
        value = np.asarray(value)
    return value


def _block_size_arg(value, name: str) -> tuple[int, int]:
    expected = f"`{name}` must be an int >= 1 or a pair (block_q, block_kv) of ints >= 1"
    items = tuple(value) if isinstance(value, (list, tuple)) else (value, value)
    if len(items) != 2:
        raise ParameterError(f"{expected}; got {describe(value)}.")
    out = []
    for item in items:
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer)) or item < 1:
            raise ParameterError(f"{expected}; got {describe(value)}.")
        out.append(int(item))
    return out[0], out[1]


# ---------------------------------------------------------------------------------- tile codes


def _dense_kind(xp, a, bq: int, bk: int):
    """Tile codes of a Boolean ``(B, n_q, n_k)`` array `a` (``xp``: NumPy or jax.numpy); no padding copy.

    The whole tiles are a reshape of the top-left corner (any / all over the tile axes); the
    ragged last tile row and column (if any) only need `any`: a ragged tile is never full.
    """
    b, nq, nk = a.shape
    fq, fk = nq // bq, nk // bk
    qc, kc = fq * bq, fk * bk
    core = a[:, :qc, :kc].reshape(b, fq, bq, fk, bk)
    kind = xp.where(core.all(axis=(2, 4)), FULL, xp.where(core.any(axis=(2, 4)), PARTIAL, EMPTY)).astype(np.int8)
    if kc < nk:
        right = a[:, :qc, kc:].reshape(b, fq, bq, nk - kc).any(axis=(2, 3))
        kind = xp.concatenate([kind, right.astype(np.int8)[:, :, None]], axis=2)
    if qc < nq:
        bottom = a[:, qc:, :kc].reshape(b, nq - qc, fk, bk).any(axis=(1, 3))
        if kc < nk:
            bottom = xp.concatenate([bottom, a[:, qc:, kc:].any(axis=(1, 2))[:, None]], axis=1)
        kind = xp.concatenate([kind, bottom.astype(np.int8)[:, None, :]], axis=1)
    return kind


_dense_kind_jit = jax.jit(lambda a, bq, bk: _dense_kind(jnp, a, bq, bk), static_argnums=(1, 2))


_CHUNK_ENTRIES = 1 << 22
"""Runs, and tile counts, that :func:`_interval_kind` holds at once (a block of tile rows at a time)."""


def _chunk_bytes(bq: int, tk: int, width: int) -> float:
    """Host bytes :func:`_interval_kind` needs besides its result: a block's runs (80 bytes each: at least one tile
    row's, `bq` rows of `width` runs) and tile counts (32 bytes each: at least one tile row's)."""
    return 80.0 * max(_CHUNK_ENTRIES, bq * width) + 32.0 * max(_CHUNK_ENTRIES, tk)


def _interval_kind(m: IntervalMask, bq: int, bk: int) -> np.ndarray:
    """Tile codes of an IntervalMask from per-tile True counts, in ``O(n · runs + tiles)`` time, a block of tile
    rows at a time (at most :data:`_CHUNK_ENTRIES` runs and tile counts at once; a fresh user: 64 scattered global
    tokens at n = 2^20 held 5.8 GB of whole-mask temporaries).

    A run ``[s, e)`` of a row in tile row ``r`` covers key tiles ``cs = s // bk`` to
    ``ce = (e - 1) // bk``: it adds ``e - s`` to tile ``(r, cs)`` when ``cs == ce``, else
    ``(cs + 1) · bk - s`` to ``(r, cs)``, ``e - ce · bk`` to ``(r, ce)`` and ``bk`` to every
    tile strictly between (a difference array over the tile columns, summed along them).
    A tile is full iff its count is ``bq · bk`` (a ragged tile holds fewer entries: never).
    """
    n = m.n
    tq, tk = -(-n // bq), -(-n // bk)
    width = max(1, m.starts.shape[1])
    tile_rows = max(1, min(_CHUNK_ENTRIES // (bq * width), _CHUNK_ENTRIES // tk))
    kind = np.empty((tq, tk), np.int8)
    for t0 in range(0, tq, tile_rows):
        t1 = min(tq, t0 + tile_rows)
        kind[t0:t1] = _block_kind(m, t0 * bq, min(n, t1 * bq), bq, bk, tk)
    return kind


def _block_kind(m: IntervalMask, q0: int, q1: int, bq: int, bk: int, tk: int) -> np.ndarray:
    """Tile codes of the tile rows holding queries ``q0 .. q1 - 1`` (`q0` a multiple of `bq`)."""
    tq = -(-(q1 - q0) // bq)
    s = m.starts[q0:q1].astype(np.int64)
    e = m.stops[q0:q1].astype(np.int64)
    keep = s < e
    r = np.broadcast_to((np.arange(q1 - q0, dtype=np.int64) // bq)[:, None], s.shape)[keep]
    s, e = s[keep], e[keep]
    cs, ce = s // bk, (e - 1) // bk
    one = cs == ce
    two = ~one
    between = ce > cs + 1
    # Direct amounts at the run's end tiles; the ``bk``s of the tiles between go to a difference array.
    direct = np.bincount(
        np.concatenate([r * tk + cs, (r * tk + ce)[two]]),
        weights=np.concatenate([np.where(one, e - s, (cs + 1) * bk - s), (e - ce * bk)[two]]),
        minlength=tq * tk,
    )
    diff = np.bincount(
        np.concatenate([(r * tk + cs + 1)[between], (r * tk + ce)[between]]),
        weights=np.concatenate([np.full(int(between.sum()), bk), np.full(int(between.sum()), -bk)]).astype(np.float64),
        minlength=tq * tk,
    )
    counts = direct.reshape(tq, tk)
    counts += np.cumsum(diff.reshape(tq, tk), axis=1, out=diff.reshape(tq, tk))
    kind = (counts > 0).view(np.int8)  # PARTIAL where any entry is True
    kind += counts == float(bq) * bk  # FULL = PARTIAL + 1 where every entry is
    return kind


# ---------------------------------------------------------------------------------- public


@checked(mask=_mask_arg, block_size=_block_size_arg)
def tile_stats(
    mask: Bool[np.ndarray, "*heads n_q n_k"]
    | Bool[Array, "*heads n_q n_k"]
    | IntervalMask
    | tuple[IntervalMask, ...]
    | str,
    block_size: int | tuple[int, int] = (128, 128),
) -> TileStats:
    """Classify every ``(block_q, block_kv)`` tile of a mask as empty, partial or full.

    Tile ``(i, j)`` holds queries ``i · block_q .. (i + 1) · block_q - 1`` and keys
    ``j · block_kv .. (j + 1) · block_kv - 1``; its code is 0 (empty: no True entry, a
    block-sparse kernel skips it), 1 (partial: some True entries, computed with the mask) or
    2 (full: every entry True, computed without the mask): the codes of splash attention's
    ``MaskInfo.block_mask``, and FlexAttention's split into ``kv_num_blocks`` (partial) and
    ``full_kv_num_blocks`` (full).

    **Ragged last tiles** (``n`` not a multiple of the block): as FlexAttention, the mask is
    padded with False up to a multiple of the block before classifying, so the grid is
    ``ceil(n_q / block_q) × ceil(n_k / block_kv)`` and a ragged tile is never full (partial if
    it holds a True entry, else empty); `sparsity` is over that grid, so it is never negative
    (attention-gym issue #93 printed -63.84% for n = 100 with 128-tiles; fixed in PyTorch PR
    #188868). Splash attention itself requires the block to divide ``n``; for those sizes
    `kind` equals its ``block_mask`` (expanded to one row per head).

    **Arguments:**

    - `mask`: the mask (row = query, column = key, True = may attend), one of

      - a Boolean array of shape ``(n_q, n_k)`` or ``(*heads, n_q, n_k)`` (NumPy or JAX;
        concrete, not traced). A JAX array is reduced where it lives (one jitted pass).
      - an :class:`~hassejax.masks.IntervalMask`: counted from its key runs in
        ``O(n · runs + tiles)`` time and memory, without an ``(n, n)`` array
        (n = 131,072 with 128-tiles: tens of milliseconds).
      - a tuple or list of IntervalMasks of one ``n``, one per head (equal heads are counted
        once), or of Boolean arrays of one shape.
      - a mask spec string (``"sliding_window(n=131072, left=4096)"``; built in interval form;
        a tuple or list of them is one per head, as in :func:`~hassejax.kernels.to_splash`)
        or a splash attention ``Mask`` (read with :func:`~hassejax.kernels.from_splash`).

    - `block_size`: ``block`` (square tiles) or ``(block_q, block_kv)``, ints >= 1 (default
      ``(128, 128)``, splash's default block).

    **Returns:** a :class:`TileStats` with `kind` of shape ``(*heads, q_tiles, kv_tiles)``.

    **Raises:** :class:`~hassejax.errors.MaskError` naming `mask` for anything else (wrong
    dtype, rank < 2, an empty axis, a traced array, heads of different ``n``);
    :class:`~hassejax.errors.ParameterError` naming `block_size` for a block that is not an
    int >= 1 or a pair of them; :class:`~hassejax.errors.MemoryBudgetError` (naming `mask`)
    when the tile grid does not fit in memory.

    **Example:**

    ```python
    >>> from hassejax.kernels import tile_stats
    >>> from hassejax.masks import structured
    >>> s = tile_stats(structured.causal(256), block_size=128)
    >>> s.kind.tolist()
    [[1, 0], [2, 1]]
    >>> print(s)
    TileStats: 2 x 2 tiles of 128 x 128 over a mask of shape (256, 256): 1 empty, 2 partial, 1 full; computed 75.00%, sparsity 25.00%
    >>> tile_stats(structured.causal(100)).sparsity     # one ragged 128-tile: computed, not -63.84%
    0.0

    ```

    Source: (derived); splash attention ``splash_attention_mask_info._process_mask``, PyTorch
    FlexAttention ``create_block_mask`` / ``BlockMask.sparsity``.
    """
    bq, bk = block_size
    if isinstance(mask, (IntervalMask, tuple)):
        heads = mask if isinstance(mask, tuple) else (mask,)
        n = heads[0].n
        tq, tk = -(-n // bq), -(-n // bk)
        width = max(max(1, h.starts.shape[1]) for h in heads)
        # the codes of each head, their stack (several heads) and one Boolean grid to count them (a review: a count
        # by bincount took 8 bytes a tile, and a tile row of `bq` rows may hold more than _CHUNK_ENTRIES runs)
        check_host_memory(
            (2 * len(heads) + 1) * float(tq) * tk + _chunk_bytes(bq, tk, width),
            f"tile counts of a {tq} x {tk} tile grid ({len(heads)} head(s), n = {n}, blocks {bq} x {bk})",
            "mask",
            hint="The grid has (n / block_q) x (n / block_k) tiles: use a larger `block_size`.",
        )
        if len(heads) == 1:  # no hash of its runs (1.7 s at n = 2^20 with 65 runs a row)
            kind = _interval_kind(heads[0], bq, bk)
            kind = kind if isinstance(mask, IntervalMask) else kind[None]
        else:
            done: dict[IntervalMask, np.ndarray] = {}
            kinds = []
            for h in heads:
                if h not in done:
                    done[h] = _interval_kind(h, bq, bk)
                kinds.append(done[h])
            kind = np.stack(kinds)
        shape = (n, n) if isinstance(mask, IntervalMask) else (len(heads), n, n)
    else:
        shape = tuple(int(d) for d in mask.shape)
        nq, nk = shape[-2:]
        lead = shape[:-2]
        tiles = math.prod(lead) * -(-nq // bq) * -(-nk // bk)
        if isinstance(mask, jax.Array):
            check_memory(3 * tiles, f"the tile codes of a mask of shape {shape} (blocks {bq} x {bk})", "mask")
            kind = np.asarray(_dense_kind_jit(mask.reshape((-1, nq, nk)), min(bq, nq), min(bk, nk)))
        else:
            check_host_memory(
                3 * tiles,
                f"the tile codes of a mask of shape {shape} (blocks {bq} x {bk})",
                "mask",
                hint="Use a larger `block_size`.",
            )
            kind = _dense_kind(np, mask.reshape((-1, nq, nk)), min(bq, nq), min(bk, nk))
        if bq > nq or bk > nk:  # one ragged tile along that axis: computed above with the clipped block
            kind = np.minimum(kind, PARTIAL)
        kind = kind.reshape(lead + kind.shape[-2:])
    kind = np.ascontiguousarray(kind, dtype=np.int8)
    kind.flags.writeable = False
    counts = [int(np.count_nonzero(kind == code)) for code in (EMPTY, PARTIAL, FULL)]  # a byte a tile at a time
    total = int(kind.size)
    computed = int(counts[PARTIAL] + counts[FULL])
    return TileStats(
        kind=kind,
        block_size=(bq, bk),
        shape=shape,
        empty=int(counts[EMPTY]),
        partial=int(counts[PARTIAL]),
        full=int(counts[FULL]),
        computed_fraction=computed / total,
        sparsity=1.0 - computed / total,
    )
