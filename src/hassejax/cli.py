"""The ``hassejax`` command line.

Subcommands (each one function ``_cmd_NAME(args) -> int`` plus a parser builder
``_add_NAME(subparsers)`` registered in :data:`_SUBCOMMANDS`):

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

Exit codes: 0 success, 2 bad input (mask spec, file, options, or a mask too large for the
memory budget; one line on stderr, no traceback), 1 an output file that could not be written.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from .errors import HassejaxError, MaskError

__all__ = ["main", "build_parser", "analyze", "derive", "load_mask"]

PROG = "hassejax"


class _UsageError(Exception):
    """Bad input to a subcommand: reported on one line, exit code 2."""


class _OutputError(Exception):
    """An output file could not be written: reported on one line, exit code 1."""


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _one_line(message: str) -> str:
    return " ".join(str(message).split())


# ----------------------------------------------------------------------------- inputs


def load_mask(spec: str):
    """The mask named by `spec`: a ``.npy`` file path (dense) or a mask spec (interval form).

    A spec such as ``"sliding_window(n=131072, left=4096) | attention_sinks(n=131072, num=4)"``
    is built with :func:`hassejax.masks.from_spec` in its interval form
    (:class:`~hassejax.masks.IntervalMask`): no ``n × n`` array, any ``n``.

    **Raises:** :class:`~hassejax.errors.MaskError` for an unreadable file, a non-Boolean or
    non-square array, or a bad spec (the message of :func:`hassejax.masks.from_spec`);
    :class:`~hassejax.errors.MemoryBudgetError` for an array too large for the memory.
    """
    if spec.endswith(".npy"):
        path = Path(spec)
        if not path.is_file():
            raise MaskError(f"MASK_SPEC {spec!r}: no such .npy file.")
        try:
            arr = np.load(path, allow_pickle=False, mmap_mode="r")
        except (OSError, ValueError) as err:
            raise MaskError(f"MASK_SPEC {spec!r}: cannot read it as a .npy array ({_one_line(str(err))}).") from None
        if arr.ndim != 2 or 0 in arr.shape:
            raise MaskError(f"`mask` must have rank 2, shape (n, n) with n >= 1; got shape {arr.shape} (rank {arr.ndim}).")
        if arr.shape[0] != arr.shape[1]:
            raise MaskError(f"`mask` must be square (n, n): queries and keys are the same positions; got shape {arr.shape}.")
        if arr.dtype != np.bool_:
            raise MaskError(
                f"`mask` must have dtype bool (True = may attend); got dtype {arr.dtype}. Convert it first, e.g. "
                "`mask.astype(bool)` for 0/1 'may attend' masks."
            )
        from .masks import IntervalMask

        return IntervalMask.from_dense(arr, name="mask") if arr.shape[0] > _DENSE_NPY_LIMIT else np.asarray(arr)
    from .masks import from_spec

    return from_spec(spec, form="intervals")


# A .npy mask larger than this is read row block by row block into its interval form.
_DENSE_NPY_LIMIT = 4096


# ---------------------------------------------------------------------------- analyze


def _add_analyze(subparsers) -> None:
    p = subparsers.add_parser(
        "analyze",
        help="classes, convergence depth and Hasse diagram of a mask",
        description=(
            "Analyse the information flow of an attention mask (spec hasse.md §1): positions, classes "
            "of mutual reachability, convergence depth L*, depth and width of the quotient order and "
            "the Hasse diagram edges (u -> v: class u is covered by class v, information flows u -> v)."
        ),
    )
    p.add_argument("mask_spec", metavar="MASK_SPEC", help="e.g. 'sliding_window(n=16, left=2)' or a .npy file")
    p.add_argument(
        "--layers", type=_positive_int, nargs="+", metavar="L",
        help="report the reach after L layers and whether it is the limit flow (several: --layers 1 2 4 8)",
    )  # fmt: skip
    p.add_argument("--dot", metavar="FILE", help="write the Hasse diagram as Graphviz DOT")
    p.add_argument("--png", metavar="FILE", help="draw the Hasse diagram (matplotlib)")
    p.add_argument("--json", metavar="FILE", help="write the numbers and the diagram as JSON")
    p.add_argument(
        "--max-edges", type=_positive_int, default=100, metavar="K", help="print at most K edges (default 100)"
    )
    p.set_defaults(func=_cmd_analyze)


def analyze(mask, layers: Sequence[int] | int | None = None) -> dict:
    """The numbers printed by ``hassejax analyze`` (spec hasse.md §1), at any ``n``.

    **Arguments:**

    - `mask`: an :class:`~hassejax.masks.IntervalMask` or a Boolean `(n, n)` array (row =
      query, column = key, True = may attend).
    - `layers`: layer counts ``L`` whose reach is reported (an int or a sequence).

    **Returns:** the dict of :meth:`hassejax.order.FlowSummary.to_dict` (``n``, ``route``,
    ``convergence_depth``, ``reach``, ``limit``, ``num_classes``, ``class_sizes``, ``depth``,
    ``width``, ``num_hasse_edges``, ``not_computed``, ``seconds``) plus ``layers`` and
    ``summary`` (the :class:`~hassejax.order.FlowSummary`).

    **Raises:** as :func:`hassejax.order.flow_summary`.
    """
    from .order import flow_summary

    layers = () if layers is None else layers
    summary = flow_summary(mask, layers)
    out = summary.to_dict()
    out["layers"] = list(summary.layers)
    out["summary"] = summary
    return out


def _check_figure_path(path: str | None) -> None:
    """Reject a ``--png`` path whose extension matplotlib cannot write, before any output."""
    if path is None:
        return
    from matplotlib.backend_bases import FigureCanvasBase

    ext = path.rsplit(".", 1)[-1].lower() if "." in path.rsplit("/", 1)[-1] else ""
    formats = FigureCanvasBase.get_supported_filetypes()
    if ext not in formats:
        raise _UsageError(f"--png {path!r}: the file name must end in an image format matplotlib writes ({', '.join('.' + f for f in sorted(formats))}).")


def _cmd_analyze(args: argparse.Namespace) -> int:
    from .order import format_class

    _check_figure_path(args.png)
    try:
        mask = load_mask(args.mask_spec)
        result = analyze(mask, args.layers)
    except HassejaxError as err:
        raise _UsageError(str(err)) from None
    summary = result["summary"]
    diagram = summary._diagram
    if diagram is None and (args.dot or args.png):
        raise _UsageError(
            f"--dot/--png: the quotient has {summary.num_classes} classes, too many to draw (the limit is "
            f"{_quotient_limit()}); the counts are printed, --json writes them."
        )
    lines = [f"mask: {args.mask_spec}"]
    for line in summary.lines():
        if diagram is None or not line.startswith("Hasse edges"):  # with a diagram: listed below
            lines.append(line)
    if diagram is not None:
        names = [format_class(m) for m in diagram.classes]
        edges = diagram.edges
        lines.append(f"Hasse edges ({len(edges)}; u -> v: u is covered by v, information flows u -> v):")
        for u, v in edges[: args.max_edges]:
            lines.append(f"  {names[u]} -> {names[v]}")
        if len(edges) > args.max_edges:
            lines.append(f"  ... and {len(edges) - args.max_edges} more (all in --json / --dot)")
        if not edges:
            singles = [names[c] for c in range(diagram.num_classes)][: args.max_edges]
            more = " ..." if diagram.num_classes > len(singles) else ""
            lines.append("  (none; classes: " + " ".join(singles) + more + ")")
    print("\n".join(lines))

    if args.dot:
        _write_text(args.dot, diagram.to_dot())
    if args.json:
        payload = {k: v for k, v in result.items() if k != "summary"}
        payload["mask_spec"] = args.mask_spec
        if diagram is not None:
            payload["diagram"] = diagram.to_dict()
        # One top-level key a line, values compact (the class lists stay on one line each key).
        body = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in payload.items())
        _write_text(args.json, "{\n" + body + "\n}\n")
    if args.png:
        from matplotlib.figure import Figure

        from .plot import draw_hasse, hasse_figsize

        fig = Figure(figsize=hasse_figsize(diagram, title=args.mask_spec))
        draw_hasse(diagram, fig.add_subplot(), title=args.mask_spec)
        try:
            fig.savefig(args.png, dpi=120, bbox_inches="tight")
        except OSError as err:
            raise _OutputError(f"cannot write {args.png!r}: {_one_line(str(err))}") from None
    return 0


def _quotient_limit() -> int:
    from .order.summary import QUOTIENT_LIMIT

    return QUOTIENT_LIMIT


def _write_text(path: str, text: str) -> None:
    try:
        Path(path).write_text(text)
    except OSError as err:
        raise _OutputError(f"cannot write {path!r}: {_one_line(str(err))}") from None


# ----------------------------------------------------------------------------- derive


_DERIVE_MAX_N = 128
_DERIVE_MAX_PRINTED_SLOTS = 64


def _add_derive(subparsers) -> None:
    p = subparsers.add_parser(
        "derive",
        help="derive a mask from a task family (merge of its Hasse diagrams)",
        description=(
            "Derive an attention mask from a task family (spec hasse.md §2-3): the minimal merged task's "
            "slots, dense mask and labels, its sparsest variant, and the leakage audit."
        ),
    )
    p.add_argument("family", choices=["autoregressive", "block_generation", "butterfly"], help="the task family")
    p.add_argument("--n", type=_positive_int, required=True, help="sequence length")
    p.add_argument("--block-size", type=_positive_int, default=None, help="block size l (block_generation; divides n)")
    p.add_argument("--group", choices=["full", "causal", "diagonal"], default=None, help="attention inside a query group (block_generation; default full)")
    p.add_argument("--content", choices=["causal", "block_causal"], default=None, help="content stream mask (block_generation; default causal)")
    p.add_argument("--no-keep-last-block", action="store_true", help="leave out the full-sequence content task (block_generation; 2n - l slots)")
    p.add_argument("--boundary", choices=["neighbour", "pad"], default=None, help="boundary aggregate (butterfly; default neighbour)")
    p.add_argument("--png", nargs="?", const="derived_mask.png", metavar="FILE", help="draw the mask and Hasse diagram (default FILE: derived_mask.png)")
    p.add_argument("--json", nargs="?", const="derived_mask.json", metavar="FILE", help="write slots, mask, labels and audit (default FILE: derived_mask.json)")
    p.set_defaults(func=_cmd_derive)


def derive(family: str, n: int, **options) -> dict:
    """The numbers printed by ``hassejax derive``: merged task, sparse variant and audit.

    **Arguments:** `family` (``"autoregressive"``, ``"block_generation"``, ``"butterfly"``), `n`,
    and the family's options (e.g. ``block_size``, ``group``, ``content``, ``keep_last_block``,
    ``boundary``), as in :mod:`hassejax.tasks`.

    **Returns:** a dict with ``merged`` (:class:`~hassejax.tasks.MergedTask`), ``sparse``
    (:class:`~hassejax.tasks.Sparsified`) and ``audit`` (:class:`~hassejax.tasks.AuditReport`).

    **Raises:** :class:`~hassejax.errors.TaskError` for bad family options.
    """
    from .tasks import FAMILIES, audit, sparsify

    merged = FAMILIES[family](n, **options).merge()
    return {"merged": merged, "sparse": sparsify(merged), "audit": audit(merged)}


def _cmd_derive(args: argparse.Namespace) -> int:
    _check_figure_path(args.png)
    given = {
        "--block-size": args.block_size is not None,
        "--group": args.group is not None,
        "--content": args.content is not None,
        "--no-keep-last-block": args.no_keep_last_block,
        "--boundary": args.boundary is not None,
    }
    allowed = {
        "autoregressive": (),
        "block_generation": ("--block-size", "--group", "--content", "--no-keep-last-block"),
        "butterfly": ("--boundary",),
    }[args.family]
    ignored = [k for k, v in given.items() if v and k not in allowed]
    if ignored:
        raise _UsageError(f"{', '.join(ignored)} do(es) not apply to the {args.family} family (its options: {', '.join(allowed) or 'none'})")
    if args.n > _DERIVE_MAX_N:
        raise _UsageError(
            f"--n {args.n} is too large for derive, which merges one Hasse diagram per task (at most {_DERIVE_MAX_N}); "
            "for large n use the closed forms hassejax.tasks.block_two_stream_mask / butterfly_mask"
        )
    options: dict = {}
    if args.family == "block_generation":
        if args.block_size is None:
            raise _UsageError("derive block_generation needs --block-size L (a divisor of --n)")
        options = dict(block_size=args.block_size, group=args.group or "full", content=args.content or "causal",
                       keep_last_block=not args.no_keep_last_block)
    elif args.family == "butterfly":
        options = dict(boundary=args.boundary or "neighbour")
    try:
        result = derive(args.family, args.n, **options)
    except HassejaxError as err:
        raise _UsageError(str(err)) from None
    merged, sparse, report = result["merged"], result["sparse"], result["audit"]
    names = [str(t) for t in merged.inputs]
    width = max(len(x) for x in names)
    lines = [f"family: {args.family} (n = {args.n}{''.join(f', {k} = {v}' for k, v in options.items())})",
             f"slots: {merged.n} (merged from {len(merged.tasks)} tasks; {int(merged.node.max()) + 1} Hasse nodes)",
             "slot  input" + " " * max(0, width - 5) + "  stream   position  label"]
    for p, (tok, stream, lab) in enumerate(zip(merged.inputs, merged.streams, merged.labels)):
        lines.append(f"{p:>4}  {str(tok):<{max(width, 5)}}  {stream:<7}  {tok.position:>8}  {'-' if lab is None else lab}")
    mask = np.asarray(merged.mask)
    if merged.n <= _DERIVE_MAX_PRINTED_SLOTS:
        lines.append("mask (row = query slot, column = key slot, 1 = may attend):")
        for p in range(merged.n):
            lines.append(f"  {names[p]:>{width}} " + " ".join("1" if x else "." for x in mask[p]))
    else:
        lines.append(f"mask: {merged.n} x {merged.n} (not printed above {_DERIVE_MAX_PRINTED_SLOTS} slots; see --json / --png)")
    from .order import convergence_depth

    lines.append(f"dense: {int(mask.sum())} nonzeros, L* = {int(convergence_depth(mask))}; sparsest variant: {sparse.nonzeros} nonzeros, L* = {sparse.depth}")
    lines.append("audit: " + report.summary())
    print("\n".join(lines))
    if args.json:
        payload = {
            "family": args.family, "n": args.n, "options": options,
            "slots": [{"input": [str(t.symbol), t.position], "stream": s, "label": None if y is None else [str(y.symbol), y.position]}
                      for t, s, y in zip(merged.inputs, merged.streams, merged.labels)],
            "mask": mask.astype(int).tolist(), "sparse_mask": sparse.mask.astype(int).tolist(), "sparse_depth": sparse.depth,
            "audit": {"leaks": list(report.leaks), "mismatches": list(report.mismatches),
                      "token_density": report.token_density, "slot_density": report.slot_density},
        }
        _write_text(args.json, json.dumps(payload) + "\n")
    if args.png:
        from matplotlib.figure import Figure

        from .order import HasseDiagram
        from .plot import draw_hasse, draw_mask

        fig = Figure(figsize=(14, 7), layout="constrained")
        ax_mask, ax_hasse = fig.subplots(1, 2)
        draw_mask(mask, ax=ax_mask, labels=names, title=f"{args.family} merged mask ({merged.n} slots)")
        draw_hasse(HasseDiagram.from_mask(mask), ax=ax_hasse, names=names, title="Hasse diagram")
        try:
            fig.savefig(args.png, dpi=120)
        except OSError as err:
            raise _OutputError(f"cannot write {args.png!r}: {_one_line(str(err))}") from None
    return 0


# ----------------------------------------------------------------------- export, tiles

_FAMILY_SPECS = {
    "autoregressive": "causal(n={n_minus_one})",
    "block_generation": (
        "block_two_stream_mask(n={n}, block_size={block_size}, group={group!r}, content={content!r}, "
        "keep_last_block={keep_last_block})"
    ),
    "butterfly": "butterfly_mask(n={n})",
}


def _add_family_options(p) -> None:
    p.add_argument("--n", type=_positive_int, default=None, help="sequence length (task families)")
    p.add_argument("--block-size", type=_positive_int, default=None, help="block size l (block_generation)")
    p.add_argument("--group", choices=["full", "causal", "diagonal"], default="full", help="block_generation query group")
    p.add_argument("--content", choices=["causal", "block_causal"], default="causal", help="block_generation content stream")
    p.add_argument("--no-keep-last-block", action="store_true", help="block_generation without the full content task")


def _kernel_mask(args: argparse.Namespace):
    """The mask named by SPEC_OR_FAMILY: a family's closed form (spec text), a .npy file, or a mask spec."""
    target = args.spec_or_family
    if target in _FAMILY_SPECS:
        if args.n is None:
            raise _UsageError(f"the {target} family needs --n N")
        if target == "block_generation" and args.block_size is None:
            raise _UsageError("the block_generation family needs --block-size L (a divisor of --n)")
        if target == "autoregressive" and args.n < 2:
            raise _UsageError("the autoregressive family needs --n >= 2")
        return _FAMILY_SPECS[target].format(
            n=args.n, n_minus_one=args.n - 1, block_size=args.block_size, group=args.group, content=args.content,
            keep_last_block=not args.no_keep_last_block,
        )
    if args.n is not None or args.block_size is not None:
        raise _UsageError(f"--n / --block-size apply to task families ({', '.join(_FAMILY_SPECS)}), not to a mask spec")
    if target.endswith(".npy"):
        path = Path(target)
        try:
            arr = np.load(path, allow_pickle=False, mmap_mode="r") if path.is_file() else None
        except (OSError, ValueError):
            arr = None
        if arr is not None and arr.ndim == 3 and arr.dtype == np.bool_ and arr.shape[1] == arr.shape[2] > 0:
            return [np.asarray(head) for head in arr]  # one (n, n) mask per head
        try:
            return load_mask(target)
        except HassejaxError as err:
            raise _UsageError(str(err)) from None
    return target


