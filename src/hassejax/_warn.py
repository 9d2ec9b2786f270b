"""The `stacklevel` that points a warning at the user's code (private; standard library only)."""

from __future__ import annotations

import os
import sys
from typing import no_type_check

_ROOT = os.path.dirname(os.path.abspath(__file__)) + os.sep
_WRAPPERS = ("jax", "equinox", "beartype", "typeguard")
"""Modules whose frames sit between the user's call and the package's frames: JAX's transformations (``jax.vmap`` of
a ``functools.partial`` of a solver), Equinox's wrappers, runtime type checkers under an import hook (``jax``
covers ``jaxlib`` and ``jaxtyping`` too)."""


@no_type_check  # a type checker's wrapper would be its caller's frame
def user_stacklevel() -> int:
    """``warnings.warn(..., stacklevel=user_stacklevel())``: the first frame outside the hassejax package.

    Call it in the argument list of ``warnings.warn`` (its caller's frame is level 1). A fixed
    `stacklevel` pointed at whichever hassejax function happened to sit that many frames up
    (review: ``to_splash``'s empty-row warning was reported at ``hassejax/masks/_validate.py``, the
    argument checker's wrapper). Frames of JAX, Equinox and runtime type checkers (the test suite's
    jaxtyping hook) are passed over too: a user's own function called by ``jax.vmap`` is where it
    stops. Python 3.12's ``skip_file_prefixes`` does the first part; 3.11 lacks it.
    """
    frame = sys._getframe(1)
    level = 1
    while frame is not None and (
        frame.f_code.co_filename.startswith(_ROOT) or str(frame.f_globals.get("__name__", "")).startswith(_WRAPPERS)
    ):
        frame = frame.f_back
        level += 1
    return level
