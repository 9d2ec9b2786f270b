"""Every error path of hassejax.masks: exception type and a message naming argument, expectation and value."""

import re

import jax.numpy as jnp
import numpy as np
import pytest

import hassejax.masks as M
import hassejax.order as O
from hassejax.errors import MaskError
from hassejax.order.growth import flow_growth

CASES = [
    # sizes: non-int, bool, float, string, < 1
    (lambda: M.causal(2.5), "`n` must be an integer >= 1; got 2.5 (float)"),
    (lambda: M.causal(4.0), "`n` must be an integer >= 1; got 4.0 (float)"),
    (lambda: M.causal(True), "`n` must be an integer >= 1; got True (bool) (a bool is not accepted as a number here)"),
    (lambda: M.full("8"), "`n` must be an integer >= 1; got '8' (str)"),
    (lambda: M.causal(0), "`n` must be an integer >= 1; got 0"),
    (lambda: M.full(-3), "`n` must be an integer >= 1; got -3"),
    (lambda: M.causal_bottom_right(2, 0), "`n_k` must be an integer >= 1; got 0"),
    (lambda: M.causal_bottom_right(None, 2), "`n_q` must be an integer >= 1; got None (NoneType)"),
    # parameters in range
    (lambda: M.prefix_lm(4, 5), "`prefix` must be an integer in [0, n=4]; got 5"),
    (lambda: M.prefix_lm(4, -1), "`prefix` must be an integer >= 0; got -1"),
    (lambda: M.block_causal(6, 0), "`block_size` must be an integer >= 1; got 0"),
    (lambda: M.block_causal(6, 7), "`block_size` must be an integer in [1, n=6]; got 7"),
    (lambda: M.block_causal(6, 1.5), "`block_size` must be an integer >= 1; got 1.5 (float)"),
    (lambda: M.chunked_causal(5, 9), "`chunk` must be an integer in [1, n=5]; got 9"),
    (lambda: M.block_diffusion(4, 5), "`block_size` must be an integer in [1, n=4]; got 5"),
    (lambda: M.sliding_window(5, -1), "`left` must be an integer >= 0; got -1"),
    (lambda: M.sliding_window(5, 1, right=0.5), "`right` must be an integer >= 0; got 0.5 (float)"),
    (lambda: M.dilated(5, 2, 0), "`dilation` must be an integer >= 1; got 0"),
    (lambda: M.dilated(5, -2, 1), "`window` must be an integer >= 0; got -2"),
    # NATTEN kernels
    (lambda: M.natten_2d(3, 4, 2, 3), "`kernel_h` must be odd"),
    (lambda: M.natten_2d(3, 4, 3, 5), "`kernel_w` must be an integer in [1, width=4]; got 5"),
    (lambda: M.natten_2d(0, 4, 1, 1), "`height` must be an integer >= 1; got 0"),
    (lambda: M.natten_2d(3, 4, 0, 1), "`kernel_h` must be an integer >= 1; got 0"),
    # global tokens
    (lambda: M.global_sliding(5, 1, [0, 5]), "`global_positions` must hold indices in [0, n-1] = [0, 4]"),
    (lambda: M.global_sliding(5, 1, [-1]), "got out-of-range index -1 in [-1]"),
    (
        lambda: M.global_sliding(5, 1, [True, False]),
        "`global_positions` given as Boolean flags must have shape (n,) = (5,); got shape (2,)",
    ),
    (lambda: M.global_sliding(3, 1, np.ones((3, 3), bool)), "`global_positions` given as Boolean flags must be 1-D"),
    (
        lambda: M.global_sliding(5, 1, [0.5]),
        "`global_positions` must be a sequence of integers; entry 0 is 0.5 (float)",
    ),
    (
        lambda: M.global_sliding(5, 1, np.array([0.0])),
        "`global_positions` must have an integer dtype; got dtype float64",
    ),
    # documents
    (
        lambda: M.document([3, 0, 2]),
        "`segments` (document lengths) must all be integers >= 1; entry 1 is 0 in [3, 0, 2]. Per-position document "
        "ids go with kind='ids'",
    ),
    (lambda: M.document([]), "`segments` must have at least one entry; got an empty vector"),
    (lambda: M.document([1.5]), "`segments` must be a sequence of integers; entry 0 is 1.5 (float)"),
    (lambda: M.document([[1, 2]]), "`segments` must be a sequence of integers; entry 0 is [1, 2] (list)"),
    (lambda: M.document(np.ones((2, 2), int)), "`segments` must be a 1-D vector of integers; got shape (2, 2)"),
    (lambda: M.document("abc"), "`segments` must be a sequence or 1-D array of integers; got 'abc' (str)"),
    (lambda: M.document([0, 1, 0], kind="ids"), "id 0 reappears at position 2 after another document: [0, 1, 0]"),
    (lambda: M.document([2, 2], kind="id"), "`kind` must be 'lengths' or 'ids'; got 'id' (str)"),
    (
        lambda: M.document([2, 2], inner="bidirectional"),
        "`inner` must be None (causal), one of ['causal', 'full'], or a mask_mod callable",
    ),
    (
        lambda: M.document([2, 2], inner=lambda b, h, q, k: q - k),
        "`inner` must return a Boolean (True = may attend); it returned dtype int32",
    ),
    # trees
    (lambda: M.tree_prefix([0, 0], 1), "got parents[0] = 0 in [0, 0]"),
    (
        lambda: M.tree_prefix([-1, 1], 1),
        "parents[i] is -1 (a root) or an index in [0, i-1]; got parents[1] = 1 in [-1, 1]",
    ),
    (lambda: M.tree_prefix([-1, 0, -2], 0), "got parents[2] = -2"),
    (lambda: M.tree_prefix([-1, 0], -1), "`prefix` must be an integer >= 0; got -1"),
    (lambda: M.tree_prefix([], 2), "`parents` must have at least one entry"),
    # XLNet
    (
        lambda: M.xlnet_two_stream([0, 0, 2]),
        "`permutation` must be a permutation of 0..2 (each index exactly once); got [0, 0, 2]: 0 appears 2 times, 1 is missing.",
    ),
    (lambda: M.xlnet_two_stream([0, 3]), "got [0, 3]: out-of-range value 3, 1 is missing."),
    (lambda: M.xlnet_two_stream([1, 0], context=3), "`context` must be an integer in [0, n=2]; got 3"),
    (lambda: M.xlnet_two_stream([True, False]), "`permutation` must be a sequence of integers; entry 0 is True (bool)"),
    # from_mask_mod
    (lambda: M.from_mask_mod("causal", 3), "`fn` must be a callable (b, h, q_idx, kv_idx) -> bool; got 'causal' (str)"),
    (
        lambda: M.from_mask_mod(lambda b, h, q, k: (q >= k).astype(jnp.int32), 3),
        "`fn` must return a Boolean (True = may attend); it returned dtype int32",
    ),
    (
        lambda: M.from_mask_mod(lambda b, h, q, k: jnp.stack([q >= k, q <= k]), 3),
        "gave shape (3, 3, 2) instead of (3, 3) (per pair: shape (2,))",
    ),
    (
        lambda: M.from_mask_mod(lambda b, h, q, k: True if q >= k else False, 3),
        "`fn` raised TracerBoolConversionError when evaluated on traced int32 scalar indices",
    ),
    (
        lambda: M.from_mask_mod(lambda b, h, q, k: True if q >= k else False, 3),
        "Write it with jnp operations on the indices (jnp.where / & / | instead of Python if",
    ),
    (lambda: M.from_mask_mod(lambda b, h, q, k: [True, False, True][q], 3), "jnp arrays instead of Python lists"),
    # the arity, None and other errors: their own messages, not the jnp advice (a fresh user)
    (lambda: M.from_mask_mod(lambda b, h, q: q >= 0, 3), "`fn` must take four positional arguments (b, h, q_idx"),
    (lambda: M.from_mask_mod(lambda b, h, q, k: None, 3), "`fn` returned None; it must return a Boolean"),
    (lambda: M.from_mask_mod(lambda b, h, q, k: 1 / 0, 3), "under jax.vmap: division by zero."),
    (lambda: M.from_mask_mod(lambda b, h, q, k: q >= k, 3, n_kv=0), "`n_kv` must be an integer >= 1; got 0"),
    (lambda: M.from_mask_mod(lambda b, h, q, k: q >= k, 3, b=0.5), "`b` must be an integer; got 0.5 (float)"),
    # from_additive_bias
    (
        lambda: M.from_additive_bias(np.zeros((2, 2), bool)),
        "`bias` must have a real (float or integer) dtype; got dtype bool. A Boolean array is already a mask",
    ),
    (
        lambda: M.from_additive_bias(np.zeros((2, 2), np.complex64)),
        "`bias` must have a real (float or integer) dtype; got dtype complex64",
    ),
    (
        lambda: M.from_additive_bias(np.zeros(3)),
        "`bias` must have rank >= 2, shape (..., n_q, n_k); got shape (3,) (rank 1)",
    ),
    (
        lambda: M.from_additive_bias(np.zeros((2, 0))),
        "`bias` must have at least one query and one key; got shape (2, 0)",
    ),
    (lambda: M.from_additive_bias("0"), "`bias` must be an array of shape (..., n_q, n_k); got '0' (str)"),
    (
        lambda: M.from_additive_bias(np.array([[0.0, -1e9], [0.0, 0.0]])),
        "`bias` entries must be exactly 0 (may attend) or -inf (blocked); got 1 such entry, first at index (0, 1): -1000000000.0. For a finite blocking value (e.g. finfo.min or -1e9) pass `threshold`.",
    ),
    (
        lambda: M.from_additive_bias(np.array([[0.0, 0.5], [np.nan, np.inf]])),
        "got 3 such entries, first at index (0, 1): 0.5",
    ),
    (
        lambda: M.from_additive_bias(np.array([[0.0, -3.0]]), threshold=-10.0),
        "`bias` entries must be exactly 0 or <= threshold=-10.0; got 1 such entry, first at index (0, 1): -3.0",
    ),
    (
        lambda: M.from_additive_bias(np.zeros((2, 2)), threshold=0),
        "`threshold` must be None or a negative number (entries <= it are blocked); got 0.0",
    ),
    (
        lambda: M.from_additive_bias(np.zeros((2, 2)), threshold=True),
        "`threshold` must be None or a negative number (entries <= it are blocked); got True (bool)",
    ),
    # from_blocked
    (
        lambda: M.from_blocked(np.array([[0, 2], [1, 0]])),
        "`blocked` must hold only 0 (may attend) and 1 (blocked); got 1 such entry, first at index (0, 1): 2",
    ),
    (lambda: M.from_blocked(np.array([[0.0, -np.inf]])), "first at index (0, 1): -inf"),
    (
        lambda: M.from_blocked(np.zeros(4, int)),
        "A key-padding vector `pad` of shape (n_k,) is a mask after broadcasting",
    ),
    (
        lambda: M.from_blocked(np.zeros((2, 2), np.complex64)),
        "`blocked` must have a bool, integer or float dtype holding 0/1; got dtype complex64",
    ),
    # combinators
    (lambda: M.and_masks(), "and_masks needs at least one mask; got none"),
    (
        lambda: M.or_masks(M.causal(2), M.causal(3)),
        "or_masks: every mask must have the shape of masks[0], (2, 2); masks[1] has shape (3, 3)",
    ),
    (
        lambda: M.and_masks(M.causal(2), np.ones((2, 2), int)),
        "`masks[1]` must have dtype bool (True = may attend); got dtype int",
    ),
    (  # nested lists have no astype (a fresh user): the advice fits what was passed
        lambda: O.reachability([[1, 0], [1, 1]]),
        "`mask` must have dtype bool (True = may attend); got dtype int64. Convert explicitly: "
        "`numpy.asarray(mask, dtype=bool)`",
    ),
    *[  # the order functions take nested lists (their annotations too: the suite's type checks refused these)
        (
            lambda f=f: f([[1, 0], [1, 1]]),
            "`mask` must have dtype bool (True = may attend); got dtype int64. Convert "
            "explicitly: `numpy.asarray(mask, dtype=bool)`",
        )
        for f in (O.convergence_depth, O.flow_summary, O.HasseDiagram.from_mask, O.layer_adjacency, flow_growth)
    ],
    # IntervalMask.from_dense: the checks of the order functions (a fresh user: NumPy's own error for a ragged list,
    # "got shape ()" for None or a spec string)
    (
        lambda: M.IntervalMask.from_dense([[True, False], [True]]),
        "`mask` must be a Boolean array of shape (n, n); got nested lists that are not rectangular",
    ),
    (
        lambda: M.IntervalMask.from_dense(None),
        "`mask` must be a Boolean array of shape (n, n); got an object of type NoneType.",
    ),
    (
        lambda: M.IntervalMask.from_dense("causal(n=4)"),
        "got an object of type str (a mask spec: build the mask with hassejax.masks.from_spec first)",
    ),
    (
        lambda: O.heads_union([[[1, 0], [1, 1]]], head_axis=0),
        "`mask` must have dtype bool (True = may attend); got dtype int64. Convert explicitly, e.g. "
        "`numpy.asarray(mask, dtype=bool)`",
    ),
    (
        lambda: O.reachability(layer_masks=[[[True, False], [True, True]], [[1, 0], [1, 1]]]),
        "`layer_masks[1]` must have dtype bool (True = may attend); got dtype int64. Convert explicitly: "
        "`numpy.asarray(layer_masks[1], dtype=bool)`",
    ),
    (
        lambda: M.and_masks(np.ones(2, bool)),
        "`masks[0]` must have rank 2 (n, n) or rank >= 2 (..., n, n); got shape (2,)",
    ),
]


