"""Node equivalence and the minimal merged task of a task family (spec hasse.md §2).

Source: C. Li, H. Guo, "Hasse Diagrams for Attention", arXiv:2606.09951 (2026), Def. 3.5
(node equivalence), Thm 3.7 (minimal common supergraph), Def. 3.8 (sparse variants)
(paper); spec hasse.md §2 (the memoised signature and slot order, derived).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from ..errors import LabelConflictError, TaskError
from ..order._poset_numpy import depth_numpy
from .task import Task, Token, check_flat_sources, check_slots_memory, check_task, token_sort_key

#: Peak bool ``(N, N)`` arrays of the merge over its `N` slots, measured with tracemalloc
#: (about 10: the node order, the fancy-indexed mask and the copies of Task and MergedTask).
_MERGE_MATRICES = 10

__all__ = ["node_signatures", "MergedTask", "merge_tasks", "Sparsified", "sparsify"]


def node_signatures(tasks: Sequence[Task]) -> tuple[list[np.ndarray], dict[tuple, int]]:
    """Interned structural signatures of every Hasse node of every task (spec hasse.md §2).

    `sig(c) = (sorted inputs of c, sorted tuple of the maximal sig-ids among the nodes c covers)`,
    computed in topological order and interned to integer ids, so two nodes (of the same or of
    different tasks) are equivalent (Li & Guo, Def. 3.5) iff their ids are equal: iff they hold
    the same inputs and have the same merged nodes strictly below them. An input is a
    ``(token, stream)`` pair: spec hasse.md §2 has equivalence ignore the stream tag "except where
    inputs coincide", i.e. two copies of one token in different streams are different inputs (in
    the spec's families, Butterfly's `F_j` and `B_j`, the structure already separates them, so
    the stream changes no merged node there). Otherwise equivalent nodes holding a token in
    different streams (``[A, A]`` and ``[B, A]``) would merge into one node whose slots cannot keep
    every copy's stream. The inputs form a multiset
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
    id of the node of every slot of task `t`; `table` maps each signature
    ``(((token, stream), ...), (covered id, ...))`` to its id (ids
    are assigned in a topological order of the merged diagram: a node's covered signatures
    have smaller ids).

    **Raises:** :class:`~hassejax.errors.MemoryBudgetError` (naming `mask`, from :meth:`Task.structure`) if a task's
    closure and classes would not fit; :class:`~hassejax.errors.TaskError` for `tasks` that is not a non-empty
    sequence of Task (a single Task, a TaskFamily: with the hint), as :func:`merge_tasks`.

    Source: Li & Guo, arXiv:2606.09951, Def. 3.5 (paper: node equivalence); spec hasse.md §2 "Node equivalence" (the
    memoised, interned signature); the stream tags and the set of maximal covered ids are (derived), as above.

    **Example:** node `w1` of the autoregressive tasks `T1 = (w1)` and `T2 = (w1, w2)` has one
    signature: both get id 0.

    ```python
    >>> from hassejax.tasks import autoregressive, node_signatures
    >>> ids, table = node_signatures(autoregressive(3).tasks)
    >>> [i.tolist() for i in ids], len(table)
    ([[0], [0, 1]], 2)

    ```
    """
    slot_ids, _, table = _signatures(_check_tasks_arg(tasks))  # a docstring review: AttributeError, TypeError
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
            inputs = tuple(sorted(((task.inputs[s], task.streams[s]) for s in mem), key=_input_sort_key))
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


def _input_sort_key(item: tuple[Token, str]) -> tuple:
    """A total order on the ``(token, stream)`` inputs of a signature."""
    return (token_sort_key(item[0]), item[1])


def _check_tasks_arg(tasks) -> tuple[Task, ...]:
    """`tasks` as a non-empty tuple of :class:`Task`; else a :class:`~hassejax.errors.TaskError` naming it (a family or
    a single task with a hint: both failed with a bare TypeError)."""
    expected = "`tasks` must be a non-empty sequence of Task"
    if isinstance(tasks, Task):
        raise TaskError(f"{expected}; got a single Task: pass [task].")
    if hasattr(tasks, "merge") and hasattr(tasks, "stream_order"):  # a TaskFamily (families.py imports this module)
        raise TaskError(
            f"{expected}; got a {type(tasks).__name__}: merge it with family.merge() (or pass "
            "merge_tasks(family.tasks, family.stream_order))."
        )
    if isinstance(tasks, (str, bytes)) or not isinstance(tasks, Iterable):
        raise TaskError(f"{expected}; got {type(tasks).__name__}.")
    tasks = tuple(tasks)
    if not tasks or not all(isinstance(t, Task) for t in tasks):
        raise TaskError(f"{expected}; got {tasks!r:.200}.")
    return tasks


def _check_stream_order(stream_order) -> tuple[str, ...]:
    """`stream_order` as a tuple of distinct strings; else a :class:`~hassejax.errors.TaskError` naming it (a tag
    listed twice took its last place; a string was split into characters)."""
    if isinstance(stream_order, (str, bytes)) or not isinstance(stream_order, Iterable):
        raise TaskError(
            "`stream_order` must be a sequence of stream tags (strings), e.g. ('content', 'query'); "
            f"got {stream_order!r:.200}."
        )
    order = tuple(stream_order)
    if not all(isinstance(s, str) for s in order):
        raise TaskError(f"`stream_order` must be a sequence of stream tags (strings); got {order!r:.200}.")
    twice = [s for s, c in Counter(order).items() if c > 1]
    if twice:
        raise TaskError(f"`stream_order` must list each stream tag once; got {twice[0]!r} twice in {order!r:.200}.")
    return order


def _canonical_ranks(sigs: Sequence[tuple]) -> np.ndarray:
    """A numbering of the merged nodes that does not depend on the order of the tasks.

    `sigs[i]` is the signature ``(inputs, below)`` of interned id `i` (:func:`node_signatures`: ids are topological,
    and follow the task order). Nodes are ranked by depth (the longest chain below them), then within one depth by
    ``(inputs, sorted ranks of the nodes they cover)``: a key built from the merged diagram alone, so a topological
    numbering that every task order gives alike. The key tells distinct nodes apart (they differ in their inputs or,
    by induction, in the ranks below them), except where two different symbols of one type and position have equal
    ``repr`` (the slot order cannot tell them apart either); the interned id breaks such a tie.

    **Returns:** int array, the rank of every interned id.
    """
    depth = [0] * len(sigs)
    for i, (_, below) in enumerate(sigs):
        depth[i] = 1 + max(depth[b] for b in below) if below else 0
    ranks = np.empty(len(sigs), dtype=np.int64)
    levels: dict[int, list[int]] = {}
    for i, d in enumerate(depth):
        levels.setdefault(d, []).append(i)
    nxt = 0
    for d in sorted(levels):
        keyed = []
        for i in levels[d]:
            inputs, below = sigs[i]
            keyed.append((tuple(_input_sort_key(x) for x in inputs), tuple(sorted(int(ranks[b]) for b in below)), i))
        for *_, i in sorted(keyed):
            ranks[i] = nxt
            nxt += 1
    return ranks


class MergedTask(Task):
    """The minimal merged task of a family (spec hasse.md §2; Li & Guo, Thm 3.7).

    A :class:`~hassejax.tasks.Task` (its `mask` is the dense merged mask
    `M*[p, q] = node(q) ≤ node(p)`) together with:

    - `node`: int array `(N,)`, the merged Hasse node of every slot, numbered in a topological
      order computed from the merged diagram alone (by depth, inputs and the nodes below; the same
      for every order of the tasks, unlike the ids of :func:`node_signatures`);
    - `slot_map`: per source task, an int array `(n_t,)` mapping each of its slots to a
      merged slot;
    - `tasks`: the source tasks.

    **Example:** the three autoregressive tasks of `n = 4` share their nodes: `T_k`'s slots map to
    the first `k` merged slots.

    ```python
    >>> from hassejax.tasks import autoregressive
    >>> merged = autoregressive(4).merge()
    >>> merged
    MergedTask('autoregressive', slots=3, nodes=3, labelled=3, tasks=3)
    >>> merged.node.tolist(), [m.tolist() for m in merged.slot_map]
    ([0, 1, 2], [[0], [0, 1], [0, 1, 2]])

    ```
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
    same sources (as a multiset: the order is free, but a repeated token weighs twice in the layout's average), a
    task holding it without `sources` (its own source) included: the merge keeps one tuple per token, so the leak
    audit and the layout of the merge would depend on which task it came from (reviews); or if the agreed sources
    are nested (one task's aggregate the source of another's)."""
    first: dict[Token, tuple[int, tuple[Token, ...]]] = {}
    agreed: dict[Token, tuple[Token, ...]] = {}
    for t_idx, task in enumerate(tasks):
        for tok, src in task.sources.items():
            if tok not in first:
                first[tok], agreed[tok] = (t_idx, _as_multiset(src)), src
    for t_idx, task in enumerate(tasks):
        for tok in dict.fromkeys([*task.inputs, *task.sources]):
            if tok not in first:
                continue
            t0, src0 = first[tok]
            src = _as_multiset(task.sources[tok]) if tok in task.sources else None
            if src != src0:
                given = "no sources (its own source)" if src is None else f"the sources {list(map(str, src))}"
                raise TaskError(
                    f"`tasks`: task {t0} ({tasks[t0].name!r}) builds {tok} from {list(map(str, src0))} and task "
                    f"{t_idx} ({task.name!r}) gives it {given}; one token has one set of sources in a family (the "
                    "leak audit of the merge would depend on the task it came from; a repeated source counts)."
                )
    check_flat_sources(agreed, "`tasks` (the sources of all its tasks together)")
    return agreed


def _as_multiset(tokens: tuple[Token, ...]) -> tuple[Token, ...]:
    """`tokens` sorted: equal for equal multisets (``(w1, w1, w3)`` differs from ``(w1, w3)``)."""
    return tuple(sorted(tokens, key=token_sort_key))


def merge_tasks(tasks: Sequence[Task], stream_order: Sequence[str] | None = None, name: str = "merged") -> MergedTask:
    """Merge a task family into its minimal common supergraph (spec hasse.md §2; Li & Guo, Thm 3.7).

    Takes the disjoint union of the tasks' Hasse diagrams, identifies equivalent nodes (equal
    :func:`node_signatures`: the same inputs and the same *set* of maximal merged nodes below them, where spec
    hasse.md §2 writes a multiset of the covered nodes; the multiset keeps apart nodes with the same ancestors, e.g.
    a node covering one copy of an identified input and a node covering two, so its merge is not minimal and can
    miss a label conflict), keeps the union of their covering edges and expands every merged
    node into one slot per input. Every node keeps its ancestor set exactly (no leak, no
    extra context), and no common supergraph that keeps every slot's stream has fewer nodes.
    Node equivalence takes the stream into account (spec hasse.md §2: equivalence ignores the
    stream tag "except where inputs coincide"): an input is a (token, stream) pair, so nodes
    holding a token's copies in different streams (``[A, A]`` in one task, ``[B, A]`` in another,
    or ``[A, B]`` and ``[C, D]``) are distinct merged nodes, with distinct nodes above them, and no
    copy's stream is dropped or renamed. Where every token has one stream across equivalent
    nodes (the autoregressive, Block Two-Stream and Butterfly families) this is exactly the
    merge that ignores streams. Equivalent nodes of one and
    the same task (equal inputs over equal structure, e.g. a repeated independent token)
    are identified too: their slots map to the same merged slots. The `k`-th copy of an input
    in a source node maps to the `k`-th merged slot holding it in its merged node where the
    source nodes agree on the stream of their `k`-th copies; where they list the same streams in
    different orders (``[A, B]`` and ``[B, A]``), the other copies are paired by (stream, order
    within the stream), so every copy keeps its stream. Only where that pairing gives a merged
    slot two targets are the copies (interchangeable when they also have the same stream)
    matched to the merged slots so that the targets agree whenever such a matching makes them
    agree (a merged slot carries the target of every source slot mapped to it).

    The merge does not depend on the order of `tasks`: with the same `stream_order`, every order
    gives the same inputs, streams, targets, mask and node ids slot by slot (only `slot_map` and
    `tasks` follow the order), or the same kind of error. Slots of different merged nodes holding
    the same input and stream are ordered by a rank of their node computed from the merged
    diagram alone (its depth, the longest chain below it, then its inputs, then the ranks of the
    nodes it covers; never the task it came from), and copies listing their streams in different
    orders are paired onto the order of the group whose streams come first (in string order).
    Symbols of one type and position are compared by their ``repr``: two different symbols with
    equal ``repr`` are not told apart canonically. The default `stream_order` follows the order
    of `tasks`.

    **Arguments:**

    - `tasks`: the family, a non-empty sequence of :class:`~hassejax.tasks.Task` (a
      :class:`~hassejax.tasks.TaskFamily` merges with ``family.merge()``).
    - `stream_order`: the order of stream tags for the slot order, a sequence of distinct strings;
      default: order of first appearance. Merged slots are sorted by (stream rank, position id,
      symbol, merged node rank).
    - `name`: a name for the merged task.

    **Returns:** a :class:`MergedTask` whose mask is the dense merged mask.

    **Raises:** :class:`~hassejax.errors.TaskError` for an empty family, `tasks` that is not a
    sequence of Task (a single Task, a TaskFamily: with the hint), a `stream_order` that is not a
    sequence of distinct strings or lacks a stream tag of a task, a token whose `sources` differ
    between two tasks (as multisets: ``(w1, w1, w3)`` is not ``(w1, w3)``), or sources that are nested once the
    tasks' are put together;
    :class:`~hassejax.errors.LabelConflictError` if no matching of the source slots onto the
    merged slots gives every merged slot at most one target (two equivalent slots with
    different targets where their merged node holds the input once; in general, source
    nodes whose copies of an input (of one stream) need more different targets than the
    merged node has copies); :class:`~hassejax.errors.MemoryBudgetError` (naming
    `tasks`) if the merged task's dense arrays would not fit, estimated from the number of
    merged slots before they are allocated (or naming `mask` when one task's closure does not).

    **Example:** two copies of `w3` in one class, a target on a different copy in each task:

    >>> import numpy as np
    >>> from hassejax.tasks import Task, Token, merge_tasks
    >>> w = lambda k: Token("w", k)
    >>> a = Task([w(3), w(3)], np.ones((2, 2), bool), labels=[w(1), None])
    >>> b = Task([w(3), w(3)], np.ones((2, 2), bool), labels=[w(2), None])
    >>> m = merge_tasks([a, b])
    >>> [str(y) for y in m.labels], [s.tolist() for s in m.slot_map]
    (['w1', 'w2'], [[0, 1], [1, 0]])
    >>> merge_tasks([a, Task([w(3), w(3)], np.ones((2, 2), bool), labels=[w(2), w(4)])])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hassejax.errors.LabelConflictError: `tasks`: slot 0 of task 0 ('') → w1, ... no merged task can satisfy them all.

    The copies listed in different stream orders are paired by stream:

    >>> a = Task([w(3), w(3)], np.ones((2, 2), bool), labels=[w(1), None], streams=["A", "B"])
    >>> b = Task([w(3), w(3)], np.ones((2, 2), bool), labels=[w(2), None], streams=["B", "A"])
    >>> m = merge_tasks([a, b])
    >>> m.streams, [str(y) for y in m.labels], [s.tolist() for s in m.slot_map]
    (('A', 'B'), ['w1', 'w2'], [[0, 1], [1, 0]])

    Copies holding different streams (``[A, A]`` and ``[B, A]``) are two merged nodes; no stream is lost:

    >>> b = Task([w(3), w(3)], np.ones((2, 2), bool), labels=[w(2), None], streams=["B", "A"])
    >>> m = merge_tasks([Task([w(3), w(3)], np.ones((2, 2), bool), streams=["A", "A"]), b])
    >>> m.streams, m.node.tolist(), [s.tolist() for s in m.slot_map]
    (('A', 'A', 'A', 'B'), [0, 0, 1, 1], [[0, 1], [3, 2]])
    """
    tasks = _check_tasks_arg(tasks)
    if stream_order is None:
        stream_order = tuple(dict.fromkeys(s for t in tasks for s in t.streams))
    else:
        stream_order = _check_stream_order(stream_order)
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

    # Slots: one per input of every merged node (a multiset). Source slots are mapped onto
    # them by _match_slots: the k-th copy of an input in a source node to the k-th slot holding
    # it (by stream where the source nodes list the streams in different orders), matched
    # instead only where that pairing conflicts. Two equivalent nodes of one task
    # are identified too, so copies are grouped per source node, not per signature.
    slot_of: dict[tuple[int, Token, int], int] = {}
    merged_inputs: list[Token] = []
    merged_node: list[int] = []
    for sig_id, (inputs, _) in enumerate(sigs):
        seen: dict[Token, int] = {}
        for tok, _ in inputs:  # the k-th copy of tok, whatever its stream (_match_slots gives the streams)
            k = seen.get(tok, 0)
            seen[tok] = k + 1
            slot_of[(sig_id, tok, k)] = len(merged_inputs)
            merged_inputs.append(tok)
            merged_node.append(sig_id)

    num_slots = len(merged_inputs)
    labels, slot_map = _match_slots(tasks, slot_ids, local_nodes, slot_of, num_slots)
    streams: list[str | None] = [None] * num_slots
    for task, smap in zip(tasks, slot_map):
        for s in range(task.n):
            m = int(smap[s])
            if streams[m] is None or rank[task.streams[s]] < rank[streams[m]]:
                streams[m] = task.streams[s]

    # Presentation order: (stream rank, position id, symbol, canonical node rank); the slots of one merged node holding
    # one input and stream stay in the order _match_slots gives them (canonical too). The interned node id follows the
    # task order, so it neither breaks ties between nodes nor numbers them.
    canon = _canonical_ranks(sigs)
    perm = sorted(
        range(num_slots),
        key=lambda m: (
            rank[streams[m]],
            merged_inputs[m].position,
            token_sort_key(merged_inputs[m]),
            canon[merged_node[m]],
        ),
    )
    inv = np.empty(num_slots, dtype=np.int64)
    inv[perm] = np.arange(num_slots)
    node = np.asarray([merged_node[m] for m in perm])
    mask = order[node[:, None], node[None, :]]
    node = canon[node]
    merged = Task(
        [merged_inputs[m] for m in perm],
        mask,
        [labels[m] for m in perm],
        [streams[m] for m in perm],
        sources,
        name,
    )
    return MergedTask(merged, node, [inv[s] for s in slot_map], tasks)


def _match_slots(
    tasks: Sequence[Task],
    slot_ids: Sequence[np.ndarray],
    local_nodes: Sequence[np.ndarray],
    slot_of: dict[tuple[int, Token, int], int],
    num_slots: int,
) -> tuple[list[Token | None], list[np.ndarray]]:
    """The merged slot of every source slot and the label of every merged slot.

    The `c` slots of a source node holding one token form a group (per task and task-local node)
    that maps bijectively onto the `c` merged slots of its merged node holding that token. First
    the groups are paired by index: the `k`-th copy of every group goes to the `k`-th merged slot,
    except where the groups list their streams in different orders (:func:`_align_streams`: the
    copies at the indices where the streams disagree are paired by (stream, order within the
    stream) instead, so no merged slot gets copies of two streams).
    Where that gives every merged slot at most one target it is kept, unchanged (labels, streams
    and slot map as before matching existed). Only the indices where it conflicts are *matched*:
    two indices are interchangeable when every group has copies of the same stream at both (a
    copy carries its token, target and stream into the merged task; swapping copies of different
    streams would change or drop a merged slot's stream). Within such a class of `d` indices,
    with `n_g(y)` the copies of group `g` labelled `y` there, a consistent labelling exists iff
    ``Σ_y max_g n_g(y) <= d``; then `max_g n_g(y)` of its merged slots carry `y` (targets in
    token order, the unlabelled slots last), each group's copies labelled `y` go to those slots
    and its other copies fill the rest in order. So ``[w3 → w1, w3]`` with ``[w3 → w2, w3]`` in
    one class merges to ``(w1, w2)``, where pairing by index refused it. The matching is exact:
    all groups of a merged node hold a token in the same streams (as a multiset; the stream is part
    of the node signature), so after the alignment they have the same stream at each index and
    every merged slot gets the stream of all copies mapped to it.
    Linear in the number of source slots.

    **Raises:** :class:`~hassejax.errors.LabelConflictError` when no consistent labelling exists,
    naming source slots whose targets cannot all be placed.
    """
    # groups[(sig, token)][(task, local node)] = the source slots, in slot order
    groups: dict[tuple[int, Token], dict[tuple[int, int], list[int]]] = {}
    for t_idx, (task, ids, local) in enumerate(zip(tasks, slot_ids, local_nodes)):
        for s in range(task.n):
            key = (int(ids[s]), task.inputs[s])
            groups.setdefault(key, {}).setdefault((t_idx, int(local[s])), []).append(s)
    labels: list[Token | None] = [None] * num_slots
    smaps = [np.empty(task.n, dtype=np.int64) for task in tasks]
    for (sig_id, tok), members in groups.items():
        rows = _align_streams(tasks, [(t_idx, slots) for (t_idx, _), slots in members.items()])
        c = len(rows[0][1])
        targets = [slot_of[(sig_id, tok, k)] for k in range(c)]
        # index pairing: the k-th copy of every group to the k-th merged slot
        paired: list[Token | None] = [None] * c
        clash: set[int] = set()
        for t_idx, slots in rows:
            lab, smap = tasks[t_idx].labels, smaps[t_idx]
            for k, s in enumerate(slots):
                smap[s] = targets[k]
                y = lab[s]
                if y is not None:
                    if paired[k] is None:
                        paired[k] = y
                    elif paired[k] != y:
                        clash.add(k)
        if not clash:
            for k, y in enumerate(paired):
                labels[targets[k]] = y
            continue
        # indices interchangeable in every group: the same stream at both in each group
        classes: dict[tuple[str, ...], list[int]] = {}
        for k in range(c):
            classes.setdefault(tuple(tasks[t_idx].streams[slots[k]] for t_idx, slots in rows), []).append(k)
        for ks in classes.values():
            if clash.isdisjoint(ks):  # the index pairing is consistent here: kept
                for k in ks:
                    labels[targets[k]] = paired[k]
            else:
                _match_class(tasks, rows, ks, [targets[k] for k in ks], tok, labels, smaps)
    return labels, smaps


def _align_streams(tasks: Sequence[Task], rows: list[tuple[int, list[int]]]) -> list[tuple[int, list[int]]]:
    """The groups `rows` ((task, source slots), each of `c` copies of one token) with their copies reordered so that the
    `k`-th copies of all groups have one stream wherever a pairing can give them one.

    Where every group has the same stream at index `k` its copies stay at `k` (the index pairing). Where the groups
    list their streams in different orders (``[A, B]`` and ``[B, A]``) but hold the same streams as a multiset, the
    copies at the other indices are paired by (stream, order within the stream among those indices): the `j`-th such
    copy of stream `A` of every group goes to the index of the `j`-th one of the reference group, the group whose
    streams at those indices come first in string order (the first group would make the merged targets' order depend
    on the order of the tasks; groups with equal streams there place alike). All groups hold the same
    streams as a multiset: the stream is part of every input of a node signature (:func:`node_signatures`), so groups
    of one merged node never differ there. Linear in ``c * len(rows)``; the list `rows` itself when nothing moves.

    **Returns:** a list like `rows`, each group's slots a permutation of its own. **Example:** streams ``[A, A, B]``
    and ``[B, A, A]``: index 1 holds `A` in both and stays; the first group is the reference (``[A, B]`` at indices 0
    and 2, before ``[B, A]``), and the second group's copies at 0 (`B`) and 2 (`A`) swap, so its slots come back in the
    order 2, 1, 0.
    """
    if len(rows) == 1 or len(rows[0][1]) == 1:
        return rows  # nothing to pair
    streams = [[tasks[t_idx].streams[s] for s in slots] for t_idx, slots in rows]
    first = streams[0]
    if all(st == first for st in streams[1:]):
        return rows  # the index pairing holds one stream at every index
    count = Counter(first)
    if any(Counter(st) != count for st in streams[1:]):  # the stream is part of the node signature
        raise AssertionError("equivalent nodes hold one token in different streams")  # pragma: no cover
    agree = [all(st[k] == x for st in streams[1:]) for k, x in enumerate(first)]
    # the reference group: the one whose streams at the disagreeing indices come first (in string order), not the
    # first group, which follows the task order (groups with equal streams there give the same placement)
    ref = min(streams, key=lambda st: [x for x, a in zip(st, agree) if not a])
    place: dict[tuple[str, int], int] = {}  # (stream, order among the disagreeing copies) -> index in the reference
    seen: Counter = Counter()
    for k, x in enumerate(ref):
        if not agree[k]:
            place[(x, seen[x])] = k
            seen[x] += 1
    aligned = []
    for (t_idx, slots), st in zip(rows, streams):
        moved = list(slots)  # the copies at agreeing indices stay
        seen = Counter()
        for k, x in enumerate(st):
            if not agree[k]:
                moved[place[(x, seen[x])]] = slots[k]
                seen[x] += 1
        aligned.append((t_idx, moved))
    return aligned


def _match_class(tasks, rows, ks, targets, tok, labels, smaps) -> None:
    """Match the copies at the indices `ks` of every group (`rows`: (task, slots)) onto the merged slots `targets`,
    writing `labels` and `smaps` (see :func:`_match_slots`); linear in ``len(ks) * len(rows)``."""
    d = len(ks)
    need: dict[Token, tuple[int, int]] = {}  # target -> (most copies a group needs, that group's row)
    for r, (t_idx, slots) in enumerate(rows):
        lab = tasks[t_idx].labels
        counts: dict[Token, int] = {}
        for k in ks:
            y = lab[slots[k]]
            if y is not None:
                counts[y] = counts.get(y, 0) + 1
        for y, n in counts.items():
            if n > need.get(y, (0, r))[0]:
                need[y] = (n, r)
    order = sorted(need, key=token_sort_key)
    if sum(n for n, _ in need.values()) > d:
        raise LabelConflictError(_conflict_message(tasks, rows, ks, need, order, tok))
    slot_label = [y for y in order for _ in range(need[y][0])]
    slot_label += [None] * (d - len(slot_label))
    at: dict[Token, list[int]] = {}  # target -> the positions carrying it (built once per class)
    for j, y in enumerate(slot_label):
        labels[targets[j]] = y
        if y is not None:
            at.setdefault(y, []).append(j)
    for t_idx, slots in rows:
        lab, smap = tasks[t_idx].labels, smaps[t_idx]
        used: dict[Token, int] = {}
        taken = bytearray(d)
        rest = []
        for k in ks:
            s = slots[k]
            y = lab[s]
            if y is None:
                rest.append(s)
            else:
                i = used.get(y, 0)
                used[y] = i + 1
                j = at[y][i]
                taken[j] = 1
                smap[s] = targets[j]
        for s, j in zip(rest, (j for j in range(d) if not taken[j])):
            smap[s] = targets[j]


def _conflict_message(tasks, rows, ks, need, order, tok) -> str:
    """The message of a :class:`~hassejax.errors.LabelConflictError`: source slots whose targets cannot all be placed
    on the ``len(ks)`` interchangeable merged slots holding `tok`."""
    witness = []  # (task, slot, target), for every target the slots of a group that needs the most copies of it
    for y in order:
        t_idx, slots = rows[need[y][1]]
        witness += [(t_idx, slots[k], y) for k in ks if tasks[t_idx].labels[slots[k]] == y]
    witness.sort(key=lambda w: w[:2])  # in task and slot order
    where = lambda t, s: f"slot {s} of task {t} ({tasks[t].name!r})"
    c = len(ks)
    if c == 1 and len(witness) == 2:
        (t0, s0, y0), (t1, s1, y1) = witness
        return (
            f"`tasks`: {where(t0, s0)} and {where(t1, s1)} are equivalent (input {tok}, same upstream structure) but "
            f"have different targets {y0} and {y1}; no merged task can satisfy both."
        )
    listed = ", ".join(f"{where(t, s)} → {y}" for t, s, y in witness)
    return (
        f"`tasks`: {listed} hold input {tok} in equivalent nodes (same inputs, same upstream structure), which merge "
        f"into {c} interchangeable slot(s) holding {tok}; they need {len(witness)} slots for their different targets "
        f"{[str(y) for y in order]}, more than {c}: no merged task can satisfy them all."
    )


@dataclasses.dataclass(frozen=True)
class Sparsified:
    """The sparsest mask with the same closure as a task's (spec hasse.md §2; Li & Guo, Def. 3.8).

    - `mask`: Bool `(n, n)` with the diagonal set, a cycle through every class of size > 1
      and one edge per covering pair (from the smallest slot of the upper class to the
      smallest slot of the lower class).
    - `depth`: its convergence depth `L*`: with fewer layers it sees a subset of the dense flow.
    - `nonzeros`: number of True entries, diagonal included.

    **Example:** one class of 3 slots (all attend to all) needs only a 3-cycle, seen after 2 layers:

    ```python
    >>> import numpy as np
    >>> from hassejax.tasks import Task, Token, sparsify
    >>> s = sparsify(Task([Token("w", 1), Token("w", 2), Token("w", 3)], np.ones((3, 3), bool)))
    >>> s.mask.astype(int).tolist(), s.depth, s.nonzeros
    ([[1, 1, 0], [0, 1, 1], [1, 0, 1]], 2, 6)

    ```
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

    **Example:** the causal mask on 4 slots has the closure of the chain `i → i − 1`, which needs 3 layers:

    ```python
    >>> from hassejax.tasks import autoregressive, sparsify
    >>> s = sparsify(autoregressive(5).merge())
    >>> s.mask.astype(int).tolist(), s.depth, s.nonzeros
    ([[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]], 3, 7)

    ```
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
