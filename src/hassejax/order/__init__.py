"""The partial-order core (spec hasse.md §1): closure, classes, quotient, Hasse diagram.

Names load their module on first use (PEP 562): :func:`flow_summary` on an
:class:`~hassejax.masks.IntervalMask` (the structured route), :class:`HasseDiagram` and
:func:`format_class` run on NumPy and start no JAX; the dense routes import JAX when they run.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "convergence_depth": ".closure",
    "heads_union": ".closure",
    "layer_adjacency": ".closure",
    "reachability": ".closure",
    "HasseDiagram": ".hasse",
    "format_class": ".hasse",
    "classes": ".poset",
    "cover_matrix": ".poset",
    "longest_chain": ".poset",
    "quotient_order": ".poset",
    "width": ".poset",
    "FlowSummary": ".summary",
    "ReachStats": ".summary",
    "choose_route": ".summary",
    "flow_summary": ".summary",
}

__all__ = [
    "layer_adjacency",
    "heads_union",
    "reachability",
    "convergence_depth",
    "classes",
    "quotient_order",
    "cover_matrix",
    "longest_chain",
    "width",
    "HasseDiagram",
    "format_class",
    "flow_summary",
    "FlowSummary",
    "ReachStats",
    "choose_route",
]


def __getattr__(name: str):
    """A public name from its module (:data:`_LAZY`), or a submodule, imported on first use."""
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    if not name.startswith("__"):  # a submodule, as when this package imported them all eagerly
        try:
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
