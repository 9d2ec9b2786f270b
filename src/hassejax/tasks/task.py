"""Training tasks `T = (W, Y, M)` and their Hasse diagrams (spec hasse.md §2).

A task has `n` slots. Slot `s` holds an input token ``inputs[s]`` (a :class:`Token`: a
hashable symbol and a position id), an optional target ``labels[s]`` (a :class:`Token`
or ``None``), and a tag ``streams[s]`` (used to order the slots of a merged task, and to
keep copies of one token in different streams apart when tasks are merged). The task's own
mask ``mask[p, q]`` (row = query slot `p`, column = key slot `q`, True = may attend) mirrors
the computation the task stands for.

Source: C. Li, H. Guo, "Hasse Diagrams for Attention", arXiv:2606.09951 (2026), §3
(paper); spec hasse.md §2 (the precise definitions used here).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, no_type_check

import jax
import numpy as np
from jaxtyping import Array, Bool

from .._checks import as_mask, check_memory
from ..errors import MaskError, TaskError
from ..order import HasseDiagram
from ..order._poset_numpy import closure_numpy, diagram_numpy, poset_numpy
from ..order._prepare import _check_num_layers

__all__ = ["Token", "Task", "TaskStructure"]


class Token(NamedTuple):
    """An input or target token: a hashable `symbol` at position id `position`.

    Position ids are what the positional encoding sees; they are separate from slot
    indices (spec hasse.md §0). Examples: ``Token("w", 5)`` (the sequence token `w_5`),
    ``Token("mask", 7)`` (a mask token that predicts position 7), ``Token("agg", 3)``
    (an aggregate of the neighbours of position 3).

    **Example:**

    ```python
    >>> from hassejax.tasks import Token
    >>> w5 = Token("w", 5)
    >>> str(w5), w5.symbol, w5.position, str(Token("mask", 7))
    ('w5', 'w', 5, 'mask7')

    ```
    """

    symbol: Hashable
    position: int

    def __str__(self) -> str:
        return f"{self.symbol}{self.position}"


def check_slots_memory(n: int, matrices: int | float, what: str, name: str, hint: str | None = None) -> None:
    """Raise :class:`~hassejax.errors.MemoryBudgetError` naming `name` before `what` allocates
    about `matrices` bool ``(n, n)`` arrays over `n` slots."""
    check_memory(
        int(matrices * n * n),
        f"{what} ({n} slots: about {matrices:g} bool ({n}, {n}) arrays)",
        name,
        hint=hint if hint is not None else "Use fewer slots (a smaller n).",
    )


def _mask_copies_memory(shape: tuple[int, ...]) -> None:
    """:class:`Task`'s memory check: a device copy (``as_mask``) and the task's own host copy."""
    check_slots_memory(shape[-1], 2, "the copies of a task's mask", "mask")


def check_flat_sources(sources: Mapping[Token, tuple[Token, ...]], where: str = "`sources`") -> None:
    """Raise :class:`~hassejax.errors.TaskError` (naming `where`) if an aggregate is built from a token that `sources`
    itself declares (another aggregate, or a mask token mapped to ``()``).

    Sources are sequence tokens (spec hasse.md §2: ``("agg", k)`` is built from ``w_{k-1}`` and ``w_{k+1}``): the
    audit expands an input one level and the layout averages the sources' embeddings, so a nested source was read
    as a sequence token (a review: a slot reaching ``w2`` through ``agg1`` inside ``agg2`` was no leak)."""
    for key, value in sources.items():
        for tok in value:
            if tok in sources:
                inner = sources[tok]
                built = f"built from {', '.join(map(str, inner))}" if inner else "mapped to () (no sequence token)"
                raise TaskError(
                    f"{where}: an aggregate's sources must be sequence tokens; {key} is built from {tok}, which "
                    f"`sources` declares too ({built}). Nested sources are not expanded: give {key} the sequence "
                    "tokens themselves (a token listed twice weighs twice in the layout's average)."
                )


def token_sort_key(token: Token) -> tuple[str, int, str]:
    """A total order on tokens whose symbols may be of mixed types."""
    return (type(token.symbol).__name__, token.position, repr(token.symbol))


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def _as_token(value: Any, name: str) -> Token:
    """`value` as a :class:`Token` with an int position, checked like a plain pair: a `Token` is a
    NamedTuple, so ``Token("w", "2")`` builds without complaint (the audit then compared ``w2`` with
    ``Token("w", 2)`` and missed a leak)."""
    if (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[1], (int, np.integer))
        and not isinstance(value[1], (bool, np.bool_))
    ):
        try:
            hash(value[0])
        except TypeError:
            pass
        else:
            return Token(value[0], int(value[1]))
    raise TaskError(
        f"`{name}` must be a Token(symbol, position) or a (hashable symbol, int position) pair; got {value!r}."
    )


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def _source_tokens(value: Any, name: str) -> tuple[Token, ...]:
    """The tokens an aggregated input is built from: any iterable of tokens but a string (a set is sorted)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TaskError(f"`{name}` must be a tuple of the Tokens it is built from (`()` for none); got {value!r}.")
    if isinstance(value, tuple) and len(value) == 2 and not isinstance(value[0], tuple):  # one token, not a tuple
        try:
            one = _as_token(value, name)
        except TaskError:
            pass
        else:
            raise TaskError(
                f"`{name}` must be a tuple of the Tokens it is built from; got the single token {one}: write ({one!r},)."
            )
    tokens = [_as_token(v, name) for v in value]
    return tuple(sorted(tokens, key=token_sort_key)) if isinstance(value, (set, frozenset)) else tuple(tokens)