def _add_export(subparsers) -> None:
    p = subparsers.add_parser(
        "export",
        help="write a mask for a kernel: splash attention, a FlexAttention mask_mod, or .npy",
        description=(
            "Export a mask (row = query, column = key, True = may attend) for the kernels people train with: "
            "'--to mask_mod' prints Python source of mask_mod(b, h, q_idx, kv_idx) for FlexAttention (closed form "
            "where the mask has one, lookup tables otherwise); '--to splash' prints Python that builds the JAX splash "
            "attention mask (structured CausalMask / LocalMask / ChunkedCausalMask / FullMask and their & and |, else a "
            "NumpyMask loaded from --out); '--to npy' writes the dense Boolean array to --out."
        ),
    )
    p.add_argument(
        "spec_or_family", metavar="SPEC_OR_FAMILY",
        help="a mask spec ('sliding_window(n=4096, left=256)', 'butterfly_mask(n=100)'), a .npy file, or a task family "
        "(autoregressive, block_generation, butterfly) with --n",
    )
    p.add_argument("--to", choices=["splash", "mask_mod", "npy"], required=True, help="the target kernel format")
    p.add_argument(
        "--out", metavar="FILE", default=None,
        help="mask_mod: write the source here; npy: the .npy file (required); splash: the .npy file of a NumpyMask's "
        "array (required when the mask has no structured splash form), or a .py file for the Python",
    )
    p.add_argument("--framework", choices=["torch", "jax", "numpy"], default="torch", help="mask_mod tables (default torch)")
    _add_family_options(p)
    p.set_defaults(func=_cmd_export)


