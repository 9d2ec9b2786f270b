"""Cost-ordered sweeps (hassejax.dynamics._sweep_order, sweep_cost) and the unrolled Tsit5 of solve_gaussian."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.dynamics import Softmax, Status, blowup_time_closed_form, softmax_gaussian_cost, solve_gaussian
from hassejax.dynamics._sweep_order import MIN_WIDTH, _efficiency, auto_chunk_size, plan
from hassejax.dynamics._tsit5 import UnrolledTsit5
from hassejax.dynamics.sweeps import Sweep, sweep, sweep_program
from hassejax.errors import ParameterError

T1 = 20.0


def _family(B, seed=0):
    """Softmax members, d = 2: A = s·G, Σ0 = WWᵀ/2 + 0.1 I; s spreads the costs (decay, slow and fast blow-up)."""
    rng = np.random.default_rng(seed)
    scale = np.linspace(-2.0, 2.0, B)[:, None, None]
    A = scale * (rng.normal(size=(B, 2, 2)) + 1.5 * np.eye(2))
    W = rng.normal(size=(B, 2, 2))
    return {"A": jnp.asarray(A), "cov0": jnp.asarray(W @ np.swapaxes(W, -1, -2) / 2 + 0.1 * np.eye(2))}


def _member(p):
    sol = solve_gaussian(Softmax(V=jnp.eye(2), A=p["A"]), jnp.zeros(2), p["cov0"], t1=T1, rtol=1e-6, atol=1e-9)
    return {"status": sol.status, "t_final": sol.t_final, "t_blowup": sol.t_blowup, "cov": sol.cov_final,
            "steps": sol.stats.num_steps}  # fmt: skip


def _cost(p):
    return softmax_gaussian_cost(p["cov0"], p["A"], t1=T1)


@pytest.fixture(scope="module")
def held():
    """One held program (chunks of 4) for every sweep of this module's batches."""
    return Sweep(_member, chunk_size=4, shard=False)


def test_cost_ordered_sweep_equals_the_unordered_one_in_the_callers_order(held):
    batch = _family(10)
    plain = held(batch, progress=False)
    statuses = set(np.asarray(plain["status"]).tolist())
    assert {int(Status.blow_up), int(Status.completed)} <= statuses  # the batch mixes cheap and expensive members
    costs = _cost(batch)
    assert not np.all(np.diff(costs) >= 0)  # the estimate reorders the batch
    reverse = np.arange(10.0)[::-1].copy()  # every member moves
    for cost in (_cost, costs, reverse):
        ordered = held(batch, cost=cost, progress=False)
        # Same program, members in other lanes: the solve's outputs are bitwise equal; the final
        # covariance U Uᵀ, a batched product after the loop, to the last bit of XLA's batched
        # matmul (a member's lane decides its vector/remainder code path).
        for k in plain:
            if k == "cov":
                np.testing.assert_allclose(np.asarray(ordered[k]), np.asarray(plain[k]), rtol=1e-14, atol=1e-300)
            else:
                np.testing.assert_array_equal(np.asarray(ordered[k]), np.asarray(plain[k]), err_msg=k)
    # the function form and a held cost give the same; one program served every call
    again = Sweep(_member, chunk_size=4, cost=_cost, shard=False)(batch, progress=False)
    np.testing.assert_array_equal(np.asarray(again["t_final"]), np.asarray(plain["t_final"]))


def test_members_run_sorted_in_chunks_of_similar_cost():
    B = 2 * MIN_WIDTH
    rng = np.random.default_rng(1)
    costs = rng.permutation(np.repeat([10.0, 100.0], MIN_WIDTH))
    batch = {"i": jnp.arange(B)}
    ordered, perm, chunk = plan(costs, batch, B, None, 1)
    np.testing.assert_array_equal(np.asarray(ordered["i"]), np.argsort(costs, kind="stable"))
    assert np.all(np.diff(costs[perm]) >= 0)
    assert chunk == MIN_WIDTH  # two chunks: the sorted batch's cheap half and expensive half
    # the sorted chunks waste less than chunks of the caller's order would
    assert _efficiency(costs[perm], chunk) > _efficiency(costs, chunk) + 0.2
    # the sweep: chunks of the automatic width (a multiple of the device count), results in order
    out = sweep(lambda p: {"i": p["i"], "cheap": p["i"] < 0}, batch, cost=costs, shard=False, progress=False)
    np.testing.assert_array_equal(np.asarray(out["i"]), np.arange(B))
    assert sweep_program(lambda p: p["i"], batch, cost=costs, shard=False).out_info.shape == (MIN_WIDTH,)


