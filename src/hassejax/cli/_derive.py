"""``hassejax derive``: a mask derived from a task family (spec hasse.md §2–3)."""

from __future__ import annotations

import argparse
import json
import re

import numpy as np

from ..errors import HassejaxError
from ._common import _check_figure_path, _refuse_foreign_options, _report, _write_text
from ._parser import _one_line, _OutputError, _UsageError

# ----------------------------------------------------------------------------- derive


_DERIVE_MAX_N = 128
_DERIVE_MAX_PRINTED_SLOTS = 64


def derive(family: str, n: int, **options) -> dict:
    """The numbers printed by ``hassejax derive``: merged task, sparse variant and audit.

    **Arguments:** `family` (``"autoregressive"``, ``"block_generation"``, ``"butterfly"``), `n`,
    and the family's options (e.g. ``block_size``, ``group``, ``content``, ``keep_last_block``,
    ``boundary``), as in :mod:`hassejax.tasks`.

    **Returns:** a dict with ``merged`` (:class:`~hassejax.tasks.MergedTask`), ``sparse``
    (:class:`~hassejax.tasks.Sparsified`) and ``audit`` (:class:`~hassejax.tasks.AuditReport`).

    **Raises:** :class:`~hassejax.errors.TaskError` for a bad `n` or bad family options (e.g. `n < 2`, a
    `block_size` that does not divide `n`), a `family` other than the three names, or an option the family does not
    take.

    Source: spec hasse.md §2 (minimal merged task, paper Thm 3.7; sparse variants, paper Def. 3.8; leakage audit)
    and §3 (case studies), for C. Li, H. Guo, arXiv:2606.09951.

    **Example:** the autoregressive family on 3 tokens merges into 2 slots (``w1`` predicts ``w2``, ``w2``
    predicts ``w3``) under a causal mask that leaks nothing:

    ```python
    >>> from hassejax.cli import derive
    >>> r = derive("autoregressive", 3)
    >>> [str(t) for t in r["merged"].inputs], r["merged"].mask.astype(int).tolist()
    (['w1', 'w2'], [[1, 0], [1, 1]])
    >>> r["sparse"].nonzeros, r["sparse"].depth, r["audit"].leaks, r["audit"].ok
    (3, 1, (), True)

    ```
    """
    import inspect

    from ..errors import TaskError
    from ..tasks import FAMILIES, audit, sparsify

    if not isinstance(family, str) or family not in FAMILIES:
        raise TaskError(f"`family` must be one of {sorted(FAMILIES)}; got {family!r}.")
    params = inspect.signature(FAMILIES[family]).parameters
    taken = [p for p in params if p != "n"]
    unknown = sorted(set(options) - set(taken))
    if unknown:
        raise TaskError(f"the {family} family takes the options {taken}; got {unknown}.")
    missing = [p for p in taken if params[p].default is inspect.Parameter.empty and p not in options]
    if missing:
        raise TaskError(f"the {family} family needs the options {missing}.")
    merged = FAMILIES[family](n, **options).merge()
    return {"merged": merged, "sparse": sparsify(merged), "audit": audit(merged)}


_FLAGS = {
    "n": "--n",
    "block_size": "--block-size",
    "group": "--group",
    "content": "--content",
    "boundary": "--boundary",
}


def _flag_names(message: str) -> str:
    """`message` with the family functions' argument names in backticks (and ``multiple of block_size``) as the
    command's flags."""
    for name, flag in _FLAGS.items():
        message = message.replace(f"`{name}`", f"`{flag}`")
    message = re.sub(r"\bn=(\d+)", r"--n \1", re.sub(r"\bblock_size=(\d+)", r"--block-size \1", message))
    return message.replace("multiple of block_size", "multiple of --block-size")


