"""Settings read from the environment (private; imports nothing heavy).

``HASSEJAX_PROGRESS=0`` switches off the package's progress bars (sweeps' chunks, long closures), read at each
call so that a process can set it for itself and the workers it spawns (``reproduce.py --no-progress``).
"""

from __future__ import annotations

import os

__all__ = ["progress_off"]


def progress_off() -> bool:
    """True when ``HASSEJAX_PROGRESS`` is ``0``, ``false``, ``no`` or ``off`` (any case)."""
    return os.environ.get("HASSEJAX_PROGRESS", "").strip().lower() in ("0", "false", "no", "off")
