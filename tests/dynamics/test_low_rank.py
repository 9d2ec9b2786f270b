"""Tests of hassejax.dynamics.low_rank: the rank-k head kernel and the exact k-dimensional solves.

Independent references: the ordinary `d×d` solvers (`solve_gaussian` on a `Softmax` with
`V = W_O W_V`, `A = KᵀQ`; `solve_particles` under the block-diagonal mask of the groups),
NumPy velocity loops, the commuting closed forms of spec §3, and the `Φ`-form of the
covariance against the expanded host-side form.
"""

from __future__ import annotations

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hassejax import masks
from hassejax.dynamics import (
    GaussianSolution,
    LowRankGaussianSolution,
    LowRankParticleSolution,
    LowRankSoftmax,
    Masked,
    ParticleSolution,
    Softmax,
    Status,
    solve_gaussian,
    solve_low_rank_gaussian,
    solve_low_rank_particles,
    solve_low_rank_particles_each,
    solve_particles,
)
from hassejax.dynamics.closed_form import diagonal_blowup_time, diagonal_covariance_closed_form
from hassejax.dynamics.low_rank import gaussian_covariances, initial_rates, particle_covariances
from hassejax.errors import ParameterError


def _head(seed, d=6, k=2):
    rng = np.random.default_rng(seed)
    Q = rng.normal(size=(k, d)) / np.sqrt(d)
    K = rng.normal(size=(k, d)) / np.sqrt(d)
    Wv = rng.normal(size=(k, d)) / np.sqrt(d)
    Wo = rng.normal(size=(d, k))
    g = rng.normal(size=(d, d - 1))
    return LowRankSoftmax(Q, K, Wv, Wo), g @ g.T / d, rng.normal(size=d)


def _softmax(head):
    return Softmax(V=head.W_O @ head.W_V, Q=head.Q, K=head.K)


# --------------------------------------------------------------------------- kernel
# two sizes per axis (1, the edge, and a larger one): the kernel runs op by op, each new shape compiles each op again
@given(
    seed=st.integers(0, 2**16),
    d=st.sampled_from([1, 4]),
    k=st.sampled_from([1, 3]),
    n=st.sampled_from([1, 5]),
    masked=st.booleans(),
)
def test_kernel_velocity_equals_numpy_loop(seed, d, k, n, masked):
    rng = np.random.default_rng(seed)
    Q, K, Wv = (rng.normal(size=(k, d)) for _ in range(3))
    Wo = rng.normal(size=(d, k))
    x = rng.normal(size=(n, d))
    mask = rng.random((n, n)) < 0.6 if masked else np.ones((n, n), bool)
    mask[:, 0] = True
    got = np.asarray(
        LowRankSoftmax(Q, K, Wv, Wo).velocity(0.0, jnp.asarray(x), mask=jnp.asarray(mask) if masked else None)
    )
    want = np.zeros((n, d))
    for i in range(n):
        logits = np.array([(Q @ x[i]) @ (K @ x[j]) if mask[i, j] else -np.inf for j in range(n)])
        w = np.exp(logits - logits.max())
        w /= w.sum()
        want[i] = sum(w[j] * (Wo @ (Wv @ x[j])) for j in range(n))
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_kernel_gaussian_map_equals_softmax():
    head, s0, a0 = _head(1)
    m, c = head.gaussian_affine(0.0, jnp.asarray(a0), jnp.asarray(s0))
    m_ref, c_ref = _softmax(head).gaussian_affine(0.0, jnp.asarray(a0), jnp.asarray(s0))
    np.testing.assert_allclose(np.asarray(m), np.asarray(m_ref), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(c), np.asarray(c_ref), rtol=1e-10, atol=1e-12)
    assert head.d == 6 and head.k == 2
    np.testing.assert_allclose(np.asarray(head.interaction(0.0)), np.asarray(head.K.T @ head.Q))


