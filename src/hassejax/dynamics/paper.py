"""The parameter sets of Castin et al.'s dynamics figures and the paper's scalings, as kernel modules.

(arXiv:2501.18322; spec dynamics.md §7a; the authors' code, vcastin/2025-transformers-PDEs.)

- **Parameter sets** ``FIG1_Q``, ``FIG1_K``, ``FIG1_V``, ``FIG2_Q_ROW``, ``FIG2_Q_PERP``,
  ``FIG4_Q``, ``FIG4_K``, ``FIG4_V``, ``FIG5_Q``, ``FIG5_K``, ``FIG6_V`` (float64 NumPy, the
  spec's digits).
- **Scalings** (the authors' right-hand sides): softmax and L2 use `Q/√d` (:func:`softmax_model`,
  :func:`l2_model`, L2 with `K` unscaled and `c = 1`), Sinkhorn the unscaled `A = KᵀQ`, `ε = 1`
  (:func:`sinkhorn_model`), multi-head one head per row of `Q`, `K` (`k = 1`, scale 1,
  :func:`multihead_model`).

Each builder returns an attention kernel module (:mod:`hassejax.dynamics.attention`) for
:func:`~hassejax.dynamics.solve_gaussian` and :func:`~hassejax.dynamics.solve_particles`.
"""

from __future__ import annotations

import numpy as np
from jaxtyping import ArrayLike, Float

from ..errors import ParameterError
from .attention import L2, MultiHead, Sinkhorn, Softmax

__all__ = [
    "FIG1_Q",
    "FIG1_K",
    "FIG1_V",
    "FIG2_Q_ROW",
    "FIG2_Q_PERP",
    "FIG4_Q",
    "FIG4_K",
    "FIG4_V",
    "FIG5_Q",
    "FIG5_K",
    "FIG6_V",
    "softmax_model",
    "l2_model",
    "sinkhorn_model",
    "multihead_model",
]

FIG1_Q = np.array([[0.4580549482, 0.3083496070], [0.2314870450, 0.2774245518]])
FIG1_K = -FIG1_Q
FIG1_V = np.array([[2.6693776103, -0.6915301722], [-0.6915301722, 2.6874461223]])

FIG2_Q_ROW = np.array([0.4063236467, 0.9137292236])
FIG2_Q_PERP = np.array([-FIG2_Q_ROW[1], FIG2_Q_ROW[0]])

FIG4_Q = np.array([[0.6764132658, 1.5210991859], [-0.5118762450, 1.1501946354]])
FIG4_K = np.array([[-0.5907168066, -0.7687652516], [-0.3350091661, 0.0929994435]])
FIG4_V = np.array([[-0.3488944510, 0.9837034334], [0.5809228307, 0.0702844409]])

FIG5_Q = np.array([[-0.0967841583, 0.4222016605], [-0.2254615634, -0.6379430932]])
FIG5_K = np.array([[-0.0162863037, 1.0442167784], [-1.0848803286, -2.2059248272]])

FIG6_V = np.array([[1.831753006, -0.3768878439], [0.3481123416, -0.1162815566]])


def _vqk(V, Q, K) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    V, Q, K = (np.asarray(x, float) for x in (V, Q, K))
    if V.ndim != 2 or V.shape[0] != V.shape[1]:
        raise ParameterError(f"`V` must be a square (d, d) matrix; got shape {V.shape}.")
    d = V.shape[0]
    if Q.ndim != 2 or Q.shape[1] != d or K.shape != Q.shape:
        raise ParameterError(f"`Q` and `K` must both be (k, d = {d}); got shapes {Q.shape} and {K.shape}.")
    return V, Q, K


def softmax_model(V: Float[ArrayLike, "d d"], Q: Float[ArrayLike, "k d"], K: Float[ArrayLike, "k d"]) -> Softmax:
    """Softmax attention with the paper's scaling `A = KᵀQ/√d` (the authors' ``rhs_trad``).

    **Arguments:** `V`: `(d, d)`; `Q`, `K`: `(k, d)` (unscaled, as in the authors' code).

    **Returns:** ``Softmax(V=V, A=KᵀQ/√d)``.

    **Raises:** :class:`~hassejax.errors.ParameterError` naming the argument for shapes that do not match.

    Source: spec §7a (the paper's scaling); the authors' ``utils.py``.

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.paper import FIG5_K, FIG5_Q, softmax_model
    >>> model = softmax_model(np.eye(2), FIG5_Q, FIG5_K)
    >>> bool(np.allclose(model.A, FIG5_K.T @ FIG5_Q / np.sqrt(2)))
    True

    ```
    """
    V, Q, K = _vqk(V, Q, K)
    return Softmax(V=V, A=K.T @ Q / np.sqrt(V.shape[-1]))