def test_automatic_chunk_size():
    assert auto_chunk_size(np.full(1000, 7.0)) == 1000  # equal costs: one chunk, as without a cost
    assert auto_chunk_size(np.zeros(5)) == 5
    assert auto_chunk_size(np.full(10, 3.0), ndev=4) == 12  # a multiple of the device count
    spread = np.sort(np.random.default_rng(2).uniform(1.0, 100.0, 1000))
    width = auto_chunk_size(spread)
    assert width < 1000 and width >= MIN_WIDTH
    assert _efficiency(spread, width) > _efficiency(spread, 1000)
    assert auto_chunk_size(np.array([1.0, 100.0])) == 2  # too few members to split


def test_cost_errors():
    batch = {"x": jnp.arange(3.0)}
    for bad in (np.ones(2), np.array([1.0, np.nan, 2.0]), np.array([1.0, -1.0, 0.0]), lambda p: np.ones((3, 2))):
        with pytest.raises(ParameterError, match="`cost`"):
            sweep(lambda p: p, batch, cost=bad, progress=False)
    with pytest.raises(ParameterError, match="`cost` of a held Sweep"):
        Sweep(lambda p: p, cost=np.ones(3))


def test_a_call_passes_its_own_cost_or_none_in_place_of_the_held_one():
    calls = []

    def counted(p):
        calls.append(1)
        return np.arange(3.0)[::-1].copy()

    held = Sweep(lambda p: 2 * p, cost=counted, shard=False)
    x = jnp.arange(3.0)
    np.testing.assert_array_equal(np.asarray(held(x, progress=False)), [0.0, 2.0, 4.0])
    assert len(calls) == 1  # left out: the held cost
    np.testing.assert_array_equal(np.asarray(held(x, cost=None, progress=False)), [0.0, 2.0, 4.0])
    assert len(calls) == 1  # None: the caller's order, the held cost not asked (it was before)
    import copy
    import pickle

    from hassejax.dynamics import sweeps

    for default in (copy.deepcopy(sweeps._HELD), pickle.loads(pickle.dumps(sweeps._HELD))):
        np.testing.assert_array_equal(np.asarray(held(x, cost=default, progress=False)), [0.0, 2.0, 4.0])
    assert len(calls) == 3  # a copy of the default is the default (a review: refused as a cost of dtype object)
    with pytest.raises(ParameterError, match="`cost`"):
        held(x, cost=np.ones(2), progress=False)


