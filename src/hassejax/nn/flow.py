"""Jacobian information flow of a model, to compare with ``R^(L)`` (spec hasse.md §4).

``flow[i, j] = True`` iff some output feature of position `i` depends on some input feature of
position `j`: the position-to-position sparsity pattern of ``∂ out / ∂ in``. For an `L`-block
:class:`~hassejax.nn.Transformer` under mask `M` it equals ``R^(L) = (M | I)^L``
(:func:`hassejax.order.reachability`) for random weights and inputs.

The comparison is exact: masked attention weights and their derivatives are exact zeros
(:func:`hassejax.nn.masked_softmax`), so an absent path gives a Jacobian block of exact
zeros, while a present path gives a polynomial–exponential function of the weights and
inputs that vanishes only on a measure-zero set. The threshold is therefore exactly ``!= 0``.

Source: Li & Guo, arXiv:2606.09951 (paper); spec hasse.md §4 (derived: the structural-zero
argument).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from .._tracing import is_traced
from .._xla_flags import correctness_compiler_options
from ..errors import MaskError, ParameterError
from ..masks import IntervalMask
from .attention import MaskedMultiHeadAttention, NestedMask, _attention_mask
from .transformer import Transformer, TransformerBlock

__all__ = ["jacobian_flow"]


def _flow_of(fn, x, mask, mode):
    def f(x):
        return fn(x) if mask is None else fn(x, mask)

    jac = (jax.jacfwd if mode == "fwd" else jax.jacrev)(f)(x)  # (n, d_out, n, d_in)
    # NaN != 0: a non-finite Jacobian would read as a dependence everywhere it spreads (all True)
    flow = jnp.any(jac != 0, axis=(1, 3))
    # the smallest nonzero |entry|: near the underflow threshold, a longer path's product may have rounded to 0
    smallest = jnp.min(jnp.where(jac != 0, jnp.abs(jac), jnp.inf), initial=jnp.inf)
    return flow, jnp.all(jnp.isfinite(jac)), smallest


_flow_jit = eqx.filter_jit(_flow_of)


@functools.cache
def _flow_jit_with(options: tuple) -> Callable:
    """:func:`_flow_of` jitted with XLA `options` (the model's arrays traced, the rest static, as ``filter_jit``)."""

    def parts(arrays, static, x, mask, mode):
        return _flow_of(eqx.combine(arrays, static), x, mask, mode)

    return jax.jit(parts, static_argnums=(1, 4), compiler_options=dict(options))


_NOT_TOP_LEVEL = "can only be passed to top-level"  # JAX's ValueError for compiler_options inside a caller's jit


def _flow(fn, x, mask, mode):
    """The flow's program: with the per-program stand-in for jaxlib 0.10.2's correctness flag where JAX had started
    before ``import hassejax`` (its jitted ``jacrev`` reported dependences the mask forbids, a fresh-user review).
    Inside the caller's ``jit`` (where JAX takes no per-program options) ``mode="rev"`` is computed forward, which
    gives the same flow and was right there; a model whose static part is not hashable is compiled each call."""
    options = correctness_compiler_options(jax.default_backend())
    if not options:
        return _flow_jit(fn, x, mask, mode)
    arrays, static = eqx.partition(fn, eqx.is_array)
    try:
        hash(static)
    except TypeError:  # lists or dicts in the model (a review): a program of its own, with the options
        program = jax.jit(
            lambda arrays, x, mask: _flow_of(eqx.combine(arrays, static), x, mask, mode), compiler_options=options
        )
        run = functools.partial(program, arrays, x, mask)
    else:
        run = functools.partial(_flow_jit_with(tuple(sorted(options.items()))), arrays, static, x, mask, mode)
    try:
        return run()
    except ValueError as err:
        if _NOT_TOP_LEVEL not in str(err):
            raise
        return _flow_jit(fn, x, mask, "fwd")  # inside the caller's jit: forward, which the bug was not seen to break


_NON_FINITE = (
    "jacobian_flow: the Jacobian has NaN/inf entries (non-finite weights, or a forward pass that overflows): "
    "a non-finite entry is no structural zero, so no flow can be read from it."
)


_MARGIN_BINADES = 24  # room kept above the underflow threshold (float32's mantissa width): 2^24 ≈ 1.7e7


def _underflow_threshold(dtype) -> float | None:
    """``tiny · 2^24`` of `dtype` (float32: 2.0e-31): a nonzero Jacobian entry below it lies within a mantissa's width
    of the underflow threshold, where a longer path's product may have rounded to an exact 0 (a lost dependence).
    None for a dtype of float16's narrow range (tiny 6.1e-5), whose ordinary entries lie below that."""
    info = jnp.finfo(dtype)
    return None if info.maxexp < 128 else float(info.tiny) * 2.0**_MARGIN_BINADES


def _longest_hops(mask, num_layers: int) -> int:
    """The most hops a dependence of ``R^(num_layers)`` needs: the convergence depth ``L*`` of the heads' union mask
    (:func:`~hassejax.order._poset_numpy.depth_numpy`, on the host), at most `num_layers`."""
    from ..order._poset_numpy import depth_numpy

    m = np.asarray(mask, dtype=bool)
    return min(num_layers, depth_numpy(m.any(axis=0) if m.ndim == 3 else m, name="mask"))


def _check_input_scale(model: Transformer, inputs, mask) -> None:
    """Refuse concrete `inputs` whose scale makes a Transformer's longest dependences underflow.

    Each LayerNorm a path crosses divides by its row's standard deviation `σ` (the residual stream keeps the input's
    scale when `σ` is large), and a `k`-hop dependence crosses `k + 1` of them: its Jacobian entry is about
    ``σ^-(k+1)``. With ``σ^(k+1)`` past ``1 / (tiny · 2^24)`` for the most hops `k` a dependence of the flow needs
    (:func:`_longest_hops`: the mask's, at most `L`), those entries fall within a mantissa's width of the underflow
    threshold, or below it (exact zeros: float32 embeddings of 1e13 lost two-hop dependences under a shift mask,
    while the one-hop entries stayed far above any small-entry test). A review: counting `L` hops for every mask
    refused a 24-layer causal model at inputs of standard deviation 20, whose dependences are all one hop."""
    arr = np.asarray(inputs, dtype=np.float64)
    sigma = float(np.sqrt(np.max(np.mean((arr - arr.mean(axis=1, keepdims=True)) ** 2, axis=1))))
    info = jnp.finfo(inputs.dtype)
    if info.maxexp < 128 or sigma <= 1.0:
        return
    budget = -np.log2(float(info.tiny)) - _MARGIN_BINADES  # float32: 102 binades
    hops = _longest_hops(mask, model.num_layers) + 1
    if hops * np.log2(sigma) > budget:
        raise ParameterError(
            f"`inputs` are too large for this Transformer and mask in {inputs.dtype}: a row's standard deviation is "
            f"{sigma:.3g}, and the longest dependence of the flow, divided by it in each of the {hops} LayerNorms on "
            f"its path (about {sigma:.3g}^-{hops}), would come within 2^{_MARGIN_BINADES} of the underflow threshold "
            f"{float(info.tiny):.3g} or round to an exact 0 (a dependence silently missing). Rescale the inputs "
            f"(random values of unit scale), e.g. to standard deviation <= {2 ** (budget / hops):.3g}."
        )


def _underflow_message(smallest, threshold) -> str:
    value = "" if smallest is None else f" ({float(smallest):.3g})"
    return (
        f"jacobian_flow: a nonzero Jacobian entry{value} below tiny * 2^{_MARGIN_BINADES} = {threshold:.3g} of its dtype "
        "means dependences near the underflow threshold: a longer path's product may have rounded to an exact 0, "
        "a dependence silently missing. This comes from `inputs` (or weights) of extreme scale (e.g. embeddings of "
        "1e15 in float32, where each LayerNorm divides by 1e15); rescale them."
    )


_NO_DIAGONAL = (
    "jacobian_flow: the flow misses its diagonal at position(s) {rows}: a residual Transformer's output depends on its "
    "own input there for almost every input, so the forward pass lost it (an overflow or underflow of `inputs` or of "
    "the weights, or a final LayerNorm weight of exact zeros); no flow can be read from it."
)


def _num_heads(model) -> int | None:
    """The head count of a model that takes per-head `(num_heads, n, n)` masks, else None (`(n, n)` only)."""
    if isinstance(model, (Transformer, MaskedMultiHeadAttention)):
        return model.num_heads
    if isinstance(model, TransformerBlock):
        return model.attention.num_heads
    return None


def jacobian_flow(
    model: Transformer | Callable,
    inputs: Float[Array, "n d"],
    mask: Bool[Array, "n n"] | Bool[Array, "heads n n"] | IntervalMask | NestedMask | None = None,
    *,
    mode: Literal["fwd", "rev"] = "fwd",
) -> Bool[Array, "n n"]:
    """Position-to-position sparsity of the Jacobian of a model at `inputs` (spec hasse.md §4).

    **Arguments:**

    - `model`: a :class:`~hassejax.nn.Transformer` (its :meth:`~Transformer.forward_embeddings`
      is differentiated, embeddings `(n, d)` to outputs `(n, d)`, and `mask` is required), or
      any callable mapping `(n, d_in) -> (n, d_out)` (called as ``model(inputs)``, or
      ``model(inputs, mask)`` when `mask` is given).
    - `inputs`: float `(n, d)`, the embedding-level input (use random values of moderate scale: the result is
      exact for almost every input in exact arithmetic; in floating point, saturation — a softmax weight or a
      product of derivatives that rounds to an exact 0, from inputs or weights of extreme scale — can drop
      dependences but never adds one, see **Raises** for what is detected).
    - `mask`: bool `(n, n)` (row = query, column = key, True = may attend; an
      :class:`~hassejax.masks.IntervalMask` is made dense first, nested lists of bools become an array), or for a
      Transformer, a :class:`~hassejax.nn.TransformerBlock` or a :class:`~hassejax.nn.MaskedMultiHeadAttention` one
      mask per head, bool `(num_heads, n, n)`; the predicted flow is then
      ``reachability(mask, L, head_axis=0)`` (a layer's adjacency is the OR of its heads).
    - `mode`: ``"fwd"`` (:func:`jax.jacfwd`, default: input and output have the same size
      `n·d`, and it compiles faster) or ``"rev"`` (:func:`jax.jacrev`); both give the same result.

    **Returns:** bool `(n, n)`: ``flow[i, j]`` True iff ``∂ out[i, a] / ∂ inputs[j, b] != 0``
    for some features `a`, `b` (threshold exactly 0). Jitted (:func:`equinox.filter_jit`).

    **Raises:**

    - :class:`~hassejax.errors.ParameterError`: `inputs` not a finite floating `(n, d)` array (for
      a Transformer: of its parameters' dtype, with `n >= 1`), an unknown `mode`, or a callable whose output is not
      one `(n, d_out)` array (a tuple of outputs included: differentiate the one output you mean).
    - :class:`~hassejax.errors.ParameterError` also for a Jacobian with NaN/inf entries
      (non-finite weights, an overflowing forward pass), which would otherwise read as a
      dependence wherever it spreads; for a Transformer, concrete `inputs` whose LayerNorm variance overflows the
      dtype (entries of 1e20 in float32: every row normalised to a constant, the flow all False), or whose scale
      `σ` (a row's standard deviation) has ``σ^(k+1) > 1 / (tiny · 2^24)`` for the most hops `k` a dependence of the
      flow needs (at most `L`; the mask's own, so a causal mask needs one), where each of the `k + 1` LayerNorms on
      its path divides by `σ` and it underflows to an exact zero (float32 embeddings of 1e13 lose two-hop
      dependences), both naming `inputs`;
      for a nonzero Jacobian entry below ``tiny · 2^24`` of the output dtype (float32: 2.0e-31; not checked for
      float16), where a longer path's product may have underflowed to an exact 0 (each LayerNorm on a path divides
      by its row's standard deviation: float32 embeddings of 1e13 lost two-hop dependences); a conservative test,
      which also refuses a callable whose every entry is that small (rescale it);
      and for a Transformer or TransformerBlock whose flow
      misses a diagonal entry (structurally present: the residual). Inside the caller's ``jit`` these checks
      (but the one of `inputs`) raise ``equinox.EquinoxRuntimeError`` when the program runs.
      Not detected: a softmax that saturates (attention logits apart by more than ~100 in float32, from very large
      weights) drops the paths through the keys whose weight rounds to 0, with no small entry left to show it;
      such a flow is a subset of the true one (a dependence dropped, never one added).
    - :class:`~hassejax.errors.MaskError`: a Transformer without `mask`, or a mask that is
      not bool `(n, n)` (or `(num_heads, n, n)` for a Transformer, a block or an attention layer).

    Source: spec hasse.md §4 (paper: flow = ``R^(L)``; the exact-zero threshold is derived).

    **Example:** two blocks under a 4-token mask where token `i` attends to `i − 1` only: the flow
    reaches two tokens back, exactly ``reachability(mask, 2)``.

    ```python
    >>> import jax, jax.numpy as jnp
    >>> from hassejax.nn import Transformer, jacobian_flow
    >>> from hassejax.order import reachability
    >>> model = Transformer(2, 4, 2, vocab_size=3, num_positions=5, key=jax.random.key(0))
    >>> mask = jnp.eye(4, k=-1, dtype=bool)
    >>> flow = jacobian_flow(model, jax.random.normal(jax.random.key(1), (4, 4)), mask)
    >>> flow.astype(int).tolist()
    [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1]]
    >>> bool((flow == reachability(mask, model.num_layers)).all())
    True

    ```
    """
    if mode not in ("fwd", "rev"):
        raise ParameterError(f"`mode` must be 'fwd' or 'rev'; got {mode!r}.")
    if not hasattr(inputs, "ndim") or inputs.ndim != 2 or not jnp.issubdtype(inputs.dtype, jnp.floating):
        got = f"shape {tuple(inputs.shape)} dtype {inputs.dtype}" if hasattr(inputs, "shape") else type(inputs).__name__
        hint = " (nested lists: pass jnp.asarray(inputs, dtype=float))" if isinstance(inputs, (list, tuple)) else ""
        raise ParameterError(f"`inputs` must be a floating array of shape (n, d); got {got}.{hint}")
    n = inputs.shape[0]
    if not is_traced(inputs) and not np.all(np.isfinite(np.asarray(inputs))):
        raise ParameterError("`inputs` must be finite; got NaN/inf entries (they spread to every output).")
    if isinstance(model, Transformer):
        if mask is None:
            raise MaskError(
                "`mask` is required when `model` is a Transformer: its forward pass consumes a (n, n) mask."
            )
        if inputs.shape[1] != model.d_model:
            raise ParameterError(
                f"`inputs` must have d = d_model = {model.d_model} features; got shape {tuple(inputs.shape)}."
            )
        model._check_embeddings(inputs, "inputs")
        fn = model.forward_embeddings
    elif callable(model):
        fn = model
    else:
        raise ParameterError(
            f"`model` must be a Transformer or a callable (n, d) -> (n, d'); got {type(model).__name__}."
        )
    if mask is not None:  # per-head masks where the model takes them (a review: a TransformerBlock's were refused)
        mask = _attention_mask(mask, n, num_heads=_num_heads(model), against="inputs")
        if isinstance(model, Transformer) and not is_traced(inputs) and not is_traced(mask):
            _check_input_scale(model, inputs, mask)
    out = jax.eval_shape(lambda x: fn(x) if mask is None else fn(x, mask), inputs)
    if not isinstance(out, jax.ShapeDtypeStruct):  # a tuple of outputs: an AttributeError ('tuple' ... 'shape') before
        wrap = "lambda x: model(x)[0]" if mask is None else "lambda x, mask: model(x, mask)[0]"
        raise ParameterError(
            f"`model` must return one (n, d_out) array, n = {n}; it returned a {type(out).__name__} of "
            f"{len(jax.tree.leaves(out))} array(s): pass a function returning the output to differentiate (e.g. "
            f"{wrap})."
        )
    if len(out.shape) != 2 or out.shape[0] != n:
        raise ParameterError(
            f"`model` must map (n, d) to (n, d_out) with n = {n}; its output has shape {tuple(out.shape)}."
        )
    flow, finite, smallest = _flow(fn, inputs, mask, mode)
    threshold = _underflow_threshold(out.dtype)
    residual = isinstance(model, (Transformer, TransformerBlock))  # the diagonal is structural (x + ...)
    if is_traced(finite):  # inside the caller's jit: a runtime check (a host callback in their program)
        flow = eqx.error_if(flow, ~finite, _NON_FINITE)
        if threshold is not None:
            flow = eqx.error_if(flow, smallest < threshold, _underflow_message(None, threshold))
        if residual:
            flow = eqx.error_if(flow, ~jnp.all(jnp.diagonal(flow)), _NO_DIAGONAL.format(rows="(traced)"))
        return flow
    if not bool(finite):  # the compiled program holds no callback (JAX's persistent cache keeps it)
        raise ParameterError(_NON_FINITE)
    if threshold is not None and float(smallest) < threshold:
        raise ParameterError(_underflow_message(smallest, threshold))
    if residual and not bool(jnp.all(jnp.diagonal(flow))):
        rows = np.flatnonzero(~np.diagonal(np.asarray(flow))).tolist()
        raise ParameterError(_NO_DIAGONAL.format(rows=rows))
    return flow
