"""The default velocity of a row-wise kernel in blocks of queries (``attention._base.query_block``).

A large weight matrix runs block by block (``jax.lax.map``); the blocks' velocities must equal the
one-block route's and a NumPy transcription of spec dynamics.md §1, for every row-wise kernel, with and
without keys and a mask, for query counts that are not a multiple of the block. The thresholds are
lowered here (monkeypatch) so that small inputs take the blocked route, and each test checks from the jaxpr that
the route was taken. A kernel not declared row-wise (Sinkhorn, whose potential each block would solve again, or a
softmax subclass that normalises the whole matrix) is never split.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hassejax.dynamics import L2, Linear, Sigmoid, Sinkhorn, Softmax
from hassejax.dynamics.attention import _base


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 7 entries' worth of rows from 40 entries on: `(m, n) = (13, 5)` runs in blocks of one query."""
    monkeypatch.setattr(_base, "ROW_BLOCK_ENTRIES", 7)
    monkeypatch.setattr(_base, "ROW_BLOCKED_FROM", 40)


def _numpy_velocity(kind: str, V, A, Q, K, x, y, mask, beta=0.7, c=0.4, bias=-0.3):
    """Spec dynamics.md §1, row by row in NumPy (float64)."""
    out = np.zeros_like(x)
    for i in range(x.shape[0]):
        allowed = np.ones(y.shape[0], bool) if mask is None else mask[i]
        if not allowed.any():
            continue
        if kind == "l2":
            s = -beta * c * np.sum((Q @ x[i] - (K @ y.T).T) ** 2, axis=1)
        else:
            s = beta * (y @ (A @ x[i]))
        if kind in ("softmax", "l2"):
            e = np.exp(s[allowed] - s[allowed].max())
            w = e / e.sum()
        elif kind == "sigmoid":
            w = 1.0 / (1.0 + np.exp(-(s[allowed] + bias))) / allowed.sum()
        else:  # linear
            w = s[allowed] / allowed.sum()
        out[i] = V @ (w @ y[allowed])
    return out


def _kernel(kind: str, V, A, Q, K):
    beta = 0.7
    return {
        "softmax": lambda: Softmax(V, A, beta=beta),
        "l2": lambda: L2(V, Q=Q, K=K, beta=beta, c=0.4),
        "sigmoid": lambda: Sigmoid(V, A, beta=beta, bias=-0.3),
        "linear": lambda: Linear(V, A, beta=beta),
    }[kind]()


def _split(model, x, keys=None, mask=None) -> bool:
    """True if `model`'s velocity under the current thresholds is another program than in one block (the split)."""

    def program():
        return str(jax.make_jaxpr(lambda x_: model.velocity(0.0, x_, keys, mask))(jnp.asarray(x)))

    here = program()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_base, "ROW_BLOCKED_FROM", 1 << 62)
        return here != program()


@eqx.filter_jit
def _blocked_velocity(model, x, keys, mask):
    """The velocity under the thresholds patched below (read when traced: only that test calls this)."""
    return model.velocity(0.0, x, keys, mask)


