"""Keep a long-lived process below the kernel's limit on memory mappings (private; the main job, the tests).

Every XLA program a process holds compiled keeps about nine memory mappings of its own (its
machine code and data, loaded by XLA's CPU backend: 9,101 mappings for 1,000 live programs here,
jaxlib 0.10.2). Linux caps the mappings of one process at ``vm.max_map_count`` (65,530 by
default), and a process that reaches it does not get an error: the next ``mmap`` inside XLA fails
and the process dies (a segmentation fault or an abort in ``compile``, ``serialize`` or
``deserialize_executable``), after about 7,000 programs. A test-suite worker or a main-job worker
that runs hundreds of tests or several experiments, each compiling its own programs, gets there.

:func:`release_compiled_programs` drops JAX's in-memory caches of compiled programs
(:func:`jax.clear_caches`) once the process holds more than a fraction of the limit; a program
needed again is compiled again, or read back from the persistent compilation cache. Pure standard
library until it clears.
"""

from __future__ import annotations

__all__ = ["map_count", "map_limit", "release_compiled_programs"]

_DEFAULT_LIMIT = 65_530


def map_count() -> int | None:
    """The number of memory mappings this process holds (lines of ``/proc/self/maps``); ``None`` off Linux."""
    try:
        with open("/proc/self/maps", "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except OSError:
        return None


def map_limit() -> int:
    """The kernel's limit on the mappings of one process (``vm.max_map_count``; 65,530 when unreadable)."""
    try:
        with open("/proc/sys/vm/max_map_count", "rb") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return _DEFAULT_LIMIT


def release_compiled_programs(fraction: float = 0.5) -> bool:
    """Clear JAX's caches of compiled programs if this process holds more than ``fraction × map_limit()`` mappings.

    **Arguments:** `fraction`: in (0, 1]; a ``ValueError`` names it otherwise.

    **Returns:** whether it cleared (never off Linux, where the count is unknown, nor before JAX
    is imported).
    """
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
    import sys

    count = map_count()
    if count is None or "jax" not in sys.modules or count <= fraction * map_limit():
        return False
    import gc

    import jax

    jax.clear_caches()
    gc.collect()
    return True
