"""Neighbourhood attention on a 2-D grid (NATTEN) in interval form.

JAX-free like the whole :mod:`hassejax.masks.structured` package; spec hasse.md §0 conventions (row = query, column = key, True = may attend).
"""

from __future__ import annotations

import numpy as np

from .._intervals import IntervalMask, with_factors
from .._validate import (
    checked,
    odd_kernel,
    positive,
)
from ._common import _as_mask, _budget, _positions

__all__ = ["natten_2d"]


# ---------------------------------------------------------------------------------- grids, trees


@checked(height=positive, width=positive, kernel_h=positive, kernel_w=positive)
def natten_2d(height: int, width: int, kernel_h: int, kernel_w: int) -> IntervalMask:
    """2-D neighbourhood attention (NATTEN) on a row-major grid, as key runs.

    Query ``q = r · width + c`` sees the `kernel_h × kernel_w` cells around the clamped
    centre ``(clamp(r, kh//2, height-1-kh//2), clamp(c, kw//2, width-1-kw//2))`` (rule of
    :func:`hassejax.masks.natten_2d`): one run of `kernel_w` keys in each of `kernel_h`
    grid rows, or a single run when ``kernel_w == width``.

    **Arguments:**

    - `height`, `width`: grid size, integers >= 1; `n = height * width`.
    - `kernel_h`, `kernel_w`: odd kernel sizes, ``1 <= kernel_h <= height``,
      ``1 <= kernel_w <= width``.

    **Returns:** an :class:`~hassejax.masks.IntervalMask` with `n` rows, equal to
    :func:`hassejax.masks.natten_2d`.

    **Raises:** :class:`~hassejax.errors.MaskError` for a non-positive grid size, or a
    kernel that is not an odd integer within its axis.

    **Example:**

    ```python
    >>> from hassejax.masks import structured
    >>> structured.natten_2d(3, 4, kernel_h=3, kernel_w=1).row(0)
    [(0, 1), (4, 5), (8, 9)]

    ```

    **References:** Hassani et al., "Neighborhood Attention Transformer", arXiv:2204.07143;
    mask gallery "2-D neighbourhood (NATTEN)".
    """
    kernel_h = odd_kernel(kernel_h, height, "kernel_h", "height")
    kernel_w = odd_kernel(kernel_w, width, "kernel_w", "width")
    n = height * width
    hh, hw = kernel_h // 2, kernel_w // 2
    # before any work array (a fresh user: natten_2d(10**6, 10**6, 3, 3) met NumPy's MemoryError on the positions)
    if kernel_w == width:  # the grid rows touch: one run
        _budget(n, 1, "natten_2d", "height, width")
    else:
        _budget(n, kernel_h, "natten_2d", "height, width, kernel_h")
    q = _positions(n)
    centre_r = np.clip(q // width, hh, height - 1 - hh)
    centre_c = np.clip(q % width, hw, width - 1 - hw)
    if kernel_w == width:
        out = _as_mask((centre_r - hh) * width, (centre_r + hh + 1) * width, n, normal=True)
    else:
        rows = (centre_r - hh)[:, None] + np.arange(kernel_h, dtype=np.int64)[None, :]
        starts = rows * width + (centre_c - hw)[:, None]
        out = _as_mask(starts, starts + kernel_w, n, normal=True)
    if height >= 2 and width >= 2:  # the product of the clamped 1-D windows over grid rows and over columns
        dtype = out.starts.dtype  # the runs' dtype, as a searched factor's
        out = with_factors(out, _clamped_window(height, kernel_h, dtype), _clamped_window(width, kernel_w, dtype))
    return out


def _clamped_window(size: int, kernel: int, dtype) -> IntervalMask:
    """NATTEN's 1-D window on `size` positions: position `i` sees the `kernel` positions around its clamped centre."""
    half = kernel // 2
    centre = np.clip(np.arange(size, dtype=np.int64), half, size - 1 - half)
    starts, stops = (centre - half)[:, None].astype(dtype), (centre + half + 1)[:, None].astype(dtype)
    return IntervalMask(starts, stops, size, _normal=True)
