"""Route choice and memory estimates of the closure routes (private).

The cost model of ``method="auto"`` (seconds per mask of the matmul and bit-packed routes, and
when a concrete dense mask takes the structured route), and the peak-memory estimates that run
before anything large is allocated (:func:`_dense_memory` from the shape alone, then the
chosen route's check with the nonzeros known). Calibrated on a 2-core x86 CPU
(benchmarks/closure.py).
"""

from __future__ import annotations

import math
from typing import no_type_check

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_memory
from ._bitpacked import bitpacked_route_bytes, num_words
from ._matmul import _matmul_dtype, _num_stored_powers, _padded_size
from ._route_rules import (  # noqa: F401 (re-exported: the structured-route rules, in a JAX-free module)
    _BP_OVERHEAD_S,
    _BP_PER_BATCH_S,
    _BP_PER_EDGE_S,
    _BP_PER_ENTRY_S,
    _BP_PER_WORD_S,
    _DENSE_FALLBACK_N,
    _FLOPS,
    _MATMUL_OVERHEAD_S,
    _STRUCTURED_MAX_RUNS,
    _STRUCTURED_MIN_N,
    _few_runs,
    _prefer_dense,
    bitpacked_closure_seconds,
    product_first,
    structured_or_dense,
    warn_if_forced_structured,
)
from ._summary_memory import _flow_summary_bytes
from .summary_types import QUOTIENT_LIMIT as _DEFAULT_QUOTIENT_LIMIT

# Cost model of ``method="auto"`` (seconds). Matmul throughput per backend in flop/s, and the
# bit-packed route's costs per edge, per propagation batch (at most n of them) and per output
# entry; calibrated on a 2-core x86 CPU (benchmarks/closure.py). _FLOPS, _MATMUL_OVERHEAD_S and the
# _BP_* costs live in _route_rules (JAX-free: the structured route's estimate of its NumPy reduction
# and its switch to the bit-packed route read them too).


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


