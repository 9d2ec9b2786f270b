"""``hassejax export``: a mask for a kernel (FlexAttention ``mask_mod``, JAX splash attention, ``.npy``)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import stat
from pathlib import Path

import numpy as np

from ..errors import HassejaxError
from ._common import _emit, _kernel_mask, _print, _save_npy
from ._parser import STDOUT, _check_output_path, _stream_of, _UsageError


def _splash_source(mask, npy: str | None) -> str:
    """Python text that builds the splash mask `mask` (``mask_lib`` = splash_attention_mask); `npy`: the Python
    expression of the array file's path (None: no array)."""
    kind = type(mask).__name__
    if kind == "CausalMask":
        return f"mask_lib.CausalMask(shape={mask.shape}, offset={mask.offset})"
    if kind == "FullMask":
        return f"mask_lib.FullMask(_shape={mask.shape})"
    if kind == "LocalMask":
        return f"mask_lib.LocalMask(shape={mask.shape}, window_size={mask.window_size}, offset={mask.offset})"
    if kind == "ChunkedCausalMask":
        return f"mask_lib.ChunkedCausalMask(shape={mask.shape}, chunk_size={mask.chunk_size})"
    if kind in ("LogicalAnd", "LogicalOr"):
        op = "&" if kind == "LogicalAnd" else "|"
        return f"({_splash_source(mask.left, npy)} {op} {_splash_source(mask.right, npy)})"
    if npy is None:
        raise _UsageError(
            f"this mask has no structured splash form (it is a {kind}); give --out FILE.npy for its dense array"
        )
    return f"mask_lib.NumpyMask(np.load({npy}))"


def _is_npy(path: str) -> bool:
    """A ``.npy`` name, in any case (``m.NPY`` was the Python's file for --to splash and refused by --to npy)."""
    return path.lower().endswith(".npy")


def _check_out(args: argparse.Namespace) -> None:
    """The --out checks of each --to, before the work (no JAX). ``-``: printed, as with no --out (mask_mod, splash)."""
    out = args.out
    if args.to != "splash" and args.fallback != "numpy":
        raise _UsageError(f"--fallback {args.fallback} is for --to splash (a mask with no structured splash form)")
    if args.to == "npy":
        if out is None:
            raise _UsageError("--to npy needs --out FILE.npy")
        if not _is_npy(out):
            raise _UsageError(f"--out {out!r}: --to npy writes a .npy file; give a name ending in .npy")
    if args.to == "mask_mod" and out is not None and _is_npy(out):  # Python source in a .npy (a fresh user)
        raise _UsageError(
            f"--out {out!r}: --to mask_mod writes Python source; give FILE.py (or --to npy for the array)"
        )
    if out is not None and args.to != "mask_mod" and _is_npy(out):  # the array's name (splash, npy)
        stream = _stream_of(out)
        if stream is not None:
            raise _UsageError(f"--out {out!r}: it is the command's {stream}; a .npy array needs a file of its own")
    if out == STDOUT:
        args.out = None


def _not_a_regular_file(path: str) -> str | None:
    """What `path` is when it exists and is no regular file (a character device, a FIFO, ...) or is the command's
    stdout / stderr: no FILE.npy can go next to it (``--out /dev/stdout`` wrote ``/dev/stdout.npy`` as root)."""
    stream = _stream_of(path)
    if stream is not None:
        return f"the command's {stream}, not a file of its own"
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None  # a new file: FILE.npy goes next to it
    for test, what in (
        (stat.S_ISCHR, "a character device, not a regular file"),
        (stat.S_ISBLK, "a block device, not a regular file"),
        (stat.S_ISFIFO, "a FIFO (named pipe), not a regular file"),
        (stat.S_ISSOCK, "a socket, not a regular file"),
    ):
        if test(mode):
            return what
    return None if stat.S_ISREG(mode) else "not a regular file"


def _printable(name: str) -> str:
    """A file name or a spec as written in messages and in the comments of generated Python: as given, or its
    ``repr`` where it holds a line break or another unprintable character (a review: a name with a newline put a
    line of its own into the Python written; a spec with one, Python that did not parse)."""
    return name if name.isprintable() else repr(name)


