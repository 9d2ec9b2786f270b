"""The partial-order core (spec hasse.md §1): closure, classes, quotient, Hasse diagram."""

from .closure import convergence_depth, heads_union, layer_adjacency, reachability
from .hasse import HasseDiagram, format_class
from .poset import classes, cover_matrix, longest_chain, quotient_order, width
from .summary import FlowSummary, ReachStats, choose_route, flow_summary

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