def _check_bitpacked_memory(n: int, nnz: int, batch: int, what: str, name: str, power: bool = False) -> None:
    """The bit-packed route's memory check: the closure's, or with `power` the level search of ``R^(L)``
    (:func:`~hassejax.order._bitpacked_depth.power_bitpacked_bytes`), plus each mask's bool input and result."""
    if power:
        from ._bitpacked_depth import power_bitpacked_bytes

        need = power_bitpacked_bytes(n, nnz) + 2 * batch * n * n
    else:
        need = bitpacked_route_bytes(n, nnz, batch)
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
    bit-packed route with the fewest nonzeros (:func:`bitpacked_route_bytes`). A lower bound: the route
    checks that follow, which know the nonzeros, can only ask for more.
    """
    if batch == 0:
        return 0
    need = copies * batch * n * n
    if route:
        matmul = _matmul_bytes(_padded_size(n), batch, stored, _matmul_dtype())
        bitpacked = bitpacked_route_bytes(n, n, batch)
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

    @no_type_check  # a closure made per call: not re-decorated by the test suite's type-check hook each time (see pyproject)
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


def _check_flow_summary_memory(
    n: int, nnz: int, method: str, layers: tuple[int, ...], quotient_limit: int, densify: bool, hint: str | None = None
) -> None:
    """Raise :class:`~hassejax.errors.MemoryBudgetError` naming `mask` before :func:`hassejax.order.flow_summary`
    starts a dense route that would not fit as a whole (:func:`_flow_summary_bytes`); `hint` replaces
    :data:`_STRUCTURED_HINT` (an IntervalMask's: keep it, the dense array is what does not fit)."""
    need, stage = _flow_summary_bytes(n, nnz, method, layers, quotient_limit, densify)
    route = "bit-packed" if method == "bitpacked" else "matmul"
    check_memory(
        need,
        f"flow_summary on the {route} route (n = {n}: the dense mask, its closure R, L*, the classes and the quotient "
        f"order of at most {min(n, quotient_limit, _DEFAULT_QUOTIENT_LIMIT)} classes; the peak at {stage})",
        "mask",
        hint=_STRUCTURED_HINT if hint is None else hint,
    )


def _matmul_seconds(n: int, products: int) -> float:
    return products * 2.0 * n**3 / _FLOPS.get(jax.default_backend(), _FLOPS["cpu"]) + _MATMUL_OVERHEAD_S


def _matmul_bar(delay: float | None, desc: str, n: int, batch: int, products: int):
    """A progress bar around one jitted matmul loop, which reports nothing while it runs (no host
    callback in it): `desc` with the estimated seconds a product of `batch` masks of `n` positions;
    it opens at once when `products` of them are estimated to take at least `delay` seconds, else
    when the loop has run `delay` seconds, and its clock runs meanwhile (a host thread). Count
    the products done with :func:`_count_products` once the loop returns."""
    from ._progress import progress_bar

    per = batch * (_matmul_seconds(n, 1) - _MATMUL_OVERHEAD_S) + _MATMUL_OVERHEAD_S
    cost = "< 0.01 s" if per < 0.01 else f"~{per:.2g} s"
    return progress_bar(delay, f"{desc} (matmul, {cost} a product)", "products", estimate=products * per, tick=True)


def _count_products(bar, count) -> None:
    """Add the products a matmul kernel reports (`count`, a scalar or one per mask: the most) to `bar`."""
    if bar.on:
        bar.update(int(np.max(np.asarray(count))))


def _closure_costs(n: int, nnz: int | float) -> tuple[float, float]:
    """Estimated seconds per mask of the limit: (matmul, bitpacked).

    Matmul: two products (a closed mask needs one; long chains up to log2(n) + 1).
    Bit-packed: per edge, per batch (at most n of them) and per output entry.
    """
    return _matmul_seconds(n, 2), bitpacked_closure_seconds(n, nnz)


def _rounds_costs(n: int, nnz: int | float, rounds: int, products: int) -> tuple[float, float]:
    """Estimated seconds per mask of a finite product: (matmul, bit-packed rounds)."""
    matmul = _matmul_seconds(n, products)
    per_round = _BP_PER_WORD_S * (nnz + n) * num_words(n) + 2e-5
    bitpacked = _BP_OVERHEAD_S + rounds * per_round + _BP_PER_ENTRY_S * n * n
    return matmul, bitpacked


def _power_costs(n: int, nnz: int | float, num_layers: int) -> tuple[float, float]:
    """Estimated seconds per mask of ``R^(L)``, ``L = num_layers >= 2``: (matmul, bit-packed).

    Matmul: ``2 ceil(log2 L)`` products (binary exponentiation). Bit-packed
    (:func:`~hassejax.order._bitpacked_depth.power_bitpacked`): the level search of :func:`_depth_costs` stopped
    after ``min(L, guessed L*) − 1`` levels, and the bool output.
    """
    matmul = _matmul_seconds(n, 2 * math.ceil(math.log2(num_layers)))
    levels = max(1, min(num_layers - 1, _depth_levels_guess(n, nnz)))
    words = num_words(n)
    closure = _closure_costs(n, nnz)[1]  # with the output entries
    per_level = _BP_DEPTH_PER_LEVEL_S + _BP_DEPTH_PER_SCAN_WORD_S * n * words
    bitpacked = closure + levels * per_level + min(levels, 3) * _BP_PER_WORD_S * nnz * words
    return matmul, bitpacked


def _nnz(a: np.ndarray) -> tuple[float, int]:
    """Mean and largest number of nonzeros per mask of ``a`` (``(..., n, n)``)."""
    per_mask = np.count_nonzero(a.reshape((-1,) + a.shape[-2:]), axis=(-2, -1))
    return float(per_mask.mean()), int(per_mask.max())


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
    from ._bitpacked_depth import depth_bitpacked_bytes

    return depth_bitpacked_bytes(n, nnz)


def _depth_dense_bytes(n: int, batch: int, method: str) -> int:
    """The bytes :func:`_depth_memory`'s check counts: the input copies plus the cheapest route `method` allows."""
    need = _dense_bytes(n, batch, method, 0, 2, route=False)
    matmul = _matmul_bytes(_padded_size(n), batch, _num_stored_powers(_padded_size(n)), _matmul_dtype())
    bitpacked = _depth_bitpacked_bytes(n, n)
    return need + {"matmul": matmul, "bitpacked": bitpacked, "structured": 0}.get(method, min(matmul, bitpacked))


def _depth_memory(method: str):
    """The shape-only memory check of :func:`convergence_depth` (for :func:`as_mask`'s `memory`).

    Input copies plus the cheapest route `method` allows: the matmul route's stored powers for
    the whole batch, or the bit-packed route for one mask at a time with the fewest nonzeros
    (``n``); ``"structured"`` counts the input copies only.
    """

    @no_type_check  # a closure made per call: not re-decorated by the test suite's type-check hook each time (see pyproject)
    def check(shape: tuple[int, ...]) -> None:
        n = shape[-1]
        batch = math.prod(shape[:-2])
        if batch == 0:
            return
        check_memory(
            _depth_dense_bytes(n, batch, method),
            f"the convergence depth of n = {n} positions (batch {batch}) on the dense routes",
            "mask",
            hint=_STRUCTURED_HINT,
        )

    return check


def _check_bitpacked_depth_memory(n: int, nnz: int, batch: int) -> None:
    need = _depth_bitpacked_bytes(n, nnz)
    check_memory(need, f"the convergence depth (bit-packed route, n = {n}, batch = {batch})", "mask")
