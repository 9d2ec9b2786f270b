"""Drawing covariance trajectories: the PSD cone, the unit disk of `Σ/tr Σ`, rank-one rays, colours.

Helpers of the dynamics figures (Castin et al., arXiv:2501.18322, figures 1–7), matplotlib only. Coordinates are those
of :mod:`hassejax.dynamics.geometry`: the cone `(a − b, 2c, a + b)` of `Σ = [[a, c], [c, b]]`
and the disk `(a − b, 2c)/(a + b)`.

- :func:`new_figure`: a constrained-layout grid of 2-D and 3-D axes.
- :func:`colors_from`: viridis colours of values and their colour-bar mappable.
- :func:`draw_cone`, :func:`draw_ray`: trajectories in the cone, a rank-one ray on top.
- :func:`draw_disk`: trajectories of `Σ/tr Σ` in the unit disk.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from jaxtyping import ArrayLike, Float
from matplotlib import colormaps
from matplotlib.ticker import MaxNLocator

from ..dynamics.geometry import cone_coords, disk_coords, rank_one_ray
from ..errors import ParameterError
from ._axes import check_axes
from .style import MIN_FONT_PT

__all__ = ["CMAP", "CONE_LABELS", "DISK_LABELS", "new_figure", "colors_from", "draw_cone", "draw_ray", "draw_disk"]

CMAP = colormaps["viridis"]
"""The colour map of :func:`colors_from`."""
CONE_LABELS = (r"$\Sigma_{11} - \Sigma_{22}$", r"$2\Sigma_{12}$", r"$\mathrm{tr}\,\Sigma$")
"""Axis labels (mathtext) of the cone coordinates `(a − b, 2c, a + b)`."""
DISK_LABELS = (r"$(\Sigma_{11} - \Sigma_{22})\,/\,\mathrm{tr}\,\Sigma$", r"$2\Sigma_{12}\,/\,\mathrm{tr}\,\Sigma$")
"""Axis labels (mathtext) of the disk coordinates `(a − b, 2c)/(a + b)`."""


def new_figure(nrows: int, ncols: int, size: tuple[float, float], projections: Sequence[Sequence[str | None]]):
    """A constrained-layout figure with an `nrows × ncols` grid of axes, 3-D where `projections` says ``"3d"``.

    **Arguments:**

    - `nrows`, `ncols`: the grid.
    - `size`: figure size in inches.
    - `projections`: `nrows` rows of `ncols` entries: ``None`` (2-D axes), ``"3d"`` or
      ``"skip"`` (no axes in that cell).

    **Returns:** `(fig, axes)`, `axes` an object array `(nrows, ncols)` (None where skipped).

    **Raises:** :class:`~hassejax.errors.ParameterError` when `projections` is not `nrows × ncols`.

    Source: (derived).

    **Example:**

    ```python
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from hassejax.plot.dynamics import new_figure
    >>> fig, axes = new_figure(1, 3, (6.0, 2.0), [[None, "3d", "skip"]])
    >>> axes.shape, axes[0, 1].name, axes[0, 2]
    ((1, 3), '3d', None)

    ```
    """
    if len(projections) != nrows or any(len(row) != ncols for row in projections):
        raise ParameterError(f"`projections` must be {nrows} rows of {ncols} entries; got {projections!r}.")
    fig = plt.figure(figsize=size, layout="constrained")
    axes = np.empty((nrows, ncols), dtype=object)
    for r in range(nrows):
        for c in range(ncols):
            proj = projections[r][c]
            if proj == "skip":
                axes[r, c] = None
                continue
            axes[r, c] = fig.add_subplot(nrows, ncols, r * ncols + c + 1, projection=proj)
    return fig, axes


def colors_from(values: Float[ArrayLike, " n"]):
    """Viridis colours of `values` scaled to their range, and the matching ScalarMappable (for a colour bar).

    Constant values map to the bottom of the scale.

    **Arguments:** `values`: `(n,)` floats, `n >= 1`.

    **Returns:** `(colors, mappable)`: a list of `n` RGBA tuples and a
    :class:`matplotlib.cm.ScalarMappable`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for an empty `values` or one with a NaN or infinite entry
    (a NaN made every colour fully transparent, an inf drew its member transparent: a review).

    Source: (derived).

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.plot.dynamics import CMAP, colors_from
    >>> colors, sm = colors_from(np.array([0.0, 5.0, 10.0]))
    >>> colors[0] == CMAP(0.0), colors[2] == CMAP(1.0), sm.norm.vmax
    (True, True, 10.0)

    ```
    """
    values = np.asarray(values, float)
    if values.size == 0:
        raise ParameterError("`values` must hold at least one value; got an empty array.")
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise ParameterError(
            f"`values` must be finite; got {bad.size} NaN/inf value(s), first {float(values.flat[bad[0]])!r} at index "
            f"{int(bad[0])}. Leave those members out (or give them a colour of their own) before colouring."
        )
    hi = float(values.max()) if values.max() > values.min() else float(values.min()) + 1.0
    norm = plt.Normalize(float(values.min()), hi)
    sm = plt.cm.ScalarMappable(norm=norm, cmap=CMAP)
    return [CMAP(norm(v)) for v in values], sm


def draw_cone(
    ax, trajs: Sequence[Float[ArrayLike, "T 2 2"]], colors, *, z_max: float | None = None, end_markers: bool = True
) -> float:
    """Trajectories in cone coordinates `(a − b, 2c, a + b)` on a 3-D axis, with the PSD cone `z ≥ √(x² + y²)`.

    **Arguments:**

    - `ax`: a 3-D matplotlib axis.
    - `trajs`: per member a `(T_i, 2, 2)` array of covariances along the trajectory.
    - `colors`: one matplotlib colour per member.
    - `z_max`: height of the drawn cone (default: 1.05 × the largest trace drawn).
    - `end_markers`: mark each trajectory's last point.

    **Returns:** the height of the drawn cone.

    **Raises:** :class:`~hassejax.errors.ParameterError` for an `ax` that is not 3-D matplotlib axes, when `trajs`
    and `colors` differ in length, a trajectory has a NaN or infinite entry (the cone height was NaN, silently: a
    review), `trajs` is empty and `z_max` is not given, or `z_max` is not a positive finite number.

    Source: (derived) the cone panels of Castin et al., arXiv:2501.18322 (figures 1–4).

    **Example:**

    ```python
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from hassejax.plot.dynamics import draw_cone, new_figure
    >>> fig, axes = new_figure(1, 1, (3.0, 3.0), [["3d"]])
    >>> traj = np.stack([np.eye(2) * s for s in (1.0, 0.5, 0.25)])
    >>> round(draw_cone(axes[0, 0], [traj], ["k"]), 6)
    2.1

    ```
    """
    check_axes(ax, three_d=True)
    if len(trajs) != len(colors):
        raise ParameterError(
            f"`trajs` and `colors` must have one entry per member; got {len(trajs)} and {len(colors)}."
        )
    pts = [np.asarray(cone_coords(t)) for t in trajs]
    for i, p in enumerate(pts):
        if not np.all(np.isfinite(p)):
            raise ParameterError(
                f"`trajs[{i}]` must be finite covariances; got NaN/inf entries at {int(np.sum(~np.isfinite(p).all(1)))} "
                f"of its {len(p)} times. Cut the trajectory at its last finite time (e.g. a blow-up) before drawing."
            )
    if z_max is not None and (
        isinstance(z_max, (bool, np.bool_))
        or not isinstance(z_max, (int, float, np.integer, np.floating))
        or not np.isfinite(z_max)
        or z_max <= 0
    ):
        raise ParameterError(f"`z_max` must be a positive finite number or None; got {z_max!r}.")
    if z_max is None:
        if not pts:
            raise ParameterError("`trajs` is empty: give `z_max` to draw the cone alone.")
        z_max = 1.05 * max(float(np.max(p[:, 2])) for p in pts)
    for p, col in zip(pts, colors):
        ax.plot(p[:, 0], p[:, 1], p[:, 2], color=col, lw=0.8, alpha=0.7)
        if end_markers:
            ax.scatter(p[-1, 0], p[-1, 1], p[-1, 2], color=col, s=6, depthshade=False)
    th, r = np.meshgrid(np.linspace(0, 2 * np.pi, 60), np.linspace(0, z_max, 12))
    ax.plot_surface(r * np.cos(th), r * np.sin(th), r, color="0.5", alpha=0.08, linewidth=0)
    th1 = np.linspace(0, 2 * np.pi, 120)
    ax.plot(z_max * np.cos(th1), z_max * np.sin(th1), z_max + 0 * th1, color="0.4", lw=0.6)
    ax.set_xlabel(CONE_LABELS[0], labelpad=0)
    ax.set_ylabel(CONE_LABELS[1], labelpad=0)
    ax.zaxis.set_rotate_label(False)  # upright: a rotated mathtext label may be drawn upside down
    ax.set_zlabel(CONE_LABELS[2], labelpad=2, rotation=90)
    ax.tick_params(labelsize=MIN_FONT_PT, pad=0)
    for axis in (ax.xaxis, ax.yaxis, ax.zaxis):  # three ticks an axis: 8-pt labels do not collide at print size
        axis.set_major_locator(MaxNLocator(3))
    return z_max


def draw_ray(
    ax, angle_deg: float, z_max: float, color, label: str, *, lw: float = 2.4, text: str | None = None
) -> None:
    """The rank-one ray `s vvᵀ`, `v = (cos θ, sin θ)`, on a 3-D cone axis, drawn above everything before it.

    Turns off the axis' depth sort (later artists are drawn above earlier ones), draws the
    ray from the apex to trace `z_max` with a white halo and writes `text` (default: the
    angle) at its end.

    **Arguments:** `ax`: a 3-D axis; `angle_deg`: `θ` in degrees; `z_max`: the ray's largest
    trace; `color`, `label`, `lw`: line style and legend label; `text`: the end label.

    **Returns:** None.

    **Raises:** nothing of its own.

    Source: (derived) :func:`hassejax.dynamics.geometry.rank_one_ray`.

    **Example:**

    ```python
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from hassejax.plot.dynamics import draw_ray, new_figure
    >>> fig, axes = new_figure(1, 1, (3.0, 3.0), [["3d"]])
    >>> draw_ray(axes[0, 0], 30.0, 1.0, "crimson", "ray")
    >>> axes[0, 0].texts[0].get_text()
    '30.00°'

    ```
    """
    ax.computed_zorder = False
    line = rank_one_ray(angle_deg, z_max)
    ax.plot(line[:, 0], line[:, 1], line[:, 2], color="w", lw=lw + 2.0, zorder=10, solid_capstyle="round")
    ax.plot(line[:, 0], line[:, 1], line[:, 2], color=color, lw=lw, zorder=11, label=label, solid_capstyle="round")
    end = line[-1] * 1.06
    ax.text(end[0], end[1], end[2], f"{angle_deg:.2f}°" if text is None else text, color=color, fontsize=9,
            fontweight="bold", ha="center", va="bottom", zorder=12)  # fmt: skip


def draw_disk(ax, trajs: Sequence[Float[ArrayLike, "T 2 2"]], colors, *, end_markers: bool = True) -> None:
    """Trajectories of `Σ/tr Σ` in disk coordinates `(a − b, 2c)/(a + b)`, with the unit circle (rank one).

    **Arguments:** `ax`: a 2-D axis; `trajs`: per member `(T_i, 2, 2)` covariances; `colors`:
    one colour per member; `end_markers`: mark each trajectory's last point.

    **Returns:** None.

    **Raises:** :class:`~hassejax.errors.ParameterError` for an `ax` that is not 2-D matplotlib axes, or when
    `trajs` and `colors` differ in length.

    Source: (derived) the disk panels of Castin et al., arXiv:2501.18322 (figures 5, 6).

    **Example:**

    ```python
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from hassejax.plot.dynamics import draw_disk, new_figure
    >>> fig, axes = new_figure(1, 1, (3.0, 3.0), [[None]])
    >>> draw_disk(axes[0, 0], [np.stack([np.eye(2), np.diag([1.0, 0.0])])], ["k"])
    >>> axes[0, 0].lines[0].get_xydata().tolist()
    [[0.0, 0.0], [1.0, 0.0]]

    ```
    """
    check_axes(ax)
    if len(trajs) != len(colors):
        raise ParameterError(
            f"`trajs` and `colors` must have one entry per member; got {len(trajs)} and {len(colors)}."
        )
    for t, col in zip(trajs, colors):
        p = disk_coords(t)
        ax.plot(p[:, 0], p[:, 1], color=col, lw=0.7, alpha=0.7)
        if end_markers:
            ax.scatter(p[-1, 0], p[-1, 1], color=col, s=6, zorder=3)
    th = np.linspace(0, 2 * np.pi, 200)
    ax.plot(np.cos(th), np.sin(th), color="k", lw=0.8, alpha=0.6)
    ax.set_aspect("equal")
    ax.set_xlim(-1.08, 1.08)
    ax.set_ylim(-1.08, 1.08)
    ax.set_xlabel(DISK_LABELS[0])
    ax.set_ylabel(DISK_LABELS[1])
