"""Drawing phase maps: an image of :class:`~hassejax.dynamics.diagnostics.Outcome` codes with a counted legend.

Matplotlib only. One colour per outcome (:data:`OUTCOME_COLORS`), the same in every map, so
two maps side by side read alike; a hatched overlay marks members where a prediction (e.g.
the naive spectral rule) contradicts the solved outcome.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from jaxtyping import ArrayLike, Bool, Int
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

from ..dynamics.diagnostics import Outcome
from ..errors import ParameterError
from ._axes import check_axes
from .style import OUTCOME_PALETTE

__all__ = ["OUTCOME_COLORS", "draw_outcome_map", "draw_hatched"]

OUTCOME_COLORS: dict[Outcome, str] = {
    Outcome.blow_up: OUTCOME_PALETTE["blow_up"],
    Outcome.diverge: OUTCOME_PALETTE["escape"],
    Outcome.low_rank: OUTCOME_PALETTE["low_rank"],
    Outcome.bounded: OUTCOME_PALETTE["stationary"],
    Outcome.contracts: OUTCOME_PALETTE["converge"],
    Outcome.collapse: OUTCOME_PALETTE["collapse"],
    Outcome.grows: OUTCOME_PALETTE["grows"],
    Outcome.undetermined: OUTCOME_PALETTE["undetermined"],
    Outcome.stalled: OUTCOME_PALETTE["stalled"],
}
"""Colour of each outcome in a phase map, from :data:`hassejax.plot.style.OUTCOME_PALETTE` (the outcome colours of
every figure, apart from the attention kinds' :data:`~hassejax.plot.style.KIND_COLORS`): blow-up wine, unsettled
escape rose, contraction teal, settling olive, stationary pale grey, growth yellow, collapse green, stalled purple,
undetermined black. Every two colours stay at least 10 apart in CIELAB as seen with each dichromacy simulated
(Machado et al. 2009; tested). In greyscale (CIE L*) black is at least 20 from every other colour (32 from the
blow-up wine)."""


def draw_outcome_map(
    ax,
    codes: Int[ArrayLike, "rows cols"],
    extent: tuple[float | int, float | int, float | int, float | int],
    labels: Mapping[Outcome, str],
    *,
    notes: Mapping[Outcome, str] | None = None,
    colors: Mapping[int, str] = OUTCOME_COLORS,
    xlabel: str = "",
    ylabel: str = "",
    title: str = "",
) -> list[Patch]:
    """Draw an image of outcome codes on `ax`; return legend handles "label: count (note)" in `labels` order.

    **Arguments:**

    - `ax`: a matplotlib 2-D axes.
    - `codes`: `(rows, cols)` int :class:`~hassejax.dynamics.diagnostics.Outcome` codes (row 0 at the
      bottom); further non-negative int codes (e.g. a refinement of an outcome) may be added
      with their own `labels` and `colors` entries.
    - `extent`: `(x0, x1, y0, y1)` of the image.
    - `labels`: the legend label of each outcome that may occur (its order is the legend's).
    - `notes`: optional text appended to an outcome's legend entry.
    - `colors`: colour of each code (default :data:`OUTCOME_COLORS`; extra codes need an entry).
    - `xlabel`, `ylabel`, `title`: axes texts.

    **Returns:** one :class:`matplotlib.patches.Patch` per outcome present in `codes`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for an `ax` that is not 2-D matplotlib axes; `codes` that
    are not a non-empty 2-D array of integer codes (a float code that is not a whole number, such as 2.7, was drawn
    in the colour of the nearest code without a legend entry; Booleans and NaN are refused too, integer-valued
    floats are taken), hold a negative code or an outcome without a label or colour; an `extent` that is not four
    finite numbers with `x0 != x1` and `y0 != y1`.

    Source: (derived).

    **Example:**

    ```python
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt, numpy as np
    >>> from hassejax.dynamics.diagnostics import Outcome
    >>> from hassejax.plot import draw_outcome_map
    >>> fig, ax = plt.subplots()
    >>> codes = np.array([[Outcome.blow_up, Outcome.low_rank], [Outcome.low_rank, Outcome.low_rank]])
    >>> handles = draw_outcome_map(ax, codes, (0, 1, 0, 1), {Outcome.blow_up: "blow-up", Outcome.low_rank: "rank one"})
    >>> [h.get_label() for h in handles]
    ['blow-up: 1', 'rank one: 3']
    >>> plt.close(fig)

    ```
    """
    check_axes(ax)
    codes = _check_codes(codes)
    extent = _check_extent(extent)
    present = {int(c) for c in np.unique(codes)}
    if min(present) < 0:
        raise ParameterError(f"`codes` must be non-negative Outcome codes; got {sorted(c for c in present if c < 0)}.")
    missing = sorted(present - {int(o) for o in labels})
    if missing:
        names = [Outcome(m).name if 0 <= m < len(Outcome) else str(m) for m in missing]
        raise ParameterError(f"`labels` must name every outcome in `codes`; missing {names}.")
    n = max(len(Outcome), max(present) + 1)
    no_colour = sorted(c for c in present if c not in {int(k) for k in colors})
    if no_colour:
        raise ParameterError(f"`colors` must give a colour to every code in `codes`; missing {no_colour}.")
    by_code = {int(k): c for k, c in colors.items()}
    cmap = ListedColormap([by_code.get(k, "white") for k in range(n)])
    ax.imshow(
        codes, origin="lower", extent=extent, aspect="auto", cmap=cmap, vmin=-0.5, vmax=n - 0.5, interpolation="nearest"
    )
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    notes = notes or {}
    return [
        Patch(color=colors[o], label=f"{label}: {int(np.sum(codes == o))}" + (f" ({notes[o]})" if o in notes else ""))
        for o, label in labels.items()
        if int(o) in present
    ]


def _check_codes(codes) -> np.ndarray:
    """`codes` as a non-empty 2-D int64 array, or a :class:`~hassejax.errors.ParameterError` naming it."""
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.size == 0:
        raise ParameterError(f"`codes` must be a non-empty 2-D image of Outcome codes; got shape {codes.shape}.")
    if codes.dtype.kind == "f":
        bad = ~np.isfinite(codes) | (codes != np.round(codes))
        if bad.any():
            first = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ParameterError(
                f"`codes` must be integer Outcome codes; got {int(bad.sum())} non-integer value(s), first "
                f"{float(codes[first])!r} at {first} (it would be drawn in the colour of the nearest code, with no legend "
                "entry). Round or cast them on purpose first."
            )
        return codes.astype(np.int64)
    if codes.dtype.kind not in "iu":
        raise ParameterError(f"`codes` must be integer Outcome codes; got dtype {codes.dtype}.")
    return codes.astype(np.int64)


def _check_extent(extent) -> tuple[float, float, float, float]:
    """`extent` as four floats `(x0, x1, y0, y1)`, finite with `x0 != x1` and `y0 != y1`."""
    try:
        values = np.asarray(extent, dtype=float)
    except (TypeError, ValueError):
        values = None
    if (
        values is None
        or isinstance(extent, str)
        or values.shape != (4,)
        or not np.all(np.isfinite(values))
        or values[0] == values[1]
        or values[2] == values[3]
    ):
        raise ParameterError(
            f"`extent` must be four finite numbers (x0, x1, y0, y1) with x0 != x1 and y0 != y1; got {extent!r:.120}."
        )
    return tuple(float(v) for v in values)


def draw_hatched(
    ax, x: ArrayLike, y: ArrayLike, where: Bool[ArrayLike, "rows cols"], label: str, hatch: str = "///"
) -> Patch:
    """Hatch the cells of a grid `(x, y)` where `where` is True; return the legend handle.

    **Arguments:** `ax`; `x`, `y`: `(rows, cols)` grid coordinates (as from ``np.meshgrid``);
    `where`: `(rows, cols)` Boolean; `label`: legend text; `hatch`: matplotlib hatch pattern.

    **Returns:** a :class:`matplotlib.patches.Patch` for the legend.

    **Raises:** :class:`~hassejax.errors.ParameterError` for an `ax` that is not 2-D matplotlib axes, shapes that
    differ, a grid with fewer than two rows or columns (matplotlib's ``contourf`` met a ``TypeError``), a `where`
    that is not Boolean (0.3 was cut at 0.5 silently) or non-finite `x`, `y`.

    Source: (derived).

    **Example:**

    ```python
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt, numpy as np
    >>> from hassejax.plot import draw_hatched
    >>> fig, ax = plt.subplots()
    >>> x, y = np.meshgrid(np.arange(3.0), np.arange(3.0))
    >>> draw_hatched(ax, x, y, x > y, "rule ≠ solve").get_label()
    'rule ≠ solve'
    >>> plt.close(fig)

    ```
    """
    check_axes(ax)
    x, y, where = np.asarray(x), np.asarray(y), np.asarray(where)
    if not (x.shape == y.shape == where.shape) or where.ndim != 2:
        raise ParameterError(f"`x`, `y`, `where` must be 2-D of one shape; got {x.shape}, {y.shape}, {where.shape}.")
    if min(where.shape) < 2:
        raise ParameterError(
            f"`where` must be a grid of at least 2 x 2 points (the hatching fills the cells between them); "
            f"got shape {where.shape}."
        )
    if where.dtype != np.bool_:
        raise ParameterError(f"`where` must be Boolean (True = hatch); got dtype {where.dtype}.")
    for name, v in (("x", x), ("y", y)):
        if v.dtype.kind not in "iuf" or not np.all(np.isfinite(v)):
            raise ParameterError(f"`{name}` must be finite grid coordinates; got dtype {v.dtype} or non-finite values.")
    ax.contourf(x, y, where.astype(float), levels=[0.5, 1.5], colors="none", hatches=[hatch])
    return Patch(facecolor="none", edgecolor="k", hatch=hatch, label=label)
