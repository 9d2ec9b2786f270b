"""Drawing a Hasse diagram with matplotlib: layered by topological generation (spec hasse.md §1.7, §5).

Layout (a small Sugiyama-style layered drawing): layer `k` is the `k`-th topological
generation of the diagram (bottom = minimal classes, which depend on nothing else). An
edge spanning several generations gets a dummy node in every layer in between, so it
has a free slot of its own there and never runs through another node's box. Nodes (and
dummies) in a layer are ordered by barycenter sweeps to reduce crossings (small drawings:
a few seeded restarts and neighbour swaps, also preferring fewer slanted and shorter
edges), each gets a horizontal slot as wide as its label, so labels never overlap, and
is then pulled towards the median of its neighbours, which keeps chains straight. Class
members are written inside the nodes (runs compressed, ``{0..7}``, or by slot name).
Edges point up, in the direction of information flow, and leave and enter the boxes
through their top and bottom borders.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.patches import ConnectionStyle
from matplotlib.path import Path

from ..errors import MaskError
from ..order.hasse import HasseDiagram, format_class

__all__ = ["hasse_layout", "hasse_figsize", "draw_hasse"]

# Advance width of a monospace glyph (DejaVu Sans Mono) in units of the font size, and the
# rounded box padding (fraction of the font size) used for the node boxes.
_CHAR_EM = 0.61
_PAD = 0.3
_GAP = 2.0  # empty character cells between neighbouring node slots
_HALF_HEIGHT_EM = 0.62  # half the height of a line of text, in units of the font size
_REFINE_MAX_NODES = 60  # layouts with more (real + dummy) nodes skip the swap refinement
_RESTARTS = 4  # shuffled restarts of the layer ordering for small drawings
_DUMMY_WIDTH = 2.0  # character cells reserved in a layer for an edge passing through it


def _node_labels(diagram: HasseDiagram, names, max_label_chars: int) -> list[str]:
    out = []
    for mem in diagram.classes:
        text = format_class(mem, names)
        if len(text) > max_label_chars:
            text = text[: max_label_chars - 1] + "…"
        out.append(text)
    return out


def _weighted_median(values, weights) -> float:
    """Weighted median; the midpoint of the two middle values when the weights split evenly."""
    if len(values) == 1:
        return float(values[0])
    pairs = sorted(zip(values, weights))
    half = sum(weights) / 2
    cum = 0.0
    for i, (v, w) in enumerate(pairs):
        cum += w
        if cum >= half - 1e-9:
            if abs(cum - half) < 1e-9 and i + 1 < len(pairs):
                return (v + pairs[i + 1][0]) / 2
            return float(v)
    return float(pairs[-1][0])


def _isotonic_l1(targets, weights) -> list[float]:
    """Nondecreasing fit minimising the weighted sum of |fit - target| (pooled weighted medians)."""
    blocks: list[tuple[list[float], list[float], float]] = []  # (targets, weights, value)
    for t, w in zip(targets, weights):
        blocks.append(([float(t)], [float(w)], float(t)))
        while len(blocks) > 1 and blocks[-2][2] > blocks[-1][2]:
            t2, w2, _ = blocks.pop()
            t1, w1, _ = blocks.pop()
            blocks.append((t1 + t2, w1 + w2, _weighted_median(t1 + t2, w1 + w2)))
    return [value for ts, _, value in blocks for _ in ts]


def _place(widths: list[float], desired: list[float], weights: list[float]) -> list[float]:
    """x positions in the given order, neighbours ``(w_a + w_b) / 2`` apart, closest to `desired`.

    Closest in the weighted L1 sense: when neighbours compete for room, the heavier one (more
    edges) keeps its place and the lighter ones move aside.
    """
    offsets = [0.0]
    for i in range(1, len(widths)):
        offsets.append(offsets[-1] + (widths[i - 1] + widths[i]) / 2)
    fit = _isotonic_l1([d - o for d, o in zip(desired, offsets)], weights)
    return [f + o for f, o in zip(fit, offsets)]


def _crossings(layers, succ, order_of) -> int:
    total = 0
    for k in range(len(layers) - 1):
        pairs = np.array([(order_of[a], order_of[b]) for a in layers[k] for b in succ[a]], dtype=float)
        if len(pairs) > 1:
            da = pairs[:, 0, None] - pairs[None, :, 0]
            db = pairs[:, 1, None] - pairs[None, :, 1]
            total += int((da * db < 0).sum()) // 2
    return total


_LAYOUT_CACHE: dict = {}


def _layout(diagram: HasseDiagram, labels: list[str], sweeps: int = 4):
    """:func:`_layout_uncached`, remembered for the last few diagrams (figsize, then draw)."""
    key = (tuple(map(tuple, diagram.classes)), tuple(map(tuple, diagram.edges)), tuple(labels), int(sweeps))
    if key not in _LAYOUT_CACHE:
        if len(_LAYOUT_CACHE) >= 16:
            _LAYOUT_CACHE.pop(next(iter(_LAYOUT_CACHE)))
        _LAYOUT_CACHE[key] = _layout_uncached(diagram, labels, sweeps)
    pos, width, routes = _LAYOUT_CACHE[key]
    return dict(pos), dict(width), dict(routes)


def _layout_uncached(diagram: HasseDiagram, labels: list[str], sweeps: int = 4):
    """Sugiyama-style layout: positions of classes and dummy bends, and each edge's route.

    An edge spanning several generations is routed through one dummy slot per generation it
    passes, so that every drawn segment joins adjacent layers and no edge runs through a
    node box it does not connect. Returns ``(pos, width, routes)``: `pos` and `width` keyed
    by class id (int) or dummy key (tuple), and ``routes[(u, v)]`` the dummy keys in order.
    """
    gen_of = {}
    for k, gen in enumerate(diagram.generations):
        for c in gen:
            gen_of[c] = k
    layers: list[list] = [list(g) for g in diagram.generations]
    width: dict = {c: len(labels[c]) + _GAP for c in range(diagram.num_classes)}
    succ: dict = {c: [] for c in width}
    pred: dict = {c: [] for c in width}
    routes = {}
    for u, v in diagram.edges:
        chain = [u] + [("dummy", u, v, k) for k in range(gen_of[u] + 1, gen_of[v])] + [v]
        for k, d in enumerate(chain[1:-1], start=gen_of[u] + 1):
            layers[k].append(d)
            width[d] = _DUMMY_WIDTH
            succ[d], pred[d] = [], []
        for a, b in zip(chain, chain[1:]):
            succ[a].append(b)
            pred[b].append(a)
        routes[(u, v)] = chain[1:-1]

    # Order within each layer: barycenter sweeps, keeping the order with fewest crossings.
    def barycenter(layers):
        layers = [list(x) for x in layers]
        order_of = {c: i for layer in layers for i, c in enumerate(layer)}

        def reorder(layer, neighbours):
            keys = []
            for c in layer:
                nb = [order_of[d] for d in neighbours[c]]
                keys.append(float(np.mean(nb)) if nb else float(order_of[c]))
            new = [c for _, c in sorted(zip(keys, layer), key=lambda t: t[0])]
            for i, c in enumerate(new):
                order_of[c] = i
            return new

        best = ([list(x) for x in layers], _crossings(layers, succ, order_of))
        for _ in range(max(0, sweeps)):
            for k in range(1, len(layers)):
                layers[k] = reorder(layers[k], pred)
            for k in range(len(layers) - 2, -1, -1):
                layers[k] = reorder(layers[k], succ)
            count = _crossings(layers, succ, order_of)
            if count < best[1]:
                best = ([list(x) for x in layers], count)
        return best[0]

    # Horizontal positions: start packed, then move every node towards the median of its
    # neighbours (alternating upward and downward sweeps), keeping the order and the minimum
    # spacing. The median (not the mean) keeps chains straight and centres a node between
    # two neighbours; bends of long edges pull harder, so long edges stay nearly straight.
    def weight(a, b):
        return 1.0 + isinstance(a, tuple) + isinstance(b, tuple)

    nbrs = {c: pred[c] + succ[c] for c in width}
    nbr_w = {c: [weight(c, d) for d in nbrs[c]] for c in width}
    strength = {c: sum(nbr_w[c]) or 0.5 for c in width}  # who keeps its place when room is short
    edge_w = [(a, b, weight(a, b)) for a in succ for b in succ[a]]

    def lengths(pos_x):
        dx = [(w, abs(pos_x[a] - pos_x[b])) for a, b, w in edge_w]
        slanted = sum(d > 1e-6 for _, d in dx)
        return (slanted, round(sum(w * d * d for w, d in dx), 6), round(sum(w * d for w, d in dx), 6))

    def place_from(layers, align):
        pos_x = {}
        for layer in layers:
            total = sum(width[c] for c in layer)
            x = {"centre": -total / 2, "left": 0.0, "right": -total}[align]
            for c in layer:
                pos_x[c] = x + width[c] / 2
                x += width[c]

        def relax(layer):
            desired = [_weighted_median([pos_x[d] for d in nbrs[c]], nbr_w[c]) if nbrs[c] else pos_x[c] for c in layer]
            for c, x in zip(layer, _place([width[c] for c in layer], desired, [strength[c] for c in layer])):
                pos_x[c] = x

        for _ in range(max(1, 2 * sweeps)):
            before = dict(pos_x)
            for layer in layers:
                relax(layer)
            for layer in reversed(layers):
                relax(layer)
            if all(abs(pos_x[c] - before[c]) < 1e-9 for c in pos_x):
                break
        return lengths(pos_x), pos_x

    def place(layers):
        # Packed starts centred, flush left and flush right; keep the one with the fewest
        # slanted edges, then the shortest ones.
        return min((place_from(layers, a) for a in ("centre", "left", "right")), key=lambda t: t[0])

    def crossings(layers):
        return _crossings(layers, succ, {c: i for layer in layers for i, c in enumerate(layer)})

    def cost(layers):
        length, pos_x = place(layers)
        return (crossings(layers), *length), pos_x

    def refine(layers):
        # Swap neighbours in a layer while that removes crossings or, at equal crossings,
        # makes fewer slanted and shorter edges (e.g. a butterfly comes out symmetric).
        current, pos_x = cost(layers)
        for _ in range(max(0, sweeps)):
            improved = False
            for layer in layers:
                for i in range(len(layer) - 1):
                    layer[i], layer[i + 1] = layer[i + 1], layer[i]
                    if crossings(layers) <= current[0]:
                        trial, trial_x = cost(layers)
                        if trial < current:
                            current, pos_x, improved = trial, trial_x, True
                            continue
                    layer[i], layer[i + 1] = layer[i + 1], layer[i]
            if not improved:
                break
        return current, layers, pos_x

    if len(width) > _REFINE_MAX_NODES:
        layers = barycenter(layers)
        _, pos_x = place(layers)
    else:  # small drawings: a few restarts from shuffled layers (seeded), each refined
        rng = np.random.default_rng(0)
        starts = [layers] + [[[x[i] for i in rng.permutation(len(x))] for x in layers] for _ in range(_RESTARTS)]
        _, layers, pos_x = min((refine(barycenter(st)) for st in starts), key=lambda t: t[0])
    lo = min(pos_x[c] - width[c] / 2 for c in pos_x)
    hi = max(pos_x[c] + width[c] / 2 for c in pos_x)
    shift = (lo + hi) / 2
    pos = {c: (pos_x[c] - shift, float(gen_of[c] if isinstance(c, (int, np.integer)) else c[3])) for c in pos_x}
    return pos, width, routes


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
    - `sweeps`: number of up-and-down barycenter sweeps that order each layer (the order
      with the fewest edge crossings is kept) and that then pull each node towards its
      neighbours.

    **Returns:** ``{class id: (x, y)}``; `y` is the generation index (0 = minimal classes),
    `x` is in units of one label character, the drawing centred on 0, and neighbouring
    nodes in a layer at least ``(len(label_a) + len(label_b)) / 2 + 2`` apart. An edge
    spanning several generations gets a free slot of its own in every layer it crosses
    (where :func:`draw_hasse` bends it), so it never runs through another node.

    **Raises:** :class:`~hassejax.errors.MaskError` if `names` has the wrong length or
    `max_label_chars < 4`.
    """
    if max_label_chars < 4:
        raise MaskError(f"`max_label_chars` must be at least 4; got {max_label_chars}.")
    names = diagram._check_names(names)
    labels = _node_labels(diagram, names, max_label_chars)
    pos, _, _ = _layout(diagram, labels, sweeps)
    return {c: pos[c] for c in range(diagram.num_classes)}


