"""Converters from foreign mask conventions (spec hasse.md §0: converted explicitly, never guessed).

FlexAttention-style callables by :func:`from_mask_mod` (and the row runs of one by
:func:`mask_mod_runs`) here; arrays (additive biases, "blocked" masks) in
:mod:`hassejax.masks._from_arrays`, importable from here too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool

from .._checks import check_memory
from .._tracing import tracing
from ..errors import MaskError
from ._args import checked, positive
from ._combine import _CombinedMaskMod, mask_mod_heads, mask_mod_size
from ._convert_args import _bool_arg, _callable_arg, _form_arg, _int_arg, _optional_positive, _Unstructured
from ._from_arrays import from_additive_bias, from_blocked
from ._intervals import IntervalMask
from ._mask_mod import (
    evaluate_mask_mod,
    evaluate_mask_mod_checked,
    evaluate_mask_mod_unchecked,
    raise_index_error,
)
from ._runs import _INDEX, check_host_memory, runs_bytes, stack_row_blocks

__all__ = ["from_mask_mod", "from_additive_bias", "from_blocked", "mask_mod_runs"]


_AUTO_DENSE_ENTRIES = 1 << 26
"""``form="auto"`` returns a dense array up to this many entries (n = 8192 square), intervals above."""

_BLOCK_ENTRIES = 1 << 23
"""Entries of one block of rows evaluated at a time by :func:`mask_mod_runs` (8 Mi: 8 MiB of bool)."""


def _block_rows(n_kv: int) -> int:
    rows = max(1, _BLOCK_ENTRIES // n_kv)
    return 1 << (rows.bit_length() - 1)  # a power of two: few shapes, one compile


def _edges_kernel(
    fn: Callable, n: int, rows: int, width: int, b: int, h: int, name: str, check: bool = True
) -> Callable:
    """Jitted: where rows ``q0 .. q0 + rows - 1`` of ``fn`` change value along the keys.

    Returns ``(error, edges)``: the ``checkify`` index error of `fn` on those rows (read it
    on the host with :func:`~hassejax.masks._mask_mod.raise_index_error`; None when
    `check` is False) and Boolean ``edges`` of shape ``(rows, width)``, ``width >= n + 1``
    a multiple of 8:
    ``edges[r, j] = M[q, j] != M[q, j - 1]`` with ``M[q, -1] = M[q, n] = False`` (so a row's
    edges alternate run start, run stop), False past `n`. Rows past `n` repeat row ``n - 1``.
    """
    kv = jnp.arange(n, dtype=jnp.int32)
    offsets = jnp.arange(rows, dtype=jnp.int32)

    # kv and offsets are arguments, not constants: XLA would constant-fold the index
    # checks on them at compile time, slowly (compile 0.30 s instead of 0.17 s at n = 16384)
    @jax.jit
    def block(q0, kv, offsets):
        q = jnp.minimum(q0 + offsets, n - 1)
        if check:
            error, m = evaluate_mask_mod_checked(fn, q, kv, b, h, name)
        else:
            error, m = None, evaluate_mask_mod_unchecked(fn, q, kv, b, h, name)
        padded = jnp.pad(m, ((0, 0), (1, width - n)))  # one False before, False after
        return error, padded[:, 1:] != padded[:, :-1]

    return lambda q0: block(q0, kv, offsets)


def _edge_positions(edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row and column of every True entry of a Boolean ``(rows, width)`` block, width a multiple of 8.

    Scans 8 entries at a time as uint64 words (edges are sparse), then opens only the words
    that hold an edge: about ``rows · width / 8`` word reads instead of ``rows · width``.
    """
    _rows, width = edges.shape
    words = np.ascontiguousarray(edges).view(np.uint64).reshape(-1)
    hit = np.flatnonzero(words)
    if hit.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    octets = edges.reshape(-1, 8)[hit]
    which, offset = np.nonzero(octets)
    flat = hit[which] * 8 + offset
    return flat // width, flat % width


