"""Plots with matplotlib only: masks and Hasse diagrams (spec hasse.md §5).

- :func:`draw_mask`: a mask as a heat map with slot labels.
- :func:`draw_hasse`: a Hasse diagram layered by topological generation.
- :mod:`.dynamics`: covariance trajectories in the PSD cone and the unit disk, rank-one rays.
"""

from . import dynamics
from .hasse import draw_hasse, hasse_figsize, hasse_layout
from .masks import draw_mask

__all__ = ["draw_hasse", "hasse_figsize", "hasse_layout", "draw_mask"]

from .angles import break_wraps  # noqa: E402
from .histogram import log_bins  # noqa: E402
from .phase_map import OUTCOME_COLORS, draw_hatched, draw_outcome_map  # noqa: E402

__all__ += ["OUTCOME_COLORS", "draw_outcome_map", "draw_hatched", "log_bins", "break_wraps"]
