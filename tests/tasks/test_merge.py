"""Merge properties (spec hasse.md §2; Li & Guo, Thm 3.7) against an independent equivalence."""

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hassejax.errors import LabelConflictError, MaskError, TaskError
from hassejax.order import reachability
from hassejax.tasks import Task, Token, audit, merge_tasks, reached_tokens, sparsify


def _closure(mask):
    """Reflexive-transitive closure by networkx (independent of hassejax.order)."""
    n = mask.shape[0]
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from((p, q) for p, q in zip(*np.nonzero(mask)))
    tc = nx.transitive_closure(g, reflexive=True)
    r = np.zeros((n, n), bool)
    for p, q in tc.edges:
        r[p, q] = True
    return r


def _diagram(task):
    """Hasse diagram by networkx: nodes = SCCs with input multisets, edges upper -> lower covers."""
    r = _closure(task.mask)
    g = nx.DiGraph()
    g.add_edges_from((p, q) for p, q in zip(*np.nonzero(r)) if p != q)
    g.add_nodes_from(range(task.n))
    cond = nx.condensation(g)
    red = nx.transitive_reduction(cond)
    nodes = {c: tuple(sorted(cond.nodes[c]["members"])) for c in cond.nodes}
    return nodes, red


def _equivalence_classes(tasks):
    """Independent equivalence (spec §2, as merged): two nodes are one merged node iff they hold the same inputs (token
    and stream) and the same merged nodes lie strictly below them (all of them, by networkx's descendants, not the
    covers), computed from the bottom up over every task's diagram; the number of merged nodes."""
    ids: dict[tuple, int] = {}
    for task in tasks:
        nodes, red = _diagram(task)
        cls = {}
        for c in reversed(list(nx.topological_sort(red))):  # edges run upper -> lower: lower nodes first
            inputs = tuple(sorted((str(task.inputs[s]), task.streams[s]) for s in nodes[c]))
            below = frozenset(cls[d] for d in nx.descendants(red, c))
            cls[c] = ids.setdefault((inputs, below), len(ids))
    return len(ids)


@st.composite
def task_families(draw):
    """A family of dense tasks as ``(inputs, mask, labels)`` triples; :func:`_tasks` builds the Tasks.

    The strategy returns plain data: building a `Task` calls JAX, whose first call in a process
    touches the `random` module, which hypothesis flags inside a strategy."""
    num_tasks = draw(st.integers(1, 4))
    tasks = []
    for _ in range(num_tasks):
        n = draw(st.integers(1, 6))
        bits = draw(st.lists(st.booleans(), min_size=n * n, max_size=n * n))
        mask = _closure(np.array(bits, bool).reshape(n, n))  # dense task
        inputs = [Token(draw(st.sampled_from("ab")), draw(st.integers(1, 2))) for _ in range(n)]
        # Labels are a function of what a slot holds and reaches: equivalent slots agree.
        r = _closure(mask)
        labels = {}
        for p in range(n):
            if draw(st.booleans()):
                labels[p] = Token("y", 10 * len({inputs[q] for q in np.flatnonzero(r[p])}) + inputs[p].position)
        tasks.append((inputs, mask, labels))
    return tasks


def _tasks(specs):
    """The `Task` of each ``(inputs, mask, labels[, streams])`` tuple drawn by :func:`task_families` or
    :func:`labelled_families`."""
    return [Task(*spec) for spec in specs]


@settings(max_examples=150)
@given(task_families())
def test_merge_properties(specs):
    tasks = _tasks(specs)
    merged = merge_tasks(tasks)
    assert merged.n <= sum(t.n for t in tasks)
    # Every source slot keeps its reachable inputs exactly.
    merged_reach = reached_tokens(merged)
    for task, smap in zip(tasks, merged.slot_map):
        src_reach = reached_tokens(task)
        for s in range(task.n):
            assert merged_reach[smap[s]] == src_reach[s]
            assert merged.inputs[smap[s]] == task.inputs[s]
            if task.labels[s] is not None:
                assert merged.labels[smap[s]] == task.labels[s]
    assert audit(merged).mismatches == ()
    # Every pair of equivalent nodes is identified, and nothing more; merging the merge changes nothing.
    assert int(merged.node.max()) + 1 == _equivalence_classes(tasks)
    assert merge_tasks([merged]).n == merged.n
    # The merged mask is dense (one layer realises the limit) and the merged nodes are its classes.
    assert merged.is_dense()


@settings(max_examples=60)
@given(task_families(), st.integers(2, 4))
def test_repeated_task_merges_to_itself(specs, k):
    task = _tasks(specs)[0]
    merged = merge_tasks([task] * k)
    single = merge_tasks([task])
    assert merged.n == single.n <= task.n
    np.testing.assert_array_equal(merged.mask, single.mask)
    for smap in merged.slot_map:
        np.testing.assert_array_equal(smap, single.slot_map[0])
    # Without two equivalent nodes inside the task, its merge is the task itself (up to slot order).
    num_nodes = len(_diagram(task)[0])
    if _equivalence_classes([task]) == num_nodes:
        assert single.n == task.n
        assert sorted(single.slot_map[0].tolist()) == list(range(task.n))


