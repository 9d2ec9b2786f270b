"""flow_growth against NumPy integer matrix powers and networkx shortest paths (spec hasse.md §1.2–1.3)."""

import networkx as nx
import numpy as np
import pytest

from hassejax.errors import MaskError, MemoryBudgetError, ParameterError
from hassejax.order.growth import flow_growth
from hassejax.tasks import butterfly_mask


def _numpy_power(mask: np.ndarray, layers: int) -> np.ndarray:
    a = (mask | np.eye(len(mask), dtype=bool)).astype(np.int64)
    return np.linalg.matrix_power(a, layers) > 0


def _networkx_depth(mask: np.ndarray) -> int:
    """Largest shortest-path length between reachable pairs (edges i -> j for mask[i, j]), at least 1."""
    g = nx.DiGraph()
    g.add_nodes_from(range(len(mask)))
    g.add_edges_from(zip(*np.nonzero(mask)))
    lengths = dict(nx.all_pairs_shortest_path_length(g))
    return max(1, max(d for row in lengths.values() for d in row.values()))


@pytest.mark.parametrize("seed", range(4))
def test_powers_and_depth_match_numpy_and_networkx(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 9))
    mask = rng.random((n, n)) < 0.2
    g = flow_growth(mask)
    assert g.depth == _networkx_depth(mask)
    for i, layers in enumerate(g.layers):
        expected = _numpy_power(mask, int(layers))
        np.testing.assert_array_equal(g.powers[i], expected)
        assert g.entries[i] == expected.sum()
    limit = _numpy_power(mask, n)
    assert g.limit_equals_reference and g.reference_entries == limit.sum()
    assert g.missing[-1] == 0 and not g.outside.any()


def test_sparse_butterfly_grows_to_the_dense_mask_without_leaving_it():
    n = 5
    dense = np.asarray(butterfly_mask(n))
    sparse = np.asarray(butterfly_mask(n, sparse=True))
    g = flow_growth(sparse, reference=dense, max_layers=n)
    assert g.depth == n - 1 and g.limit_equals_reference
    assert g.reference_entries == 2 * n * n - n
    assert g.entries[0] == 7 * n - 8
    for i, layers in enumerate(g.layers):
        expected = _numpy_power(sparse, int(layers))
        assert g.entries[i] == expected.sum()
        assert g.outside[i] == (expected & ~dense).sum() == 0
        assert g.missing[i] == (dense & ~expected).sum()
    assert list(g.missing[: n - 1]) == sorted(g.missing[: n - 1], reverse=True) and g.missing[n - 2] == 0
    assert g.missing[n - 3] > 0  # one layer fewer than L* misses part of the closure


def test_outside_counts_entries_a_reference_forbids():
    """The count can fail: against a reference that lacks an entry of the flow, that entry is outside."""
    chain = np.eye(4, k=-1, dtype=bool)
    ref = np.tril(np.ones((4, 4), bool))
    ref[3, 0] = False
    g = flow_growth(chain, reference=ref)
    assert g.outside.tolist() == [0, 0, 1] and not g.limit_equals_reference


def test_flow_growth_errors(no_typecheck):
    with pytest.raises(MaskError, match="mask"):
        flow_growth(np.ones((2, 3), bool))
    with pytest.raises(MaskError, match="reference"):
        flow_growth(np.eye(3, dtype=bool), reference=np.eye(4, dtype=bool))
    with pytest.raises(ParameterError, match="max_layers"):
        flow_growth(np.eye(3, dtype=bool), max_layers=0)


def test_flow_growth_takes_a_numpy_integer_max_layers():
    """``max_layers`` as a NumPy integer counts as the same int; a bool or float is refused by name."""
    chain = np.eye(5, k=-1, dtype=bool)
    a, b = flow_growth(chain, max_layers=np.int32(3)), flow_growth(chain, max_layers=3)
    assert a.entries.tolist() == b.entries.tolist() and a.layers.tolist() == [1, 2, 3]
    for bad in (True, 3.0, np.float64(3.0)):
        with pytest.raises((ParameterError, TypeError), match="max_layers"):
            flow_growth(chain, max_layers=bad)


def test_flow_growth_estimates_memory_before_forming_the_powers(monkeypatch):
    """A new user: ``max_layers=1_000_000`` on a 100-chain raised NumPy's own MemoryError after trying 9.3 GiB, and a
    large mask went straight to its dense powers. Now refused by name first (128 MiB reported free here)."""
    import hassejax.masks._runs as runs

    monkeypatch.setattr(runs, "host_memory_bytes", lambda: 128 * 2**20)
    chain = np.eye(100, k=-1, dtype=bool)
    with pytest.raises(MemoryBudgetError, match=r"`max_layers`: the 1000000 powers"):
        flow_growth(chain, max_layers=1_000_000)
    big = np.broadcast_to(np.array(False), (300_000, 300_000))  # zero strides: refused before any (n, n) array
    with pytest.raises(MemoryBudgetError, match=r"`mask`: the powers of a \(300000, 300000\) mask"):
        flow_growth(big)
    long_chain = np.eye(1024, k=-1, dtype=bool)  # L* = 1023: the working arrays fit, the stack of powers not
    with pytest.raises(MemoryBudgetError, match=r"`mask`: the powers R\^\(1\.\.\d+\) of a \(1024, 1024\) mask"):
        flow_growth(long_chain)
    g = flow_growth(chain, max_layers=2)  # small: unchanged
    assert g.powers.shape == (2, 100, 100) and g.depth == 99


def test_flow_growth_with_few_layers_still_reports_depth_and_limit():
    """``max_layers`` below L* keeps only those powers; the depth and the limit's comparison are those of the full run."""
    chain = np.eye(30, k=-1, dtype=bool)
    full, few = flow_growth(chain), flow_growth(chain, max_layers=3)
    assert few.depth == full.depth == 29 and few.limit_equals_reference and few.reference_entries == 30 * 31 // 2
    np.testing.assert_array_equal(few.powers, full.powers[:3])
    assert few.entries.tolist() == full.entries[:3].tolist() == [59, 87, 114]