def _cmd_export(args: argparse.Namespace) -> int:
    _check_out(args)
    mask = _kernel_mask(args, square=args.to != "splash")
    if isinstance(mask, np.ndarray) and mask.ndim == 2 and mask.shape[0] != mask.shape[1]:
        return _export_rectangular(args, mask)
    if isinstance(mask, np.ndarray) and mask.ndim == 3 and mask.shape[1] != mask.shape[2]:
        raise _UsageError(
            f"SPEC_OR_FAMILY {args.spec_or_family!r}: per-head masks must be square, (heads, n, n); got shape "
            f"{mask.shape} (a rectangular mask goes to splash as one (n_q, n_k) array)"
        )
    if isinstance(mask, np.ndarray) and mask.ndim == 3:
        mask = [np.asarray(head) for head in mask]  # one (n, n) mask per head, as _kernel_mask gives them when square
    try:
        if args.to == "mask_mod":
            from ..kernels import mask_mod_source

            _emit(args.out, mask_mod_source(mask, framework=args.framework))
            _wrote(args.out, "Python source of mask_mod(b, h, q_idx, kv_idx)")
            return 0
        from ..kernels import mask_rule

        rule = mask_rule(mask)
        if isinstance(mask, (np.ndarray, list)):
            # a .npy file's mask: its messages and comments name the file, as a rectangular one's do (a fresh user:
            # "key runs: splash has no structured mask" named no input)
            rule = dataclasses.replace(rule, label=f"{_printable(args.spec_or_family)} ({rule.label})")
        if args.to == "npy":
            from ..kernels import to_splash
            from ..kernels._splash_write import _dense_rule
            from ..masks._runs import check_host_memory

            heads = rule.heads or 1
            need = heads * rule.n * rule.n
            if need >= 2**24:  # (below, check_host_memory checks nothing)
                kernels = (  # splash's own structured masks need no array; any mask has a mask_mod
                    "--to splash or --to mask_mod write code that evaluates the mask per tile"
                    if _structured_only(to_splash(rule, fallback="lazy"))
                    else "--to mask_mod writes code that evaluates the mask per tile (splash has no structured mask "
                    "for it; --to splash --fallback lazy builds hassejax's lazy one)"
                )
                check_host_memory(  # before the array exists, in the command line's words (it gave to_splash's)
                    need,
                    f"the dense Boolean array of {rule.label} ({heads} x {rule.n} x {rule.n}, one byte an entry)",
                    "--to npy",
                    hint=f"A kernel needs no (n, n) array: {kernels}. Or use a smaller n.",
                )
            dense = (
                _dense_rule(rule, 0, rule.n)
                if rule.heads is None
                else np.stack([_dense_rule(rule, h, rule.n) for h in range(rule.heads)])
            )
            _save_npy(args.out, dense)
            _print(f"wrote {args.out}: Boolean {dense.shape} (row = query, column = key, True = may attend)")
            return 0
        from ..kernels import to_splash

        structured = _structured_only(to_splash(rule, fallback="lazy"))
        npy = None
        if not structured and args.fallback == "lazy":
            return _export_lazy(args, mask, rule)
        if not structured:
            if args.out is None:
                raise _UsageError(  # the lazy mask first: at long n the array does not fit (a fresh user: 1 TiB)
                    f"{rule.label}: splash has no structured mask for this rule; give --fallback lazy for Python that "
                    "builds hassejax's lazy splash mask (evaluated per tile, no (n, n) array), or a NumpyMask of its "
                    f"array ({_array_size(rule)}): --out FILE.npy to write the array there (the Python printed), or "
                    "--out FILE.py for the Python and the array in FILE.npy next to it"
                )
            # --out FILE.npy: the array there, the Python printed; any other name: the Python there, the array next
            # to it (it said "give --out FILE.npy" to a .py name, which the help offers for the Python).
            npy = args.out if _is_npy(args.out) else str(Path(args.out).with_suffix(".npy"))
            if npy != args.out:
                what = _not_a_regular_file(args.out)
                if what is not None:
                    raise _UsageError(
                        f"--out {args.out!r}: it is {what}; {rule.label} has no structured splash form, and its "
                        f"NumpyMask's array cannot go to {npy!r} next to it: give --out FILE.py for the Python there "
                        "and the array in FILE.npy next to it, or --out FILE.npy for the array there and the Python "
                        "printed"
                    )
                _check_output_path(npy, f"--out {args.out!r}: its array")
            splash = to_splash(rule)
            _save_npy(
                npy,
                np.asarray(splash.array)
                if rule.heads is None
                else np.stack([np.asarray(m[:, :]) for m in splash.masks]),
            )
        else:
            if args.out is not None and _is_npy(args.out):
                raise _UsageError(
                    f"--out {args.out!r}: {rule.label} is a structured splash mask (no array to write); give --out FILE.py "
                    "for the Python, or no --out to print it"
                )
            splash = to_splash(rule)
        lines = [
            "from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mask_lib",
            "",
            f"# {_printable(rule.label)}: row = query, column = key, True = may attend",
        ]
        python = None if npy == args.out else args.out  # None: printed
        # the array's path as the Python reads it: printed, as given; in FILE.py, next to that file wherever it runs
        # from (a fresh user: `np.load('sub/m.npy')` failed when run from sub/)
        load = None if npy is None else repr(npy) if python is None else f"Path(__file__).with_name({Path(npy).name!r})"
        if npy is not None:
            lines[:0] = ["import numpy as np"] + (["from pathlib import Path"] if python is not None else [])
        if rule.heads is None:
            lines.append(f"mask = {_splash_source(splash, load)}")
        elif npy is not None:
            lines.append(f"mask = mask_lib.MultiHeadMask([mask_lib.NumpyMask(a) for a in np.load({load})])")
        else:
            lines.append("mask = mask_lib.MultiHeadMask([")
            lines += [f"    {_splash_source(m, None)}," for m in splash.masks]
            lines.append("])")
        _emit(python, "\n".join(lines) + "\n")
        if python is not None and npy is not None:
            _print(f"wrote {python} (Python building the splash NumpyMask) and {npy} (its array, loaded by that path)")
        elif npy is None:
            _wrote(python, "Python building the splash mask")
        return 0
    except HassejaxError as err:
        raise _UsageError(str(err)) from None


