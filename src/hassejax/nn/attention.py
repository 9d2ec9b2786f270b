"""Masked multi-head self-attention with an explicit empty-row rule (spec hasse.md §4).

Convention (spec §0): ``mask[i, j] = True`` means query position `i` (row) may attend to key
position `j` (column). The mask is always an argument of the call (a traced array, never a
static field), so one compiled model serves every mask of the same shape.

**Empty rows.** :func:`jax.nn.dot_product_attention` and :class:`equinox.nn.MultiheadAttention`
fill masked logits with a large negative number, so a fully masked row silently averages
*all* keys uniformly, which creates information flow the mask forbids. Here a fully masked
row gets attention weights exactly 0 and the attention update of that position is exactly
the zero vector: the residual stream carries the position's state through unchanged. Its
flow is then the residual edge alone, as in ``A = M | I`` (spec §1.1).

Source: Li & Guo, arXiv:2606.09951 (paper), §2; spec hasse.md §1.1 and §4 (the empty-row rule
is (derived): the spec requires "zero output, or an error"; this module chooses zero).
"""

from __future__ import annotations

import functools
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, PRNGKeyArray

from .._mask_checks import NestedMask, check_mask
from .._softmax import masked_softmax
from ..errors import MaskError, ParameterError
from ..masks import IntervalMask

__all__ = ["masked_softmax", "MaskedMultiHeadAttention"]


def _check_positive_int(value, name: str) -> int:
    """`value` as a positive Python int: an int or a NumPy integer (as the task families take), not a bool."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ParameterError(f"`{name}` must be a positive int; got {value!r}.")
    return int(value)


def _check_float_dtype(dtype, name: str = "dtype") -> np.dtype:
    """The parameter dtype: `dtype`, or JAX's default float dtype for None; a
    :class:`~hassejax.errors.ParameterError` naming `name` unless it is a floating dtype (an integer model truncates
    its initial weights and fails only at its first call) that JAX can hold now (float64 needs ``jax_enable_x64``:
    without it a float32 model was built silently, with a truncation warning per tensor)."""
    if dtype is None:
        return jnp.dtype(jnp.zeros(()).dtype)
    try:
        dt = jnp.dtype(dtype)
    except (TypeError, ValueError):
        dt = None
    if dt is None or not jnp.issubdtype(dt, jnp.floating):
        got = repr(dtype) if dt is None else dt.name
        raise ParameterError(
            f"`{name}` must be a floating dtype (e.g. jnp.float32), or None for JAX's default; got {got}."
        )
    if jax.dtypes.canonicalize_dtype(dt) != dt:  # float64 without x64: JAX built float32 arrays (with warnings)
        raise ParameterError(
            f"`{name}` = {dt.name} needs JAX's 64-bit mode, which is off: JAX would make every parameter "
            f"{jax.dtypes.canonicalize_dtype(dt).name}. Enable it first (jax.config.update('jax_enable_x64', True), "
            "or JAX_ENABLE_X64=1 before JAX starts), or use jnp.float32."
        )
    return dt


@functools.cache
def _raw_key_shape() -> tuple[int, ...]:
    """The shape of a legacy uint32 key (``jax.random.PRNGKey(0)``) of the default PRNG implementation."""
    return tuple(jax.eval_shape(lambda: jax.random.key_data(jax.random.key(0))).shape)


def _check_key(key, name: str = "key") -> None:
    """Raise :class:`~hassejax.errors.ParameterError` naming `name` unless `key` is one JAX PRNG key: a typed key of
    shape ``()`` (``jax.random.key``) or a legacy uint32 key (``jax.random.PRNGKey``). Static checks: they work on
    tracers. JAX's own error for ``key=0`` ('invalid PRNG key data') named no argument."""
    dtype, shape = getattr(key, "dtype", None), getattr(key, "shape", None)
    if dtype is not None and shape is not None:
        if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key) and tuple(shape) == ():
            return
        if dtype == np.uint32 and tuple(shape) == _raw_key_shape():
            return
        got = f"an array of shape {tuple(shape)}, dtype {dtype}"
    else:
        got = repr(key) if isinstance(key, (int, float, type(None))) else f"an object of type {type(key).__name__}"
    raise ParameterError(
        f"`{name}` must be a JAX PRNG key, e.g. jax.random.key(0) (or jax.random.PRNGKey(0)); got {got:.200}."
    )


