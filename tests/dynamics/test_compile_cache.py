"""The solvers' compiled programs hold no host callback, so JAX's persistent cache keeps them.

(Issue 13 item 2.) diffrax checks ``SaveAt(ts=...)`` with equinox's ``error_if``, which
compiles to a ``pure_callback``, and JAX never writes a program holding a host callback to
its persistent compilation cache. The solvers check concrete save times themselves and
skip those two checks (``hassejax.dynamics._checked_saveat``); with traced save times the
checks stay on.
"""

from __future__ import annotations

import os

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.dynamics import L2, Softmax, solve_gaussian, solve_particles

MODEL = Softmax(V=jnp.eye(2), A=jnp.eye(2))


def _gaussian(beta):
    model = Softmax(V=jnp.eye(2), A=jnp.eye(2), beta=beta)
    return solve_gaussian(model, jnp.zeros(2), jnp.eye(2) / 2, t1=5.0, ts=np.linspace(0, 5, 6), rtol=1e-6, atol=1e-6)


def _particles(scale):
    x0 = scale * jnp.arange(8.0).reshape(4, 2) / 8
    return solve_particles(L2(V=-jnp.eye(2), Q=jnp.eye(2), K=jnp.eye(2)), x0, t1=1.0, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fn", [_gaussian, _particles], ids=["gaussian", "particles"])
def test_solve_program_has_no_host_callback(fn):
    text = jax.jit(lambda s: fn(s).t_final).lower(1.0).as_text()
    assert "callback" not in text
    # the skipped checks are only skipped: the proxy is gone after the solve
    import diffrax._integrate as integrate_module

    assert type(integrate_module.eqxi).__name__ != "_EqxiProxy"


def test_results_equal_with_and_without_the_checks():
    """The same solve with traced save times (diffrax checks on) gives the same numbers."""
    ts = np.linspace(0, 5, 6)
    model = Softmax(V=jnp.eye(2), A=jnp.eye(2), beta=1.0)
    fixed = solve_gaussian(model, jnp.zeros(2), jnp.eye(2) / 2, t1=5.0, ts=ts, rtol=1e-6, atol=1e-6)
    traced = jax.jit(lambda t: solve_gaussian(model, jnp.zeros(2), jnp.eye(2) / 2, t1=5.0, ts=t, rtol=1e-6, atol=1e-6))(
        jnp.asarray(ts)
    )
    assert int(fixed.status) == int(traced.status)
    np.testing.assert_array_equal(np.asarray(fixed.cov), np.asarray(traced.cov))
    assert float(fixed.t_blowup) == float(traced.t_blowup)


def test_traced_unsorted_save_times_are_still_refused():
    """With save times unknown at trace time, diffrax's own check stays and raises."""
    f = jax.jit(lambda t: _gaussian_at(t).t_final)
    with pytest.raises(Exception, match="saveat.ts must be increasing or decreasing"):
        jax.block_until_ready(f(jnp.array([0.5, 0.2])))


def _gaussian_at(ts):
    return solve_gaussian(MODEL, jnp.zeros(2), jnp.eye(2) / 2, t1=5.0, ts=ts, rtol=1e-6, atol=1e-6)


def test_progress_meter_is_passed_to_diffrax(capfd):
    sol = solve_gaussian(
        MODEL, jnp.zeros(2), jnp.eye(2) / 2, t1=0.5, rtol=1e-6, atol=1e-6, progress_meter=diffrax.TextProgressMeter()
    )
    assert int(sol.status) == 0 and float(sol.t_final) == 0.5
    assert "100.00%" in capfd.readouterr().out


def test_persistent_cache_writes_the_solve_program():
    folder = jax.config.jax_compilation_cache_dir
    if not folder:
        pytest.skip("persistent compilation cache turned off (HASSEJAX_COMPILE_CACHE=0)")

    def cache_probe_gaussian_solve(beta):
        return _gaussian(beta).t_final

    jax.jit(cache_probe_gaussian_solve).lower(1.0).compile()
    names = os.listdir(folder)
    assert any(name.startswith("jit_cache_probe_gaussian_solve") for name in names)


def test_progress_meter_of_the_wrong_type_is_named(no_typecheck):
    from hassejax.errors import ParameterError

    with pytest.raises(ParameterError, match="`progress_meter` must be a diffrax progress meter"):
        solve_gaussian(MODEL, jnp.zeros(2), jnp.eye(2), t1=1.0, progress_meter="tqdm")
