"""Growth bounds of the Gaussian maps: `d/dt tr Σ ≤ r tr Σ` for every `Σ ⪰ 0` (derived; spec dynamics.md §3).

`AbstractAttention.gaussian_growth_bound` is checked against the moment ODE itself
(`d/dt tr Σ = tr Σ'`, from :func:`moment_derivatives`) on random kernels and covariances, some
near-singular, and its use in the verdict: a kernel with a finite bound never reads ``blow_up``.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hassejax.dynamics import L2, Linear, MultiHead, Sinkhorn, Softmax, moment_derivatives, solve_gaussian, status_names
from hassejax.errors import ParameterError


def _cov(r, d, spread):
    """A random covariance with eigenvalues spread over `10^±spread` (some directions near zero)."""
    q, _ = np.linalg.qr(r.normal(size=(d, d)))
    return (q * 10.0 ** r.uniform(-spread, spread, size=d)) @ q.T


@eqx.filter_jit
def _trace_derivative(model, cov):
    _, dcov = moment_derivatives(model, 0.0, jnp.zeros(cov.shape[0]), cov)
    return jnp.trace(dcov)


def _trace_rate(model, cov):
    """`tr Σ'` at `Σ = cov` (zero mean): one compiled program per kernel kind and dimension, not the moment map's
    operations one by one (each new shape compiled each of them again)."""
    return float(_trace_derivative(model, jnp.asarray(cov)))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), d=st.integers(1, 4), kind=st.sampled_from(["l2", "sinkhorn", "multihead"]))
def test_trace_growth_is_within_the_bound(seed, d, kind):
    """`tr Σ' ≤ r tr Σ` on kernels with a finite bound, for covariances from 1e-4 to 1e4 per direction."""
    r = np.random.default_rng(seed)

    def l2():
        return L2(V=r.normal(size=(d, d)), Q=r.normal(size=(d, d)), K=r.normal(size=(d, d)) * 10 ** r.uniform(-1, 1),
                  beta=r.uniform(0.2, 2.0), c=r.uniform(0.2, 2.0))  # fmt: skip

    def sinkhorn():
        return Sinkhorn(V=r.normal(size=(d, d)), A=r.normal(size=(d, d)) * 10 ** r.uniform(-1, 1), tol=1e-12)

    model = {"l2": l2, "sinkhorn": sinkhorn, "multihead": lambda: MultiHead([l2(), sinkhorn()])}[kind]()
    bound = float(model.gaussian_growth_bound(0.0))
    assert np.isfinite(bound) and bound > 0
    worst = 0.0
    for _ in range(6):
        cov = _cov(r, d, 4.0)
        worst = max(worst, _trace_rate(model, cov) / np.trace(cov))
    assert worst <= bound * (1 + 1e-6)


def test_l2_bound_is_attained_by_its_saturated_map():
    """`V = I`, `Q = K = kI`: the map saturates to `M → V(KᵀK)⁻¹KᵀQ = I`, so `tr Σ'/tr Σ → 2 = r`."""
    model = L2(V=np.eye(2), Q=3 * np.eye(2), K=3 * np.eye(2))
    assert float(model.gaussian_growth_bound(0.0)) == pytest.approx(2.0)
    assert _trace_rate(model, 1e8 * np.eye(2)) / 2e8 == pytest.approx(2.0, rel=1e-6)


def test_unbounded_kernels_report_inf():
    """Softmax and linear maps grow with `Σ`; L2 with a singular `KᵀK` or `βc ≤ 0` is not damped (spec §3)."""
    a = np.eye(2)
    assert float(Softmax(V=a, A=a).gaussian_growth_bound(0.0)) == np.inf
    assert float(Linear(V=a, A=a).gaussian_growth_bound(0.0)) == np.inf
    assert float(L2(V=a, Q=a, K=np.array([[1.0, 0.0], [0.0, 0.0]])).gaussian_growth_bound(0.0)) == np.inf
    assert float(L2(V=a, Q=a, K=a, c=-1.0).gaussian_growth_bound(0.0)) == np.inf
    assert float(MultiHead([L2(V=a, Q=a, K=a), Softmax(V=a, A=a)]).gaussian_growth_bound(0.0)) == np.inf
    batched = L2(V=np.stack([a, a]), Q=np.stack([a, a]), K=np.stack([a, a]))
    with pytest.raises(ParameterError, match="batched"):
        batched.gaussian_growth_bound(0.0)


def _burst_model(dtype):
    """An L2 kernel (invertible `K`, condition 2.2) whose `tr Σ` from `1e-3 I` grows through a burst: from 12 to
    480 between `t = 276` and 315 (float64, rtol 1e-10), then exponentially (decade ratio 0.21 at `1e8 × scale`)."""
    r = np.random.default_rng(15)
    k = r.standard_normal((3, 3)) * 10 ** r.uniform(-1, 1)
    q, v = r.standard_normal((3, 3)), r.standard_normal((3, 3))
    return L2(V=jnp.asarray(v, dtype), Q=jnp.asarray(q, dtype), K=jnp.asarray(k, dtype))


def test_a_burst_of_bounded_growth_is_not_a_blow_up():
    """A threshold inside the burst (47, `1e4 ×` the kernel's size scale: the float32 default) read ``blow_up``
    (decade ratio 0.014) before the bound decided; the bound rules a finite-time blow-up out: ``diverge``."""
    model = _burst_model(np.float64)
    kw = dict(t1=1e4, rtol=1e-10, atol=1e-10)
    sol = solve_gaussian(model, np.zeros(3), 1e-3 * np.eye(3), size_threshold=47.0, **kw)
    assert status_names(sol.status) == "diverge" and float(sol.t_blowup) == np.inf
    assert float(sol.decade_ratio) < 0.05  # what the decade test alone read
    assert 290 < float(sol.t_final) < 300
    # float32 at its default threshold (1e4 × scale = 47)
    sol = solve_gaussian(_burst_model(np.float32), jnp.zeros(3, jnp.float32), 1e-3 * jnp.eye(3, dtype=jnp.float32),
                         t1=1e4, rtol=1e-5, atol=1e-5)  # fmt: skip
    assert status_names(sol.status) == "diverge"


def test_the_bound_is_read_per_member_under_vmap():
    """A sweep over `K`: the member with a singular `K` keeps the decade test (``blow_up`` for this softmax-like
    growth), the invertible one is ``diverge``."""
    model = _burst_model(np.float64)

    def one(k):
        return solve_gaussian(L2(V=model.V, Q=model.Q, K=k), jnp.zeros(3), 1e-3 * jnp.eye(3), t1=1e4, rtol=1e-10,
                              atol=1e-10, size_threshold=47.0).status  # fmt: skip

    ks = jnp.stack([model.K, model.K.at[:, 2].set(0.0)])
    got = status_names(jax.vmap(one)(ks)).tolist()
    assert got[0] == "diverge"
    assert got[1] == status_names(one(ks[1]))


def test_a_callable_parameter_leaves_the_verdict_to_the_decade_test():
    """Grönwall needs the rate bounded over the interval, not finite at each depth (review): L2 with
    `V(t) = I/(2(1 − t))` has a finite bound at every `t < 1`, yet for large `Σ` `Σ' ≈ Σ/(1 − t)` and `tr Σ`
    blows up at `t = 1`. It read ``diverge`` (the bound at the crossing overrode ρ = 0.0099); a kernel with a
    callable parameter now has no bound in the verdict: ``blow_up`` at 1."""
    model = L2(V=lambda t: jnp.eye(2) / (2.0 * (1.0 - t)), Q=jnp.eye(2), K=jnp.eye(2))
    assert np.isfinite(float(model.gaussian_growth_bound(0.9)))
    sol = solve_gaussian(model, jnp.zeros(2), 10.0 * jnp.eye(2), t1=2.0)
    assert status_names(sol.status) == "blow_up"
    assert float(sol.t_blowup) == pytest.approx(1.0, rel=1e-6)


def test_piecewise_constant_parameters_use_the_largest_bound_over_their_layers():
    """Layers of :class:`PiecewiseConstant` parameters: the bound the verdict uses is the largest over the
    layers (every layer edge read), `inf` when one layer's `K` is singular, whatever the depth of the crossing."""
    from hassejax.dynamics import PiecewiseConstant
    from hassejax.dynamics.gaussian import _uniform_growth_bound

    e = np.eye(2)
    ks = PiecewiseConstant(np.stack([e, 2 * e, 0.5 * e]), [0.0, 1.0, 2.0, 3.0])
    model = L2(V=e, Q=e, K=ks)
    per_layer = [float(L2(V=e, Q=e, K=k).gaussian_growth_bound(0.0)) for k in (e, 2 * e, 0.5 * e)]
    assert float(_uniform_growth_bound(model)(0.0)) == pytest.approx(max(per_layer))  # the 0.5 I layer: 4
    singular = L2(V=e, Q=e, K=PiecewiseConstant(np.stack([e, np.diag([1.0, 0.0])]), [0.0, 1.0, 2.0]))
    assert float(_uniform_growth_bound(singular)(0.0)) == np.inf
    assert _uniform_growth_bound(L2(V=lambda t: e, Q=e, K=e)) is None