def _extent(pos, width) -> tuple[float, float]:
    half = max(max(abs(pos[c][0] - width[c] / 2), abs(pos[c][0] + width[c] / 2)) for c in pos)
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
    pos, width, _ = _layout(diagram, _node_labels(diagram, names, max_label_chars))
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
    (checked in the tests for diagrams of about 20 nodes). An edge that spans several
    layers bends through free slots of its own, so no edge crosses a box it does not
    connect.

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
    labels = _node_labels(diagram, names, max_label_chars)
    pos, width, routes = _layout(diagram, labels)
    x_range, y_range = _extent(pos, width)
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
    # Every node of a layer lies in the band y = k ± hy. An edge leaves the top border of its
    # lower node and enters the bottom border of its upper node; an edge spanning several
    # generations crosses each band in between vertically, at its own free slot (a dummy
    # node of the layout), and bends smoothly in the empty gaps between the bands. So no
    # edge passes through a node box it does not connect.
    half = {
        c: (fs * (_CHAR_EM * len(labels[c]) / 2 + _PAD) / x_unit, fs * (_HALF_HEIGHT_EM + _PAD) / y_unit)
        for c in range(diagram.num_classes)
    }
    hy = 1.04 * max(h for _, h in half.values())
    for u, v in diagram.edges:
        bends = [pos[d][0] for d in routes[(u, v)]]
        (xu, yu), (xv, yv) = pos[u], pos[v]
        first, last = (bends[0], bends[-1]) if bends else (xv, xu)
        start = (xu + float(np.clip((first - xu) * hy, -0.7 * half[u][0], 0.7 * half[u][0])), yu + hy)
        end = (xv + float(np.clip((last - xv) * hy, -0.7 * half[v][0], 0.7 * half[v][0])), yv - hy)
        arrowprops = dict(arrowstyle="-|>", color=edge_color, linewidth=0.9, shrinkA=0, shrinkB=0,
                          mutation_scale=max(6.0, fs))
        if bends:
            arrowprops["connectionstyle"] = _Through(start, end, bends, yu, hy, ax.transData)
        ax.annotate("", xy=end, xytext=start, arrowprops=arrowprops, zorder=2)
    return ax


