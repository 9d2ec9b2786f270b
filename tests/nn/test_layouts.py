"""Layouts read off the merged tasks agree with the closed forms of spec hasse.md §3."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.errors import ParameterError, TaskError
from hassejax.nn import Transformer, block_two_stream_layout, butterfly_layout, causal_layout, layout_from_task
from hassejax.tasks import Task, Token, block_two_stream_mask, butterfly_mask


@pytest.fixture(scope="module")
def bts():
    return block_two_stream_layout(8, 4)


@pytest.fixture(scope="module")
def bfly():
    return butterfly_layout(5)


def test_block_two_stream_layout(bts):
    n = 8
    np.testing.assert_array_equal(np.asarray(bts.mask), np.asarray(block_two_stream_mask(n, 4)))
    src, w = np.asarray(bts.token_sources), np.asarray(bts.token_weights)
    # content slots q < n read w_{q+1} at position q + 1; query slots read the mask token at the target position
    np.testing.assert_array_equal(src[:n, 0], np.arange(n))
    np.testing.assert_array_equal(src[n:], -1)
    np.testing.assert_allclose(w.sum(1), 1.0)
    np.testing.assert_array_equal(np.asarray(bts.position_ids), np.r_[np.arange(1, n + 1), np.arange(1, n + 1)])
    np.testing.assert_array_equal(np.asarray(bts.target_index), np.r_[-np.ones(n, int), np.arange(n)])
    assert bts.streams == ("content",) * n + ("query",) * n
    seq = jnp.asarray([3, 1, 4, 1, 5, 2, 6, 5])
    inp = bts.slot_inputs(seq, mask_id=9)
    ids = np.asarray(inp.token_ids)
    np.testing.assert_array_equal(ids[:n, 0], np.asarray(seq))
    np.testing.assert_array_equal(ids[n:], 9)
    np.testing.assert_array_equal(np.asarray(bts.targets(seq))[n:], np.asarray(seq))


def test_butterfly_layout_and_aggregate_embeddings(bfly):
    n = 5
    np.testing.assert_array_equal(np.asarray(bfly.mask), np.asarray(butterfly_mask(n)))
    assert bfly.slot_names == ("w1", "w2", "w3", "w4", "w2", "w3", "w4", "w5", "agg1", "agg2", "agg3", "agg4", "agg5")
    np.testing.assert_array_equal(np.asarray(bfly.position_ids), [1, 2, 3, 4, 2, 3, 4, 5, 1, 2, 3, 4, 5])
    np.testing.assert_array_equal(np.asarray(bfly.target_index), [-1] * 8 + [0, 1, 2, 3, 4])
    model = Transformer(1, 8, 2, vocab_size=7, num_positions=n + 1, key=jax.random.key(0))
    seq = jnp.asarray([6, 0, 3, 5, 2])
    inp = bfly.slot_inputs(seq, model.mask_id)
    emb = np.asarray(model.embed(inp.token_ids, inp.position_ids, inp.token_weights))
    E, P = np.asarray(model.token_embedding), np.asarray(model.position_embedding)
    w = np.asarray(seq)
    centre = emb[2 * n - 2 :]
    np.testing.assert_allclose(centre[0], E[w[1]] + P[1], rtol=1e-12)  # boundary w'_1 = w_2
    np.testing.assert_allclose(centre[n - 1], E[w[n - 2]] + P[n], rtol=1e-12)  # boundary w'_n = w_{n-1}
    for k in range(2, n):  # 1-based k: w'_k = (w_{k-1} + w_{k+1}) / 2 at position id k
        np.testing.assert_allclose(centre[k - 1], (E[w[k - 2]] + E[w[k]]) / 2 + P[k], rtol=1e-12)
    np.testing.assert_allclose(emb[:4], E[w[:4]] + P[1:5], rtol=1e-12)  # F stream
    np.testing.assert_allclose(emb[4:8], E[w[1:]] + P[2:6], rtol=1e-12)  # B stream


def test_causal_layout():
    lay = causal_layout(5)
    np.testing.assert_array_equal(np.asarray(lay.mask), np.tril(np.ones((4, 4), bool)))
    np.testing.assert_array_equal(np.asarray(lay.token_sources)[:, 0], np.arange(4))
    np.testing.assert_array_equal(np.asarray(lay.position_ids), np.arange(1, 5))
    np.testing.assert_array_equal(np.asarray(lay.target_index), np.arange(1, 5))
    assert lay.sequence_length == 5


def test_mask_is_a_leaf_not_a_static_field(bts):
    leaves = jax.tree.leaves(bts)
    assert any(leaf is bts.mask for leaf in leaves)
    # the same compiled function serves two different masks of the same shape
    f = jax.jit(lambda lay: jnp.sum(lay.mask))
    other = type(bts)(
        ~bts.mask,
        bts.token_sources,
        bts.token_weights,
        bts.position_ids,
        bts.target_index,
        bts.sequence_length,
        bts.streams,
        bts.slot_names,
        bts.name,
    )
    assert int(f(bts)) + int(f(other)) == bts.num_slots**2


def test_layout_from_task_errors(no_runtime_typecheck):
    mask = np.ones((2, 2), bool)
    with pytest.raises(TaskError, match=r"`task.inputs\[1\]` must be a sequence token 'w'.*got x2"):
        layout_from_task(Task([Token("w", 1), Token("x", 2)], mask))
    with pytest.raises(TaskError, match=r"`task.labels\[0\]` must be a sequence token"):
        layout_from_task(Task([Token("w", 1), Token("w", 2)], mask, {0: Token("y", 3)}))
    with pytest.raises(TaskError, match="sequence positions are 1-based"):
        layout_from_task(Task([Token("w", 0), Token("w", 2)], mask))
    with pytest.raises(TaskError, match=r"`sequence_length` must be an int >= 3"):
        layout_from_task(Task([Token("w", 1), Token("w", 2)], mask, {1: Token("w", 3)}), sequence_length=2)
    with pytest.raises(TaskError, match="`task` must be a hassejax.tasks.Task"):
        layout_from_task("causal")
    lay = layout_from_task(Task([Token("w", 1), Token("w", 2)], mask, {1: Token("w", 3)}))
    assert lay.sequence_length == 3
    with pytest.raises(ParameterError, match=r"`sequence` must be an int array of shape \(3,\).*got shape \(4,\)"):
        lay.slot_inputs(jnp.zeros(4, jnp.int32), mask_id=5)


def test_layout_from_task_takes_a_numpy_integer_sequence_length():
    """A NumPy integer is a length like a Python int (the layout keeps a Python int); a bool or float is refused."""
    task = Task([Token("w", 1), Token("w", 2)], np.ones((2, 2), bool), {1: Token("w", 3)})
    lay = layout_from_task(task, sequence_length=np.int64(5))
    assert lay.sequence_length == 5 and type(lay.sequence_length) is int
    assert lay == layout_from_task(task, sequence_length=5)
    for bad in (True, 5.0, np.float64(5.0)):
        with pytest.raises((TaskError, TypeError), match="sequence_length"):
            layout_from_task(task, sequence_length=bad)
