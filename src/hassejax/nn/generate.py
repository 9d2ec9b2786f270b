"""Block generation with the Block Two-Stream pattern: training = inference (spec hasse.md §3.2).

Generating block `b` (target positions `s_b + 1 .. s_b + l`, prefix length `s_b = b·l`) is one
forward pass of the model over ``[w_1 … w_{s_b} | m_{s_b+1} … m_{s_b+l}]`` with the mask of
task `T_b` of :func:`hassejax.tasks.block_generation`: the content prefix causal among
itself, each mask token (carrying its target position id) seeing the whole prefix and its
group. That is the sub-pattern of the merged training mask on those slots, so the logits of
a block equal the training-layout logits of its query slots (tested to float rounding).

No KV cache: every block **recomputes** the content prefix with the same causal mask. This is
exact — the content stream never attends to mask tokens, so a cached prefix would hold the
very values recomputed here — and costs `O(s_b²)` per block instead of `O(s_b·l)`.

Source: Li & Guo, arXiv:2606.09951 (paper); spec hasse.md §3.2 ("Inference uses the identical
pattern: cached causal prefix, append l mask tokens with the target position ids, one forward
pass predicts the block").
"""

from __future__ import annotations

from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PRNGKeyArray

from .._checks import int_value
from .._tracing import is_traced
from ..errors import ParameterError, TaskError
from ..tasks import block_generation
from .layouts import Layout, _checked_token_ids, layout_from_task
from .transformer import Transformer

__all__ = ["BlockGeneration", "generate_blocks"]


class BlockGeneration(eqx.Module):
    """Result of :func:`generate_blocks`.

    - `tokens`: int `(p + num_blocks·l,)`: the prompt, then the generated (or, with a teacher,
      the teacher's) tokens.
    - `logits`: float `(num_blocks, l, vocab_size)`: the logits of every generated block.

    Source: (derived), the result of :func:`generate_blocks` (spec hasse.md §3.2: inference uses the training
    pattern).

    **Example:** one greedy block of 2 tokens after a 2-token prompt: the new tokens are the
    argmax of the block's logits.

    ```python
    >>> import jax, jax.numpy as jnp
    >>> from hassejax.nn import Transformer, generate_blocks
    >>> model = Transformer(1, 8, 2, vocab_size=3, num_positions=5, key=jax.random.key(0))
    >>> g = generate_blocks(model, jnp.array([0, 1]), 1, block_size=2)
    >>> g.tokens.shape, g.logits.shape, g.tokens[:2].tolist()
    ((4,), (1, 2, 3), [0, 1])
    >>> bool((g.tokens[2:] == g.logits[0].argmax(-1)).all())
    True

    ```
    """

    tokens: Int[Array, " total"]
    logits: Float[Array, "num_blocks block_size vocab"]


@eqx.filter_jit
def _block_logits(model: Transformer, layout: Layout, tokens, block_size: int):
    # ids valid by construction: the prompt and teacher are checked on the host by
    # generate_blocks, the rest is sampled here; no eqx.error_if, so the program is cacheable
    return layout.logits(model, tokens, check_ids=False)[-block_size:]


def _int_vector(x, name: str):
    if not hasattr(x, "ndim") or x.ndim != 1 or not jnp.issubdtype(x.dtype, jnp.integer):
        got = f"dtype {x.dtype}, shape {tuple(x.shape)}" if hasattr(x, "shape") else type(x).__name__
        raise ParameterError(f"`{name}` must be a 1-D int array of token ids; got {got}.")


