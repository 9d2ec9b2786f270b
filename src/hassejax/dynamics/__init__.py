"""Dynamics of deep Transformers: tokens as interacting particles, Gaussian moment ODEs,
blow-up and clustering (Castin, Ablin, Carrillo, Peyré, arXiv:2501.18322; spec dynamics.md).

Public surface (re-exported here; the modules are one concept each):

- :mod:`.result`: :class:`Status` (the one status list of spec §4), :class:`BlowupMethod`,
  solution types :class:`GaussianSolution`, :class:`ParticleSolution`.
- :mod:`.params`: :class:`PiecewiseConstant` (time-dependent parameters), :func:`positions`.
- :mod:`.attention`: attention kernels as Equinox modules, one a file
  (:class:`AbstractAttention`; :class:`Softmax`, :class:`L2`, :class:`Sinkhorn`,
  :class:`Sigmoid`, :class:`Linear`; :class:`MultiHead`, :class:`Masked`), each with its
  velocity field and, where it has one, its Gaussian map.
- :mod:`.gaussian`: moment ODEs and :func:`solve_gaussian`.
- :mod:`.particles`: :func:`solve_particles`.
- :mod:`.closed_form`: softmax closed forms, blow-up times, clustering limits.
"""

from . import attention, geometry, paper, powerlaw, projected_euler, sampling  # the figures' helpers (issue 12 item 4)
from .attention import (
    L2,
    AbstractAttention,
    AbstractBilinearAttention,
    Linear,
    Masked,
    MultiHead,
    Sigmoid,
    Sinkhorn,
    Softmax,
)
from .closed_form import (
    blowup_time_closed_form,
    clustering_limit,
    diagonal_blowup_time,
    diagonal_covariance_closed_form,
    softmax_1d_closed_form,
    softmax_covariance_closed_form,
)
from .gaussian import gaussian_affine, moment_derivatives, solve_gaussian
from .params import PiecewiseConstant, positions
from .particles import particle_velocity, solve_particles
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

# one line per topic: result, params, attention kernels, the figures' helpers (modules), gaussian, particles,
# closed forms
__all__ = [
    "STATUS_NAMES", "AbstractSolution", "BlowupMethod", "GaussianSolution", "ParticleSolution", "SolverStats", "Status",
    "status_names",
    "PiecewiseConstant", "positions",
    "AbstractAttention", "AbstractBilinearAttention", "Softmax", "L2", "Sinkhorn", "Sigmoid", "Linear", "MultiHead",
    "Masked", "attention",
    "geometry", "paper", "powerlaw", "projected_euler", "sampling",
    "gaussian_affine", "moment_derivatives", "solve_gaussian",
    "particle_velocity", "solve_particles",
    "blowup_time_closed_form", "clustering_limit", "diagonal_blowup_time", "diagonal_covariance_closed_form",
    "softmax_1d_closed_form", "softmax_covariance_closed_form",
]  # fmt: skip

# --- diagnostics / energy / sweeps (owned by the sweeps & diagnostics engineer) ---------
# Re-exports of diagnostics, energy and sweeps.
from .diagnostics import (
    BLOWUP_EXPONENT,
    OUTCOME_NAMES,
    Diagnosis,
    GrowthFit,
    GrowthTest,
    Outcome,
    Spectrum,
    classify,
    classify_trajectory,
    cluster_count,
    covariance_eigenvalues,
    empirical_covariance,
    growth_law,
    limit_rank,
    outcome_names,
    rank_absolute,
    rank_relative,
    spectrum,
)
from .energy import GaussianEnergy, gaussian_interaction_energy, gaussian_sinkhorn_energy, interaction_energy
from .sweep_cost import softmax_gaussian_cost
from .sweeps import Sweep, batch_size, sweep, sweep_program

__all__ += [
    # diagnostics
    "BLOWUP_EXPONENT",
    "OUTCOME_NAMES",
    "Diagnosis",
    "GrowthFit",
    "GrowthTest",
    "Outcome",
    "Spectrum",
    "classify",
    "classify_trajectory",
    "cluster_count",
    "covariance_eigenvalues",
    "empirical_covariance",
    "growth_law",
    "limit_rank",
    "outcome_names",
    "rank_absolute",
    "rank_relative",
    "spectrum",
    # energy
    "GaussianEnergy",
    "gaussian_interaction_energy",
    "gaussian_sinkhorn_energy",
    "interaction_energy",
    # sweeps
    "batch_size",
    "sweep",
    "sweep_program",
    "Sweep",
    "softmax_gaussian_cost",
]

# --- exact rank-k solves of trained heads (low_rank) -------------------------------------
from .low_rank import (  # noqa: E402 - grouped with its __all__ entries
    LowRankGaussianSolution,
    LowRankParticleSolution,
    LowRankSoftmax,
    solve_low_rank_gaussian,
    solve_low_rank_particles,
    solve_low_rank_particles_each,
)

__all__ += [
    "LowRankSoftmax",
    "LowRankGaussianSolution",
    "LowRankParticleSolution",
    "solve_low_rank_gaussian",
    "solve_low_rank_particles",
    "solve_low_rank_particles_each",
]
