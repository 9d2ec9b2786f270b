"""Trained attention heads as dynamical systems: per-head residual-space parameters of a BERT encoder.

**Mapping (derived from the BERT forward pass, :mod:`.bert`).** Head `h` of layer `l`
has `W_{Q,h}, W_{K,h}, W_{V,h}` = rows `h·k … (h+1)·k − 1` of the query/key/value weights
(`k = d_head = d/H`, each `k×d`) and `W_{O,h}` = the same *columns* of the attention output
weight (`d×k`). Without biases the head's update of a token `x` is
`Σ_j softmax_j(⟨W_{Q,h}x, W_{K,h}x_j⟩/√k) W_{O,h}W_{V,h}x_j`, the softmax velocity field of
spec dynamics.md §1 (`β = 1`, queries scaled by `1/√k` as in the paper's multi-head
scaling) with

    `A_h = W_{K,h}ᵀ W_{Q,h} / √k`   (logit of query `x` against key `y`: `yᵀA_h x`),
    `V_h = W_{O,h} W_{V,h}`          (the value-output map `C_h` of spec §1),

both `d×d` of rank at most `k`. Below `Q = W_{Q,h}/√k` (scaled), `K = W_{K,h}`,
`W_V = W_{V,h}`, `W_O = W_{O,h}`. One layer of the model is one explicit Euler step of
length 1 of the sum of its heads' fields (plus biases), then LayerNorm and the FFN; here
every head is a dynamical system of its own in continuous depth `t` (`t = 1` ≈ one layer).
**Biases are left out** (`b_Q` adds a key-only logit term, which the softmax does not
cancel in general, `b_K` a per-query constant that it does cancel, `b_V` and `b_O` a
constant drift), and so are LayerNorm, the FFN and the sum over heads.

The exact `k`-dimensional solves of these heads (Gaussian moments and particles) are in
:mod:`hassejax.dynamics.low_rank`; :meth:`HeadParameters.head` gives a head as its kernel
:class:`~hassejax.dynamics.LowRankSoftmax`.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float

from ..dynamics.low_rank import LowRankSoftmax
from ..errors import ParameterError
from .bert import IndexLike, _index
from .weights import BertWeights

__all__ = [
    "HeadParameters",
    "head_parameters",
    "output_rank",
    "empirical_moments",
]


# --------------------------------------------------------------------------- parameters
class HeadParameters(eqx.Module):
    """Per-layer, per-head projections of a BERT encoder, in residual (token) space.

    Fields (`L` layers, `H` heads, `k = d/H`, `d` hidden size):

    - `Q`: `(L, H, k, d)` scaled query projections `W_{Q,h}/√k`;
    - `K`: `(L, H, k, d)` key projections `W_{K,h}`;
    - `W_V`: `(L, H, k, d)` value projections `W_{V,h}`;
    - `W_O`: `(L, H, d, k)` output projections `W_{O,h}` (columns of the output weight).

    Properties `A = KᵀQ` and `V = W_O W_V`, both `(L, H, d, d)`; :meth:`head` gives a
    head (or a layer's heads) as a :class:`~hassejax.dynamics.LowRankSoftmax` kernel.

    Source: (derived) from the BERT forward pass (module docstring), for the multi-head field of spec dynamics.md §1
    (``A_h = K_hᵀ Q_h``, value-output map ``C_h = W_O,h V_h``).

    **Example:** one layer, one head, `k = 1`, `d = 2` (for the real model see :func:`head_parameters`):

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.pretrained import HeadParameters
    >>> p = HeadParameters(Q=jnp.array([[[[1.0, 0.0]]]]), K=jnp.array([[[[0.0, 2.0]]]]),
    ...                    W_V=jnp.array([[[[1.0, 1.0]]]]), W_O=jnp.array([[[[1.0], [0.0]]]]))
    >>> p.shape, p.A[0, 0].tolist(), p.V[0, 0].tolist()
    ((1, 1), [[0.0, 0.0], [2.0, 0.0]], [[1.0, 1.0], [0.0, 0.0]])

    ```
    """

    Q: Float[Array, "L H k d"]
    K: Float[Array, "L H k d"]
    W_V: Float[Array, "L H k d"]
    W_O: Float[Array, "L H d k"]

    @property
    def A(self) -> Float[Array, "L H d d"]:
        """`A_h = W_{K,h}ᵀ W_{Q,h}/√k` (logit of query `x` against key `y`: `yᵀA_h x`)."""
        return jnp.swapaxes(self.K, -1, -2) @ self.Q

    @property
    def V(self) -> Float[Array, "L H d d"]:
        """`V_h = W_{O,h} W_{V,h}` (value-output map)."""
        return self.W_O @ self.W_V

    @property
    def shape(self) -> tuple[int, int]:
        """`(L, H)`."""
        return tuple(self.Q.shape[:2])

    def head(self, layer: IndexLike, head: IndexLike | None = None) -> LowRankSoftmax:
        """Head `head` of layer `layer` as a :class:`~hassejax.dynamics.LowRankSoftmax` kernel in `R^d`
        (`A = KᵀQ`, `V = W_O W_V`, `β = 1`); all heads of the layer (a leading head axis, for ``vmap``) when `head` is None.

        **Not the model's attention.** The kernel has no biases (module docstring), so its ``weights(t, x)`` are the
        bias-free softmax `softmax_j(x_jᵀ A x_i)`, not the attention probabilities the model computes,
        `softmax_j((W_Q x_i + b_Q)·(W_K x_j + b_K)/√k)`: the query bias `b_Q` adds a key-dependent logit that the
        softmax does not cancel. The difference is large. For all-MiniLM-L6-v2 on the tokens entering each layer for
        "The quick brown fox jumps over the lazy dog." the largest entry-wise difference is 0.049 at layer 2, head 5,
        0.27 for the median head, and 0.77 at layer 2, head 11; 60 of the 72 heads differ by more than 0.1. The
        kernel is the bias-free dynamical system of the head, not a readout of the model's attention maps.

        **Arguments:** `layer` in ``[0, L)``, `head` in ``[0, H)`` or None: integer scalars of any kind (Python,
        NumPy, a concrete JAX integer such as ``jnp.int32(1)``).

        **Raises:** :class:`~hassejax.errors.ParameterError` naming `layer` or `head` for an index out of range
        (negative ones included; JAX indexing would clamp it), a non-integer (a bool, a float) or a traced one.

        **Example:** one layer of two heads, `k = 1`, `d = 2`; a JAX integer picks a head like a Python one:

        ```python
        >>> import jax.numpy as jnp
        >>> from hassejax.pretrained import HeadParameters
        >>> f = jnp.ones((1, 2, 1, 2))
        >>> p = HeadParameters(Q=f, K=f, W_V=f, W_O=jnp.ones((1, 2, 2, 1)))
        >>> p.head(0, jnp.int32(1)).k, p.head(0).Q.shape
        (1, (2, 1, 2))
        >>> p.head(0, 2)
        Traceback (most recent call last):
        hassejax.errors.ParameterError: `head` must be an integer in [0, 2); got 2.

        ```
        """
        layer = _index(layer, "layer", self.Q.shape[0])
        pick = (layer,) if head is None else (layer, _index(head, "head", self.Q.shape[1]))
        return LowRankSoftmax(self.Q[pick], self.K[pick], self.W_V[pick], self.W_O[pick])


def head_parameters(weights: BertWeights, dtype=None) -> HeadParameters:
    """Split every layer's attention weights into heads (mapping in the module docstring).

    **Arguments:** `weights` from :func:`~hassejax.pretrained.load_weights`;
    `dtype` of the result (default: JAX's default float, float64 with ``jax_enable_x64`` and float32 without;
    the default was float64, which without ``jax_enable_x64`` drew JAX's truncation warning for each array).

    **Returns:** :class:`HeadParameters`.

    **Raises:** :class:`~hassejax.errors.ParameterError` if `weights` is not a ``BertWeights``, or naming `dtype`
    for a dtype that is not floating or float64 without ``jax_enable_x64``.

    Source: (derived), module docstring.

    **Example:** (needs the model package)

    ```python
    >>> from hassejax.pretrained import head_parameters, load_weights, output_rank
    >>> heads = head_parameters(load_weights())
    >>> heads.shape, heads.Q.shape, heads.head(0, 3).k, int(output_rank(heads.W_O).min())
    ((6, 12), (6, 12, 32, 384), 32, 32)

    ```
    """
    if not isinstance(weights, BertWeights):
        raise ParameterError(f"`weights` must be a BertWeights (from load_weights); got {type(weights).__name__}.")
    from ..nn.attention import _check_float_dtype

    dtype = _check_float_dtype(dtype)  # float64 without x64: refused, as the models refuse it
    c = weights.config
    n_l, h, k, d = c.num_hidden_layers, c.num_attention_heads, c.head_dim, c.hidden_size

    def rows(w):  # (L, d_out, d_in) -> (L, H, k, d_in)
        return np.asarray(w, np.float64).reshape(n_l, h, k, d)

    q = rows(weights.query_weight) / np.sqrt(k)
    kk = rows(weights.key_weight)
    wv = rows(weights.value_weight)
    wo = np.asarray(weights.output_weight, np.float64).reshape(n_l, d, h, k).transpose(0, 2, 1, 3)
    cv = lambda a: jnp.asarray(a, dtype)
    return HeadParameters(Q=cv(q), K=cv(kk), W_V=cv(wv), W_O=cv(wo))


def output_rank(W_O: Float[ArrayLike, "*batch d k"], rtol: float = 1e-6) -> np.ndarray:
    """Numerical rank of `W_O` `(..., d, k)` (singular values above `rtol · σ_max`), host side, as an
    integer NumPy array of the batch shape; `V_h` has this rank at most.

    **Raises:** :class:`~hassejax.errors.ParameterError` for an input with fewer than two axes or a non-finite entry
    (an inf entry gave NaN singular values, reported as rank 0), or an `rtol` outside ``[0, 1)``.

    Source: (derived), no paper: the numerical rank from the singular values; ``rank V_h ≤ rank W_O`` as
    ``V_h = W_O W_V`` (module docstring).

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.pretrained import output_rank
    >>> output_rank(np.array([[1.0, 2.0], [2.0, 4.0], [0.0, 0.0]])).item()
    1

    ```
    """
    W_O = np.asarray(W_O)
    if W_O.dtype.kind == "V" or W_O.dtype.name == "bfloat16":  # NumPy's SVD takes no bfloat16 (a review)
        W_O = W_O.astype(np.float32)
    if W_O.ndim < 2 or W_O.dtype.kind not in "biuf" or not np.all(np.isfinite(W_O)):
        raise ParameterError(
            f"`W_O` must be a finite real array of shape (..., d, k); got shape {W_O.shape}, dtype {W_O.dtype}"
            + (", with non-finite entries." if W_O.ndim >= 2 and W_O.dtype.kind in "biuf" else ".")
        )
    if not 0 <= rtol < 1:
        raise ParameterError(f"`rtol` must lie in [0, 1); got {rtol!r}.")
    s = np.linalg.svd(W_O, compute_uv=False)
    return np.asarray(np.sum(s > rtol * s[..., :1], axis=-1))


def empirical_moments(
    x: Float[ArrayLike, "n d"], weights: Bool[ArrayLike, " n"] | None = None
) -> tuple[Float[Array, " d"], Float[Array, "d d"]]:
    """Mean and covariance (normalised by the count, not count − 1) of the selected tokens.

    **Arguments:** `x` `(n, d)`; `weights` `(n,)` Boolean selection (default all).

    **Returns:** `(mean (d,), cov (d, d))`, the moments of `μ = (1/n) Σ_i δ_{x_i}` over the selection.

    **Raises:** :class:`~hassejax.errors.ParameterError` for an `x` that is not `(n, d)` (or, concrete, not finite),
    `weights` that are not `n` Booleans, or (concrete `weights`) an empty selection, whose moments are undefined (they were NaN, 0 / 0).

    Source: spec dynamics.md §1 (the empirical measure ``μ = (1/n) Σ_j δ_{x_j}``) and §5 (its mean and covariance,
    compared with the moment ODE).

    **Example:**

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.pretrained import empirical_moments
    >>> mean, cov = empirical_moments(jnp.array([[0.0], [2.0], [9.0]]), jnp.array([True, True, False]))
    >>> mean.tolist(), cov.tolist()
    ([1.0], [[1.0]])

    ```
    """
    from .._tracing import is_traced

    x = jnp.asarray(x)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ParameterError(f"`x` must be (n, d) tokens, n >= 1; got shape {x.shape}.")
    if weights is not None:
        weights = jnp.asarray(weights)
        if weights.shape != x.shape[:1] or weights.dtype != jnp.bool_:
            raise ParameterError(
                f"`weights` must be {x.shape[0]} Booleans (one a token); got shape {weights.shape}, dtype {weights.dtype}."
            )
        if not is_traced(weights) and not bool(jnp.any(weights)):
            raise ParameterError("`weights` selects no token: the moments of an empty selection are undefined.")
    if not is_traced(x) and not bool(jnp.all(jnp.isfinite(x))):  # a fresh user: a NaN token gave a NaN covariance
        raise ParameterError("`x` must be finite; got NaN/inf entries.")
    w = jnp.ones(x.shape[0], x.dtype) if weights is None else weights.astype(x.dtype)
    n = jnp.sum(w)
    mean = (w @ x) / n
    xc = (x - mean) * w[:, None]
    return mean, (xc.T @ (x - mean)) / n
