"""The package's jitted Transformer programs hold no host callback, so JAX caches them (issue 13 item 2).

JAX never writes a program with a host callback to its persistent compilation cache. The
model's id range check under ``jit`` is an ``eqx.error_if`` (a ``pure_callback``): the
package's own programs check ids on the host, or flag them in the program, instead. A user's
own ``jit`` keeps the runtime check (the last tests show the callback is still there and still
fires).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.errors import ParameterError
from hassejax.nn import (
    TrainConfig,
    Transformer,
    butterfly_layout,
    causal_layout,
    evaluate,
    layout_loss,
    random_markov_chain,
    train,
)
from hassejax.nn.generate import _block_logits
from hassejax.nn.layouts import layout_from_task
from hassejax.nn.train import _evaluate, _train_chunk, make_optimizer
from hassejax.tasks import block_generation

N, VOCAB = 4, 3


@pytest.fixture(scope="module")
def setup():
    model = Transformer(1, 8, 2, vocab_size=VOCAB, num_positions=N + 1, key=jax.random.key(0), dtype=jnp.float32)
    chain = random_markov_chain(jax.random.key(1), VOCAB, 0.5)
    seqs = chain.sample(jax.random.key(2), 3, N)
    return model, chain, seqs


def _text(fn, *args) -> str:
    return fn.lower(*args).as_text()


def _has_callback(text: str) -> bool:
    return "callback" in text


def test_the_check_is_a_callback_under_jit(setup):
    """The detector can fail: the checked program holds a callback, the unchecked one none."""
    model, _, seqs = setup
    lay = butterfly_layout(N)
    checked = eqx.filter_jit(lambda m, s: lay.logits(m, s))
    unchecked = eqx.filter_jit(lambda m, s: lay.logits(m, s, check_ids=False))
    assert _has_callback(_text(checked, model, seqs[0]))
    assert not _has_callback(_text(unchecked, model, seqs[0]))
    np.testing.assert_array_equal(np.asarray(checked(model, seqs[0])), np.asarray(unchecked(model, seqs[0])))


def test_train_chunk_and_evaluate_hold_no_callback(setup):
    model, chain, seqs = setup
    lay = butterfly_layout(N)
    optimizer = make_optimizer(TrainConfig(steps=4, warmup_steps=1, eval_every=2))
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
    keys = jax.random.split(jax.random.key(3), 2)
    sample = lambda k: chain.sample(k, 2, N)
    assert not _has_callback(_text(_train_chunk, model, opt_state, keys, lay, sample, optimizer))
    assert not _has_callback(_text(_evaluate, model, lay, seqs))


def test_block_logits_hold_no_callback(setup):
    model, _, seqs = setup
    family = block_generation(N, 2, keep_last_block=False)
    lay = layout_from_task(family.tasks[1], sequence_length=N)
    assert not _has_callback(_text(_block_logits, model, lay, seqs[0], 2))


def test_evaluate_checks_concrete_ids_on_the_host(no_runtime_typecheck, setup):
    model, _, seqs = setup
    lay = butterfly_layout(N)
    with pytest.raises(ParameterError, match=r"`sequences` must hold token ids in \[0, 3\); got values in \[0, 3\]"):
        evaluate(model, lay, seqs.at[0, 1].set(VOCAB))
    with pytest.raises(ParameterError, match=r"`sequences` must hold token ids in \[0, 3\); got values in \[-1, "):
        layout_loss(model, lay, seqs.at[2, 0].set(-1))
    small = Transformer(1, 8, 2, vocab_size=VOCAB, num_positions=N, key=jax.random.key(0))
    with pytest.raises(ParameterError, match=r"`layout` 'butterfly.*' uses position ids up to 4; .*num_positions = 4"):
        evaluate(small, lay, seqs)


def test_user_jit_keeps_the_runtime_check(no_runtime_typecheck, setup):
    model, _, seqs = setup
    lay = butterfly_layout(N)
    user = eqx.filter_jit(evaluate)
    assert _has_callback(_text(user, model, lay, seqs))
    assert float(user(model, lay, seqs)) == pytest.approx(float(evaluate(model, lay, seqs)), rel=1e-6)
    with pytest.raises(Exception, match=r"`sequences` must hold token ids in \[0, 3\)"):
        jax.block_until_ready(user(model, lay, seqs.at[0, 0].set(VOCAB + 1)))


@pytest.mark.parametrize("layout", [butterfly_layout(N), causal_layout(N)], ids=["butterfly", "causal"])
def test_user_jit_refuses_the_mask_token_id_in_sequences(no_runtime_typecheck, setup, layout):
    """Id V (the mask token) passes the model's embedding check, whose range is [0, V]; as a sequence token it was a
    target index past the V logits: under jit the loss was NaN with no error. Now a runtime error names `sequences`
    (or `sequence`, for one) and [0, V)."""
    model, _, seqs = setup
    bad = seqs.at[0, N - 1].set(VOCAB)
    for fn in (eqx.filter_jit(layout_loss), eqx.filter_jit(evaluate)):
        assert np.isfinite(float(fn(model, layout, seqs)))
        with pytest.raises(Exception, match=r"`sequences` must hold token ids in \[0, 3\)"):
            jax.block_until_ready(fn(model, layout, bad))
    one = eqx.filter_jit(lambda m, s: layout.logits(m, s))
    with pytest.raises(Exception, match=r"`sequence` must hold token ids in \[0, 3\)"):
        jax.block_until_ready(one(model, bad[0]))
    with pytest.raises(ParameterError, match=r"`sequence` must hold token ids in \[0, 3\); got values in \[3, 3\]"):
        layout.logits(model, jnp.full((N,), VOCAB, jnp.int32))
    # the dtype as given: an object array is refused by name (a review: JAX's TypeError), float64 named float64
    as_objects = np.asarray(seqs).astype(object)
    for call in (lambda: layout_loss(model, layout, as_objects), lambda: evaluate(model, layout, as_objects),
                 lambda: layout.check_inputs(model, as_objects)):  # fmt: skip
        with pytest.raises(ParameterError, match=r"`sequences` must be integer token ids .*got dtype object"):
            call()
    with pytest.raises(ParameterError, match=r"got dtype float64"):
        layout_loss(model, layout, np.asarray(seqs, np.float64))
    # an empty batch has no mean loss (it was NaN); nested lists are taken (they raised AttributeError)
    for fn in (layout_loss, evaluate):
        with pytest.raises(ParameterError, match=r"with batch >= 1 .*got \(0, "):
            fn(model, layout, jnp.zeros((0, N), jnp.int32))
        assert float(fn(model, layout, np.asarray(seqs).tolist())) == float(fn(model, layout, seqs))


def test_train_flags_bad_sampled_ids_and_checks_held_out(no_runtime_typecheck, setup):
    model, chain, seqs = setup
    lay = butterfly_layout(N)
    cfg = TrainConfig(steps=4, batch_size=2, warmup_steps=1, eval_every=2)
    good = lambda k: chain.sample(k, 2, N)
    bad = lambda k: chain.sample(k, 2, N).at[1, 2].set(VOCAB)  # every step, from step 0
    with pytest.raises(ParameterError, match=r"`sample` must return token ids in \[0, 3\).*at step 0"):
        train(model, lay, bad, cfg, key=jax.random.key(0), held_out=seqs)
    with pytest.raises(ParameterError, match=r"`held_out` must hold token ids in \[0, 3\)"):
        train(model, lay, good, cfg, key=jax.random.key(0), held_out=seqs.at[0, 0].set(-2))
