"""Training a :class:`~hassejax.nn.Transformer` on a task layout with optax (spec hasse.md §3–4).

One loss for every family: the mean cross-entropy over the **labelled slots** of a
:class:`~hassejax.nn.Layout` — next-token slots of :func:`~hassejax.nn.causal_layout`, query
slots of :func:`~hassejax.nn.block_two_stream_layout`, centre slots of
:func:`~hassejax.nn.butterfly_layout`. Batches are vectorised with :func:`jax.vmap`; steps run
inside :func:`equinox.filter_jit` as a :func:`jax.lax.scan` over a chunk of steps (one host
round trip per chunk, for the loss curve). Optimiser: AdamW with a warm-up–cosine learning
rate schedule and global-norm gradient clipping (decay on matrices only).

Source: Loshchilov & Hutter, "Decoupled Weight Decay Regularization", ICLR 2019 (AdamW);
spec hasse.md §3 (the training layouts).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float, Int, PRNGKeyArray

from .._checks import int_value
from .._tracing import is_traced
from ..errors import ParameterError
from .layouts import Layout, _checked_token_ids
from .transformer import Transformer

__all__ = ["TrainConfig", "TrainHistory", "make_schedule", "make_optimizer", "layout_loss", "evaluate", "train"]


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Hyperparameters of :func:`train`.

    - `steps`: optimiser steps; `batch_size`: sequences per step.
    - `learning_rate`: peak rate of the warm-up–cosine schedule (linear warm-up over
      `warmup_steps` from 0, cosine decay to `final_lr_fraction · learning_rate` at `steps`).
    - `weight_decay`: AdamW decay (matrices only); `clip_norm`: global gradient-norm clip.
    - `eval_every`: steps between held-out evaluations (also the chunk length of the scan).

    The counts (`steps`, `batch_size`, `warmup_steps`, `eval_every`) may be NumPy integers (``np.int64(500)``);
    they are stored as Python ints.

    **Raises:** :class:`~hassejax.errors.ParameterError` if `steps`, `batch_size` or `eval_every` is not a positive
    int (a bool or a float is refused); if `warmup_steps` is not an int in ``[0, steps)`` (so the default
    ``warmup_steps=100`` needs ``steps > 100``: pass a smaller `warmup_steps` for a shorter run); if `learning_rate`
    or `clip_norm` is not > 0 (NaN included); if `learning_rate` or `weight_decay` is inf; if `weight_decay` < 0 or
    `final_lr_fraction` is outside ``[0, 1]``. ``clip_norm=float("inf")`` is taken: no clipping.

    Source: Loshchilov & Hutter, "Decoupled Weight Decay Regularization", arXiv:1711.05101 (AdamW); Loshchilov &
    Hutter, "SGDR", arXiv:1608.03983 (cosine decay); Pascanu et al., arXiv:1211.5063 (gradient-norm clipping); the
    default values are (derived), no paper.

    **Example:** a NumPy count is stored as a Python int; a short run needs a shorter warm-up.

    ```python
    >>> import numpy as np
    >>> from hassejax.nn import TrainConfig
    >>> config = TrainConfig(steps=np.int64(50), warmup_steps=5)
    >>> config.steps, type(config.steps).__name__, config.batch_size
    (50, 'int', 64)
    >>> TrainConfig(steps=50)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hassejax.errors.ParameterError: `warmup_steps` must be an int in [0, steps = 50); got 100 (the default; ...).

    ```
    """

    steps: int | np.integer = 2000
    batch_size: int | np.integer = 64
    learning_rate: float = 3e-3
    warmup_steps: int | np.integer = 100
    final_lr_fraction: float = 0.05
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    eval_every: int | np.integer = 100

    def __post_init__(self):
        for name in ("steps", "batch_size", "eval_every"):
            v = getattr(self, name)
            if int_value(v) is None or v < 1:
                raise ParameterError(f"`{name}` must be a positive int; got {v!r}.")
            object.__setattr__(self, name, int(v))  # frozen: the Python int, whatever integer came
        w = self.warmup_steps
        if int_value(w) is None or not 0 <= w < self.steps:
            hint = " (the default; pass a smaller warmup_steps for a run this short)" if w == 100 else ""
            raise ParameterError(f"`warmup_steps` must be an int in [0, steps = {self.steps}); got {w!r}{hint}.")
        object.__setattr__(self, "warmup_steps", int(w))
        for name in ("learning_rate", "clip_norm"):
            if not getattr(self, name) > 0:
                raise ParameterError(f"`{name}` must be > 0; got {getattr(self, name)!r}.")
        for name in ("learning_rate", "weight_decay"):  # inf: the first update makes every weight inf or NaN
            if getattr(self, name) == float("inf"):
                raise ParameterError(f"`{name}` must be finite; got {getattr(self, name)!r}.")
        if not self.weight_decay >= 0 or not 0 <= self.final_lr_fraction <= 1:
            raise ParameterError(
                f"`weight_decay` must be >= 0 and `final_lr_fraction` in [0, 1]; got {self.weight_decay!r}, {self.final_lr_fraction!r}."
            )