def test_a_node_covering_two_equal_nodes_merges_with_one_covering_a_single_copy():
    """Review: `x9` seeing two copies of `w1` (one task) and `x9` seeing one (another) kept two `x9` slots with the same
    input, ancestors and target (the covered signatures were a multiset while the two `w1` are one merged node): the
    merge was not minimal. Now one slot each; every source slot keeps its reached tokens and its target."""
    w1, w2, x9 = Token("w", 1), Token("w", 2), Token("x", 9)
    t1 = Task([w1, w1, x9], np.array([[1, 0, 0], [0, 1, 0], [1, 1, 1]], bool), labels={2: w2})
    t2 = Task([w1, x9], np.array([[1, 0], [1, 1]], bool), labels={1: w2})
    merged = merge_tasks([t1, t2])
    assert merged.slot_names() == ("w1", "x9")
    assert [m.tolist() for m in merged.slot_map] == [[0, 0, 1], [0, 1]]
    np.testing.assert_array_equal(merged.mask, [[True, False], [True, True]])
    assert merged.labels == (None, w2) and audit(merged).mismatches == ()
    assert _equivalence_classes([t1, t2]) == 2


def test_a_covered_node_below_another_covered_node_adds_nothing():
    """Review of the set fix: the two `b1` of one task are one merged node, and one of them lies below `a2`; slot 3
    covers `{a2}`, slot 4 `{b1, a2}`: both have `{b1, a2}` below them and hold `b2`, so they are one node (the merge
    gave two `b2` slots, and merging its result again gave one). With different targets that is a conflict, which
    the first merge missed."""
    b1, a2, b2 = Token("b", 1), Token("a", 2), Token("b", 2)
    m = np.array([[0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 1, 0, 0, 0], [0, 1, 1, 0, 0], [1, 0, 1, 0, 0]], bool)
    task = Task([b1, b1, a2, b2, b2], m)
    merged = merge_tasks([task])
    assert merged.slot_names() == ("b1", "a2", "b2")
    assert merged.slot_map[0].tolist() == [0, 0, 1, 2, 2]
    assert merge_tasks([merged]).n == merged.n == _equivalence_classes([task])
    with pytest.raises(LabelConflictError, match="different targets"):
        merge_tasks([Task([b1, b1, a2, b2, b2], m, labels={3: Token("y", 1), 4: Token("z", 1)})])


def test_equivalent_nodes_of_one_task_are_identified():
    """Two incomparable slots with the same input and nothing below them are one merged node."""
    task = Task([Token("a", 1), Token("a", 1)], np.eye(2, dtype=bool), {0: Token("y", 1), 1: Token("y", 1)})
    merged = merge_tasks([task])
    assert merged.n == 1
    assert merged.slot_map[0].tolist() == [0, 0]
    assert merged.labels == (Token("y", 1),)
    # The same slots with different targets cannot share one merged slot.
    clash = Task([Token("a", 1), Token("a", 1)], np.eye(2, dtype=bool), {0: Token("y", 1), 1: Token("y", 2)})
    with pytest.raises(LabelConflictError, match="different targets"):
        merge_tasks([clash])
    # Inside a larger node (a@1 twice within one class) both copies stay.
    both = Task([Token("a", 1), Token("a", 1)], np.ones((2, 2), bool), {})
    assert merge_tasks([both]).n == 2


@settings(max_examples=60)
@given(task_families())
def test_sparsify_keeps_closure(specs):
    merged = merge_tasks(_tasks(specs))
    sp = sparsify(merged)
    np.testing.assert_array_equal(_closure(sp.mask), _closure(merged.mask))
    assert sp.nonzeros <= int(merged.mask.sum())
    assert np.array_equal(np.asarray(reachability(sp.mask, sp.depth)), _closure(sp.mask))


def test_label_conflict_raises():
    t1 = Task([Token("w", 1)], np.ones((1, 1), bool), {0: Token("w", 2)}, name="a")
    t2 = Task([Token("w", 1)], np.ones((1, 1), bool), {0: Token("w", 3)}, name="b")
    with pytest.raises(LabelConflictError, match="different targets w2 and w3"):
        merge_tasks([t1, t2])


def test_task_errors():
    with pytest.raises(TaskError, match="`labels` points to slot 5, which does not exist"):
        Task([Token("w", 1)], np.ones((1, 1), bool), {5: Token("w", 2)})
    with pytest.raises(TaskError, match="one entry per slot"):
        Task([Token("w", 1)], np.ones((1, 1), bool), [None, None])
    with pytest.raises(MaskError, match=r"shape \(2, 2\)"):
        Task([Token("w", 1), Token("w", 2)], np.ones((1, 1), bool))
    with pytest.raises(TaskError, match="Token"):
        Task(["w1"], np.ones((1, 1), bool))
    with pytest.raises(TaskError, match="non-empty"):
        merge_tasks([])
    with pytest.raises(TaskError, match="lacks the stream tag 'query'"):
        merge_tasks([Task([Token("w", 1)], np.ones((1, 1), bool), streams=["query"])], stream_order=["content"])


@pytest.mark.parametrize(
    "bad", [Token("w", "2"), Token("w", 1.5), Token("w", True), ("w", True), Token(["x"], 1), ("w", np.bool_(True))]
)
def test_a_token_is_checked_like_a_pair(bad):
    """Review: a `Token` (a NamedTuple) skipped the checks a plain pair gets: ``Token("w", "2")`` printed as ``w2`` and
    the audit, comparing it with the target ``Token("w", 2)``, missed a leak; an unhashable symbol failed later in
    `merge_tasks` with a raw ``TypeError``."""
    one = np.ones((1, 1), bool)
    with pytest.raises(
        TaskError, match=r"`inputs\[0\]` must be a Token\(symbol, position\) or a \(hashable symbol, int"
    ):
        Task([bad], one)
    with pytest.raises(TaskError, match=r"`labels\[0\]` must be a Token"):
        Task([Token("w", 1)], one, labels={0: bad})
    # a NumPy integer position is accepted and stored as an int
    assert Task([Token("w", np.int64(2))], one).inputs[0].position.__class__ is int


