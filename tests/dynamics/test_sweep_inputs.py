"""A new user's sweep inputs (session 47 review): typed PRNG keys, a chunk far wider than the batch, a sweep under a
JAX transformation, leaves committed to different devices with ``shard=False``, a non-bool `shard`."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.dynamics import sweep
from hassejax.dynamics import sweeps as sweeps_module
from hassejax.errors import MemoryBudgetError, ParameterError


def _big_temporaries(k):
    """A member with ~18 MiB of temporaries (a 1500 x 1500 float64 draw): the chunk's memory is checked."""
    return jax.random.normal(k, (1500, 1500), dtype=jnp.float32).sum()


def test_typed_keys_pass_the_memory_check_and_equal_each_member_alone():
    """``np.dtype(key<fry>)`` raised a raw TypeError once XLA's estimate reached 16 MiB."""
    keys = jax.random.split(jax.random.key(0), 3)
    out = np.asarray(sweep(_big_temporaries, keys, progress=False))
    want = np.array([float(jax.jit(_big_temporaries)(k)) for k in keys])
    np.testing.assert_allclose(out, want, rtol=1e-6)


def test_a_chunk_far_wider_than_the_batch_is_refused_before_the_padding(monkeypatch):
    """``chunk_size=10**10`` for 5 members ran out of memory padding them (40 GB), before the chunk's memory check."""
    monkeypatch.setattr(sweeps_module, "host_memory_bytes", lambda: 2**30, raising=False)
    for batch in (jnp.arange(5.0), np.arange(5.0)):
        with pytest.raises(MemoryBudgetError, match=r"^`chunk_size`: padding the batch of 5 members to 10000000000"):
            sweep(lambda v: v * 2, batch, chunk_size=10**10, progress=False)
    with pytest.raises(MemoryBudgetError, match=r"^`chunk_size`: padding"):  # a review: 1e16 rows of 4 kB overflowed
        sweep(lambda v: v * 2, jnp.ones((5, 1000)), chunk_size=10**16, progress=False)
    out = sweep(lambda v: v * 2, jnp.arange(5.0), chunk_size=8, progress=False)  # a modest padding: unchanged
    np.testing.assert_array_equal(np.asarray(out), 2 * np.arange(5.0))


def test_a_sweep_under_jit_or_grad_is_refused_by_name_and_runs_under_vmap():
    """Under jit or grad JAX refused ``compiler_options`` the caller never passed (hassejax's own emitter option)."""
    x = jnp.arange(3.0)
    calls = [
        lambda: jax.jit(lambda y: sweep(lambda v: v * 2, y, progress=False))(x),
        lambda: jax.grad(lambda s: sweep(lambda v: v * 2, s * x, progress=False).sum())(1.0),
        lambda: jax.jit(jax.vmap(lambda y: sweep(lambda v: v * 2, y, progress=False)))(jnp.ones((2, 3))),  # a review
    ]
    for call in calls:
        with pytest.raises(ParameterError, match=r"^`batch_params`: a sweep is a host-level driver.*traced leaf"):
            call()
    out = jax.vmap(lambda y: sweep(lambda v: v * 2, y, progress=False))(jnp.ones((2, 3)))
    np.testing.assert_array_equal(np.asarray(out), 2 * np.ones((2, 3)))


def test_shard_must_be_a_bool(no_typecheck):
    """``shard="no"`` sharded (a truthy string), as ``progress="no"`` once showed the bar."""
    for bad in ("no", None, 0):
        with pytest.raises(ParameterError, match=r"^`shard` must be True or False; got"):
            sweep(lambda v: v * 2, jnp.arange(3.0), shard=bad, progress=False)


_CHILD = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, numpy as np
    from hassejax.dynamics import sweep
    from hassejax.errors import ParameterError
    d = jax.devices()
    batch = {"a": jax.device_put(jnp.arange(4.0), d[1]), "b": jax.device_put(jnp.arange(4.0), d[3])}
    try:
        sweep(lambda p: p["a"] + p["b"], batch, shard=False, progress=False)
    except ParameterError as e:
        print("refused:", e)
    out = sweep(lambda p: p["a"] + p["b"], batch, progress=False)  # sharded: runs
    print("sharded:", np.asarray(out).tolist())
    one = sweep(lambda v: v * 2, jax.device_put(jnp.arange(3.0), d[2]), shard=False, progress=False)
    print("committed:", sorted(str(x) for x in one.devices()))
    """
)


def test_leaves_on_different_devices_are_named_with_shard_false():
    """JAX's raw "incompatible devices" ValueError before; a leaf committed to one device runs there."""
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=4", "JAX_PLATFORMS": "cpu", "HASSEJAX_PROGRESS": "0"}
    import os

    proc = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=300, env={**os.environ, **env}
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "refused: `batch_params`: with shard=False the chunk program runs on one device" in proc.stdout
    assert "['cpu:1'], ['cpu:3']" in proc.stdout
    assert "sharded: [0.0, 2.0, 4.0, 6.0]" in proc.stdout
    assert "committed: ['TFRT_CPU_2']" in proc.stdout or "committed: ['cpu:2']" in proc.stdout, proc.stdout


def test_a_list_of_floats_is_told_how_to_become_a_batch():
    """``sweep(fn, [1.0, 2.0, 3.0])``: the error now says how to make the list a batch of 3."""
    with pytest.raises(ParameterError, match=r"leaf \[0\] is a float.*a list of values is a batch once an array"):
        sweep(lambda v: v * 2, [1.0, 2.0, 3.0], progress=False)
    with pytest.raises(
        ParameterError, match=r"leaf \['a'\] is a float\. Close over per-sweep constants in `fn` instead\.$"
    ):
        sweep(lambda v: v * 2, {"a": 1.0}, progress=False)


def test_devices_as_an_iterator_desc_and_the_progress_variable_are_checked(no_typecheck, monkeypatch):
    """A review (session 50): ``devices=iter(jax.devices())`` was refused as "an empty sequence" (read twice),
    ``devices="junk"`` with ``shard=False`` was ignored, ``desc=5`` met tqdm's raw TypeError and
    ``HASSEJAX_PROGRESS=maybe`` left the bars on without a word."""
    out = sweep(lambda v: v * 2, jnp.arange(4.0), devices=iter(jax.devices()), progress=False)
    np.testing.assert_array_equal(np.asarray(out), [0.0, 2.0, 4.0, 6.0])
    with pytest.raises(ParameterError, match="`devices` must be a sequence of distinct jax devices"):
        sweep(lambda v: v, jnp.arange(2.0), devices="junk", shard=False, progress=False)
    with pytest.raises(ParameterError, match="`desc` must be a string"):
        sweep(lambda v: v, jnp.arange(3.0), desc=5, chunk_size=1)
    out = sweep(lambda v: v, jnp.arange(3.0), desc=None, chunk_size=1)  # no label: as tqdm takes it
    np.testing.assert_array_equal(np.asarray(out), [0.0, 1.0, 2.0])
    from hassejax import _env

    monkeypatch.setenv("HASSEJAX_PROGRESS", "maybe-not-a-value")
    monkeypatch.setattr(_env, "_WARNED", set())
    with pytest.warns(RuntimeWarning, match="HASSEJAX_PROGRESS='maybe-not-a-value' is neither on"):
        assert _env.progress_off() is False
