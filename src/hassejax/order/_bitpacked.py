"""Exact bit-packed reachability on the host (private; spec hasse.md §1, DESIGN.md "Principles").

A row of the reachability matrix is stored as a bit set of ``ceil(n / 64)`` ``uint64`` words:
bit ``j`` of row ``i`` (bit ``j % 64`` of word ``j // 64``) is set iff ``R[i, j]``. The graph has
an edge ``i -> j`` for every ``A[i, j]`` (query ``i`` attends to key ``j``; information flows
from ``j`` to ``i``), so ``R[i, j]`` iff ``j`` is reachable from ``i``.

Three kernels, all exact, all on NumPy arrays (the public wrappers are in
:mod:`hassejax.order.closure`):

- :func:`closure_bitpacked`, the limit ``R``:

  1. strongly connected components (the classes of spec §1.5) with
     :func:`scipy.sparse.csgraph.connected_components` (``connection="strong"``);
  2. a topological order of the condensation, children (attended classes) before parents:
     the index order when every edge points to a smaller (or every edge to a larger) index,
     which covers causal-type masks and SciPy's component labels; otherwise Kahn's algorithm
     by generations. The order is only trusted after checking every edge against it;
  3. the order is cut into *batches*: maximal runs of consecutive classes none of which
     attends to another of the same run;
  4. rows are propagated batch by batch, ``row(c) = self bits | OR of row(d) over the classes
     d that c attends to``, each batch in one vectorised gather and
     :func:`numpy.bitwise_or.reduceat`. Where a batch has many edges, a child ``d`` whose
     representative bit is already in the row of ``c``'s latest child (in topological order)
     is skipped, since then ``row(d) ⊆ row(latest child)``; for causal-type masks this keeps
     about one edge per class.

  Cost: ``O(nnz)`` index work plus ``O(kept edges * n / 64)`` word operations and a small
  constant per batch.

- :func:`~hassejax.order._bitpacked_depth.depth_bitpacked` (in
  :mod:`hassejax.order._bitpacked_depth`), the convergence depth ``L*`` with ``R`` in the same
  pass: the closure above, then a breadth-first search from every node at once on bit-packed
  rows (level ``L + 1`` ORs the children's distance-``L`` frontiers, masked by what ``R``
  still misses), on the original graph, not the condensation (distances inside a class
  matter), each level touching only row blocks that still miss bits, from children whose
  frontier block is not empty, or running from the frontier words once they are few.

- :func:`product_bitpacked`, the finite product ``A_L ⊗ … ⊗ A_1`` of per-layer matrices by ``L − 1``
  rounds of the sparse OR propagation ``R <- A_l ⊗ R``, each round one vectorised gather and reduce
  (``O(nnz * n / 64)`` a round), stopping early once a round with the same matrix changes
  nothing. A power ``A^L`` of one matrix does not take it: it is the depth search stopped at
  level ``L`` (:func:`~hassejax.order._bitpacked_depth.power_bitpacked`), whose levels touch only
  the frontiers (``L`` rounds here cost about ``L`` closures on long windows).
"""

from __future__ import annotations

from typing import no_type_check

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ._progress import NO_BAR, Bar

__all__ = ["closure_bitpacked", "product_bitpacked", "bitpacked_bytes", "num_words"]


_WORD = np.uint64
_BITS = 64
# Prune redundant children only in batches with at least this many gathered words: below it the
# extra NumPy calls cost more than they save.
_PRUNE_MIN_WORDS = 1 << 14
# Gather at most this many words (32 MiB) at a time, whatever the mask.
_CHUNK_WORDS = 1 << 22