def _splash_source(mask, npy: str | None) -> str:
    """Python text that builds the splash mask `mask` (``mask_lib`` = splash_attention_mask)."""
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
        raise _UsageError(f"this mask has no structured splash form (it is a {kind}); give --out FILE.npy for its dense array")
    return f"mask_lib.NumpyMask(np.load({npy!r}))"


def _cmd_export(args: argparse.Namespace) -> int:
    mask = _kernel_mask(args)
    try:
        if args.to == "mask_mod":
            from .kernels import mask_mod_source

            _emit(args.out, mask_mod_source(mask, framework=args.framework))
            return 0
        from .kernels import mask_rule

        rule = mask_rule(mask)
        if args.to == "npy":
            if args.out is None:
                raise _UsageError("--to npy needs --out FILE.npy")
            if not args.out.endswith(".npy"):
                raise _UsageError(f"--out {args.out!r}: --to npy writes a .npy file; give a name ending in .npy")
            from .kernels._splash_write import _dense_rule

            dense = _dense_rule(rule, 0, rule.n) if rule.heads is None else np.stack(
                [_dense_rule(rule, h, rule.n) for h in range(rule.heads)]
            )
            _save_npy(args.out, dense)
            print(f"wrote {args.out}: Boolean {dense.shape} (row = query, column = key, True = may attend)")
            return 0
        from .kernels import to_splash

        structured = _structured_only(to_splash(rule, fallback="lazy"))
        npy = None
        if not structured:
            if args.out is None or not args.out.endswith(".npy"):
                raise _UsageError(
                    f"{rule.label}: splash has no structured mask for this rule; give --out FILE.npy to write the array of "
                    "its NumpyMask (or use hassejax.kernels.to_splash(mask, fallback='lazy') in Python: no (n, n) array)"
                )
            npy = args.out
            splash = to_splash(rule)
            _save_npy(npy, np.asarray(splash.array) if rule.heads is None else np.stack([np.asarray(m[:, :]) for m in splash.masks]))
        else:
            if args.out is not None and args.out.endswith(".npy"):
                raise _UsageError(
                    f"--out {args.out!r}: {rule.label} is a structured splash mask (no array to write); give --out FILE.py "
                    "for the Python, or no --out to print it"
                )
            splash = to_splash(rule)
        lines = [
            "from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mask_lib",
            "",
            f"# {rule.label}: row = query, column = key, True = may attend",
        ]
        if npy is not None:
            lines.insert(0, "import numpy as np")
        if rule.heads is None:
            lines.append(f"mask = {_splash_source(splash, npy)}")
        elif npy is not None:
            lines.append(f"mask = mask_lib.MultiHeadMask([mask_lib.NumpyMask(a) for a in np.load({npy!r})])")
        else:
            lines.append("mask = mask_lib.MultiHeadMask([")
            lines += [f"    {_splash_source(m, None)}," for m in splash.masks]
            lines.append("])")
        _emit(None if npy is not None else args.out, "\n".join(lines) + "\n")
        return 0
    except HassejaxError as err:
        raise _UsageError(str(err)) from None


