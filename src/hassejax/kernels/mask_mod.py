"""Masks out as FlexAttention-style ``mask_mod`` callables and as pasteable Python source.

FlexAttention (PyTorch) and Hugging Face's masking functions describe a mask as a callable
``mask_mod(b, h, q_idx, kv_idx) -> bool`` (row = query, column = key, True = may attend).
:func:`mask_rule` finds the elementwise rule of a mask (the closed form of a library or
derived mask, else the mask's key runs as lookup tables), :func:`to_mask_mod` compiles it
with ``jax.numpy`` and :func:`mask_mod_source` prints it; both are generated from the same
rule text, so the callable, the source and :func:`hassejax.masks.from_mask_mod` agree.

Source: FlexAttention's ``mask_mod`` convention (PyTorch ``torch.nn.attention.flex_attention``);
the rules are the mask gallery's (``/shared/cases/mask_gallery.md``) and spec hasse.md §3.2–3.3
for Block Two-Stream and Butterfly.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import keyword
import re
import textwrap
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from .._mask_checks import check_mask
from ..errors import MaskError, TaskError
from ..masks._intervals import IntervalMask
from ..masks._validate import checked, describe, is_traced
from ._rules import FAMILY_BUILDERS, RULE_BUILDERS, MaskRule, _recognise_splash, per_head_rule, rule_from_runs

__all__ = ["mask_mod_source", "mask_rule", "to_mask_mod"]

_TABLE_LIMIT = 1 << 22
"""Lookup-table entries :func:`mask_mod_source` prints before it refuses (4 Mi numbers of text)."""


def _spec_registry() -> dict[str, Callable[..., MaskRule]]:
    """Spec names -> functions with the constructors' signatures that return a :class:`MaskRule`."""
    from ..masks import structured
    from ..tasks import block_two_stream_mask, butterfly_mask

    def gallery(name: str, fn: Callable) -> Callable[..., MaskRule]:
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def build(*args, **kwargs) -> MaskRule:
            im = fn(*args, **kwargs)  # validates every argument, the exact interval form
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            label = _call_text(name, bound)
            closed = RULE_BUILDERS.get(name)
            rule = rule_from_runs(im, label) if closed is None else closed(im, **bound.arguments)
            return dataclasses.replace(rule, label=label, intervals=im, splash=_splash_recipe(rule, im))

        return build

    def family(name: str, fn: Callable) -> Callable[..., MaskRule]:
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def build(*args, **kwargs) -> MaskRule:
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            form = bound.arguments.pop("form", "dense")
            if not isinstance(form, str) or form not in ("dense", "intervals"):
                # the spec's mask is its interval form whatever `form` says; a bad value is still an error (a fresh
                # user: `butterfly_mask(n=4, form='bogus')` was accepted and ignored, as Python refuses it)
                raise MaskError(f"`form` must be one of ('dense', 'intervals'); got {form!r}.")
            try:  # validates the arguments (O(n), no n x n array)
                im = fn(**bound.arguments, form="intervals")
                rule = FAMILY_BUILDERS[name](**bound.arguments)
            except TaskError as exc:
                # a bad argument of a spec's part is a bad mask spec, as for the gallery's masks: the spec parser
                # adds the spec and the part (a TaskError escaped `except MaskError` and named no spec)
                raise MaskError(str(exc)) from None
            return dataclasses.replace(
                rule, label=_call_text(name, bound), intervals=im, splash=_splash_recipe(rule, im)
            )

        return build

    registry = {name: gallery(name, fn) for name, fn in structured.MASKS.items()}
    registry["block_two_stream_mask"] = family("block_two_stream_mask", block_two_stream_mask)
    registry["butterfly_mask"] = family("butterfly_mask", butterfly_mask)
    return registry


def _splash_recipe(rule: MaskRule, im: IntervalMask) -> tuple | None:
    """The splash structure of a spec's part: its own, or the one its key runs have (``document`` of equal
    lengths is chunked causal, ``prefix_lm`` with the whole prefix is full, ...), as for an IntervalMask or
    array of the same mask."""
    return rule.splash if rule.splash is not None else _recognise_splash(im)


def _call_text(name: str, bound: inspect.BoundArguments) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in bound.arguments.items() if k != "form")
    text = f"{name}({args})"
    return text if len(text) <= 120 else text[:117] + "..."