@dataclasses.dataclass(frozen=True)
class TrainHistory:
    """The record of a :func:`train` run (host numpy arrays).

    - `train_loss`: float `(steps,)`, the batch loss of every step (before its update).
    - `eval_steps`: int `(E,)`, the step counts at which the held-out loss was measured
      (0 = before training, then every `eval_every` steps, and the last step).
    - `eval_loss`: float `(E,)`, the held-out per-token loss at those steps.

    Source: (derived), no paper: the record of a :func:`train` run.

    **Example:** the record of a 3-step run evaluated every 2 steps (built by hand here; :func:`train`
    returns one, see its example):

    ```python
    >>> import numpy as np
    >>> from hassejax.nn import TrainHistory
    >>> history = TrainHistory(np.array([1.2, 1.0, 0.9]), np.array([0, 2, 3]), np.array([1.1, 0.95, 0.85]))
    >>> history.final_eval_loss, int(history.eval_steps[-1]), history.train_loss.size
    (0.85, 3, 3)

    ```
    """

    train_loss: np.ndarray
    eval_steps: np.ndarray
    eval_loss: np.ndarray

    @property
    def final_eval_loss(self) -> float:
        """The held-out loss after the last step."""
        return float(self.eval_loss[-1])


def make_schedule(config: TrainConfig) -> optax.Schedule:
    """The learning rate per step: linear warm-up from 0 to `learning_rate` over `warmup_steps`,
    then cosine decay to `final_lr_fraction · learning_rate` at step `steps`
    (:func:`optax.warmup_cosine_decay_schedule`).

    **Raises:** nothing of its own: the values of `config` were checked when the :class:`TrainConfig` was built (a
    `config` that is not one fails with ``AttributeError``).

    Source: Loshchilov & Hutter, "SGDR", arXiv:1608.03983 (cosine decay); linear warm-up as in Goyal et al.,
    arXiv:1706.02677; implemented by :func:`optax.warmup_cosine_decay_schedule`.

    **Example:** warm-up to the peak at step 2, half-way down the cosine at step 6, the floor at 10:

    ```python
    >>> from hassejax.nn import TrainConfig, make_schedule
    >>> schedule = make_schedule(TrainConfig(steps=10, learning_rate=1.0, warmup_steps=2, final_lr_fraction=0.1))
    >>> [round(float(schedule(step)), 6) for step in (0, 1, 2, 6, 10)]
    [0.0, 0.5, 1.0, 0.55, 0.1]

    ```
    """
    return optax.warmup_cosine_decay_schedule(
        init_value=0.0,
        peak_value=config.learning_rate,
        warmup_steps=config.warmup_steps,
        decay_steps=config.steps,
        end_value=config.final_lr_fraction * config.learning_rate,
    )


