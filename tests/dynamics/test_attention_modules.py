"""Attention kernels as Equinox modules (spec dynamics.md §1–§2).

Each module's velocity field is compared with a NumPy loop written from the table of spec §1
(hypothesis over shapes, masks, parameters), its Gaussian map with NumPy transcriptions of
the spec §2 formulas (the Sinkhorn slope in its `Σ^{1/2}` form, not the factor form the
module uses); a time-dependent module equals the constant module of its values at `t`; a
batch of modules is ``vmap`` ped; a kernel without a Gaussian map gets the clear error.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, settings
from hypothesis import strategies as st

from hassejax.dynamics import (
    L2,
    AbstractAttention,
    Linear,
    Masked,
    MultiHead,
    PiecewiseConstant,
    Sigmoid,
    Sinkhorn,
    Softmax,
    gaussian_affine,
    moment_derivatives,
    particle_velocity,
    solve_gaussian,
    solve_particles,
)
from hassejax.errors import EmptyRowError, MaskError, ParameterError

SINGLE = ("softmax", "l2", "sinkhorn", "sigmoid", "linear")


# ----------------------------------------------------------------------------- NumPy references
def _np_softmax(z):
    e = np.exp(z - z.max())
    return e / e.sum()


def np_velocity(kind, x, y, mask, *, V, A, Q=None, K=None, beta=1.0, c=1.0, bias=0.0):
    """Spec §1 table, one query at a time (softmax-type over the allowed keys, others / their count)."""
    out = np.zeros_like(x)
    for i in range(x.shape[0]):
        idx = np.flatnonzero(np.ones(y.shape[0], bool) if mask is None else mask[i])
        if idx.size == 0:
            continue  # a query with no allowed key: Γ = 0
        if kind == "softmax":
            w = _np_softmax(np.array([beta * y[j] @ A @ x[i] for j in idx]))
        elif kind == "l2":
            w = _np_softmax(np.array([-beta * c * np.sum((Q @ x[i] - K @ y[j]) ** 2) for j in idx]))
        elif kind == "sigmoid":
            w = np.array([1 / (1 + np.exp(-(beta * y[j] @ A @ x[i] + bias))) for j in idx]) / idx.size
        elif kind == "linear":
            w = np.array([beta * y[j] @ A @ x[i] for j in idx]) / idx.size
        out[i] = sum(wj * (V @ y[j]) for wj, j in zip(w, idx))
    return out


def np_sinkhorn_velocity(x, V, A, beta, eps, iters=4000):
    """`n P x Vᵀ` with `P` the plain Sinkhorn–Knopp scaling of `exp(β x_jᵀAx_i/ε)` to marginals `1/n`."""
    n = x.shape[0]
    kmat = np.exp(beta * (x @ A.T @ x.T) / eps)
    u, v = np.ones(n), np.ones(n)
    for _ in range(iters):
        u = (1 / n) / (kmat @ v)
        v = (1 / n) / (kmat.T @ u)
    u = (1 / n) / (kmat @ v)
    return n * (u[:, None] * kmat * v[None, :]) @ x @ V.T


def np_gaussian_affine(kind, alpha, sigma, *, V, A, K=None, beta=1.0, c=1.0, eps=1.0):
    """Spec §2 table, with β and the kernel constants as the modules define them."""
    d = len(alpha)
    eye = np.eye(d)
    if kind == "softmax":
        return beta * V @ sigma @ A, V @ alpha
    if kind == "l2":
        s = 2 * beta * c
        return s * V @ sigma @ np.linalg.inv(eye + s * K.T @ K @ sigma) @ A, V @ np.linalg.inv(
            eye + s * sigma @ K.T @ K
        ) @ alpha
    if kind == "linear":
        return beta * V @ (sigma + np.outer(alpha, alpha)) @ A, np.zeros(d)
    if kind == "sinkhorn":  # S = Σ^{1/2} G Σ^{1/2} Ã, G = 2(I + (I + 4BBᵀ)^{1/2})⁻¹, B = Σ^{1/2}ÃΣ^{1/2}
        w, q = np.linalg.eigh(sigma)
        h = (q * np.sqrt(np.clip(w, 0, None))) @ q.T
        at = beta * A / eps
        b = h @ at @ h
        g = 2 * np.linalg.inv(eye + scipy.linalg.sqrtm(eye + 4 * b @ b.T).real)
        s = h @ g @ h @ at
        return V @ s, V @ (alpha - s @ alpha)
    raise AssertionError(kind)


def _draw(seed, d=3, k=2):
    r = np.random.default_rng(seed)
    return {
        "V": r.normal(size=(d, d)),
        "Q": r.normal(size=(k, d)) / np.sqrt(d),
        "K": r.normal(size=(k, d)) / np.sqrt(d),
        "beta": float(r.uniform(0.3, 1.5)),
        "c": float(r.uniform(0.5, 1.5)),
        "bias": float(r.normal()),
        "eps": float(r.uniform(0.5, 1.5)),
    }


def _module(kind, p, *, use_qk=True):
    """The module for `kind` from the parameters `p` (`A = KᵀQ` given directly unless `use_qk`)."""
    qk = {"Q": p["Q"], "K": p["K"]} if use_qk or kind == "l2" else {"A": p["K"].T @ p["Q"]}
    if kind == "softmax":
        return Softmax(p["V"], beta=p["beta"], **qk)
    if kind == "l2":
        return L2(p["V"], p["Q"], p["K"], beta=p["beta"], c=p["c"])
    if kind == "sinkhorn":
        return Sinkhorn(p["V"], beta=p["beta"], eps=p["eps"], **qk)
    if kind == "sigmoid":
        return Sigmoid(p["V"], beta=p["beta"], bias=p["bias"], **qk)
    return Linear(p["V"], beta=p["beta"], **qk)


def _np_kw(p):
    return {
        "V": p["V"],
        "A": p["K"].T @ p["Q"],
        "Q": p["Q"],
        "K": p["K"],
        "beta": p["beta"],
        "c": p["c"],
        "bias": p["bias"],
    }


# ----------------------------------------------------------------------------- velocity fields
@settings(max_examples=30)
@given(
    seed=st.integers(0, 2**31 - 1),
    kind=st.sampled_from(("softmax", "l2", "sigmoid", "linear")),
    # two sizes per axis (1, the broadcasting edge, and a larger one): the kernels run op by op, and
    # every new shape compiles each op again; values, kinds, masks and flags stay random
    m=st.sampled_from([1, 5]),
    n=st.sampled_from([1, 6]),
    d=st.sampled_from([1, 3]),
    k=st.sampled_from([1, 2]),
    masked=st.booleans(),
    use_qk=st.booleans(),
)
def test_velocity_matches_numpy_loop(seed, kind, m, n, d, k, masked, use_qk):
    """Queries against separate keys, optional mask (empty rows allowed: Γ = 0 there)."""
    r = np.random.default_rng(seed)
    p = _draw(seed % 10_000, d, k)
    x, y = r.normal(size=(m, d)), r.normal(size=(n, d))
    mask = r.random((m, n)) < 0.6 if masked else None
    model = _module(kind, p, use_qk=use_qk)
    got = model.velocity(0.0, jnp.asarray(x), jnp.asarray(y), None if mask is None else jnp.asarray(mask))
    np.testing.assert_allclose(np.asarray(got), np_velocity(kind, x, y, mask, **_np_kw(p)), rtol=1e-9, atol=1e-12)


def test_self_attention_and_sinkhorn_match_numpy():
    p = _draw(3)
    x = np.random.default_rng(4).normal(size=(8, 3))
    for kind in ("softmax", "l2", "sigmoid", "linear"):
        got = _module(kind, p).velocity(0.0, jnp.asarray(x))
        np.testing.assert_allclose(np.asarray(got), np_velocity(kind, x, x, None, **_np_kw(p)), rtol=1e-9, atol=1e-12)
    model = Sinkhorn(p["V"], Q=p["Q"], K=p["K"], beta=p["beta"], eps=p["eps"], tol=1e-13)
    want = np_sinkhorn_velocity(x, p["V"], p["K"].T @ p["Q"], p["beta"], p["eps"])
    np.testing.assert_allclose(np.asarray(model.velocity(0.0, jnp.asarray(x))), want, rtol=1e-8, atol=1e-10)
    w = np.asarray(model.weights(0.0, jnp.asarray(x)))
    np.testing.assert_allclose(w.sum(axis=0), 1.0, atol=1e-10)  # columns of nP
    _, err, it = model.potential(0.0, jnp.asarray(x))
    assert float(err) <= 1e-13 and 1 <= int(it) < model.max_iter


@pytest.mark.parametrize("kind", SINGLE)
def test_time_dependent_module_equals_the_module_of_the_resolved_parameters(kind):
    """Layer-wise V and β, a callable Q: the module at time t equals the constant module of the values at t
    (several t, with and without keys and a mask)."""
    r = np.random.default_rng(5)
    p = _draw(6)
    vs = np.stack([p["V"], -p["V"], 0.5 * p["V"]])
    betas = np.array([0.5, 1.0, 2.0])
    pc_v, pc_b = (
        PiecewiseConstant(vs, t_edges=[0.0, 0.5, 1.0, 3.0]),
        PiecewiseConstant(betas, t_edges=[0.0, 0.5, 1.0, 3.0]),
    )

    def q_of_t(t):
        return p["Q"] * (1.0 + t)

    def build(V, Q, beta):
        common = {"V": V, "Q": Q, "K": p["K"], "beta": beta}
        return {
            "softmax": lambda: Softmax(**common),
            "l2": lambda: L2(**common, c=p["c"]),
            "sinkhorn": lambda: Sinkhorn(**common, eps=p["eps"]),
            "sigmoid": lambda: Sigmoid(**common, bias=p["bias"]),
            "linear": lambda: Linear(**common),
        }[kind]()

    model = build(pc_v, q_of_t, pc_b)
    x, y = jnp.asarray(r.normal(size=(5, 3))), jnp.asarray(r.normal(size=(6, 3)))
    mask = jnp.asarray(r.random((5, 6)) < 0.5)
    for t in (0.0, 0.7, 2.5):
        layer = min(int(t / 0.5), 2)
        frozen = build(vs[layer], q_of_t(t), betas[layer])
        np.testing.assert_allclose(
            np.asarray(model.velocity(t, x)), np.asarray(frozen.velocity(0.0, x)), rtol=1e-12, atol=1e-14
        )
        if kind != "sinkhorn":
            np.testing.assert_allclose(
                np.asarray(model.velocity(t, x, y, mask)),
                np.asarray(frozen.velocity(0.0, x, y, mask)),
                rtol=1e-12,
                atol=1e-14,
            )


def test_multihead_and_masked_equal_numpy():
    r = np.random.default_rng(7)
    p0, p1 = _draw(8), _draw(9)
    x = r.normal(size=(6, 3))
    mh = MultiHead([_module("softmax", p0), _module("l2", p1)])
    want = np_velocity("softmax", x, x, None, **_np_kw(p0)) + np_velocity("l2", x, x, None, **_np_kw(p1))
    np.testing.assert_allclose(np.asarray(mh.velocity(0.0, jnp.asarray(x))), want, rtol=1e-10)
    causal = np.tril(np.ones((6, 6), bool))
    sink = np.array([1.0, -0.5, 0.2])
    for kernel, kind in [(_module("softmax", p0), "softmax"), (_module("sigmoid", p0), "sigmoid"), (mh, "multihead")]:
        for s in (None, sink):
            model = Masked(kernel, causal, sink=s)
            got = np.asarray(model.velocity(0.0, jnp.asarray(x)))
            keys = x if s is None else np.vstack([s, x])
            full = causal if s is None else np.hstack([np.ones((6, 1), bool), causal])
            if kind == "multihead":
                want = np_velocity("softmax", x, keys, full, **_np_kw(p0)) + np_velocity(
                    "l2", x, keys, full, **_np_kw(p1)
                )
            else:
                want = np_velocity(kind, x, keys, full, **_np_kw(p0))
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    # causal softmax without a sink: the first token is autonomous, ẋ_1 = V x_1
    first = np.asarray(Masked(_module("softmax", p0), causal).velocity(0.0, jnp.asarray(x)))[0]
    np.testing.assert_allclose(first, p0["V"] @ x[0], rtol=1e-12)


# ----------------------------------------------------------------------------- Gaussian maps
@pytest.mark.parametrize("kind", ("softmax", "l2", "linear", "sinkhorn"))
def test_gaussian_map_matches_spec_formula(kind):
    r = np.random.default_rng(10)
    p = _draw(11)
    alpha = r.normal(size=3)
    u = r.normal(size=(3, 3))
    for sigma in (u @ u.T / 3, u[:, :1] @ u[:, :1].T):  # full rank and rank one
        model = _module(kind, p)
        m, c = model.gaussian_affine(0.0, jnp.asarray(alpha), jnp.asarray(sigma))
        a = p["K"].T @ p["Q"]
        m_np, c_np = np_gaussian_affine(
            kind, alpha, sigma, V=p["V"], A=a, K=p["K"], beta=p["beta"], c=p["c"], eps=p["eps"]
        )
        np.testing.assert_allclose(np.asarray(m), m_np, rtol=1e-8, atol=1e-11)
        np.testing.assert_allclose(np.asarray(c), c_np, rtol=1e-8, atol=1e-11)
        m2, _ = gaussian_affine(
            model, 0.3, jnp.asarray(alpha), jnp.asarray(sigma)
        )  # the map through the public function
        np.testing.assert_allclose(np.asarray(m2), m_np, rtol=1e-8, atol=1e-11)
        dmean, dcov = moment_derivatives(model, 0.3, jnp.asarray(alpha), jnp.asarray(sigma))
        np.testing.assert_allclose(np.asarray(dmean), m_np @ alpha + c_np, rtol=1e-8, atol=1e-11)
        np.testing.assert_allclose(np.asarray(dcov), m_np @ sigma + sigma @ m_np.T, rtol=1e-8, atol=1e-11)


def test_multihead_gaussian_map_is_the_sum_of_heads():
    r = np.random.default_rng(12)
    p0, p1 = _draw(13), _draw(14)
    alpha, u = r.normal(size=3), r.normal(size=(3, 3))
    sigma = u @ u.T / 3
    heads = [_module("softmax", p0), _module("sinkhorn", p1)]
    m, c = MultiHead(heads).gaussian_affine(0.0, jnp.asarray(alpha), jnp.asarray(sigma))
    parts = [h.gaussian_affine(0.0, jnp.asarray(alpha), jnp.asarray(sigma)) for h in heads]
    np.testing.assert_allclose(np.asarray(m), sum(np.asarray(z[0]) for z in parts), rtol=1e-13)
    np.testing.assert_allclose(np.asarray(c), sum(np.asarray(z[1]) for z in parts), rtol=1e-13)


def test_kernels_without_gaussian_map_raise_the_clear_error():
    p = _draw(15)
    sig = _module("sigmoid", p)
    causal = np.tril(np.ones((4, 4), bool))
    for model, name in [
        (sig, r"`model` \(Sigmoid\)"),
        (Masked(_module("softmax", p), causal), r"`model` \(Masked\)"),
        (MultiHead([_module("softmax", p), sig]), r"`model.heads\[1\]` \(Sigmoid\)"),
    ]:
        with pytest.raises(ParameterError, match=name + r" does not preserve Gaussians \(spec §2\)"):
            solve_gaussian(model, np.zeros(3), np.eye(3), t1=1.0)
        with pytest.raises(ParameterError, match=r"does not preserve Gaussians \(spec §2\)"):
            model.gaussian_affine(0.0, jnp.zeros(3), jnp.eye(3))
    with pytest.raises(ParameterError, match=r"`model` \(Sigmoid\) does not preserve Gaussians"):
        gaussian_affine(sig, 0.0, jnp.zeros(3), jnp.eye(3))


# ----------------------------------------------------------------------------- solves
TS = jnp.linspace(0.0, 2.0, 5)


def test_vmap_over_a_batch_of_modules():
    """A Softmax built with a leading batch axis on every field, vmapped through both solvers."""
    r = np.random.default_rng(22)
    B = 3
    vs = np.stack([np.eye(2), -np.eye(2), np.array([[0.5, 1.0], [-1.0, 0.5]])])
    a_s = r.normal(size=(B, 2, 2)) * 0.5
    betas = np.array([0.5, 1.0, 1.5])
    batch = Softmax(vs, A=a_s, beta=betas)
    assert batch.d == 2
    with pytest.raises(ParameterError, match=r"`model.V` must have rank 2 in a solve"):
        solve_gaussian(batch, np.zeros(2), np.eye(2) / 2, t1=1.0)
    mean0, cov0 = np.array([0.3, -0.2]), np.array([[0.5, 0.1], [0.1, 0.4]])
    x0 = r.normal(size=(5, 2))
    gs = jax.vmap(lambda m: solve_gaussian(m, mean0, cov0, t1=1.0, ts=TS[:3]))(batch)
    ps = eqx.filter_vmap(lambda m: solve_particles(m, x0, t1=1.0, ts=TS[:3]))(batch)
    for b in range(B):
        member = Softmax(vs[b], A=a_s[b], beta=betas[b])
        g1 = solve_gaussian(member, mean0, cov0, t1=1.0, ts=TS[:3])
        p1 = solve_particles(member, x0, t1=1.0, ts=TS[:3])
        assert int(gs.status[b]) == int(g1.status) and int(ps.status[b]) == int(p1.status)
        np.testing.assert_allclose(np.asarray(gs.cov[b]), np.asarray(g1.cov), rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(np.asarray(ps.xs[b]), np.asarray(p1.xs), rtol=1e-10, atol=1e-13)
    # a jitted velocity takes the module as an argument
    f = eqx.filter_jit(lambda m, x: m.velocity(0.0, x))
    np.testing.assert_allclose(
        np.asarray(f(Softmax(vs[0], A=a_s[0]), jnp.asarray(x0))),
        np.asarray(Softmax(vs[0], A=a_s[0]).velocity(0.0, jnp.asarray(x0))),
        rtol=1e-14,
    )


def test_particle_velocity_takes_a_module():
    p = _draw(23)
    x = jnp.asarray(np.random.default_rng(24).normal(size=(4, 3)))
    model = _module("linear", p)
    np.testing.assert_allclose(
        np.asarray(particle_velocity(model, 0.5, x, feedforward=(jnp.eye(3), jnp.ones(3)))),
        np.asarray(model.velocity(0.5, x) + x + 1.0),
        rtol=1e-13,
    )


# ----------------------------------------------------------------------------- errors
def test_construction_errors_name_the_field(no_typecheck):
    e = np.eye(2)
    with pytest.raises(
        ParameterError, match=r"`V` of Softmax must have shape \(d, d\) \(square, d >= 1\); got shape \(2, 3\)"
    ):
        Softmax(np.zeros((2, 3)), A=e)
    with pytest.raises(ParameterError, match=r"Softmax: give the interaction matrix `A` .* got neither"):
        Softmax(e)
    with pytest.raises(ParameterError, match=r"Sigmoid: give either `A` or \(`Q`, `K`\), not both"):
        Sigmoid(e, A=e, Q=e, K=e)
    with pytest.raises(ParameterError, match=r"Linear: `Q` and `K` must be given together; `K` is missing"):
        Linear(e, Q=e)
    with pytest.raises(
        ParameterError, match=r"`Q` of Softmax must have shape \(k, d\) with d = 2 \(from V\); got shape \(1, 3\)"
    ):
        Softmax(e, Q=np.zeros((1, 3)), K=np.zeros((1, 3)))
    with pytest.raises(ParameterError, match=r"`A` of Sinkhorn must have shape \(d, d\) = \(2, 2\)"):
        Sinkhorn(e, A=np.eye(3))
    with pytest.raises(ParameterError, match=r"L2 needs `Q` and `K`"):
        L2(e, None, None)
    with pytest.raises(ParameterError, match=r"`eps` of Sinkhorn must be > 0"):
        Sinkhorn(e, A=e, eps=0.0)
    with pytest.raises(ParameterError, match=r"`eps` of Sinkhorn must be > 0; got layer values \[1.0, 0.0\]"):
        Sinkhorn(e, A=e, eps=PiecewiseConstant(np.array([1.0, 0.0])))
    with pytest.raises(ParameterError, match=r"`tol` of Sinkhorn must be > 0"):
        Sinkhorn(e, A=e, tol=0.0)
    with pytest.raises(ParameterError, match=r"`max_iter` of Sinkhorn must be an integer >= 1"):
        Sinkhorn(e, A=e, max_iter=0)
    with pytest.raises(ParameterError, match=r"`beta` must be a real array; got dtype complex"):
        Softmax(e, A=e, beta=1j)
    with pytest.raises(ParameterError, match=r"`heads` must contain at least one"):
        MultiHead([])
    with pytest.raises(ParameterError, match=r"`heads\[1\]` must be an attention kernel"):
        MultiHead([Softmax(e, A=e), {"V": e, "A": e}])
    with pytest.raises(ParameterError, match=r"`heads` must share the token dimension d; got d = \[2, 3\]"):
        MultiHead([Softmax(e, A=e), Softmax(np.eye(3), A=np.eye(3))])
    causal = np.tril(np.ones((2, 2), bool))
    with pytest.raises(ParameterError, match=r"`kernel`: kind 'sinkhorn' has no masked form"):
        Masked(Sinkhorn(e, A=e), causal)
    with pytest.raises(ParameterError, match=r"`kernel.heads\[1\]`: kind 'sinkhorn' has no masked form"):
        Masked(MultiHead([Softmax(e, A=e), Sinkhorn(e, A=e)]), causal)
    with pytest.raises(ParameterError, match=r"`kernel` is already Masked"):
        Masked(Masked(Softmax(e, A=e), causal), causal)
    with pytest.raises(ParameterError, match=r"`sink` must have shape \(d,\) = \(2,\)"):
        Masked(Softmax(e, A=e), causal, sink=np.zeros(3))
    with pytest.raises(MaskError, match=r"must have dtype bool"):
        Masked(Softmax(e, A=e), np.ones((2, 2)))
    with pytest.raises(EmptyRowError, match=r"1 empty row"):
        Masked(Softmax(e, A=e), np.array([[True, False], [False, False]]))
    with pytest.raises(ParameterError, match=r"'sinkhorn' has no masked form"):
        Sinkhorn(e, A=e).velocity(0.0, jnp.zeros((2, 2)), mask=jnp.ones((2, 2), bool))


def test_call_errors(no_typecheck):
    e = np.eye(2)
    model = Softmax(e, A=e)
    x = jnp.zeros((3, 2))
    with pytest.raises(ParameterError, match=r"`x` must have shape \(m, d\) with d = 2; got shape \(3, 3\)"):
        model.velocity(0.0, jnp.zeros((3, 3)))
    with pytest.raises(ParameterError, match=r"`mask` must have shape \(m, n\) = \(3, 3\)"):
        model.velocity(0.0, x, mask=jnp.ones((3, 4), bool))
    masked = Masked(model, np.tril(np.ones((3, 3), bool)))
    with pytest.raises(ParameterError, match=r"pass keys=None, mask=None"):
        masked.velocity(0.0, x, keys=x)
    with pytest.raises(ParameterError, match=r"`x` must have shape \(n, d\) with n = 3 \(the mask size\)"):
        masked.velocity(0.0, jnp.zeros((4, 2)))
    with pytest.raises(ParameterError, match=r"`x0` must have n = 3 rows \(the mask size of model\)"):
        solve_particles(masked, np.zeros((4, 2)), t1=1.0)
    # masked heads: the solve names `x0` and the head (was "`x` must have shape (n, d) with n = 3"), and heads whose
    # masks differ in size are refused when the MultiHead is built (a review)
    with pytest.raises(ParameterError, match=r"`x0` must have n = 3 rows \(the mask size of model.heads\[1\]\)"):
        solve_particles(MultiHead([model, masked]), np.zeros((4, 2)), t1=1.0)
    with pytest.raises(ParameterError, match=r"`heads\[0\]` has n = 3 and `heads\[2\]` has n = 2"):
        MultiHead([masked, model, Masked(model, np.tril(np.ones((2, 2), bool)))])
    # nested MultiHeads too (diff review: one level only)
    with pytest.raises(ParameterError, match=r"`heads\[0\]\.heads\[1\]` has n = 3 and `heads\[1\]` has n = 2"):
        MultiHead([MultiHead([model, masked]), Masked(model, np.tril(np.ones((2, 2), bool)))])
    with pytest.raises(ParameterError, match=r"the mask size of model\.heads\[0\]\.heads\[1\]"):
        solve_particles(MultiHead([MultiHead([model, masked])]), np.zeros((4, 2)), t1=1.0)
    with pytest.raises(ParameterError, match=r"`x0` must have shape \(n, d\) with d = 2 \(from model\)"):
        solve_particles(model, np.zeros((4, 3)), t1=1.0)
    with pytest.raises(ParameterError, match=r"MultiHead has no single weight matrix"):
        MultiHead([model]).weights(0.0, x)
    with pytest.raises(ParameterError, match=r"`model` must be an attention kernel .* got dict"):
        solve_particles({"V": e, "A": e}, np.zeros((3, 2)), t1=1.0)
    with pytest.raises(TypeError, match=r"positional argument"):
        solve_particles(model, np.zeros((3, 2)), np.zeros((3, 2)), t1=1.0)
    with pytest.raises(TypeError, match=r"multiple values for argument 'cov0'"):
        solve_gaussian(model, np.zeros(2), e, cov0=e, t1=1.0)
    with pytest.raises(ParameterError, match=r"`model.V` must be finite"):
        solve_particles(Softmax(np.full((2, 2), np.nan), A=e), np.zeros((3, 2)), t1=1.0)


# ----------------------------------------------------------------------------- docstrings


def test_abstract_base_cannot_be_instantiated():
    with pytest.raises(TypeError):
        AbstractAttention()


@pytest.mark.parametrize("kind", ["Softmax", "Sigmoid", "Linear", "L2", "Sinkhorn"])
def test_batched_kernel_called_directly_raises_and_vmap_gives_each_member(kind):
    """A kernel built with a batch axis raises when called (it used to return the members'
    velocities with the axes scrambled); vmapped over, it gives each member's velocity."""
    from hassejax import dynamics

    cls = getattr(dynamics, kind)
    eye = jnp.eye(2)
    x = jnp.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.5]])
    qa = {"Q": eye, "K": eye} if kind == "L2" else {"A": eye}
    for kw in ({"V": jnp.stack([eye, 2 * eye]), **qa}, {"V": eye, **qa, "beta": jnp.array([1.0, 2.0, 3.0])}):
        with pytest.raises(ParameterError, match=r"`model\.(V|beta)` must have rank"):
            cls(**kw).velocity(0.0, x)
    if kind in ("Softmax", "Linear"):
        batch = cls(V=jnp.stack([eye, 2 * eye]), A=jnp.stack([eye, eye]), beta=jnp.ones(2))
        out = jax.vmap(lambda m: m.velocity(0.0, x))(batch)
        ref = jnp.stack([cls(V=eye, A=eye).velocity(0.0, x), cls(V=2 * eye, A=eye).velocity(0.0, x)])
        np.testing.assert_allclose(out, ref, rtol=1e-12)