def test_sources_that_are_no_iterable_are_refused(no_typecheck):
    agg = Token("agg", 2)
    with pytest.raises(TaskError, match=r"must be a tuple of the Tokens it is built from \(`\(\)` for none\); got 5"):
        Task([agg], np.ones((1, 1), bool), sources={agg: 5})


def test_sources_must_be_a_tuple_and_agree_across_the_family():
    """Review: a single Token as `sources[...]` was reported as "`sources[...]` must be a Token ... got 'w'" (it was
    iterated); two tasks giving one aggregated token different sources were merged with the last task's, so the
    merge's leak count depended on the task order (1 leak one way, 0 the other)."""
    w1, w2, w3, agg = Token("w", 1), Token("w", 2), Token("w", 3), Token("agg", 2)
    one = np.ones((1, 1), bool)
    for single in (w1, ("w", 1)):
        with pytest.raises(TaskError, match=r"must be a tuple of the Tokens .* got the single token w1: write \(Token"):
            Task([agg], one, sources={agg: single})
    # any other iterable of tokens is taken (a set sorted), as the merge compares sources as sets (diff review)
    assert Task([agg], one, sources={agg: {w3, w1}}).sources[agg] == (w1, w3)
    assert Task([agg], one, sources={agg: iter([w3])}).sources[agg] == (w3,)
    m = np.array([[1, 0, 0], [0, 1, 0], [1, 1, 1]], bool)
    ta = Task([w1, w3, agg], m, labels={2: w2}, sources={agg: (w1, w3)}, name="a")
    tb = Task([w1, w3, agg], m, labels={2: w2}, sources={agg: (w1, w2, w3)}, name="b")
    assert len(audit(tb).leaks) == 1
    for family in ([ta, tb], [tb, ta]):
        with pytest.raises(TaskError, match=r"builds agg2 from .* one token has one set of sources"):
            merge_tasks(family)
    # the same sources in another order are one set
    tc = Task([w1, w3, agg], m, labels={2: w2}, sources={agg: (w3, w1)}, name="c")
    assert audit(merge_tasks([ta, tc])).leaks == ()
    # a task holding the token without sources (its own source) disagrees too, in either order (diff review)
    td = Task([w1, w3, agg], m, labels={2: w2}, name="d")
    for family in ([ta, td], [td, ta]):
        with pytest.raises(TaskError, match=r"gives it no sources \(its own source\)|builds agg2 from"):
            merge_tasks(family)
    # a task declaring other sources for a token it does not hold
    te = Task([w1], np.ones((1, 1), bool), sources={agg: (w2,)}, name="e")
    with pytest.raises(TaskError, match=r"builds agg2 from .* gives it the sources \['w2'\]"):
        merge_tasks([ta, te])


def test_diagram_carries_inputs():
    from hassejax.tasks import butterfly

    d = butterfly(3).tasks[1].diagram()
    assert any(d.graph.nodes[v]["inputs"] == ("agg2",) for v in d.graph.nodes)


def test_interchangeable_copies_are_matched_not_paired_by_index():
    """Issue: two copies of `w3` in one class, targets `w1` and `w2` on the first copy of each task, were paired by
    index onto one merged slot and refused ("no merged task can satisfy both"), while targets on different copies
    merged. Both orders now give the labels (w1, w2); a genuine conflict (three targets for two copies) still raises."""
    w, full = lambda k: Token("w", k), np.ones((2, 2), bool)
    a = Task([w(3), w(3)], full, labels=[w(1), None])
    for b in (Task([w(3), w(3)], full, labels=[w(2), None]), Task([w(3), w(3)], full, labels=[None, w(2)])):
        merged = merge_tasks([a, b])
        assert merged.n == 2 and merged.labels == (w(1), w(2))
        for task, smap in zip((a, b), merged.slot_map):
            assert sorted(smap.tolist()) == [0, 1]
            assert all(merged.labels[smap[s]] == y for s, y in enumerate(task.labels) if y is not None)
        assert audit(merged).mismatches == ()
    with pytest.raises(LabelConflictError, match=r"need 3 slots for their different targets \['w1', 'w2', 'w4'\]"):
        merge_tasks([a, Task([w(3), w(3)], full, labels=[w(2), w(4)])])
    # the same target twice in one task needs both copies: a third target elsewhere does not fit
    with pytest.raises(LabelConflictError, match="more than 2"):
        merge_tasks([Task([w(3), w(3)], full, labels=[w(1), w(1)]), Task([w(3), w(3)], full, labels=[w(2), None])])


