"""The layered layout of a Hasse diagram (private; used by :mod:`hassejax.plot.hasse`).

A small Sugiyama-style layout: layers are topological generations, long edges get a dummy
slot in every layer they cross, layers are ordered by barycenter sweeps (small drawings: a
few seeded restarts and neighbour swaps) and nodes are pulled towards the weighted median of
their neighbours. Computed per call from the diagram alone (no cache).
"""

from __future__ import annotations

import itertools
import re
from typing import no_type_check

import numpy as np

from ..errors import ParameterError
from ..order.hasse import HasseDiagram, format_class

# Advance width of a monospace glyph (DejaVu Sans Mono) in units of the font size, and the
# rounded box padding (fraction of the font size) used for the node boxes.
_CHAR_EM = 0.61
_PAD = 0.3
_GAP = 2.0  # empty character cells between neighbouring node slots
_HALF_HEIGHT_EM = 0.62  # half the height of a line of text, in units of the font size
_REFINE_MAX_NODES = 60  # layouts with more (real + dummy) nodes skip the swap refinement
_RESTARTS = 4  # shuffled restarts of the layer ordering for small drawings
_DUMMY_WIDTH = 2.0  # character cells reserved in a layer for an edge passing through it


def _display_len(text: str) -> int:
    """Characters a label shows: its length, except that mathtext (``$w_1$``, ``$w_1 \\to w_2$``) counts each glyph once
    (a command such as ``\\to`` one glyph; ``_``, ``^``, braces and spaces inside ``$…$`` none)."""
    if "$" not in text:
        return len(text)
    n = 0
    for i, part in enumerate(text.split("$")):
        n += len(part) if i % 2 == 0 else len(re.sub(r"[_^{}\s]", "", re.sub(r"\\[A-Za-z]+", "x", part)))
    return n


# One glyph of mathtext source, cut only between two of these: a command with its brace arguments (``\\mathrm{d}``), an
# escaped character (``\\,``), a brace group, or one character; each with the sub- and superscripts that follow it.
_SCRIPT = r"(?:\s*[_^]\s*(?:\\[A-Za-z]+|\{(?:[^{}]|\{[^{}]*\})*\}|[^\s{}\\]))*"
_MATH_ATOM = re.compile(
    r"\s*(?:\\[A-Za-z]+(?:\{(?:[^{}]|\{[^{}]*\})*\})*|\\[^A-Za-z]|\{(?:[^{}]|\{[^{}]*\})*\}|[^\\{}])" + _SCRIPT
)


def _is_mathtext(text: str) -> bool:
    """Whether matplotlib reads `text` (without escaped dollar signs) as mathtext: an even, non-zero number of ``$``."""
    return text.count("$") > 0 and text.count("$") % 2 == 0


def _shorten(text: str, max_chars: int) -> str:
    """`text` cut to at most `max_chars` shown characters (:func:`_display_len`), the last one an ellipsis.

    Plain text is cut at a character. Mathtext is cut between glyphs, never inside a command, a brace group or a
    glyph's sub- or superscript, and every ``$…$`` kept is closed, so the label still parses."""
    if _display_len(text) <= max_chars:
        return text
    if "\\$" in text:  # an escaped dollar sign: not split into its $…$ pairs here; left whole, as before
        return text
    if not _is_mathtext(text):
        return text[: max_chars - 1] + "…"
    room, out = max_chars - 1, []
    for i, part in enumerate(text.split("$")):
        if i % 2 == 0:  # plain text between the math
            out.append(part[:room])
            room -= len(out[-1])
            if len(out[-1]) < len(part):
                break
            continue
        kept, pos, part = "", 0, part.rstrip()
        for m in _MATH_ATOM.finditer(part):
            if m.start() != pos:  # not one glyph from here on (unbalanced braces): keep none of the rest
                break
            n = _display_len("$" + m.group() + "$")
            if n > room:
                break
            kept, room, pos = kept + m.group(), room - n, m.end()
        if kept.strip():
            out.append("$" + kept.rstrip() + "$")
        if pos < len(part):
            break
    return "".join(out) + "…"


def _node_labels(diagram: HasseDiagram, names, max_label_chars: int) -> list[str]:
    return [_shorten(format_class(mem, names), max_label_chars) for mem in diagram.classes]


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
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


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
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


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def _crossings(layers, succ, order_of) -> int:
    total = 0
    for k in range(len(layers) - 1):
        pairs = np.array([(order_of[a], order_of[b]) for a in layers[k] for b in succ[a]], dtype=float)
        if len(pairs) > 1:
            da = pairs[:, 0, None] - pairs[None, :, 0]
            db = pairs[:, 1, None] - pairs[None, :, 1]
            total += int((da * db < 0).sum()) // 2
    return total


def _resolve_levels(diagram: HasseDiagram, levels) -> dict[int, int]:
    """The layer of every class: ``"bottom"`` (topological generations), ``"top"`` or explicit.

    ``"top"`` puts every maximal class on the top layer and every other class one layer below
    its lowest cover (longest path to a maximal class, counted from the top). Explicit levels
    (one non-negative int per class) must rise along every edge.
    """
    num = diagram.num_classes
    if levels is None or (isinstance(levels, str) and levels == "bottom"):
        return {c: k for k, gen in enumerate(diagram.generations) for c in gen}
    if isinstance(levels, str):
        if levels != "top":
            raise ParameterError(f'`levels` must be "bottom", "top" or one int per class; got {levels!r}.')
        up = dict.fromkeys(range(num), 0)
        for c in reversed(list(itertools.chain.from_iterable(diagram.generations))):
            up[c] = max((up[v] + 1 for v in diagram.graph.successors(c)), default=0)
        top = max(up.values())
        return {c: top - up[c] for c in range(num)}
    out = list(levels)
    if len(out) != num or not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in out):
        raise ParameterError(
            f"`levels` must hold one int per class ({num} classes); got {len(out)} entries: {out!r:.120}."
        )
    if min(out) < 0:
        raise ParameterError(f"`levels` must be non-negative; got {min(out)}.")
    bad = [(u, v) for u, v in diagram.edges if not out[u] < out[v]]
    if bad:
        u, v = bad[0]
        raise ParameterError(
            f"`levels` must rise along every edge (a class above every class it covers); edge {u} -> {v} goes "
            f"from level {out[u]} to level {out[v]}."
        )
    return {c: int(x) for c, x in enumerate(out)}