@pytest.mark.parametrize("call, message", CASES, ids=[c[1][:60] for c in CASES])
def test_error_message(call, message):
    with pytest.raises(MaskError) as info:
        call()
    assert message in str(info.value), str(info.value)


def test_every_message_names_an_argument_or_the_function():
    for call, _ in CASES:
        with pytest.raises(MaskError) as info:
            call()
        text = str(info.value)
        assert re.search(r"`\w+(\[\d+\])?`", text) or text.startswith(("and_masks", "or_masks")), text


def test_mask_error_is_a_value_error():
    with pytest.raises(ValueError):
        M.causal(0)


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: M.sliding_window(n=8, window=2),
            "sliding_window: unknown argument 'window'; its arguments are n, left, right "
            "(sliding_window(n, left, right=0)).",
        ),
        (
            lambda: M.structured.xlnet_two_stream(permutation=[1, 0], stream="query"),
            "xlnet_two_stream: unknown argument 'stream'; its arguments are permutation, context "
            "(xlnet_two_stream(permutation, context=0)).",
        ),
        (lambda: M.causal(), "causal: missing a required argument: 'n' (causal(n))."),
        (
            lambda: M.from_spec("causal(3)", "intervals"),
            "from_spec: too many positional arguments (from_spec(text, *, form='dense')).",
        ),
    ],
)
def test_a_call_the_signature_does_not_take_names_the_function_and_argument(call, message):
    """Review (finding 4): an unknown keyword to a constructor was Python's bare TypeError from the checked wrapper's
    signature.bind, naming neither the function nor the keyword (``sliding_window(n=8, window=2)`` said "missing a
    required argument: 'left'"). Now a MaskError, still a TypeError, as the spec parser says it."""
    from hassejax.errors import MaskCallError

    with pytest.raises(MaskCallError) as info:  # exported with the other errors (it lived in a private module)
        call()
    assert str(info.value) == message
    assert isinstance(info.value, TypeError) and isinstance(info.value, MaskError)


def test_the_jnp_advice_comes_only_for_traced_index_errors():
    """A fresh user: a ZeroDivisionError and a wrong arity met "Write it with jnp operations", which does not apply."""
    for fn in (lambda b, h, q, k: 1 / 0, lambda q, k: q >= k, lambda b, h, q, k: None):
        with pytest.raises(MaskError) as info:
            M.from_mask_mod(fn, 3)
        assert "jnp operations" not in str(info.value), str(info.value)
