"""The order checks of the poset functions (private; NumPy, imports no JAX).

Each check raises :class:`~hassejax.errors.MaskError` naming the first pair that breaks
reflexivity, transitivity or antisymmetry (spec hasse.md §1.4–1.7), from violation counts
computed by the caller (jitted in :mod:`hassejax.order._poset_common`, NumPy in
:mod:`hassejax.order._poset_host`); :mod:`hassejax.order._poset_common` re-exports them.
"""

from __future__ import annotations

import jaxtyping as jt
import numpy as np

from ..errors import MaskError


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


def _check_preorder(r: np.ndarray | jt.Array, violations, name: str) -> None:
    not_reflexive, not_transitive = violations
    if int(not_reflexive):
        _raise_not_reflexive(np.asarray(r), name, _PREORDER)
    if int(not_transitive):
        _raise_not_transitive(np.asarray(r), name, _PREORDER)


def _check_partial_order(order: np.ndarray | jt.Array, nr, na, nt, name: str) -> None:
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
