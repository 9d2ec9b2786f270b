"""Mean-field check (spec dynamics.md §5): particles sampled from N(α0, Σ0) follow the
Gaussian moment ODE up to an error that falls like n^{-1/2}."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hassejax._xla_flags import jit_at_default_level
from hassejax.dynamics import Softmax, Status, solve_gaussian, solve_particles

pytestmark = pytest.mark.slow  # n up to 2048, 5 seeds each (about 15 s on a quiet CPU)

V = np.array([[0.8, 0.1], [-0.2, 0.6]])
A = np.array([[0.5, 0.2], [-0.3, 0.4]]) / np.sqrt(2)  # the paper's Q/√d scaling folded into A
ALPHA0 = np.array([0.3, -0.2])
SIGMA0 = np.array([[0.7, 0.1], [0.1, 0.5]])


# n up to 2048 tokens: programs that run longer than they compile, at XLA's default level rather than the suite's level
# 0 (tests/conftest.py): with jaxlib 0.10.2's reductions kept out of YNNPACK (hassejax._xla_flags.correctness_flags)
# the level-0 reductions over n ran 4.5x slower (this test 14.7 -> 33.9 s in the suite)
@jit_at_default_level
def _particles(x0):
    return solve_particles(Softmax(V=V, A=A), x0, t1=1.0, rtol=1e-7, atol=1e-9)


def test_particle_moments_converge_to_gaussian_ode_at_rate_one_half():
    p = Softmax(V=V, A=A)
    ref = solve_gaussian(p, ALPHA0, SIGMA0, t1=1.0, rtol=1e-10, atol=1e-12)
    assert int(ref.status) == Status.completed
    alpha1, sigma1 = np.asarray(ref.mean_final), np.asarray(ref.cov_final)
    lower = np.linalg.cholesky(SIGMA0)
    ns = np.array([64, 256, 1024, 2048])
    errors = []
    for n in ns:
        per_seed = []
        for seed in range(5):
            z = jax.random.normal(jax.random.PRNGKey(1000 * int(n) + seed), (int(n), 2), dtype=jnp.float64)
            x0 = ALPHA0 + z @ lower.T
            sol = _particles(x0)
            assert int(sol.status) == Status.completed
            x1 = np.asarray(sol.x_final)
            err = np.linalg.norm(x1.mean(0) - alpha1) + np.linalg.norm(np.cov(x1.T, bias=True) - sigma1)
            per_seed.append(err)
        errors.append(np.mean(per_seed))
    errors = np.array(errors)
    slope = np.polyfit(np.log(ns), np.log(errors), 1)[0]
    assert -0.65 <= slope <= -0.35, (slope, errors)
    # the initial sampling error is amplified about 2–3× by t = 1 here; 32× more tokens give
    # about 5.7× less error
    assert errors[-1] < errors[0] / 4