def make_optimizer(config: TrainConfig) -> optax.GradientTransformation:
    """Global-norm clipping, then AdamW with :func:`make_schedule` (weight decay on `ndim >= 2` only).

    **Raises:** nothing of its own: the values of `config` were checked when the :class:`TrainConfig` was built (a
    `config` that is not one fails with ``AttributeError``).

    Source: Loshchilov & Hutter, "Decoupled Weight Decay Regularization", arXiv:1711.05101 (AdamW); Pascanu et al.,
    "On the difficulty of training recurrent neural networks", arXiv:1211.5063 (clipping the gradient norm).

    **Example:** Adam's first step has size `learning_rate` along the gradient's sign; only the
    matrix `w` also decays, by ``learning_rate · weight_decay · w``:

    ```python
    >>> import jax, jax.numpy as jnp
    >>> from hassejax.nn import TrainConfig, make_optimizer
    >>> optimizer = make_optimizer(TrainConfig(steps=10, learning_rate=0.1, warmup_steps=0, weight_decay=0.5))
    >>> params = {"b": jnp.array([2.0]), "w": jnp.array([[2.0]])}
    >>> grads = {"b": jnp.array([1.0]), "w": jnp.array([[1.0]])}
    >>> updates, _ = jax.jit(optimizer.update)(grads, optimizer.init(params), params)
    >>> [round(float(updates[name].sum()), 4) for name in ("b", "w")]  # 4 digits: float32 gives -0.099999
    [-0.1, -0.2]

    ```
    """
    schedule = make_schedule(config)
    decay_mask = lambda params: jax.tree.map(lambda x: x.ndim >= 2, params)
    return optax.chain(
        optax.clip_by_global_norm(config.clip_norm),
        optax.adamw(schedule, weight_decay=config.weight_decay, mask=decay_mask),
    )


def _check_layout(layout) -> None:
    """Refuse a `layout` that is no :class:`~hassejax.nn.Layout` (a bare mask failed with an AttributeError)."""
    if not isinstance(layout, Layout):
        got = f"an array of shape {tuple(layout.shape)}" if hasattr(layout, "shape") else type(layout).__name__
        raise ParameterError(
            f"`layout` must be a hassejax.nn.Layout (e.g. causal_layout(n), or layout_from_task(task)): it carries the "
            f"mask with the slots' inputs, position ids and targets; got {got}."
        )


_NON_FINITE_LOSS = (
    "{what}: the loss is {value} (non-finite parameters of `model`, e.g. a NaN in `unembed`, or an overflowing "
    "forward pass); a non-finite loss is never passed on as a result."
)


def _finite_loss(loss, what: str):
    """`loss` unchanged where traced or finite; a :class:`~hassejax.errors.ParameterError` for a concrete NaN/inf."""
    if not is_traced(loss) and not np.isfinite(np.asarray(loss)):
        raise ParameterError(_NON_FINITE_LOSS.format(what=what, value=float(loss)))
    return loss


def _sequence_loss(model: Transformer, layout: Layout, sequence, check_ids: bool = True):
    # `sequence`'s range is checked by the caller (layout_loss), on the whole batch; `check_ids`: the model's checks
    logits = layout._logits(model, sequence, check_ids)
    logp = jax.nn.log_softmax(logits, axis=-1)
    tgt = layout.targets(sequence)
    nll = -jnp.take_along_axis(logp, tgt[:, None], axis=-1)[:, 0]
    return jnp.sum(jnp.where(layout.labelled, nll, 0.0))


