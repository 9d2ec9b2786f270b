"""hassejax.masks.structured, from_spec(form="intervals") and from_mask_mod(form="intervals").

Every structured constructor must give exactly the dense constructor's mask, in the normal
form of IntervalMask (compared with ``IntervalMask.from_dense`` of the dense mask, so the run
arrays themselves are checked, not only the entries).
"""

import doctest
import functools
import inspect
import itertools
import operator
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hassejax.masks as M
import hassejax.masks._convert as convert
from hassejax.errors import MaskError
from hassejax.masks import IntervalMask
from hassejax.masks import structured as S

EXAMPLES = 20

# The dense constructors compile once per n (static shapes); drawing n from a fixed set keeps
# the compile cache warm, while the other arguments (windows, prefixes, block sizes, ...)
# range freely, edge values included.
SIZES = (1, 2, 7, 16, 33, 64)


def assert_same(structured_mask, dense):
    dense = np.asarray(dense)
    assert isinstance(structured_mask, IntervalMask)
    assert structured_mask.shape == dense.shape
    np.testing.assert_array_equal(structured_mask.to_dense(), dense)
    want = IntervalMask.from_dense(dense)
    np.testing.assert_array_equal(structured_mask.starts, want.starts)
    np.testing.assert_array_equal(structured_mask.stops, want.stops)


sizes = st.sampled_from(SIZES)


@st.composite
def n_and_at_most_n(draw, low=0):
    n = draw(sizes)
    return n, draw(st.integers(low, n))


# ------------------------------------------------------------------ constructor by constructor


@given(n=sizes)
@settings(max_examples=EXAMPLES)
def test_causal_full(n):
    assert_same(S.causal(n), M.causal(n))
    assert_same(S.full(n), M.full(n))


@given(args=n_and_at_most_n())
@settings(max_examples=EXAMPLES)
def test_prefix_lm_and_attention_sinks(args):
    n, p = args
    assert_same(S.prefix_lm(n, p), M.prefix_lm(n, p))
    assert_same(S.attention_sinks(n, p), M.attention_sinks(n, p))


@given(n=sizes, left=st.integers(0, 70), right=st.integers(0, 70))
@settings(max_examples=EXAMPLES)
def test_sliding_window(n, left, right):
    assert_same(S.sliding_window(n, left, right), M.sliding_window(n, left, right))
    assert_same(S.sliding_window(n, left), M.sliding_window(n, left))


@given(args=n_and_at_most_n(low=1))
@settings(max_examples=EXAMPLES)
def test_block_causal_chunked_causal_block_diffusion(args):
    n, size = args  # partial last blocks whenever size does not divide n
    assert_same(S.block_causal(n, size), M.block_causal(n, size))
    assert_same(S.chunked_causal(n, size), M.chunked_causal(n, size))
    assert_same(S.block_diffusion(n, size), M.block_diffusion(n, size))


@given(n=sizes, window=st.integers(0, 70), dilation=st.integers(1, 70))
@settings(max_examples=EXAMPLES)
def test_dilated(n, window, dilation):
    assert_same(S.dilated(n, window, dilation), M.dilated(n, window, dilation))


@given(data=st.data(), n=sizes, window=st.integers(0, 70))
@settings(max_examples=EXAMPLES)
def test_global_sliding(data, n, window):
    if data.draw(st.booleans()):
        g = data.draw(st.lists(st.integers(0, n - 1), max_size=6))
    else:
        g = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
        g = np.asarray(g, dtype=bool)
    assert_same(S.global_sliding(n, window, g), M.global_sliding(n, window, g))


@given(data=st.data())
@settings(max_examples=EXAMPLES)
def test_natten_2d(data):
    h, w = data.draw(st.sampled_from([(1, 1), (1, 6), (3, 4), (5, 5), (7, 3)]))
    kh = data.draw(st.sampled_from(list(range(1, h + 1, 2))))
    kw = data.draw(st.sampled_from(list(range(1, w + 1, 2))))
    assert_same(S.natten_2d(h, w, kh, kw), M.natten_2d(h, w, kh, kw))


@st.composite
def parent_lists(draw):
    t = draw(st.sampled_from([1, 6, 24]))
    parents = [-1]
    for i in range(1, t):
        chain = draw(st.booleans())  # chains give long runs, random parents many runs
        parents.append(i - 1 if chain else draw(st.integers(-1, i - 1)))
    return parents


@given(parents=parent_lists(), prefix=st.sampled_from([0, 3]))
@settings(max_examples=EXAMPLES)
def test_tree_prefix(parents, prefix):
    assert_same(S.tree_prefix(parents, prefix), M.tree_prefix(parents, prefix))


@st.composite
def permutations(draw):
    n = draw(st.sampled_from([1, 5, 24]))
    z = draw(st.permutations(list(range(n))))
    return z, draw(st.integers(0, n))


