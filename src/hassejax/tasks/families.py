"""Task families of the case studies, and closed forms of their merged masks (spec hasse.md §3).

Each family builder returns a :class:`TaskFamily`: the tasks, the stream order used for the
merged slot order, and the options. ``family.merge()`` runs the derivation pipeline
(:func:`~hassejax.tasks.merge_tasks`). The closed-form builders (:func:`block_two_stream_mask`,
:func:`butterfly_mask`) give the same masks without running the merge, for large `n`.

Sequence tokens are ``Token("w", j)`` with 1-based positions `j = 1..n`, as in the spec's prose.

Source: C. Li, H. Guo, "Hasse Diagrams for Attention", arXiv:2606.09951 (2026), §4 (paper);
spec hasse.md §3.1–3.3 (the exact constructions and closed forms).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool

from .._checks import check_memory
from ..errors import TaskError
from ..masks._intervals import IntervalMask, check_host_memory, normalize_runs
from .merge import MergedTask, merge_tasks
from .task import Task, Token, check_slots_memory

__all__ = [
    "TaskFamily",
    "autoregressive",
    "block_generation",
    "butterfly",
    "xlnet_two_stream_task",
    "block_diffusion_task",
    "block_two_stream_mask",
    "butterfly_mask",
    "FAMILIES",
]


@dataclasses.dataclass(frozen=True)
class TaskFamily:
    """A family of training tasks to be merged (spec hasse.md §2).

    - `tasks`: the tasks.
    - `stream_order`: order of the stream tags in the merged slot order.
    - `name`: the family's name; `options`: the options it was built with.
    """

    tasks: tuple[Task, ...]
    stream_order: tuple[str, ...]
    name: str
    options: dict[str, Any] = dataclasses.field(default_factory=dict)

    def merge(self) -> MergedTask:
        """The minimal merged task of the family (:func:`~hassejax.tasks.merge_tasks`).

        **Raises:** as :func:`~hassejax.tasks.merge_tasks`, including
        :class:`~hassejax.errors.MemoryBudgetError` before allocating what would not fit.
        """
        return merge_tasks(self.tasks, self.stream_order, name=self.name)


def _positive_int(value, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise TaskError(f"`{name}` must be an int >= {minimum}; got {value!r}.")
    return int(value)


def _flag(value, name: str) -> None:
    """Raise :class:`TaskError` unless `value` is a bool (a string such as ``"no"`` would count as True)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TaskError(f"`{name}` must be True or False; got {value!r}.")