@settings(max_examples=40)
@given(
    kind=st.sampled_from(["softmax", "l2", "sigmoid", "linear"]),
    m=st.sampled_from([1, 5, 13]),
    n=st.sampled_from([1, 4, 9]),
    use_keys=st.booleans(),
    use_mask=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_blocks_equal_one_block_and_numpy(kind, m, n, use_keys, use_mask, seed):
    """Blocks of `7 // n` queries (the last one padded) against one block and NumPy, `d = 2`."""
    rng = np.random.default_rng(seed)
    d = 2
    V, A, Q, K = (rng.normal(size=(d, d)) * s for s in (1.0, 0.5, 0.7, 0.7))
    if not use_keys:
        n = m
    x = rng.normal(size=(m, d))
    y = rng.normal(size=(n, d)) if use_keys else x
    mask = rng.random((m, n)) < 0.6 if use_mask else None
    if mask is not None:
        mask[0] = False  # a query with no allowed key: Γ = 0 there
    model = _kernel(kind, *(jnp.asarray(a) for a in (V, A, Q, K)))
    keys = jnp.asarray(y) if use_keys else None
    jmask = None if mask is None else jnp.asarray(mask)
    one_block = np.asarray(model.velocity(0.0, jnp.asarray(x), keys, jmask))
    with pytest.MonkeyPatch.context() as mp:  # hypothesis: no function-scoped fixture
        mp.setattr(_base, "ROW_BLOCK_ENTRIES", 7)
        mp.setattr(_base, "ROW_BLOCKED_FROM", 0)
        assert _base.query_block(m, n) == max(1, 7 // n)
        blocked = np.asarray(_blocked_velocity(model, jnp.asarray(x), keys, jmask))
        assert _split(model, x, keys, jmask)
    expected = _numpy_velocity(kind, V, A, Q, K, x, y, mask)
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(blocked, one_block, rtol=0, atol=1e-13 * scale)
    np.testing.assert_allclose(blocked, expected, rtol=0, atol=1e-12 * scale)


def test_a_large_weight_matrix_runs_in_blocks_at_the_default_sizes():
    """At the module's own thresholds: `(4096, 2048)` is split, `(1024, 1024)` is one block; the split
    softmax velocity equals the NumPy one (a mask with an empty row)."""
    assert _base.query_block(1024, 1024) is None
    b = _base.query_block(4096, 2048)
    assert b is not None and b * 2048 <= _base.ROW_BLOCK_ENTRIES and 4096 % b == 0
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(3001, 2)), rng.normal(size=(2048, 2))
    mask = rng.random((3001, 2048)) < 0.3
    mask[7] = False
    V, A = rng.normal(size=(2, 2)), rng.normal(size=(2, 2))
    model = Softmax(V, A, beta=0.7)
    assert _split(model, x, jnp.asarray(y), jnp.asarray(mask))
    got = np.asarray(model.velocity(0.0, jnp.asarray(x), jnp.asarray(y), jnp.asarray(mask)))
    rows = np.r_[0:40, 7, 2990:3001]
    want = _numpy_velocity("softmax", V, A, None, None, x[rows], y, mask[rows])
    np.testing.assert_allclose(got[rows], want, rtol=0, atol=1e-12)
    assert np.all(got[7] == 0.0)


class _WholeMatrix(Softmax):
    """A softmax subclass whose weights couple the rows: `exp(logits)` over the sum of the whole matrix."""

    def normalise(self, t, logits, mask):
        e = jnp.exp(logits - logits.max())
        return e / e.sum()


def test_kernels_not_declared_row_wise_are_not_split(small_blocks):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(13, 2))
    V, A = rng.normal(size=(2, 2)), rng.normal(size=(2, 2)) * 0.5
    assert _base.query_block(13, 13) is not None  # the patched thresholds would split a row-wise kernel
    assert _base.rows_separate(Softmax(V, A)) and not _base.rows_separate(_WholeMatrix(V, A))
    assert not _base.rows_separate(Sinkhorn(V, A))
    assert _split(Softmax(V, A), x) and not _split(_WholeMatrix(V, A), x) and not _split(Sinkhorn(V, A), x)
    logits = x @ A.T @ x.T
    e = np.exp(logits - logits.max())
    want = (e / e.sum()) @ x @ V.T
    got = np.asarray(_WholeMatrix(V, A).velocity(0.0, jnp.asarray(x)))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    # Sinkhorn's weights (one potential from all the keys): the same program and values with the thresholds patched
    sk = Sinkhorn(V, A)
    patched = np.asarray(sk.velocity(0.0, jnp.asarray(x)))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_base, "ROW_BLOCKED_FROM", 1 << 30)
        plain = np.asarray(sk.velocity(0.0, jnp.asarray(x)))
    np.testing.assert_array_equal(patched, plain)


def test_a_subclass_that_declares_row_wise_weights_is_split(small_blocks):
    """A subclass that changes the weights and sets ``_row_wise`` again (a tempered softmax) runs in blocks."""

    class Tempered(Softmax):
        _row_wise = True

        def normalise(self, t, logits, mask):
            return jax.nn.softmax(logits / 2.0, axis=-1)

    rng = np.random.default_rng(2)
    x = rng.normal(size=(13, 2))
    V, A = rng.normal(size=(2, 2)), rng.normal(size=(2, 2))
    assert _base.rows_separate(Tempered(V, A)) and _split(Tempered(V, A), x)
    got = np.asarray(Tempered(V, A).velocity(0.0, jnp.asarray(x)))
    want = _numpy_velocity("softmax", V, A / 2.0, None, None, x, x, None, beta=1.0)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
