"""Settings read from the environment (private; imports nothing heavy).

``HASSEJAX_PROGRESS=0`` switches off the package's progress bars (sweeps' chunks, long closures), read at each
call so that a process can set it for itself and the workers it spawns (``reproduce.py --no-progress``).
"""

from __future__ import annotations

import os

__all__ = ["progress_off"]


_OFF = ("0", "false", "no", "off")
_ON = ("1", "true", "yes", "on", "")
_WARNED: set[str] = set()


def progress_off() -> bool:
    """True when ``HASSEJAX_PROGRESS`` is ``0``, ``false``, ``no`` or ``off`` (any case); any other value than those
    and ``1``, ``true``, ``yes``, ``on`` (or unset) leaves the bars on with a ``RuntimeWarning`` naming it, once per
    value (a review: ``maybe`` was silently on, where ``HASSEJAX_COMPILE_CACHE`` warns)."""
    given = os.environ.get("HASSEJAX_PROGRESS", "")
    value = given.strip().lower()
    if value not in _OFF and value not in _ON and given not in _WARNED:
        import warnings

        from ._warn import user_stacklevel

        _WARNED.add(given)
        warnings.warn(
            f"HASSEJAX_PROGRESS={given!r} is neither on (1, true, yes, on) nor off (0, false, no, off); the progress "
            "bars stay on",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
    return value in _OFF
