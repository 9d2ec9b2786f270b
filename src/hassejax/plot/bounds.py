"""Printing a bound so that it still holds: "≤ x" rounds x UP, "≥ x" rounds x DOWN.

Rounding a measured maximum to nearest for a figure title can print a false bound
(``4.48e-30`` as ``≤ 4e-30``). :func:`fmt_upper` and :func:`fmt_lower` round away from the
claim: the printed number is never on the wrong side of the measured one.
"""

from __future__ import annotations

import math

__all__ = ["fmt_upper", "fmt_lower"]


def _fmt(x: float, digits: int, rounding) -> str:
    if not math.isfinite(x):
        raise ValueError(f"x: expected a finite number, got {x!r}")
    if digits < 1:
        raise ValueError(f"digits: expected an integer >= 1, got {digits!r}")
    if x == 0.0:
        return f"{0.0:.{digits - 1}e}"
    e = math.floor(math.log10(abs(x)))
    scale = 10.0 ** (e - digits + 1)
    m = rounding(x / scale)  # an integer with `digits` digits (or one more after a carry)
    text = f"{m * scale:.{digits - 1}e}"
    # guard against the float product landing a hair on the wrong side
    if (rounding is math.ceil and float(text) < x) or (rounding is math.floor and float(text) > x):
        text = f"{(m + (1 if rounding is math.ceil else -1)) * scale:.{digits - 1}e}"
    return text


def fmt_upper(x: float, digits: int = 2) -> str:
    """``x`` in scientific notation with ``digits`` significant digits, rounded UP (towards +∞).

    Use for a printed upper bound ("≤ x", "at most x").

    **Arguments:** ``x`` a finite float; ``digits`` (``int`` ≥ 1) significant digits.

    **Returns:** a string ``s`` with ``float(s) >= x``, in ``"%.{digits-1}e"`` form.

    **Raises:** ``ValueError`` for a non-finite ``x`` or ``digits < 1``.

    Source: (derived).

    Example:
        >>> fmt_upper(4.48e-30, 1), fmt_upper(0.01237, 2), fmt_upper(0.0574, 2), fmt_upper(7.0e-11, 2)
        ('5e-30', '1.3e-02', '5.8e-02', '7.0e-11')
    """
    return _fmt(float(x), digits, math.ceil)


def fmt_lower(x: float, digits: int = 2) -> str:
    """``x`` in scientific notation with ``digits`` significant digits, rounded DOWN (towards −∞).

    Use for a printed lower bound ("≥ x", "at least x").

    **Arguments:** ``x`` a finite float; ``digits`` (``int`` ≥ 1) significant digits.

    **Returns:** a string ``s`` with ``float(s) <= x``, in ``"%.{digits-1}e"`` form.

    **Raises:** ``ValueError`` for a non-finite ``x`` or ``digits < 1``.

    Source: (derived).

    Example:
        >>> fmt_lower(0.0199, 1), fmt_lower(123.0, 2)
        ('1e-02', '1.2e+02')
    """
    return _fmt(float(x), digits, math.floor)
