"""from_mask_mod refuses out-of-range array reads inside the mask_mod (JAX would clamp them silently).

The reference for every mask is NumPy on the grid (``np.add.outer``-style broadcasting with
NumPy's own indexing, which raises on an out-of-range index instead of clamping).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hassejax.masks as M
import hassejax.masks._convert as convert
from hassejax.errors import MaskError
from hassejax.masks import structured as S

FORMS = ("dense", "intervals", "auto")


def dense_of(mask):
    """A dense NumPy array from either form."""
    return mask.to_dense() if isinstance(mask, M.IntervalMask) else np.asarray(mask)


def grid(n):
    q = np.arange(n)[:, None]
    k = np.arange(n)[None, :]
    return q, k


@pytest.mark.parametrize("form", FORMS)
def test_the_issue_example_raises_naming_fn_index_and_size(form):
    # before: positions 3 and 4 silently joined document 1 (d[3] and d[4] clamped to d[2])
    with pytest.raises(MaskError) as info:
        M.from_mask_mod(lambda b, h, q, k, d=jnp.array([0, 0, 1]): d[q] == d[k], 5, form=form)
    text = str(info.value)
    assert text.startswith("`fn` indexed an array out of range"), text
    assert "index 3 is out of bounds for axis 0 with size 3" in text, text
    assert "q_idx in [0, 5), kv_idx in [0, 5), b=0, h=0" in text, text


@pytest.mark.parametrize("form", FORMS)
def test_a_table_of_the_right_size_works(form):
    ids = np.array([0, 0, 1, 1, 1, 2])
    d = jnp.asarray(ids)
    got = dense_of(M.from_mask_mod(lambda b, h, q, k: (d[q] == d[k]) & (k <= q), 6, form=form))
    q, k = grid(6)
    np.testing.assert_array_equal(got, (ids[q] == ids[k]) & (k <= q))


@given(length=st.integers(1, 12), n=st.integers(1, 12), form=st.sampled_from(("dense", "intervals")))
@settings(max_examples=10)
def test_raises_exactly_when_the_table_is_shorter_than_the_grid(length, n, form):
    ids = np.arange(length) // 2
    d = jnp.asarray(ids)
    fn = lambda b, h, q, k: (d[q] == d[k]) & (k <= q)
    if length < n:
        with pytest.raises(MaskError, match=f"index {length} is out of bounds for axis 0 with size {length}"):
            M.from_mask_mod(fn, n, form=form)
    else:
        q, k = grid(n)
        np.testing.assert_array_equal(dense_of(M.from_mask_mod(fn, n, form=form)), (ids[q] == ids[k]) & (k <= q))


def test_every_block_of_the_interval_route_is_checked(monkeypatch):
    # 2 rows a block: only the last row (q = 9) reads past the table of 9 entries
    monkeypatch.setattr(convert, "_BLOCK_ENTRIES", 2 * 10)
    d = jnp.arange(9)
    with pytest.raises(MaskError, match="index 9 is out of bounds for axis 0 with size 9"):
        M.from_mask_mod(lambda b, h, q, k: d[q] >= k, 10, form="intervals")


def test_two_dimensional_table_and_rectangular_grid():
    allowed = np.random.default_rng(0).random((4, 6)) < 0.5
    table = jnp.asarray(allowed)
    np.testing.assert_array_equal(np.asarray(M.from_mask_mod(lambda b, h, q, k: table[q, k], 4, n_kv=6)), allowed)
    with pytest.raises(MaskError, match="index 6 is out of bounds for axis 1 with size 6"):
        M.from_mask_mod(lambda b, h, q, k: table[q, k], 4, n_kv=7)
    with pytest.raises(MaskError, match="index 4 is out of bounds for axis 0 with size 4"):
        M.from_mask_mod(lambda b, h, q, k: table[q, k], 5, n_kv=6)


def test_batch_and_head_indices_are_checked_too():
    per_head = jnp.asarray([[True, False], [False, True]])  # (heads, n_kv)
    np.testing.assert_array_equal(
        np.asarray(M.from_mask_mod(lambda b, h, q, k: per_head[h, k], 2, h=1)), [[False, True]] * 2
    )
    with pytest.raises(MaskError) as info:
        M.from_mask_mod(lambda b, h, q, k: per_head[h, k], 2, h=2)
    assert "b=0, h=2: out-of-bounds indexing for array of shape (2, 2): index 2 is out of bounds for axis 0" in str(
        info.value
    )


def test_negative_indices_count_from_the_end_and_are_not_errors():
    # d[q - 1] at q = 0 reads d[-1], NumPy's rule; FlexAttention mask_mods do not index negatively
    vals = np.array([3, 1, 2, 0])
    d = jnp.asarray(vals)
    q, k = grid(4)
    for form in ("dense", "intervals"):
        got = dense_of(M.from_mask_mod(lambda b, h, q, k: d[q - 1] >= k, 4, form=form))
        np.testing.assert_array_equal(got, vals[q - 1] >= k)


def test_check_indices_false_keeps_the_clamped_result():
    d = jnp.array([0, 0, 1])
    fn = lambda b, h, q, k: d[q] == d[k]
    clamped = np.array([0, 0, 1, 1, 1])  # what JAX reads at 0..4
    q, k = grid(5)
    for form in ("dense", "intervals"):
        got = dense_of(M.from_mask_mod(fn, 5, form=form, check_indices=False))
        np.testing.assert_array_equal(got, clamped[q] == clamped[k])
    with pytest.raises(MaskError, match="`check_indices` must be True or False; got 'yes'"):
        M.from_mask_mod(fn, 5, check_indices="yes")


def test_under_jit_correct_tables_work_and_bad_ones_fail_at_run_time():
    ids = np.array([0, 0, 1, 1])
    q, k = grid(4)

    @jax.jit
    def build(d):  # the table is traced: the index check runs with the program
        return M.from_mask_mod(lambda b, h, qi, ki: (d[qi] == d[ki]) & (ki <= qi), 4)

    np.testing.assert_array_equal(np.asarray(build(jnp.asarray(ids))), (ids[q] == ids[k]) & (k <= q))
    with pytest.raises(Exception) as info:
        jax.block_until_ready(build(jnp.asarray(ids[:3])))
    assert "`fn` indexed an array out of range" in str(info.value)
    # a constant table under jit: the same
    with pytest.raises(Exception) as info:
        jax.block_until_ready(jax.jit(lambda: M.from_mask_mod(lambda b, h, qi, ki, d=jnp.arange(3): d[qi] >= ki, 4))())
    assert "`fn` indexed an array out of range" in str(info.value)
    # the interval form is built on the host and refuses a trace, as before
    with pytest.raises(MaskError, match="call it outside jax.jit"):
        jax.jit(lambda d: M.from_mask_mod(lambda b, h, qi, ki: d[qi] >= ki, 4, form="intervals").starts)(jnp.arange(4))


def test_document_inner_mask_mods_are_checked_and_named():
    short = jnp.array([True, True])
    inner = lambda b, h, q, k: short[q] & (k <= q)
    for build in (lambda: M.document([3, 1], inner), lambda: S.document([3, 1], inner)):
        with pytest.raises(MaskError) as info:
            build()
        assert str(info.value).startswith("`inner` indexed an array out of range"), str(info.value)
        assert "index 2 is out of bounds for axis 0 with size 2" in str(info.value)


def test_combined_mask_mods_are_checked():
    d = jnp.array([0, 0, 1])
    fn = M.and_masks(lambda b, h, q, k: k <= q, lambda b, h, q, k: d[q] == d[k])
    with pytest.raises(MaskError, match="index 3 is out of bounds for axis 0 with size 3"):
        M.from_mask_mod(fn, 4, form="intervals")


def test_large_dense_grids_run_as_one_compiled_program_with_the_same_checks(monkeypatch):
    """Dense grids above ``_EAGER_ENTRIES`` run as one jitted program (a review: op by op, a window rule held
    6 × ``n²`` bytes against a check of 5): the same answers and the same index errors, naming the index."""
    monkeypatch.setattr(convert, "_EAGER_ENTRIES", 0)  # every grid through the compiled path
    with pytest.raises(MaskError) as info:
        M.from_mask_mod(lambda b, h, q, k, d=jnp.array([0, 0, 1]): d[q] == d[k], 5)
    assert "index 3 is out of bounds for axis 0 with size 3" in str(info.value)
    assert "q_idx in [0, 5), kv_idx in [0, 5), b=0, h=0" in str(info.value)
    ids = np.array([0, 0, 1, 1, 1, 2])
    d = jnp.asarray(ids)
    got = np.asarray(M.from_mask_mod(lambda b, h, q, k: (d[q] == d[k]) & (k <= q), 6, n_kv=5))
    q, k = np.arange(6)[:, None], np.arange(5)[None, :]
    np.testing.assert_array_equal(got, (ids[q] == ids[k]) & (k <= q))
    clamped = np.array([0, 0, 1, 1, 1])
    got = np.asarray(M.from_mask_mod(lambda b, h, q, k: d[:3][q] == d[:3][k], 5, check_indices=False))
    np.testing.assert_array_equal(got, clamped[:, None] == clamped[None, :])
    with pytest.raises(MaskError, match="must return a Boolean"):
        M.from_mask_mod(lambda b, h, q, k: q - k, 5)


def test_the_compiled_grid_is_checked_against_what_the_program_holds(monkeypatch):
    """The check of a large grid reads XLA's estimate of the compiled program: a fused window rule (``n²`` bytes)
    fits in twice its result where the op-by-op bound (5 ``n²``) is refused."""
    import hassejax._checks as checks
    from hassejax.errors import MemoryBudgetError

    n = 2100  # above _EAGER_ENTRIES (2**22 entries)
    rule = lambda b, h, q, k: (k <= q) & (q - k <= 100)
    monkeypatch.setattr(checks, "available_memory_bytes", lambda: int(2 * n * n / 0.8))
    got = np.asarray(M.from_mask_mod(rule, n))
    np.testing.assert_array_equal(got, np.asarray(S.sliding_window(n, 100).to_dense()))
    monkeypatch.setattr(convert, "_EAGER_ENTRIES", n * n)  # the op-by-op route and its bound
    with pytest.raises(MemoryBudgetError, match=r"`n`: from_mask_mod: a dense mask of shape \(2100, 2100\)"):
        M.from_mask_mod(rule, n)


def test_large_dense_grids_under_vmap_and_jit(monkeypatch):
    """A diff review: under ``vmap`` the index grid stays concrete while `fn` closes over a batched value, and the
    compiled path (ahead of time) failed ("compiled for 3 inputs but called with 2"); under any transformation the
    grid is evaluated inside the caller's program."""
    monkeypatch.setattr(convert, "_EAGER_ENTRIES", 0)  # every grid would take the compiled path
    f = lambda w: M.from_mask_mod(lambda b, h, q, k: (k <= q) & (q - k <= w), 9)
    got = np.asarray(jax.vmap(f)(jnp.array([1, 5])))
    q, k = grid(9)
    np.testing.assert_array_equal(got, np.stack([(k <= q) & (q - k <= w) for w in (1, 5)]))
    ids = jnp.array([[0, 0, 1, 1, 1, 1, 2, 2, 2], [0, 1, 1, 1, 2, 2, 2, 2, 2]])
    batched = jax.vmap(lambda d: M.from_mask_mod(lambda b, h, q, k: d[q] == d[k], 9))(ids)
    np.testing.assert_array_equal(np.asarray(batched), np.stack([np.equal.outer(d, d) for d in np.asarray(ids)]))
    np.testing.assert_array_equal(np.asarray(jax.jit(f)(3)), (k <= q) & (q - k <= 3))
