import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

# One thread per process for OpenBLAS and XLA's CPU kernels: under `-n N` the N xdist workers
# (and the reproduce.py subprocess) already keep the cores busy, and threaded BLAS next to another
# busy process spin-waits (reproduce.py --quick --only real_heads beside a second process: 226
# CPU-s with OpenBLAS's default threads, 50 with one). Set here, before the workers start, so
# they and every subprocess inherit it; a value already set wins.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
# The suite's CPU time is mostly XLA compiling many small programs that then run for milliseconds:
# LLVM's optimisation level 0 for the CPU backend, XLA's legacy elemental emitters and, on x86, no
# FMA instructions (hassejax._xla_flags.fast_compile_flags: a Gaussian solve, a vmapped one and a
# particle solve compile in 3.0 s against 6.5 s at level 0 alone; the whole suite cold 674 s
# against 911 s at level 0 alone, in another session). No fast-math: IEEE semantics are kept, and without FMA two
# programs of one computation that fuse differently still agree to the bit, as under XLA's defaults.
# The library runs at XLA's defaults; reproduce.py takes the legacy emitters (with --quick all three).
# A flag the user set wins.
from hassejax._xla_flags import add_xla_flags, fast_compile_flags  # noqa: E402  (standard library only)

add_xla_flags(["--xla_cpu_multi_thread_eigen=false", *fast_compile_flags(level0=True)])

import jax  # noqa: E402

from hassejax._cache import enable_compilation_cache  # noqa: E402

# Both xdist workers and the reproduce.py subprocess share JAX's persistent compilation cache
# (~/.cache/hassejax/jax; HASSEJAX_COMPILE_CACHE=0 turns it off): a program compiled once is
# not compiled again by another process or the next run.
enable_compilation_cache()

# Tests run in float64 so that closed forms can be checked to tight tolerances; the
# library itself is dtype-explicit (closure matmuls are float32/bf16 whatever this says).
jax.config.update("jax_enable_x64", True)

from hypothesis import settings  # noqa: E402

settings.register_profile("ci", deadline=None, print_blob=True)
settings.load_profile("ci")

import pytest  # noqa: E402
from jaxtyping import config as _jaxtyping_config  # noqa: E402


@pytest.fixture
def no_typecheck():
    """Switch the runtime jaxtyping checks off, to reach the library's own validation."""
    _jaxtyping_config.update("jaxtyping_disable", True)
    yield
    _jaxtyping_config.update("jaxtyping_disable", False)


# ----------------------------------------------------------------------------- scheduling
FIRST = ("tests/test_reproduce.py::test_reproduce_quick_writes_every_figure",)
"""Tests that start first: the main job's smoke run takes minutes in one subprocess; started
last (its place in collection order), it would run alone at the end while the other worker idles."""


def pytest_collection_modifyitems(config, items):
    """Move :data:`FIRST` to the front; the rest keeps pytest's order (module fixtures stay shared).

    Every xdist worker applies the same reordering, so their collections stay identical."""
    items.sort(key=lambda item: 0 if item.nodeid in FIRST else 1)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under ``-n N`` with the default ``--dist load``, schedule by work stealing: the tests are
    split evenly at the start and an idle worker takes half of another's queue, so no worker sits
    behind the long first test with a queue the others could run."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import WorkStealingScheduling

    return WorkStealingScheduling(config, log)


# ----------------------------------------------------------------------------- compiled programs
@pytest.fixture(autouse=True, scope="module")
def _stay_below_the_map_limit():
    """After each module, drop the compiled programs this worker holds once they near the kernel's
    limit on memory mappings (``hassejax._map_limit``): a worker that had compiled ~7,000 programs
    died at 98 % of the suite (a segfault or abort inside XLA, in three of five full runs)."""
    yield
    from hassejax._map_limit import release_compiled_programs

    release_compiled_programs()
