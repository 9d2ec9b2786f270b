"""Leakage audit and supervision density of tasks and merged tasks (spec hasse.md §2).

Source: C. Li, H. Guo, "Hasse Diagrams for Attention", arXiv:2606.09951 (2026), §3–4
(paper: no leak, no extra context); spec hasse.md §2 "Leakage audit" and "Supervision
density" (the precise rules used here).
"""

from __future__ import annotations

import dataclasses
from typing import no_type_check

import numpy as np

from .._checks import check_memory
from .merge import MergedTask
from .task import Task, Token, check_task

__all__ = ["SlotAudit", "AuditReport", "reached_tokens", "audit"]

#: Bytes of one (slot, reached slot) pair in the reached-token sets (a frozenset entry; about
#: 60 measured with tracemalloc).
_PAIR_BYTES = 64


@dataclasses.dataclass(frozen=True)
class SlotAudit:
    """What one labelled slot reaches.

    - `slot`, `target`: the slot index and its target token.
    - `reached`: the sequence tokens the slot reaches (aggregates expanded to their sources).
    - `leak`: True iff `target` is in `reached` (the slot can see its own answer).
    - `matches_source`: for a merged task, True iff `reached` equals what the slot reached in
      every source task slot merged into it (no leak and no extra or lost context); None for
      a plain task.

    Source: spec hasse.md §2 "Leakage audit" (a labelled slot reaches its sources' tokens, never its own target, and
    in a merged task what it reached in its source task); Li & Guo, arXiv:2606.09951 (paper).

    **Example:** Butterfly's centre slot `agg2` reaches `w1` and `w3` (through `F: w1` and
    `B: w3`), never its target `w2`:

    ```python
    >>> from hassejax.tasks import audit, butterfly
    >>> slot = audit(butterfly(3).merge()).slots[1]
    >>> slot.slot, str(slot.target), sorted(map(str, slot.reached)), slot.leak, slot.matches_source
    (5, 'w2', ['w1', 'w3'], False, True)

    ```
    """

    slot: int
    target: Token
    reached: frozenset[Token]
    leak: bool
    matches_source: bool | None


@dataclasses.dataclass(frozen=True)
class AuditReport:
    """Result of :func:`audit`.

    - `slots`: one :class:`SlotAudit` per labelled slot.
    - `num_layers`: the depth audited (None = the limit, which bounds every depth).
    - `token_density`: fraction of sequence tokens that are a target somewhere.
    - `slot_density`: labelled slots over all slots.

    Source: spec hasse.md §2 "Leakage audit" and "Supervision density" (both fractions reported); Li & Guo,
    arXiv:2606.09951 (paper).

    **Example:** Butterfly on `n = 3`: every token is a target, 3 of the 7 slots are labelled.

    ```python
    >>> from hassejax.tasks import audit, butterfly
    >>> report = audit(butterfly(3).merge())
    >>> report.ok, report.leaks, report.token_density, round(report.slot_density, 4)
    (True, (), 1.0, 0.4286)
    >>> report.summary().split("; ")  # doctest: +NORMALIZE_WHITESPACE
    ['3 labelled slots, 0 leak(s), 0 differ from their source (limit)',
     'supervision: 100.0% of sequence tokens are targets, 42.9% of slots are labelled']

    ```
    """

    slots: tuple[SlotAudit, ...]
    num_layers: int | None
    token_density: float
    slot_density: float

    @property
    def leaks(self) -> tuple[int, ...]:
        """Slots that reach their own target."""
        return tuple(a.slot for a in self.slots if a.leak)

    @property
    def mismatches(self) -> tuple[int, ...]:
        """Slots of a merged task whose reach differs from their source tasks'."""
        return tuple(a.slot for a in self.slots if a.matches_source is False)

    @property
    def ok(self) -> bool:
        """No leak and (for a merged task) no mismatch."""
        return not self.leaks and not self.mismatches

    def summary(self) -> str:
        """One line: labelled slots, leaks, mismatches and both densities."""
        extra = (
            f", {len(self.mismatches)} differ from their source"
            if any(a.matches_source is not None for a in self.slots)
            else ""
        )
        depth = "limit" if self.num_layers is None else f"L={self.num_layers}"
        return (
            f"{len(self.slots)} labelled slots, {len(self.leaks)} leak(s){extra} ({depth}); "
            f"supervision: {self.token_density:.1%} of sequence tokens are targets, "
            f"{self.slot_density:.1%} of slots are labelled"
        )


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def _expand(task: Task, token: Token) -> tuple[Token, ...]:
    return task.sources.get(token, (token,))