def mask_mod_runs(
    fn: Callable,
    n: int,
    b: int = 0,
    h: int = 0,
    *,
    name: str = "fn",
    max_runs: int | None = None,
    check_indices: bool = True,
    delay: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Runs of ``M[q, k] = fn(b, h, q, k)`` over the square ``n × n`` grid, rows in blocks (private).

    Each block of rows (about 8 Mi entries) is evaluated by one jitted, vmapped kernel that
    also marks where each row changes value (fused with `fn` on the device); the host reads
    that block 8 entries at a time (as uint64 words) and turns the few changes into runs.
    Memory: one block plus ``O(n · k)`` for ``k`` runs a row; time: ``n²`` evaluations of
    `fn` and about one pass over them. One compile, whatever ``k`` turns out to be.

    **Returns:** `(starts, stops)` arrays of shape `(n, k)` in the normal form of
    :class:`~hassejax.masks.IntervalMask`.

    **Raises:** :class:`~hassejax.errors.MaskError` as :func:`from_mask_mod` (naming `name`),
    out-of-range indices inside `fn` included (checked per block with ``checkify`` unless
    `check_indices` is False);
    :class:`~hassejax.errors.MemoryBudgetError` when the runs would not fit;
    ``_Unstructured`` when a row needs more than `max_runs` runs. `delay`: a progress bar counting the rows once the
    blocks have run that many seconds (None: none).
    """
    from ..order._progress import progress_bar  # JAX-free, tqdm only when a bar opens

    with progress_bar(delay, f"interval form of `{name}` ({n} x {n} evaluations)", "rows", total=n) as bar:
        return _mask_mod_runs(fn, n, b, h, name, max_runs, check_indices, bar)


def _mask_mod_runs(fn, n, b, h, name, max_runs, check_indices, bar) -> tuple[np.ndarray, np.ndarray]:
    """:func:`mask_mod_runs`' blocks, counted on `bar`."""
    rows = min(_block_rows(n), 1 << (n - 1).bit_length())
    width = 8 * (n // 8 + 1)  # >= n + 1 and a multiple of 8
    kernel = _edges_kernel(fn, n, rows, width, b, h, name, check_indices)
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    widest = 1
    check_host_memory(runs_bytes(n, 1), f"the interval form of `{name}` (n = {n})", name)
    blocks = -(-n // rows)
    timer = None
    for index, q0 in enumerate(range(0, n, rows)):
        if index == 1:  # the first block compiled the kernel: time the second for the estimate
            timer = time.perf_counter()
        elif index == 2 and timer is not None and not bar.on:  # no bar asked for: an estimate instead
            _warn_long_evaluation(time.perf_counter() - timer, blocks - 2, n, name)
        try:
            error, edges = jax.device_get(kernel(jnp.asarray(q0, dtype=jnp.int32)))  # one transfer, error included
            edges = np.asarray(edges)
        except jax.errors.TracerArrayConversionError as exc:
            raise MaskError(f"`{name}`: the interval form is built on the host; call it outside jax.jit.") from exc
        raise_index_error(error, name, f"q_idx in [0, {n}), kv_idx in [0, {n}), b={b}, h={h}")
        take = min(rows, n - q0)
        r, col = _edge_positions(edges[:take])
        counts = np.bincount(r, minlength=take)  # edges a row: twice its runs
        k = max(1, int(counts.max()) // 2)
        if max_runs is not None and k > max_runs:
            raise _Unstructured(k)
        if k > widest:
            widest = k
            check_host_memory(
                runs_bytes(n, widest), f"the interval form of `{name}` with {widest} runs a row (n = {n})", name
            )
        slot = np.arange(r.size) - np.repeat(np.cumsum(counts) - counts, counts)
        s = np.full((take, k), n, _INDEX)
        e = np.full((take, k), n, _INDEX)
        even = slot % 2 == 0
        s[r[even], slot[even] // 2] = col[even]
        e[r[~even], slot[~even] // 2] = col[~even]
        parts.append((s, e))
        bar.update(take)
    return stack_row_blocks(parts, n, widest)


LONG_EVALUATION_S = 60.0
""":func:`from_mask_mod`'s interval form warns when its remaining blocks are estimated at this many seconds or more."""


def _warn_long_evaluation(seconds_a_block: float, blocks_left: int, n: int, name: str) -> None:
    """Warn, from the time of one block, when the blocks left would take :data:`LONG_EVALUATION_S` or more (a fresh
    user: ``n = 2**20`` was silent for more than 4.5 minutes of its ``10**12`` evaluations, without a bar)."""
    import warnings

    from .._warn import user_stacklevel

    left = seconds_a_block * blocks_left
    if left >= LONG_EVALUATION_S:
        warnings.warn(
            f"from_mask_mod: the interval form evaluates `{name}` on all {n} x {n} pairs; the {blocks_left} blocks of "
            f"rows left will take about {left:.0f} s at the speed of the last one (and their assembly more). The structured constructors "
            "(hassejax.masks.structured, from_spec(..., form='intervals')) build the library masks without evaluating "
            "a mask_mod; progress=True shows a bar.",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )


@checked(
    fn=_callable_arg,
    n=positive,
    n_kv=_optional_positive,
    b=_int_arg,
    h=_int_arg,
    form=_form_arg,
    check_indices=_bool_arg,
)
def from_mask_mod(
    fn: Callable,
    n: int,
    n_kv: int | None = None,
    b: int = 0,
    h: int = 0,
    *,
    form: Literal["dense", "intervals", "auto"] = "dense",
    check_indices: bool = True,
    progress: bool | float = False,
) -> Bool[Array, "n_q n_k"] | IntervalMask:
    """Evaluate a FlexAttention-style ``mask_mod(b, h, q_idx, kv_idx) -> bool`` on the full grid.

    ``M[q, k] = fn(b, h, q, k)`` for ``q < n``, ``k < n_kv``. `fn` receives int32 scalars
    (traced) and must be written with jnp operations; the grid is evaluated with two
    nested :func:`jax.vmap`, as PyTorch's ``create_mask`` does with ``torch.vmap``. The
    FlexAttention convention is this package's: True = may attend.

    With ``form="intervals"`` the result is the compressed exact
    :class:`~hassejax.masks.IntervalMask` and no ``(n, n)`` array is made: the rows are
    evaluated a block at a time (about 8 Mi entries: 64 rows at n = 131,072), each block
    by one jitted, vmapped kernel that also marks where each row changes value; the host
    reads those changes a word at a time and keeps only the runs. Memory stays
    ``O(block + n · k)`` for ``k`` runs a row. Time is still ``n²`` evaluations of `fn` (a
    callable cannot be skipped over); the structured constructors
    (:mod:`hassejax.masks.structured`) build the library masks in ``O(n · k)``.
    ``form="auto"`` gives the dense array up to ``2**26`` entries (n = 8192) or for a
    rectangular grid, the interval form above; if the rows then turn out truly
    unstructured (more than ``n / 8`` runs a row: the runs would take more bytes than the
    dense mask) it falls back to the dense array after a memory estimate.

    Out-of-range reads inside `fn` are refused. JAX clamps a gather index past the end of
    its axis (``d[q_idx]`` with ``q_idx = 4`` and ``len(d) = 3`` reads ``d[2]``) without a
    word, so a table shorter than the grid would silently give a wrong mask (PyTorch,
    where FlexAttention mask_mods come from, raises). Every array read inside `fn` is
    checked on every evaluated pair with :func:`jax.experimental.checkify.checkify`
    (``checkify.index_checks``), in both forms: an index ``>= size`` (or ``< -size``) is a
    :class:`~hassejax.errors.MaskError` naming `fn`, the index and the size. Indices
    ``-size .. -1`` count from the end (NumPy's rule) and are not errors: FlexAttention
    mask_mods index with ``q_idx, kv_idx >= 0`` by design. Under an outer
    :func:`jax.jit` (dense form) the indices are known only at run time: the check is
    attached with :func:`equinox.error_if` and fails when the result is computed (the
    message names `fn` but not the index). Reads with an explicit ``mode="fill"`` or
    ``mode="clip"`` are checked too (JAX's checks cannot tell them from the silent
    clamp): clamp the index yourself (``jnp.minimum``) or pass ``check_indices=False``.
    Evaluation time is unchanged; with ``form="intervals"`` the check adds trace and
    compile time to the block kernel when `fn` reads arrays (about 0.3 s a call on a
    2-core CPU, whatever `n`; nothing when `fn` reads no array).

    **Arguments:**

    - `fn`: the mask_mod, a callable ``(b, h, q_idx, kv_idx) -> bool``.
    - `n`: number of queries, an integer >= 1.
    - `n_kv`: number of keys, an integer >= 1 (default: `n`, a square mask; the interval
      form needs ``n_kv == n``).
    - `b`, `h`: batch and head index passed to `fn` (default 0).
    - `form`: ``"dense"`` (default: a JAX Boolean array, usable under :func:`jax.jit`),
      ``"intervals"`` (an :class:`~hassejax.masks.IntervalMask`, built on the host, not
      under jit) or ``"auto"``.
    - `check_indices`: refuse out-of-range array reads inside `fn` (default True; see above).
    - `progress`: for the interval form, ``False`` (default: silent), ``True`` for a tqdm bar on stderr counting the
      rows evaluated, or a number of seconds ``d >= 0``: the bar shows once the evaluation has run ``d`` seconds (a
      fresh user: ``n = 2**20`` ran its ``10**12`` evaluations for more than 10 minutes without a word, where
      n = 65,536 took 5.8 s on their 2-core CPU).

    **Returns:** a Boolean array of shape `(n, n_kv)`, or an
    :class:`~hassejax.masks.IntervalMask` with `n` rows.

    **Raises:** :class:`~hassejax.errors.MaskError` if `fn` is not callable, raises while
    traced (e.g. Python ``if`` on an index), or returns something other than one
    Boolean per pair (an int, a float, a vector); if a size is not an integer >= 1; for a
    bad `form`, or ``form="intervals"`` with ``n_kv != n``; if `fn` reads an array at an
    index ``>= size`` (with `check_indices`; under an outer jit a run-time error instead);
    :class:`~hassejax.errors.MaskError` for an `n` or `n_kv` beyond the positions of the mask behind a mask_mod of
    :func:`hassejax.kernels.to_mask_mod` (its ``.n``; beyond it the tables wrap, the padding of a kernel's grid), or
    of :func:`~hassejax.masks.and_masks` / :func:`~hassejax.masks.or_masks` of such a function;
    :class:`~hassejax.errors.ParameterError` for a `progress` that is not a bool or a number of seconds ``>= 0``;
    :class:`~hassejax.errors.MaskError` for an `h` outside ``0 .. heads - 1`` when `fn` is a per-head mask_mod of
    :func:`hassejax.kernels.to_mask_mod` (it carries ``.rule.heads``; such a head attends nowhere), or
    :func:`~hassejax.masks.and_masks` / :func:`~hassejax.masks.or_masks` of such functions where that head attends
    nowhere too (AND: beyond the fewest heads of a per-head part; OR: beyond the most, every part per-head).
    :class:`~hassejax.errors.MemoryBudgetError` if the result would not fit (outside jit/vmap a dense grid of
    more than ``2**22`` entries runs as one compiled program, checked against XLA's estimate of its temporaries
    and result before it runs; smaller ones, and any grid under a transformation, are checked against five bytes
    an entry, for one member of a vmapped batch).

    **Example:** ``from_mask_mod(lambda b, h, q, k: q >= k, 4)`` equals ``causal(4)``;

    ```python
    >>> from hassejax.masks import from_mask_mod
    >>> m = from_mask_mod(lambda b, h, q, k: (k <= q) & (q - k <= 2), 6, form="intervals")
    >>> m.row(4)
    [(2, 5)]
    >>> import jax.numpy as jnp
    >>> doc = jnp.array([0, 0, 1])  # document ids of 3 positions, read at 5
    >>> from_mask_mod(lambda b, h, q, k: doc[q] == doc[k], 5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hassejax.errors.MaskError: `fn` indexed an array out of range ... index 3 is out of bounds for axis 0 with size 3...

    ```

    **References:** spec hasse.md §0 (FlexAttention's ``mask_mod(b, h, q_idx, kv_idx)`` convention, converted
    explicitly); FlexAttention, arXiv:2412.05496 (PyTorch's ``create_mask``).
    """
    from ..order._progress import check_progress

    delay = check_progress(progress)
    n_kv = n if n_kv is None else n_kv
    heads = mask_mod_heads(fn)  # a per-head mask_mod of to_mask_mod, or and_masks / or_masks of such
    if heads is not None and not isinstance(h, bool) and isinstance(h, int) and not 0 <= h < heads:
        # its head h outside 0 .. heads - 1 matches no term: a mask of no pair, silently (a fresh user)
        what = (
            f"{fn.__name__}, whose per-head parts attend only for heads 0 .. {heads - 1}"
            if isinstance(fn, _CombinedMaskMod)
            else f"a mask_mod of {heads} per-head masks"
        )
        raise MaskError(
            f"`h` must be a head of `fn`, {what} (0 <= h < {heads}); got h = {h}: it would attend nowhere. Export "
            "one mask per head of the model."
        )
    size = mask_mod_size(fn)  # a mask_mod of to_mask_mod (or a combination) knows its mask's positions
    if size is not None and max(n, n_kv) > size[0]:
        arg, got = ("n", n) if n > size[0] else ("n_kv", n_kv)
        past = (
            "its tables are read at q_idx % n (the padding of a kernel's grid), not a longer mask"
            if size[2]
            else "its closed form, built for that mask (it may hold its size as a constant), is not the longer mask"
        )
        raise MaskError(
            f"`{arg}` must be at most {size[0]}, the positions of the mask behind `fn` ({size[1]}, whose .n is "
            f"{size[0]}); got {arg}={got}. Beyond them {past}; build the mask_mod of the longer mask instead."
        )
    if form == "intervals" and n_kv != n:
        raise MaskError(
            f"`n_kv` must equal `n` (or be None) with form='intervals': the interval form is square "
            f"(self-attention); got n={n}, n_kv={n_kv}."
        )
    if form == "intervals" or (form == "auto" and n_kv == n and n * n_kv > _AUTO_DENSE_ENTRIES):
        try:
            starts, stops = mask_mod_runs(
                fn,
                n,
                b,
                h,
                max_runs=None if form == "intervals" else max(1, n // 8),
                check_indices=check_indices,
                delay=delay,
            )
        except _Unstructured:
            pass  # auto: runs would outweigh the dense mask; fall through to the dense array
        else:
            return IntervalMask(starts, stops, n, _normal=True)
    what = f"from_mask_mod: a dense mask of shape ({n}, {n_kv})"
    hint = "Use a smaller n, or form='intervals' (an IntervalMask: no dense (n, n) array)."
    sizes = "n` and `n_kv" if n_kv != n else "n"  # the refusal names both sizes of a rectangular grid (a review)
    check_memory(n * n_kv, what, sizes, hint=hint)  # the result alone: refused before anything is traced
    q_idx = jnp.arange(n, dtype=jnp.int32)
    kv_idx = jnp.arange(n_kv, dtype=jnp.int32)
    grid = f"q_idx in [0, {n}), kv_idx in [0, {n_kv}), b={b}, h={h}"
    if n * n_kv <= _EAGER_ENTRIES or tracing():  # small, or inside the caller's jit/vmap (fused there)
        check_memory(5 * n * n_kv, what + " (bool plus int32 intermediates)", sizes, hint=hint)
        return evaluate_mask_mod(fn, q_idx, kv_idx, b, h, "fn", grid=grid, check=check_indices)
    return _dense_compiled(fn, q_idx, kv_idx, b, h, check_indices, grid, what, hint, sizes)


_EAGER_ENTRIES = 1 << 22
"""Dense :func:`from_mask_mod` grids up to this many entries are evaluated op by op (each primitive's small program
cached across calls); larger ones as one compiled program, whose memory XLA estimates before it runs."""


def _dense_compiled(fn, q_idx, kv_idx, b: int, h: int, check: bool, grid: str, what: str, hint: str, sizes: str = "n"):
    """The dense grid of `fn` as one jitted program, its memory checked from XLA's estimate first.

    Evaluated op by op, ``(k <= q) & (q - k <= w)`` held an int32 and three Boolean ``n × n`` arrays at once
    (a review measured 6.1–6.3 × ``n²`` bytes against a check of 5); compiled, XLA fuses the elementwise ops
    (``n²`` bytes for that rule) and reports what the program holds (``Compiled.memory_analysis()``).
    """

    def dense(q, k):
        if check:
            return evaluate_mask_mod_checked(fn, q, k, b, h, "fn")
        return None, evaluate_mask_mod_unchecked(fn, q, k, b, h, "fn")

    compiled = jax.jit(dense).lower(q_idx, kv_idx).compile()
    size = q_idx.shape[0] * kv_idx.shape[0]
    try:
        stats = compiled.memory_analysis()
        need = int(stats.temp_size_in_bytes + stats.output_size_in_bytes)
    except Exception:  # a backend without the estimate: the op-by-op bound
        need = 5 * size
    check_memory(max(need, size), what + " (the compiled program's temporaries and result)", sizes, hint=hint)
    error, out = compiled(q_idx, kv_idx)
    raise_index_error(error, "fn", grid)
    return out
