"""A pre-norm Transformer that consumes any mask, with position ids separate from slot order.

The model maps slot inputs to logits in three exposed stages:

1. :meth:`Transformer.embed`: token embedding (a weighted average of several token
   embeddings per slot, so a Butterfly centre slot can hold ``(w_{k−1} + w_{k+1}) / 2``) plus a
   learned embedding of the slot's **position id** — any integer, independent of where the
   slot sits in the layout (spec hasse.md §0);
2. :meth:`Transformer.forward_embeddings`: `L` pre-norm blocks and a final LayerNorm, from
   embeddings `(n, d)` to outputs `(n, d)` under a mask `(n, n)`; this is the map whose
   Jacobian :func:`hassejax.nn.jacobian_flow` measures;
3. :meth:`Transformer.unembed_logits`: a linear read-out to `vocab_size` logits.

Token id ``vocab_size`` (:attr:`Transformer.mask_id`) is the learned mask token of the
two-stream layouts; ids ``0 .. vocab_size − 1`` are sequence tokens, the only ones predicted.
Per-position parts (LayerNorm, MLP) add no edges, so the flow of `L` blocks under mask `M` is
``R^(L) = (M | I)^L`` (spec §1.1–1.2, §4).

Source: Li & Guo, arXiv:2606.09951 (paper); spec hasse.md §1, §4; pre-norm blocks after
Xiong et al., "On Layer Normalization in the Transformer Architecture", ICML 2020.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from .._tracing import is_traced
from ..errors import ParameterError
from ..masks import IntervalMask
from .attention import (
    MaskedMultiHeadAttention,
    NestedMask,
    _attention_mask,
    _check_float_dtype,
    _check_key,
    _check_positive_int,
    _normal_tensors,
)

__all__ = ["TransformerBlock", "Transformer"]

#: Token or position ids given as (nested) lists or tuples of ints: the model reads them as a JAX array.
NestedIds = Sequence[Any]


def _check_id_range(ids, upper: int, name: str) -> None:
    """Host check that concrete integer `ids` lie in ``[0, upper)``.

    **Raises:** :class:`~hassejax.errors.ParameterError` naming `name` and the range found.
    """
    arr = np.asarray(ids)
    if arr.size and (arr.min() < 0 or arr.max() >= upper):
        raise ParameterError(f"`{name}` must hold ids in [0, {upper}); got values in [{arr.min()}, {arr.max()}].")


def _check_d_model(d_model) -> int:
    """`d_model` as an int >= 2: a LayerNorm over one feature subtracts the feature's own mean, so it returns its bias
    whatever the input; every block and the final norm would then be constant (no flow at all, not even the
    diagonal). Two features suffice (the flow is ``R^(L)``)."""
    d_model = _check_positive_int(d_model, "d_model")
    if d_model < 2:
        raise ParameterError(
            "`d_model` must be >= 2 for a pre-norm Transformer: a LayerNorm over one feature returns its bias whatever "
            f"the input, so the model would be constant (its Jacobian flow all False); got {d_model}."
        )
    return d_model


_VMAP_HINT = (
    " A batch of b sequences (b, n): map the model over it, jax.vmap(model, in_axes=(0, None, None)) "
    "(in_axes=(0, 0, None) with one row of position ids per sequence)."
)


def _layer_norm(norm: eqx.nn.LayerNorm, x: Float[Array, "n d"]) -> Float[Array, "n d"]:
    return jax.vmap(norm)(x)


class TransformerBlock(eqx.Module):
    """One pre-norm block: ``x + Attn(LN(x), mask)``, then ``x + MLP(LN(x))`` (per position).

    The MLP is ``W_2 gelu(W_1 h + b_1) + b_2`` applied to each position alone.

    **Arguments:** `d_model` (at least 2), `num_heads`, `mlp_width` (hidden width of the MLP), `key`,
    `dtype` (floating).

    **Raises:** :class:`~hassejax.errors.ParameterError` for bad sizes (`d_model < 2`: a LayerNorm
    over one feature is constant), a non-floating `dtype` (or float64 without ``jax_enable_x64``) or a `key` that is
    no PRNG key.

    Source: Vaswani et al., "Attention Is All You Need", arXiv:1706.03762 (paper); pre-norm after Xiong et al.,
    arXiv:2002.04745; LayerNorm: Ba et al., arXiv:1607.06450; GELU: Hendrycks & Gimpel, arXiv:1606.08415; spec
    hasse.md §1.1 (per-position parts add no edges) and §4.

    **Example:** under a causal mask a row does not depend on later rows, but does on earlier ones.

    ```python
    >>> import jax, jax.numpy as jnp
    >>> from hassejax.nn import TransformerBlock
    >>> block = TransformerBlock(4, 2, 8, key=jax.random.key(0))
    >>> x, causal = jax.random.normal(jax.random.key(1), (3, 4)), jnp.tril(jnp.ones((3, 3), bool))
    >>> y = block(x, causal)
    >>> y.shape, bool(jnp.allclose(block(x.at[2].set(5.0), causal)[:2], y[:2]))
    ((3, 4), True)
    >>> bool(jnp.allclose(block(x.at[0].set(5.0), causal)[2], y[2]))
    False

    ```
    """

    attention_norm: eqx.nn.LayerNorm
    attention: MaskedMultiHeadAttention
    mlp_norm: eqx.nn.LayerNorm
    mlp_in: Float[Array, "width d"]
    mlp_in_bias: Float[Array, " width"]
    mlp_out: Float[Array, "d width"]
    mlp_out_bias: Float[Array, " d"]

    def __init__(self, d_model: int, num_heads: int, mlp_width: int, *, key: PRNGKeyArray, dtype=None):
        d_model = _check_d_model(d_model)
        mlp_width = _check_positive_int(mlp_width, "mlp_width")
        dtype = _check_float_dtype(dtype)
        _check_key(key)
        ka, km = jax.random.split(key)
        self.attention_norm = eqx.nn.LayerNorm(d_model, dtype=dtype)
        self.attention = MaskedMultiHeadAttention(d_model, num_heads, key=ka, dtype=dtype)
        self.mlp_norm = eqx.nn.LayerNorm(d_model, dtype=dtype)
        shapes = ((mlp_width, d_model), (d_model, mlp_width), (mlp_width,), (d_model,))
        scales = (1 / math.sqrt(d_model), 1 / math.sqrt(mlp_width), 0.1, 0.1)
        self.mlp_in, self.mlp_out, self.mlp_in_bias, self.mlp_out_bias = _normal_tensors(km, shapes, dtype, scales)

    def __call__(
        self, x: Float[Array, "n d"], mask: Bool[Array, "n n"] | Bool[Array, "heads n n"] | IntervalMask | NestedMask
    ) -> Float[Array, "n d"]:
        """`x` `(n, d)` and `mask` `(n, n)` or `(heads, n, n)` (one mask per head; True = may
        attend; an :class:`~hassejax.masks.IntervalMask` or nested lists of bools taken too) to the block's output
        `(n, d)`. One sequence a call (a batch: :func:`jax.vmap`)."""
        x = x + self.attention(_layer_norm(self.attention_norm, x), mask)
        h = jax.nn.gelu(_layer_norm(self.mlp_norm, x) @ self.mlp_in.T + self.mlp_in_bias)
        return x + h @ self.mlp_out.T + self.mlp_out_bias


class Transformer(eqx.Module):
    """A pre-norm Transformer over slots with explicit position ids and any attention mask.

    **Arguments:**

    - `num_layers`: number of blocks `L >= 1`.
    - `d_model`: residual width `d >= 2` (a LayerNorm over one feature is constant: the model would
      ignore its input).
    - `num_heads`: heads per attention layer (must divide `d_model`).
    - `vocab_size`: number of sequence tokens `V` (ids `0..V−1`, the logits' size); id `V` is
      the mask token (:attr:`mask_id`), so the token table has `V + 1` rows.
    - `num_positions`: number of position ids (ids `0..num_positions−1`; the task layouts use
      1-based positions, so `num_positions >= n + 1`).
    - `key`: a `jax.random` key (``jax.random.key(0)``, or a legacy ``jax.random.PRNGKey(0)``).
    - `mlp_ratio`: MLP hidden width as a multiple of `d_model` (default 4).
    - `dtype`: parameter dtype, a floating dtype (default: JAX's default float dtype).

    Sizes are Python or NumPy integers (not bools).

    Fields: `token_embedding` `(V + 1, d)`, `position_embedding` `(num_positions, d)`, `blocks`
    (one :class:`TransformerBlock` whose parameters are stacked on a leading layer axis `(L, …)`
    and run by :func:`jax.lax.scan`, so the compiled code does not grow with `L`), `final_norm`,
    `unembed` `(V, d)`. The mask is never a field: every call takes it as an argument, either
    `(n, n)` (every head of every layer) or `(num_heads, n, n)` (head `h` of every layer uses
    ``mask[h]``; a layer's flow is then the union of its heads' masks, so `L` blocks give
    ``reachability(mask, L, head_axis=0)``). A fully masked mask row gives a zero attention
    update in every layer (:func:`masked_softmax`).

    **Raises:** :class:`~hassejax.errors.ParameterError` for a size that is not a positive int, a
    `d_model < 2`, a head count that does not divide `d_model`, a `dtype` that is not floating
    (an integer model truncated its weights and failed at its first call) or is float64 while JAX's 64-bit mode
    (``jax_enable_x64``) is off (JAX would build a float32 model), or a `key` that is no PRNG key.

    **Example:** logits `(slots, vocab_size)`; under a causal mask slot 0 ignores the later tokens.

    ```python
    >>> import jax, jax.numpy as jnp
    >>> from hassejax.nn import Transformer
    >>> model = Transformer(2, 8, 2, vocab_size=3, num_positions=5, key=jax.random.key(0))
    >>> model.num_layers, model.mask_id, model.token_embedding.shape
    (2, 3, (4, 8))
    >>> ids, positions, causal = jnp.array([0, 2, 1]), jnp.array([1, 2, 3]), jnp.tril(jnp.ones((3, 3), bool))
    >>> logits = model(ids, positions, causal)
    >>> logits.shape, bool(jnp.allclose(model(ids.at[2].set(0), positions, causal)[0], logits[0]))
    ((3, 3), True)

    ```

    Source: spec hasse.md §0 (position ids separate from slots), §4 (a model that consumes any mask).
    """

    token_embedding: Float[Array, "vocab_plus_one d"]
    position_embedding: Float[Array, "positions d"]
    blocks: TransformerBlock
    final_norm: eqx.nn.LayerNorm
    unembed: Float[Array, "vocab d"]
    vocab_size: int = eqx.field(static=True)
    num_positions: int = eqx.field(static=True)

    def __init__(
        self,
        num_layers: int,
        d_model: int,
        num_heads: int,
        vocab_size: int,
        num_positions: int,
        *,
        key: PRNGKeyArray,
        mlp_ratio: int = 4,
        dtype=None,
    ):
        num_layers = _check_positive_int(num_layers, "num_layers")
        d_model = _check_d_model(d_model)
        num_heads = _check_positive_int(num_heads, "num_heads")
        vocab_size = _check_positive_int(vocab_size, "vocab_size")
        num_positions = _check_positive_int(num_positions, "num_positions")
        mlp_ratio = _check_positive_int(mlp_ratio, "mlp_ratio")
        dtype = _check_float_dtype(dtype)
        _check_key(key)
        ke, kb = jax.random.split(key)
        shapes = ((vocab_size + 1, d_model), (num_positions, d_model), (vocab_size, d_model))
        emb = _normal_tensors(ke, shapes, dtype, (1.0, 1.0, 1 / math.sqrt(d_model)))
        self.token_embedding, self.position_embedding, self.unembed = emb
        layers = [
            TransformerBlock(d_model, num_heads, mlp_ratio * d_model, key=jax.random.fold_in(kb, i), dtype=dtype)
            for i in range(num_layers)
        ]
        # parameters stacked on a leading layer axis (for jax.lax.scan), stacked on the host
        self.blocks = jax.tree.map(lambda *xs: jnp.asarray(np.stack([np.asarray(x) for x in xs])), *layers)
        self.final_norm = eqx.nn.LayerNorm(d_model, dtype=dtype)
        self.vocab_size = vocab_size
        self.num_positions = num_positions

    @property
    def mask_id(self) -> int:
        """Token id of the learned mask token (``vocab_size``)."""
        return self.vocab_size

    @property
    def num_layers(self) -> int:
        """Number of blocks `L`."""
        return self.blocks.attention.query_weight.shape[0]

    @property
    def num_heads(self) -> int:
        """Heads per attention layer (the leading axis of a per-head mask)."""
        return self.blocks.attention.num_heads

    @property
    def d_model(self) -> int:
        """Residual width `d`."""
        return self.token_embedding.shape[1]

    def _check_ids(self, ids, upper: int, name: str, check_range: bool = True):
        # the dtype check is free (trace time); the range check of traced ids is an
        # `eqx.error_if`, i.e. a host callback, which keeps the program out of JAX's persistent
        # compilation cache: the package's own jitted code checks on the host and skips it
        dtype = jnp.result_type(ids) if hasattr(ids, "dtype") else np.asarray(ids).dtype
        if not jnp.issubdtype(dtype, jnp.integer):
            raise ParameterError(f"`{name}` must be integer ids (e.g. int32); got dtype {dtype}.")
        if not check_range:
            return ids
        if is_traced(ids):
            bad = jnp.any((ids < 0) | (ids >= upper))
            return eqx.error_if(ids, bad, f"`{name}` holds an id outside [0, {upper}).")
        _check_id_range(ids, upper, name)
        return ids

    @staticmethod
    def _as_ids(ids, name: str):
        """`ids` given as (nested) lists or tuples as a JAX array (as :func:`~hassejax.nn.jacobian_flow` takes a
        nested-list mask); ragged lists are a :class:`~hassejax.errors.ParameterError` naming `name`."""
        if not isinstance(ids, (list, tuple)):
            return ids
        try:
            return jnp.asarray(ids)
        except (ValueError, TypeError):
            raise ParameterError(
                f"`{name}` must be an integer array (or nested lists of one shape); got ragged lists."
            ) from None

    @staticmethod
    def _check_token_weights(token_weights, shape: tuple[int, ...]):
        """`token_weights` as an array of `shape` (that of `token_ids`), or of its rank with axes of size 1 that
        broadcast to it (one weight for all of a slot's ids, as before the check), of real or Boolean entries (static
        checks: they work on tracers); else a :class:`~hassejax.errors.ParameterError` naming it and the shape."""
        if not hasattr(token_weights, "shape"):
            token_weights = jnp.asarray(token_weights)
        dtype = token_weights.dtype
        got = tuple(token_weights.shape)
        fits = len(got) == len(shape) and all(g in (1, s) for g, s in zip(got, shape))
        if not fits or not any(jnp.issubdtype(dtype, kind) for kind in (jnp.floating, jnp.integer, jnp.bool_)):
            raise ParameterError(
                f"`token_weights` must be a real array of the shape of `token_ids`, {tuple(shape)} (one weight per "
                f"token id; axes of size 1 broadcast); got shape {got}, dtype {dtype}."
            )
        if not is_traced(token_weights) and not np.all(np.isfinite(np.asarray(token_weights, dtype=np.float64))):
            raise ParameterError("`token_weights` must be finite; got NaN/inf entries (they spread to the logits).")
        return token_weights

    def embed(
        self,
        token_ids: Int[Array, " n *r"] | NestedIds,
        position_ids: Int[Array, " n"] | NestedIds,
        token_weights: Float[Array, " n *r"] | None = None,
        *,
        check_ids: bool = True,
    ) -> Float[Array, "n d"]:
        """Slot embeddings: ``Σ_r token_weights[s, r] · E[token_ids[s, r]] + P[position_ids[s]]``.

        **Arguments:**

        - `token_ids`: int `(n,)` (one token per slot) or `(n, r)` (a weighted average of `r`
          token embeddings per slot, `token_weights` required); ids in `[0, vocab_size]`, `vocab_size` = mask token.
          One sequence a call: a batch `(b, n)` is refused (it would read as `b` slots of `n` averaged ids, silently
          so when `b == n`); map the model over it with :func:`jax.vmap`.
        - `position_ids`: int `(n,)`, ids in `[0, num_positions)`; independent of slot order.
        - Both id arguments may be (nested) lists or tuples of ints, read as JAX arrays.
        - `token_weights`: float, same shape as `token_ids` (axes of size 1 broadcast); default 1 for `(n,)` ids;
          required for `(n, r)` ids (e.g. ``jnp.full((n, r), 1 / r)`` for the plain average; a
          :class:`~hassejax.nn.Layout` gives its own).
        - `check_ids`: default True; False skips the range check for ids known valid (e.g.
          sampled inside ``jit``, or checked on the host before entering it). Under ``jit`` the
          check is an :func:`equinox.error_if`, a host callback, and JAX never writes a program
          holding a callback to its persistent compilation cache. Out-of-range ids are then
          not caught (gathers clamp them).

        **Returns:** float `(n, d)`.

        **Raises:** :class:`~hassejax.errors.ParameterError` for non-integer ids, `(n, r)` ids without
        `token_weights` (a batch of sequences: use :func:`jax.vmap`), `position_ids`
        not of shape `(n,)`, `token_ids` and `position_ids` of different lengths, `token_weights` of another shape than `token_ids`
        (axes of size 1 broadcast), not real numbers or (concrete) not finite, and with `check_ids` for ids out of range
        (concrete inputs; traced ids, under ``jit``, get an :func:`equinox.error_if` check that
        fails when the program runs).
        """
        token_ids = self._as_ids(token_ids, "token_ids")
        position_ids = self._as_ids(position_ids, "position_ids")
        shape = jnp.shape(token_ids)
        if len(shape) not in (1, 2):  # (n,) or (n, r); (n, r, s) embedded to a wrong shape (a fresh user)
            raise ParameterError(
                f"`token_ids` must have shape (n,), or (n, r) with `token_weights` (r ids averaged into a slot); got "
                f"shape {shape}.{_VMAP_HINT}"
            )
        if (
            len(shape) == 2 and token_weights is None
        ):  # a (b, n) batch read as b slots of n averaged ids (b == n: silent)
            raise ParameterError(
                f"`token_ids` of shape {shape} reads as {shape[0]} slots of {shape[1]} averaged ids, which needs "
                f"`token_weights` of that shape (e.g. jnp.full({shape}, 1 / {shape[1]}) for the plain average); the "
                f"model takes one sequence a call: `token_ids` (n,), or (n, r) with `token_weights`.{_VMAP_HINT}"
            )
        if jnp.ndim(position_ids) != 1:  # (n, r) or (n, n) ids gathered to (n, r, d): a shape error naming `x`
            raise ParameterError(
                f"`position_ids` must have shape (n,) = ({shape[0]},), one position id per slot of `token_ids` "
                f"(shape {shape}); got shape {jnp.shape(position_ids)}.{_VMAP_HINT}"
            )
        token_ids = self._check_ids(token_ids, self.vocab_size + 1, "token_ids", check_ids)
        position_ids = self._check_ids(position_ids, self.num_positions, "position_ids", check_ids)
        if token_ids.shape[0] != position_ids.shape[0]:
            raise ParameterError(
                f"`token_ids` and `position_ids` must have one entry per slot; got {token_ids.shape[0]} and {position_ids.shape[0]}."
            )
        if token_weights is not None:
            token_weights = self._check_token_weights(token_weights, token_ids.shape)
        table = self.token_embedding[token_ids]
        if token_ids.ndim == 1:
            tok = table if token_weights is None else token_weights[:, None].astype(table.dtype) * table
        else:
            if token_weights is None:
                tok = jnp.mean(table, axis=1)
            else:
                tok = jnp.einsum("nr,nrd->nd", token_weights.astype(table.dtype), table)
        return tok + self.position_embedding[position_ids]

    def forward_embeddings(
        self, x: Float[Array, "n d"], mask: Bool[Array, "n n"] | Bool[Array, "heads n n"] | IntervalMask | NestedMask
    ) -> Float[Array, "n d"]:
        """The `L` blocks and the final LayerNorm: embeddings `(n, d)` to outputs `(n, d)`.

        Output `i` depends on input `j` only if ``R^(L)[i, j]`` (spec hasse.md §1.2, §4); for a
        per-head mask `(num_heads, n, n)`, ``R^(L) = reachability(mask, L, head_axis=0)``, the
        powers of the union of the heads' masks (with the diagonal).

        **Arguments:**

        - `x`: float `(n, d)`, embeddings (e.g. from :meth:`embed`).
        - `mask`: bool `(n, n)` for every head, or `(num_heads, n, n)`, one mask per head (the
          same in every layer); row = query, column = key, True = may attend. An
          :class:`~hassejax.masks.IntervalMask` (made dense) or nested lists of bools are taken too.

        **Returns:** float `(n, d)`.

        **Raises:** :class:`~hassejax.errors.MaskError` if `mask` is not bool, or of a shape
        other than `(n, n)` and `(num_heads, n, n)`; :class:`~hassejax.errors.ParameterError` if `x`
        is not a floating `(n, d_model)` array, `n >= 1`, of the parameters' dtype (a bfloat16 `x` into a float32
        model: cast it first), or, for a concrete `x` (not under ``jit``), has NaN/inf entries or a row whose LayerNorm
        variance overflows the dtype (e.g. entries of 1e20 in float32: the row would normalise to a constant and the
        output silently lose it).

        **Example:**

        ```python
        >>> import jax, jax.numpy as jnp
        >>> from hassejax.nn import Transformer
        >>> model = Transformer(2, 8, 2, vocab_size=3, num_positions=4, key=jax.random.key(0))
        >>> per_head = jnp.stack([jnp.eye(4, k=-1, dtype=bool), jnp.eye(4, k=1, dtype=bool)])
        >>> model.forward_embeddings(jnp.ones((4, 8)), per_head).shape
        (4, 8)

        ```
        """
        self._check_embeddings(x, "x")
        mask = _attention_mask(mask, x.shape[0], num_heads=self.num_heads)
        params, static = eqx.partition(self.blocks, eqx.is_array)

        def layer(x, p):
            return eqx.combine(p, static)(x, mask), None

        x, _ = jax.lax.scan(layer, x, params)  # one compiled block body, whatever L is
        return _layer_norm(self.final_norm, x)

    def _check_embeddings(self, x, name: str = "x") -> None:
        """Raise :class:`~hassejax.errors.ParameterError` unless `x` is a floating `(n, d_model)` array of the
        parameters' dtype (static checks: they work on tracers) and, when concrete, finite, with no row whose squared
        deviations from its mean sum past the dtype's maximum (LayerNorm's variance would be inf: the row would
        normalise to a constant, silently); `name` labels it in the message."""
        dtype = self.final_norm.weight.dtype
        shape = tuple(getattr(x, "shape", ()))
        floating = jnp.issubdtype(getattr(x, "dtype", None), jnp.floating)
        if len(shape) != 2 or shape[1] != self.d_model or shape[0] == 0 or not floating:
            got = f"shape {shape} dtype {getattr(x, 'dtype', None)}" if hasattr(x, "shape") else type(x).__name__
            raise ParameterError(f"`{name}` must be a floating array of shape (n, {self.d_model}), n >= 1; got {got}.")
        if x.dtype != dtype:
            raise ParameterError(
                f"`{name}` must have the model's parameter dtype {dtype}; got {x.dtype}: cast it first "
                f"(`{name}.astype(jnp.{dtype})`) or build the model with dtype={x.dtype}."
            )
        if not is_traced(x):  # concrete: a row whose LayerNorm variance overflows normalises to 0 (a constant output)
            arr = np.asarray(x, dtype=np.float64)
            if not np.all(np.isfinite(arr)):
                raise ParameterError(f"`{name}` must be finite; got NaN/inf entries (they spread to every output).")
            top = np.finfo(dtype).max
            with np.errstate(over="ignore"):
                spread = np.sum((arr - arr.mean(axis=1, keepdims=True)) ** 2, axis=1)
            if np.any(spread > top):
                row = int(np.argmax(spread))
                raise ParameterError(
                    f"`{name}` overflows the model's dtype {dtype} in LayerNorm: row {row}'s sum of squared deviations "
                    f"is {float(spread[row]):.3g} > {float(top):.3g} (entries up to {float(np.abs(arr).max()):.3g}), so "
                    "its variance is inf and the row normalises to a constant; rescale the embeddings."
                )

    def unembed_logits(self, h: Float[Array, "n d"]) -> Float[Array, "n vocab"]:
        """Read-out `(n, d) -> (n, vocab_size)` logits (per position)."""
        return h @ self.unembed.T

    def __call__(
        self,
        token_ids: Int[Array, " n *r"] | NestedIds,
        position_ids: Int[Array, " n"] | NestedIds,
        mask: Bool[Array, "n n"] | Bool[Array, "heads n n"] | IntervalMask | NestedMask,
        token_weights: Float[Array, " n *r"] | None = None,
        *,
        check_ids: bool = True,
    ) -> Float[Array, "n vocab"]:
        """Logits of every slot of one sequence (a batch: :func:`jax.vmap`, e.g.
        ``jax.vmap(model, in_axes=(0, None, None))(ids_bn, position_ids, mask)``).

        **Arguments:** as :meth:`embed` (`token_ids` `(n,)`, or `(n, r)` with `token_weights`;
        `check_ids=False` skips the range check for ids known
        valid, e.g. sampled inside ``jit``), and `mask` bool `(n, n)` or `(num_heads, n, n)`
        (one mask per head, see :meth:`forward_embeddings`; row = query slot, column = key
        slot, True = may attend; a fully masked row gets a zero attention update).

        **Returns:** float `(n, vocab_size)` logits.

        **Raises:** as :meth:`embed` and :meth:`forward_embeddings`, and a
        :class:`~hassejax.errors.ParameterError` for `token_ids` of no slot, or for NaN/inf logits (non-finite
        parameters, e.g. a NaN in `unembed`) when they are concrete; under ``jit``/``vmap``/``grad``, where the
        logits are traced, they are returned unchecked (a check there would be a host callback in the program;
        :func:`~hassejax.nn.evaluate`, :func:`~hassejax.nn.train` and :func:`~hassejax.nn.jacobian_flow` check their
        own results).
        """
        token_ids = self._as_ids(token_ids, "token_ids")
        if jnp.ndim(token_ids) >= 1 and jnp.shape(token_ids)[0] == 0:  # else the empty embeddings named `x`
            raise ParameterError(f"`token_ids` must hold at least one slot; got shape {jnp.shape(token_ids)}.")
        x = self.embed(token_ids, position_ids, token_weights, check_ids=check_ids)
        mask = _attention_mask(mask, x.shape[0], num_heads=self.num_heads, against="token_ids")
        logits = self.unembed_logits(self.forward_embeddings(x, mask))
        if not is_traced(logits) and not bool(jnp.all(jnp.isfinite(logits))):
            raise ParameterError(
                "the model's logits have NaN/inf entries: non-finite parameters (e.g. a NaN in `unembed`) or an "
                "overflowing forward pass; they are not passed on as a result."
            )
        return logits
