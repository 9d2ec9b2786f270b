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

- :func:`depth_bitpacked`, the convergence depth ``L*`` with ``R`` in the same pass: the
  closure above, then a breadth-first search from every node at once on bit-packed rows (level
  ``L + 1`` ORs the children's distance-``L`` frontiers, masked by what ``R`` still misses),
  on the original graph, not the condensation (distances inside a class matter), each level
  touching only row blocks that still miss bits, from children whose frontier block is not
  empty, or running from the frontier words once they are few.

- :func:`product_bitpacked`, the finite product ``A_L ⊗ … ⊗ A_1`` by ``L − 1`` rounds of the
  sparse OR propagation ``R <- A_l ⊗ R``, each round one vectorised gather and reduce
  (``O(nnz * n / 64)`` a round), stopping early once a round with the same matrix changes
  nothing.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

__all__ = ["closure_bitpacked", "product_bitpacked", "depth_bitpacked", "bitpacked_bytes", "depth_bitpacked_bytes", "num_words"]

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


def closure_bitpacked(adj: np.ndarray) -> tuple[np.ndarray, int]:
    """Reflexive-transitive closure of one bool ``(n, n)`` matrix (edge i -> j iff ``adj[i, j]``).

    Returns the closure as bool ``(n, n)`` (``R[i, j]`` iff j is reachable from i) and the
    number of batches of the propagation.
    """
    rows, cls, batches = _closure_rows(adj)
    return _unpack(rows[cls], adj.shape[0]), batches


def _closure_rows(adj: np.ndarray, edges=None) -> tuple[np.ndarray, np.ndarray, int]:
    """The body of :func:`closure_bitpacked`: ``(rows, cls, batches)`` with the closure still packed.

    ``rows[cls[i]]`` is the bit-packed row of node i (one row per class); `batches` the number
    of batches of the propagation. `edges` is ``_edges(adj)`` when the caller has it already.
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

    for b in range(len(pb) - 1):
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


def product_bitpacked(layers: list[np.ndarray]) -> tuple[np.ndarray, int]:
    """Boolean product ``A_L ⊗ … ⊗ A_1`` of bool ``(n, n)`` matrices ``layers = [A_1, …, A_L]``.

    Every ``A_l`` must have its diagonal set (a layer with the residual). When a round changes
    nothing and all remaining layers are that same matrix (the same object), the product has
    reached the closure and the remaining rounds are skipped. Returns the product as bool
    ``(n, n)`` and the number of rounds run.
    """
    n = layers[0].shape[0]
    rows = _pack(layers[0])
    rounds = 0
    cache: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for l in range(1, len(layers)):
        a = layers[l]
        if id(a) not in cache:
            indptr, _, dst = _edges(a)
            has = np.flatnonzero(np.diff(indptr))
            cache[id(a)] = (dst, indptr[has], has)
        dst, seg, has = cache[id(a)]
        rounds += 1
        if dst.size == 0:
            continue
        new = rows.copy()
        _or_segments(new, has, rows, dst, seg)
        if np.array_equal(new, rows) and all(layers[k] is a for k in range(l, len(layers))):
            break
        rows = new
    return _unpack(rows, n), rounds


# --------------------------------------------------------------------------------------------
# the convergence depth L* (with R in the same pass)
# --------------------------------------------------------------------------------------------

# Block sizes (in words) a dense level may cut the packed rows into; the whole padded row is
# always a candidate too. A dense level works on "virtual rows" (node, block) of one size.
_DEPTH_BLOCKS = (1, 2, 4, 8, 16)
# Costs (ns) for the block-size choice of a dense level: one candidate (parent block, child)
# pair, one kept pair (the child's block is not empty), one OR-ed word (a 2-core x86 CPU).
_DEPTH_PAIR_COST = 12.0
_DEPTH_KEPT_COST = 45.0
_DEPTH_WORD_COST = 0.7
# A level runs sparse (from the frontier words, through the parents of their nodes) when it has
# at most this many (frontier word, parent) pairs per packed word of the whole matrix (a dense
# level scans every word a few times), or at most _DEPTH_SPARSE_MIN pairs.
_DEPTH_SPARSE_PER_WORD = 1 / 16
_DEPTH_SPARSE_MIN = 1 << 12
# Candidate (parent block, child) pairs of a dense level, or (frontier word, parent) pairs of a
# sparse one, handled at a time: bounds the index arrays (about 60 bytes a pair, 128 MiB).
_DEPTH_CHUNK_PAIRS = 1 << 21
# Blocks of at least this many words are OR-ed by the step loop (one child of every parent per
# NumPy call), narrower ones by one gather and reduceat.
_DEPTH_STEP_MIN_BLOCK = 8
# The step loop stops once a step would OR fewer words than this; the rest goes by reduceat.
_DEPTH_STEP_MIN_WORDS = 256
# Every this many steps the step loop sets aside the parents whose missing bits are covered.
_DEPTH_CHECK_STEPS = 32
# Children are pruned (:func:`_prune_children`) when the test reads at most this many words per
# packed word plus edge of the matrix.
_DEPTH_PRUNE_PER_WORD = 4


def padded_words(n: int) -> int:
    """Words of a packed row in :func:`depth_bitpacked`: ``num_words(n)`` rounded up so that
    every block size of :data:`_DEPTH_BLOCKS` up to 16 (or the next power of two) divides it."""
    w = num_words(n)
    step = min(16, 1 << max(0, (w - 1).bit_length()))
    return -(-w // step) * step


def depth_bitpacked_bytes(n: int, nnz: int) -> int:
    """Estimated peak host memory in bytes of :func:`depth_bitpacked` (`n` nodes, `nnz` edges),
    without the optional bool ``(n, n)`` closure it can return (``n * n`` bytes more)."""
    w, wp = num_words(n), padded_words(n)
    # the closure kernel (its packed rows, edge arrays, one gathered chunk; no bool output),
    # then four packed matrices (closure, missing bits, two frontiers), two more while pruning,
    # word flags, the reversed edge lists, and the index arrays (about 64 bytes a pair) and
    # gathered words of one chunk of pairs.
    closure = 2 * n * w * 8 + 64 * nnz + 8 * min(_CHUNK_WORDS, (nnz + n) * w)
    pairs = min(_DEPTH_CHUNK_PAIRS, (nnz + n) * wp)
    gathered = 8 * min(_CHUNK_WORDS, (nnz + n) * wp)
    return closure + 6 * n * wp * 8 + 3 * n * wp + 16 * nnz + 64 * pairs + gathered


def _set_bits(rows: np.ndarray, node: np.ndarray, col: np.ndarray) -> None:
    """``rows[node[k], col[k]] |= True`` on packed rows, for pairs sorted by (node, col)."""
    if node.size == 0:
        return
    word = node * rows.shape[1] + (col >> 6)
    bits = np.left_shift(_WORD(1), (col & 63).astype(_WORD))
    first = np.flatnonzero(np.r_[True, word[1:] != word[:-1]])
    rows.reshape(-1)[word[first]] |= np.bitwise_or.reduceat(bits, first)


def _or_grouped(fv: np.ndarray, child: np.ndarray, cnt: np.ndarray, need: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """OR of the child rows of every parent, masked by the parent's row of `need`: ``(parents, rows)``.

    `child` holds rows of `fv` grouped by parent (parent ``p`` owns ``cnt[p]`` consecutive
    entries, parents in index order); ``need[p]`` is parent p's mask. Returns the parents with
    ``cnt > 0`` and, for each, ``need[p] & OR of its children's rows``.
    """
    bw = fv.shape[1]
    has = np.flatnonzero(cnt)
    start = np.cumsum(cnt) - cnt
    if bw < _DEPTH_STEP_MIN_BLOCK:  # narrow rows: one gather and reduceat (fast for narrow rows)
        out = np.zeros((has.size, bw), dtype=_WORD)
        _or_segments(out, np.arange(has.size), fv, child, start[has])
        out &= need[has]
        return has, out
    # wide rows: parents by decreasing number of children; step k ORs the k-th child of every
    # parent that has one into a prefix of `out` (contiguous, no segmented reduction). Every
    # _DEPTH_CHECK_STEPS steps, parents whose `need` is covered already are set aside: their
    # remaining children cannot change the masked result.
    order = has[np.argsort(-cnt[has], kind="stable")]
    deg = cnt[order]
    st = start[order]
    want = need[order]
    out = np.zeros((order.size, bw), dtype=_WORD)
    done = out  # rows of finished parents go here (same positions as `order`)
    pos = None  # positions in `order` of the rows still in `out` (None: all, in order)
    alive = np.searchsorted(-deg, -np.arange(int(deg[0]) if deg.size else 0), side="left")
    k = 0
    while k < alive.size:
        c = int(alive[k])
        if c * bw < _DEPTH_STEP_MIN_WORDS:
            break
        np.bitwise_or(out[:c], fv[child[st[:c] + k]], out=out[:c])
        k += 1
        if k % _DEPTH_CHECK_STEPS == 0 and k < alive.size and alive[k] * bw >= _DEPTH_STEP_MIN_WORDS:
            c = int(alive[k])
            left = (want[:c] & ~out[:c]).any(axis=1)
            if not left.all():
                if pos is None:
                    done = out.copy()
                    pos = np.arange(order.size)
                keep = np.r_[left, np.ones(out.shape[0] - c, dtype=bool)]
                done[pos[:c][~left]] = out[:c][~left]
                out, want, st, deg, pos = out[keep], want[keep], st[keep], deg[keep], pos[keep]
                alive = np.searchsorted(-deg, -np.arange(int(deg[0]) if deg.size else 0), side="left")
    if k < alive.size:  # the few parents with many children: the rest of their lists by reduceat
        c = int(alive[k])
        rest = deg[:c] - k
        seg = np.cumsum(rest) - rest
        _or_segments(out, np.arange(c), fv, child[_ranges(st[:c] + k, rest)], seg)
    if pos is not None:
        done[pos] = out
        out = done
    out &= need[order]
    return order, out


def _coarsen(flags: np.ndarray, factor: int) -> np.ndarray:
    """OR of every `factor` consecutive flags (strided ORs: fast, unlike a reduce over a short axis)."""
    out = flags[0::factor].copy()
    for j in range(1, factor):
        out |= flags[j::factor]
    return out


def _choose_block(missing: np.ndarray, frontier: np.ndarray, outdeg: np.ndarray):
    """Block size of a dense level, by estimated cost; returns ``(bw, parent_flags, child_flags)``.

    ``parent_flags`` marks the virtual rows (node, block) whose missing bits are not all zero,
    ``child_flags`` those whose frontier is not all zero (flat, ``n * (wp // bw)`` each).
    """
    n, wp = missing.shape
    sizes = [b for b in _DEPTH_BLOCKS if wp % b == 0 and b < wp] + [wp]
    mb, fb = missing.reshape(-1) != 0, frontier.reshape(-1) != 0
    levels = []
    bw = 1
    for size in sizes:
        if size > bw:  # coarsen step by step (each step doubles, the last jumps to the row)
            f = size // bw
            mb, fb = _coarsen(mb, f), _coarsen(fb, f)
            bw = size
        levels.append((bw, mb, fb))
    live = mb  # per node at the whole-row size: nodes with bits left to reach
    if not live.any():
        return wp, live, fb
    mean_deg = float(outdeg[live].mean())
    best = None
    for bw, mb, fb in levels:
        pairs = np.count_nonzero(mb) * mean_deg
        active = np.count_nonzero(fb) / fb.size
        cost = pairs * (_DEPTH_PAIR_COST + active * (_DEPTH_KEPT_COST + bw * _DEPTH_WORD_COST))
        if best is None or cost < best[0]:
            best = (cost, bw, mb, fb)
    return best[1], best[2], best[3]


def _chunks(items: np.ndarray, work: np.ndarray):
    """Split `items` into consecutive pieces of at most :data:`_DEPTH_CHUNK_PAIRS` work each
    (a piece holds at least one item)."""
    if items.size == 0:
        return
    total = np.cumsum(work)
    if int(total[-1]) <= _DEPTH_CHUNK_PAIRS:
        yield items
        return
    lo = 0
    while lo < items.size:
        base = int(total[lo - 1]) if lo else 0
        hi = max(lo + 1, int(np.searchsorted(total, base + _DEPTH_CHUNK_PAIRS, side="right")))
        yield items[lo:hi]
        lo = hi


def _dense_level(indptr, dst, outdeg, frontier, missing, nxt, written) -> int:
    """One level from the parents' side, on virtual rows (node, block) with missing bits.

    Writes ``F^(L+1)`` into `nxt` (zero before), clears those bits from `missing`, appends the
    written virtual rows to `written`. Returns the number of new nonzero frontier words.
    """
    n, wp = frontier.shape
    bw, mb, fb = _choose_block(missing, frontier, outdeg)
    nb = wp // bw
    fv, mv, nv = frontier.reshape(-1, bw), missing.reshape(-1, bw), nxt.reshape(-1, bw)
    parents = np.flatnonzero(mb)
    words = 0
    for chunk in _chunks(parents, outdeg[parents // nb]):
        node = chunk // nb
        deg = outdeg[node]
        child = dst[_ranges(indptr[node], deg)] * nb + np.repeat(chunk - node * nb, deg)
        keep = fb[child]
        child = child[keep]
        if child.size == 0:
            continue
        owner = np.repeat(np.arange(chunk.size), deg)[keep]
        local, rows = _or_grouped(fv, child, np.bincount(owner, minlength=chunk.size), mv[chunk])
        ids = chunk[local]
        nz = rows.any(axis=1)
        if not nz.all():
            ids, rows = ids[nz], rows[nz]
        if ids.size == 0:
            continue
        mv[ids] ^= rows
        nv[ids] = rows
        written.append((ids, bw))
        words += int(np.count_nonzero(rows))
    return words


def _frontier_words(nxt: np.ndarray, written) -> np.ndarray:
    """Flat ids of the nonzero words of `nxt` among the `written` virtual rows."""
    parts = []
    for ids, bw in written:
        flags = nxt.reshape(-1, bw)[ids] != 0
        r, j = np.nonzero(flags)
        parts.append(ids[r] * bw + j)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _sparse_level(tptr, tsrc, indeg, frontier, missing, nxt, fwords) -> np.ndarray:
    """One level from the children's side: each nonzero frontier word of node c is OR-ed into
    the same word of every parent of c, masked by the parent's missing bits.

    Writes ``F^(L+1)`` into `nxt` (zero before) and clears those bits from `missing`; returns
    the flat ids of the new nonzero frontier words (sorted, distinct).
    """
    wp = frontier.shape[1]
    fflat, mflat, nflat = frontier.reshape(-1), missing.reshape(-1), nxt.reshape(-1)
    c = fwords // wp
    parts = []
    for chunk in _chunks(np.arange(fwords.size), indeg[c]):
        cw, cc = fwords[chunk], c[chunk]
        deg = indeg[cc]
        par = tsrc[_ranges(tptr[cc], deg)]
        target = par * wp + np.repeat(cw - cc * wp, deg)
        vals = np.repeat(fflat[cw], deg) & mflat[target]
        keep = vals != 0
        target, vals = target[keep], vals[keep]
        if target.size:
            np.bitwise_or.at(nflat, target, vals)
            parts.append(target)
    if not parts:
        return np.zeros(0, dtype=np.int64)
    target = np.concatenate(parts)
    if target.size * 16 < nflat.size:  # distinct targets by sorting (np.unique would hash: slow)
        target.sort()
        target = target[np.r_[True, target[1:] != target[:-1]]]
    else:  # or by scanning the new words
        target = np.flatnonzero(nflat)
    mflat[target] &= ~nflat[target]
    return target


def _prune_children(indptr: np.ndarray, dst: np.ndarray, frontier: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop children that cannot add to any frontier: ``(indptr, dst)`` of the kept edges.

    With ``N[x]`` the closed out-neighbourhood of x (row x of ``A``) and S a subset of the
    children of i with ``N[d] - N[i] ⊆ OR of N[c] over c in S`` for every child d, the
    children in S alone give every frontier of i: ``B_L(d) = OR of B_(L-1)(x) over x in N[d]``;
    an x in ``N[i]`` has ``B_(L-1)(x) ⊆ B_L(i)``, any other x lies in some ``N[c]`` with c in S,
    so ``B_L(d) ⊆ B_L(i) | OR of B_L(c)``, and ``F^(L+1)_i = (OR over c in S of F^L_c) & M^L_i``
    as before (for ``L >= 1``). S here: among the children with ``N[d] - N[i]`` not empty, the
    first and the last (smallest and largest index) and every one not covered by those two.
    For windows, bands and chains, with or without global tokens, this leaves one or two
    children per node. The test reads the nonzero words of each child's row, so it runs only
    when those are few (rows of a few runs), at ``O(sum over edges of the child's nonzero
    words)``.
    """
    n, wp = frontier.shape
    nnz = dst.size
    if nnz == 0:
        return indptr, dst
    node = np.arange(n, dtype=np.int64)
    nzw = np.count_nonzero(frontier, axis=1)
    work = nzw[dst] + 1
    if int(work.sum()) > _DEPTH_PRUNE_PER_WORD * (n * wp + nnz):
        return indptr, dst
    rows = frontier.copy()
    flat = rows.reshape(-1)
    flat[node * wp + (node >> 6)] |= np.left_shift(_WORD(1), (node & 63).astype(_WORD))
    nzw = np.count_nonzero(rows, axis=1)
    words = np.flatnonzero(flat)  # nonzero words, grouped by row
    wptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(nzw, out=wptr[1:])
    outdeg = np.diff(indptr)
    src = np.repeat(node, outdeg)

    def extra(chunk, *covers):
        """Per edge of `chunk`: does ``N[d] - N[i] - N[c] (c in covers)`` have a bit?"""
        d, i = dst[chunk], src[chunk]
        cnt = nzw[d]
        word = words[_ranges(wptr[d], cnt)]
        col = word - np.repeat(d * wp, cnt)
        left = flat[word] & ~flat[np.repeat(i * wp, cnt) + col]
        for c in covers:
            left &= ~flat[np.repeat(c[i] * wp, cnt) + col]
        out = np.zeros(chunk.size, dtype=bool)
        out[np.repeat(np.arange(chunk.size), cnt)[left != 0]] = True
        return out

    edges = np.arange(nnz)
    useful = np.concatenate([extra(chunk) for chunk in _chunks(edges, work)])
    # the first and the last useful child of every node (edges are sorted by (node, child))
    lo = np.full(n, -1, dtype=np.int64)
    hi = np.full(n, -1, dtype=np.int64)
    e = np.flatnonzero(useful)
    if e.size == 0:  # no child can add anything: L* = 1
        return np.zeros(n + 1, dtype=np.int64), dst[:0]
    owner = src[e]
    step = owner[1:] != owner[:-1]
    first, last = e[np.r_[True, step]], e[np.r_[step, True]]
    lo[src[first]] = dst[first]
    hi[src[last]] = dst[last]
    lo_c, hi_c = np.maximum(lo, 0), np.maximum(hi, 0)
    keep = np.zeros(nnz, dtype=bool)
    for chunk in _chunks(e, work[e]):
        keep[chunk] = extra(chunk, lo_c, hi_c)
    keep[e] |= (dst[e] == lo[src[e]]) | (dst[e] == hi[src[e]])
    if keep.all():
        return indptr, dst
    new_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src[keep], minlength=n), out=new_ptr[1:])
    return new_ptr, dst[keep]


def _depth_levels(indptr: np.ndarray, dst: np.ndarray, frontier: np.ndarray, missing: np.ndarray) -> int:
    """Frontier propagation from every node at once, level by level; returns ``L*``.

    `frontier` holds ``F^1`` (the nodes at distance 1: the off-diagonal edges), `missing` the
    bits of ``R`` farther than 1; both packed ``(n, wp)``, both overwritten. Level
    ``L -> L + 1``: ``F^(L+1)_i = (OR over children c of F^L_c) & M^L_i``,
    ``M^(L+1)_i = M^L_i & ~F^(L+1)_i``. A level runs dense (:func:`_dense_level`, from the
    parents' side) or sparse (:func:`_sparse_level`, from the frontier words) by size. The
    first level without new bits ends it: ``L*`` is the last level with a non-empty frontier.
    """
    n, wp = frontier.shape
    outdeg = np.diff(indptr)
    nxt = np.zeros_like(frontier)
    reverse = None
    written: list = []  # virtual rows (ids, block size) of `nxt` written this level
    old: list = [(None, None)]  # those of `frontier` (None: anywhere)
    depth = 1
    sparse_max = max(_DEPTH_SPARSE_MIN, int(n * wp * _DEPTH_SPARSE_PER_WORD))
    mean_indeg = float(indptr[-1]) / max(1, n)

    def sparse_enough(fw: np.ndarray) -> bool:
        """Few enough (frontier word, parent) pairs for a sparse level (exact once the
        reversed edges exist, else from the mean in-degree)."""
        if reverse is None:
            return bool(fw.size * mean_indeg <= sparse_max)
        return int(reverse[2][fw // wp].sum()) <= sparse_max

    # flat ids of the nonzero words of `frontier` when the next level runs sparse, else None
    fwords = None
    if indptr[-1] * mean_indeg <= sparse_max:
        fwords = np.flatnonzero(frontier.reshape(-1))
    while True:
        if fwords is not None:
            if reverse is None:
                tptr, tsrc = _csr_from_pairs(dst, np.repeat(np.arange(n, dtype=np.int64), outdeg), n)
                reverse = (tptr, tsrc, np.diff(tptr))
            fwords = _sparse_level(*reverse, frontier, missing, nxt, fwords)
            written.append((fwords, 1))
            grew = fwords.size > 0
            if not sparse_enough(fwords):
                fwords = None  # the frontier has grown: back to dense levels
        else:
            words = _dense_level(indptr, dst, outdeg, frontier, missing, nxt, written)
            grew = words > 0
            fwords = None
            if grew and words * mean_indeg <= 4 * sparse_max:
                fwords = _frontier_words(nxt, written)
                if not sparse_enough(fwords):
                    fwords = None
        if not grew:
            return depth
        depth += 1
        # the new frontier becomes current; the old one is cleared where it may be nonzero
        for ids, bw in old:
            if ids is None:
                frontier[...] = 0
            else:
                frontier.reshape(-1, bw)[ids] = 0
        frontier, nxt = nxt, frontier
        old, written = written, []


def depth_bitpacked(adj: np.ndarray, *, return_closure: bool = True) -> tuple[int, np.ndarray | None]:
    """Convergence depth ``L*`` and closure ``R`` of one bool ``(n, n)`` adjacency (diagonal set).

    ``L*`` is the smallest ``L`` with ``A^L = R``: the largest shortest-path length over the
    pairs (i, j), i ≠ j, with j reachable from i, or 1 if there are none (spec hasse.md §1.3).

    1. ``R``, packed, by :func:`closure_bitpacked`'s kernel (condensation, topological order);
    2. a breadth-first search from every node at once on the original graph (not on the
       condensation: distances inside a strongly connected class are not 1 in general), on
       bit-packed rows: ``F^L_i`` = the nodes at distance exactly ``L`` from i, and
       ``M^L_i = R_i & ~({i} | F^1_i | … | F^L_i)`` the nodes still to be reached. Exactly
       ``F^(L+1)_i = (OR over children c of F^L_c) & M^L_i``: a node at distance L + 1 from i
       is at distance L from some child, a node at distance L from a child is within L + 1 of
       i, and the nodes within L of i are not in ``M^L_i``. While some ``M^L`` is not empty,
       some pair is at distance exactly ``L + 1`` (a prefix of a shortest path), so the first
       level without new bits is ``L* + 1`` (``L* = 1`` when ``F^2`` is empty).
    3. Each level touches only what can change: a *dense* level works from the parents' side
       on virtual rows (node, block of words) whose missing block is not empty, OR-ing only
       children whose frontier block is not empty; the block size (1 word to the whole row) is
       chosen by a cost estimate. Once the frontier has few words, a *sparse* level pushes each
       nonzero frontier word into the same word of each parent instead, without scanning the
       matrix. Before the levels, children that cannot add anything beyond two of their
       siblings are dropped (:func:`_prune_children`; exact, and it leaves one or two children
       per node for windows, bands and chains).

    Cost: the closure, then per dense level a few scans of the ``n · n / 64`` packed words and
    the OR-ed words (about ``nnz · n / 64`` on the early levels of a random sparse mask, far
    fewer later), per sparse level ``O(pairs log pairs)``.

    Returns ``(L*, R)``: ``R`` as bool ``(n, n)``, or None with ``return_closure=False``.
    """
    n = adj.shape[0]
    edges = _edges(adj)
    indptr, src, dst = edges
    crow, cls, _ = _closure_rows(adj, edges)
    w, wp = num_words(n), padded_words(n)
    closure = np.zeros((n, wp), dtype=_WORD)
    closure[:, :w] = crow[cls]
    del crow
    frontier = np.zeros((n, wp), dtype=_WORD)
    _set_bits(frontier, src, dst)  # F^1: the off-diagonal edges
    node = np.arange(n, dtype=np.int64)
    missing = closure & ~frontier
    missing.reshape(-1)[node * wp + (node >> 6)] &= ~np.left_shift(_WORD(1), (node & 63).astype(_WORD))
    depth = _depth_levels(*_prune_children(indptr, dst, frontier), frontier, missing)
    return depth, (_unpack(closure[:, :w], n) if return_closure else None)
