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
    solve_gaussian,
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


def _float32_rank_one(d: int, count: int) -> jnp.ndarray:
    """`count` float32 `u uᵀ` of dimension `d`: PSD up to float32's round-off, several with a smallest eigenvalue
    near `−5e-8 · max|C|` in float64 (beyond float64's rule, within float32's)."""
    u = jnp.asarray(np.random.default_rng(0).normal(size=(count, d)), jnp.float32)
    return u[:, :, None] * u[:, None, :]


@pytest.mark.filterwarnings("ignore:`cov0` is rank-deficient:RuntimeWarning")  # the covariance state's advice
def test_a_float32_covariance_keeps_float32_round_off_beside_float64_inputs():
    """A review: a valid float32 rank-one `cov` (PSD up to float32 round-off) with a float64 mean or `A` gave NaN
    energies and a solve `indefinite` (18 of 60 draws at d = 3): the float64 copy was checked by float64's rule."""
    covs = _float32_rank_one(3, 60)
    lam = np.linalg.eigvalsh(np.asarray(covs, np.float64))[:, 0] / np.max(np.abs(np.asarray(covs)), axis=(1, 2))
    assert np.sum(lam < -1e-8) >= 5  # beyond float64's rule: the cases that failed
    a3 = np.array([[-0.5, 0.1, 0.0], [0.2, -0.3, 0.0], [0.0, 0.1, -0.4]])  # float64
    mean = np.zeros(3)
    # the energies of the whole batch at once (a concrete batch: checked member by member, then one program)
    assert np.all(np.asarray(gaussian_interaction_energy(np.zeros((60, 3)), covs, 0.01 * a3).finite))
    assert np.all(np.isfinite(np.asarray(gaussian_sinkhorn_energy(np.zeros((60, 3)), covs, a3))))
    softmax = Softmax(V=np.eye(3), A=-a3)
    worst = covs[np.argsort(lam)[:5]]
    # the factor state's flag (the projective state takes the same one) and the covariance state's own
    for state in ("factor", "covariance"):
        run = jax.jit(jax.vmap(lambda c, state=state: solve_gaussian(softmax, mean, c, t1=0.5, state=state).status))
        assert not np.any(np.asarray(run(worst)) == Status.indefinite), state
    # a concrete one: check_psd in float32's round-off, then the program's flag
    assert int(solve_gaussian(softmax, mean, worst[0], t1=0.5).status) != Status.indefinite
    head, sol = _low_rank()  # float64; a float32 rank-one cov0 under jit
    status = jax.jit(jax.vmap(lambda c: sol.to_gaussian(head, jnp.zeros(2), c).status))(_float32_rank_one(2, 60))
    assert not np.any(np.asarray(status) == Status.indefinite)


def test_batched_concrete_covariances_are_checked_member_by_member():
    """A review: the batch's largest entry set the tolerance of every member, and one member with inf entries
    switched the check off: an indefinite member came back NaN, not refused."""
    bad = jnp.diag(jnp.array([1.0, -1e-3]))
    for other in (1e6 * jnp.eye(2), jnp.diag(jnp.array([jnp.inf, 1.0]))):
        with pytest.raises(ParameterError, match="`cov` must be positive semidefinite"):
            gaussian_sinkhorn_energy(jnp.zeros((2, 2)), jnp.stack([other, bad]), -1e-7 * jnp.eye(2))
    # members that are covariances each by their own scale pass
    ok = jnp.stack([1e6 * jnp.eye(2), jnp.diag(jnp.array([1.0, -1e-12]))])
    assert np.all(np.isfinite(np.asarray(gaussian_sinkhorn_energy(jnp.zeros((2, 2)), ok, -1e-7 * jnp.eye(2)))))


def test_traced_indefinite_map_has_no_derivative():
    """A review: `gaussian_affine` of a traced indefinite `cov` was NaN with a derivative of exactly 0 (`where`)."""
    f = lambda c: jnp.sum(gaussian_affine(MODEL, 0.0, MEAN, c)[0])
    assert np.all(np.isnan(np.asarray(jax.grad(f)(BAD))))
    g = jax.grad(f)(jnp.eye(2) / 2)  # a covariance: the derivative of the map, finite
    assert np.all(np.isfinite(np.asarray(g)))


def test_closed_forms_check_batches_member_by_member_and_flag_with_a_nan_derivative(no_typecheck):
    """A review (session 50): `check_psd` scaled every member by the batch's largest entry (an indefinite member came
    back NaN beside `1e6 I`); a traced indefinite `Σ0` gave a NaN blow-up time with a derivative of exactly 0; an int
    `Σ0` crashed any derivative (a float0 tangent in the eigenvalue rule)."""
    from hassejax.dynamics import blowup_time_closed_form, softmax_covariance_closed_form

    batch = np.stack([1e6 * np.eye(2), np.diag([1.0, -1e-3])])
    for call in (lambda s: blowup_time_closed_form(s, np.eye(2), 1.0),
                 lambda s: softmax_covariance_closed_form(s, np.eye(2), 1.0, 0.1)):  # fmt: skip
        with pytest.raises(ParameterError, match="`Sigma0` must be positive semidefinite"):
            call(batch)
    grad = jax.grad(lambda c: blowup_time_closed_form(c, jnp.eye(2), 1.0))(BAD)
    assert np.all(np.isnan(np.asarray(grad)))
    int_sigma0 = jnp.array([[2, 0], [0, 1]])
    dv = jax.grad(lambda v: blowup_time_closed_form(int_sigma0, jnp.eye(2), v))(1.0)
    assert float(dv) == pytest.approx(-0.25)  # t* = 1/(4v)


def test_half_precision_round_off_is_capped():
    """A review: `10 d ε` of bfloat16 reaches 1 at d = 13, and `−I` passed as a covariance."""
    with pytest.raises(ParameterError, match="`cov` must be positive semidefinite"):
        gaussian_sinkhorn_energy(jnp.zeros(13), -jnp.eye(13, dtype=jnp.bfloat16), 0.1 * jnp.eye(13))
    with pytest.raises(ParameterError, match="`cov` must be positive semidefinite"):
        gaussian_sinkhorn_energy(jnp.zeros(4), jnp.diag(jnp.array([1, 1, 1, -0.3], jnp.bfloat16)), 0.1 * jnp.eye(4))