def _labelled(rule: MaskRule, label: str) -> MaskRule:
    return dataclasses.replace(rule, label=label)


def _rule_of_spec(text: str) -> MaskRule:
    from ..masks._spec import build_spec

    rule = build_spec(text, _spec_registry())
    combined = " | " in rule.label or " & " in rule.label  # parts joined: label with the spec as written
    if rule.splash is None and rule.intervals is not None and rule.heads is None:
        # a union or intersection with a part splash has no structure for may still be one as a whole
        # (``document(segments=[100, 156]) | causal(n=256)`` is causal), as the same mask as an array is
        rule = dataclasses.replace(rule, splash=_recognise_splash(rule.intervals))
    return _labelled(rule, text.strip()) if combined else rule


def mask_rule(mask: Any) -> MaskRule:
    """The elementwise rule ``M[q, k] = rule(h, q, k)`` of a mask, in the form kernels take.

    - a **spec string** (:func:`hassejax.masks.from_spec` grammar, ``|``, ``&`` and
      parentheses), also naming the derived masks ``block_two_stream_mask(n=…, block_size=…,
      group=…, content=…, keep_last_block=…)`` and ``butterfly_mask(n=…, sparse=…)`` of
      :mod:`hassejax.tasks`: the closed form of each part (``kv_idx <= q_idx`` for causal,
      document ids for packed documents, the clamped centres of ``natten_2d``'s grid rows and columns, the
      global positions of ``global_sliding`` as range tests, ...); parts without one (``tree_prefix``, a callable
      document `inner`) use their key runs;
    - an :class:`~hassejax.masks.IntervalMask`, a Boolean ``(n, n)`` array (NumPy or JAX,
      concrete) or a :class:`hassejax.tasks.Task` (a merged task: its slot mask): the key
      runs as lookup tables, ``OR_t STARTS_t[q] <= k < STOPS_t[q]`` (exact for every mask);
    - **per-head** masks: a Boolean ``(heads, n, n)`` array or a list/tuple of any of the
      above, one per head: ``OR_i (h == i) & rule_i``. A head index ``h`` outside
      ``0 .. heads - 1`` matches no term and attends nowhere (its rows are all False): export
      one mask per head of the model (:func:`hassejax.masks.from_mask_mod` refuses such an `h` for
      a function of :func:`to_mask_mod`, which carries its rule);
    - a rule already made (returned as is).

    **Returns:** a ``MaskRule`` (fields ``n``, ``expr``, ``tables``, ``label``, ``splash``,
    ``heads``; ``rule.evaluate(q, k, h)`` on NumPy index arrays).

    **Raises:** :class:`~hassejax.errors.MaskError` for anything else (naming `mask`), a
    non-square or non-Boolean array, heads of different sizes, or a bad spec (the message
    of :func:`hassejax.masks.from_spec`); :class:`~hassejax.errors.MemoryBudgetError` as the
    constructors raise it.

    Source: FlexAttention's ``mask_mod(b, h, q_idx, kv_idx)`` (arXiv:2412.05496), the convention of spec hasse.md
    §0; the closed forms of the derived masks are spec hasse.md §3.2–3.3.

    **Example:**

    ```python
    >>> from hassejax.kernels import mask_rule
    >>> mask_rule("sliding_window(n=8, left=2) | attention_sinks(n=8, num=1)").expr
    '((q_idx - kv_idx <= 2) & (kv_idx - q_idx <= 0)) | ((kv_idx < 1) & (kv_idx <= q_idx))'

    ```
    """
    if isinstance(mask, MaskRule):
        return mask
    if isinstance(mask, str):
        return _rule_of_spec(mask)
    if isinstance(mask, IntervalMask):
        return rule_from_runs(mask)
    from ..tasks.task import Task

    if isinstance(mask, Task):
        return rule_from_runs(
            IntervalMask.from_dense(np.asarray(mask.mask), name="mask"), f"slots of {mask.name or 'task'}"
        )
    if isinstance(mask, (list, tuple)) and mask and all(_is_nested_entry(m) for m in mask):
        # nested lists of bools: one (n, n) mask, or (heads, n, n), as the order functions and tile_stats read them
        # (a fresh user: [[True, False], [True, True]] was refused as a list of two heads)
        return mask_rule(check_mask(mask, "mask", square=False))
    if isinstance(mask, (list, tuple)):
        if not mask:
            raise MaskError("`mask` given as per-head masks must hold at least one head; got an empty sequence.")
        return per_head_rule([_single(m, f"mask[{i}]") for i, m in enumerate(mask)])
    if hasattr(mask, "shape") and hasattr(mask, "dtype") and getattr(mask, "ndim", 0) == 3:
        return per_head_rule([_single(mask[i], f"mask[{i}]") for i in range(mask.shape[0])])
    return _single(mask, "mask")