def _brute_force_labels(tasks):
    """Independent search: the merged slots come from the unlabelled merge (its nodes checked against
    :func:`_equivalence_classes` by the caller); every source slot may go to any merged slot of its merged node holding
    its input, bijectively per (task, class, input) (the classes by networkx). Per set of merged slots (the groups
    mapping onto it; they hold the same streams as a multiset, the stream being part of node equivalence), the first
    pick pairs the copies by index at the indices where every group has the same stream and by (stream, order within
    the stream) at the others, and each stream is a set of its own (no merged slot gets copies of two streams). When
    the first pick gives each slot of a set at most one target it is the answer, else every assignment of the set is
    searched. Returns `(best, paired)`: `best` is None when some set has no assignment giving each merged slot at most
    one target, else the number of labelled merged slots (the fewest where the first pick conflicts); `paired`:
    whether the first pick is consistent everywhere."""
    import itertools
    from collections import Counter

    bare = merge_tasks([Task(t.inputs, t.mask, streams=t.streams) for t in tasks])
    sets = {}  # per set of merged slots, its groups: (task, source slots in slot order)
    for t_idx, task in enumerate(tasks):
        nodes, _ = _diagram(task)
        for members in nodes.values():
            by_token = {}
            for s in sorted(members):
                by_token.setdefault(task.inputs[s], []).append(s)
            for slots in by_token.values():
                targets = tuple(sorted({int(bare.slot_map[t_idx][s]) for s in slots}))
                assert len(targets) == len(slots)
                assert sorted(bare.streams[m] for m in targets) == sorted(task.streams[s] for s in slots)
                sets.setdefault(targets, []).append((t_idx, slots))

    def labelled(pick):
        got = {}
        for t_idx, slots, perm in pick:
            for s, m in zip(slots, perm):
                y = tasks[t_idx].labels[s]
                if y is not None and got.setdefault(m, y) != y:
                    return None
        return len(got)

    def solve(groups, targets, first):
        """The labelled slots of the first pick if consistent, else the fewest over every pick (None: no pick)."""
        options = [
            [(t_idx, slots, pick), *((t_idx, slots, p) for p in itertools.permutations(targets) if p != pick)]
            for (t_idx, slots), pick in zip(groups, first)
        ]
        best = labelled([perms[0] for perms in options])
        if best is not None:
            return best, True
        found = [n for pick in itertools.product(*options) if (n := labelled(pick)) is not None]
        return (min(found) if found else None), False

    total, paired = 0, True
    for targets, groups in sets.items():
        streams = [[tasks[t_idx].streams[s] for s in slots] for t_idx, slots in groups]
        assert all(Counter(seq) == Counter(streams[0]) for seq in streams)
        # the first pick: at an index where all groups have one stream that index, else (stream, order among the
        # copies of that stream at the other indices), placed where the first group has it
        agree = [len({seq[k] for seq in streams}) == 1 for k in range(len(targets))]
        bucket = lambda seq, k, agree=agree: (
            ("index", k) if agree[k] else (seq[k], sum(seq[i] == seq[k] and not agree[i] for i in range(k)))
        )
        slot_of = {bucket(streams[0], k): m for k, m in enumerate(targets)}
        # every stream on its own: its copies go to the merged slots of that stream, bijectively per group
        for x in dict.fromkeys(streams[0]):
            sub = [(t_idx, [s for s, y in zip(slots, seq) if y == x]) for (t_idx, slots), seq in zip(groups, streams)]
            first = [tuple(slot_of[bucket(seq, k)] for k, y in enumerate(seq) if y == x) for seq in streams]
            best, ok = solve(sub, tuple(sorted(first[0])), first)
            if best is None:
                return None, False
            paired &= ok
            total += best
    return total, paired


@st.composite
def labelled_families(draw):
    """Small families with repeated tokens inside classes, free targets (conflicts happen) and, in some, two streams;
    a task may be an earlier one with its slots listed in another order (and other targets), so equivalent nodes list
    their streams in different orders (or hold different streams)."""
    tasks = []
    streams = draw(st.sampled_from([["A"], ["A", "B"]]))
    labelling = st.sampled_from([None, Token("y", 1), Token("y", 2), Token("y", 3)])
    for _ in range(draw(st.integers(1, 3))):
        if tasks and draw(st.booleans()):
            inputs, mask, _, tags = draw(st.sampled_from(tasks))
            order = draw(st.permutations(range(len(inputs))))
            inputs, mask, tags = [inputs[p] for p in order], mask[np.ix_(order, order)], [tags[p] for p in order]
            tasks.append((inputs, mask, [draw(labelling) for _ in order], tags))
            continue
        n = draw(st.integers(1, 4))
        bits = draw(st.lists(st.booleans(), min_size=n * n, max_size=n * n))
        mask = _closure(np.array(bits, bool).reshape(n, n) | np.eye(n, dtype=bool))
        if draw(st.booleans()):
            mask[:] = True  # one class: every copy of a token in it interchangeable
        inputs = [Token("a", draw(st.integers(1, 2))) for _ in range(n)]
        labels = [draw(labelling) for _ in range(n)]
        tasks.append((inputs, mask, labels, [draw(st.sampled_from(streams)) for _ in range(n)]))
    return tasks


