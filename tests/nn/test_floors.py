"""Per-slot loss floors against brute-force enumeration of a tiny chain's joint law (spec hasse.md §3–4).

The seen sets are written out from the spec's closed forms (not read off the library's
reachability), and each floor is ``H(X_t, X_S) − H(X_S)`` of the enumerated joint.
"""

import itertools

import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.nn import (
    MarkovChain,
    block_two_stream_layout,
    butterfly_layout,
    causal_layout,
    layout_from_task,
    optimal_loss,
)
from hassejax.nn.floors import target_floors
from hassejax.tasks import Task

# a non-stationary start: every position has its own law, so the floors differ by position
P = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.5, 0.3, 0.2]])
MU = np.array([0.6, 0.3, 0.1])
N = 4


@pytest.fixture(scope="module")
def chain():
    return MarkovChain(jnp.asarray(P), jnp.asarray(MU))


@pytest.fixture(scope="module")
def joint():
    out = np.zeros((3,) * N)
    for seq in itertools.product(range(3), repeat=N):
        out[seq] = MU[seq[0]] * np.prod([P[a, b] for a, b in itertools.pairwise(seq)])
    return out


def _brute(joint, target, seen):
    def entropy(q):
        q = q[q > 0]
        return float(-(q * np.log(q)).sum())

    keep = set(seen) | {target}
    a = joint.sum(axis=tuple(i for i in range(N) if i not in keep))
    b = joint.sum(axis=tuple(i for i in range(N) if i not in set(seen)))
    return entropy(a) - entropy(b)


@pytest.mark.parametrize(
    ("layout", "seen_of_target"),
    [
        (causal_layout(N), lambda t: range(t)),  # slot w_t predicts w_{t+1} from w_1..w_t
        (block_two_stream_layout(N, 2), lambda t: range(2 * (t // 2))),  # the prefix before t's block
        (butterfly_layout(N), lambda t: [s for s in range(N) if s != t]),  # every other token
    ],
    ids=["causal", "block_two_stream", "butterfly"],
)
def test_each_slot_floor_equals_enumeration(chain, joint, layout, seen_of_target):
    f = target_floors(chain, layout)
    assert len(f.floors) == int(np.sum(np.asarray(layout.target_index) >= 0))
    for t, seen, floor in zip(f.targets, f.seen, f.floors):
        assert seen == tuple(seen_of_target(int(t)))
        assert floor == pytest.approx(_brute(joint, int(t), seen), rel=1e-9, abs=1e-12)
    assert f.mean == pytest.approx(optimal_loss(chain, layout), rel=1e-12)
    np.testing.assert_array_equal(np.asarray(layout.target_index)[f.slots], f.targets)


def test_floors_follow_the_depth(chain, joint):
    """A mask token that reaches w_1, then w_2, then w_3 one layer at a time: its floor falls with L."""
    mask = np.zeros((4, 4), bool)
    mask[3, 0] = mask[0, 1] = mask[1, 2] = True  # m_4 -> w_1 -> w_2 -> w_3
    task = Task([("w", 1), ("w", 2), ("w", 3), ("mask", 4)], mask, labels={3: ("w", 4)}, sources={("mask", 4): ()})
    layout = layout_from_task(task, sequence_length=N)
    got = [target_floors(chain, layout, L).floors[0] for L in (1, 2, 3)]
    want = [_brute(joint, 3, range(L)) for L in (1, 2, 3)]
    np.testing.assert_allclose(got, want, rtol=1e-9)
    assert got[0] > got[1] > got[2]  # the check can fail: the floors differ by depth
    assert target_floors(chain, layout).floors[0] == pytest.approx(want[2], rel=1e-9)


def test_the_example_holds_in_float32_and_target_floors_is_exported():
    """The docstring example compared a float32 chain's interior floor with H2 to 1e-9 (off by 2.2e-9 without x64,
    where the suite's x64 hid it); it now states a tolerance per dtype and holds in both modes. target_floors is public:
    exported from hassejax.nn beside optimal_loss."""
    import doctest

    import jax

    import hassejax.nn
    from hassejax.nn import floors

    assert hassejax.nn.target_floors is target_floors and "target_floors" in hassejax.nn.__all__
    assert "TargetFloors" in hassejax.nn.__all__
    old = jax.config.jax_enable_x64
    try:
        for x64 in (False, True):
            jax.config.update("jax_enable_x64", x64)
            result = doctest.testmod(floors, optionflags=doctest.ELLIPSIS, verbose=False)
            assert result.attempted > 0 and result.failed == 0, f"x64={x64}: {result}"
    finally:
        jax.config.update("jax_enable_x64", old)