def _is_nested_entry(m: Any) -> bool:
    """Whether `m` is an entry of nested lists of bools: a list, tuple or bool, or a row (an array of rank 1)."""
    return isinstance(m, (list, tuple, bool, np.bool_)) or getattr(m, "ndim", None) == 1


def _single(mask: Any, name: str) -> MaskRule:
    if isinstance(mask, (list, tuple)):  # one head as nested lists of bools
        mask = check_mask(mask, name, square=False, batched=False)
    if isinstance(mask, (MaskRule, str, IntervalMask)):
        rule = mask_rule(mask)
        if rule.heads is not None:
            raise MaskError(f"`{name}` must be one head's mask; got a per-head rule with {rule.heads} heads.")
        return rule
    if not (hasattr(mask, "shape") and hasattr(mask, "dtype")):
        raise MaskError(
            f"`{name}` must be a mask spec string, an IntervalMask, a Boolean (n, n) array, a Task, or a "
            f"list of those (one per head); got {describe(mask)}."
        )
    if is_traced(mask):
        raise MaskError(f"`{name}`: a rule is read from a concrete mask; call this outside jax.jit.")
    if mask.ndim != 2 or mask.shape[0] != mask.shape[1]:
        raise MaskError(
            f"`{name}` must be a square Boolean array (n, n), or (heads, n, n) for one mask per head; got shape "
            f"{tuple(mask.shape)}."
        )
    return rule_from_runs(IntervalMask.from_dense(mask, name=name))


# ------------------------------------------------------------------------ source and callable

_FRAMEWORKS = {
    "torch": ("import torch", "torch.tensor({values}, dtype=torch.{dtype})", "torch"),
    "jax": ("import jax.numpy as jnp", "jnp.array({values}, dtype=jnp.{dtype})", "jnp"),
    "numpy": ("import numpy as np", "np.array({values}, dtype=np.{dtype})", "np"),
}


def _framework_arg(value, name: str) -> str:
    if not isinstance(value, str) or value not in _FRAMEWORKS:
        raise MaskError(f"`{name}` must be one of {', '.join(map(repr, _FRAMEWORKS))}; got {describe(value)}.")
    return value


_RESERVED = frozenset({"b", "h", "q_idx", "kv_idx", "abs", "np", "jnp", "torch"})


def _name_arg(value, name: str) -> str:
    if not (isinstance(value, str) and value.isidentifier()) or keyword.iskeyword(value):
        raise MaskError(
            f"`{name}` must be a Python identifier (not a keyword) for the function; got {describe(value)}."
        )
    if value in _RESERVED or value.isupper():
        raise MaskError(
            f"`{name}` must not shadow a name the source uses (arguments, abs, the array module, UPPER-CASE lookup "
            f"tables); got {value!r}."
        )
    return value


def _docstring_text(text: str) -> str:
    """`text` to write between triple double quotes, reading back as itself: backslashes doubled, and every double
    quote escaped where the text holds three in a row (a combined spec's label is the spec as written, and a spec
    with a triple-quoted string literal closed the docstring early: a SyntaxError from ``exec``)."""
    text = text.replace("\\", "\\\\")
    return text.replace('"', '\\"') if '"""' in text else text


