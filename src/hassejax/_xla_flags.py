"""XLA CPU flags that shorten compiling, for the main job and the tests (private).

Pure standard library: it only edits ``XLA_FLAGS``, so call it before JAX's CPU backend starts
(before the first computation). A flag the user already set in ``XLA_FLAGS`` wins, and
:func:`level0_compiler_options` gives nothing where ``XLA_FLAGS`` sets the optimisation level. Measured in
benchmarks/README.md ("XLA's legacy emitters for the suite", "No FMA at level 0", session 43's level 0 for
``rank_histograms``).
"""

from __future__ import annotations

import os
import platform
import re
import sys
import warnings
from importlib import metadata

__all__ = [
    "DEFAULT_LEVEL",
    "add_xla_flags",
    "apply_correctness_flags",
    "correctness_compiler_options",
    "correctness_flags",
    "fast_compile_flags",
    "jit_at_default_level",
    "jit_takes_compiler_options",
    "level0_compiler_options",
    "sweep_compiler_options",
]

# XLA aborts the process on an unknown flag in XLA_FLAGS, so the emitter and ISA flags go only to
# the jaxlib versions checked to have them (0.5 has no `xla_cpu_use_fusion_emitters`; 0.10 has
# both); a later jaxlib gets level 0 alone until it is checked.
_CHECKED = ((0, 6), (0, 10))

# XLA's default LLVM optimisation level for one program (jax.jit's compiler_options), whatever XLA_FLAGS says.
DEFAULT_LEVEL = {"xla_backend_optimization_level": 3}


def _jaxlib_version() -> tuple[int, int] | None:
    try:
        major, minor = metadata.version("jaxlib").split(".")[:2]
        return int(major), int(minor)
    except (metadata.PackageNotFoundError, ValueError):
        return None


# jaxlib 0.10.2's CPU backend hands reductions to YNNPACK fusions that return wrong results, float32 and float64 alike
# (jax-ml/jax#39103: `jit(vmap(lambda r: sum((M @ r) ** 2)))` off by 1e-3 relative at 16,385 rows; here also
# `jit(jacrev(f))` for `f(x) = x * x.sum(-1)` on a (16, 16) float32 input, off by 2.97, which made
# `jacobian_flow(mode="rev")` report dependences its mask forbids). 0.10.1 had no such fusion; the bug is closed
# upstream. [first version known bad, first version not known bad).
_YNN_REDUCE_BAD = ((0, 10, 2), (0, 11, 0))
_YNN_FLAG = "--xla_cpu_experimental_ynn_fusion_type"


def _jaxlib_release() -> tuple[int, int, int] | None:
    try:
        parts = [re.match(r"\d*", p).group() for p in metadata.version("jaxlib").split(".")[:3]]  # "2rc1" -> "2"
        return tuple(int(p or 0) for p in parts) + (0,) * (3 - len(parts))
    except (metadata.PackageNotFoundError, ValueError):
        return None


def correctness_flags() -> list[str]:
    """The XLA flags without which the installed jaxlib computes wrong results on the CPU (possibly none).

    jaxlib 0.10.2: ``--xla_cpu_experimental_ynn_fusion_type=-reduce``, reductions kept out of XLA's YNNPACK fusions,
    which miscompile some of them (jax-ml/jax#39103; a reduction after a batched product: a vmapped Jacobian, a
    vmapped quadratic form). Other versions: none.
    """
    release = _jaxlib_release()
    if release is not None and _YNN_REDUCE_BAD[0] <= release < _YNN_REDUCE_BAD[1]:
        return [f"{_YNN_FLAG}=-reduce"]
    return []


_MISSED: list[str] = []
"""The :func:`correctness_flags` that :func:`apply_correctness_flags` could not apply to this process (JAX's backend
had started): :func:`correctness_compiler_options` stands in for them program by program."""

