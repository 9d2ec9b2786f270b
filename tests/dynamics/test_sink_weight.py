"""sink_weight: the attention weight on a fixed sink token, against a NumPy softmax over the allowed keys."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from hassejax import masks
from hassejax.dynamics import Masked, Softmax
from hassejax.dynamics.diagnostics.sink import sink_weight
from hassejax.errors import ParameterError


def numpy_sink_weight(x, A, beta, sink, mask):
    """Softmax of beta y_j^T A x_i over the sink and the allowed keys, weight of the sink (column 0)."""
    n = len(x)
    keys = np.concatenate([sink[None], x])
    logits = beta * (x @ A.T @ keys.T)  # [i, j] = beta keys_j^T A x_i
    allowed = np.concatenate([np.ones((n, 1), bool), mask], axis=1)
    logits = np.where(allowed, logits, -np.inf)
    w = np.exp(logits - logits.max(1, keepdims=True))
    return (w / w.sum(1, keepdims=True))[:, 0]


def test_matches_numpy_softmax_under_a_causal_mask_and_a_batch():
    rng = np.random.default_rng(3)
    n, d = 6, 3
    A = rng.normal(size=(d, d))
    sink = rng.normal(size=d)
    x = rng.normal(size=(2, n, d))
    model = Masked(Softmax(V=np.eye(d), A=A, beta=0.7), masks.causal(n), sink=jnp.asarray(sink))
    got = np.asarray(sink_weight(model, jnp.asarray(x)))
    want = np.stack([numpy_sink_weight(xb, A, 0.7, sink, np.tril(np.ones((n, n), bool))) for xb in x])
    assert got.shape == (2, n)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_the_sink_loses_its_weight_as_the_tokens_grow():
    # logit of the sink is O(|x|), of the tokens O(|x|^2): scaling the tokens up drives the weight to 0
    x = np.random.default_rng(0).normal(size=(5, 2))
    x = jnp.asarray(x / np.linalg.norm(x, axis=1, keepdims=True))  # unit tokens: sink logit <= 10, self logit 100
    model = Masked(Softmax(V=jnp.eye(2), A=jnp.eye(2)), masks.causal(5), sink=jnp.array([1.0, 0.0]))
    w1, w10 = np.asarray(sink_weight(model, x)), np.asarray(sink_weight(model, 10 * x))
    assert np.all(w10 < w1) and w10.max() < 1e-3


def test_errors_name_the_argument():
    plain = Masked(Softmax(V=jnp.eye(2), A=jnp.eye(2)), masks.causal(3))
    with pytest.raises(ParameterError, match="sink"):
        sink_weight(plain, jnp.zeros((3, 2)))
    model = Masked(Softmax(V=jnp.eye(2), A=jnp.eye(2)), masks.causal(3), sink=jnp.array([1.0, 0.0]))
    with pytest.raises(ParameterError, match="`x`"):
        sink_weight(model, jnp.zeros((4, 2)))