def _array_size(rule) -> str:
    """The NumpyMask array's size in words."""
    size = (rule.heads or 1) * rule.n * rule.n
    return f"{size / 2**30:.3g} GiB" if size >= 2**30 else f"{size / 2**20:.3g} MiB"


def _export_rectangular(args: argparse.Namespace, mask: np.ndarray) -> int:
    """``--to splash`` of a rectangular ``(n_q, n_k)`` array (a KV cache, cross-attention), as the Python API's
    ``to_splash`` takes it (a fresh user: refused as "must be square"): splash's ``CausalMask`` with its offset where it
    is bottom-right causal, else a ``NumpyMask`` of the array read from the file given."""
    from ..kernels import to_splash

    if args.fallback == "lazy":  # (a review: it was ignored here)
        raise _UsageError(
            "--fallback lazy builds the mask from its spec (or task family); a .npy file is an array already: "
            "a rectangular one goes to splash as CausalMask or a NumpyMask of the file"
        )
    if args.out is not None and _is_npy(args.out):
        raise _UsageError(
            f"--out {args.out!r}: a rectangular mask's array is the file given ({args.spec_or_family!r}); give "
            "--out FILE.py for the Python, or no --out to print it"
        )
    try:
        splash = to_splash(mask)
    except HassejaxError as err:
        raise _UsageError(str(err)) from None
    lines = [
        "from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mask_lib",
        "",
        f"# {_printable(args.spec_or_family)}: rectangular {mask.shape}, row = query, column = key, True = may attend",
    ]
    if type(splash).__name__ == "NumpyMask":
        lines[:0] = ["import numpy as np"]
        lines.append(f"mask = mask_lib.NumpyMask(np.load({str(Path(args.spec_or_family).resolve())!r}))")
    else:
        lines.append(f"mask = {_splash_source(splash, None)}")
    _emit(args.out, "\n".join(lines) + "\n")
    _wrote(args.out, "Python building the splash mask")
    return 0


def _export_lazy(args: argparse.Namespace, mask, rule) -> int:
    """``--to splash --fallback lazy``: Python that builds hassejax's lazy splash mask from the spec (a fresh user:
    the README's long-context masks had no way out of the command line but a NumpyMask of 16 GiB)."""
    if not isinstance(mask, str):
        raise _UsageError(
            "--fallback lazy builds the mask from its spec (or task family); a .npy file is an array already: "
            "--fallback numpy writes a NumpyMask of it"
        )
    if args.out is not None and _is_npy(args.out):
        raise _UsageError(f"--out {args.out!r}: --fallback lazy writes Python (no array); give FILE.py or no --out")
    lines = [
        "from hassejax.kernels import to_splash",
        "",
        f"# {_printable(rule.label)}: row = query, column = key, True = may attend; splash has no structured mask for "
        "it, so",
        "# hassejax's lazy splash mask evaluates its rule per tile (no (n, n) array; hassejax needed where this runs)",
        f"mask = to_splash({mask!r}, fallback='lazy')",
    ]
    _emit(args.out, "\n".join(lines) + "\n")
    _wrote(args.out, "Python building the lazy splash mask")
    return 0


def _wrote(path: str | None, what: str) -> None:
    """Say on stdout that `what` went to the file `path`, as ``--to npy`` does (the Python written to FILE.py was
    silent). Nothing when it was printed (`path` None: no --out, or ``-``) or went through stdout or stderr
    (``/dev/stdout``): the line would follow the source there."""
    if path is not None and _stream_of(path) is None:
        _print(f"wrote {path} ({what})")


def _structured_only(splash) -> bool:
    kind = type(splash).__name__
    if kind == "MultiHeadMask":
        return all(_structured_only(m) for m in splash.masks)
    if kind in ("LogicalAnd", "LogicalOr"):
        return _structured_only(splash.left) and _structured_only(splash.right)
    return kind in ("CausalMask", "FullMask", "LocalMask", "ChunkedCausalMask")