def _structured_only(splash) -> bool:
    kind = type(splash).__name__
    if kind == "MultiHeadMask":
        return all(_structured_only(m) for m in splash.masks)
    if kind in ("LogicalAnd", "LogicalOr"):
        return _structured_only(splash.left) and _structured_only(splash.right)
    return kind in ("CausalMask", "FullMask", "LocalMask", "ChunkedCausalMask")


def _emit(path: str | None, text: str) -> None:
    if path is None:
        print(text, end="")
    else:
        _write_text(path, text)


def _save_npy(path: str, array: np.ndarray) -> None:
    try:
        np.save(path, array)
    except OSError as err:
        raise _OutputError(f"cannot write {path!r}: {_one_line(str(err))}") from None


def _add_tiles(subparsers) -> None:
    p = subparsers.add_parser(
        "tiles",
        help="empty / partial / full tiles of a mask for a block-sparse kernel",
        description=(
            "Count the (block_q, block_kv) tiles of a mask a block-sparse attention kernel skips (empty), masks "
            "(partial) or computes whole (full), as splash attention's MaskInfo and FlexAttention's BlockMask do. "
            "A ragged last tile is padded with False (FlexAttention): it is never full."
        ),
    )
    p.add_argument("spec_or_family", metavar="SPEC_OR_FAMILY", help="a mask spec, a .npy file, or a task family with --n")
    p.add_argument("--block", type=_positive_int, default=128, help="query tile size (default 128)")
    p.add_argument("--block-kv", type=_positive_int, default=None, help="key tile size (default: --block)")
    p.add_argument("--json", metavar="FILE", default=None, help="also write the counts as JSON")
    _add_family_options(p)
    p.set_defaults(func=_cmd_tiles)


