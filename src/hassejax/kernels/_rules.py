"""A mask as one elementwise rule ``M[q, k] = rule(h, q, k)``: the form kernels take (private).

A :class:`MaskRule` is a Python expression over ``q_idx``, ``kv_idx`` (and ``h`` for
per-head masks) plus named 1-D lookup tables (document ids, run starts, ...). The
expression uses only operators (``<=``, ``==``, ``//``, ``%``, ``&``, ``|``, ``abs``,
indexing a table), so the same text runs with ``jax.numpy``, NumPy and PyTorch arrays:
:func:`~hassejax.kernels.to_mask_mod` compiles it with ``jnp`` tables and
:func:`~hassejax.kernels.mask_mod_source` prints it, so the callable and the printed source
are one rule by construction. Each rule also keeps a *splash recipe*: the structured splash
mask it is (causal, local window, chunked causal, full, their ``&``/``|``) or ``None``.

Rules come from mask specs (every registered mask, written in closed form where the
gallery gives one), from the closed forms of the derived masks (Block Two-Stream,
Butterfly), or from any mask's key runs (``OR_t STARTS_t[q] <= k < STOPS_t[q]``: exact for
every mask, tables of ``n`` entries per run). This module is pure NumPy (no JAX).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import numpy as np

from ..errors import MaskError
from ..masks._intervals import IntervalMask

__all__ = ["FAMILY_BUILDERS", "RULE_BUILDERS", "MaskRule", "per_head_rule", "rule_from_runs"]


@dataclasses.dataclass(frozen=True, eq=False)
class MaskRule:
    """One elementwise mask rule over `n` positions (row = query, column = key, True = may attend).

    - `n`: number of positions (square mask).
    - `expr`: a Python expression in ``q_idx``, ``kv_idx``, ``h`` and the table names.
    - `tables`: ``(NAME, array)`` pairs, each a 1-D int32 or bool NumPy array.
    - `label`: where the rule came from (a spec, "key runs", ...).
    - `splash`: the structured splash recipe, or ``None`` (then a dense ``NumpyMask``).
    - `heads`: number of heads the rule distinguishes (``None``: the same for every head).
    - `intervals`: the same mask as an :class:`~hassejax.masks.IntervalMask` when it was
      built on the way (specs), else ``None``.
    - `parts`: for a per-head rule, each head's own rule (else empty).
    """

    n: int
    expr: str
    tables: tuple[tuple[str, np.ndarray], ...] = ()
    label: str = ""
    splash: tuple | None = None
    heads: int | None = None
    intervals: IntervalMask | None = None
    parts: tuple[MaskRule, ...] = ()

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.n)

    def _combine(self, other: MaskRule, op: str) -> MaskRule:
        if not isinstance(other, MaskRule):
            return NotImplemented
        if other.n != self.n:
            raise MaskError(f"rules to combine with {op} must have the same n; got {self.n} and {other.n}.")
        tables = list(self.tables)
        names = dict(tables)
        # every rename chosen first, avoiding both sides' names, then applied in one pass: renaming one at a time
        # let a table take a name `other` still used (a new user: `document(...) & (document(...) | document(...))`
        # exported two different tables under one name, a wrong mask in mask_mod and the lazy splash mask)
        taken = set(names) | {name for name, _ in other.tables}
        renames = {}
        for name, arr in other.tables:
            if name in names and np.array_equal(names[name], arr) and names[name].dtype == arr.dtype:
                continue  # the same table: share it
            new = name
            if name in names:
                i = 2
                while f"{name}_{i}" in taken:
                    i += 1
                new = renames[name] = f"{name}_{i}"
                taken.add(new)
            names[new] = arr
            tables.append((new, arr))
        expr = other.expr
        if renames:
            pattern = r"\b(" + "|".join(map(re.escape, sorted(renames, key=len, reverse=True))) + r")\b"
            expr = re.sub(pattern, lambda m: renames[m.group(1)], expr)
        splash = None
        if self.splash is not None and other.splash is not None:
            splash = ("and" if op == "&" else "or", self.splash, other.splash)
        heads = self.heads if self.heads is not None else other.heads
        intervals = None
        if self.intervals is not None and other.intervals is not None:
            intervals = self.intervals & other.intervals if op == "&" else self.intervals | other.intervals
        label = f"{self.label} {op} {other.label}"
        return MaskRule(self.n, f"({self.expr}) {op} ({expr})", tuple(tables), label, splash, heads, intervals)

    def __or__(self, other: MaskRule) -> MaskRule:
        return self._combine(other, "|")

    def __and__(self, other: MaskRule) -> MaskRule:
        return self._combine(other, "&")

    def evaluate(self, q: np.ndarray, k: np.ndarray, h: int = 0) -> np.ndarray:
        """The rule on NumPy index arrays `q`, `k` (broadcast), head `h`: a Boolean NumPy array."""
        namespace = dict(self.tables)
        namespace.update(q_idx=np.asarray(q, np.int64), kv_idx=np.asarray(k, np.int64), h=h, abs=abs)
        out = eval(self.expr, {"__builtins__": {}}, namespace)
        return np.broadcast_to(np.asarray(out, dtype=bool), np.broadcast_shapes(np.shape(q), np.shape(k)))


# ----------------------------------------------------------------------------- from runs


def rule_from_runs(mask: IntervalMask, label: str = "key runs") -> MaskRule:
    """The exact rule of any interval mask: ``OR_t (STARTS_t[q] <= k < STOPS_t[q])``.

    A row with fewer runs than the widest pads with the empty run ``[n, n)``. Tables hold
    ``n`` int32 entries per run slot. A mask whose every row is one run ``[0, STOPS[q])``
    drops the starts.
    """
    recipe = _recognise_splash(mask)
    if recipe is not None:  # a causal / window / chunked / full mask: its closed form, no tables
        return MaskRule(mask.n, _recipe_expr(recipe), (), label, recipe, intervals=mask)
    starts, stops = mask.starts, mask.stops
    terms, tables = [], []
    for t in range(starts.shape[1]):
        s, e = np.ascontiguousarray(starts[:, t]), np.ascontiguousarray(stops[:, t])
        suffix = "" if starts.shape[1] == 1 else f"_{t}"
        if not s.any():
            terms.append(f"(kv_idx < STOPS{suffix}[q_idx])")
            tables.append((f"STOPS{suffix}", e.astype(np.int32)))
        else:
            terms.append(f"(STARTS{suffix}[q_idx] <= kv_idx) & (kv_idx < STOPS{suffix}[q_idx])")
            tables += [(f"STARTS{suffix}", s.astype(np.int32)), (f"STOPS{suffix}", e.astype(np.int32))]
    expr = " | ".join(f"({term})" for term in terms) if len(terms) > 1 else terms[0]
    return MaskRule(mask.n, expr, tuple(tables), label, None, intervals=mask)


def _recipe_expr(recipe: tuple) -> str:
    """The closed-form expression of a recognised splash recipe (causal, local, chunked, full)."""
    kind = recipe[0]
    if kind == "full":
        return "kv_idx >= 0"
    if kind == "causal":
        return _CAUSAL
    if kind == "chunked":
        return f"(q_idx // {recipe[1]} == kv_idx // {recipe[1]}) & ({_CAUSAL})"
    left, right = recipe[1], recipe[2]
    sides = ([] if left is None else [f"q_idx - kv_idx <= {left}"]) + (
        [] if right is None else [f"kv_idx - q_idx <= {right}"]
    )
    return " & ".join(f"({side})" for side in sides) if len(sides) > 1 else sides[0]


def _recognise_splash(mask: IntervalMask) -> tuple | None:
    """The structured splash recipe of a one-run-a-row mask, if it is one (else ``None``)."""
    if mask.num_runs != 1:
        return None
    n = mask.n
    s, e = mask.starts[:, 0].astype(np.int64), mask.stops[:, 0].astype(np.int64)
    q = np.arange(n, dtype=np.int64)
    if (s == 0).all() and (e == n).all():
        return ("full",)
    # A local window q - left <= k <= q + right (either side unbounded), clipped to [0, n).
    cut = s > 0
    left = None
    if cut.any():
        lefts = q[cut] - s[cut]  # one value or none: min == max in O(n) (np.unique sorted 10**7 values in 11 s)
        if lefts.min() != lefts.max() or not (q[~cut] - lefts[0] <= 0).all():
            left = -1
        else:
            left = int(lefts[0])
    open_ = e < n
    right = None
    if open_.any():
        rights = e[open_] - 1 - q[open_]
        if rights.min() != rights.max() or not (q[~open_] + rights[0] >= n - 1).all():
            right = -1
        else:
            right = int(rights[0])
    if left != -1 and right != -1 and (left is None or left >= 0) and (right is None or right >= 0):
        if left is None and right == 0:
            return ("causal",)
        return ("local", left, right)
    # Chunked causal: [(q // c) c, q + 1).
    if (e == q + 1).all() and n > 1:
        restart = np.flatnonzero(s == q)
        if restart.size > 1:
            c = int(restart[1])
            if (s == (q // c) * c).all():
                return ("chunked", c)
    return None


# -------------------------------------------------------------------- gallery closed forms

_CAUSAL = "kv_idx <= q_idx"


def _ids_of_segments(mask: IntervalMask) -> np.ndarray:
    """Document id per position, from a document mask whose rows start at their document's start."""
    s = mask.starts[:, 0].astype(np.int64)
    first = np.r_[True, s[1:] != s[:-1]]
    return (np.cumsum(first) - 1).astype(np.int32)


