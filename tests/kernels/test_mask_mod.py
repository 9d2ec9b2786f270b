"""to_mask_mod / mask_mod_source / mask_rule: exact round trips through from_mask_mod and exec'd source."""

import ast
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hassejax.errors import MaskError
from hassejax.kernels import _rules, mask_mod_source, mask_rule, to_mask_mod
from hassejax.masks import IntervalMask, and_masks, from_mask_mod, from_spec, or_masks, structured
from hassejax.tasks import block_generation, block_two_stream_mask, butterfly, butterfly_mask

# One or more specs per registered mask name (every name of hassejax.masks.MASKS appears).
GALLERY = [
    "causal(n=9)",
    "full(n=7)",
    "prefix_lm(n=9, prefix=3)",
    "prefix_lm(n=5, prefix=0)",
    "sliding_window(n=11, left=2, right=1)",
    "sliding_window(n=11, left=0)",
    "attention_sinks(n=9, num=2)",
    "block_causal(n=10, block_size=3)",
    "chunked_causal(n=10, chunk=4)",
    "document(segments=[3, 2, 4])",
    "document(segments=[3, 2, 4], inner='full')",
    "document(segments=[0, 0, 1, 1, 1], kind='ids')",
    "dilated(n=12, window=4, dilation=2)",
    "global_sliding(n=10, window=1, global_positions=[0, 5])",
    "natten_2d(height=3, width=4, kernel_h=3, kernel_w=3)",
    "tree_prefix(parents=[-1, 0, 0, 1], prefix=2)",
    "block_diffusion(n=6, block_size=2)",
    "xlnet_two_stream(permutation=[2, 0, 3, 1], context=1, stream='query')",
    "xlnet_two_stream(permutation=[2, 0, 3, 1], stream='content')",
    "sliding_window(n=16, left=3) | attention_sinks(n=16, num=2)",
    "document(segments=[3, 5]) & sliding_window(n=8, left=2)",
    "(causal(n=8) & chunked_causal(n=8, chunk=4)) | full(n=8) & prefix_lm(n=8, prefix=2)",
]

DERIVED = [
    ("block_two_stream_mask(n=6, block_size=2)", lambda: block_two_stream_mask(6, 2)),
    (
        "block_two_stream_mask(n=8, block_size=2, group='causal', content='block_causal', keep_last_block=False)",
        lambda: block_two_stream_mask(8, 2, "causal", "block_causal", False),
    ),
    ("block_two_stream_mask(n=6, block_size=3, group='diagonal')", lambda: block_two_stream_mask(6, 3, "diagonal")),
    ("butterfly_mask(n=5)", lambda: butterfly_mask(5)),
    ("butterfly_mask(n=5, sparse=True)", lambda: butterfly_mask(5, True)),
    ("butterfly_mask(n=2, sparse=True)", lambda: butterfly_mask(2, True)),
]


def _exec_source(mask, framework):
    namespace = {}
    exec(mask_mod_source(mask, framework=framework), namespace)
    return namespace["mask_mod"]


def _grid(fn, n):
    q = np.arange(n)[:, None]
    k = np.arange(n)[None, :]
    return np.broadcast_to(np.asarray(fn(0, 0, q, k)), (n, n))


def test_registry_is_covered():
    from hassejax.masks import MASKS

    named = {spec.split("(")[0] for spec in GALLERY}
    assert set(MASKS) <= named


@pytest.mark.parametrize("spec", GALLERY)
def test_gallery_round_trip(spec):
    want = np.asarray(from_spec(spec))
    fn = to_mask_mod(spec)
    assert fn.n == want.shape[0]
    np.testing.assert_array_equal(np.asarray(from_mask_mod(fn, fn.n)), want)
    np.testing.assert_array_equal(_grid(_exec_source(spec, "numpy"), fn.n), want)
    # the interval form of the same mask takes the key-runs route: also exact
    np.testing.assert_array_equal(np.asarray(from_mask_mod(to_mask_mod(from_spec(spec, form="intervals")), fn.n)), want)


