"""Closed forms of the merged masks of the Block Two-Stream and Butterfly families.

:func:`block_two_stream_mask` and :func:`butterfly_mask` give the masks that
``family.merge()`` derives (tested equal), without running the merge: dense (jitted, one
program per shape) or as an exact :class:`~hassejax.masks.IntervalMask` for large `n`.

Source: C. Li, H. Guo, "Hasse Diagrams for Attention", arXiv:2606.09951 (2026), §4 (paper);
spec hasse.md §3.2–3.3 (the closed forms).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool

from ..errors import TaskError
from ..masks._intervals import IntervalMask, check_host_memory, normalize_runs
from ._family_args import _check_closed_form_memory, _choice, _flag, _positive_int

__all__ = ["block_two_stream_mask", "butterfly_mask"]


def _intervals(starts: np.ndarray, stops: np.ndarray, size: int) -> IntervalMask:
    """An :class:`~hassejax.masks.IntervalMask` over `size` slots from per-row runs (any order, empty ones allowed)."""
    s, e = normalize_runs(starts, stops, size)
    return IntervalMask(s, e, size, _normal=True)


def _check_intervals_memory(what: str, n: int, size: int, runs: int) -> None:
    """Raise :class:`~hassejax.errors.MemoryBudgetError` naming `n` before an interval form is built."""
    check_host_memory(
        6 * 8 * float(size) * runs, f"{what} with n = {n} in interval form ({size} slots, {runs} runs a row)", "n"
    )


def block_two_stream_mask(
    n: int,
    block_size: int,
    group: str = "full",
    content: str = "causal",
    keep_last_block: bool = True,
    form: str = "dense",
) -> Bool[Array, "slots slots"] | IntervalMask:
    """Closed form of the merged :func:`block_generation` mask (spec hasse.md §3.2).

    Layout (0-based slots, row = query, column = key, True = may attend): content slots
    `q < c` hold `w_{q+1}` (`c = n`, or `n − l` without the last block); query slot `c + t − 1`
    holds the mask token of position `t = 1..n`, block `B(t) = (t − 1) // l`. Content:
    ``k <= q`` (or block-causal); query: ``(k < c and k + 1 <= B(t)·l)`` or (same block and
    the `group` rule). Shape `(2n, 2n)` by default, `(2n − l, 2n − l)` with
    ``keep_last_block=False``.

    With ``form="intervals"`` the same mask comes as an :class:`~hassejax.masks.IntervalMask`
    built directly from the closed form in ``O(n)`` (a content row is the run ``[0, q + 1)``,
    or ``[0, (q // l + 1)·l)``; a query row is the prefix ``[0, B(t)·l)`` and the slots of its
    group), so any `n` works without a `(2n, 2n)` array. `form` other than ``"dense"`` (default,
    a JAX Boolean array) or ``"intervals"`` is a :class:`~hassejax.errors.TaskError`.

    **Example:**

    ```python
    >>> from hassejax.tasks import block_two_stream_mask
    >>> m = block_two_stream_mask(6, 2, form="intervals")   # the n = 6, l = 2 table of spec §3.2
    >>> m.n, m.row(1), m.row(10)                            # w2; m5 sees w1..w4 and m5, m6
    (12, [(0, 2)], [(0, 4), (10, 12)])

    ```

    **Raises:** :class:`~hassejax.errors.TaskError` as :func:`block_generation`;
    :class:`~hassejax.errors.MemoryBudgetError` (naming `n`) if the dense mask would not fit,
    estimated before it is built.
    """
    n = _positive_int(n, "n")
    l = _positive_int(block_size, "block_size")
    if n % l:
        raise TaskError(f"`block_size` must divide `n`; got n={n}, block_size={l}.")
    _choice(group, "group", ("full", "causal", "diagonal"))
    _choice(content, "content", ("causal", "block_causal"))
    _flag(keep_last_block, "keep_last_block")
    c = n if keep_last_block else n - l
    size = c + n
    _choice(form, "form", ("dense", "intervals"))
    if form == "intervals":
        _check_intervals_memory("block_two_stream_mask", n, size, 2)
        q = np.arange(c, dtype=np.int64)
        content_stop = q + 1 if content == "causal" else (q // l + 1) * l
        t = np.arange(1, n + 1, dtype=np.int64)  # target position of each query slot
        prefix = ((t - 1) // l) * l  # B(t)·l: the content prefix a query slot sees
        own = c + t - 1
        group_start = own if group == "diagonal" else c + prefix
        group_stop = {"full": c + prefix + l, "causal": own + 1, "diagonal": own + 1}[group]
        none = np.full(c, size, np.int64)
        starts = np.concatenate(
            [np.stack([np.zeros(c, np.int64), none], 1), np.stack([np.zeros(n, np.int64), group_start], 1)]
        )
        stops = np.concatenate([np.stack([content_stop, none], 1), np.stack([prefix, group_stop], 1)])
        return _intervals(starts, stops, size)
    _check_closed_form_memory("block_two_stream_mask", n, size)
    return _block_two_stream_dense(size, l, c, group, content)


@functools.partial(jax.jit, static_argnums=(0, 3, 4))
def _block_two_stream_dense(size: int, l, c, group: str, content: str) -> Bool[Array, "slots slots"]:
    """The dense closed form of :func:`block_two_stream_mask`: one compiled program per size and variant (the
    block size `l` and content length `c` traced, so the block sizes of one length share it)."""
    q = jnp.arange(size)[:, None]
    k = jnp.arange(size)[None, :]
    q_content, k_content = q < c, k < c
    if content == "causal":
        cc = k <= q
    else:
        cc = k // l <= q // l
    tq, tk = q - c + 1, k - c + 1
    same_block = (tq - 1) // l == (tk - 1) // l
    in_group = {"full": same_block, "causal": same_block & (tk <= tq), "diagonal": tq == tk}[group]
    query_row = (k_content & (k + 1 <= ((tq - 1) // l) * l)) | (~k_content & in_group)
    return jnp.where(q_content, k_content & cc, query_row)


def butterfly_mask(n: int, sparse: bool = False, form: str = "dense") -> Bool[Array, "slots slots"] | IntervalMask:
    """Closed form of the merged :func:`butterfly` mask (spec hasse.md §3.3), shape `(3n − 2, 3n − 2)`.

    Slots `[F_1..F_{n−1} | B_2..B_n | C_1..C_n]`. Dense: `F_i` sees `F_j` for `j ≤ i`; `B_i` sees
    `B_j` for `j ≥ i`; `C_k` sees `F_j` for `j ≤ k − 1`, `B_j` for `j ≥ k + 1`, and itself
    (`2n² − n` nonzeros, `L* = 1`). Sparse variant (``sparse=True``): F and B bidiagonal, `C_k`
    sees only `F_{k−1}`, `B_{k+1}` and itself (`7n − 8` nonzeros, `L* = n − 1`).

    With ``form="intervals"`` the same mask comes as an :class:`~hassejax.masks.IntervalMask`
    built directly from the closed form in ``O(n)`` (at most three runs a row: the F part, the
    B part and the slot itself), so ``n = 300,000`` takes well under a second and builds no
    `(3n − 2)²` array. `form` other than ``"dense"`` (default, a JAX Boolean array) or
    ``"intervals"``, or a `sparse` that is not a bool, is a :class:`~hassejax.errors.TaskError`.

    **Example:**

    ```python
    >>> from hassejax.tasks import butterfly_mask
    >>> m = butterfly_mask(4, form="intervals")   # slots F1 F2 F3 | B2 B3 B4 | C1 C2 C3 C4
    >>> m.n, m.row(7)                              # C2 sees F1, B3 B4 and itself
    (10, [(0, 1), (4, 6), (7, 8)])

    ```

    **Raises:** :class:`~hassejax.errors.TaskError` if `n < 2`;
    :class:`~hassejax.errors.MemoryBudgetError` (naming `n`) if the dense mask would not fit,
    estimated before it is built.
    """
    n = _positive_int(n, "n", 2)
    size = 3 * n - 2
    _flag(sparse, "sparse")
    _choice(form, "form", ("dense", "intervals"))
    if form == "intervals":
        _check_intervals_memory("butterfly_mask", n, size, 3)
        f = np.arange(1, n, dtype=np.int64)  # F_p at slot p - 1
        b = np.arange(2, n + 1, dtype=np.int64)  # B_p at slot p + n - 3
        p = np.arange(1, n + 1, dtype=np.int64)  # C_p at slot p + 2n - 3
        end_b = 2 * n - 2  # one past the last B slot
        if sparse:  # F_{p-1}, F_p | B_p, B_{p+1} | C_p sees F_{p-1}, B_{p+1}, itself
            f_run = (np.maximum(f - 2, 0), f)
            b_run = (b + n - 3, np.minimum(b + n - 1, end_b))
            c_f = (np.maximum(p - 2, 0), p - 1)
            c_b = (np.minimum(p + n - 2, end_b), np.minimum(p + n - 1, end_b))
        else:  # F_1..F_p | B_p..B_n | C_p sees F_1..F_{p-1}, B_{p+1}..B_n, itself
            f_run = (np.zeros(n - 1, np.int64), f)
            b_run = (b + n - 3, np.full(n - 1, end_b, np.int64))
            c_f = (np.zeros(n, np.int64), p - 1)
            c_b = (np.minimum(p + n - 2, end_b), np.full(n, end_b, np.int64))
        c_self = p + 2 * n - 3
        none = np.full(n - 1, size, np.int64)
        starts = np.concatenate(
            [
                np.stack([f_run[0], none, none], 1),
                np.stack([b_run[0], none, none], 1),
                np.stack([c_f[0], c_b[0], c_self], 1),
            ]
        )
        stops = np.concatenate(
            [
                np.stack([f_run[1], none, none], 1),
                np.stack([b_run[1], none, none], 1),
                np.stack([c_f[1], c_b[1], c_self + 1], 1),
            ]
        )
        return _intervals(starts, stops, size)
    _check_closed_form_memory("butterfly_mask", n, size)
    return _butterfly_dense(n, sparse)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _butterfly_dense(n: int, sparse: bool) -> Bool[Array, "slots slots"]:
    """The dense closed form of :func:`butterfly_mask` (one compiled program per configuration)."""
    size = 3 * n - 2
    idx = jnp.arange(size)
    stream = jnp.where(idx < n - 1, 0, jnp.where(idx < 2 * n - 2, 1, 2))  # 0 = F, 1 = B, 2 = C
    pos = jnp.where(stream == 0, idx + 1, jnp.where(stream == 1, idx - (n - 1) + 2, idx - (2 * n - 2) + 1))
    sq, sk = stream[:, None], stream[None, :]
    pq, pk = pos[:, None], pos[None, :]
    if sparse:
        ff = (pk == pq) | (pk == pq - 1)
        bb = (pk == pq) | (pk == pq + 1)
        cf, cb = pk == pq - 1, pk == pq + 1
    else:
        ff, bb, cf, cb = pk <= pq, pk >= pq, pk <= pq - 1, pk >= pq + 1
    return (
        ((sq == 0) & (sk == 0) & ff)
        | ((sq == 1) & (sk == 1) & bb)
        | ((sq == 2) & (sk == 0) & cf)
        | ((sq == 2) & (sk == 1) & cb)
        | ((sq == 2) & (sk == 2) & (pq == pk))
    )
