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