def _attention_mask(mask, n: int, name: str = "mask", num_heads: int | None = None, against: str = "x"):
    """`mask` as the Boolean array the layers index: an :class:`~hassejax.masks.IntervalMask` becomes its dense
    form (its own memory check first), nested lists or tuples an array (a review: the model refused them, "got an
    object of type list", where Task and the order functions take them), then :func:`_check_attention_mask`;
    `against` names the argument whose positions the mask must match (`x`, `token_ids`, `inputs`)."""
    if isinstance(mask, IntervalMask):
        mask = jnp.asarray(mask.to_dense(name=name))
    elif isinstance(mask, (list, tuple)):  # ragged lists, a wrong dtype or rank: a MaskError naming `name`
        mask = jnp.asarray(check_mask(mask, name))
    _check_attention_mask(mask, n, name, num_heads, against)
    return mask


def _check_attention_mask(mask, n: int, name: str = "mask", num_heads: int | None = None, against: str = "x") -> None:
    """Static shape/dtype checks (they work on tracers).

    Without `num_heads` only ``(n, n)`` is accepted; with it, also ``(num_heads, n, n)``.
    """
    if not hasattr(mask, "shape") or not hasattr(mask, "dtype"):
        raise MaskError(
            f"`{name}` must be a Boolean array of shape ({n}, {n}); got an object of type {type(mask).__name__}."
        )
    shape = tuple(mask.shape)
    if num_heads is None and shape != (n, n):
        raise MaskError(
            f"`{name}` must have shape ({n}, {n}) to match the {n} positions of `{against}`; got shape {shape}."
        )
    if num_heads is not None and shape not in ((n, n), (num_heads, n, n)):
        if len(shape) == 3 and shape[1:] == (n, n):
            raise MaskError(
                f"`{name}` holds {shape[0]} per-head masks (shape {shape}), but the attention has num_heads = "
                f"{num_heads}: a per-head mask must have shape ({num_heads}, {n}, {n}), one (n, n) mask per head; "
                f"or pass one ({n}, {n}) mask for all heads."
            )
        raise MaskError(
            f"`{name}` must have shape ({n}, {n}) (one mask for all heads) or ({num_heads}, {n}, {n}) (one mask "
            f"per head) to match the {n} positions of `{against}` and the {num_heads} heads; got shape {shape}."
        )
    if mask.dtype != jnp.bool_:
        raise MaskError(f"`{name}` must have dtype bool (True = may attend); got dtype {mask.dtype}.")


_CHUNK = 4096


@jax.jit
def _normal_chunk(key):
    return jax.random.normal(key, (_CHUNK,), jnp.float32)


