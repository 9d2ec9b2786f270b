"""How many clusters do the tokens form? Counts of clusters of token directions (spec dynamics.md §4, §7b item 14).

Two counts, both of *directions* (tokens are normalised first; a zero token has no direction):

- :func:`angular_clusters`: single-linkage clusters, the connected components of the graph
  "angle between directions `< θ`" (two tokens are in one cluster iff a chain of tokens
  joins them with consecutive angles below `θ`). A count of clusters at any spread; the
  figures use `θ = 1°` and `5°`.
- :func:`cluster_count`: the rank of the thresholded Gram matrix of Geshkovski, Letrouit,
  Polyanskiy, Rigollet, "A mathematical perspective on Transformers", arXiv:2312.10794
  (cosine `> 0.9999`, about `0.81°`). It equals the number of clusters only when every
  cluster is tighter than the threshold and the clusters are far apart: a bundle a few
  degrees wide gives a banded 0/1 matrix of high rank.

For tokens in the plane, :func:`token_angles` gives their directions and
:func:`angular_spread` the width of the smallest arc holding them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Int, Real
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from ..._checks import check_memory
from ..._tracing import is_traced
from ...errors import ParameterError
from ._common import check_tokens

__all__ = ["cluster_count", "angular_clusters", "token_angles", "angular_spread"]


def _unit(x, xp):
    norms = xp.linalg.norm(x, axis=-1, keepdims=True)
    return x / xp.where(norms > 0, norms, 1.0)


def cluster_count(x: Float[ArrayLike, "*batch n d"], threshold: Real[ArrayLike, ""] = 0.9999) -> Int[Array, "*batch"]:
    """Number of clusters of tokens: rank of the thresholded Gram matrix (GLPR, arXiv:2312.10794).

    `T_ij = 1{⟨x_i, x_j⟩ / (‖x_i‖‖x_j‖) > threshold}` and the count is `rank T`
    (``eigvalsh`` of the symmetric 0/1 matrix, tolerance `n · eps · max|eigenvalue|`, as
    ``matrix_rank``). For tokens on the unit sphere (``solve_particles(..., sphere=True)``)
    this is exactly the count in the figures of Geshkovski, Letrouit, Polyanskiy and
    Rigollet (their code: Gram matrix of the tokens thresholded at 0.9999,
    ``torch.linalg.matrix_rank``). In `R^d` the tokens are normalised first, so it counts
    clusters of *directions*. When the relation "similar" is transitive (well-separated
    clusters) `T` is, up to permutation, block diagonal with all-ones blocks, and its rank
    is the number of clusters; for clusters wider than the threshold use
    :func:`angular_clusters`. A zero token has no direction and joins no cluster.

    **Arguments:**

    - `x`: `(*batch, n, d)` float tokens.
    - `threshold`: cosine-similarity threshold `1 − δ` in `(−1, 1)` (default 0.9999).

    **Returns:** `(*batch,)` int32 cluster counts.

    **Raises:** :class:`~hassejax.errors.ParameterError` if `x` is not `(..., n, d)` with
    `n >= 1`, or `threshold` is not in `(−1, 1)`.

    Source: arXiv:2312.10794 (their figures' count).

    **Example:** two tight clusters on the circle:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics.diagnostics import cluster_count
    >>> x = jnp.array([[1.0, 0.0], [2.0, 1e-4], [0.0, 1.0], [1e-4, 3.0]])
    >>> cluster_count(x).item()
    2

    ```
    """
    check_tokens(x)
    if not is_traced(threshold):
        th = np.asarray(threshold)
        if th.shape != () or not (-1.0 < float(th) < 1.0):
            raise ParameterError(f"`threshold` must be a cosine similarity in (-1, 1); got {threshold!r}.")
    return _cluster_count(jnp.asarray(x), threshold)


@jax.jit
def _cluster_count(x, threshold):
    unit = _unit(x, jnp)
    gram = jnp.einsum("...id,...jd->...ij", unit, unit)
    t = (gram > threshold).astype(jnp.float32)
    w = jnp.abs(jnp.linalg.eigvalsh(t))
    n = x.shape[-2]
    tol = jnp.max(w, axis=-1, keepdims=True) * n * jnp.finfo(jnp.float32).eps
    return jnp.sum(w > tol, axis=-1).astype(jnp.int32)


def angular_clusters(x: Float[ArrayLike, "*batch n d"], theta_deg: float) -> np.ndarray:
    """Single-linkage clusters of token directions: connected components of the graph "angle `< θ`" (host side).

    Tokens are normalised; `i` and `j` are adjacent when `⟨u_i, u_j⟩ > cos θ` (`u` the unit
    directions), and the count is the number of connected components
    (:func:`scipy.sparse.csgraph.connected_components`), i.e. single-linkage clustering of
    the directions cut at angle `θ`. A zero token is its own cluster. Unlike
    :func:`cluster_count` it counts clusters of any width: a bundle of directions spread
    over a few degrees with gaps below `θ` is one cluster.

    **Arguments:**

    - `x`: `(*batch, n, d)` float tokens (NumPy or JAX; evaluated on the host).
    - `theta_deg`: linkage angle in degrees, in `(0, 180]`.

    **Returns:** `(*batch,)` NumPy int counts.

    **Raises:** :class:`~hassejax.errors.ParameterError` for a bad shape or angle;
    :class:`~hassejax.errors.MemoryBudgetError` (naming `x`) if the `(*batch, n, n)`
    similarity matrices would not fit, estimated before they are built.

    Source: spec dynamics.md §7b item 14 (derived: single linkage of directions).

    **Example:** a bundle of directions 0.5° apart is one cluster at `θ = 1°`:

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.diagnostics import angular_clusters
    >>> a = np.radians([0.0, 0.5, 1.0, 1.5, 90.0])
    >>> x = np.stack([np.cos(a), np.sin(a)], axis=-1)
    >>> angular_clusters(x, 1.0).item(), angular_clusters(x, 0.1).item()
    (2, 5)

    ```
    """
    check_tokens(x)
    theta = np.asarray(theta_deg)
    if theta.shape != () or not (0.0 < float(theta) <= 180.0):
        raise ParameterError(f"`theta_deg` must be an angle in degrees in (0, 180]; got {theta_deg!r}.")
    shape = tuple(int(s) for s in x.shape)
    n = shape[-2]
    batch = int(np.prod(shape[:-2], dtype=np.int64))
    check_memory(batch * n * n * 9, f"angular_clusters of tokens of shape {shape} (the n × n similarities)", "x")
    unit = _unit(np.asarray(x, float), np)
    close = np.einsum("...id,...jd->...ij", unit, unit) > np.cos(np.radians(float(theta)))
    flat = close.reshape((-1, n, n))
    counts = [connected_components(csr_matrix(c), directed=False)[0] for c in flat]
    return np.asarray(counts, dtype=int).reshape(shape[:-2])


def token_angles(x: Float[ArrayLike, "*batch 2"]) -> np.ndarray:
    """Direction of each planar token in degrees, in `(−180°, 180°]` (host side).

    **Arguments:** `x`: `(*batch, 2)` float tokens in `R²`.

    **Returns:** `(*batch,)` NumPy float64 angles `atan2(x_2, x_1)` in degrees.

    **Raises:** :class:`~hassejax.errors.ParameterError` if the last axis is not 2.

    Source: (derived).

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.diagnostics import token_angles
    >>> token_angles(np.array([[1.0, 0.0], [0.0, 2.0], [-1.0, -1e-12]])).round(6).tolist()
    [0.0, 90.0, -180.0]

    ```
    """
    x = np.asarray(x)
    if x.ndim < 1 or x.shape[-1] != 2:
        raise ParameterError(f"`x` must have shape (..., 2) (tokens in the plane); got shape {x.shape}.")
    return np.degrees(np.arctan2(x[..., 1], x[..., 0]))


def angular_spread(theta_deg: Float[ArrayLike, " n"]) -> float:
    """Width in degrees of the smallest arc of the circle holding every direction `theta_deg` (host side).

    **Arguments:** `theta_deg`: `(n,)` float directions in degrees (any range; taken modulo 360°), `n >= 1`.

    **Returns:** the arc width in `[0°, 360°)`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for an empty or non-1-D input.

    Source: (derived).

    **Example:** directions across the wrap at ±180° span 20°:

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.diagnostics import angular_spread
    >>> angular_spread(np.array([170.0, -170.0, 175.0]))
    20.0

    ```
    """
    th = np.asarray(theta_deg, float)
    if th.ndim != 1 or th.size == 0:
        raise ParameterError(f"`theta_deg` must be a non-empty 1-D array of angles; got shape {th.shape}.")
    th = np.sort(np.mod(th, 360.0))
    gaps = np.diff(np.concatenate([th, th[:1] + 360.0]))
    return float(360.0 - gaps.max())
