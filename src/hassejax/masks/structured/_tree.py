"""Tree-prefix masks (speculative decoding trees after a shared prefix) in interval form.

JAX-free like the whole :mod:`hassejax.masks.structured` package; spec hasse.md §0 conventions (row = query, column = key, True = may attend).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._intervals import IntervalMask
from .._validate import (
    check_parents,
    checked,
    nonnegative,
)
from ._common import _as_mask, _budget, _concrete_index_vector, _positions

__all__ = ["tree_prefix"]


@checked(parents=_concrete_index_vector, prefix=nonnegative)
def tree_prefix(parents: Sequence[int] | np.ndarray, prefix: int) -> IntervalMask:
    """Tree (speculative decoding) attention after a causal prefix, as key runs.

    Rule of :func:`hassejax.masks.tree_prefix` with `n = P + N`: a prefix row `q < P` is
    ``[0, q + 1)``; the row of tree node `i` is ``[0, P)`` joined with the positions
    ``P + j`` of the nodes `j` on its root-to-self path, one run per stretch of consecutive
    indices on that path (a chain of nodes listed in order is one run).

    **Arguments:**

    - `parents`: parent index of each tree node, parents before children: ``parents[i]``
      is `-1` (a root) or in `[0, i - 1]`. Must be concrete.
    - `prefix`: prefix length `P`, an integer >= 0.

    **Returns:** an :class:`~hassejax.masks.IntervalMask` with `P + N` rows, equal to
    :func:`hassejax.masks.tree_prefix`.

    **Raises:** :class:`~hassejax.errors.MaskError` for an empty, non-integer or traced
    `parents`, a parent that is not `-1` or an earlier node, or a negative `prefix`.

    **Example:**

    ```python
    >>> from hassejax.masks import structured
    >>> m = structured.tree_prefix([-1, 0, 0, 1], prefix=2)
    >>> m.row(1), m.row(4), m.row(5)
    ([(0, 2)], [(0, 3), (4, 5)], [(0, 4), (5, 6)])

    ```

    **References:** attention-gym ``jetspec.py``; Miao et al., "SpecInfer",
    arXiv:2305.09781; mask gallery "tree / speculative decoding".
    """
    check_parents(parents)
    t = parents.shape[0]
    n = prefix + t
    # Runs of the root-to-node path. A node continues its parent's run when the parent is the
    # node just before it; head[x] is the first node of the run through x (a running maximum
    # of the break points), and the next run down the path ends at parents[head[x]]. Walking
    # all nodes one run at a time gives the runs last-first: k vectorised steps for k runs.
    node = np.arange(t, dtype=np.int64)
    par = parents.astype(np.int64)
    head = np.maximum.accumulate(np.where((par < 0) | (par != node - 1), node, 0))
    below = par[head]
    tops = [node]
    while True:
        cur = tops[-1]
        nxt = np.where(cur >= 0, below[np.maximum(cur, 0)], -1)
        if not (nxt >= 0).any():
            break
        tops.append(nxt)
    k = len(tops)
    count = sum((top >= 0).astype(np.int64) for top in tops)
    _budget(n, k + 1, "tree_prefix", "parents")
    s = np.full((t, k), t, np.int64)
    e = np.full((t, k), t, np.int64)
    for c, top in enumerate(tops):
        alive = np.flatnonzero(top >= 0)
        col = count[alive] - 1 - c
        s[alive, col] = head[top[alive]]
        e[alive, col] = top[alive] + 1
    pad = s >= t
    tree_s = np.where(pad, n, s + prefix)
    tree_e = np.where(pad, n, e + prefix)
    q = _positions(prefix)
    head_s = np.concatenate([np.zeros(prefix, np.int64), np.zeros(t, np.int64)])
    head_e = np.concatenate([q + 1, np.full(t, prefix, np.int64)])
    body_s = np.concatenate([np.full((prefix, k), n, np.int64), tree_s])
    body_e = np.concatenate([np.full((prefix, k), n, np.int64), tree_e])
    starts = np.concatenate([head_s[:, None], body_s], axis=1)
    stops = np.concatenate([head_e[:, None], body_e], axis=1)
    return _as_mask(starts, stops, n, normal=False)
