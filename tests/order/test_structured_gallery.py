"""Every gallery mask, built in interval form, closes exactly like its dense form (n <= 4096).

Reference: the dense mask from the dense constructor, closed by a plain NumPy bit-set loop
(``R^(L+1)[i] = OR of R^(L)[j] over j in A[i]``, written here, independent of hassejax's
routes), SciPy's strongly connected components for the classes (numbered here by the documented
rule), and hassejax's dense HasseDiagram for the classes and covering relation (n <= 60).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import connected_components

from hassejax.masks import IntervalMask, from_spec
from hassejax.order import HasseDiagram, flow_summary
from hassejax.order._structured import PowerTable


def bitset_powers(mask: np.ndarray) -> list[np.ndarray]:
    """[A, A^2, …, R] (R once, at index L* - 1) as Boolean arrays, by packed-bit rounds.

    A round ORs, for every run ``[s, e)`` of keys of row ``i`` of ``A``, the packed rows
    ``s .. e-1`` of the previous power, with a doubling table of ORs over ``2^l`` rows.
    """
    n = mask.shape[0]
    a = mask | np.eye(n, dtype=bool)
    packed = np.packbits(a, axis=1, bitorder="little")
    packed = np.concatenate([packed, np.zeros((n, (-packed.shape[1]) % 8), np.uint8)], axis=1)
    reach = np.ascontiguousarray(packed).view(np.uint64)
    edges = np.diff(a.astype(np.int8), axis=1, prepend=0, append=0)
    rows, starts = np.nonzero(edges == 1)
    _, stops = np.nonzero(edges == -1)
    level = np.floor(np.log2(stops - starts)).astype(int)
    first = np.searchsorted(rows, np.arange(n))
    out = [a]
    while True:
        table = [reach]
        for lev in range(1, int(level.max()) + 1):
            prev, half = table[-1], 1 << (lev - 1)
            cur = prev.copy()
            cur[: n - half] |= prev[half:]
            table.append(cur)
        ors = np.zeros((rows.size, reach.shape[1]), np.uint64)
        for lev in range(int(level.max()) + 1):
            at = level == lev
            ors[at] = table[lev][starts[at]] | table[lev][stops[at] - (1 << lev)]
        nxt = np.bitwise_or.reduceat(ors, first, axis=0)
        if np.array_equal(nxt, reach):
            return out
        reach = nxt
        out.append(np.unpackbits(reach.view(np.uint8), axis=1, bitorder="little", count=n).astype(bool))


def scipy_class_sizes(mask: np.ndarray, reach: np.ndarray) -> np.ndarray:
    """Class sizes in hassejax's documented class order (:func:`hassejax.order.classes`: by the size of the
    reach set, ties by smallest member), the classes from SciPy's strongly connected components of the mask."""
    n = mask.shape[0]
    num, labels = connected_components(sp.csr_array(mask), directed=True, connection="strong")
    smallest = np.full(num, n)
    np.minimum.at(smallest, labels, np.arange(n))
    order = np.lexsort((smallest, reach[smallest].sum(axis=1)))
    return np.bincount(labels, minlength=num)[order]


SMALL = [
    "causal(n=1)",
    "causal(n=37)",
    "full(n=9)",
    "prefix_lm(n=40, prefix=0)",
    "prefix_lm(n=40, prefix=7)",
    "prefix_lm(n=40, prefix=40)",
    "sliding_window(n=50, left=3)",
    "sliding_window(n=50, left=0)",
    "sliding_window(n=50, left=2, right=5)",
    "sliding_window(n=50, left=0, right=3)",
    "block_causal(n=45, block_size=4)",
    "chunked_causal(n=45, chunk=7)",
    "document(segments=[5, 1, 12, 3])",
    "document(segments=[5, 1, 12, 3], inner='full')",
    "dilated(n=40, window=6, dilation=3)",
    "dilated(n=40, window=6, dilation=1)",
    "global_sliding(n=40, window=2, global_positions=[0, 17])",
    "natten_2d(height=6, width=7, kernel_h=3, kernel_w=3)",
    "tree_prefix(parents=[-1, 0, 0, 1, 1, 2], prefix=4)",
    "block_diffusion(n=20, block_size=3)",
    "xlnet_two_stream(permutation=[3, 0, 4, 1, 2, 6, 5], stream='content')",
    "xlnet_two_stream(permutation=[3, 0, 4, 1, 2, 6, 5], context=2, stream='query')",
    "attention_sinks(n=30, num=3)",
    "sliding_window(n=60, left=4) | attention_sinks(n=60, num=2)",
    "document(segments=[20, 20, 20]) & sliding_window(n=60, left=5)",
    "(sliding_window(n=48, left=3) | attention_sinks(n=48, num=4)) & chunked_causal(n=48, chunk=16)",
    "dilated(n=48, window=8, dilation=4) | sliding_window(n=48, left=1)",
    "prefix_lm(n=48, prefix=5) & sliding_window(n=48, left=6, right=2)",
]

