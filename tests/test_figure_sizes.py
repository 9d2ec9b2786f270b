"""Print size of a written figure, read from its PDF (issue 14): at most 7 in wide, no text under 8 pt.

The reader here does not use matplotlib: it parses the PDF a figure was saved to (the page's
``/MediaBox`` and its content stream, decompressed with zlib) and follows the PDF text
operators (PDF 32000-1:2008 §9): ``Tf`` sets the font size, ``Tm``/``cm`` set the text and
user matrices, and ``Tj``/``TJ``/``'``/``"`` show text at size × the scale of
``Tm · CTM``. The quick run of ``reproduce.py`` (tests/test_reproduce.py) checks every PDF it
writes with :func:`figure_problems`; the tests below check the reader on figures drawn here,
with known sizes, so that the check can fail.

**Scripts.** matplotlib's mathtext draws sub- and superscripts at 0.7 × the size of the text
they belong to, in the same text object (``BT`` … ``ET``). A text object's *base size* is its
largest shown size; the base size must be at least 8 pt and every script at least
0.7 × 8 = 5.6 pt (one script level of 8-pt text, as TeX's ``\\scriptstyle`` of 8-pt text).
The radical signs and big delimiters of mathtext are glyphs of a *sized-symbol* font (STIX
``STIXSize*``, DejaVu ``*Display``) scaled to what they enclose, not text: they are not counted.
Run as a script, ``python tests/test_figure_sizes.py DIR`` lists the problems of every PDF under DIR.
"""

from __future__ import annotations

import math
import re
import sys
import zlib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

MAX_WIDTH_PT = 7.0 * 72.0
MIN_FONT_PT = 8.0
SCRIPT_SHRINK = 0.7
"""mathtext's sub/superscript factor (matplotlib ``_mathtext.SHRINK_FACTOR``)."""
_TOL = 1e-3

_OBJ = re.compile(rb"(\d+)\s+(\d+)\s+obj\b(.*?)\bendobj", re.S)
_TOKEN = re.compile(
    rb"\((?:\\.|[^\\()]|\((?:\\.|[^\\()])*\))*\)"  # literal string (one level of nested parentheses)
    rb"|<[0-9A-Fa-f\s]*>"  # hex string
    rb"|<<|>>|\[|\]"
    rb"|/[^\s/\[\]()<>{}%]*"  # name
    rb"|[+-]?(?:\d+\.?\d*|\.\d+)"  # number
    rb"|[A-Za-z'\"*]+"  # operator
    rb"|%[^\r\n]*"  # comment
)


def _objects(data: bytes) -> dict[int, bytes]:
    return {int(m.group(1)): m.group(3) for m in _OBJ.finditer(data)}


def _stream(body: bytes) -> bytes:
    m = re.search(rb"stream\r?\n(.*)endstream", body, re.S)
    if m is None:
        raise ValueError("object has no stream")
    raw = m.group(1)
    head = body[: m.start()]
    if b"/FlateDecode" in head:
        return zlib.decompressobj().decompress(raw)
    if b"/Filter" in head:
        raise ValueError(f"unsupported stream filter in {head[:120]!r}")
    return raw


def _mul(a, b):
    """Product of two PDF matrices ``[a b c d e f]`` (row vectors: ``a`` then ``b``)."""
    return [
        a[0] * b[0] + a[1] * b[2],
        a[0] * b[1] + a[1] * b[3],
        a[2] * b[0] + a[3] * b[2],
        a[2] * b[1] + a[3] * b[3],
        a[4] * b[0] + a[5] * b[2] + b[4],
        a[4] * b[1] + a[5] * b[3] + b[5],
    ]


def _scale(m) -> float:
    """Linear scale of a matrix: the square root of its determinant's magnitude."""
    return math.sqrt(abs(m[0] * m[3] - m[1] * m[2]))


def text_objects(content: bytes, skip_fonts: frozenset[bytes] = frozenset()) -> list[list[float]]:
    """Per text object (``BT`` … ``ET``) of a content stream, the effective size of every text shown, in points.

    Effective size = the ``Tf`` size × the scale of the text matrix times the current transformation.
    Text in a font named in `skip_fonts` (resource names such as ``b"/F4"``) is not counted.
    """
    ctm, stack = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0], []
    tm, size, font, sizes, out, ops = None, None, None, [], [], []
    for tok in _TOKEN.findall(content):
        c = tok[:1]
        if c in b"(<[]/%" or c.isdigit() or c in b"+-.":
            if tok not in (b"[", b"]") and c != b"%":
                ops.append(tok)
            continue
        args, ops = ops, []
        if tok == b"q":
            stack.append(ctm)
        elif tok == b"Q":
            ctm = stack.pop() if stack else ctm
        elif tok == b"cm":
            ctm = _mul([float(x) for x in args[-6:]], ctm)
        elif tok == b"BT":
            tm, sizes = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0], []
        elif tok == b"ET":
            if sizes:
                out.append(sizes)
            tm = None
        elif tok == b"Tf":
            font, size = args[-2], float(args[-1])
        elif tok == b"Tm":
            tm = [float(x) for x in args[-6:]]
        elif tok in (b"Td", b"TD"):
            tx, ty = float(args[-2]), float(args[-1])
            tm = [tm[0], tm[1], tm[2], tm[3], tx * tm[0] + ty * tm[2] + tm[4], tx * tm[1] + ty * tm[3] + tm[5]]
        elif tok in (b"Tj", b"TJ", b"'", b'"'):
            if size is None or tm is None:
                raise ValueError("text shown outside a text object or before Tf")
            if font not in skip_fonts:
                sizes.append(size * _scale(_mul(tm, ctm)))
    return out


