"""A blow-up at (or within the solve's time resolution of) a `PiecewiseConstant` layer edge (review, item 1).

Softmax with `V = v_l I` on layer `l`, `A = I`, `Σ0 = sI`: `(Σ⁻¹)' = −2v_l I` (spec §3), so `1/σ(t)` is piecewise
linear and the blow-up time `t*` is the first zero of it (:func:`_exact_blowup`). A blow-up at the end of a layer
used to be computed a few 1e-7 after the edge, where the next layer's `V` turned it back: the solve then reported
a later, wrong blow-up with full confidence.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.dynamics import PiecewiseConstant, Softmax, Status, solve_gaussian
from hassejax.dynamics._solve import edge_resolution

I2 = np.eye(2)
VALUES = np.array([2.0, -2.0, 4.0])  # layers [0, 1), [1, 2), [2, inf)
EDGES = np.array([0.0, 1.0, 2.0, 3.0])
STATES = ("factor", "covariance", "projective")


def _exact_blowup(s, values=VALUES, edges=EDGES):
    """The first zero of `1/σ(t) = 1/s − 2 ∫_0^t v`, `v` the schedule (the last value beyond the last edge)."""
    x = 1.0 / s
    starts, ends = edges[:-1], np.append(edges[1:-1], np.inf)
    for a, b, v in zip(starts, ends, values):
        if v > 0 and x - 2 * v * (b - a) <= 0:
            return a + x / (2 * v)
        x -= 2 * v * (b - a)
    return np.inf


def _solve(s, state, **kw):
    """The threshold given (the default `1e8 tr Σ0` unless `kw` sets one): a concrete threshold is an argument of the
    compiled solve, so the low-threshold solve below runs the factor-state program of the others."""
    model = Softmax(V=PiecewiseConstant(VALUES[:, None, None] * I2, EDGES), A=I2)
    kw.setdefault("size_threshold", 1e8 * 2 * s)
    return solve_gaussian(model, np.zeros(2), s * I2, t1=10.0, state=state, **kw)


@pytest.mark.parametrize("state", STATES)
def test_blowup_at_a_layer_edge_is_undetermined(state):
    """`t* = 1` (the end of layer 0) and `t* = 1 − 1e-9`: no later blow-up; the side of the edge is not resolved."""
    for s in (0.25, 0.25 * (1 + 1e-9)):
        assert _exact_blowup(s) == pytest.approx(1.0, abs=2e-9)
        sol = _solve(s, state)
        assert Status(int(sol.status)) == Status.undetermined, (state, s)
        assert float(sol.t_blowup) == np.inf
        assert 1.0 - 1e-6 < float(sol.t_final) <= 1.0  # stopped at the edge, not after it
        assert np.all(np.isfinite(np.asarray(sol.cov_final)))


@pytest.mark.parametrize("state", STATES)
def test_blowup_a_thousandth_from_an_edge_is_unchanged(state):
    """1e-3 before the edge (blows up in layer 0) and 1e-3 after it (crosses, blows up in layer 2 at 2.5005):
    normal blow-ups at the exact times; far from every edge (`s = 0.1`: `t* = 3.25`) too, and at the last edge
    (`s = 1/8`: `t* = 3`), beyond which the last value goes on (no jump there)."""
    assert _exact_blowup(0.125) == pytest.approx(3.0, abs=1e-12)
    for s in (0.25 * (1 + 1e-3), 0.25 * (1 - 1e-3), 0.1, 0.125):
        t_star = _exact_blowup(s)
        sol = _solve(s, state)
        assert Status(int(sol.status)) == Status.blow_up, (state, s)
        assert float(sol.t_blowup) == pytest.approx(t_star, rel=2e-6), (state, s)
    assert _exact_blowup(0.25 * (1 - 1e-3)) == pytest.approx(2.5005005, abs=1e-6)


def test_event_before_an_edge_extrapolated_past_it_is_undetermined():
    """A low threshold fires before the edge; a blow-up time extrapolated to within the resolution of the edge (on
    either side) is not reported, one a thousandth before it is."""
    for s, want in ((0.25 * (1 + 1e-6), Status.undetermined), (0.25 * (1 - 1e-6), Status.undetermined),
                    (0.25 * (1 + 1e-3), Status.blow_up)):  # fmt: skip
        sol = _solve(s, "factor", size_threshold=1e4 * 2 * s)
        assert Status(int(sol.status)) == want, s
        assert float(sol.t_final) < 1.0
        if want == Status.blow_up:
            assert float(sol.t_blowup) == pytest.approx(_exact_blowup(s), rel=1e-6)


def test_far_from_edges_the_edges_change_nothing():
    """An edge at 0.3 where `V` jumps from 1.999999 I to 2I (`t* = 1`, far from it): the same result as `V = 2I`.
    (Three layers, the last two equal, and the default threshold given: the shapes and settings of :func:`_solve`,
    whose compiled programs it shares.)"""
    model = Softmax(V=PiecewiseConstant(np.stack([1.999999 * I2, 2 * I2, 2 * I2]), [0.0, 0.3, 5.0, 6.0]), A=I2)
    plain = Softmax(V=2 * I2, A=I2)
    for state in STATES:
        a = solve_gaussian(model, np.zeros(2), 0.25 * I2, t1=10.0, state=state, size_threshold=1e8 * 0.5)  # 1e8 tr Σ0
        b = solve_gaussian(plain, np.zeros(2), 0.25 * I2, t1=10.0, state=state)
        assert Status(int(a.status)) == Status(int(b.status)) == Status.blow_up
        t_star = _exact_blowup(0.25, np.array([1.999999, 2.0, 2.0]), np.array([0.0, 0.3, 5.0, 6.0]))
        assert t_star == pytest.approx(1.0 + 1.5e-7, abs=1e-12)
        assert float(a.t_blowup) == pytest.approx(t_star, rel=2e-6)
        assert float(a.t_blowup) == pytest.approx(float(b.t_blowup), rel=2e-6)


@pytest.mark.parametrize("state", ("factor", "projective"))
def test_edge_check_traced_under_vmap(state):
    """Traced initial states and layer values under jit(vmap): each member gets its own verdict."""
    ss = jnp.array([0.25, 0.25 * (1 + 1e-3), 0.25 * (1 - 1e-3), 0.1])
    vals = jnp.broadcast_to(jnp.asarray(VALUES)[:, None, None] * I2, (4, 3, 2, 2))

    @jax.jit
    @jax.vmap
    def run(s, v):
        model = Softmax(V=PiecewiseConstant(v, jnp.asarray(EDGES)), A=jnp.asarray(I2))
        sol = solve_gaussian(model, jnp.zeros(2), s * jnp.eye(2), t1=10.0, state=state)
        return sol.status, sol.t_blowup, sol.t_final

    status, t_blowup, t_final = run(ss, vals)
    assert [Status(int(c)) for c in status] == [Status.undetermined] + [Status.blow_up] * 3
    np.testing.assert_allclose(np.asarray(t_blowup[1:]), [_exact_blowup(float(s)) for s in ss[1:]], rtol=2e-6)
    assert 1.0 - 1e-6 < float(t_final[0]) <= 1.0


def test_layer_edges_where_the_value_changes():
    """The outer edges and an interior edge between equal layers are no jumps (`inf`); traced values work."""
    from hassejax.dynamics._solve import collect_layer_edges

    v = PiecewiseConstant(np.array([1.0, 1.0, 2.0, 2.0]), [0.0, 1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(np.asarray(collect_layer_edges([v])),
                                  [2.0, np.inf, np.inf])  # fmt: skip
    assert collect_layer_edges([PiecewiseConstant(np.ones((1, 2, 2)))]) is None
    got = jax.jit(lambda vals: collect_layer_edges([PiecewiseConstant(vals, jnp.arange(4.0))]))(jnp.array([1.0, 2, 2]))
    np.testing.assert_array_equal(np.asarray(got), [1.0, np.inf])


def test_edge_resolution():
    """`1e3 · max(rtol, eps) · (t − t0) + 64 eps |t|`: 1e-5 at t = 1 for the default rtol."""
    assert float(edge_resolution(1.0, 0.0, 1e-8, jnp.float64)) == pytest.approx(1e-5, rel=1e-6)
    assert float(edge_resolution(3.0, 1.0, 0.0, jnp.float32)) == pytest.approx(
        1e3 * 2 * float(jnp.finfo(jnp.float32).eps) + 64 * 3 * float(jnp.finfo(jnp.float32).eps)
    )


def test_exponential_divergence_next_to_an_edge_stays_diverge():
    """A diff review: an exponential divergence whose event comes within `1/rate` of an edge was `undetermined`
    (its `λ/λ'` is an e-folding time, not a time to a blow-up); only a blow-up by the decade test is checked
    against the edges. Particles under softmax (growth at most exponential), with and without the edge."""
    from hassejax.dynamics import solve_particles

    x0 = np.random.default_rng(1).normal(size=(6, 2))
    plain = solve_particles(Softmax(V=I2, A=I2), x0, t1=20.0)
    assert Status(int(plain.status)) == Status.diverge
    # the one jump of `V` (I to 1.01 I) at `edge`, on a schedule of the deep case's shape below (40 layers, the
    # others equal: no jumps there, only step boundaries), so that all three share one compiled program
    for edge in (9.5, 9.9):  # just after the plain solve's event (t = 9.4986)
        edges = np.concatenate([np.linspace(0.0, edge, 20), np.linspace(edge, 20.0, 22)[1:]])
        values = np.where(np.arange(40) < 19, 1.0, 1.01)[:, None, None] * I2
        model = Softmax(V=PiecewiseConstant(values, edges), A=I2)
        sol = solve_particles(model, x0, t1=20.0)
        assert Status(int(sol.status)) == Status.diverge, edge
        assert float(sol.decade_ratio) > 0.1
    layers = np.array([1.0 if i % 2 == 0 else 1.02 for i in range(40)])[:, None, None] * I2
    deep = solve_particles(Softmax(V=PiecewiseConstant(layers, np.linspace(0, 20, 41)), A=I2), x0, t1=20.0)
    assert Status(int(deep.status)) == Status.diverge


def test_a_bounded_growth_kernel_is_not_stopped_at_an_edge():
    """A diff review: L2 (growth bounded at every depth: never a blow-up) with a short, strong layer was stopped by
    the edge check and ended `non_finite`; the check applies only where the kernel's growth is unbounded."""
    from hassejax.dynamics import L2

    values = np.stack([0.0 * I2, 2e5 * I2, 0.0 * I2])
    model = L2(V=PiecewiseConstant(values, [0.0, 0.99999, 1.0, 2.0]), Q=I2, K=I2)
    sol = solve_gaussian(model, np.ones(2), 0.2 * I2, t1=3.0)
    assert Status(int(sol.status)) == Status.completed and float(sol.t_final) == 3.0