@pytest.mark.parametrize(
    "spec",
    [
        *GALLERY,
        "document(segments=[2, 1, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3])",  # 17 boundaries: a table of ids
        "document(segments=[2, 1, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2], inner='full')",  # 16 (17 commas): none
    ],
)
def test_source_reads_its_tables_inside_them_on_a_padded_grid(spec):
    """FlexAttention's ``create_block_mask`` evaluates ``mask_mod`` on a grid rounded up to its block size (PyTorch
    issue #137801): a table of `n` entries read at `q_idx >= n` raised IndexError in NumPy (a CUDA device assert in
    PyTorch) for document, NATTEN, global-sliding and key-run tables (a fresh user)."""
    want = np.asarray(from_spec(spec))
    n = want.shape[0]
    padded = 16 * (n // 16 + 2)  # past n by more than a table's length
    for mask in (spec, from_spec(spec, form="intervals")):  # its closed form or lookup tables; the key-run tables
        got = _grid(_exec_source(mask, "numpy"), padded)
        np.testing.assert_array_equal(got[:n, :n], want)
    call = ast.parse(spec, mode="eval").body
    document = isinstance(call, ast.Call) and getattr(call.func, "id", None) == "document"  # one call, not a & b
    if document and "kind" not in {k.arg for k in call.keywords}:
        # documents given by unequal lengths (equal ones have closed forms: test below): the boundaries, counted on
        # the dense mask (a document starts at b where b does not see b - 1); past 16 (mask_mod_source's docstring)
        # the source reads a table of ids
        boundaries = int(np.sum(~want[np.arange(1, n), np.arange(n - 1)]))
        table = "DOC" in dict(mask_rule(spec).tables)
        assert table == (boundaries > 16), (boundaries, mask_rule(spec).tables)  # range tests, or the table ...
        assert ("DOC[q_idx % " in mask_mod_source(spec, framework="numpy")) == table  # ... read here, wrapped


@pytest.mark.parametrize("spec,dense", DERIVED, ids=[s for s, _ in DERIVED])
def test_derived_round_trip(spec, dense):
    want = np.asarray(dense())
    rule = mask_rule(spec)
    assert not rule.tables  # a closed form, no lookup tables
    np.testing.assert_array_equal(np.asarray(from_mask_mod(to_mask_mod(spec), rule.n)), want)
    np.testing.assert_array_equal(_grid(_exec_source(spec, "jax"), rule.n), want)


def test_merged_task_round_trip_through_slot_tables():
    for family in (block_generation(4, 2), butterfly(3)):
        task = family.merge()
        want = np.asarray(task.mask)
        fn = to_mask_mod(task)
        np.testing.assert_array_equal(np.asarray(from_mask_mod(fn, task.n)), want)
        np.testing.assert_array_equal(_grid(_exec_source(task, "numpy"), task.n), want)


def test_long_derived_masks_need_no_tables_and_agree_with_their_intervals():
    spec = "butterfly_mask(n=3000)"
    rule = mask_rule(spec)
    assert rule.n == 8998 and not rule.tables
    got = from_mask_mod(to_mask_mod(spec), rule.n, form="intervals")
    assert got == butterfly_mask(3000, form="intervals")


@pytest.mark.parametrize(
    "spec, tables",
    [
        ("document(segments=[7, 7, 7, 7, 7])", False),  # chunked causal
        ('document(segments=[7, 7, 7, 3], inner="full")', False),  # blocks q // 7 == k // 7
        ("document(segments=[5])", False),  # causal
        ("document(segments=[7, 8, 7])", False),  # unequal lengths: range tests at the 2 boundaries
        ('document(segments=[7, 7, 9], inner="full")', False),  # a last document longer than the others
        ('document(segments=[0, 0, 1, 1, 2], kind="ids", inner="full")', False),
        ("document(segments=[1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2])", False),  # 16 boundaries
        ("document(segments=[1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3])", True),  # 17: the document ids
        ('document(segments=[2, 1, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3], inner="full")', True),
    ],
)
def test_documents_of_one_length_have_closed_forms(spec, tables):
    """Documents of one length are chunked causal (or blocks, with full attention inside): the closed form, no
    table of document ids (a fresh user: 20,000 documents of 7 wrote about 900 KB of tables where ``to_splash`` found
    the chunked closed form); exact against the dense mask either way."""
    rule = mask_rule(spec)
    assert bool(rule.tables) == tables, rule.tables
    want = np.asarray(from_spec(spec))
    np.testing.assert_array_equal(_grid(_exec_source(spec, "numpy"), rule.n), want)
    np.testing.assert_array_equal(np.asarray(from_mask_mod(to_mask_mod(spec), rule.n)), want)


def test_a_few_long_documents_have_a_short_source():
    """A fresh user: two documents at n = 2^20 wrote a table of 1,048,576 ids (3.1 MB of source, 16 s); a few
    documents are range tests at their boundaries."""
    text = mask_mod_source("document(segments=[1000, 1047576])", framework="numpy")
    assert len(text) < 1000 and "DOC" not in text and "(q_idx >= 1000) == (kv_idx >= 1000)" in text


def test_scalars_vmap_and_jit():
    fn = to_mask_mod("sliding_window(n=64, left=8) | attention_sinks(n=64, num=4)")
    assert bool(fn(0, 0, 20, 2)) and not bool(fn(0, 0, 20, 5)) and bool(fn(0, 0, 20, 12))
    jitted = jax.jit(fn)
    assert bool(jitted(0, 0, jnp.int32(20), jnp.int32(12)))
    row = jax.vmap(lambda k: fn(0, 0, jnp.int32(20), k))(jnp.arange(64, dtype=jnp.int32))
    np.testing.assert_array_equal(
        np.asarray(row), np.asarray(from_spec("sliding_window(n=64, left=8) | attention_sinks(n=64, num=4)"))[20]
    )


def test_per_head_masks_use_h():
    heads = [from_spec("causal(n=8)"), from_spec("sliding_window(n=8, left=1)"), from_spec("document(segments=[4, 4])")]
    fn = to_mask_mod(heads)
    for h, want in enumerate(heads):
        np.testing.assert_array_equal(np.asarray(from_mask_mod(fn, 8, h=h)), np.asarray(want))
    stacked = to_mask_mod(np.stack([np.asarray(m) for m in heads]))
    np.testing.assert_array_equal(np.asarray(from_mask_mod(stacked, 8, h=2)), np.asarray(heads[2]))


@st.composite
def interval_masks(draw):
    n = draw(st.integers(1, 12))
    dense = np.array(draw(st.lists(st.booleans(), min_size=n * n, max_size=n * n)), dtype=bool).reshape(n, n)
    return dense


@given(interval_masks())
def test_any_mask_round_trips_through_its_key_runs(dense):
    n = dense.shape[0]
    fn = to_mask_mod(dense)
    np.testing.assert_array_equal(np.asarray(from_mask_mod(fn, n)), dense)
    np.testing.assert_array_equal(_grid(_exec_source(IntervalMask.from_dense(dense), "numpy"), n), dense)


def test_source_is_readable_for_closed_forms():
    spec = "document(segments=[2, 3]) & sliding_window(n=5, left=1)"  # [3, 2] is chunked causal
    text = mask_mod_source(spec)
    assert "import torch" in text and "def mask_mod(b, h, q_idx, kv_idx):" in text
    assert "((q_idx >= 2) == (kv_idx >= 2)) & (kv_idx <= q_idx)" in text and "q_idx - kv_idx <= 1" in text
    with mock.patch.object(_rules, "_DOCUMENT_BOUNDARIES", 0):  # the table of document ids, as for many documents
        text = mask_mod_source(spec)
    assert "DOC = torch.tensor([0, 0, 1, 1, 1], dtype=torch.int32)" in text
    assert "(DOC[q_idx % 5] == DOC[kv_idx % 5])" in text  # reads wrap (padded grids)


def test_errors_name_the_argument():
    with pytest.raises(MaskError, match="`mask`"):
        to_mask_mod(3.5)
    with pytest.raises(MaskError, match="`framework`"):
        mask_mod_source("causal(n=4)", framework="tensorflow")
    with pytest.raises(MaskError, match="`name`"):
        mask_mod_source("causal(n=4)", name="not an identifier")
    with pytest.raises(MaskError, match="unknown mask"):
        to_mask_mod("causl(n=4)")
    with pytest.raises(MaskError, match="square"):
        to_mask_mod(np.ones((3, 4), bool))
    with pytest.raises(MaskError, match="lookup tables"):
        mask_mod_source(structured.dilated(1 << 15, 64, 2))


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_natten_and_global_sliding_closed_forms_equal_their_masks(data):
    """``natten_2d`` by its clamped centres (tables of `height` and `width` entries) and ``global_sliding`` by range
    tests of its global positions (a table of `n` booleans beyond 16 runs), against the dense constructors."""
    height, width = data.draw(st.integers(1, 12)), data.draw(st.integers(1, 12))
    kh = data.draw(st.sampled_from(list(range(1, height + 1, 2))))
    kw = data.draw(st.sampled_from(list(range(1, width + 1, 2))))
    n = data.draw(st.integers(1, 70))
    positions = data.draw(st.lists(st.integers(0, n - 1), max_size=n))
    if data.draw(st.booleans()):  # a Boolean vector instead of indices
        flags = np.zeros(n, bool)
        flags[positions] = True
        positions = flags.tolist()
    window = data.draw(st.integers(0, n + 3))
    for spec in (
        f"natten_2d(height={height}, width={width}, kernel_h={kh}, kernel_w={kw})",
        f"global_sliding(n={n}, window={window}, global_positions={positions})",
    ):
        want = np.asarray(from_spec(spec))
        rule = mask_rule(spec)
        assert all(arr.size <= max(height, width, n) for _, arr in rule.tables)
        np.testing.assert_array_equal(np.asarray(from_mask_mod(to_mask_mod(spec), rule.n)), want)
        np.testing.assert_array_equal(_grid(_exec_source(spec, "numpy"), rule.n), want)


def test_long_natten_and_global_sliding_have_short_sources():
    """A fresh user: ``natten_2d(1024, 1024, 3, 5)`` (n = 2**20) was refused (6,291,456 table entries of key runs) and
    ``global_sliding(n=32768, window=3, global_positions=[0, 5, 32767])`` wrote 1.19 MB of source."""
    natten = mask_mod_source("natten_2d(height=1024, width=1024, kernel_h=3, kernel_w=5)", framework="numpy")
    assert len(natten) < 20_000 and "NATTEN_ROW" in natten
    spec = "global_sliding(n=32768, window=3, global_positions=[0, 5, 32767])"
    assert len(mask_mod_source(spec)) < 1_000 and not mask_rule(spec).tables
    rule = mask_rule(f"global_sliding(n=200, window=1, global_positions={list(range(0, 200, 2))})")
    assert [name for name, _ in rule.tables] == ["GLOBAL"]  # 100 runs: one table


def test_combined_table_parts_keep_their_own_tables():
    """A new user: ``d1 & (d2 | d3)`` of three different document tables renamed `d2`'s table to the name `d3`'s
    still had, then both to one name: the mask_mod, its source and the lazy splash mask differed from the mask at 7
    entries (the real splash kernel off by up to 4.3)."""
    spec = "document(segments=[1, 7]) & (document(segments=[3, 5]) | document(segments=[4, 1, 3]))"
    want = np.asarray(from_spec(spec))
    with mock.patch.object(_rules, "_DOCUMENT_BOUNDARIES", 0):  # tables of document ids, as for many documents
        rule = mask_rule(spec)
        fn = to_mask_mod(spec)
        source = _exec_source(spec, "numpy")
    assert len({name for name, _ in rule.tables}) == len(rule.tables) == 3
    q, k = np.arange(8)[:, None], np.arange(8)[None, :]
    np.testing.assert_array_equal(rule.evaluate(q, k), want)
    np.testing.assert_array_equal(np.asarray(from_mask_mod(fn, 8)), want)
    np.testing.assert_array_equal(_grid(source, 8), want)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_any_and_or_tree_of_table_parts_evaluates_to_its_mask(data):
    """Random ``&``/``|`` trees of parts with lookup tables (documents, ids, sinks, dilated windows) against the dense
    mask: the rule's expression and its NumPy source (no JAX), with the tables renamed wherever names collide."""
    n = data.draw(st.integers(2, 12))

    def segments():
        sizes, left = [], n
        while left:
            sizes.append(data.draw(st.integers(1, left)))
            left -= sizes[-1]
        return sizes

    def part():
        kind = data.draw(st.sampled_from(["doc", "doc", "docfull", "ids", "sinks", "dilated", "causal"]))
        if kind == "doc":
            return f"document(segments={segments()})"
        if kind == "docfull":
            return f"document(segments={segments()}, inner='full')"
        if kind == "ids":
            ids = sorted(data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)))  # each id one run
            return f"document(segments={ids}, kind='ids')"
        if kind == "sinks":
            return f"attention_sinks(n={n}, num={data.draw(st.integers(0, n))})"
        if kind == "dilated":
            return f"dilated(n={n}, window={data.draw(st.integers(0, n))}, dilation={data.draw(st.integers(1, 3))})"
        return f"causal(n={n})"

    def tree(depth):
        if depth == 0 or data.draw(st.booleans()):
            return part()
        return f"({tree(depth - 1)}) {data.draw(st.sampled_from('&|'))} ({tree(depth - 1)})"

    spec = f"{part()} {data.draw(st.sampled_from('&|'))} ({tree(2)})"  # a combination on the right: names collide
    want = np.asarray(from_spec(spec))
    # documents by range tests at their boundaries, or (as for many documents) by tables of ids
    with mock.patch.object(_rules, "_DOCUMENT_BOUNDARIES", data.draw(st.sampled_from([0, 16]))):
        rule = mask_rule(spec)
        source = _exec_source(spec, "numpy")
    assert len({name for name, _ in rule.tables}) == len(rule.tables), rule.tables
    q, k = np.arange(n)[:, None], np.arange(n)[None, :]
    np.testing.assert_array_equal(rule.evaluate(q, k), want, err_msg=spec)
    np.testing.assert_array_equal(_grid(source, n), want, err_msg=spec)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("butterfly_mask(n=1)", "mask spec 'butterfly_mask(n=1)': `n` must be an int >= 2; got 1."),
        (
            "causal(n=8) | block_two_stream_mask(n=6, block_size=4)",
            "mask spec 'causal(n=8) | block_two_stream_mask(n=6, block_size=4)', in "
            "`block_two_stream_mask(n=6, block_size=4)`: `block_size` must divide `n`; got n=6, block_size=4.",
        ),
    ],
)
def test_bad_derived_mask_spec_is_a_mask_error_naming_the_spec(spec, message):
    """Review (finding 3): a bad argument of a derived mask in a spec raised the task family's TaskError, which
    `except MaskError` missed and whose message named no spec (the gallery's masks say which spec and part)."""
    for call in (mask_rule, to_mask_mod):
        with pytest.raises(MaskError) as info:
            call(spec)
        assert str(info.value) == message


