"""Slot names for figures of merged tasks: w3, m3 (mask token), F2, B3, C2 (w'_2)."""

from hassejax.tasks import Task

PREFIX = {"content": "w", "query": "m", "F": "F", "B": "B", "C": "C"}


def slot_names(task: Task) -> list[str]:
    """One short name per slot: stream letter and position id."""
    return [f"{PREFIX.get(s, s)}{tok.position}" for s, tok in zip(task.streams, task.inputs)]
