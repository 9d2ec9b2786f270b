"""BD3-LM block diffusion mask against the gallery's three-part rule (partial last block included)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hassejax.masks as M


def gallery_rule(n, B):
    """The mask gallery / attention-gym formula, slot by slot, over [x_t ; x_0]."""
    out = np.zeros((2 * n, 2 * n), dtype=bool)
    for q in range(2 * n):
        for k in range(2 * n):
            noisy_q, noisy_k = q < n, k < n
            blk_q, blk_k = (q % n) // B, (k % n) // B
            out[q, k] = (
                (blk_q == blk_k and noisy_q == noisy_k)
                or (blk_q > blk_k and noisy_q and not noisy_k)
                or (blk_q >= blk_k and not noisy_q and not noisy_k)
            )
    return out


@given(n=st.integers(1, 11), data=st.data())
@settings(max_examples=30)
def test_three_part_rule(n, data):
    B = data.draw(st.integers(1, n))
    mask = np.asarray(M.block_diffusion(n, B))
    assert mask.shape == (2 * n, 2 * n) and mask.dtype == np.bool_
    np.testing.assert_array_equal(mask, gallery_rule(n, B))


@pytest.mark.parametrize("n, B", [(5, 2), (7, 3), (6, 4), (4, 4), (3, 1)])
def test_quadrants(n, B):
    """Read the three parts back, by blocks of positions (partial last block when B does not divide n)."""
    mask = np.asarray(M.block_diffusion(n, B))
    noisy_noisy, noisy_clean = mask[:n, :n], mask[:n, n:]
    clean_noisy, clean_clean = mask[n:, :n], mask[n:, n:]
    blocks = [list(range(s, min(s + B, n))) for s in range(0, n, B)]
    assert len(blocks[-1]) == (n % B or B)  # the partial last block, if any
    block_of = {i: b for b, members in enumerate(blocks) for i in members}
    for q in range(n):
        for k in range(n):
            assert noisy_noisy[q, k] == (block_of[q] == block_of[k])  # block diagonal, bidirectional
            assert noisy_clean[q, k] == (block_of[k] < block_of[q])  # strictly earlier clean blocks
    assert not clean_noisy.any()  # clean tokens never see noised ones
    np.testing.assert_array_equal(clean_clean, np.asarray(M.block_causal(n, B)))


def test_no_noisy_slot_sees_its_own_clean_token():
    for n, B in [(6, 2), (7, 3), (5, 5)]:
        mask = np.asarray(M.block_diffusion(n, B))
        assert not any(mask[i, n + i] for i in range(n))
