"""Helpers shared by the ``hassejax`` commands: reading masks, writing files.

Imports of the library (and so of JAX) happen inside the functions.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

import numpy as np

from ..errors import HassejaxError, MaskError
from ._parser import _OUTPUT_OPTIONS, STDOUT, _one_line, _OutputError, _stream_of, _UsageError

# ----------------------------------------------------------------------------- inputs


def load_mask(
    spec: str, arg: str = "MASK_SPEC", ranks: str = "rank 2, shape (n, n)", *, square: bool = True, heads: bool = False
):
    """The mask named by `spec`: a ``.npy`` file path (dense) or a mask spec (interval form).

    A spec such as ``"sliding_window(n=131072, left=4096) | attention_sinks(n=131072, num=4)"``
    is built with :func:`hassejax.masks.from_spec` in its interval form
    (:class:`~hassejax.masks.IntervalMask`): no ``n × n`` array, any ``n``. A spec naming the
    derived masks ``block_two_stream_mask(...)`` or ``butterfly_mask(...)`` (alone or combined)
    is built by :func:`hassejax.kernels.mask_rule`, in interval form too.

    `arg` names the command line's argument in the errors and `ranks` the shapes it takes; ``square=False`` takes a
    rectangular ``(n_q, n_k)`` array too (returned as it is read: ``hassejax tiles`` counts its tiles); ``heads=True``
    a ``(heads, n, n)`` array (``(heads, n_q, n_k)`` with ``square=False``), returned as read.

    **Raises:** :class:`~hassejax.errors.MaskError` for an unreadable file or one of another kind (``.npz``,
    ``.pt``, ...), a non-Boolean or non-square array, or a bad spec (the message of
    :func:`hassejax.masks.from_spec`); :class:`~hassejax.errors.MemoryBudgetError` for an array too large for the
    memory.

    Source: (derived), no paper: the input step of DESIGN.md "Data flow" (a mask spec or ``.npy`` array to the
    compressed form); masks in the convention of spec hasse.md §0.

    **Example:** a spec gives an interval mask, a small ``.npy`` file its dense array:

    ```python
    >>> import os, tempfile
    >>> import numpy as np
    >>> from hassejax.cli import load_mask
    >>> m = load_mask("causal(n=4) & sliding_window(n=4, left=1)")
    >>> type(m).__name__, m.n, m.row(3)
    ('IntervalMask', 4, [(2, 4)])
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "mask.npy")
    ...     np.save(path, np.eye(3, dtype=bool))
    ...     load_mask(path).astype(int).tolist()
    [[1, 0, 0], [0, 1, 0], [0, 0, 1]]

    ```
    """
    _refuse_other_files(spec, arg)
    if spec.lower().endswith(".npy"):
        path = Path(spec)
        if path.is_dir():
            raise MaskError(f"{arg} {spec!r}: a directory, not a .npy file.")
        if not path.is_file():
            raise MaskError(f"{arg} {spec!r}: no such .npy file.")
        try:
            with open(path, "rb") as fh:
                magic = fh.read(6)
        except OSError as err:
            raise MaskError(f"{arg} {spec!r}: cannot read it ({_one_line(str(err))}).") from None
        if magic != b"\x93NUMPY":  # np.load would take it for a pickle and say "pickled (object) data"
            raise MaskError(f"{arg} {spec!r}: not a NumPy .npy file (no .npy header); save the mask with numpy.save.")
        try:
            arr = np.load(path, allow_pickle=False, mmap_mode="r")
        except (OSError, ValueError) as err:
            why = _one_line(str(err))
            if "mmap length is greater than file size" in why:  # numpy's words for a file cut short
                why = "the file is shorter than its header says: truncated"
            raise MaskError(f"{arg} {spec!r}: cannot read it as a .npy array ({why}).") from None
        if arr.ndim != 2 and not (heads and arr.ndim == 3):
            raise MaskError(f"{arg} {spec!r}: the array must have {ranks}; got shape {arr.shape} (rank {arr.ndim}).")
        if arr.ndim == 3 and arr.shape[0] == 0:  # a review: "n >= 1 positions" for a (0, 8, 8) stack
            raise MaskError(f"{arg} {spec!r}: the stack must hold at least one head; got shape {arr.shape}.")
        if 0 in arr.shape:
            raise MaskError(f"{arg} {spec!r}: the array must have n >= 1 positions; got shape {arr.shape}.")
        if arr.shape[-2] != arr.shape[-1] and square:
            each = "each head" if arr.ndim == 3 else "the array"  # a review: "rank 3, (heads, n, n); got rank 3"
            raise MaskError(
                f"{arg} {spec!r}: {each} must be square (n, n): queries and keys are the same positions; got "
                f"shape {arr.shape}."
            )
        if arr.dtype != np.bool_:
            raise MaskError(
                f"{arg} {spec!r}: the array must have dtype bool (True = may attend); got dtype {arr.dtype}. "
                "Save it as Boolean first, e.g. `numpy.save(path, mask.astype(bool))` for 0/1 'may attend' masks."
            )
        from ..masks import IntervalMask

        if arr.ndim == 3 or arr.shape[0] != arr.shape[1] or arr.shape[0] <= _DENSE_NPY_LIMIT:
            return np.asarray(arr)
        return IntervalMask.from_dense(arr, name="mask")
    if _FAMILY_NAME.search(spec):  # the derived masks' closed forms, as `export` and `tiles` take them (imports JAX)
        from ..kernels.mask_mod import mask_rule

        return mask_rule(spec).intervals
    from ..masks import structured
    from ..masks._spec import _DERIVED, build_spec

    # as from_spec(spec, form="intervals"), its errors listing the derived masks among the known ones: taken here
    return build_spec(spec, structured.MASKS, also_known=_DERIVED)


def _refuse_other_files(spec: str, arg: str) -> None:
    """A file of another kind than ``.npy`` is refused as a file (it was parsed as a mask spec and said "must be a
    single call NAME(...)")."""
    if spec.lower().endswith((".npz", ".pt", ".pth", ".safetensors", ".pkl", ".pickle", ".json", ".txt", ".csv")):
        raise MaskError(
            f"{arg} {spec!r}: a {Path(spec).suffix} file is not read; pass a Boolean mask saved with numpy.save as a "
            ".npy file, or a mask spec such as 'causal(n=1024)'."
        )


_FAMILY_NAME = re.compile(r"\b(block_two_stream_mask|butterfly_mask)\b")


# A .npy mask larger than this is read row block by row block into its interval form.
_DENSE_NPY_LIMIT = 4096


def _check_figure_path(path: str | None) -> None:
    """Reject a ``--png`` path whose extension matplotlib cannot write, before any output."""
    if path is None:
        return
    from matplotlib.backend_bases import FigureCanvasBase

    ext = path.rsplit(".", 1)[-1].lower() if "." in path.rsplit("/", 1)[-1] else ""
    formats = FigureCanvasBase.get_supported_filetypes()
    if ext not in formats:
        raise _UsageError(
            f"--png {path!r}: the file name must end in an image format matplotlib writes ({', '.join('.' + f for f in sorted(formats))})."
        )


def _write_text(path: str, text: str) -> None:
    """Write `text` to the file `path`; ``-`` or a path that is stdout or stderr itself (``/dev/stdout``, the file
    stdout is redirected to) through that stream, after what it holds, not reopened and truncated."""
    stream = _stream_of(path)
    if stream == "stdout":
        _print(text, end="")
        return
    if stream == "stderr":
        sys.stderr.write(text)
        sys.stderr.flush()
        return
    try:
        Path(path).write_text(text)
    except OSError as err:
        raise _OutputError(f"cannot write {path!r}: {_one_line(str(err))}") from None


# ----------------------------------------------------------------------- export, tiles

_FAMILY_SPECS = {
    "autoregressive": "causal(n={n_minus_one})",
    "block_generation": (
        "block_two_stream_mask(n={n}, block_size={block_size}, group={group!r}, content={content!r}, "
        "keep_last_block={keep_last_block})"
    ),
    "butterfly": "butterfly_mask(n={n})",
}


#: The options each task family takes (``derive``, ``export``, ``tiles``); --n is every family's.
FAMILY_OPTIONS = {
    "autoregressive": (),
    "block_generation": ("--block-size", "--group", "--content", "--no-keep-last-block"),
    "butterfly": ("--boundary",),
}


def _refuse_foreign_options(args: argparse.Namespace, family: str | None) -> None:
    """Raise :class:`_UsageError` for a task-family option given that does not apply to `family` (None: a mask spec or
    .npy file, to which none applies; a fresh user: ``tiles butterfly --block-size 4`` ran with the option ignored,
    where ``derive`` refused it)."""
    given = {
        "--block-size": getattr(args, "block_size", None) is not None,
        "--group": getattr(args, "group", None) is not None,
        "--content": getattr(args, "content", None) is not None,
        "--no-keep-last-block": bool(getattr(args, "no_keep_last_block", False)),
        "--boundary": getattr(args, "boundary", None) is not None,
    }
    # the family's options this command has (derive's --boundary is not one of export's or tiles')
    known = FAMILY_OPTIONS.get(family, ()) if family is not None else ()
    allowed = [o for o in known if hasattr(args, o.removeprefix("--").replace("-", "_"))]
    ignored = [k for k, v in given.items() if v and k not in allowed]
    if ignored:
        where = (
            f"the {family} family (its options: {', '.join(allowed) or 'none but --n'})"
            if family is not None
            else f"a mask spec or .npy file (they apply to task families: {', '.join(_FAMILY_SPECS)})"
        )
        raise _UsageError(f"{', '.join(ignored)} do(es) not apply to {where}")


def _kernel_mask(args: argparse.Namespace, *, square: bool = True):
    """The mask named by SPEC_OR_FAMILY: a family's closed form (spec text), a .npy file, or a mask spec; with
    ``square=False`` (``hassejax tiles``) a rectangular ``.npy`` array, ``(n_q, n_k)`` or ``(heads, n_q, n_k)``."""
    target = args.spec_or_family
    if target.isidentifier() and target not in _FAMILY_SPECS:  # a bare name: a family, or a mask without its call
        from ..masks._spec import _DERIVED
        from ..masks.structured import MASKS  # JAX-free

        masks = sorted({*MASKS, *_DERIVED})
        if target not in masks:  # a known mask's name alone: the spec's own error asks for its call
            raise _UsageError(
                f"SPEC_OR_FAMILY {target!r}: no task family or mask of that name; give a task family "
                f"({', '.join(_FAMILY_SPECS)}) with --n N, a mask spec NAME(arg=value, ...) of a known mask "
                f"({', '.join(masks)}), or a .npy file"
            )
    _refuse_foreign_options(args, target if target in _FAMILY_SPECS else None)
    if target in _FAMILY_SPECS:
        if args.n is None:
            raise _UsageError(f"the {target} family needs --n N")
        if target == "block_generation" and args.block_size is None:
            raise _UsageError("the block_generation family needs --block-size L (a divisor of --n)")
        if target == "block_generation" and args.n % args.block_size:  # (the spec's `block_size`/`n` before)
            raise _UsageError(
                f"`--block-size` must divide `--n`; got --n {args.n}, --block-size {args.block_size} (pad the sequence "
                "to a multiple of --block-size)."
            )
        if target == "autoregressive" and args.n < 2:
            raise _UsageError("the autoregressive family needs --n >= 2")
        return _FAMILY_SPECS[target].format(
            n=args.n,
            n_minus_one=args.n - 1,
            block_size=args.block_size,
            group=args.group or "full",
            content=args.content or "causal",
            keep_last_block=not args.no_keep_last_block,
        )
    if args.n is not None or args.block_size is not None:
        raise _UsageError(f"--n / --block-size apply to task families ({', '.join(_FAMILY_SPECS)}), not to a mask spec")
    try:
        _refuse_other_files(target, "SPEC_OR_FAMILY")
    except HassejaxError as err:
        raise _UsageError(str(err)) from None
    if target.lower().endswith(".npy"):
        shapes = (
            "rank 2, shape (n, n), or rank 3, (heads, n, n)"
            if square
            else "rank 2 or 3, (n_q, n_k) or (heads, n_q, n_k)"
        )
        try:
            mask = load_mask(target, "SPEC_OR_FAMILY", shapes, square=square, heads=True)
        except HassejaxError as err:
            raise _UsageError(str(err)) from None
        if square and getattr(mask, "ndim", 2) == 3:
            return [np.asarray(head) for head in mask]  # one (n, n) mask per head
        return mask
    return target


def _print(text: str, end: str = "\n") -> None:
    """Write `text` to stdout. A reader that stops early (``hassejax analyze ... | head``) ends the
    printing, not the command: stdout goes to the null device from then on, and the files asked
    for (``--json``, ``--dot``, ...) are still written."""
    try:
        sys.stdout.write(text + end)
        sys.stdout.flush()
    except BrokenPipeError:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)


def _report(args: argparse.Namespace, text: str) -> None:
    """Print the command's text report, unless an output option is ``-``: that output is stdout's alone (``analyze SPEC
    --json - | jq``)."""
    if not _stdout_taken(args):
        _print(text)


def _stdout_taken(args: argparse.Namespace) -> bool:
    return any(getattr(args, dest, None) == STDOUT for dest in _OUTPUT_OPTIONS)


def _emit(path: str | None, text: str) -> None:
    if path is None:
        _print(text, end="")
    else:
        _write_text(path, text)


def _save_npy(path: str, array: np.ndarray) -> None:
    """Save `array` to `path` as it is named: ``np.save`` appends ``.npy`` to a name that does not end in exactly that
    (``m.NPY`` became ``m.NPY.npy``)."""
    try:
        with open(path, "wb") as fh:
            np.save(fh, array)
    except OSError as err:
        raise _OutputError(f"cannot write {path!r}: {_one_line(str(err))}") from None
