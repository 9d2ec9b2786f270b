"""The whole-call memory estimate of :func:`hassejax.order.flow_summary` on a dense route (private; imports no JAX
for the bit-packed route, so that a structured refusal's advice, which quotes it, keeps ``hassejax analyze`` of a
structured spec free of JAX)."""

from __future__ import annotations

from ._bitpacked import bitpacked_route_bytes
from ._bitpacked_depth import depth_bitpacked_bytes
from .summary_types import QUOTIENT_LIMIT as _DEFAULT_QUOTIENT_LIMIT

__all__ = ["_flow_summary_bytes"]


def _flow_summary_bytes(
    n: int, nnz: int, method: str, layers: tuple[int, ...], quotient_limit: int, densify: bool
) -> tuple[int, str]:
    """Peak bytes of :func:`hassejax.order.flow_summary` on a dense route (``"matmul"`` or ``"bitpacked"``), from
    sizes alone, and the stage at the peak: ``(bytes, stage)``.

    Every stage holds the dense mask (a copy made here when `densify`: an IntervalMask's) and, after the first,
    its closure ``R``; each adds its own peak (on the bit-packed route one level search gives ``R``, ``L*`` and
    every ``R^(L)``: its ``L*`` stage): the closure ``R`` and ``R^(L)`` for the `layers` ``2 <= L < n - 1``
    (the route's estimate with ``nnz`` nonzeros of ``M | I`` and the input copies, as :func:`reachability`'s),
    ``L*`` (:func:`convergence_depth`'s), the classes (a copy of ``R``, its host copy, the rows packed to bits and
    their sorted copy: three bytes an entry) and the quotient order of at most
    ``min(n, quotient_limit, QUOTIENT_LIMIT)`` classes with its covers and width (43 bytes an entry of the ``(C, C)``
    quotient; a larger quotient is checked by its stage, sized by the classes found). The up-front check of the whole
    call: the stages' own checks saw only their stage (a fresh user's bit-packed ``n = 16384`` estimated 1.84 GiB for
    ``R`` and peaked at 3.1 GiB).
    """
    entries = n * n
    held = entries if densify else 0
    copies = 2 * entries  # each closure's device copy of the mask and its adjacency M | I (as _dense_memory's)
    if method == "bitpacked":  # NumPy and SciPy: a structured refusal's advice quotes this without importing JAX
        closure = power = bitpacked_route_bytes(n, nnz)
        depth = depth_bitpacked_bytes(n, nnz)
    else:
        from ._matmul import _matmul_dtype, _num_stored_powers, _padded_size  # JAX
        from ._routes import _matmul_bytes

        size, dtype = _padded_size(n), _matmul_dtype()
        closure, power = _matmul_bytes(size, 1, 0, dtype), _matmul_bytes(size, 1, 1, dtype)
        depth = _matmul_bytes(size, 1, _num_stored_powers(size), dtype)
    # a quotient above the default limit is checked by its stage once the classes are known (sized by them): up front,
    # min(n, quotient_limit) refused a raised limit's call that fits (a review: 2048 classes of n = 8192)
    c = min(n, quotient_limit, _DEFAULT_QUOTIENT_LIMIT)
    stages = {
        "the closure R": held + copies + closure,
        "L*": held + entries + copies + depth,
        "the classes": held + entries + 3 * entries,
        "the quotient order": held + entries + 8 * n + 43 * c * c,
    }
    if method == "bitpacked":  # one level search gives R, L* and every R^(L) (the "L*" stage: search and R)
        del stages["the closure R"]
    elif any(2 <= num < n - 1 for num in layers):
        stages["R^(L) of `layers`"] = held + entries + copies + power
    stage = max(stages, key=stages.__getitem__)
    return stages[stage], stage
