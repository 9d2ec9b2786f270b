"""Tree attention of speculative decoding, squared by the causal prefix rows."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Bool, Int

from ._args import check_mask_memory, checked, index_grid, index_vector, is_traced, nonnegative, require
from ._validate import check_parents

__all__ = ["tree_prefix"]


def _parents_arg(value, name: str):
    return index_vector(value, name)


@jax.jit
def _ancestor_or_self(parents: jax.Array) -> jax.Array:
    """``anc[i, j] = j`` is on the root-to-`i` path (parents listed before children, roots -1)."""
    n = parents.shape[0]
    eye = jnp.eye(n, dtype=bool)

    def body(i, anc):
        p = parents[i]
        inherited = jnp.where(p >= 0, anc[jnp.maximum(p, 0)], False)
        return anc.at[i].set(eye[i] | inherited)

    return jax.lax.fori_loop(0, n, body, jnp.zeros((n, n), dtype=bool))


@functools.partial(jax.jit, static_argnames=("prefix",))
def _tree_prefix(parents, prefix):
    t = parents.shape[0]
    n = prefix + t
    anc = _ancestor_or_self(parents)
    q, k = index_grid(n, n)
    tree_q = jnp.clip(q - prefix, 0, t - 1)
    tree_k = jnp.clip(k - prefix, 0, t - 1)
    prefix_rows = k <= q
    tree_rows = (k < prefix) | ((k >= prefix) & anc[tree_q, tree_k])
    return jnp.where(q < prefix, prefix_rows, tree_rows)


@checked(parents=_parents_arg, prefix=nonnegative)
def tree_prefix(parents: Sequence[int] | Int[ArrayLike, " t"], prefix: int) -> Bool[Array, "n n"]:
    """Tree (speculative decoding) attention after a causal prefix, as a square mask.

    A draft tree of `N` nodes is verified in one pass after a prefix of `P` tokens.
    attention-gym's JetSpec ``generate_jetspec_tree_causal_mask_mod`` is rectangular
    (queries = the `N` tree nodes, keys = `P` prefix + `N` nodes):
    ``k < P or ancestor_or_self(q, k - P)``. Squared by adding the `P` causal prefix rows
    and shifting the tree rows by `P` (mask gallery), with `n = P + N`::

        M[q, k] = k <= q                                   for a prefix row q < P
        M[q, k] = k < P or ancestor_or_self(q - P, k - P)  for a tree row q >= P

    A node sees the whole prefix and the nodes on its root-to-self path, never a
    sibling branch.

    **Arguments:**

    - `parents`: parent index of each tree node, parents before children: ``parents[i]``
      is `-1` (a root) or an index in `[0, i - 1]`; ``parents[0] == -1``. Several roots
      (a forest) are allowed. May be traced under ``jax.jit`` (parents beyond int32, or
      unsigned ones, then need ``jax_enable_x64``: without it JAX truncates them to int32 and
      a uint32 `2**32 − 1` reads as the root −1).
    - `prefix`: prefix length `P`, an integer >= 0.

    **Returns:** a Boolean array of shape `(P + N, P + N)`.

    **Raises:** :class:`~hassejax.errors.MaskError` for an empty or non-integer `parents`,
    a parent that is not `-1` or an earlier node, or a negative `prefix`.

    **Example:** a root (row 2) with two children (rows 3 and 4) after a prefix of 2: each
    child sees the prefix, the root and itself, not its sibling:

    ```python
    >>> from hassejax.masks import tree_prefix
    >>> tree_prefix([-1, 0, 0], prefix=2).astype(int).tolist()
    [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 0, 1]]

    ```

    **References:** attention-gym ``jetspec.py`` (``build_tree_ancestor_matrix``,
    arXiv:2606.18394); Miao et al., "SpecInfer", arXiv:2305.09781; mask gallery
    "tree / speculative decoding".
    """
    t = parents.shape[0]
    if is_traced(parents):
        ok = jnp.all((parents >= -1) & (parents < jnp.arange(t, dtype=jnp.int32)))
    else:
        check_parents(parents)
        ok = True
    n = prefix + t
    check_mask_memory(n, n, "tree_prefix", argument="parents` and `prefix")
    mask = _tree_prefix(jnp.asarray(parents, dtype=jnp.int32), prefix=prefix)
    return require(
        mask,
        ok,
        "`parents` must list parents before children: parents[i] is -1 (a root) or an index in [0, i-1].",
    )
