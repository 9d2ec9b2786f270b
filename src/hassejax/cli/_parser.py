"""The ``hassejax`` argument parser and its argument checks (imports no JAX and no command module).

Each subcommand's function is imported by :func:`_command` only when it runs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path

PROG = "hassejax"


class _UsageError(Exception):
    """Bad input to a subcommand: reported on one line, exit code 2."""


class _OutputError(Exception):
    """An output file could not be written: reported on one line, exit code 1."""


def _command(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """The function ``hassejax.cli.<module>.<name>``, imported only when the command runs.

    The parser imports no command module, so ``hassejax --help`` and argument errors never
    import JAX.
    """

    def run(args: argparse.Namespace) -> int:
        return getattr(importlib.import_module(f"hassejax.cli.{module}"), name)(args)

    run.__name__ = name
    return run


def _int_at_least(minimum: int, what: str):
    """An argparse ``type``: an int >= `minimum`, else an error saying `what` was expected."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        return value

    return parse


_positive_int = _int_at_least(1, "a positive integer")
_nonnegative_int = _int_at_least(0, "an integer >= 0")


def _one_line(message: str) -> str:
    return " ".join(str(message).split())


# ------------------------------------------------------------------------ output files

#: The help of a text output's option on '-' and on a path that is the command's stdout (see :func:`_stream_of`).
_STREAM_HELP = (
    "; '-': write it to stdout instead of the text report (e.g. for jq); a path that is stdout itself (/dev/stdout, "
    "or the file stdout is redirected to) gets it after the report, which is not truncated"
)

#: The options of the subcommands that name a file the command writes (argparse's dest: the option).
_OUTPUT_OPTIONS = {"json": "--json", "dot": "--dot", "png": "--png", "out": "--out"}


#: An output option given as ``-``: that output goes to stdout instead of the text report.
STDOUT = "-"


def _stream_of(path: str) -> str | None:
    """``"stdout"`` when `path` is ``-`` or the file the command's stdout already writes to (``/dev/stdout``,
    ``/dev/fd/1``, or the file stdout is redirected to), ``"stderr"`` for stderr's, else None.

    Such a path is written through the open stream, after what it already holds: opened anew with mode ``"w"``,
    ``analyze SPEC --json /dev/stdout > report.txt`` truncated the text report it had just written (a fresh user).
    """
    if path == STDOUT:
        return "stdout"
    try:
        target = os.stat(path)
        if os.path.samestat(target, os.stat(os.devnull)):  # the null device, also where stdout goes (>/dev/null)
            return None  # a file like any other: written anew, nothing truncated
    except (OSError, ValueError):
        return None
    for name, stream in (("stdout", sys.stdout), ("stderr", sys.stderr)):
        try:
            if stream is not None and os.path.samestat(target, os.fstat(stream.fileno())):
                return name
        except (OSError, ValueError, AttributeError):  # a stream with no file descriptor (replaced, closed)
            continue
    return None


def _check_output_paths(args: argparse.Namespace) -> None:
    """Refuse an output file that cannot be written before the command's work starts, as bad input (exit code 2).

    Each path of :data:`_OUTPUT_OPTIONS` given must not be a directory and its folder must exist; an existing file must
    be writable, a new one's folder writable (an ``analyze`` at n = 1M ran for minutes and only then said "cannot
    write"). ``-`` and a path that is stdout or stderr itself (:func:`_stream_of`) are written through that stream;
    ``--png`` is refused there (a picture in the text report's stream). An empty path is refused as such (``Path("")``
    is the current folder: it said "it is a directory"). Two outputs may not name one file, nor names that differ only
    in case (one file on a case-insensitive file system: macOS, Windows), nor stdout or stderr twice; a character
    device other than those streams (``/dev/null``) may take several: writing there truncates nothing an earlier
    output wrote. Checked on the file system alone: no file is created, and no JAX is imported.
    """
    seen: dict[str, tuple[str, str]] = {}
    for dest, option in _OUTPUT_OPTIONS.items():
        path = getattr(args, dest, None)
        if path is None:
            continue
        if path == "":
            what = "a file path" if option == "--png" else "a file path or '-'"  # (--png refuses '-')
            raise _UsageError(f"{option}: expected {what}, got an empty string")
        stream = _stream_of(path)
        if stream is None:
            _check_output_path(path, option)
            if _is_character_device(path):  # /dev/null twice: nothing overwritten (it was "the same file twice")
                continue
            key = os.path.realpath(path)
        elif option == "--png":
            raise _UsageError(f"--png {path!r}: it is the command's {stream}, where the text goes; give a file name")
        else:
            key = f"<{stream}>"
        if key in seen:  # one file for two outputs: the second overwrote the first, silently (a fresh user)
            where = f"the command's {stream}" if stream else f"the same file {path!r}"
            raise _UsageError(f"{seen[key][0]} and {option} name {where}; give each its own file")
        clash = next((v for k, v in seen.items() if k.casefold() == key.casefold()), None)
        if clash is not None:
            raise _UsageError(
                f"{clash[0]} {clash[1]!r} and {option} {path!r} differ only in case: one file on a case-insensitive "
                "file system (macOS, Windows), where the second would overwrite the first; give each its own name"
            )
        seen[key] = (option, path)


