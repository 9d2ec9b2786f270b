"""fmt_upper / fmt_lower against Python's decimal module (ROUND_CEILING / ROUND_FLOOR)."""

from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

import numpy as np
import pytest

from hassejax.plot.bounds import fmt_lower, fmt_upper


def _decimal(x: float, digits: int, mode) -> float:
    d = Decimal(repr(x))
    q = Decimal(1).scaleb(d.adjusted() - digits + 1)
    return float(d.quantize(q, rounding=mode))


@pytest.mark.parametrize("digits", [1, 2, 3])
def test_against_decimal(digits):
    rng = np.random.default_rng(0)
    xs = np.concatenate([rng.uniform(-1, 1, 300) * 10.0 ** rng.integers(-30, 10, 300), [4.48e-30, 0.01237, 0.0574]])
    for x in xs:
        up, lo = float(fmt_upper(x, digits)), float(fmt_lower(x, digits))
        assert up >= x and lo <= x
        assert up == pytest.approx(_decimal(float(x), digits, ROUND_CEILING), rel=1e-12)
        assert lo == pytest.approx(_decimal(float(x), digits, ROUND_FLOOR), rel=1e-12)


def test_exact_values_stay():
    assert fmt_upper(7.0e-11) == "7.0e-11" and fmt_lower(0.25, 2) == "2.5e-01" and fmt_upper(0.0) == "0.0e+00"


def test_errors():
    with pytest.raises(ValueError, match="x"):
        fmt_upper(float("nan"))
    with pytest.raises(ValueError, match="digits"):
        fmt_lower(1.0, 0)
