"""Classes, quotient partial order, covering relation, depth and width (spec hasse.md §1.4–1.7).

From the reachability closure `R` of a mask (``R[i, j]`` True iff output `i` can depend on
input `j`, see :func:`hassejax.order.reachability`):

- the **preorder** `j ⪯ i ⟺ R[i, j]` (reflexive, transitive, generally not antisymmetric);
- its **classes** `i ~ j ⟺ R[i, j] and R[j, i]` (the strongly connected components of the
  mask graph), numbered in a topological order by :func:`classes`;
- the **quotient partial order** `[j] ≤ [i] ⟺ R[i, j]` on the classes (:func:`quotient_order`);
- its **covering relation** (the Hasse diagram, the transitive reduction),
  `S & ~(S ⊗ S)` with `S` the strict order (:func:`cover_matrix`);
- its **depth** (number of classes in a longest chain, :func:`longest_chain`) and **width**
  (size of a largest antichain, by Dilworth's theorem, :func:`width`).

Matrix convention everywhere (the same as for masks and `R`): **row = the later / upper
element, column = the earlier / lower one**. ``order[a, b]`` is True iff `[b] ≤ [a]`;
``cover[a, b]`` is True iff `[b] ⋖ [a]` (`a` covers `b`; information flows from `b` to `a`).

The functions here run on the host level (they return Python ints or raise on bad input),
each over one jitted XLA computation with fixed shapes; the heavy work (the `O(n³)` or
`O(C³)` Boolean products) is a float32 matmul with a threshold, exact for 0/1 operands.

Source: C. Li, H. Guo, "Hasse Diagrams for Attention: A Partial Order Framework for
Designing Transformer Masks", arXiv:2606.09951 (2026) (paper); spec hasse.md §1.4–1.7 and
§3 (last paragraph, width and depth) (derived where stated).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import scipy.sparse
import scipy.sparse.csgraph
from jaxtyping import Array, ArrayLike, Bool, Int

from .._checks import as_mask, check_memory
from ..errors import MaskError

__all__ = ["classes", "quotient_order", "cover_matrix", "longest_chain", "width"]


def _memory(name: str, what: str, matrices: int):
    """A memory check for :func:`as_mask`: about `matrices` bytes per entry of the ``(n, n)``
    input (its copies and the kernel's arrays), from the shape alone, before any copy."""

    def check(shape: tuple[int, ...]) -> None:
        n = shape[-1]
        check_memory(matrices * n * n, f"{what} of n = {n} elements (about {matrices} bytes an entry)", name)

    return check


def _bool_matmul(x, y):
    # Boolean product (X ⊗ Y)[i, j] = OR_k X[i, k] AND Y[k, j] as a float32 matmul with a
    # threshold: exact, since the sums are integers <= n < 2**24.
    return jnp.matmul(x.astype(jnp.float32), y.astype(jnp.float32)) > 0.5


# ------------------------------------------------------------------- shape buckets
# Small inputs are padded to a few bucket sizes so that varying n or C does not recompile
# every jitted core (compilation dominates below a few hundred positions). Paddings are
# chosen so that they change no result: an identity border adds isolated elements to a
# partial order; a "reaches everything" border adds one extra top class to a preorder. Large
# inputs keep their exact shapes (no host round trip, no wasted flops).

_PAD_LIMIT = 256


def _bucket(k: int) -> int:
    if k > _PAD_LIMIT:
        return k
    if k <= 64:
        return max(8, 1 << (k - 1).bit_length())  # 8, 16, 32, 64
    return -(-k // 32) * 32  # 96, 128, ..., 256


def _pad_square(x, size: int, fill: str) -> jax.Array:
    """Pad a small square Boolean matrix to `size`: ``fill`` is "zeros", "identity" or "top"."""
    k = x.shape[-1]
    if size == k:
        return jnp.asarray(x)
    out = np.zeros((size, size), dtype=bool)
    out[:k, :k] = np.asarray(x)
    if fill == "identity":
        out[np.arange(k, size), np.arange(k, size)] = True
    elif fill == "top":
        out[k:, :] = True
    return jnp.asarray(out)


def _unpad(x, k: int) -> jax.Array:
    if x.shape[-1] == k:
        return x
    a = np.asarray(x)
    return jnp.asarray(a[:k, :k] if a.ndim == 2 else a[:k])


# ----------------------------------------------------------------------------- checks


def _preorder_violations(r):
    """Counts of reflexivity and transitivity violations of a square Boolean relation."""
    not_reflexive = jnp.sum(~jnp.diagonal(r))
    not_transitive = jnp.sum(_bool_matmul(r, r) & ~r)
    return not_reflexive, not_transitive


def _first(mask2d: np.ndarray) -> tuple[int, int]:
    i, j = np.argwhere(mask2d)[0]
    return int(i), int(j)


_PREORDER = "a preorder (reflexive and transitive), e.g. the output of `reachability(mask)` with num_layers=None"
_PARTIAL_ORDER = "a partial order (reflexive, antisymmetric, transitive), e.g. the output of `quotient_order`"


def _raise_not_reflexive(r: np.ndarray, name: str, what: str) -> None:
    bad = np.flatnonzero(~np.diagonal(r))
    raise MaskError(
        f"`{name}` must be {what}; got a relation that is not reflexive: "
        f"{name}[{bad[0]}, {bad[0]}] is False ({bad.size} diagonal entr{'y' if bad.size == 1 else 'ies'} False)."
    )


def _raise_not_transitive(r: np.ndarray, name: str, what: str) -> None:
    f = r.astype(np.float32)
    i, k = _first(((f @ f) > 0.5) & ~r)  # BLAS float product: exact for 0/1 entries
    j = int(np.flatnonzero(r[i] & r[:, k])[0])
    hint = " (a finite-depth R^(L) with L below the convergence depth is not transitive)" if what == _PREORDER else ""
    raise MaskError(
        f"`{name}` must be {what}; got a relation that is not transitive: "
        f"{name}[{i}, {j}] and {name}[{j}, {k}] are True but {name}[{i}, {k}] is False{hint}."
    )


def _check_preorder(r: jax.Array, violations, name: str) -> None:
    not_reflexive, not_transitive = violations
    if int(not_reflexive):
        _raise_not_reflexive(np.asarray(r), name, _PREORDER)
    if int(not_transitive):
        _raise_not_transitive(np.asarray(r), name, _PREORDER)


@jax.jit
def _order_parts(order):
    """Strict order `S`, the covers `S & ~(S ⊗ S)`, and the partial-order violation counts."""
    c = order.shape[-1]
    eye = jnp.eye(c, dtype=bool)
    s = order & ~eye
    ss = _bool_matmul(s, s)
    not_reflexive = jnp.sum(~jnp.diagonal(order))
    not_antisymmetric = jnp.sum(s & s.T) // 2
    not_transitive = jnp.sum(ss & ~s)
    return s, s & ~ss, not_reflexive, not_antisymmetric, not_transitive


def _check_partial_order(order: jax.Array, nr, na, nt, name: str) -> None:
    if int(nr):
        _raise_not_reflexive(np.asarray(order), name, _PARTIAL_ORDER)
    if int(na):
        o = np.asarray(order)
        a, b = _first(o & o.T & ~np.eye(o.shape[0], dtype=bool))
        raise MaskError(
            f"`{name}` must be {_PARTIAL_ORDER}; got a relation that is not antisymmetric: {name}[{a}, {b}] and "
            f"{name}[{b}, {a}] are both True ({int(na)} such pair(s)). Pass the quotient by `classes`, "
            "not the preorder R itself."
        )
    if int(nt):
        _raise_not_transitive(np.asarray(order), name, _PARTIAL_ORDER)


# ---------------------------------------------------------------------------- classes


@functools.partial(jax.jit, static_argnames="check")
def _classes_core(r, check):
    n = r.shape[-1]
    violations = _preorder_violations(r) if check else (jnp.zeros((), jnp.int32),) * 2
    mutual = r & r.T
    # Smallest member of each position's class (the diagonal is set, so argmax finds one).
    rep = jnp.argmax(mutual, axis=1).astype(jnp.int32)
    # Size of the down-set (reach set) of each position. If [j] < [i], the reach set of j is a
    # strict subset of that of i, so sorting by (count, smallest member) is topological.
    count = jnp.sum(r, axis=1, dtype=jnp.int32)
    perm = jnp.lexsort((rep, count))
    rep_sorted = rep[perm]
    starts = jnp.concatenate([jnp.ones((1,), dtype=bool), rep_sorted[1:] != rep_sorted[:-1]])
    ids_sorted = jnp.cumsum(starts, dtype=jnp.int32) - 1
    labels = jnp.zeros((n,), dtype=jnp.int32).at[perm].set(ids_sorted)
    return labels, jnp.sum(starts, dtype=jnp.int32), violations


def classes(reach: Bool[ArrayLike, "n n"], *, check: bool = True) -> tuple[Int[Array, " n"], int]:
    """Mutual-reachability classes of a preorder, numbered in a topological order.

    `i ~ j ⟺ R[i, j] and R[j, i]`: for the closure `R` of a mask these are the strongly
    connected components of the mask graph (spec hasse.md §1.5).

    **Arguments:**

    - `reach`: Boolean array of shape `(n, n)`, a preorder: `R[i, j]` True iff output `i`
      depends on input `j` (row = query, column = key), reflexive and transitive, e.g.
      `reachability(mask)` with `num_layers=None`.
    - `check`: verify that `reach` is reflexive and transitive first. The transitivity check
      costs one `n × n` Boolean matmul (as much as one squaring step of the closure); pass
      `check=False` only for a relation known to be a closure.

    **Returns:** `(labels, num_classes)`: `labels` an int32 array of shape `(n,)` with class
    ids in `0 .. num_classes - 1`, and `num_classes` a Python int. Ids are a topological
    order: if `[j] < [i]` then `labels[j] < labels[i]` (a reach set strictly contained in
    another has fewer elements); classes are sorted by the size of their reach set, ties
    broken by smallest member, so the numbering is a deterministic function of `R`.

    **Raises:** :class:`~hassejax.errors.MaskError` if `reach` is not a square Boolean
    `(n, n)` array, or (with `check`) not reflexive or not transitive; the message shows a
    violating entry. :class:`~hassejax.errors.MemoryBudgetError` (naming `reach`) if the
    work would not fit in the free memory, estimated from its shape before anything is copied.

    Not traceable (it returns a Python int); the work runs as one jitted computation with
    fixed shapes, `O(n²)` plus the optional `O(n³)` check.

    Source: Li & Guo, arXiv:2606.09951 (paper); spec hasse.md §1.5; the topological
    numbering by reach-set size is (derived).
    """
    # copies, r & r.T and (with check) the float32 matmul: two casts, the product, a bool
    r = as_mask(reach, "reach", batched=False, memory=_memory("reach", "the classes", 17 if check else 5))
    n = r.shape[-1]
    # "top" padding: the extra positions reach everything and form one class that sorts last.
    rp = _pad_square(r, _bucket(n), "top")
    labels, num, violations = _classes_core(rp, check)
    if check:
        _check_preorder(r, violations, "reach")
    num = int(num) - (rp.shape[-1] > n)
    return _unpad(labels, n), num


# --------------------------------------------------------------------- quotient order


@jax.jit
def _labels_consistency(r, labels, reps, n):
    valid = jnp.arange(r.shape[-1]) < n  # positions beyond n are padding
    both = valid[:, None] & valid[None, :]
    same = labels[:, None] == labels[None, :]
    mutual = r & r.T
    mismatch = jnp.sum((same != mutual) & both)
    # R must be constant on class blocks for the quotient to be well defined.
    block = r[reps[labels][:, None], reps[labels][None, :]]
    not_constant = jnp.sum((block != r) & both)
    return r[reps[:, None], reps[None, :]], mismatch, not_constant


def quotient_order(
    reach: Bool[ArrayLike, "n n"], labels: Int[ArrayLike, " n"], num_classes: int
) -> Bool[Array, "c c"]:
    """The quotient partial order `[j] ≤ [i] ⟺ R[i, j]` on the classes (spec hasse.md §1.6).

    **Arguments:**

    - `reach`: Boolean `(n, n)` preorder `R` (see :func:`classes`).
    - `labels`: integer array of shape `(n,)`, the class of each position, in `0 .. C - 1`,
      e.g. from :func:`classes`.
    - `num_classes`: `C`, the number of classes.

    **Returns:** Boolean array of shape `(C, C)`; entry `[a, b]` is True iff `[b] ≤ [a]`
    (row = upper class, column = lower class, like `R`). Reflexive. With the labels of
    :func:`classes` it is lower triangular (ids are topological).

    **Raises:** :class:`~hassejax.errors.MaskError` if the labels do not have shape `(n,)`,
    are out of range, leave a class empty, disagree with mutual reachability in `R`, or if
    `R` is not constant on class blocks. These checks are `O(n²)`. Transitivity of `R` is
    not checked here (`O(n³)`); it holds iff the returned quotient is transitive, which
    :func:`cover_matrix` and :func:`width` check on the small `C × C` matrix.
    :class:`~hassejax.errors.MemoryBudgetError` (naming `reach`) if the work would not fit
    in the free memory, estimated from its shape before anything is copied.

    Source: Li & Guo, arXiv:2606.09951 (paper); spec hasse.md §1.6.
    """
    r = as_mask(reach, "reach", batched=False, memory=_memory("reach", "the quotient order", 6))
    n = r.shape[-1]
    lab = np.asarray(labels)
    if lab.shape != (n,) or not np.issubdtype(lab.dtype, np.integer):
        raise MaskError(
            f"`labels` must be an integer array of shape ({n},) (one class id per position of `reach`); "
            f"got shape {lab.shape} and dtype {lab.dtype}."
        )
    if not isinstance(num_classes, (int, np.integer)) or isinstance(num_classes, bool) or num_classes < 1:
        raise MaskError(f"`num_classes` must be a positive int; got {num_classes!r}.")
    c = int(num_classes)
    if lab.min() < 0 or lab.max() >= c:
        raise MaskError(
            f"`labels` must lie in 0 .. num_classes - 1 = {c - 1}; "
            f"got values from {int(lab.min())} to {int(lab.max())}."
        )
    sizes = np.bincount(lab, minlength=c)
    if np.any(sizes == 0):
        raise MaskError(
            f"`labels` leaves class {int(np.flatnonzero(sizes == 0)[0])} empty; every id in 0 .. {c - 1} "
            "must name at least one position (is `num_classes` right?)."
        )
    # Smallest member of every class, as the class representative.
    reps = np.full(c, n, dtype=np.int64)
    np.minimum.at(reps, lab, np.arange(n))
    big_n, big_c = _bucket(n), _bucket(c)
    lab_j = jnp.asarray(np.pad(lab, (0, big_n - n)), dtype=jnp.int32)
    reps_j = jnp.asarray(np.pad(reps, (0, big_c - c)), dtype=jnp.int32)
    rp = _pad_square(r, big_n, "zeros")
    quotient, mismatch, not_constant = _labels_consistency(rp, lab_j, reps_j, n)
    if int(mismatch):
        rn = np.asarray(r)
        i, j = _first((lab[:, None] == lab[None, :]) != (rn & rn.T))
        raise MaskError(
            f"`labels` must group exactly the mutually reachable positions of `reach`; positions {i} and {j} "
            f"have labels {int(lab[i])} and {int(lab[j])}, but mutual reachability is "
            f"{bool(rn[i, j] and rn[j, i])}. Use `classes(reach)`."
        )
    if int(not_constant):
        raise MaskError(
            "`reach` must be a preorder (reflexive and transitive); it is not constant on the blocks of its "
            f"own classes ({int(not_constant)} entries differ from their class representative's), "
            "so it is not transitive."
        )
    return _unpad(quotient, c)


# ------------------------------------------------------------------------------ cover


def cover_matrix(order: Bool[ArrayLike, "c c"]) -> Bool[Array, "c c"]:
    """The covering relation (Hasse diagram) of a partial order: `S & ~(S ⊗ S)` (spec hasse.md §1.7).

    `[b] ⋖ [a]` iff `[b] < [a]` and no class lies strictly between. With `S = order & ~I` the
    strict order, a pair is a cover iff it is in `S` but not in `S ⊗ S` (no two-step path);
    this is the transitive reduction of the order, which is unique for a finite poset.

    **Arguments:**

    - `order`: Boolean `(C, C)` partial order, `order[a, b]` True iff `[b] ≤ [a]`
      (row = upper), e.g. from :func:`quotient_order`.

    **Returns:** Boolean `(C, C)`, `cover[a, b]` True iff `a` covers `b` (`[b] ⋖ [a]`);
    irreflexive.

    **Raises:** :class:`~hassejax.errors.MaskError` if `order` is not square Boolean, or not
    reflexive, antisymmetric and transitive (checked at no extra cost: `S ⊗ S` is needed
    anyway), with a violating entry in the message.
    :class:`~hassejax.errors.MemoryBudgetError` (naming `order`) if the matmul would not fit
    in the free memory, estimated from its shape before anything is copied.

    Source: Li & Guo, arXiv:2606.09951 (paper); spec hasse.md §1.7 (the matrix formula).
    One float32 matmul with a threshold, jitted.
    """
    o = as_mask(order, "order", batched=False, memory=_memory("order", "the cover matrix", 17))
    c = o.shape[-1]
    _, cover, nr, na, nt = _order_parts(_pad_square(o, _bucket(c), "identity"))
    _check_partial_order(o, nr, na, nt, "order")
    return _unpad(cover, c)


# ------------------------------------------------------------------------------ depth


@jax.jit
def _longest_chain_sorted(rel):
    # rel strictly lower triangular: rel[i, j] => j < i. Dynamic programming in id order:
    # h[i] = 1 + max{h[j] : rel[i, j]}, the number of elements in a longest chain ending at i.
    c = rel.shape[-1]

    def body(i, h):
        best = jnp.max(jnp.where(rel[i], h, 0))
        return h.at[i].set(best + 1)

    h = jax.lax.fori_loop(0, c, body, jnp.zeros((c,), dtype=jnp.int32))
    return jnp.max(h)


def longest_chain(relation: Bool[ArrayLike, "c c"]) -> int:
    """Depth of a poset: the number of elements in a longest chain (its height).

    Works on the cover matrix (Hasse diagram) or on the order itself (both have the same
    longest chains: every maximal chain of a finite poset is a path of covers); the
    diagonal is ignored. For the quotient of a mask it is the number of classes on the
    longest dependency path; it equals the number of topological generations (Mirsky's
    theorem). A chain of `C` classes has depth `C`; an antichain has depth 1.

    **Arguments:**

    - `relation`: Boolean `(C, C)`, `relation[a, b]` True iff `[b] < [a]` (or `[b] ⋖ [a]`);
      row = upper element. Must be acyclic off the diagonal.

    **Returns:** a Python int in `1 .. C`.

    **Raises:** :class:`~hassejax.errors.MaskError` if `relation` is not square Boolean or
    has a directed cycle (then it is not a strict order).
    :class:`~hassejax.errors.MemoryBudgetError` (naming `relation`) if its copies would not
    fit in the free memory, estimated from its shape before anything is copied.

    Complexity: `O(C²)` in one jitted loop when the ids are topologically ordered (the
    relation strictly lower triangular, as for the quotient of :func:`classes`); otherwise
    a topological order is computed first with networkx on the relation's edges.

    Source: spec hasse.md §3 (last paragraph: depth is the longest chain); L. Mirsky,
    "A dual of Dilworth's decomposition theorem", Amer. Math. Monthly 78 (1971).
    """
    rel = np.asarray(as_mask(relation, "relation", batched=False, memory=_memory("relation", "the longest chain", 5)))
    c = rel.shape[0]
    rel = rel & ~np.eye(c, dtype=bool)
    if np.any(np.triu(rel)):
        # Not in topological id order: sort with networkx on the (small) quotient graph.
        g = nx.DiGraph()
        g.add_nodes_from(range(c))
        a, b = np.nonzero(rel)
        g.add_edges_from(zip(b.tolist(), a.tolist()))  # lower -> upper
        try:
            topo = np.asarray(list(nx.topological_sort(g)), dtype=np.int64)
        except nx.NetworkXUnfeasible:
            cycle = nx.find_cycle(g)
            raise MaskError(
                "`relation` must be acyclic (a strict order or its cover relation); got a directed cycle "
                f"through elements {[u for u, _ in cycle]}."
            ) from None
        rel = rel[np.ix_(topo, topo)]
    return int(_longest_chain_sorted(_pad_square(rel, _bucket(c), "zeros")))


# ------------------------------------------------------------------------------ width


def width(order: Bool[ArrayLike, "c c"]) -> int:
    """Width of a poset: the size of a largest antichain, by Dilworth's theorem.

    Dilworth: the largest antichain has as many elements as a smallest partition into
    chains, and (Fulkerson) a smallest chain partition has `C - ν` chains, `ν` the size of
    a maximum matching in the bipartite graph with an edge `(a, b)` for every strict pair
    `[b] < [a]`. The matching is scipy's Hopcroft–Karp; antichains are never enumerated.

    **Arguments:**

    - `order`: Boolean `(C, C)` partial order, `order[a, b]` True iff `[b] ≤ [a]`
      (row = upper), e.g. from :func:`quotient_order`.

    **Returns:** a Python int in `1 .. C`.

    **Raises:** :class:`~hassejax.errors.MaskError` if `order` is not square Boolean or not
    a partial order (the bipartite reduction needs the transitive relation: on the cover
    relation alone it would count vertex-disjoint paths, not chains).
    :class:`~hassejax.errors.MemoryBudgetError` (naming `order`) if the matmul would not fit
    in the free memory, estimated from its shape before anything is copied.

    Complexity `O(C³)` for the check (one matmul) and `O(E √C)` for the matching, `E` the
    number of strict pairs.

    Source: spec hasse.md §3 (last paragraph); R. P. Dilworth, "A decomposition theorem for
    partially ordered sets", Ann. Math. 51 (1950); D. R. Fulkerson, "Note on Dilworth's
    decomposition theorem for partially ordered sets", Proc. AMS 7 (1956); J. E. Hopcroft,
    R. M. Karp, SIAM J. Comput. 2 (1973).
    """
    o = as_mask(order, "order", batched=False, memory=_memory("order", "the width", 18))
    c = o.shape[-1]
    s, _, nr, na, nt = _order_parts(_pad_square(o, _bucket(c), "identity"))
    _check_partial_order(o, nr, na, nt, "order")
    s_np = np.asarray(s)[:c, :c]
    graph = scipy.sparse.csr_array(s_np.astype(np.int8))
    match = scipy.sparse.csgraph.maximum_bipartite_matching(graph, perm_type="column")
    return c - int(np.count_nonzero(match >= 0))
