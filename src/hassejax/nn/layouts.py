"""Input layouts: from a (merged) task to the arrays a :class:`~hassejax.nn.Transformer` reads.

A :class:`Layout` is the slot recipe of a :class:`~hassejax.tasks.Task`: for every slot, which
sequence tokens its input is made of (with weights), its position id, and which sequence
token it predicts (if any), together with the task's mask. It is built from the task's
``inputs``, ``labels``, ``sources`` and ``mask`` — never retyped — so the Block Two-Stream and
Butterfly layouts are exactly what the derivation pipeline (:func:`~hassejax.tasks.merge_tasks`)
produced:

- a sequence token ``Token("w", j)`` reads token `w_j` (0-based index `j − 1`), weight 1;
- a token with declared sources (``task.sources``), e.g. ``Token("agg", k)`` with sources
  `(w_{k−1}, w_{k+1})`, reads the **average of the source embeddings**: `(w_{k−1} + w_{k+1}) / 2`,
  and at the boundary the single neighbour, `w'_1 = w_2`, `w'_n = w_{n−1}` (spec §3.3, the
  "neighbour" boundary);
- a token with empty sources, e.g. ``Token("mask", t)``, reads the model's mask token;
- the position id of a slot is its token's position (1-based, as in the spec's prose), so a
  mask token carries its **target** position id.

Source: Li & Guo, arXiv:2606.09951 (paper); spec hasse.md §2 (tasks), §3.1–3.3 (layouts).
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from .._checks import int_value
from .._tracing import is_traced
from ..errors import ParameterError, TaskError
from ..tasks import Task, Token, autoregressive, block_generation, butterfly

__all__ = ["Layout", "SlotInputs", "layout_from_task", "causal_layout", "block_two_stream_layout", "butterfly_layout"]


def _checked_token_ids(ids, vocab_size: int, name: str):
    """`ids` checked to be integer sequence-token ids in ``[0, vocab_size)``, returned for use downstream.

    The model's own check admits ``vocab_size`` (its mask token id), which as a sequence token would index past the
    logits (a NaN loss) or feed the mask embedding in place of a token; sequences must stay below it. Concrete ids are
    checked on the host; traced ids (under ``jit``/``vmap``) get an :func:`equinox.error_if`, a runtime error when the
    program runs, so the returned array must be the one used.

    **Raises:** :class:`~hassejax.errors.ParameterError` naming `name` for a non-integer dtype or (concrete ids) an id
    out of range.
    """
    # the dtype as given (jnp.result_type raised JAX's TypeError on object arrays and named float64 float32 without x64)
    dtype = ids.dtype if hasattr(ids, "dtype") else np.asarray(ids).dtype
    if not jnp.issubdtype(dtype, jnp.integer):
        raise ParameterError(f"`{name}` must be integer token ids (e.g. int32); got dtype {dtype}.")
    if is_traced(ids):
        bad = jnp.any((ids < 0) | (ids >= vocab_size))
        return eqx.error_if(
            ids,
            bad,
            f"`{name}` must hold token ids in [0, {vocab_size}) (id {vocab_size} is the model's mask token, never a "
            "sequence token); got an id outside.",
        )
    arr = np.asarray(ids)
    if arr.size and (arr.min() < 0 or arr.max() >= vocab_size):
        raise ParameterError(
            f"`{name}` must hold token ids in [0, {vocab_size}); got values in [{arr.min()}, {arr.max()}]."
        )
    return ids


class SlotInputs(eqx.Module):
    """The per-example inputs of a layout: what :meth:`Transformer.__call__` takes besides the mask.

    - `token_ids`: int `(slots, r)`, token ids (mask token = the model's ``mask_id``);
    - `token_weights`: float `(slots, r)`, weights of the averaged token embeddings;
    - `position_ids`: int `(slots,)`.

    Source: (derived) from spec hasse.md §0 (position ids are separate from slot indices) and §3.3 (a centre slot
    holds the embedding average of its neighbours).

    **Example:** the Block Two-Stream slots `[w1..w4 | m1..m4]` read the sequence, then the mask
    token (id 3 here), each at its target position id.

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.nn import block_two_stream_layout
    >>> s = block_two_stream_layout(4, 2).slot_inputs(jnp.array([0, 1, 2, 0]), mask_id=3)
    >>> s.token_ids[:, 0].tolist(), s.token_weights[:, 0].tolist(), s.position_ids.tolist()
    ([0, 1, 2, 0, 3, 3, 3, 3], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], [1, 2, 3, 4, 1, 2, 3, 4])

    ```
    """

    token_ids: Int[Array, "slots r"]
    token_weights: Float[Array, "slots r"]
    position_ids: Int[Array, " slots"]


class Layout(eqx.Module):
    """The slot recipe of a task (see the module docstring). All array fields are leaves.

    - `mask`: bool `(slots, slots)`, the task's mask (row = query slot, True = may attend).
    - `token_sources`: int `(slots, r)`, 0-based sequence index of each averaged token, `-1`
      for the mask token.
    - `token_weights`: float `(slots, r)`, averaging weights (rows sum to 1; padding weight 0).
    - `position_ids`: int `(slots,)`, the slots' position ids.
    - `target_index`: int `(slots,)`, 0-based sequence index of the token the slot predicts,
      `-1` for an unlabelled slot.
    - `sequence_length`: length `n` of the sequences the layout reads (static).
    - `streams`, `slot_names`, `name`: presentation (static).

    Source: Li & Guo, arXiv:2606.09951 (paper); spec hasse.md §2 (a task `(W, Y, M)`: inputs, labels, mask),
    §0 (position ids separate from slots), §3.1–3.3 (the layouts).

    **Example:** the Butterfly layout of `n = 3`: its centre slots `agg1..agg3` are the labelled ones.

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.nn import butterfly_layout
    >>> lay = butterfly_layout(3)
    >>> lay.num_slots, lay.streams, lay.labelled.tolist()
    (7, ('F', 'F', 'B', 'B', 'C', 'C', 'C'), [False, False, False, False, True, True, True])
    >>> lay.position_ids.tolist(), lay.target_index.tolist(), lay.targets(jnp.array([2, 0, 1])).tolist()
    ([1, 2, 2, 3, 1, 2, 3], [-1, -1, -1, -1, 0, 1, 2], [0, 0, 0, 0, 2, 0, 1])

    ```
    """

    mask: Bool[Array, "slots slots"]
    token_sources: Int[Array, "slots r"]
    token_weights: Float[Array, "slots r"]
    position_ids: Int[Array, " slots"]
    target_index: Int[Array, " slots"]
    sequence_length: int = eqx.field(static=True)
    streams: tuple[str, ...] = eqx.field(static=True)
    slot_names: tuple[str, ...] = eqx.field(static=True)
    name: str = eqx.field(static=True)

    @property
    def num_slots(self) -> int:
        """Number of slots."""
        return self.mask.shape[0]

    @property
    def labelled(self) -> Bool[Array, " slots"]:
        """Bool `(slots,)`: True where the slot predicts a sequence token."""
        return self.target_index >= 0

    def _check_sequence(self, sequence) -> None:
        if sequence.ndim != 1 or sequence.shape[0] != self.sequence_length:
            raise ParameterError(
                f"`sequence` must be an int array of shape ({self.sequence_length},) for layout {self.name!r}; "
                f"got shape {tuple(sequence.shape)}. Batch with jax.vmap."
            )

    def slot_inputs(self, sequence: Int[Array, " n"], mask_id: int) -> SlotInputs:
        """Token ids, weights and position ids of every slot for one sequence `(n,)` (ids 0-based).

        `mask_id` is the model's mask token id (:attr:`Transformer.mask_id`).
        """
        self._check_sequence(sequence)
        gathered = jnp.asarray(sequence)[jnp.maximum(self.token_sources, 0)]
        ids = jnp.where(self.token_sources >= 0, gathered, mask_id)
        return SlotInputs(ids, self.token_weights, self.position_ids)

    def targets(self, sequence: Int[Array, " n"]) -> Int[Array, " slots"]:
        """The target token of every slot (`0` where unlabelled: combine with :attr:`labelled`)."""
        self._check_sequence(sequence)
        return jnp.where(self.labelled, jnp.asarray(sequence)[jnp.maximum(self.target_index, 0)], 0)

    def logits(self, model, sequence: Int[Array, " n"], *, check_ids: bool = True) -> Float[Array, "slots vocab"]:
        """Logits of every slot: ``model(*slot_inputs, mask)`` for one sequence `(n,)`.

        With `check_ids` (default) `sequence` must hold token ids in ``[0, model.vocab_size)`` (the
        mask token id ``vocab_size`` is not a sequence token): checked on the host for a concrete
        sequence, by an :func:`equinox.error_if` (a runtime error) for a traced one, besides the
        model's own checks (:meth:`Transformer.embed`). `check_ids=False` skips them all, for
        sequences known valid (e.g. sampled inside ``jit`` or checked by :meth:`check_inputs`).

        **Raises:** :class:`~hassejax.errors.ParameterError` for a `sequence` of the wrong shape or
        dtype, and with `check_ids` for ids out of range (under ``jit``, a runtime error).
        """
        if check_ids:
            sequence = _checked_token_ids(sequence, model.vocab_size, "sequence")
        return self._logits(model, sequence, check_ids)

    def _logits(self, model, sequence, check_model_ids: bool):
        """:meth:`logits` without the check of `sequence`'s range (the caller's); `check_model_ids`: the model's."""
        s = self.slot_inputs(sequence, model.mask_id)
        return model(s.token_ids, s.position_ids, self.mask, s.token_weights, check_ids=check_model_ids)

    def check_inputs(self, model, sequences, name: str = "sequences") -> None:
        """Host check of concrete inputs before a jitted call that skips the runtime id check.

        **Arguments:** `model` (a :class:`~hassejax.nn.Transformer`), `sequences` int `(..., n)`
        token ids (concrete), `name` (the argument named in an error).

        **Raises:** :class:`~hassejax.errors.ParameterError` if `sequences` is not integer or
        holds an id outside ``[0, model.vocab_size)``, or if the layout's position ids reach
        ``model.num_positions``.

        **Example:**

        >>> import jax, jax.numpy as jnp
        >>> from hassejax.nn import Transformer, causal_layout
        >>> model = Transformer(1, 8, 2, vocab_size=3, num_positions=5, key=jax.random.key(0))
        >>> causal_layout(4).check_inputs(model, jnp.asarray([[0, 1, 2, 3]]))
        Traceback (most recent call last):
        ...
        hassejax.errors.ParameterError: `sequences` must hold token ids in [0, 3); got values in [0, 3].
        """
        _checked_token_ids(np.asarray(sequences), model.vocab_size, name)
        top = int(np.max(np.asarray(self.position_ids), initial=-1))
        if top >= model.num_positions:
            raise ParameterError(
                f"`layout` {self.name!r} uses position ids up to {top}; the model has num_positions = "
                f"{model.num_positions} (ids 0..{model.num_positions - 1})."
            )


