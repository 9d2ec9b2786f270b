"""The MASKS registry and from_spec: every registered name, literal-only parsing."""

import inspect

import numpy as np
import pytest

import hassejax.masks as M
from hassejax.errors import MaskError

# one spec per registered mask, next to the direct call it must equal
CASES = [
    ("causal(8)", lambda: M.causal(8)),
    ("full(n=3)", lambda: M.full(3)),
    ("prefix_lm(6, prefix=2)", lambda: M.prefix_lm(6, 2)),
    ("sliding_window(n=16, left=2)", lambda: M.sliding_window(16, 2)),
    ("sliding_window(9, 1, 2)", lambda: M.sliding_window(9, 1, 2)),
    ("attention_sinks(n=6, num=2)", lambda: M.attention_sinks(6, 2)),
    ("block_causal(n=6, block_size=4)", lambda: M.block_causal(6, 4)),
    ("chunked_causal(n=7, chunk=3)", lambda: M.chunked_causal(7, 3)),
    ("document(segments=[3, 2])", lambda: M.document([3, 2])),
    ("document([3, 2], inner='full')", lambda: M.document([3, 2], "full")),
    ("document(segments=(4, 4, 5, 5, 5), kind='ids')", lambda: M.document([4, 4, 5, 5, 5], kind="ids")),
    ("dilated(n=9, window=4, dilation=2)", lambda: M.dilated(9, 4, 2)),
    ("global_sliding(n=8, window=1, global_positions=[0, 5])", lambda: M.global_sliding(8, 1, [0, 5])),
    ("natten_2d(height=3, width=4, kernel_h=3, kernel_w=1)", lambda: M.natten_2d(3, 4, 3, 1)),
    ("tree_prefix(parents=[-1, 0, 0, 1], prefix=2)", lambda: M.tree_prefix([-1, 0, 0, 1], 2)),
    ("block_diffusion(n=4, block_size=2)", lambda: M.block_diffusion(4, 2)),
    ("block_diffusion(n=5, block_size=2)", lambda: M.block_diffusion(5, 2)),
    ("xlnet_two_stream(permutation=[2, 0, 1], stream='query')", lambda: M.xlnet_two_stream([2, 0, 1]).query),
    ("xlnet_two_stream([2, 0, 1, 3], 1, stream='content')", lambda: M.xlnet_two_stream([2, 0, 1, 3], 1).content),
]


@pytest.mark.parametrize("text, direct", CASES, ids=[c[0] for c in CASES])
def test_from_spec_equals_direct_call(text, direct):
    out = M.from_spec(text)
    want = np.asarray(direct())
    assert out.dtype == np.bool_ and out.shape == want.shape and out.shape[0] == out.shape[1]
    np.testing.assert_array_equal(np.asarray(out), want)


def test_every_registered_mask_has_a_case_and_whitespace_is_ignored():
    covered = {text.split("(")[0] for text, _ in CASES}
    assert covered == set(M.MASKS)
    np.testing.assert_array_equal(np.asarray(M.from_spec("  causal( n = 4 )  ")), np.asarray(M.causal(4)))


def test_registry_values_are_the_public_constructors():
    for name, fn in M.MASKS.items():
        if name == "xlnet_two_stream":
            assert "stream" in inspect.signature(fn).parameters
        else:
            assert fn is getattr(M, name)
    assert "causal_bottom_right" not in M.MASKS  # rectangular: not closable


@pytest.mark.parametrize(
    "text, fragments",
    [
        ("foo(3)", ["unknown mask 'foo'", "known masks: attention_sinks, block_causal, block_diffusion, causal"]),
        ("foo", ["unknown mask 'foo'", "causal"]),
        (  # the command line takes it; from_spec says where it is built (it said "unknown mask", a review)
            "causal(n=10) | butterfly_mask(n=4)",  # valid for mask_rule (10 slots)
            ["'butterfly_mask' is a mask derived from a task family", "hassejax.kernels.mask_rule("],
        ),
        (  # a bare derived name was an "unknown mask" (a new user)
            "butterfly_mask",
            ["'butterfly_mask' is a mask derived from a task family", "hassejax.kernels.mask_rule"],
        ),
        ("causal", ["without arguments", "causal(n)"]),
        ("causal(3", ["not valid syntax"]),
        ("causal(3) + full(3)", ["single call"]),
        ("os.system('ls')", ["single call"]),
        ("__import__('os')", ["unknown mask '__import__'"]),
        ("causal(n=__import__('os'))", ["argument 'n' of causal must be a literal", "__import__('os')"]),
        ("causal(n=x)", ["argument 'n' of causal must be a literal", "`x`"]),
        ("causal(2 * 4)", ["positional argument 0 of causal must be a literal"]),
        ("causal(*[3])", ["*-unpacking is not allowed"]),
        ("causal(**{'n': 3})", ["**-unpacking is not allowed"]),
        ("sliding_window(n=8, width=2)", ["unknown argument 'width' for sliding_window", "n, left, right"]),
        ("sliding_window(n=8)", ["missing a required argument: 'left'", "sliding_window(n, left, right=0)"]),
        ("causal(3, 4)", ["too many positional arguments", "causal(n)"]),
        ("causal(n=3, n=4)", ["argument 'n' given twice"]),
        ("causal(n=2.5)", ["`n` must be an integer >= 1; got 2.5 (float)"]),
        ("block_diffusion(n=4, block_size=5)", ["`block_size` must be an integer in [1, n=4]; got 5"]),
        ("xlnet_two_stream(permutation=[1, 0])", ["missing a required argument: 'stream'"]),
        ("xlnet_two_stream(permutation=[1, 0], stream='key')", ["`stream` must be 'content' or 'query'", "'key'"]),
        (
            "xlnet_two_stream(permutation=[1, 1], stream='query')",
            ["`permutation` must be a permutation of 0..1", "1 appears 2 times", "0 is missing"],
        ),
        # a bad value names the spec, and in a combined spec the part it is in
        ("causal(n=2.5)", ["mask spec 'causal(n=2.5)': `n` must be"]),
        (
            "causal(n=8) | sliding_window(n=8, left=-1)",
            ["mask spec 'causal(n=8) | sliding_window(n=8, left=-1)', in `sliding_window(n=8, left=-1)`: `left` must"],
        ),
    ],
)
def test_from_spec_errors(text, fragments):
    with pytest.raises(MaskError) as info:
        M.from_spec(text)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_from_spec_rejects_non_string():
    with pytest.raises(MaskError, match=r"`text` must be a mask spec string like 'causal\(8\)'; got 8 \(int\)"):
        M.from_spec(8)
