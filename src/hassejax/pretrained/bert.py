"""Forward pass of a post-LayerNorm BERT encoder in JAX (all-MiniLM-L6-v2), with the tokens entering each layer.

Post-LayerNorm BERT (Devlin et al., arXiv:1810.04805; Hugging Face ``BertModel``), with
`LN` the LayerNorm over the hidden axis (biased variance, `eps` from the config), `m` the
padding mask (True at real tokens) and `W`, `b` in the ``nn.Linear`` convention
(`y = x Wᵀ + b`, see :class:`~hassejax.dynamics.real.loader.BertWeights`):

1. embeddings: `x⁰ = LN(E_word[id] + E_pos[position] + E_type[0])`;
2. layer `l = 0 … L−1`, with `x = xˡ`:

   - per head `h` (`d_head = d/H`; rows `h·d_head …` of `W_Q, W_K, W_V`):
     `q = x W_{Q,h}ᵀ + b_{Q,h}` (likewise `k`, `v`), scores `q kᵀ/√d_head` with
     padded keys set to the dtype's most negative number, softmax over keys,
     `ctx_h = softmax · v`;
   - `a = concat_h(ctx_h) W_Oᵀ + b_O`, `y = LN₁(x + a)`;
   - `f = GELU(y W₁ᵀ + b₁) W₂ᵀ + b₂` (exact, erf-based GELU), `xˡ⁺¹ = LN₂(y + f)`;

3. sentence embedding (sentence-transformers' pooling for this model): the mean of
   `x^L` over the real tokens, normalised to unit length.

The *particles of layer l* are the tokens `xˡ` entering layer `l` (`x⁰` = the embedding
output). :func:`hidden_states` returns all of them.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float, Int

from ...errors import ParameterError
from .loader import BertConfig, BertWeights

__all__ = ["BertEncoder", "layer_norm", "hidden_states", "mean_pool", "sentence_embeddings", "cosine_similarity"]


def layer_norm(x: Float[Array, "*batch d"], weight: Float[Array, " d"], bias: Float[Array, " d"], eps: float) -> Float[Array, "*batch d"]:
    """LayerNorm over the last axis: `(x − mean)/√(var + eps) · weight + bias` (biased variance)."""
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + eps) * weight + bias


class BertEncoder(eqx.Module):
    """The encoder's parameters as JAX arrays (layers stacked on a leading axis) and its forward pass.

    Build with :meth:`from_weights`; call ``encoder(ids, mask)`` for the hidden states.
    Field names and shapes as in :class:`~hassejax.dynamics.real.loader.BertWeights`.
    """

    word_embeddings: Float[Array, "V d"]
    position_embeddings: Float[Array, "P d"]
    token_type_embeddings: Float[Array, "T d"]
    embedding_ln: tuple[Float[Array, " d"], Float[Array, " d"]]
    layers: dict
    num_heads: int = eqx.field(static=True)
    eps: float = eqx.field(static=True)
    pad_token_id: int = eqx.field(static=True)

    @classmethod
    def from_weights(cls, weights: BertWeights, dtype=jnp.float32) -> BertEncoder:
        """Convert :class:`~hassejax.dynamics.real.loader.BertWeights` (NumPy) to an encoder in `dtype`."""
        if not isinstance(weights, BertWeights):
            raise ParameterError(f"`weights` must be a BertWeights (from load_weights); got {type(weights).__name__}.")
        c: BertConfig = weights.config
        cv = lambda a: jnp.asarray(a, dtype)  # noqa: E731
        names = (
            "query_weight", "query_bias", "key_weight", "key_bias", "value_weight", "value_bias",
            "output_weight", "output_bias", "attention_ln_weight", "attention_ln_bias",
            "intermediate_weight", "intermediate_bias", "ffn_output_weight", "ffn_output_bias",
            "output_ln_weight", "output_ln_bias",
        )
        return cls(
            word_embeddings=cv(weights.word_embeddings),
            position_embeddings=cv(weights.position_embeddings),
            token_type_embeddings=cv(weights.token_type_embeddings),
            embedding_ln=(cv(weights.embedding_ln_weight), cv(weights.embedding_ln_bias)),
            layers={n: cv(getattr(weights, n)) for n in names},
            num_heads=c.num_attention_heads,
            eps=c.layer_norm_eps,
            pad_token_id=c.pad_token_id,
        )

    def __init__(self, word_embeddings, position_embeddings, token_type_embeddings, embedding_ln, layers, num_heads, eps, pad_token_id=0):
        self.word_embeddings = word_embeddings
        self.position_embeddings = position_embeddings
        self.token_type_embeddings = token_type_embeddings
        self.embedding_ln = embedding_ln
        self.layers = layers
        self.num_heads = int(num_heads)
        self.eps = float(eps)
        self.pad_token_id = int(pad_token_id)

    @property
    def num_layers(self) -> int:
        """Number of encoder layers `L`."""
        return int(self.layers["query_weight"].shape[0])

    @property
    def d(self) -> int:
        """Hidden size `d`."""
        return int(self.word_embeddings.shape[1])

    def embed(self, ids: Int[Array, "S T"]) -> Float[Array, "S T d"]:
        """`x⁰ = LN(E_word[id] + E_pos[position] + E_type[0])` (token type 0 throughout: single sentences)."""
        t = ids.shape[-1]
        x = self.word_embeddings[ids] + self.position_embeddings[:t] + self.token_type_embeddings[0]
        return layer_norm(x, *self.embedding_ln, self.eps)

    def attention(self, p: dict, x: Float[Array, "S T d"], mask: Bool[Array, "S T"]) -> Float[Array, "S T d"]:
        """The attention sub-layer `a = concat_h(ctx_h) W_Oᵀ + b_O` (before the residual and LayerNorm).

        With every bias zero this is `Σ_h Σ_j softmax_j(x_jᵀA_h x_i) V_h x_j`, the multi-head
        velocity field of spec dynamics.md §1 at the head parameters of :mod:`.heads`.
        """
        s, t, d = x.shape
        h = self.num_heads
        k = d // h

        def split(z):  # (S, T, d) -> (S, H, T, k)
            return z.reshape(s, t, h, k).transpose(0, 2, 1, 3)

        q = split(x @ p["query_weight"].T + p["query_bias"])
        kk = split(x @ p["key_weight"].T + p["key_bias"])
        v = split(x @ p["value_weight"].T + p["value_bias"])
        scores = jnp.einsum("shik,shjk->shij", q, kk) / jnp.sqrt(jnp.asarray(k, x.dtype))
        scores = jnp.where(mask[:, None, None, :], scores, jnp.finfo(x.dtype).min)
        w = jax.nn.softmax(scores, axis=-1)
        ctx = jnp.einsum("shij,shjk->shik", w, v).transpose(0, 2, 1, 3).reshape(s, t, d)
        return ctx @ p["output_weight"].T + p["output_bias"]

    def layer(self, p: dict, x: Float[Array, "S T d"], mask: Bool[Array, "S T"]) -> Float[Array, "S T d"]:
        """One post-LN layer `xˡ ↦ xˡ⁺¹` with the parameters `p` of that layer (see module docstring)."""
        a = self.attention(p, x, mask)
        y = layer_norm(x + a, p["attention_ln_weight"], p["attention_ln_bias"], self.eps)
        f = jax.nn.gelu(y @ p["intermediate_weight"].T + p["intermediate_bias"], approximate=False)
        f = f @ p["ffn_output_weight"].T + p["ffn_output_bias"]
        return layer_norm(y + f, p["output_ln_weight"], p["output_ln_bias"], self.eps)

    def __call__(self, ids: Int[ArrayLike, "S T"], mask: Bool[ArrayLike, "S T"]) -> Float[Array, "L1 S T d"]:
        """Hidden states `x⁰, …, x^L` (shape `(L + 1, S, T, d)`); `xˡ` enters layer `l`.

        **Arguments:** `ids` `(S, T)` token ids; `mask` `(S, T)` True at real tokens.

        Padded positions are computed like the others (their values are meaningless and
        never attended to); select real tokens with `mask`.
        """
        ids = jnp.asarray(ids)
        mask = jnp.asarray(mask)
        x0 = self.embed(ids)

        def step(x, p):
            y = self.layer(p, x, mask)
            return y, y

        _, xs = jax.lax.scan(step, x0, self.layers)
        return jnp.concatenate([x0[None], xs], axis=0)


def _check_batch(ids, mask):
    ids = np.asarray(ids)
    mask = np.asarray(mask)
    if ids.ndim != 2 or mask.shape != ids.shape:
        raise ParameterError(f"`ids` and `mask` must both have shape (S, T); got {ids.shape} and {mask.shape}.")
    if mask.dtype != np.bool_:
        raise ParameterError(f"`mask` must be Boolean (True at real tokens); got dtype {mask.dtype}.")
    if not np.all(mask.any(axis=1)):
        raise ParameterError(f"`mask`: every sentence needs at least one real token; rows {np.flatnonzero(~mask.any(axis=1)).tolist()} are empty.")
    if not np.issubdtype(ids.dtype, np.integer):
        raise ParameterError(f"`ids` must be integer token ids; got dtype {ids.dtype}.")


@eqx.filter_jit
def _forward(encoder, ids, mask):
    return encoder(ids, mask)


def hidden_states(encoder: BertEncoder, ids: Int[ArrayLike, "S T"], mask: Bool[ArrayLike, "S T"]) -> Float[Array, "L1 S T d"]:
    """Jitted :meth:`BertEncoder.__call__` with input checks: the tokens entering every layer.

    **Raises:** :class:`~hassejax.errors.ParameterError` for mismatched shapes, a
    non-Boolean mask, a sentence without real tokens, ids out of the vocabulary, or more
    positions than the model has.
    """
    _check_batch(ids, mask)
    ids_np = np.asarray(ids)
    vocab = encoder.word_embeddings.shape[0]
    if ids_np.min() < 0 or ids_np.max() >= vocab:
        raise ParameterError(f"`ids` must lie in [0, {vocab}); got range [{ids_np.min()}, {ids_np.max()}].")
    if ids_np.shape[1] > encoder.position_embeddings.shape[0]:
        raise ParameterError(f"`ids` has {ids_np.shape[1]} positions; the model has {encoder.position_embeddings.shape[0]}.")
    return _forward(encoder, jnp.asarray(ids_np), jnp.asarray(mask))


def mean_pool(x: Float[ArrayLike, "S T d"], mask: Bool[ArrayLike, "S T"]) -> Float[Array, "S d"]:
    """Mean of the tokens of each sentence over its real tokens (sentence-transformers' mean pooling)."""
    x = jnp.asarray(x)
    m = jnp.asarray(mask, x.dtype)[..., None]
    return jnp.sum(x * m, axis=-2) / jnp.maximum(jnp.sum(m, axis=-2), 1e-9)


def sentence_embeddings(encoder: BertEncoder, ids: Int[ArrayLike, "S T"], mask: Bool[ArrayLike, "S T"]) -> Float[Array, "S d"]:
    """Unit-norm sentence embeddings: mean pooling of the last hidden state, then L2 normalisation.

    This is the sentence-transformers pipeline of all-MiniLM-L6-v2 (``modules.json``:
    Transformer → Pooling(mean) → Normalize).
    """
    e = mean_pool(hidden_states(encoder, ids, mask)[-1], mask)
    return e / jnp.linalg.norm(e, axis=-1, keepdims=True)


def cosine_similarity(a: Float[ArrayLike, "n d"], b: Float[ArrayLike, "m d"]) -> Float[Array, "n m"]:
    """Cosine similarities `⟨a_i, b_j⟩/(‖a_i‖‖b_j‖)`."""
    a = jnp.asarray(a)
    b = jnp.asarray(b)
    a = a / jnp.linalg.norm(a, axis=-1, keepdims=True)
    b = b / jnp.linalg.norm(b, axis=-1, keepdims=True)
    return a @ b.T
