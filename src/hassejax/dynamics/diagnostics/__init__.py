"""Diagnostics of solved dynamics, one module per question (spec dynamics.md §3, §4, §7).

- :mod:`.spectrum` — how many directions does `Σ` keep? :func:`covariance_eigenvalues`,
  :func:`empirical_covariance`, :func:`rank_relative`, :func:`rank_absolute`,
  :func:`limit_rank`, :func:`spectrum` (:class:`Spectrum`).
- :mod:`.limits` — where does `Σ` go when `A ⪯ 0`? :func:`kernel_basis`,
  :func:`kernel_limit`, :func:`limit_structure` (:class:`LimitStructure`).
- :mod:`.naive` — what does the naive spectral rule predict? :func:`naive_spectrum`,
  :func:`naive_spectrum_low_rank`, :func:`naive_rule`, :func:`naive_regime`.
- :mod:`.growth` — blow-up or divergence from samples? :func:`growth_law`
  (:class:`GrowthFit`, :class:`GrowthTest`, :data:`BLOWUP_EXPONENT`). The solvers decide
  with their own decade test at the size event; this fit serves sampled trajectories.
- :mod:`.outcome` — the one outcome list :class:`Outcome` and the rule
  :func:`outcome_of` from a solve's status and final state to it; :class:`Diagnosis`,
  :func:`outcome_names`. :class:`~hassejax.dynamics.Status` stays the solver's stop reason.
- :mod:`.classify` — :func:`classify` (a solve) and :func:`classify_trajectory` (samples).
- :mod:`.clusters` — how many clusters? :func:`angular_clusters` (single linkage of
  directions) and :func:`cluster_count` (the GLPR rank count); :func:`token_angles`,
  :func:`angular_spread` for planar tokens.

Everything on arrays is a pure function with fixed output shapes, so it runs under ``jit``
and ``vmap`` (and inside :func:`~hassejax.dynamics.sweep`), except the host-side NumPy
helpers marked so (:mod:`.limits`, :func:`angular_clusters`, :func:`naive_regime`,
:func:`outcome_names`).
"""

from .classify import classify, classify_trajectory
from .clusters import angular_clusters, angular_spread, cluster_count, token_angles
from .growth import BLOWUP_EXPONENT, GrowthFit, GrowthTest, growth_law
from .limits import LimitStructure, kernel_basis, kernel_limit, limit_structure
from .naive import naive_regime, naive_rule, naive_spectrum, naive_spectrum_low_rank
from .outcome import OUTCOME_NAMES, Diagnosis, Outcome, outcome_names, outcome_of
from .spectrum import (
    Spectrum,
    covariance_eigenvalues,
    empirical_covariance,
    limit_rank,
    rank_absolute,
    rank_relative,
    spectrum,
)

# one line per module: spectrum, limits, naive, growth, outcome and classify, clusters
__all__ = [
    "Spectrum", "covariance_eigenvalues", "empirical_covariance", "rank_relative", "rank_absolute", "limit_rank",
    "spectrum",
    "LimitStructure", "kernel_basis", "kernel_limit", "limit_structure",
    "naive_spectrum", "naive_spectrum_low_rank", "naive_rule", "naive_regime",
    "BLOWUP_EXPONENT", "GrowthFit", "GrowthTest", "growth_law",
    "Outcome", "OUTCOME_NAMES", "Diagnosis", "outcome_of", "outcome_names", "classify", "classify_trajectory",
    "cluster_count", "angular_clusters", "token_angles", "angular_spread",
]  # fmt: skip
