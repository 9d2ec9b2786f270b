"""The ``hassejax`` command line.

Subcommands (each one function ``_cmd_NAME(args) -> int`` in its own module ``_NAME.py``,
plus a parser builder ``_add_NAME(subparsers)`` in :mod:`hassejax.cli._parser`, registered in
``_SUBCOMMANDS``). The parser imports neither JAX nor a command module: ``hassejax --help``
and argument errors start no JAX; a command imports what it needs when it runs. ``analyze`` of
a mask spec (a bad one included) or ``.npy`` mask whose rows are at most 4 key runs never imports
JAX either: the mask is closed on the structured route, classes and diagram on NumPy; only the
dense routes (more key runs a row) start it.

- ``hassejax analyze MASK_SPEC [--layers L [L ...]] [--dot FILE] [--png FILE] [--json FILE]``:
  the information flow of a mask (spec hasse.md §1) at any length: n, the closure route,
  the convergence depth L*, the reach after each requested L (keys per query, share of the
  limit), classes, depth and width of the quotient order, the number of Hasse edges and,
  for a quotient small enough to draw, the edges themselves. ``MASK_SPEC`` is a mask spec
  such as ``"sliding_window(n=131072, left=4096) | attention_sinks(n=131072, num=4)"``
  (:func:`hassejax.masks.from_spec`, built in interval form: no ``n × n`` array) or the path
  of a ``.npy`` file holding a Boolean `(n, n)` array.

- ``hassejax derive FAMILY --n N [--block-size L] [--group G] [--content C] [--png [FILE]] [--json [FILE]]``:
  derive a mask from a task family (spec hasse.md §2–3): the merged slots, mask, labels,
  sparsest variant and leakage audit.

- ``hassejax export SPEC_OR_FAMILY --to splash|mask_mod|npy [--out FILE] [--framework F]``: the
  mask for a kernel (:mod:`hassejax.kernels`): Python source of a FlexAttention ``mask_mod``,
  Python that builds the JAX splash attention mask, or the dense ``.npy`` array.
  ``SPEC_OR_FAMILY`` is a mask spec (also ``block_two_stream_mask(...)``, ``butterfly_mask(...)``),
  a ``.npy`` file, or a task family (``autoregressive``, ``block_generation``, ``butterfly``)
  with ``--n`` (and ``--block-size`` ...), exported through its closed form.

- ``hassejax tiles SPEC_OR_FAMILY [--block B] [--block-kv B] [--json FILE]``: empty, partial and
  full tiles of the mask for a block-sparse kernel (:func:`hassejax.kernels.tile_stats`).

Text outputs (``--json``, ``--dot``, ``export``'s ``--out``): ``-`` writes that output to stdout instead of the
text report (``analyze SPEC --json - | jq``); a path that is stdout itself (``/dev/stdout``, or the file stdout is
redirected to) gets it after the report, through the stream, not reopened and truncated. Two outputs naming one file,
or names that differ only in case (one file on macOS or Windows), or stdout twice, are refused; a character device
such as ``/dev/null`` may take several (nothing written there is overwritten). An empty path is refused.

JAX's persistent compilation cache is on by default (``~/.cache/hassejax/jax`` or
``$HASSEJAX_CACHE_DIR``; ``--no-compile-cache`` or ``HASSEJAX_COMPILE_CACHE=0`` turn it off):
a command that compiles the same programs again loads them instead. It is set up through
JAX's environment variables, so a command that needs no JAX still starts none.

Exit codes: 0 success, 2 bad input (mask spec, file, options, an output path that cannot be
written: a directory, or a folder that is missing or not writable, checked before the work; or a
mask too large for the memory budget; one line on stderr, no traceback), 1 an output file that
could not be written all the same (e.g. a full disk).
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Sequence

from ._parser import PROG, _check_output_paths, _one_line, _OutputError, _UsageError, build_parser

__all__ = ["main", "build_parser", "analyze", "derive", "load_mask"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hassejax`` console script.

    **Arguments:**

    - `argv`: the arguments without the program name (default: ``sys.argv[1:]``).

    **Returns:** the exit code: 0 on success, 2 for bad input (argparse usage errors, a bad
    mask spec or file, an output path whose folder is missing or not writable, checked before
    the work, a computation over the memory budget: the library's
    :class:`~hassejax.errors.MemoryBudgetError`, or as a last resort a raw ``MemoryError``
    or XLA ``RESOURCE_EXHAUSTED`` that no estimate caught), 1 if an output file cannot be
    written all the same. Errors are one line on stderr, ``hassejax: error: ...``, without a traceback; warnings
    ``hassejax: warning: ...``, without Python's file and source line (Python's own format again after the call).

    **Raises:** nothing for bad input or an output that cannot be written: those are the exit codes above, with one
    line on stderr (argparse's ``SystemExit`` becomes its code). Anything else propagates with its traceback: a
    ``RuntimeError`` other than XLA's ``RESOURCE_EXHAUSTED``, ``KeyboardInterrupt``, or an unexpected error of a
    command (a bug).

    Source: (derived), no paper: the ``hassejax`` command of DESIGN.md "Layout"; ``analyze`` reports spec hasse.md
    §1, ``derive`` §2–3.

    **Example:** ``hassejax analyze`` run in-process on a causal window of two previous keys (``L* = ceil(5 / 2)``;
    a long report line is wrapped here); an unknown mask is bad input, exit code 2 (its one-line error goes to
    stderr):

    ```python
    >>> from hassejax.cli import main
    >>> main(["--no-compile-cache", "analyze", "sliding_window(n=6, left=2)", "--layers", "1", "--max-edges", "0"])  # doctest: +NORMALIZE_WHITESPACE
    mask: sliding_window(n=6, left=2)
    n (positions): 6
    route: structured (interval rows, at most 1 key run(s) a row)
    convergence depth L*: 3
    layers L = 1: limit not reached (R^(1) misses 6 of 21 dependent pairs of R);
      keys per query min 1 / median 3 / max 3, 71.43% of the limit
    limit R: keys per query min 1 / median 3.5 / max 6; 21 dependent pairs
    classes: 6 (sizes min 1 / median 1 / max 1)
    depth (longest chain of classes): 6
    width (largest antichain of classes): 1
    Hasse edges (covering pairs): 5
    0
    >>> main(["--no-compile-cache", "analyze", "nosuch(n=8)"])
    2

    ```
    """
    shown = warnings.formatwarning
    warnings.formatwarning = _format_warning
    try:
        return _main(argv)
    finally:
        warnings.formatwarning = shown


