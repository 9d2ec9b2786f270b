"""Arguments the drawing functions refuse, and the print size of what they draw on their own (a fresh user's review).

Each case was a wrong figure, a silent NaN or a raw matplotlib/NumPy error before; now it is a
:class:`~hassejax.errors.ParameterError` (or :class:`~hassejax.errors.MaskError`) naming the argument, or a
``RuntimeWarning`` where the drawing is valid but unreadable in print.
"""

from __future__ import annotations

import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from hassejax.dynamics.diagnostics import Outcome
from hassejax.errors import ParameterError
from hassejax.masks import sliding_window
from hassejax.order import HasseDiagram
from hassejax.plot import draw_hasse, draw_hatched, draw_mask, draw_outcome_map, figsize, paper_style
from hassejax.plot.dynamics import colors_from, draw_cone, draw_disk, new_figure


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _axes_3d():
    return new_figure(1, 1, (3.0, 3.0), [["3d"]])[1][0, 0]


def _axes_2d():
    return plt.subplots()[1]


LABELS = {Outcome(0): "a", Outcome(2): "b"}


def test_outcome_map_refuses_codes_that_are_not_integers(no_typecheck):
    """2.7 was counted nowhere, drawn in code 3's colour (imshow rounds) and missing from the legend, whose entry
    "b: 1" came from int(2.7) = 2."""
    for codes, match in (
        (np.array([[0.0, 2.7], [2.2, 2.0]]), r"2 non-integer value\(s\), first 2.7 at \(0, 1\)"),
        (np.array([[0.0, np.nan]]), r"1 non-integer value\(s\), first nan"),
        (np.array([[True, False]]), "dtype bool"),
        (np.array([["a"]]), "dtype <U1"),
    ):
        with pytest.raises(ParameterError, match=rf"`codes` must be integer Outcome codes; got {match}"):
            draw_outcome_map(_axes_2d(), codes, (0, 1, 0, 1), LABELS)
    ax = _axes_2d()  # integer-valued floats are the codes they hold
    handles = draw_outcome_map(ax, np.array([[0.0, 2.0], [2.0, 2.0]]), (0, 1, 0, 1), LABELS)
    assert [h.get_label() for h in handles] == ["a: 1", "b: 3"]
    assert ax.images[0].get_array().tolist() == [[0, 2], [2, 2]]


def test_outcome_map_refuses_bad_shapes_extents_axes_and_codes(no_typecheck):
    """(0, 0) codes met `max() arg is an empty sequence`, a 2-number extent an IndexError, ax=None an
    AttributeError; a negative code was reported as a missing colour."""
    one = np.array([[0]])
    with pytest.raises(ParameterError, match=r"`codes` must be a non-empty 2-D image .*; got shape \(0, 0\)"):
        draw_outcome_map(_axes_2d(), np.zeros((0, 0), int), (0, 1, 0, 1), LABELS)
    for extent in ((0, 1), (0, 1, 0, np.nan), (0, 0, 0, 1), "0101", None):
        with pytest.raises(ParameterError, match=r"`extent` must be four finite numbers \(x0, x1, y0, y1\)"):
            draw_outcome_map(_axes_2d(), one, extent, LABELS)
    with pytest.raises(ParameterError, match="`ax` must be a matplotlib Axes; got NoneType"):
        draw_outcome_map(None, one, (0, 1, 0, 1), LABELS)
    with pytest.raises(ParameterError, match="`ax` must be 2-D axes; got 3-D axes"):
        draw_outcome_map(_axes_3d(), one, (0, 1, 0, 1), LABELS)
    with pytest.raises(ParameterError, match=r"`codes` must be non-negative Outcome codes; got \[-1\]"):
        draw_outcome_map(_axes_2d(), np.array([[-1, 0]]), (0, 1, 0, 1), {Outcome(0): "a", -1: "neg"})
    with pytest.raises(ParameterError, match=r"`labels` must name every outcome in `codes`; missing \['diverge'\]"):
        draw_outcome_map(_axes_2d(), np.array([[0, int(Outcome.diverge)]]), (0, 1, 0, 1), LABELS)


