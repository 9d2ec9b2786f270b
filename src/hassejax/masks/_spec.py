"""A safe parser for mask specifications such as ``"sliding_window(n=16, left=2)"`` (imports no JAX).

The dense registry :data:`~hassejax.masks.MASKS` lives in :mod:`hassejax.masks._registry` and
is imported only for ``form="dense"``: ``from_spec(..., form="intervals")`` builds from
:data:`hassejax.masks.structured.MASKS` (pure NumPy) and never starts JAX.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from typing import Literal

import jaxtyping as jt
from jaxtyping import Bool

from ..errors import MaskError
from . import structured
from ._intervals import IntervalMask
from ._validate import checked, describe, signature_text

__all__ = ["from_spec", "build_spec"]


def _signature_text(name: str, fn: Callable) -> str:
    return signature_text(name, inspect.signature(fn))


def _literal(node: ast.AST, what: str, text: str):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise MaskError(
            f"mask spec {text!r}: {what} must be a literal (number, string, True/False/None, or a list/tuple "
            f"of those); got `{ast.unparse(node)}`."
        ) from None


def _text_arg(value, name: str) -> str:
    if not isinstance(value, str):
        raise MaskError(f"`{name}` must be a mask spec string like 'causal(8)'; got {describe(value)}.")
    return value


def _form_arg(value, name: str) -> str:
    if isinstance(value, str) and value in ("dense", "intervals"):
        return value
    raise MaskError(
        f"`{name}` must be 'dense' (a Boolean (n, n) array) or 'intervals' (an IntervalMask, no n x n array); "
        f"got {describe(value)}."
    )


_DERIVED = ("block_two_stream_mask", "butterfly_mask")
"""Masks derived from task families (:func:`hassejax.kernels.mask_rule` builds them), not in the gallery's registry."""

_COMBINE = {ast.BitOr: ("|", "a union"), ast.BitAnd: ("&", "an intersection")}


def _segment(source: str, node: ast.AST) -> str:
    return ast.get_source_segment(source, node) or ast.unparse(node)


@checked(text=_text_arg, form=_form_arg)
def from_spec(text: str, *, form: Literal["dense", "intervals"] = "dense") -> Bool[jt.Array, "n n"] | IntervalMask:
    """Build a registered mask, or a union/intersection of them, from a specification string.

    The string is one call ``NAME(arg, ..., key=value, ...)`` of a constructor in
    :data:`~hassejax.masks.MASKS`, or such calls combined with ``|`` (union: attend where some part
    allows), ``&`` (intersection: attend where every part allows) and parentheses
    (``&`` binds tighter than ``|``, as in Python). It is parsed with :mod:`ast` and every
    argument must be a Python literal (numbers, strings, True/False/None, lists and tuples
    of them), read with :func:`ast.literal_eval`. Nothing is evaluated: no names, attribute
    access, arithmetic on non-literals or lambdas. Examples::

        from_spec("causal(8)")
        from_spec("sliding_window(n=16, left=2)")
        from_spec("block_diffusion(n=4, block_size=2)")         # (8, 8): 2n slots
        from_spec("document(segments=[3, 2], inner='full')")
        from_spec("xlnet_two_stream(permutation=[2, 0, 1], stream='query')")
        from_spec("sliding_window(n=131072, left=4096) | attention_sinks(n=131072, num=4)",
                  form="intervals")                           # StreamingLLM, no n x n array
        from_spec("document(segments=[3, 5]) & sliding_window(n=8, left=2)")

    With ``form="intervals"`` every part is built by the structured constructor of the same
    name (:mod:`hassejax.masks.structured`, same arguments) and combined row by row, so the
    result is an :class:`~hassejax.masks.IntervalMask` and no ``(n, n)`` array is made at
    any point: long-context specs (``n = 1,048,576``) take well under a second.

    Sizes beyond the sequence: a window is capped at `n` (a wider one means the same on `n`
    positions), so ``sliding_window``'s `left` and `right`, ``dilated``'s `window` and
    `dilation` and ``global_sliding``'s `window` take any integer in range below (``>= 0``,
    `dilation` ``>= 1``): ``sliding_window(n=8, left=1000000)`` is ``causal(n=8)``. The sizes
    that cut the sequence into parts are refused beyond it (a :class:`~hassejax.errors.MaskError`
    naming the range): ``prefix_lm``'s `prefix`, ``attention_sinks``' `num` and
    ``xlnet_two_stream``'s `context` must lie in `[0, n]`; ``block_causal``'s and
    ``block_diffusion``'s `block_size` and ``chunked_causal``'s `chunk` in `[1, n]`;
    ``natten_2d``'s `kernel_h` and `kernel_w` at most `height` and `width`.

    **Arguments:**

    - `text`: the specification string.
    - `form`: ``"dense"`` (default: a Boolean JAX array) or ``"intervals"`` (an
      :class:`~hassejax.masks.IntervalMask`).

    **Returns:** the Boolean `(n, n)` mask (row = query, column = key, True = may attend),
    or its :class:`~hassejax.masks.IntervalMask`.

    **Raises:** :class:`~hassejax.errors.MaskError` for a string that is not one call or a
    ``|``/``&`` combination of calls, an unknown mask name (listing the known names), an
    argument that is not a literal, an unknown, missing or repeated argument (naming it
    and showing the signature), parts of different sizes (naming both parts and their
    `n`), a bad `form`, or whatever the constructor rejects (its own message, naming the
    argument). :class:`~hassejax.errors.MemoryBudgetError` if the result would not fit.

    **Example:**

    ```python
    >>> from hassejax.masks import from_spec
    >>> m = from_spec("sliding_window(n=8, left=1) | attention_sinks(n=8, num=2)", form="intervals")
    >>> m.row(5)
    [(0, 2), (4, 6)]

    ```

    Source: (derived), no paper: the mask-spec front door of DESIGN.md "Data flow"; masks in the convention of spec
    hasse.md §0.
    """
    if form == "dense":
        from ._registry import MASKS

        return build_spec(text, MASKS)
    return build_spec(text, structured.MASKS)


