"""draw_outcome_map with codes beyond Outcome (a refinement of an outcome gets its own colour)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from hassejax.dynamics.diagnostics import Outcome
from hassejax.errors import ParameterError
from hassejax.plot.phase_map import OUTCOME_COLORS, draw_outcome_map


def test_extra_codes_get_their_own_colour_and_count():
    fig, ax = plt.subplots()
    codes = np.array([[Outcome.blow_up, 11], [11, Outcome.contracts]])
    labels = {Outcome.blow_up: "blow-up", Outcome.contracts: "contracts", 11: "late blow-up"}
    colors = {**OUTCOME_COLORS, 11: "#123456"}
    handles = draw_outcome_map(ax, codes, (0, 1, 0, 1), labels, colors=colors)
    assert [h.get_label() for h in handles] == ["blow-up: 1", "contracts: 1", "late blow-up: 2"]
    image = ax.get_images()[0]
    rgba = image.cmap(image.norm(codes))
    np.testing.assert_allclose(rgba[0, 1], matplotlib.colors.to_rgba("#123456"))
    np.testing.assert_allclose(rgba[0, 0], matplotlib.colors.to_rgba(OUTCOME_COLORS[Outcome.blow_up]))
    with pytest.raises(ParameterError, match="colors"):
        draw_outcome_map(ax, codes, (0, 1, 0, 1), labels)
    plt.close(fig)


# Colour-vision deficiency simulation at full severity, applied to linear RGB (Machado, Oliveira & Fernandes,
# "A physiologically-based model for simulation of color vision deficiency", IEEE TVCG 15(6), 2009, Table 1).
_CVD = {
    "normal vision": np.eye(3),
    "protanopia": np.array(
        [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]]
    ),
    "deuteranopia": np.array(
        [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]]
    ),
    "tritanopia": np.array(
        [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]]
    ),
}


def _lab(color, simulate):
    """CIELAB (D65) of an sRGB colour as seen under `simulate` (a 3 × 3 matrix on linear RGB)."""
    c = np.asarray(matplotlib.colors.to_rgb(color))
    linear = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
    x = xyz @ np.clip(simulate @ linear, 0.0, 1.0) / np.array([0.95047, 1.0, 1.08883])
    f = np.where(x > (6 / 29) ** 3, np.cbrt(x), x / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


@pytest.mark.parametrize("vision", list(_CVD))
def test_outcome_colours_stay_apart_for_colour_blind_readers(vision):
    """Every two outcome colours differ by ΔE*ab ≥ 10 as seen with normal vision and with each dichromacy
    simulated (the tab10 palette used until 2026-12-05 put blow-up and contraction 7.3 apart for a
    deuteranope, red against green, and low rank and stalled 1.3 apart for a protanope)."""
    lab = {o: _lab(c, _CVD[vision]) for o, c in OUTCOME_COLORS.items()}
    close = [
        (a.name, b.name, round(float(np.linalg.norm(lab[a] - lab[b])), 1))
        for i, a in enumerate(lab)
        for b in list(lab)[i + 1 :]
        if np.linalg.norm(lab[a] - lab[b]) < 10.0
    ]
    assert not close, f"outcome colours too close for {vision}: {close}"


@pytest.fixture(scope="module")
def phase_maps_module():
    """experiments/phase_maps.py, imported as reproduce.py does (it turns float64 on, as the tests run anyway)."""
    import sys
    from pathlib import Path

    import jax

    experiments = str(Path(__file__).resolve().parents[2] / "experiments")
    before = jax.config.jax_enable_x64
    sys.path.insert(0, experiments)
    try:
        import phase_maps
    finally:
        sys.path.remove(experiments)
        jax.config.update("jax_enable_x64", before)
    return phase_maps


@pytest.mark.parametrize("vision", list(_CVD))
def test_phase_map_a_colours_stay_apart_for_colour_blind_readers(vision, phase_maps_module):
    """As above for the colours phase map (a) draws together: the outcome colours of its labels and its two codes
    beyond :class:`Outcome` (late blow-up, slow contraction: ``COLORS_A``), which the test above does not see (a
    referee; the light teal of slow contraction was 5.8 from the v = 0 grey for a deuteranope until 290316d)."""
    pm = phase_maps_module
    drawn = {k: pm.COLORS_A[k] for k in pm.LABELS_A}  # the codes map (a) has labels (and legend entries) for
    assert {pm.LATE_BLOW_UP, pm.SLOW_CONTRACTION} <= set(drawn)
    lab = {k: _lab(c, _CVD[vision]) for k, c in drawn.items()}
    close = [
        (pm.LABELS_A[a], pm.LABELS_A[b], round(float(np.linalg.norm(lab[a] - lab[b])), 1))
        for i, a in enumerate(lab)
        for b in list(lab)[i + 1 :]
        if np.linalg.norm(lab[a] - lab[b]) < 10.0
    ]
    assert not close, f"map (a) colours too close for {vision}: {close}"