@given(zc=permutations())
@settings(max_examples=EXAMPLES)
def test_xlnet_two_stream(zc):
    z, c = zc
    got, want = S.xlnet_two_stream(z, c), M.xlnet_two_stream(z, c)
    assert isinstance(got, S.TwoStreamIntervals) and got._fields == want._fields
    assert_same(got.content, want.content)
    assert_same(got.query, want.query)
    content, query = got  # unpacks like TwoStreamMasks
    assert content is got.content and query is got.query


def _inner_window(b, h, q, k):
    return (k <= q) & (q - k <= 1)


def _lengths(draw, n):
    """A random split of n positions into documents."""
    cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=5))) if n > 1 else []
    return np.diff([0, *cuts, n]).tolist()


@given(data=st.data(), n=st.sampled_from([1, 7, 16, 33]), order=st.randoms(use_true_random=False))
@settings(max_examples=EXAMPLES)
def test_document_every_option(data, n, order):
    lengths = _lengths(data.draw, n)
    assert_same(S.document(lengths), M.document(lengths))
    assert_same(S.document(lengths, "causal"), M.document(lengths, "causal"))
    assert_same(S.document(lengths, "full"), M.document(lengths, "full"))
    names = list(range(len(lengths)))
    order.shuffle(names)
    ids = np.repeat(names, lengths)
    assert_same(S.document(ids, kind="ids"), M.document(ids, kind="ids"))
    assert_same(S.document(list(ids), "full", kind="ids"), M.document(list(ids), "full", kind="ids"))


@pytest.mark.parametrize(
    "inner", [_inner_window, lambda b, h, q, k: ((q + k) % 3 == 0) | (k > q)], ids=["window", "scattered"]
)
def test_document_callable_inner(inner):
    for lengths in ([5, 1, 1], [7]):  # shorter documents cut the offset runs of the longest
        assert_same(S.document(lengths, inner), M.document(lengths, inner))
    ids = [3, 3, 0, 0, 0, 0, 0]
    assert_same(S.document(ids, inner, kind="ids"), M.document(ids, inner, kind="ids"))


EDGES = [  # sizes from SIZES (warm compile cache)
    ("sliding_window", (7, 0)),
    ("sliding_window", (7, 0, 3)),
    ("sliding_window", (1, 5, 5)),
    ("sliding_window", (7, 100, 100)),
    ("prefix_lm", (7, 0)),
    ("prefix_lm", (7, 7)),
    ("attention_sinks", (7, 0)),
    ("attention_sinks", (7, 7)),
    ("block_causal", (7, 3)),
    ("block_causal", (7, 7)),
    ("chunked_causal", (16, 5)),
    ("chunked_causal", (16, 1)),
    ("block_diffusion", (7, 3)),
    ("block_diffusion", (1, 1)),
    ("dilated", (16, 0, 3)),
    ("dilated", (16, 2, 3)),
    ("dilated", (16, 6, 1)),
    ("dilated", (16, 15, 4)),
    ("global_sliding", (16, 0, [])),
    ("global_sliding", (16, 1, [0, 1, 2, 15])),
    ("global_sliding", (16, 2, np.array([4, 4, 5]))),
    ("natten_2d", (3, 4, 3, 3)),
    ("natten_2d", (5, 5, 5, 3)),
    ("natten_2d", (1, 1, 1, 1)),
    ("tree_prefix", ([-1, -1, 1, 0, 3, 4], 0)),
    ("tree_prefix", ([-1], 3)),
    ("document", ([1],)),
]


@pytest.mark.parametrize("name, args", EDGES, ids=[f"{a}{b}" for a, b in EDGES])
def test_edge_cases(name, args):
    assert_same(getattr(S, name)(*args), getattr(M, name)(*args))


def test_xlnet_edge_cases_and_empty_query_row():
    for z, c in [
        ([0], 0),
        ([0], 1),
        ([3, 1, 0, 2, 4], 0),
        ([3, 1, 0, 2, 4], 5),
        (list(range(24)), 2),
        (list(range(23, -1, -1)), 0),
    ]:
        got, want = S.xlnet_two_stream(z, c), M.xlnet_two_stream(z, c)
        assert_same(got.content, want.content)
        assert_same(got.query, want.query)
    assert S.xlnet_two_stream([2, 0, 1]).query.row(2) == []  # predicted from nothing


# ------------------------------------------------------------------ same API as the dense constructors


def test_same_names_and_signatures_as_the_dense_registry():
    assert set(S.MASKS) == set(M.MASKS)
    for name, fn in S.MASKS.items():
        dense = inspect.signature(M.MASKS[name]).parameters
        mine = inspect.signature(fn).parameters
        assert [(p.name, p.kind, p.default) for p in mine.values()] == [
            (p.name, p.kind, p.default) for p in dense.values()
        ], name
    for name in S.__all__:
        if name in ("MASKS", "TwoStreamIntervals"):
            continue
        assert getattr(S, name) is getattr(S, name)
        dense = inspect.signature(getattr(M, name)).parameters
        assert list(inspect.signature(getattr(S, name)).parameters) == list(dense), name
        doc = getattr(S, name).__doc__
        for section in ("**Arguments:**", "**Returns:**", "**Raises:**", "**Example:**", "IntervalMask"):
            assert section in doc, (name, section)