def test_spec_text_in_the_docstring_reads_back_as_written():
    """Review (finding 5): a combined spec's label (the spec as written) went verbatim into the generated docstring,
    so a triple-quoted string literal closed it early (a SyntaxError from to_mask_mod's exec, source that did not
    compile) and a backslash escape was read as one."""
    specs = [
        'document(segments=[3, 5], inner="""full""") | causal(n=8)',
        r'document(segments=[3, 5], inner="\x66ull") | causal(n=8)',
    ]
    want = np.asarray(from_spec("document(segments=[3, 5], inner='full') | causal(n=8)"))
    for spec in specs:
        fn = to_mask_mod(spec)
        source_fn = _exec_source(spec, "numpy")
        for f in (fn, source_fn):
            assert f.__doc__.startswith(spec + ": 8 positions")
        np.testing.assert_array_equal(_grid(source_fn, 8), want)
        np.testing.assert_array_equal(np.asarray(from_mask_mod(fn, 8)), want)


def test_combined_per_head_mask_mods_refuse_a_head_where_they_attend_nowhere():
    """Review (finding 6): from_mask_mod refused an `h` outside the heads of a per-head to_mask_mod function, but not
    once and_masks / or_masks wrapped it (an all-False mask, silently)."""
    heads = to_mask_mod(["causal(n=8)", "full(n=8)"])
    three = to_mask_mod(["causal(n=8)", "full(n=8)", "causal(n=8)"])
    one = to_mask_mod("full(n=8)")

    def plain(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx

    causal, full = np.tril(np.ones((8, 8), bool)), np.ones((8, 8), bool)
    cases = [(and_masks(heads, one), 2, full), (and_masks(three, heads), 2, full), (or_masks(heads, three), 3, causal)]
    for fn, limit, last in cases + [(and_masks(or_masks(heads, three), one), 3, causal)]:
        with pytest.raises(
            MaskError, match=rf"`h` must be a head of `fn`, (and|or)_masks\(.*\(0 <= h < {limit}\); got h = {limit}"
        ):
            from_mask_mod(fn, 8, h=limit)
        np.testing.assert_array_equal(np.asarray(from_mask_mod(fn, 8, h=limit - 1)), last)
    # a part the same for every head (or a plain callable) may attend at any head of a union: not refused
    for fn, want in [(or_masks(heads, one), full), (or_masks(heads, plain), causal), (and_masks(one, plain), causal)]:
        np.testing.assert_array_equal(np.asarray(from_mask_mod(fn, 8, h=5)), want)


def test_scattered_global_tokens_at_long_n_are_written_as_their_positions():
    """A fresh user: 256 global tokens spread over n = 2^20 wrote a table of 1,048,576 booleans (7.3 MB of source);
    the table is written from its True positions, and the exec'd source equals the mask on sampled entries and
    on rows of the IntervalMask (n = 2^16 here: 64 global tokens, a table of 65,536 booleans before)."""
    n, window = 1 << 16, 64
    positions = list(range(100, n, 1024))
    spec = f"global_sliding(n={n}, window={window}, global_positions={positions})"
    source = mask_mod_source(spec, framework="numpy")
    assert len(source) < 2_000 and "isin" in source
    fn = {}
    exec(source, fn)
    fn = fn["mask_mod"]
    rng = np.random.default_rng(0)
    q = np.concatenate([rng.integers(0, n, 2000), np.array(positions[:8]), rng.integers(0, n, 8)])
    k = np.concatenate([rng.integers(0, n, 2000), rng.integers(0, n, 8), np.array(positions[-8:])])
    near = rng.integers(-window - 2, window + 3, 2000)
    q, k = np.concatenate([q, q[:2000]]), np.concatenate([k, np.clip(q[:2000] + near, 0, n - 1)])
    is_global = np.zeros(n, bool)
    is_global[positions] = True
    want = (np.abs(q - k) <= window) | is_global[q] | is_global[k]  # Longformer's rule, independently
    np.testing.assert_array_equal(np.asarray(fn(0, 0, q, k)), want)
    jax_source = {}  # JAX's table by a scatter (jnp.isin compares every pair: n × positions booleans; a review)
    exec(mask_mod_source(spec, framework="jax"), jax_source)
    np.testing.assert_array_equal(np.asarray(jax_source["GLOBAL"]), is_global)
    np.testing.assert_array_equal(np.asarray(jax_source["mask_mod"](0, 0, jnp.asarray(q), jnp.asarray(k))), want)
    mask = from_spec(spec, form="intervals")
    for row in (0, positions[3], n - 1):
        dense_row = np.zeros(n, bool)
        for start, stop in mask.row(row):
            dense_row[start:stop] = True
        np.testing.assert_array_equal(np.asarray(fn(0, 0, row, np.arange(n))), dense_row)


def test_a_grid_beyond_the_mask_behind_a_mask_mod_is_refused():
    """A fresh user: ``from_mask_mod(to_mask_mod(m), n)`` with ``n`` past ``m``'s 34 positions returned rows read at
    ``q_idx % 34`` (query 34 attended to key 0), and ``and_masks`` of mask_mods of 6 and 4 positions filled rows 4–5
    from the wrapped table; now refused naming the size. A smaller grid (a crop) is the mask's top-left block."""
    spec = "document(segments=[1, 2, 3, 1, 1, 2, 5, 1, 1, 1, 2, 3, 1, 1, 1, 2, 1, 1, 4])"
    fn = to_mask_mod(spec)
    assert fn.n == 34
    with pytest.raises(MaskError, match=r"`n` must be at most 34, the positions of the mask behind `fn` \(to_mask_mod"):
        from_mask_mod(fn, 37)
    with pytest.raises(MaskError, match=r"`n_kv` must be at most 34.*got n_kv=40"):
        from_mask_mod(fn, 34, n_kv=40)
    with pytest.raises(MaskError, match=r"`n` must be at most 34"):
        from_mask_mod(fn, 37, form="intervals")
    both = and_masks(to_mask_mod("causal(n=6)"), to_mask_mod("document(segments=[2, 2])"))
    with pytest.raises(MaskError, match=r"`n` must be at most 4, .*document\(segments=\[2, 2\]"):
        from_mask_mod(both, 6)
    with pytest.raises(MaskError, match=r"`n` must be at most 4"):
        from_mask_mod(or_masks(to_mask_mod("causal(n=6)"), to_mask_mod("document(segments=[2, 2])")), 5)
    np.testing.assert_array_equal(np.asarray(from_mask_mod(fn, 20)), np.asarray(from_spec(spec))[:20, :20])
    np.testing.assert_array_equal(
        np.asarray(from_mask_mod(both, 4)), np.asarray(from_spec("causal(n=4) & document(segments=[2, 2])"))
    )
    with pytest.raises(MaskError, match=r"`n` must be at most 8, .*its closed form, built for that mask"):
        from_mask_mod(to_mask_mod("causal(n=8)"), 16)  # no tables: the message says what is wrong
    # a plain callable knows no size: evaluated on any grid
    assert np.asarray(from_mask_mod(lambda b, h, q, k: k <= q, 50)).sum() == 50 * 51 // 2


def test_a_rectangular_dense_refusal_names_both_sizes():
    from hassejax.errors import MemoryBudgetError

    with pytest.raises(MemoryBudgetError, match=r"^`n` and `n_kv`: from_mask_mod: a dense mask of shape \(10, 10+\)"):
        from_mask_mod(lambda b, h, q, k: k <= q, 10, n_kv=10**12)
