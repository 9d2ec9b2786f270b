"""The Transformer: position ids separate from slot order, weighted token embeddings, errors."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.errors import MaskError, ParameterError
from hassejax.nn import Transformer


@pytest.fixture(scope="module")
def model():
    return Transformer(2, 8, 2, vocab_size=5, num_positions=10, key=jax.random.key(0))


def test_slot_order_is_presentation_only(model):
    """Permuting slots together with their position ids and the mask permutes the logits."""
    rng = np.random.default_rng(0)
    n = 7
    ids = jnp.asarray(rng.integers(0, 6, n))  # includes the mask token id 5 sometimes
    ids_perm = rng.permutation(9) + 1
    pos = jnp.asarray(ids_perm[:n])
    mask = rng.random((n, n)) < 0.5
    perm = rng.permutation(n)
    out = np.asarray(model(ids, pos, jnp.asarray(mask)))
    outp = np.asarray(model(ids[perm], pos[perm], jnp.asarray(mask[np.ix_(perm, perm)])))
    np.testing.assert_allclose(outp, out[perm], rtol=1e-10, atol=1e-12)
    # the position id, not the slot index, is what the position embedding sees
    pos2 = pos.at[3].set(int(ids_perm[n]))  # an id no slot uses
    assert not np.allclose(np.asarray(model(ids, pos2, jnp.asarray(mask)))[3], out[3])


def test_embed_weights(model):
    E, P = np.asarray(model.token_embedding), np.asarray(model.position_embedding)
    ids = jnp.asarray([[1, 3], [2, 2], [5, 5]])
    pos = jnp.asarray([4, 0, 9])
    np.testing.assert_allclose(
        np.asarray(model.embed(ids, pos, jnp.full((3, 2), 0.5))),
        np.stack([(E[1] + E[3]) / 2, E[2], E[5]]) + P[[4, 0, 9]],
        rtol=1e-12,
    )
    w = jnp.asarray([[0.25, 0.75], [1.0, 0.0], [0.0, 1.0]])
    np.testing.assert_allclose(
        np.asarray(model.embed(ids, pos, w)),
        np.stack([0.25 * E[1] + 0.75 * E[3], E[2], E[5]]) + P[[4, 0, 9]],
        rtol=1e-12,
    )
    np.testing.assert_allclose(np.asarray(model.embed(ids[:, 0], pos)), E[[1, 2, 5]] + P[[4, 0, 9]], rtol=1e-12)
    assert model.mask_id == 5 and model.num_layers == 2 and model.d_model == 8


def test_the_model_has_no_static_arrays(model):
    """Masks and weights are leaves; the static part holds only sizes."""
    _, static = eqx.partition(model, eqx.is_array)
    assert not any(isinstance(x, (jax.Array, np.ndarray)) for x in jax.tree.leaves(static))
    f = eqx.filter_jit(lambda m, mask: m(jnp.arange(4), jnp.arange(4), mask))
    a = f(model, jnp.tril(jnp.ones((4, 4), bool)))
    b = f(model, jnp.eye(4, dtype=bool))
    assert not np.allclose(np.asarray(a)[3], np.asarray(b)[3])
    np.testing.assert_allclose(np.asarray(a)[0], np.asarray(b)[0], rtol=1e-12)  # row 0 sees only itself in both


def test_float32_model_under_x64():
    m32 = Transformer(1, 8, 2, vocab_size=3, num_positions=4, key=jax.random.key(1), dtype=jnp.float32)
    out = m32(jnp.asarray([0, 1, 3]), jnp.asarray([1, 2, 3]), jnp.ones((3, 3), bool), jnp.ones((3,)))
    assert out.dtype == jnp.float32 and out.shape == (3, 3)


def test_transformer_errors(no_runtime_typecheck, model):
    with pytest.raises(ParameterError, match="`num_heads` must divide `d_model`"):
        Transformer(1, 6, 4, vocab_size=3, num_positions=3, key=jax.random.key(0))
    with pytest.raises(ParameterError, match="`num_layers` must be a positive int; got 0"):
        Transformer(0, 8, 2, vocab_size=3, num_positions=3, key=jax.random.key(0))
    with pytest.raises(ParameterError, match=r"`token_ids` must hold ids in \[0, 6\); got values in \[0, 6\]"):
        model(jnp.asarray([0, 6]), jnp.asarray([0, 1]), jnp.ones((2, 2), bool))
    with pytest.raises(ParameterError, match=r"`position_ids` must hold ids in \[0, 10\)"):
        model(jnp.asarray([0, 1]), jnp.asarray([0, 10]), jnp.ones((2, 2), bool))
    with pytest.raises(ParameterError, match=r"`token_weights` must be a real array of the shape of `token_ids`, "):
        model.embed(jnp.asarray([[0, 1]]), jnp.asarray([1]), jnp.ones((1, 3)))  # was einsum's bare ValueError
    with pytest.raises(
        ParameterError,
        match=r"`token_ids` must have shape \(n,\), or \(n, r\) with `token_weights`.*got shape \(3, 2, 1\)",
    ):
        model.embed(jnp.zeros((3, 2, 1), int), jnp.asarray([1, 2, 3]))  # was embedded to shape (3, 3, d)
    # ... but weights of (n, 1) broadcast over a slot's ids, as they did before the check (a review)
    ids, pos = jnp.asarray([[0, 1], [2, 2]]), jnp.asarray([0, 1])
    np.testing.assert_array_equal(
        model.embed(ids, pos, jnp.asarray([[0.25], [1.0]])), model.embed(ids, pos, jnp.asarray([[0.25, 0.25], [1, 1]]))
    )
    with pytest.raises(ParameterError, match=r"`token_ids`, \(3,\) \(one weight per token id; .*\); got shape \(2,\)"):
        model(jnp.asarray([0, 1, 2]), jnp.asarray([0, 1, 2]), jnp.ones((3, 3), bool), jnp.ones((2,)))
    with pytest.raises(ParameterError, match=r"one entry per slot; got 2 and 3"):
        model(jnp.asarray([0, 1]), jnp.asarray([0, 1, 2]), jnp.ones((2, 2), bool))
    with pytest.raises(MaskError, match=r"`mask` must have shape \(2, 2\)"):
        model(jnp.asarray([0, 1]), jnp.asarray([0, 1]), jnp.ones((3, 3), bool))
    with pytest.raises(Exception, match=r"`position_ids` holds an id outside \[0, 10\)"):
        jax.block_until_ready(
            eqx.filter_jit(lambda m, p: m(jnp.asarray([0, 1]), p, jnp.ones((2, 2), bool)))(model, jnp.asarray([0, 12]))
        )


def test_d_model_below_two_is_refused(no_runtime_typecheck):
    """Issue: with ``d_model=1`` every LayerNorm (over one feature) returns its bias whatever the input, so the model
    is constant and ``jacobian_flow`` all False, not even the diagonal, where the README says it equals
    ``reachability(mask, L)``. Refused at construction; ``d_model=2`` already gives the predicted flow."""
    from hassejax.nn import jacobian_flow
    from hassejax.nn.transformer import TransformerBlock
    from hassejax.order import reachability

    with pytest.raises(ParameterError, match=r"`d_model` must be >= 2 .*LayerNorm over one feature.*; got 1"):
        Transformer(1, 1, 1, vocab_size=3, num_positions=4, key=jax.random.key(0))
    with pytest.raises(ParameterError, match=r"`d_model` must be >= 2"):
        TransformerBlock(1, 1, 4, key=jax.random.key(0))
    mask = jnp.asarray(np.tril(np.ones((4, 4), bool)) & ~np.tril(np.ones((4, 4), bool), -2))  # a band: depth matters
    for num_layers in (1, 2):
        m2 = Transformer(num_layers, 2, 2, vocab_size=3, num_positions=4, key=jax.random.key(1))
        x = jax.random.normal(jax.random.key(2), (4, 2))
        np.testing.assert_array_equal(jacobian_flow(m2, x, mask), reachability(mask, num_layers))


def test_a_non_floating_dtype_is_refused(no_runtime_typecheck):
    """Issue: ``dtype=jnp.int32`` built a model of integer parameters (truncated normals: mostly zeros), which failed
    only at the first call, naming `x`. Refused at construction, naming `dtype`."""
    from hassejax.nn import MaskedMultiHeadAttention

    for dtype in (jnp.int32, jnp.bool_, "int8", jnp.complex64):
        with pytest.raises(
            ParameterError,
            match=r"`dtype` must be a floating dtype \(e\.g\. jnp\.float32\), or None .*; got (int32|bool|int8|complex64)\.",
        ):
            Transformer(1, 8, 2, vocab_size=3, num_positions=4, key=jax.random.key(0), dtype=dtype)
    with pytest.raises(ParameterError, match=r"`dtype` must be a floating dtype .*; got 'no such dtype'\."):
        Transformer(1, 8, 2, vocab_size=3, num_positions=4, key=jax.random.key(0), dtype="no such dtype")
    with pytest.raises(ParameterError, match=r"`dtype` must be a floating dtype"):
        MaskedMultiHeadAttention(8, 2, key=jax.random.key(0), dtype=jnp.int32)
    bf16 = Transformer(1, 8, 2, vocab_size=3, num_positions=4, key=jax.random.key(0), dtype="bfloat16")
    assert bf16.unembed.dtype == jnp.bfloat16


def test_errors_name_the_argument_passed(no_runtime_typecheck, model):
    """Issue: ``model(ids, position_ids_2d, mask)`` said "`x` must be a floating array ... got shape (3, 3, 8)" (the
    embeddings, which the user never passed), and with `token_ids` and `position_ids` both (3, 4) it was a raw
    broadcasting ValueError. `position_ids` is checked against `token_ids` and named; an empty call names
    `token_ids`."""
    mask = jnp.ones((3, 3), bool)
    with pytest.raises(
        ParameterError,
        match=r"`position_ids` must have shape \(n,\) = \(3,\), one position id per "
        r"slot of `token_ids` \(shape \(3,\)\); got shape \(3, 3\)",
    ):
        model(jnp.arange(3), jnp.zeros((3, 3), int), mask)
    with pytest.raises(ParameterError, match=r"`position_ids` must have shape \(n,\) = \(3,\).*got shape \(3, 4\)"):
        model(jnp.zeros((3, 4), int), jnp.zeros((3, 4), int), mask, jnp.full((3, 4), 0.25))
    with pytest.raises(ParameterError, match=r"`position_ids` must have shape \(n,\).*got shape \(\)"):
        model.embed(jnp.arange(3), jnp.asarray(1))
    with pytest.raises(ParameterError, match=r"`token_ids` must hold at least one slot; got shape \(0,\)"):
        model(jnp.zeros((0,), int), jnp.zeros((0,), int), jnp.zeros((0, 0), bool))
    # a mask of another length names the positions of `token_ids` (a fresh user: "of `x`", never passed)
    with pytest.raises(MaskError, match=r"`mask` must have shape .*\(3, 3\).* the 3 positions of `token_ids`"):
        model(jnp.arange(3), jnp.arange(3), jnp.ones((5, 5), bool))


def test_numpy_integer_sizes_and_the_key_are_checked(no_runtime_typecheck):
    """Issue: ``Transformer(np.int64(2), ...)`` was refused as "not a positive int" where the task families take NumPy
    integers; ``key=0`` failed with JAX's raw TypeError. NumPy integers are taken (bools still refused); a key that
    is no PRNG key is refused, naming `key` and how to make one."""
    m = Transformer(
        np.int64(2), np.int32(8), np.int64(2), np.int64(3), np.int16(4), key=jax.random.key(0), mlp_ratio=np.int64(2)
    )
    assert m.num_layers == 2 and m.d_model == 8 and m.vocab_size == 3 and m.num_positions == 4
    assert type(m.vocab_size) is int and type(m.num_positions) is int
    for bad in (True, np.bool_(True), np.int64(0), 2.0):
        with pytest.raises(ParameterError, match=r"`num_layers` must be a positive int"):
            Transformer(bad, 8, 2, vocab_size=3, num_positions=4, key=jax.random.key(0))
    for key in (0, None, np.uint32([0, 0, 0]), jnp.zeros((2,), jnp.float32), jax.random.split(jax.random.key(0))):
        with pytest.raises(
            ParameterError,
            match=r"`key` must be a JAX PRNG key, e\.g\. jax\.random\.key\(0\) \(or "
            r"jax\.random\.PRNGKey\(0\)\); got",
        ):
            Transformer(2, 8, 2, vocab_size=3, num_positions=4, key=key)
    a = Transformer(1, 8, 2, vocab_size=3, num_positions=4, key=jax.random.PRNGKey(0))  # a legacy uint32 key
    b = Transformer(1, 8, 2, vocab_size=3, num_positions=4, key=jax.random.key(0))
    np.testing.assert_array_equal(a.unembed, b.unembed)


def test_a_batch_of_sequences_is_refused_not_read_as_averaged_slots(no_runtime_typecheck, model):
    """Review: a batch of 4 sequences of length 4 was read as 4 slots of 4 averaged token ids, (4, V) logits without a
    word; with b != n the error named n = b. (n, r) ids now need their `token_weights`; the errors name the shapes taken
    and suggest jax.vmap."""
    causal = jnp.tril(jnp.ones((4, 4), bool))
    for batch, pos in ((jnp.zeros((4, 4), int), jnp.arange(1, 5)), (jnp.zeros((2, 4), int), jnp.zeros((2, 4), int))):
        with pytest.raises(ParameterError, match=r"`token_ids` of shape .* needs `token_weights`.*jax\.vmap\(model"):
            model(batch, pos, causal)
    with pytest.raises(ParameterError, match=r"`position_ids` must have shape \(n,\) = \(4,\).*jax\.vmap"):
        model(jnp.zeros(4, int), jnp.zeros((2, 4), int), causal)


def test_float64_without_x64_is_refused_naming_dtype(no_runtime_typecheck):
    """Review: dtype=jnp.float64 without jax_enable_x64 built a float32 model (with a truncation warning per tensor);
    jacobian_flow then asked for dtype=float64."""
    from hassejax.nn import MaskedMultiHeadAttention, TransformerBlock

    old = jax.config.jax_enable_x64
    try:
        jax.config.update("jax_enable_x64", False)
        match = r"`dtype` = float64 needs JAX's 64-bit mode, which is off.*jax_enable_x64"
        with pytest.raises(ParameterError, match=match):
            Transformer(1, 4, 2, vocab_size=3, num_positions=3, key=jax.random.key(0), dtype=jnp.float64)
        with pytest.raises(ParameterError, match=match):
            TransformerBlock(4, 2, 8, key=jax.random.key(0), dtype="float64")
        with pytest.raises(ParameterError, match=match):
            MaskedMultiHeadAttention(4, 2, key=jax.random.key(0), dtype=np.float64)
    finally:
        jax.config.update("jax_enable_x64", old)


def test_nested_list_masks_are_taken(model):
    """Review: ``model(ids, pos, nested_list_mask)`` raised MaskError ("got an object of type list") where Task, the
    order functions and reachability take nested lists. Run under the suite's annotation checks."""
    ids, pos = jnp.asarray([0, 2, 1]), jnp.asarray([1, 2, 3])
    causal = [[True, False, False], [True, True, False], [True, True, True]]
    np.testing.assert_array_equal(np.asarray(model(ids, pos, causal)), np.asarray(model(ids, pos, jnp.asarray(causal))))
    per_head = [causal, [[True, True, True]] * 3]
    np.testing.assert_array_equal(
        np.asarray(model(ids, pos, per_head)), np.asarray(model(ids, pos, jnp.asarray(per_head)))
    )


