"""Drawing a Hasse diagram with matplotlib: layered by topological generation (spec hasse.md §1.7, §5).

Layout (a small Sugiyama-style layered drawing): layer `k` is the `k`-th topological
generation of the diagram (bottom = minimal classes, which depend on nothing else). An
edge spanning several generations gets a dummy node in every layer in between, so it
has a free slot of its own there and never runs through another node's box. Nodes (and
dummies) in a layer are ordered by barycenter sweeps to reduce crossings (small drawings:
a few seeded restarts and neighbour swaps, also preferring fewer slanted and shorter
edges), each gets a horizontal slot as wide as its label, so labels do not overlap at the
font :func:`draw_hasse` fits to the axes (unless that font is below matplotlib's floor of 1 pt, where
they do: many classes in small axes; :func:`draw_hasse` warns below 8 pt), and
is then pulled towards the median of its neighbours, which keeps chains straight. Class
members are written inside the nodes (runs compressed, ``{0..7}``, or by slot name).
Edges point up, in the direction of information flow, and leave and enter the boxes
through their top and bottom borders.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.colors import is_color_like
from matplotlib.patches import FancyArrowPatch
from matplotlib.path import Path

from ..errors import MaskError, ParameterError
from ..order.hasse import HasseDiagram, format_class
from ._axes import check_axes
from ._hasse_layout import _CHAR_EM, _HALF_HEIGHT_EM, _PAD, _display_len, _extent, _layout, _node_labels
from .style import MAX_WIDTH, MIN_FONT_PT

__all__ = ["hasse_layout", "hasse_figsize", "hasse_crossings", "draw_hasse"]


def _check_diagram(diagram) -> None:
    if not isinstance(diagram, HasseDiagram):  # a docstring review: a non-diagram met an AttributeError
        raise MaskError(f"`diagram` must be a HasseDiagram; got {type(diagram).__name__}.")


def hasse_layout(
    diagram: HasseDiagram,
    names: Sequence[str] | None = None,
    *,
    max_label_chars: int = 40,
    sweeps: int = 4,
    levels: str | Sequence[int] | None = None,
    order_key: Sequence[float | int] | None = None,
) -> dict[int, tuple[float, float]]:
    """Layered positions of the classes of a Hasse diagram.

    **Arguments:**

    - `diagram`: a :class:`~hassejax.order.HasseDiagram`.
    - `names`: optional slot names (one per position) used for the labels.
    - `max_label_chars`: labels that show more characters than this are cut with an ellipsis; a mathtext label
      (``$w_1$``) is measured by the glyphs it shows and cut between glyphs, every ``$…$`` kept closed (so it
      still parses).
    - `sweeps`: number of up-and-down barycenter sweeps that order each layer (the order
      with the fewest edge crossings is kept) and that then pull each node towards its
      neighbours.
    - `levels`: the layer of each class: ``None`` or ``"bottom"`` (topological generations:
      minimal classes on layer 0), ``"top"`` (maximal classes all on the top layer, every
      other class one layer below its lowest cover), or one int per class (class id order)
      that rises along every edge.
    - `order_key`: optional number per class; if given, each layer is ordered by it (a long
      edge's bend by the key interpolated between its ends) instead of by crossing reduction.

    **Returns:** ``{class id: (x, y)}``; `y` is the layer (0 = bottom; the generation index by default),
    `x` is in units of one label character, the drawing centred on 0, and neighbouring
    nodes in a layer at least ``(len(label_a) + len(label_b)) / 2 + 2`` apart. An edge
    spanning several generations gets a free slot of its own in every layer it crosses
    (where :func:`draw_hasse` bends it), so it never runs through another node.

    **Raises:** :class:`~hassejax.errors.MaskError` if `diagram` is not a HasseDiagram, `names` has the wrong length
    or `max_label_chars < 4`; :class:`~hassejax.errors.ParameterError` for `levels` that are not
    one of the names or do not rise along an edge, or an `order_key` of the wrong length.

    Source: (derived) for the Hasse diagrams of spec hasse.md §1.7 and §5; a layered drawing with barycenter ordering
    after K. Sugiyama, S. Tagawa, M. Toda, "Methods for Visual Understanding of Hierarchical System Structures",
    IEEE Trans. Systems, Man, and Cybernetics 11(2), 1981.

    **Example:**

    >>> import numpy as np
    >>> from hassejax.order import HasseDiagram
    >>> d = HasseDiagram.from_mask(np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1]], bool))  # {0} < {1}; {2}
    >>> sorted(y for _, y in hasse_layout(d).values()), sorted(y for _, y in hasse_layout(d, levels="top").values())
    ([0.0, 0.0, 1.0], [0.0, 1.0, 1.0])
    """
    _check_diagram(diagram)
    _check_max_label_chars(max_label_chars)
    names = diagram._check_names(names)
    labels = _node_labels(diagram, names, max_label_chars)
    pos, _, _ = _layout(diagram, labels, sweeps, levels, order_key)
    return {c: pos[c] for c in range(diagram.num_classes)}


def hasse_crossings(
    diagram: HasseDiagram,
    *,
    levels: str | Sequence[int] | None = None,
    order_key: Sequence[float | int] | None = None,
) -> int:
    """Number of edge crossings of the layered layout that :func:`draw_hasse` draws.

    Counted between adjacent layers on the layout's segments (a long edge is one segment
    per layer it crosses): two segments cross when their lower ends and their upper ends
    lie in opposite orders. Labels do not change the order within a layer when
    `order_key` is given; without it they only break ties of the crossing reduction (the
    count uses class-id labels).

    **Arguments:** `diagram`; `levels`, `order_key` as :func:`hasse_layout`.

    **Returns:** the number of crossing pairs of segments (int, >= 0).

    **Raises:** as :func:`hasse_layout` (a `diagram` that is not a HasseDiagram, bad `levels` or `order_key`).

    Source: (derived); crossings between adjacent layers, the quantity the layered drawing of Sugiyama, Tagawa and
    Toda (1981; see :func:`hasse_layout`) reduces.

    **Example:**

    >>> import numpy as np
    >>> from hassejax.order import HasseDiagram
    >>> x = np.eye(4, dtype=bool); x[2, 0] = x[3, 1] = True  # two chains {0} < {2}, {1} < {3}
    >>> hasse_crossings(HasseDiagram.from_mask(x)), hasse_crossings(HasseDiagram.from_mask(x), order_key=[0, 1, 1, 0])
    (0, 1)
    """
    _check_diagram(diagram)
    labels = [format_class(mem) for mem in diagram.classes]
    pos, _, routes = _layout(diagram, labels, levels=levels, order_key=order_key)
    segments = []
    for (u, v), bends in routes.items():
        chain = [u, *bends, v]
        segments += [(pos[a], pos[b]) for a, b in itertools.pairwise(chain)]
    count = 0
    for i, ((a0, a1), (b0, _)) in enumerate(segments):
        for (c0, c1), (d0, _) in segments[i + 1 :]:
            if a1 == c1 and (a0 - c0) * (b0 - d0) < 0:
                count += 1
    return count


def hasse_figsize(
    diagram: HasseDiagram,
    names: Sequence[str] | None = None,
    *,
    title: str | None = None,
    fontsize: float | int = 10.0,
    max_label_chars: int = 40,
    levels: str | Sequence[int] | None = None,
    order_key: Sequence[float | int] | None = None,
) -> tuple[float, float]:
    """Figure size in inches at which :func:`draw_hasse` keeps `fontsize` (capped at 30 × 20).

    Room for `fontsize / 1.5` points per label character cell and `fontsize / 0.29` points
    between layers (the fit rule of :func:`draw_hasse`). `levels`, `order_key`: as
    :func:`hasse_layout`.

    **Raises:** as :func:`draw_hasse` for `diagram`, `names`, `fontsize` and `max_label_chars`; as :func:`hasse_layout` for
    `levels` and `order_key`.

    Source: (derived), no paper: the font fit rule of :func:`draw_hasse`.

    **Example:** two chains `{0} < {2}` and `{1} < {3}`, side by side on two layers: at the default font the
    minimum size 3 × 1.5 in; at 30 pt, 11 label cells of 20 pt by 2 layers of 30 / 0.29 pt (0.75 of the figure
    is axes):

    >>> import numpy as np
    >>> from hassejax.order import HasseDiagram
    >>> x = np.eye(4, dtype=bool); x[2, 0] = x[3, 1] = True
    >>> d = HasseDiagram.from_mask(x)
    >>> hasse_figsize(d)
    (3.0, 1.5)
    >>> w, h = hasse_figsize(d, fontsize=30.0)
    >>> round(w, 3), round(h, 3)
    (4.074, 3.831)
    """
    _check_diagram(diagram)
    _check_fontsize(fontsize, "fontsize")
    _check_max_label_chars(max_label_chars)
    names = diagram._check_names(names)
    pos, width, _ = _layout(diagram, _node_labels(diagram, names, max_label_chars), levels=levels, order_key=order_key)
    return _figsize(pos, width, title, fontsize)


def _figsize(pos, width, title: str | None, fontsize: float | int) -> tuple[float, float]:
    """:func:`hasse_figsize` of a computed layout."""
    x_range, y_range = _extent(pos, width)
    w_in = min(30.0, max(3.0, x_range * fontsize / 1.5 / 72 / 0.75))
    h_in = min(20.0, max(1.5, y_range * fontsize / 0.29 / 72 / 0.75 + (0.3 if title else 0.0)))
    return (w_in, h_in)


def draw_hasse(
    diagram: HasseDiagram,
    ax=None,
    *,
    names: Sequence[str] | None = None,
    title: str | None = None,
    fontsize: float | int = 10.0,
    max_label_chars: int = 40,
    node_color: str = "#dbe9f6",
    edge_color: str = "#333333",
    class_colors: Sequence[str] | Mapping[int, str] | None = None,
    levels: str | Sequence[int] | None = None,
    order_key: Sequence[float | int] | None = None,
    min_fontsize: float | int | None = None,
    num_levels: int | None = None,
):
    """Draw a Hasse diagram, layered by topological generation, members inside the nodes.

    Minimal classes are at the bottom; an arrow ``u -> v`` means class `u` is covered by
    class `v` (information flows up). Each node is a rounded box with the class members
    (runs compressed, e.g. ``{0..7}``, or the slot `names`). Horizontal slots are as wide
    as the labels and the font size is fitted to the axes, so labels do not overlap
    (checked in the tests for diagrams of about 20 nodes) as long as the fitted font is at least matplotlib's
    smallest, 1 pt: below it (about 400 classes in 6.5 x 4 in axes) matplotlib draws 1-pt labels, which do overlap.
    A font below 8 pt (:data:`~hassejax.plot.style.MIN_FONT_PT`) is too small to read in print: then, and when the
    figure made without `ax` is wider than :data:`~hassejax.plot.style.MAX_WIDTH` (7 in; its labels shrink when it
    is scaled to a page), :func:`draw_hasse` warns (``RuntimeWarning``) unless `min_fontsize` is given. An edge that spans several
    layers bends through free slots of its own, so no edge crosses a box it does not
    connect.

    **Arguments:**

    - `diagram`: a :class:`~hassejax.order.HasseDiagram`.
    - `ax`: a matplotlib ``Axes``; if None, a new figure is made (via pyplot), sized to
      the diagram.
    - `names`: optional slot names, one per position (e.g. ``["w1", "m1", ...]``).
    - `title`: optional axes title.
    - `fontsize`: largest font size in points (smaller if the axes are too small).
    - `max_label_chars`: labels that show more characters than this are cut with an ellipsis; a mathtext label
      (``$w_1$``) is measured by the glyphs it shows and cut between glyphs, every ``$…$`` kept closed (so it
      still parses).
    - `node_color`, `edge_color`: matplotlib colours.
    - `class_colors`: optional fill colour per class: a sequence in class id order or a
      mapping ``{class id: colour}`` (classes it leaves out get `node_color`).
    - `levels`, `order_key`: the layers and the order within them, as :func:`hasse_layout`.
    - `min_fontsize`: if given, raise instead of fitting the font below this size (points), and do not warn about a
      small font or a wide figure: the smallest font the caller accepts (``min_fontsize=8`` for print).
    - `num_levels`: if given, the axes hold this many layers (at least the layout's), so that
      diagrams drawn side by side with common `levels` share one vertical scale.

    **Returns:** the ``Axes``.

    **Warns:** ``RuntimeWarning`` when `min_fontsize` is None and the labels fit the axes only below 8 pt (below
    1 pt they overlap), or the figure made without `ax` is wider than 7 in; the message gives the axes size that
    keeps 8 pt and names `min_fontsize`.

    **Raises:** :class:`~hassejax.errors.MaskError` if `diagram` is not a HasseDiagram,
    `names` has the wrong length or `max_label_chars` is not an int >= 4 (as :func:`hasse_layout`);
    :class:`~hassejax.errors.ParameterError` for an `ax` that is not 2-D matplotlib axes (3-D axes met a
    ``TypeError``), a `fontsize` or
    `min_fontsize` that is not a positive finite number, a `node_color`, `edge_color` or colour in `class_colors`
    that matplotlib does not take, bad `levels` or `order_key`, or when the font fitted to the axes is below
    `min_fontsize`.

    Source: (derived) for spec hasse.md §1.7 (the covering pairs of the quotient order, drawn as arrows) and §5
    (the Hasse diagram figures, e.g. 6 and 8).

    **Example:** the causal mask on three named slots: a chain of three boxes joined by two arrows, on a new
    figure sized by :func:`hasse_figsize`:

    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from hassejax.order import HasseDiagram
    >>> d = HasseDiagram.from_mask(np.tril(np.ones((3, 3), bool)))
    >>> ax = draw_hasse(d, names=["a", "b", "c"], title="causal")
    >>> [t.get_text() for t in ax.texts], len(ax.patches), ax.get_title()
    (['{a}', '{b}', '{c}'], 2, 'causal')
    >>> tuple(ax.figure.get_size_inches()) == hasse_figsize(d, names=["a", "b", "c"], title="causal")
    True
    >>> plt.close(ax.figure)
    """
    _check_diagram(diagram)
    check_axes(ax, none_ok=True)
    _check_fontsize(fontsize, "fontsize")
    if min_fontsize is not None:
        _check_fontsize(min_fontsize, "min_fontsize")
    _check_max_label_chars(max_label_chars)
    _check_color(node_color, "node_color")
    _check_color(edge_color, "edge_color")
    names = diagram._check_names(names)
    labels = _node_labels(diagram, names, max_label_chars)
    fills = _class_fills(diagram, class_colors, node_color)
    pos, width, routes = _layout(diagram, labels, levels=levels, order_key=order_key)
    x_range, y_range = _extent(pos, width)
    if num_levels is not None:
        if isinstance(num_levels, bool) or not isinstance(num_levels, (int, np.integer)) or num_levels < y_range:
            raise ParameterError(
                f"`num_levels` must be an int >= the layout's {int(y_range)} layers; got {num_levels!r}."
            )
        y_range = float(num_levels)
    num_layers = int(y_range)

    own_size = None
    if ax is None:
        import matplotlib.pyplot as plt

        own_size = _figsize(pos, width, title, fontsize)  # = hasse_figsize(diagram, ...)
        _, ax = plt.subplots(figsize=own_size)

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
    if min_fontsize is not None and fs < min_fontsize:
        raise ParameterError(
            f"`min_fontsize`: the node labels fit the axes only at {fs:.2f} pt (< {min_fontsize} pt); "
            f"give the axes at least {x_range * min_fontsize / 1.5 / 72:.2f} in x "
            f"{y_range * min_fontsize / 0.29 / 72:.2f} in."
        )
    if min_fontsize is None:
        _warn_print_size(fs, own_size, x_range, y_range, diagram.num_classes)

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
            bbox=dict(boxstyle=f"round,pad={_PAD}", facecolor=fills[c], edgecolor=edge_color, linewidth=0.8),
            zorder=3,
        )
    # Arrows end on the box borders (computed here: the text boxes are only placed at draw time).
    # Every node of a layer lies in the band y = k ± hy. An edge leaves the top border of its
    # lower node and enters the bottom border of its upper node; an edge spanning several
    # generations crosses each band in between vertically, at its own free slot (a dummy
    # node of the layout), and bends smoothly in the empty gaps between the bands. So no
    # edge passes through a node box it does not connect.
    half = {
        c: (fs * (_CHAR_EM * _display_len(labels[c]) / 2 + _PAD) / x_unit, fs * (_HALF_HEIGHT_EM + _PAD) / y_unit)
        for c in range(diagram.num_classes)
    }
    hy = 1.04 * max(h for _, h in half.values())
    for u, v in diagram.edges:
        bends = [pos[d][0] for d in routes[(u, v)]]
        (xu, yu), (xv, yv) = pos[u], pos[v]
        first, last = (bends[0], bends[-1]) if bends else (xv, xu)
        start = (xu + float(np.clip((first - xu) * hy, -0.7 * half[u][0], 0.7 * half[u][0])), yu + hy)
        end = (xv + float(np.clip((last - xv) * hy, -0.7 * half[v][0], 0.7 * half[v][0])), yv - hy)
        path = _edge_path(start, end, bends, yu, hy)
        arrow = FancyArrowPatch(
            path=path, arrowstyle="-|>", color=edge_color, linewidth=0.9, mutation_scale=max(6.0, fs), zorder=2
        )
        arrow.set_clip_on(False)
        ax.add_patch(arrow)
    return ax


def _warn_print_size(fs: float, own_size, x_range: float, y_range: float, num_classes: int) -> None:
    """The ``RuntimeWarning`` of :func:`draw_hasse` for labels under :data:`MIN_FONT_PT` at print size: fitted to the
    axes below it, or on an own figure wider than :data:`MAX_WIDTH` (scaled to a page, its labels shrink by
    ``MAX_WIDTH / width``). A review: 200 classes gave a 30 x 5.1 in figure of 5.1-pt labels, 400 classes in 6.5 x 4 in
    axes 1-pt labels with 248 overlapping pairs, silently."""
    printed = fs if own_size is None or own_size[0] <= MAX_WIDTH else fs * MAX_WIDTH / own_size[0]
    if printed >= MIN_FONT_PT:
        return
    need = (x_range * MIN_FONT_PT / 1.5 / 72, y_range * MIN_FONT_PT / 0.29 / 72)
    where = (
        f"the node labels fit the axes only at {fs:.2f} pt"
        if own_size is None
        else f"the figure is {own_size[0]:.1f} x {own_size[1]:.1f} in (wider than {MAX_WIDTH:g} in, a page): "
        f"scaled to {MAX_WIDTH:g} in its {fs:.2f}-pt labels print at {printed:.2f} pt"
    )
    overlap = " Below 1 pt, matplotlib's smallest font, neighbouring labels overlap." if fs < 1.0 else ""
    warnings.warn(
        f"draw_hasse: {where} (< {MIN_FONT_PT:g} pt, the smallest readable in print; {num_classes} classes).{overlap} "
        f"8-pt labels need axes of about {need[0]:.1f} x {need[1]:.1f} in; draw a smaller diagram (e.g. merge "
        "classes), or pass min_fontsize= (the smallest size you accept; below it draw_hasse raises) to silence this.",
        RuntimeWarning,
        stacklevel=3,
    )


def _check_fontsize(value, name: str) -> None:
    """Refuse a font size that is not a positive finite number (no readable text), naming it."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    if not ok or not np.isfinite(value) or value <= 0:
        raise ParameterError(f"`{name}` must be a positive finite number (points); got {value!r}.")


def _check_max_label_chars(value) -> None:
    """The label cut of :func:`hasse_layout`, :func:`hasse_figsize` and :func:`draw_hasse`: an int >= 4."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 4:
        raise MaskError(f"`max_label_chars` must be an int >= 4; got {value!r}.")


def _check_color(value, name: str, where: str = "") -> None:
    """Refuse what matplotlib would refuse as a colour only when drawing, naming the argument (and class)."""
    if not is_color_like(value):
        raise ParameterError(f"`{name}` must be a matplotlib colour{'s' if where else ''}; got {value!r:.120}{where}.")


def _class_fills(diagram: HasseDiagram, class_colors, node_color: str) -> list:
    """The fill colour of every class (class id order)."""
    num = diagram.num_classes
    if class_colors is None:
        return [node_color] * num
    if isinstance(class_colors, Mapping):
        bad = [c for c in class_colors if not (isinstance(c, (int, np.integer)) and 0 <= c < num)]
        if bad:
            raise ParameterError(f"`class_colors` names class ids 0 .. {num - 1}; got {bad[0]!r}.")
        for c, colour in class_colors.items():
            _check_color(colour, "class_colors", f" for class {c!r}")
        return [class_colors.get(c, node_color) for c in range(num)]
    fills = list(class_colors)
    if isinstance(class_colors, str) or len(fills) != num:
        raise ParameterError(
            f"`class_colors` must hold one colour per class ({num} classes) or map class ids to colours; "
            f"got {class_colors!r:.120}."
        )
    for c, colour in enumerate(fills):
        _check_color(colour, "class_colors", f" for class {c}")
    return fills


def _gap_curve(a, b, vertical_a: bool, vertical_b: bool, samples: int) -> np.ndarray:
    """Cubic Bézier from `a` to `b` (vertical or straight at each end); it stays in their y slab."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    c1 = np.array([a[0], (a[1] + b[1]) / 2]) if vertical_a else a + (b - a) / 3
    c2 = np.array([b[0], (a[1] + b[1]) / 2]) if vertical_b else b - (b - a) / 3
    t = np.linspace(0.0, 1.0, samples + 1)[:, None]
    return (1 - t) ** 3 * a + 3 * (1 - t) ** 2 * t * c1 + 3 * (1 - t) * t**2 * c2 + t**3 * b


def _edge_path(start, end, bends, y0, hy, samples: int = 24) -> Path:
    """The drawn path of an edge, in data coordinates, from `start` to `end` (its nodes' borders).

    A short edge is a straight segment (the path of matplotlib's ``"arc3,rad=0"``: a quadratic
    Bézier with its control point at the midpoint). A long edge runs vertically through the
    bands at `bends` (the x of its dummy slots in the layers ``y0 + 1, y0 + 2, ...``, each band
    ``± hy`` high) and curves in the gaps between them.
    """
    if not bends:
        a, b = np.asarray(start, float), np.asarray(end, float)
        return Path([a, (a + b) / 2, b], [Path.MOVETO, Path.CURVE3, Path.CURVE3])
    pts = [np.asarray(start, float)]
    for k, x in enumerate(bends, start=1):
        low, high = np.array([x, y0 + k - hy]), np.array([x, y0 + k + hy])
        pts.append(_gap_curve(pts[-1][-1] if k > 1 else pts[0], low, k > 1, True, samples)[1:])
        pts.append(high[None, :])
    pts.append(_gap_curve(pts[-1][-1], end, True, False, samples)[1:])
    return Path(np.vstack([pts[0][None, :], *pts[1:]]))
