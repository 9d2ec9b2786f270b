"""Power-law fits (hassejax.dynamics.powerlaw) against exact power laws and a direct least-squares solve."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hassejax.dynamics.powerlaw import bootstrap_slope, loglog_fit, loglog_slope, rms
from hassejax.errors import ParameterError


@given(slope=st.floats(-2.0, 1.0), scale=st.floats(1e-3, 1e3))
def test_loglog_fit_recovers_a_power_law(slope, scale):
    n = np.array([64, 128, 256, 512, 1024])
    s, c = loglog_fit(n, scale * n**slope)
    assert s == pytest.approx(slope, abs=1e-9)
    assert np.exp(c) == pytest.approx(scale, rel=1e-8)


def test_loglog_slope_uses_the_last_decades_of_valid_points():
    t = np.geomspace(1e-2, 1e8, 41)
    y = np.where(t < 1e6, t**0.5, 1e3 * (t / 1e6) ** -1.0)  # a kink at 1e6: only the tail is −1
    valid = np.ones_like(t, bool)
    valid[-5:] = False  # not reached: the window ends at the last valid time
    ts, ys, vs = t[None], y[None], valid[None]
    t_end = t[valid].max()
    sel = (t >= t_end / 10) & valid
    want = np.linalg.lstsq(np.stack([np.log(t[sel]), np.ones(sel.sum())], 1), np.log(y[sel]), rcond=None)[0][0]
    assert loglog_slope(ts, ys, vs, last_decades=1.0)[0] == pytest.approx(want, abs=1e-12)
    assert loglog_slope(ts, ys, vs, last_decades=0.5)[0] == pytest.approx(-1.0, abs=1e-12)


def test_bootstrap_slope_and_rms():
    sizes = np.array([64, 256, 1024])
    exact = [np.full(7, 3.0 * n**-0.5) for n in sizes]  # no spread between seeds: the interval is the slope
    lo, hi = bootstrap_slope(sizes, exact, np.random.default_rng(0), reps=50)
    assert lo == pytest.approx(-0.5) and hi == pytest.approx(-0.5)
    rng = np.random.default_rng(1)
    noisy = [n**-0.5 * np.abs(rng.normal(size=40)) for n in sizes]
    lo, hi = bootstrap_slope(sizes, noisy, rng, reps=200)
    assert lo < loglog_fit(sizes, np.array([rms(e) for e in noisy]))[0] < hi
    np.testing.assert_allclose(rms(np.array([[3.0, 4.0], [1.0, 1.0]])), [np.sqrt(12.5), 1.0])


def test_errors_name_the_argument(no_typecheck):
    with pytest.raises(ParameterError, match="`n` and `err`"):
        loglog_fit([1.0, 2.0], [1.0, 0.0])
    with pytest.raises(ParameterError, match="`last_decades`"):
        loglog_slope(np.ones((1, 3)), np.ones((1, 3)), np.ones((1, 3), bool), last_decades=0.0)
    with pytest.raises(ParameterError, match="`y`: member 0"):
        loglog_slope(np.array([[0.0, 1.0]]), np.ones((1, 2)), np.array([[True, False]]))
    with pytest.raises(ParameterError, match="`errors`"):
        bootstrap_slope([1, 2], [np.ones(3)], np.random.default_rng(0))
