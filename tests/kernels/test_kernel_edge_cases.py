"""Edge cases a new user hit with hassejax.kernels, the per-head analysis and the export CLI."""

import numpy as np
import pytest

from hassejax.cli import main
from hassejax.errors import MaskError, MemoryBudgetError
from hassejax.kernels import from_splash, mask_mod_source, mask_rule, tile_stats, to_mask_mod, to_splash
from hassejax.masks import causal, from_mask_mod, from_spec, sliding_window, structured
from hassejax.order import reachability

sm = pytest.importorskip("jax.experimental.pallas.ops.tpu.splash_attention.splash_attention_mask")


def test_heads_of_different_sizes_name_the_mask():
    a, b = np.eye(4, dtype=bool), np.eye(5, dtype=bool)
    with pytest.raises(MaskError, match="`mask`"):
        reachability([a, b], 1, head_axis=0)
    with pytest.raises(MaskError, match="`mask`"):
        tile_stats([a, b], 2)
    with pytest.raises(MaskError, match="`mask`"):
        to_mask_mod([a, b])


def test_source_names_that_would_break_the_source_are_refused():
    for bad in ("def", "DOC", "abs", "np", "q_idx"):
        with pytest.raises(MaskError, match="`name`"):
            mask_mod_source("document(segments=[2, 2])", framework="numpy", name=bad)
    namespace = {}
    exec(mask_mod_source("document(segments=[2, 2])", framework="numpy", name="doc_mask"), namespace)
    assert bool(namespace["doc_mask"](0, 0, 1, 0)) and not bool(namespace["doc_mask"](0, 0, 2, 1))


def test_recognised_closed_forms_need_no_tables():
    for dense, text in [
        (np.asarray(causal(16)), "kv_idx <= q_idx"),
        (np.asarray(sliding_window(16, 3, 1)), "q_idx - kv_idx <= 3"),
    ]:
        rule = mask_rule(dense)
        assert not rule.tables and text in rule.expr
        np.testing.assert_array_equal(np.asarray(from_mask_mod(to_mask_mod(dense), 16)), dense)
    long = structured.sliding_window(1 << 21, 5)  # would be 35 MB of tables
    assert len(mask_mod_source(long)) < 1000


def test_slicing_failures_become_mask_errors():
    class Raises(sm.Mask):
        shape = property(lambda self: (4, 4))

        def __getitem__(self, idx):
            raise RuntimeError("boom")

    with pytest.raises(MaskError, match="`mask`.*boom"):
        from_splash(Raises())


def test_numpy_fallback_refusal_points_to_lazy():
    with pytest.raises(MemoryBudgetError, match="fallback='lazy'"):
        to_splash(f"attention_sinks(n={1 << 20}, num=4)")


def test_lazy_masks_read_back_from_their_runs_at_long_n():
    n = 131072
    spec = f"sliding_window(n={n}, left=4096) | attention_sinks(n={n}, num=4)"
    lazy = to_splash(spec, fallback="lazy")
    assert from_splash(lazy, form="intervals") == mask_rule(spec).intervals
    tile = lazy[4096 * 3 : 4096 * 3 + 128, 0:256]  # and its slicing is the rule
    assert tile[:, :4].all() and not tile[:, 4:].any()


def test_rows_without_keys_warn_for_splash():
    dense = np.asarray(causal(8)).copy()
    dense[5] = False
    with pytest.warns(UserWarning, match="row 5") as record:
        to_splash(dense)
    # reported at the caller's line (review: at hassejax/masks/_validate.py, a fixed stacklevel inside the package)
    assert [w.filename for w in record] == [__file__]
    with pytest.warns(UserWarning, match="row 1") as record:
        to_splash("xlnet_two_stream(permutation=[1, 0, 2], stream='query')")
    assert [w.filename for w in record] == [__file__]


def test_heads_beyond_the_exported_ones_attend_nowhere_and_say_so():
    fn = to_mask_mod([causal(6), sliding_window(6, 1, 1)])
    # evaluated as a plain callable (FlexAttention's view: no `.rule`), a head beyond the exported ones matches no term
    assert not np.asarray(from_mask_mod(lambda b, h, q, k: fn(b, h, q, k), 6, h=2)).any()
    assert "h >= 2 attends nowhere" in mask_mod_source([causal(6), sliding_window(6, 1, 1)], framework="numpy")
    # from_mask_mod refuses such a head of a mask_mod that carries its rule (a fresh user: an all-False mask, silently)
    for h in (2, -1, 7):
        with pytest.raises(MaskError, match=rf"`h` must be a head of `fn`, a mask_mod of 2 per-head masks .* h = {h}"):
            from_mask_mod(fn, 6, h=h)
    for h in (0, 1):
        assert np.array_equal(
            np.asarray(from_mask_mod(fn, 6, h=h)), np.asarray([causal(6), sliding_window(6, 1, 1)][h])
        )


