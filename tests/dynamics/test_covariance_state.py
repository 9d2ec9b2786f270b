"""The symmetric (Riccati) state of the Gaussian solve: ``solve_gaussian(..., state="covariance")`` (issue 13).

Checked against the softmax closed forms of spec dynamics.md §3 (`Σ(t)` and `t*` for `V = vI`,
derived independently of the solver), against the factor state on every kernel with a
Gaussian map, and for exact symmetry of the integrated `Σ`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from hassejax.dynamics import (
    L2,
    Linear,
    LowRankSoftmax,
    MultiHead,
    Sinkhorn,
    Softmax,
    Status,
    blowup_time_closed_form,
    softmax_covariance_closed_form,
    solve_gaussian,
    solve_low_rank_gaussian,
)
from hassejax.errors import ParameterError

TS = jnp.linspace(0.0, 1.0, 6)


@pytest.mark.parametrize("v", [1.0, -0.5])
def test_covariance_state_follows_the_softmax_closed_form(v):
    r = np.random.default_rng(13)
    w = r.normal(size=(3, 3))
    s0 = w @ w.T / 3 + 0.1 * np.eye(3)
    a = -0.2 * np.eye(3) + 0.1 * r.normal(size=(3, 3))  # t* > 1 for v = 1: no blow-up on [0, 1]
    sol = solve_gaussian(Softmax(V=v * np.eye(3), A=a), np.zeros(3), s0, t1=1.0, ts=TS, rtol=1e-11, atol=1e-12,
                         state="covariance")  # fmt: skip
    assert int(sol.status) == Status.completed and bool(jnp.all(sol.valid))
    want = np.stack([np.asarray(softmax_covariance_closed_form(s0, a, v, float(t))) for t in TS])
    np.testing.assert_allclose(np.asarray(sol.cov), want, rtol=1e-8, atol=1e-12)
    # the factor returned is the PSD square root of the integrated Σ
    np.testing.assert_allclose(np.asarray(sol.factor_final @ sol.factor_final.T), np.asarray(sol.cov_final), rtol=1e-10)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_covariance_state_blowup_time_equals_closed_form(seed):
    """Indefinite `A`, `V = I`: the event stops the solve, `t_e + λ/λ'` is the closed-form `t*` (spec §3)."""
    r = np.random.default_rng(seed)
    g, w = r.normal(size=(2, 3, 3))
    a = g / np.sqrt(3)
    s0 = w @ w.T / 3 + 0.1 * np.eye(3)
    t_star = float(blowup_time_closed_form(s0, a, 1.0))
    assume(np.isfinite(t_star))  # A + Aᵀ negative semidefinite (rare): no blow-up, nothing to time
    sol = solve_gaussian(Softmax(V=np.eye(3), A=a), np.zeros(3), s0, t1=2.0 * t_star, rtol=1e-8, atol=1e-10,
                         state="covariance")  # fmt: skip
    assert int(sol.status) == Status.blow_up
    assert abs(float(sol.t_blowup) / t_star - 1.0) < 1e-6
    cov = np.asarray(sol.cov_final)
    assert np.array_equal(cov, cov.T)  # Σ' = P + Pᵀ keeps the state exactly symmetric


def _kernels():
    r = np.random.default_rng(7)
    v, a, q, k = r.normal(size=(4, 2, 2)) * 0.5
    return {
        "softmax": Softmax(V=v, A=a),
        "linear": Linear(V=v, A=a),
        "multihead": MultiHead([Softmax(V=v, Q=q[:1], K=k[:1]), Linear(V=-v, Q=q[1:], K=k[1:])]),
    }


@pytest.mark.parametrize("kind", list(_kernels()))
def test_covariance_state_equals_factor_state(kind):
    """Both states integrate the same moment ODE: at tight tolerances they agree to the tolerance."""
    model = _kernels()[kind]
    mean0 = np.array([0.3, -0.2])
    s0 = np.array([[0.5, 0.1], [0.1, 0.3]])
    kw = dict(t1=0.5, ts=TS * 0.5, rtol=1e-11, atol=1e-12)
    by_factor = solve_gaussian(model, mean0, s0, **kw)
    by_cov = solve_gaussian(model, mean0, s0, state="covariance", **kw)
    assert int(by_factor.status) == int(by_cov.status) == Status.completed
    np.testing.assert_allclose(np.asarray(by_cov.cov), np.asarray(by_factor.cov), rtol=1e-8, atol=1e-11)
    np.testing.assert_allclose(np.asarray(by_cov.mean), np.asarray(by_factor.mean), rtol=1e-8, atol=1e-11)


def test_covariance_state_under_vmap_equals_per_member_solves():
    r = np.random.default_rng(5)
    a = r.normal(size=(4, 2, 2))
    s0 = np.array([[0.5, 0.1], [0.1, 0.3]])

    # six save times (read nowhere): the single solves are the program of the two tests below
    def member(ai):
        sol = solve_gaussian(Softmax(V=jnp.eye(2), A=ai), jnp.zeros(2), s0, t1=5.0, ts=TS * 5.0, rtol=1e-8, atol=1e-10,
                             state="covariance")  # fmt: skip
        return sol.status, sol.t_blowup, sol.cov_final

    status, t_blowup, cov = jax.vmap(member)(jnp.asarray(a))
    for i in range(4):
        s_i, t_i, c_i = member(jnp.asarray(a[i]))
        assert int(status[i]) == int(s_i)
        np.testing.assert_allclose(float(t_blowup[i]), float(t_i), rtol=1e-12)
        # at the event Σ is ~1e8 × Σ0 and ill-conditioned: batched and unbatched rounding differ there
        np.testing.assert_allclose(np.asarray(cov[i]), np.asarray(c_i), rtol=1e-6)


def test_unknown_state_is_rejected_by_name(no_typecheck):
    with pytest.raises(ParameterError, match="`state` must be 'factor', 'covariance' or 'projective'; got 'sigma'"):
        solve_gaussian(Softmax(V=np.eye(2), A=np.eye(2)), np.zeros(2), np.eye(2), t1=1.0, state="sigma")
    with pytest.raises(ParameterError, match="`state` must be 'factor', 'covariance' or 'projective'"):
        solve_gaussian(Softmax(V=np.eye(2), A=np.eye(2)), np.zeros(2), np.eye(2), t1=1.0, state=np.array(["factor"]))


def test_numpy_string_state_is_the_same_state():
    """`np.str_` (from iterating a NumPy array of names) is a str: accepted, and the same solve."""
    model, s0 = Softmax(V=np.eye(2), A=np.eye(2)), np.eye(2) / 2
    kw = dict(t1=2.0, ts=TS * 2.0, rtol=1e-8, atol=1e-10)  # six save times (read nowhere): the programs above
    for name in np.array(["factor", "covariance"]):
        got = solve_gaussian(model, np.zeros(2), s0, state=name, **kw)
        want = solve_gaussian(model, np.zeros(2), s0, state=str(name), **kw)
        assert float(got.t_blowup) == float(want.t_blowup)
        assert abs(float(got.t_blowup) - 1.0) < 1e-6  # t* = 1/(β λ_max(Σ0^{1/2}(A + Aᵀ)Σ0^{1/2})) = 1


@pytest.mark.parametrize("kind", ["sinkhorn", "multihead"])
def test_kernels_whose_map_needs_a_factor_are_refused(kind):
    """Sinkhorn's map is evaluated from a factor of Σ; a square root of Σ taken at every evaluation has no
    finite derivative at repeated eigenvalues (Σ0 = I/2), which the decade test differentiates through."""
    v, a = np.eye(2), -np.eye(2)
    model = Sinkhorn(V=v, A=a) if kind == "sinkhorn" else MultiHead([Softmax(V=v, A=-a), Sinkhorn(V=v, A=a)])
    with pytest.raises(ParameterError, match=r"`state='covariance'` needs a kernel .*Sinkhorn.*use `state='factor'`"):
        solve_gaussian(model, np.zeros(2), np.eye(2) / 2, t1=1.0, state="covariance")
    assert model.gaussian_uses_factor()
    assert not Softmax(V=v, A=a).gaussian_uses_factor()
    assert int(solve_gaussian(model, np.zeros(2), np.eye(2) / 2, t1=0.5).status) == Status.completed


@pytest.mark.parametrize("kind", ["l2", "multihead"])
def test_l2_is_refused(kind):
    """L2's map `V(Σ⁻¹/(2βc) + KᵀK)⁻¹A` depends on the small directions of `Σ`, which the symmetric state holds
    only to `rtol · λ_max`: measured (float64, `rtol = 1e-6`, d = 2, `Σ0 = 1e-3 I`, `t1 = 1e4`) `tr Σ = 1551`
    where the factor state (and both states at `rtol = 1e-10`) give 5693, `max_steps_reached` at `t = 849`
    where they complete; float32 read ``diverge`` with `tr Σ = 29.7` for ``completed`` with 0.15. Refused,
    naming the head."""
    e = np.eye(2)
    model = L2(V=e, Q=e, K=e) if kind == "l2" else MultiHead([Softmax(V=e, A=e), L2(V=e, Q=e, K=e)])
    label = "model" if kind == "l2" else r"model\.heads\[1\]"
    with pytest.raises(
        ParameterError, match=rf"`state='covariance'` cannot solve {label} \(L2\).*use `state='factor'`"
    ):
        solve_gaussian(model, np.zeros(2), e / 2, t1=1.0, state="covariance")
    assert int(solve_gaussian(model, np.zeros(2), e / 2, t1=0.1).status) == Status.completed


@pytest.mark.parametrize("threshold", [None, np.inf])
def test_traced_indefinite_initial_covariance_is_flagged(threshold):
    """A concrete indefinite `Σ0` raises; a traced one (per member under vmap) was integrated as given. Now its
    member is ``indefinite``, with or without events, its neighbour unchanged."""
    model = Softmax(V=np.eye(2), A=-np.eye(2))

    # save times [t0, t1] given (the default's values): the program of `later` below, one compile
    def one(cov0):
        return solve_gaussian(model, jnp.zeros(2), cov0, t1=1.0, ts=jnp.array([0.0, 1.0]), state="covariance",
                              size_threshold=threshold).status  # fmt: skip

    covs = jnp.stack([0.5 * jnp.eye(2), jnp.diag(jnp.array([0.5, -0.1]))])
    assert jax.vmap(one)(covs).tolist() == [Status.completed, Status.indefinite]

    # save times without t0: the initial state is checked all the same
    def later(cov0):
        return solve_gaussian(model, jnp.zeros(2), cov0, t1=1.0, ts=jnp.array([0.5, 1.0]), state="covariance",
                              size_threshold=threshold).status  # fmt: skip

    assert jax.vmap(later)(covs).tolist() == [Status.completed, Status.indefinite]


@pytest.mark.parametrize("state", ["factor", "projective"])
def test_traced_indefinite_initial_covariance_is_flagged_by_the_factor_states(state):
    """A fresh user: in a sweep, a member `Σ0 = diag(1, -1)` came back ``blow_up`` at t = 0.5 from the factor state,
    the answer for its PSD part `diag(1, 0)`; it is ``indefinite`` (no blow-up time), as in the covariance state.
    A singular `Σ0` (rank one) and round-off below zero are covariances: solved, not flagged."""
    model = Softmax(V=np.eye(2), A=np.eye(2))

    def one(cov0):
        sol = solve_gaussian(model, jnp.zeros(2), cov0, t1=5.0, state=state)
        return sol.status, sol.t_blowup

    covs = jnp.stack([
        jnp.eye(2) / 2, jnp.diag(jnp.array([1.0, -1.0])), jnp.diag(jnp.array([1.0, 0.0])),
        jnp.diag(jnp.array([1.0, -1e-14])),
        # a review: indefinite at a small scale or by less than 1e-4 tr Σ0 passed the solve's slack
        1e-7 * jnp.diag(jnp.array([1.0, -1.0])), jnp.diag(jnp.array([1.0, -1e-4])), -1e-9 * jnp.eye(2),
    ])  # fmt: skip
    status, t = jax.vmap(one)(covs)
    indefinite = [Status.indefinite] * 3
    assert status.tolist() == [Status.blow_up, Status.indefinite, Status.blow_up, Status.blow_up, *indefinite]
    # t* = 1/λ_max(Σ0^{1/2}(A + Aᵀ)Σ0^{1/2}) (spec §3): 1 for I/2, 1/2 for the singular diag(1, 0)
    np.testing.assert_allclose(np.asarray(t)[[0, 2, 3]], [1.0, 0.5, 0.5], rtol=1e-5)
    assert np.isinf(np.asarray(t)[[1, 4, 5, 6]]).all()
    # the closed form gives NaN on the same members (the same rule: check_psd's)
    t_closed = jax.vmap(lambda s: blowup_time_closed_form(s, jnp.eye(2), 1.0))(covs)
    assert np.isnan(np.asarray(t_closed)).tolist() == [False, True, False, False, True, True, True]


def test_traced_indefinite_initial_covariance_is_flagged_by_the_low_rank_solve():
    """A review: ``solve_low_rank_gaussian`` ("exactly the solve of solve_gaussian") took a traced indefinite `Σ0`
    as given (diag(1, -1): blow_up at 0.5; -I/2: completed); it is ``indefinite`` as in solve_gaussian."""
    e = jnp.array([[1.0, 0.0]])
    head = LowRankSoftmax(e, e, e, e.T)
    covs = jnp.stack([jnp.eye(2) / 2, jnp.diag(jnp.array([1.0, -1.0])), -jnp.eye(2) / 2])

    def one(cov0):
        sol = solve_low_rank_gaussian(head, jnp.zeros(2), cov0, t1=5.0, rtol=1e-6, atol=1e-6)
        return sol.status, sol.t_blowup

    status, t = jax.vmap(one)(covs)
    assert status.tolist() == [Status.blow_up, Status.indefinite, Status.indefinite]
    assert float(t[0]) == pytest.approx(1.0, rel=1e-4) and np.isinf(np.asarray(t)[1:]).all()


def test_rank_deficient_initial_covariance_warns():
    """Review: softmax, d = 4, rank-one `Σ0`: the covariance state grew a direction that stays at zero (the factor
    state keeps rank), `tr Σ(10)` 62.0 at `rtol = 1e-6` where the factor state gives 49.62, with `Σ` still PSD
    (no ``indefinite``). A concrete `Σ0` within `1e3 · rtol` of singular now warns; a well-conditioned one does
    not."""
    import warnings

    v = np.array([[-0.672, -0.215, 0.131, -0.009], [-0.096, -0.333, -0.129, -0.387],
                  [-1.211, -0.597, 0.238, 0.779], [0.907, 0.048, 0.447, 0.454]])  # fmt: skip
    a = np.array([[0.487, 0.384, 0.189, -0.308], [0.389, 0.091, -0.374, -0.288],
                  [0.614, 0.923, -0.265, -1.039], [0.294, -0.452, 0.366, -0.188]])  # fmt: skip
    u = np.array([-0.62, 0.166, 0.262, 2.41])
    model, kw = Softmax(V=v, A=a), dict(t1=10.0, rtol=1e-6, atol=1e-6)
    with pytest.warns(RuntimeWarning, match=r"`cov0` is rank-deficient or ill-conditioned.*use state='factor'") as rec:
        by_cov = solve_gaussian(model, np.zeros(4), np.outer(u, u), state="covariance", **kw)
    assert [w.filename for w in rec] == [__file__]  # the caller's line, not a frame inside hassejax
    by_factor = solve_gaussian(model, np.zeros(4), np.outer(u, u), **kw)
    assert float(np.trace(by_factor.cov_final)) == pytest.approx(49.616, rel=1e-4)
    assert float(np.trace(by_cov.cov_final)) > 55  # what the warning is about
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        solve_gaussian(model, np.zeros(4), np.outer(u, u) + 0.1 * np.eye(4), state="covariance", **kw)
