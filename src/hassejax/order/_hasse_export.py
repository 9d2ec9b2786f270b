"""Naming, export and import of Hasse diagrams: class labels, Graphviz DOT, dicts and JSON (spec hasse.md §1.7).

:func:`format_class` names a class by its positions; :class:`HasseExport` holds the export
and import methods of :class:`~hassejax.order.HasseDiagram` (which derives from it).
"""

from __future__ import annotations

import json
import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, SupportsIndex

import networkx as nx
import numpy as np

from ..errors import MaskError

__all__ = ["format_class", "HasseExport"]

_JSON_FORMAT = "hassejax.HasseDiagram"
_JSON_VERSION = 1


def _position(p) -> int:
    """A member position: an integer >= 0 (Python or NumPy; a bool, a float or a string is refused, as are
    negative positions: ``int(1.9)`` was written as 1)."""
    try:
        i = None if isinstance(p, (bool, np.bool_)) or getattr(p, "dtype", None) == np.bool_ else operator.index(p)
    except TypeError:
        i = None
    if i is None or i < 0:
        raise MaskError(f"`members` must be positions, integers >= 0; got {p!r:.40} ({type(p).__name__}).")
    return i


def format_class(members: Iterable[SupportsIndex], names: Sequence[str] | Mapping[int, str] | None = None) -> str:
    """Name a class by its member positions, compressing runs: ``{0..7, 9, 11}``.

    **Arguments:**

    - `members`: the positions of the class (any order; duplicates are an error).
    - `names`: optional slot names (e.g. ``["w1", "w2", "m1"]``, or a mapping from positions), indexed by position; when
      given, the members are written by name, comma separated, without run compression.

    **Returns:** a string in braces. Runs of three or more consecutive positions are written
    ``a..b`` (both ends included); shorter runs are listed.

    **Raises:** :class:`~hassejax.errors.MaskError` for a member that is not an integer >= 0, a repeated
    position, or a position that `names` (a
    sequence, or a mapping from positions) has no name for.

    Source: (derived), no paper: a label for a class of mutually reachable positions (spec hasse.md §1.5).

    **Example:** a run of four positions is compressed, a run of two is listed; with names, positions 0 and 2
    are written by name:

    ```python
    >>> from hassejax.order import format_class
    >>> format_class([12, 0, 1, 2, 3, 9, 11])
    '{0..3, 9, 11, 12}'
    >>> format_class([2, 0], names=["w1", "w2", "m1"])
    '{w1, m1}'

    ```
    """
    pos = sorted(_position(p) for p in members)
    if len(set(pos)) != len(pos):
        raise MaskError(f"`members` must not repeat a position; got {list(members)}.")
    if names is not None:
        written = []
        for p in pos:
            try:
                if p < 0 and not isinstance(names, Mapping):
                    raise IndexError(p)
                written.append(str(names[p]))
            except (IndexError, KeyError):
                raise MaskError(f"`names` must name every member; it has no name for position {p}.") from None
        return "{" + ", ".join(written) + "}"
    parts: list[str] = []
    i = 0
    while i < len(pos):
        j = i
        while j + 1 < len(pos) and pos[j + 1] == pos[j] + 1:
            j += 1
        if j - i >= 2:
            parts.append(f"{pos[i]}..{pos[j]}")
        else:
            parts.extend(str(p) for p in pos[i : j + 1])
        i = j + 1
    return "{" + ", ".join(parts) + "}"