def _choice(value, name: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise TaskError(f"`{name}` must be one of {tuple(allowed)}; got {value!r}.")
    return value


#: Bytes per slot of a built task beside its mask (the Token, list and tuple entries, label
#: and stream tag; 110-230 measured with tracemalloc).
_SLOT_BYTES = 250

#: Bool ``(size, size)`` arrays alive at once while a closed-form mask is built (the result
#: and the elementwise temporaries of its formula).
_CLOSED_FORM_MATRICES = 8


def _check_family_memory(
    family: str, n: int, num_tasks: int, sum_sq: int, sum_slots: int, largest: int, closed_form: str
) -> None:
    """Raise :class:`~hassejax.errors.MemoryBudgetError` naming `n` before a family's tasks are built.

    The tasks are kept together: each its dense ``(s, s)`` mask (`sum_sq` bytes in all) and
    :data:`_SLOT_BYTES` a slot; building one task takes about four more ``(s, s)`` arrays.
    """
    need = sum_sq + _SLOT_BYTES * sum_slots + 4 * largest * largest
    check_memory(
        need,
        f"the {family} family with n = {n} ({num_tasks} tasks of up to {largest} slots, each with a dense mask)",
        "n",
        hint=f"Use a smaller n; the merged mask has a closed form, {closed_form}, which builds no task family.",
    )


def _check_closed_form_memory(what: str, n: int, size: int) -> None:
    """Raise :class:`~hassejax.errors.MemoryBudgetError` naming `n` before a closed-form mask is built."""
    check_memory(
        _CLOSED_FORM_MATRICES * size * size,
        f"{what} with n = {n} (a dense ({size}, {size}) mask and its temporaries)",
        "n",
        hint="Use a smaller n, or form='intervals' (an IntervalMask: no dense (n, n) array at any n).",
    )


def _w(j: int) -> Token:
    return Token("w", j)


def _causal(k: int) -> np.ndarray:
    return np.tril(np.ones((k, k), dtype=bool))


def autoregressive(n: int, prefix: str = "causal") -> TaskFamily:
    """The autoregressive family (spec hasse.md §3.1): tasks `T_k`, `k = 1..n−1`.

    `T_k` has inputs `w_1..w_k` at positions `1..k`, a causal mask (or a bidirectional one
    with ``prefix="bidirectional"``), and the label slot `k → w_{k+1}`. Its diagram is a chain
    and node `w_j` is equivalent across all tasks, so the merge is the causal mask on `n − 1`
    slots with next-token labels. Bidirectional prefixes share nothing: `n − 1` separate copies.

    **Raises:** :class:`~hassejax.errors.TaskError` if `n < 2` or `prefix` is unknown;
    :class:`~hassejax.errors.MemoryBudgetError` (naming `n`) if the `n − 1` tasks (about
    `n³ / 3` bytes of masks) would not fit, estimated before any is built.
    """
    n = _positive_int(n, "n", 2)
    _choice(prefix, "prefix", ("causal", "bidirectional"))
    m = n - 1  # tasks of 1 .. n - 1 slots
    _check_family_memory(
        "autoregressive", n, m, m * (m + 1) * (2 * m + 1) // 6, m * (m + 1) // 2, m, "hassejax.masks.structured.causal(n - 1)"
    )
    tasks = []
    for k in range(1, n):
        mask = _causal(k) if prefix == "causal" else np.ones((k, k), dtype=bool)
        tasks.append(Task([_w(j) for j in range(1, k + 1)], mask, {k - 1: _w(k + 1)}, name=f"T{k}"))
    return TaskFamily(tuple(tasks), ("content",), "autoregressive", {"n": n, "prefix": prefix})


def block_generation(
    n: int,
    block_size: int,
    group: str = "full",
    content: str = "causal",
    keep_last_block: bool = True,
) -> TaskFamily:
    """The block-generation family whose merge is Block Two-Stream attention (spec hasse.md §3.2).

    Block size `l`, `N = n / l` blocks; block `b` (0-based) covers positions `b·l+1 .. (b+1)·l`
    and has prefix length `s_b = b·l`. Task `T_b`: inputs `w_1..w_{s_b}` (stream ``"content"``,
    causal among themselves, or block-causal with ``content="block_causal"``, the clean stream
    of BD3-LM), then `l` mask tokens ``Token("mask", t)`` for the target positions `t` of block
    `b` (stream ``"query"``); each mask token sees the whole prefix and, inside its group, all
    mask tokens (``group="full"``), those at positions `≤ t` (``"causal"``) or only itself
    (``"diagonal"``; with `l = 1` and a permutation this is XLNet's two-stream attention);
    labels: mask slot `t → w_t`. With ``keep_last_block=True`` the family also holds the task
    `w_1..w_n` (the content stream of the next inference step, no labels), which makes the
    merged layout `[w_1..w_n | m_1..m_n]` (2n slots); without it the merge has `2n − l` slots.

    **Raises:** :class:`~hassejax.errors.TaskError` if `block_size` does not divide `n`, or for
    an unknown option; :class:`~hassejax.errors.MemoryBudgetError` (naming `n`) if the tasks
    (about `n³ / (3 l)` bytes of masks) would not fit, estimated before any is built.
    """
    n = _positive_int(n, "n")
    l = _positive_int(block_size, "block_size")
    if n % l:
        raise TaskError(f"`block_size` must divide `n`; got n={n}, block_size={l} (pad the sequence to a multiple of block_size).")
    _choice(group, "group", ("full", "causal", "diagonal"))
    _choice(content, "content", ("causal", "block_causal"))
    _flag(keep_last_block, "keep_last_block")
    nb, last = n // l, int(bool(keep_last_block))  # tasks of l, 2l, .., n slots (+ one of n)
    _check_family_memory(
        "block_generation",
        n,
        nb + last,
        l * l * nb * (nb + 1) * (2 * nb + 1) // 6 + last * n * n,
        l * nb * (nb + 1) // 2 + last * n,
        n,
        "hassejax.tasks.block_two_stream_mask(n, block_size, form='intervals')",
    )

    def content_mask(s: int) -> np.ndarray:
        if content == "causal":
            return _causal(s)
        blk = np.arange(s) // l
        return blk[None, :] <= blk[:, None]

    tasks = []
    for b in range(n // l):
        s = b * l
        targets = list(range(s + 1, s + l + 1))
        mask = np.zeros((s + l, s + l), dtype=bool)
        mask[:s, :s] = content_mask(s)
        mask[s:, :s] = True
        t = np.arange(l)
        mask[s:, s:] = {"full": np.ones((l, l), bool), "causal": t[None, :] <= t[:, None], "diagonal": np.eye(l, dtype=bool)}[group]
        inputs = [_w(j) for j in range(1, s + 1)] + [Token("mask", j) for j in targets]
        labels = {s + i: _w(j) for i, j in enumerate(targets)}
        streams = ["content"] * s + ["query"] * l
        tasks.append(Task(inputs, mask, labels, streams, {Token("mask", j): () for j in targets}, name=f"T{b}"))
    if keep_last_block:
        tasks.append(Task([_w(j) for j in range(1, n + 1)], content_mask(n), name="content"))
    opts = {"n": n, "block_size": l, "group": group, "content": content, "keep_last_block": keep_last_block}
    return TaskFamily(tuple(tasks), ("content", "query"), "block_generation", opts)


def butterfly(n: int, boundary: str = "neighbour") -> TaskFamily:
    """The butterfly family whose merge is Butterfly attention (spec hasse.md §3.3).

    The slot that predicts `w_k` holds the aggregated neighbour token
    ``Token("agg", k)`` = `w'_k = (w_{k−1} + w_{k+1}) / 2` (an embedding average, position id
    `k`). At the boundaries (a documented choice) ``boundary="neighbour"`` uses the one
    neighbour, `w'_1 = w_2` and `w'_n = w_{n−1}`; ``boundary="pad"`` averages with a pad
    embedding instead. Either way the aggregate carries information from the neighbours only
    (its `sources`). Task `T_k` (`k = 1..n`): slots `w_1..w_{k−1}` (stream ``"F"``,
    forward-causal), `w'_k` (stream ``"C"``, sees every slot), `w_{k+1}..w_n` (stream ``"B"``,
    each sees itself and later slots); label `w'_k → w_k`. The merge has `3n − 2` slots
    `[F: w_1..w_{n−1} | B: w_2..w_n | C: w'_1..w'_n]`.

    **Raises:** :class:`~hassejax.errors.TaskError` if `n < 2` or `boundary` is unknown;
    :class:`~hassejax.errors.MemoryBudgetError` (naming `n`) if the `n` tasks of `n` slots
    (`n³` bytes of masks) would not fit, estimated before any is built.
    """
    n = _positive_int(n, "n", 2)
    _choice(boundary, "boundary", ("neighbour", "pad"))
    _check_family_memory("butterfly", n, n, n**3, n * n, n, "hassejax.tasks.butterfly_mask(n, form='intervals')")
    sources = {Token("agg", k): tuple(_w(j) for j in (k - 1, k + 1) if 1 <= j <= n) for k in range(1, n + 1)}
    tasks = []
    for k in range(1, n + 1):
        f, b = k - 1, n - k
        size = f + 1 + b
        mask = np.zeros((size, size), dtype=bool)
        mask[:f, :f] = _causal(f)
        mask[f + 1 :, f + 1 :] = _causal(b).T
        mask[f, :] = True
        inputs = [_w(j) for j in range(1, k)] + [Token("agg", k)] + [_w(j) for j in range(k + 1, n + 1)]
        streams = ["F"] * f + ["C"] + ["B"] * b
        tasks.append(Task(inputs, mask, {f: _w(k)}, streams, sources, name=f"T{k}"))
    return TaskFamily(tuple(tasks), ("F", "B", "C"), "butterfly", {"n": n, "boundary": boundary})


def xlnet_two_stream_task(permutation: Sequence[int], context: int = 0, leaky: bool = False) -> Task:
    """XLNet's two-stream attention as one task over `[h_1..h_n | g_1..g_n]` (2n slots).

    Content slot `h_i` holds ``Token("w", i)``; query slot `g_i` holds ``Token("mask", i)`` and
    predicts `w_i` (every token outside the first `context` of the permutation is a target).
    The content stream uses :func:`hassejax.masks.xlnet_two_stream`'s content mask, query rows
    its query mask onto the content slots (plus their own residual). With ``leaky=True`` the
    query stream is given the content-stream mask — the classic two-stream bug, which lets
    `g_i` see `h_i` and so its own target. Positions in tokens are 1-based (`i = 1..n`);
    `permutation` uses 0-based token indices like :func:`hassejax.masks.xlnet_two_stream`.

    **Raises:** :class:`~hassejax.errors.MaskError` for a bad permutation or context (from the
    mask constructor); :class:`~hassejax.errors.MemoryBudgetError` (naming `permutation`) if the
    `(2n, 2n)` task would not fit, estimated from the length before anything is built.
    """
    from ..masks import xlnet_two_stream

    shape = np.shape(permutation) if hasattr(permutation, "shape") or isinstance(permutation, (list, tuple)) else ()
    if len(shape) == 1:
        # the (2n, 2n) mask, the task's two copies of it and the two (n, n) stream masks
        check_slots_memory(2 * shape[0], 4, "the XLNet two-stream task", "permutation")
    streams = xlnet_two_stream(permutation, context=context)
    content = np.asarray(streams.content)
    query = content if leaky else np.asarray(streams.query)
    n = content.shape[0]
    mask = np.zeros((2 * n, 2 * n), dtype=bool)
    mask[:n, :n] = content
    mask[n:, :n] = query
    mask[n:, n:] = np.eye(n, dtype=bool)
    ctx = set(int(i) for i in list(permutation)[:context])
    inputs = [_w(i + 1) for i in range(n)] + [Token("mask", i + 1) for i in range(n)]
    labels = {n + i: _w(i + 1) for i in range(n) if i not in ctx}
    name = "xlnet_two_stream_leaky" if leaky else "xlnet_two_stream"
    return Task(inputs, mask, labels, ["content"] * n + ["query"] * n, {Token("mask", i + 1): () for i in range(n)}, name)


def block_diffusion_task(n: int, block_size: int) -> Task:
    """BD3-LM's training mask as a task over `[x_t ; x_0]` (2n slots), for the leakage audit.

    Noisy slot `i` holds ``Token("noisy", i)`` (the partially masked copy of `w_i`, treated
    as carrying no sequence token) and predicts `w_i`; clean slot `i` holds ``Token("w", i)``.
    The mask is :func:`hassejax.masks.block_diffusion` (noisy block sees itself and earlier
    clean blocks; clean blocks are block-causal), so a noisy slot never sees its own clean
    token. Positions are 1-based.

    **Raises:** :class:`~hassejax.errors.MaskError` as the mask constructor;
    :class:`~hassejax.errors.MemoryBudgetError` (naming `n`) if the `(2n, 2n)` task would not
    fit, estimated before anything is built.
    """
    from ..masks import block_diffusion

    if isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_)) and n >= 1:
        # the constructor's mask and intermediates, its host copy and the task's two copies
        check_slots_memory(2 * int(n), 8, "the block diffusion task", "n")
    mask = np.asarray(block_diffusion(n, block_size))
    inputs = [Token("noisy", i) for i in range(1, n + 1)] + [_w(i) for i in range(1, n + 1)]
    labels = {i - 1: _w(i) for i in range(1, n + 1)}
    sources = {Token("noisy", i): () for i in range(1, n + 1)}
    return Task(inputs, mask, labels, ["query"] * n + ["content"] * n, sources, "block_diffusion")


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
        starts = np.concatenate([np.stack([np.zeros(c, np.int64), none], 1), np.stack([np.zeros(n, np.int64), group_start], 1)])
        stops = np.concatenate([np.stack([content_stop, none], 1), np.stack([prefix, group_stop], 1)])
        return _intervals(starts, stops, size)
    _check_closed_form_memory("block_two_stream_mask", n, size)
    return _block_two_stream_dense(n, l, c, group, content)


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3, 4))
def _block_two_stream_dense(n: int, l: int, c: int, group: str, content: str) -> Bool[Array, "slots slots"]:
    """The dense closed form of :func:`block_two_stream_mask` (one compiled program per configuration)."""
    size = c + n
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
            [np.stack([f_run[0], none, none], 1), np.stack([b_run[0], none, none], 1), np.stack([c_f[0], c_b[0], c_self], 1)]
        )
        stops = np.concatenate(
            [np.stack([f_run[1], none, none], 1), np.stack([b_run[1], none, none], 1), np.stack([c_f[1], c_b[1], c_self + 1], 1)]
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


FAMILIES = {"autoregressive": autoregressive, "block_generation": block_generation, "butterfly": butterfly}
