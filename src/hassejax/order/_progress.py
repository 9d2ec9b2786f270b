"""Progress bars of the long closure and depth computations (private; imports no JAX, tqdm only once a bar shows).

The public functions of :mod:`hassejax.order` take ``progress``: ``False`` (default: silent),
``True`` (a tqdm bar on stderr from the start) or a number of seconds ``d >= 0`` (the bar shows
once the work has run ``d`` seconds, or at once when its estimated cost is at least ``d``;
``hassejax analyze`` passes 2 on a terminal). :func:`check_progress` validates it and
:func:`progress_bar` opens a :class:`Bar`.

Host loops (products of interval rows, bit-packed batches of classes, rounds and
breadth-first levels) update the bar once an iteration. A loop inside one jitted
:func:`jax.lax.while_loop` (the matmul route) gets no host callback, which would keep its
program out of JAX's persistent compilation cache and cost a round trip an iteration: its bar
shows the estimated seconds a product, opens at once when the loop is estimated to take at
least the delay, keeps its clock running from a host thread (:meth:`Bar.tick`) and ends with
the products done. Steps without iterations (a dense conversion, the classes, the quotient
order) get such a ticking bar with the elapsed time only.

Source: (derived).
"""

from __future__ import annotations

import math
import sys
import threading
import time
from typing import no_type_check

import numpy as np

from .._env import progress_off
from ..errors import ParameterError

__all__ = ["Bar", "NO_BAR", "check_progress", "progress_bar"]


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def check_progress(progress) -> float | None:
    """``progress`` as the delay in seconds before a bar shows, or None for no bar.

    **Raises:** :class:`~hassejax.errors.ParameterError` unless `progress` is a bool or a finite
    number of seconds ``>= 0``.
    """
    if isinstance(progress, (bool, np.bool_)):
        return 0.0 if progress else None
    if isinstance(progress, (int, float, np.integer, np.floating)) and math.isfinite(progress) and progress >= 0:
        return float(progress)
    raise ParameterError(
        "`progress` must be True (a progress bar on stderr), False (none) or a number of seconds >= 0 "
        f"(a bar once the work has run that long); got {progress!r}."
    )


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
class Bar:
    """A tqdm bar on stderr that opens once the work has run `delay` seconds; does nothing for ``delay=None``.

    Counts ``n`` iterations of `unit` (a plural noun; ``""`` for a step without iterations,
    shown with its elapsed time only) out of `total` (None: unknown) whether open or not, so
    that a bar opened late starts at the right count and elapsed time. With :meth:`tick`, a
    daemon thread opens the bar when it is due and refreshes its clock while the work reports
    nothing (a jitted loop, one large NumPy or XLA operation).
    """

    __slots__ = ("_bar", "_closed", "_lock", "_stop", "_t0", "delay", "desc", "n", "note_text", "total", "unit")

    def __init__(self, delay: float | None, desc: str = "", unit: str = "it", total: int | None = None):
        self.delay, self.desc, self.unit, self.total = delay, desc, unit, total
        self.n = 0
        self.note_text = ""
        self._t0 = time.perf_counter()
        self._bar = None
        self._closed = False
        self._lock = threading.Lock()
        self._stop = None

    @property
    def on(self) -> bool:
        """True unless progress is off."""
        return self.delay is not None

    def update(self, k: int = 1) -> None:
        """`k` more iterations done."""
        if self.delay is None:
            return
        self.n += k
        if self._bar is not None:
            self._bar.update(k)
        elif time.perf_counter() - self._t0 >= self.delay:
            self.show()

    def begin(self) -> None:
        """An iteration starts: open the bar if it is due (at once for a zero delay)."""
        if self.delay is not None and self._bar is None and time.perf_counter() - self._t0 >= self.delay:
            self.show()

    def show(self) -> None:
        """Open the bar now (the start line of a long step, before it runs)."""
        if self.delay is None or self._bar is not None or progress_off():
            return
        from tqdm import tqdm

        with self._lock:
            if self._bar is not None or self._closed:
                return
            bar = tqdm(
                total=self.total,
                initial=self.n,
                desc=self.desc,
                unit=self.unit or "it",
                file=sys.stderr,
                dynamic_ncols=True,
                bar_format=_bar_format(self.total, self.unit),
            )
            late = time.perf_counter() - self._t0
            bar.start_t -= late  # elapsed time and rate from the start of the work
            if self.note_text:
                bar.set_postfix_str(self.note_text, refresh=False)
            if self.note_text or late >= 0.1:  # tqdm has shown the bar as it was at creation
                bar.refresh()
            self._bar = bar

    def tick(self, every: float = 1.0) -> None:
        """Open the bar when it is due even if nothing updates it, then refresh its clock every
        `every` seconds until it closes (from a daemon thread; the work itself is not touched)."""
        if self.delay is None or self._stop is not None:
            return
        self._stop = threading.Event()

        def run(stop: threading.Event) -> None:
            if stop.wait(max(0.0, self.delay - (time.perf_counter() - self._t0))):
                return
            self.show()
            while not stop.wait(every):
                with self._lock:
                    if self._bar is not None:
                        self._bar.refresh()

        threading.Thread(target=run, args=(self._stop,), name="hassejax-progress", daemon=True).start()

    def add_total(self, k: int) -> None:
        """`k` more iterations expected (the total becomes known as the work goes)."""
        self.set_total((self.total or 0) + k)

    def set_total(self, total: int | None) -> None:
        if self.delay is None:
            return
        self.total = total
        if self._bar is not None:
            self._bar.total = total
            self._bar.bar_format = _bar_format(total, self.unit)
            self._bar.refresh()

    def note(self, text: str) -> None:
        """Text after the counts (e.g. the power reached), shown at the next refresh."""
        if self.delay is None:
            return
        self.note_text = text
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=False)

    def close(self) -> None:
        if self.delay is None:
            return
        if self._stop is not None:
            self._stop.set()
        with self._lock:
            self._closed = True
            if self._bar is not None:
                self._bar.close()
                self._bar = None

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def _bar_format(total: int | None, unit: str) -> str:
    """tqdm's format without the rate (a few slow iterations): ``desc: 3/7 products [00:02<00:03, note]``."""
    if not unit:
        return "{desc} [{elapsed}{postfix}]"
    if total is None:
        return "{desc}: {n_fmt} " + unit + " [{elapsed}{postfix}]"
    return "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} " + unit + " [{elapsed}<{remaining}{postfix}]"


#: The bar of progress off: every method does nothing.
NO_BAR = Bar(None)


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def progress_bar(
    delay: float | None,
    desc: str,
    unit: str,
    *,
    total: int | None = None,
    estimate: float | None = None,
    tick: bool = False,
) -> Bar:
    """A :class:`Bar` (use it as a context manager, so that it closes); :data:`NO_BAR` for ``delay=None``.

    The bar opens at the first :meth:`Bar.begin` or :meth:`Bar.update` after `delay` seconds
    (so a stage with nothing to do shows none), or at once when `estimate`, the estimated
    seconds of a step that reports nothing while it runs (a jitted loop), is at least `delay`.
    With `tick` (such a step), the bar opens when due and its clock runs (:meth:`Bar.tick`).
    """
    if delay is None:
        return NO_BAR
    bar = Bar(delay, desc, unit, total)
    if estimate is not None and estimate >= delay:
        bar.show()
    if tick:
        bar.tick()
    return bar