def test_ragged_nested_masks_are_mask_errors(no_runtime_typecheck, model):
    with pytest.raises(MaskError, match=r"`mask` must be a Boolean array .* not rectangular"):
        model(jnp.asarray([0, 1]), jnp.asarray([1, 2]), [[True], [True, True]])


def test_non_finite_logits_and_token_weights_are_refused_and_lists_are_taken():
    """A review: a NaN in `unembed` gave NaN logits without error, as did `token_weights` full of NaN (the docstring
    promised a check of `token_weights`), and plain lists failed with "'list' object has no attribute 'shape'".
    Concrete logits are checked; under jit they are returned unchecked (no host callback in the program). The list
    call equals the array call (independent: the same ids as arrays)."""
    model = Transformer(1, 8, 2, vocab_size=3, num_positions=5, key=jax.random.key(0))
    mask = jnp.tril(jnp.ones((3, 3), bool))
    ids, pos = jnp.array([0, 2, 1]), jnp.array([1, 2, 3])
    np.testing.assert_array_equal(np.asarray(model([0, 2, 1], [1, 2, 3], mask)), np.asarray(model(ids, pos, mask)))
    with pytest.raises(ParameterError, match="`token_ids` must be an integer array .* ragged"):
        model([[0], [2, 1]], [1, 2], mask)
    broken = eqx.tree_at(lambda m: m.unembed, model, model.unembed.at[0, 0].set(jnp.nan))
    with pytest.raises(ParameterError, match=r"logits have NaN/inf entries: .* NaN in `unembed`"):
        broken(ids, pos, mask)
    assert np.isnan(np.asarray(eqx.filter_jit(broken)(ids, pos, mask))).any()  # documented: traced, unchecked
    pair_ids = jnp.array([[0, 1], [2, 2], [1, 0]])
    with pytest.raises(ParameterError, match="`token_weights` must be finite"):
        model(pair_ids, pos, mask, jnp.full((3, 2), jnp.nan))
    assert np.isfinite(np.asarray(model(pair_ids, pos, mask, jnp.full((3, 2), 0.5)))).all()
