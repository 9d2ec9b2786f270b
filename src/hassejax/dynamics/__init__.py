"""Dynamics of deep Transformers: tokens as interacting particles, Gaussian moment ODEs,
blow-up and clustering (Castin, Ablin, Carrillo, Peyré, arXiv:2501.18322; spec dynamics.md).

Public surface (re-exported here; the modules are one concept each):

- :mod:`.result`: :class:`Status` (the one status list of spec §4), solution types.
"""

from .result import (
    STATUS_NAMES,
    AbstractSolution,
    BlowupMethod,
    GaussianSolution,
    ParticleSolution,
    SolverStats,
    Status,
    status_names,
)

__all__ = [
    "STATUS_NAMES",
    "AbstractSolution",
    "BlowupMethod",
    "GaussianSolution",
    "ParticleSolution",
    "SolverStats",
    "Status",
    "status_names",
]

# --- diagnostics / energy / sweeps (owned by the sweeps & diagnostics engineer) ---------
# Add their re-exports below this line (and extend __all__ accordingly).
