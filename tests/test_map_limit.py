"""The guard that keeps long-lived processes below the kernel's limit on memory mappings."""

import sys

import jax
import jax.numpy as jnp
import pytest

from hassejax._map_limit import map_count, map_limit, release_compiled_programs

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


@linux
def test_compiled_programs_hold_mappings_and_releasing_returns_them():
    """Live compiled programs add mappings; a release below the count clears them (the count falls
    back by most of what the programs added); one above it leaves them."""
    jax.clear_caches()
    before = map_count()
    programs = [jax.jit(lambda x, k=k: jnp.sin(x) * k + jnp.cos(x).sum()) for k in range(40)]
    for f in programs:
        f(jnp.ones(3)).block_until_ready()
    held = map_count()
    assert held - before >= 40  # at least one mapping per live program
    assert not release_compiled_programs(1.0) or held > map_limit()
    assert map_count() >= held - 5  # nothing released
    assert release_compiled_programs(0.5 * before / map_limit())  # below the count: clears
    assert map_count() - before < 0.5 * (held - before)


@linux
def test_limit_is_the_kernel_setting():
    with open("/proc/sys/vm/max_map_count") as f:
        assert map_limit() == int(f.read())


@pytest.mark.parametrize("fraction", [0.0, -0.1, 1.5, float("nan")])
def test_fraction_outside_the_unit_interval_is_refused(fraction):
    with pytest.raises(ValueError, match="fraction"):
        release_compiled_programs(fraction)