def test_tile_stats_takes_specs_and_splash_masks():
    spec = "sliding_window(n=256, left=16)"
    want = tile_stats(from_spec(spec, form="intervals"), 128)
    assert tile_stats(spec, 128).kind.tolist() == want.kind.tolist()
    # a list of specs is one per head, as for to_splash (review: "rank >= 2, got shape (2,)", an array of strings)
    heads = ["causal(n=24)", "sliding_window(n=24, left=3)"]
    per_head = tile_stats([from_spec(h, form="intervals") for h in heads], 8)
    assert tile_stats(heads, 8).kind.tolist() == per_head.kind.tolist() and per_head.kind.shape == (2, 3, 3)
    with pytest.raises(MaskError, match=r"`mask\[1\]` as a mask spec: .*unknown mask 'bogus'"):
        tile_stats(["causal(n=24)", "bogus(n=24)"], 8)
    assert tile_stats(to_splash(spec), 128).kind.tolist() == want.kind.tolist()


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_bad_npy_is_a_clean_error(capsys, tmp_path):
    code, _, err = _run(capsys, "tiles", str(tmp_path / "missing.npy"))
    assert code == 2 and "Traceback" not in err and "no such .npy file" in err
    np.save(tmp_path / "ints.npy", np.ones((4, 4), int))
    code, _, err = _run(capsys, "export", str(tmp_path / "ints.npy"), "--to", "mask_mod")
    assert code == 2 and "bool" in err


def test_cli_per_head_npy_and_out_files(capsys, tmp_path):
    heads = np.stack([np.asarray(causal(8)), np.asarray(sliding_window(8, 1))])
    np.save(tmp_path / "heads.npy", heads)
    code, out, _ = _run(capsys, "export", str(tmp_path / "heads.npy"), "--to", "mask_mod", "--framework", "numpy")
    assert code == 0
    namespace = {}
    exec(out, namespace)
    q, k = np.arange(8)[:, None], np.arange(8)[None, :]
    for h in range(2):
        np.testing.assert_array_equal(np.broadcast_to(namespace["mask_mod"](0, h, q, k), (8, 8)), heads[h])
    assert _run(capsys, "tiles", str(tmp_path / "heads.npy"), "--block", "4")[0] == 0
    # structured splash Python goes to --out when it is not a .npy
    code, out, _ = _run(capsys, "export", "causal(n=256)", "--to", "splash", "--out", str(tmp_path / "m.py"))
    assert (
        code == 0 and "CausalMask" in (tmp_path / "m.py").read_text() and out.startswith(f"wrote {tmp_path / 'm.py'}")
    )
    code, _, err = _run(capsys, "export", "causal(n=4)", "--to", "npy", "--out", str(tmp_path / "noext"))
    assert code == 2 and ".npy" in err


@pytest.mark.parametrize(
    "spec, n",
    [
        ("sliding_window(n=256, left=3000000000)", 256),
        ("sliding_window(n=100, left=3, right=4294967296)", 100),
        ("chunked_causal(n=100, chunk=10) & sliding_window(n=100, left=2147483648)", 100),
        ("dilated(n=50, window=4294967296, dilation=3)", 50),
    ],
)
def test_a_window_beyond_int32_exports_as_the_window_cut_at_the_ends(spec, n):
    """A fresh user: a window of 2**31 keys or more ("no limit", which the constructors take and cut at the sequence
    ends) reached splash's LocalMask and the mask_mod as a literal beyond int32 (raw OverflowError on slicing, in the
    kernel and in from_splash / from_mask_mod). The rule caps it at n, which means the same."""
    dense = np.asarray(from_spec(spec))
    splash = to_splash(spec)
    np.testing.assert_array_equal(np.asarray(splash[0:n, 0:n]), dense)
    np.testing.assert_array_equal(np.asarray(from_splash(splash)), dense)
    np.testing.assert_array_equal(np.asarray(from_mask_mod(to_mask_mod(spec), n)), dense)
    namespace = {}
    exec(mask_mod_source(spec, framework="numpy", name="m"), namespace)
    q, k = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    np.testing.assert_array_equal(np.asarray(namespace["m"](0, 0, q, k)).astype(bool), dense)


