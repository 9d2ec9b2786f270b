"""Shared plumbing of the experiment scripts: arguments, output folders, figures, JSON.

Every experiment script defines ``NAME`` and ``main(out: Path, quick: bool) -> dict`` and
ends with ``if __name__ == "__main__": cli(main, NAME, __doc__)``. ``main`` writes its
figures (PNG and PDF) and one JSON into ``out / NAME`` and returns a small summary dict
whose ``"key"`` entry is the number a reader should look at first.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import platform
import sys
import threading
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np

from hassejax.plot.style import paper_style

paper_style()  # every figure at print size: at most 7 in wide, no text under 8 pt


def _not_font_timestamp_note(record: logging.LogRecord) -> bool:
    """fontTools notes, for every PDF that embeds one of matplotlib's fonts, that the font's 'created'
    and 'modified' header dates are pre-1970 and reads them as Unix times: metadata of the bundled font,
    nothing to act on, and printed into the progress bar's line."""
    return "timestamp seems very low" not in record.getMessage()


logging.getLogger("fontTools.ttLib.tables._h_e_a_d").addFilter(_not_font_timestamp_note)

# The OpenType layout tables of a TrueType font (glyph substitution and positioning rules, and the legacy
# kerning table). A PDF does not use them: matplotlib lays the text out itself and writes each glyph's position
# into the page, and a viewer draws the glyphs it is told to with the outlines and metrics of glyf, loca, head,
# hhea, hmtx, maxp (and the hinting tables cvt, fpgm, prep), the tables PDF 32000-1:2008 §9.9 names for an
# embedded TrueType font program. Subsetting DejaVu Sans with them decodes its large GSUB and GPOS tables in
# Python for every font of every PDF: most of a 0.43–0.59 s PDF write of a small figure, 0.18–0.29 s without them
# (benchmarks/README.md, session 32).
_LAYOUT_TABLES = ("GSUB", "GPOS", "GDEF", "BASE", "JSTF", "MATH", "kern")


_SUBSET_PATCH = {"lock": threading.Lock(), "depth": 0, "base": None}
"""The swap of :func:`_pdf_subsets_without_layout_tables`: installed by the first of overlapping uses (threads),
restored by the last (a review: each use restoring the class it saw on entry left the swap on after two overlapping
uses)."""


@contextlib.contextmanager
def _pdf_subsets_without_layout_tables():
    """While active, matplotlib's PDF backend subsets the TrueType fonts it embeds (``pdf.fonttype`` 42)
    without their OpenType layout tables (:data:`_LAYOUT_TABLES`): the same glyph outlines and metrics and
    the page's content unchanged, the font subsets a few kB smaller (tests/test_figure_fonts.py checks this
    against matplotlib's own subsets).

    matplotlib subsets each font with a ``fontTools.subset.Subsetter``; this swaps in a subclass that removes
    the tables from the (lazily read) font before subsetting it, so they are never decoded (as
    ``Options.drop_tables`` would be too late: fontTools reads GSUB, GPOS and GDEF before it drops tables),
    and restores the class when the last overlapping use ends (:data:`_SUBSET_PATCH`). Where fontTools is
    missing or has no such class, nothing changes."""
    try:
        from fontTools import subset
    except ImportError:  # matplotlib embeds no subset fonts without it
        yield
        return
    patch = _SUBSET_PATCH
    with patch["lock"]:
        if patch["depth"] == 0:
            base = getattr(subset, "Subsetter", None)
            if not isinstance(base, type):
                base = None
            else:

                class _Subsetter(base):
                    def subset(self, font):
                        for tag in _LAYOUT_TABLES:
                            if tag in font:
                                del font[tag]
                        return super().subset(font)

                subset.Subsetter = _Subsetter
            patch["base"] = base
        patch["depth"] += 1
    try:
        yield
    finally:
        with patch["lock"]:
            patch["depth"] -= 1
            if patch["depth"] == 0 and patch["base"] is not None:
                subset.Subsetter = patch["base"]
                patch["base"] = None


ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "paper_figures"
PACKAGES = ("hassejax", "jax", "jaxlib", "equinox", "diffrax", "optax", "networkx", "numpy", "scipy", "matplotlib")