LARGE = [
    "sliding_window(n=4096, left=512) | attention_sinks(n=4096, num=4)",
    "document(segments=[1000, 7, 2000, 1089])",
    "chunked_causal(n=4096, chunk=1000)",
    "prefix_lm(n=4096, prefix=1024)",
    "sliding_window(n=4096, left=700, right=300)",
    "block_diffusion(n=2048, block_size=100)",
]


def _check(spec: str, hasse: bool) -> None:
    dense = np.asarray(from_spec(spec))
    m = from_spec(spec, form="intervals")
    assert isinstance(m, IntervalMask)
    assert (m.to_dense() == dense).all()
    powers = bitset_powers(dense)
    lstar = len(powers)
    table = PowerTable(m.with_diagonal())
    assert table.depth() == lstar
    for num_layers in range(1, lstar + 2):
        assert (table.power(num_layers).to_dense() == powers[min(num_layers, lstar) - 1]).all(), num_layers
    s = flow_summary(m, layers=tuple(range(1, lstar + 2)))
    assert s.convergence_depth == lstar
    assert [r.pairs for r in s.reach] == [int(powers[min(L, lstar) - 1].sum()) for L in range(1, lstar + 2)]
    sizes = scipy_class_sizes(dense, powers[-1])
    assert s.num_classes == sizes.size
    assert (sizes == s.class_sizes).all()
    if hasse:
        expect = HasseDiagram.from_mask(dense)
        assert s.diagram() == expect
        assert (s.depth, s.width, s.num_hasse_edges) == (expect.depth, expect.width, len(expect.edges))


@pytest.mark.parametrize("spec", SMALL)
def test_gallery_small(spec):
    _check(spec, hasse=True)


@pytest.mark.parametrize("spec", LARGE)
def test_gallery_n_4096(spec):
    _check(spec, hasse=False)


def _library_mask(draw, n: int) -> str:
    """A random library mask spec of length n (interval twin and dense constructor share it)."""
    kind = draw(st.sampled_from(["causal", "window", "prefix", "block", "chunk", "sinks", "dilated", "document"]))
    if kind == "causal":
        return f"causal(n={n})"
    if kind == "window":
        return f"sliding_window(n={n}, left={draw(st.integers(0, n))}, right={draw(st.integers(0, 3))})"
    if kind == "prefix":
        return f"prefix_lm(n={n}, prefix={draw(st.integers(0, n))})"
    if kind == "block":
        return f"block_causal(n={n}, block_size={draw(st.integers(1, n))})"
    if kind == "chunk":
        return f"chunked_causal(n={n}, chunk={draw(st.integers(1, n))})"
    if kind == "sinks":
        return f"attention_sinks(n={n}, num={draw(st.integers(0, n))})"
    if kind == "dilated":
        return f"dilated(n={n}, window={draw(st.integers(0, n))}, dilation={draw(st.integers(1, 4))})"
    cuts = sorted(set(draw(st.lists(st.integers(1, n - 1), max_size=4)))) if n > 1 else []
    lengths = [b - a for a, b in zip([0, *cuts], [*cuts, n])]
    return f"document(segments={lengths})"


@st.composite
def combined_specs(draw):
    """Two random library masks of one length, combined with ``|`` or ``&``."""
    n = draw(st.sampled_from([1, 5, 16, 33, 48]))
    left, right = _library_mask(draw, n), _library_mask(draw, n)
    return f"{left} {draw(st.sampled_from(['|', '&']))} {right}"


@settings(max_examples=150, deadline=None)
@given(combined_specs())
def test_unions_and_intersections_of_library_masks(spec):
    _check(spec, hasse=True)
