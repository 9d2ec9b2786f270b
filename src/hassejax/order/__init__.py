"""The partial-order core (spec hasse.md §1): closure, classes, quotient, Hasse diagram."""

from .closure import convergence_depth, layer_adjacency, reachability

__all__ = ["layer_adjacency", "reachability", "convergence_depth"]
