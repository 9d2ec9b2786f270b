"""One level of the bit-packed depth search (private; used by :mod:`hassejax.order._bitpacked_depth`).

Packed rows as in :mod:`hassejax.order._bitpacked` (bit ``j % 64`` of word ``j // 64`` of row
``i`` is set iff ``j`` is in the row). A level ``L -> L + 1`` computes
``F^(L+1)_i = (OR over children c of F^L_c) & M^L_i``: densely from the parents' side on
virtual rows (node, block of words) with a block size chosen by a cost estimate
(:func:`_dense_level`), or sparsely from the nonzero frontier words (:func:`_sparse_level`).
:func:`_prune_children` drops children that cannot add anything beyond two of their siblings.
The tuning constants below are calibrated on a 2-core x86 CPU.
"""

from __future__ import annotations

from typing import no_type_check

import numpy as np

from ._bitpacked import _WORD, _or_segments, _ranges

# Block sizes (in words) a dense level may cut the packed rows into; the whole padded row is
# always a candidate too. A dense level works on "virtual rows" (node, block) of one size.
_DEPTH_BLOCKS = (1, 2, 4, 8, 16)
# Costs (ns) for the block-size choice of a dense level: one candidate (parent block, child)
# pair, one kept pair (the child's block is not empty), one OR-ed word (a 2-core x86 CPU).
_DEPTH_PAIR_COST = 12.0
_DEPTH_KEPT_COST = 45.0
_DEPTH_WORD_COST = 0.7
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
# Greedy rounds of :func:`_prune_children` after the first and last useful children: each makes the
# uncovered child with the most bits left a cover (a 2-D window's other two corners: two rounds); the
# last round only tests, and what is still uncovered is kept.
_DEPTH_PRUNE_ROUNDS = 4
# The greedy rounds stop (keeping every uncovered child) once a round leaves more than this share of the
# children the test before left uncovered: on random masks a cover covers about itself alone.
_DEPTH_PRUNE_GAIN = 0.75


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
    _n, wp = missing.shape
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
    _n, wp = frontier.shape
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
    first and the last (smallest and largest index); then up to :data:`_DEPTH_PRUNE_ROUNDS` − 1
    greedy rounds, each adding for every node the child with the most bits not covered yet; the
    children still not covered after them are kept too. For windows, bands and chains, with or
    without global tokens, this leaves one or two children per node; for a 2-D neighbourhood the
    four corners (two greedy rounds; the first two alone left 45 of 48 children of a 7 x 7 one).
    The test reads the nonzero words of each child's row, so it runs only when those are few
    (rows of a few runs), at ``O(sum over edges of the child's nonzero words)`` a round (times
    the covers so far).
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

    @no_type_check  # a closure made per call: not re-decorated by the test suite's type-check hook each time (see pyproject)
    def extra(chunk, *covers, count=False):
        """Per edge of `chunk`: does ``N[d] - N[i] - N[c] (c in covers)`` have a bit? (With `count`: how many.)"""
        d, i = dst[chunk], src[chunk]
        cnt = nzw[d]
        word = words[_ranges(wptr[d], cnt)]
        col = word - np.repeat(d * wp, cnt)
        left = flat[word] & ~flat[np.repeat(i * wp, cnt) + col]
        for c in covers:
            left &= ~flat[np.repeat(c[i] * wp, cnt) + col]
        owner = np.repeat(np.arange(chunk.size), cnt)
        if count:
            return np.bincount(owner, weights=np.bitwise_count(left), minlength=chunk.size)
        out = np.zeros(chunk.size, dtype=bool)
        out[owner[left != 0]] = True
        return out

    edges = np.arange(nnz)
    useful = np.concatenate([extra(chunk) for chunk in _chunks(edges, work)])
    # the first and the last useful child of every node (edges are sorted by (node, child))
    e = np.flatnonzero(useful)
    if e.size == 0:  # no child can add anything: L* = 1
        return np.zeros(n + 1, dtype=np.int64), dst[:0]
    # rounds: the first and the last child still uncovered become covers too (a 2-D window's four
    # corners after a few rounds, where the first round's two leave most children uncovered)
    owner = src[e]
    step = owner[1:] != owner[:-1]
    first, last = e[np.r_[True, step]], e[np.r_[step, True]]
    lo = np.full(n, -1, dtype=np.int64)
    hi = np.full(n, -1, dtype=np.int64)
    lo[src[first]] = dst[first]
    hi[src[last]] = dst[last]
    chosen = [lo, hi]
    left = e[(dst[e] != lo[src[e]]) & (dst[e] != hi[src[e]])]
    tested = 0  # uncovered children after the previous test
    for rnd in range(_DEPTH_PRUNE_ROUNDS):
        if left.size == 0:
            break
        covers = [np.maximum(c, 0) for c in chosen]  # -1 (no cover) only where no edge is tested
        bits = np.concatenate([extra(chunk, *covers, count=True) for chunk in _chunks(left, work[left])])
        left, bits = left[bits > 0], bits[bits > 0]
        if left.size == 0 or rnd == _DEPTH_PRUNE_ROUNDS - 1 or (rnd and left.size > _DEPTH_PRUNE_GAIN * tested):
            break  # done, or the last round, or the greedy cover did not pay (random masks): keep the rest
        tested = left.size
        # greedy cover: the uncovered child of every node with the most bits left becomes a cover
        owner = src[left]
        starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
        best = np.maximum.reduceat(bits, starts)
        pick = np.flatnonzero(bits == np.repeat(best, np.diff(np.r_[starts, left.size])))
        pick = pick[np.r_[True, owner[pick[1:]] != owner[pick[:-1]]]]  # the first of equal ones
        cover = np.full(n, -1, dtype=np.int64)
        cover[owner[pick]] = dst[left[pick]]
        chosen.append(cover)
        left = left[dst[left] != cover[owner]]
    keep = np.zeros(nnz, dtype=bool)
    keep[left] = True
    for c in chosen:
        keep[e] |= dst[e] == c[src[e]]
    if keep.all():
        return indptr, dst
    new_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src[keep], minlength=n), out=new_ptr[1:])
    return new_ptr, dst[keep]