def _cmd_tiles(args: argparse.Namespace) -> int:
    mask = _kernel_mask(args)
    block = (args.block, args.block_kv or args.block)
    try:
        if isinstance(mask, str):  # a spec: its interval form, built on the way to its rule (no n x n array)
            from .kernels import mask_rule

            mask = mask_rule(mask).intervals
        from .kernels import tile_stats

        stats = tile_stats(mask, block_size=block)
    except HassejaxError as err:
        raise _UsageError(str(err)) from None
    print(str(stats))
    if args.json:
        _write_text(args.json, json.dumps(stats.to_dict()) + "\n")
    return 0


# ------------------------------------------------------------------------------- main

_SUBCOMMANDS: list[Callable] = [_add_analyze, _add_derive, _add_export, _add_tiles]


def build_parser() -> argparse.ArgumentParser:
    """The ``hassejax`` argument parser with one subparser per entry of :data:`_SUBCOMMANDS`."""
    parser = argparse.ArgumentParser(prog=PROG, description="hassejax: attention masks as partial orders.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in _SUBCOMMANDS:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hassejax`` console script.

    **Arguments:**

    - `argv`: the arguments without the program name (default: ``sys.argv[1:]``).

    **Returns:** the exit code: 0 on success, 2 for bad input (argparse usage errors, a bad
    mask spec or file, a computation over the memory budget: the library's
    :class:`~hassejax.errors.MemoryBudgetError`, or as a last resort a raw ``MemoryError``
    or XLA ``RESOURCE_EXHAUSTED`` that no estimate caught), 1 if an output file cannot be
    written. Errors are one line on stderr, ``hassejax: error: ...``, without a traceback.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed usage and the error
        return int(exc.code or 0)
    try:
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
