"""hassejax.kernels.from_splash: every splash mask type read back equals the mask's own dense slice.

The reference is splash's own ``mask[:, :]`` (``mask[:, :, :]`` for a MultiHeadMask), and
for the long-context claim :func:`hassejax.masks.structured.sliding_window`.
"""

import os
import subprocess
import sys

import jax
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as sm

import hassejax.kernels.splash as splash_module
from hassejax.errors import MaskError
from hassejax.kernels import from_splash
from hassejax.masks import IntervalMask
from hassejax.masks import structured as S

RNG = np.random.default_rng(0)
SIZES = (1, 8, 37, 64, 100)
RANDOM = {n: RNG.random((n, n)) < 0.4 for n in SIZES}

SPLASH_MASKS = {
    "causal": lambda n: sm.CausalMask((n, n)),
    "causal_offset": lambda n: sm.CausalMask((n, n), offset=3),
    "local": lambda n: sm.LocalMask((n, n), (5, 0), 0),
    "local_both_offset": lambda n: sm.LocalMask((n, n), (7, 2), -2),
    "local_unbounded_left": lambda n: sm.LocalMask((n, n), (None, 1), 0),
    "local_unbounded": lambda n: sm.LocalMask((n, n), (None, None), 0),
    "chunked": lambda n: sm.ChunkedCausalMask((n, n), 16),
    "full": lambda n: sm.FullMask((n, n)),
    "numpy_random": lambda n: sm.NumpyMask(RANDOM[n]),
    "or_and": lambda n: (
        (sm.CausalMask((n, n)) & sm.LocalMask((n, n), (4, None), 0))
        | sm.NumpyMask(RANDOM[n] & (RNG.random((n, n)) < 0.1))
    ),
}


def check_intervals(got, dense):
    assert isinstance(got, IntervalMask)
    want = IntervalMask.from_dense(np.asarray(dense))
    assert got == want  # the run arrays in normal form, not only the entries
    np.testing.assert_array_equal(got.to_dense(), dense)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name", sorted(SPLASH_MASKS))
def test_each_mask_type_both_forms(name, n):
    mask = SPLASH_MASKS[name](n)
    dense = mask[:, :]
    got = from_splash(mask, form="dense")
    assert isinstance(got, jax.Array) and got.dtype == np.bool_ and got.shape == (n, n)
    np.testing.assert_array_equal(np.asarray(got), dense)
    check_intervals(from_splash(mask, form="intervals"), dense)
    np.testing.assert_array_equal(np.asarray(from_splash(mask)), dense)  # auto: small n is dense


def test_multi_head_mask_both_forms():
    n = 64
    causal, local = sm.CausalMask((n, n)), sm.LocalMask((n, n), (9, 0), 0)
    multi = sm.MultiHeadMask([causal, local, sm.CausalMask((n, n)), sm.NumpyMask(RANDOM[n])])
    dense = multi[:, :, :]
    got = from_splash(multi, form="dense")
    assert got.shape == (4, n, n)
    np.testing.assert_array_equal(np.asarray(got), dense)
    heads = from_splash(multi, form="intervals")
    assert isinstance(heads, tuple) and len(heads) == 4
    for h, d in zip(heads, dense):
        check_intervals(h, d)
    assert heads[0] is heads[2]  # equal splash masks (compared by value) are read once and shared


class CountingMask(sm.Mask):
    """A user-defined splash mask (unhashable, like a bare _ComputableMask) that counts the rows read."""

    def __init__(self, array):
        self.array = array
        self.rows_read = 0

    @property
    def shape(self):
        return self.array.shape

    def __getitem__(self, idx):
        q, k = idx
        block = self.array[q, k]
        self.rows_read += block.shape[0]
        return block

    def __hash__(self):
        raise NotImplementedError


@pytest.mark.parametrize("form", ["dense", "intervals"])
def test_user_mask_read_once_per_head_in_blocks(monkeypatch, form):
    n = 37
    monkeypatch.setattr(splash_module, "_BLOCK_ENTRIES", 5 * n)  # blocks of 5 rows: boundaries everywhere
    mask = CountingMask(RANDOM[n])
    got = from_splash(sm.MultiHeadMask([mask, mask, mask]), form=form)
    assert mask.rows_read == n  # one head read, the other two are the same object
    if form == "dense":
        np.testing.assert_array_equal(np.asarray(got), np.broadcast_to(RANDOM[n], (3, n, n)))
    else:
        assert got[0] is got[1] is got[2]
        check_intervals(got[0], RANDOM[n])


@pytest.mark.parametrize("n", [37, 64])
def test_small_blocks_equal_one_block(monkeypatch, n):
    masks = [SPLASH_MASKS[name](n) for name in ("numpy_random", "local_both_offset", "or_and")]
    monkeypatch.setattr(splash_module, "_BLOCK_ENTRIES", 3 * n)
    for mask in masks:
        check_intervals(from_splash(mask, form="intervals"), mask[:, :])
        np.testing.assert_array_equal(np.asarray(from_splash(mask, form="dense")), mask[:, :])


def test_auto_form(monkeypatch):
    n = 64
    monkeypatch.setattr(splash_module, "_AUTO_DENSE_ENTRIES", 100)
    local = sm.LocalMask((n, n), (3, 0), 0)
    check_intervals(from_splash(local), local[:, :])  # above the limit and structured: intervals
    scattered = sm.NumpyMask(RANDOM[n])  # more than n / 8 runs a row: the dense array
    got = from_splash(scattered)
    assert isinstance(got, jax.Array)
    np.testing.assert_array_equal(np.asarray(got), RANDOM[n])
    rectangular = sm.CausalMask((16, 24), offset=8)  # the interval form is square: dense
    np.testing.assert_array_equal(np.asarray(from_splash(rectangular)), rectangular[:, :])