class HasseExport:
    """Export and import methods of :class:`~hassejax.order.HasseDiagram` (a mixin: the diagram's
    ``classes``, ``edges`` and ``_n`` come from the subclass)."""

    def to_dot(self, name: str = "hasse", names: Sequence[str] | None = None) -> str:
        """The diagram in Graphviz DOT, written directly (no pydot needed).

        Nodes are the class ids, labelled by their members (runs compressed, see
        :func:`format_class`, or by slot `names`); edges ``u -> v`` as in :attr:`graph`;
        ``rankdir=BT`` puts minimal classes at the bottom.

        **Arguments:**

        - `name`: the graph name (letters, digits, underscores).
        - `names`: optional slot names, one per position, used in the labels.

        **Returns:** the DOT source as a string.
        """
        if not name or not name.replace("_", "a").isalnum() or name[0].isdigit():
            raise MaskError(f"`name` must be a DOT identifier (letters, digits, underscores); got {name!r}.")
        names = self._check_names(names)
        lines = [
            f"digraph {name} {{",
            "  // edge u -> v: class u is covered by class v (information flows from u to v)",
            "  rankdir=BT;",
            '  node [shape=box, style=rounded, fontname="monospace"];',
        ]
        for c, mem in enumerate(self.classes):
            label = format_class(mem, names).replace("\\", "\\\\").replace('"', '\\"')
            lines.append(f'  {c} [label="{label}"];')
        for u, v in self.edges:
            lines.append(f"  {u} -> {v};")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def _check_names(self, names):
        if names is None:
            return None
        names = [str(x) for x in names]
        if len(names) != self._n:
            raise MaskError(f"`names` must have one entry per position (n = {self._n}); got {len(names)}.")
        return names

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``{"format", "version", "n", "classes", "edges"}``.

        ``classes[c]`` lists the positions of class `c`; ``edges`` lists ``[u, v]`` pairs,
        `[u] ⋖ [v]`.
        """
        return {
            "format": _JSON_FORMAT,
            "version": _JSON_VERSION,
            "n": self._n,
            "classes": [list(m) for m in self.classes],
            "edges": [list(e) for e in self.edges],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HasseExport:
        """Inverse of :meth:`to_dict`; validates like the constructor.

        **Raises:** :class:`~hassejax.errors.MaskError` for a missing key, a wrong format tag
        or version, or an invalid diagram.
        """
        if not isinstance(data, dict):
            raise MaskError(f"`data` must be a dict as written by HasseDiagram.to_dict; got {type(data).__name__}.")
        missing = [k for k in ("format", "version", "n", "classes", "edges") if k not in data]
        if missing:
            raise MaskError(f"`data` lacks the key(s) {missing} of a HasseDiagram dict.")
        if data["format"] != _JSON_FORMAT or data["version"] != _JSON_VERSION:
            raise MaskError(
                f"`data` must have format {_JSON_FORMAT!r} version {_JSON_VERSION}; "
                f"got {data['format']!r} version {data['version']!r}."
            )
        if isinstance(data["n"], bool) or not isinstance(data["n"], int):
            raise MaskError(f"`data`: 'n' must be an int (the number of positions); got {data['n']!r}.")
        if not isinstance(data["classes"], list) or not isinstance(data["edges"], list):
            raise MaskError("`data`: 'classes' and 'edges' must be lists.")
        g = nx.DiGraph()
        for c, mem in enumerate(data["classes"]):
            if not isinstance(mem, list) or not all(isinstance(p, int) and not isinstance(p, bool) for p in mem):
                raise MaskError(f"`data`: class {c} must be a list of int positions; got {mem!r}.")
            g.add_node(c, members=mem)
        for e in data["edges"]:
            if (
                not isinstance(e, list)
                or len(e) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < len(data["classes"]) for x in e)
            ):
                raise MaskError(f"`data`: every edge must be a pair [u, v] of class ids; got {e!r}.")
            g.add_edge(*e)
        return cls(g, data["n"])

    def to_json(self, indent: int | None = None) -> str:
        """The diagram as a JSON string (see :meth:`to_dict`)."""
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_json(cls, text: str | bytes | bytearray) -> HasseExport:
        """Inverse of :meth:`to_json`.

        **Raises:** :class:`~hassejax.errors.MaskError` for `text` that is not a string (``bytes`` are taken, as
        :func:`json.loads` takes them), not JSON or not a valid diagram.
        """
        if not isinstance(text, (str, bytes, bytearray)):
            raise MaskError(
                f"`text` must be a JSON string (the output of to_json); got an object of type {type(text).__name__}."
            )
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise MaskError(f"`text` is not valid JSON: {err}.") from None
        return cls.from_dict(data)