def _wrapped_reads(rule: MaskRule) -> str:
    """`rule.expr` with every table read ``T[i]`` written ``T[i % len(T)]``: FlexAttention's ``create_block_mask`` and
    kernel evaluate ``mask_mod`` on a grid rounded up to the block size (PyTorch issue #137801), and a read past a
    table's end raised ``IndexError`` (NumPy, PyTorch on the CPU) or a device-side assert (CUDA) for `n` not a multiple
    of it (a fresh user). Below `n` the index is unchanged; past it the value is discarded by the kernel."""
    if not rule.tables:
        return rule.expr
    lengths = {name: len(arr) for name, arr in rule.tables}
    pattern = r"\b(" + "|".join(map(re.escape, sorted(lengths, key=len, reverse=True))) + r")\[([^\[\]]+)\]"

    def wrap(m: re.Match) -> str:
        index = m.group(2).strip()
        index = index if index.isidentifier() else f"({index})"
        return f"{m.group(1)}[{index} % {lengths[m.group(1)]}]"

    return re.sub(pattern, wrap, rule.expr)


def _function_source(rule: MaskRule, name: str) -> str:
    doc = _docstring_text(f"{rule.label or 'mask'}: {rule.n} positions; row = query, column = key, True = may attend.")
    expr = _wrapped_reads(rule)
    body = textwrap.fill(
        f"return {expr}", width=100, initial_indent="    ", subsequent_indent="        ", break_long_words=False
    )
    if "\n" in body:
        body = f"    return (\n        {expr}\n    )"
    return f'def {name}(b, h, q_idx, kv_idx):\n    """{doc}"""\n{body}\n'


def _sparse_flags(arr: np.ndarray) -> bool:
    """Whether a Boolean table is written as its True positions (fewer than one in eight entries True)."""
    return arr.dtype == np.bool_ and arr.ndim == 1 and 8 * int(np.count_nonzero(arr)) < arr.size


def _table_entries(arr: np.ndarray) -> int:
    """The numbers :func:`_table_text` writes for `arr`."""
    return int(np.count_nonzero(arr)) if _sparse_flags(arr) else int(arr.size)


def _table_text(arr: np.ndarray, framework: str) -> str:
    template, module = _FRAMEWORKS[framework][1:]
    if _sparse_flags(arr):  # a fresh user: 256 global tokens at n = 2^20 wrote 1,048,576 booleans (7.3 MB)
        positions = template.format(values=np.flatnonzero(arr).tolist(), dtype="int32")
        if framework == "jax":  # jnp.isin compares every pair (n × positions booleans; a review): a scatter
            return f"jnp.zeros({arr.size}, dtype=jnp.bool_).at[{positions}].set(True)"
        return f"{module}.isin({module}.arange({arr.size}, dtype={module}.int32), {positions})"  # sort-based
    dtype = "bool" if arr.dtype == np.bool_ else "int32"
    return template.format(values=np.asarray(arr).tolist(), dtype=dtype)


