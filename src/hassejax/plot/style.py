"""Print sizes and fonts of a paper figure: at most 7 inches wide, no text under 8 pt.

A figure drawn at its print width needs no scaling, so the font sizes set here are the sizes
a reader sees. :data:`PAPER_RC` is a matplotlib ``rcParams`` dictionary;
:func:`paper_style` applies it (the experiment scripts call it once at import).
"""

from __future__ import annotations

__all__ = [
    "TEXT_WIDTH",
    "COLUMN_WIDTH",
    "MAX_WIDTH",
    "MIN_FONT_PT",
    "PAPER_RC",
    "KIND_COLORS",
    "KIND_LINESTYLES",
    "KIND_MARKERS",
    "OUTCOME_PALETTE",
    "paper_style",
    "figsize",
]

MAX_WIDTH = 7.0
"""Widest figure in inches (a full page of text, margins included)."""
TEXT_WIDTH = 6.5
"""A page's text width in inches (two-column figures)."""
COLUMN_WIDTH = 3.3
"""One column of a two-column paper, in inches."""
MIN_FONT_PT = 8.0
"""Smallest font size in points at print size."""

PAPER_RC: dict[str, object] = {
    "font.size": 8.5,
    "axes.titlesize": 9.0,
    "axes.labelsize": 8.5,
    "xtick.labelsize": 8.0,
    "ytick.labelsize": 8.0,
    "legend.fontsize": 8.0,
    "legend.title_fontsize": 8.0,
    "figure.titlesize": 9.5,
    "figure.labelsize": 8.5,
    "mathtext.fontset": "dejavusans",
    "axes.linewidth": 0.6,
    "lines.linewidth": 1.0,
    "lines.markersize": 4.0,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "savefig.dpi": 300,
    "pdf.fonttype": 42,
}
"""``rcParams`` of a paper figure: fonts 8–9.5 pt, thin lines, TrueType fonts in the PDF."""

KIND_COLORS: dict[str, str] = {
    "softmax": "#D55E00",
    "l2": "#009E73",
    "multihead": "#CC79A7",
    "sinkhorn": "#0072B2",
    "linear": "#E69F00",
    "sigmoid": "#56B4E9",
    "sigmoid_shifted": "#000000",
}
"""The one colour of each attention kind in every figure (keys: the library's kind names; ``sigmoid_shifted``
is sigmoid with a bias): Okabe & Ito's colour-blind-safe palette (vermillion, bluish green, reddish purple, blue,
orange, sky blue, black). Several have about the same grey, so a figure that tells kinds apart draws them with
:data:`KIND_LINESTYLES` or :data:`KIND_MARKERS` as well."""

KIND_LINESTYLES: dict[str, object] = {
    "softmax": "-",
    "l2": "--",
    "multihead": (0, (1, 1.2)),
    "sinkhorn": "-.",
    "linear": (0, (5, 1.5, 1, 1.5, 1, 1.5)),
    "sigmoid": (0, (3, 1.2)),
    "sigmoid_shifted": (0, (6, 2)),
}
"""The line style of each attention kind (with :data:`KIND_COLORS`; greyscale tells the kinds apart by it)."""

KIND_MARKERS: dict[str, str] = {
    "softmax": "o",
    "l2": "s",
    "multihead": "^",
    "sinkhorn": "D",
    "linear": "v",
    "sigmoid": "P",
    "sigmoid_shifted": "X",
}
"""The marker of each attention kind, for points (with :data:`KIND_COLORS`)."""


OUTCOME_PALETTE: dict[str, str] = {
    "converge": "#44AA99",
    "converge_other": "#332288",
    "blow_up": "#882255",
    "escape": "#CC6677",
    "stationary": "#BBBBBB",
    "low_rank": "#999933",
    "grows": "#F0E442",
    "collapse": "#117733",
    "stalled": "#AA4499",
    "undetermined": "#000000",
}
"""The one colour of each outcome of a solve in every figure that colours by outcome (phase maps, convergence and
blow-up figures), kept apart from :data:`KIND_COLORS`: Paul Tol's muted palette (teal converge or contract, indigo a
second limit, wine blow-up, rose an escape not settled as blow-up, olive settling at low rank, green collapse, purple
stalled), pale grey for stationary, Okabe & Ito's yellow for growth without blow-up, black for an undetermined solve.
None of them is a kind colour (black is also the biased sigmoid's, which no outcome figure draws)."""


def figsize(width: float | int = TEXT_WIDTH, aspect: float | int = 0.62) -> tuple[float, float]:
    """A figure size ``(width, width * aspect)`` in inches, checked against :data:`MAX_WIDTH`.

    **Arguments:**

    - `width`: width in inches, at most :data:`MAX_WIDTH`.
    - `aspect`: height over width (positive).

    **Returns:** ``(width, height)`` in inches.

    **Raises:** :class:`~hassejax.errors.ParameterError` (a ``ValueError``) naming `width` or `aspect` if `width`
    is not a number in ``(0, MAX_WIDTH]`` or `aspect` is not a positive finite number (a string, a bool, NaN and
    inf included: ``figsize("6")`` met a bare ``TypeError``).

    Source: (derived), no paper: the print sizes of a paper figure (module docstring).

    **Example:**

    >>> figsize(6.5, 0.5)
    (6.5, 3.25)
    """
    import numbers

    from ..errors import ParameterError

    def real(value) -> bool:
        return isinstance(value, numbers.Real) and not isinstance(value, bool) and type(value).__name__ != "bool_"

    if not real(width) or not 0 < width <= MAX_WIDTH:
        raise ParameterError(f"`width` must be a number in (0, {MAX_WIDTH}] inches for a paper figure; got {width!r}.")
    if not real(aspect) or not 0 < aspect < float("inf"):
        raise ParameterError(f"`aspect` must be a positive finite number (height / width); got {aspect!r}.")
    return (float(width), float(width) * float(aspect))


def paper_style() -> None:
    """Apply :data:`PAPER_RC` to matplotlib's global ``rcParams``.

    **Raises:** nothing of its own: it only updates ``matplotlib.rcParams`` with :data:`PAPER_RC`, whose keys and
    values matplotlib accepts.

    Source: (derived), no paper: the fonts and lines of a paper figure (module docstring).

    **Example:**

    >>> import matplotlib as mpl
    >>> paper_style()
    >>> mpl.rcParams["xtick.labelsize"] >= MIN_FONT_PT
    True
    """
    import matplotlib as mpl

    mpl.rcParams.update(PAPER_RC)
