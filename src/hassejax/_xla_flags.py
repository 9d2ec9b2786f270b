"""XLA CPU flags that shorten compiling, for the main job and the tests (private).

Pure standard library: it only edits ``XLA_FLAGS``, so call it before JAX's CPU backend starts
(before the first computation). A flag the user already set in ``XLA_FLAGS`` wins. Measured in
benchmarks/README.md ("XLA's legacy emitters").
"""

from __future__ import annotations

import os
import platform
from importlib import metadata

__all__ = ["add_xla_flags", "fast_compile_flags"]


def _jaxlib_version() -> tuple[int, int] | None:
    try:
        major, minor = metadata.version("jaxlib").split(".")[:2]
        return int(major), int(minor)
    except (metadata.PackageNotFoundError, ValueError):
        return None


def fast_compile_flags(*, level0: bool = False) -> list[str]:
    """The XLA flags that compile the many small programs of a solve faster.

    - ``--xla_cpu_use_fusion_emitters=false``: XLA's legacy elemental emitters for loop
      fusions (jaxlib ≥ 0.6; an unknown XLA flag aborts the process, so older jaxlib gets none).
      At XLA's default optimisation level: a Gaussian solve, a vmapped one and a particle solve
      compile in 4.8 s against 6.5 s; the benchmark sweeps compile in 0.75–0.96× and run alike.
    - with ``level0``: ``--xla_backend_optimization_level=0`` (LLVM level 0: the tests' programs
      run for milliseconds) and, on x86, ``--xla_cpu_max_isa=AVX``. At level 0 the legacy
      emitters with FMA instructions made two programs of one computation that fuse
      differently (a solve with and without its in-program checks, a sweep in one process and
      in two) round differently; without FMA every product and sum rounds alone and they agree
      to the bit, as under XLA's defaults. Together: 6.5 → 3.0 s for the three solves above,
      while larger sweeps run 2–3× slower (so only for the tests).

    Returns the flags (``--name=value`` strings), empty where jaxlib is older than 0.6.
    """
    version = _jaxlib_version()
    if version is None or version < (0, 6):
        return ["--xla_backend_optimization_level=0"] if level0 else []
    flags = ["--xla_cpu_use_fusion_emitters=false"]
    if level0:
        flags.append("--xla_backend_optimization_level=0")
        if platform.machine().lower() in ("x86_64", "amd64"):
            flags.append("--xla_cpu_max_isa=AVX")
    return flags


def add_xla_flags(flags: list[str]) -> str:
    """Append each of ``flags`` to ``XLA_FLAGS`` unless a flag of that name is there already.

    Returns the new value of ``XLA_FLAGS``.
    """
    current = os.environ.get("XLA_FLAGS", "")
    names = {f.split("=")[0] for f in current.split()}
    extra = [f for f in flags if f.split("=")[0] not in names]
    os.environ["XLA_FLAGS"] = " ".join(current.split() + extra)
    return os.environ["XLA_FLAGS"]
