"""Block-diffusion masks in interval form.

JAX-free like the whole :mod:`hassejax.masks.structured` package; spec hasse.md §0 conventions (row = query, column = key, True = may attend).
"""

from __future__ import annotations

import numpy as np

from .._intervals import IntervalMask
from .._validate import (
    checked,
    integer,
    positive,
)
from ._common import _as_mask, _budget, _positions

__all__ = ["block_diffusion"]


# ---------------------------------------------------------------------------------- two-stream layouts


@checked(n=positive, block_size=positive)
def block_diffusion(n: int, block_size: int) -> IntervalMask:
    """BD3-LM block diffusion training mask over `2n` slots ``[x_t ; x_0]``, as key runs.

    Rule of :func:`hassejax.masks.block_diffusion`, with ``b = (q mod n) // block_size``:
    a noised row `q < n` sees its own noised block ``[b·B, min((b+1)·B, n))`` and the
    earlier clean blocks ``[n, n + b·B)``; a clean row sees the clean blocks up to its own,
    ``[n, n + min((b+1)·B, n))``. A partial last block is allowed.

    **Arguments:**

    - `n`: length of the clean sequence, an integer >= 1.
    - `block_size`: diffusion block length `B`, an integer in `[1, n]`.

    **Returns:** an :class:`~hassejax.masks.IntervalMask` over `2n` positions (at most two
    runs a row), equal to :func:`hassejax.masks.block_diffusion`.

    **Raises:** :class:`~hassejax.errors.MaskError` for a bad `n` or a `block_size` outside `[1, n]`.

    **Example:**

    ```python
    >>> from hassejax.masks import structured
    >>> m = structured.block_diffusion(6, block_size=2)   # slots x_t 0..5, x_0 6..11
    >>> m.n, m.row(2), m.row(8)
    (12, [(2, 4), (6, 8)], [(6, 10)])

    ```

    **References:** Arriola et al., "Block Diffusion", arXiv:2503.09573, §3.1; mask gallery
    "block diffusion".
    """
    block_size = integer(block_size, "block_size", minimum=1, maximum=n, maximum_label="n")
    _budget(2 * n, 2, "block_diffusion")
    i = _positions(n)
    first = (i // block_size) * block_size
    last = np.minimum(first + block_size, n)
    noisy_s = np.stack([first, np.full(n, n, np.int64)], axis=1)
    noisy_e = np.stack([last, n + first], axis=1)
    clean_s = np.stack([np.full(n, n, np.int64), np.full(n, 2 * n, np.int64)], axis=1)
    clean_e = np.stack([n + last, np.full(n, 2 * n, np.int64)], axis=1)
    return _as_mask(np.concatenate([noisy_s, clean_s]), np.concatenate([noisy_e, clean_e]), 2 * n, normal=False)