def test_hatched_refuses_small_grids_and_non_boolean_masks(no_typecheck):
    """A 1 x 1 grid met matplotlib's `Input z must be at least a (2, 2) shaped array`; 0.3 was cut at 0.5."""
    one = np.zeros((1, 1))
    with pytest.raises(ParameterError, match=r"`where` must be a grid of at least 2 x 2 points.*got shape \(1, 1\)"):
        draw_hatched(_axes_2d(), one, one, np.ones((1, 1), bool), "x")
    x, y = np.meshgrid(np.arange(3.0), np.arange(3.0))
    with pytest.raises(ParameterError, match="`where` must be Boolean"):
        draw_hatched(_axes_2d(), x, y, np.full((3, 3), 0.3), "x")
    with pytest.raises(ParameterError, match="`x` must be finite grid coordinates"):
        draw_hatched(_axes_2d(), np.where(x > 1, np.nan, x), y, x > y, "x")
    with pytest.raises(ParameterError, match="`ax` must be 2-D axes"):
        draw_hatched(_axes_3d(), x, y, x > y, "x")
    assert draw_hatched(_axes_2d(), x, y, x > y, "rule").get_label() == "rule"


def test_colors_and_cone_refuse_nan(no_typecheck):
    """A NaN value made every colour transparent, an inf its member's; NaN covariances gave z_max = nan."""
    for values, first in (([0.0, np.nan, 1.0], r"nan at index 1"), ([0.0, np.inf], r"inf at index 1")):
        with pytest.raises(ParameterError, match=rf"`values` must be finite; got 1 NaN/inf value\(s\), first {first}"):
            colors_from(np.array(values))
    colours, _ = colors_from(np.array([0.0, 1.0]))
    assert all(c[3] == 1.0 for c in colours)
    good = np.stack([np.eye(2)] * 3)
    bad = good.copy()
    bad[2] = np.nan
    with pytest.raises(ParameterError, match=r"`trajs\[1\]` must be finite covariances; got NaN/inf entries at 1 of"):
        draw_cone(_axes_3d(), [good, bad], ["k", "k"])
    for z_max in (np.nan, 0.0, -1.0, True):
        with pytest.raises(ParameterError, match="`z_max` must be a positive finite number or None"):
            draw_cone(_axes_3d(), [good], ["k"], z_max=z_max)
    assert draw_cone(_axes_3d(), [good], ["k"]) == pytest.approx(2.1)


def test_axes_of_the_wrong_kind_are_named(no_typecheck):
    """draw_hasse on 3-D axes met `Axes3D.text() missing 1 required positional argument`, draw_cone on 2-D axes
    `Axes.scatter() got multiple values for argument 's'`, draw_mask(ax="x") `'str' object has no attribute`."""
    d = HasseDiagram.from_mask(np.tril(np.ones((3, 3), bool)))
    with pytest.raises(ParameterError, match=r"`ax` must be 2-D axes; got 3-D axes \(projection='3d'\)"):
        draw_hasse(d, ax=_axes_3d())
    with pytest.raises(
        ParameterError, match=r"`ax` must be 3-D axes \(projection='3d'.*got 2-D axes \('rectilinear'\)"
    ):
        draw_cone(_axes_2d(), [np.stack([np.eye(2)] * 3)], ["k"])
    with pytest.raises(ParameterError, match="`ax` must be 2-D axes"):
        draw_disk(_axes_3d(), [np.stack([np.eye(2)] * 3)], ["k"])
    for ax, match in (("x", r"a matplotlib Axes or None \(a new figure\); got str"), (_axes_3d(), "2-D axes")):
        with pytest.raises(ParameterError, match=f"`ax` must be {match}"):
            draw_mask(np.eye(3, dtype=bool), ax=ax)


def test_mask_refuses_a_bad_colour_and_a_string_of_labels(no_typecheck):
    """color="nocolor" failed only at savefig; labels="abc" named the slots a, b, c."""
    with pytest.raises(ParameterError, match="`color` must be a matplotlib colour; got 'nocolor'"):
        draw_mask(np.eye(3, dtype=bool), color="nocolor")
    with pytest.raises(ParameterError, match="`labels` must be a sequence of slot names, one per row, not one string"):
        draw_mask(np.eye(3, dtype=bool), labels="abc")
    ax = draw_mask(np.eye(3, dtype=bool), labels=list("abc"), color="crimson")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "c"]