def test_merge_labels_agree_with_a_brute_force_matching_exhaustively():
    """Every labelling of two tasks of two copies of `w3` in one class (targets from {None, y1, y2}), and of three
    such tasks with at most one target each; then of two such tasks listing the streams [A, B] and the same streams in
    either order or other ones, and of two tasks of three copies listing [A, A, B] and its reorderings, with at most
    one target each."""
    import itertools

    full, w3 = np.ones((2, 2), bool), Token("w", 3)
    y1, y2 = Token("y", 1), Token("y", 2)
    options = list(itertools.product([None, y1, y2], repeat=2))
    singles = [(None, None), (y1, None), (None, y1), (y2, None), (None, y2)]
    for labels in [*itertools.product(options, repeat=2), *itertools.product(singles, repeat=3)]:
        _check_against_brute_force([Task([w3, w3], full, labels=list(ls)) for ls in labels])
    # the first task lists [A, B] (or [A, A, B]); the second the same streams in any order, or other streams
    for (la, lb), sb in itertools.product(itertools.product(options, repeat=2), ["AB", "BA", "AA", "BB"]):
        _check_against_brute_force(
            [Task([w3, w3], full, list(la), ["A", "B"]), Task([w3, w3], full, list(lb), list(sb))]
        )
    full3 = np.ones((3, 3), bool)
    singles3 = [(None,) * 3, *(tuple(y if i == k else None for i in range(3)) for k in range(3) for y in (y1, y2))]
    for (la, lb), sb in itertools.product(itertools.product(singles3, repeat=2), ["AAB", "ABA", "BAA"]):
        tasks = [Task([w3] * 3, full3, list(la), list("AAB")), Task([w3] * 3, full3, list(lb), list(sb))]
        _check_against_brute_force(tasks)


@settings(max_examples=200, deadline=None)
@given(labelled_families())
def test_merge_labels_agree_with_a_brute_force_matching(specs):
    _check_against_brute_force(_tasks(specs))


def _check_against_brute_force(tasks):
    best, paired = _brute_force_labels(tasks)
    if best is None:
        with pytest.raises(LabelConflictError):
            merge_tasks(tasks)
        return
    merged = merge_tasks(tasks)
    plain = merge_tasks([Task(t.inputs, t.mask, streams=t.streams) for t in tasks])
    assert merged.n == plain.n and np.array_equal(merged.mask, plain.mask) and merged.streams == plain.streams
    assert int(merged.node.max()) + 1 == _equivalence_classes(tasks)  # the merged nodes, streams included
    for task, smap in zip(tasks, merged.slot_map):
        for s in range(task.n):
            assert merged.inputs[smap[s]] == task.inputs[s]
            assert merged.streams[smap[s]] == task.streams[s]  # no copy loses its stream
            if task.labels[s] is not None:
                assert merged.labels[smap[s]] == task.labels[s]
    # the first pick (by index, by stream where the streams disagree) where it is consistent, else no target carried
    # twice where once suffices
    assert sum(y is not None for y in merged.labels) == best
    if paired:  # exactly the unlabelled merge's slot map (as before matching existed)
        assert all(np.array_equal(a, b) for a, b in zip(merged.slot_map, plain.slot_map))


def test_consistent_index_pairing_is_kept():
    """Review: the matching placed targets in token order even where the index pairing of repeated tokens was
    consistent, so results changed and merging one task was not the identity ([None, w1] came back as [w1, None]).
    A consistent pairing is now kept exactly; the matching is used only where it conflicts."""
    w, full = lambda k: Token("w", k), np.ones((2, 2), bool)
    single = Task([w(3), w(3)], full, labels=[None, w(1)])
    merged = merge_tasks([single])
    assert merged.labels == (None, w(1)) and [s.tolist() for s in merged.slot_map] == [[0, 1]]
    assert merged.inputs == single.inputs and np.array_equal(merged.mask, single.mask)
    merged = merge_tasks([Task([w(3), w(3)], full, labels=[w(1), None]), Task([w(3), w(3)], full, labels=[None, w(1)])])
    assert merged.labels == (w(1), w(1)) and [s.tolist() for s in merged.slot_map] == [[0, 1], [0, 1]]
    # three copies: the pairing conflicts at index 0 only; index 2 keeps its pairing (w5 from both tasks)
    a = Task([w(3)] * 3, np.ones((3, 3), bool), labels=[w(1), None, w(5)])
    b = Task([w(3)] * 3, np.ones((3, 3), bool), labels=[w(2), None, w(5)])
    merged = merge_tasks([a, b])
    assert merged.labels == (w(1), w(2), w(5)) and [s.tolist() for s in merged.slot_map] == [[0, 1, 2], [1, 0, 2]]


def test_copies_of_different_streams_are_not_interchangeable():
    """Review: copies of one token with different streams were matched as interchangeable, so a merged slot took
    another stream and a stream disappeared (streams ['A', 'B'] merged to ['A', 'A']). Copies are now permuted only
    among copies of the same stream, and a consistent index pairing is kept (streams and targets)."""
    w, full = lambda k: Token("w", k), np.ones((2, 2), bool)
    a = Task([w(3), w(3)], full, labels=[w(1), None], streams=["A", "B"])
    b = Task([w(3), w(3)], full, labels=[None, w(1)], streams=["A", "B"])
    merged = merge_tasks([a, b])
    assert merged.streams == ("A", "B") and merged.labels == (w(1), w(1))
    assert [s.tolist() for s in merged.slot_map] == [[0, 1], [0, 1]]
    # a conflict on the A copies cannot be moved onto the B copies: refused, not merged with stream B dropped
    c = Task([w(3), w(3)], full, labels=[w(2), None], streams=["A", "B"])
    with pytest.raises(LabelConflictError, match="different targets w1 and w2"):
        merge_tasks([a, c])
    # with two B copies the conflict is matched among them; the A copy keeps its slot and stream
    full3 = np.ones((3, 3), bool)
    a = Task([w(3)] * 3, full3, labels=[None, w(1), None], streams=["A", "B", "B"])
    b = Task([w(3)] * 3, full3, labels=[None, w(2), None], streams=["A", "B", "B"])
    merged = merge_tasks([a, b])
    assert merged.streams == ("A", "B", "B") and merged.labels == (None, w(1), w(2))
    assert [s.tolist() for s in merged.slot_map] == [[0, 1, 2], [0, 2, 1]]
    for task, smap in zip((a, b), merged.slot_map):
        assert [merged.streams[m] for m in smap] == list(task.streams)
    assert audit(merged).mismatches == ()