def test_softmax_gaussian_cost_follows_the_closed_form(no_typecheck):
    batch = _family(40, seed=3)
    cov0, A = np.asarray(batch["cov0"]), np.asarray(batch["A"])
    cost = softmax_gaussian_cost(cov0, A, t1=T1)
    t_star = np.asarray(blowup_time_closed_form(jnp.asarray(cov0), jnp.asarray(A), 1.0))
    blows = t_star < T1
    assert blows.any() and (~blows).any()
    assert cost.shape == (40,) and cost.dtype == np.float64
    assert cost[blows].min() > cost[~blows].max()  # a blow-up climbs eight decades: the costliest
    # V = vI scales A by v (spec §3); a broadcast Σ0 gives the same as the stacked one
    np.testing.assert_allclose(softmax_gaussian_cost(cov0, A, t1=T1, v=2.0), softmax_gaussian_cost(cov0, 2 * A, t1=T1))
    np.testing.assert_allclose(softmax_gaussian_cost(cov0[0], A[:3], t1=T1),
                               softmax_gaussian_cost(np.repeat(cov0[:1], 3, 0), A[:3], t1=T1))  # fmt: skip
    # a sweep over v alone (one Σ0, one A): each member as V = vI, i.e. A scaled by v (a fresh user: refused with
    # NumPy's broadcasting message)
    v = np.array([0.5, 1.0, 3.0])
    np.testing.assert_allclose(softmax_gaussian_cost(cov0[0], A[0], t1=T1, v=v),
                               [softmax_gaussian_cost(cov0[0], vi * A[0], t1=T1)[0] for vi in v])  # fmt: skip
    with pytest.raises(ParameterError, match=r"batch size B .*`cov0` 40, `v` 3"):
        softmax_gaussian_cost(cov0, A[0], t1=T1, v=v)
    with pytest.raises(ParameterError, match=r"`v` must be a scalar or have shape \(B,\)"):
        softmax_gaussian_cost(cov0, A, t1=T1, v=np.ones((40, 1)))
    # non-finite, complex or string values and a batched beta (a fresh user: NaN costs with NumPy's RuntimeWarning,
    # NumPy's broadcasting error, the imaginary part dropped)
    for kwargs, name in (({"v": np.array([1.0, np.nan])}, "v"), ({"v": 1j}, "v"), ({"v": "2"}, "v"),
                         ({"t1": np.inf}, "t1"), ({"beta": np.nan}, "beta")):  # fmt: skip
        with pytest.raises(ParameterError, match=f"`{name}` must be finite real numbers"):
            softmax_gaussian_cost(cov0[0], A[0], **{"t1": T1, **kwargs})
    with pytest.raises(ParameterError, match="`beta`, `t0` and `t1` must be scalars"):
        softmax_gaussian_cost(cov0[0], A[0], t1=T1, beta=np.array([1.0, 2.0]))
    with pytest.raises(ParameterError, match="`t1`"):
        softmax_gaussian_cost(cov0, A, t1=0.0)
    with pytest.raises(ParameterError, match="`A`"):
        softmax_gaussian_cost(cov0, A[:, :1], t1=T1)


def test_unrolled_tsit5_steps_equal_diffraxs_to_rounding():
    """The same method as diffrax.Tsit5: with a constant step the states agree to 1e-12 relative."""
    A = jnp.array([[0.3, 1.0], [-0.5, 0.2]])

    def f(t, y, args):
        alpha, u = y
        m = (u @ u.T) @ A
        return (m @ alpha + alpha * jnp.cos(t), m @ u)

    y0 = (jnp.array([1.0, -0.5]), jnp.array([[0.6, 0.1], [0.0, 0.4]]))

    def solve(solver, controller, dt0):  # ts off the step grid: the dense output is compared too
        return diffrax.diffeqsolve(
            diffrax.ODETerm(f), solver, 0.0, 1.5, dt0, y0, saveat=diffrax.SaveAt(ts=jnp.linspace(0.01, 1.49, 7)),
            stepsize_controller=controller,
        )  # fmt: skip

    controller = diffrax.ConstantStepSize()
    ref, new = solve(diffrax.Tsit5(), controller, 0.05), solve(UnrolledTsit5(), controller, 0.05)
    assert int(ref.stats["num_steps"]) == int(new.stats["num_steps"]) == 30
    for a, b in zip(jax.tree_util.tree_leaves(ref.ys), jax.tree_util.tree_leaves(new.ys)):  # dense output too
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-12, atol=1e-14)


def test_default_solver_is_the_unrolled_tsit5_within_tolerance():
    model = Softmax(V=jnp.eye(2), A=jnp.eye(2))
    ref = solve_gaussian(model, jnp.zeros(2), jnp.eye(2) / 2, t1=5.0, rtol=1e-8, atol=1e-8, solver=diffrax.Tsit5())
    new = solve_gaussian(model, jnp.zeros(2), jnp.eye(2) / 2, t1=5.0, rtol=1e-8, atol=1e-8)
    assert int(new.status) == int(ref.status) == int(Status.blow_up)
    np.testing.assert_allclose(float(new.t_blowup), 1.0, rtol=1e-6)  # t* = 1 (spec §3)
    np.testing.assert_allclose(float(new.t_blowup), float(ref.t_blowup), rtol=1e-9)
