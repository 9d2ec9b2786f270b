import numpy as np
import pytest

from hassejax._checks import as_mask, check_memory, check_rows_nonempty
from hassejax.errors import EmptyRowError, MaskError, MemoryBudgetError


def test_as_mask_accepts_bool_square():
    m = as_mask(np.eye(3, dtype=bool))
    assert m.shape == (3, 3) and m.dtype == bool


@pytest.mark.parametrize(
    "bad, fragment",
    [
        (np.ones((3, 4), bool), "must be square"),
        (np.ones((3,), bool), "rank"),
        (np.ones((3, 3), np.int32), "dtype bool"),
        (np.ones((0, 0), bool), "at least one"),
        ("causal", "Boolean array"),
    ],
)
def test_as_mask_errors_name_argument(bad, fragment):
    with pytest.raises(MaskError, match=fragment) as info:
        as_mask(bad, name="my_mask")
    assert "`my_mask`" in str(info.value)


def test_unbatched_rejects_batch():
    with pytest.raises(MaskError, match=r"rank 2, shape \(n, n\)"):
        as_mask(np.ones((2, 3, 3), bool), batched=False)


def test_empty_row():
    m = np.eye(3, dtype=bool)
    m[1, 1] = False
    with pytest.raises(EmptyRowError, match=r"first at index \(1,\)"):
        check_rows_nonempty(m)


def test_memory_budget():
    with pytest.raises(MemoryBudgetError, match="GiB"):
        check_memory(2**62, "a huge thing")
    check_memory(1024, "a small thing")
