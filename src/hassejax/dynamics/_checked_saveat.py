"""Skip diffrax's two save-time checks: the solvers make them without a host callback (private).

``diffrax.diffeqsolve`` checks ``SaveAt(ts=...)`` with :func:`equinox.internal.error_if`
("saveat.ts must be increasing or decreasing", "saveat.ts must lie between t0 and t1").
Inside its ``filter_jit`` the save times are always traced, so each check becomes a
``pure_callback`` in the compiled program, and JAX never writes a program holding a host
callback to its persistent compilation cache (jax 0.10: "Not writing persistent cache
entry ... because it uses host callbacks"): every solve recompiled in every process.

The solvers check `t0`, `t1`, `ts` themselves: on the host when they are concrete
(:func:`~._arguments.check_times`, a ``ParameterError``), in the program when they are traced
(``_solve.integrate``: the member's status becomes ``invalid_times``, so a bad member does not
abort a sweep). :func:`saveat_checks_skipped` hides exactly those two messages from diffrax
while it traces: ``diffrax._integrate.eqxi`` (its handle on
``equinox.internal``) is swapped for a proxy whose ``error_if`` returns its argument for
these two messages and delegates everything else; the module attribute is restored on exit.
Any other check (in diffrax, optimistix, or a user's kernel) is untouched. If diffrax's layout changes (no ``eqxi`` attribute), nothing
is skipped: the solve still runs, only uncached. ``tests/dynamics/test_compile_cache.py``
checks that a solve's program holds no host callback.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

__all__ = ["saveat_checks_skipped"]

_SKIPPED = ("saveat.ts must be increasing or decreasing.", "saveat.ts must lie between t0 and t1.")
_state = threading.local()


class _EqxiProxy:
    """`equinox.internal` with the two save-time checks skipped while this thread asks for it."""

    def __init__(self, eqxi) -> None:
        self._eqxi = eqxi

    def __getattr__(self, name: str):
        return getattr(self._eqxi, name)

    def error_if(self, x, pred, msg, *args, **kwargs):
        if getattr(_state, "skip", False) and msg in _SKIPPED:
            return x
        return self._eqxi.error_if(x, pred, msg, *args, **kwargs)


@contextlib.contextmanager
def saveat_checks_skipped(skip: bool) -> Iterator[None]:
    """While active (and `skip` is True), diffrax's two save-time checks are not traced.

    **Arguments:** `skip`: True when the caller checks `t0`, `t1` and `ts` itself.
    """
    if not skip:
        yield
        return
    import diffrax._integrate as integrate_module

    eqxi = getattr(integrate_module, "eqxi", None)
    if eqxi is None:  # diffrax changed its layout: keep its checks (uncached, still correct)
        yield
        return
    previous = getattr(_state, "skip", False)
    _state.skip = True
    installed = not isinstance(eqxi, _EqxiProxy)
    if installed:
        integrate_module.eqxi = _EqxiProxy(eqxi)
    try:
        yield
    finally:
        _state.skip = previous
        if installed:
            integrate_module.eqxi = eqxi
