"""HasseDiagram against networkx; isomorphism direction; export; plots."""

import json
import re

import hypothesis.strategies as st
import jax.numpy as jnp
import matplotlib
import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings

matplotlib.use("Agg")

from test_poset import mask_graph, masks, nx_reach

from hassejax.errors import MaskError
from hassejax.order import HasseDiagram, format_class
from hassejax.plot import draw_hasse, draw_mask, hasse_figsize

# --------------------------------------------------------------------------- helpers


def nx_diagram_edges(m):
    """Covering pairs as (members below, members above), from networkx only."""
    cond = nx.condensation(mask_graph(m))
    tr = nx.transitive_reduction(cond)
    return {(frozenset(cond.nodes[u]["members"]), frozenset(cond.nodes[v]["members"])) for u, v in tr.edges}, cond


def member_edges(d):
    return {(frozenset(d.classes[u]), frozenset(d.classes[v])) for u, v in d.edges}


def bidiagonal(n):
    return np.eye(n, k=-1, dtype=bool)


# The closed-form masks of spec hasse.md §3 (written out, n = 4 butterfly, n = 6, l = 2 block two-stream).
BUTTERFLY_4 = np.array(
    [
        [int(x) for x in row.split()]
        for row in """1 0 0 0 0 0 0 0 0 0
1 1 0 0 0 0 0 0 0 0
1 1 1 0 0 0 0 0 0 0
0 0 0 1 1 1 0 0 0 0
0 0 0 0 1 1 0 0 0 0
0 0 0 0 0 1 0 0 0 0
0 0 0 1 1 1 1 0 0 0
1 0 0 0 1 1 0 1 0 0
1 1 0 0 0 1 0 0 1 0
1 1 1 0 0 0 0 0 0 1""".splitlines()
    ],
    dtype=bool,
)
BUTTERFLY_4_NAMES = ["F1", "F2", "F3", "B2", "B3", "B4", "C1", "C2", "C3", "C4"]


