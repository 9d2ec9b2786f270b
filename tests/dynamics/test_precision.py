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


@pytest.mark.parametrize("state", ["factor", "covariance", "projective"])
@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_half_state_with_wider_parameters_is_refused(dtype, state):
    """A new user: the README says states in half precision are refused up front, but a float16 `mean0`/`cov0`
    beside float32/float64 parameters was silently promoted to the parameters' dtype and solved (only a solve whose
    dtype was itself half was refused). Each half-precision state argument is named."""
    for e in (jnp.eye(2, dtype=jnp.float32), jnp.eye(2, dtype=jnp.float64)):
        model = Softmax(V=e, A=e)
        with pytest.raises(ParameterError, match=rf"`mean0` and `cov0` have dtype {dtype.dtype.name}: a state in half "
                                                 rf"precision is refused, not promoted to the solve's {e.dtype.name}"):  # fmt: skip
            solve_gaussian(model, jnp.zeros(2, dtype), jnp.eye(2, dtype=dtype) / 2, t1=0.1, state=state)
        with pytest.raises(ParameterError, match=r"^`cov0` has dtype .*refused, not promoted"):
            solve_gaussian(model, jnp.zeros(2, e.dtype), jnp.eye(2, dtype=dtype) / 2, t1=0.1, state=state)
        if state != "covariance":
            with pytest.raises(ParameterError, match=r"^`factor0` has dtype .*refused, not promoted"):
                solve_gaussian(model, jnp.zeros(2, e.dtype), factor0=jnp.eye(2, dtype=dtype), t1=0.1, state=state)
    with pytest.raises(
        ParameterError, match=r"^`mean0` has dtype float16 and `cov0` has dtype bfloat16: .*not promoted"
    ):
        solve_gaussian(model, jnp.zeros(2, jnp.float16), jnp.eye(2, dtype=jnp.bfloat16), t1=0.1)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_half_particles_with_wider_parameters_are_refused(dtype):
    """As for the Gaussian solve: a float16 `x0` beside float64 parameters was promoted and solved."""
    e = jnp.eye(2)
    x0 = jnp.asarray([[3.0, 0.0], [-3.0, 1.0], [0.0, 2.0]], dtype)
    with pytest.raises(
        ParameterError, match=rf"^`x0` has dtype {dtype.dtype.name}: .*not promoted to the solve's float64"
    ):
        solve_particles(Softmax(V=e, A=e), x0, t1=0.1)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_half_precision_low_rank_solves_are_refused(dtype):
    """The low-rank solves cast the state to their dtype: a half-precision `mean0`/`cov0` (Gaussian, cast to the
    model's dtype) or `x0` (particles, cast to float32 at least) was solved without a word, and a half-precision
    `LowRankSoftmax` ran the Gaussian solve in half precision (bfloat16: ``dt_min_reached``, no blow-up)."""
    from hassejax.dynamics import LowRankSoftmax, solve_low_rank_gaussian, solve_low_rank_particles

    e = jnp.array([[1.0, 0.0]])
    head = LowRankSoftmax(e, e, e, e.T)
    with pytest.raises(ParameterError, match=r"^`mean0` and `cov0` have dtype .*not promoted to the solve's float64"):
        solve_low_rank_gaussian(head, jnp.zeros(2, dtype), jnp.eye(2, dtype=dtype) / 2, t1=5.0)
    with pytest.raises(ParameterError, match=r"^`cov0` has dtype .*not promoted"):
        solve_low_rank_gaussian(head, jnp.zeros(2), jnp.eye(2, dtype=dtype) / 2, t1=5.0)
    half = LowRankSoftmax(e.astype(dtype), e.astype(dtype), e.astype(dtype), e.T.astype(dtype))
    with pytest.raises(ParameterError, match=r"^the parameters of `model` have dtype .*float32 or float64"):
        solve_low_rank_gaussian(half, jnp.zeros(2), jnp.eye(2) / 2, t1=5.0)
    x0, mask = jnp.array([[[1.0, 0.0], [3.0, 1.0]]], dtype), jnp.ones((1, 2), bool)
    with pytest.raises(ParameterError, match=r"^`x0` has dtype .*not promoted to the solve's float"):
        solve_low_rank_particles(head, x0, mask, t1=1.0)


