"""``hassejax tiles``: empty, partial and full tiles of a mask for a block-sparse kernel."""

from __future__ import annotations

import argparse
import json

from ..errors import HassejaxError
from ._common import _kernel_mask, _report, _write_text
from ._parser import _UsageError


def _cmd_tiles(args: argparse.Namespace) -> int:
    mask = _kernel_mask(args, square=False)  # tiles of a rectangular array too, as tile_stats counts them
    block = (args.block, args.block_kv or args.block)
    try:
        if isinstance(mask, str):  # a spec: its interval form, built on the way to its rule (no n x n array)
            from ..kernels import mask_rule

            mask = mask_rule(mask).intervals
        from ..kernels import tile_stats

        stats = tile_stats(mask, block_size=block)
    except HassejaxError as err:
        raise _UsageError(str(err)) from None
    _report(args, str(stats))
    if args.json:
        _write_text(args.json, json.dumps(stats.to_dict()) + "\n")
    return 0