def _sequence_index(token: Token, symbol, what: str) -> int:
    if token.symbol != symbol:
        raise TaskError(
            f"{what} must be a sequence token {symbol!r}, an aggregate with declared `sources`, or a mask "
            f"token with empty sources; got {token}."
        )
    if token.position < 1:
        raise TaskError(f"{what}: sequence positions are 1-based; got {token}.")
    return token.position - 1


def layout_from_task(task: Task, sequence_length: int | np.integer | None = None, sequence_symbol="w") -> Layout:
    """The :class:`Layout` of a task (merged or not), read off its inputs, labels and sources.

    **Arguments:**

    - `task`: a :class:`~hassejax.tasks.Task` (e.g. a :class:`~hassejax.tasks.MergedTask`).
    - `sequence_length`: length `n` of the sequences fed in; default the largest sequence
      position the task refers to.
    - `sequence_symbol`: the symbol of sequence tokens (``"w"`` in the task families).

    **Returns:** a :class:`Layout`.

    **Raises:** :class:`~hassejax.errors.TaskError` for an input that is neither a sequence
    token, an aggregate of sequence tokens nor a mask token, a label that is not a sequence
    token, a negative position id, or a `sequence_length` smaller than a referenced position.

    Source: (derived) from spec hasse.md §2 (tasks `(W, Y, M)`; aggregated inputs declare their sources) and §3.3
    (an aggregate is the average of its sources' embeddings, boundaries included).

    **Example:** a sequence token, an aggregate of `w1` and `w3`, and a mask token (source `-1`):

    ```python
    >>> import numpy as np
    >>> from hassejax.nn import layout_from_task
    >>> from hassejax.tasks import Task, Token
    >>> w = lambda k: Token("w", k)
    >>> agg, mask = Token("agg", 2), Token("mask", 3)
    >>> task = Task([w(1), agg, mask], np.tril(np.ones((3, 3), bool)), labels=[None, w(2), w(3)],
    ...             sources={agg: (w(1), w(3)), mask: ()})
    >>> lay = layout_from_task(task)
    >>> lay.sequence_length, lay.token_sources.tolist(), lay.token_weights.tolist()
    (3, [[0, 0], [0, 2], [-1, -1]], [[1.0, 0.0], [0.5, 0.5], [1.0, 0.0]])
    >>> lay.position_ids.tolist(), lay.target_index.tolist()
    ([1, 2, 3], [-1, 1, 2])

    ```
    """
    if not isinstance(task, Task):
        raise TaskError(f"`task` must be a hassejax.tasks.Task; got {type(task).__name__}.")
    sources: list[list[int]] = []
    for s, tok in enumerate(task.inputs):
        if tok.position < 0:
            raise TaskError(f"`task.inputs[{s}]` = {tok} has a negative position id.")
        if tok in task.sources:
            srcs = task.sources[tok]
            sources.append(
                [_sequence_index(t, sequence_symbol, f"a source of `task.inputs[{s}]` ({tok})") for t in srcs] or [-1]
            )
        else:
            sources.append([_sequence_index(tok, sequence_symbol, f"`task.inputs[{s}]`")])
    targets = [
        -1 if y is None else _sequence_index(y, sequence_symbol, f"`task.labels[{s}]`")
        for s, y in enumerate(task.labels)
    ]
    used = max([i for row in sources for i in row] + targets + [-1]) + 1
    if sequence_length is None:
        sequence_length = used
    length = int_value(sequence_length)
    if length is None or length < max(used, 1):
        raise TaskError(
            f"`sequence_length` must be an int >= {max(used, 1)} (the largest position the task refers to); got {sequence_length!r}."
        )
    sequence_length = length
    r = max(len(row) for row in sources)
    idx = np.zeros((task.n, r), dtype=np.int32)
    wts = np.zeros((task.n, r), dtype=np.float64)
    for s, row in enumerate(sources):
        idx[s, : len(row)] = row
        idx[s, len(row) :] = row[0]
        wts[s, : len(row)] = 1.0 / len(row)
    return Layout(
        mask=jnp.asarray(task.mask),
        token_sources=jnp.asarray(idx),
        token_weights=jnp.asarray(wts, dtype=jnp.zeros(()).dtype),
        position_ids=jnp.asarray([t.position for t in task.inputs], dtype=jnp.int32),
        target_index=jnp.asarray(targets, dtype=jnp.int32),
        sequence_length=sequence_length,
        streams=tuple(task.streams),
        slot_names=tuple(str(t) for t in task.inputs),
        name=task.name,
    )