def _gap_curve(a, b, vertical_a: bool, vertical_b: bool, samples: int) -> np.ndarray:
    """Cubic Bézier from `a` to `b` (vertical or straight at each end); it stays in their y slab."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    c1 = np.array([a[0], (a[1] + b[1]) / 2]) if vertical_a else a + (b - a) / 3
    c2 = np.array([b[0], (a[1] + b[1]) / 2]) if vertical_b else b - (b - a) / 3
    t = np.linspace(0.0, 1.0, samples + 1)[:, None]
    return (1 - t) ** 3 * a + 3 * (1 - t) ** 2 * t * c1 + 3 * (1 - t) * t**2 * c2 + t**3 * b


class _Through(ConnectionStyle._Base):
    """Connection style of a long edge: vertical through the bands at `bends`, curved between.

    `start` and `end` are the edge's ends (data coordinates) on its nodes' borders, `bends` the
    x of its dummy slots in the layers ``y0 + 1, y0 + 2, ...``, `hy` the half-height of a band.
    """

    def __init__(self, start, end, bends, y0, hy, transform, samples: int = 24):
        self.start, self.end, self.bends = start, end, list(bends)
        self.y0, self.hy, self.transform, self.samples = y0, hy, transform, samples

    def connect(self, posA, posB):
        pts = [np.asarray(self.start, float)]
        for k, x in enumerate(self.bends, start=1):
            low, high = np.array([x, self.y0 + k - self.hy]), np.array([x, self.y0 + k + self.hy])
            pts.append(_gap_curve(pts[-1][-1] if k > 1 else pts[0], low, k > 1, True, self.samples)[1:])
            pts.append(high[None, :])
        pts.append(_gap_curve(pts[-1][-1], self.end, True, False, self.samples)[1:])
        verts = np.vstack([pts[0][None, :]] + pts[1:])
        return Path(self.transform.transform(verts))