def test_figsize_names_its_argument(no_typecheck):
    """figsize("6") met a bare TypeError where the docstring promised ValueError."""
    for args, name in ((("6",), "width"), ((True,), "width"), ((8.0,), "width"), ((6.5, np.nan), "aspect")):
        with pytest.raises(ParameterError, match=f"`{name}` must be a"):
            figsize(*args)
    with pytest.raises(ValueError, match="`aspect` must be a positive finite number"):
        figsize(6.5, np.inf)
    assert figsize(np.float64(6.5), np.int64(1)) == (6.5, 6.5)


def _cut_off(fig) -> tuple[float, float, float, float]:
    """How far (inches: left, bottom, right, top) what `fig` draws reaches beyond its edges, where a plain savefig
    cuts it off: matplotlib's tight bounding box of the drawn artists (texts, tick labels within the limits) against
    the figure. All zero when nothing is cut."""
    fig.canvas.draw()
    tight = fig.get_tightbbox(fig.canvas.get_renderer())  # inches
    w, h = fig.get_size_inches()
    return (max(0.0, -tight.x0), max(0.0, -tight.y0), max(0.0, tight.x1 - w), max(0.0, tight.y1 - h))


@pytest.mark.parametrize("paper", [False, True])
def test_mask_on_its_own_figure_keeps_every_text_inside(paper):
    """The review's cases cut the title, the key label and the slot names off on a plain savefig (a 4 x 40 mask's
    figure was 0.4 in taller than its image); the figure uses constrained layout and is sized to its texts."""
    with matplotlib.rc_context():  # paper_style changes the global rcParams: restored on leaving
        if paper:
            paper_style()
        cases = [
            (np.asarray(sliding_window(12, left=2)), [f"w{i}" for i in range(12)], "window"),
            (np.tril(np.ones((4, 40), bool)), None, "rect 4 x 40"),
            (np.asarray(sliding_window(40, left=3)), [f"longname_{i}" for i in range(40)], "40 long labels"),
            (np.ones((1, 1), bool), None, "one slot,\ntwo title lines"),
        ]
        for mask, labels, title in cases:
            ax = draw_mask(mask, labels=labels, title=title)
            fig = ax.figure
            assert fig.get_layout_engine() is not None and fig.get_size_inches()[0] <= 6.5
            assert max(_cut_off(fig)) < 0.01, (title, _cut_off(fig))
            plt.close(fig)


def test_draw_hasse_warns_when_its_labels_are_too_small_to_print():
    """A review: 200 classes gave a 30 x 5.1 in figure (5.1-pt labels, 1.2 pt at page width) and 400 classes in
    6.5 x 4 in axes 1-pt labels with 248 overlapping pairs, silently. An antichain of 80 classes does both."""
    d = HasseDiagram.from_mask(np.eye(80, dtype=bool))
    with pytest.warns(RuntimeWarning, match=r"the figure is 30.0 x 1.5 in \(wider than 7 in.*min_fontsize="):
        draw_hasse(d)
    with pytest.warns(
        RuntimeWarning, match=r"fit the axes only at 1.16 pt \(< 8 pt.*about 34.9 x 0.4 in.*min_fontsize="
    ):
        draw_hasse(d, ax=plt.subplots(figsize=(6.5, 4.0))[1])
    big = HasseDiagram.from_mask(np.eye(400, dtype=bool))
    with pytest.warns(RuntimeWarning, match=r"only at 0.20 pt.*Below 1 pt, matplotlib's smallest font, neighbouring"):
        draw_hasse(big, ax=plt.subplots(figsize=(6.5, 4.0))[1])
    with warnings.catch_warnings():  # min_fontsize chosen: no warning; a small diagram: none either
        warnings.simplefilter("error")
        draw_hasse(d, ax=plt.subplots(figsize=(6.5, 4.0))[1], min_fontsize=1.0)
        draw_hasse(HasseDiagram.from_mask(np.tril(np.ones((3, 3), bool))))
        draw_hasse(HasseDiagram.from_mask(np.eye(6, dtype=bool)), ax=plt.subplots(figsize=(3.3, 1.5))[1])
