"""Drawing a Hasse diagram with matplotlib: layered by topological generation (spec hasse.md §1.7, §5).

Layout (a small Sugiyama-style layered drawing): layer `k` is the `k`-th topological
generation of the diagram (bottom = minimal classes, which depend on nothing else), nodes
in a layer are ordered by the barycenter heuristic to reduce crossings, and each node gets
a horizontal slot as wide as its label, so labels never overlap. Class members are
written inside the nodes (runs compressed, ``{0..7}``, or by slot name). Edges point up,
in the direction of information flow.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import MaskError
from ..order.hasse import HasseDiagram, format_class

__all__ = ["hasse_layout", "hasse_figsize", "draw_hasse"]

# Advance width of a monospace glyph (DejaVu Sans Mono) in units of the font size, and the
# rounded box padding (fraction of the font size) used for the node boxes.
_CHAR_EM = 0.61
_PAD = 0.3
_GAP = 2.0  # empty character cells between neighbouring node slots
_HALF_HEIGHT_EM = 0.62  # half the height of a line of text, in units of the font size


def _exit_point(centre, target, half):
    """Where the segment from `centre` towards `target` leaves the box of half-sizes `half`."""
    dx, dy = target[0] - centre[0], target[1] - centre[1]
    hx, hy = half
    scale = min(hx / abs(dx) if dx else np.inf, hy / abs(dy) if dy else np.inf)
    scale = min(scale * 1.04, 1.0)  # a small margin off the border
    return (centre[0] + scale * dx, centre[1] + scale * dy)


def _node_labels(diagram: HasseDiagram, names, max_label_chars: int) -> list[str]:
    out = []
    for mem in diagram.classes:
        text = format_class(mem, names)
        if len(text) > max_label_chars:
            text = text[: max_label_chars - 1] + "…"
        out.append(text)
    return out


def hasse_layout(
    diagram: HasseDiagram,
    names: Sequence[str] | None = None,
    *,
    max_label_chars: int = 40,
    sweeps: int = 4,
) -> dict[int, tuple[float, float]]:
    """Layered positions of the classes of a Hasse diagram.

    **Arguments:**

    - `diagram`: a :class:`~hassejax.order.HasseDiagram`.
    - `names`: optional slot names (one per position) used for the labels.
    - `max_label_chars`: labels longer than this are cut with an ellipsis.
    - `sweeps`: number of up-and-down barycenter sweeps that order each layer.

    **Returns:** ``{class id: (x, y)}``; `y` is the generation index (0 = minimal classes),
    `x` is in units of one label character, each layer centred on 0, and neighbouring nodes
    in a layer at least ``(len(label_a) + len(label_b)) / 2 + 2`` apart.

    **Raises:** :class:`~hassejax.errors.MaskError` if `names` has the wrong length or
    `max_label_chars < 4`.
    """
    if max_label_chars < 4:
        raise MaskError(f"`max_label_chars` must be at least 4; got {max_label_chars}.")
    names = diagram._check_names(names)
    labels = _node_labels(diagram, names, max_label_chars)
    layers = [list(g) for g in diagram.generations]
    g = diagram.graph
    rank = {}
    for layer in layers:
        for i, c in enumerate(layer):
            rank[c] = (i + 0.5) / len(layer)

    def reorder(layer, neighbours):
        keys = []
        for c in layer:
            nb = [rank[d] for d in neighbours(c)]
            keys.append(float(np.mean(nb)) if nb else rank[c])
        new = [c for _, c in sorted(zip(keys, layer), key=lambda t: t[0])]
        for i, c in enumerate(new):
            rank[c] = (i + 0.5) / len(new)
        return new

    for _ in range(max(0, sweeps)):
        for k in range(1, len(layers)):
            layers[k] = reorder(layers[k], g.predecessors)
        for k in range(len(layers) - 2, -1, -1):
            layers[k] = reorder(layers[k], g.successors)

    pos = {}
    for y, layer in enumerate(layers):
        widths = [len(labels[c]) + _GAP for c in layer]
        total = sum(widths)
        x = -total / 2
        for c, w in zip(layer, widths):
            pos[c] = (x + w / 2, float(y))
            x += w
    return pos


def _extent(pos, labels) -> tuple[float, float]:
    half = max(pos[c][0] + (len(labels[c]) + _GAP) / 2 for c in pos)
    num_layers = int(max(y for _, y in pos.values())) + 1
    return 2 * half + 1.0, float(num_layers)


def hasse_figsize(
    diagram: HasseDiagram,
    names: Sequence[str] | None = None,
    *,
    title: str | None = None,
    fontsize: float = 10.0,
    max_label_chars: int = 40,
) -> tuple[float, float]:
    """Figure size in inches at which :func:`draw_hasse` keeps `fontsize` (capped at 30 × 20).

    Room for `fontsize / 1.5` points per label character cell and `fontsize / 0.29` points
    between layers (the fit rule of :func:`draw_hasse`).
    """
    names = diagram._check_names(names)
    pos = hasse_layout(diagram, names, max_label_chars=max_label_chars)
    x_range, y_range = _extent(pos, _node_labels(diagram, names, max_label_chars))
    w_in = min(30.0, max(3.0, x_range * fontsize / 1.5 / 72 / 0.75))
    h_in = min(20.0, max(1.5, y_range * fontsize / 0.29 / 72 / 0.75 + (0.3 if title else 0.0)))
    return (w_in, h_in)


def draw_hasse(
    diagram: HasseDiagram,
    ax=None,
    *,
    names: Sequence[str] | None = None,
    title: str | None = None,
    fontsize: float = 10.0,
    max_label_chars: int = 40,
    node_color: str = "#dbe9f6",
    edge_color: str = "#333333",
):
    """Draw a Hasse diagram, layered by topological generation, members inside the nodes.

    Minimal classes are at the bottom; an arrow ``u -> v`` means class `u` is covered by
    class `v` (information flows up). Each node is a rounded box with the class members
    (runs compressed, e.g. ``{0..7}``, or the slot `names`). Horizontal slots are as wide
    as the labels and the font size is fitted to the axes, so labels do not overlap
    (checked in the tests for diagrams of about 20 nodes).

    **Arguments:**

    - `diagram`: a :class:`~hassejax.order.HasseDiagram`.
    - `ax`: a matplotlib ``Axes``; if None, a new figure is made (via pyplot), sized to
      the diagram.
    - `names`: optional slot names, one per position (e.g. ``["w1", "m1", ...]``).
    - `title`: optional axes title.
    - `fontsize`: largest font size in points (smaller if the axes are too small).
    - `max_label_chars`: labels longer than this are cut with an ellipsis.
    - `node_color`, `edge_color`: matplotlib colours.

    **Returns:** the ``Axes``.

    **Raises:** :class:`~hassejax.errors.MaskError` if `diagram` is not a HasseDiagram or
    `names` has the wrong length.
    """
    if not isinstance(diagram, HasseDiagram):
        raise MaskError(f"`diagram` must be a HasseDiagram; got {type(diagram).__name__}.")
    names = diagram._check_names(names)
    pos = hasse_layout(diagram, names, max_label_chars=max_label_chars)
    labels = _node_labels(diagram, names, max_label_chars)
    x_range, y_range = _extent(pos, labels)
    num_layers = int(y_range)

    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(
            figsize=hasse_figsize(diagram, names=names, title=title, fontsize=fontsize, max_label_chars=max_label_chars)
        )

    ax.set_xlim(-x_range / 2, x_range / 2)
    ax.set_ylim(-0.5, num_layers - 0.5)
    ax.set_axis_off()
    if title:
        ax.set_title(title)

    # Fit the font to the axes: a label of L characters occupies fontsize * (0.61 L + 0.6)
    # points and has (L + 2) cells of x_unit points; fontsize <= 1.5 x_unit fits for every L.
    # Vertically, a box (about 1.8 fontsize high) takes at most ~half the layer spacing.
    bbox = ax.get_window_extent()
    dpi = ax.figure.dpi
    x_unit = bbox.width * 72 / dpi / x_range
    y_unit = bbox.height * 72 / dpi / y_range
    fs = min(fontsize, 1.5 * x_unit, 0.29 * y_unit)

    texts = {}
    for c in range(diagram.num_classes):  # node texts in class id order
        x, y = pos[c]
        texts[c] = ax.text(
            x,
            y,
            labels[c],
            ha="center",
            va="center",
            fontsize=fs,
            fontfamily="monospace",
            bbox=dict(boxstyle=f"round,pad={_PAD}", facecolor=node_color, edgecolor=edge_color, linewidth=0.8),
            zorder=3,
        )
    # Arrows end on the box borders (computed here: the text boxes are only placed at draw time).
    half = {
        c: (fs * (_CHAR_EM * len(labels[c]) / 2 + _PAD) / x_unit, fs * (_HALF_HEIGHT_EM + _PAD) / y_unit)
        for c in pos
    }
    for u, v in diagram.edges:
        start = _exit_point(pos[u], pos[v], half[u])
        end = _exit_point(pos[v], pos[u], half[v])
        ax.annotate(
            "",
            xy=end,
            xytext=start,
            arrowprops=dict(arrowstyle="-|>", color=edge_color, linewidth=0.9, shrinkA=0, shrinkB=0,
                            mutation_scale=max(6.0, fs)),
            zorder=2,
        )
    return ax