def block_two_stream(n=6, l=2):
    m = np.zeros((2 * n, 2 * n), bool)
    for q in range(2 * n):
        for k in range(2 * n):
            if q < n:
                m[q, k] = k < n and k <= q
            else:
                t = q - n + 1
                b = (t - 1) // l
                m[q, k] = (k < n and k + 1 <= b * l) or (k >= n and (k - n) // l == b)
    return m


# ------------------------------------------------------------------- against networkx


@settings(max_examples=50)
@given(masks())
def test_diagram_matches_networkx_and_closes_back(m):
    d = HasseDiagram.from_mask(jnp.asarray(m))
    ref_edges, cond = nx_diagram_edges(m)
    assert d.n == m.shape[0]
    assert {frozenset(c) for c in d.classes} == {frozenset(s) for s in nx.strongly_connected_components(mask_graph(m))}
    assert member_edges(d) == ref_edges
    # Node ids are a topological order; every position is in the class its label names.
    assert all(u < v for u, v in d.edges)
    labels = np.asarray(d.labels)
    for c, mem in enumerate(d.classes):
        assert np.all(labels[list(mem)] == c)
    # Closing the diagram back gives R.
    assert np.array_equal(np.asarray(d.reachability()), nx_reach(m))
    # Depth = longest path of the condensation (in nodes) = number of topological generations.
    assert d.depth == len(nx.dag_longest_path(cond)) == len(d.generations)
    assert sorted(c for g in d.generations for c in g) == list(range(d.num_classes))
    assert all(d.graph.in_degree(c) == 0 for c in d.generations[0])
    # The width is at least the largest generation (each generation is an antichain).
    assert d.width >= max(map(len, d.generations))
    # JSON round trip and equality.
    back = HasseDiagram.from_json(d.to_json())
    assert back == d and hash(back) == hash(d)
    assert back.classes == d.classes and back.edges == d.edges
    assert back.depth == d.depth and back.width == d.width


@settings(max_examples=25)
@given(masks(max_n=20), st.integers(0, 2**32 - 1))
def test_relabelled_masks_are_isomorphic(m, seed):
    n = m.shape[0]
    perm = np.random.default_rng(seed).permutation(n)
    mp = m[np.ix_(perm, perm)]
    d, dp = HasseDiagram.from_mask(jnp.asarray(m)), HasseDiagram.from_mask(jnp.asarray(mp))
    assert d.is_isomorphic(dp) and dp.is_isomorphic(d)
    # With members matched, isomorphism is equality of the flow.
    assert d.is_isomorphic(dp, match_members=True) == (d == dp)
    # Position p of the permuted mask is position perm[p] of the original.
    mapped = {frozenset(int(perm[p]) for p in mem) for mem in dp.classes}
    assert mapped == {frozenset(mem) for mem in d.classes}


def test_same_closure_same_diagram():
    # Spec §1.7: masks with the same R have the same diagram. A bidiagonal chain (L* = n - 1)
    # and the causal mask (L* = 1) share R.
    n = 7
    d1 = HasseDiagram.from_mask(jnp.asarray(bidiagonal(n)))
    d2 = HasseDiagram.from_mask(jnp.asarray(np.tril(np.ones((n, n), bool))))
    assert d1 == d2 and hash(d1) == hash(d2)
    assert d1.edges == tuple((k, k + 1) for k in range(n - 1))
    assert (d1.depth, d1.width, d1.num_classes) == (n, 1, n)
    # A strictly different flow is unequal.
    d3 = HasseDiagram.from_mask(jnp.asarray(np.ones((n, n), bool)))
    assert d3 != d1 and d3.num_classes == 1 and d3.edges == () and d3.depth == d3.width == 1


def test_spec_case_studies():
    # Butterfly n = 4 (spec §3.3): C_k covers F_{k-1} and B_{k+1}; the wings are chains.
    d = HasseDiagram.from_mask(jnp.asarray(BUTTERFLY_4))
    names = BUTTERFLY_4_NAMES
    named = {(format_class(d.classes[u], names), format_class(d.classes[v], names)) for u, v in d.edges}
    assert named == {
        ("{F1}", "{F2}"), ("{F2}", "{F3}"), ("{B4}", "{B3}"), ("{B3}", "{B2}"),
        ("{B2}", "{C1}"), ("{F1}", "{C2}"), ("{B3}", "{C2}"), ("{F2}", "{C3}"),
        ("{B4}", "{C3}"), ("{F3}", "{C4}"),
    }  # fmt: skip
    assert d.num_classes == 10 and d.depth == 4
    # Block two-stream n = 6, l = 2 (spec §3.2): content chain, query groups as classes.
    d = HasseDiagram.from_mask(jnp.asarray(block_two_stream()))
    groups = {frozenset(c) for c in d.classes if len(c) > 1}
    assert groups == {frozenset({6, 7}), frozenset({8, 9}), frozenset({10, 11})}
    lab = np.asarray(d.labels)
    assert (lab[1], lab[8]) in d.edges and (lab[3], lab[10]) in d.edges
    assert (lab[1], lab[2]) in d.edges  # content chain w2 -> w3
    assert d.graph.in_degree(lab[6]) == 0  # m1, m2 see nothing but their own group


def test_from_mask_with_layers():
    n = 6
    m = jnp.asarray(bidiagonal(n))  # L* = n - 1
    assert HasseDiagram.from_mask(m, num_layers=n - 1) == HasseDiagram.from_mask(m)
    with pytest.raises(MaskError, match=r"`num_layers` = 4 is below the convergence depth .*misses 1 dependent"):
        HasseDiagram.from_mask(m, num_layers=n - 2)
    with pytest.raises(MaskError, match=r"`num_layers` must be None or an int >= 1; got 0"):
        HasseDiagram.from_mask(m, num_layers=0)


def test_from_reachability_checks_preorder():
    a = np.eye(3, dtype=bool) | bidiagonal(3)
    with pytest.raises(MaskError, match=r"`reach` must be a preorder .*not transitive"):
        HasseDiagram.from_reachability(jnp.asarray(a))


# ------------------------------------------------------------------------ isomorphism


def _graph(sizes, edges):
    """A diagram from class sizes (members assigned in order) and covering edges."""
    g, start = nx.DiGraph(), 0
    for c, k in enumerate(sizes):
        g.add_node(c, members=tuple(range(start, start + k)))
        start += k
    g.add_edges_from(edges)
    return HasseDiagram(g, start)


def test_isomorphism_respects_direction():
    # Chain small -> big vs big -> small: the same undirected graph with the same sizes.
    up = _graph([1, 2], [(0, 1)])
    down = _graph([2, 1], [(0, 1)])
    assert not up.is_isomorphic(down) and not down.is_isomorphic(up)
    assert nx.is_isomorphic(
        up.graph.to_undirected(),
        down.graph.to_undirected(),
        node_match=lambda a, b: len(a["members"]) == len(b["members"]),
    )  # fmt: skip  (so only the direction separates them)
    # In-star (three minimal classes below one) vs out-star (one below three).
    in_star = _graph([1, 1, 1, 1], [(0, 3), (1, 3), (2, 3)])
    out_star = _graph([1, 1, 1, 1], [(0, 1), (0, 2), (0, 3)])
    assert not in_star.is_isomorphic(out_star)
    assert nx.is_isomorphic(in_star.graph.to_undirected(), out_star.graph.to_undirected())
    # Positive controls: a relabelled in-star and size-respecting match.
    in_star2 = _graph([1, 1, 1, 1], [(1, 3), (0, 3), (2, 3)])
    assert in_star.is_isomorphic(in_star2) and in_star.is_isomorphic(in_star2, match_members=True)
    a = _graph([2, 1, 1], [(0, 2), (1, 2)])
    b = _graph([1, 2, 1], [(0, 2), (1, 2)])
    assert a.is_isomorphic(b) and not a.is_isomorphic(b, match_members=True) and a != b
    assert not a.is_isomorphic(_graph([1, 1, 2], [(0, 2), (1, 2)]))  # sizes differ at the top


def test_is_isomorphic_rejects_other_types():
    d = _graph([1], [])
    with pytest.raises(MaskError, match=r"`other` must be a HasseDiagram; got str"):
        d.is_isomorphic("x")
    assert (d == "x") is False


# ----------------------------------------------------------------------- construction


@pytest.mark.parametrize(
    "nodes, edges, n, fragment",
    [
        ({0: (0,), 2: (1,)}, [], 2, r"`graph` must have nodes 0 \.\. C-1"),
        ({0: (0,), 1: ()}, [], 1, r"node 1 has no members"),
        ({0: (0, 1), 1: (1,)}, [], 2, r"position 1 belongs to more than one class"),
        ({0: (0,), 1: (2,)}, [], 2, r"node 1 has members \[2\] outside 0 \.\. n-1 = 1"),
        ({0: (0,)}, [], 2, r"position 1 is in none"),
        ({0: (0,), 1: (1,)}, [(1, 0)], 2, r"edge 1 -> 0: node ids must be a topological order"),
        ({0: (0,), 1: (1,), 2: (2,)}, [(0, 1), (1, 2), (0, 2)], 3, r"transitively reduced.*edge 0 -> 2"),
        ({0: ("a",)}, [], 1, r"'members' must be an iterable of int positions"),
    ],
)
def test_constructor_validates(nodes, edges, n, fragment):
    g = nx.DiGraph()
    for c, mem in nodes.items():
        g.add_node(c, members=mem)
    g.add_edges_from(edges)
    with pytest.raises(MaskError, match=fragment):
        HasseDiagram(g, n)


def test_constructor_missing_members_and_bad_n():
    g = nx.DiGraph()
    g.add_node(0)
    with pytest.raises(MaskError, match=r"node 0 has no 'members' attribute"):
        HasseDiagram(g, 1)
    g.nodes[0]["members"] = (0,)
    with pytest.raises(MaskError, match=r"`n` must be a positive int .*got 0"):
        HasseDiagram(g, 0)


def test_graph_is_frozen_and_direction_documented():
    d = HasseDiagram.from_mask(jnp.asarray(np.tril(np.ones((3, 3), bool))))
    with pytest.raises(nx.NetworkXError):
        d.graph.add_edge(0, 2)
    # Edge u -> v: R[i, j] for i in v, j in u (v depends on u).
    r = np.asarray(d.reachability())
    for u, v in d.edges:
        assert r[d.classes[v][0], d.classes[u][0]] and not r[d.classes[u][0], d.classes[v][0]]


# ------------------------------------------------------------------------------ export


@pytest.mark.parametrize(
    "members, text",
    [((0,), "{0}"), ((1, 0), "{0, 1}"), (range(8), "{0..7}"), ((0, 1, 2, 5, 7, 8, 9, 11), "{0..2, 5, 7..9, 11}")],
)
def test_format_class(members, text):
    assert format_class(members) == text


@given(st.sets(st.integers(0, 60), min_size=1))
def test_format_class_round_trips(members):
    text = format_class(members)
    got = set()
    for part in text.strip("{}").split(", "):
        a, _, b = part.partition("..")
        got |= set(range(int(a), int(b or a) + 1))
    assert got == members


def test_format_class_rejects_duplicates():
    with pytest.raises(MaskError, match=r"`members` must not repeat a position"):
        format_class([1, 1])


def test_dot_contains_classes_and_edges():
    d = HasseDiagram.from_mask(jnp.asarray(BUTTERFLY_4))
    dot = d.to_dot()
    assert dot.startswith("digraph hasse {") and dot.rstrip().endswith("}")
    for u, v in d.edges:
        assert f"  {u} -> {v};" in dot.splitlines()
    assert len(re.findall(r"->", dot)) == len(d.edges) + 1  # + the comment line
    for c, mem in enumerate(d.classes):
        assert f'  {c} [label="{format_class(mem)}"];' in dot
    named = d.to_dot(names=BUTTERFLY_4_NAMES)
    assert '[label="{C4}"]' in named
    with pytest.raises(MaskError, match=r"`names` must have one entry per position \(n = 10\); got 2"):
        d.to_dot(names=["a", "b"])
    with pytest.raises(MaskError, match=r"`name` must be a DOT identifier"):
        d.to_dot(name="two words")


def test_json_errors():
    d = _graph([1, 2], [(0, 1)])
    data = json.loads(d.to_json())
    assert data == {
        "format": "hassejax.HasseDiagram", "version": 1, "n": 3, "classes": [[0], [1, 2]], "edges": [[0, 1]]
    }  # fmt: skip
    with pytest.raises(MaskError, match=r"`text` is not valid JSON"):
        HasseDiagram.from_json("{not json")
    with pytest.raises(MaskError, match=r"lacks the key\(s\) \['edges'\]"):
        HasseDiagram.from_json(json.dumps({k: v for k, v in data.items() if k != "edges"}))
    with pytest.raises(MaskError, match=r"must have format 'hassejax.HasseDiagram' version 1; got 'x'"):
        HasseDiagram.from_json(json.dumps({**data, "format": "x"}))
    with pytest.raises(MaskError, match=r"class 1 must be a list of int positions"):
        HasseDiagram.from_json(json.dumps({**data, "classes": [[0], [1, "2"]]}))
    with pytest.raises(MaskError, match=r"every edge must be a pair \[u, v\] of class ids; got \[0, 5\]"):
        HasseDiagram.from_json(json.dumps({**data, "edges": [[0, 5]]}))
    with pytest.raises(MaskError, match=r"'n' must be an int"):
        HasseDiagram.from_json(json.dumps({**data, "n": "3"}))
    with pytest.raises(MaskError, match=r"transitively reduced"):
        HasseDiagram.from_json(json.dumps({**data, "classes": [[0], [1], [2]], "edges": [[0, 1], [1, 2], [0, 2]]}))


# ------------------------------------------------------------------------------- plots


def _nodes_and_arrows(ax):
    """The node texts and the edge arrows (FancyArrowPatch, in the order of the diagram's edges)."""
    from matplotlib.patches import FancyArrowPatch

    nodes = list(ax.texts)
    arrows = [p for p in ax.patches if isinstance(p, FancyArrowPatch)]
    return nodes, arrows


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("own_axes", [False, True])
def test_draw_hasse_labels_do_not_overlap(seed, own_axes, tmp_path):
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(seed)
    # About 20 classes: a random DAG with a few two-element classes, on 24 positions.
    n = 24
    m = np.tril(rng.random((n, n)) < 0.15)
    for i in range(0, 8, 2):
        m[i, i + 1] = True
    d = HasseDiagram.from_mask(jnp.asarray(m))
    assert 15 <= d.num_classes <= 24
    if own_axes:  # a small axes supplied by the caller: the font shrinks to fit, below 8 pt here, which it says
        _, ax = plt.subplots(figsize=(4, 3))
        with pytest.warns(RuntimeWarning, match=r"^draw_hasse: the node labels fit the axes only at [67]\.\d\d pt"):
            assert draw_hasse(d, ax) is ax
    else:
        ax = draw_hasse(d)
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    nodes, arrows = _nodes_and_arrows(ax)
    assert [t.get_text() for t in nodes] == [format_class(c) for c in d.classes]
    assert len(arrows) == len(d.edges)
    boxes = [t.get_bbox_patch().get_window_extent(renderer) for t in nodes]
    for a in range(len(boxes)):
        for b in range(a + 1, len(boxes)):
            assert not boxes[a].overlaps(boxes[b]), (nodes[a].get_text(), nodes[b].get_text())
    fb = fig.bbox
    assert all(fb.x0 <= bb.x0 and bb.x1 <= fb.x1 and fb.y0 <= bb.y0 and bb.y1 <= fb.y1 for bb in boxes)
    # Layered bottom-up by generation: a class is drawn strictly above every class it covers.
    ys = [t.get_position()[1] for t in nodes]
    assert all(ys[u] < ys[v] for u, v in d.edges)
    for k, gen in enumerate(d.generations):
        assert all(ys[c] == k for c in gen)
    path = tmp_path / "hasse.png"
    fig.savefig(path, dpi=80)
    assert path.stat().st_size > 2000
    plt.close("all")


def test_draw_hasse_names_and_figsize(tmp_path):
    import matplotlib.pyplot as plt

    d = HasseDiagram.from_mask(jnp.asarray(BUTTERFLY_4))
    ax = draw_hasse(d, names=BUTTERFLY_4_NAMES, title="butterfly")
    nodes, _ = _nodes_and_arrows(ax)
    assert sorted(t.get_text() for t in nodes) == sorted("{" + s + "}" for s in BUTTERFLY_4_NAMES)
    assert tuple(ax.figure.get_size_inches()) == pytest.approx(hasse_figsize(d, BUTTERFLY_4_NAMES, title="butterfly"))
    with pytest.raises(MaskError, match=r"`names` must have one entry per position"):
        draw_hasse(d, names=["x"])
    plt.close("all")


def test_draw_mask(tmp_path):
    import matplotlib.pyplot as plt

    ax = draw_mask(jnp.asarray(BUTTERFLY_4), labels=BUTTERFLY_4_NAMES, title="butterfly")
    assert np.array_equal(np.asarray(ax.images[0].get_array()), BUTTERFLY_4)
    assert [t.get_text() for t in ax.get_xticklabels()] == BUTTERFLY_4_NAMES
    assert [t.get_text() for t in ax.get_yticklabels()] == BUTTERFLY_4_NAMES
    path = tmp_path / "mask.png"
    ax.figure.savefig(path, dpi=60)
    assert path.stat().st_size > 1000
    rect = draw_mask(jnp.asarray(np.ones((2, 5), bool)))  # cross-attention masks may be drawn
    assert rect.images[0].get_array().shape == (2, 5)
    with pytest.raises(
        MaskError, match=r"`labels` must name every slot .*got 3 label\(s\) for a mask of shape \(10, 10\)"
    ):
        draw_mask(jnp.asarray(BUTTERFLY_4), labels=["a", "b", "c"])
    plt.close("all")


@pytest.mark.parametrize("case", ["butterfly4", "random0", "random1", "random2"])
def test_draw_hasse_edges_cross_no_other_node(case):
    """No drawn edge passes through the box of a class it does not connect (long edges bend
    through slots of their own). The butterfly n = 4 layout once drew F1 -> C2 through F2."""
    import matplotlib.pyplot as plt

    from hassejax.tasks import butterfly_mask

    if case == "butterfly4":
        m = np.asarray(butterfly_mask(4))
    else:
        rng = np.random.default_rng(int(case[-1]) + 10)
        n = 16
        m = np.tril(rng.random((n, n)) < 0.2)
    d = HasseDiagram.from_mask(jnp.asarray(m))
    ax = draw_hasse(d)
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    nodes, arrows = _nodes_and_arrows(ax)
    boxes = [t.get_bbox_patch().get_window_extent(renderer) for t in nodes]
    assert len(arrows) == len(d.edges)
    for (u, v), arrow in zip(d.edges, arrows):
        path = arrow.get_transform().transform_path(arrow.get_path().interpolated(40))  # display coordinates
        for c, bb in enumerate(boxes):
            if c in (u, v):
                continue
            inside = (path.vertices[:, 0] > bb.x0 + 1) & (path.vertices[:, 0] < bb.x1 - 1)
            inside &= (path.vertices[:, 1] > bb.y0 + 1) & (path.vertices[:, 1] < bb.y1 - 1)
            assert not inside.any(), f"edge {u} -> {v} runs through the box of class {c} ({nodes[c].get_text()})"
    plt.close("all")