BAD = [
    ("causal", (0,), {}),
    ("causal", (2.0,), {}),
    ("causal", (True,), {}),
    ("full", ("3",), {}),
    ("prefix_lm", (4, 5), {}),
    ("prefix_lm", (4, -1), {}),
    ("sliding_window", (4, -1), {}),
    ("sliding_window", (4, 1, 1.5), {}),
    ("attention_sinks", (4, 5), {}),
    ("attention_sinks", (4, -1), {}),
    ("attention_sinks", (0, 0), {}),
    ("block_causal", (4, 0), {}),
    ("block_causal", (4, 5), {}),
    ("chunked_causal", (4, 9), {}),
    ("document", ([2, 0, 1],), {}),
    ("document", ([2.0],), {}),
    ("document", ([],), {}),
    ("document", ([0, 1, 0],), {"kind": "ids"}),
    ("document", ([5, 5, 6, 6, 5],), {"kind": "ids"}),
    ("document", ([2, 2],), {"kind": "id"}),
    ("document", ([2, 2], "bidirectional"), {}),
    ("dilated", (8, 2, 0), {}),
    ("dilated", (8, -2, 1), {}),
    ("global_sliding", (8, 1, [8]), {}),
    ("global_sliding", (8, 1, [-1]), {}),
    ("global_sliding", (8, 1, [True, False]), {}),
    ("global_sliding", (8, 1, np.zeros((2, 4), bool)), {}),
    ("global_sliding", (8, 1, [1.0]), {}),
    ("natten_2d", (4, 4, 2, 1), {}),
    ("natten_2d", (4, 4, 5, 1), {}),
    ("natten_2d", (4, 0, 1, 1), {}),
    ("tree_prefix", ([0],), {"prefix": 1}),
    ("tree_prefix", ([-1, 1],), {"prefix": 1}),
    ("tree_prefix", ([-1, -2],), {"prefix": 0}),
    ("tree_prefix", ([-1],), {"prefix": -1}),
    ("block_diffusion", (4, 5), {}),
    ("xlnet_two_stream", ([1, 1],), {}),
    ("xlnet_two_stream", ([0, 2],), {}),
    ("xlnet_two_stream", ([1, 0],), {"context": 3}),
    ("xlnet_two_stream", ([[1, 0]],), {}),
]


@pytest.mark.parametrize("name, args, kwargs", BAD, ids=[f"{n}{a}{k}" for n, a, k in BAD])
def test_same_errors_as_the_dense_constructors(name, args, kwargs, no_typecheck):
    with pytest.raises(MaskError) as dense:
        getattr(M, name)(*args, **kwargs)
    with pytest.raises(MaskError) as mine:
        getattr(S, name)(*args, **kwargs)
    assert str(mine.value) == str(dense.value)


def test_traced_arguments_are_refused_with_a_message():
    with pytest.raises(MaskError, match="`n` must be an integer >= 1 known when the mask is built"):
        jax.jit(lambda n: S.causal(n))(3)
    with pytest.raises(MaskError, match="`segments` must be concrete: structured masks are built on the host"):
        jax.jit(lambda ids: S.document(ids, kind="ids"))(jnp.zeros(4, jnp.int32))


