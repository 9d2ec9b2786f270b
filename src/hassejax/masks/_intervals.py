"""The compressed exact mask form: each row a sorted list of disjoint key intervals.

Almost every mask people train with has rows that are a few runs of keys: causal, every
sliding-window convention, sink and global tokens, prefix-LM, block and chunked causal,
packed documents, block diffusion, Block Two-Stream, Butterfly. :class:`IntervalMask` stores
row ``q`` as the half-open runs ``[starts[q, t], stops[q, t])`` of keys it may attend to, so a
mask over ``n`` positions costs ``O(n · k)`` memory for ``k`` runs a row instead of ``n²``.

This module is pure NumPy (no JAX import): the structured closure route
(:mod:`hassejax.order._structured`) and the command line use it without starting JAX.

Normal form (what makes ``==`` exact): in each row the runs are sorted, non-empty and
separated by at least one key (``stops[q, t] < starts[q, t + 1]``); unused slots hold
``starts = stops = n`` and come last; ``k`` is the largest number of runs of any row (at
least 1). Every constructor returns the normal form.

The run arithmetic (normal form, conversion from dense rows, memory estimates) lives in
:mod:`hassejax.masks._runs`; its names are importable from here too.

Source: the interval-row closure is (derived) from spec hasse.md §1.2: a row of ``A^(L+1)``
is the union of the rows of ``A^L`` it points to.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._tracing import is_traced
from ..errors import MaskError
from ._runs import _INDEX, _checked_runs, _runs_of_rows, check_host_memory, normalize_runs, stack_row_blocks

__all__ = ["IntervalMask", "normalize_runs", "check_host_memory"]

_COMBINE_CANDIDATES = 1 << 22
"""Candidate runs a block of rows of ``|`` and ``&`` normalizes at once (about 256 MiB of temporaries)."""
_COMBINE_BYTES_PER_CANDIDATE = 64
"""Bytes a candidate run at the peak of :func:`normalize_runs` (starts and stops, the sort order, sorted copies,
running maximum, masks and slots), as the structured route counts them."""


DENSE_BLOCK_BYTES = 1 << 26
"""Temporaries of :meth:`IntervalMask.to_dense` (bytes): its rows are filled in blocks of about this size."""


def fill_runs(
    starts: np.ndarray, stops: np.ndarray, n: int, out: np.ndarray, columns: np.ndarray | None = None
) -> None:
    """Fill the Boolean rows `out` (``(m, n)``, or ``(m, len(columns))``) with the runs ``[starts[r, t], stops[r, t])``
    of each row (``(m, k)`` int arrays; empty runs ignored; at most 127 runs over one entry), a block of rows at a time: a
    difference array and its running sum, about :data:`DENSE_BLOCK_BYTES` of temporaries. `columns`: write the
    filled row's entries ``columns`` (``out[r, j] = filled[r, columns[j]]``) instead of the row itself."""
    if starts.ndim != 2 or stops.shape != starts.shape:  # private: a caller's bug, not a user's input
        raise ValueError(f"fill_runs takes (m, k) starts and stops; got {starts.shape} and {stops.shape}")
    m = starts.shape[0]
    rows = max(1, min(m, DENSE_BLOCK_BYTES // (2 * (n + 1))))  # an int8 difference block and its sum
    diff = np.empty((rows, n + 1), dtype=np.int8)
    total = np.empty((rows, n), dtype=np.int8)
    for r0 in range(0, m, rows):
        r1 = min(m, r0 + rows)
        d = diff[: r1 - r0]
        d.fill(0)
        s, e = starts[r0:r1], stops[r0:r1]
        keep = s < e
        # flat indices and int8 increments: np.add.at on (row, column) pairs with a Python int took 4.7 s for 16.7M
        # runs (n = 8192, 2048 runs a row: a dilated window's closure), the whole to_dense now 0.5 s
        base = (np.arange(r1 - r0, dtype=np.int64) * (n + 1))[:, None]
        flat = diff.reshape(-1)[: d.size]  # `d` flattened, as a view (`diff` is C-contiguous, `d` its first rows)
        np.add.at(flat, (base + s)[keep], np.int8(1))
        np.add.at(flat, (base + e)[keep], np.int8(-1))
        t = total[: r1 - r0]
        np.cumsum(d[:, :n], axis=1, dtype=np.int8, out=t)
        if columns is None:
            np.greater(t, 0, out=out[r0:r1])
        else:
            np.take(t > 0, columns, axis=1, out=out[r0:r1])


DENSE_HINT = (
    "A dense mask has n² entries whatever its runs: keep the IntervalMask, which the structured route of "
    "hassejax.order (method='auto' or 'structured') analyses without an n × n array; method='matmul' or "
    "'bitpacked', np.asarray and a sequence of IntervalMask without head_axis=0 (a batch, not the heads of one "
    "layer) make it dense. Or use a smaller n."
)


_VIEW_HINT = (
    "Build the interval form without an n × n scan: IntervalMask.from_runs (the all-True mask is "
    "from_runs(np.zeros(n, int), np.full(n, n), n)), the constructors of hassejax.masks.structured or "
    "from_spec(..., form='intervals'). Or use a smaller n."
)


def _held_bytes(a: np.ndarray) -> int:
    """Bytes of memory the entries of `a` span: ``a.nbytes`` for an array that holds every entry, fewer for a view
    that repeats them (a zero stride: ``np.broadcast_to``; overlapping strides)."""
    if a.size == 0 or a.flags.c_contiguous or a.flags.f_contiguous:
        return int(a.nbytes)
    span = a.itemsize + sum((d - 1) * abs(s) for d, s in zip(a.shape, a.strides))
    return int(min(a.nbytes, span))


class IntervalMask:
    """An attention mask stored exactly as sorted disjoint key runs per row (no ``n × n`` array).

    Row ``q`` (a query) may attend to key ``k`` iff ``starts[q, t] <= k < stops[q, t]`` for
    some run ``t`` (row = query, column = key, True = may attend; spec hasse.md §0). The
    arrays are in the normal form of the module docstring, so two masks are equal (``==``)
    iff their arrays are; ``==`` with a Boolean ``(n, n)`` array compares the whole masks too
    (one bool, not elementwise; another array is unequal).

    **Attributes:**

    - `starts`, `stops`: ``Int[np.ndarray, "n k"]`` (int32), half-open runs, padding ``n``.
    - `n`: number of positions (queries = keys).
    - `shape`: ``(n, n)``, the shape of the dense mask it stands for; `dtype` is bool.
    - `num_runs`: ``k``, the largest number of runs of any row.

    Build one with :meth:`from_runs`, :meth:`from_dense`, the structured constructors of
    :mod:`hassejax.masks` or :func:`hassejax.masks.from_spec`; ``|`` and ``&`` combine masks of
    the same ``n`` (union and intersection, row by row); :meth:`to_dense` (alias
    ``np.asarray(m)``) gives the Boolean array after a memory estimate.

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.masks import IntervalMask
    >>> q = np.arange(5)
    >>> m = IntervalMask.from_runs(np.maximum(q - 1, 0), q + 1, n=5)   # window, one key back
    >>> m.row_counts().tolist(), m.num_runs
    ([1, 2, 2, 2, 2], 1)
    >>> np.asarray(m).astype(int)[2]
    array([0, 1, 1, 0, 0])

    ```

    Source: (derived), spec hasse.md §0–1; DESIGN.md "Scale".
    """

    __slots__ = ("_components", "_factors", "n", "starts", "stops")
    __array_priority__ = 100  # ``ndarray | IntervalMask`` defers to IntervalMask.__ror__

    def __init__(self, starts: np.ndarray, stops: np.ndarray, n: int, *, _normal: bool = False):
        """Wrap runs; use :meth:`from_runs` unless the runs are already in normal form."""
        if not _normal:
            starts, stops = _checked_runs(starts, stops, n)
            starts, stops = normalize_runs(starts, stops, n)
        starts.flags.writeable = False  # immutable, like the dense jax.Array it stands for
        stops.flags.writeable = False
        self.starts = starts
        self.stops = stops
        self.n = int(n)
        self._factors = None  # (P, C) when a constructor built a Kronecker product P ⊗ C: `with_factors`
        self._components = None  # (W, groups) when it built a union of W interleaved components: `with_components`

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_runs(cls, starts: np.ndarray | Sequence, stops: np.ndarray | Sequence, n: int) -> IntervalMask:
        """A mask from per-row runs ``[starts[q, t], stops[q, t])`` in any order.

        **Arguments:**

        - `starts`, `stops`: int arrays of shape `(n,)` (one run a row) or `(n, j)`; values are
          clipped to ``[0, n]``; runs with ``start >= stop`` are empty. They may overlap.
        - `n`: number of positions, an int >= 1.

        **Returns:** the :class:`IntervalMask` in normal form.

        **Raises:** :class:`~hassejax.errors.MaskError` for a bad `n`, non-integer runs or
        shapes that are not `(n,)` / `(n, j)`.
        """
        return cls(starts, stops, n)

    @classmethod
    def from_dense(cls, mask, *, name: str = "mask") -> IntervalMask:
        """The interval form of a Boolean ``(n, n)`` mask (exact; ``O(n²)`` time, rows in blocks).

        **Arguments:**

        - `mask`: Boolean array of shape `(n, n)` (row = query, column = key, True = may attend).
        - `name`: argument name for error messages.

        **Returns:** the :class:`IntervalMask` with the same entries.

        **Raises:** :class:`~hassejax.errors.MaskError` for a non-Boolean, non-square or traced mask (it runs on
        the host: call it outside ``jax.jit``/``vmap``);
        :class:`~hassejax.errors.MemoryBudgetError` (naming `name`) if the runs would not fit in memory, or,
        before any entry is read, if `mask` does not hold its ``n²`` entries in memory (a view that repeats
        them: ``np.broadcast_to``, zero or overlapping strides) and a dense ``(n, n)`` Boolean mask would not
        fit: the scan reads every entry, so its work is bounded as a dense mask's memory is (an array that holds
        its entries is scanned whatever its size; it is in memory already).
        """
        if isinstance(mask, IntervalMask):
            return mask
        from .._mask_checks import check_mask

        # the checks (and messages) of the order functions: ragged nested lists, None or a spec string are named
        a = np.asarray(check_mask(mask, name, batched=False, concrete="IntervalMask.from_dense"))
        n = a.shape[0]
        held = _held_bytes(a)
        if held < n * n:  # a view repeating its entries (broadcast_to): n² reads of a few bytes, bounded up front
            check_host_memory(
                float(n) * n,
                f"from_dense's scan of all {n} × {n} entries (a broadcast or strided view holding {held} "
                f"byte{'' if held == 1 else 's'}: the work of a dense ({n}, {n}) Boolean mask)",
                name,
                hint=_VIEW_HINT,
            )
        step = max(1, (1 << 24) // max(n, 1))
        buffer = np.zeros((min(step, n), 8 * (n // 8 + 1)), dtype=np.bool_)  # the change marks, reused by each block
        parts_s, parts_e = [], []
        k_seen = 1
        for r0 in range(0, n, step):
            s, e = _runs_of_rows(a[r0 : r0 + step], buffer)
            if s.shape[1] > k_seen:  # the form grows with the widest row: check before keeping more
                k_seen = s.shape[1]
                check_host_memory(
                    4 * 4 * n * k_seen, f"the interval form with at least {k_seen} runs a row (n = {n})", name
                )
            parts_s.append(s)
            parts_e.append(e)
        k = max(p.shape[1] for p in parts_s)
        check_host_memory(2 * 4 * n * k, f"the interval form with {k} runs a row (n = {n})", name)
        starts = np.full((n, k), n, _INDEX)
        stops = np.full((n, k), n, _INDEX)
        r0 = 0
        for s, e in zip(parts_s, parts_e):
            starts[r0 : r0 + s.shape[0], : s.shape[1]] = s
            stops[r0 : r0 + s.shape[0], : s.shape[1]] = e
            r0 += s.shape[0]
        return cls(starts, stops, n, _normal=True)

    # ------------------------------------------------------------------ views

    @property
    def shape(self) -> tuple[int, int]:
        """``(n, n)``: the shape of the dense mask."""
        return (self.n, self.n)

    @property
    def dtype(self) -> np.dtype:
        """``bool``: the dtype of the dense mask."""
        return np.dtype(bool)

    @property
    def ndim(self) -> int:
        """2, as for the dense mask."""
        return 2

    @property
    def num_runs(self) -> int:
        """``k``: the largest number of key runs of any row."""
        return int(self.starts.shape[1])

    @property
    def nbytes(self) -> int:
        """Bytes held by the two run arrays."""
        return int(self.starts.nbytes + self.stops.nbytes)

    def row_counts(self) -> np.ndarray:
        """Keys each query may attend to: int64 array of shape `(n,)`."""
        return (self.stops - self.starts).sum(axis=1)

    def nnz(self) -> int:
        """Number of True entries of the dense mask."""
        return int(self.row_counts().sum())

    def row(self, q: int) -> list[tuple[int, int]]:
        """The runs ``[(start, stop), …]`` of row `q` (half-open).

        **Raises:** :class:`~hassejax.errors.MaskError` for `q` not an int in ``[0, n)``.
        """
        if isinstance(q, (bool, np.bool_)) or not isinstance(q, (int, np.integer)) or not 0 <= q < self.n:
            raise MaskError(f"`q` must be a query position, an int in [0, {self.n}); got {q!r}.")
        keep = self.starts[q] < self.stops[q]
        return list(zip(self.starts[q][keep].tolist(), self.stops[q][keep].tolist()))

    def contains(self, q: np.ndarray, k: np.ndarray) -> np.ndarray:
        """``M[q, k]`` for broadcastable int arrays `q` and `k` (no dense array).

        **Raises:** :class:`~hassejax.errors.MaskError` for positions outside ``[0, n)``.
        """
        q, k = np.broadcast_arrays(np.asarray(q), np.asarray(k))
        for name, x in (("q", q), ("k", k)):
            if not np.issubdtype(x.dtype, np.integer):
                raise MaskError(f"`{name}` must hold int positions in [0, {self.n}); got dtype {x.dtype}.")
            if x.size and (x.min() < 0 or x.max() >= self.n):
                bad = int(x.min()) if x.min() < 0 else int(x.max())
                raise MaskError(f"`{name}` must hold int positions in [0, {self.n}); got {bad}.")
        s = self.starts[q]
        e = self.stops[q]
        return np.any((s <= k[..., None]) & (k[..., None] < e), axis=-1)

    def with_diagonal(self) -> IntervalMask:
        """``A = M | I``: one layer with its residual stream (spec hasse.md §1.1)."""
        q = np.arange(self.n, dtype=_INDEX)[:, None]
        inside = np.any((self.starts <= q) & (q < self.stops), axis=1)
        if inside.all():
            return self
        s, e = normalize_runs(
            np.concatenate([self.starts, q], axis=1), np.concatenate([self.stops, q + 1], axis=1), self.n
        )
        return IntervalMask(s, e, self.n, _normal=True)

    def has_diagonal(self) -> bool:
        """True iff every query may attend to itself (``M = M | I``)."""
        q = np.arange(self.n, dtype=_INDEX)[:, None]
        return bool(np.any((self.starts <= q) & (q < self.stops), axis=1).all())

    def to_dense(self, *, name: str = "mask") -> np.ndarray:
        """The Boolean ``(n, n)`` NumPy array (after checking that it fits in memory).

        Rows are filled a block at a time (a difference array and its running sum per block, about
        :data:`DENSE_BLOCK_BYTES` of temporaries), so the peak memory is the ``n²`` bytes of the
        result plus one block.

        **Raises:** :class:`~hassejax.errors.MemoryBudgetError` (naming `name`) when the result and one
        block do not fit.
        """
        n = self.n
        rows = max(1, min(n, DENSE_BLOCK_BYTES // (2 * (n + 1))))  # an int8 difference block and its sum
        check_host_memory(
            float(n) * n + 2.0 * rows * (n + 1), f"a dense ({n}, {n}) Boolean mask", name, hint=DENSE_HINT
        )
        out = np.empty((n, n), dtype=bool)
        fill_runs(self.starts, self.stops, n, out)
        return out

    def __array__(self, dtype=None, copy=None):
        if dtype is not None and np.dtype(dtype) != np.bool_:  # the copy in `dtype` is made too: count it first
            n = self.n
            check_host_memory(
                float(n) * n * (1 + np.dtype(dtype).itemsize),
                f"a dense ({n}, {n}) mask as {np.dtype(dtype).name}",
                "mask",
                hint=DENSE_HINT,
            )
        dense = self.to_dense()
        return dense if dtype is None else dense.astype(dtype)

    # ------------------------------------------------------------------ algebra

    def _other(self, other, op: str) -> IntervalMask:
        if not isinstance(other, IntervalMask):
            if hasattr(other, "shape") and hasattr(other, "dtype"):
                other = IntervalMask.from_dense(other, name="other")
            else:
                raise MaskError(f"`{op}` needs two masks; got an IntervalMask and a {type(other).__name__}.")
        if other.n != self.n:
            raise MaskError(f"`{op}` needs masks of the same n; got n = {self.n} and n = {other.n}.")
        return other

    def __or__(self, other) -> IntervalMask:
        return IntervalMask.union([self, other])

    __ror__ = __or__

    def __and__(self, other) -> IntervalMask:
        other = self._other(other, "&")

        def candidates(r0: int, r1: int):  # intersections of every pair of runs; at most k1 + k2 - 1 non-empty
            s = np.maximum(self.starts[r0:r1, :, None], other.starts[r0:r1, None, :]).reshape(r1 - r0, -1)
            e = np.minimum(self.stops[r0:r1, :, None], other.stops[r0:r1, None, :]).reshape(r1 - r0, -1)
            return s, e

        runs = f"{self.num_runs} and {other.num_runs}"
        width = self.num_runs + other.num_runs
        return self._combined(
            "&", "intersection", self.num_runs * other.num_runs, candidates, width, "two interval masks", runs
        )

    @staticmethod
    def union(masks: Sequence[IntervalMask]) -> IntervalMask:
        """The union of interval masks of one `n` in one pass: every row's runs of all masks merged once (a review:
        four heads of 17 runs a row at n = 2^20 merged 153 candidate runs a row by ``|`` in turn, 11.5 s; 5.6 s).

        **Arguments:** `masks`: a non-empty sequence of IntervalMasks of one `n` (row = query, column = key, True =
        may attend).

        **Returns:** the IntervalMask of their elementwise OR, in normal form (`masks[0]` itself for one mask).

        **Raises:** :class:`~hassejax.errors.MaskError` for masks of different `n` or an entry that is no
        IntervalMask; :class:`~hassejax.errors.MemoryBudgetError` (naming ``|``) when the result and one block's
        candidate runs would not fit in memory.

        **Example:**

        ```python
        >>> from hassejax.masks import IntervalMask, structured
        >>> u = IntervalMask.union([structured.causal(4), structured.sliding_window(4, 0, 1), structured.attention_sinks(4, 1)])
        >>> u.to_dense().astype(int).tolist()
        [[1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 1, 1]]

        ```
        """
        masks = list(masks)
        if not masks or not isinstance(masks[0], IntervalMask):
            raise MaskError(f"`masks` must be a non-empty sequence of IntervalMask; got {masks[:1] or 'none'}.")
        first, rest = masks[0], masks[1:]
        if not rest:
            return first
        masks = [first] + [first._other(m, "|") for m in rest]  # an array in the sequence: its interval form

        def candidates(r0: int, r1: int):  # every run of every mask's rows
            return (
                np.concatenate([m.starts[r0:r1] for m in masks], axis=1),
                np.concatenate([m.stops[r0:r1] for m in masks], axis=1),
            )

        width = sum(m.num_runs for m in masks)
        runs = " and ".join(str(m.num_runs) for m in masks) if len(masks) == 2 else f"{width} in all"
        return first._combined(
            "|",
            "union",
            width,
            candidates,
            width,
            "two interval masks" if len(masks) == 2 else f"{len(masks)} interval masks",
            runs,
        )

    def _combined(
        self, op: str, what: str, per_row: int, candidates, width: int, masks: str, runs: str
    ) -> IntervalMask:
        """The normal form of `candidates(r0, r1)` (`per_row` candidate runs a row of rows ``r0:r1``), a block of rows
        at a time, after a check of the host memory: the result (at most ``k1 + k2`` runs a row), its blocks before
        they are stacked, and one block's candidates with :func:`normalize_runs`' temporaries (a fresh user: the
        union of a dilated window and sink tokens at n = 10^6 took 17 GB unchecked; an intersection of two masks of
        130 runs a row builds ``n · 130²`` candidates at once)."""
        n = self.n
        rows = max(1, min(n, _COMBINE_CANDIDATES // max(1, per_row)))
        check_host_memory(
            2 * 8.0 * n * width + _COMBINE_BYTES_PER_CANDIDATE * rows * per_row,
            f"the {what} ({op}) of {masks} (n = {n}; {runs} runs a row)",
            op,
        )
        if rows == n:
            s, e = normalize_runs(*candidates(0, n), n)
            return IntervalMask(s, e, n, _normal=True)
        parts = [normalize_runs(*candidates(r0, min(n, r0 + rows)), n) for r0 in range(0, n, rows)]
        s, e = stack_row_blocks(parts, n, max(1, max(p[0].shape[1] for p in parts)))
        return IntervalMask(s, e, n, _normal=True)

    __rand__ = __and__

    def __eq__(self, other) -> bool:
        """Whole-mask equality with an IntervalMask or a Boolean ``(n, n)`` array (one bool, not elementwise).

        An array is read into its interval form first (review: ``I == dense`` was ``False``, Python's
        identity fallback, which read as "the masks differ"). An array of another shape or a
        non-Boolean dtype is unequal (so ``in`` and ``list.index`` work); another object is left to
        its own ``==`` (``NotImplemented``).

        **Raises:** ``TypeError`` for a traced array (under ``jit``/``vmap``: its entries are not
        known, and Python's fallback would answer a silent ``False``); compare ``mask.to_dense()`` with it.
        """
        if not isinstance(other, IntervalMask):
            if is_traced(other):
                raise TypeError(
                    "An IntervalMask cannot be compared with a traced array (under jit or vmap its entries are not "
                    "known); compare `mask.to_dense()` with it, or compare outside the transformation."
                )
            if not (hasattr(other, "shape") and hasattr(other, "dtype")):
                return NotImplemented
            if tuple(other.shape) != (self.n, self.n) or np.dtype(other.dtype) != np.bool_:
                return False
            try:
                other = IntervalMask.from_dense(np.asarray(other), name="other")
            except (MaskError, TypeError, ValueError):  # e.g. a SciPy sparse matrix: not an array of entries
                return NotImplemented
        return (
            self.n == other.n
            and self.starts.shape == other.starts.shape
            and bool(np.array_equal(self.starts, other.starts) and np.array_equal(self.stops, other.stops))
        )

    def __hash__(self):
        return hash((self.n, self.starts.tobytes(), self.stops.tobytes()))

    def __repr__(self) -> str:
        return f"IntervalMask(n={self.n}, runs per row <= {self.num_runs}, nnz={self.nnz()})"


def with_factors(mask: IntervalMask, first: IntervalMask, second: IntervalMask) -> IntervalMask:
    """`mask`, recorded as the Kronecker product ``first ⊗ second`` (grid rows × columns, row-major) by the constructor
    that built it as one (a dilated window, a 2-D neighbourhood), so that the product route
    (:func:`hassejax.order._product.kron_factors`) takes the factors instead of searching `mask` for them. For
    reflexive masks whose factors are reflexive, each with at least 2 positions (the product route's contract), and
    ``first.n * second.n == mask.n``. The runs are read-only arrays, so the record stays true as long as nobody
    reassigns the mask's attributes (nothing in the library does)."""
    if first.n * second.n != mask.n or min(first.n, second.n) < 2:
        raise ValueError(f"factors of {first.n} and {second.n} positions for a mask of {mask.n} (internal error)")
    mask._factors = (first, second)
    return mask


def with_components(mask: IntervalMask, w: int, groups: tuple[tuple[IntervalMask, int], ...]) -> IntervalMask:
    """`mask`, recorded as the disjoint union of `w` interleaved components by the constructor that built it as one (a
    dilated window whose `n` is no multiple of its stride), so that the components route
    (:mod:`hassejax.order._components`) takes them. Position ``q`` is index ``q // w`` of component ``q % w``; no key
    of a row lies in another component; `groups` ``((B, count), ...)`` give the components in order (the first `count`
    are `B`, then the next group's; each count at least 1), each `B` reflexive. The components' sizes are those of the interleaving
    (``ceil((n − c) / w)`` positions for component `c`)."""
    sizes = [b.n for b, count in groups for _ in range(count)]
    want = [-(-(mask.n - c) // w) for c in range(w)]
    if w < 2 or sizes != want or any(count < 1 for _, count in groups):
        raise ValueError(f"components of {sizes} positions for a mask of {mask.n} in {w} (internal error)")
    mask._components = (int(w), tuple((b, int(count)) for b, count in groups))
    return mask
