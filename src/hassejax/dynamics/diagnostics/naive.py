"""What does the naive spectral rule predict? Eigenvalues of `VA + AᵀVᵀ` (spec dynamics.md §3).

The rule "`VA + AᵀVᵀ ⪯ 0` ⇒ clustering, a positive eigenvalue ⇒ blow-up" is exact only
when `V`, `A`, `Σ0` commute (e.g. `V = vI`, spec §3) and false in general (spec §3 has a
counterexample; the phase maps show where it fails for rotations `V`). It is a prediction to
set beside a solved :class:`~hassejax.dynamics.diagnostics.Outcome`, never a verdict.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ...errors import ParameterError

__all__ = ["naive_spectrum", "naive_spectrum_low_rank", "naive_rule", "naive_regime"]


def _square_pair(V, A):
    V, A = jnp.asarray(V), jnp.asarray(A)
    if V.ndim < 2 or A.ndim < 2 or V.shape[-2:] != V.shape[-1:] * 2 or A.shape[-2:] != V.shape[-2:]:
        raise ParameterError(
            f"`V` and `A` must both have shape (..., d, d) with the same d; got {V.shape} and {A.shape}."
        )
    return V, A


def naive_spectrum(V: Float[ArrayLike, "*#batch d d"], A: Float[ArrayLike, "*#batch d d"]) -> Float[Array, "*batch d"]:
    """Eigenvalues of `VA + AᵀVᵀ`, decreasing (the naive spectral reading, spec dynamics.md §3).

    For a rank-`k` head `VA = W_O(W_V Kᵀ)Q` has rank `<= k`, and the symmetric part `S + Sᵀ`
    of a rank-`k` matrix `S = FGᵀ` is `[F G] [[0, I], [I, 0]] [F G]ᵀ`: it has `k` positive and
    `k` negative eigenvalues whenever `[F G]` has rank `2k` (derived), so the naive rule reads
    "blow-up" for every generic low-rank head.

    **Arguments:** `V`, `A`: `(*batch, d, d)` float (broadcast against each other).

    **Returns:** `(*batch, d)` eigenvalues, decreasing.

    **Raises:** :class:`~hassejax.errors.ParameterError` for shapes that are not `(..., d, d)` alike.

    Source: spec dynamics.md §3.

    **Example:**

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics.diagnostics import naive_spectrum
    >>> naive_spectrum(jnp.eye(2), jnp.array([[1.0, 0.0], [0.0, -2.0]])).tolist()
    [2.0, -4.0]

    ```
    """
    V, A = _square_pair(V, A)
    s = V @ A
    s = s + jnp.swapaxes(s, -1, -2)
    return jnp.flip(jnp.linalg.eigvalsh(s), axis=-1)


def naive_rule(V: Float[ArrayLike, "*#batch d d"], A: Float[ArrayLike, "*#batch d d"]) -> Float[Array, "*batch"]:
    """`λ_max(VA + AᵀVᵀ)`: `> 0` ⇒ the naive rule predicts blow-up, `<= 0` ⇒ no blow-up (spec §3).

    For `V = vI` (and `Σ0` commuting with `A + Aᵀ`, e.g. `Σ0 ∝ I`) the sign is the closed
    form's blow-up criterion; for other `V` it is only the naive prediction.

    **Arguments:** `V`, `A`: `(*batch, d, d)` float.

    **Returns:** `(*batch,)` the largest eigenvalue of `VA + AᵀVᵀ`.

    **Raises:** as :func:`naive_spectrum`.

    Source: spec dynamics.md §3.

    **Example:** a rotation by 90° with `A = I`: `VA + AᵀVᵀ = 0`, the rule predicts no blow-up:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics.diagnostics import naive_rule
    >>> abs(naive_rule(jnp.array([[0.0, -1.0], [1.0, 0.0]]), jnp.eye(2)).item())
    0.0

    ```
    """
    return naive_spectrum(V, A)[..., 0]


def naive_spectrum_low_rank(
    Q: Float[ArrayLike, "*batch k d"],
    K: Float[ArrayLike, "*batch k d"],
    W_V: Float[ArrayLike, "*batch k d"],
    W_O: Float[ArrayLike, "*batch d k"],
) -> Float[Array, "*batch m"]:
    """The `m = 2k` eigenvalues of `VA + AᵀVᵀ` that can be non-zero, decreasing, from `2k×2k` matrices (derived).

    For a head with `V = W_O W_V` and `A = KᵀQ`: `VA = FGᵀ` with `F = W_O W_V Kᵀ` and
    `G = Qᵀ` (`d×k`), so `VA + AᵀVᵀ = BJBᵀ` with `B = [F G]` and `J = [[0, I], [I, 0]]`; its
    non-zero eigenvalues are those of `JBᵀB`, i.e. of the symmetric `RJR` with
    `R = (BᵀB)^{1/2}`. The remaining `d − 2k` eigenvalues are zero. Same values as
    :func:`naive_spectrum` at `O(dk²)` instead of `O(d³)`.

    **Arguments:** `Q`, `K`, `W_V`: `(*batch, k, d)` float; `W_O`: `(*batch, d, k)` float.

    **Returns:** `(*batch, 2k)` eigenvalues, decreasing.

    **Raises:** jaxtyping's error for shapes that disagree (annotations are checked at run time).

    Source: (derived).

    **Example:** `k = 1` in `d = 3`, against :func:`naive_spectrum`:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics.diagnostics import naive_spectrum, naive_spectrum_low_rank
    >>> Q, K = jnp.array([[1.0, 0.0, 0.0]]), jnp.array([[0.0, 1.0, 0.0]])
    >>> W_V, W_O = jnp.array([[0.0, 1.0, 1.0]]), jnp.array([[1.0], [0.0], [2.0]])
    >>> low = naive_spectrum_low_rank(Q, K, W_V, W_O)
    >>> full = naive_spectrum(W_O @ W_V, K.T @ Q)
    >>> bool(jnp.allclose(low, full[jnp.array([0, 2])], atol=1e-6))
    True

    ```
    """
    Q, K, W_V, W_O = (jnp.asarray(z) for z in (Q, K, W_V, W_O))
    f = W_O @ (W_V @ jnp.swapaxes(K, -1, -2))
    b = jnp.concatenate([f, jnp.swapaxes(Q, -1, -2)], axis=-1)
    k = Q.shape[-2]
    gram = jnp.swapaxes(b, -1, -2) @ b
    w, u = jnp.linalg.eigh(0.5 * (gram + jnp.swapaxes(gram, -1, -2)))
    r = (u * jnp.sqrt(jnp.clip(w, 0.0, None))[..., None, :]) @ jnp.swapaxes(u, -1, -2)
    j = jnp.roll(jnp.eye(2 * k, dtype=r.dtype), k, axis=-1)
    m = r @ j @ r
    return jnp.flip(jnp.linalg.eigvalsh(0.5 * (m + jnp.swapaxes(m, -1, -2))), axis=-1)


def naive_regime(eigenvalues: Float[ArrayLike, "*batch d"], rtol: float = 1e-9) -> np.ndarray:
    """The naive reading of :func:`naive_spectrum`: ``"blow_up"`` where `λ_max > rtol · max|λ|`, else ``"cluster"`` (host side).

    **Arguments:** `eigenvalues`: `(*batch, d)` float, decreasing (from :func:`naive_spectrum`
    or :func:`naive_spectrum_low_rank`); `rtol`: relative tolerance of "positive".

    **Returns:** `(*batch,)` NumPy array of ``str`` (dtype object).

    **Raises:** nothing beyond NumPy's errors.

    Source: spec dynamics.md §3 (the naive rule).

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.diagnostics import naive_regime
    >>> naive_regime(np.array([[1.0, -1.0], [1e-12, -1.0]])).tolist()
    ['blow_up', 'cluster']

    ```
    """
    e = np.asarray(eigenvalues)
    scale = np.max(np.abs(e), axis=-1)
    out = np.where(e[..., 0] > rtol * np.maximum(scale, np.finfo(float).tiny), "blow_up", "cluster")
    return out.astype(object)