_DOCUMENT_BOUNDARIES = 16
"""Document boundaries written as range tests (``(q_idx >= b) == (kv_idx >= b)``); more go to a table of `n` ids."""


def _document_rule(im, segments, inner=None, kind="lengths") -> MaskRule:
    if callable(inner) and not isinstance(inner, str):
        return rule_from_runs(im)
    if _recognise_splash(im) is not None:  # equal causal documents are chunked causal: its closed form, no DOC table
        return rule_from_runs(im)  # (a fresh user: 20,000 documents of 7 wrote a 900 KB table)
    ids = _ids_of_segments(im)  # causal and full rows both start at their document's start
    if (
        inner == "full" and im.num_runs == 1
    ):  # contiguous documents of one length c (the last at most c): q // c == k // c
        lengths = np.diff(np.flatnonzero(np.r_[True, ids[1:] != ids[:-1], True]))
        c = int(lengths[0])
        if (lengths[:-1] == c).all() and lengths[-1] <= c:
            return MaskRule(im.n, f"q_idx // {c} == kv_idx // {c}", ())
    boundaries = np.flatnonzero(ids[1:] != ids[:-1]) + 1  # contiguous documents (`document` requires them)
    if len(boundaries) <= _DOCUMENT_BOUNDARIES:  # a few documents: range tests, no table of n ids (a fresh user: two
        # documents at n = 2^20 wrote a 3.1 MB table in 16 s); the same document: on one side of every boundary
        tests = [f"(q_idx >= {b}) == (kv_idx >= {b})" for b in boundaries.tolist()] or ["kv_idx >= 0"]
        same = tests[0] if len(tests) == 1 else " & ".join(f"({t})" for t in tests)
        tables = ()
    else:
        same, tables = "DOC[q_idx] == DOC[kv_idx]", (("DOC", ids),)
    expr = f"({same}) & ({_CAUSAL})" if inner in (None, "causal") else same
    return MaskRule(im.n, expr, tables)