def reached_tokens(task: Task, num_layers: int | None = None) -> list[frozenset[Token]]:
    """Per slot, the sequence tokens it reaches after `num_layers` layers (None = the limit).

    Inputs are expanded through ``task.sources`` (an aggregate reaches its sources; a mask
    token, mapped to ``()``, carries none).

    **Raises:** :class:`~hassejax.errors.MemoryBudgetError` if the closure (naming `mask`) or
    the token sets (naming `task`, estimated from the number of dependent pairs before they
    are built) would not fit; :class:`~hassejax.errors.ParameterError` for a `num_layers` that is not None or an
    int >= 1; :class:`~hassejax.errors.TaskError` for a `task` that is not a Task (a family: with the hint).

    Source: spec hasse.md §2 "Leakage audit" (aggregated inputs declare their sources, and the audit expands them)
    and §1.2 (``R^(L)``).

    **Example:** the merged Butterfly task of `n = 3`, slots `[F: w1 w2 | B: w2 w3 | C: agg1 agg2 agg3]`;
    an aggregate reaches its sources (`agg1` holds `w2`):

    ```python
    >>> from hassejax.tasks import butterfly, reached_tokens
    >>> [sorted(map(str, r)) for r in reached_tokens(butterfly(3).merge())]
    [['w1'], ['w1', 'w2'], ['w2', 'w3'], ['w3'], ['w2', 'w3'], ['w1', 'w3'], ['w1', 'w2']]

    ```
    """
    check_task(task)  # a docstring review: a non-Task met an AttributeError
    r = task._closure(num_layers)  # the host closure, as task.reachability(num_layers)
    pairs = int(np.count_nonzero(r))
    check_memory(_PAIR_BYTES * pairs, f"the reached-token sets of {task.n} slots ({pairs} dependent pairs)", "task")
    expanded = [_expand(task, t) for t in task.inputs]
    return [frozenset(tok for q in np.flatnonzero(r[p]) for tok in expanded[q]) for p in range(task.n)]


def audit(task: Task, num_layers: int | None = None) -> AuditReport:
    """Leakage audit of a task or merged task (spec hasse.md §2).

    For each labelled slot: the sequence tokens it reaches (under `R^(L)`, or the limit `R`
    when `num_layers` is None — reach only grows with depth, so no leak at the limit means
    no leak at any depth), whether its own target is among them (a leak), and for a
    :class:`~hassejax.tasks.MergedTask` whether it reaches exactly what it reached in its
    source tasks (compared at the limit of both). Also both supervision densities.

    **Arguments:**

    - `task`: a :class:`~hassejax.tasks.Task` or :class:`~hassejax.tasks.MergedTask`.
    - `num_layers`: depth to audit, or None for the limit.

    **Returns:** an :class:`AuditReport`.

    **Raises:** :class:`~hassejax.errors.TaskError` if `task` is not a Task (for example a
    bare mask, or a family not yet merged: call ``family.merge()``);
    :class:`~hassejax.errors.MemoryBudgetError` as :func:`reached_tokens`.

    **Example:** XLNet's two-stream task leaks only when its query stream gets the content mask:

    ```python
    >>> from hassejax.tasks import audit, xlnet_two_stream_task
    >>> audit(xlnet_two_stream_task([2, 0, 1])).ok
    True
    >>> report = audit(xlnet_two_stream_task([2, 0, 1], leaky=True))
    >>> report.leaks, sorted(map(str, report.slots[0].reached))
    ((3, 4, 5), ['w1', 'w3'])

    ```
    """
    check_task(task)
    reached = reached_tokens(task, num_layers)
    source_reach: dict[int, list[frozenset[Token]]] = {}
    if isinstance(task, MergedTask):
        limit = reached if num_layers is None else reached_tokens(task)
        for src, smap in zip(task.tasks, task.slot_map):
            src_reached = reached_tokens(src)
            for s in range(src.n):
                if src.labels[s] is not None:
                    source_reach.setdefault(int(smap[s]), []).append(src_reached[s])
    slots = []
    for p, y in enumerate(task.labels):
        if y is None:
            continue
        match = None
        if isinstance(task, MergedTask):
            match = all(r == limit[p] for r in source_reach.get(p, [limit[p]]))
        slots.append(SlotAudit(p, y, reached[p], y in reached[p], match))
    targets = {y for y in task.labels if y is not None}
    sequence = targets | {tok for t in task.inputs for tok in _expand(task, t)}
    token_density = len(targets) / len(sequence) if sequence else 0.0
    return AuditReport(tuple(slots), num_layers, token_density, len(slots) / task.n)