def test_structured_module_imports_no_jax():
    """Load hassejax.masks.structured with jax, jaxlib, equinox and jaxtyping made unimportable."""
    src = Path(S.__file__).resolve().parents[3]  # S is the package hassejax/masks/structured/
    code = textwrap.dedent(
        f"""
        import importlib.abc, sys, types
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("jax", "jaxlib", "equinox", "jaxtyping"):
                    raise ImportError("blocked " + name)
        sys.meta_path.insert(0, Block())
        sys.path.insert(0, {str(src)!r})
        import hassejax
        pkg = types.ModuleType("hassejax.masks")       # skip hassejax/masks/__init__.py (it imports JAX)
        pkg.__path__ = [{str(Path(S.__file__).parent.parent)!r}]
        sys.modules["hassejax.masks"] = pkg
        import hassejax.masks.structured as S
        m = S.sliding_window(10, 2) | S.attention_sinks(10, 2)
        assert m.row(9) == [(0, 2), (7, 10)], m.row(9)
        S.document([3, 2], "full"); S.xlnet_two_stream([1, 0, 2]); S.tree_prefix([-1, 0], 1)
        assert not any(k.split(".")[0] in ("jax", "jaxlib", "equinox", "jaxtyping") for k in sys.modules)
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_from_spec_and_from_mask_mod_docstring_examples_run():
    for fn in (M.from_spec, M.from_mask_mod):
        finder = doctest.DocTestFinder()
        runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
        tests = finder.find(inspect.unwrap(fn), fn.__name__, globs={})
        attempted = 0
        for t in tests:
            result = runner.run(t)
            attempted += result.attempted
            assert result.failed == 0, fn.__name__
        assert attempted > 0, fn.__name__


def test_attention_sinks_dense_rule():
    for n, num in [(1, 0), (1, 1), (6, 2), (6, 6)]:
        q, k = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        got = M.attention_sinks(n, num)
        assert got.dtype == jnp.bool_ and got.shape == (n, n)
        np.testing.assert_array_equal(np.asarray(got), (k < num) & (k <= q))
    assert M.MASKS["attention_sinks"] is M.attention_sinks
    np.testing.assert_array_equal(
        np.asarray(M.from_spec("attention_sinks(n=5, num=2)")), np.asarray(M.attention_sinks(5, 2))
    )


# ------------------------------------------------------------------ from_spec combinations


def _spec_part(draw, n):
    kind = draw(
        st.sampled_from(
            [
                "causal",
                "sliding_window",
                "attention_sinks",
                "prefix_lm",
                "block_causal",
                "chunked_causal",
                "document",
                "dilated",
                "global_sliding",
                "full",
            ]
        )
    )
    if kind in ("causal", "full"):
        return f"{kind}(n={n})"
    if kind == "sliding_window":
        return f"sliding_window(n={n}, left={draw(st.integers(0, n))}, right={draw(st.integers(0, 3))})"
    if kind in ("attention_sinks", "prefix_lm"):
        arg = "num" if kind == "attention_sinks" else "prefix"
        return f"{kind}(n={n}, {arg}={draw(st.integers(0, n))})"
    if kind in ("block_causal", "chunked_causal"):
        arg = "block_size" if kind == "block_causal" else "chunk"
        return f"{kind}(n={n}, {arg}={draw(st.integers(1, n))})"
    if kind == "document":
        lengths = _lengths(draw, n)
        inner = draw(st.sampled_from(["", ", inner='full'", ", inner='causal'"]))
        return f"document(segments={lengths}{inner})"
    if kind == "dilated":
        return f"dilated(n={n}, window={draw(st.integers(0, n))}, dilation={draw(st.integers(1, 4))})"
    return f"global_sliding(n={n}, window={draw(st.integers(0, 3))}, global_positions={draw(st.lists(st.integers(0, n - 1), max_size=3))})"


@st.composite
def combined_specs(draw):
    """A random |/& expression over 1-4 parts of one n, as text and as a function of the parts."""
    n = draw(st.sampled_from([1, 7, 16]))
    parts = [_spec_part(draw, n) for _ in range(draw(st.integers(1, 4)))]
    text, tree = parts[0], 0
    for i in range(1, len(parts)):
        op = draw(st.sampled_from(["|", "&"]))
        if draw(st.booleans()):
            text, tree = f"({text}) {op} {parts[i]}", (op, tree, i)
        else:
            text, tree = f"{parts[i]} {op} ({text})", (op, i, tree)
    return text, tree, parts


def _evaluate(tree, masks):
    if isinstance(tree, int):
        return masks[tree]
    op, a, b = tree
    return (operator.or_ if op == "|" else operator.and_)(_evaluate(a, masks), _evaluate(b, masks))


@given(spec=combined_specs())
@settings(max_examples=EXAMPLES)
def test_from_spec_combinations_equal_the_dense_union_and_intersection(spec):
    text, tree, parts = spec
    want = _evaluate(tree, [np.asarray(M.from_spec(p)) for p in parts])
    np.testing.assert_array_equal(np.asarray(M.from_spec(text)), want)
    assert_same(M.from_spec(text, form="intervals"), want)


def test_from_spec_precedence_and_documented_examples():
    a, b, c = "causal(n=12)", "sliding_window(n=12, left=2, right=2)", "attention_sinks(n=12, num=3)"
    dense = {p: np.asarray(M.from_spec(p)) for p in (a, b, c)}
    want = dense[a] | (dense[b] & dense[c])  # & binds tighter than |, as in Python
    assert_same(M.from_spec(f"{a} | {b} & {c}", form="intervals"), want)
    np.testing.assert_array_equal(np.asarray(M.from_spec(f"{a} | {b} & {c}")), want)
    assert_same(M.from_spec(f"({a} | {b}) & {c}", form="intervals"), (dense[a] | dense[b]) & dense[c])
    doc = M.from_spec("document(segments=[3, 5]) & sliding_window(n=8, left=2)")
    np.testing.assert_array_equal(np.asarray(doc), np.asarray(M.document([3, 5])) & np.asarray(M.sliding_window(8, 2)))
    two = M.from_spec("xlnet_two_stream([2, 0, 1], stream='query') | causal(3)", form="intervals")
    assert_same(two, np.asarray(M.xlnet_two_stream([2, 0, 1]).query) | np.asarray(M.causal(3)))


@pytest.mark.parametrize("form", ["dense", "intervals"])
@pytest.mark.parametrize(
    "text, fragments",
    [
        (
            "sliding_window(n=8, left=1) | attention_sinks(n=16, num=4)",
            [
                "a union (|) must have the same n",
                "`sliding_window(n=8, left=1)` has n = 8",
                "`attention_sinks(n=16, num=4)` has n = 16",
            ],
        ),
        (
            "(causal(4) | causal(4)) & full(5)",
            ["an intersection (&) must have the same n", "`causal(4) | causal(4)` has n = 4", "`full(5)` has n = 5"],
        ),
        ("block_diffusion(n=2, block_size=1) | causal(2)", ["has n = 4", "has n = 2"]),
        ("causal(4) or causal(4)", ["combine masks with | (union) and & (intersection), not `or`"]),
        ("causal(4) and causal(4)", ["not `and`"]),
        (
            "causal(4) ^ causal(4)",
            ["single call", "combined with | (union), & (intersection)", "`causal(4) ^ causal(4)`"],
        ),
        ("~causal(4)", ["single call"]),
        ("causal(4) | foo(4)", ["unknown mask 'foo'"]),
        ("causal(4) | causal", ["without arguments"]),
        ("causal(4) & sliding_window(n=4, left=x)", ["argument 'left' of sliding_window must be a literal"]),
        ("causal(4) | " * 400 + "causal(4)", []),
    ],
)
def test_from_spec_combination_errors(text, fragments, form):
    if not fragments:  # a long flat chain is fine
        assert_same(M.from_spec(text, form="intervals"), np.asarray(M.causal(4)))
        return
    with pytest.raises(MaskError) as info:
        M.from_spec(text, form=form)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_from_spec_form_argument():
    with pytest.raises(MaskError, match="`form` must be 'dense' .* or 'intervals' .*; got 'sparse' \\(str\\)"):
        M.from_spec("causal(3)", form="sparse")
    with pytest.raises(TypeError):
        M.from_spec("causal(3)", "intervals")  # keyword only
    assert isinstance(M.from_spec("causal(3)", form="intervals"), IntervalMask)
    assert isinstance(M.from_spec("causal(3)"), jax.Array)


# ------------------------------------------------------------------ from_mask_mod(form="intervals")

IDS = jnp.asarray(np.repeat([0, 1, 2, 3], [5, 9, 1, 15]), dtype=jnp.int32)  # n = 30 = N_GALLERY
N_GALLERY = 30


def _natten(b, h, q, k, height=5, width=6, kh=3, kw=3):
    cr = jnp.clip(q // width, kh // 2, height - 1 - kh // 2)
    cc = jnp.clip(q % width, kw // 2, width - 1 - kw // 2)
    return (jnp.abs(cr - k // width) <= kh // 2) & (jnp.abs(cc - k % width) <= kw // 2)


def _bd3lm(b, h, q, k, n=15, block=4):
    nq, nk = q < n, k < n
    bq, bk = (q % n) // block, (k % n) // block
    return ((bq == bk) & (nq == nk)) | ((bq > bk) & nq & ~nk) | ((bq >= bk) & ~nq & ~nk)


GALLERY = {
    "causal": lambda b, h, q, k: k <= q,
    "sliding_window": lambda b, h, q, k: (k >= q - 3) & (k <= q + 1),
    "sliding_window_with_sinks": lambda b, h, q, k: ((k <= q) & (q - k <= 4)) | ((k < 2) & (k <= q)),
    "prefix_lm": lambda b, h, q, k: (k < 7) | (k <= q),
    "document": lambda b, h, q, k: (IDS[q] == IDS[k]) & (k <= q),
    "dilated": lambda b, h, q, k: (jnp.abs(q - k) <= 8) & (jnp.abs(q - k) % 3 == 0),
    "global_sliding": lambda b, h, q, k: (jnp.abs(q - k) <= 1) | (q == 0) | (k == 0) | (k == 17),
    "natten_2d": _natten,
    "block_diffusion": _bd3lm,
    "chunked_causal": lambda b, h, q, k: (q // 7 == k // 7) & (k <= q),
    "empty_rows": lambda b, h, q, k: (q % 4 != 0) & (k < q),
    "scattered": lambda b, h, q, k: (q * 7 + k * 13) % 5 == 0,
}


@pytest.mark.parametrize("name", sorted(GALLERY))
def test_from_mask_mod_intervals_equals_dense_on_the_gallery(name):
    fn = GALLERY[name]
    n = N_GALLERY
    dense = np.asarray(M.from_mask_mod(fn, n))
    assert_same(M.from_mask_mod(fn, n, form="intervals"), dense)


def test_from_mask_mod_intervals_in_many_small_blocks_with_growing_runs(monkeypatch):
    # 3 rows a block: the run count grows down the rows, so the kernel is rebuilt with a
    # larger k mid-way and earlier blocks (fewer columns) are padded when assembled
    monkeypatch.setattr(convert, "_BLOCK_ENTRIES", 3 * N_GALLERY)
    fn = lambda b, h, q, k: (k < q) & (k % 2 == 0)
    dense = np.asarray(M.from_mask_mod(fn, N_GALLERY))
    got = M.from_mask_mod(fn, N_GALLERY, form="intervals")
    assert got.num_runs == 15
    assert_same(got, dense)
    g = lambda b, h, q, k: (q + k + b + h) % 2 == 0
    assert_same(M.from_mask_mod(g, 7, b=1, h=2, form="intervals"), np.asarray(M.from_mask_mod(g, 7, b=1, h=2)))


def test_from_mask_mod_auto(monkeypatch):
    causal = lambda b, h, q, k: k <= q
    checker = lambda b, h, q, k: (q + k) % 2 == 0
    small = M.from_mask_mod(causal, 16, form="auto")
    assert isinstance(small, jax.Array)  # small: the dense array, as before
    assert isinstance(M.from_mask_mod(causal, 4, n_kv=6, form="auto"), jax.Array)  # rectangular: dense
    monkeypatch.setattr(convert, "_AUTO_DENSE_ENTRIES", 0)  # every square grid counts as large
    large = M.from_mask_mod(causal, 16, form="auto")
    assert isinstance(large, IntervalMask)
    assert_same(large, np.asarray(M.causal(16)))
    fallback = M.from_mask_mod(checker, 16, form="auto")
    assert isinstance(fallback, jax.Array)  # truly unstructured: the dense array after all
    np.testing.assert_array_equal(np.asarray(fallback), np.asarray(M.from_mask_mod(checker, 16)))


def test_from_mask_mod_intervals_errors(no_typecheck):
    with pytest.raises(MaskError, match=r"`n_kv` must equal `n` \(or be None\) with form='intervals'.*n=3, n_kv=4"):
        M.from_mask_mod(lambda b, h, q, k: q >= k, 3, n_kv=4, form="intervals")
    with pytest.raises(MaskError, match="`form` must be 'dense', 'intervals' or 'auto'; got 'runs'"):
        M.from_mask_mod(lambda b, h, q, k: q >= k, 3, form="runs")
    bad = [
        (
            lambda b, h, q, k: (q >= k).astype(jnp.int32),
            "`fn` must return a Boolean (True = may attend); it returned dtype int32",
        ),
        (lambda b, h, q, k: jnp.stack([q >= k, q <= k]), "(per pair: shape (2,))"),
        (lambda b, h, q, k: True if q >= k else False, "`fn` raised TracerBoolConversionError"),
    ]
    for fn, fragment in bad:
        with pytest.raises(MaskError) as info:
            M.from_mask_mod(fn, 3, form="intervals")
        assert fragment in str(info.value)


# ------------------------------------------------------------------ long context


def test_one_million_tokens_window_with_sinks_builds_fast_without_a_dense_array():
    n, left, num = 1_048_576, 4096, 4
    t0 = time.perf_counter()
    m = M.from_spec(f"sliding_window(n={n}, left={left}) | attention_sinks(n={n}, num={num})", form="intervals")
    seconds = time.perf_counter() - t0
    assert seconds < 10, seconds  # about 1 s on a 2-core CPU; an n x n route would not finish
    assert isinstance(m, IntervalMask) and m.shape == (n, n) and m.num_runs == 2
    assert m.nbytes <= 2 * 2 * 8 * n  # two runs a row, nothing of size n^2
    assert m == S.sliding_window(n, left) | S.attention_sinks(n, num)
    rows = np.array([0, 1, 3, 4, 100, 4096, 4097, 4100, 4101, 5000, 500_000, n - 1])
    window = rows - np.maximum(rows - left, 0) + 1
    sinks_outside = np.minimum(np.minimum(num, rows + 1), np.maximum(rows - left, 0))
    np.testing.assert_array_equal(m.row_counts()[rows], window + sinks_outside)
    assert m.row(0) == [(0, 1)] and m.row(4100) == [(0, 4101)] and m.row(n - 1) == [(0, 4), (n - 1 - left, n)]
    q = np.array([5000, 5000, 5000, 5000, n - 1, n - 1])
    k = np.array([3, 4, 903, 904, n - 4097, n - 4098])
    np.testing.assert_array_equal(m.contains(q, k), [True, False, False, True, True, False])


def test_long_context_family_sizes_build_without_a_dense_array():
    n = 1 << 18
    for m, runs in [
        (S.document(np.full(256, n // 256)), 1),
        (S.chunked_causal(n, 8192), 1),
        (S.prefix_lm(n, 1024), 1),
        (S.dilated(n, 16, 4), 9),
        (S.natten_2d(1024, 1024, 7, 7), 7),
        (S.block_diffusion(n // 2, 1024), 2),
    ]:
        assert m.n >= n // 2 and m.num_runs == runs and m.nbytes <= 2 * 8 * m.n * runs
    assert S.chunked_causal(n, 8192).row(8192 + 5) == [(8192, 8198)]
    assert S.document(np.full(256, n // 256)).row(n - 1) == [(n - n // 256, n)]
    assert S.dilated(n, 16, 4).row(n - 1) == [
        (n - 17, n - 16),
        (n - 13, n - 12),
        (n - 9, n - 8),
        (n - 5, n - 4),
        (n - 1, n),
    ]


def test_random_permutation_xlnet_is_exact_and_reports_its_runs():
    rng = np.random.default_rng(0)
    z = rng.permutation(300)
    got, want = S.xlnet_two_stream(z, 30), M.xlnet_two_stream(z, 30)
    assert_same(got.content, want.content)
    assert_same(got.query, want.query)
    assert got.content.num_runs > 10  # a random order has many runs a row


def test_unions_and_intersections_of_structured_masks_match_dense():
    n = 33
    pairs = [
        (S.document([10, 20, 3]), M.document([10, 20, 3])),
        (S.sliding_window(n, 5, 2), M.sliding_window(n, 5, 2)),
        (S.attention_sinks(n, 3), M.attention_sinks(n, 3)),
        (S.dilated(n, 9, 3), M.dilated(n, 9, 3)),
        (S.global_sliding(n, 2, [0, 20]), M.global_sliding(n, 2, [0, 20])),
    ]
    structured_masks = [p[0] for p in pairs]
    dense = [np.asarray(p[1]) for p in pairs]
    assert_same(functools.reduce(operator.or_, structured_masks), functools.reduce(operator.or_, dense))
    for (a, da), (b, db) in itertools.pairwise(pairs):
        assert_same(a & b, np.asarray(da) & np.asarray(db))


def test_equality_with_a_dense_array_compares_the_masks():
    """Review: ``IntervalMask == array`` was ``False`` (Python's identity fallback) even for the same mask, which read as
    "the masks differ". Now it compares whole masks, either way round, with a NumPy or a JAX array."""
    iv = S.sliding_window(9, 2, 1)
    dense = np.asarray(M.sliding_window(9, 2, 1))
    assert iv == dense and dense == iv and iv == jnp.asarray(dense)
    assert (iv != dense) is False  # the reflected != too
    flipped = dense.copy()
    flipped[4, 0] = True
    assert iv != flipped and (iv == flipped) is False
    assert iv != np.ones((8, 8), bool) and iv != 3
    # another dtype is unequal, never an error (diff review: `in` and `list.index` raised)
    ints = dense.astype(int)
    assert iv != dense.astype(float) and ints not in [iv] and [iv, ints].index(ints) == 1
    # under jit: a clear TypeError, not Python's silent False (both orders); to_dense() compares there
    for compare in (lambda d: iv == d, lambda d: d == iv):
        with pytest.raises(TypeError, match="cannot be compared with a traced array"):
            jax.jit(compare)(jnp.asarray(dense))
    assert bool(jax.jit(lambda d: jnp.all(d == iv.to_dense()))(jnp.asarray(dense)))


@given(
    n=st.integers(1, 40),
    block=st.integers(1, 120),
    seed=st.integers(0, 2**32 - 1),
)
@settings(max_examples=60)
def test_to_dense_in_row_blocks_equals_the_runs_entry_by_entry(n, block, seed):
    """A fresh-user review: ``to_dense`` held three ``n²`` arrays at once (3.0× ``n²`` peak against an ``n²`` check).
    Now rows are filled a block at a time; any block size gives the mask its runs say, entry by entry."""
    import hassejax.masks._intervals as intervals

    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, 4))
    a, b = rng.integers(0, n + 1, (n, k)), rng.integers(0, n + 1, (n, k))
    m = IntervalMask.from_runs(np.minimum(a, b), np.maximum(a, b), n)
    want = np.zeros((n, n), bool)
    for q in range(n):
        for s, e in zip(np.minimum(a, b)[q], np.maximum(a, b)[q]):
            want[q, s:e] = True
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(intervals, "DENSE_BLOCK_BYTES", block)
        np.testing.assert_array_equal(m.to_dense(), want)
        np.testing.assert_array_equal(np.asarray(m, dtype=np.int32), want.astype(np.int32))


def test_to_dense_checks_the_result_and_one_block_and_a_cast_its_copy(monkeypatch):
    """The memory check counts what is allocated: the ``n²`` result plus one block of temporaries, and for
    ``np.asarray(mask, dtype)`` the copy in that dtype as well (review: the peak was 3× the checked ``n²``)."""
    import hassejax.masks._runs as runs
    from hassejax.errors import MemoryBudgetError

    n = 8192  # 64 MiB as bool
    m = S.sliding_window(n, 3)
    monkeypatch.setattr(runs, "host_memory_bytes", lambda: int((n * n + (1 << 26)) / 0.8) + 1)
    assert m.to_dense().sum() == m.row_counts().sum()  # the result and one block fit
    with pytest.raises(MemoryBudgetError, match=r"`mask`: a dense \(8192, 8192\) mask as float32"):
        np.asarray(m, dtype=np.float32)  # the float32 copy (4 n² more) does not
    monkeypatch.setattr(runs, "host_memory_bytes", lambda: int(n * n / 0.8))
    with pytest.raises(MemoryBudgetError, match=r"`mask`: a dense \(8192, 8192\) Boolean mask"):
        m.to_dense()  # the result alone fits, not with its block


def test_memory_refusals_of_the_interval_constructors_name_their_arguments(monkeypatch):
    """A fresh-user review: the refusals named the function (`xlnet_two_stream`: ... 90001 rows) where the
    README promises the argument; now the arguments that set the size, and the rows counted "in all"."""
    import hassejax.masks._runs as runs
    from hassejax.errors import MemoryBudgetError

    monkeypatch.setattr(runs, "host_memory_bytes", lambda: 1 << 24)  # 16 MiB (requests under 16 MiB pass unchecked)
    m = 1_000_000  # 48 bytes a row and run: 48 MB
    cases = [
        (lambda: S.causal(m), r"^`n`: the interval form of causal \(1000000 rows in all"),
        # a review: "600001 rows" for two streams of 200000 rows each, the work table uncounted in the message
        (
            lambda: S.xlnet_two_stream(np.arange(m), context=10),
            r"^`permutation`: the interval form of xlnet_two_stream \(2999991 rows in all: 999991 prefix sets "
            r"\(n \+ 1 - context\) and the two streams' 1000000 rows each,",
        ),
        (lambda: S.document([m // 2, m // 2]), r"^`segments`: the interval form of document"),
        (lambda: S.natten_2d(1000, 1000, 3, 3), r"^`height`, `width`(, `kernel_h`)?: the interval form of natten_2d"),
        # a fresh user: a grid of 10^12 cells met NumPy's MemoryError on the positions, before the check
        (lambda: S.natten_2d(10**6, 10**6, 3, 3), r"^`height`, `width`, `kernel_h`: the interval form of natten_2d"),
        (lambda: S.tree_prefix(np.arange(-1, m - 1), 0), r"^`parents`: the interval form of tree_prefix"),
    ]
    for build, message in cases:
        with pytest.raises(MemoryBudgetError, match=message):
            build()


def test_dilated_refusal_points_to_its_bands_which_answer_for_it(monkeypatch):
    """A fresh user: a dilated window too large for its interval form was refused, and the dense route's refusal
    then pointed back to the structured constructor. The refusal names the band whose analysis answers instead."""
    import hassejax.masks._runs as runs
    from hassejax.errors import MemoryBudgetError
    from hassejax.order import flow_summary

    monkeypatch.setattr(runs, "host_memory_bytes", lambda: 1 << 24)  # 16 MiB
    with pytest.raises(MemoryBudgetError, match=r"^`n`: the interval form of dilated .*sliding_window\(250000, 2, 2\)"):
        S.dilated(1_000_000, 9, 4)  # 5 runs a row: 240 MB
    monkeypatch.undo()
    for n, window, d in [(103, 9, 4), (96, 9, 4), (50, 2, 3), (13, 2, 3), (40, 5, 5)]:
        h, m = -(-n // d), window // d
        whole, band = flow_summary(S.dilated(n, window, d)), flow_summary(S.sliding_window(h, m, m))
        assert (whole.convergence_depth, whole.depth) == (band.convergence_depth, band.depth)
        # the classes and the width: sums over the residue classes of their bands (of h or h - 1 positions)
        bands = [flow_summary(S.sliding_window(len(range(c, n, d)), m, m)) for c in range(d)]
        assert whole.num_classes == sum(b.num_classes for b in bands)
        assert whole.width == sum(b.width for b in bands)


def test_from_dense_refuses_a_view_too_large_to_scan_before_reading_it(monkeypatch):
    """``IntervalMask.from_dense`` had no size guard: ``np.broadcast_to(np.True_, (300000, 300000))`` (one byte of
    memory) was scanned entry by entry for minutes. A view that repeats its entries is now refused before any entry
    is read when a dense mask of its ``n`` would not fit, naming the argument; an array that holds its entries (in
    memory already) and a view that fits are read as before."""
    import hassejax.masks._runs as runs
    from hassejax.errors import MemoryBudgetError

    n = 4500  # 20 MB as a dense bool mask
    monkeypatch.setattr(runs, "host_memory_bytes", lambda: 20 << 20)  # 20 MiB free: 80 % of it is 16 MiB
    for view in (np.broadcast_to(np.True_, (n, n)), np.broadcast_to(np.arange(n) % 3 == 0, (n, n))):
        with pytest.raises(MemoryBudgetError, match=r"^`m`: .*broadcast or strided view.*IntervalMask\.from_runs"):
            IntervalMask.from_dense(view, name="m")
    q = np.arange(n)
    dense = np.tril(np.ones((n, n), bool))  # held in memory: scanned whatever the budget, also as views of it
    runs_of = {
        "tril": (0 * q, q + 1),
        "T": (q, n + 0 * q),
        "rows reversed": (0 * q, n - q),
        "keys reversed": (n - 1 - q, n + 0 * q),
    }
    for held, key in zip((dense, dense.T, dense[::-1], dense[:, ::-1]), runs_of):
        assert IntervalMask.from_dense(held) == IntervalMask.from_runs(*runs_of[key], n), key
    small = np.broadcast_to(np.arange(300) % 3 == 0, (300, 300))  # a view that fits: read as before
    assert IntervalMask.from_dense(small) == IntervalMask.from_dense(np.array(small))

    monkeypatch.setattr(runs, "host_memory_bytes", lambda: 64 << 30)  # 64 GiB free: the 84 GiB n² does not fit
    start = time.perf_counter()
    with pytest.raises(MemoryBudgetError, match=r"^`mask`: from_dense's scan of all 300000 × 300000 entries"):
        IntervalMask.from_dense(np.broadcast_to(np.True_, (300_000, 300_000)))
    assert time.perf_counter() - start < 5  # refused up front, not after a scan
