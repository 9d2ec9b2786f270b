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

    **Raises:** :class:`~hassejax.errors.ParameterError` if `codes` is not 2-D or holds an
    outcome without a label.

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
    codes = np.asarray(codes)
    if codes.ndim != 2:
        raise ParameterError(f"`codes` must be a 2-D image of Outcome codes; got shape {codes.shape}.")
    present = {int(c) for c in np.unique(codes)}
    missing = sorted(present - {int(o) for o in labels})
    if missing:
        names = [Outcome(m).name if 0 <= m < len(Outcome) else str(m) for m in missing]
        raise ParameterError(f"`labels` must name every outcome in `codes`; missing {names}.")
    n = max(len(Outcome), max(present) + 1)
    no_colour = sorted(c for c in present if c not in {int(k) for k in colors})
    if no_colour or min(present) < 0:
        raise ParameterError(f"`colors` must give a colour to every code in `codes` (codes >= 0); missing {no_colour}.")
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


def draw_hatched(
    ax, x: ArrayLike, y: ArrayLike, where: Bool[ArrayLike, "rows cols"], label: str, hatch: str = "///"
) -> Patch:
    """Hatch the cells of a grid `(x, y)` where `where` is True; return the legend handle.

    **Arguments:** `ax`; `x`, `y`: `(rows, cols)` grid coordinates (as from ``np.meshgrid``);
    `where`: `(rows, cols)` Boolean; `label`: legend text; `hatch`: matplotlib hatch pattern.

    **Returns:** a :class:`matplotlib.patches.Patch` for the legend.

    **Raises:** :class:`~hassejax.errors.ParameterError` for shapes that differ.

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
    x, y, where = np.asarray(x), np.asarray(y), np.asarray(where)
    if not (x.shape == y.shape == where.shape) or where.ndim != 2:
        raise ParameterError(f"`x`, `y`, `where` must be 2-D of one shape; got {x.shape}, {y.shape}, {where.shape}.")
    ax.contourf(x, y, where.astype(float), levels=[0.5, 1.5], colors="none", hatches=[hatch])
    return Patch(facecolor="none", edgecolor="k", hatch=hatch, label=label)
