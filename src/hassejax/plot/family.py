"""Drawing a task family before its merge: one Hasse diagram per task, equivalent nodes joined.

Each task's diagram (classes of its closure, covering pairs; spec hasse.md §2) is drawn in an
axes of its own with :func:`~hassejax.plot.draw_hasse`, all on common layers, and every node
is joined by a dashed curve to the next node (in task order) that is equivalent to it
(Li & Guo, arXiv:2606.09951, Def. 3.5: same inputs, equivalent covered nodes), i.e. that the
minimal merge (Thm 3.7) identifies with it.

Source: Li & Guo, arXiv:2606.09951, Def. 3.5 and Thm 3.7 (paper); spec hasse.md §2 (derived).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..errors import ParameterError
from ..tasks import Task, node_signatures
from .hasse import draw_hasse

__all__ = ["FamilyDrawing", "draw_task_family", "per_task_slots"]


@dataclasses.dataclass(frozen=True)
class FamilyDrawing:
    """What :func:`draw_task_family` drew.

    - `task_nodes`: number of Hasse nodes of every task (classes of its closure), task order.
    - `merged_nodes`: number of distinct nodes up to equivalence (the minimal merge's nodes).
    - `joins`: the drawn joins ``((task a, class a), (task b, class b))`` (class ids of each
      task's :meth:`~hassejax.tasks.Task.diagram`); ``sum(task_nodes) - merged_nodes`` of them.
    - `signature`: per task, the signature id of each of its classes (equal ids = equivalent).
    """

    task_nodes: tuple[int, ...]
    merged_nodes: int
    joins: tuple[tuple[tuple[int, int], tuple[int, int]], ...]
    signature: tuple[tuple[int, ...], ...]


def _per_task(value, tasks, name: str) -> list[list]:
    out = [list(v) for v in value]
    if len(out) != len(tasks) or any(len(v) != t.n for v, t in zip(out, tasks)):
        raise ParameterError(
            f"`{name}` must hold one sequence per task with one entry per slot (sizes {[t.n for t in tasks]}); "
            f"got sizes {[len(v) for v in out]}."
        )
    return out


def draw_task_family(
    tasks: Sequence[Task],
    axes,
    *,
    names: Sequence[Sequence[str]],
    levels: Sequence[Sequence[int]],
    order_key: Sequence[Sequence[float | int]] | None = None,
    colors: Sequence[Sequence[str]] | None = None,
    titles: Sequence[str] | None = None,
    join_color: str = "#2ca02c",
    fontsize: float | int = 8.5,
    min_fontsize: float | int | None = 8.0,
    rad: float | int = 0.25,
) -> FamilyDrawing:
    """Draw every task's Hasse diagram in its own axes and join equivalent nodes across tasks.

    **Arguments:**

    - `tasks`: the family, a sequence of :class:`~hassejax.tasks.Task`.
    - `axes`: one matplotlib ``Axes`` per task (a sequence or array; empty axes, typically one row).
    - `names`: per task, one name per slot (e.g. ``"w2"``); a node shows its slots' names.
    - `levels`: per task, the layer of each slot's node (equal within a class, rising along
      every covering pair): common layers make equivalent nodes line up across tasks.
    - `order_key`: optional, per task, a number per slot ordering each layer (as
      :func:`~hassejax.plot.hasse_layout`'s `order_key`, read at a class's first slot).
    - `colors`: optional, per task, a fill colour per slot (read at a class's first slot).
    - `titles`: optional axes title per task.
    - `join_color`, `rad`: colour and curvature (matplotlib ``arc3`` radius) of the joins.
    - `fontsize`, `min_fontsize`: as :func:`~hassejax.plot.draw_hasse`.

    **Returns:** a :class:`FamilyDrawing` with the node counts and the joins drawn.

    **Raises:** :class:`~hassejax.errors.ParameterError` if `axes`, `names`, `levels`,
    `order_key`, `colors` or `titles` do not match the tasks and their slots, or as
    :func:`~hassejax.plot.draw_hasse` (levels that do not rise along a cover, a font below
    `min_fontsize`).

    **Example:**

    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> from hassejax.tasks import autoregressive
    >>> tasks = autoregressive(4).tasks  # T1 = (w1), T2 = (w1 < w2), T3 = (w1 < w2 < w3)
    >>> fig, axes = plt.subplots(1, 3, figsize=(4, 2))
    >>> names = [[str(x) for x in t.inputs] for t in tasks]
    >>> levels = [[x.position - 1 for x in t.inputs] for t in tasks]
    >>> drawn = draw_task_family(tasks, axes, names=names, levels=levels, min_fontsize=None)
    >>> drawn.task_nodes, drawn.merged_nodes, len(drawn.joins)
    ((1, 2, 3), 3, 3)
    >>> plt.close(fig)
    """
    from matplotlib.patches import ConnectionPatch

    tasks = tuple(tasks)
    axes = list(axes)
    if len(axes) != len(tasks):
        raise ParameterError(f"`axes` must hold one Axes per task ({len(tasks)}); got {len(axes)}.")
    names = _per_task(names, tasks, "names")
    levels = _per_task(levels, tasks, "levels")
    keys = None if order_key is None else _per_task(order_key, tasks, "order_key")
    fills = None if colors is None else _per_task(colors, tasks, "colors")
    if titles is not None and len(titles) != len(tasks):
        raise ParameterError(f"`titles` must hold one title per task ({len(tasks)}); got {len(titles)}.")
    slot_sig, _ = node_signatures(tasks)
    num_levels = 1 + max(max(int(x) for x in lv) for lv in levels)
    texts, signature, sizes = [], [], []
    for t, (task, ax) in enumerate(zip(tasks, axes)):
        d = task.diagram()
        first = [mem[0] for mem in d.classes]
        drawn_before = len(ax.texts)
        draw_hasse(
            d,
            ax=ax,
            names=names[t],
            title=None if titles is None else titles[t],
            fontsize=fontsize,
            min_fontsize=min_fontsize,
            levels=[int(levels[t][s]) for s in first],
            order_key=None if keys is None else [float(keys[t][s]) for s in first],
            class_colors=None if fills is None else [fills[t][s] for s in first],
            num_levels=num_levels,
        )
        texts.append(ax.texts[drawn_before : drawn_before + d.num_classes])
        signature.append(tuple(int(slot_sig[t][s]) for s in first))
        sizes.append(d.num_classes)
    # Join each node to the next equivalent node in task order.
    last: dict[int, tuple[int, int]] = {}
    joins = []
    for t, sigs in enumerate(signature):
        for c, sig in enumerate(sigs):
            if sig in last:
                ta, ca = last[sig]
                joins.append(((ta, ca), (t, c)))
                patch = ConnectionPatch(
                    xyA=texts[ta][ca].get_position(),
                    coordsA=axes[ta].transData,
                    xyB=texts[t][c].get_position(),
                    coordsB=axes[t].transData,
                    connectionstyle=f"arc3,rad={rad}",
                    linestyle=(0, (3, 2)),
                    color=join_color,
                    linewidth=1.0,
                    shrinkA=9,
                    shrinkB=9,
                    zorder=1,
                )
                axes[t].figure.add_artist(patch)
            last[sig] = (t, c)
    merged = len({s for sigs in signature for s in sigs})
    return FamilyDrawing(tuple(sizes), merged, tuple(joins), tuple(signature))


def per_task_slots(values: Sequence, slot_map: Sequence[Sequence[int]]) -> list[list]:
    """Per task, the value of every slot read off the merged slot it maps to.

    Use it to give :func:`draw_task_family` the `levels`, `order_key`, `colors` or `names` of a
    merged layout: `values[m]` belongs to merged slot `m`, and `slot_map[t][s]` is the merged
    slot of slot `s` of task `t` (:attr:`hassejax.tasks.MergedTask.slot_map`).

    **Example:**

    >>> per_task_slots(["F1", "F2", "C2"], [[0], [0, 1, 2]])
    [['F1'], ['F1', 'F2', 'C2']]
    """
    return [[values[int(m)] for m in smap] for smap in slot_map]
