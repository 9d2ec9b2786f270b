"""Drawing helpers of the dynamics figures (hassejax.plot.dynamics): what they put on the axes."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from hassejax.dynamics.geometry import cone_coords, disk_coords, trace_one_grid
from hassejax.errors import ParameterError
from hassejax.plot.dynamics import CMAP, colors_from, draw_cone, draw_disk, draw_ray, new_figure


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_new_figure_projections_and_errors():
    fig, axes = new_figure(2, 2, (4.0, 4.0), [["3d", None], [None, "skip"]])
    assert axes[0, 0].name == "3d" and axes[0, 1].name == "rectilinear" and axes[1, 1] is None
    assert len(fig.axes) == 3
    with pytest.raises(ParameterError, match="`projections`"):
        new_figure(1, 2, (4.0, 2.0), [[None]])


def test_colors_from_scales_to_the_range():
    values = np.array([2.0, 4.0, 3.0])
    colors, sm = colors_from(values)
    assert colors == [CMAP(0.0), CMAP(1.0), CMAP(0.5)]
    assert (sm.norm.vmin, sm.norm.vmax) == (2.0, 4.0)
    flat, _ = colors_from(np.array([5.0, 5.0]))
    assert flat == [CMAP(0.0), CMAP(0.0)]
    with pytest.raises(ParameterError, match="`values`"):
        colors_from(np.array([]))


def test_draw_cone_puts_the_trajectories_in_cone_coordinates():
    _fig, axes = new_figure(1, 1, (3.0, 3.0), [["3d"]])
    ax = axes[0, 0]
    trajs = [trace_one_grid(3, 3, -0.5, 0.5)[:4] * s for s in (1.0, 2.0)]
    z = draw_cone(ax, trajs, ["r", "b"])
    assert z == pytest.approx(1.05 * 2.0)  # trace 1 and 2: the cone's height 1.05 × the largest
    for line, t in zip(ax.lines[:2], trajs):
        x, y, zz = line.get_data_3d()
        np.testing.assert_allclose(np.stack([x, y, zz], -1), cone_coords(t))
    assert len(ax.collections) == 3  # two end markers and the cone's surface
    with pytest.raises(ParameterError, match="`trajs` and `colors`"):
        draw_cone(ax, trajs, ["r"])


def test_draw_ray_ends_on_the_rank_one_boundary():
    _fig, axes = new_figure(1, 1, (3.0, 3.0), [["3d"]])
    ax = axes[0, 0]
    draw_ray(ax, -30.0, 2.0, "crimson", "ray", text="here")
    x, y, z = ax.lines[-1].get_data_3d()
    v = np.array([np.cos(np.radians(-30.0)), np.sin(np.radians(-30.0))])
    np.testing.assert_allclose([x[-1], y[-1], z[-1]], cone_coords(2.0 * np.outer(v, v)), atol=1e-12)
    assert ax.computed_zorder is False and ax.texts[-1].get_text() == "here"


def test_draw_disk_puts_the_trajectories_in_disk_coordinates():
    _fig, axes = new_figure(1, 1, (3.0, 3.0), [[None]])
    ax = axes[0, 0]
    t = trace_one_grid(4, 4, -0.9, 0.9) * 3.0
    draw_disk(ax, [t], ["k"], end_markers=False)
    np.testing.assert_allclose(ax.lines[0].get_xydata(), disk_coords(t))
    np.testing.assert_allclose(np.hypot(*ax.lines[1].get_xydata().T), 1.0)  # the unit circle
    assert ax.get_xlim() == pytest.approx((-1.08, 1.08)) and not ax.collections