def _is_character_device(path: str) -> bool:
    """Whether `path` exists and is a character device (``/dev/null``, a terminal), which no write truncates."""
    try:
        return stat.S_ISCHR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _check_output_path(path: str, option: str) -> None:
    """Raise :class:`_UsageError` naming `option` and `path` when `path` cannot be written (see
    :func:`_check_output_paths`)."""
    target = Path(path)
    folder = target.parent  # "." for a bare file name
    try:
        if target.is_dir():
            why = "it is a directory; give a file name"
        elif not folder.is_dir():
            above = next((p for p in folder.parents if p.exists()), None) if not folder.exists() else folder
            if folder.exists() or (above is not None and not above.is_dir()):
                why = f"{str(above)!r} is a file, not a folder"
            else:
                why = f"no such folder {str(folder)!r}; create it first"
        elif target.exists():  # written in place: its own permission counts (/dev/stdout, a file in a
            # read-only folder), not the folder's (a review: /dev/stdout was refused for users other than root)
            if os.access(target, os.W_OK):
                return
            why = "the file exists and is not writable"
        elif not os.access(folder, os.W_OK | os.X_OK):
            why = f"the folder {str(folder)!r} is not writable (the file does not exist yet)"
        else:
            return
    except OSError as err:
        why = _one_line(str(err))
    raise _UsageError(f"{option} {path!r}: cannot write it: {why}")


# ---------------------------------------------------------------------------- analyze


def _add_analyze(subparsers) -> None:
    p = subparsers.add_parser(
        "analyze",
        allow_abbrev=False,
        help="classes, convergence depth and Hasse diagram of a mask",
        description=(
            "Analyse the information flow of an attention mask (spec hasse.md §1): positions, classes "
            "of mutual reachability, convergence depth L*, depth and width of the quotient order and "
            "the Hasse diagram edges (u -> v: class u is covered by class v, information flows u -> v)."
        ),
    )
    p.add_argument(
        "mask_spec", metavar="MASK_SPEC",
        help="e.g. 'sliding_window(n=16, left=2)' (also 'butterfly_mask(n=8)', 'block_two_stream_mask(...)') or a .npy file; "
        "window sizes beyond n are capped at n, chunk, block, prefix and sink sizes beyond n are refused "
        "(hassejax.masks.from_spec lists which)",
    )  # fmt: skip
    p.add_argument(
        "--layers", type=_positive_int, nargs="+", metavar="L",
        help="report the reach after L layers and whether it is the limit flow (several: --layers 1 2 4 8)",
    )  # fmt: skip
    p.add_argument(
        "--method", choices=["auto", "structured", "bitpacked", "matmul"], default="auto",
        help="the closure's route (hassejax.order.flow_summary's `method`): auto (default) takes the structured route "
        "for key runs and the dense routes otherwise; bitpacked and matmul hold (n, n) arrays",
    )  # fmt: skip
    p.add_argument("--dot", metavar="FILE", help="write the Hasse diagram as Graphviz DOT" + _STREAM_HELP)
    p.add_argument("--png", metavar="FILE", help="draw the Hasse diagram (matplotlib)")
    p.add_argument("--json", metavar="FILE", help="write the numbers and the diagram as JSON" + _STREAM_HELP)
    p.add_argument(
        "--max-edges",
        type=_nonnegative_int,
        default=100,
        metavar="K",
        help="print at most K edges (default 100; 0: the counts only)",
    )
    p.add_argument(
        "--quotient-limit", type=_positive_int, default=None, metavar="C",
        help="build the Hasse diagram (and, on the dense routes, the quotient's depth, width and edges) only up to C "
        "classes (hassejax.order.flow_summary's `quotient_limit`; default 2048)",
    )  # fmt: skip
    p.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=None,
        help="progress bars on stderr for the closure stages (R, L*, R^(L)) that run longer than 2 s "
        "(default: on when stderr is a terminal; --no-progress: never)",
    )  # fmt: skip
    p.set_defaults(func=_command("_analyze", "_cmd_analyze"))


