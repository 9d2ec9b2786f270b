"""A sweep's chunks are checked against the free memory before they run (hassejax.dynamics.sweeps).

`solve_particles` checks its own `n × n` arrays, but for one member: under the sweep's `vmap` a chunk of
`c` members needs about `c` times that, and used to die in XLA (RESOURCE_EXHAUSTED) or be killed by the
OS. The sweep now takes XLA's memory estimate of the chunk program it compiles anyway
(``Compiled.memory_analysis()``) and refuses a chunk that cannot fit with ``MemoryBudgetError`` naming
`chunk_size` and a chunk size that fits. Here the free host memory is monkeypatched small, so a modest chunk
of `n = 400` tokens (about 4 MiB a member) does not fit.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.dynamics import Softmax, Sweep, solve_particles, status_names, sweep
from hassejax.dynamics import sweeps as sweeps_module
from hassejax.errors import MemoryBudgetError

N_TOKENS = 400
B = 16
SCALES = np.linspace(0.5, 1.5, B)


def particle_member(scale):
    """A stable softmax particle system (A = -I: the tokens contract) of N_TOKENS tokens in the plane."""
    x0 = scale * jnp.asarray(np.random.default_rng(0).normal(size=(N_TOKENS, 2)))
    sol = solve_particles(Softmax(V=jnp.eye(2), A=-jnp.eye(2)), x0, t1=0.3, rtol=1e-6, atol=1e-6)
    return {"status": sol.status, "steps": sol.stats.num_steps, "x_final": sol.x_final}


def _estimate(chunk_size):
    """The sweep's estimate of its chunk program, in bytes: XLA's arguments + outputs + temporaries - aliased, the
    temporaries doubled on the CPU (its runtime's scratch, which XLA's estimate leaves out)."""
    stats = sweeps_module.sweep_program(particle_member, SCALES, chunk_size=chunk_size).compile().memory_analysis()
    if stats is None:
        pytest.skip("this backend gives no memory analysis (the sweep then runs unchecked)")
    temp = stats.temp_size_in_bytes * (2 if jax.default_backend() == "cpu" else 1)
    return stats.argument_size_in_bytes + stats.output_size_in_bytes + temp - stats.alias_size_in_bytes


@pytest.fixture(scope="module")
def estimate_16():
    return _estimate(16)


@pytest.fixture(scope="module")
def solo():
    """Each member solved on its own (one program, no vmap)."""
    one = jax.jit(particle_member)
    outs = [one(s) for s in SCALES]
    return {k: np.stack([np.asarray(o[k]) for o in outs]) for k in outs[0]}


def _free_host_memory(monkeypatch, nbytes, reads=None):
    """The sweep reads `nbytes` as the free host memory (counting the reads in `reads`)."""

    def free():
        if reads is not None:
            reads.append(1)
        return int(nbytes)

    monkeypatch.setattr(sweeps_module, "host_memory_bytes", free, raising=False)  # (absent before the check)


def test_a_chunk_that_cannot_fit_is_refused_naming_chunk_size_and_the_suggestion_runs(monkeypatch, estimate_16, solo):
    """Free memory for about 6 of the 16 members: `chunk_size=16` is refused before anything runs, naming
    `chunk_size` and a chunk size that fits; that chunk size then runs (checked against the same free memory, not
    skipped as small) and gives the one-by-one solves' results. Before the check this sweep ran here (the machine
    has the memory; the monkeypatched free memory was never read) and, on a machine without it, died in XLA."""
    assert estimate_16 >= 2.5 * 16 * 2**20  # above the check's 16 MiB threshold, the suggested chunk too
    free = estimate_16 / 2  # the budget, 80 % of it, holds 40 % of the 16-member chunk: about 6 members
    _free_host_memory(monkeypatch, free)
    with pytest.raises(MemoryBudgetError) as info:
        sweep(particle_member, SCALES, chunk_size=16, progress=False)
    msg = str(info.value)
    assert msg.startswith("`chunk_size`: chunk_size=16: the program of `fn` vmapped over a chunk of 16 members"), msg
    assert "XLA's estimate" in msg and f"needs about {estimate_16 / 2**30:.2f} GiB" in msg, msg
    fit = int(re.search(r"pass chunk_size=(\d+)\.", msg).group(1))
    assert abs(fit - int(0.8 * free / (estimate_16 / 16))) <= 1, fit  # the estimate scaled to fewer members
    reads = []
    _free_host_memory(monkeypatch, free, reads)
    out = sweep(particle_member, SCALES, chunk_size=fit, progress=False)
    assert reads  # the suggested chunk was checked, and passed
    assert status_names(out["status"]).tolist() == ["completed"] * B
    np.testing.assert_array_equal(np.asarray(out["status"]), solo["status"])
    np.testing.assert_array_equal(np.asarray(out["steps"]), solo["steps"])
    np.testing.assert_allclose(np.asarray(out["x_final"]), solo["x_final"], rtol=1e-9, atol=1e-12)


def test_the_whole_batch_as_one_chunk_is_named_and_a_held_sweep_checks_each_call(monkeypatch, estimate_16):
    """`chunk_size=None` (the whole batch as one chunk): the message names `chunk_size` and the batch. A held
    Sweep keeps the program's estimate but reads the free memory again at each call: the same Sweep runs once
    the memory is there."""
    held = Sweep(particle_member)
    _free_host_memory(monkeypatch, estimate_16 / 2)
    with pytest.raises(MemoryBudgetError) as info:
        held(SCALES, progress=False)
    msg = str(info.value)
    want = "`chunk_size`: chunk_size=None: the program of `fn` vmapped over the whole batch, 16 members, as one chunk"
    assert msg.startswith(want), msg
    assert "pass chunk_size=" in msg
    _free_host_memory(monkeypatch, 4 * estimate_16)
    out = held(SCALES, progress=False)
    assert status_names(out["status"]).tolist() == ["completed"] * B


def test_no_chunk_fits_says_so(monkeypatch, estimate_16):
    _free_host_memory(monkeypatch, estimate_16 / 40)
    with pytest.raises(MemoryBudgetError) as info:
        sweep(particle_member, SCALES, chunk_size=16, progress=False)
    msg = str(info.value)
    assert "Not even a chunk of one member a device fits" in msg and "pass chunk_size" not in msg, msg


def test_a_sweep_that_fits_is_unaffected_and_compiles_its_program_once(monkeypatch, estimate_16, solo):
    """With the memory there (twice the estimate; read: the chunk is above the 16 MiB threshold) the sweep runs
    as before, and its chunk program is compiled (or loaded from the persistent cache) once: the estimate comes
    from the program the chunks run."""
    reads, compiles, listening = [], [], [True]

    def listener(event, duration, **kwargs):
        name = str(kwargs.get("fun_name", ""))
        if listening[0] and event == "/jax/core/compile/backend_compile_duration" and "particle_member" in name:
            compiles.append(name)

    jax.monitoring.register_event_duration_secs_listener(listener)
    _free_host_memory(monkeypatch, 2 * estimate_16, reads)
    try:
        out = sweep(particle_member, SCALES, chunk_size=16, progress=False)
    finally:
        listening[0] = False
    assert reads == [1]
    assert len(compiles) == 1, compiles
    np.testing.assert_array_equal(np.asarray(out["steps"]), solo["steps"])
    np.testing.assert_allclose(np.asarray(out["x_final"]), solo["x_final"], rtol=1e-9, atol=1e-12)


def test_small_chunks_never_read_the_free_memory(monkeypatch):
    """Below 16 MiB (XLA's estimate) the check costs nothing more: the free memory is not read."""

    def unread():
        raise AssertionError("the free memory was read for a small chunk")

    monkeypatch.setattr(sweeps_module, "host_memory_bytes", unread, raising=False)
    out = sweep(lambda v: {"square": v * v}, jnp.arange(6.0), chunk_size=4, progress=False)
    assert out["square"].tolist() == [0.0, 1.0, 4.0, 9.0, 16.0, 25.0]


def _shared_intermediate(x):
    """A member whose program holds a large intermediate that does not grow with the chunk (16 MiB, the same for
    every member: vmap keeps one) beside 256 KiB a member.

    The sizes only need the chunk programs above the check's 16 MiB threshold (the shared part alone, counted
    twice on the CPU, is 32 MiB at every width: the test asserts that the suggestion was checked) with the shared
    part large against a member's (64 to 1): 4 times less than the 64 MiB and 1 MiB this test had, whose sorts
    took some 14 CPU seconds at the suite's optimisation level 0 for the same suggestion (11)."""
    fixed = jnp.sort(jnp.sin(jnp.arange(2.0**21)))
    per = jnp.sort(jnp.cos(x * jnp.arange(2.0**15)))
    return fixed[:3].sum() + per[:2]


def test_the_suggestion_accounts_for_memory_that_does_not_grow_with_the_chunk(monkeypatch):
    """A review: the suggestion scaled the whole estimate with the chunk, so with a shared intermediate each
    suggested chunk_size was refused again (16 -> 15 -> 14 -> ... -> 11). The suggestion is now checked against
    the program at that width and taken from the line through both estimates: the first suggestion runs."""
    xs = np.linspace(0.1, 1.0, 16)
    stats = sweeps_module.sweep_program(_shared_intermediate, xs, chunk_size=16).compile().memory_analysis()
    if stats is None:
        pytest.skip("this backend gives no memory analysis (the sweep then runs unchecked)")
    temp = stats.temp_size_in_bytes * (2 if jax.default_backend() == "cpu" else 1)
    need16 = stats.argument_size_in_bytes + stats.output_size_in_bytes + temp - stats.alias_size_in_bytes
    _free_host_memory(monkeypatch, int(need16 * 0.95 / 0.8))  # 95 % of the chunk of 16 fits the budget
    with pytest.raises(MemoryBudgetError, match=r"`chunk_size`") as err:
        sweep(_shared_intermediate, xs, chunk_size=16, progress=False)
    fit = int(re.search(r"pass chunk_size=(\d+)\.", str(err.value)).group(1))
    assert 1 <= fit < 15  # proportional scaling would have said 15
    reads = []
    _free_host_memory(monkeypatch, int(need16 * 0.95 / 0.8), reads)
    out = sweep(_shared_intermediate, xs, chunk_size=fit, progress=False)  # runs: not refused again
    assert reads  # the suggested chunk was checked (above the threshold), and passed
    np.testing.assert_allclose(np.asarray(out), np.asarray(jax.vmap(_shared_intermediate)(jnp.asarray(xs))))