def test_piecewise_constant_edges_must_increase():
    values = jnp.stack([jnp.eye(2), -jnp.eye(2)])
    for edges in ([0.0, 2.0, 1.0], [0.0, 1.0, 1.0]):
        with pytest.raises(ParameterError, match="`t_edges` must be strictly increasing"):
            PiecewiseConstant(values, t_edges=jnp.array(edges))
    v = PiecewiseConstant(values, t_edges=jnp.array([0.0, 1.0, 2.0]))
    assert [float(v(t)[0, 0]) for t in (0.5, 1.5)] == [1.0, -1.0]


def test_a_kernel_returning_the_wrong_shapes_is_refused_by_name():
    """A user's kernel whose map or velocity returns another shape met a raw ``dot_general`` or broadcasting error
    inside the solver (a fresh-user review); it is now refused before the solve, naming the method."""
    from hassejax.dynamics import Softmax, solve_gaussian, solve_particles
    from hassejax.errors import ParameterError

    class Truncated(Softmax):
        def gaussian_affine(self, t, mean, cov, factor=None):
            m, c = super().gaussian_affine(t, mean, cov, factor)
            return m[:1], c

        def velocity(self, t, x, keys=None, mask=None):
            return x[:, :1]

    class Mismatched(Softmax):
        def gaussian_affine(self, t, mean, cov, factor=None):
            return cov @ jnp.ones((3, 3)), mean

    class OneTuple(Softmax):  # a 1-tuple passed a shape check that unpacked it, then failed in the solver
        def velocity(self, t, x, keys=None, mask=None):
            return (super().velocity(t, x, keys, mask),)

    eye = jnp.eye(2)
    with pytest.raises(
        ParameterError,
        match=r"model\.gaussian_affine\(.*must return arrays of shapes \(\(2, 2\), \(2,\)\); got \(\(1, 2\), \(2,\)\)",
    ):
        solve_gaussian(Truncated(V=eye, A=eye), jnp.zeros(2), eye, t1=1.0)
    with pytest.raises(
        ParameterError, match=r"model\.velocity\(t, x \(3, 2\)\) must return an array of shape \(3, 2\); got \(3, 1\)"
    ):
        solve_particles(Truncated(V=eye, A=eye), jnp.ones((3, 2)), t1=1.0)
    with pytest.raises(ParameterError, match=r"must return an array of shape \(3, 2\); got a tuple of shapes"):
        solve_particles(OneTuple(V=eye, A=eye), jnp.ones((3, 2)), t1=1.0)
    with pytest.raises(
        ParameterError, match=r"gaussian_affine.*failed on inputs of the shapes it must take \(TypeError: dot_general"
    ) as info:
        solve_gaussian(Mismatched(V=eye, A=eye), jnp.zeros(2), eye, t1=1.0)
    assert isinstance(info.value.__cause__, TypeError)
    # inside a MultiHead the message names the head (it named `model.gaussian_affine`, a second review)
    from hassejax.dynamics import MultiHead

    with pytest.raises(ParameterError, match=r"`?model\.heads\[1\]\.gaussian_affine\(.*got \(\(1, 2\), \(2,\)\)"):
        solve_gaussian(MultiHead([Softmax(V=eye, A=eye), Truncated(V=eye, A=eye)]), jnp.zeros(2), eye, t1=1.0)
    with pytest.raises(ParameterError, match=r"model\.heads\[0\]\.velocity\(t, x \(3, 2\)\) must return an array"):
        solve_particles(MultiHead([OneTuple(V=eye, A=eye), Softmax(V=eye, A=eye)]), jnp.ones((3, 2)), t1=1.0)
