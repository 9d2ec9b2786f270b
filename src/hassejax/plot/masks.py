"""Drawing an attention mask as a heat map with slot labels (row = query, column = key, filled = may attend)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from jaxtyping import ArrayLike, Bool

from .._checks import as_mask
from ..errors import MaskError, ParameterError
from ._axes import check_axes
from .hasse import _check_color
from .style import TEXT_WIDTH

__all__ = ["draw_mask"]


def draw_mask(
    mask: Bool[ArrayLike, "n_q n_k"],
    ax=None,
    labels: Sequence[str] | None = None,
    title: str | None = None,
    *,
    color: str = "#1f4e79",
):
    """Draw a Boolean mask as a heat map: row = query, column = key, filled = may attend.

    **Arguments:**

    - `mask`: Boolean array of shape `(n_q, n_k)` (row = query, column = key, True = may attend).
    - `ax`: a matplotlib ``Axes``; if None a new figure is made (via pyplot).
    - `labels`: optional slot names for a square mask (used on both axes), e.g.
      ``["w1", ..., "m1", ...]``. Without labels, positions are numbered from 0 when there
      are at most 32 of them.
    - `title`: optional title.
    - `color`: colour of the True cells (False cells are white).

    **Returns:** the ``Axes``. Without `ax` its figure uses matplotlib's constrained layout (and a size that fits
    the mask), so a plain ``savefig`` keeps the title, the slot names and the axis labels inside the figure.

    **Raises:** :class:`~hassejax.errors.MaskError` for a mask that is not a 2-D Boolean
    array, or `labels` given for a non-square mask or of the wrong length;
    :class:`~hassejax.errors.ParameterError` for an `ax` that is not 2-D matplotlib axes (or None), `labels` given as
    one string (it was read as one label per character), or a `color` that matplotlib does not take (it failed only at
    ``savefig``).

    Source: (derived) for spec hasse.md §0 (row = query, column = key, True = may attend) and §5 (the mask figures,
    e.g. 7 and 9).

    **Example:** a causal mask on three named slots; the image holds the mask, the names label both axes:

    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from hassejax.plot import draw_mask
    >>> ax = draw_mask(np.tril(np.ones((3, 3), bool)), labels=["w1", "w2", "m1"])
    >>> ax.images[0].get_array().astype(int).tolist()
    [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    >>> [t.get_text() for t in ax.get_yticklabels()], ax.get_ylabel(), ax.get_xlabel()
    (['w1', 'w2', 'm1'], 'query $i$', 'key $j$')
    >>> plt.close(ax.figure)
    """
    check_axes(ax, none_ok=True)
    _check_color(color, "color")
    if isinstance(labels, (str, bytes)):
        raise ParameterError(
            f"`labels` must be a sequence of slot names, one per row, not one string; got {labels!r:.60} (write "
            "list(labels) for one label per character)."
        )
    m = np.asarray(as_mask(mask, "mask", square=False, batched=False))
    n_q, n_k = m.shape
    if labels is not None:
        labels = [str(s) for s in labels]
        if n_q != n_k or len(labels) != n_q:
            raise MaskError(
                f"`labels` must name every slot of a square mask (one per row and column); got {len(labels)} "
                f"label(s) for a mask of shape {m.shape}."
            )
    from matplotlib.colors import ListedColormap

    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=_own_figsize(n_q, n_k, labels, title), layout="constrained")
    ax.imshow(m, cmap=ListedColormap(["white", color]), vmin=0, vmax=1, interpolation="nearest", aspect="equal")
    if labels is not None:
        ax.set_xticks(range(n_k), labels, rotation=90)
        ax.set_yticks(range(n_q), labels)
    else:
        if n_k <= 32:
            ax.set_xticks(range(n_k))
        if n_q <= 32:
            ax.set_yticks(range(n_q))
    if max(n_q, n_k) <= 64:
        ax.set_xticks(np.arange(-0.5, n_k, 1.0), minor=True)
        ax.set_yticks(np.arange(-0.5, n_q, 1.0), minor=True)
        ax.grid(which="minor", color="#bbbbbb", linewidth=0.5)
        ax.tick_params(which="minor", length=0)
    ax.xaxis.set_ticks_position("top")  # matrix style: slot names above the columns
    ax.xaxis.set_label_position("top")  # and the axis label on the same side as its ticks
    ax.set_xlabel("key $j$")
    ax.set_ylabel("query $i$")
    if title:
        ax.set_title(title)
    return ax


def _own_figsize(n_q: int, n_k: int, labels: list[str] | None, title: str | None) -> tuple[float, float]:
    """Size in inches of :func:`draw_mask`'s own figure: the image (a cell at most 0.3 in, the longer side at least
    3 in) plus room for the slot names, the axis labels and the title at the current rcParams' fonts, at most
    :data:`~hassejax.plot.style.TEXT_WIDTH` wide (the image shrinks to fit). Constrained layout then places them;
    the figure only has to be large enough (the old size had 0.4 in for the title, the key label and 40 rotated
    slot names, which a plain savefig cut off: a review)."""
    import matplotlib as mpl
    from matplotlib.font_manager import FontProperties

    def points(key: str) -> float:
        return FontProperties(size=mpl.rcParams[key]).get_size_in_points()

    tick_pt, label_pt, title_pt = points("xtick.labelsize"), points("axes.labelsize"), points("axes.titlesize")
    if labels is not None:
        chars = max((len(s) for s in labels), default=1)
    else:
        chars = len(str(max(n_q, n_k) - 1))
    names_in = (0.62 * chars * tick_pt + 6.0) / 72  # the longest slot name (rotated above the columns) and its tick
    line = lambda pt: 1.5 * pt / 72  # one line of text with its padding
    top = names_in + line(label_pt) + (line(title_pt) * (1 + title.count("\n")) if title else 0.0) + 0.1
    left = names_in + line(label_pt) + 0.1
    side = min(TEXT_WIDTH - left - 0.15, max(3.0, 0.3 * max(n_q, n_k) + 1.0))  # the image's longer side
    width = side * n_k / max(n_q, n_k) + left + 0.15
    height = side * n_q / max(n_q, n_k) + top + 0.15
    return (float(min(TEXT_WIDTH, max(width, 2.0))), float(height))