def causal_layout(n: int) -> Layout:
    """Next-token prediction on sequences of length `n` (spec hasse.md §3.1).

    The merge of :func:`~hassejax.tasks.autoregressive`: `n − 1` slots `w_1..w_{n−1}` with the
    causal mask, slot `j` predicting `w_{j+1}`; position ids `1..n−1`.

    **Raises:** :class:`~hassejax.errors.TaskError` if `n < 2`.

    **Example:**

    ```python
    >>> from hassejax.nn import causal_layout
    >>> lay = causal_layout(4)
    >>> lay.mask.astype(int).tolist(), lay.position_ids.tolist(), lay.target_index.tolist()
    ([[1, 0, 0], [1, 1, 0], [1, 1, 1]], [1, 2, 3], [1, 2, 3])

    ```
    """
    return layout_from_task(autoregressive(n).merge(), sequence_length=n)


def block_two_stream_layout(n: int, block_size: int, group: str = "full", content: str = "causal") -> Layout:
    """Block Two-Stream attention on sequences of length `n` (spec hasse.md §3.2).

    The merge of :func:`~hassejax.tasks.block_generation` (with ``keep_last_block=True``):
    `2n` slots `[w_1..w_n | m_1..m_n]`, content tokens first, then mask tokens carrying their
    target position ids; query slot `m_t` predicts `w_t`.

    **Raises:** :class:`~hassejax.errors.TaskError` if `block_size` does not divide `n` or for
    an unknown option.

    **Example:** query slot `m3` (slot 6) sees the prefix `w1, w2` and its group `m3, m4`:

    ```python
    >>> from hassejax.nn import block_two_stream_layout
    >>> lay = block_two_stream_layout(4, 2)
    >>> lay.slot_names, lay.mask[6].astype(int).tolist()
    (('w1', 'w2', 'w3', 'w4', 'mask1', 'mask2', 'mask3', 'mask4'), [1, 1, 0, 0, 0, 0, 1, 1])
    >>> lay.position_ids.tolist(), lay.target_index.tolist()
    ([1, 2, 3, 4, 1, 2, 3, 4], [-1, -1, -1, -1, 0, 1, 2, 3])

    ```
    """
    return layout_from_task(block_generation(n, block_size, group=group, content=content).merge(), sequence_length=n)


