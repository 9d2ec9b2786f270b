"""hassejax.kernels.tile_stats: tile codes against splash attention's own MaskInfo and a NumPy reference.

The reference methods are independent of the code under test: splash's
``splash_attention_mask_info._process_mask`` (the real kernel's preprocessing, one tile at a
time through the mask's slicing) and a plain pad-reshape-sum of the dense mask.
"""

import dataclasses
import importlib
import json
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as sm
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask_info as smi

from hassejax.errors import MaskError, ParameterError
from hassejax.kernels import TileStats, tile_stats
from hassejax.masks import IntervalMask
from hassejax.masks import structured as S

tiles_module = importlib.import_module("hassejax.kernels.tiles")  # the module (hassejax.kernels.tiles may name
# something else)


def reference_kind(dense, block):
    """Pad with False to a multiple of the block, reshape, count: 2 full, 1 partial, 0 empty."""
    dense = np.asarray(dense)
    bq, bk = block
    *lead, nq, nk = dense.shape
    tq, tk = -(-nq // bq), -(-nk // bk)
    padded = np.zeros((*lead, tq * bq, tk * bk), dtype=bool)
    padded[..., :nq, :nk] = dense
    counts = padded.reshape(*lead, tq, bq, tk, bk).sum(axis=(-3, -1))
    return np.where(counts == bq * bk, 2, np.where(counts > 0, 1, 0))


def splash_block_mask(multi_head_mask, block):
    """splash's block_mask for every head (it keeps one row when all heads share one mask)."""
    info, _ = smi._process_mask(multi_head_mask, block, is_dkv=False, shrink_grid=False)
    bm = np.asarray(info.block_mask)
    heads = multi_head_mask.shape[0]
    if bm.shape[0] != heads:
        assert bm.shape[0] == 1
        bm = np.broadcast_to(bm, (heads,) + bm.shape[1:])
    return bm


RNG = np.random.default_rng(0)
RANDOM = {n: RNG.random((n, n)) < 0.3 for n in (64, 128, 256)}

SPLASH_MASKS = {
    "causal": lambda n: sm.CausalMask((n, n)),
    "causal_offset": lambda n: sm.CausalMask((n, n), offset=-5),
    "local_8": lambda n: sm.LocalMask((n, n), (8, 0), 0),
    "local_17_3": lambda n: sm.LocalMask((n, n), (17, 3), 0),
    "local_40_offset": lambda n: sm.LocalMask((n, n), (40, 40), 9),
    "local_left_only": lambda n: sm.LocalMask((n, n), (None, 2), -3),
    "chunked_24": lambda n: sm.ChunkedCausalMask((n, n), 24),
    "or_and": lambda n: (
        (sm.LocalMask((n, n), (10, None), 0) & sm.CausalMask((n, n))) | sm.ChunkedCausalMask((n, n), 32)
    ),
    "numpy_random": lambda n: sm.NumpyMask(RANDOM[n]),
    "full": lambda n: sm.FullMask((n, n)),
}


@pytest.mark.parametrize("block", [(8, 8), (16, 32)])
@pytest.mark.parametrize("n", [64, 128, 256])
@pytest.mark.parametrize("name", sorted(SPLASH_MASKS))
def test_equals_splash_block_mask(name, n, block):
    mask = SPLASH_MASKS[name](n)
    want = splash_block_mask(sm.MultiHeadMask((mask,)), block)[0]
    dense = mask[:, :]
    for given_mask in (dense, IntervalMask.from_dense(dense)):
        got = tile_stats(given_mask, block_size=block)
        np.testing.assert_array_equal(got.kind, want)
        assert got.kind.dtype == np.int8
        assert (got.empty, got.partial, got.full) == tuple(int((want == c).sum()) for c in (0, 1, 2))


@pytest.mark.parametrize("block", [(8, 8), (16, 32)])
@pytest.mark.parametrize("n", [64, 256])
def test_equals_splash_multi_head(n, block):
    heads = [sm.CausalMask((n, n)), sm.LocalMask((n, n), (12, 4), 0), sm.NumpyMask(RANDOM[n])]
    multi = sm.MultiHeadMask(heads)
    want = splash_block_mask(multi, block)
    assert want.shape[0] == 3
    dense = multi[:, :, :]
    got_dense = tile_stats(dense, block)
    got_intervals = tile_stats([IntervalMask.from_dense(d) for d in dense], block)
    np.testing.assert_array_equal(got_dense.kind, want)
    np.testing.assert_array_equal(got_intervals.kind, want)
    assert got_intervals.shape == got_dense.shape == (3, n, n)
    # Two equal heads and one other: splash keeps one row per head.
    multi = sm.MultiHeadMask([heads[0], heads[1], heads[0]])
    intervals = [IntervalMask.from_dense(d) for d in multi[:, :, :]]
    np.testing.assert_array_equal(tile_stats(intervals, block).kind, splash_block_mask(multi, block))


# ------------------------------------------------------------------ random masks, ragged sizes


@st.composite
def runs(draw):
    """``(starts, stops, n)`` of a random mask (the IntervalMask is built in the test)."""
    n = draw(st.sampled_from([1, 3, 8, 37, 64, 100, 130]))
    k = draw(st.integers(1, 4))
    starts = draw(st.lists(st.integers(0, n), min_size=n * k, max_size=n * k))
    widths = draw(st.lists(st.integers(0, n), min_size=n * k, max_size=n * k))
    s = np.asarray(starts).reshape(n, k)
    return s, s + np.asarray(widths).reshape(n, k), n


blocks = st.one_of(st.integers(1, 40), st.tuples(st.integers(1, 40), st.integers(1, 140)))


@settings(max_examples=60)
@given(runs(), blocks, st.sampled_from([1, 7, 50, tiles_module._CHUNK_ENTRIES]))
def test_intervals_equal_dense_and_reference(mask_runs, block, chunk):
    """The runs' counts against the dense route and a loop; `chunk` small: counted a block of tile rows at a time."""
    mask = IntervalMask.from_runs(*mask_runs[:2], n=mask_runs[2])
    dense = mask.to_dense()
    with mock.patch.object(tiles_module, "_CHUNK_ENTRIES", chunk):
        got = tile_stats(mask, block_size=block)
    pair = (block, block) if isinstance(block, int) else block
    want = reference_kind(dense, pair)
    np.testing.assert_array_equal(got.kind, want)
    np.testing.assert_array_equal(tile_stats(dense, block_size=block).kind, want)
    assert got.block_size == pair and got.shape == (mask.n, mask.n)
    assert got.grid == (-(-mask.n // pair[0]), -(-mask.n // pair[1]))
    assert got.empty + got.partial + got.full == got.num_tiles == want.size
    assert got.sparsity == pytest.approx(1 - got.computed_fraction)
    assert 0.0 <= got.sparsity <= 1.0


@settings(max_examples=15)
@given(st.lists(runs(), min_size=1, max_size=3), blocks)
def test_heads_of_intervals_equal_dense(head_runs, block):
    n = head_runs[0][2]
    heads = [IntervalMask.from_runs(s, e, n=m) if m == n else S.causal(n) for s, e, m in head_runs]
    dense = np.stack([h.to_dense() for h in heads])
    got = tile_stats(tuple(heads), block)
    np.testing.assert_array_equal(got.kind, tile_stats(dense, block).kind)
    pair = (block, block) if isinstance(block, int) else block
    np.testing.assert_array_equal(got.kind, reference_kind(dense, pair))


@pytest.mark.parametrize(
    ("shape", "block"),
    [((37, 37), (8, 8)), ((64, 48), (16, 32)), ((2, 3, 20, 30), (7, 11)), ((10, 10), (128, 4)), ((5, 9), (2, 200))],
)
def test_jax_input_equals_numpy_input(shape, block):
    dense = np.random.default_rng(1).random(shape) < 0.6
    dense[..., :3, :] = True  # some full tiles
    want = reference_kind(dense, block)
    got_np = tile_stats(dense, block)
    got_jax = tile_stats(jnp.asarray(dense), block)
    np.testing.assert_array_equal(got_np.kind, want)
    np.testing.assert_array_equal(got_jax.kind, want)
    assert got_np.shape == got_jax.shape == shape
    assert got_np.kind.shape == shape[:-2] + want.shape[-2:]


# ------------------------------------------------------------------ FlexAttention sparsity


def test_ragged_single_tile_sparsity_is_not_negative():
    # attention-gym issue #93: n = 100 with 128-tiles printed -63.84% (blocks over n²/128²).
    for mask in (S.causal(100), S.full(100), np.ones((100, 100), bool), jnp.tril(jnp.ones((100, 100), bool))):
        s = tile_stats(mask)
        assert s.kind.tolist() == [[1]]  # ragged: never full (FlexAttention pads with False)
        assert s.sparsity == 0.0 and s.computed_fraction == 1.0
    s = tile_stats(np.zeros((100, 100), bool))
    assert s.kind.tolist() == [[0]] and s.sparsity == 1.0


def test_long_context_closed_forms():
    n, b = 131072, 128
    t = n // b
    s = tile_stats(S.causal(n))
    assert s.grid == (t, t)
    assert (s.full, s.partial, s.empty) == (t * (t - 1) // 2, t, t * (t - 1) // 2)
    np.testing.assert_array_equal(np.diag(s.kind), 1)
    # StreamingLLM: a causal window of w = 4096 keys back (32 tiles) and 4 sink tokens.
    w = 4096 // b
    s = tile_stats(S.sliding_window(n, left=4096) | S.attention_sinks(n, num=4))
    # tile row r: the diagonal tile and the window's first tile (r - w) are partial, the tiles
    # between full; the sinks make tile (r, 0) partial once it has left the window (r > w).
    assert s.full == sum(range(w)) + (t - w) * (w - 1)
    assert s.partial == w + 2 + (t - w - 1) * 3
    assert s.empty == t * t - s.full - s.partial


# ------------------------------------------------------------------ the result object and errors


def test_tile_stats_object():
    s = tile_stats(S.causal(256), (128, 64))
    assert isinstance(s, TileStats)
    assert s.kind.tolist() == [[1, 1, 0, 0], [2, 2, 1, 1]]
    assert (s.empty, s.partial, s.full) == (2, 4, 2)
    assert s.computed_fraction == 0.75 and s.sparsity == 0.25
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.full = 3
    with pytest.raises(ValueError):
        s.kind[0, 0] = 2
    text = str(s)
    assert "2 x 4 tiles of 128 x 64" in text and "2 empty, 4 partial, 2 full" in text and "25.00%" in text
    assert json.loads(json.dumps(s.to_dict()))["grid"] == [2, 4]
    heads = tile_stats(np.ones((3, 16, 16), bool), 8)
    assert "TileStats: 3 heads x 2 x 2 tiles of 8 x 8 over a mask of shape (3, 16, 16)" in str(heads)
    assert heads.full == 12


def test_summary_names_the_heads_before_the_tile_grid():
    """Review (finding 7): "4 x 4 tiles of 16 x 16 x 4 heads" read like a 16 x 16 x 4 tile; the heads come first."""
    text = tile_stats(np.ones((4, 64, 64), bool), 16).summary()
    assert text.startswith("TileStats: 4 heads x 4 x 4 tiles of 16 x 16 over a mask of shape (4, 64, 64): ")
    assert tile_stats(np.ones((1, 16, 16), bool), 8).summary().startswith("TileStats: 1 head x 2 x 2 tiles of 8 x 8 ")
    assert tile_stats(np.ones((2, 3, 16, 16), bool), 8).summary().startswith("TileStats: 2 x 3 heads x 2 x 2 tiles ")


@pytest.mark.parametrize("bad", [0, -1, (8,), (8, 8, 8), (8, 0), True, 2.5, "128", (8.0, 8)])
def test_bad_block_size(bad):
    with pytest.raises(ParameterError, match="`block_size`"):
        tile_stats(S.causal(8), block_size=bad)


@pytest.mark.parametrize(
    "bad",
    [
        np.ones((8, 8), np.int32),
        np.ones(8, bool),
        np.ones((0, 8), bool),
        np.ones((0, 8, 8), bool),
        "causal",
        [],
        [S.causal(8), np.ones((8, 8), bool)],
        [S.causal(8), S.causal(9)],
    ],
)
def test_bad_mask(bad):
    with pytest.raises(MaskError, match="`mask`"):
        tile_stats(bad)


def test_traced_mask_is_refused():
    with pytest.raises(MaskError, match="outside jax.jit"):
        jax.jit(lambda m: tile_stats(m).kind)(jnp.ones((8, 8), bool))


def test_a_user_subclass_of_splash_mask_is_read_as_from_splash_reads_it():
    """A fresh user: ``tile_stats`` refused a subclass of splash's ``Mask`` ("must be a Boolean array") that
    ``from_splash`` reads; its tiles now equal those of its dense array, and one without a shape is named."""

    class Checkerboard(sm.Mask):
        shape = (6, 6)

        def __getitem__(self, idx):
            q, k = (np.arange(6)[i] for i in idx)
            return (q[..., :, None] + k[..., None, :]) % 2 == 0 if np.ndim(q) else (q + k) % 2 == 0

    class NoShape(sm.Mask):
        def __getitem__(self, idx):
            return np.ones((4, 4), bool)

    dense = (np.arange(6)[:, None] + np.arange(6)[None, :]) % 2 == 0
    got, want = tile_stats(Checkerboard(), block_size=2), tile_stats(dense, block_size=2)
    np.testing.assert_array_equal(got.kind, want.kind)
    np.testing.assert_array_equal(got.kind, np.ones((3, 3), np.int8))
    with pytest.raises(MaskError, match=r"`mask`: the splash mask has no usable `shape`"):
        tile_stats(NoShape(), block_size=2)


def test_masked_and_sparse_arrays_are_refused_by_name():
    """A review: ``tile_stats`` of a masked causal array counted its data (4 full tiles where causal has 1 empty,
    2 partial, 1 full), and a ``csr_matrix`` raised NumPy's "not enough values to unpack"."""
    import scipy.sparse as sp

    causal = np.tri(4, dtype=bool)
    masked = np.ma.masked_array(np.ones((4, 4), bool), mask=~causal)
    for value, what in ((masked, "NumPy masked array"), (sp.csr_matrix(causal), "SciPy sparse csr_matrix")):
        with pytest.raises(MaskError, match=rf"^`mask` must be a Boolean array of shape \(n, n\); got a {what}"):
            tile_stats(value, block_size=(2, 2))
        with pytest.raises(MaskError, match=r"^`mask\[1\]` must be a Boolean array"):
            tile_stats([causal, value], block_size=(2, 2))
