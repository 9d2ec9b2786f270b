"""Reachability closure of attention masks (spec hasse.md §0–1; DESIGN.md "Principles", "Scale").

Convention (spec §0): a mask ``M`` has shape ``(..., n, n)``; ``M[i, j] = True`` means query
position ``i`` may attend to key position ``j``. Read as a graph, ``M`` has an edge
``i -> j`` ("i attends to j"; information flows from ``j`` to ``i``), and

- ``A = M | I`` is one layer with its residual stream (spec §1.1);
- ``R^(L) = A^L`` (Boolean power) is the flow after ``L`` layers: ``R^(L)[i, j]`` is True iff
  output ``i`` after ``L`` layers can depend on input ``j``, i.e. iff the graph has a walk of
  length at most ``L`` from ``i`` to ``j`` (spec §1.2);
- ``R`` is the limit, the reflexive-transitive closure: ``R[i, j]`` iff ``j`` is reachable
  from ``i`` (``networkx.transitive_closure(G, reflexive=True)`` of the graph with edges
  ``i -> j``); ``L*`` is the smallest ``L`` with ``R^(L) = R`` (spec §1.3).

Three exact routes compute these:

- ``"matmul"``: jitted Boolean matrix products as float matmuls (``float32`` inputs on the CPU,
  ``bfloat16`` on accelerators, always with ``float32`` accumulation, which counts exactly up
  to ``2**24``, far beyond any ``n`` that fits in memory) thresholded at ``0.5``; the limit by repeated squaring with an early exit in a
  :func:`jax.lax.while_loop`, ``R^(L)`` by binary exponentiation (``O(log L)`` products),
  ``L*`` by doubling and a binary search over the stored powers (``O(log L*)`` products).
  Works under :func:`jax.jit` and :func:`jax.vmap`.
- ``"bitpacked"``: bit-packed rows propagated on the host along a topological order of the
  strongly connected components (:mod:`hassejax.order._bitpacked`); the fast route for large
  sparse masks. Under a trace it runs as a :func:`jax.pure_callback`.
- ``"structured"``: masks given as :class:`~hassejax.masks.IntervalMask` (sorted key runs per
  row) are closed on interval rows by sparse-table products, ``O(n · k log n)`` each, with no
  ``n × n`` array (:mod:`hassejax.order._structured`): the route for long contexts. The result
  is an :class:`~hassejax.masks.IntervalMask` too; dense input with ``method="structured"`` is
  converted there and back.

``L*`` (:func:`convergence_depth`) has the same three routes; on the bit-packed one it is a
multi-source breadth-first search on packed rows that yields ``L*`` and ``R`` in one pass
(:func:`hassejax.order._bitpacked.depth_bitpacked`).

``method="auto"`` takes the structured route for an :class:`~hassejax.masks.IntervalMask` and for
a concrete dense mask with ``n >= 1024`` whose rows are at most 4 runs of keys (the dense result
is returned); otherwise it picks by a cost estimate from ``n``, the number of nonzeros and the
backend; inside a trace (``jit``/``vmap``) it always picks ``"matmul"``.

Concrete (non-traced) inputs are prepared with NumPy on the host, and the matmul kernels see
``n`` rounded up to a multiple of 32 for ``n <= 1024`` (padding positions are isolated: they
change neither ``R`` nor ``L*``), so that masks of many sizes share a few compilations.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Int

from .._checks import as_mask, check_memory
from ..errors import MaskError, ParameterError
from ..masks._intervals import IntervalMask, check_host_memory
from ._structured import PowerTable, product
from ._bitpacked import bitpacked_bytes, closure_bitpacked, num_words, product_bitpacked

__all__ = ["layer_adjacency", "reachability", "convergence_depth", "heads_union", "METHODS"]

#: The routes accepted by ``method``.
METHODS = ("auto", "matmul", "bitpacked", "structured")

# Cost model of ``method="auto"`` (seconds). Matmul throughput per backend in flop/s, and the
# bit-packed route's costs per edge, per propagation batch (at most n of them) and per output
# entry; calibrated on a 2-core x86 CPU (benchmarks/closure.py).
_FLOPS = {"cpu": 1.0e11, "gpu": 1.0e14, "tpu": 1.0e14}
_MATMUL_OVERHEAD_S = 5e-5
_BP_PER_EDGE_S = 4e-8
_BP_PER_BATCH_S = 3e-5
_BP_PER_ENTRY_S = 1.5e-9
_BP_PER_WORD_S = 1e-9
_BP_OVERHEAD_S = 3e-4


# --------------------------------------------------------------------------------------------
# validation and preparation
# --------------------------------------------------------------------------------------------


def _is_traced(x) -> bool:
    return isinstance(x, jax.core.Tracer)


def _check_method(method) -> str:
    if not isinstance(method, str) or method not in METHODS:
        raise ParameterError(f"`method` must be one of {METHODS}; got {method!r}.")
    return method


def _check_num_layers(num_layers) -> int | None:
    if num_layers is None:
        return None
    if isinstance(num_layers, (bool, np.bool_)) or not isinstance(num_layers, (int, np.integer)):
        raise ParameterError(
            f"`num_layers` must be a positive int (the number of layers L) or None (the limit); "
            f"got {num_layers!r} of type {type(num_layers).__name__}."
        )
    if num_layers < 1:
        raise ParameterError(
            f"`num_layers` must be >= 1 (R^(1) = A is one layer); got {int(num_layers)}."
        )
    return int(num_layers)


# --------------------------------------------------------------------------------------------
# heads of one layer (spec hasse.md §1.1: a layer's adjacency is the OR of its heads' masks, | I)
# --------------------------------------------------------------------------------------------


def _check_head_axis(head_axis, shape: tuple[int, ...], name: str, *, layer_axis: bool = False) -> int:
    """Normalise `head_axis`, an axis of one layer's mask, to an axis of `name` (shape `shape`).

    With `layer_axis`, `shape` has a leading layer axis that `head_axis` does not count.
    """
    if isinstance(head_axis, (bool, np.bool_)) or not isinstance(head_axis, (int, np.integer)):
        raise ParameterError(
            f"`head_axis` must be None or an int (the axis of one layer's mask that holds its heads); got "
            f"{head_axis!r} of type {type(head_axis).__name__}."
        )
    one = shape[1:] if layer_axis else shape
    ndim = len(one)
    whose = f"one layer's mask of `{name}`" if layer_axis else f"`{name}`"
    where = f"shape {one} after the leading layer axis" if layer_axis else f"shape {one}"
    if ndim < 3:
        raise ParameterError(
            f"`head_axis` = {int(head_axis)} needs {whose} to have a head axis before its last two (query, key) "
            f"axes, i.e. rank >= 3 (heads, n, n); got {where} (rank {ndim})."
        )
    axis = int(head_axis) + ndim if head_axis < 0 else int(head_axis)
    if not 0 <= axis < ndim - 2:
        raise ParameterError(
            f"`head_axis` must be an axis of {whose} before its last two (query, key) axes: one of 0 .. {ndim - 3} "
            f"or {-ndim} .. -3 (counted like NumPy) for {where}; got {int(head_axis)}."
        )
    return axis + 1 if layer_axis else axis


def _interval_heads_union(heads, head_axis, name: str) -> IntervalMask:
    """OR of a sequence of heads at least one of which is an :class:`IntervalMask` (``head_axis=0``)."""
    if isinstance(head_axis, (bool, np.bool_)) or not isinstance(head_axis, (int, np.integer)) or head_axis != 0:
        raise ParameterError(
            f"`head_axis` must be 0 for `{name}` given as a sequence of IntervalMask heads (the sequence is the "
            f"head axis); got {head_axis!r}."
        )
    heads = [_as_intervals(m, f"{name}[{h}]") for h, m in enumerate(heads)]
    ns = sorted({m.n for m in heads})
    if len(ns) != 1:
        raise MaskError(f"`{name}`: the heads of one layer must all have the same n; got n in {ns}.")
    check_host_memory(3 * sum(m.nbytes for m in heads), f"the union of {len(heads)} interval heads", name)
    return functools.reduce(operator.or_, heads)


def _heads_union(mask, head_axis, name: str = "mask", *, batched: bool = True, layer_axis: bool = False, memory=None):
    """The OR of the heads of `mask` along `head_axis` (the body of :func:`heads_union`).

    Concrete NumPy input gives a NumPy result, a ``jax.Array`` or a tracer a ``jax.Array`` (no
    full-size copy either way); a sequence holding an :class:`IntervalMask` gives an
    :class:`IntervalMask`. `memory` (see :func:`_dense_memory`) runs on the shape of the union
    before it is computed; with `layer_axis`, `mask` is a stack ``(L, …)`` of layers and
    `head_axis` counts the axes of one layer. Without `batched`, one layer's mask must be
    ``(heads, n, n)``.
    """
    if isinstance(mask, IntervalMask):
        raise ParameterError(
            f"`head_axis` = {head_axis!r} asks for the heads of `{name}`, but `{name}` is a single IntervalMask "
            "(one head). Pass the heads of a layer as a tuple of IntervalMask with head_axis=0, or head_axis=None."
        )
    if isinstance(mask, (list, tuple)):
        if len(mask) == 0:
            raise MaskError(f"`{name}` must hold at least one head along `head_axis`; got an empty {type(mask).__name__}.")
        if any(isinstance(m, IntervalMask) for m in mask):
            if layer_axis:
                raise MaskError(f"`{name}` must be a sequence of layers or a stacked array; got a sequence of IntervalMask.")
            return _interval_heads_union(mask, head_axis, name)
        shapes = [tuple(np.shape(m)) for m in mask]
        if any(sh != shapes[0] for sh in shapes[1:]):
            bad = next(i for i, sh in enumerate(shapes) if sh != shapes[0])
            raise MaskError(
                f"`{name}`: the heads of one layer must all have the same shape; `{name}[0]` has shape {shapes[0]} "
                f"but `{name}[{bad}]` has shape {shapes[bad]}."
            )
        mask = np.asarray(mask)
    if not hasattr(mask, "shape") or not hasattr(mask, "dtype"):
        raise MaskError(
            f"`{name}` must be a Boolean array with a head axis, e.g. of shape (heads, n, n), or a sequence of "
            f"IntervalMask heads; got an object of type {type(mask).__name__}."
        )
    shape = tuple(mask.shape)
    axis = _check_head_axis(head_axis, shape, name, layer_axis=layer_axis)
    if not batched and len(shape) != 3:
        raise MaskError(
            f"`{name}` with `head_axis` must have shape (heads, n, n) here (one layer's heads, no batch axes); "
            f"got shape {shape}."
        )
    if shape[axis] == 0:
        raise MaskError(f"`{name}` must hold at least one head along `head_axis` = {int(head_axis)}; got shape {shape}.")
    if mask.dtype != np.bool_:
        raise MaskError(
            f"`{name}` must have dtype bool (True = may attend); got dtype {mask.dtype}. Convert explicitly, "
            "e.g. `mask.astype(bool)` for 0/1 'may attend' masks."
        )
    reduced = shape[:axis] + shape[axis + 1 :]
    if _is_traced(mask):
        return jnp.any(mask, axis=axis)
    if memory is not None and len(reduced) >= 2 and min(reduced[-2:]) > 0:
        memory(reduced)  # the caller's estimate for the union's shape; shape errors come from as_mask later
    if isinstance(mask, jax.Array):
        check_memory(math.prod(reduced), f"the union of {shape[axis]} heads, shape {reduced}", name)
        return jnp.any(mask, axis=axis)  # on the device; no host copy of the heads
    check_host_memory(math.prod(reduced), f"the union of {shape[axis]} heads, shape {reduced}", name)
    return np.any(np.asarray(mask), axis=axis)


def heads_union(
    mask: Bool[ArrayLike, "*batch_heads n n"] | Sequence[IntervalMask | Bool[ArrayLike, "n n"]], head_axis: int
) -> Bool[Array, "*batch n n"] | IntervalMask:
    """One layer's mask from its heads' masks: their OR along `head_axis` (spec hasse.md §1.1).

    Output ``i`` of a multi-head layer depends on input ``j`` iff some head lets ``i`` attend
    to ``j``, so a layer whose heads have masks ``M_1 … M_H`` has the adjacency
    ``(M_1 | … | M_H) | I``: the union of the heads is the layer's mask for everything in
    :mod:`hassejax.order`. :func:`reachability`, :func:`convergence_depth`,
    :meth:`~hassejax.order.HasseDiagram.from_mask` and :func:`~hassejax.order.flow_summary`
    call this for their `head_axis` argument.

    **Arguments:**

    - `mask`: bool array with a head axis, e.g. `(heads, n, n)` or `(*batch, heads, n, n)`;
      row = query, column = key, True = may attend. Or a sequence of heads
      ``[M_1, …, M_H]`` of which at least one is an :class:`~hassejax.masks.IntervalMask`
      (the others, dense `(n, n)`, are converted), with ``head_axis=0``.
    - `head_axis`: the axis of `mask` that holds the heads (negative counts from the end, as in
      NumPy); never one of the last two (query, key) axes.

    **Returns:** bool array of the shape of `mask` without `head_axis`; an
    :class:`~hassejax.masks.IntervalMask` for interval heads.

    **Raises:**

    - :class:`~hassejax.errors.ParameterError`: `head_axis` not an int, out of range, one of the
      last two axes, or not 0 for interval heads; a single :class:`~hassejax.masks.IntervalMask`.
    - :class:`~hassejax.errors.MaskError`: no heads, a non-Boolean mask, interval heads of
      different ``n``.
    - :class:`~hassejax.errors.MemoryBudgetError`: the union and its copies would not fit in the
      free memory (estimated from the shape before anything is copied).

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.order.closure import heads_union
    >>> heads = np.stack([np.eye(3, k=-1, dtype=bool), np.eye(3, k=-2, dtype=bool)])
    >>> heads_union(heads, 0).astype(int).tolist()    # head 0 sees i - 1, head 1 sees i - 2
    [[0, 0, 0], [1, 0, 0], [1, 1, 0]]

    ```

    Source: spec hasse.md §1.1 (the union of a layer's heads is (derived) from the layer's
    output being a sum over heads).
    """
    memory = _dense_memory("mask", "the union of the heads", route=False)
    union = _heads_union(mask, head_axis, "mask", memory=memory)
    return union if isinstance(union, IntervalMask) else jnp.asarray(union)


def _adjacency(m):
    """``m | I``: traced (jnp) for a tracer, else on the host (one NumPy copy, diagonal set)."""
    n = m.shape[-1]
    if _is_traced(m):
        return m | jnp.eye(n, dtype=bool)
    a = np.array(m, dtype=bool)
    diag = np.arange(n)
    a[..., diag, diag] = True
    return a


def _prepare(mask, name: str = "mask", memory=None):
    """Validate and return ``(A, traced)``: ``A = M | I`` as NumPy (concrete) or a tracer.

    `memory` (see :func:`_dense_memory`) runs on the validated shape before any copy.
    """
    m = as_mask(mask, name=name, memory=memory)
    traced = _is_traced(m)
    return _adjacency(m if traced else np.asarray(m)), traced


def _stack_layer_masks(layer_masks, method: str = "auto"):
    """Validate `layer_masks`; return ``(A_stack, traced)``, adjacencies of shape ``(L, *batch, n, n)``.

    The memory of the whole product is estimated from the shape of the first layer (sequence)
    or of the stack (array) before anything is copied.
    """
    if isinstance(layer_masks, Sequence) and not isinstance(layer_masks, str):
        if len(layer_masks) == 0:
            raise MaskError("`layer_masks` must hold at least one mask (one per layer); got an empty sequence.")
        num = len(layer_masks)
        memory = _dense_memory("layer_masks", f"the product of {num} layer masks", method, stored=num, layers=num)
        layers = [as_mask(m, name=f"layer_masks[{l}]", memory=memory if l == 0 else None) for l, m in enumerate(layer_masks)]
        shape = layers[0].shape
        for l, m in enumerate(layers):
            if m.shape != shape:
                raise MaskError(
                    f"`layer_masks` must all have the same shape (*batch, n, n); layer_masks[0] has shape "
                    f"{shape} but layer_masks[{l}] has shape {m.shape}."
                )
        traced = any(_is_traced(m) for m in layers)
        stacked = jnp.stack(layers) if traced else np.stack([np.asarray(m) for m in layers])
    else:
        memory = _dense_memory("layer_masks", "the product of {num} layer masks", method, stacked=True)
        stacked = as_mask(layer_masks, name="layer_masks", memory=memory)
        if stacked.ndim < 3:
            raise MaskError(
                "`layer_masks` must be a sequence of masks or an array stacked along a leading layer axis, "
                f"shape (L, *batch, n, n); got an array of shape {stacked.shape} (rank {stacked.ndim}). "
                "For a single mask pass it as `mask`; the batch axis always means independent masks."
            )
        if stacked.shape[0] == 0:
            raise MaskError(
                "`layer_masks` must hold at least one mask (one per layer); got an array with an empty "
                f"leading layer axis, shape {stacked.shape}. An empty batch axis comes after the layer axis: "
                "(L, 0, n, n)."
            )
        traced = _is_traced(stacked)
        stacked = stacked if traced else np.asarray(stacked)
    return _adjacency(stacked), traced


def _padded_size(n: int) -> int:
    """Size the matmul kernels see: a multiple of 32 up to n = 1024 (few compilations), else n."""
    return n if n > 1024 else 32 * max(1, -(-n // 32))


def _pad(a, size: int):
    """Append ``size - n`` isolated positions (diagonal only) to the last two axes of ``a``."""
    n = a.shape[-1]
    if size == n:
        return a
    xp = jnp if _is_traced(a) else np
    widths = [(0, 0)] * (a.ndim - 2) + [(0, size - n), (0, size - n)]
    return xp.pad(a, widths) | xp.eye(size, dtype=bool)


def _unpad(r, n: int, traced: bool):
    """Cut the padding off a kernel result (on the host for concrete inputs: no per-n compile)."""
    if r.shape[-1] == n:
        return r
    if traced:
        return r[..., :n, :n]
    return jnp.asarray(np.asarray(r)[..., :n, :n])


# --------------------------------------------------------------------------------------------
# the matmul route (jitted kernels; each also returns its number of Boolean products)
# --------------------------------------------------------------------------------------------


def _matmul_dtype():
    """bfloat16 inputs on accelerators; float32 on the CPU, where XLA's bf16 dot is slower."""
    return jnp.float32 if jax.default_backend() == "cpu" else jnp.bfloat16


def _bool_matmul(x, y, dtype):
    """Boolean product ``(x ⊗ y)[i, j] = OR_k x[i, k] AND y[k, j]`` via a float matmul."""
    prod = jnp.matmul(x.astype(dtype), y.astype(dtype), preferred_element_type=jnp.float32)
    return prod > 0.5


@functools.partial(jax.jit, static_argnames="dtype")
def _closure_matmul(a, dtype):
    """The limit of ``A, A^2, A^4, …`` by repeated squaring until a square changes nothing.

    ``ceil(log2 L*) + 1`` products (the last one confirms the fixed point).
    """

    def body(state):
        r, _, count = state
        r2 = _bool_matmul(r, r, dtype)
        return r2, jnp.any(r2 != r), count + 1

    r, _, count = jax.lax.while_loop(lambda s: s[1], body, (a, jnp.array(True), jnp.int32(0)))
    return r, count


@functools.partial(jax.jit, static_argnames="dtype")
def _power_matmul(a, exponent, dtype):
    """``A^exponent`` (``exponent >= 1``, traced) by binary exponentiation with an early exit.

    Invariant: ``A^exponent = result ⊗ base^e`` (``result = I`` while ``have`` is False). If a
    squaring leaves ``base = A^(2^k)`` unchanged, ``base`` is the closure ``R`` and, as the
    remaining ``e >= 1``, ``A^exponent = R``. At most ``2 floor(log2 exponent)`` products.
    """

    def body(state):
        result, base, e, have, count = state
        bit = (e & 1) == 1

        def multiply(_):
            new = jax.lax.cond(have, lambda: _bool_matmul(result, base, dtype), lambda: base)
            return new, count + have.astype(jnp.int32)

        result, count = jax.lax.cond(bit, multiply, lambda _: (result, count), None)
        have = have | bit
        e = e >> 1

        def square(_):
            sq = _bool_matmul(base, base, dtype)
            return sq, jnp.all(sq == base), count + 1

        base2, closed, count = jax.lax.cond(e > 0, square, lambda _: (base, jnp.array(False), count), None)
        result = jnp.where(closed, base, result)
        e = jnp.where(closed, 0, e)
        return result, base2, e, have, count

    init = (a, a, jnp.asarray(exponent, jnp.int32), jnp.array(False), jnp.int32(0))
    result, _, _, _, count = jax.lax.while_loop(lambda s: s[2] > 0, body, init)
    return result, count


@functools.partial(jax.jit, static_argnames="dtype")
def _product_matmul(stacked, dtype):
    """``A_L ⊗ … ⊗ A_1`` for ``stacked = [A_1, …, A_L]`` (layer axis first), by a scan."""

    def step(r, a_l):
        return _bool_matmul(a_l, r, dtype), None

    r, _ = jax.lax.scan(step, stacked[0], stacked[1:])
    return r, jnp.int32(stacked.shape[0] - 1)


def _num_stored_powers(n: int) -> int:
    """Slots for ``P_k = A^(2^k)``, ``k = 0 … ceil(log2(max(1, n - 1))) + 1``."""
    return math.ceil(math.log2(max(1, n - 1))) + 2


def _depth_one(a, dtype):
    """``L*`` of one ``A`` (n, n): doubling, then a binary search over the stored powers.

    Doubling stores ``P_k = A^(2^k)`` until ``P_k = P_(k-1)`` (k products). Then ``L* = 1`` if
    ``k = 1``; otherwise ``2^(k-2) < L* <= 2^(k-1)`` and the search keeps ``X = A^c ≠ R`` while
    trying ``X ⊗ P_j = A^(c + 2^j)`` for ``j = k-3, …, 0`` (k − 2 products), giving ``L* = c + 1``.
    In all ``2 ceil(log2 L*)`` products for ``L* >= 2``, one for ``L* = 1``.
    """
    n = a.shape[-1]
    slots = _num_stored_powers(n)
    powers = jnp.zeros((slots, n, n), dtype=bool).at[0].set(a)

    def double(state):
        powers, k, cur, _, count = state
        nxt = _bool_matmul(cur, cur, dtype)
        powers = jax.lax.dynamic_update_index_in_dim(powers, nxt, jnp.minimum(k + 1, slots - 1), 0)
        return powers, k + 1, nxt, jnp.any(nxt != cur), count + 1

    init = (powers, jnp.int32(0), a, jnp.array(True), jnp.int32(0))
    powers, k, closure, _, count = jax.lax.while_loop(lambda s: s[3], double, init)

    def search(state):
        j, x, c, count = state
        y = _bool_matmul(x, jax.lax.dynamic_index_in_dim(powers, j, 0, keepdims=False), dtype)
        grow = jnp.any(y != closure)
        return j - 1, jnp.where(grow, y, x), c + jnp.where(grow, jnp.left_shift(1, j), 0), count + 1

    start = jnp.maximum(k - 2, 0)
    x0 = jax.lax.dynamic_index_in_dim(powers, start, 0, keepdims=False)
    c0 = jnp.where(k >= 2, jnp.left_shift(1, start), 0).astype(jnp.int32)
    _, _, c, count = jax.lax.while_loop(lambda s: s[0] >= 0, search, (k - 3, x0, c0, count))
    return jnp.where(k >= 2, c + 1, 1).astype(jnp.int32), count


@functools.partial(jax.jit, static_argnames="dtype")
def _depth_matmul(a, dtype):
    """:func:`_depth_one` over a stack ``(B, n, n)``: ``(depths, products)``, each of shape ``(B,)``."""
    return jax.vmap(lambda x: _depth_one(x, dtype))(a)


# --------------------------------------------------------------------------------------------
# the bit-packed route (host)
# --------------------------------------------------------------------------------------------


def _host_closure(a) -> np.ndarray:
    """Limit for ``a`` of shape ``(..., n, n)`` (adjacencies), one mask at a time."""
    a = np.asarray(a, dtype=bool)
    if a.ndim == 2:
        return closure_bitpacked(a)[0]
    n = a.shape[-1]
    flat = a.reshape(-1, n, n)
    out = np.empty_like(flat)
    for b in range(flat.shape[0]):
        out[b] = closure_bitpacked(flat[b])[0]
    return out.reshape(a.shape)


def _host_power(a, num_layers) -> np.ndarray:
    """``A^num_layers`` for ``a`` of shape ``(..., n, n)`` (adjacencies), by sparse rounds.

    `num_layers` may come as an array (it does through :func:`jax.pure_callback`).
    """
    a = np.asarray(a, dtype=bool)
    num_layers = int(np.ravel(num_layers)[0])
    n = a.shape[-1]
    flat = a.reshape(-1, n, n)
    out = np.empty_like(flat)
    for b in range(flat.shape[0]):
        out[b] = product_bitpacked([flat[b]] * num_layers)[0]
    return out.reshape(a.shape)


def _host_product(layers) -> np.ndarray:
    """Per-layer product for ``layers`` of shape ``(..., L, n, n)`` (layer axis third from last)."""
    layers = np.asarray(layers, dtype=bool)
    num, n = layers.shape[-3], layers.shape[-1]
    flat = layers.reshape(-1, num, n, n)
    out = np.empty((flat.shape[0], n, n), dtype=bool)
    for b in range(flat.shape[0]):
        out[b] = product_bitpacked(list(flat[b]))[0]
    return out.reshape(layers.shape[:-3] + (n, n))


def _on_host(fn, x, out_shape, *args):
    """Run a host kernel on a concrete array, or through :func:`jax.pure_callback` under a trace.

    `fn` is a module-level function (a stable callback: no recompilation per call); extra
    arguments travel as arrays.
    """
    if _is_traced(x):
        spec = jax.ShapeDtypeStruct(out_shape, jnp.bool_)
        extra = [jnp.asarray(v) for v in args]
        return jax.pure_callback(fn, spec, x, *extra, vmap_method="expand_dims")
    return jnp.asarray(fn(x, *args))


# --------------------------------------------------------------------------------------------
# route choice and memory
# --------------------------------------------------------------------------------------------


def _matmul_bytes(n: int, batch: int, stored: int, dtype) -> int:
    """Peak bytes of the matmul route: per mask ``stored`` bool matrices plus the working set
    (four bool matrices, two input casts and one float32 product)."""
    return batch * n * n * (stored + 4 + 2 * jnp.dtype(dtype).itemsize + 4)


def _check_matmul_memory(n: int, batch: int, stored: int, what: str, name: str) -> None:
    need = _matmul_bytes(_padded_size(n), batch, stored, _matmul_dtype())
    check_memory(need, f"{what} (matmul route, n = {n}, batch = {batch})", name)


def _check_bitpacked_memory(n: int, nnz: int, batch: int, what: str, name: str) -> None:
    need = bitpacked_bytes(n, nnz) + 2 * batch * n * n
    check_memory(need, f"{what} (bit-packed route, n = {n}, batch = {batch})", name)


#: Advice of every dense-route memory error: structured masks need no (n, n) array.
_STRUCTURED_HINT = (
    "A mask whose rows are a few intervals of keys (causal, sliding windows, sink or global tokens, "
    "prefix-LM, blocks, documents) needs no dense (n, n) array: build it with a structured constructor "
    "in its interval form (an IntervalMask, hassejax.masks) instead of a dense array; otherwise use a "
    "smaller n or batch."
)


def _dense_bytes(n: int, batch: int, method: str, stored: int, copies: int, route: bool = True) -> int:
    """Least peak bytes of the dense routes for `batch` masks of `n` positions, from sizes alone.

    `copies` bool ``(n, n)`` copies per mask made while preparing the input (the device copy of
    :func:`as_mask`, the host adjacency ``M | I``), plus, with `route`, the cheaper of the routes
    `method` allows: the matmul route with `stored` stored matrices (:func:`_matmul_bytes`) or the
    bit-packed route with the fewest nonzeros (:func:`bitpacked_bytes`). A lower bound: the route
    checks that follow, which know the nonzeros, can only ask for more.
    """
    if batch == 0:
        return 0
    need = copies * batch * n * n
    if route:
        matmul = _matmul_bytes(_padded_size(n), batch, stored, _matmul_dtype())
        bitpacked = bitpacked_bytes(n, n) + 2 * batch * n * n
        need += {"matmul": matmul, "bitpacked": bitpacked}.get(method, min(matmul, bitpacked))
    return need


def _dense_memory(
    name: str,
    what: str,
    method: str = "auto",
    stored: int = 0,
    *,
    layers: int = 1,
    stacked: bool = False,
    route: bool = True,
    extra: int = 0,
):
    """A memory check for :func:`as_mask` (its `memory`): from the shape alone, before any copy.

    The returned callable takes the validated shape ``(*batch, n, n)`` (``(L, *batch, n, n)``
    with `stacked`, when ``{num}`` in `what` becomes ``L``; `layers` masks of that shape
    otherwise) and raises
    :class:`~hassejax.errors.MemoryBudgetError` naming `name`, `n`, the estimate and the free
    memory, with :data:`_STRUCTURED_HINT`. `extra` bool ``(n, n)`` matrices per mask are added
    for work done after the closure (e.g. the Hasse diagram's classes).
    """

    def check(shape: tuple[int, ...]) -> None:
        if stacked and len(shape) < 3:
            return  # not a stack: the caller's shape error comes next
        num = shape[0] if stacked else layers
        n = shape[-1]
        batch = math.prod(shape[1:-2] if stacked else shape[:-2])
        copies = 2 * num + extra
        need = _dense_bytes(n, batch, method, stored if not stacked else num, copies, route)
        check_memory(
            need,
            f"{what.format(num=num) if stacked else what} of n = {n} positions (batch {batch}) on the dense routes",
            name,
            hint=_STRUCTURED_HINT,
        )

    return check


def _matmul_seconds(n: int, products: int) -> float:
    return products * 2.0 * n**3 / _FLOPS.get(jax.default_backend(), _FLOPS["cpu"]) + _MATMUL_OVERHEAD_S


def _closure_costs(n: int, nnz: int | float) -> tuple[float, float]:
    """Estimated seconds per mask of the limit: (matmul, bitpacked).

    Matmul: two products (a closed mask needs one; long chains up to log2(n) + 1).
    Bit-packed: per edge, per batch (at most n of them) and per output entry.
    """
    matmul = _matmul_seconds(n, 2)
    bitpacked = _BP_OVERHEAD_S + _BP_PER_EDGE_S * nnz + _BP_PER_BATCH_S * n + _BP_PER_ENTRY_S * n * n
    return matmul, bitpacked


def _rounds_costs(n: int, nnz: int | float, rounds: int, products: int) -> tuple[float, float]:
    """Estimated seconds per mask of a finite product: (matmul, bit-packed rounds)."""
    matmul = _matmul_seconds(n, products)
    per_round = _BP_PER_WORD_S * (nnz + n) * num_words(n) + 2e-5
    bitpacked = _BP_OVERHEAD_S + rounds * per_round + _BP_PER_ENTRY_S * n * n
    return matmul, bitpacked


def _nnz(a: np.ndarray) -> tuple[float, int]:
    """Mean and largest number of nonzeros per mask of ``a`` (``(..., n, n)``)."""
    per_mask = np.count_nonzero(a.reshape((-1,) + a.shape[-2:]), axis=(-2, -1))
    return float(per_mask.mean()), int(per_mask.max())


# --------------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------------


def layer_adjacency(mask: Bool[ArrayLike, "*batch n n"]) -> Bool[Array, "*batch n n"]:
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

    Source: Li & Guo, arXiv:2606.09951 (paper); spec hasse.md §1.1.
    """
    a, _ = _prepare(mask, memory=_dense_memory("mask", "the adjacency M | I", route=False))
    return jnp.asarray(a)


def reachability(
    mask: Bool[ArrayLike, "*batch_heads n n"] | IntervalMask | Sequence[IntervalMask | Bool[ArrayLike, "n n"]] | None,
    num_layers: int | None = None,
    *,
    layer_masks: Sequence[Bool[ArrayLike, "*batch_heads n n"] | IntervalMask | Sequence[IntervalMask | Bool[ArrayLike, "n n"]]]
    | Bool[ArrayLike, "layers *batch_heads n n"]
    | None = None,
    method: str = "auto",
    head_axis: int | None = None,
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
      :class:`~hassejax.masks.IntervalMask` (any ``n``; structured route). Must be ``None``
      when `layer_masks` is given.
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
      connected components for the limit, ``L − 1`` sparse rounds otherwise; a
      :func:`jax.pure_callback` under a trace) or ``"auto"`` (a cost estimate from ``n``, the
      nonzeros and the backend; always ``"matmul"`` under a trace; ``"structured"`` for
      :class:`~hassejax.masks.IntervalMask` input), or ``"structured"`` (interval rows; dense
      input converted there and back).

    **Returns:** bool array of shape `(*batch, n, n)` (an empty one for an empty batch axis,
    on every route); an :class:`~hassejax.masks.IntervalMask` for interval input.

    **Raises:**

    - :class:`~hassejax.errors.MaskError`: a mask that is not Boolean, not square, of rank < 2;
      `layer_masks` empty, unstacked or of unequal shapes; both or neither of `mask` and
      `layer_masks`.
    - :class:`~hassejax.errors.ParameterError`: `num_layers` not a positive int, or disagreeing
      with ``len(layer_masks)``; an unknown `method`; a `head_axis` that is not an int, out of
      range or one of the last two axes (see :func:`heads_union`).
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
    if head_axis is not None:
        mask, layer_masks = _union_layer_heads(mask, layer_masks, head_axis, num_layers, method)
    if isinstance(mask, IntervalMask) or (
        mask is None and isinstance(layer_masks, Sequence) and any(isinstance(m, IntervalMask) for m in layer_masks)
    ):
        return _reachability_structured(mask, num_layers, layer_masks, method)
    if method == "structured":
        return _dense_via_structured(mask, num_layers, layer_masks)
    if layer_masks is not None:
        if mask is not None:
            raise MaskError(
                "Pass either `mask` (the same mask in every layer) or `layer_masks` (one per layer), not both; "
                "got both."
            )
        return _reachability_layers(layer_masks, num_layers, method)
    if mask is None:
        raise MaskError("`mask` must be a Boolean array of shape (*batch, n, n) unless `layer_masks` is given; got None.")

    what = "the reachability limit" if num_layers is None else f"R^({num_layers})"
    a, traced = _prepare(mask, memory=_dense_memory("mask", what, method, route=num_layers != 1))
    n = a.shape[-1]
    batch = math.prod(a.shape[:-2])
    if num_layers is not None and num_layers >= max(1, n - 1):
        num_layers = None  # L* <= max(1, n - 1): the flow has converged
    if num_layers == 1 or batch == 0:  # one layer is A; an empty batch gives an empty result
        return jnp.asarray(a)

    if method == "auto" and not traced and n >= _STRUCTURED_MIN_N and _few_runs(a.reshape(-1, n, n)).all():
        return _dense_via_structured_batch(a, num_layers)
    nnz, nnz_max = (float(n * n), n * n) if traced or method == "matmul" else _nnz(a)
    if method == "auto" and traced:
        method = "matmul"
    elif method == "auto":
        if num_layers is None:
            mm, bp = _closure_costs(n, nnz)
        else:
            mm, bp = _rounds_costs(n, nnz, num_layers - 1, 2 * math.ceil(math.log2(num_layers)))
        method = "bitpacked" if bp < mm else "matmul"

    what = "the reachability limit" if num_layers is None else f"R^({num_layers})"
    if method == "bitpacked":
        _check_bitpacked_memory(n, nnz_max, batch, what, "mask")
        if num_layers is None:
            return _on_host(_host_closure, a, a.shape)
        return _on_host(_host_power, a, a.shape, num_layers)

    dtype = _matmul_dtype()
    _check_matmul_memory(n, batch, 0 if num_layers is None else 1, what, "mask")
    padded = _pad(a, _padded_size(n))
    if num_layers is None:
        r, _ = _closure_matmul(padded, dtype)
    else:
        r, _ = _power_matmul(padded, num_layers, dtype)
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


def _reachability_layers(layer_masks, num_layers: int | None, method: str) -> jax.Array:
    """``A_L ⊗ … ⊗ A_1`` for per-layer masks (the body of :func:`reachability`)."""
    stacked, traced = _stack_layer_masks(layer_masks, method)
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
        return _on_host(_host_product, layers_last, stacked.shape[1:])
    _check_matmul_memory(n, batch, num, what, "layer_masks")
    r, _ = _product_matmul(_pad(stacked, _padded_size(n)), _matmul_dtype())
    return _unpad(r, n, traced)


# ``method="auto"``: concrete dense masks at least this long whose rows are at most
# ``_STRUCTURED_MAX_RUNS`` runs of keys take the structured route.
_STRUCTURED_MIN_N = 1024
_STRUCTURED_MAX_RUNS = 4


# An IntervalMask with more runs a row than that, up to this n, takes the dense bit-packed routes
# under ``method="auto"``: runs multiply under products (a dilated window's k runs become k² …),
# while the packed rows stay n/64 words.
_DENSE_FALLBACK_N = 16384


def _prefer_dense(m: IntervalMask) -> bool:
    """True for an interval mask with many runs a row that is short enough for the dense routes."""
    return m.num_runs > _STRUCTURED_MAX_RUNS and m.n <= _DENSE_FALLBACK_N


def _few_runs(flat: np.ndarray) -> np.ndarray:
    """Per mask of ``flat`` ``(B, n, n)``: True iff every row has at most ``_STRUCTURED_MAX_RUNS`` runs.

    Counted in row blocks (a run starts where a True follows a False), no ``n × n`` temporary.
    """
    b, n, _ = flat.shape
    out = np.ones(b, dtype=bool)
    step = max(1, (1 << 24) // n)
    for i in range(b):
        for r0 in range(0, n, step):
            rows = flat[i, r0 : r0 + step]
            runs = rows[:, 0].astype(np.int64) + np.count_nonzero(rows[:, 1:] & ~rows[:, :-1], axis=1)
            if runs.max() > _STRUCTURED_MAX_RUNS:
                out[i] = False
                break
    return out


def _reachability_structured(mask, num_layers, layer_masks, method) -> IntervalMask:
    """The structured route for :class:`IntervalMask` input (the body of :func:`reachability`)."""
    if method not in ("auto", "structured"):
        raise ParameterError(
            f"`method` = {method!r} is a dense route; an IntervalMask takes method='structured' or 'auto' "
            "(convert with `np.asarray(mask)` first for a dense route)."
        )
    if layer_masks is None and method == "auto" and _prefer_dense(mask):
        dense = np.asarray(reachability(mask.to_dense(), num_layers, method="bitpacked"))
        return IntervalMask.from_dense(dense, name="mask")
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
        return product([m.with_diagonal() for m in layers])
    table = PowerTable(mask.with_diagonal(), name="mask")
    return table.limit() if num_layers is None else table.power(num_layers)


def _as_intervals(m, name: str) -> IntervalMask:
    if isinstance(m, IntervalMask):
        return m
    a = as_mask(m, name, batched=False, memory=_dense_memory(name, "the interval form", "bitpacked"))
    return IntervalMask.from_dense(np.asarray(a), name=name)


def _dense_via_structured_batch(a: np.ndarray, num_layers) -> jax.Array:
    """The structured route for a concrete dense stack ``(*batch, n, n)`` (adjacencies), mask by mask."""
    n = a.shape[-1]
    flat = a.reshape(-1, n, n)
    out = np.empty_like(flat)
    for b in range(flat.shape[0]):
        table = PowerTable(IntervalMask.from_dense(flat[b], name="mask"), name="mask")
        out[b] = (table.limit() if num_layers is None else table.power(num_layers)).to_dense()
    return jnp.asarray(out.reshape(a.shape))


def _dense_via_structured(mask, num_layers, layer_masks) -> jax.Array:
    """``method="structured"`` for dense input: convert, run the structured route, return dense."""
    if layer_masks is not None:
        if mask is not None:
            raise MaskError(
                "Pass either `mask` (the same mask in every layer) or `layer_masks` (one per layer), not both; "
                "got both."
            )
        layers = layer_masks if isinstance(layer_masks, Sequence) else list(np.asarray(layer_masks))
        r = _reachability_structured(None, num_layers, [_as_intervals(m, "layer_masks") for m in layers], "structured")
    else:
        if mask is None:
            raise MaskError("`mask` must be a Boolean array of shape (*batch, n, n) unless `layer_masks` is given; got None.")
        what = "the reachability limit" if num_layers is None else f"R^({num_layers})"
        a, traced = _prepare(mask, memory=_dense_memory("mask", what, "bitpacked"))
        if traced:
            raise ParameterError(
                "`method` = 'structured' needs a concrete mask (it converts to an IntervalMask on the host); "
                "got a traced one. Use method='matmul' or 'bitpacked' under jit/vmap."
            )
        if math.prod(a.shape[:-2]) == 0:
            return jnp.asarray(a)
        return _dense_via_structured_batch(a, num_layers)
    return jnp.asarray(r.to_dense())


# Cost model of the convergence depth's route choice (seconds): the bit-packed depth route's
# fixed cost per level and per packed word per level (flag scans); see :func:`_depth_costs`.
_BP_DEPTH_PER_LEVEL_S = 3e-4
_BP_DEPTH_PER_SCAN_WORD_S = 1e-8


def _depth_levels_guess(n: int, nnz: int | float) -> int:
    """A rough ``L*`` for the cost model: the diameter of a random graph with the mask's mean
    out-degree, ``2 + log n / log degree``, within ``[1, max(1, n - 1)]`` (the real ``L*`` is
    only known after the work)."""
    degree = max(float(nnz) - n, 0.0) / max(n, 1)
    guess = 2 + math.ceil(math.log(max(n, 2)) / math.log(max(degree, 1.5)))
    return max(1, min(max(1, n - 1), guess))


def _depth_costs(n: int, nnz: int | float) -> tuple[float, float]:
    """Estimated seconds of ``L*`` for one mask with `nnz` nonzeros (diagonal included): (matmul, bit-packed).

    Matmul: ``2 ceil(log2 L)`` products for a guessed ``L*`` (:func:`_depth_levels_guess`).
    Bit-packed (:func:`hassejax.order._bitpacked.depth_bitpacked`): the closure without its
    bool output, then per level a fixed cost and scans of the ``n * n / 64`` packed words, and
    about three levels' worth of OR-ed words (``nnz * n / 64`` each; later levels are sparse).
    """
    levels = _depth_levels_guess(n, nnz)
    matmul = _matmul_seconds(n, 1 if levels == 1 else 2 * math.ceil(math.log2(levels)))
    words = num_words(n)
    closure = _closure_costs(n, nnz)[1] - _BP_PER_ENTRY_S * n * n
    per_level = _BP_DEPTH_PER_LEVEL_S + _BP_DEPTH_PER_SCAN_WORD_S * n * words
    bitpacked = closure + levels * per_level + 3 * _BP_PER_WORD_S * nnz * words
    return matmul, bitpacked


def _depth_bitpacked_bytes(n: int, nnz: int) -> int:
    """Peak host bytes of the bit-packed depth route for one mask (masks of a batch run one by one)."""
    from ._bitpacked import depth_bitpacked_bytes  # noqa: PLC0415

    return depth_bitpacked_bytes(n, nnz)


def _depth_memory(method: str):
    """The shape-only memory check of :func:`convergence_depth` (for :func:`as_mask`'s `memory`).

    Input copies plus the cheapest route `method` allows: the matmul route's stored powers for
    the whole batch, or the bit-packed route for one mask at a time with the fewest nonzeros
    (``n``); ``"structured"`` counts the input copies only.
    """

    def check(shape: tuple[int, ...]) -> None:
        n = shape[-1]
        batch = math.prod(shape[:-2])
        if batch == 0:
            return
        need = _dense_bytes(n, batch, method, 0, 2, route=False)
        matmul = _matmul_bytes(_padded_size(n), batch, _num_stored_powers(_padded_size(n)), _matmul_dtype())
        bitpacked = _depth_bitpacked_bytes(n, n)
        need += {"matmul": matmul, "bitpacked": bitpacked, "structured": 0}.get(method, min(matmul, bitpacked))
        check_memory(
            need,
            f"the convergence depth of n = {n} positions (batch {batch}) on the dense routes",
            "mask",
            hint=_STRUCTURED_HINT,
        )

    return check


def _host_depth(a) -> np.ndarray:
    """``L*`` of every adjacency of ``a`` (``(..., n, n)``) by the bit-packed depth route, as int32."""
    from ._bitpacked import depth_bitpacked  # noqa: PLC0415

    a = np.asarray(a, dtype=bool)
    n = a.shape[-1]
    flat = a.reshape(-1, n, n)
    out = np.empty(flat.shape[0], dtype=np.int32)
    for b in range(flat.shape[0]):
        out[b] = depth_bitpacked(flat[b], return_closure=False)[0]
    return out.reshape(a.shape[:-2])


def convergence_depth(
    mask: Bool[ArrayLike, "*batch_heads n n"] | IntervalMask | Sequence[IntervalMask | Bool[ArrayLike, "n n"]],
    *,
    method: str = "auto",
    head_axis: int | None = None,
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
      an :class:`~hassejax.masks.IntervalMask`, and of dense input converted to one.

    ``method="auto"`` picks per mask of a batch by a cost estimate from ``n``, the nonzeros of
    that mask and the backend (:func:`_depth_costs`): ``"matmul"`` for small ``n`` (and fast
    matmul backends), ``"bitpacked"`` for large sparse concrete masks; always ``"matmul"`` under
    a trace (``jit``/``vmap``), ``"structured"`` for an :class:`~hassejax.masks.IntervalMask`.

    **Arguments:**

    - `mask`: bool `(*batch, n, n)`; row = query, column = key, True = may attend. Or an
      :class:`~hassejax.masks.IntervalMask` (any ``n``; structured route).
    - `method`: ``"auto"``, ``"matmul"``, ``"bitpacked"`` or ``"structured"`` (see above).
    - `head_axis`: ``None`` (default), or the axis of `mask` that holds the masks of one
      layer's heads, OR-ed first (:func:`heads_union`): e.g. ``0`` for `(heads, *batch, n, n)`,
      ``-3`` for `(*batch, heads, n, n)`; never one of the last two axes. With ``0``, `mask`
      may be a tuple of :class:`~hassejax.masks.IntervalMask` heads.

    **Returns:** int32 array of shape `(*batch,)` (a 0-d array for a single mask, an empty one
    for an empty batch axis); a Python int for an :class:`~hassejax.masks.IntervalMask`.

    **Raises:**

    - :class:`~hassejax.errors.MaskError`: a mask that is not Boolean, not square, or of rank < 2.
    - :class:`~hassejax.errors.ParameterError`: an unknown `method`; a dense route for an
      :class:`~hassejax.masks.IntervalMask`; ``"structured"`` under a trace; a bad `head_axis`
      (not an int, out of range, one of the last two axes; see :func:`heads_union`).
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
    if head_axis is not None:
        mask = _heads_union(mask, head_axis, "mask", memory=_depth_memory(method))
    if isinstance(mask, IntervalMask):
        if method not in ("auto", "structured"):
            raise ParameterError(
                f"`method` = {method!r} is a dense route; an IntervalMask takes method='structured' or 'auto' "
                "(convert with `np.asarray(mask)` first for a dense route)."
            )
        if method == "auto" and _prefer_dense(mask):
            return int(convergence_depth(mask.to_dense()))
        return PowerTable(mask.with_diagonal(), name="mask").depth()

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
    if traced and method == "bitpacked":
        _check_bitpacked_depth_memory(n, n * n, batch)
        spec = jax.ShapeDtypeStruct(batch_shape, jnp.int32)
        return jax.pure_callback(_host_depth, spec, a, vmap_method="expand_dims")

    flat = a.reshape(-1, n, n)
    if method == "auto" and n >= _STRUCTURED_MIN_N and _few_runs(flat).all():
        method = "structured"
    if method == "structured":
        depths = [
            PowerTable(IntervalMask.from_dense(flat[b], name="mask").with_diagonal(), name="mask").depth()
            for b in range(batch)
        ]
        return jnp.asarray(np.asarray(depths, dtype=np.int32).reshape(batch_shape))
    if method == "auto":
        per_mask = np.count_nonzero(flat, axis=(-2, -1))
        costs = {int(nnz): _depth_costs(n, int(nnz)) for nnz in np.unique(per_mask)}
        use_bp = np.array([costs[int(nnz)][1] < costs[int(nnz)][0] for nnz in per_mask], dtype=bool)
    else:
        per_mask = None
        use_bp = np.full(batch, method == "bitpacked")
    depth = np.empty(batch, dtype=np.int32)
    if use_bp.any():
        nnz_max = n * n if per_mask is None else int(per_mask[use_bp].max())
        _check_bitpacked_depth_memory(n, nnz_max, int(use_bp.sum()))
        depth[use_bp] = _host_depth(flat[use_bp])
    if not use_bp.all():
        rest = flat if not use_bp.any() else flat[~use_bp]
        size = _padded_size(n)
        _check_matmul_memory(n, rest.shape[0], _num_stored_powers(size), "the convergence depth", "mask")
        mm, _ = _depth_matmul(_pad(rest, size), _matmul_dtype())
        if traced:
            return mm.reshape(batch_shape)
        depth[~use_bp] = np.asarray(mm)
    return jnp.asarray(depth.reshape(batch_shape))


def _check_bitpacked_depth_memory(n: int, nnz: int, batch: int) -> None:
    need = _depth_bitpacked_bytes(n, nnz)
    check_memory(need, f"the convergence depth (bit-packed route, n = {n}, batch = {batch})", "mask")
