"""Slot names for figures of merged tasks: w3, m3 (mask token), F2, B3, C2 (w'_2)."""

from hassejax.tasks import Task

PREFIX = {"content": "w", "query": "m", "F": "F", "B": "B", "C": "C"}


def slot_names(task: Task) -> list[str]:
    """One short name per slot: stream letter and position id."""
    return [f"{PREFIX.get(s, s)}{tok.position}" for s, tok in zip(task.streams, task.inputs)]


def slot_tex(task: Task) -> list[str]:
    """:func:`slot_names` as mathtext token labels (``$w_{3}$``, ``$m_{3}$``), for streams whose slots are tokens."""
    return [f"${PREFIX.get(s, s)}_{{{tok.position}}}$" for s, tok in zip(task.streams, task.inputs)]


def token_tex(token) -> str:
    """A token as mathtext, the one notation of token labels in every figure: ``$w_{2}$``, and ``$w'_{2}$`` for
    the aggregate token of a butterfly centre (symbol ``"agg"``)."""
    symbol = "w'" if token.symbol == "agg" else token.symbol
    return f"${symbol}_{{{token.position}}}$"


def arrow_tex(token, target) -> str:
    """An input token and its target as one mathtext label, ``$w_{1} \\to w_{2}$``."""
    return token_tex(token)[:-1] + " \\to " + token_tex(target)[1:]
