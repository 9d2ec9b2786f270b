"""The convergence depth ``L*``: the smallest ``L`` with ``R^(L) = R`` (spec hasse.md §1.3).

:func:`convergence_depth` has the same three exact routes as the closure (matmul doubling and
binary search, a bit-packed level search on the host, interval rows); see
:mod:`hassejax.order.closure`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import no_type_check

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Int

from .._mask_checks import NestedMask
from ..errors import ParameterError
from ..masks._intervals import IntervalMask
from ._host import _host_depth
from ._matmul import _depth_matmul, _matmul_dtype, _num_stored_powers, _pad, _padded_size
from ._prepare import _check_method, _prepare
from ._progress import check_progress, progress_bar
from ._routes import (
    _STRUCTURED_MIN_N,
    _check_bitpacked_depth_memory,
    _check_matmul_memory,
    _count_products,
    _depth_bitpacked_bytes,
    _depth_costs,
    _depth_dense_bytes,
    _depth_levels_guess,
    _depth_memory,
    _few_runs,
    _matmul_bar,
    _prefer_dense,
    product_first,
    structured_or_dense,
    warn_if_forced_structured,
)
from ._structured import PowerTable, dense_need
from .heads import _heads_union

__all__ = ["convergence_depth"]


def convergence_depth(
    mask: Bool[ArrayLike, "*batch_heads n n"]
    | IntervalMask
    | Sequence[IntervalMask | Bool[ArrayLike, "n n"]]
    | NestedMask,
    *,
    method: str = "auto",
    head_axis: int | None = None,
    progress: bool | int | float = False,
) -> Int[Array, "*batch"] | int:
    """The convergence depth ``L*``: the smallest ``L`` with ``R^(L) = R`` (spec hasse.md §1.3).

    Exact, with ``1 <= L* <= max(1, n − 1)``; ``L* = 1`` when ``A = M | I`` is already closed
    (e.g. causal, full, block-causal masks, the identity, ``n = 1``). ``L*`` equals the largest
    shortest-path length between two distinct positions where one reaches the other (1 if there
    is none). Three exact routes:

    - ``"matmul"``: ``O(log L*)`` jitted Boolean products: doubling ``A, A^2, A^4, …`` until a
      power repeats, then a binary search that combines the stored powers (``2 ceil(log2 L*)``
      products in all, each ``O(n^3)``). Works under :func:`jax.jit` and :func:`jax.vmap`.
    - ``"bitpacked"``: on the host (:func:`hassejax.order._bitpacked.depth_bitpacked`): the
      closure ``R`` bit-packed, then a breadth-first search from every position at once on
      bit-packed rows, level by level (``F^(L+1)_i`` = OR of the children's frontiers ``F^L_c``,
      masked by the bits of ``R_i`` not reached yet), each level touching only blocks of rows
      that still miss bits and children whose frontier is not empty; ``L*`` is the last level
      that adds a bit. Children that cannot add anything beyond their siblings (windows, bands)
      are pruned first. Masks of a batch run one by one; under a trace it runs as a
      :func:`jax.pure_callback`. The fast route for large sparse masks: about 1.5× the cost of
      ``reachability(mask)`` for a random 1 % lower-triangular mask at ``n = 8192``.
    - ``"structured"``: interval rows (:mod:`hassejax.order._structured`): the same doubling
      and binary search with ``O(n · k log n)`` products and no ``n × n`` array; the route of
      an :class:`~hassejax.masks.IntervalMask`, and of dense input converted to one. Under ``"auto"`` an
      :class:`~hassejax.masks.IntervalMask` of several runs a row that is a Kronecker product ``A = P ⊗ C`` on a
      grid (a 2-D neighbourhood) has ``L* = max(L*_P, L*_C)``, from its factors (:func:`~hassejax.order.flow_summary`).

    ``method="auto"`` picks per mask of a batch by a cost estimate from ``n``, the nonzeros of
    that mask and the backend (:func:`_depth_costs`): ``"matmul"`` for small ``n`` (and fast
    matmul backends), ``"bitpacked"`` for large sparse concrete masks; always ``"matmul"`` under
    a trace (``jit``/``vmap``), ``"structured"`` for an :class:`~hassejax.masks.IntervalMask`.

    **Arguments:**

    - `mask`: bool `(*batch, n, n)`; row = query, column = key, True = may attend. Or an
      :class:`~hassejax.masks.IntervalMask` (any ``n``; structured route). A sequence of masks
      (:class:`~hassejax.masks.IntervalMask` ones densified, after a memory check) is a batch, one ``L*`` per
      mask; the heads of one layer are ``head_axis=0``.
    - `method`: ``"auto"``, ``"matmul"``, ``"bitpacked"`` or ``"structured"`` (see above). An
      :class:`~hassejax.masks.IntervalMask` on a dense route is converted to its dense array first
      (after a memory check).
    - `head_axis`: ``None`` (default), or the axis of `mask` that holds the masks of one
      layer's heads, OR-ed first (:func:`heads_union`): e.g. ``0`` for `(heads, *batch, n, n)`,
      ``-3`` for `(*batch, heads, n, n)`; never one of the last two axes. With ``0``, `mask`
      may be a tuple of :class:`~hassejax.masks.IntervalMask` heads.
    - `progress`: ``False`` (default: silent), ``True`` for a tqdm progress bar on stderr, or a
      number of seconds ``d >= 0``: a bar once the work has run ``d`` seconds. It counts the
      products of interval rows (structured; the total is known once the doubling has found
      ``R``) or the breadth-first levels (bit-packed); the matmul route, one jitted loop with no
      host callback inside, shows the estimated seconds a product when it starts and the
      products done when it ends. No bar under a trace.

    **Returns:** int32 array of shape `(*batch,)` (a 0-d array for a single mask, an empty one
    for an empty batch axis); a Python int for an :class:`~hassejax.masks.IntervalMask`.

    **Raises:**

    - :class:`~hassejax.errors.MaskError`: a mask that is not Boolean, not square, or of rank < 2.
    - :class:`~hassejax.errors.ParameterError`: an unknown `method`; ``"structured"`` under a trace; a bad `head_axis`
      (not an int, out of range, one of the last two axes; see :func:`heads_union`); a
      `progress` that is not a bool or a number of seconds >= 0.
    - :class:`~hassejax.errors.MemoryBudgetError`: the route would not fit in the free memory:
      the input copies plus the cheapest allowed route (the matmul route's
      ``ceil(log2(n − 1)) + 2`` stored bool matrices per mask, or the bit-packed route's packed
      rows for one mask), estimated from the shape alone before the mask is copied anywhere
      (the message names `mask`, `n`, the estimated and the free GiB); then once more for the
      chosen route, with the nonzeros known.

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.order import convergence_depth
    >>> q, k = np.indices((9, 9))
    >>> int(convergence_depth((k <= q) & (q - k <= 2)))   # sliding window, 2 previous keys: ceil(8 / 2)
    4
    >>> heads = np.stack([(k <= q) & (q - k <= 2), q - k == 4])   # head 1 attends 4 back
    >>> int(convergence_depth(heads, head_axis=0))                # e.g. 8 -> 4 -> 2 -> 1
    3

    ```

    Source: Li & Guo, arXiv:2606.09951 (paper); spec hasse.md §1.3; the doubling/binary search
    and the bit-packed level search are (derived).
    """
    method = _check_method(method)
    delay = check_progress(progress)
    if head_axis is not None:
        mask = _heads_union(mask, head_axis, "mask", memory=_depth_memory(method))
    if isinstance(mask, IntervalMask):
        if method not in ("auto", "structured"):  # a dense route: the dense array, after its memory check (as in
            # flow_summary; a fresh user: convergence_depth refused what flow_summary ran), the route's from the shape
            _depth_memory(method)((mask.n, mask.n))
            return int(
                convergence_depth(mask.to_dense(name="mask"), method=method, progress=False if delay is None else delay)
            )

        def dense(why=None):  # the fallback (`why` given) goes bit-packed: dense auto would find the few runs again
            route = "auto" if why is None else "bitpacked"
            return int(convergence_depth(mask.to_dense(), method=route, progress=False if delay is None else delay))

        @no_type_check  # a closure made per call (see pyproject)
        def product():  # a Kronecker product P ⊗ C (a 2-D neighbourhood): L* = max(L*_P, L*_C); a disjoint union of
            from ._components import components  # interleaved components (a dilated window): the largest L*_c
            from ._product import kron_factors

            recorded = components(mask)
            if recorded is not None:
                return max(
                    int(convergence_depth(b, progress=False if delay is None else delay)) for b, _ in recorded[1]
                )
            factors = kron_factors(mask.with_diagonal())
            if factors is None:
                return None
            return max(int(convergence_depth(f, progress=False if delay is None else delay)) for f in factors)

        answer = product_first(mask, method, product)
        if answer is not None:
            return answer
        if method == "auto" and _prefer_dense(mask):
            return dense()

        def structured():
            with progress_bar(delay, "L* (structured)", "products") as bar:
                return PowerTable(mask.with_diagonal(), name="mask").depth(bar)

        return structured_or_dense(
            mask,
            method,
            structured,
            dense,
            dense_bytes=lambda n: _depth_quote(n, 1, mask.nnz()),
            auto_takes_record=True,
        )

    a, traced = _prepare(mask, memory=_depth_memory(method))
    n = a.shape[-1]
    batch_shape = a.shape[:-2]
    batch = math.prod(batch_shape)
    if batch == 0:
        return jnp.zeros(batch_shape, jnp.int32)
    if method == "structured" and traced:
        raise ParameterError(
            "`method` = 'structured' needs a concrete mask (it converts to an IntervalMask on the host); "
            "got a traced one. Use method='matmul' or 'bitpacked' under jit/vmap."
        )

    if method == "auto" and traced:
        method = "matmul"
    delay = None if traced else delay
    if traced and method == "bitpacked":
        _check_bitpacked_depth_memory(n, n * n, batch)
        spec = jax.ShapeDtypeStruct(batch_shape, jnp.int32)
        return jax.pure_callback(_host_depth, spec, a, vmap_method="expand_dims")

    flat = a.reshape(-1, n, n)
    forced = method  # "structured" when the caller chose it: it warns where "auto" would go bit-packed
    if method == "auto" and n >= _STRUCTURED_MIN_N and _few_runs(flat).all():
        method = "structured"
    if method == "structured":
        depths = []
        nnz = int(np.count_nonzero(flat, axis=(1, 2)).max()) + n if forced == "structured" else None
        with warn_if_forced_structured(n, forced, nnz), progress_bar(delay, "L* (structured)", "products") as bar:
            for b in range(batch):
                intervals = IntervalMask.from_dense(flat[b], name="mask").with_diagonal()

                @no_type_check  # closures made per call (see pyproject)
                def structured(intervals=intervals, bar=bar):
                    return PowerTable(intervals, name="mask").depth(bar)

                @no_type_check
                def dense(why=None, one=flat[b : b + 1]):  # "auto": the powers' runs multiply (as an IntervalMask's)
                    _check_bitpacked_depth_memory(n, int(np.count_nonzero(one)), 1)
                    return int(_host_depth(one)[0])

                # a refusal's advice quotes what this call asks for with method="bitpacked" (a review)
                need = lambda m, batch=batch: _depth_quote(m, batch, int(np.count_nonzero(flat, axis=(1, 2)).max()))
                if forced == "auto":
                    depths.append(structured_or_dense(intervals, "auto", structured, dense, dense_bytes=need))
                else:
                    with dense_need(need):
                        depths.append(structured())
        return jnp.asarray(np.asarray(depths, dtype=np.int32).reshape(batch_shape))
    if method == "auto":
        per_mask = np.count_nonzero(flat, axis=(-2, -1))
        costs = {int(nnz): _depth_costs(n, int(nnz)) for nnz in np.unique(per_mask)}
        use_bp = np.array([costs[int(nnz)][1] < costs[int(nnz)][0] for nnz in per_mask], dtype=bool)
    else:  # the bit-packed route's memory grows with the nonzeros: count them (not n * n)
        per_mask = np.count_nonzero(flat, axis=(-2, -1)) if method == "bitpacked" else None
        use_bp = np.full(batch, method == "bitpacked")
    depth = np.empty(batch, dtype=np.int32)
    if use_bp.any():
        nnz_max = n * n if per_mask is None else int(per_mask[use_bp].max())
        _check_bitpacked_depth_memory(n, nnz_max, int(use_bp.sum()))
        with progress_bar(delay, "L* (bit-packed)", "levels") as bar:
            depth[use_bp] = _host_depth(flat[use_bp], bar) if bar.on else _host_depth(flat[use_bp])
    if not use_bp.all():
        rest = flat if not use_bp.any() else flat[~use_bp]
        size = _padded_size(n)
        _check_matmul_memory(n, rest.shape[0], _num_stored_powers(size), "the convergence depth", "mask")
        guess = _depth_levels_guess(n, float(np.count_nonzero(rest)) / rest.shape[0] if delay is not None else n * n)
        products = 1 if guess == 1 else 2 * math.ceil(math.log2(guess))
        with _matmul_bar(delay, "L*", size, rest.shape[0], products) as bar:
            mm, count = _depth_matmul(_pad(rest, size), _matmul_dtype())
            _count_products(bar, count)
        if traced:
            return mm.reshape(batch_shape)
        depth[~use_bp] = np.asarray(mm)
    return jnp.asarray(depth.reshape(batch_shape))


def _depth_quote(n: int, batch: int, nnz: int) -> int:
    """What ``convergence_depth(..., method="bitpacked")`` asks for (`batch` masks of `n` positions, the densest with
    `nnz` nonzeros): the larger of its two checks, from the shape and then from the nonzeros; a structured refusal's
    advice quotes it."""
    return max(_depth_dense_bytes(n, batch, "bitpacked"), _depth_bitpacked_bytes(n, nnz))