def test_copies_listed_in_different_stream_orders_are_paired_by_stream():
    """Issue: the copies of `w3` listed as streams [A, B] in one task and [B, A] in another were paired by index, so
    both merged slots took stream A ('A:w3', 'A:w3': a silent wrong merge) and targets on the A copy of one task and
    the B copy of the other were refused ("no merged task can satisfy both"). Copies are now paired by (stream, order
    within the stream) where the streams disagree, and a consistent index pairing is kept where they agree."""
    w, full = lambda k: Token("w", k), np.ones((2, 2), bool)
    a = Task([w(3), w(3)], full, streams=["A", "B"], name="a")
    b = Task([w(3), w(3)], full, streams=["B", "A"], name="b")
    merged = merge_tasks([a, b])
    assert merged.streams == ("A", "B") and [s.tolist() for s in merged.slot_map] == [[0, 1], [1, 0]]
    a = Task([w(3), w(3)], full, labels=[w(1), None], streams=["A", "B"], name="a")
    b = Task([w(3), w(3)], full, labels=[w(2), None], streams=["B", "A"], name="b")
    merged = merge_tasks([a, b])
    assert merged.streams == ("A", "B") and merged.labels == (w(1), w(2))
    assert [s.tolist() for s in merged.slot_map] == [[0, 1], [1, 0]]
    assert audit(merged).mismatches == ()
    # three copies: index 1 holds stream A in both tasks and keeps its pairing; indices 0 and 2 are paired by stream
    full3 = np.ones((3, 3), bool)
    a = Task([w(3)] * 3, full3, labels=[w(1), None, None], streams=["A", "A", "B"])
    b = Task([w(3)] * 3, full3, labels=[None, w(2), w(1)], streams=["B", "A", "A"])
    merged = merge_tasks([a, b])
    assert merged.streams == ("A", "A", "B") and merged.labels == (w(1), w(2), None)
    assert [s.tolist() for s in merged.slot_map] == [[0, 1, 2], [2, 1, 0]]
    for task, smap in zip((a, b), merged.slot_map):
        assert [merged.streams[m] for m in smap] == list(task.streams)
    # a conflict within one stream is still refused when the stream has a single copy
    c = Task([w(3), w(3)], full, labels=[None, w(2)], streams=["B", "A"])
    with pytest.raises(LabelConflictError, match="different targets w1 and w2"):
        merge_tasks([Task([w(3), w(3)], full, labels=[w(1), None], streams=["A", "B"]), c])
    # ... also where the index pairing merged by putting a B copy on an A slot (streams ('A', 'A'), B dropped)
    a = Task([w(3), w(3)], full, labels=[w(1), w(2)], streams=["A", "B"])
    b = Task([w(3), w(3)], full, labels=[w(1), w(2)], streams=["B", "A"])
    with pytest.raises(LabelConflictError, match="different targets w1 and w2"):
        merge_tasks([a, b])
    # nodes holding different streams ([A, A] and [B, A]) are two merged nodes (tests/tasks/test_merge_streams.py)
    a = Task([w(3), w(3)], full, labels=[w(1), None], streams=["A", "A"])
    b = Task([w(3), w(3)], full, labels=[None, w(2)], streams=["B", "A"])
    merged = merge_tasks([a, b])
    assert merged.streams == ("A", "A", "A", "B") and merged.labels == (w(1), None, w(2), None)
    assert [s.tolist() for s in merged.slot_map] == [[0, 1], [3, 2]]


def test_ties_between_merged_nodes_do_not_follow_the_task_order():
    """Issue: slots of two merged nodes holding the same input and stream were ordered by the interned node id, which
    follows the task order, so the mask and targets changed with it ([Y, Z]: labels [None, w9, None], [Z, Y]:
    [None, None, w9], each with its own mask). The tie is broken by a canonical key of the node (its inputs and the
    nodes below it), so every order gives the same merge slot by slot."""
    a1, b2, w9 = Token("a", 1), Token("b", 2), Token("w", 9)
    y = Task([a1, b2], np.tril(np.ones((2, 2), bool)), labels=[None, w9])
    z = Task([b2], np.ones((1, 1), bool))
    yz, zy = merge_tasks([y, z]), merge_tasks([z, y])
    for m in (yz, zy):
        assert m.slot_names() == ("a1", "b2", "b2")
        assert m.labels == (None, None, w9)  # the lone b2 (nothing below it) before the b2 above a1
        np.testing.assert_array_equal(m.mask, [[1, 0, 0], [0, 1, 0], [1, 0, 1]])
        assert m.node.tolist() == [0, 1, 2]
        assert audit(m).mismatches == ()
    assert [s.tolist() for s in yz.slot_map] == [[0, 2], [1]] and [s.tolist() for s in zy.slot_map] == [[1], [0, 2]]
    # within one merged node: copies listing their streams in different orders were paired onto the first task's
    # indices, so the two A copies of w3 carried (y1, y2) in one order and (y2, y1) in the other; now onto those of
    # the task whose disagreeing streams come first ([A, _, B] of g2 before [B, _, A] of g1), in every order
    w3, y1, y2, full = Token("w", 3), Token("y", 1), Token("y", 2), np.ones((3, 3), bool)
    g1 = Task([w3] * 3, full, labels=[None, y1, y2], streams=["B", "A", "A"])
    g2 = Task([w3] * 3, full, streams=["A", "A", "B"])
    for family in ([g1, g2], [g2, g1]):
        m = merge_tasks(family, stream_order=("A", "B"))
        assert m.streams == ("A", "A", "B") and m.labels == (y2, y1, None)
        for task, smap in zip(family, m.slot_map):
            assert [m.streams[k] for k in smap] == list(task.streams)