def _block_diffusion_rule(n: int, block_size: int) -> MaskRule:
    return MaskRule(
        2 * n,
        f"(((q_idx % {n}) // {block_size} == (kv_idx % {n}) // {block_size}) & ((q_idx < {n}) == (kv_idx < {n})))"
        f" | (((q_idx % {n}) // {block_size} > (kv_idx % {n}) // {block_size}) & (q_idx < {n}) & (kv_idx >= {n}))"
        f" | (((q_idx % {n}) // {block_size} >= (kv_idx % {n}) // {block_size}) & (q_idx >= {n}) & (kv_idx >= {n}))",
    )


def _cap(value: int, n: int) -> int:
    """A size argument as the rule writes it: at most `n`, which means the same on `n` positions (a window, chunk,
    block, prefix or sink count beyond the sequence is cut at its ends). Uncapped, a window of ``2**31`` keys ("no
    limit") reached the kernels as a literal they hold in int32 (a fresh user: splash's raw OverflowError)."""
    return min(int(value), int(n))


def _natten_rule(im, height: int, width: int, kernel_h: int, kernel_w: int) -> MaskRule:
    """2-D neighbourhood attention: query ``q = r·W + c`` sees the cells within ``kernel_h // 2`` grid rows and
    ``kernel_w // 2`` grid columns of its clamped centre (:func:`hassejax.masks.structured.natten_2d`); the centres
    are tables of `height` and `width` entries, not of `n` (a fresh user: ``natten_2d(1024, 1024, 3, 5)`` was
    refused, its key runs 6,291,456 table entries)."""
    rh, rw = kernel_h // 2, kernel_w // 2
    rows = np.clip(np.arange(height), rh, height - 1 - rh).astype(np.int32)
    cols = np.clip(np.arange(width), rw, width - 1 - rw).astype(np.int32)
    expr = (
        f"(abs(kv_idx // {width} - NATTEN_ROW[q_idx // {width}]) <= {rh})"
        f" & (abs(kv_idx % {width} - NATTEN_COL[q_idx % {width}]) <= {rw})"
    )
    return MaskRule(height * width, expr, (("NATTEN_ROW", rows), ("NATTEN_COL", cols)))


