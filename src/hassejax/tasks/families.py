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
from collections.abc import Sequence
from typing import Any, no_type_check

import numpy as np

from ..errors import TaskError
from ._family_args import _check_family_memory, _choice, _flag, _positive_int
from .derived_masks import block_two_stream_mask, butterfly_mask
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

    **Example:**

    ```python
    >>> from hassejax.tasks import autoregressive
    >>> family = autoregressive(4)
    >>> [t.n for t in family.tasks], family.stream_order, family.name, family.options
    ([1, 2, 3], ('content',), 'autoregressive', {'n': 4, 'prefix': 'causal'})
    >>> family.merge().n
    3

    ```
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


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
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

    **Example:** the merge is next-token prediction with the causal mask; bidirectional prefixes
    merge into `1 + 2 + 3` separate slots.

    ```python
    >>> from hassejax.tasks import autoregressive
    >>> merged = autoregressive(4).merge()
    >>> merged.mask.astype(int).tolist(), merged.slot_names(), [str(y) for y in merged.labels]
    ([[1, 0, 0], [1, 1, 0], [1, 1, 1]], ('w1', 'w2', 'w3'), ['w2', 'w3', 'w4'])
    >>> autoregressive(4, prefix="bidirectional").merge().n
    6

    ```
    """
    n = _positive_int(n, "n", 2)
    _choice(prefix, "prefix", ("causal", "bidirectional"))
    m = n - 1  # tasks of 1 .. n - 1 slots
    _check_family_memory(
        "autoregressive",
        n,
        m,
        m * (m + 1) * (2 * m + 1) // 6,
        m * (m + 1) // 2,
        m,
        "hassejax.masks.structured.causal(n - 1)",
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

    **Example:** `n = 4`, `l = 2`: two block tasks and the content task; `2n` merged slots, `2n − l`
    without the content task.

    ```python
    >>> from hassejax.tasks import block_generation
    >>> family = block_generation(4, 2)
    >>> [t.slot_names() for t in family.tasks]
    [('mask1', 'mask2'), ('w1', 'w2', 'mask3', 'mask4'), ('w1', 'w2', 'w3', 'w4')]
    >>> family.merge().n, block_generation(4, 2, keep_last_block=False).merge().n
    (8, 6)

    ```
    """
    n = _positive_int(n, "n")
    l = _positive_int(block_size, "block_size")
    if n % l:
        raise TaskError(
            f"`block_size` must divide `n`; got n={n}, block_size={l} (pad the sequence to a multiple of block_size)."
        )
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
        mask[s:, s:] = {
            "full": np.ones((l, l), bool),
            "causal": t[None, :] <= t[:, None],
            "diagonal": np.eye(l, dtype=bool),
        }[group]
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
    `k`). At the boundaries (the spec's documented choice, ``boundary="neighbour"``, the only
    one) the aggregate is the one neighbour, `w'_1 = w_2` and `w'_n = w_{n−1}`; it carries
    information from the neighbours only (its `sources`). A pad boundary (averaging with a pad
    embedding) is not offered: the model has no pad embedding (its `V + 1` token rows are the
    tokens and the mask token), and as a pad carries no token it would leave the tasks, the
    merged mask and the audit unchanged. Task `T_k` (`k = 1..n`): slots `w_1..w_{k−1}` (stream ``"F"``,
    forward-causal), `w'_k` (stream ``"C"``, sees every slot), `w_{k+1}..w_n` (stream ``"B"``,
    each sees itself and later slots); label `w'_k → w_k`. The merge has `3n − 2` slots
    `[F: w_1..w_{n−1} | B: w_2..w_n | C: w'_1..w'_n]`.

    **Raises:** :class:`~hassejax.errors.TaskError` if `n < 2` or `boundary` is not
    ``"neighbour"`` (``"pad"`` included, with the reason);
    :class:`~hassejax.errors.MemoryBudgetError` (naming `n`) if the `n` tasks of `n` slots
    (`n³` bytes of masks) would not fit, estimated before any is built.

    **Example:**

    >>> from hassejax.tasks import butterfly
    >>> butterfly(4).merge().n                      # 3n − 2 slots
    10
    >>> butterfly(4, boundary="pad")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hassejax.errors.TaskError: `boundary` must be 'neighbour' (w'_1 = w_2, w'_n = w_{n-1}; spec hasse.md §3.3); ...
    """
    n = _positive_int(n, "n", 2)
    if boundary == "pad":
        raise TaskError(
            "`boundary` must be 'neighbour' (w'_1 = w_2, w'_n = w_{n-1}; spec hasse.md §3.3); got 'pad', which is not "
            "supported: averaging with a pad embedding needs a pad row the Transformer does not have (its V + 1 token "
            "rows are the V tokens and the mask token), and a pad carries no token, so the tasks, merged mask and "
            "audit would be those of 'neighbour'."
        )
    _choice(boundary, "boundary", ("neighbour",))
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

    Source: Yang et al., "XLNet", arXiv:1906.08237, §2.3 (two-stream self-attention); spec hasse.md §3.2 (the
    diagonal group with `l = 1` and a permutation is XLNet's two-stream attention) and §2 "Leakage audit".

    **Example:** the query slots `g_1..g_3` (slots 3–5) never see their own token; with the
    content mask (``leaky=True``) every one of them does.

    ```python
    >>> from hassejax.tasks import audit, xlnet_two_stream_task
    >>> task = xlnet_two_stream_task([2, 0, 1])
    >>> task.slot_names(), [str(y) for y in task.labels]
    (('w1', 'w2', 'w3', 'mask1', 'mask2', 'mask3'), ['None', 'None', 'None', 'w1', 'w2', 'w3'])
    >>> audit(task).leaks, audit(xlnet_two_stream_task([2, 0, 1], leaky=True)).leaks
    ((), (3, 4, 5))

    ```
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
    ctx = {int(i) for i in list(permutation)[:context]}
    inputs = [_w(i + 1) for i in range(n)] + [Token("mask", i + 1) for i in range(n)]
    labels = {n + i: _w(i + 1) for i in range(n) if i not in ctx}
    name = "xlnet_two_stream_leaky" if leaky else "xlnet_two_stream"
    return Task(
        inputs, mask, labels, ["content"] * n + ["query"] * n, {Token("mask", i + 1): () for i in range(n)}, name
    )


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

    Source: Arriola et al., "Block Diffusion" (BD3-LM), arXiv:2503.09573 (paper); spec hasse.md §3.2 (the
    block-causal clean stream of block diffusion) and §2 "Leakage audit".

    **Example:** noisy slot `noisy3` (slot 2) sees its own block and the clean first block, never
    its own clean token `w3`:

    ```python
    >>> from hassejax.tasks import audit, block_diffusion_task
    >>> task = block_diffusion_task(4, 2)
    >>> task.slot_names(), task.mask[2].astype(int).tolist()
    (('noisy1', 'noisy2', 'noisy3', 'noisy4', 'w1', 'w2', 'w3', 'w4'), [0, 0, 1, 1, 1, 1, 0, 0])
    >>> audit(task).ok
    True

    ```
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


FAMILIES = {"autoregressive": autoregressive, "block_generation": block_generation, "butterfly": butterfly}
