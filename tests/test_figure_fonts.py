"""The fonts in the experiments' PDFs (experiments/_common.py, ``Output.savefig``): TrueType subsets
(``pdf.fonttype`` 42) written without OpenType layout tables, against matplotlib's own subsets of the same
figure: the same page content, the same fonts, and for every character shown the same glyph outline and
advance width."""

from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
from test_figure_sizes import _objects, _stream

ttLib = pytest.importorskip("fontTools.ttLib")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def common(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "experiments"))
    import _common

    yield _common
    plt.close("all")


def _figure():
    fig, ax = plt.subplots(figsize=(4.0, 2.5))
    ax.plot([0, 1, 2], [0, 1, 4], label=r"$\mathrm{tr}\,\Sigma(t)$")
    ax.set_title(r"blow-up time $t^* = 0.70$; office affine flow")  # 'ffi', 'ff': ligatures in DejaVu's GSUB
    ax.set_xlabel(r"depth $t$ (layers), $\lambda_{\max}(\Sigma)$")
    ax.legend()
    return fig


def _fonts(pdf: Path) -> dict[bytes, dict]:
    """Per embedded TrueType font (by /BaseFont): the parsed font program and its CID → glyph-index map."""
    objs = _objects(pdf.read_bytes())
    fonts = {}
    for body in objs.values():
        if b"/CIDFontType2" not in body:
            continue
        name = re.search(rb"/BaseFont\s*/(\S+)", body).group(1)
        desc = objs[int(re.search(rb"/FontDescriptor\s+(\d+)\s+\d+\s+R", body).group(1))]
        program = _stream(objs[int(re.search(rb"/FontFile2\s+(\d+)\s+\d+\s+R", desc).group(1))])
        gid_map = _stream(objs[int(re.search(rb"/CIDToGIDMap\s+(\d+)\s+\d+\s+R", body).group(1))])
        cid_to_gid = {cid: int.from_bytes(gid_map[2 * cid : 2 * cid + 2], "big") for cid in range(len(gid_map) // 2)}
        fonts[name] = {"font": ttLib.TTFont(io.BytesIO(program)), "cids": {c: g for c, g in cid_to_gid.items() if g}}
    return fonts


def _page_content(pdf: Path) -> bytes:
    objs = _objects(pdf.read_bytes())
    page = next(b for b in objs.values() if re.search(rb"/Type\s*/Page\b", b))
    refs = re.findall(rb"(\d+)\s+\d+\s+R", re.search(rb"/Contents\s*(\[[^\]]*\]|\d+\s+\d+\s+R)", page).group(1))
    return b"\n".join(_stream(objs[int(r)]) for r in refs)


def _glyph(font, gid: int):
    """The outline (coordinates, contour ends, flags; components for a composite) and advance width of a glyph."""
    name = font.getGlyphName(gid)
    g = font["glyf"][name]
    outline = (
        [(c.glyphName, c.x, c.y) for c in g.components]
        if g.isComposite()
        else (list(getattr(g, "coordinates", [])), list(getattr(g, "endPtsOfContours", [])))
    )
    return outline, font["hmtx"][name][0]


def test_pdf_fonts_without_layout_tables_draw_the_same_glyphs(common, tmp_path, monkeypatch):
    fast = common.Output(tmp_path, "fast")
    fast.savefig(_figure(), "f")
    monkeypatch.setattr(common, "_pdf_subsets_without_layout_tables", contextlib.nullcontext)
    plain = common.Output(tmp_path, "plain")
    plain.savefig(_figure(), "f")
    a, b = tmp_path / "fast" / "f.pdf", tmp_path / "plain" / "f.pdf"

    assert _page_content(a) == _page_content(b)  # the same text (character codes), paths and positions
    fa, fb = _fonts(a), _fonts(b)
    assert sorted(fa) == sorted(fb) and len(fa) >= 2  # DejaVu Sans and a mathtext font at least
    for name in fa:
        small, full = fa[name], fb[name]
        assert not {"GSUB", "GPOS", "GDEF"} & set(small["font"].keys()), name
        assert {"glyf", "loca", "head", "hhea", "hmtx", "maxp"} <= set(small["font"].keys()), name
        assert sorted(small["cids"]) == sorted(full["cids"]), name  # every character shown is in the subset
        for cid, gid in small["cids"].items():
            assert _glyph(small["font"], gid) == _glyph(full["font"], full["cids"][cid]), (name, cid)
    # matplotlib's own subset of DejaVu Sans keeps its layout tables: the comparison above is not vacuous
    assert any("GSUB" in f["font"] for f in fb.values())


def test_the_subsetter_is_restored(common):
    from fontTools import subset

    base = subset.Subsetter
    with common._pdf_subsets_without_layout_tables():
        assert subset.Subsetter is not base and issubclass(subset.Subsetter, base)
    assert subset.Subsetter is base
    with pytest.raises(RuntimeError), common._pdf_subsets_without_layout_tables():
        raise RuntimeError("a figure that fails to save")
    assert subset.Subsetter is base
    # overlapping uses (two threads), the first to end not the last to start (a review: the swap stayed on)
    a, b = common._pdf_subsets_without_layout_tables(), common._pdf_subsets_without_layout_tables()
    a.__enter__()
    b.__enter__()
    a.__exit__(None, None, None)
    assert subset.Subsetter is not base  # b still writing
    b.__exit__(None, None, None)
    assert subset.Subsetter is base


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