_GLOBAL_RUNS = 16
"""Runs of consecutive global positions written as range tests; more go to a Boolean table of `n` entries."""


def _global_sliding_rule(im, n: int, window: int, global_positions) -> MaskRule:
    """Longformer: ``|q - k| <= window`` or `q` or `k` global (:func:`hassejax.masks.structured.global_sliding`), the
    global positions as range tests while they form at most :data:`_GLOBAL_RUNS` runs (a fresh user: three global
    positions at n = 32,768 wrote 1.19 MB of key-run tables), else one table of `n` booleans."""
    g = np.asarray(global_positions)
    is_global = np.zeros(n, bool)
    if g.size:
        is_global[g if g.dtype != np.bool_ else np.flatnonzero(g)] = True
    window = f"(abs(q_idx - kv_idx) <= {_cap(window, n)})"
    edges = np.flatnonzero(np.diff(np.concatenate([[False], is_global, [False]]).astype(np.int8)))
    runs = list(zip(edges[::2].tolist(), edges[1::2].tolist()))
    if not runs:
        return MaskRule(n, window)
    if len(runs) > _GLOBAL_RUNS:
        return MaskRule(n, f"{window} | GLOBAL[q_idx] | GLOBAL[kv_idx]", (("GLOBAL", is_global),))

    def member(x: str) -> str:
        return " | ".join(f"({x} == {a})" if b == a + 1 else f"(({x} >= {a}) & ({x} < {b}))" for a, b in runs)

    return MaskRule(n, f"{window} | {member('q_idx')} | {member('kv_idx')}")


RULE_BUILDERS: dict[str, Callable[..., MaskRule]] = {
    "causal": lambda im, n: MaskRule(n, _CAUSAL, splash=("causal",)),
    "full": lambda im, n: MaskRule(n, "kv_idx >= 0", splash=("full",)),
    "prefix_lm": lambda im, n, prefix: MaskRule(n, f"({_CAUSAL}) | (kv_idx < {_cap(prefix, n)})"),
    "sliding_window": lambda im, n, left, right=0: MaskRule(
        n,
        f"(q_idx - kv_idx <= {_cap(left, n)}) & (kv_idx - q_idx <= {_cap(right, n)})",
        splash=("local", _cap(left, n), _cap(right, n)),
    ),
    "attention_sinks": lambda im, n, num: MaskRule(n, f"(kv_idx < {_cap(num, n)}) & ({_CAUSAL})"),
    "block_causal": lambda im, n, block_size: MaskRule(
        n, f"kv_idx // {_cap(block_size, n)} <= q_idx // {_cap(block_size, n)}"
    ),
    "chunked_causal": lambda im, n, chunk: MaskRule(
        n,
        f"(q_idx // {_cap(chunk, n)} == kv_idx // {_cap(chunk, n)}) & ({_CAUSAL})",
        splash=("chunked", _cap(chunk, n)),
    ),
    "document": _document_rule,
    "dilated": lambda im, n, window, dilation: MaskRule(
        n, f"(abs(q_idx - kv_idx) <= {_cap(window, n)}) & ((q_idx - kv_idx) % {_cap(dilation, n)} == 0)"
    ),
    "block_diffusion": lambda im, n, block_size: _block_diffusion_rule(n, _cap(block_size, n)),
    "natten_2d": _natten_rule,
    "global_sliding": _global_sliding_rule,
}
"""Closed-form rule of each registered mask, from its structured mask `im` and its arguments.

Masks without an entry (``tree_prefix``) and ``document`` with a callable `inner` use :func:`rule_from_runs`.
"""