@st.composite
def ordered_families(draw):
    """2-3 small dense tasks over few tokens, streams and targets: one input often sits in several merged nodes (the
    ties of the slot order), and copies of a token list their streams in different orders (in one merged node, the
    ties within it). Plain data, as :func:`task_families`."""
    labelling = st.sampled_from([None, None, Token("y", 1), Token("y", 2)])
    specs = []
    copies = draw(st.booleans())  # tasks of one class holding 3-4 copies of one token, or any small tasks
    for _ in range(draw(st.integers(2, 3))):
        n = draw(st.integers(3, 4) if copies else st.integers(1, 4))
        bits = draw(st.lists(st.booleans(), min_size=n * n, max_size=n * n))
        mask = np.array(bits, bool).reshape(n, n)
        if copies or draw(st.booleans()):
            mask[:] = True
        symbols, positions = ("a", 1) if copies else draw(st.sampled_from([("a", 1), ("ab", 2)]))
        inputs = [Token(draw(st.sampled_from(symbols)), draw(st.integers(1, positions))) for _ in range(n)]
        streams = [draw(st.sampled_from("AB")) for _ in range(n)]
        mask = _closure(mask)
        specs.append((inputs, mask, [draw(labelling) for _ in range(n)], streams))
    return specs


@settings(max_examples=200)
@given(ordered_families())
def test_merge_is_identical_for_every_task_order(specs):
    """Every order of the tasks gives the same merge slot by slot (with one `stream_order`): the same inputs, streams,
    targets, mask and node ids (only `slot_map` and `tasks` follow the order), or the same refusal."""
    import itertools

    tasks = [Task(*spec) for spec in specs]
    results = []
    for perm in itertools.permutations(range(len(tasks))):
        try:
            merged = merge_tasks([tasks[i] for i in perm], stream_order=("A", "B"))
        except LabelConflictError:
            results.append(None)
            continue
        results.append(merged)
        for i, smap in zip(perm, merged.slot_map):  # the slot map follows: every source slot keeps its place
            src = tasks[i]
            assert [merged.inputs[m] for m in smap] == list(src.inputs)
            assert [merged.streams[m] for m in smap] == list(src.streams)
            assert all(y is None or merged.labels[m] == y for m, y in zip(smap, src.labels))
    assert all(r is None for r in results) or not any(r is None for r in results)
    if results[0] is None:
        return
    first = results[0]
    for merged in results[1:]:
        assert merged.inputs == first.inputs and merged.streams == first.streams
        assert merged.labels == first.labels
        np.testing.assert_array_equal(merged.mask, first.mask)
        np.testing.assert_array_equal(merged.node, first.node)


def test_streams_as_one_string_is_refused():
    """Issue: ``streams="content"`` was split into its characters (a task of 7 slots got streams 'c', 'o', ...; one of
    2 slots with ``streams="ab"`` got 'a' and 'b'), a silent wrong task. A string is refused, naming `streams`."""
    two = [Token("w", 1), Token("w", 2)]
    for streams in ("content", "ab"):
        with pytest.raises(TaskError, match=r"`streams` must be a sequence of 2 stream tags \(strings\), one per slot"):
            Task(two, np.eye(2, dtype=bool), streams=streams)
    assert Task(two, np.eye(2, dtype=bool), streams=("ab", "ab")).streams == ("ab", "ab")


def test_stream_order_with_a_tag_twice_is_refused():
    """Issue: ``stream_order=("A", "B", "A")`` was taken, the last place of 'A' winning; a string or a number for it
    failed with a bare TypeError (or was split into characters). Now refused, naming `stream_order`."""
    t = Task([Token("w", 1), Token("w", 2)], np.eye(2, dtype=bool), streams=["A", "B"])
    with pytest.raises(TaskError, match=r"`stream_order` must list each stream tag once; got 'A' twice"):
        merge_tasks([t], stream_order=("A", "B", "A"))
    with pytest.raises(TaskError, match=r"`stream_order` must be a sequence of stream tags \(strings\).*got 'AB'"):
        merge_tasks([t], stream_order="AB")
    assert merge_tasks([t], stream_order=["B", "A"]).streams == ("B", "A")


def test_stream_order_of_the_wrong_type_is_refused(no_typecheck):
    t = Task([Token("w", 1)], np.ones((1, 1), bool))
    for bad in (3, ("content", 3)):
        with pytest.raises(TaskError, match=r"`stream_order` must be a sequence of stream tags \(strings\)"):
            merge_tasks([t], stream_order=bad)


