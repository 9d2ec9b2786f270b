"""The Hasse-paper figures: draw_hasse's layers, order and colours, the butterfly wing layout, and the
numbers of the committed figure JSONs against independent counts (NumPy and networkx, not hassejax).

Li & Guo, arXiv:2606.09951 (Def. 3.5, Thm 3.7); spec hasse.md §1–3.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import networkx as nx
import numpy as np
import pytest
from matplotlib.patches import FancyArrowPatch

from hassejax.errors import ParameterError
from hassejax.order import HasseDiagram
from hassejax.plot import draw_hasse, hasse_crossings, hasse_layout

FIGURES = Path(__file__).resolve().parents[2] / "paper_figures"

# ------------------------------------------------------------------ independent constructions


def butterfly_closed_form(n):
    """Spec hasse.md §3.3, written out: slots [F_1..F_{n-1} | B_2..B_n | C_1..C_n] and their mask."""
    slots = [("F", j) for j in range(1, n)] + [("B", j) for j in range(2, n + 1)] + [("C", k) for k in range(1, n + 1)]
    m = np.zeros((len(slots), len(slots)), bool)
    for p, (sp, i) in enumerate(slots):
        for q, (sq, j) in enumerate(slots):
            m[p, q] = (
                (sp == sq == "F" and j <= i)
                or (sp == sq == "B" and j >= i)
                or (sp == "C" and ((sq == "F" and j <= i - 1) or (sq == "B" and j >= i + 1) or (sq == "C" and j == i)))
            )
    return slots, m


def butterfly_tasks(n):
    """Task T_k of spec §3.3: (inputs, mask), inputs as strings ("w3", "agg2")."""
    out = []
    for k in range(1, n + 1):
        f, b = k - 1, n - k
        m = np.zeros((n, n), bool)
        m[:f, :f] = np.tril(np.ones((f, f), bool))
        m[f + 1 :, f + 1 :] = np.triu(np.ones((b, b), bool))
        m[f, :] = True
        out.append(([f"w{j}" for j in range(1, k)] + [f"agg{k}"] + [f"w{j}" for j in range(k + 1, n + 1)], m))
    return out


def block_tasks(n, l):
    """Block-generation tasks of spec §3.2 (group "full", content causal) plus the content task."""
    out = []
    for b in range(n // l):
        s = b * l
        m = np.zeros((s + l, s + l), bool)
        m[:s, :s] = np.tril(np.ones((s, s), bool))
        m[s:, :s] = True
        m[s:, s:] = True
        out.append(([f"w{j}" for j in range(1, s + 1)] + [f"mask{t}" for t in range(s + 1, s + l + 1)], m))
    out.append(([f"w{j}" for j in range(1, n + 1)], np.tril(np.ones((n, n), bool))))
    return out


def upstream_keys(inputs, mask):
    """Per Hasse node of a task (networkx condensation): (own inputs, inputs of every node below it).

    For these families two nodes are equivalent (Def. 3.5) iff these keys are equal."""
    g = nx.DiGraph()
    g.add_nodes_from(range(len(inputs)))
    g.add_edges_from((q, p) for p, q in zip(*np.nonzero(mask)) if p != q)  # information flows key -> query
    cond = nx.condensation(g)
    keys = []
    for c in cond.nodes:
        own = tuple(sorted(inputs[s] for s in cond.nodes[c]["members"]))
        below = frozenset(inputs[s] for a in nx.ancestors(cond, c) for s in cond.nodes[a]["members"])
        keys.append((own, below))
    return keys


def cover_graph(mask):
    """Hasse diagram (transitive reduction of the condensation) as an undirected networkx graph."""
    g = nx.DiGraph()
    g.add_nodes_from(range(len(mask)))
    g.add_edges_from((q, p) for p, q in zip(*np.nonzero(mask)) if p != q)
    cond = nx.condensation(g)
    return nx.transitive_reduction(cond), cond


def _segments_cross(p, q) -> bool:
    """Whether two polylines (k, 2) properly intersect (NumPy orientation test on every segment pair)."""
    a, b = p[:-1, None, :], p[1:, None, :]
    c, d = q[None, :-1, :], q[None, 1:, :]

    def orient(x, y, z):
        return (y[..., 0] - x[..., 0]) * (z[..., 1] - x[..., 1]) - (y[..., 1] - x[..., 1]) * (z[..., 0] - x[..., 0])

    d1, d2, d3, d4 = orient(a, b, c), orient(a, b, d), orient(c, d, a), orient(c, d, b)
    return bool(np.any((d1 * d2 < 0) & (d3 * d4 < 0)))


def drawn_crossings(ax, diagram) -> int:
    """Crossing pairs of drawn edges that share no end node, from the arrows' display paths."""
    ax.figure.canvas.draw()
    arrows = [p for p in ax.patches if isinstance(p, FancyArrowPatch)]
    assert len(arrows) == len(diagram.edges)
    paths = []
    for arrow in arrows:
        path = arrow.get_transform().transform_path(arrow.get_path())
        paths.append(path.to_polygons(closed_only=False)[0])  # the shaft (the head is a further polygon)
    count = 0
    for (e, p), (f, q) in itertools.combinations(zip(diagram.edges, paths), 2):
        if not set(e) & set(f):
            count += _segments_cross(p, q)
    return count