def test_rectangular():
    mask = sm.CausalMask((8, 12), offset=4)
    np.testing.assert_array_equal(np.asarray(from_splash(mask, form="dense")), mask[:, :])
    with pytest.raises(MaskError, match="`form`"):
        from_splash(mask, form="intervals")


@pytest.mark.parametrize(("left", "right"), [(0, 0), (3, 0), (2, 5), (40, 40)])
def test_local_mask_is_sliding_window(left, right):
    n = 32
    got = from_splash(sm.LocalMask((n, n), (left, right), 0), form="intervals")
    assert got == S.sliding_window(n, left=left, right=right)


class Sliced(sm.Mask):
    """A user subclass that only slices (hides the built-in type): forces the slicing route."""

    def __init__(self, inner):
        self.inner = inner

    @property
    def shape(self):
        return self.inner.shape

    def __getitem__(self, idx):
        return self.inner[idx]


def test_long_context_local_mask():
    # Built-in masks are read from their parameters at long n (O(n)), sinks | window via |.
    n = 131072
    mask = sm.LocalMask((n, n), (4096, 0), 0) | sm.ChunkedCausalMask((n, n), 8192)
    got = from_splash(sm.LocalMask((n, n), (4096, 0), 0))  # auto: above 2**26 entries, intervals
    assert isinstance(got, IntervalMask)
    assert got == S.sliding_window(n, left=4096)
    assert from_splash(mask, form="intervals") == S.sliding_window(n, left=4096) | S.chunked_causal(n, 8192)


def test_long_context_through_slicing():
    # A mask known only through its slicing: all n² = 1.1e9 entries read, 256 rows at a time, no (n, n) array.
    n = 32768
    got = from_splash(Sliced(sm.LocalMask((n, n), (1024, 0), 0) | sm.ChunkedCausalMask((n, n), 4096)), form="intervals")
    assert got == S.sliding_window(n, left=1024) | S.chunked_causal(n, 4096)


@given(
    n=st.integers(1, 48),
    left=st.one_of(st.none(), st.integers(0, 50)),
    right=st.one_of(st.none(), st.integers(0, 50)),
    offset=st.integers(-5, 5),
    chunk=st.integers(1, 50),
)
def test_parameter_route_equals_slicing_route(n, left, right, offset, chunk):
    masks = [
        sm.CausalMask((n, n), offset=offset),
        sm.LocalMask((n, n), (left, right), offset),
        sm.ChunkedCausalMask((n, n), chunk),
        sm.FullMask((n, n)),
    ]
    masks.append((masks[0] & masks[2]) | masks[1])
    for m in masks:
        assert from_splash(m, form="intervals") == from_splash(Sliced(m), form="intervals")


class WrongSlice(sm.Mask):
    def __init__(self, block):
        self.block = block

    @property
    def shape(self):
        return (8, 8)

    def __getitem__(self, idx):
        return self.block


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (np.ones((8, 8), bool), "splash attention Mask"),
        (S.causal(8), "splash attention Mask"),
        ("causal", "splash attention Mask"),
        (WrongSlice(np.ones((8, 8), np.int32)), "Boolean block"),
        (WrongSlice(np.ones((8, 7), bool)), "Boolean block"),
    ],
)
def test_bad_mask(bad, match):
    with pytest.raises(MaskError, match=match) as info:
        from_splash(bad, form="dense")
    assert "`mask`" in str(info.value)


@pytest.mark.parametrize("bad", ["sparse", None, 1])
def test_bad_form(bad):
    with pytest.raises(MaskError, match="`form`"):
        from_splash(sm.CausalMask((8, 8)), form=bad)


def test_import_does_not_load_pallas():
    code = (
        "import sys, hassejax.kernels.splash, hassejax.kernels.tiles\n"
        "assert not any(m.startswith('jax.experimental.pallas') for m in sys.modules), 'pallas imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "JAX_PLATFORMS": "cpu"})


def test_built_in_masks_read_from_their_parameters_check_memory_first(monkeypatch):
    """A fresh user: ``from_splash(CausalMask((10**9, 10**9)), form="intervals")`` was killed at 24 GB (its O(n)
    position and run arrays made without a check); now refused before them, naming `mask`, for one built-in mask and
    for their ``&`` (here with 48 MiB of host memory, where n = 2**20 needs about 72 and 144 MiB)."""
    from hassejax.errors import MemoryBudgetError
    from hassejax.masks import _runs

    n = 1 << 20
    causal, local = sm.CausalMask((n, n)), sm.LocalMask((n, n), (4, 0), 0)
    monkeypatch.setattr(_runs, "host_memory_bytes", lambda: 48 * 2**20)
    with pytest.raises(MemoryBudgetError, match=r"^`mask`: the interval form of the splash mask read from its param"):
        from_splash(causal, form="intervals")
    with pytest.raises(MemoryBudgetError, match=r"\(n = 1048576, 2 built-in masks"):
        from_splash(causal & local, form="intervals")
    monkeypatch.setattr(_runs, "host_memory_bytes", lambda: 1024 * 2**20)
    got = from_splash(causal & local, form="intervals")
    assert got.row(n - 1) == [(n - 5, n)] and got.row(2) == [(0, 3)]
