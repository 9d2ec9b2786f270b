"""The partial-order core (spec hasse.md §1): closure, classes, quotient, Hasse diagram."""

from .closure import layer_adjacency, reachability

__all__ = ["layer_adjacency", "reachability"]
