"""Evaluate a FlexAttention-style ``mask_mod`` over an index grid (private).

Out-of-range reads inside the callable are refused. JAX clamps a gather index past the
end of its axis to the last entry (``d[5]`` of a length-3 ``d`` reads ``d[2]``) and
says nothing, so a table sized for fewer positions than the grid silently gives a wrong
mask; PyTorch would raise. Every evaluation here runs under
:func:`jax.experimental.checkify.checkify` with ``checkify.index_checks``: a gather index
``>= size`` (or ``< -size``) anywhere in the callable is a :class:`MaskError` naming the
callable's argument, the index and the size (concrete evaluation), or a run-time error
through :func:`equinox.error_if` with the same first sentence (under an outer
``jax.jit``, where the index is not known at trace time). Negative indices from ``-size``
to ``-1`` count from the end (NumPy's rule, which JAX applies before the gather) and are
not checked: FlexAttention mask_mods index with ``q_idx``, ``kv_idx`` >= 0 by design.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.experimental import checkify

from ..errors import MaskError
from ._args import describe, is_traced

__all__ = ["evaluate_mask_mod", "evaluate_mask_mod_unchecked", "evaluate_mask_mod_checked", "raise_index_error"]


def _out_of_range(name: str) -> str:
    return (
        f"`{name}` indexed an array out of range (an index >= the size of the axis it indexes, or < -size; JAX "
        "reports a negative index after adding the size once)"
    )


_HINT = (
    "JAX would silently clamp it to the last entry (a wrong mask), so it is refused. Size every table "
    "to the grid (e.g. one document id per position, length n) or clamp the index yourself "
    "(jnp.minimum); explicit mode='fill' / mode='clip' reads are checked too (from_mask_mod's "
    "check_indices=False turns the check off)."
)


def evaluate_mask_mod_unchecked(
    fn: Callable, q_idx: jax.Array, kv_idx: jax.Array, b: int, h: int, name: str
) -> jax.Array:
    """``out[i, j] = fn(b, h, q_idx[i], kv_idx[j])``, with the shape and dtype checks but no index check.

    `fn` sees int32 scalars, as FlexAttention's ``create_mask`` gives them; the grid is
    built with two nested :func:`jax.vmap` (no Python loop). The result must be a Boolean
    scalar per pair; anything else (or an exception while tracing) is a
    :class:`MaskError` naming `name`. Traceable: wrap it in ``checkify`` to check indices.
    """
    if not callable(fn):
        raise MaskError(f"`{name}` must be a callable (b, h, q_idx, kv_idx) -> bool; got {describe(fn)}.")
    b_arr = jnp.asarray(b, dtype=jnp.int32)
    h_arr = jnp.asarray(h, dtype=jnp.int32)

    try:  # the call's arity first (a fresh user: a two-argument function met the jnp advice below)
        inspect.signature(fn).bind(0, 0, 0, 0)
    except TypeError as exc:
        raise MaskError(
            f"`{name}` must take four positional arguments (b, h, q_idx, kv_idx), as FlexAttention's mask_mod does; "
            f"calling it so: {exc}."
        ) from None
    except ValueError:  # no signature to read (a builtin): the call below tells
        pass

    def one(q, k):
        value = fn(b_arr, h_arr, q, k)
        if value is None:
            raise MaskError(f"`{name}` returned None; it must return a Boolean (True = may attend) for each pair.")
        return jnp.asarray(value)

    def row(q):
        return jax.vmap(lambda k: one(q, k))(kv_idx)

    try:
        out = jax.vmap(row)(q_idx)
    except MaskError:
        raise
    except Exception as exc:
        # the jnp advice only where a Python branch met a traced index (not for a ZeroDivisionError, a fresh user)
        tracer_errors = (
            jax.errors.ConcretizationTypeError,  # TracerBoolConversionError among them
            jax.errors.TracerIntegerConversionError,
            jax.errors.TracerArrayConversionError,
        )
        hint = (
            " Write it with jnp operations on the indices (jnp.where / & / | instead of Python if / and / or, jnp "
            "arrays instead of Python lists or NumPy)."
            if isinstance(exc, tracer_errors)
            else ""
        )
        raise MaskError(
            f"`{name}` raised {type(exc).__name__} when evaluated on traced int32 scalar indices "
            f"(b, h, q_idx, kv_idx) under jax.vmap: {exc}.{hint}"
        ) from exc
    want = (q_idx.shape[0], kv_idx.shape[0])
    if out.shape != want:
        raise MaskError(
            f"`{name}` must return one Boolean scalar per (q_idx, kv_idx) pair; evaluated over the grid it "
            f"gave shape {out.shape} instead of {want} (per pair: shape {out.shape[2:]})."
        )
    if out.dtype != jnp.bool_:
        raise MaskError(
            f"`{name}` must return a Boolean (True = may attend); it returned dtype {out.dtype}. "
            "Compare explicitly (e.g. `q_idx >= kv_idx`) or cast with `.astype(bool)` if 0/1 means blocked/allowed."
        )
    return out


def evaluate_mask_mod_checked(
    fn: Callable, q_idx: jax.Array, kv_idx: jax.Array, b: int, h: int, name: str
) -> tuple[checkify.Error, jax.Array]:
    """:func:`evaluate_mask_mod_unchecked` under ``checkify.index_checks``: ``(error, out)``.

    Traceable (use it inside a jitted kernel and read the error on the host with
    :func:`raise_index_error`).
    """
    checked = checkify.checkify(
        lambda q, k: evaluate_mask_mod_unchecked(fn, q, k, b, h, name), errors=checkify.index_checks
    )
    return checked(q_idx, kv_idx)


def raise_index_error(error: checkify.Error | None, name: str, grid: str) -> None:
    """Raise :class:`MaskError` naming `name` if the concrete checkify `error` holds an out-of-range index.

    `grid` says where the callable was evaluated (e.g. ``"q_idx in [0, 5), kv_idx in [0, 5), b=0, h=0"``).
    `error` None (nothing was checked) passes.
    """
    if error is None:
        return
    message = error.get()
    if message is not None:
        detail = " ".join(message.split())  # checkify: "out-of-bounds indexing for array of shape (3,): ..."
        raise MaskError(f"{_out_of_range(name)} when evaluated on {grid}: {detail.rstrip('. ')}. {_HINT}")


def _traced_flag(error: checkify.Error) -> jax.Array | None:
    """Whether the traced checkify `error` is set, as a Boolean scalar (None when nothing was checked).

    ``checkify.Error`` reads its message only from concrete values and has no public
    predicate; its predicates are its Boolean leaves (a pytree of one predicate, code and
    payload per kind of check).
    """
    preds = [leaf for leaf in jax.tree_util.tree_leaves(error) if jnp.asarray(leaf).dtype == jnp.bool_]
    if not preds:
        return None
    return jnp.any(jnp.stack([jnp.any(p) for p in preds]))


def evaluate_mask_mod(
    fn: Callable,
    q_idx: jax.Array,
    kv_idx: jax.Array,
    b: int,
    h: int,
    name: str,
    *,
    grid: str | None = None,
    check: bool = True,
) -> jax.Array:
    """``out[i, j] = fn(b, h, q_idx[i], kv_idx[j])`` for int32 vectors `q_idx`, `kv_idx`, indices checked.

    As :func:`evaluate_mask_mod_unchecked`, and an out-of-range gather index inside `fn`
    is a :class:`MaskError` naming `name` (concrete evaluation) or a run-time error
    through :func:`equinox.error_if` (traced, under an outer ``jax.jit``; the message then
    names `name` but not the index, which is only known at run time). `grid` describes
    the evaluated indices for the message. ``check=False``: no index check.
    """
    if not check:
        return evaluate_mask_mod_unchecked(fn, q_idx, kv_idx, b, h, name)
    error, out = evaluate_mask_mod_checked(fn, q_idx, kv_idx, b, h, name)
    where = grid if grid is not None else "its index grid"
    if any(is_traced(leaf) for leaf in jax.tree_util.tree_leaves(error)):
        flag = _traced_flag(error)
        if flag is None:
            return out
        return eqx.error_if(out, flag, f"{_out_of_range(name)} when evaluated on {where}. {_HINT}")
    raise_index_error(error, name, where)
    return out