def num_words(n: int) -> int:
    """Number of 64-bit words of one bit-packed row of length `n`."""
    return -(-n // _BITS)


def bitpacked_bytes(n: int, nnz: int) -> int:
    """Estimated peak host memory in bytes of one bit-packed closure or product (`n` nodes, `nnz` edges)."""
    w = num_words(n)
    # two sets of packed rows, the bool result and its uint8 staging copy, the input copy,
    # edge index arrays (a few int64 per edge) and one chunk of gathered rows.
    return 2 * n * w * 8 + 3 * n * n + 64 * nnz + _CHUNK_WORDS * 8


def bitpacked_route_bytes(n: int, nnz: int, batch: int = 1) -> int:
    """Peak host bytes of the bit-packed route for `batch` masks: one closure (:func:`bitpacked_bytes`) and each
    mask's bool ``(n, n)`` input and result."""
    return bitpacked_bytes(n, nnz) + 2 * batch * n * n


def _edges(adj: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR of the off-diagonal edges of a bool (n, n) matrix: ``indptr, src, dst`` (sorted by src).

    One flat ``flatnonzero`` (much faster than 2-D ``nonzero`` on dense Boolean arrays), no
    integer division, no copy of the matrix.
    """
    n = adj.shape[0]
    counts = np.count_nonzero(adj, axis=1)
    src = np.repeat(np.arange(n, dtype=np.int64), counts)
    dst = np.flatnonzero(adj) - src * n
    keep = dst != src
    src, dst = src[keep], dst[keep]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts - np.diagonal(adj), out=indptr[1:])
    return indptr, src, dst


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + l)`` over the pairs, vectorised."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    return np.arange(total, dtype=np.int64) + np.repeat(starts - (ends - lengths), lengths)


def _csr_from_pairs(src: np.ndarray, dst: np.ndarray, num: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR ``(indptr, indices)`` of the edge list, sorted by source, duplicates removed."""
    g = sp.coo_array((np.ones(src.shape[0], dtype=bool), (src, dst)), shape=(num, num)).tocsr()
    g.sum_duplicates()
    return g.indptr.astype(np.int64), g.indices.astype(np.int64)


def _generations(indptr: np.ndarray, indices: np.ndarray, num: int) -> np.ndarray:
    """Topological generation of every node of a DAG in CSR form (edges c -> d: c attends d).

    Generation 0 holds the nodes without out-edges; every other node is one generation above
    the highest of its out-neighbours (Kahn's algorithm, level by level, on the reversed edges).
    """
    outdeg = np.diff(indptr)
    src = np.repeat(np.arange(num, dtype=np.int64), outdeg)
    pptr, parents = _csr_from_pairs(indices, src, num)
    outdeg = outdeg.copy()
    gen = np.full(num, -1, dtype=np.int64)
    frontier = np.flatnonzero(outdeg == 0)
    level = 0
    while frontier.size:
        gen[frontier] = level
        par = parents[_ranges(pptr[frontier], pptr[frontier + 1] - pptr[frontier])]
        np.subtract.at(outdeg, par, 1)
        frontier = np.unique(par[outdeg[par] == 0])
        level += 1
    if (gen < 0).any():  # pragma: no cover - a condensation is acyclic
        raise RuntimeError("internal error: the condensation of the mask graph has a cycle")
    return gen


def _runs(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Cut a topologically ordered DAG (children have smaller ids) into maximal runs.

    A run ``[s, t)`` holds consecutive ids none of which has a child inside the run. Returns
    the run boundaries ``[0, …, num]``.
    """
    num = indptr.shape[0] - 1
    latest = np.full(num, -1, dtype=np.int64)
    has = np.flatnonzero(np.diff(indptr))
    if has.size:
        latest[has] = np.maximum.reduceat(indices, indptr[has])
    bounds = [0]
    start = 0
    for t, child in enumerate(latest.tolist()):
        if child >= start:
            start = t
            bounds.append(t)
    bounds.append(num)
    return np.asarray(bounds, dtype=np.int64)


def _topological_condensation(adj: np.ndarray, edges=None):
    """Classes, and the condensation relabelled in topological order (children first).

    Returns ``(cls, indptr, indices, bounds, rep)``: ``cls[i]`` the topological position of the
    class of node i; the condensation as CSR over positions (every child position is smaller
    than its parent's); batch boundaries over positions; ``rep[p]`` one member node of the class
    at position p. `edges` is ``_edges(adj)`` when the caller has it already.
    """
    n = adj.shape[0]
    indptr, src, dst = _edges(adj) if edges is None else edges
    graph = sp.csr_array((np.ones(dst.shape[0], dtype=np.int8), dst, indptr), shape=(n, n))
    num, labels = connected_components(graph, directed=True, connection="strong")
    labels = labels.astype(np.int64)

    if num == n and bool(np.all(dst < src)):
        # A DAG already in topological order (lower-triangular: causal-type masks).
        cls = np.arange(n, dtype=np.int64)
        cptr, cind = indptr, dst
    else:
        cs, cd = labels[src], labels[dst]
        keep = cs != cd
        cs, cd = cs[keep], cd[keep]
        if bool(np.all(cd < cs)):
            cls = labels
        elif bool(np.all(cd > cs)):
            cls = num - 1 - labels
        else:  # fall back on Kahn's generations
            cptr, cind = _csr_from_pairs(cs, cd, num)
            gen = _generations(cptr, cind, num)
            order = np.argsort(gen, kind="stable")
            pos = np.empty(num, dtype=np.int64)
            pos[order] = np.arange(num)
            cls = pos[labels]
        cptr, cind = _csr_from_pairs(cls[src[keep]], cls[dst[keep]], num)
    rep = np.empty(num, dtype=np.int64)
    rep[cls] = np.arange(n)
    return cls, cptr, cind, _runs(cptr, cind), rep


@no_type_check  # hot private helper: no runtime type check under the test suite's hook (see pyproject)
def _or_segments(out: np.ndarray, target: np.ndarray, rows: np.ndarray, ch: np.ndarray, seg: np.ndarray) -> None:
    """``out[target[p]] |= OR of rows[ch[seg[p] : seg[p + 1]]]`` for every p (last segment to the end).

    Segments must be non-empty, targets distinct, and `out` rows never among the gathered
    ones. Gathers at most ``_CHUNK_WORDS`` words at a time (a segment may straddle chunks:
    its partial ORs accumulate).
    """
    m, w = ch.shape[0], rows.shape[1]
    per = max(1, _CHUNK_WORDS // w)
    if m <= per:
        out[target] |= np.bitwise_or.reduceat(rows[ch], seg, axis=0)
        return
    ends = np.append(seg[1:], m)
    for c0 in range(0, m, per):
        c1 = min(m, c0 + per)
        lo = int(np.searchsorted(ends, c0, side="right"))
        hi = int(np.searchsorted(seg, c1, side="left"))
        starts = np.maximum(seg[lo:hi], c0) - c0
        out[target[lo:hi]] |= np.bitwise_or.reduceat(rows[ch[c0:c1]], starts, axis=0)


def _unpack(rows: np.ndarray, n: int) -> np.ndarray:
    """Bit-packed rows ``(m, W)`` uint64 -> bool ``(m, n)``; bit j of a row is column j."""
    as_bytes = np.ascontiguousarray(rows).view(np.uint8)
    return np.unpackbits(as_bytes, axis=1, count=n, bitorder="little").view(np.bool_)


def _pack(dense: np.ndarray) -> np.ndarray:
    """Bool ``(m, n)`` -> bit-packed rows ``(m, W)`` uint64 (inverse of :func:`_unpack`)."""
    m, n = dense.shape
    out = np.zeros((m, num_words(n) * 8), dtype=np.uint8)
    out[:, : -(-n // 8)] = np.packbits(dense, axis=1, bitorder="little")
    return out.view(_WORD)


def closure_bitpacked(adj: np.ndarray, bar: Bar = NO_BAR) -> tuple[np.ndarray, int]:
    """Reflexive-transitive closure of one bool ``(n, n)`` matrix (edge i -> j iff ``adj[i, j]``).

    Returns the closure as bool ``(n, n)`` (``R[i, j]`` iff j is reachable from i) and the
    number of batches of the propagation; `bar` counts the batches.
    """
    rows, cls, batches = _closure_rows(adj, bar=bar)
    return _unpack(rows[cls], adj.shape[0]), batches


def _closure_rows(adj: np.ndarray, edges=None, bar: Bar = NO_BAR) -> tuple[np.ndarray, np.ndarray, int]:
    """The body of :func:`closure_bitpacked`: ``(rows, cls, batches)`` with the closure still packed.

    ``rows[cls[i]]`` is the bit-packed row of node i (one row per class); `batches` the number
    of batches of the propagation. `edges` is ``_edges(adj)`` when the caller has it already;
    `bar` counts the batches.
    """
    n = adj.shape[0]
    cls, cptr, cind, bounds, rep = _topological_condensation(adj, edges)
    num = cptr.shape[0] - 1
    w = num_words(n)

    rows = np.zeros((num, w), dtype=_WORD)
    node = np.arange(n)
    np.bitwise_or.at(rows, (cls, node // _BITS), np.left_shift(_WORD(1), (node % _BITS).astype(_WORD)))
    rep_word = rep // _BITS
    rep_bit = (rep % _BITS).astype(_WORD)
    one = _WORD(1)

    # Per class with children (`parent`, in position order): where its children start in `cind`
    # and its latest child (children are sorted by position in each CSR row).
    lengths = np.diff(cptr)
    parent = np.flatnonzero(lengths)
    start = cptr[parent]
    latest_all = cind[cptr[parent + 1] - 1]
    # batch b holds parents parent[p0:p1] and edges cind[e0:e1]
    pb = np.searchsorted(parent, bounds).tolist()
    eb = cptr[bounds].tolist()

    bar.add_total(len(pb) - 1)
    bar.begin()
    for b in range(len(pb) - 1):
        bar.update()  # counts the batches begun (each is short)
        p0, p1, e0, e1 = pb[b], pb[b + 1], eb[b], eb[b + 1]
        if p0 == p1:
            continue
        target = parent[p0:p1]
        seg = start[p0:p1] - e0
        ch = cind[e0:e1]
        if (e1 - e0) * w < _PRUNE_MIN_WORDS:
            _or_segments(rows, target, rows, ch, seg)
            continue
        # Skip a child whose representative is already in the row of the latest child.
        latest = latest_all[p0:p1]
        rows[target] |= rows[latest]
        owner = np.repeat(np.arange(p1 - p0), lengths[target])
        covered = (rows[latest[owner], rep_word[ch]] >> rep_bit[ch]) & one
        keep = np.flatnonzero(covered == 0)
        if keep.size:
            own = owner[keep]
            first = np.flatnonzero(np.r_[True, own[1:] != own[:-1]])
            _or_segments(rows, target[own[first]], rows, ch[keep], first)

    return rows, cls, bounds.shape[0] - 1


def product_bitpacked(layers: list[np.ndarray], bar: Bar = NO_BAR) -> tuple[np.ndarray, int]:
    """Boolean product ``A_L ⊗ … ⊗ A_1`` of bool ``(n, n)`` matrices ``layers = [A_1, …, A_L]``.

    Every ``A_l`` must have its diagonal set (a layer with the residual). When a round changes
    nothing and all remaining layers are that same matrix (the same object), the product has
    reached the closure and the remaining rounds are skipped. Returns the product as bool
    ``(n, n)`` and the number of rounds run; `bar` counts the rounds.
    """
    n = layers[0].shape[0]
    rows = _pack(layers[0])
    rounds = 0
    cache: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    bar.add_total(len(layers) - 1)
    for l in range(1, len(layers)):
        bar.begin()
        a = layers[l]
        if id(a) not in cache:
            indptr, _, dst = _edges(a)
            has = np.flatnonzero(np.diff(indptr))
            cache[id(a)] = (dst, indptr[has], has)
        dst, seg, has = cache[id(a)]
        rounds += 1
        if dst.size == 0:
            bar.update()
            continue
        new = rows.copy()
        _or_segments(new, has, rows, dst, seg)
        bar.update()
        if np.array_equal(new, rows) and all(layers[k] is a for k in range(l, len(layers))):
            bar.note("limit reached")
            break
        rows = new
    return _unpack(rows, n), rounds
