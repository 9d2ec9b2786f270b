"""Covariances that are not PSD, given to the functions that take one as it comes.

The Gaussian energies, ``gaussian_affine`` / ``moment_derivatives``, ``LowRankGaussianSolution.to_gaussian`` and the
Sinkhorn kernel's map without a factor took `Σ^{1/2}` with the negative eigenvalues clipped, so an indefinite `cov`
gave the answer of its PSD part, silently (a review). Now a concrete finite one is refused by the rule of the
solvers' `cov0` check, and a traced one gives NaN (the energies, the maps) or the status ``indefinite``
(``to_gaussian``, as the solve). A covariance past a blow-up (inf entries) and the internal callers (the rate test of
``classify``) go through as before.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.dynamics import (
    LowRankSoftmax,
    Sinkhorn,
    Softmax,
    Status,
    gaussian_affine,
    gaussian_interaction_energy,
    gaussian_sinkhorn_energy,
    moment_derivatives,
    solve_low_rank_gaussian,
)
from hassejax.errors import ParameterError

BAD = jnp.diag(jnp.array([1.0, -0.1]))  # indefinite
GOOD = jnp.diag(jnp.array([1.0, 0.0]))  # singular, PSD
ROUNDOFF = jnp.diag(jnp.array([1.0, -1e-12]))  # PSD up to check_psd's round-off
MEAN = jnp.array([0.3, -0.2])
A = jnp.array([[-0.5, 0.1], [0.2, -0.3]])
MODEL = Softmax(V=jnp.eye(2), A=A)
SINKHORN = Sinkhorn(V=jnp.eye(2), A=jnp.eye(2))

CALLS = {
    "interaction_energy": lambda cov: gaussian_interaction_energy(MEAN, cov, A).value,
    "sinkhorn_energy": lambda cov: gaussian_sinkhorn_energy(MEAN, cov, A),
    "gaussian_affine": lambda cov: gaussian_affine(MODEL, 0.0, MEAN, cov)[0],
    "moment_derivatives": lambda cov: moment_derivatives(MODEL, 0.0, MEAN, cov)[1],
    "sinkhorn_map": lambda cov: SINKHORN.gaussian_affine(0.0, MEAN, cov)[0],
}


@pytest.mark.parametrize("name", list(CALLS))
def test_concrete_indefinite_refused(name):
    with pytest.raises(ParameterError, match="`cov` must be positive semidefinite"):
        CALLS[name](BAD)


@pytest.mark.parametrize("name", list(CALLS))
def test_traced_indefinite_nan_and_valid_unchanged(name):
    f = CALLS[name]
    assert np.all(np.isnan(np.asarray(jax.jit(f)(BAD))))
    for cov in (GOOD, ROUNDOFF):  # PSD (up to round-off): the same values concrete and traced
        np.testing.assert_array_equal(np.asarray(jax.jit(f)(cov)), np.asarray(f(cov)))
        assert np.all(np.isfinite(np.asarray(f(cov))))


def test_batched_energy_marks_only_the_indefinite_member():
    covs = jnp.stack([GOOD, BAD, jnp.eye(2) / 4])
    means = jnp.zeros((3, 2))
    with pytest.raises(ParameterError, match="positive semidefinite"):
        gaussian_sinkhorn_energy(means, covs, A)
    out = np.asarray(jax.jit(lambda c: gaussian_sinkhorn_energy(means, c, A))(covs))
    assert np.isnan(out[1]) and np.all(np.isfinite(out[[0, 2]]))
    e = jax.jit(lambda c: gaussian_interaction_energy(means, c, A))(covs)
    assert np.isnan(e.value[1]) and not bool(e.finite[1]) and bool(e.finite[0])


def test_non_finite_covariance_goes_through():
    """A state past a blow-up is computed through, not refused (NaN/inf out, as before)."""
    inf_cov = jnp.array([[jnp.inf, 0.0], [0.0, 1.0]])
    _, dcov = moment_derivatives(MODEL, 0.0, MEAN, inf_cov)
    assert not np.all(np.isfinite(np.asarray(dcov)))
    gaussian_sinkhorn_energy(MEAN, inf_cov, A)  # no error


def test_classify_rate_takes_an_indefinite_final_state():
    """The rate test of ``classify`` calls the moment derivatives on the solution's final state, unchecked."""
    from hassejax.dynamics import solve_gaussian
    from hassejax.dynamics.diagnostics import classify

    sol = solve_gaussian(MODEL, MEAN, jnp.eye(2) / 2, t1=0.1)
    sol = sol.__class__(**{**{k: getattr(sol, k) for k in sol.__dataclass_fields__}, "cov_final": BAD})
    classify(sol, model=MODEL)  # no ParameterError


def _low_rank():
    e = jnp.array([[1.0, 0.0]])
    head = LowRankSoftmax(e, e, e, e.T)
    sol = solve_low_rank_gaussian(head, jnp.zeros(2), jnp.eye(2) / 2, t1=0.1)
    return head, sol


def test_to_gaussian_indefinite():
    head, sol = _low_rank()
    with pytest.raises(ParameterError, match="`cov0` must be positive semidefinite"):
        sol.to_gaussian(head, jnp.zeros(2), BAD)
    status = jax.jit(lambda c: sol.to_gaussian(head, jnp.zeros(2), c).status)
    assert int(status(BAD)) == Status.indefinite
    assert int(status(jnp.eye(2) / 2)) == int(sol.status) == int(sol.to_gaussian(head, jnp.zeros(2), GOOD).status)
