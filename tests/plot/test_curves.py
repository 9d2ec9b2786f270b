"""polyline_distance against brute force: the distance to many points sampled densely on the segments."""

from itertools import pairwise

import numpy as np
import pytest

from hassejax.errors import ParameterError
from hassejax.plot.curves import polyline_distance


def test_matches_dense_sampling_of_the_polyline():
    rng = np.random.default_rng(0)
    line = np.cumsum(rng.normal(size=(6, 2)), 0)
    pts = rng.normal(scale=3.0, size=(50, 2))
    s = np.linspace(0, 1, 4001)[:, None]
    dense = np.concatenate([a + s * (b - a) for a, b in pairwise(line)])
    brute = np.min(np.linalg.norm(pts[:, None] - dense[None], axis=-1), axis=1)
    got = polyline_distance(pts, line)
    np.testing.assert_allclose(got, brute, atol=1e-3)
    assert np.all(got <= brute + 1e-12)


def test_points_on_the_path_at_another_speed_are_at_distance_zero_and_errors():
    t = np.linspace(0, 1, 30)
    line = np.stack([t, t**2], -1)
    faster = np.stack([t**3, t**6], -1)  # the same parabola, another clock
    assert polyline_distance(faster, line).max() < 2e-3
    with pytest.raises(ParameterError, match="finite"):
        polyline_distance(np.array([[np.nan, 0.0]]), line)