# YNNPACK fusions of dots alone (no reductions): the per-program stand-in for ``-reduce`` (a repeated enum option
# set per program replaces the list; jaxlib 0.10.2's `jit(jacrev(x * x.sum(-1)))` equals its eager value with it,
# and is off by 2.6 with the reductions' fusion type alone or the element-wise one)
_YNN_PROGRAM_OPTION = {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"}


def correctness_compiler_options(platform_name: str) -> dict:
    """Per-program XLA options that stand in for :func:`correctness_flags` on `platform_name` where ``import
    hassejax`` came after JAX had started its backend (so ``XLA_FLAGS`` could not take them): on the CPU with jaxlib
    0.10.2 ``{"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"}`` (YNNPACK fuses dots,
    not reductions, jax-ml/jax#39103); else, or where ``jax.jit`` has no ``compiler_options``, ``{}``. Passed by
    the programs hassejax compiles itself whose reductions the bug has been seen to break (:func:`hassejax.nn.
    jacobian_flow`, a sweep's chunk program); programs compiled inside the caller's ``jit`` take the caller's
    options."""
    if not _MISSED or platform_name != "cpu" or not jit_takes_compiler_options():
        return {}
    return dict(_YNN_PROGRAM_OPTION)


def _cpu_backend_started() -> bool:
    """Whether JAX has started a backend in this process (XLA_FLAGS is read then, once); imports no JAX."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    return bool(getattr(bridge, "_backends", None)) if bridge is not None else False


def apply_correctness_flags() -> list[str]:
    """Add :func:`correctness_flags` to ``XLA_FLAGS`` (on ``import hassejax``); returns the flags added.

    A flag of that name the user already set wins. Where JAX's backend has already started (JAX used before hassejax
    was imported) the flags can no longer take effect in this process: a ``RuntimeWarning`` says so and names the flag
    to set; they are added all the same, for the processes this one starts.
    """
    flags = [f for f in correctness_flags() if f.split("=")[0] not in os.environ.get("XLA_FLAGS", "")]
    if not flags:
        return []
    if _cpu_backend_started():
        warnings.warn(
            f"jaxlib {metadata.version('jaxlib')} miscompiles some reductions on the CPU (jax-ml/jax#39103) unless "
            f"XLA_FLAGS has {' '.join(flags)}; JAX had already started its backend when hassejax was imported, so "
            "hassejax could not set it: jacobian_flow and sweeps compile with a per-program stand-in, but other "
            "jitted reductions (yours, and hassejax's solves) may be wrong. "
            f"Start Python with XLA_FLAGS='{' '.join(flags)}', or import hassejax before the first JAX computation.",
            RuntimeWarning,
            stacklevel=3,
        )
        add_xla_flags(flags)  # too late here, but the processes this one starts inherit it (a review)
        _MISSED[:] = flags
        return []
    add_xla_flags(flags)
    return flags


def fast_compile_flags(*, level0: bool = False) -> list[str]:
    """The XLA flags that compile the many small programs of a solve faster.

    - ``--xla_cpu_use_fusion_emitters=false``: XLA's legacy elemental emitters for loop
      fusions. At XLA's default optimisation level: ``reproduce.py --quick`` compiled in 159
      against 243 worker-seconds, the benchmark sweeps in 0.75–0.96× the time, and every
      status and count came out the same (floats equal up to rounding).
    - with ``level0``: ``--xla_backend_optimization_level=0`` (LLVM level 0) and
      ``--xla_cpu_max_isa=AVX`` (no FMA instructions). At level 0 the legacy emitters with
      FMA made two programs of one computation that fuse differently (a solve with and
      without its in-program checks, a sweep in one process and in two) round differently;
      without FMA every product and sum rounds alone and they agree to the bit, as under XLA's
      defaults. A Gaussian solve, a vmapped one and a particle solve compile in 3.0 s against
      6.5 s at level 0 alone, while large sweeps run 2–3× slower: for the tests and
      ``reproduce.py --quick``, whose programs compile far longer than they run. Results
      change within the solvers' tolerances (step counts and blow-up times near the
      tolerance), not only in the last bit.

    The emitter and ISA flags only on x86 with jaxlib 0.6 to 0.10 (an unknown XLA flag
    aborts the process; elsewhere FMA cannot be turned off this way, so ``level0`` gives
    level 0 alone there).

    Returns the flags (``--name=value`` strings), possibly none.
    """
    version = _jaxlib_version()
    known = version is not None and _CHECKED[0] <= version <= _CHECKED[1]
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    if not level0:
        return ["--xla_cpu_use_fusion_emitters=false"] if known else []
    if known and x86:
        return ["--xla_cpu_use_fusion_emitters=false", "--xla_backend_optimization_level=0", "--xla_cpu_max_isa=AVX"]
    return ["--xla_backend_optimization_level=0"]


def sweep_compiler_options(platform_name: str) -> dict:
    """hassejax's per-program XLA options for a sweep's chunk program on `platform_name`.

    On the CPU with jaxlib 0.6 to 0.10: ``{"xla_cpu_use_fusion_emitters": False}``, XLA's legacy
    loop emitters (see :func:`fast_compile_flags`) for this program alone, whatever ``XLA_FLAGS``
    says. On the 1,000-member sweeps of ``benchmarks/sweep_compile.py`` they compiled in
    0.64–1.01× the time of XLA's default emitters (two runs) and ran in the same time within the
    spread between runs, with the same statuses, step counts and blow-up times to the bit. They
    round differently, so elsewhere step counts and blow-up times can differ within the solver's
    tolerance (fresh-user reviews: a 50-member float64 softmax sweep, two step counts and three
    blow-up times, by ≤ 1e-12 relative; a 24-member projective sweep, 13 blow-up times by ≤ 9e-16
    relative). Elsewhere (another backend,
    another jaxlib, a JAX whose ``jax.jit`` has no ``compiler_options``): ``{}``.
    """
    version = _jaxlib_version()
    if platform_name != "cpu" or version is None or not _CHECKED[0] <= version <= _CHECKED[1]:
        return {}
    return {"xla_cpu_use_fusion_emitters": False} if jit_takes_compiler_options() else {}


def level0_compiler_options(platform_name: str) -> dict:
    """Per-program XLA options for a program that compiles far longer than it runs (cold), in a process at XLA's
    default optimisation level.

    On the CPU ``{"xla_backend_optimization_level": 0}`` (LLVM level 0 for this one program); ``{}`` where
    ``XLA_FLAGS`` already sets ``--xla_backend_optimization_level`` (the user's choice, or ``--quick``'s level 0,
    wins), on another backend, or where ``jax.jit`` has no ``compiler_options``. The main job's full run passes them
    to ``rank_histograms``' sweeps: its twelve `d = 3, 4, 5` programs compiled for 66.8 s at XLA's default level and
    then ran for ~28 s; at level 0, alone on one core of the 2-core AMD EPYC VM, 113.3 → 81.8 s (25.8 s of it
    compiling), the same ranks and counts, step counts changed by rounding (a few in hundreds). Cold runs only: from
    the persistent compilation cache the level-0 programs run ~10 s longer; on the Intel Xeon VM of session 41 the
    same change saved nothing (compiling 38 → 21 s, running 13 s longer). benchmarks/README.md, session 43.
    """
    if platform_name != "cpu" or not jit_takes_compiler_options():
        return {}
    if "--xla_backend_optimization_level" in os.environ.get("XLA_FLAGS", ""):
        return {}
    return {"xla_backend_optimization_level": 0}


def add_xla_flags(flags: list[str]) -> str:
    """Append each of ``flags`` to ``XLA_FLAGS`` unless a flag of that name is there already.

    The user's ``XLA_FLAGS`` is kept as written (quoted values with spaces included); the
    new flags go after it. Returns the new value of ``XLA_FLAGS``.
    """
    current = os.environ.get("XLA_FLAGS", "")
    names = {f.split("=")[0] for f in current.split()}
    extra = [f for f in flags if f.split("=")[0] not in names]
    if extra:
        os.environ["XLA_FLAGS"] = " ".join(([current.rstrip()] if current.strip() else []) + extra)
    return os.environ.get("XLA_FLAGS", "")


def jit_at_default_level(fun, **jit_kwargs):
    """``jax.jit(fun)`` compiled at XLA's default optimisation level (3) whatever ``XLA_FLAGS`` says.

    For the few programs of a level-0 process (the tests, ``--quick``) that run far longer than
    they compile, e.g. a 1,000-member batch of solves: ``compiler_options`` applies to this one
    top-level program only. Where ``jax.jit`` has no ``compiler_options`` (an older JAX), a plain
    ``jax.jit``.
    """
    import jax

    if jit_takes_compiler_options():
        jit_kwargs.setdefault("compiler_options", dict(DEFAULT_LEVEL))
    return jax.jit(fun, **jit_kwargs)


def jit_takes_compiler_options() -> bool:
    """Whether this JAX's ``jax.jit`` has a ``compiler_options`` argument (per-program XLA options)."""
    import inspect

    import jax

    return "compiler_options" in inspect.signature(jax.jit).parameters