def l2_model(V: Float[ArrayLike, "d d"], Q: Float[ArrayLike, "k d"], K: Float[ArrayLike, "k d"], rows: int = 2) -> L2:
    """L2 attention as in the authors' ``rhs_L2``: `Q/√d`, `K` unscaled, `c = 1`; `Q`, `K` zero-padded to `rows` rows.

    The zero rows change neither `KᵀK` nor `KᵀQ`, so the kernel is the same (exact); they give
    every model of one `d` the same shapes (one compiled program for one-row and two-row `Q`).

    **Arguments:** `V`: `(d, d)`; `Q`, `K`: `(k, d)`, `k <= rows`; `rows`: rows after padding.

    **Returns:** ``L2(V, Q_padded/√d, K_padded)``.

    **Raises:** :class:`~hassejax.errors.ParameterError` naming the argument for shapes that do
    not match or `k > rows`.

    Source: spec §7a; the authors' ``utils.py``.

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.paper import FIG2_Q_ROW, l2_model
    >>> q = FIG2_Q_ROW[None]
    >>> model = l2_model(np.eye(2), q, -q)
    >>> model.Q.shape, bool(np.all(model.Q[1] == 0))
    ((2, 2), True)

    ```
    """
    V, Q, K = _vqk(V, Q, K)
    if Q.shape[0] > rows:
        raise ParameterError(f"`Q` has {Q.shape[0]} rows; `rows` = {rows} must be at least that.")
    pad = np.zeros((rows - Q.shape[0], V.shape[0]))
    return L2(V=V, Q=np.concatenate([Q / np.sqrt(V.shape[-1]), pad]), K=np.concatenate([K, pad]))


def sinkhorn_model(V: Float[ArrayLike, "d d"], Q: Float[ArrayLike, "k d"], K: Float[ArrayLike, "k d"]) -> Sinkhorn:
    """Sinkhorn attention as in the authors' code: the unscaled `A = KᵀQ`, `ε = 1`.

    **Arguments:** `V`: `(d, d)`; `Q`, `K`: `(k, d)`.

    **Returns:** ``Sinkhorn(V=V, A=KᵀQ, eps=1)``.

    **Raises:** :class:`~hassejax.errors.ParameterError` naming the argument for shapes that do not match.

    Source: spec §7a; the authors' ``rhs_sinkhorn``.

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.paper import FIG5_K, FIG5_Q, sinkhorn_model
    >>> bool(np.allclose(sinkhorn_model(np.eye(2), FIG5_Q, FIG5_K).A, FIG5_K.T @ FIG5_Q))
    True

    ```
    """
    V, Q, K = _vqk(V, Q, K)
    return Sinkhorn(V=V, A=K.T @ Q, eps=1.0)


def multihead_model(V: Float[ArrayLike, "d d"], Q: Float[ArrayLike, "H d"], K: Float[ArrayLike, "H d"]) -> MultiHead:
    """Multi-head softmax as in the authors' ``rhs_multihead`` with `k = 1`: head `h` takes row `h` of `Q`, `K`, `V`.

    Head `h` has `A_h = K_hᵀQ_h` (scale `1/√k = 1`) and value-output map `C_h = e_h (row h of V)`
    (`W_O = I`), so `Σ' = Σ_h C_hΣA_hΣ + transpose`.

    **Arguments:** `V`: `(d, d)`; `Q`, `K`: `(H, d)`, `H <= d` heads (rows).

    **Returns:** a :class:`~hassejax.dynamics.MultiHead` of `H` :class:`~hassejax.dynamics.Softmax` heads.

    **Raises:** :class:`~hassejax.errors.ParameterError` naming the argument for shapes that do
    not match or more heads than `d`.

    Source: spec §7a; the authors' ``rhs_multihead``.

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.paper import FIG1_K, FIG1_Q, FIG1_V, multihead_model
    >>> model = multihead_model(FIG1_V, FIG1_Q, FIG1_K)
    >>> len(model.heads), bool(np.allclose(model.heads[1].V, [[0.0, 0.0], FIG1_V[1]]))
    (2, True)

    ```
    """
    V, Q, K = _vqk(V, Q, K)
    d = V.shape[0]
    if Q.shape[0] > d:
        raise ParameterError(f"`Q` has {Q.shape[0]} rows (heads); at most d = {d} with W_O = I.")
    eye = np.eye(d)
    return MultiHead([Softmax(V=np.outer(eye[h], V[h]), A=np.outer(K[h], Q[h])) for h in range(Q.shape[0])])