def test_kernel_errors(no_typecheck):
    head, _, _ = _head(0)
    with pytest.raises(ParameterError, match=r"`W_O` shape \(d, k\)"):
        LowRankSoftmax(head.Q, head.K, head.W_V, head.W_O.T)
    batched = LowRankSoftmax(*(jnp.stack([a, a]) for a in (head.Q, head.K, head.W_V, head.W_O)))
    with pytest.raises(ParameterError, match=r"`model.Q` must have rank 2 in a solve"):
        solve_low_rank_gaussian(batched, np.zeros(6), np.eye(6), t1=1.0)
    with pytest.raises(ParameterError, match="`model` must be a LowRankSoftmax"):
        solve_low_rank_gaussian(_softmax(head), np.zeros(6), np.eye(6), t1=1.0)


# --------------------------------------------------------------------------- Gaussian
@pytest.mark.parametrize("seed", [0, 1])
def test_reduced_gaussian_equals_full_solve(seed):
    head, S0, a0 = _head(seed)  # S0 singular (rank d − 1)
    ts = jnp.linspace(0.0, 4.0, 9)
    kw = {"t1": 4.0, "ts": ts, "rtol": 1e-10, "atol": 1e-10}
    full = solve_gaussian(_softmax(head), a0, S0, **kw)
    red = solve_low_rank_gaussian(head, a0, S0, **kw)
    assert isinstance(red, LowRankGaussianSolution) and red.psi.shape == (9, 2, 2) and red.b.shape == (9, 2)
    as_gauss = red.to_gaussian(head, a0, S0)
    assert isinstance(as_gauss, GaussianSolution)
    assert int(as_gauss.status) == int(full.status)
    np.testing.assert_array_equal(np.asarray(as_gauss.valid), np.asarray(full.valid))
    for name in ("cov", "mean", "factor", "cov_final", "mean_final"):
        np.testing.assert_allclose(
            np.asarray(getattr(as_gauss, name)), np.asarray(getattr(full, name)), rtol=1e-7, atol=1e-8
        )
    mean, cov = red.moments(head, a0, S0)
    np.testing.assert_allclose(np.asarray(cov), np.asarray(full.cov), rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(np.asarray(mean), np.asarray(full.mean), rtol=1e-7, atol=1e-8)
    # the host-side expanded form (used by the real-heads figure) agrees with the Φ form
    np.testing.assert_allclose(
        gaussian_covariances(head, S0, np.asarray(red.psi)), np.asarray(cov), rtol=1e-10, atol=1e-12
    )


def _commuting_head(sign, d=6, k=2, seed=4):
    """V = c·PᵀP and A = ±PᵀP with P = Q: V, A and Σ0 (diagonal in the same basis) commute.

    d = 6 and k = 2 as :func:`_head`, and 9 save times in the two tests below: the reduced solves of this file
    then share one compiled program. The basis is the d = 5 one these tests had with a sixth direction apart (no
    interaction, V = 0 there: Σ0's 0.6 stays), so the reduced (k-dimensional) solve is the one it was."""
    rng = np.random.default_rng(seed)
    basis = np.eye(d)
    basis[: d - 1, : d - 1] = np.linalg.qr(rng.normal(size=(d - 1, d - 1)))[0]
    s = np.array([1.5, 0.8])
    Q = s[:, None] * basis[:, :k].T  # (k, d), QᵀQ = Σ_i s_i² b_i b_iᵀ
    sigma0 = np.array([0.7, 0.4, 0.9, 0.3, 0.5, 0.6])
    S0 = (basis * sigma0) @ basis.T
    a_diag = sign * np.concatenate([s**2, np.zeros(d - k)])
    v_diag = 0.6 * np.concatenate([s**2, np.zeros(d - k)])
    return LowRankSoftmax(Q, sign * Q, Q, 0.6 * Q.T), S0, basis, sigma0, a_diag, v_diag


def test_reduced_gaussian_blowup_time_commuting_closed_form():
    head, S0, _basis, sigma0, a_diag, v_diag = _commuting_head(+1.0)
    t_star = float(diagonal_blowup_time(sigma0, a=a_diag, v=v_diag))
    ts = jnp.linspace(0.0, 3 * t_star, 9)  # 9 save times, as the other reduced solves: one compiled solve
    red = solve_low_rank_gaussian(head, np.zeros(6), S0, t1=3 * t_star, ts=ts)
    assert Status(int(red.status)) is Status.blow_up
    assert abs(float(red.t_blowup) - t_star) < 1e-6 * t_star


def test_reduced_gaussian_contraction_commuting_closed_form():
    head, S0, basis, sigma0, a_diag, v_diag = _commuting_head(-1.0)
    ts = jnp.array([0.0, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 50.0, 100.0])  # 9: see _commuting_head
    red = solve_low_rank_gaussian(head, np.zeros(6), S0, t1=100.0, ts=ts)
    assert Status(int(red.status)) is Status.completed
    _, cov = red.moments(head, np.zeros(6), S0)
    want = np.stack(
        [(basis * np.asarray(diagonal_covariance_closed_form(sigma0, a=a_diag, v=v_diag, t=t))) @ basis.T for t in ts]
    )
    np.testing.assert_allclose(np.asarray(cov), want, rtol=1e-6, atol=1e-9)


def test_solver_and_controller_are_choosable():
    head, S0, a0 = _head(3)
    kw = {"t1": 0.4, "ts": jnp.linspace(0.0, 0.4, 9)}  # this head blows up at t ≈ 0.54; 9 save times: see below
    ref = solve_low_rank_gaussian(head, a0, S0, rtol=1e-10, atol=1e-10, **kw)
    const = solve_low_rank_gaussian(
        head, a0, S0, solver=diffrax.Heun(), stepsize_controller=diffrax.ConstantStepSize(), dt0=0.01, **kw
    )
    assert int(const.stats.num_steps) == 40 and Status(int(const.status)) is Status.completed
    np.testing.assert_allclose(np.asarray(const.psi), np.asarray(ref.psi), rtol=1e-3, atol=1e-4)


def test_reduced_solves_vmap_over_heads():
    heads = [_head(s) for s in (7, 8, 9)]
    batch = jax.tree.map(lambda *a: jnp.stack(a), *[h for h, _, _ in heads])
    s0, a0 = np.stack([s for _, s, _ in heads]), np.stack([a for _, _, a in heads])
    # 9 save times at rtol = atol = 1e-10, as the other d = 6 reduced solves: the one-head solves share their program
    ts, tol = jnp.linspace(0, 2.0, 9), {"rtol": 1e-10, "atol": 1e-10}
    sol = jax.vmap(lambda m, s, a: solve_low_rank_gaussian(m, a, s, t1=2.0, ts=ts, **tol))(batch, s0, a0)
    assert sol.psi.shape == (3, 9, 2, 2) and sol.status.shape == (3,)
    for i, (head, S0, a) in enumerate(heads):
        one = solve_low_rank_gaussian(head, a, S0, t1=2.0, ts=ts, **tol)
        np.testing.assert_allclose(np.asarray(sol.psi[i]), np.asarray(one.psi), rtol=1e-7, atol=1e-10)


# --------------------------------------------------------------------------- particles
def test_reduced_particles_equal_full_solves():
    head, _, _ = _head(5)
    rng = np.random.default_rng(6)
    x = rng.normal(size=(3, 5, 6))
    mask = np.ones((3, 5), bool)
    mask[1, 3:] = False
    mask[2, 4] = False
    kw = {"t1": 2.0, "ts": jnp.linspace(0.0, 2.0, 5), "rtol": 1e-10, "atol": 1e-10}
    # per group (the padding mask) == the block-diagonal mask over the real tokens
    red = solve_low_rank_particles(head, x, mask, **kw)
    assert isinstance(red, LowRankParticleSolution) and red.z.shape == (5, 3, 5, 2)
    full = solve_particles(Masked(head, masks.document(list(mask.sum(1)), "full")), x[mask], **kw)
    as_particles = red.to_particles(head, x, mask)
    assert isinstance(as_particles, ParticleSolution) and int(as_particles.status) == int(full.status)
    np.testing.assert_allclose(np.asarray(as_particles.xs), np.asarray(full.xs), rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(np.asarray(as_particles.x_final), np.asarray(full.x_final), rtol=1e-7, atol=1e-8)
    xs = np.asarray(red.tokens(head, x))
    np.testing.assert_array_equal(xs[:, ~mask], np.broadcast_to(x[~mask], xs[:, ~mask].shape))  # padding does not move
    # host-side covariance of the real tokens against NumPy on the tokens themselves
    cov, within = particle_covariances(head, x, mask, np.asarray(red.z))
    xr = xs[:, mask]
    xc = xr - xr.mean(1, keepdims=True)
    np.testing.assert_allclose(cov, np.einsum("tni,tnj->tij", xc, xc) / xr.shape[1], rtol=1e-9, atol=1e-12)
    groups = [xs[:, s, mask[s]] for s in range(3)]
    want_within = sum(((g - g.mean(1, keepdims=True)) ** 2).sum((1, 2)) for g in groups) / mask.sum()
    np.testing.assert_allclose(within, want_within, rtol=1e-9)
    # one group: the pooled measure, against the ordinary softmax kernel
    red1 = solve_low_rank_particles(head, x[mask][None], np.ones((1, mask.sum()), bool), **kw)
    full1 = solve_particles(_softmax(head), x[mask], **kw)
    np.testing.assert_allclose(
        np.asarray(red1.tokens(head, x[mask][None]))[:, 0], np.asarray(full1.xs), rtol=1e-7, atol=1e-8
    )


def test_particles_each_equals_one_by_one():
    heads = [_head(s)[0] for s in (10, 11)]
    batch = jax.tree.map(lambda *a: jnp.stack(a), *heads)
    # 3 groups of up to 5 tokens and 5 save times, as in the test above: the one-by-one solves reuse its program
    x = np.random.default_rng(12).normal(size=(3, 5, 6))
    mask = np.array([[True] * 5, [True] + [False] * 4, [True, True, True, False, False]])
    t1 = jnp.array([1.0, 0.5])
    ts = jnp.stack([jnp.linspace(0.0, 1.0, 5), jnp.linspace(0.0, 0.5, 5)])
    both = solve_low_rank_particles_each(batch, x, mask, t1=t1, ts=ts, rtol=1e-8, atol=1e-8)
    assert both.z.shape == (2, 5, 3, 5, 2)
    for i, head in enumerate(heads):
        one = solve_low_rank_particles(head, x, mask, t1=float(t1[i]), ts=ts[i], rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(np.asarray(both.z[i]), np.asarray(one.z), rtol=1e-12, atol=1e-14)
    per_run = solve_low_rank_particles_each(batch, np.stack([x, 2 * x]), mask, t1=t1, ts=ts, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(np.asarray(per_run.z[0]), np.asarray(both.z[0]), rtol=1e-12, atol=1e-14)


def test_reduced_solve_errors(no_typecheck):
    head, S0, a0 = _head(0)
    with pytest.raises(ParameterError, match=r"`mean0` must have shape \(6,\) and `cov0` \(6, 6\)"):
        solve_low_rank_gaussian(head, a0[:3], S0, t1=1.0)
    with pytest.raises(ParameterError, match="`cov0` must be finite"):
        solve_low_rank_gaussian(head, a0, S0 * np.nan, t1=1.0)
    with pytest.raises(ParameterError, match="`t1` must be > `t0`"):
        solve_low_rank_gaussian(head, a0, S0, t1=0.0)
    with pytest.raises(ParameterError, match="`size_threshold` must be > 0"):
        solve_low_rank_gaussian(head, a0, S0, t1=1.0, size_threshold=-1.0)
    with pytest.raises(ParameterError, match="`blowup_estimate` must be"):
        solve_low_rank_gaussian(head, a0, S0, t1=1.0, blowup_estimate="guess")
    with pytest.raises(ParameterError, match="`max_steps` must be a positive integer"):
        solve_low_rank_gaussian(head, a0, S0, t1=1.0, max_steps=0)
    x = np.zeros((2, 3, 6))
    with pytest.raises(ParameterError, match=r"`x0` must have shape \(S, N, d\) with d = 6"):
        solve_low_rank_particles(head, x[0], np.ones((2, 3), bool), t1=1.0)
    with pytest.raises(ParameterError, match=r"`mask` must be Boolean of shape \(S, N\)"):
        solve_low_rank_particles(head, x, np.ones((2, 3)), t1=1.0)
    with pytest.raises(ParameterError, match=r"groups \[1\] are empty"):
        solve_low_rank_particles(head, x, np.array([[True, False, False], [False, False, False]]), t1=1.0)
    with pytest.raises(ParameterError, match="`x0` must be finite"):
        solve_low_rank_particles(head, x * np.nan, np.ones((2, 3), bool), t1=1.0)
    with pytest.raises(ParameterError, match=r"`size_threshold` must exceed the initial size tr Σ0 = 6"):
        solve_low_rank_gaussian(head, a0, np.eye(6), t1=1.0, size_threshold=6.0)
    xr = np.random.default_rng(3).normal(size=(2, 3, 6))
    with pytest.raises(ParameterError, match=r"`size_threshold` must exceed the initial size the initial trace"):
        solve_low_rank_particles(head, xr, np.ones((2, 3), bool), t1=1.0, size_threshold=1e-3)
    with pytest.raises(ParameterError, match="`models` must be a LowRankSoftmax with one leading run axis"):
        solve_low_rank_particles_each(head, x, np.ones((2, 3), bool), t1=jnp.ones(1), ts=jnp.ones((1, 2)))


def test_initial_rates_against_the_kernel():
    head, _, _ = _head(13)
    x = np.random.default_rng(14).normal(size=(7, 6))
    r = initial_rates(head, x)
    g = np.asarray(head.velocity(0.0, jnp.asarray(x)))
    xc, gc = x - x.mean(0), g - g.mean(0)
    c = gc.T @ xc / 7
    rate_p = c + c.T
    cov = xc.T @ xc / 7
    m, _ = head.gaussian_affine(0.0, jnp.asarray(x.mean(0)), jnp.asarray(cov))
    rate_g = np.asarray(m) @ cov + cov @ np.asarray(m).T
    assert r.n == 7
    np.testing.assert_allclose(r.trace_rate_particles, np.trace(rate_p), rtol=1e-10)
    np.testing.assert_allclose(r.trace_rate_gaussian, np.trace(rate_g), rtol=1e-10)
    np.testing.assert_allclose(r.relative_error, np.linalg.norm(rate_p - rate_g) / np.linalg.norm(rate_g), rtol=1e-10)
    w = np.asarray(head.weights(0.0, jnp.asarray(x)))
    np.testing.assert_allclose(r.median_effective_keys, np.median(1.0 / (w**2).sum(1)), rtol=1e-10)
    assert list(r.as_dict()) == [
        "relative_error",
        "trace_rate_particles",
        "trace_rate_gaussian",
        "logit_std",
        "median_effective_keys",
        "n",
    ]


def test_low_rank_gaussian_refuses_a_covariance_solve_gaussian_refuses(no_typecheck):
    """A fresh user: `cov0 = -I/2` ended ``completed``, `diag(.5, -.5)` ``blow_up`` and a non-symmetric one was
    symmetrised without a word, where :func:`solve_gaussian` (whose solve this is) refuses all three."""
    from hassejax.dynamics import LowRankSoftmax, solve_low_rank_gaussian
    from hassejax.errors import ParameterError

    head = LowRankSoftmax(Q=jnp.eye(2), K=jnp.eye(2), W_V=jnp.eye(2), W_O=jnp.eye(2))
    for cov0, match in (
        (-jnp.eye(2) / 2, "positive semidefinite"),
        (jnp.diag(jnp.array([0.5, -0.5])), "positive semidefinite"),
        (jnp.array([[1.0, 0.4], [0.0, 1.0]]), "symmetric"),
    ):
        with pytest.raises(ParameterError, match=f"`cov0` must be {match}"):
            solve_low_rank_gaussian(head, jnp.zeros(2), cov0, t1=1.0)
