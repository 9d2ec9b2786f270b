"""Plots with matplotlib only: masks and Hasse diagrams (spec hasse.md §5).

- :func:`draw_mask`: a mask as a heat map with slot labels.
- :func:`draw_hasse`: a Hasse diagram layered by topological generation.
"""

from .hasse import draw_hasse, hasse_figsize, hasse_layout
from .masks import draw_mask

__all__ = ["draw_hasse", "hasse_figsize", "hasse_layout", "draw_mask"]