def _format_warning(message, category, filename, lineno, line=None) -> str:
    """A warning as the CLI prints it: ``hassejax: warning: ...`` (not the console script's ``sys.exit(main())``)."""
    return f"{PROG}: warning: {message}\n"


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed usage and the error
        return int(exc.code or 0)
    if not args.no_compile_cache:  # JAX's persistent cache, set up without importing JAX
        from .._cache import request_compilation_cache

        request_compilation_cache()
    try:
        _check_output_paths(args)  # before the work: a missing folder is bad input, not a failure minutes later
        return int(args.func(args))
    except _UsageError as err:
        print(f"{PROG}: error: {_one_line(str(err))}", file=sys.stderr)
        return 2
    except _OutputError as err:
        print(f"{PROG}: error: {_one_line(str(err))}", file=sys.stderr)
        return 1
    except (MemoryError, RuntimeError) as err:
        # Every entry point estimates memory before allocating (MemoryBudgetError, reported
        # above as bad input); this is the last resort for an allocation no estimate foresaw.
        text = _one_line(str(err))
        if isinstance(err, RuntimeError) and "RESOURCE_EXHAUSTED" not in text:
            raise
        print(
            f"{PROG}: error: out of memory, over the memory budget of this machine ({type(err).__name__}: "
            f"{text[:300]}); use a smaller n, or a mask spec with fewer key runs a row.",
            file=sys.stderr,
        )
        return 2


_LAZY = {"analyze": "._analyze", "derive": "._derive", "load_mask": "._common"}


def __getattr__(name: str):
    """``analyze``, ``derive`` and ``load_mask`` load their command module on first use."""
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
