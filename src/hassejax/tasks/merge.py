"""Node equivalence and the minimal merged task of a task family (spec hasse.md §2).

Source: C. Li, H. Guo, "Hasse Diagrams for Attention", arXiv:2606.09951 (2026), Def. 3.5
(node equivalence), Thm 3.7 (minimal common supergraph), Def. 3.8 (sparse variants)
(paper); spec hasse.md §2 (the memoised signature and slot order, derived).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ..errors import LabelConflictError, TaskError
from ..order._poset_numpy import depth_numpy
from .task import Task, Token, check_slots_memory, check_task, token_sort_key

#: Peak bool ``(N, N)`` arrays of the merge over its `N` slots, measured with tracemalloc
#: (about 10: the node order, the fancy-indexed mask and the copies of Task and MergedTask).
_MERGE_MATRICES = 10

__all__ = ["node_signatures", "MergedTask", "merge_tasks", "Sparsified", "sparsify"]


def node_signatures(tasks: Sequence[Task]) -> tuple[list[np.ndarray], dict[tuple, int]]:
    """Interned structural signatures of every Hasse node of every task (spec hasse.md §2).

    `sig(c) = (sorted inputs of c, sorted tuple of the maximal sig-ids among the nodes c covers)`,
    computed in topological order and interned to integer ids, so two nodes (of the same or of
    different tasks) are equivalent (Li & Guo, Def. 3.5) iff their ids are equal: iff they hold
    the same inputs and have the same merged nodes strictly below them. The inputs form a multiset
    (a class holding a token twice keeps both); the covered ids are taken as a *set* of its
    maximal elements in the merged order, where spec hasse.md §2 writes a multiset of all of them.
    The merge identifies equivalent nodes within one task too, and after that two equal covered
    nodes are one, and a covered node may lie below another covered one (both copies of `b1`
    identified, one of them below `a2`): with the multiset, or the set of all covered ids, a node
    covering `{b1, a2}` and one covering `{a2}` stayed apart though both have `{b1, a2}` below
    them, so the merge was not minimal and could miss a label conflict (reviews).

    **Arguments:**

    - `tasks`: sequence of :class:`~hassejax.tasks.Task`.

    **Returns:** `(ids, table)`: `ids[t]` is an int array of shape `(n_t,)` giving the signature
    id of the node of every slot of task `t`; `table` maps each signature to its id (ids
    are assigned in a topological order of the merged diagram: a node's covered signatures
    have smaller ids).
    """
    slot_ids, _, table = _signatures(tasks)
    return slot_ids, table


def _signatures(tasks: Sequence[Task]) -> tuple[list[np.ndarray], list[np.ndarray], dict[tuple, int]]:
    """:func:`node_signatures` plus, per task, the task-local Hasse node of every slot."""
    table: dict[tuple, int] = {}
    ancestors: list[frozenset[int]] = []  # per id, the ids strictly below it in the merged order
    slot_ids = []
    local_nodes = []
    for task in tasks:
        st = task.structure()
        node_sig = np.empty(len(st.members), dtype=np.int64)
        for a, mem in enumerate(st.members):  # ids are topological: covered nodes come first
            inputs = tuple(sorted((task.inputs[s] for s in mem), key=token_sort_key))
            covered = {int(node_sig[b]) for b in np.flatnonzero(st.cover[a])}
            # the maximal covered ids: one below another covered id after the merge adds nothing
            below = tuple(sorted(c for c in covered if not any(c in ancestors[o] for o in covered)))
            key = (inputs, below)
            if key not in table:
                table[key] = len(table)
                ancestors.append(frozenset().union(*(ancestors[b] | {b} for b in below)))
            node_sig[a] = table[key]
        slot_ids.append(node_sig[st.node])
        local_nodes.append(np.asarray(st.node))
    return slot_ids, local_nodes, table


class MergedTask(Task):
    """The minimal merged task of a family (spec hasse.md §2; Li & Guo, Thm 3.7).

    A :class:`~hassejax.tasks.Task` (its `mask` is the dense merged mask
    `M*[p, q] = node(q) ≤ node(p)`) together with:

    - `node`: int array `(N,)`, the merged Hasse node of every slot;
    - `slot_map`: per source task, an int array `(n_t,)` mapping each of its slots to a
      merged slot;
    - `tasks`: the source tasks.
    """

    node: np.ndarray
    slot_map: tuple[np.ndarray, ...]
    tasks: tuple[Task, ...]

    def __init__(self, task: Task, node, slot_map, tasks):
        Task.__init__(self, task.inputs, task.mask, task.labels, task.streams, task.sources, task.name)
        object.__setattr__(self, "node", np.asarray(node))
        object.__setattr__(self, "slot_map", tuple(np.asarray(m) for m in slot_map))
        object.__setattr__(self, "tasks", tuple(tasks))

    def __repr__(self) -> str:
        lab = sum(y is not None for y in self.labels)
        return f"MergedTask({self.name!r}, slots={self.n}, nodes={int(self.node.max()) + 1}, labelled={lab}, tasks={len(self.tasks)})"


def _agreed_sources(tasks: Sequence[Task]) -> dict[Token, tuple[Token, ...]]:
    """The sources of the family's aggregated tokens (as the first task declaring each gives them).

    **Raises:** :class:`~hassejax.errors.TaskError` unless every task that holds or declares a token gives it the
    same sources (as a set), a task holding it without `sources` (its own source) included: the merge keeps one
    set per token, so the leak audit of the merge would depend on which task it came from (reviews)."""
    first: dict[Token, tuple[int, frozenset]] = {}
    agreed: dict[Token, tuple[Token, ...]] = {}
    for t_idx, task in enumerate(tasks):
        for tok, src in task.sources.items():
            if tok not in first:
                first[tok], agreed[tok] = (t_idx, frozenset(src)), src
    for t_idx, task in enumerate(tasks):
        for tok in dict.fromkeys([*task.inputs, *task.sources]):
            if tok not in first:
                continue
            t0, src0 = first[tok]
            src = frozenset(task.sources[tok]) if tok in task.sources else None
            if src != src0:
                given = "no sources (its own source)" if src is None else f"the sources {sorted(map(str, src))}"
                raise TaskError(
                    f"`tasks`: task {t0} ({tasks[t0].name!r}) builds {tok} from {sorted(map(str, src0))} and task "
                    f"{t_idx} ({task.name!r}) gives it {given}; one token has one set of sources in a family (the "
                    "leak audit of the merge would depend on the task it came from)."
                )
    return agreed


def merge_tasks(tasks: Sequence[Task], stream_order: Sequence[str] | None = None, name: str = "merged") -> MergedTask:
    """Merge a task family into its minimal common supergraph (spec hasse.md §2; Li & Guo, Thm 3.7).

    Takes the disjoint union of the tasks' Hasse diagrams, identifies equivalent nodes (equal
    :func:`node_signatures`), keeps the union of their covering edges and expands every merged
    node into one slot per input. Every node keeps its ancestor set exactly (no leak, no
    extra context), and no common supergraph has fewer nodes. Equivalent nodes of one and
    the same task (equal inputs over equal structure, e.g. a repeated independent token)
    are identified too: their slots map to the same merged slots.

    **Arguments:**

    - `tasks`: the family, a non-empty sequence of :class:`~hassejax.tasks.Task`.
    - `stream_order`: the order of stream tags for the slot order; default: order of first
      appearance. Merged slots are sorted by (stream rank, position id, symbol).
    - `name`: a name for the merged task.

    **Returns:** a :class:`MergedTask` whose mask is the dense merged mask.

    **Raises:** :class:`~hassejax.errors.TaskError` for an empty family, a stream tag not in
    `stream_order` or a token whose `sources` differ between two tasks; :class:`~hassejax.errors.LabelConflictError` if two source slots that merge
    into one slot carry different targets; :class:`~hassejax.errors.MemoryBudgetError` (naming
    `tasks`) if the merged task's dense arrays would not fit, estimated from the number of
    merged slots before they are allocated (or naming `mask` when one task's closure does not).
    """
    tasks = tuple(tasks)
    if not tasks or not all(isinstance(t, Task) for t in tasks):
        raise TaskError(f"`tasks` must be a non-empty sequence of Task; got {tasks!r:.200}.")
    if stream_order is None:
        stream_order = tuple(dict.fromkeys(s for t in tasks for s in t.streams))
    rank = {s: i for i, s in enumerate(stream_order)}
    for t_idx, task in enumerate(tasks):
        for s in task.streams:
            if s not in rank:
                raise TaskError(
                    f"`stream_order` {tuple(stream_order)} lacks the stream tag {s!r} of task {t_idx} ({task.name!r})."
                )

    sources = _agreed_sources(tasks)  # before any work: a family whose sources disagree is refused
    slot_ids, local_nodes, table = _signatures(tasks)
    num_nodes = len(table)
    sigs = sorted(table, key=table.get)
    check_slots_memory(
        sum(len(inputs) for inputs, _ in sigs), _MERGE_MATRICES, "the merged task of the family", "tasks"
    )

    # Merged order: ancestors through the covered signatures (ids are topological).
    order = np.eye(num_nodes, dtype=bool)
    for sig_id, (_, below) in enumerate(sigs):
        if below:
            order[sig_id] |= order[list(below)].any(axis=0)

    # Slots: one per input of every merged node (a multiset). Map source slots onto them,
    # the k-th occurrence of an input in a source node to the k-th slot holding it. Two
    # equivalent nodes of one task are identified too, so occurrences are counted per
    # source node, not per signature.
    slot_of: dict[tuple[int, Token, int], int] = {}
    merged_inputs: list[Token] = []
    merged_node: list[int] = []
    for sig_id, (inputs, _) in enumerate(sigs):
        seen: dict[Token, int] = {}
        for tok in inputs:
            k = seen.get(tok, 0)
            seen[tok] = k + 1
            slot_of[(sig_id, tok, k)] = len(merged_inputs)
            merged_inputs.append(tok)
            merged_node.append(sig_id)

    num_slots = len(merged_inputs)
    streams: list[str | None] = [None] * num_slots
    labels: list[Token | None] = [None] * num_slots
    label_from: list[tuple[int, int] | None] = [None] * num_slots
    slot_map = []
    for t_idx, (task, ids, local) in enumerate(zip(tasks, slot_ids, local_nodes)):
        occurrence: dict[tuple[int, Token], int] = {}
        smap = np.empty(task.n, dtype=np.int64)
        for s in range(task.n):
            key = (int(local[s]), task.inputs[s])
            k = occurrence.get(key, 0)
            occurrence[key] = k + 1
            m = slot_of[(int(ids[s]), task.inputs[s], k)]
            smap[s] = m
            if streams[m] is None or rank[task.streams[s]] < rank[streams[m]]:
                streams[m] = task.streams[s]
            y = task.labels[s]
            if y is not None:
                if labels[m] is not None and labels[m] != y:
                    t0, s0 = label_from[m]
                    raise LabelConflictError(
                        f"`tasks`: slot {s0} of task {t0} ({tasks[t0].name!r}) and slot {s} of task {t_idx} "
                        f"({task.name!r}) are equivalent (input {task.inputs[s]}, same upstream structure) but "
                        f"have different targets {labels[m]} and {y}; no merged task can satisfy both."
                    )
                labels[m], label_from[m] = y, (t_idx, s)
        slot_map.append(smap)

    # Presentation order: (stream rank, position id, symbol, node).
    perm = sorted(
        range(num_slots),
        key=lambda m: (rank[streams[m]], merged_inputs[m].position, token_sort_key(merged_inputs[m]), merged_node[m]),
    )
    inv = np.empty(num_slots, dtype=np.int64)
    inv[perm] = np.arange(num_slots)
    node = np.asarray([merged_node[m] for m in perm])
    mask = order[node[:, None], node[None, :]]
    merged = Task(
        [merged_inputs[m] for m in perm],
        mask,
        [labels[m] for m in perm],
        [streams[m] for m in perm],
        sources,
        name,
    )
    return MergedTask(merged, node, [inv[s] for s in slot_map], tasks)


@dataclasses.dataclass(frozen=True)
class Sparsified:
    """The sparsest mask with the same closure as a task's (spec hasse.md §2; Li & Guo, Def. 3.8).

    - `mask`: Bool `(n, n)` with the diagonal set, a cycle through every class of size > 1
      and one edge per covering pair (from the smallest slot of the upper class to the
      smallest slot of the lower class).
    - `depth`: its convergence depth `L*`: with fewer layers it sees a subset of the dense flow.
    - `nonzeros`: number of True entries, diagonal included.
    """

    mask: np.ndarray
    depth: int
    nonzeros: int


def sparsify(task: Task) -> Sparsified:
    """The sparsest mask with the same closure as `task.mask` (spec hasse.md §2, Def. 3.8).

    A mask has the same closure iff it has the same classes and Hasse diagram. The sparsest
    keeps the diagonal, a directed cycle through each class of `k > 1` slots (`k` edges: no
    fewer make a strongly connected class) and one edge per covering pair.

    **Arguments:**

    - `task`: a :class:`~hassejax.tasks.Task` (or :class:`MergedTask`).

    **Returns:** :class:`Sparsified` with the mask, its convergence depth and nonzero count.

    **Raises:** :class:`~hassejax.errors.TaskError` if `task` is not a Task (e.g. an unmerged family);
    :class:`~hassejax.errors.MemoryBudgetError` (naming `mask`) if the closure, the sparse mask or
    its convergence depth would not fit, estimated before each is allocated.
    """
    check_task(task)
    st = task.structure()
    n = task.n
    check_slots_memory(n, 1, "the sparsest mask", "mask")
    sparse = np.eye(n, dtype=bool)
    for mem in st.members:
        if len(mem) > 1:
            for a, b in zip(mem, mem[1:] + mem[:1]):
                sparse[a, b] = True
    upper, lower = np.nonzero(st.cover)
    for a, b in zip(upper, lower):
        sparse[st.members[a][0], st.members[b][0]] = True
    # on the host: int(convergence_depth(sparse)), with no JAX program compiled for the size n
    return Sparsified(sparse, depth_numpy(sparse, "mask"), int(sparse.sum()))