class TaskStructure(NamedTuple):
    """The quotient structure of a task's closure, on the host (small matrices).

    - `node`: int array `(n,)`, the class (Hasse node) of each slot, ids in a topological order.
    - `cover`: Bool `(C, C)`, `cover[a, b]` True iff node `b` is covered by node `a`.
    - `members`: per node, the sorted slot indices in it.

    Source: spec hasse.md §2 (the Hasse diagram of a task: classes of its closure, covering pairs) and §1.5–1.7; Li &
    Guo, arXiv:2606.09951 (paper).

    **Example:** slots 0 and 1 attend to each other (one class), slot 2 sees both (the node above):

    ```python
    >>> import numpy as np
    >>> from hassejax.tasks import Task, Token
    >>> task = Task([Token("w", 1), Token("w", 2), Token("w", 3)], np.array([[1, 1, 0], [1, 1, 0], [1, 1, 1]], bool))
    >>> st = task.structure()
    >>> st.node.tolist(), st.cover.astype(int).tolist(), st.members
    ([0, 0, 1], [[0, 0], [1, 0]], ((0, 1), (2,)))

    ```
    """

    node: np.ndarray
    cover: np.ndarray
    members: tuple[tuple[int, ...], ...]


@dataclasses.dataclass(frozen=True, eq=False)
class Task:
    """A training task `(W, Y, M)` (spec hasse.md §2; Li & Guo, arXiv:2606.09951, Def. 3.1).

    **Arguments:**

    - `inputs`: sequence of `n` :class:`Token` (or `(symbol, position)` pairs), the input of each slot.
    - `mask`: Boolean array of shape `(n, n)`; `mask[p, q]` True iff slot `p` (query) may
      attend to slot `q` (key). The residual diagonal is implied (spec §1.1).
    - `labels`: the target of each slot: a sequence of `n` entries (Token or None), or a
      mapping `{slot: Token}` (int slots, not bools); default: no labels.
    - `streams`: a sequence of `n` stream tags, one per slot (e.g. ``"content"``, ``"query"``), default all
      ``"content"``; used to order the slots of a merged task, and a part of every input in node
      equivalence (copies of one token in different streams are not merged; spec hasse.md §2).
    - `sources`: mapping from an aggregated input token to the tuple of sequence tokens it is
      built from (e.g. ``Token("agg", 3) -> (Token("w", 2), Token("w", 4))``), used by the
      leakage audit and by :func:`~hassejax.nn.layout_from_task` (which averages their embeddings: a
      token listed twice weighs twice); tokens not in the mapping are their own source (mask tokens carry
      no sequence token: map them to ``()``). Sources are not nested: a token the mapping declares (an
      aggregate, a mask token) cannot be the source of another.
    - `name`: a label for printing.

    **Raises:** :class:`~hassejax.errors.TaskError` if `inputs`, `labels` or `streams` is not a sequence
    (a string is refused: ``streams="content"`` is not split into characters), lengths disagree, a token (a
    :class:`Token` too) is not a (hashable symbol, int position) pair (a bool position is refused), a label points
    to a slot that does not exist (a bool slot is refused), a stream tag is not a string, or a `sources` value is not an
    iterable of tokens (a tuple; a set is sorted) or is a single token, or names as a source a token that `sources` itself
    declares (nested sources); :class:`~hassejax.errors.MaskError` if the mask is not a square Boolean
    `(n, n)` array, or is traced (under ``jax.jit``: a task lives on the host); :class:`~hassejax.errors.MemoryBudgetError` (naming `mask`) if the task's
    copies of the mask would not fit, estimated from its shape before anything is copied.

    **Example:** a chain `w1 ← w2 ← w3` (each slot sees the previous one) whose last slot predicts
    `w4`: not dense, its closure is the causal mask.

    ```python
    >>> import numpy as np
    >>> from hassejax.tasks import Task, Token
    >>> w = [Token("w", k) for k in (1, 2, 3, 4)]
    >>> task = Task(w[:3], np.eye(3, k=-1, dtype=bool), labels={2: w[3]})
    >>> task, task.is_dense(), [str(y) for y in task.labels]
    (Task('', n=3, labelled=1), False, ['None', 'None', 'w4'])
    >>> task.dense().mask.astype(int).tolist()
    [[1, 0, 0], [1, 1, 0], [1, 1, 1]]

    ```
    """

    inputs: tuple[Token, ...]
    mask: np.ndarray
    labels: tuple[Token | None, ...]
    streams: tuple[str, ...]
    sources: Mapping[Token, tuple[Token, ...]]
    name: str

    def __init__(
        self,
        inputs: Sequence[Any],
        mask: Bool[Any, "n n"] | Sequence[Sequence[Any]],  # nested lists of bools taken, as the order functions do
        labels: Sequence[Any] | Mapping[int, Any] | None = None,
        streams: Sequence[str] | None = None,
        sources: Mapping[Any, Iterable[Any]] | None = None,
        name: str = "",
    ):
        if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Iterable):
            raise TaskError(f"`inputs` must be a sequence of Tokens (one per slot); got {inputs!r:.200}.")
        toks = tuple(_as_token(x, f"inputs[{i}]") for i, x in enumerate(inputs))
        n = len(toks)
        if n == 0:
            raise TaskError("`inputs` must hold at least one slot; got an empty sequence.")
        # concrete: the task's mask lives on the host (NumPy), so a traced one (under jax.jit) is refused by name
        m = np.array(as_mask(mask, "mask", batched=False, memory=_mask_copies_memory, concrete="Task"))
        if m.shape != (n, n):
            raise MaskError(f"`mask` must have shape ({n}, {n}) to match the {n} inputs; got shape {m.shape}.")
        if labels is None:
            labs: list[Token | None] = [None] * n
        elif isinstance(labels, Mapping):
            labs = [None] * n
            for slot, target in labels.items():
                if isinstance(slot, (bool, np.bool_)):  # a bool is an int: True took slot 1
                    raise TaskError(
                        f"`labels` must map slot indices (ints, not bools) to targets; got the key {slot!r}."
                    )
                if not isinstance(slot, (int, np.integer)) or not 0 <= int(slot) < n:
                    raise TaskError(f"`labels` points to slot {slot!r}, which does not exist: slots are 0 .. {n - 1}.")
                labs[int(slot)] = _as_token(target, f"labels[{slot}]")
        elif isinstance(labels, (str, bytes)) or not isinstance(labels, Iterable):
            raise TaskError(
                f"`labels` must be a sequence of {n} targets (Token or None, one per slot) or a mapping "
                f"{{slot: Token}}; got {labels!r:.200}."
            )
        else:
            labels = list(labels)
            if len(labels) != n:
                raise TaskError(f"`labels` must have one entry per slot ({n}); got {len(labels)}.")
            labs = [None if y is None else _as_token(y, f"labels[{i}]") for i, y in enumerate(labels)]
        if streams is None:
            strm = ("content",) * n
        else:
            if isinstance(streams, (str, bytes)) or not isinstance(streams, Iterable):  # a str split into characters
                example = ["content"] * min(n, 2)
                raise TaskError(
                    f"`streams` must be a sequence of {n} stream tags (strings), one per slot (e.g. {example!r}"
                    f"{' ...' if n > 2 else ''}); got {streams!r:.200}."
                )
            strm = tuple(streams)
            if len(strm) != n or not all(isinstance(s, str) for s in strm):
                raise TaskError(f"`streams` must be {n} strings, one per slot; got {streams!r}.")
        srcs = {}
        for key, value in (sources or {}).items():
            srcs[_as_token(key, "sources key")] = _source_tokens(value, f"sources[{key!r}]")
        check_flat_sources(srcs)
        m.setflags(write=False)
        object.__setattr__(self, "inputs", toks)
        object.__setattr__(self, "mask", m)
        object.__setattr__(self, "labels", tuple(labs))
        object.__setattr__(self, "streams", strm)
        object.__setattr__(self, "sources", srcs)
        object.__setattr__(self, "name", name)

    @property
    def n(self) -> int:
        """Number of slots."""
        return len(self.inputs)

    def reachability(self, num_layers: int | None = None) -> Bool[Array, "n n"]:
        """`R^(L)` of the task's mask, or the limit `R` (see :func:`hassejax.order.reachability`).

        Computed on the host (the bit-packed kernels, exact), then put on the default device
        (``jax.device_put``: unlike ``jnp.asarray`` it compiles no program for the task's size):
        the same array as ``reachability(task.mask, num_layers)``.

        **Raises:** :class:`~hassejax.errors.ParameterError` for a `num_layers` that is not
        ``None`` or an int ``>= 1``; :class:`~hassejax.errors.MemoryBudgetError` (naming `mask`)
        if the closure would not fit, estimated before allocating.
        """
        return jax.device_put(self._closure(num_layers))

    def _closure(self, num_layers: int | None = None) -> np.ndarray:
        """:meth:`reachability` as a NumPy array (no device copy)."""
        return closure_numpy(self.mask, _check_num_layers(num_layers), "mask")

    def is_dense(self) -> bool:
        """True iff `mask | I` equals its closure: one layer already realises the limit flow (spec §2).

        **Raises:** :class:`~hassejax.errors.MemoryBudgetError` (naming `mask`) if the closure
        and the comparison would not fit, estimated before allocating.
        """
        check_slots_memory(self.n, 2, "comparing a task's mask with its closure", "mask")
        a = self.mask | np.eye(self.n, dtype=bool)
        return bool(np.array_equal(a, self._closure()))

    def dense(self) -> Task:
        """The same task with its mask replaced by the closure `R` (spec hasse.md §2).

        **Raises:** :class:`~hassejax.errors.MemoryBudgetError` (naming `mask`) if the closure
        or the new task's copies of it would not fit, estimated before allocating.
        """
        closed = self._closure()
        return Task(self.inputs, closed, self.labels, self.streams, self.sources, self.name)

    def structure(self) -> TaskStructure:
        """Classes of the closure (in topological order) and the covering relation between them.

        **Raises:** :class:`~hassejax.errors.MemoryBudgetError` (naming `mask`) if the closure
        and the classes would not fit, estimated before allocating.
        """
        # The classes and the quotient take about four more (n, n) arrays beside the closure.
        check_slots_memory(self.n, 4, "the classes of a task's closure", "mask")
        parts = poset_numpy(self.mask, "mask")  # on the host: the results of classes and cover_matrix
        node, c = parts.labels, parts.num_classes
        members = tuple(tuple(int(s) for s in np.flatnonzero(node == a)) for a in range(c))
        return TaskStructure(node, parts.cover, members)

    def diagram(self) -> HasseDiagram:
        """The Hasse diagram of the task (spec hasse.md §2): classes of its closure and covering pairs.

        Each node of the returned diagram's graph also carries ``inputs`` (the sorted multiset of
        its slots' input tokens, as strings) and ``targets`` (the labels of its slots).

        **Raises:** :class:`~hassejax.errors.MemoryBudgetError` (naming `mask`) if the closure
        and the classes would not fit, estimated before allocating.
        """
        check_slots_memory(self.n, 4, "the Hasse diagram of a task's closure", "mask")
        d = diagram_numpy(self.mask, "mask")  # on the host: equal to HasseDiagram.from_mask(self.mask)
        g = d.graph
        for v in g.nodes:
            mem = g.nodes[v]["members"]
            g.nodes[v]["inputs"] = tuple(sorted(str(self.inputs[s]) for s in mem))
            g.nodes[v]["targets"] = tuple(str(self.labels[s]) for s in mem if self.labels[s] is not None)
        return d

    def slot_names(self, streams: bool = False) -> tuple[str, ...]:
        """Readable slot names: each slot's input token, such as ``"w3"``, ``"mask5"``.

        Two slots may hold the same token (Butterfly's forward and backward streams both hold
        `w2`); with ``streams=True`` each name is prefixed by its slot's stream tag
        (``"F:w2"``, ``"B:w2"``), which tells them apart.

        **Example:**

        ```python
        >>> from hassejax.tasks import butterfly
        >>> butterfly(3).merge().slot_names()
        ('w1', 'w2', 'w2', 'w3', 'agg1', 'agg2', 'agg3')
        >>> butterfly(3).merge().slot_names(streams=True)
        ('F:w1', 'F:w2', 'B:w2', 'B:w3', 'C:agg1', 'C:agg2', 'C:agg3')

        ```
        """
        if streams:
            return tuple(f"{s}:{t}" for s, t in zip(self.streams, self.inputs))
        return tuple(str(t) for t in self.inputs)

    def __repr__(self) -> str:
        lab = sum(y is not None for y in self.labels)
        return f"Task({self.name!r}, n={self.n}, labelled={lab})"


def check_task(task) -> None:
    """Raise :class:`~hassejax.errors.TaskError` unless `task` is a :class:`Task` (or a subclass)."""
    if not isinstance(task, Task):
        hint = " (a task family: merge it first, family.merge())" if hasattr(task, "merge") else ""
        raise TaskError(f"`task` must be a hassejax.tasks.Task or MergedTask{hint}; got {type(task).__name__}.")