def generate_blocks(
    model: Transformer,
    prompt: Int[Array, " p"],
    num_blocks: int | np.integer,
    teacher: Int[Array, " m"] | None = None,
    *,
    block_size: int | np.integer,
    group: Literal["full", "causal", "diagonal"] = "full",
    content: Literal["causal", "block_causal"] = "causal",
    key: PRNGKeyArray | None = None,
    temperature: float = 1.0,
) -> BlockGeneration:
    """Generate `num_blocks` blocks of `block_size` tokens after `prompt`, one forward pass each.

    **Arguments:**

    - `model`: a :class:`~hassejax.nn.Transformer` trained on
      :func:`~hassejax.nn.block_two_stream_layout` with the same `block_size`, `group`, `content`.
    - `prompt`: int `(p,)` token ids, `p` a multiple of `block_size` (0 allowed).
    - `num_blocks`: number of blocks to generate, an int >= 1 (a NumPy integer too).
    - `teacher`: optional int `(num_blocks·block_size,)`: teacher forcing — block `b` is
      conditioned on these tokens for the earlier blocks instead of the model's own, and they
      are what `tokens` returns.
    - `block_size`, `group`, `content`: the pattern (as :func:`hassejax.tasks.block_generation`; `block_size` a
      positive int, a NumPy integer too).
    - `key`: with a key, tokens are sampled from ``softmax(logits / temperature)``; without,
      greedy (argmax).

    **Returns:** a :class:`BlockGeneration` (tokens and per-block logits).

    **Raises:** :class:`~hassejax.errors.TaskError` if `p` is not a multiple of `block_size`;
    :class:`~hassejax.errors.ParameterError` for non-int or out-of-range tokens (ids outside
    ``[0, vocab_size)``) or traced ones (it runs on the host: call it outside ``jit``), a teacher
    of the wrong length, a `num_blocks` or `block_size` that is not a positive int (a bool or a float is refused), a
    non-positive temperature, or a model whose `num_positions` cannot hold position `p + num_blocks·block_size`.

    Source: spec hasse.md §3.2.

    **Example:** with a teacher the block's logits are those of its query slots `m_3, m_4` in the
    training layout (training = inference), and `tokens` are the prompt and the teacher.

    ```python
    >>> import jax, jax.numpy as jnp
    >>> from hassejax.nn import Transformer, block_two_stream_layout, generate_blocks
    >>> model = Transformer(1, 8, 2, vocab_size=3, num_positions=5, key=jax.random.key(0))
    >>> seq = jnp.array([0, 1, 2, 0])
    >>> g = generate_blocks(model, seq[:2], 1, teacher=seq[2:], block_size=2)
    >>> g.tokens.tolist()
    [0, 1, 2, 0]
    >>> training = block_two_stream_layout(4, 2).logits(model, seq)  # slots [w1..w4 | m1..m4]
    >>> bool(jnp.allclose(g.logits[0], training[6:], atol=1e-5))
    True

    ```
    """
    _int_vector(prompt, "prompt")
    for name, value in (("block_size", block_size), ("num_blocks", num_blocks)):
        if int_value(value) is None or value < 1:
            raise ParameterError(f"`{name}` must be a positive int; got {value!r}.")
    block_size, num_blocks = int(block_size), int(num_blocks)
    p, l = int(prompt.shape[0]), block_size
    if p % l:
        raise TaskError(f"`prompt` length must be a multiple of block_size = {l}; got {p}.")
    total = p + num_blocks * l
    if total + 1 > model.num_positions:
        raise ParameterError(
            f"the model has {model.num_positions} position ids (0..{model.num_positions - 1}); generating up to position {total} needs {total + 1}."
        )
    if teacher is not None:
        _int_vector(teacher, "teacher")
        if teacher.shape[0] != num_blocks * l:
            raise ParameterError(
                f"`teacher` must hold num_blocks·block_size = {num_blocks * l} tokens; got {teacher.shape[0]}."
            )
    for name, x in (("prompt", prompt), ("teacher", teacher)):
        if is_traced(x):  # the blocks' tasks and layouts are built on the host, one jitted forward pass each
            raise ParameterError(
                f"`{name}` must be a concrete array: generate_blocks loops over the blocks on the host (each block "
                "one jitted forward pass) and cannot itself run under jax.jit or jax.vmap; got a traced array. "
                "Call it outside jit."
            )
        if x is not None:
            _checked_token_ids(x, model.vocab_size, name)
    if not temperature > 0:
        raise ParameterError(f"`temperature` must be > 0; got {temperature!r}.")

    family = block_generation(total, l, group=group, content=content, keep_last_block=False)
    tokens = jnp.concatenate([jnp.asarray(prompt, jnp.int32), jnp.zeros((num_blocks * l,), jnp.int32)])
    keys = None if key is None else jax.random.split(key, num_blocks)
    all_logits = []
    for i in range(num_blocks):
        b = p // l + i
        layout = layout_from_task(family.tasks[b], sequence_length=total)
        logits = _block_logits(model, layout, tokens, l)
        if teacher is not None:
            chosen = jnp.asarray(teacher[i * l : (i + 1) * l], jnp.int32)
        elif keys is None:
            chosen = jnp.argmax(logits, axis=-1).astype(jnp.int32)
        else:
            chosen = jax.random.categorical(keys[i], logits / temperature, axis=-1).astype(jnp.int32)
        tokens = jax.lax.dynamic_update_slice(tokens, chosen, (b * l,))
        all_logits.append(logits)
    return BlockGeneration(tokens, jnp.stack(all_logits))
