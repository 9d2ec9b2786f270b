"""The real splash attention kernel (interpret=True, on the CPU) on exported masks, against dense masked attention."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.kernels import from_splash, tile_stats, to_splash
from hassejax.nn.attention import masked_softmax

splash_kernel = pytest.importorskip("jax.experimental.pallas.ops.tpu.splash_attention.splash_attention_kernel")
mask_lib = pytest.importorskip("jax.experimental.pallas.ops.tpu.splash_attention.splash_attention_mask")
mask_info_lib = pytest.importorskip("jax.experimental.pallas.ops.tpu.splash_attention.splash_attention_mask_info")

CASES = {
    # derived masks (their closed forms), one head each repeated over 2 heads
    "block_two_stream": (["block_two_stream_mask(n=128, block_size=16)"] * 2, 128),
    "butterfly": (["butterfly_mask(n=86)"] * 2, 128),
    # three gallery masks, one per head (splash needs tiles that are multiples of 128 lanes)
    "gallery_heads": (
        [
            "sliding_window(n=256, left=32) | attention_sinks(n=256, num=4)",
            "chunked_causal(n=256, chunk=64)",
            "document(segments=[100, 60, 96])",
        ],
        128,
    ),
}


def _dense_reference(dense, q, k, v):
    logits = jnp.einsum("hqd,hkd->hqk", q, k)  # splash applies no scale of its own
    return jnp.einsum("hqk,hkd->hqd", masked_softmax(logits, jnp.asarray(dense)), v)


@pytest.mark.parametrize("name", list(CASES))
def test_splash_kernel_matches_dense_masked_attention(name):
    specs, block = CASES[name]
    splash_mask = to_splash(specs)  # per-head input -> MultiHeadMask
    assert type(splash_mask).__name__ == "MultiHeadMask" and len(splash_mask.masks) == len(specs)
    dense = np.asarray(from_splash(splash_mask, form="dense"))
    heads, n, _ = dense.shape
    sizes = splash_kernel.BlockSizes(block_q=block, block_kv=block, block_kv_compute=block)
    kernel = splash_kernel.make_splash_mha(
        splash_mask, head_shards=1, q_seq_shards=1, block_sizes=sizes, interpret=True
    )
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    q, k, v = (jax.random.normal(key, (heads, n, 32), jnp.float32) for key in keys)
    out = kernel(q, k, v)
    np.testing.assert_allclose(np.asarray(out), np.asarray(_dense_reference(dense, q, k, v)), atol=1e-5)
    # the tile classes of the same mask agree with splash's own MaskInfo
    info, _ = mask_info_lib._process_mask(splash_mask, (block, block), is_dkv=False, shrink_grid=False)
    stats = tile_stats(from_splash(splash_mask, form="intervals"), block_size=(block, block))
    want = np.broadcast_to(np.asarray(info.block_mask), stats.kind.shape)
    np.testing.assert_array_equal(np.asarray(stats.kind), want)


def test_structured_export_keeps_splash_structure():
    assert type(to_splash("causal(n=256)")).__name__ == "CausalMask"
    local = to_splash("sliding_window(n=256, left=7, right=3)")
    assert type(local).__name__ == "LocalMask" and local.window_size == (7, 3) and local.offset == 0
    assert type(to_splash("chunked_causal(n=256, chunk=32)")).__name__ == "ChunkedCausalMask"
    assert type(to_splash("full(n=256)")).__name__ == "FullMask"
    both = to_splash("sliding_window(n=256, left=7) & chunked_causal(n=256, chunk=32)")
    assert type(both).__name__ == "LogicalAnd"
    # recognised from any form of the mask, not only from a spec
    from hassejax.masks import sliding_window, structured

    assert type(to_splash(structured.sliding_window(256, left=5))).__name__ == "LocalMask"
    assert type(to_splash(np.asarray(sliding_window(64, left=5, right=2)))).__name__ == "LocalMask"
    assert type(to_splash(structured.chunked_causal(256, 16))).__name__ == "ChunkedCausalMask"
    assert type(to_splash(structured.causal(256))).__name__ == "CausalMask"