def _add_derive(subparsers) -> None:
    p = subparsers.add_parser(
        "derive",
        allow_abbrev=False,
        help="derive a mask from a task family (merge of its Hasse diagrams)",
        description=(
            "Derive an attention mask from a task family (spec hasse.md §2-3): the minimal merged task's "
            "slots, dense mask and labels, its sparsest variant, and the leakage audit."
        ),
    )
    p.add_argument("family", choices=["autoregressive", "block_generation", "butterfly"], help="the task family")
    p.add_argument("--n", type=_positive_int, required=True, help="sequence length")
    p.add_argument("--block-size", type=_positive_int, default=None, help="block size l (block_generation; divides n)")
    p.add_argument(
        "--group",
        choices=["full", "causal", "diagonal"],
        default=None,
        help="attention inside a query group (block_generation; default full)",
    )
    p.add_argument(
        "--content",
        choices=["causal", "block_causal"],
        default=None,
        help="content stream mask (block_generation; default causal)",
    )
    p.add_argument(
        "--no-keep-last-block",
        action="store_true",
        help="leave out the full-sequence content task (block_generation; 2n - l slots)",
    )
    p.add_argument(
        "--boundary",
        choices=["neighbour"],
        default=None,
        help="boundary aggregate (butterfly): neighbour, w'_1 = w_2 and w'_n = w_{n-1} (spec §3.3), the only one "
        "(a pad boundary would need a pad embedding the model does not have)",
    )
    p.add_argument(
        "--png",
        nargs="?",
        const="derived_mask.png",
        metavar="FILE",
        help="draw the mask and Hasse diagram (default FILE: derived_mask.png)",
    )
    p.add_argument(
        "--json",
        nargs="?",
        const="derived_mask.json",
        metavar="FILE",
        help="write slots, mask, labels and audit (default FILE: derived_mask.json)" + _STREAM_HELP,
    )
    p.set_defaults(func=_command("_derive", "_cmd_derive"))


def _add_family_options(p) -> None:
    p.add_argument("--n", type=_positive_int, default=None, help="sequence length (task families)")
    p.add_argument("--block-size", type=_positive_int, default=None, help="block size l (block_generation)")
    p.add_argument(
        "--group",
        choices=["full", "causal", "diagonal"],
        default=None,
        help="block_generation query group (default full)",
    )
    p.add_argument(
        "--content",
        choices=["causal", "block_causal"],
        default=None,
        help="block_generation content stream (default causal)",
    )
    p.add_argument("--no-keep-last-block", action="store_true", help="block_generation without the full content task")


def _add_export(subparsers) -> None:
    p = subparsers.add_parser(
        "export",
        allow_abbrev=False,
        help="write a mask for a kernel: splash attention, a FlexAttention mask_mod, or .npy",
        description=(
            "Export a mask (row = query, column = key, True = may attend) for the kernels people train with: "
            "'--to mask_mod' prints Python source of mask_mod(b, h, q_idx, kv_idx) for FlexAttention (closed form "
            "where the mask has one, lookup tables otherwise); '--to splash' prints Python that builds the JAX splash "
            "attention mask (structured CausalMask / LocalMask / ChunkedCausalMask / FullMask and their & and |, else a "
            "NumpyMask of the array written to --out FILE.npy, or to FILE.npy next to --out FILE.py); '--to npy' "
            "writes the dense Boolean array to --out."
        ),
    )
    p.add_argument(
        "spec_or_family",
        metavar="SPEC_OR_FAMILY",
        help="a mask spec ('sliding_window(n=4096, left=256)', 'butterfly_mask(n=100)'), a .npy file, or a task family "
        "(autoregressive, block_generation, butterfly) with --n",
    )
    p.add_argument("--to", choices=["splash", "mask_mod", "npy"], required=True, help="the target kernel format")
    p.add_argument(
        "--out",
        metavar="FILE",
        default=None,
        help="mask_mod: write the source here (default or '-': print it); npy: the .npy file (required); splash: "
        "FILE.py (any name not ending in .npy, in any case) writes the Python there, FILE.npy the array of a NumpyMask "
        "there with the Python printed. A mask with no structured splash form needs --out: with FILE.py its array goes "
        "to FILE.npy next to it (overwritten if there), loaded by that path, so FILE.py must be a regular file or a new "
        "name (a device such as /dev/stdout or a FIFO is refused); a structured one has no array (FILE.npy is "
        "refused). A path that is stdout itself (/dev/stdout) gets the Python after what stdout holds, not truncated",
    )
    p.add_argument(
        "--framework", choices=["torch", "jax", "numpy"], default="torch", help="mask_mod tables (default torch)"
    )
    p.add_argument(
        "--fallback",
        choices=["numpy", "lazy"],
        default="numpy",
        help="splash, for a mask with no structured splash form: 'numpy' (default) a NumpyMask of its array (n² bytes, "
        "written to FILE.npy); 'lazy' Python that builds hassejax's lazy splash mask from the spec "
        "(hassejax.kernels.to_splash(spec, fallback='lazy'): evaluated per tile, no (n, n) array, hassejax needed where "
        "it runs); a structured mask is written as such either way",
    )
    _add_family_options(p)
    p.set_defaults(func=_command("_export", "_cmd_export"))


