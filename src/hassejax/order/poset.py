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
  (size of a largest antichain, by Dilworth's theorem, :func:`width`), both in
  :mod:`hassejax.order.poset_measures` and importable from here.

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

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Int

from ..errors import MaskError, ParameterError
from ._poset_common import (
    _as_relation,
    _bucket,
    _check_partial_order,
    _check_preorder,
    _first,
    _order_parts,
    _pad_square,
    _preorder_violations,
    _unpad,
)
from .poset_measures import longest_chain, width

__all__ = ["classes", "quotient_order", "cover_matrix", "longest_chain", "width"]


# ---------------------------------------------------------------------------- classes


@jax.jit
def _violations_core(r):
    """The preorder check's violation counts of a padded relation (one compiled program per bucket size)."""
    return _preorder_violations(r)


def _row_classes(r) -> tuple[np.ndarray, int]:
    """Classes of a preorder as its groups of identical rows, numbered by (reach-set size, smallest member).

    In a preorder `i ~ j` iff rows `i` and `j` are equal: a class's members reach the same set (transitivity), and
    equal rows put `i` in the row of `j` and `j` in the row of `i` (reflexivity), i.e. `R[j, i] and R[i, j]`. Rows
    are compared packed to bits on the host (``np.unique`` of `n` rows of `n/8` bytes); no `n × n` transpose. If
    `[j] < [i]` the reach set of `j` is a strict subset of that of `i`, so sorting by (size, smallest member) is
    topological. Linear in `n²/8` bytes plus the sort. (derived)
    """
    rb = np.asarray(r, dtype=bool)
    packed = np.packbits(rb, axis=1)
    rows = np.ascontiguousarray(packed).view(np.dtype((np.void, packed.shape[1]))).reshape(-1)
    _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    count = np.count_nonzero(rb, axis=1)[first]  # reach-set size of each group
    order = np.lexsort((first, count))  # groups by (size, smallest member)
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return rank[inverse].astype(np.int32), int(order.size)


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

    **Raises:** :class:`~hassejax.errors.MaskError` if `reach` is not a concrete square Boolean
    `(n, n)` array (a traced one, under ``jit``/``vmap``, is refused by name), or (with `check`) not reflexive
    or not transitive; the message shows a violating entry. :class:`~hassejax.errors.MemoryBudgetError` (naming
    `reach`) if the work would not fit in the free memory, estimated from its shape before anything is copied.

    Not traceable (it returns a Python int). The classes are the groups of equal rows (equal
    reach sets, which in a preorder is mutual reachability), compared packed to bits on the host:
    `O(n²)` plus a sort of `n` rows of `n/8` bytes; the optional `O(n³)` check is one jitted
    computation with fixed bucket shapes.

    **Example:** the closure of a block-causal mask has the classes `{0, 1}` below `{2, 3}`;
    reversed (anti-causal) the same blocks are numbered the other way round, lower class first:

    ```python
    >>> import numpy as np
    >>> from hassejax.order import classes
    >>> q, k = np.indices((4, 4))
    >>> labels, c = classes(q // 2 >= k // 2)
    >>> labels.tolist(), c
    ([0, 0, 1, 1], 2)
    >>> classes(q // 2 <= k // 2)[0].tolist()
    [1, 1, 0, 0]

    ```

    Source: Li & Guo, arXiv:2606.09951 (paper); spec hasse.md §1.5; the topological
    numbering by reach-set size is (derived).
    """
    _check_flag(check, "check")
    return _classes(reach, check, "reach")


def _check_flag(value, name: str) -> None:
    """Refuse a flag that is not a bool (``check="no"`` would run the check, ``check=None`` skip it)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ParameterError(f"`{name}` must be True or False; got {value!r:.40}.")


def _classes(reach, check: bool, name: str) -> tuple[Array, int]:
    """:func:`classes`, its errors naming `name` (``"mask"`` for :func:`~hassejax.order.flow_summary`'s closure)."""
    # the copy, its host copy and packed rows and (with check) the float32 matmul: two casts, the product, a bool
    r = _as_relation(reach, name, "the classes", 17 if check else 5, "classes")
    if check:  # "top" padding: the extra positions reach everything (reflexive, transitive: no violation)
        _check_preorder(r, _violations_core(_pad_square(r, _bucket(r.shape[-1]), "top")), name)
    labels, num = _row_classes(r)
    return jnp.asarray(labels, dtype=jnp.int32), num


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


def quotient_order(reach: Bool[ArrayLike, "n n"], labels: Int[ArrayLike, " n"], num_classes: int) -> Bool[Array, "c c"]:
    """The quotient partial order `[j] ≤ [i] ⟺ R[i, j]` on the classes (spec hasse.md §1.6).

    **Arguments:**

    - `reach`: Boolean `(n, n)` preorder `R` (see :func:`classes`).
    - `labels`: integer array of shape `(n,)`, the class of each position, in `0 .. C - 1`,
      e.g. from :func:`classes`.
    - `num_classes`: `C`, the number of classes.

    **Returns:** Boolean array of shape `(C, C)`; entry `[a, b]` is True iff `[b] ≤ [a]`
    (row = upper class, column = lower class, like `R`). Reflexive. With the labels of
    :func:`classes` it is lower triangular (ids are topological).

    **Raises:** :class:`~hassejax.errors.MaskError` for a traced `reach` (under ``jit``/``vmap``: it runs on the
    host), if the labels do not have shape `(n,)`,
    are out of range, leave a class empty, disagree with mutual reachability in `R`, or if
    `R` is not constant on class blocks. These checks are `O(n²)`. Transitivity of `R` is
    not checked here (`O(n³)`); it holds iff the returned quotient is transitive, which
    :func:`cover_matrix` and :func:`width` check on the small `C × C` matrix.
    :class:`~hassejax.errors.MemoryBudgetError` (naming `reach`) if the work would not fit
    in the free memory, estimated from its shape before anything is copied.

    **Example:** the two blocks of a block-causal closure: class 1 (`{2, 3}`) sits above class 0:

    ```python
    >>> import numpy as np
    >>> from hassejax.order import classes, quotient_order
    >>> q, k = np.indices((4, 4))
    >>> reach = q // 2 >= k // 2
    >>> labels, c = classes(reach)
    >>> quotient_order(reach, labels, c).astype(int).tolist()
    [[1, 0], [1, 1]]

    ```

    Source: Li & Guo, arXiv:2606.09951 (paper); spec hasse.md §1.6.
    """
    r = _as_relation(reach, "reach", "the quotient order", 6, "quotient_order")
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

    **Raises:** :class:`~hassejax.errors.MaskError` if `order` is not a concrete square Boolean array (a traced one,
    under ``jit``/``vmap``, is refused by name), or not reflexive, antisymmetric and transitive (checked at no
    extra cost: `S ⊗ S` is needed anyway), with a violating entry in the message.
    :class:`~hassejax.errors.MemoryBudgetError` (naming `order`) if the matmul would not fit
    in the free memory, estimated from its shape before anything is copied.

    **Example:** a diamond `0 < 1, 2 < 3`: class 3 covers 1 and 2 but not 0 (reached through them):

    ```python
    >>> import numpy as np
    >>> from hassejax.order import cover_matrix
    >>> order = np.array([[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 1, 1]], dtype=bool)
    >>> cover_matrix(order).astype(int).tolist()
    [[0, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0], [0, 1, 1, 0]]

    ```

    Source: Li & Guo, arXiv:2606.09951 (paper); spec hasse.md §1.7 (the matrix formula).
    One float32 matmul with a threshold, jitted inside; the checks read its result on the host, so `order` is
    concrete (not traceable).
    """
    o = _as_relation(order, "order", "the cover matrix", 17, "cover_matrix")
    c = o.shape[-1]
    _, cover, nr, na, nt = _order_parts(_pad_square(o, _bucket(c), "identity"))
    _check_partial_order(o, nr, na, nt, "order")
    return _unpad(cover, c)