def read_pdf(path: Path | str) -> dict:
    """Page width and height (points) and per text object the shown sizes (points) of a one-page PDF.

    Reads the first ``/Type /Page`` object's ``/MediaBox`` and its ``/Contents`` stream(s).
    """
    data = Path(path).read_bytes()
    objs = _objects(data)
    pages = [b for b in objs.values() if re.search(rb"/Type\s*/Page\b", b)]
    if len(pages) != 1:
        raise ValueError(f"{path}: expected one page, found {len(pages)}")
    page = pages[0]
    box = re.search(rb"/MediaBox\s*\[([^\]]*)\]", page)
    if box is None:  # inherited from the /Pages node
        box = re.search(rb"/MediaBox\s*\[([^\]]*)\]", data)
    x0, y0, x1, y1 = (float(v) for v in box.group(1).split())
    m = re.search(rb"/Contents\s*(\[[^\]]*\]|\d+\s+\d+\s+R)", page)
    refs = [int(r) for r in re.findall(rb"(\d+)\s+\d+\s+R", m.group(1))]
    content = b"\n".join(_stream(objs[r]) for r in refs)
    return {"width": x1 - x0, "height": y1 - y0, "text": text_objects(content, _sized_symbol_fonts(objs, page))}


def _dict_of(objs: dict[int, bytes], body: bytes, key: bytes) -> bytes:
    """The dictionary under `key` in `body`, inline or through an indirect reference."""
    m = re.search(rb"/" + key + rb"\s*(\d+)\s+\d+\s+R", body)
    if m:
        return objs[int(m.group(1))]
    m = re.search(rb"/" + key + rb"\s*<<(.*?)>>", body, re.S)
    return m.group(1) if m else b""


def _sized_symbol_fonts(objs: dict[int, bytes], page: bytes) -> frozenset[bytes]:
    """Resource names of the page's sized-symbol fonts (radicals and big delimiters of mathtext)."""
    fonts = _dict_of(objs, _dict_of(objs, page, b"Resources"), b"Font")
    names = set()
    for name, ref in re.findall(rb"(/[^\s/<>\[\]]+)\s+(\d+)\s+\d+\s+R", fonts):
        base = re.search(rb"/BaseFont\s*/(\S+)", objs.get(int(ref), b""))
        if base and re.search(rb"STIXSize|Display", base.group(1)):
            names.add(name)
    return frozenset(names)


def check_pdf(path: Path | str) -> dict:
    """The print-size facts of one figure PDF and whether they pass.

    Returns ``width_in``, ``height_in``, ``min_base_pt`` (smallest base size of a text object),
    ``min_script_pt`` (smallest size overall), both scaled by ``min(1, 7 in / width)`` (the size
    after shrinking a too-wide figure to 7 in), and ``ok``.
    """
    r = read_pdf(path)
    shrink = min(1.0, MAX_WIDTH_PT / r["width"])
    bases = [max(s) for s in r["text"]]
    smallest = [min(s) for s in r["text"]]
    min_base = shrink * min(bases) if bases else math.inf
    min_any = shrink * min(smallest) if smallest else math.inf
    ok = (
        r["width"] <= MAX_WIDTH_PT + _TOL
        and min_base >= MIN_FONT_PT - _TOL
        and min_any >= SCRIPT_SHRINK * MIN_FONT_PT - _TOL
    )
    return {
        "width_in": r["width"] / 72.0,
        "height_in": r["height"] / 72.0,
        "min_base_pt": min_base,
        "min_script_pt": min_any,
        "ok": ok,
    }


def figure_problems(folder: Path | str) -> list[str]:
    """One line per PDF under `folder` that is wider than 7 in or has text under 8 pt (scripts under 5.6 pt)."""
    lines = []
    for pdf in sorted(Path(folder).rglob("*.pdf")):
        c = check_pdf(pdf)
        if not c["ok"]:
            lines.append(
                f"{pdf.relative_to(folder)}: {c['width_in']:.2f} × {c['height_in']:.2f} in, smallest text "
                f"{c['min_base_pt']:.2f} pt, smallest script {c['min_script_pt']:.2f} pt (scaled to ≤ 7 in wide)"
            )
    return lines


# ----------------------------------------------------------------------------- tests of the reader
@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _save(fig, path: Path) -> Path:
    fig.savefig(path, bbox_inches="tight")
    return path


