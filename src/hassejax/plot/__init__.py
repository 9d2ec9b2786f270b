"""Plots with matplotlib only: masks and Hasse diagrams (spec hasse.md §5).

- :func:`draw_mask`: a mask as a heat map with slot labels.
- :func:`draw_hasse`: a Hasse diagram layered by topological generation.
- :mod:`.dynamics`: covariance trajectories in the PSD cone and the unit disk, rank-one rays.
- :func:`draw_outcome_map`, :func:`draw_hatched`: phase maps of dynamics outcomes; :func:`log_bins`,
  :func:`break_wraps`: histogram bins and wrapped angles for the dynamics figures.
- :mod:`.style`: print sizes (at most 7 in wide) and fonts (at least 8 pt) of a paper figure.
"""

from . import dynamics
from .angles import break_wraps
from .hasse import draw_hasse, hasse_crossings, hasse_figsize, hasse_layout
from .histogram import log_bins
from .masks import draw_mask
from .phase_map import OUTCOME_COLORS, draw_hatched, draw_outcome_map
from .style import COLUMN_WIDTH, MAX_WIDTH, MIN_FONT_PT, TEXT_WIDTH, figsize, paper_style

__all__ = [
    "dynamics",
    "draw_hasse",
    "hasse_figsize",
    "hasse_layout",
    "hasse_crossings",
    "draw_mask",
    "OUTCOME_COLORS",
    "draw_outcome_map",
    "draw_hatched",
    "log_bins",
    "break_wraps",
    "figsize",
    "paper_style",
    "MAX_WIDTH",
    "TEXT_WIDTH",
    "COLUMN_WIDTH",
    "MIN_FONT_PT",
]
