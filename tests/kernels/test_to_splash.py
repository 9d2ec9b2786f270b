"""to_splash / from_splash round trips on every gallery and derived mask, and the lazy fallback at long n."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hassejax.errors import MaskError
from hassejax.kernels import from_splash, mask_rule, to_splash
from hassejax.masks import IntervalMask, from_spec, structured

pytest.importorskip("jax.experimental.pallas.ops.tpu.splash_attention.splash_attention_mask")

from test_mask_mod import DERIVED, GALLERY


@pytest.mark.parametrize("spec", GALLERY + [s for s, _ in DERIVED])
def test_round_trip_every_gallery_and_derived_mask(spec):
    rule = mask_rule(spec)
    want = rule.intervals.to_dense()
    got = from_splash(to_splash(spec), form="dense")
    np.testing.assert_array_equal(np.asarray(got), want)
    lazy = from_splash(to_splash(spec, fallback="lazy"), form="intervals")
    assert lazy == rule.intervals


@given(
    n=st.integers(2, 40),
    left=st.one_of(st.none(), st.integers(0, 45)),
    right=st.one_of(st.none(), st.integers(0, 45)),
)
def test_windows_are_recognised_as_local_masks(n, left, right):
    q = np.arange(n)[:, None]
    k = np.arange(n)[None, :]
    dense = np.ones((n, n), bool)
    if left is not None:
        dense &= k >= q - left
    if right is not None:
        dense &= k <= q + right
    splash = to_splash(dense)
    assert type(splash).__name__ in ("LocalMask", "CausalMask", "FullMask")
    np.testing.assert_array_equal(np.asarray(splash[:, :]), dense)


@pytest.mark.parametrize(
    "spec, kind",
    [
        ("document(segments=[64, 64, 64, 64])", "ChunkedCausalMask"),
        ("block_causal(n=256, block_size=1)", "CausalMask"),
        ("prefix_lm(n=256, prefix=256)", "FullMask"),
        ("document(segments=[64, 64, 64, 64]) & sliding_window(n=256, left=8)", "LogicalAnd"),
        # a part without splash structure in a union that has one as a whole (a second review)
        ("document(segments=[100, 156]) | causal(n=256)", "CausalMask"),
        ("attention_sinks(n=256, num=4) | full(n=256)", "FullMask"),
    ],
)
def test_a_spec_gets_the_splash_structure_its_key_runs_have(spec, kind):
    """A spec string is exported as structured as the same mask given as an array or IntervalMask (it was a
    NumpyMask: n² bytes, refused at long n, where the interval form gave e.g. ChunkedCausalMask)."""
    dense = np.asarray(from_spec(spec))
    got = to_splash(spec)
    assert type(got).__name__ == kind
    np.testing.assert_array_equal(np.asarray(got[:, :]), dense)
    assert type(to_splash(from_spec(spec, form="intervals"))).__name__ in (kind, "NumpyMask")  # parts not combined
    n = 1 << 20  # at a million tokens: structured, no n x n array
    big = to_splash(f"document(segments={[n // 4] * 4})")
    assert type(big).__name__ == "ChunkedCausalMask" and big.shape == (n, n)


def test_long_context_lazy_export_needs_no_dense_array():
    n = 131072
    spec = f"sliding_window(n={n}, left=4096) | attention_sinks(n={n}, num=4)"
    lazy = to_splash(spec, fallback="lazy")
    assert lazy.shape == (n, n)
    tile = lazy[4096 * 3 : 4096 * 3 + 128, 0:256]
    assert tile[:, :4].all() and not tile[:, 4:].any()
    small = 8192  # reading every entry back through the lazy mask's slicing
    back = from_splash(
        to_splash(f"sliding_window(n={small}, left=512) | attention_sinks(n={small}, num=4)", fallback="lazy"),
        form="intervals",
    )
    assert back == structured.sliding_window(small, 512) | structured.attention_sinks(small, 4)


def test_numpy_fallback_is_refused_before_allocation():
    from hassejax.errors import MemoryBudgetError

    n = 1 << 20  # a NumpyMask of 1 TiB
    with pytest.raises(MemoryBudgetError, match="`mask`"):
        to_splash(f"attention_sinks(n={n}, num=4)")


def test_per_head_arrays_and_interval_heads():
    heads = np.stack([np.asarray(from_spec("causal(n=16)")), np.asarray(from_spec("sliding_window(n=16, left=2)"))])
    multi = to_splash(heads)
    assert [type(m).__name__ for m in multi.masks] == ["CausalMask", "LocalMask"]
    np.testing.assert_array_equal(np.asarray(from_splash(multi, form="dense")), heads)
    interval_heads = [IntervalMask.from_dense(h) for h in heads]
    assert from_splash(to_splash(interval_heads), form="intervals") == tuple(interval_heads)


def test_bad_fallback_names_the_argument():
    with pytest.raises(MaskError, match="`fallback`"):
        to_splash("causal(n=8)", fallback="dense")


def test_numpy_fallback_counts_every_heads_array(monkeypatch):
    """A review: the check counted one ``n²`` array whatever the heads (a ``MultiHeadMask`` holds them all) and the
    interval route's temporaries not at all (3× ``n²`` at the peak). Now every head's array and one block are counted."""
    import hassejax.masks._runs as runs
    from hassejax.errors import MemoryBudgetError
    from hassejax.masks import structured

    n = 4096
    one_head = structured.attention_sinks(n, 4)
    budget = n * n + (1 << 26)  # one head's array and one block of temporaries
    monkeypatch.setattr(runs, "host_memory_bytes", lambda: int(budget / 0.8) + 1)
    assert np.array_equal(np.asarray(to_splash(one_head).array), one_head.to_dense())
    heads = [one_head, structured.attention_sinks(n, 3)]
    with pytest.raises(MemoryBudgetError, match=r"`mask`: 2 NumpyMask\(s\) of shape \(4096, 4096\).*fallback='lazy'"):
        to_splash(heads)
    assert to_splash(heads, fallback="lazy") is not None  # the per-tile masks need no array


def test_rectangular_masks_round_trip():
    """A fresh user: ``to_splash`` refused rectangular masks ("must be square") that ``from_splash`` reads and splash's
    masks take (a KV cache, cross-attention). Bottom-right causal becomes ``CausalMask`` with its offset, any other
    a ``NumpyMask``; both read back equal, and a row with no key warns as for square masks."""
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mask_lib

    from hassejax.kernels import from_splash

    cache = np.asarray(from_splash(mask_lib.CausalMask((4, 6), offset=2), form="dense"))
    back = to_splash(cache)
    assert type(back).__name__ == "CausalMask" and back.offset == 2 and back.shape == (4, 6)
    np.testing.assert_array_equal(np.asarray(from_splash(back, form="dense")), cache)
    cross = np.random.default_rng(0).random((5, 9)) < 0.5
    cross[:, 0] = True
    got = to_splash(cross)
    assert type(got).__name__ == "NumpyMask"
    np.testing.assert_array_equal(np.asarray(from_splash(got, form="dense")), cross)
    # nested lists, as the arrays (a fresh user: the lists were refused as not square)
    assert to_splash(cache.tolist()).offset == 2
    np.testing.assert_array_equal(np.asarray(from_splash(to_splash(cross.tolist()), form="dense")), cross)
    cross[2] = False
    with pytest.warns(UserWarning, match=r"1 query row\(s\) with no allowed key \(first: row 2\)"):
        to_splash(cross)


@pytest.mark.parametrize("n_q, n_k", [(5, 3), (6, 2), (3, 5), (7, 1)])
def test_bottom_right_causal_is_splash_s_causal_mask_for_either_shape(n_q, n_k):
    """A review: bottom-right causal with more queries than keys (its first rows empty) was written as a
    ``NumpyMask``; it is splash's ``CausalMask`` with ``offset = n_k - n_q`` (negative), read back equal, through
    splash's own slicing too."""
    import warnings

    from hassejax.kernels import from_splash
    from hassejax.masks import causal_bottom_right

    want = np.asarray(causal_bottom_right(n_q, n_k))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the empty rows' warning (tested above)
        got = to_splash(want)
    assert type(got).__name__ == "CausalMask" and got.offset == n_k - n_q and got.shape == (n_q, n_k)
    np.testing.assert_array_equal(np.asarray(got[:, :]), want)
    np.testing.assert_array_equal(np.asarray(from_splash(got, form="dense")), want)
