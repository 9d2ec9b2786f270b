"""2-D neighbourhood attention (NATTEN) on a row-major flattened grid."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool

from ._args import check_mask_memory, checked, index_grid, positive
from ._validate import odd_kernel

__all__ = ["natten_2d"]


@functools.partial(jax.jit, static_argnames=("height", "width"))
def _natten_2d(height, width, kernel_h, kernel_w):
    n = height * width
    q, k = index_grid(n, n)
    q_r, q_c = q // width, q % width
    k_r, k_c = k // width, k % width
    half_h, half_w = kernel_h // 2, kernel_w // 2
    centre_r = jnp.clip(q_r, half_h, height - 1 - half_h)
    centre_c = jnp.clip(q_c, half_w, width - 1 - half_w)
    return (jnp.abs(centre_r - k_r) <= half_h) & (jnp.abs(centre_c - k_c) <= half_w)


@checked(height=positive, width=positive, kernel_h=positive, kernel_w=positive)
def natten_2d(height: int, width: int, kernel_h: int, kernel_w: int) -> Bool[Array, "n n"]:
    """Neighbourhood attention on an `height × width` grid (NATTEN, attention-gym ``generate_natten``).

    Positions are grid cells flattened row-major: index ``i = r * width + c`` for row
    ``r`` and column ``c``. Per axis the kernel is centred on the query and clamped
    inside the grid::

        centre_r = clamp(q_r, kernel_h // 2, height - 1 - kernel_h // 2)
        centre_c = clamp(q_c, kernel_w // 2, width - 1 - kernel_w // 2)
        M[q, k] = |centre_r - k_r| <= kernel_h // 2  and  |centre_c - k_c| <= kernel_w // 2

    so every query sees exactly `kernel_h * kernel_w` keys, including itself (near the
    border the window shifts inwards instead of shrinking). The mask is in general not
    symmetric.

    attention-gym's ``generate_natten(canvas_w, canvas_h, kernel_w, kernel_h)`` computes
    ``x = idx // canvas_w`` (a row) and clamps it with ``canvas_w``/``kernel_w``: equal to
    this rule when ``height == width`` and ``kernel_h == kernel_w``; on other grids it mixes
    the axes, and this function follows the per-axis rule of the mask gallery.

    **Arguments:**

    - `height`, `width`: grid size, integers >= 1; the mask has `n = height * width` rows.
    - `kernel_h`, `kernel_w`: odd kernel sizes with ``1 <= kernel_h <= height`` and
      ``1 <= kernel_w <= width``.

    **Returns:** a Boolean array of shape `(height * width, height * width)`.

    **Raises:** :class:`~hassejax.errors.MaskError` for a non-positive grid size, or a
    kernel that is not an odd integer within its axis.

    **Example:** a 3 × 3 kernel on a 4 × 4 grid: every query sees 9 keys; the corner cell 0
    sees the same 3 × 3 block as cell 5 (its window shifted inwards), cell 15 the opposite block:

    ```python
    >>> import numpy as np
    >>> from hassejax.masks import natten_2d
    >>> m = natten_2d(4, 4, kernel_h=3, kernel_w=3)
    >>> m.shape, m.sum(axis=1).tolist() == [9] * 16
    ((16, 16), True)
    >>> np.flatnonzero(m[0]).tolist(), np.flatnonzero(m[5]).tolist(), np.flatnonzero(m[15]).tolist()
    ([0, 1, 2, 4, 5, 6, 8, 9, 10], [0, 1, 2, 4, 5, 6, 8, 9, 10], [5, 6, 7, 9, 10, 11, 13, 14, 15])

    ```

    **References:** Hassani et al., "Neighborhood Attention Transformer",
    arXiv:2204.07143; mask gallery "2-D neighbourhood (NATTEN)".
    """
    kernel_h = odd_kernel(kernel_h, height, "kernel_h", "height")
    kernel_w = odd_kernel(kernel_w, width, "kernel_w", "width")
    check_mask_memory(height * width, height * width, "natten_2d", argument="height` and `width")
    return _natten_2d(height=height, width=width, kernel_h=kernel_h, kernel_w=kernel_w)