def layout_loss(
    model: Transformer, layout: Layout, sequences: Int[Array, "batch n"], *, check_ids: bool = True
) -> Float[Array, ""]:
    """Mean cross-entropy (nats per predicted token) over the labelled slots of a batch.

    **Arguments:**

    - `model`: a :class:`~hassejax.nn.Transformer` with `num_positions` above the layout's
      largest position id.
    - `layout`: a :class:`~hassejax.nn.Layout` with at least one labelled slot.
    - `sequences`: int `(batch, n)`, token ids `0..V−1`, `n = layout.sequence_length`.
    - `check_ids`: default True: concrete `sequences` are checked on the host
      (:meth:`Layout.check_inputs`), traced ones (under ``jit``) by an :func:`equinox.error_if`
      on the range ``[0, V)`` (the model's mask token id `V` is not a sequence token) besides the
      model's own checks; these are host callbacks, which keep the program out of JAX's
      persistent compilation cache. False skips the check, for ids known valid (e.g. sampled
      inside ``jit``).

    **Returns:** a 0-d float array (``Σ NLL / (batch · labelled slots)``); vmapped over the batch.

    **Raises:** :class:`~hassejax.errors.ParameterError` for a `layout` that is no Layout, a batch of the wrong
    shape or a layout with no labelled slot; with `check_ids`, for non-integer `sequences` or ids out of
    ``[0, V)`` (concrete inputs; under ``jit``, a runtime error naming `sequences`); for a NaN/inf loss (non-finite
    parameters) when the loss is concrete (called outside ``jit``/``grad``; a traced loss is returned unchecked,
    as :func:`train` checks its own).

    Source: (derived) from spec hasse.md §2 (a task's labels `Y`: only labelled slots carry a target) and §3 (the
    layouts trained on).

    **Example:** a model whose logits are all 0 predicts uniformly: `log 3` nats per token; the
    mask token id 3 is no sequence token.

    ```python
    >>> import equinox as eqx, jax, jax.numpy as jnp
    >>> from hassejax.nn import Transformer, causal_layout, layout_loss
    >>> model = Transformer(1, 8, 2, vocab_size=3, num_positions=5, key=jax.random.key(0))
    >>> uniform = eqx.tree_at(lambda m: m.unembed, model, jnp.zeros_like(model.unembed))
    >>> float(layout_loss(uniform, causal_layout(4), jnp.array([[0, 1, 2, 0], [1, 2, 0, 1]])))  # log 3  # doctest: +ELLIPSIS
    1.098612...
    >>> layout_loss(model, causal_layout(4), jnp.array([[0, 1, 3, 0]]))
    Traceback (most recent call last):
    ...
    hassejax.errors.ParameterError: `sequences` must hold token ids in [0, 3); got values in [0, 3].

    ```
    """
    _check_layout(layout)
    if not hasattr(sequences, "ndim"):  # nested lists (it failed with "'list' object has no attribute 'ndim'")
        sequences = np.asarray(sequences)
    if sequences.ndim != 2 or sequences.shape[1] != layout.sequence_length or sequences.shape[0] == 0:
        raise ParameterError(
            f"`sequences` must have shape (batch, {layout.sequence_length}) with batch >= 1 for layout {layout.name!r} "
            f"(an empty batch has no mean loss); got {tuple(sequences.shape)}."
        )
    count = jnp.sum(layout.labelled)
    if not is_traced(count) and int(count) == 0:
        raise ParameterError(f"`layout` {layout.name!r} has no labelled slot: there is nothing to train on.")
    if check_ids and not is_traced(sequences, layout.position_ids):
        layout.check_inputs(model, sequences)  # on the host: the vmapped model need not check
        check_ids = False
    elif check_ids:
        # the model's check admits its mask token id V, which as a target would index past the V logits (NaN):
        # sequences get their own check of [0, V) (traced: an eqx.error_if), the model still checks position ids
        sequences = _checked_token_ids(sequences, model.vocab_size, "sequences")
    per_seq = jax.vmap(_sequence_loss, in_axes=(None, None, 0, None))(model, layout, sequences, check_ids)
    return _finite_loss(jnp.sum(per_seq) / (sequences.shape[0] * count), "layout_loss")


@eqx.filter_jit
def _evaluate(model: Transformer, layout: Layout, sequences):
    return layout_loss(model, layout, sequences, check_ids=False)  # checked on the host by the caller