def _xlnet_rule(im, permutation, context=0, *, stream) -> MaskRule:
    z = np.asarray(permutation, dtype=np.int64)
    pos = np.empty(z.size, np.int32)
    pos[z] = np.arange(z.size, dtype=np.int32)
    cmp = "<=" if stream == "content" else "<"
    c = int(context)
    expr = f"((POS[q_idx] < {c}) & (POS[kv_idx] < {c})) | ((POS[q_idx] >= {c}) & (POS[kv_idx] {cmp} POS[q_idx]))"
    return MaskRule(im.n, expr, (("POS", pos),))


RULE_BUILDERS["xlnet_two_stream"] = _xlnet_rule


# ------------------------------------------------------------------ derived-mask closed forms


def _block_two_stream_rule(n, block_size, group="full", content="causal", keep_last_block=True) -> MaskRule:
    """Closed form of :func:`hassejax.tasks.block_two_stream_mask` (spec hasse.md §3.2)."""
    l = block_size
    c = n if keep_last_block else n - l
    size = c + n
    cc = _CAUSAL if content == "causal" else f"kv_idx // {l} <= q_idx // {l}"
    same_block = f"(q_idx - {c}) // {l} == (kv_idx - {c}) // {l}"
    group_rule = {
        "full": same_block,
        "causal": f"({same_block}) & ({_CAUSAL})",
        "diagonal": "kv_idx == q_idx",
    }[group]
    expr = (
        f"((q_idx < {c}) & (kv_idx < {c}) & ({cc}))"
        f" | ((q_idx >= {c}) & (kv_idx < {c}) & (kv_idx + 1 <= ((q_idx - {c}) // {l}) * {l}))"
        f" | ((q_idx >= {c}) & (kv_idx >= {c}) & ({group_rule}))"
    )
    return MaskRule(size, expr)


def _butterfly_rule(n, sparse=False) -> MaskRule:
    """Closed form of :func:`hassejax.tasks.butterfly_mask` (spec hasse.md §3.3).

    Slots ``[F_1..F_{n-1} | B_2..B_n | C_1..C_n]``: F at ``q < n - 1``, B at
    ``n - 1 <= q < 2n - 2``, C at ``q >= 2n - 2``.
    """
    f_end, b_end = n - 1, 2 * n - 2
    is_f = lambda v: f"({v} < {f_end})"
    is_b = lambda v: f"({v} >= {f_end}) & ({v} < {b_end})"
    if sparse:
        ff = "(kv_idx == q_idx) | (kv_idx == q_idx - 1)"
        bb = "(kv_idx == q_idx) | (kv_idx == q_idx + 1)"
        cf = f"kv_idx == q_idx - {b_end + 1}"
        cb = f"kv_idx == q_idx - {n - 1}"
    else:
        ff, bb = _CAUSAL, "kv_idx >= q_idx"
        cf = f"kv_idx <= q_idx - {b_end + 1}"
        cb = f"kv_idx >= q_idx - {n - 1}"
    expr = (
        f"({is_f('q_idx')} & {is_f('kv_idx')} & ({ff}))"
        f" | ({is_b('q_idx')} & {is_b('kv_idx')} & ({bb}))"
        f" | ((q_idx >= {b_end}) & (({is_f('kv_idx')} & ({cf})) | ({is_b('kv_idx')} & ({cb})) | (kv_idx == q_idx)))"
    )
    return MaskRule(3 * n - 2, expr)


FAMILY_BUILDERS: dict[str, Callable[..., MaskRule]] = {
    "block_two_stream_mask": _block_two_stream_rule,
    "butterfly_mask": _butterfly_rule,
}
"""Closed-form rules of the derived masks, by the name of their :mod:`hassejax.tasks` function."""


# ---------------------------------------------------------------------------- per head


def per_head_rule(rules: list[MaskRule]) -> MaskRule:
    """One rule for a layer whose head ``h`` has mask ``rules[h]``: ``OR_h (h == i) & rule_i``."""
    n = rules[0].n
    combined = None
    for i, r in enumerate(rules):
        if r.n != n:
            raise MaskError(f"`mask`: every head must have the same n; head 0 has n = {n}, head {i} has n = {r.n}.")
        head = MaskRule(n, f"h == {i}", (), f"head {i}")
        term = head & r
        combined = term if combined is None else combined | term
    splash = ("heads", tuple(r.splash for r in rules))
    label = f"{len(rules)} heads (h >= {len(rules)} attends nowhere)"
    return dataclasses.replace(
        combined, splash=splash, heads=len(rules), label=label, intervals=None, parts=tuple(rules)
    )
