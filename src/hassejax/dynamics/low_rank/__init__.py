"""Trained (rank-`k`) attention heads and the exact `k`-dimensional forms of their dynamics (derived; spec dynamics.md §1, §2, §4).

A head with factors `Q, K, W_V ∈ R^{k×d}`, `W_O ∈ R^{d×k}` (:class:`LowRankSoftmax`; a
trained BERT head, :func:`hassejax.pretrained.head_parameters`) has `A = KᵀQ` and
`V = W_O W_V` of rank at most `k`, and every velocity lies in `range W_O`. Both dynamics
then live in `k` dimensions, exactly:

- :func:`solve_low_rank_gaussian`: the Gaussian moment ODE as a `k×k` ODE for `(b, Ψ)`
  (:class:`GaussianReduction`), `α = α0 + W_O b`, `Σ = ΦΣ0Φᵀ`, `Φ = I + W_O Ψ Q`;
- :func:`solve_low_rank_particles` (and :func:`solve_low_rank_particles_each`, run by run):
  the particle system on padded groups of tokens for `z`, `x = x0 + zW_Oᵀ`
  (:class:`ParticleReduction`).

Both use the shared solve of :func:`~hassejax.dynamics.solve_gaussian` and
:func:`~hassejax.dynamics.solve_particles` (``_solve.integrate``: events, statuses, decade
test; solver and step-size controller choosable) and return the solution types
:class:`LowRankGaussianSolution`, :class:`LowRankParticleSolution` (subclasses of
:class:`~hassejax.dynamics.AbstractSolution`; ``to_gaussian`` / ``to_particles`` give the
ordinary ones). :func:`gaussian_covariances`, :func:`particle_covariances` map many reduced
states back to `d×d` covariances on the host; :func:`initial_rates` compares `Σ'(0)` of
tokens with the Gaussian closure at their own moments.
"""

from ._common import AbstractReduction
from ._covariance import gaussian_covariances, particle_covariances
from ._gaussian import GaussianReduction, solve_low_rank_gaussian
from ._kernel import LowRankSoftmax
from ._particles import ParticleReduction, solve_low_rank_particles, solve_low_rank_particles_each
from ._rates import InitialRates, initial_rates
from ._solution import LowRankGaussianSolution, LowRankParticleSolution

__all__ = [
    "LowRankSoftmax",
    "AbstractReduction",
    "GaussianReduction",
    "ParticleReduction",
    "LowRankGaussianSolution",
    "LowRankParticleSolution",
    "solve_low_rank_gaussian",
    "solve_low_rank_particles",
    "solve_low_rank_particles_each",
    "gaussian_covariances",
    "particle_covariances",
    "InitialRates",
    "initial_rates",
]