def test_a_family_or_a_single_task_for_tasks_is_refused_with_a_hint(no_typecheck):
    """Issue: ``merge_tasks(butterfly(3))``, ``merge_tasks(task)`` and ``Task(None, mask)`` failed with bare TypeErrors
    ('... object is not iterable'). Each now names the argument, and for a family says how to pass it (as `audit`
    does: ``family.merge()``)."""
    from hassejax.tasks import butterfly

    t = Task([Token("w", 1)], np.ones((1, 1), bool))
    with pytest.raises(
        TaskError,
        match=r"`tasks` must be a non-empty sequence of Task; got a TaskFamily: merge it with "
        r"family\.merge\(\)",
    ):
        merge_tasks(butterfly(3))
    with pytest.raises(
        TaskError, match=r"`tasks` must be a non-empty sequence of Task; got a single Task: pass \[task\]"
    ):
        merge_tasks(t)
    with pytest.raises(TaskError, match=r"`tasks` must be a non-empty sequence of Task; got int"):
        merge_tasks(3)
    with pytest.raises(TaskError, match=r"`inputs` must be a sequence of Tokens \(one per slot\); got None"):
        Task(None, np.ones((1, 1), bool))
    with pytest.raises(TaskError, match=r"`streams` must be a sequence of 1 stream tags .*; got 5"):
        Task([Token("w", 1)], np.ones((1, 1), bool), streams=5)
    with pytest.raises(TaskError, match=r"`labels` must be a sequence of 1 targets .* or a mapping .*; got 5"):
        Task([Token("w", 1)], np.ones((1, 1), bool), labels=5)


def test_bool_label_slots_are_refused(no_typecheck):
    """Issue: ``labels={True: w5}`` put the target on slot 1 (a bool is an int), where a bool position in a token is
    refused. Bool keys are refused, naming `labels`; NumPy integers stay accepted."""
    two, w5 = [Token("w", 1), Token("w", 2)], Token("w", 5)
    for key in (True, False, np.bool_(True)):
        with pytest.raises(
            TaskError, match=r"`labels` must map slot indices \(ints, not bools\) to targets; got the key"
        ):
            Task(two, np.eye(2, dtype=bool), labels={key: w5})
    assert Task(two, np.eye(2, dtype=bool), labels={np.int64(1): w5}).labels == (None, w5)


def test_signatures_and_reached_tokens_refuse_what_is_not_a_task(no_typecheck):
    """A docstring review: `node_signatures` and `reached_tokens` met a non-Task with AttributeError or TypeError
    (`merge_tasks` and `audit` named it); now TaskErrors, with the hint for a family."""
    from hassejax.errors import TaskError
    from hassejax.tasks import autoregressive, node_signatures, reached_tokens

    family = autoregressive(3)
    with pytest.raises(TaskError, match=r"got a single Task: pass \[task\]"):
        node_signatures(family.tasks[0])
    with pytest.raises(TaskError, match=r"family.merge\(\)"):
        node_signatures(family)
    with pytest.raises(TaskError, match=r"`task` must be a hassejax.tasks.Task .*family.merge\(\)"):
        reached_tokens(family)
    assert [len(r) for r in reached_tokens(family.merge())] == [1, 2]


def test_sources_are_compared_as_multisets():
    """Review: `{agg2: (w1, w1, w3)}` and `{agg2: (w1, w3)}` were one set, so the first task's tuple won and the
    merged layout's weights depended on the task order ([1/3, 1/3, 1/3] one way, [1/2, 1/2] the other). A repeated
    source weighs twice: the two conflict in either order; a reordering is still the same multiset."""
    w, agg = (lambda k: Token("w", k)), Token("agg", 2)
    m = np.array([[1, 0, 0], [0, 1, 0], [1, 1, 1]], bool)
    a = Task([w(1), w(3), agg], m, labels={2: w(2)}, sources={agg: (w(1), w(1), w(3))}, name="a")
    b = Task([w(1), w(3), agg], m, labels={2: w(2)}, sources={agg: (w(1), w(3))}, name="b")
    c = Task([w(1), w(3), agg], m, labels={2: w(2)}, sources={agg: (w(3), w(1), w(1))}, name="c")
    for family in ([a, b], [b, a]):
        with pytest.raises(TaskError, match=r"builds agg2 from .* one token has one set of sources") as err:
            merge_tasks(family)
        assert "['w1', 'w1', 'w3']" in str(err.value) and "['w1', 'w3']" in str(err.value)
    assert merge_tasks([a, c]).sources[agg] == (w(1), w(1), w(3))


def test_sources_nested_across_tasks_are_refused():
    """One task's aggregate the source of another task's (each task flat alone) is refused by the merge, naming
    `tasks`, before any work."""
    w, a1, a2 = (lambda k: Token("w", k)), Token("agg", 1), Token("agg", 2)
    c = Task([w(2), a1], np.eye(2, dtype=bool), sources={a1: (w(2),)}, name="c")
    d = Task([w(3), a2], np.eye(2, dtype=bool), sources={a2: (a1, w(3))}, name="d")
    with pytest.raises(
        TaskError, match=r"`tasks` \(the sources of all its tasks together\): .*agg2 is built from agg1"
    ):
        merge_tasks([c, d])


def test_traced_mask_is_a_mask_error():
    """Review: a Task given a traced mask (under jax.jit) failed with JAX's raw TracerArrayConversionError."""
    import jax

    with pytest.raises(MaskError, match=r"`mask` must be a concrete array: Task runs on the host"):
        jax.jit(lambda mask: Task([Token("w", 1)], mask).n)(np.ones((1, 1), bool))


def test_nested_list_masks_pass_the_annotations():
    """A Task takes nested lists of bools (as the order functions and the models do); its annotation refused them
    under the suite's runtime checks."""
    task = Task([Token("w", 1), Token("w", 2)], [[True, False], [True, True]])
    assert task.mask.tolist() == [[True, False], [True, True]]
