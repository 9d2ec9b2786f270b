"""hassejax: the mathematics of attention in JAX.

- :mod:`hassejax.masks`: attention masks (row = query, column = key, True = may attend).
- :mod:`hassejax.order`: reachability closure, convergence depth, classes, quotient order
  and Hasse diagrams (Li & Guo, arXiv:2606.09951; spec hasse.md §1).
- :mod:`hassejax.dynamics`: tokens as interacting particles and Gaussian moment ODEs
  (Castin et al., arXiv:2501.18322; spec dynamics.md).
- :func:`enable_compilation_cache`: JAX's persistent compilation cache in a user cache folder, for your own
  scripts (the ``hassejax`` command, ``reproduce.py`` and the tests turn it on themselves).

Importing hassejax adds to ``XLA_FLAGS`` the flags without which the installed jaxlib computes wrong results on the
CPU (jaxlib 0.10.2: ``--xla_cpu_experimental_ynn_fusion_type=-reduce``, jax-ml/jax#39103), unless you set that flag
yourself; import it before your first JAX computation (a warning says when that was too late).
"""

from importlib import metadata as _metadata

from . import errors
from ._cache import enable_compilation_cache
from ._xla_flags import apply_correctness_flags as _apply_correctness_flags

_apply_correctness_flags()  # jaxlib 0.10.2's CPU reductions (jax-ml/jax#39103): before JAX's backend starts

try:  # one source of truth: the installed distribution's metadata (pyproject.toml)
    __version__ = _metadata.version("hassejax")
except _metadata.PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
__all__ = ["enable_compilation_cache", "errors", "__version__"]
