"""JAX's persistent compilation cache in a user cache folder (the main job, the CLI, the tests; public as
:func:`hassejax.enable_compilation_cache`).

Compiled XLA programs are written to ``$HASSEJAX_CACHE_DIR`` (default
``$XDG_CACHE_HOME/hassejax/jax``, i.e. ``~/.cache/hassejax/jax``), so a second run of the
same programs skips the backend compile. ``HASSEJAX_COMPILE_CACHE=0`` turns it off.
Pure standard library until it configures JAX.
"""

from __future__ import annotations

import os
from pathlib import Path

from ._warn import user_stacklevel

__all__ = ["compilation_cache_dir", "enable_compilation_cache", "request_compilation_cache"]

_OFF = ("0", "false", "no", "off")
_ON = ("1", "true", "yes", "on", "")


def compilation_cache_dir() -> Path | None:
    """The folder the cache uses, or ``None`` when ``HASSEJAX_COMPILE_CACHE`` turns it off.

    A value of ``HASSEJAX_COMPILE_CACHE`` that is neither on (1, true, yes, on) nor off (0, false,
    no, off) leaves the cache on with a ``RuntimeWarning`` naming it.
    """
    value = os.environ.get("HASSEJAX_COMPILE_CACHE", "1").strip().lower()
    if value in _OFF:
        return None
    if value not in _ON:
        import warnings

        warnings.warn(
            f"HASSEJAX_COMPILE_CACHE={os.environ['HASSEJAX_COMPILE_CACHE']!r} is neither on (1, true, yes, on) "
            "nor off (0, false, no, off); the persistent compilation cache stays on",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
    explicit = os.environ.get("HASSEJAX_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hassejax" / "jax"


def _created_folder() -> Path | None:
    """:func:`compilation_cache_dir`, created; ``None`` when turned off or not creatable."""
    folder = compilation_cache_dir()
    if folder is None:
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        import warnings

        warnings.warn(
            f"JAX's persistent compilation cache is off: cannot create the folder {str(folder)!r} "
            f"({err.strerror or err}); set HASSEJAX_CACHE_DIR to a writable folder, or HASSEJAX_COMPILE_CACHE=0",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
        return None
    return folder


def enable_compilation_cache() -> Path | None:
    """Point JAX's persistent compilation cache at :func:`compilation_cache_dir` (every program cached).

    The ``hassejax`` command, ``experiments/reproduce.py`` and the tests call it at start-up; a script of your
    own calls it once, before its first solve, so that a second run of the script reads its compiled programs
    back instead of compiling them again (seconds a solve, the tracing remains). It sets JAX's global options
    ``jax_compilation_cache_dir`` and (to 0) ``jax_persistent_cache_min_compile_time_secs`` and
    ``jax_persistent_cache_min_entry_size_bytes`` for the whole process.

    **Returns:** the folder (``$HASSEJAX_CACHE_DIR``, default ``$XDG_CACHE_HOME/hassejax/jax``, i.e.
    ``~/.cache/hassejax/jax``), or ``None`` when
    turned off (``HASSEJAX_COMPILE_CACHE=0``) or when the folder cannot be created (then a ``RuntimeWarning``
    names it and JAX compiles as usual; nothing else changes).

    **Raises:** nothing: a ``HASSEJAX_COMPILE_CACHE`` that is neither on nor off warns and leaves the cache on
    (:func:`compilation_cache_dir`).

    Source: (derived), no paper: JAX's persistent compilation cache (docs.jax.dev, "Persistent compilation cache";
    the options set above).

    **Example:**

    ```python
    >>> import hassejax
    >>> folder = hassejax.enable_compilation_cache()
    >>> folder is None or folder.is_dir()
    True

    ```
    """
    folder = _created_folder()
    if folder is None:
        return None
    import jax

    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return folder


def request_compilation_cache() -> Path | None:
    """Turn the persistent cache on for this process without importing JAX (the CLI's start-up).

    If JAX is already imported, as :func:`enable_compilation_cache`. Otherwise JAX's own
    environment variables are set (``JAX_COMPILATION_CACHE_DIR``,
    ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0``,
    ``JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0``; values the user set win), which JAX reads
    if and when it is imported: a command that never needs JAX never starts it.

    **Returns:** the folder, or ``None`` when turned off or not creatable.
    """
    import sys

    if "jax" in sys.modules:
        return enable_compilation_cache()
    folder = _created_folder()
    if folder is None:
        return None
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(folder))
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    return folder