def _resolve_keys(diagram: HasseDiagram, order_key) -> dict[int, float] | None:
    if order_key is None:
        return None
    keys = list(order_key)
    if len(keys) != diagram.num_classes or not all(np.isfinite(float(k)) for k in keys):
        raise ParameterError(
            f"`order_key` must hold one finite number per class ({diagram.num_classes} classes); got {keys!r:.120}."
        )
    return {c: float(k) for c, k in enumerate(keys)}


@no_type_check  # hot private helper and its closures: no runtime type check under the suite's hook (see pyproject)
def _layout(diagram: HasseDiagram, labels: list[str], sweeps: int = 4, levels=None, order_key=None):
    """Sugiyama-style layout: positions of classes and dummy bends, and each edge's route.

    An edge spanning several layers is routed through one dummy slot per layer it passes,
    so that every drawn segment joins adjacent layers and no edge runs through a node box it
    does not connect. `levels` and `order_key` as in :func:`hassejax.plot.hasse_layout`: with
    `order_key`, every layer is ordered by it (a dummy by the key interpolated between its
    edge's ends) and no crossing reduction runs. Returns ``(pos, width, routes)``: `pos` and
    `width` keyed by class id (int) or dummy key (tuple), and ``routes[(u, v)]`` the dummy
    keys in order.
    """
    gen_of = _resolve_levels(diagram, levels)
    keys = _resolve_keys(diagram, order_key)
    layers: list[list] = [[] for _ in range(max(gen_of.values()) + 1)]
    for c in range(diagram.num_classes):
        layers[gen_of[c]].append(c)
    width: dict = {c: _display_len(labels[c]) + _GAP for c in range(diagram.num_classes)}
    succ: dict = {c: [] for c in width}
    pred: dict = {c: [] for c in width}
    routes = {}
    for u, v in diagram.edges:
        chain = [u] + [("dummy", u, v, k) for k in range(gen_of[u] + 1, gen_of[v])] + [v]
        for k, d in enumerate(chain[1:-1], start=gen_of[u] + 1):
            layers[k].append(d)
            width[d] = _DUMMY_WIDTH
            succ[d], pred[d] = [], []
        for a, b in itertools.pairwise(chain):
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

        # per layer, fixed while the nodes move: the packed offsets (neighbours (w_a + w_b) / 2 apart) and each
        # node's strength: closest to the medians in the weighted L1 sense, so when neighbours compete for room,
        # the heavier one (more edges) keeps its place and the lighter ones move aside
        fixed = []
        for layer in layers:
            offsets = [0.0]
            for a, b in itertools.pairwise(layer):
                offsets.append(offsets[-1] + (width[a] + width[b]) / 2)
            fixed.append((layer, offsets, [strength[c] for c in layer]))

        def relax(layer, offsets, strengths):
            desired = [_weighted_median([pos_x[d] for d in nbrs[c]], nbr_w[c]) if nbrs[c] else pos_x[c] for c in layer]
            fit = _isotonic_l1([d - o for d, o in zip(desired, offsets)], strengths)
            for c, f, o in zip(layer, fit, offsets):
                pos_x[c] = f + o

        for _ in range(max(1, 2 * sweeps)):
            before = dict(pos_x)
            for item in fixed:
                relax(*item)
            for item in reversed(fixed):
                relax(*item)
            if all(abs(pos_x[c] - before[c]) < 1e-9 for c in pos_x):
                break
        return lengths(pos_x), pos_x

    def place(layers):
        # Packed starts centred, flush left and flush right; keep the one with the fewest
        # slanted edges, then the shortest ones.
        return min((place_from(layers, a) for a in ("centre", "left", "right")), key=lambda t: t[0])

    def crossings(layers):
        return _crossings(layers, succ, {c: i for layer in layers for i, c in enumerate(layer)})

    memo: dict = {}  # the restarts and the swap sweeps revisit orderings: each is placed once

    def cost(layers):
        key = tuple(map(tuple, layers))
        if key not in memo:
            length, pos_x = place(layers)
            memo[key] = (crossings(layers), *length), pos_x
        current, pos_x = memo[key]
        return current, dict(pos_x)

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

    if keys is not None:  # the caller's order; dummies between their edge's ends
        for u, v in routes:
            for k, d in enumerate(routes[(u, v)], start=1):
                keys[d] = keys[u] + (keys[v] - keys[u]) * k / (gen_of[v] - gen_of[u])
        layers = [sorted(layer, key=lambda c: keys[c]) for layer in layers]
        _, pos_x = place(layers)
    elif len(width) > _REFINE_MAX_NODES:
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


def _extent(pos, width) -> tuple[float, float]:
    half = max(max(abs(pos[c][0] - width[c] / 2), abs(pos[c][0] + width[c] / 2)) for c in pos)
    num_layers = int(max(y for _, y in pos.values())) + 1
    return 2 * half + 1.0, float(num_layers)