def test_wider_state_beside_half_parameters_is_solved():
    """Only states are refused for their own dtype: half-precision parameters beside a float32 state run in float32."""
    e = jnp.eye(2, dtype=jnp.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the default rtol in float32
        sol = solve_gaussian(Softmax(V=e, A=e), jnp.zeros(2, jnp.float32), jnp.eye(2, dtype=jnp.float32) / 2, t1=0.1,
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


def test_traced_invalid_converge_tol_is_flagged():
    """A traced `converge_tol` that is NaN, negative, 0 or inf: status ``invalid_tolerance`` (nothing solved). It
    silently turned the steady-state event off (NaN, negative, 0) or read ``converged`` at once (inf)."""
    import jax

    from hassejax.dynamics import Status

    model = Softmax(V=jnp.eye(2), A=-jnp.eye(2))  # Σ → 0 like 1/t: a steady state at ‖Σ'‖ = tol

    @jax.jit
    @jax.vmap
    def run(tol):
        sol = solve_gaussian(model, jnp.zeros(2), jnp.eye(2), t1=1e4, converge_tol=tol)
        return sol.status, sol.t_final, sol.stats.num_steps

    tols = jnp.array([1e-3, jnp.nan, -1e-3, 0.0, jnp.inf])
    status, t_final, steps = run(tols)
    assert [Status(int(c)) for c in status] == [Status.converged] + [Status.invalid_tolerance] * 4
    assert 0.0 < float(t_final[0]) < 1e4
    np.testing.assert_array_equal(np.asarray(t_final[1:]), 0.0)
    np.testing.assert_array_equal(np.asarray(steps[1:]), 0)


def test_half_precision_gaussian_message_names_what_fails_for_its_kernel():
    """It said "the square root of `cov0` and the Sinkhorn map use eigh" (and float16's range) for any kernel,
    state and dtype: a softmax solve from `factor0` takes no ``eigh``, and bfloat16's range holds the threshold. A
    review: it named the default threshold and rtol where the caller had given their own."""
    from hassejax.dynamics import Sinkhorn

    e = jnp.eye(2, dtype=jnp.float16)
    with pytest.raises(ParameterError) as info:
        solve_gaussian(Softmax(V=e, A=e), jnp.zeros(2, jnp.float16), factor0=e, t1=1.0)
    assert "eigh" not in str(info.value) and "Sinkhorn" not in str(info.value)
    assert "float16 (eps 9.8e-04) resolves neither a useful rtol" in str(info.value)
    assert "its range ends at 65504" in str(info.value)
    with pytest.raises(
        ParameterError, match=r"the square root of `cov0` uses eigh.*float16 .*range ends at 65504"
    ) as info:
        solve_gaussian(Softmax(V=e, A=e), jnp.zeros(2, jnp.float16), e, t1=1.0)
    assert "Sinkhorn" not in str(info.value)
    with pytest.raises(ParameterError, match=r"the Sinkhorn map uses eigh, which has no half precision; float16"):
        solve_gaussian(Sinkhorn(V=e, A=e), jnp.zeros(2, jnp.float16), factor0=e, t1=1.0)
    b = jnp.eye(2, dtype=jnp.bfloat16)
    with pytest.raises(ParameterError, match=r"bfloat16 \(eps 7\.8e-03\) resolves neither a useful rtol") as info:
        solve_gaussian(Softmax(V=b, A=b), jnp.zeros(2, jnp.bfloat16), factor0=b, t1=1.0)
    assert "65504" not in str(info.value)
    with pytest.raises(ParameterError) as info:  # the caller's own threshold: the message names no default as the cause
        solve_gaussian(Softmax(V=e, A=e), jnp.zeros(2, jnp.float16), factor0=e, t1=1.0, size_threshold=100.0)
    assert "float16 (eps 9.8e-04) resolves neither a useful rtol" in str(info.value)


def test_layer_a_few_rounding_units_long_warns():
    """A new-user check: float32, a layer of 1e-4 at `t = 100` (13 rounding units of `t`: 1e-4 / 2^-17) with `V`
    2000 times the next layer's blew up 0.94 % of t* − t0 later than in float64 (benchmarks/float32_short_layer.py),
    reported ``blow_up`` without a word. The layer's
    edges are step boundaries one rounding unit apart from the next step's start, so the solver sees its length only
    to about 1 part in 13. Now a concrete solve crossing a layer shorter than 1000 units warns, naming the layer and
    its length in units; the same layer in float64, from `t = 0`, or a layer of length 1 at `t = 100` does not."""
    from hassejax.dynamics import PiecewiseConstant

    def solve(t0, dtype, length=1e-4):
        i = jnp.eye(2, dtype=dtype)
        v = PiecewiseConstant(jnp.stack([1e3 * i, 0.5 * i]), jnp.array([t0, t0 + length, t0 + 1000.0], dtype))
        return solve_gaussian(Softmax(V=v, A=i), jnp.zeros(2, dtype), 0.5 * i, t0=t0, t1=t0 + 20, rtol=1e-6, atol=1e-6)

    with pytest.warns(RuntimeWarning, match=r"layer \[100, 100\.0001\) is only 13 rounding units of t long in float32"):
        late = solve(100.0, jnp.float32)
    exact = solve(100.0, jnp.float64)
    # why it warns: the float32 blow-up time is off by about 1 % of t* - t0 (1.8), a thousand times rtol
    assert abs(float(late.t_blowup) - float(exact.t_blowup)) > 1e3 * 1e-6 * (float(exact.t_blowup) - 100.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        solve(100.0, jnp.float64)  # 4e10 units in float64
        solve(0.0, jnp.float32)  # from t = 0: the layer [0, 1e-4) is 1e-4 / 2^-37 units long
        solve(100.0, jnp.float32, length=1.0)  # 131,072 units


def test_short_layer_warning_measures_the_stretches_the_solve_crosses():
    """A review: the first value of a PiecewiseConstant holds before ``t_edges[0]`` and the last after
    ``t_edges[-1]``, so edges ``[0, 100, 100.0001]`` change the value once (at 100) and hold no short layer; the
    warning measured ``[100, 100.0001)``. A layer is now a stretch of the solve between two edges where the value
    changes, or between `t0`/`t1` and such an edge."""
    from hassejax.dynamics import PiecewiseConstant, solve_particles

    v = np.array([[0.3, 0.1], [0.0, -0.2]], np.float32)
    x0 = np.random.default_rng(0).normal(size=(5, 2)).astype(np.float32)

    def solve(edges, values, t0, t1):
        pc = PiecewiseConstant(np.stack(values), np.array(edges, np.float32))
        return solve_particles(Softmax(V=pc, A=0.5 * np.eye(2, dtype=np.float32)), x0, t0=t0, t1=t1)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        solve([0.0, 100.0, 100.0001], [v, 2 * v], 0.0, 150.0)  # one change, at 100
        solve([99.9999, 100.0, 200.0], [v, 2 * v], 0.0, 150.0)  # the same
        solve([0.0, 100.0, 100.0001, 200.0], [v, v, v], 0.0, 150.0)  # no change at all
    for edges, values, t0, t1 in (
        ([0.0, 100.0, 100.0001, 200.0], [v, 2 * v, v], 0.0, 150.0),  # between two changes
        ([100.0, 100.0001, 200.0], [2 * v, v], 100.0, 150.0),  # from t0 to a change
        ([0.0, 100.0, 200.0], [2 * v, v], 50.0, 100.0001),  # from a change to t1
    ):
        with pytest.warns(RuntimeWarning, match=r"layer \[100, 100\.0001\) is only 13(\.1)? rounding units"):
            solve(edges, values, t0, t1)