def _cmd_derive(args: argparse.Namespace) -> int:
    _check_figure_path(args.png)
    _refuse_foreign_options(args, args.family)
    if args.n > _DERIVE_MAX_N:
        raise _UsageError(
            f"--n {args.n} is too large for derive, which merges one Hasse diagram per task (at most {_DERIVE_MAX_N}); "
            "for large n use the closed forms hassejax.tasks.block_two_stream_mask / butterfly_mask"
        )
    options: dict = {}
    if args.family == "block_generation":
        if args.block_size is None:
            raise _UsageError("derive block_generation needs --block-size L (a divisor of --n)")
        options = dict(
            block_size=args.block_size,
            group=args.group or "full",
            content=args.content or "causal",
            keep_last_block=not args.no_keep_last_block,
        )
    elif args.family == "butterfly":
        options = dict(boundary=args.boundary or "neighbour")
    try:
        result = derive(args.family, args.n, **options)
    except HassejaxError as err:
        # the library names its arguments (`n`, `block_size`); the command line has flags (a fresh user)
        raise _UsageError(_flag_names(str(err))) from None
    merged, sparse, report = result["merged"], result["sparse"], result["audit"]
    names = [str(t) for t in merged.inputs]
    width = max(len(x) for x in names)
    lines = [
        f"family: {args.family} (n = {args.n}{''.join(f', {k} = {v}' for k, v in options.items())})",
        f"slots: {merged.n} (merged from {len(merged.tasks)} tasks; {int(merged.node.max()) + 1} Hasse nodes)",
        "slot  input" + " " * max(0, width - 5) + "  stream   position  label",
    ]
    for p, (tok, stream, lab) in enumerate(zip(merged.inputs, merged.streams, merged.labels)):
        lines.append(f"{p:>4}  {tok!s:<{max(width, 5)}}  {stream:<7}  {tok.position:>8}  {'-' if lab is None else lab}")
    mask = np.asarray(merged.mask)
    if merged.n <= _DERIVE_MAX_PRINTED_SLOTS:
        lines.append("mask (row = query slot, column = key slot, 1 = may attend):")
        for p in range(merged.n):
            lines.append(f"  {names[p]:>{width}} " + " ".join("1" if x else "." for x in mask[p]))
    else:
        lines.append(
            f"mask: {merged.n} x {merged.n} (not printed above {_DERIVE_MAX_PRINTED_SLOTS} slots; see --json / --png)"
        )
    from ..order import convergence_depth

    lines.append(
        f"dense: {int(mask.sum())} nonzeros, L* = {int(convergence_depth(mask))}; sparsest variant: {sparse.nonzeros} nonzeros, L* = {sparse.depth}"
    )
    lines.append("audit: " + report.summary())
    _report(args, "\n".join(lines))
    if args.json:
        payload = {
            "family": args.family,
            "n": args.n,
            "options": options,
            "slots": [
                {
                    "input": [str(t.symbol), t.position],
                    "stream": s,
                    "label": None if y is None else [str(y.symbol), y.position],
                }
                for t, s, y in zip(merged.inputs, merged.streams, merged.labels)
            ],
            "mask": mask.astype(int).tolist(),
            "sparse_mask": sparse.mask.astype(int).tolist(),
            "sparse_depth": sparse.depth,
            "audit": {
                "leaks": list(report.leaks),
                "mismatches": list(report.mismatches),
                "token_density": report.token_density,
                "slot_density": report.slot_density,
            },
        }
        _write_text(args.json, json.dumps(payload) + "\n")
    if args.png:
        from matplotlib.figure import Figure

        from ..order import HasseDiagram
        from ..plot import draw_hasse, draw_mask

        fig = Figure(figsize=(14, 7), layout="constrained")
        ax_mask, ax_hasse = fig.subplots(1, 2)
        draw_mask(mask, ax=ax_mask, labels=names, title=f"{args.family} merged mask ({merged.n} slots)")
        draw_hasse(HasseDiagram.from_mask(mask), ax=ax_hasse, names=names, title="Hasse diagram")
        try:
            fig.savefig(args.png, dpi=120)
        except OSError as err:
            raise _OutputError(f"cannot write {args.png!r}: {_one_line(str(err))}") from None
    return 0
