"""``hassejax analyze``: the information flow of a mask at any length (spec hasse.md §1)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

import numpy as np

from ..errors import HassejaxError
from ._common import _check_figure_path, _print, _report, _stdout_taken, _write_text, load_mask
from ._parser import _one_line, _OutputError, _UsageError

#: ``hassejax analyze`` shows the progress bar of a closure stage once it has run this many seconds.
_PROGRESS_DELAY = 2.0


def analyze(
    mask,
    layers: Sequence[int | np.integer] | int | np.integer | np.ndarray | None = None,
    progress: bool | int | float = False,
    method: str = "auto",
    quotient_limit: int | None = None,
) -> dict:
    """The numbers printed by ``hassejax analyze`` (spec hasse.md §1), at any ``n``.

    **Arguments:**

    - `mask`: an :class:`~hassejax.masks.IntervalMask` or a Boolean `(n, n)` array (row =
      query, column = key, True = may attend).
    - `layers`: layer counts ``L`` whose reach is reported (an int, a sequence of ints or a 1-D integer NumPy
      array, as in :func:`hassejax.order.flow_summary`).
    - `progress`: progress bars on stderr, as in :func:`hassejax.order.flow_summary` (``False``,
      ``True`` or a number of seconds before a stage's bar shows).
    - `method`: the closure's route, as in :func:`hassejax.order.flow_summary` (``"auto"``, ``"structured"``,
      ``"bitpacked"`` or ``"matmul"``).
    - `quotient_limit`: as in :func:`hassejax.order.flow_summary` (None: its default,
      :data:`~hassejax.order.QUOTIENT_LIMIT`).

    **Returns:** the dict of :meth:`hassejax.order.FlowSummary.to_dict` (``n``, ``route``,
    ``convergence_depth``, ``reach``, ``limit``, ``num_classes``, ``class_sizes``, ``depth``,
    ``width``, ``num_hasse_edges``, ``not_computed``, ``seconds``) plus ``layers`` and
    ``summary`` (the :class:`~hassejax.order.FlowSummary`).

    **Raises:** as :func:`hassejax.order.flow_summary`.

    **Example:** a causal window of two previous keys on 8 positions: ``L* = ceil(7 / 2) = 4``, one layer
    reaches 21 of the 36 pairs of the limit:

    ```python
    >>> from hassejax.cli import analyze, load_mask
    >>> r = analyze(load_mask("sliding_window(n=8, left=2)"), layers=[1])
    >>> r["route"], r["convergence_depth"], r["layers"], r["reach"][0]["pairs"], r["limit"]["pairs"]
    ('structured', 4, [1], 21, 36)
    >>> r["num_classes"], r["depth"], r["width"], r["summary"].num_hasse_edges
    (8, 8, 1, 7)

    ```
    """
    from ..order import flow_summary

    layers = () if layers is None else layers
    limit = {} if quotient_limit is None else {"quotient_limit": quotient_limit}
    summary = flow_summary(mask, layers, method=method, progress=progress, **limit)
    out = summary.to_dict()
    out["layers"] = list(summary.layers)
    out["summary"] = summary
    return out


def _cmd_analyze(args: argparse.Namespace) -> int:
    # Imports no JAX for a structured spec (interval form, structured route; the diagram on NumPy):
    # only a dense route (a .npy mask, or a spec with many key runs a row) starts it.
    _check_figure_path(args.png)
    try:
        mask = load_mask(args.mask_spec)
        progress = _progress(args.progress)
        result = analyze(mask, args.layers, progress=progress, method=args.method, quotient_limit=args.quotient_limit)
    except HassejaxError as err:
        raise _UsageError(str(err)) from None
    from ..order import format_class

    summary = result["summary"]
    diagram = summary._diagram
    listed = diagram is not None and args.max_edges > 0  # --max-edges 0: the counts only, no edges block
    lines = [f"mask: {args.mask_spec}"]
    for line in summary.lines():
        if not listed or not line.startswith("Hasse edges"):  # edges listed: their count heads the list below
            lines.append(line)
    if listed:
        names = [_short_class(format_class(m), len(m)) for m in diagram.classes]
        edges = diagram.edges
        lines.append(f"Hasse edges ({len(edges)}; u -> v: u is covered by v, information flows u -> v):")
        for u, v in edges[: args.max_edges]:
            lines.append(f"  {names[u]} -> {names[v]}")
        if len(edges) > args.max_edges:
            lines.append(f"  ... and {len(edges) - args.max_edges} more ({_where_all_edges(args, len(edges))})")
        if not edges:
            singles = [names[c] for c in range(diagram.num_classes)][: args.max_edges]
            more = " ..." if diagram.num_classes > len(singles) else ""
            lines.append("  (none; classes: " + " ".join(singles) + more + ")")
    _report(args, "\n".join(lines))

    if diagram is None and (args.dot or args.png):  # the counts printed above (and --json written) first
        if args.json:
            _write_json(args.json, result, args.mask_spec, diagram)
        elif _stdout_taken(args):  # `--dot -` held the report back for a diagram that is not written: print it
            _print("\n".join(lines))  # (a review: "The counts are in None." and no counts anywhere)
        raise _UsageError(
            f"--dot/--png: the quotient has {summary.num_classes} classes, too many to draw (the limit is "
            f"{summary.quotient_limit}; --quotient-limit raises it); no diagram written. The counts are "
            + (
                ("in the JSON on stdout." if args.json == "-" else f"in {args.json}.")
                if _stdout_taken(args) and args.json
                else "printed above" + (f" and in {args.json}." if args.json else "; --json writes them.")
            )
        )
    if args.dot:
        _write_text(args.dot, diagram.to_dot())
    if args.json:
        _write_json(args.json, result, args.mask_spec, diagram)
    if args.png:
        from matplotlib.figure import Figure

        from ..plot import draw_hasse, hasse_figsize

        fig = Figure(figsize=hasse_figsize(diagram, title=args.mask_spec))
        draw_hasse(diagram, fig.add_subplot(), title=args.mask_spec)
        try:
            fig.savefig(args.png, dpi=120, bbox_inches="tight")
        except OSError as err:
            raise _OutputError(f"cannot write {args.png!r}: {_one_line(str(err))}") from None
    return 0


def _where_all_edges(args: argparse.Namespace, count: int) -> str:
    """Where the edges left off the terminal are: the files asked for (--json, --dot), else how to get them (it
    said "all in --json / --dot" when neither was given)."""
    files = [path for path in (args.json, args.dot) if path]
    if files:
        return "all in " + " and ".join(files)
    return f"--max-edges {count} prints all; --json FILE or --dot FILE writes them"


def _write_json(path: str, result: dict, mask_spec: str, diagram) -> None:
    payload = {k: v for k, v in result.items() if k != "summary"}
    payload["mask_spec"] = mask_spec
    if diagram is not None:
        payload["diagram"] = diagram.to_dict()
    # One top-level key a line, values compact (the class lists stay on one line each key).
    body = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in payload.items())
    _write_text(path, "{\n" + body + "\n}\n")


def _progress(flag: bool | None) -> float | bool:
    """``--progress``/``--no-progress``, by default on when stderr is a terminal: bars (on stderr,
    never stdout) for the stages that run longer than :data:`_PROGRESS_DELAY` seconds."""
    on = flag if flag is not None else sys.stderr.isatty()
    return _PROGRESS_DELAY if on else False


_CLASS_CHARS = 60
"""A class longer than this when written out is cut on the terminal (``--json`` and ``--dot`` keep it whole)."""


def _short_class(text: str, size: int) -> str:
    """`text` (a class as :func:`~hassejax.order.format_class` writes it), cut to about :data:`_CLASS_CHARS`
    characters with its number of positions: a class of 750 strided positions was a 4,000-character line."""
    if len(text) <= _CLASS_CHARS:
        return text
    cut = text[: _CLASS_CHARS - 4].rsplit(",", 1)[0]
    return f"{cut}, …}} ({size} positions)"