def evaluate(model: Transformer, layout: Layout, sequences: Int[Array, "batch n"]) -> Float[Array, ""]:
    """Held-out loss: :func:`layout_loss` under :func:`equinox.filter_jit` (no gradients).

    Concrete `sequences` are checked on the host (:meth:`Layout.check_inputs`) before the jitted
    program, which holds no host callback (so JAX's persistent compilation cache keeps it);
    under the caller's ``jit`` the model's :func:`equinox.error_if` check stays.

    **Arguments:** as :func:`layout_loss`.

    **Returns:** a 0-d float array, the mean cross-entropy over the labelled slots.

    **Raises:** :class:`~hassejax.errors.ParameterError` as :func:`layout_loss` (ids out of
    range: naming `sequences`, or `layout` for position ids the model lacks, or a `layout` that is no Layout), and
    for a NaN/inf loss (non-finite parameters of `model`), checked on the host outside the caller's ``jit``.

    Source: (derived).

    **Example:**

    >>> import jax, jax.numpy as jnp
    >>> from hassejax.nn import Transformer, causal_layout, evaluate
    >>> model = Transformer(1, 8, 2, vocab_size=3, num_positions=5, key=jax.random.key(0))
    >>> float(evaluate(model, causal_layout(4), jnp.asarray([[0, 1, 2, 0], [2, 2, 1, 0]]))) > 0
    True
    """
    _check_layout(layout)
    if not hasattr(sequences, "ndim"):  # nested lists: as layout_loss takes them
        sequences = np.asarray(sequences)
    if is_traced(sequences, *jax.tree.leaves(layout)):
        return layout_loss(model, layout, sequences)
    layout.check_inputs(model, sequences)
    return _finite_loss(_evaluate(model, layout, sequences), "evaluate")


@eqx.filter_jit
def _train_chunk(model, opt_state, keys, layout, sample, optimizer):
    params, static = eqx.partition(model, eqx.is_inexact_array)

    def step(carry, key):
        params, opt_state = carry
        batch = sample(key)
        # no eqx.error_if (a host callback: the program would never be cached); a flag per step
        # instead, checked on the host after the chunk
        bad = jnp.any((batch < 0) | (batch >= model.vocab_size))
        loss_fn = lambda p: layout_loss(eqx.combine(p, static), layout, batch, check_ids=False)
        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), (loss, bad)

    (params, opt_state), (losses, bad) = jax.lax.scan(step, (params, opt_state), keys)
    return eqx.combine(params, static), opt_state, losses, bad


def _check_sampled(bad: np.ndarray, start: int, vocab_size: int) -> None:
    """Stop a run whose `sample` returned token ids outside ``[0, vocab_size)``."""
    hit = np.flatnonzero(bad)
    if hit.size:
        raise ParameterError(
            f"`sample` must return token ids in [0, {vocab_size}); it returned an id outside at step "
            f"{start + int(hit[0])}."
        )


def _check_finite(losses: np.ndarray, start: int) -> np.ndarray:
    """Stop a diverged run: never pass a NaN loss or model on as a result."""
    bad = np.flatnonzero(~np.isfinite(losses))
    if bad.size:
        raise ParameterError(
            f"training diverged: non-finite loss at step {start + int(bad[0])}; lower `learning_rate` or `clip_norm`."
        )
    return losses