def _add_tiles(subparsers) -> None:
    p = subparsers.add_parser(
        "tiles",
        allow_abbrev=False,
        help="empty / partial / full tiles of a mask for a block-sparse kernel",
        description=(
            "Count the (block_q, block_kv) tiles of a mask a block-sparse attention kernel skips (empty), masks "
            "(partial) or computes whole (full), as splash attention's MaskInfo and FlexAttention's BlockMask do. "
            "A ragged last tile is padded with False (FlexAttention): it is never full."
        ),
    )
    p.add_argument(
        "spec_or_family", metavar="SPEC_OR_FAMILY", help="a mask spec, a .npy file, or a task family with --n"
    )
    p.add_argument("--block", type=_positive_int, default=128, help="query tile size (default 128)")
    p.add_argument("--block-kv", type=_positive_int, default=None, help="key tile size (default: --block)")
    p.add_argument("--json", metavar="FILE", default=None, help="also write the counts as JSON" + _STREAM_HELP)
    _add_family_options(p)
    p.set_defaults(func=_command("_tiles", "_cmd_tiles"))


# ------------------------------------------------------------------------------- main

_SUBCOMMANDS: list[Callable] = [_add_analyze, _add_derive, _add_export, _add_tiles]


def build_parser() -> argparse.ArgumentParser:
    """The ``hassejax`` argument parser with one subparser per entry of :data:`_SUBCOMMANDS`.

    **Raises:** nothing: it only builds the parser (its ``parse_args`` prints the usage and raises argparse's
    ``SystemExit(2)`` for a bad command line, ``SystemExit(0)`` after ``--help``).

    Source: (derived), no paper: the command line of DESIGN.md "Layout" (analyze, derive, export, tiles).

    **Example:** the parsed fields of an ``analyze`` command line (defaults filled in), and a global option
    before the subcommand:

    ```python
    >>> from hassejax.cli import build_parser
    >>> args = build_parser().parse_args(["analyze", "causal(n=8)", "--layers", "1", "2"])
    >>> args.command, args.mask_spec, args.layers, args.method, args.max_edges, args.no_compile_cache
    ('analyze', 'causal(n=8)', [1, 2], 'auto', 100, False)
    >>> args = build_parser().parse_args(["--no-compile-cache", "tiles", "causal(n=256)", "--block", "64"])
    >>> args.command, args.block, args.block_kv, args.no_compile_cache
    ('tiles', 64, None, True)

    ```
    """
    # no abbreviations: `--n 3` on analyze was read as --no-progress (a fresh user: "unrecognized arguments: 3")
    parser = argparse.ArgumentParser(
        prog=PROG, description="hassejax: attention masks as partial orders.", allow_abbrev=False
    )
    parser.add_argument(
        "--no-compile-cache",
        action="store_true",
        help="do not keep JAX's compiled programs in the persistent cache (default: on, in "
        "~/.cache/hassejax/jax or $HASSEJAX_CACHE_DIR; HASSEJAX_COMPILE_CACHE=0 also turns it off)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in _SUBCOMMANDS:
        add(sub)
    return parser