def wing_key(slot):
    s, j = slot
    return {"B": -100.0 - j, "C": float(j), "F": 100.0 - j}[s]


# ------------------------------------------------------------------------- the butterfly layout


@pytest.mark.parametrize("n", [4, 5])
def test_butterfly_wing_layout(n):
    slots, m = butterfly_closed_form(n)
    d = HasseDiagram.from_mask(m)
    keys = [wing_key(slots[c[0]]) for c in d.classes]
    _, ax = plt.subplots(figsize=(5, 4))
    draw_hasse(d, ax=ax, levels="top", order_key=keys, names=[f"{s}{j}" for s, j in slots])
    expected = (n - 2) * (n - 3) // 2  # every pair (F_{k-1} -> C_k, B_{m+1} -> C_m) with m > k crosses
    assert drawn_crossings(ax, d) == expected == hasse_crossings(d, levels="top", order_key=keys)
    xy = {slots[c[0]]: t.get_position() for c, t in zip(d.classes, ax.texts)}
    assert len({xy[("C", k)][1] for k in range(1, n + 1)}) == 1  # centres on one level
    assert all(xy[("C", 1)][1] > y for (s, _), (_, y) in xy.items() if s != "C")  # ... the top one
    assert max(x for (s, _), (x, _) in xy.items() if s == "B") < min(x for (s, _), (x, _) in xy.items() if s == "F")
    for s, rising in (("F", 1), ("B", -1)):  # each wing rises along its chain
        ys = [xy[(s, j)][1] for j in sorted(j for (t, j) in xy if t == s)]
        assert all(rising * (b - a) > 0 for a, b in itertools.pairwise(ys))
    plt.close("all")


@pytest.mark.parametrize(("n", "planar"), [(4, True), (5, False), (6, False)])
def test_centres_on_one_level_force_crossings(n, planar):
    """A crossing-free drawing with every centre on one (top) level would stay planar with one more
    vertex above joined to every centre: networkx says that graph is not planar for n >= 5."""
    slots, m = butterfly_closed_form(n)
    reduced, cond = cover_graph(m)
    g = nx.Graph(reduced.edges)
    centres = [c for c in cond.nodes if slots[next(iter(cond.nodes[c]["members"]))][0] == "C"]
    g.add_edges_from(("apex", c) for c in centres)
    assert nx.check_planarity(g)[0] is planar


# ------------------------------------------------------------------------ draw_hasse keywords


def test_levels_top_colours_and_errors():
    slots, m = butterfly_closed_form(4)
    d = HasseDiagram.from_mask(m)
    reduced, _ = cover_graph(m)
    pos = hasse_layout(d, levels="top")
    top = max(y for _, y in pos.values())
    maximal = {c for c in range(d.num_classes) if not any(u == c for u, _ in d.edges)}
    assert len(maximal) == sum(1 for v in reduced.nodes if reduced.out_degree(v) == 0) == 4
    assert {c for c, (_, y) in pos.items() if y == top} == maximal
    assert {c for c, (_, y) in hasse_layout(d).items() if y == 0} == {
        c for c in range(10) if c not in {v for _, v in d.edges}
    }
    colours = [f"#{c:02x}{c:02x}ff" for c in range(d.num_classes)]
    _, ax = plt.subplots(figsize=(5, 4))
    draw_hasse(d, ax=ax, class_colors=colours, num_levels=6)
    assert [matplotlib.colors.to_hex(t.get_bbox_patch().get_facecolor()) for t in ax.texts] == colours
    assert ax.get_ylim() == (-0.5, 5.5)
    bad = [
        ({"levels": "middle"}, r"`levels` must be"),
        ({"levels": [0] * d.num_classes}, r"`levels` must rise along every edge"),
        ({"levels": [0, 1]}, r"one int per class"),
        ({"order_key": [0.0]}, r"`order_key` must hold one finite number per class"),
        ({"class_colors": ["red"]}, r"`class_colors` must hold one colour per class"),
        ({"class_colors": {99: "red"}}, r"`class_colors` names class ids"),
        ({"num_levels": 2}, r"`num_levels` must be an int >="),
    ]
    for kwargs, message in bad:
        with pytest.raises(ParameterError, match=message):
            draw_hasse(d, ax=plt.subplots()[1], **kwargs)
    _, tiny = plt.subplots(figsize=(1, 1))
    with pytest.raises(ParameterError, match=r"`min_fontsize`: the node labels fit the axes only at"):
        draw_hasse(d, ax=tiny, min_fontsize=8)
    plt.close("all")


