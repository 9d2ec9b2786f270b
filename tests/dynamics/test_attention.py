"""Velocity fields and parameter containers (spec dynamics.md §1).

Every field is compared with a naive NumPy loop written from the table of spec §1;
invariants (permutation equivariance, doubly stochastic plans) are hypothesis properties.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hassejax.dynamics import (
    VELOCITY_FIELDS,
    AttentionParams,
    MaskedParams,
    MultiHeadParams,
    PiecewiseConstant,
    attention_weights,
    positions,
    sinkhorn_potential,
    velocity_field,
)
from hassejax.dynamics import attention as att
from hassejax.errors import EmptyRowError, MaskError, ParameterError

RNG = np.random.default_rng(0)
JIT_FIELDS = {k: jax.jit(f) for k, f in VELOCITY_FIELDS.items()}  # compiled once per shape


def _params(d=3, k=2, seed=0, **kw):
    r = np.random.default_rng(seed)
    return AttentionParams(
        V=r.normal(size=(d, d)), Q=r.normal(size=(k, d)) / np.sqrt(d), K=r.normal(size=(k, d)) / np.sqrt(d), **kw
    )


# ----------------------------------------------------------------------------- naive loops
def _softmax_np(z):
    z = z - z.max()
    e = np.exp(z)
    return e / e.sum()


def naive_field(kind, x, p, keys=None, mask=None):
    x = np.asarray(x)
    y = x if keys is None else np.asarray(keys)
    V, Q, K = np.asarray(p.V), np.asarray(p.Q), np.asarray(p.K)
    A = K.T @ Q
    beta, c, b = float(p.beta), float(p.c), float(p.bias)
    out = np.zeros_like(x)
    for i in range(x.shape[0]):
        allowed = np.ones(y.shape[0], bool) if mask is None else np.asarray(mask[i])
        idx = np.flatnonzero(allowed)
        if kind == "softmax":
            w = _softmax_np(np.array([beta * y[j] @ A @ x[i] for j in idx]))
        elif kind == "l2":
            w = _softmax_np(np.array([-beta * c * np.sum((Q @ x[i] - K @ y[j]) ** 2) for j in idx]))
        elif kind == "sigmoid":
            w = np.array([1.0 / (1.0 + np.exp(-(beta * y[j] @ A @ x[i] + b))) for j in idx]) / len(idx)
        elif kind == "linear":
            w = np.array([beta * (y[j] @ A @ x[i]) for j in idx]) / len(idx)
        out[i] = sum(w_ * (V @ y[j]) for w_, j in zip(w, idx))
    return out


def naive_sinkhorn_plan(x, A, eps=1.0, iters=3000):
    """Plain (non-log) Sinkhorn–Knopp scaling of exp(x_jᵀAx_i/ε) to marginals 1/n."""
    x = np.asarray(x)
    n = x.shape[0]
    Kmat = np.exp((x @ A.T @ x.T) / eps)
    u = np.ones(n)
    v = np.ones(n)
    for _ in range(iters):
        u = (1.0 / n) / (Kmat @ v)
        v = (1.0 / n) / (Kmat.T @ u)
    u = (1.0 / n) / (Kmat @ v)
    return u[:, None] * Kmat * v[None, :]


# ----------------------------------------------------------------------------- fields vs loops
@pytest.mark.parametrize("kind", ["softmax", "l2", "sigmoid", "linear"])
def test_field_matches_naive_loop(kind):
    p = _params(beta=0.7, c=1.3, bias=-0.4)
    x = RNG.normal(size=(9, 3))
    got = velocity_field(kind)(0.0, jnp.asarray(x), p)
    np.testing.assert_allclose(np.asarray(got), naive_field(kind, x, p), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", ["softmax", "l2", "sigmoid", "linear"])
def test_field_with_separate_keys_and_mask(kind):
    p = _params(seed=1)
    x = RNG.normal(size=(4, 3))
    y = RNG.normal(size=(7, 3))
    mask = RNG.random((4, 7)) < 0.6
    mask[:, 0] = True
    got = velocity_field(kind)(0.0, jnp.asarray(x), p, jnp.asarray(y), jnp.asarray(mask))
    np.testing.assert_allclose(np.asarray(got), naive_field(kind, x, p, y, mask), rtol=1e-10, atol=1e-12)


def test_sinkhorn_matches_plain_sinkhorn_knopp():
    p = _params(seed=2)
    x = RNG.normal(size=(12, 3))
    A = np.asarray(p.K).T @ np.asarray(p.Q)
    plan = naive_sinkhorn_plan(x, A)
    want = 12 * plan @ x @ np.asarray(p.V).T
    got = att.sinkhorn(0.0, jnp.asarray(x), p)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-8, atol=1e-9)


def test_sinkhorn_weights_doubly_stochastic_and_converged():
    p = AttentionParams(V=np.eye(2), A=RNG.normal(size=(2, 2)), eps=0.5)
    x = jnp.asarray(RNG.normal(size=(30, 2)))
    g, err, it = sinkhorn_potential(x, p)
    assert float(err) <= p.sinkhorn_tol and 1 <= int(it) < p.sinkhorn_max_iter
    w = np.asarray(attention_weights("sinkhorn", x, x, p))
    np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-12)  # rows of nP
    np.testing.assert_allclose(w.sum(axis=0), 1.0, atol=1e-8)  # columns of nP


def test_sinkhorn_iteration_cap_is_respected():
    p = AttentionParams(V=np.eye(2), A=5 * RNG.normal(size=(2, 2)), sinkhorn_max_iter=3, sinkhorn_tol=1e-15)
    x = jnp.asarray(RNG.normal(size=(20, 2)))
    _, err, it = sinkhorn_potential(x, p)
    assert int(it) == 3 and float(err) > 1e-15


@settings(max_examples=15)
@given(seed=st.integers(0, 2**31 - 1), kind=st.sampled_from(["softmax", "l2", "sinkhorn", "sigmoid", "linear"]))
def test_permutation_equivariance(seed, kind):
    r = np.random.default_rng(seed)
    p = _params(seed=seed % 1000)
    x = r.normal(size=(8, 3))
    perm = r.permutation(8)
    f = JIT_FIELDS[kind]
    a = np.asarray(f(0.0, jnp.asarray(x), p))[perm]
    b = np.asarray(f(0.0, jnp.asarray(x[perm]), p))
    np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


_jit_weights = jax.jit(attention_weights, static_argnums=0)


@settings(max_examples=10)
@given(seed=st.integers(0, 2**31 - 1))
def test_sinkhorn_plan_symmetric_for_symmetric_A(seed):
    r = np.random.default_rng(seed)
    g = r.normal(size=(2, 2))
    x = r.normal(size=(10, 2))
    a = 0.5 * (g + g.T)
    # Sinkhorn slows down sharply with the logit spread (spread ~20: thousands of iterations,
    # some draws not within 20,000); the symmetry holds at any scale, so keep the spread <= 5.
    a /= max(1.0, float(np.abs(x @ a @ x.T).max()) / 5.0)
    p = AttentionParams(V=np.eye(2), A=a)
    x = jnp.asarray(x)
    _, err, _ = sinkhorn_potential(x, p)
    assert float(err) <= p.sinkhorn_tol  # converged, so the (unique) plan must be symmetric
    w = np.asarray(_jit_weights("sinkhorn", x, x, p))
    np.testing.assert_allclose(w, w.T, atol=1e-7)


def test_multihead_is_sum_of_heads_with_kinds():
    h0, h1 = _params(seed=3), _params(seed=4, beta=0.5)
    x = jnp.asarray(RNG.normal(size=(6, 3)))
    mh = MultiHeadParams([h0, h1], ("softmax", "l2"))
    want = naive_field("softmax", x, h0) + naive_field("l2", x, h1)
    np.testing.assert_allclose(np.asarray(att.multihead(0.0, x, mh)), want, rtol=1e-10)


def test_masked_causal_first_token_autonomous_and_loop():
    p = _params(seed=5)
    n = 7
    x = RNG.normal(size=(n, 3))
    causal = np.tril(np.ones((n, n), bool))
    got = np.asarray(att.masked(0.0, jnp.asarray(x), MaskedParams(p, causal)))
    np.testing.assert_allclose(got, naive_field("softmax", x, p, mask=causal), rtol=1e-10)
    np.testing.assert_allclose(got[0], np.asarray(p.V) @ x[0], rtol=1e-12)  # ẋ_1 = V x_1


def test_masked_with_sink_sees_the_sink():
    p = _params(seed=6)
    n = 5
    x = RNG.normal(size=(n, 3))
    sink = np.array([1.0, 0.0, 0.0])
    causal = np.tril(np.ones((n, n), bool))
    got = np.asarray(att.masked(0.0, jnp.asarray(x), MaskedParams(p, causal, sink=sink)))
    keys = np.vstack([sink, x])
    mask = np.hstack([np.ones((n, 1), bool), causal])
    np.testing.assert_allclose(got, naive_field("softmax", x, p, keys=keys, mask=mask), rtol=1e-10)
    assert not np.allclose(got[0], np.asarray(p.V) @ x[0])  # the first token is no longer autonomous


def test_masked_multihead_and_positions():
    h0, h1 = _params(seed=7), _params(seed=8)
    n = 6
    x = RNG.normal(size=(n, 3))
    causal = np.tril(np.ones((n, n), bool))
    mp = MaskedParams(MultiHeadParams([h0, h1], "softmax"), causal, kind="multihead")
    want = naive_field("softmax", x, h0, mask=causal) + naive_field("softmax", x, h1, mask=causal)
    np.testing.assert_allclose(np.asarray(att.masked(0.0, jnp.asarray(x), mp)), want, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(positions(4)), [0, 0.25, 0.5, 0.75])


def test_fields_jit_and_vmap():
    p = _params(seed=9)
    xs = jnp.asarray(RNG.normal(size=(4, 6, 3)))
    for kind in ["softmax", "l2", "sinkhorn", "sigmoid", "linear"]:
        f = jax.jit(lambda x, k=kind: VELOCITY_FIELDS[k](0.0, x, p))
        batched = np.asarray(jax.vmap(f)(xs))
        single = np.stack([np.asarray(f(x)) for x in xs])
        np.testing.assert_allclose(batched, single, rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------- time dependence
def test_piecewise_constant_and_callable_parameters():
    vs = np.stack([np.eye(2), 2 * np.eye(2), -np.eye(2)])
    pc = PiecewiseConstant(vs, t_edges=[0.0, 1.0, 1.5, 3.0])
    for t, want in [(-1.0, 0), (0.0, 0), (0.99, 0), (1.0, 1), (1.49, 1), (2.0, 2), (10.0, 2)]:
        np.testing.assert_array_equal(np.asarray(pc(t)), vs[want])
    p = AttentionParams(V=pc, A=lambda t: jnp.eye(2) * (1.0 + t), beta=lambda t: 2.0 * t)
    q = p.at(1.2)
    np.testing.assert_array_equal(np.asarray(q.V), vs[1])
    np.testing.assert_allclose(np.asarray(q.A), 2.2 * np.eye(2))
    assert float(q.beta) == pytest.approx(2.4)
    x = jnp.asarray(RNG.normal(size=(5, 2)))
    np.testing.assert_allclose(np.asarray(att.softmax(1.2, x, p)), np.asarray(att.softmax(0.0, x, q)))
    np.testing.assert_array_equal(np.asarray(PiecewiseConstant(vs).t_edges), [0, 1, 2, 3])


# ----------------------------------------------------------------------------- errors
def test_registry_unknown_kind():
    with pytest.raises(ParameterError, match=r"`kind` must be one of .*'softmax'.*got 'cosine'"):
        velocity_field("cosine")


def test_field_errors():
    p = _params()
    x = jnp.zeros((4, 3))
    with pytest.raises(ParameterError, match=r"kind 'l2' needs `Q` and `K`"):
        att.l2(0.0, x, AttentionParams(V=np.eye(3), A=np.eye(3)))
    with pytest.raises(ParameterError, match=r"'sinkhorn' has no masked form"):
        att.sinkhorn(0.0, x, p, mask=jnp.ones((4, 4), bool))
    with pytest.raises(ParameterError, match=r"`params` for kind 'softmax' must be a AttentionParams; got MultiHeadParams"):
        att.softmax(0.0, x, MultiHeadParams([p]))
    with pytest.raises(ParameterError, match=r"`x` must have shape \(m, d\) with d = 3; got shape \(4, 2\)"):
        att.softmax(0.0, jnp.zeros((4, 2)), p)
    with pytest.raises(ParameterError, match=r"`mask` must have shape \(m, n\) = \(4, 4\)"):
        att.softmax(0.0, x, p, mask=jnp.ones((4, 5), bool))
    mp = MaskedParams(p, np.tril(np.ones((4, 4), bool)))
    with pytest.raises(ParameterError, match=r"`x` must have shape \(n, d\) with n = 4"):
        att.masked(0.0, jnp.zeros((5, 3)), mp)
    with pytest.raises(ParameterError, match=r"pass keys=None, mask=None"):
        att.masked(0.0, x, mp, keys=x)


def test_params_errors():
    with pytest.raises(ParameterError, match=r"`V` must have shape \(d, d\) \(square\); got shape \(2, 3\)"):
        AttentionParams(V=np.zeros((2, 3)), A=np.eye(2))
    with pytest.raises(ParameterError, match=r"got neither"):
        AttentionParams(V=np.eye(2))
    with pytest.raises(ParameterError, match=r"not both"):
        AttentionParams(V=np.eye(2), A=np.eye(2), Q=np.eye(2), K=np.eye(2))
    with pytest.raises(ParameterError, match=r"`K` is missing"):
        AttentionParams(V=np.eye(2), Q=np.eye(2))
    with pytest.raises(ParameterError, match=r"`Q` must have shape \(k, d\) with d = 2 \(from V\); got shape \(1, 3\)"):
        AttentionParams(V=np.eye(2), Q=np.zeros((1, 3)), K=np.zeros((1, 3)))
    with pytest.raises(ParameterError, match=r"`K` must have the shape of `Q`"):
        AttentionParams(V=np.eye(2), Q=np.zeros((1, 2)), K=np.zeros((2, 2)))
    with pytest.raises(ParameterError, match=r"`A` must have shape \(d, d\) = \(2, 2\)"):
        AttentionParams(V=np.eye(2), A=np.eye(3))
    with pytest.raises(ParameterError, match=r"`V` must be a real array; got dtype complex"):
        AttentionParams(V=np.eye(2) * 1j, A=np.eye(2))
    with pytest.raises(ParameterError, match=r"`sinkhorn_max_iter` must be >= 1"):
        AttentionParams(V=np.eye(2), A=np.eye(2), sinkhorn_max_iter=0)
    with pytest.raises(ParameterError, match=r"`A` is callable but calling it at t = 0.0 failed"):
        AttentionParams(V=np.eye(2), A=lambda t: undefined_name)  # noqa: F821
    with pytest.raises(ParameterError, match=r"`t_edges` must have shape \(L \+ 1,\) = \(3,\)"):
        PiecewiseConstant(np.zeros((2, 2, 2)), t_edges=[0.0, 1.0])
    with pytest.raises(ParameterError, match=r"All heads must share the token dimension d; got d = \[2, 3\]"):
        MultiHeadParams([AttentionParams(V=np.eye(2), A=np.eye(2)), AttentionParams(V=np.eye(3), A=np.eye(3))])
    with pytest.raises(ParameterError, match=r"`kinds\[1\]` must be one of .*got 'masked'"):
        MultiHeadParams([_params(), _params()], ("softmax", "masked"))
    with pytest.raises(ParameterError, match=r"one entry per head \(2\); got 1"):
        MultiHeadParams([_params(), _params()], ("softmax",))
    with pytest.raises(ParameterError, match=r"`kind` of a masked model must be one of .*got 'sinkhorn'"):
        MaskedParams(_params(), np.ones((3, 3), bool), kind="sinkhorn")
    with pytest.raises(ParameterError, match=r"`sink` must have shape \(d,\) = \(3,\)"):
        MaskedParams(_params(), np.ones((3, 3), bool), sink=np.zeros(2))
    with pytest.raises(MaskError, match=r"must have dtype bool"):
        MaskedParams(_params(), np.ones((3, 3)))
    with pytest.raises(EmptyRowError, match=r"1 empty row"):
        MaskedParams(_params(), np.array([[True, False], [False, False]]))
    # with a sink every row sees a key: no error
    MaskedParams(AttentionParams(V=np.eye(2), A=np.eye(2)), np.zeros((2, 2), bool), sink=np.zeros(2))
    with pytest.raises(ParameterError, match=r"`params.V` must have rank 2 inside a solve"):
        AttentionParams(V=np.zeros((4, 2, 2)), A=np.eye(2)).check_unbatched()