def test_reader_finds_a_small_title_and_rotated_label(tmp_path):
    fig, ax = plt.subplots(figsize=(4.0, 3.0))
    ax.plot([0, 1], [0, 1])
    ax.tick_params(labelsize=9)
    ax.set_ylabel("rotated label", fontsize=10)
    ax.set_title("too small", fontsize=6.5)
    r = read_pdf(_save(fig, tmp_path / "a.pdf"))
    sizes = sorted({round(max(s), 3) for s in r["text"]})
    assert sizes == [6.5, 9.0, 10.0]  # title, ticks, the rotated label (rotation keeps the scale)
    assert r["width"] < 4.0 * 72 and r["height"] < 3.0 * 72  # tight: the saved page is cropped
    c = check_pdf(tmp_path / "a.pdf")
    assert not c["ok"] and c["min_base_pt"] == pytest.approx(6.5)
    assert figure_problems(tmp_path) and "a.pdf" in figure_problems(tmp_path)[0]


def test_reader_counts_mathtext_scripts_apart_from_the_base_size(tmp_path):
    fig = plt.figure(figsize=(3.0, 1.0))
    fig.text(0.1, 0.5, r"$\lambda_{\max}$ and $R^{(L)}$", fontsize=8.0)
    r = read_pdf(_save(fig, tmp_path / "m.pdf"))
    (sizes,) = r["text"]
    assert max(sizes) == pytest.approx(8.0) and min(sizes) == pytest.approx(0.7 * 8.0)
    assert check_pdf(tmp_path / "m.pdf")["ok"]
    fig = plt.figure(figsize=(3.0, 1.0))
    fig.text(0.1, 0.5, r"$A/\sqrt{d}$", fontsize=8.0)  # the radical sign (drawn at 4.7 pt) is a sized glyph, not text
    assert read_pdf(_save(fig, tmp_path / "r.pdf"))["text"] == [[8.0, 8.0, 8.0]]  # A, /, d
    assert check_pdf(tmp_path / "r.pdf")["ok"]
    fig = plt.figure(figsize=(3.0, 1.0))
    fig.text(0.1, 0.5, r"$x_{i_j}$", fontsize=8.0)  # a second script level: 3.9 pt
    assert not check_pdf(_save(fig, tmp_path / "m2.pdf"))["ok"]


def test_a_too_wide_figure_fails_and_its_fonts_are_scaled_to_7_inches(tmp_path):
    fig, ax = plt.subplots(figsize=(14.0, 3.0))
    ax.plot([0, 1], [0, 1])
    ax.tick_params(labelsize=12)
    ax.set_title("title", fontsize=12)
    c = check_pdf(_save(fig, tmp_path / "wide.pdf"))
    assert c["width_in"] > 10.0 and not c["ok"]  # cropped by bbox_inches="tight", still > 7 in
    assert c["min_base_pt"] == pytest.approx(12.0 * 7.0 / c["width_in"], rel=1e-6)  # about 6 pt at 7 in


def test_a_print_size_figure_passes(tmp_path):
    fig, ax = plt.subplots(figsize=(6.5, 3.0))
    ax.plot([0, 1], [0, 1])
    ax.tick_params(labelsize=8)
    ax.set_xlabel("x", fontsize=8.5)
    ax.set_title("title", fontsize=9)
    c = check_pdf(_save(fig, tmp_path / "ok.pdf"))
    assert c["ok"] and c["width_in"] <= 7.0 and c["min_base_pt"] == pytest.approx(8.0)
    assert figure_problems(tmp_path) == []


def test_the_text_matrix_scale_counts(tmp_path):
    """A hand-written content stream: 10 pt text under a 0.5 scale is 5 pt; a rotation keeps the size."""
    stream = b"q 0.5 0 0 0.5 0 0 cm BT /F1 10 Tf 1 0 0 1 5 5 Tm (a) Tj ET Q BT /F1 9 Tf 0 1 -1 0 0 0 Tm (b) Tj ET"
    assert text_objects(stream) == [[5.0], [9.0]]
    assert text_objects(b"BT /F1 10 Tf 2 0 0 2 0 0 Tm [(x) -3 (y)] TJ ET") == [[20.0]]


if __name__ == "__main__":
    problems = figure_problems(sys.argv[1] if len(sys.argv) > 1 else "paper_figures")
    print("\n".join(problems) or "every figure fits")
    sys.exit(1 if problems else 0)


def test_the_committed_figures_fit():
    """Every PDF in paper_figures/ as committed: at most 7 in wide, no text under 8 pt (the quick job's test reads
    its own smaller run; a title widened in a full-size figure was committed at 7.52 in before this test)."""
    folder = Path(__file__).resolve().parents[1] / "paper_figures"
    assert sorted(folder.glob("*/*.pdf")), "no committed figures found"
    problems = figure_problems(folder)
    assert not problems, "committed figures wider than 7 in or with text under 8 pt:\n" + "\n".join(problems)