# ----------------------------------------------------------------- the committed figure numbers


def _json(name):
    path = FIGURES / name / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"{path} not generated")
    return json.loads(path.read_text())


def test_butterfly_merge_counts():
    data = _json("butterfly_attention")
    n = data["n"]
    tasks = butterfly_tasks(n)
    per_task = [upstream_keys(inputs, m) for inputs, m in tasks]
    merge = data["merge"]
    assert merge["task_nodes"] == [len(k) for k in per_task] and merge["task_nodes_total"] == n * n
    assert merge["merged_nodes"] == merge["merged_diagram_classes"] == len(set().union(*per_task)) == 3 * n - 2
    assert merge["joins"] == n * n - (3 * n - 2)
    assert merge["not_minimal_nodes"] == (n - 1) + n * (n - 1) // 2 + n  # F shared, one B chain per task, centres
    layout = data["hasse_layout"]
    assert layout["crossings"] == (n - 2) * (n - 3) // 2 and len(layout["centre_levels"]) == 1
    assert layout["apex_planar"] == {"4": True, "5": False, "6": False, "7": False, "8": False}
    # the referee's crossing-free order at n = 4 (found by hand) is among those recorded
    assert ["C1", "C2", "C4", "C3"] in layout["n4_crossing_free_centre_orders"]
    _, m = butterfly_closed_form(n)
    assert np.array_equal(np.asarray(data["dense_mask"], bool), m)


def test_block_two_stream_merge_counts():
    data = _json("block_two_stream")
    n, l = data["n"], data["block_size"]
    per_task = [upstream_keys(inputs, m) for inputs, m in block_tasks(n, l)]
    merge = data["merge"]
    assert merge["task_nodes"] == [len(k) for k in per_task]
    assert merge["merged_nodes"] == merge["merged_diagram_classes"] == len(set().union(*per_task)) == n + n // l
    assert merge["joins"] == sum(merge["task_nodes"]) - merge["merged_nodes"]
    # the content task kept apart: the prefixes w_1..w_{n-l} once, the content chain again, the query groups
    assert merge["not_minimal_nodes"] == (n - l) + n + n // l


def test_node_equivalence_counts():
    data = _json("node_equivalence")
    assert data["nodes_before_merge"] == sum(data["task_sizes"]) == 10 and data["merged_slots"] == 4
    assert data["labels_carried_over_to"] == ["w1", "w2", "w3"]
    pair = data["butterfly_same_input_pair"]
    tasks = butterfly_tasks(pair["n"])
    keys = [upstream_keys(*tasks[int(name[1:]) - 1]) for name in pair["tasks"]]
    assert pair["merged_nodes"] == len(set().union(*keys)) == 7 and pair["task_nodes"] == [4, 4]
    w2 = [k for ks in keys for k in ks if k[0] == ("w2",)]
    assert len(w2) == 2 and w2[0] != w2[1] and pair["w2_equivalent"] is False
    assert sorted(x["covers"][0] for x in pair["w2_nodes"]) == ["w1", "w3"]