def test_nested_lists_are_one_mask_as_for_the_order_functions():
    """A fresh user: ``[[True, False], [True, True]]`` is one (2, 2) mask for reachability and tile_stats but was
    refused by to_splash / to_mask_mod as a list of two heads; nested lists of three levels are the heads."""
    one = [[True, False, False], [True, True, False], [False, True, True]]
    want = np.asarray(one)
    np.testing.assert_array_equal(np.asarray(from_mask_mod(to_mask_mod(one), 3)), want)
    np.testing.assert_array_equal(to_splash(one)[:, :], want)
    namespace = {}
    exec(mask_mod_source(one, framework="numpy"), namespace)
    q, k = np.arange(3)[:, None], np.arange(3)[None, :]
    np.testing.assert_array_equal(np.broadcast_to(namespace["mask_mod"](0, 0, q, k), (3, 3)), want)
    other = np.eye(3, dtype=bool)
    for heads in ([one, other.tolist()], [one, other], (tuple(map(tuple, one)), other)):
        rule = mask_rule(heads)
        assert rule.heads == 2
        for h, m in enumerate((want, other)):
            np.testing.assert_array_equal(np.broadcast_to(rule.evaluate(q, k, h), (3, 3)), m)
    with pytest.raises(MaskError, match=r"numpy.asarray\(mask, dtype=bool\)"):
        to_mask_mod([[1, 0], [1, 1]])
    with pytest.raises(MaskError, match="not rectangular"):
        mask_rule([[True], [True, False]])


def test_nested_lists_read_alike_and_refused_alike():
    """A review of the nested-list change: a list of rank-1 rows (NumPy arrays, or mixed with lists) is one mask for
    mask_rule and to_splash as for tile_stats and reachability; ragged heads are a MaskError everywhere (NumPy's
    ValueError before); tile_stats's advice for int lists fits a list and ragged rows are called rows."""
    from hassejax.order import HasseDiagram, convergence_depth, heads_union

    d = np.tril(np.ones((4, 4), bool))
    for rows in (list(d), [d[0].tolist(), d[1], d[2].tolist(), d[3]]):
        np.testing.assert_array_equal(to_splash(rows)[:, :], d)
        assert mask_rule(rows).heads is None
        assert tile_stats(rows, block_size=2).shape == (4, 4)
    a = [[True, False, False], [True, True, False], [False, True, True]]
    ragged = [a, [[True, False, False], [True, True], [False, True, True]]]
    for call in (
        lambda: tile_stats(ragged),
        lambda: heads_union(ragged, 0),
        lambda: convergence_depth(ragged, head_axis=0),
        lambda: HasseDiagram.from_mask(ragged, head_axis=0),
        lambda: reachability(ragged),
        lambda: mask_rule(ragged),
    ):
        with pytest.raises(MaskError, match="not rectangular"):
            call()
    with pytest.raises(MaskError, match=r"numpy.asarray\(mask, dtype=bool\)"):
        tile_stats([[1, 0], [1, 1]])
    with pytest.raises(MaskError, match="every row must have the same shape"):
        tile_stats([[True, False, False], [True, True], [False, True, True]])


def test_tile_counts_memory_check_covers_a_tile_row_beyond_the_chunk(monkeypatch):
    """A review: with block_q = n a single tile row holds n · runs runs, more than _CHUNK_ENTRIES, and the grid's
    count took 8 bytes a tile: 2.8× and 3.3× the memory checked. The check now counts both (here against the
    memory a tracemalloc'd call takes) and refuses where the call would not fit."""
    import importlib
    import tracemalloc

    from hassejax.masks import structured as S

    tiles = importlib.import_module("hassejax.kernels.tiles")
    checked = []
    real = tiles.check_host_memory
    monkeypatch.setattr(tiles, "check_host_memory", lambda b, *a, **k: (checked.append(b), real(b, *a, **k))[1])
    monkeypatch.setattr(tiles, "_CHUNK_ENTRIES", 1 << 12)
    n = 1 << 13
    m = S.global_sliding(n, 16, np.arange(100, n, n // 32))  # 33 runs a row
    for block in ((n, 128), (8, 8)):
        tracemalloc.start()
        tile_stats(m, block_size=block)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak <= checked[-1], (block, peak, checked[-1])