def train(
    model: Transformer,
    layout: Layout,
    sample: Callable[[PRNGKeyArray], Int[Array, "batch n"]],
    config: TrainConfig,
    *,
    key: PRNGKeyArray,
    held_out: Int[Array, "m n"],
    callback: Callable[[int, float], None] | None = None,
) -> tuple[Transformer, TrainHistory]:
    """Train `model` on `layout` with AdamW (:func:`make_optimizer`), reporting held-out loss.

    **Arguments:**

    - `model`: the initial :class:`~hassejax.nn.Transformer`.
    - `layout`: the training :class:`~hassejax.nn.Layout` (its labelled slots carry the loss).
    - `sample`: a jittable function ``key -> int (config.batch_size, n)`` of training
      sequences, e.g. ``lambda k: chain.sample(k, 64, n)`` (fresh data every step).
    - `config`: a :class:`TrainConfig`.
    - `key`: `jax.random` key for the training data.
    - `held_out`: int `(m, n)` held-out sequences (never trained on).
    - `callback`: optional ``(step, held_out_loss) -> None`` after each evaluation.

    **Returns:** `(trained model, TrainHistory)`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for a `layout` that is no Layout (e.g. its bare mask), if
    `sample` returns the wrong shape,
    for `held_out` ids out of range (checked on the host), or as :func:`layout_loss`; the run
    stops with a ParameterError if the loss becomes non-finite (never a NaN result) or `sample`
    returns a token id outside ``[0, vocab_size)`` (flagged inside the jitted chunk, no host
    callback).

    Source: Loshchilov & Hutter, arXiv:1711.05101 (AdamW, :func:`make_optimizer`); spec hasse.md §3 (the training
    layouts); the chunked loop and its checks are (derived).

    **Example:** three steps on the cycle `0 → 1 → 2 → 0` (a fresh batch of 8 every step): the
    loss is finite and the held-out loss went down.

    ```python
    >>> import jax, jax.numpy as jnp, numpy as np
    >>> from hassejax.nn import Transformer, TrainConfig, causal_layout, train
    >>> model = Transformer(1, 8, 2, vocab_size=3, num_positions=5, key=jax.random.key(0))
    >>> sample = lambda k: (jax.random.randint(k, (8, 1), 0, 3) + jnp.arange(4)) % 3
    >>> config = TrainConfig(steps=3, batch_size=8, learning_rate=0.05, warmup_steps=0, eval_every=3)
    >>> held_out = (jnp.arange(2)[:, None] + jnp.arange(4)) % 3
    >>> steps = []
    >>> trained, history = train(model, causal_layout(4), sample, config, key=jax.random.key(1), held_out=held_out,
    ...                          callback=lambda step, loss: steps.append(step))
    >>> steps, bool(np.isfinite(history.train_loss).all()), bool(history.eval_loss[-1] < history.eval_loss[0])
    ([0, 3], True, True)

    ```
    """
    _check_layout(layout)
    if not np.any(np.asarray(layout.labelled)):
        raise ParameterError(f"`layout` {layout.name!r} has no labelled slot: there is nothing to train on.")
    expect = (config.batch_size, layout.sequence_length)
    got = jax.eval_shape(sample, key)
    if tuple(got.shape) != expect or not jnp.issubdtype(got.dtype, jnp.integer):
        raise ParameterError(
            f"`sample` must return an int array of shape {expect}; it returns {got.dtype}{tuple(got.shape)}."
        )
    layout.check_inputs(model, held_out, "held_out")  # once, on the host: `_evaluate` skips it
    optimizer = make_optimizer(config)
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
    keys = jax.random.split(key, config.steps)
    losses, eval_steps, eval_loss = [], [0], [float(_finite_loss(_evaluate(model, layout, held_out), "train"))]
    if callback is not None:
        callback(0, eval_loss[0])
    done = 0
    while done < config.steps:
        size = min(config.eval_every, config.steps - done)
        chunk_keys = keys[done : done + size]
        model, opt_state, chunk, bad = _train_chunk(model, opt_state, chunk_keys, layout, sample, optimizer)
        done += size
        _check_sampled(np.asarray(bad), done - size, model.vocab_size)
        losses.append(_check_finite(np.asarray(chunk), done - size))
        eval_steps.append(done)
        eval_loss.append(float(_finite_loss(_evaluate(model, layout, held_out), "train")))
        if callback is not None:
            callback(done, eval_loss[-1])
    return model, TrainHistory(np.concatenate(losses), np.asarray(eval_steps), np.asarray(eval_loss))
