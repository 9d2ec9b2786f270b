"""Half precision is refused before anything runs; the low-precision tolerance warning says what it checks."""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.dynamics import Softmax, solve_gaussian, solve_particles
from hassejax.dynamics._arguments import check_solver_settings
from hassejax.errors import ParameterError


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_half_precision_gaussian_is_refused(dtype):
    """It crashed in LAPACK (``NotImplementedError: Unsupported dtype float16``, eigh) from inside the solve."""
    e = jnp.eye(2, dtype=dtype)
    with pytest.raises(ParameterError, match=r"`mean0` and `cov0` have dtype .*float32 or float64"):
        solve_gaussian(Softmax(V=e, A=e), jnp.zeros(2, dtype), e / 2, t1=1.0)
    with pytest.raises(ParameterError, match=r"`mean0` and `factor0` have dtype .*float32 or float64"):
        solve_gaussian(Softmax(V=e, A=e), jnp.zeros(2, dtype), factor0=e / 2, t1=1.0)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_half_precision_particles_are_refused(dtype):
    """float16 cannot hold the default threshold `1e4 · λ0` from `λ0 ≈ 6.6` (a blow-up was never reported)."""
    e = jnp.eye(2, dtype=dtype)
    with pytest.raises(ParameterError, match=r"`x0` has dtype .*float32 or float64"):
        solve_particles(Softmax(V=e, A=e), jnp.asarray([[3.0, 0.0], [-3.0, 1.0], [0.0, 2.0]], dtype), t1=1.0)


def test_half_state_with_wider_parameters_is_solved_in_their_dtype():
    """The solve's dtype is the widest of state and parameters: a float16 state beside float32 parameters runs."""
    e = jnp.eye(2, dtype=jnp.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the default rtol in float32
        sol = solve_gaussian(Softmax(V=e, A=e), jnp.zeros(2, jnp.float16), jnp.eye(2, dtype=jnp.float16) / 2, t1=0.1,
                             rtol=1e-6, atol=1e-6)  # fmt: skip
    assert sol.cov_final.dtype == jnp.float32


def test_low_precision_warning_states_its_criterion():
    """It said "`rtol` = 0.01 is below what bfloat16 resolves (eps 7.8e-03)" and advised float32's 1e-6 for any dtype."""
    with pytest.warns(RuntimeWarning, match=r"`rtol` = 1e-08 is below what float32 resolves \(5 rounding units, "
                                            r"5 eps = 6\.0e-07\).*Use rtol >= 6\.0e-07 in float32"):  # fmt: skip
        check_solver_settings(1e-8, 1e-6, 10, None, None, np.float32)
    with pytest.warns(RuntimeWarning, match=r"5 eps = 3\.9e-02\).*rtol >= 3\.9e-02 in bfloat16"):
        check_solver_settings(0.01, 1e-6, 10, None, None, jnp.bfloat16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_solver_settings(1e-6, 1e-6, 10, None, None, np.float32)  # 1e-6 >= 6e-7: no warning