def _normal_tensors(key, shapes, dtype, scales=None) -> tuple[jax.Array, ...]:
    """Standard normal tensors (times `scales`) of the given shapes, from `key`.

    Drawn in fixed-size float32 chunks (``fold_in(key, i)``) and cut on the host, so building a
    model of any size compiles nothing new (initialisation needs no more precision than float32).
    """
    sizes = [math.prod(s) for s in shapes]
    total = sum(sizes)
    flat = np.concatenate([np.asarray(_normal_chunk(jax.random.fold_in(key, i))) for i in range(-(-total // _CHUNK))])
    scales = [1.0] * len(shapes) if scales is None else scales
    out, start = [], 0
    for size, shape, scale in zip(sizes, shapes, scales):
        out.append(jnp.asarray((scale * flat[start : start + size].astype(np.float64)).reshape(shape), dtype=dtype))
        start += size
    return tuple(out)


class MaskedMultiHeadAttention(eqx.Module):
    """Multi-head self-attention that consumes any Boolean mask (spec hasse.md §4).

    ``out_i = W_o · concat_h Σ_j w^h_ij V^h x_j`` with ``w^h = masked_softmax(Q^h x · K^h x / √d_h,
    mask)``; projections have no bias, so a fully masked row gives exactly the zero update
    (documented in the module docstring). The mask is an argument of :meth:`__call__`, never a
    static field: one `(n, n)` mask for all heads, or `(heads, n, n)`, one mask per head
    (head `h` uses ``mask[h]``). A layer with per-head masks has the information flow of the
    union of its heads' masks (:func:`hassejax.order.closure.heads_union`).

    **Arguments:**

    - `d_model`: width of the residual stream `d`.
    - `num_heads`: number of heads `h`; must divide `d_model`.
    - `key`: a `jax.random` key for the initialisation (normal, scale `1/√fan_in`).
    - `dtype`: parameter dtype, a floating dtype (default: JAX's default float dtype).

    **Raises:** :class:`~hassejax.errors.ParameterError` for a size that is not a positive int (a
    NumPy integer is taken), a `num_heads` that does not divide `d_model`, a `dtype` that is not
    floating (or is float64 without ``jax_enable_x64``), or a `key` that is no PRNG key.

    Source: Vaswani et al., "Attention Is All You Need", NeurIPS 2017 (paper); spec hasse.md §4.

    **Example:** each row's weights sum to 1 over its allowed keys; a fully masked row gets zero
    weights and a zero update.

    ```python
    >>> import jax, jax.numpy as jnp
    >>> from hassejax.nn import MaskedMultiHeadAttention
    >>> attn = MaskedMultiHeadAttention(4, 2, key=jax.random.key(0))
    >>> x = jax.random.normal(jax.random.key(1), (3, 4))
    >>> mask = jnp.array([[True, False, False], [True, True, False], [False, False, False]])
    >>> w = attn.weights(x, mask)
    >>> w.shape, w[0, 0].tolist(), w.sum(-1).round(6).tolist()
    ((2, 3, 3), [1.0, 0.0, 0.0], [[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    >>> attn(x, mask)[2].tolist()
    [0.0, 0.0, 0.0, 0.0]

    ```
    """

    query_weight: Float[Array, "heads head_size d_model"]
    key_weight: Float[Array, "heads head_size d_model"]
    value_weight: Float[Array, "heads head_size d_model"]
    output_weight: Float[Array, "d_model heads head_size"]
    num_heads: int = eqx.field(static=True)
    head_size: int = eqx.field(static=True)

    def __init__(self, d_model: int, num_heads: int, *, key: PRNGKeyArray, dtype=None):
        d_model = _check_positive_int(d_model, "d_model")
        num_heads = _check_positive_int(num_heads, "num_heads")
        if d_model % num_heads:
            raise ParameterError(f"`num_heads` must divide `d_model`; got d_model={d_model}, num_heads={num_heads}.")
        dtype = _check_float_dtype(dtype)
        _check_key(key)
        head_size = d_model // num_heads
        shape = (num_heads, head_size, d_model)
        scale = 1.0 / math.sqrt(d_model)
        shapes = (shape, shape, shape, (d_model, num_heads, head_size))
        wq, wk, wv, wo = _normal_tensors(key, shapes, dtype, (scale,) * 4)
        self.query_weight = wq
        self.key_weight = wk
        self.value_weight = wv
        self.output_weight = wo
        self.num_heads = num_heads
        self.head_size = head_size

    def _check_x(self, x) -> None:
        """Raise :class:`~hassejax.errors.ParameterError` unless `x` is a real `(n, d_model)` array (static
        checks: they work on tracers); checked before the mask, whose expected shape is read off `x`. Integer
        entries are taken, as before the check (the products promote them)."""
        d = self.query_weight.shape[2]
        shape = tuple(getattr(x, "shape", ()))
        dtype = getattr(x, "dtype", None)
        real = dtype is not None and (jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer))
        if len(shape) != 2 or shape[1] != d or shape[0] == 0 or not real:  # n = 0: NumPy's zero-size error before
            got = f"shape {shape}, dtype {dtype}" if hasattr(x, "shape") else f"an object of type {type(x).__name__}"
            hint = " (one row per position; batch with jax.vmap)" if len(shape) > 2 else ""
            raise ParameterError(
                f"`x` must be a real (float or integer) array of shape (n, {d}), n >= 1{hint}; got {got}."
            )

    def weights(
        self,
        x: Float[Array, "n d_model"],
        mask: Bool[Array, "n n"] | Bool[Array, "heads n n"] | IntervalMask | NestedMask,
    ) -> Float[Array, "heads n n"]:
        """Attention weights per head, `(heads, n, n)`; rows of empty mask rows are all 0.

        `x` and `mask` as in :meth:`__call__`: `(n, d_model)`, and `(n, n)` for all heads or
        `(heads, n, n)` per head.

        **Raises:** as :meth:`__call__`.
        """
        self._check_x(x)
        mask = _attention_mask(mask, x.shape[0], num_heads=self.num_heads)
        q = jnp.einsum("hkd,nd->hnk", self.query_weight, x)
        k = jnp.einsum("hkd,nd->hnk", self.key_weight, x)
        logits = jnp.einsum("hik,hjk->hij", q, k) / math.sqrt(self.head_size)
        return masked_softmax(logits, mask[None] if mask.ndim == 2 else mask)

    def __call__(
        self,
        x: Float[Array, "n d_model"],
        mask: Bool[Array, "n n"] | Bool[Array, "heads n n"] | IntervalMask | NestedMask,
    ) -> Float[Array, "n d_model"]:
        """The attention update of every position.

        **Arguments:**

        - `x`: float `(n, d_model)`, one row per position (slot).
        - `mask`: bool `(n, n)` (the same mask for every head) or `(num_heads, n, n)` (head `h`
          uses ``mask[h]``); row = query, column = key, True = may attend. An
          :class:`~hassejax.masks.IntervalMask` or nested lists of bools are taken too.

        **Returns:** float `(n, d_model)`; row `i` is exactly 0 where every head's mask row `i`
        is all False.

        **Raises:** :class:`~hassejax.errors.ParameterError` if `x` is not a real
        `(n, d_model)` array (a batch `(b, n, d_model)` included: use :func:`jax.vmap`);
        :class:`~hassejax.errors.MaskError` if `mask` is not bool, or of a shape other than
        `(n, n)` and `(num_heads, n, n)` (a per-head mask with another head count included).

        **Example:**

        ```python
        >>> import jax, jax.numpy as jnp
        >>> from hassejax.nn import MaskedMultiHeadAttention
        >>> attn = MaskedMultiHeadAttention(4, 2, key=jax.random.key(0))
        >>> x = jax.random.normal(jax.random.key(1), (3, 4))
        >>> per_head = jnp.stack([jnp.eye(3, dtype=bool), jnp.tril(jnp.ones((3, 3), bool))])
        >>> attn(x, per_head).shape                       # head 0: itself, head 1: causal
        (3, 4)
        >>> bool(jnp.allclose(attn(x, jnp.stack([per_head[1]] * 2)), attn(x, per_head[1])))
        True

        ```
        """
        w = self.weights(x, mask)
        v = jnp.einsum("hkd,nd->hnk", self.value_weight, x)
        heads = jnp.einsum("hij,hjk->ihk", w, v)
        return jnp.einsum("dhk,ihk->id", self.output_weight, heads)
