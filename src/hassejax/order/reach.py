"""Information flow through an attention stack: ``A = M | I``, ``R^(L) = A^L`` and the limit ``R``.

Spec hasse.md §1.1–1.3. :func:`reachability` picks one of three exact routes (matmul,
bit-packed, structured; see :mod:`hassejax.order.closure`) and takes the same mask in every
layer, a different mask per layer, or the heads of a layer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import no_type_check

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool

from .._mask_checks import NestedMask
from ..errors import MaskError, ParameterError
from ..masks._intervals import IntervalMask
from ._host import _host_closure, _host_power, _host_product, _on_host
from ._matmul import _closure_matmul, _matmul_dtype, _pad, _padded_size, _power_matmul, _product_matmul, _unpad
from ._prepare import _as_intervals, _check_method, _check_num_layers, _prepare, _stack_layer_masks
from ._progress import check_progress, progress_bar
from ._routes import (
    _DENSE_FALLBACK_N,
    _STRUCTURED_MIN_N,
    _check_bitpacked_memory,
    _check_matmul_memory,
    _closure_costs,
    _count_products,
    _dense_memory,
    _few_runs,
    _matmul_bar,
    _nnz,
    _power_costs,
    _prefer_dense,
    _rounds_costs,
    product_first,
    structured_or_dense,
    warn_if_forced_structured,
)
from ._structured import PowerTable, product
from .heads import _heads_union

__all__ = ["layer_adjacency", "reachability"]


# --------------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------------


def layer_adjacency(mask: Bool[ArrayLike, "*batch n n"] | NestedMask) -> Bool[Array, "*batch n n"]:
    """One attention layer with its residual stream: ``A = M | I`` (spec hasse.md §1.1).

    The residual stream carries every position's own state, so the diagonal is set whatever
    ``M[i, i]`` says.

    **Arguments:**

    - `mask`: bool array of shape `(*batch, n, n)`; row = query, column = key, True = may
      attend (spec §0). Leading axes are independent masks.

    **Returns:** bool array `A` of the same shape (empty for an empty batch).

    **Raises:** :class:`~hassejax.errors.MaskError` for a non-Boolean, non-square or rank < 2
    mask; :class:`~hassejax.errors.MemoryBudgetError` when the copies of the mask (estimated
    from its shape, before any copy) would not fit in the free memory.

    **Example:** a mask where each query sees only the previous key gains the diagonal:

    ```python
    >>> import numpy as np
    >>> from hassejax.order import layer_adjacency
    >>> layer_adjacency(np.eye(3, k=-1, dtype=bool)).astype(int).tolist()
    [[1, 0, 0], [1, 1, 0], [0, 1, 1]]

    ```

    Source: Li & Guo, arXiv:2606.09951 (paper); spec hasse.md §1.1.
    """
    a, _ = _prepare(mask, memory=_dense_memory("mask", "the adjacency M | I", route=False))
    return jnp.asarray(a)


def reachability(
    mask: Bool[ArrayLike, "*batch_heads n n"]
    | IntervalMask
    | Sequence[IntervalMask | Bool[ArrayLike, "n n"]]
    | NestedMask
    | None = None,
    num_layers: int | None = None,
    *,
    layer_masks: Sequence[
        Bool[ArrayLike, "*batch_heads n n"]
        | IntervalMask
        | Sequence[IntervalMask | Bool[ArrayLike, "n n"]]
        | NestedMask
    ]
    | Bool[ArrayLike, "layers *batch_heads n n"]
    | None = None,
    method: str = "auto",
    head_axis: int | None = None,
    progress: bool | int | float = False,
) -> Bool[Array, "*batch n n"] | IntervalMask:
    """Information flow through an attention stack: ``R^(L) = A^L``, or the limit ``R`` (spec hasse.md §1.2–1.3).

    ``R[i, j]`` is True iff output position ``i`` can depend on input position ``j``: in the
    graph with an edge ``i -> j`` for every ``A[i, j]`` ("i attends to j"), ``j`` is reachable
    from ``i`` by a walk of at most ``L`` edges (any length for the limit). The limit is the
    reflexive-transitive closure, ``networkx.transitive_closure(G, reflexive=True)`` of that
    graph.

    **Arguments:**

    - `mask`: bool `(*batch, n, n)` (row = query, column = key, True = may attend). Leading
      axes are independent masks (also fine under :func:`jax.vmap`). Or an
      :class:`~hassejax.masks.IntervalMask` (any ``n``; structured route). A sequence of masks
      (:class:`~hassejax.masks.IntervalMask` ones densified, after a memory check) is a batch, one result per mask;
      the heads of one layer are ``head_axis=0``. ``None`` (the
      default) when `layer_masks` is given: ``reachability(layer_masks=[...])``.
    - `num_layers`: the number of layers ``L >= 1``; ``None`` gives the limit ``R``. For
      ``L >= max(1, n - 1)`` the result is the limit (``L* <= n - 1``).
    - `layer_masks`: a different mask per layer, as a sequence ``[M_1, …, M_L]`` of equal
      shape ``(*batch, n, n)`` or an array stacked along a leading layer axis
      ``(L, *batch, n, n)``; layer 1 acts first, giving ``A_L ⊗ … ⊗ A_1``. Per-layer masks
      come only through this argument, never through the batch axis.
    - `head_axis`: ``None`` (default: each mask is one layer's mask), or the axis of one
      layer's mask that holds the masks of that layer's heads ``M_1 … M_H``, OR-ed first
      (:func:`heads_union`; the layer's adjacency is ``(M_1 | … | M_H) | I``). It counts the
      axes of `mask`, or of each ``layer_masks[l]``, like NumPy (negative from the end) and is
      never one of the last two: ``head_axis=0`` for `mask` `(heads, *batch, n, n)` or for a
      stacked `layer_masks` `(L, heads, *batch, n, n)` (the leading layer axis of a stack is
      not counted) or a sequence of `(heads, *batch, n, n)`; ``head_axis=-3`` for heads just
      before the query axis. Interval heads: a tuple of
      :class:`~hassejax.masks.IntervalMask` as `mask` (or as each ``layer_masks[l]``) with
      ``head_axis=0``.
    - `method`: ``"matmul"`` (jitted float matmuls with threshold; repeated squaring for the
      limit, binary exponentiation for ``R^(L)``, a scan for `layer_masks`), ``"bitpacked"``
      (exact bit-packed propagation on the host: along a topological order of the strongly
      connected components for the limit; for ``R^(L)`` that closure, then a breadth-first search from every
      position at once on packed rows stopped after ``min(L, L*)`` levels, ``R^(L) = R`` less the bits farther
      than ``L``, at most the cost of :func:`convergence_depth`; a
      :func:`jax.pure_callback` under a trace) or ``"auto"`` (a cost estimate from ``n``, the
      nonzeros and the backend; always ``"matmul"`` under a trace; ``"structured"`` for
      :class:`~hassejax.masks.IntervalMask` input, and for one of several runs a row that is a Kronecker product
      ``A = P ⊗ C`` on a grid, a 2-D neighbourhood, the product ``R^(L) = P^(L) ⊗ C^(L)`` of its factors'
      reachabilities, see :func:`~hassejax.order.flow_summary`), or ``"structured"`` (interval rows; dense
      input converted there and back). An IntervalMask on a dense route is converted to its dense
      array first (after a memory check; the result an IntervalMask again).
    - `progress`: ``False`` (default: silent), ``True`` for a tqdm progress bar on stderr, or a
      number of seconds ``d >= 0``: a bar once the work has run ``d`` seconds. It counts the
      products of interval rows (structured), the batches of classes, the levels or the rounds
      (bit-packed); the matmul route, one jitted loop with no host callback inside, shows the
      estimated seconds a product when it starts and the products done when it ends. No bar
      under a trace.

    **Returns:** bool array of shape `(*batch, n, n)` (an empty one for an empty batch axis,
    on every route); an :class:`~hassejax.masks.IntervalMask` for interval input.

    **Raises:**

    - :class:`~hassejax.errors.MaskError`: a mask that is not Boolean, not square, of rank < 2;
      `layer_masks` empty, unstacked or of unequal shapes; both or neither of `mask` and
      `layer_masks`.
    - :class:`~hassejax.errors.ParameterError`: `num_layers` not a positive int, or disagreeing
      with ``len(layer_masks)``; an unknown `method`; a `head_axis` that is not an int, out of
      range or one of the last two axes (see :func:`heads_union`); a `progress` that is not a
      bool or a number of seconds >= 0.
    - :class:`~hassejax.errors.MemoryBudgetError`: the estimated memory exceeds what is free.
      A first estimate from the shape alone (the input copies and the cheapest allowed dense
      route) runs before the mask is copied anywhere, so a huge mask, even a zero-stride
      ``np.broadcast_to`` view, fails here and not in XLA; the message names the argument
      (`mask` or `layer_masks`), `n`, the estimated and the free GiB.

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.order import reachability
    >>> chain = np.eye(4, k=-1, dtype=bool)           # i attends to i - 1
    >>> reachability(chain, 2)[3]
    Array([False,  True,  True,  True], dtype=bool)
    >>> reachability(chain)[3]
    Array([ True,  True,  True,  True], dtype=bool)
    >>> heads = np.stack([chain, np.eye(4, k=-2, dtype=bool)])   # head 1 attends to i - 2
    >>> reachability(heads, 1, head_axis=0)[3]                   # one layer: i, i - 1, i - 2
    Array([False,  True,  True,  True], dtype=bool)

    ```

    Source: Li & Guo, arXiv:2606.09951 (paper); spec hasse.md §1.2–1.3; the bit-packed route is
    (derived), DESIGN.md "Principles".
    """
    method = _check_method(method)
    num_layers = _check_num_layers(num_layers)
    delay = check_progress(progress)
    if head_axis is not None:
        mask, layer_masks = _union_layer_heads(mask, layer_masks, head_axis, num_layers, method)
    if isinstance(mask, IntervalMask) or (
        mask is None and isinstance(layer_masks, Sequence) and any(isinstance(m, IntervalMask) for m in layer_masks)
    ):
        return _reachability_structured(mask, num_layers, layer_masks, method, delay)
    if method == "structured":
        return _dense_via_structured(mask, num_layers, layer_masks, delay)
    if layer_masks is not None:
        if mask is not None:
            raise MaskError(
                "Pass either `mask` (the same mask in every layer) or `layer_masks` (one per layer), not both; "
                "got both."
            )
        return _reachability_layers(layer_masks, num_layers, method, delay)
    if mask is None:
        raise MaskError(
            "`mask` must be a Boolean array of shape (*batch, n, n) unless `layer_masks` is given; got None."
        )

    what = "the reachability limit" if num_layers is None else f"R^({num_layers})"
    a, traced = _prepare(mask, memory=_dense_memory("mask", what, method, route=num_layers != 1))
    n = a.shape[-1]
    batch = math.prod(a.shape[:-2])
    delay = None if traced else delay
    if num_layers is not None and num_layers >= max(1, n - 1):
        num_layers = None  # L* <= max(1, n - 1): the flow has converged
    if num_layers == 1 or batch == 0:  # one layer is A; an empty batch gives an empty result
        return jnp.asarray(a)

    if method == "auto" and not traced and n >= _STRUCTURED_MIN_N and _few_runs(a.reshape(-1, n, n)).all():
        return _dense_via_structured_batch(a, num_layers, delay, method="auto")
    nnz, nnz_max = (float(n * n), n * n) if traced or method == "matmul" else _nnz(a)
    if method == "auto" and traced:
        method = "matmul"
    elif method == "auto":
        if num_layers is None:
            mm, bp = _closure_costs(n, nnz)
        else:
            mm, bp = _power_costs(n, nnz, num_layers)
        method = "bitpacked" if bp < mm else "matmul"

    what = "the reachability limit" if num_layers is None else f"R^({num_layers})"
    short = "R" if num_layers is None else f"R^({num_layers})"
    if method == "bitpacked":
        _check_bitpacked_memory(n, nnz_max, batch, what, "mask", power=num_layers is not None)
        if num_layers is None:
            with progress_bar(delay, f"{short} (bit-packed)", "batches") as bar:
                return _on_host(_host_closure, a, a.shape, bar=bar)
        with progress_bar(delay, f"{short} (bit-packed)", "levels") as bar:
            return _on_host(_host_power, a, a.shape, num_layers, bar=bar)

    dtype = _matmul_dtype()
    _check_matmul_memory(n, batch, 0 if num_layers is None else 1, what, "mask")
    size = _padded_size(n)
    padded = _pad(a, size)
    products = 2 if num_layers is None else 2 * math.ceil(math.log2(num_layers))
    with _matmul_bar(delay, short, size, batch, products) as bar:
        if num_layers is None:
            r, count = _closure_matmul(padded, dtype)
        else:
            r, count = _power_matmul(padded, num_layers, dtype)
        _count_products(bar, count)
    return _unpad(r, n, traced)


def _union_layer_heads(mask, layer_masks, head_axis, num_layers, method: str):
    """:func:`reachability`'s `head_axis`: OR the heads of `mask` or of every layer of `layer_masks`.

    Each union is checked against the memory the rest of :func:`reachability` will need for it,
    from the shapes alone, before anything is computed. With both or neither of `mask` and
    `layer_masks` nothing happens here (the caller raises).
    """
    dense = "bitpacked" if method == "structured" else method
    if mask is not None and layer_masks is None:
        what = "the reachability limit" if num_layers is None else f"R^({num_layers})"
        memory = _dense_memory("mask", what, dense, route=num_layers != 1)
        return _heads_union(mask, head_axis, "mask", memory=memory), None
    if layer_masks is None or mask is not None:
        return mask, layer_masks
    if isinstance(layer_masks, Sequence) and not isinstance(layer_masks, str):
        num = len(layer_masks)
        memory = _dense_memory("layer_masks", f"the product of {num} layer masks", dense, stored=num, layers=num)
        return None, [
            _heads_union(m, head_axis, f"layer_masks[{l}]", memory=memory if l == 0 else None)
            for l, m in enumerate(layer_masks)
        ]
    memory = _dense_memory("layer_masks", "the product of {num} layer masks", dense, stacked=True)
    return None, _heads_union(layer_masks, head_axis, "layer_masks", layer_axis=True, memory=memory)


def _reachability_layers(layer_masks, num_layers: int | None, method: str, delay: float | None) -> jax.Array:
    """``A_L ⊗ … ⊗ A_1`` for per-layer masks (the body of :func:`reachability`; `delay`: its progress)."""
    stacked, traced = _stack_layer_masks(layer_masks, method)
    delay = None if traced else delay
    num, n = stacked.shape[0], stacked.shape[-1]
    if num_layers is not None and num_layers != num:
        raise ParameterError(
            f"`num_layers` must be None or equal to the number of `layer_masks` ({num}); got {num_layers}."
        )
    batch = math.prod(stacked.shape[1:-2])
    if num == 1 or batch == 0:  # one layer is A_1; an empty batch gives an empty result
        return jnp.asarray(stacked[0])
    nnz, nnz_max = (float(n * n), n * n) if traced or method == "matmul" else _nnz(stacked)
    if method == "auto" and traced:
        method = "matmul"
    elif method == "auto":
        mm, bp = _rounds_costs(n, nnz, num - 1, num - 1)
        method = "bitpacked" if bp < mm else "matmul"
    what = f"the product of {num} layer masks"
    if method == "bitpacked":
        _check_bitpacked_memory(n, nnz_max, batch, what, "layer_masks")
        layers_last = jnp.moveaxis(stacked, 0, -3) if traced else np.moveaxis(stacked, 0, -3)
        with progress_bar(delay, f"product of {num} layers (bit-packed)", "rounds") as bar:
            return _on_host(_host_product, layers_last, stacked.shape[1:], bar=bar)
    _check_matmul_memory(n, batch, num, what, "layer_masks")
    size = _padded_size(n)
    with _matmul_bar(delay, f"product of {num} layers", size, batch, num - 1) as bar:
        r, count = _product_matmul(_pad(stacked, size), _matmul_dtype())
        _count_products(bar, count)
    return _unpad(r, n, traced)


def _reachability_structured(mask, num_layers, layer_masks, method, delay: float | None = None) -> IntervalMask:
    """The structured route for :class:`IntervalMask` input (the body of :func:`reachability`; `delay`: progress)."""
    if method not in ("auto", "structured"):  # a dense route asked for: the dense array, after its memory check, as
        # flow_summary takes it (a fresh user: reachability and convergence_depth refused what flow_summary ran)
        if mask is not None and layer_masks is not None:  # as the structured route says (it recursed: a review)
            raise MaskError(
                "Pass either `mask` (the same mask in every layer) or `layer_masks` (one per layer), not both; "
                "got both."
            )
        # the route's memory from the shape first: the dense copy alone took 50 s at n = 100000 before the route
        # refused (a fresh user)
        n = (mask if layer_masks is None else next(m for m in layer_masks if isinstance(m, IntervalMask))).n
        if layer_masks is None:
            what = "the reachability limit" if num_layers is None else f"R^({num_layers})"
            _dense_memory("mask", what, method, route=num_layers != 1)((n, n))
        else:
            num = len(layer_masks)
            _dense_memory("layer_masks", f"the product of {num} layer masks", method, stored=num, layers=num)((n, n))
        if layer_masks is not None:
            dense_layers = [
                m.to_dense(name=f"layer_masks[{l}]") if isinstance(m, IntervalMask) else m
                for l, m in enumerate(layer_masks)
            ]
            out = reachability(None, num_layers, layer_masks=dense_layers, method=method, progress=_off(delay))
        else:
            out = reachability(mask.to_dense(name="mask"), num_layers, method=method, progress=_off(delay))
        return IntervalMask.from_dense(np.asarray(out), name="mask")

    @no_type_check  # a closure made per call: not re-decorated by the test suite's type-check hook each time (see pyproject)
    def dense(why=None):
        out = np.asarray(reachability(mask.to_dense(), num_layers, method="bitpacked", progress=_off(delay)))
        return IntervalMask.from_dense(out, name="mask")

    @no_type_check  # a closure made per call (see above)
    def factored_route():  # a union of interleaved components (a dilated window, n no multiple of its stride): the
        # union of their R^(L); a Kronecker product P ⊗ C (a 2-D neighbourhood): R^(L) = P^(L) ⊗ C^(L)
        from ._components import components, interleave
        from ._product import kron, kron_factors

        what = "R" if num_layers is None else f"R^({num_layers})"
        recorded = components(mask)  # a disjoint union of interleaved components (a dilated window): their R^(L)
        if recorded is not None:
            w, groups = recorded
            parts = [reachability(b, num_layers, progress=_off(delay)) for b, _ in groups]
            with progress_bar(delay, f"{what} as the union of its components'", "rows", total=mask.n) as bar:
                return interleave(parts, w, groups, bar=bar)
        factors = kron_factors(mask.with_diagonal())
        if factors is None:
            return None
        parts = [reachability(f, num_layers, progress=_off(delay)) for f in factors]
        # a fresh user: the factors' bars ended, then the build of a large output ran on for 25 s without one
        with progress_bar(delay, f"{what} as the product of its factors'", "rows", total=mask.n) as bar:
            return kron(*parts, bar=bar)

    # R^(1) is A itself; up to _DENSE_FALLBACK_N the bit-packed route builds an output of many runs faster than the
    # product of the factors' outputs does (a review: dilated(6002, 4, 4), 1501 runs a row, 0.65 s against 3.4 s)
    if layer_masks is None and num_layers != 1 and mask.n > _DENSE_FALLBACK_N:
        answer = product_first(mask, method, factored_route)
        if answer is not None:
            return answer
    if layer_masks is None and method == "auto" and _prefer_dense(mask):
        return dense()
    if layer_masks is not None:
        if mask is not None:
            raise MaskError(
                "Pass either `mask` (the same mask in every layer) or `layer_masks` (one per layer), not both; "
                "got both."
            )
        layers = [_as_intervals(m, f"layer_masks[{l}]") for l, m in enumerate(layer_masks)]
        ns = {m.n for m in layers}
        if len(ns) != 1:
            raise MaskError(f"`layer_masks` must all have the same n; got n in {sorted(ns)}.")
        if num_layers is not None and num_layers != len(layers):
            raise ParameterError(
                f"`num_layers` must be None or equal to the number of `layer_masks` ({len(layers)}); got {num_layers}."
            )
        with progress_bar(delay, f"product of {len(layers)} layers (structured)", "products") as bar:
            return product([m.with_diagonal() for m in layers], bar=bar)
    return structured_or_dense(
        mask,
        method,
        lambda: _structured_power(PowerTable(mask.with_diagonal(), name="mask"), num_layers, delay),
        dense,
        num_layers,
    )


def _off(delay: float | None) -> bool | float:
    """A `delay` as the `progress` argument of a public function (False for None)."""
    return False if delay is None else delay


def _structured_power(table: PowerTable, num_layers, delay: float | None, note: str = "") -> IntervalMask:
    """``R`` or ``R^(num_layers)`` from `table`, with a progress bar counting the products."""
    what = "R" if num_layers is None else f"R^({num_layers})"
    with progress_bar(delay, f"{what} (structured)", "products") as bar:
        bar.note(note)
        return table.limit(bar) if num_layers is None else table.power(num_layers, bar)


def _dense_via_structured_batch(
    a: np.ndarray, num_layers, delay: float | None = None, method: str = "structured"
) -> jax.Array:
    """The structured route for a concrete dense stack ``(*batch, n, n)`` (adjacencies), mask by mask.

    Under ``method="auto"`` a mask whose powers' runs multiply goes to the bit-packed route as an IntervalMask
    does (:func:`hassejax.order._route_rules.structured_or_dense`): a few runs a row need not stay few in a power
    (a random sparse mask of at most 4 keys a row, n = 1024)."""
    n = a.shape[-1]
    flat = a.reshape(-1, n, n)
    out = np.empty_like(flat)
    what = "the reachability limit" if num_layers is None else f"R^({num_layers})"
    short = "R" if num_layers is None else f"R^({num_layers})"
    for b in range(flat.shape[0]):
        intervals = IntervalMask.from_dense(flat[b], name="mask")
        table = PowerTable(intervals, name="mask")
        note = f"mask {b + 1}/{flat.shape[0]}" if flat.shape[0] > 1 else ""

        @no_type_check  # a closure made per call (see pyproject)
        def structured(table=table, note=note):
            return _structured_power(table, num_layers, delay, note).to_dense()

        @no_type_check
        def dense(why=None, one=flat[b]):
            _check_bitpacked_memory(n, int(np.count_nonzero(one)), 1, what, "mask", power=num_layers is not None)
            with progress_bar(delay, f"{short} (bit-packed)", "batches" if num_layers is None else "levels") as bar:
                return _host_closure(one, bar) if num_layers is None else _host_power(one, num_layers, bar)

        out[b] = (
            structured() if method != "auto" else structured_or_dense(intervals, "auto", structured, dense, num_layers)
        )
    return jnp.asarray(out.reshape(a.shape))


def _dense_via_structured(mask, num_layers, layer_masks, delay: float | None = None) -> jax.Array:
    """``method="structured"`` for dense input: convert, run the structured route, return dense."""
    if layer_masks is not None:
        if mask is not None:
            raise MaskError(
                "Pass either `mask` (the same mask in every layer) or `layer_masks` (one per layer), not both; "
                "got both."
            )
        layers = layer_masks if isinstance(layer_masks, Sequence) else list(np.asarray(layer_masks))
        if not any(isinstance(m, IntervalMask) for m in layers) and any(np.ndim(m) > 2 for m in layers):
            # layers of shape (*batch, n, n): each member's layers in turn, as `mask` with a batch (fresh-user check)
            stacked, traced = _stack_layer_masks(layer_masks, "bitpacked")
            if traced:
                raise ParameterError(
                    "`method` = 'structured' needs concrete `layer_masks` (it converts to IntervalMasks on the host); "
                    "got traced ones. Use method='matmul' or 'bitpacked' under jit/vmap."
                )
            out = np.empty(stacked.shape[1:], dtype=bool)
            for idx in np.ndindex(*stacked.shape[1:-2]):
                member = [_as_intervals(a[idx], f"layer_masks[{l}]") for l, a in enumerate(stacked)]
                out[idx] = _reachability_structured(None, num_layers, member, "structured", delay).to_dense()
            return jnp.asarray(out)
        r = _reachability_structured(
            None, num_layers, [_as_intervals(m, "layer_masks") for m in layers], "structured", delay
        )
    else:
        if mask is None:
            raise MaskError(
                "`mask` must be a Boolean array of shape (*batch, n, n) unless `layer_masks` is given; got None."
            )
        what = "the reachability limit" if num_layers is None else f"R^({num_layers})"
        a, traced = _prepare(mask, memory=_dense_memory("mask", what, "bitpacked"))
        if traced:
            raise ParameterError(
                "`method` = 'structured' needs a concrete mask (it converts to an IntervalMask on the host); "
                "got a traced one. Use method='matmul' or 'bitpacked' under jit/vmap."
            )
        if math.prod(a.shape[:-2]) == 0:
            return jnp.asarray(a)
        n = a.shape[-1]
        nnz = int(np.count_nonzero(a.reshape(-1, n, n), axis=(1, 2)).max()) + n
        with warn_if_forced_structured(n, "structured", nnz):  # as for an IntervalMask: once a call
            return _dense_via_structured_batch(a, num_layers, delay)
    return jnp.asarray(r.to_dense())