def test_preorder_to_hasse_numbers():
    data = _json("preorder_to_hasse")
    m = np.asarray(data["mask"], bool)
    n = len(m)
    r = m.copy()
    for k in range(n):  # Warshall
        r |= r[:, [k]] & r[[k], :]
    assert np.array_equal(np.asarray(data["closure"], bool), r)
    assert data["closure_added_pairs"] == int((r & ~m).sum()) > 0
    g = nx.DiGraph([(i, j) for i, j in zip(*np.nonzero(m)) if i != j])  # query -> key
    lengths = dict(nx.all_pairs_shortest_path_length(g))
    assert data["convergence_depth"] == max(d for row in lengths.values() for d in row.values())
    sccs = sorted(sorted(int(x) for x in c) for c in nx.strongly_connected_components(nx.DiGraph(g)))
    assert sorted(data["classes"]) == sccs
    reduced, cond = cover_graph(m)
    edges = {(frozenset(cond.nodes[u]["members"]), frozenset(cond.nodes[v]["members"])) for u, v in reduced.edges}
    classes = data["classes"]
    assert {(frozenset(classes[u]), frozenset(classes[v])) for u, v in data["hasse_edges"]} == edges
    assert data["hasse_closes_back_to_closure"] is True and data["is_chain"] is False
    # the spec's own example (hasse.md §5.3): block-causal, 3 blocks × 2, closed, classes = blocks, a chain
    blk = data["block_causal"]
    mb = np.asarray(blk["mask"], bool)
    q, k = np.indices(mb.shape)
    assert np.array_equal(mb, q // 2 >= k // 2) and mb.shape == (6, 6)
    rb = mb.copy()
    for j in range(len(mb)):  # Warshall
        rb |= rb[:, [j]] & rb[[j], :]
    assert blk["closure_equals_mask"] is np.array_equal(rb, mb) is True and blk["convergence_depth"] == 1
    gb = nx.DiGraph([(i, j) for i, j in zip(*np.nonzero(mb)) if i != j])
    assert sorted(sorted(int(x) for x in c) for c in nx.strongly_connected_components(gb)) == blk["classes"]
    assert blk["is_chain"] is True and sorted(map(tuple, blk["hasse_edges"])) == [(0, 1), (1, 2)]


def test_layout_functions_refuse_what_is_not_a_diagram(no_typecheck):
    """A docstring review: `hasse_layout`, `hasse_crossings` and `hasse_figsize` met a non-diagram with an
    AttributeError (`draw_hasse` named it); all four name `diagram` now."""
    from hassejax.errors import MaskError
    from hassejax.plot import draw_hasse, hasse_crossings, hasse_figsize, hasse_layout

    for fn in (hasse_layout, hasse_crossings, hasse_figsize, draw_hasse):
        with pytest.raises(MaskError, match=r"`diagram` must be a HasseDiagram; got ndarray"):
            fn(np.eye(3, dtype=bool))


def test_mathtext_labels_take_the_width_of_their_glyphs():
    """A mathtext node label ($w_{1}$, $w_{1} \\to w_{2}$) gets the slot of the glyphs it shows, not of its source:
    the same layout as the Unicode label of the same glyphs (w₁, w₁→w₂), and no label is cut inside $…$."""
    from hassejax.plot._hasse_layout import _display_len

    assert _display_len("{w1}") == 4
    assert _display_len("{$w_{1}$}") == _display_len("{w₁}") == 4
    assert _display_len("{$w'_{3}$}") == 5
    assert _display_len("{$w_{1} \\to w_{2}$}") == _display_len("{w₁→w₂}") == 7
    d = HasseDiagram.from_mask(np.tril(np.ones((4, 4), dtype=bool)))
    tex = [f"$w_{{{k}}}$" for k in range(1, 5)]
    uni = [f"w{'₁₂₃₄'[k]}" for k in range(4)]
    assert hasse_layout(d, tex) == hasse_layout(d, uni)
    fig, ax = plt.subplots(figsize=(2.0, 3.0))
    draw_hasse(d, ax=ax, names=[f"${'w' * 12}_{{{k}}}$" for k in range(4)], max_label_chars=5, min_fontsize=None)
    assert all(t.get_text().count("$") == 2 for t in ax.texts)  # never cut inside the math
    plt.close(fig)


@pytest.mark.parametrize("limit", [4, 7, 20])  # 20: cut inside $\\mathrm{diag}(w_{3}) \\to w'_{3}$
def test_long_mathtext_labels_are_cut_by_the_glyphs_they_show(limit):
    """A referee: a label with ``$`` was never cut to `max_label_chars` (``{$w_{1}$, …, $w_{11}$}`` kept all 43 glyphs
    of its source); now every label shows at most `max_label_chars` characters, the cut ones end in an ellipsis,
    and each still parses as mathtext (every ``$…$`` closed, no command or brace group broken)."""
    from matplotlib.mathtext import MathTextParser

    from hassejax.order import format_class
    from hassejax.plot._hasse_layout import _display_len

    n = 11
    d = HasseDiagram.from_mask(np.ones((n, n), dtype=bool))  # one class of all n slots: one long label
    names = [f"$w_{{{k}}}$" if k % 3 else f"$\\mathrm{{diag}}(w_{{{k}}}) \\to w'_{{{k}}}$" for k in range(1, n + 1)]
    full = format_class(range(n), names)
    assert _display_len(full) > limit
    fig, ax = plt.subplots(figsize=(3.0, 2.0))
    draw_hasse(d, ax=ax, names=names, max_label_chars=limit, min_fontsize=None)
    (label,) = [t.get_text() for t in ax.texts]
    assert _display_len(label) <= limit and label.endswith("…"), label
    assert full.startswith(label[:-1].rsplit("$", 1)[0]), label  # a prefix of the label, up to its last math
    assert label.count("$") % 2 == 0 and label.count("$") > 0, label
    MathTextParser("path").parse(label)  # raises ValueError on a broken $…$
    fig.canvas.draw()
    plt.close(fig)
