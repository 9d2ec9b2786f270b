"""The order functions that run on the host refuse a traced argument by name (a fresh-user check: under ``jax.jit``
``cover_matrix``, ``classes``, ``flow_summary``, ``quotient_order``, ``longest_chain``, ``width``,
``HasseDiagram.from_reachability``, ``IntervalMask.from_dense`` and ``flow_growth`` failed with JAX's
``TracerArrayConversionError``, which names no argument; ``cover_matrix``'s docstring called it jitted)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.errors import MaskError
from hassejax.masks import IntervalMask
from hassejax.order import HasseDiagram, classes, cover_matrix, flow_summary, longest_chain, quotient_order, width
from hassejax.order.growth import flow_growth

CHAIN = np.tril(np.ones((3, 3), dtype=bool))  # a total order: reach, order and relation alike
CALLS = {
    "cover_matrix": ("order", lambda r: cover_matrix(r)),
    "classes": ("reach", lambda r: classes(r)[0]),
    "flow_summary": ("mask", lambda r: flow_summary(r).num_classes),
    "quotient_order": ("reach", lambda r: quotient_order(r, jnp.arange(3), 3)),
    "longest_chain": ("relation", lambda r: longest_chain(r & ~jnp.eye(3, dtype=bool))),
    "width": ("order", lambda r: width(r)),
    "HasseDiagram.from_reachability": ("reach", lambda r: HasseDiagram.from_reachability(r).num_classes),
    "IntervalMask.from_dense": ("mask", lambda r: IntervalMask.from_dense(r).n),
    "flow_growth": ("mask", lambda r: flow_growth(r).depth),
}


@pytest.mark.parametrize("caller", sorted(CALLS))
def test_traced_argument_is_refused_by_name(caller, no_typecheck):
    """(Runtime type checks off: `flow_summary`'s hint names NumPy arrays, so that its module imports no JAX.)"""
    name, call = CALLS[caller]
    call(CHAIN)  # concrete: runs
    with pytest.raises(MaskError, match=rf"`{name}` must be a concrete array: {caller} runs on the host"):
        jax.jit(call)(jnp.asarray(CHAIN))
    with pytest.raises(MaskError, match=rf"`{name}` must be a concrete array: {caller} runs on the host"):
        jax.vmap(call)(jnp.stack([CHAIN, CHAIN]))


def test_nested_lists_of_tracers(no_typecheck):
    """Rows given as a list of traced arrays (a review: since `flow_summary` takes nested lists it failed on them with
    JAX's conversion error instead of naming `mask`); the jitted routes take such lists as the stacked array."""
    from hassejax.order import reachability

    rows = lambda a: [a[0], a[1], a[2]]
    with pytest.raises(MaskError, match=r"`mask` must be a concrete array: flow_summary runs on the host"):
        jax.jit(lambda a: flow_summary(rows(a)))(jnp.asarray(CHAIN))
    out = jax.jit(lambda a: reachability(rows(a)))(jnp.asarray(CHAIN))
    np.testing.assert_array_equal(np.asarray(out), np.asarray(reachability(CHAIN)))
