"""Plots with matplotlib only: masks and Hasse diagrams (spec hasse.md §5).

- :func:`draw_mask`: a mask as a heat map with slot labels.
- :func:`draw_hasse`: a Hasse diagram layered by topological generation.
- :mod:`.dynamics`: covariance trajectories in the PSD cone and the unit disk, rank-one rays.
- :func:`draw_outcome_map`, :func:`draw_hatched`: phase maps of dynamics outcomes; :func:`log_bins`,
  :func:`break_wraps`: histogram bins and wrapped angles for the dynamics figures.
- :mod:`.style`: print sizes (at most 7 in wide) and fonts (at least 8 pt) of a paper figure.

:mod:`.dynamics`, :func:`draw_mask`, :func:`break_wraps`, :func:`log_bins` and the phase maps import JAX: they are loaded on first use, so that drawing a
Hasse diagram (``hassejax analyze --png``) starts no JAX.
"""

from importlib import import_module

from .hasse import draw_hasse, hasse_crossings, hasse_figsize, hasse_layout
from .style import COLUMN_WIDTH, MAX_WIDTH, MIN_FONT_PT, TEXT_WIDTH, figsize, paper_style

# Loaded on first use (they import JAX): drawing a Hasse diagram (``hassejax analyze --png``) starts no JAX.
_LAZY = {
    "dynamics": ".dynamics",
    "break_wraps": ".angles",  # these two: jaxtyping's ArrayLike imports JAX
    "log_bins": ".histogram",
    "draw_mask": ".masks",
    "OUTCOME_COLORS": ".phase_map",
    "draw_outcome_map": ".phase_map",
    "draw_hatched": ".phase_map",
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = import_module(_LAZY[name], __name__)
    value = module if name == "dynamics" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


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
