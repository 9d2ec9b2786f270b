"""The Gaussian solves estimate their memory before anything is allocated; the input checks pass a memory error on.

A fresh-user review: ``solve_gaussian`` at d = 12,000 in float32 under ``ulimit -v 9000000`` met a raw
RESOURCE_EXHAUSTED, and at d = 20,000 the out-of-memory of the copy in the input checks came back as "`factor0`
must be a real array". The free memory is faked here (as in ``tests/test_memory_budget.py``): nothing large is
allocated.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import hassejax._checks
import hassejax.masks._runs
from hassejax.dynamics import (
    LowRankSoftmax,
    Softmax,
    solve_gaussian,
    solve_low_rank_gaussian,
    solve_low_rank_particles,
    solve_particles,
)
from hassejax.dynamics import gaussian as gaussian_module
from hassejax.dynamics._arguments import real_array
from hassejax.errors import MemoryBudgetError, ParameterError


def _free(monkeypatch, device: int, host: int = 1 << 40) -> None:
    monkeypatch.setattr(hassejax._checks, "available_memory_bytes", lambda: device)
    monkeypatch.setattr(hassejax.masks._runs, "host_memory_bytes", lambda: host)


def _no_solve(monkeypatch) -> None:
    def unreachable(*args, **kwargs):
        raise AssertionError("the solve ran")

    monkeypatch.setattr(gaussian_module, "_solve_core", unreachable)


def test_solve_gaussian_refuses_a_solve_that_cannot_fit(monkeypatch):
    """d = 400, float64, factor state, default save times: about 26 (d, d) arrays = 33 MB, against 20 MB free."""
    _free(monkeypatch, 20 * 2**20)
    _no_solve(monkeypatch)
    d = 400
    model = Softmax(V=jnp.eye(d), A=-jnp.eye(d))
    with pytest.raises(MemoryBudgetError, match=r"^`cov0`: the Gaussian solve of d = 400 \(factor state, float64, 2 "):
        solve_gaussian(model, jnp.zeros(d), np.eye(d), t1=1.0)
    with pytest.raises(MemoryBudgetError, match=r"^`factor0`: .* about 26 \(400, 400\) arrays"):
        solve_gaussian(model, jnp.zeros(d), factor0=np.eye(d), t1=1.0)
    with pytest.raises(MemoryBudgetError, match=r"^`cov0`: .*projective state"):
        solve_gaussian(model, jnp.zeros(d), np.eye(d), t1=1.0, state="projective")


def test_the_estimate_counts_save_times_state_and_dtype(monkeypatch):
    """d = 100: the covariance state with 50 save times holds about 20 + 5 · 51 = 275 (d, d) arrays (22 MB in
    float64, 11 MB in float32: the latter is below the 16 MiB that are not checked)."""
    _free(monkeypatch, 20 * 2**20)
    d = 100
    ts = np.linspace(0.0, 1.0, 50)
    model = Softmax(V=jnp.eye(d), A=-jnp.eye(d))
    with pytest.raises(
        MemoryBudgetError, match=r"^`ts`: .*covariance state, float64, 50 saved times: about 275 \(100,"
    ):
        solve_gaussian(model, jnp.zeros(d), np.eye(d), t1=1.0, ts=ts, state="covariance")
    f32 = Softmax(V=jnp.eye(d, dtype=jnp.float32), A=-jnp.eye(d, dtype=jnp.float32))
    sol = solve_gaussian(
        f32,
        jnp.zeros(d, jnp.float32),
        np.eye(d, dtype=np.float32),
        t1=1.0,
        ts=ts,
        state="covariance",
        rtol=1e-5,
        atol=1e-5,
    )
    assert sol.cov.shape == (50, d, d)


def test_solve_gaussian_refuses_value_checks_that_cannot_fit_on_the_host(monkeypatch):
    """The value checks of a concrete `cov0` (d = 700: four float64 copies and its own, 20 MB) against 10 MB free on
    the host, the device having room."""
    _free(monkeypatch, 1 << 40, host=10 * 2**20)
    _no_solve(monkeypatch)
    d = 700
    with pytest.raises(MemoryBudgetError, match=r"^`cov0`: the value checks of `cov0` \(symmetric and PSD"):
        solve_gaussian(Softmax(V=jnp.eye(d), A=-jnp.eye(d)), jnp.zeros(d), np.eye(d), t1=1.0)


class _CopyFails:
    """An input whose copy runs out of memory (as a device array's host copy did at d = 20,000)."""

    shape = (2, 2)

    def __init__(self, error):
        self.error = error

    def __array__(self, dtype=None, copy=None):
        raise self.error


def test_input_checks_pass_a_memory_error_on(no_typecheck):
    with pytest.raises(MemoryError, match="out of memory"):
        solve_gaussian(Softmax(V=jnp.eye(2), A=jnp.eye(2)), jnp.zeros(2), factor0=_CopyFails(MemoryError("out of memory")), t1=1.0)  # fmt: skip
    with pytest.raises(RuntimeError, match="RESOURCE_EXHAUSTED"):
        real_array(_CopyFails(RuntimeError("RESOURCE_EXHAUSTED: Out of memory")), "factor0")
    with pytest.raises(ParameterError, match=r"`factor0` must be a real array; got _CopyFails"):
        real_array(_CopyFails(TypeError("not numbers")), "factor0", "a real array")
    with pytest.raises(ParameterError, match=r"`ts` must be"):
        real_array([[0.0, 1.0], [2.0]], "ts", "an array of real save times")  # a ragged list: still its error


def _head(d: int, k: int = 1) -> LowRankSoftmax:
    e = jnp.zeros((k, d)).at[0, 0].set(1.0)
    return LowRankSoftmax(e, e, e, e.T)


def test_low_rank_gaussian_refuses_a_set_up_that_cannot_fit(monkeypatch):
    """The k×k solve is small, but its set-up copies the (d, d) `cov0` (d = 1,100: about 4 float64 copies, 39 MB)."""
    _free(monkeypatch, 20 * 2**20)
    d = 1100
    with pytest.raises(MemoryBudgetError, match=r"^`cov0`: the set-up of the rank-k solve"):
        solve_low_rank_gaussian(_head(d), jnp.zeros(d), np.eye(d) / 2, t1=1.0)
    _free(monkeypatch, 1 << 40, host=10 * 2**20)
    with pytest.raises(MemoryBudgetError, match=r"^`cov0`: the value checks of `cov0`"):
        solve_low_rank_gaussian(_head(d), jnp.zeros(d), np.eye(d) / 2, t1=1.0)


def test_low_rank_particles_refuse_weights_that_cannot_fit(monkeypatch):
    """S = 2 groups of N = 1,000 tokens: 4 (S, N, N) float64 arrays an evaluation, 64 MB, against 20 MB free."""
    _free(monkeypatch, 20 * 2**20)
    x0 = np.zeros((2, 1000, 2))
    with pytest.raises(MemoryBudgetError, match=r"^`x0`: the particle system of S = 2 groups of N = 1000 tokens"):
        solve_low_rank_particles(_head(2), x0, np.ones((2, 1000), bool), t1=1e-3)


@pytest.mark.parametrize("arg", ["cov0", "factor0"])
def test_a_string_state_is_refused_by_name_before_the_memory_estimate(arg, no_typecheck):
    """The memory estimate reads the inputs' dtypes: a string array is left to the input checks, which name it (a
    review: JAX's raw TypeError from the estimate's dtype promotion, where the old code gave the ParameterError)."""
    model = Softmax(V=jnp.eye(3), A=jnp.eye(3))
    with pytest.raises(ParameterError, match=f"`{arg}` must be a real array"):
        solve_gaussian(model, jnp.zeros(3), t1=0.1, **{arg: np.array([["a"] * 3] * 3)})


def test_object_arrays_of_numbers_are_read_as_numbers(no_typecheck):
    """NumPy arrays of dtype ``object`` holding numbers (what pandas or a list of Python ints can give) solve as their
    float64 values (a review: JAX's raw TypeError "Error interpreting argument to stage as a JAX value"); one holding
    a string, a bool or None is refused by name (a second review: bools and numeric strings solved as numbers, None
    as NaN)."""
    model = Softmax(V=jnp.eye(2), A=jnp.eye(2))
    half = np.eye(2) / 2
    want = solve_gaussian(model, np.zeros(2), half, t1=5.0, rtol=1e-6, atol=1e-6)
    for mean0, cov0 in ((np.zeros(2, dtype=object), half), (np.zeros(2), half.astype(object))):
        got = solve_gaussian(model, mean0, cov0, t1=5.0, rtol=1e-6, atol=1e-6)
        assert int(got.status) == int(want.status) and float(got.t_blowup) == float(want.t_blowup)
    factor = solve_gaussian(model, np.zeros(2), factor0=np.sqrt(half).astype(object), t1=5.0, rtol=1e-6, atol=1e-6)
    assert abs(float(factor.t_blowup) - 1.0) < 1e-5  # t* = 1 (the solve_gaussian docstring's example)
    x0 = np.array([[1, 0], [0, 2]])
    want = solve_particles(model, x0.astype(np.float64), t1=0.5)
    got = solve_particles(model, x0.astype(object), t1=0.5)
    np.testing.assert_array_equal(np.asarray(got.x_final), np.asarray(want.x_final))
    for odd, what in ((["a", 0], "str 'a'"), (["1", 0], "str '1'"), ([True, 0], "bool True"), ([None, 0], "NoneType")):
        with pytest.raises(ParameterError, match=f"`x0` must be a real array of tokens.*object array holding {what}"):
            solve_particles(model, np.array([odd, [0, 1]], dtype=object), t1=0.5)  # not 1.0 or NaN (a review)
    with pytest.raises(ParameterError, match="`cov0` must be a real array.*object array holding bool"):
        solve_gaussian(model, np.zeros(2), np.array([[True, False], [False, True]], dtype=object), t1=0.5)


def test_lists_mixing_bools_and_numbers_are_refused(no_typecheck):
    """NumPy reads ``[[True, 0.5], ...]`` as ``[[1.0, 0.5], ...]``: a bool in a list of numbers is refused by name, as
    in an object array (it solved as 1.0, a known nit); lists of numbers or of float arrays solve as before."""
    model = Softmax(V=jnp.eye(2), A=jnp.eye(2))
    want = solve_particles(model, np.array([[1.0, 0.5], [0.0, 1.0]]), t1=0.5)
    for x0 in ([[1.0, 0.5], [0, 1]], [np.array([1.0, 0.5]), np.array([0.0, 1.0])]):
        np.testing.assert_array_equal(np.asarray(solve_particles(model, x0, t1=0.5).x_final), np.asarray(want.x_final))
    for x0, what in (
        ([[True, 0.5], [0, 1]], "bool True"),
        ([np.array([True, False]), np.array([0.0, 1.0])], "ndarray"),
        ([jnp.array([1.0, 0.5]), [jnp.array(True), 1.0]], "ArrayImpl"),  # a 0-d JAX bool (a review)
    ):
        with pytest.raises(ParameterError, match=f"`x0` must be a real array of tokens.*a list holding {what}"):
            solve_particles(model, x0, t1=0.5)
    with pytest.raises(ParameterError, match="`mean0` must be a real.*a list holding bool False"):
        solve_gaussian(model, [0.5, False], np.eye(2) / 2, t1=0.5)


def test_particles_count_their_state_and_saved_times(monkeypatch):
    """64 tokens in d = 1,000, float64: four (64, 64) weights are 0.13 MB, but 2,000 saved times of the (64, 1000)
    state are 1 GB, twice over (the saved rows and the returned solution; the estimate counted only the weights, a
    review). Refused from the shapes, before `x0` is read; 20 saved times (37 MB) pass the estimate."""
    from hassejax.dynamics import particles as particles_module

    _free(monkeypatch, 100 * 2**20)
    d = 1000
    model = Softmax(V=-jnp.eye(d), A=jnp.zeros((d, d)))

    def unread(*args, **kwargs):
        raise AssertionError("x0 was read")

    monkeypatch.setattr(particles_module._solve, "real_array", unread)  # the estimate comes before the input checks
    x0 = np.zeros((64, d))
    # named `ts`: the saved states are most of it (a fresh user's 10^8 save times of 10 tokens were blamed on `x0`)
    match = r"^`ts`: the particle system of n = 64 tokens .*; and 4016 \(64, 1000\) arrays, .* 2000 saved states"
    with pytest.raises(MemoryBudgetError, match=match):
        solve_particles(model, x0, t1=1.0, ts=np.linspace(0.0, 1.0, 2000))
    particles_module._check_solve_memory(model, np.zeros((64, d)), np.linspace(0.0, 1.0, 20))  # fits: no error
    with pytest.raises(MemoryBudgetError):
        particles_module._check_solve_memory(model, np.zeros((64, d)), np.linspace(0.0, 1.0, 200))  # 221 MB


def test_the_particle_estimate_covers_xla_s_own(no_typecheck):
    """The estimate of :func:`solve_particles` against XLA's memory analysis of the compiled solve returning the whole
    solution (a review: the (n, n) weights are held once per head, about 3 each, and every saved time twice): at least
    XLA's bytes, and not far above them, for a multi-head kernel and for many saved times."""
    import jax

    from hassejax.dynamics import Masked, MultiHead
    from hassejax.dynamics import particles as particles_module

    rng = np.random.default_rng(0)
    for n, d, saves, heads, masked in ((300, 4, 2, 4, False), (64, 16, 300, 1, False), (256, 4, 2, 6, True)):
        parts = [
            Softmax(V=jnp.asarray(rng.standard_normal((d, d)) / d), A=jnp.asarray(rng.standard_normal((d, d)) / d))
            for _ in range(heads)
        ]
        model = parts[0] if heads == 1 else MultiHead(parts)
        if masked:  # a multi-head kernel under one mask: every head's weights (a second review: counted as one)
            model = Masked(model, np.tril(np.ones((n, n), dtype=bool)))
        ts = jnp.linspace(0.0, 1.0, saves)
        x0 = jnp.ones((n, d))
        solve = jax.jit(lambda x, model=model, ts=ts: solve_particles(model, x, t1=1.0, ts=ts))
        analysis = solve.lower(x0).compile().memory_analysis()
        xla = analysis.argument_size_in_bytes + analysis.temp_size_in_bytes + analysis.output_size_in_bytes
        seen = []

        def record(need, *args, seen=seen, **kwargs):
            seen.append(need)

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(particles_module, "check_memory", record)
            mp.setattr(particles_module, "_UNCHECKED_BYTES", 0)  # every estimate compared
            particles_module._check_solve_memory(model, x0, ts)
        assert seen and xla <= seen[0] <= 3 * xla, (n, d, saves, heads, masked, xla, seen)