def butterfly_layout(n: int) -> Layout:
    """Butterfly attention on sequences of length `n` (spec hasse.md §3.3).

    The merge of :func:`~hassejax.tasks.butterfly`: `3n − 2` slots `[F: w_1..w_{n−1} |
    B: w_2..w_n | C: w'_1..w'_n]`; `C_k` holds `(w_{k−1} + w_{k+1}) / 2` (boundaries `w'_1 = w_2`,
    `w'_n = w_{n−1}`) at position id `k` and predicts `w_k`.

    **Raises:** :class:`~hassejax.errors.TaskError` if `n < 2`.

    **Example:** the centre slots `C_1..C_4` average their neighbours (one at each boundary):

    ```python
    >>> from hassejax.nn import butterfly_layout
    >>> lay = butterfly_layout(4)
    >>> lay.num_slots, lay.token_sources[6:].tolist(), lay.token_weights[6:].tolist()
    (10, [[1, 1], [0, 2], [1, 3], [2, 2]], [[1.0, 0.0], [0.5, 0.5], [0.5, 0.5], [1.0, 0.0]])
    >>> lay.position_ids[6:].tolist(), lay.target_index[6:].tolist()
    ([1, 2, 3, 4], [0, 1, 2, 3])

    ```
    """
    return layout_from_task(butterfly(n).merge(), sequence_length=n)