def versions() -> dict[str, str]:
    """Versions of Python and of the packages the figures depend on, and the XLA flags in force.

    ``reproduce.py`` compiles with XLA's legacy emitters (results change by rounding only),
    ``--quick`` and the test suite also at LLVM level 0 without FMA (step counts and blow-up
    times change within the solvers' tolerances): see hassejax._xla_flags and
    benchmarks/README.md ("No FMA at level 0").
    """
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    out["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "")
    return out


def sci_tex(text: str) -> str:
    """A number printed as ``'4.6e-05'`` (e.g. by ``fmt_upper``) as mathtext ``$4.6\\times10^{-5}$``, no padded
    exponent; other text unchanged."""
    mant, sep, exp = text.partition("e")
    return f"${mant}\\times10^{{{int(exp)}}}$" if sep else text


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return _jsonable(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        if not math.isfinite(f):
            raise ValueError(f"non-finite number {f} in an experiment's JSON: record it as a status, not a number")
        return f
    return value


def _replace_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """Write `path` by `write` into a hidden temporary file beside it, then rename it into place: a run
    stopped mid-write leaves the previous file (or none), never a half-written figure or JSON."""
    tmp = path.with_name(f".{path.name}.part")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


class Output:
    """The output folder of one experiment: ``out / name``; every file written atomically."""

    def __init__(self, out: Path | str, name: str):
        self.dir = Path(out) / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.files: list[Path] = []

    def savefig(self, fig, stem: str, dpi: int = 150) -> None:
        """Write `fig` as ``stem.png`` and ``stem.pdf``, each cropped to its tight bounding box, and close it.

        The layout (the figure's layout engine) and the tight box are computed once, at the PNG's
        dpi, and both files are drawn from them: ``savefig(..., bbox_inches="tight")`` per file
        would lay the figure out and measure its text twice per file (the quick main job spent
        80 of its 348 s in ``savefig``). The PDF's TrueType fonts are subset without their OpenType layout
        tables (:func:`_pdf_subsets_without_layout_tables`).
        """
        fig.set_dpi(dpi)
        renderer = fig.canvas.get_renderer()
        with renderer._draw_disabled():  # as Figure.draw_without_rendering, which runs the layout engine
            fig.draw(renderer)
        box = fig.get_tightbbox(renderer).padded(plt.rcParams["savefig.pad_inches"])
        # Laid out above: keep those positions for both files. No layout engine at all (not "none",
        # a placeholder engine that savefig would still draw once for), so each file is drawn once.
        fig.set_layout_engine(None)
        for ext in ("png", "pdf"):
            path = self.dir / f"{stem}.{ext}"
            with _pdf_subsets_without_layout_tables():
                _replace_atomically(path, lambda tmp, ext=ext: fig.savefig(tmp, format=ext, dpi=dpi, bbox_inches=box))
            self.files.append(path)
        plt.close(fig)

    def write_json(self, data: dict, seeds: dict | None = None, stem: str | None = None) -> Path:
        """Write ``data`` (numbers only finite) with seeds and versions as ``<name>.json``."""
        payload = {"experiment": self.name, "seeds": seeds or {}, "versions": versions(), **data}
        text = json.dumps(_jsonable(payload), indent=1, allow_nan=False) + "\n"
        return self.write_text(f"{stem or self.name}.json", text)

    def write_text(self, filename: str, text: str) -> Path:
        """Write `text` (UTF-8) as ``out / name / filename``."""
        path = self.dir / filename
        _replace_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
        self.files.append(path)
        return path


def cli(main: Callable[[Path, bool], dict], name: str, doc: str | None) -> None:
    """Command line of one experiment script: ``--out DIR`` and ``--quick``."""
    parser = argparse.ArgumentParser(prog=f"experiments/{name}.py", description=(doc or "").strip().splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: paper_figures/)")
    parser.add_argument("--quick", action="store_true", help="a fast smoke run with smaller sizes")
    args = parser.parse_args()
    t0 = time.perf_counter()
    summary = main(args.out, args.quick)
    print(f"{name}: {summary.get('key', '')} ({time.perf_counter() - t0:.1f} s) -> {args.out / name}")
    sys.exit(0)