@checked(framework=_framework_arg, name=_name_arg)
def mask_mod_source(mask: Any, *, framework: Literal["torch", "jax", "numpy"] = "torch", name: str = "mask_mod") -> str:
    """Python source of a mask's ``mask_mod(b, h, q_idx, kv_idx) -> bool``, to paste into FlexAttention.

    The function body is one expression using only operators (``<=``, ``==``, ``//``, ``%``,
    ``&``, ``|``, ``abs``, indexing a lookup table by ``q_idx`` / ``kv_idx``), so it runs
    with PyTorch tensors (FlexAttention's ``create_block_mask`` / ``flex_attention``),
    ``jax.numpy`` and NumPy alike. Lookup tables (document ids past 16 boundaries, run starts and stops) are
    module-level constants created with the chosen `framework` (a Boolean table with few True
    entries, as Longformer's global tokens, from its True positions: ``isin`` for NumPy and PyTorch, a scatter for
    JAX); for PyTorch on a GPU move
    them to the device of ``q_idx`` (``TABLE = TABLE.to("cuda")``) before building the block
    mask. Executing the source (``exec``) and evaluating ``mask_mod`` on the grid gives the
    mask exactly (tested against every gallery and derived mask). Table reads wrap around
    (``DOC[q_idx % 100]``): ``create_block_mask`` evaluates ``mask_mod`` on a grid rounded up to
    its block size (PyTorch issue #137801) and the kernel discards the positions past `n`, so a
    read there must stay inside the table; below `n` the index is unchanged.

    **Arguments:**

    - `mask`: anything :func:`mask_rule` takes (a spec string, an IntervalMask, a Boolean
      array, per-head masks, a Task, a rule).
    - `framework`: ``"torch"`` (default), ``"jax"`` or ``"numpy"``: how tables are written.
    - `name`: the function's name (default ``"mask_mod"``).

    **Returns:** the source text (a ``str``), ending with a newline.

    **Raises:** :class:`~hassejax.errors.MaskError` as :func:`mask_rule`, for a bad
    `framework` or `name`, or tables of more than 4,194,304 entries in all (a mask that
    big has no readable source: use :func:`to_mask_mod`, or a spec with a closed form).

    Source: FlexAttention's ``mask_mod`` (arXiv:2412.05496; PyTorch's ``create_block_mask``), in the convention of
    spec hasse.md §0; the rule is :func:`mask_rule`'s.

    **Example:**

    ```python
    >>> from hassejax.kernels import mask_mod_source
    >>> print(mask_mod_source("chunked_causal(n=8, chunk=4)"))
    import torch
    <BLANKLINE>
    <BLANKLINE>
    def mask_mod(b, h, q_idx, kv_idx):
        \"\"\"chunked_causal(n=8, chunk=4): 8 positions; row = query, column = key, True = may attend.\"\"\"
        return (q_idx // 4 == kv_idx // 4) & (kv_idx <= q_idx)
    <BLANKLINE>

    ```
    """
    rule = mask_rule(mask)
    entries = sum(_table_entries(arr) for _, arr in rule.tables)
    if entries > _TABLE_LIMIT:
        raise MaskError(
            f"`mask`: its rule needs lookup tables of {entries:,} entries ({rule.label}); source text that long is not "
            f"readable (limit {_TABLE_LIMIT:,}). Use to_mask_mod(mask) for a callable, or a spec with a closed form."
        )
    lines = [_FRAMEWORKS[framework][0], ""]
    for table, arr in rule.tables:
        lines.append(f"{table} = {_table_text(arr, framework)}")
    return "\n".join(lines).rstrip("\n") + "\n\n\n" + _function_source(rule, name)


def to_mask_mod(mask: Any) -> Callable[..., Any]:
    """A FlexAttention-style callable ``mask_mod(b, h, q_idx, kv_idx) -> bool`` for a mask, written with ``jnp``.

    The rule of :func:`mask_rule` (a closed form where the mask has one, else lookup tables
    of the mask's key runs) compiled into a Python function whose tables are ``jnp`` int32
    or bool arrays. It takes integer scalars (Python ints or traced int32 scalars) and works
    under :func:`jax.vmap` and :func:`jax.jit`, so
    ``hassejax.masks.from_mask_mod(to_mask_mod(m), n)`` rebuilds `m` exactly. Per-head masks
    use `h`; `b` is ignored. The function carries ``.rule`` (its ``MaskRule``) and ``.n``,
    and its source is :func:`mask_mod_source` with ``framework="jax"``.

    **Arguments:**

    - `mask`: anything :func:`mask_rule` takes.

    **Returns:** the callable ``(b, h, q_idx, kv_idx) -> Bool[Array, ""]``.

    **Raises:** :class:`~hassejax.errors.MaskError` as :func:`mask_rule`.

    Source: FlexAttention's ``mask_mod`` (arXiv:2412.05496), in the convention of spec hasse.md §0; the rule is
    :func:`mask_rule`'s.

    **Example:**

    ```python
    >>> from hassejax.kernels import to_mask_mod
    >>> from hassejax.masks import from_mask_mod, from_spec
    >>> fn = to_mask_mod("document(segments=[3, 2])")
    >>> bool(fn(0, 0, 4, 3)), bool(fn(0, 0, 3, 2))     # same document, causal / across documents
    (True, False)
    >>> bool((from_mask_mod(fn, 5) == from_spec("document(segments=[3, 2])")).all())
    True

    ```
    """
    import jax.numpy as jnp

    rule = mask_rule(mask)
    namespace: dict[str, Any] = {"jnp": jnp}
    for table, arr in rule.tables:
        namespace[table] = jnp.asarray(arr, dtype=jnp.bool_ if arr.dtype == np.bool_ else jnp.int32)
    exec(compile(_function_source(rule, "mask_mod"), f"<hassejax mask_mod: {rule.label}>", "exec"), namespace)
    fn = namespace["mask_mod"]
    fn.rule = rule
    fn.n = rule.n
    return fn
