"""cone_angle against the cone coordinates of s vvᵀ computed independently (NumPy arctan2)."""

import numpy as np
import pytest

from hassejax.errors import ParameterError
from hassejax.plot.angles import cone_angle


def test_cone_angle_matches_cone_coordinates_of_rank_one_matrices():
    rng = np.random.default_rng(0)
    theta = rng.uniform(-400.0, 400.0, 200)
    th = np.radians(theta)
    v = np.stack([np.cos(th), np.sin(th)], -1)
    s = rng.uniform(0.1, 3.0, 200)
    cov = s[:, None, None] * v[:, :, None] * v[:, None, :]
    x, y = cov[:, 0, 0] - cov[:, 1, 1], 2.0 * cov[:, 0, 1]  # cone coordinates, written out
    want = np.degrees(np.arctan2(y, x))
    got = cone_angle(theta)
    gap = np.mod(got - want + 180.0, 360.0) - 180.0
    assert np.max(np.abs(gap)) < 1e-9
    assert np.all((got > -180.0) & (got <= 180.0))


def test_cone_angle_wraps_to_half_open_interval_and_rejects_nan():
    assert cone_angle(90.0) == 180.0
    assert cone_angle(-90.0) == 180.0
    assert cone_angle(-58.14) == pytest.approx(-116.28)
    with pytest.raises(ParameterError, match="theta_deg"):
        cone_angle(np.nan)