def build_spec(text: str, registry: dict[str, Callable], *, also_known: tuple[str, ...] = ()):
    """Parse a spec and build it from `registry` (name -> constructor): the body of :func:`from_spec`.

    Any registry whose values return objects with ``|``, ``&`` and ``shape`` works (the
    kernels module builds mask rules with it). `also_known`: names the caller builds by another
    route (the command line's derived masks), listed with the registry's as the known masks in
    the errors. **Raises:** as :func:`from_spec`.
    """
    source = text.strip()
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise MaskError(f"mask spec {text!r} is not valid syntax ({exc.msg}); expected NAME(arg=value, ...).") from None
    except (RecursionError, MemoryError):
        raise MaskError(f"mask spec {text!r} is nested too deeply to parse.") from None
    mask, _ = _build(tree.body, source, text, registry, ", ".join(sorted({*registry, *also_known})))
    return mask


def _build(root: ast.AST, source: str, text: str, registry: dict, known: str):
    """The mask of a parsed spec and its size `n`: calls combined with `|`/`&`, left to right.

    Iterative (an explicit stack, not recursion), so a long chain ``a | b | c | ...`` of
    any length works.
    """
    stack: list[tuple[ast.AST, bool]] = [(root, False)]
    values: list[tuple] = []
    while stack:
        node, combined = stack.pop()
        if isinstance(node, ast.BinOp) and type(node.op) in _COMBINE:
            if not combined:  # parts first (left before right), then this node
                stack += [(node, True), (node.right, False), (node.left, False)]
                continue
            (right, n_right), (left, n_left) = values.pop(), values.pop()
            symbol, word = _COMBINE[type(node.op)]
            if n_left != n_right:
                raise MaskError(
                    f"mask spec {text!r}: the parts of {word} ({symbol}) must have the same n (number of "
                    f"positions); `{_segment(source, node.left)}` has n = {n_left} but "
                    f"`{_segment(source, node.right)}` has n = {n_right}."
                )
            values.append((left | right if symbol == "|" else left & right, n_left))
            continue
        if isinstance(node, ast.BoolOp):
            word = "or" if isinstance(node.op, ast.Or) else "and"
            raise MaskError(f"mask spec {text!r}: combine masks with | (union) and & (intersection), not `{word}`.")
        mask = _call(node, source, text, registry, known)
        values.append((mask, int(mask.shape[0])))
    return values[0]


def _call(call: ast.AST, source: str, text: str, registry: dict, known: str):
    """The mask of one call ``NAME(arg, ..., key=value)`` of a registered constructor (`known`: the names listed
    as known in the errors)."""
    if isinstance(call, ast.Name):
        if call.id in registry:
            raise MaskError(
                f"mask spec {text!r} names a mask without arguments; write a call: {_signature_text(call.id, registry[call.id])}."
            )
        if call.id in _DERIVED:  # from_spec's refusal of a derived mask, as for a call of it
            raise MaskError(
                f"mask spec {text!r}: {call.id!r} is a mask derived from a task family, built by "
                f"hassejax.kernels.mask_rule from a call {call.id}(...); from_spec knows: {known}."
            )
        raise MaskError(f"mask spec {text!r}: unknown mask {call.id!r}; known masks: {known}.")
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        raise MaskError(
            f"mask spec {text!r} must be a single call NAME(arg=value, ...) of a known mask ({known}), or such "
            f"calls combined with | (union), & (intersection) and parentheses; got `{_segment(source, call)}`."
        )
    name = call.func.id
    if name not in registry and name in _DERIVED:  # the command line and the kernels take them, not from_spec
        raise MaskError(
            f"mask spec {text!r}: {name!r} is a mask derived from a task family, built by "
            f"hassejax.kernels.mask_rule({text!r}) (its `.intervals` is the interval form); from_spec knows: {known}."
        )
    if name not in registry:
        raise MaskError(f"mask spec {text!r}: unknown mask {name!r}; known masks: {known}.")
    fn = registry[name]
    usage = _signature_text(name, fn)
    args = []
    for i, node in enumerate(call.args):
        if isinstance(node, ast.Starred):
            raise MaskError(f"mask spec {text!r}: *-unpacking is not allowed; use {usage}.")
        args.append(_literal(node, f"positional argument {i} of {name}", text))
    kwargs = {}
    params = inspect.signature(fn).parameters
    for kw in call.keywords:
        if kw.arg is None:
            raise MaskError(f"mask spec {text!r}: **-unpacking is not allowed; use {usage}.")
        if kw.arg not in params:
            raise MaskError(
                f"mask spec {text!r}: unknown argument {kw.arg!r} for {name}; its arguments are "
                f"{', '.join(params)} ({usage})."
            )
        if kw.arg in kwargs:
            raise MaskError(f"mask spec {text!r}: argument {kw.arg!r} given twice ({usage}).")
        kwargs[kw.arg] = _literal(kw.value, f"argument {kw.arg!r} of {name}", text)
    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except TypeError as exc:
        raise MaskError(f"mask spec {text!r}: {exc} ({usage}).") from None
    try:
        return fn(*args, **kwargs)
    except MaskError as exc:  # a bad value: say which spec, and which part of a combined one
        part = _segment(source, call)
        where = "" if part.strip() == text.strip() else f", in `{part}`"
        raise type(exc)(f"mask spec {text!r}{where}: {exc}") from None
